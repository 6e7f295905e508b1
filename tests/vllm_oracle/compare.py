"""kvunits' reading of a model directory against vLLM 0.33's own view of it (`model_view.py`).

A directory is **exact** when kvunits reads it and every fact vLLM's ``ModelConfig`` states
agrees with kvunits' layers: the layers with attention, the KV heads and head size, which
layers slide and by how much, the default ``max_model_len``, and the KV cache dtype.
Family rules where a vLLM model file departs from ``ModelConfig``'s generic view are applied
to the view first, each citing the file (`_VIEW_RULES`). A directory kvunits refuses is
**refused** (with its reason); one vLLM refuses is **vllm-refuses** (kvunits must refuse it
too); one vLLM's view cannot be built for offline (custom code) is **unverified**.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kvunits.contracts import (
    ChunkedLocalLayer,
    Elements,
    FullAttentionLayer,
    IndexerLayer,
    KVSharedLayer,
    KvUnitsError,
    MLALayer,
    SlidingWindowLayer,
    Tokens,
)
from kvunits.contracts.config import load_config
from kvunits.contracts.config._hf_registry import (
    MULTIMODAL,
    TEXT_GENERATION,
    TRANSFORMERS_BACKEND,
)
from kvunits.contracts.deploy import KVHeads

from .compare_dsv4 import compare_deepseek_v4, compare_deepseek_v41, deepseek_v4_view

#: The architectures whose KV cache is in scope: vLLM's generative ones.
_GENERATIVE: Final = TEXT_GENERATION | MULTIMODAL | TRANSFORMERS_BACKEND


def kvunits_view(path: str) -> dict[str, Any]:
    """What kvunits reads of a directory, in the view's terms (or its refusal)."""
    if (dsv4 := deepseek_v4_view(path)) is not None:  # vLLM's numbers only (compare_dsv4)
        return dsv4
    try:
        config = load_config(path)
    except KvUnitsError as err:
        return {"error": str(err).splitlines()[0][:300]}
    attention: list[tuple[str, int | None, int | None, int | None, str | None]] = []
    indices: list[int] = []
    indexers: dict[int, int] = {}
    for name, layer in config.model.layers.items():
        if not name.startswith("text."):
            continue
        if isinstance(layer, IndexerLayer):
            indexers[int(name.split(".")[1])] = layer.head_size.numerical_value_in(Elements)
            continue
        if isinstance(layer, (FullAttentionLayer, SlidingWindowLayer, ChunkedLocalLayer)):
            window = None
            if isinstance(layer, SlidingWindowLayer):
                window = layer.sliding_window._n  # a decoder layer: tokens
            heads = layer.kv_heads.numerical_value_in(KVHeads)
            size = layer.head_size.numerical_value_in(Elements)
            attention.append(("attn", heads, size, window, str(layer.dtype)))
        elif isinstance(layer, MLALayer):
            head = (layer.kv_lora_rank + layer.qk_rope_head_dim).numerical_value_in(Elements)
            attention.append(("mla", 1, head, None, str(layer.dtype)))
        elif isinstance(layer, KVSharedLayer):
            attention.append(("shared", None, None, None, None))
        else:
            continue
        indices.append(int(name.split(".")[1]))
    return {
        "attention": attention,
        "indexers": [indexers.get(i, 0) for i in range(len(attention))] if indexers else None,
        "max_model_len": config.engine.max_model_len.numerical_value_in(Tokens),
        "attention_indices": indices,
    }


