"""vLLM 0.33's own view of a model directory: what its ``ModelConfig`` reads of the config.

Run with ``.venv-vllm``'s interpreter (never kvunits' own), offline: reads directory paths
as JSON on stdin and writes, per directory, what vLLM's ``ModelConfig`` derives
(vllm/config/model.py and transformers_utils/model_arch_config_convertor.py): the
architecture it resolves, whether it is attention-free, hybrid or MLA, the layers with
attention, the KV heads, the head size, the sliding window and ``layer_types``, the default
``max_model_len``, the dtype and the KV cache dtype ``auto`` resolves to. Or the error with
which vLLM refuses the directory. ``tests/vllm_oracle/test_families.py`` compares kvunits'
reading of the same directories against it.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def view(path: str) -> dict[str, Any]:
    from vllm.config import ModelConfig, ParallelConfig
    from vllm.utils.torch_utils import resolve_kv_cache_dtype_string

    try:
        model = ModelConfig(model=path, skip_tokenizer_init=True)
    except Exception as exc:  # vLLM's refusal, whatever it raises
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    parallel = ParallelConfig()
    text = model.hf_text_config
    out: dict[str, Any] = {"architecture": model.architecture}
    try:
        out.update(
            attention_free=bool(model.is_attention_free),
            hybrid=bool(model.is_hybrid),
            mla=bool(model.use_mla),
            layers=model.get_num_layers(parallel),
            attention_layers=_attention_layers(model, parallel, text),
            attention_layer_indices=_kda_attention_indices(text),
            kv_heads=model.get_total_num_kv_heads(),
            attention_heads=getattr(text, "num_attention_heads", None),
            head_size=model.get_head_size(),
            sliding_window=model.get_sliding_window(),
            layer_types=list(getattr(text, "layer_types", None) or []) or None,
            max_model_len=model.max_model_len,
            dtype=str(model.dtype).removeprefix("torch."),
            kv_cache_dtype=resolve_kv_cache_dtype_string("auto", model),
            indexers=_indexers(text),
            sliding_window_size=getattr(text, "sliding_window_size", None),
            sliding_windows=getattr(text, "sliding_windows", None),
            qk_head_dim=_qk_head_dim(text),
            kv_shared=_kv_shared(text),
        )
    except Exception as exc:
        out["partial_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return out


def _qk_head_dim(text: Any) -> int | None:
    """``qk_nope_head_dim + qk_rope_head_dim`` where the config gives both (MLA-shaped fields),
    else None."""
    nope, rope = getattr(text, "qk_nope_head_dim", None), getattr(text, "qk_rope_head_dim", None)
    return nope + rope if isinstance(nope, int) and isinstance(rope, int) else None


def _attention_layers(model: Any, parallel: Any, text: Any) -> int:
    """``get_num_layers_by_block_type(parallel, "attention")``; for Kimi Linear, whose config
    has no ``layers_block_type`` (vLLM's ModelConfig raises there), the layers its
    ``KimiDecoderLayer`` builds MLA on (`_kda_attention_indices`)."""
    indices = _kda_attention_indices(text)
    if indices is not None:
        return len(indices)
    return int(model.get_num_layers_by_block_type(parallel, "attention"))


def _kda_attention_indices(text: Any) -> list[int] | None:
    """The MLA layers of a Kimi Linear decoder, by vLLM's own ``KimiLinearConfig.is_kda_layer``
    (vllm/transformers_utils/configs/kimi_linear.py; ``KimiDecoderLayer`` builds MLA where it
    is false); None for other models."""
    if getattr(text, "model_type", None) != "kimi_linear":
        return None
    return [i for i in range(text.num_hidden_layers) if not text.is_kda_layer(i)]


def _kv_shared(text: Any) -> list[int] | None:
    """The layers vLLM gives a ``kv_sharing_target_layer_name`` (no cache spec of their own),
    restated from the model files' constructors, which cannot run without a GPU:
    gemma3n.py ``Gemma3nAttention`` (from ``first = n - num_kv_shared_layers`` on, the target
    is ``first - 2`` for a sliding layer, ``first - 1`` for a full one, none when negative) and
    gemma4.py ``Gemma4Attention`` (the last earlier layer of the same type). The layer types
    are the transformers config's, as vLLM reads them. None: no KV sharing."""
    model_type = getattr(text, "model_type", None)
    shared = getattr(text, "num_kv_shared_layers", 0) or 0
    types = list(getattr(text, "layer_types", None) or [])
    if model_type not in ("gemma3n_text", "gemma4_text") or not shared or not types:
        return None
    first = text.num_hidden_layers - shared
    out = []
    for i in range(max(first, 0), text.num_hidden_layers):
        if model_type == "gemma3n_text":
            target = first - (2 if types[i] == "sliding_attention" else 1)
        else:
            earlier = types[:first]
            target = len(earlier) - 1 - earlier[::-1].index(types[i]) if types[i] in earlier else -1
        if target >= 0:
            out.append(i)
    return out


def _indexers(text: Any) -> list[int] | None:
    """The layers that build DeepSeek sparse attention's indexer, and its key's elements, as
    vLLM's DeepseekV32Attention decides from the transformers config it holds
    (vllm/models/deepseek_v32/attention.py: ``hasattr(config, "index_topk")``, then
    ``index_topk_pattern``, else ``index_topk_freq`` / ``index_skip_topk_offset``): a list
    of per-layer key sizes (0: no indexer), or None without sparse attention."""
    if not hasattr(text, "index_topk"):
        return None
    if getattr(text, "model_type", None) == "hy_v4":
        return _hy_v4_indexers(text)
    freq = getattr(text, "index_topk_freq", 1)
    pattern = getattr(text, "index_topk_pattern", None)
    offset = getattr(text, "index_skip_topk_offset", 2)
    sizes = []
    for layer_id in range(text.num_hidden_layers):
        if pattern is None:
            skip = max(layer_id - offset + 1, 0) % freq != 0
        else:
            skip = 0 <= layer_id < len(pattern) and pattern[layer_id] == "S"
        sizes.append(0 if skip else text.index_head_dim)
    return sizes


def _hy_v4_indexers(text: Any) -> list[int] | None:
    """Hunyuan V4's indexers, by vLLM's own rule (vllm/models/hy_v4/nvidia/attention.py,
    ``HYV4MLAAttention.__init__``): a layer whose ``layer_types`` entry is sparse builds one
    unless ``compute_skip_topk_layers`` names it."""
    from vllm.models.hy_v4.nvidia.attention import _SPARSE_LAYER_TYPES, compute_skip_topk_layers

    types = getattr(text, "layer_types", None) or []
    skip = compute_skip_topk_layers(text)
    sizes = [
        text.index_head_dim
        if i < len(types) and types[i] in _SPARSE_LAYER_TYPES and i not in skip
        else 0
        for i in range(text.num_hidden_layers)
    ]
    return sizes if any(sizes) else None


def main() -> None:
    import logging

    logging.disable(logging.WARNING)
    paths = json.load(sys.stdin)
    json.dump({path: view(path) for path in paths}, sys.stdout, indent=1, default=str)
    sys.stdout.flush()
    # vLLM's registry inspects model classes in worker processes that outlive the work:
    # leave without waiting for them.
    os._exit(0)


if __name__ == "__main__":
    main()