def compare(view: Mapping[str, Any], mine: Mapping[str, Any]) -> tuple[str, list[str]]:
    """The outcome (exact, differs, refused, vllm-refuses, unverified) and the differences."""
    if "error" in view:
        if "error" in mine:
            return "vllm-refuses", []
        # The view cannot be built here: custom code (vLLM needs --trust-remote-code), or a
        # package the oracle environment lacks (a processor's torchvision): not vLLM's answer.
        unverifiable = (
            "trust_remote_code",
            "custom code",
            "does not recognize this architecture",
            "failed to be inspected",
            "ModuleNotFoundError",
            "ImportError",
            # A processor file the fixture directory does not ship (only config.json is kept).
            "Can't load feature extractor",
        )
        if any(word in view["error"] for word in unverifiable):
            return "unverified", [view["error"][:120]]
        return "differs", [f"vLLM refuses ({view['error'][:160]}), kvunits reads"]
    if view.get("architecture") not in _GENERATIVE:
        return "not-generative", [f"{view.get('architecture')}: a pooling model, no KV cache"]
    if "error" in mine:
        return "refused", [mine["error"][:200]]
    if "deepseek_v4" in mine:
        dsv4 = compare_deepseek_v4(view, mine)
        return ("exact" if not dsv4 else "differs"), dsv4
    if "deepseek_v41" in mine:
        dsv41 = compare_deepseek_v41(view, mine)
        return ("exact" if not dsv41 else "differs"), dsv41
    diffs: list[str] = []
    layers = mine["attention"]
    if "partial_error" in view:
        return "unverified", [view["partial_error"][:120]]
    if view["attention_free"]:
        # Mamba and the like: no attention layer; their states' shapes are vLLM's own
        # get_mamba_state_shape_from_config in the planning oracle (test_like_vllm.py).
        if layers:
            return "differs", [f"vLLM: attention-free; kvunits: {len(layers)} attention layers"]
        return "exact", []
    expected_layers = view["attention_layers"]
    if view["architecture"] in _TWO_ATTENTIONS_PER_LAYER and expected_layers is not None:
        expected_layers *= 2
    if view["hybrid"]:
        expected_layers = None  # the view counts mixer layers as attention for some models
    where = view.get("attention_layer_indices")
    if where is not None and mine["attention_indices"] != where:
        diffs.append(f"attention on layers {mine['attention_indices']} != vLLM {where}")
    if expected_layers is not None and len(layers) != expected_layers:
        diffs.append(f"attention layers {len(layers)} != vLLM {expected_layers}")
    own = [layer for layer in layers if layer[0] != "shared"]
    heads = {layer[1] for layer in own}
    sizes = {layer[2] for layer in own}
    if view["mla"]:
        if not own or any(layer[0] != "mla" for layer in own):
            diffs.append("vLLM: MLA; kvunits: not MLA")
    elif view["kv_heads"] not in heads:
        diffs.append(f"KV heads {sorted(heads)} lack vLLM's {view['kv_heads']}")
    head_size = view["head_size"]
    if view["architecture"] in _QK_HEAD_SIZE:
        head_size = view.get("qk_head_dim")
    if head_size not in sizes:
        diffs.append(f"head sizes {sorted(sizes)} lack vLLM's {head_size}")
    windows = [layer[3] for layer in layers]
    expected = _expected_windows(view, len(layers))
    shared = view.get("kv_shared")
    if shared is not None:
        # vLLM's KV-shared layers (model_view._kv_shared) keep no cache: kvunits must read
        # exactly those as shared; their window is their target's, not compared.
        mine_shared = [i for i, layer in enumerate(layers) if layer[0] == "shared"]
        if mine_shared != shared:
            diffs.append(f"KV-shared layers {mine_shared} != vLLM {shared}")
        if expected is not None:
            expected = [None if i in shared else w for i, w in enumerate(expected)]
    if expected is not None and windows != expected:
        got = sorted({w for w in windows if w}), sum(1 for w in windows if w)
        want = sorted({w for w in expected if w}), sum(1 for w in expected if w)
        diffs.append(f"windows {got} != vLLM {want} (window sizes, sliding layers)")
    if mine["indexers"] != view.get("indexers"):
        diffs.append(f"indexer keys per layer {mine['indexers']} != vLLM {view.get('indexers')}")
    if mine["max_model_len"] != view["max_model_len"]:
        diffs.append(f"max_model_len {mine['max_model_len']} != vLLM {view['max_model_len']}")
    dtype = view["kv_cache_dtype"] if view["kv_cache_dtype"] != "auto" else view["dtype"]
    dtype = {"fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3"}.get(dtype, dtype)
    dtypes = {layer[4] for layer in own}
    if dtypes != {dtype}:
        diffs.append(f"cache dtype {sorted(dtypes)} != vLLM {dtype}")
    return ("exact" if not diffs else "differs"), diffs


#: Where a vLLM model file departs from ModelConfig's generic view of the window.
#: commandr.py and cohere2_moe.py: a sliding layer's window is sliding_window + 1 (also under
#: cohere2_vision.py, which builds its text_config.architectures, Cohere2ForCausalLM).
_WINDOW_PLUS_ONE: Final = frozenset(
    {"Cohere2ForCausalLM", "Cohere2MoeForCausalLM", "Cohere2VisionForConditionalGeneration"}
)
#: mimo_v2.py: the window is sliding_window_size (transformers' sliding_window is one more),
#: on the layers hybrid_layer_pattern marks 1 (its layer_types derives them the same way).
_WINDOW_SIZE_FIELD: Final = frozenset({"MiMoV2FlashForCausalLM", "MiMoV2ForCausalLM"})


#: rnj1.py Rnj1Attention: a chunked_attention layer gets sliding_window as its
#: per_layer_sliding_window (a SlidingWindowSpec of that size).
_CHUNKED_AS_WINDOW: Final = frozenset({"Rnj1ForCausalLM"})
#: longcat_flash.py FlashDecoderLayer: two DeepseekV2MLAAttention per decoder layer
#: (``self_attn.0`` and ``self_attn.1``), each its own MLA cache; the view counts layers.
_TWO_ATTENTIONS_PER_LAYER: Final = frozenset(
    {"LongcatFlashForCausalLM", "LongcatFlashNgramForCausalLM"}
)
#: minicpm3.py MiniCPM3Attention: MLA-shaped fields, but a plain ``Attention`` of head size
#: ``qk_head_dim = qk_nope_head_dim + qk_rope_head_dim`` (values padded to it), where
#: ModelConfig.get_head_size's generic view says qk_rope_head_dim.
_QK_HEAD_SIZE: Final = frozenset({"MiniCPM3ForCausalLM"})
#: exaone_moe.py ExaoneMoeAttention: sliding_windows[i] when the file lists them.
_PER_LAYER_WINDOWS: Final = frozenset({"ExaoneMoEForCausalLM", "ExaoneMoeForCausalLM"})


def _expected_windows(view: Mapping[str, Any], n: int) -> list[int | None] | None:
    """Each layer's window as vLLM's engine-wide rule gives it (``layer_types`` per layer;
    without them every layer takes ``sliding_window``); None when the view cannot say."""
    window = view["sliding_window"]
    if window is not None and view["architecture"] in _WINDOW_PLUS_ONE:
        window += 1
    if view["architecture"] in _WINDOW_SIZE_FIELD:
        window = view.get("sliding_window_size")
    types = view["layer_types"]
    if types is not None and len(types) != n:
        return None
    if window is None:
        return [None] * n
    if types is None:
        return [window] * n
    per_layer = view.get("sliding_windows")
    if view["architecture"] in _PER_LAYER_WINDOWS and isinstance(per_layer, list):
        # exaone_moe.py: a sliding layer's window is its sliding_windows entry.
        pairs = zip(types, per_layer, strict=False)
        return [w or None if t == "sliding_attention" else None for t, w in pairs]
    sliding = {"sliding_attention"}
    if view["architecture"] in _CHUNKED_AS_WINDOW:
        sliding.add("chunked_attention")
        if not all(t == "sliding_attention" for t in types):
            sliding.discard("sliding_attention")
    return [window if t in sliding else None for t in types]
