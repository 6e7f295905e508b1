"""vLLM 0.33's own planning of a DeepSeek V4.1 model on Hopper: the oracle of
`plan_deepseek_v41_like_vllm`.

Run with the interpreter of ``.venv-vllm`` (benchmarks/vllm-nodeps.txt), never kvunits' own.
vLLM cannot build DeepSeek V4.1's layers on the CPU (its attention classes need CUDA), so this
script reads the config with vLLM's own ``DeepseekV41Config`` (``text_config`` flattened),
restates the topology ``DeepseekV4Attention.__init__`` derives (``vllm/models/deepseek_v41/
attention.py``: ``is_kv_source``, ``is_index_source``, the source at or below a compressed
layer, and its errors) and calls the ``get_kv_cache_spec`` of vLLM's own V4.1 cache-layer
classes (``DeepseekV4Attention``, ``DeepseekV4IndexerCache``, ``DeepseekV4SWACache``,
``compressor.py``'s ``CompressorStateCache``) on stand-ins carrying what their ``__init__``
sets on Hopper (FlashMLA: the 584-byte record, 576-byte alignment, ``swa block_size=32``,
bounded replay on, rings of 8 rows), registered in ``__init__``'s order. The block size is 64
(``DeepseekV4FlashMLABackend.get_supported_kernel_block_sizes`` on capability 9) and the
layout ``BLHNC``. Then vLLM's ``get_global_kv_cache_groups``, ``get_kv_cache_configs``,
``generate_scheduler_kv_cache_config`` and ``get_kv_cache_capacity`` plan them.

Input and output as ``oracle_dsv4.py``.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace
from typing import Any

from oracle import _bind_properties  # type: ignore[import-not-found]
from oracle_dsv4 import plan_workers  # type: ignore[import-not-found]


def _layer_specs(hf: Any, cache_dtype: str, block_size: int) -> list[dict[str, Any]]:
    """Each decoder layer's specs, in registration order, as vLLM's classes make them."""
    import torch
    from vllm.models.deepseek_v41.attention import (
        DeepseekV4Attention,
        DeepseekV4IndexerCache,
        _indexer_k_cache_head_dim,
        _resolve_dsv4_kv_cache_dtype,
    )
    from vllm.models.deepseek_v41.compressor import CompressorStateCache
    from vllm.v1.attention.backends.mla.sparse_swa import DeepseekV4SWACache

    cache_config = SimpleNamespace(cache_dtype=cache_dtype, block_size=block_size)
    kv_dtype, kv_torch = _resolve_dsv4_kv_cache_dtype(True, cache_dtype, cache_config)
    config = SimpleNamespace(cache_config=cache_config)
    ratios = list(getattr(hf, "compress_ratios", None) or [])
    kv_sources = tuple(getattr(hf, "kv_source_layer_ids", None) or ())
    index_sources = tuple(getattr(hf, "index_source_layer_ids", None) or ())
    assert hf.head_dim == 512 and hf.qk_rope_head_dim == 64  # DeepseekCompressor.__init__
    layers = []
    registered: set[str] = set()
    for i in range(hf.num_hidden_layers):
        # DeepseekV4Attention.__init__'s v4.1 topology, restated.
        ratio = int(ratios[i]) if i < len(ratios) else 0
        if ratio not in (0, 1, 2):
            raise ValueError(f"layer {i} has compress_ratio={ratio}")
        is_kv, is_index = i in kv_sources, i in index_sources
        source = None
        if ratio > 0:
            if not kv_sources or not index_sources:
                raise ValueError("requires kv_source_layer_ids / index_source_layer_ids")
            source = max(s for s in kv_sources if s <= i)
            max(s for s in index_sources if s <= i)
        prefix = f"model.layers.{i}.attn"
        specs: dict[str, Any] = {}
        attn = SimpleNamespace(
            is_kv_source=is_kv,
            compress_ratio=ratio,
            kv_cache_dtype=kv_dtype,
            kv_cache_torch_dtype=kv_torch,
            head_dim=hf.head_dim,
            kv_page_alignment=576,
            compressed_bytes_per_token=584,
        )
        spec = DeepseekV4Attention.get_kv_cache_spec(attn, config)
        if spec is not None:
            specs[prefix] = spec
        if is_index:
            if is_kv:
                if ratio == 0:
                    raise ValueError("an indexer K cache of compress_ratio 0")
                k_cache = SimpleNamespace(
                    head_dim=_indexer_k_cache_head_dim(hf.index_head_dim, False),
                    dtype=torch.uint8,
                    cache_config=cache_config,
                    compress_ratio=ratio,
                    sparse_logits=False,
                    rocm_mxfp4=False,
                )
                name = f"{prefix}.indexer.k_cache"
                specs[name] = DeepseekV4IndexerCache.get_kv_cache_spec(k_cache, config)
                registered.add(name)
            else:
                if source is None:
                    raise AssertionError("an index source without a kv source")
                if f"model.layers.{source}.attn.indexer.k_cache" not in registered:
                    raise NotImplementedError("Indexer K cache source not found")
        swa = SimpleNamespace(
            bounded_replay=True,
            block_size=32,
            head_dim=hf.head_dim,
            dtype=kv_torch,
            window_size=hf.sliding_window,
            cache_config=cache_config,
            packed_bytes_per_token=584,
            packed_page_alignment=576,
            packed_block_stride_alignment=None,
        )
        specs[f"{prefix}.swa_cache"] = DeepseekV4SWACache.get_kv_cache_spec(swa, config)
        if is_kv:
            if ratio not in (1, 2):
                raise NotImplementedError("compressor of compress_ratio 0")
            if ratio > 1:
                state = SimpleNamespace(
                    state_dim=2 * hf.head_dim, dtype=torch.float32, block_size=8
                )
                specs[f"{prefix}.compressor.state_cache"] = CompressorStateCache.get_kv_cache_spec(
                    state, config
                )
        layers.append(specs)
    return layers


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    from vllm.distributed.utils import get_pp_indices
    from vllm.transformers_utils.configs.deepseek_v41 import DeepseekV41Config

    with open(f"{case['config']}/config.json") as file:
        hf = DeepseekV41Config(**json.load(file))
    block_size = 64  # DeepseekV4FlashMLABackend / DeepseekV41IndexerBackend on Hopper
    try:
        layers = _layer_specs(hf, case.get("cache_dtype", "auto"), block_size)
    except (ValueError, NotImplementedError, AssertionError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    pp = case.get("pp", 1)
    workers = []
    ratios = list(getattr(hf, "compress_ratios", None) or [])
    kv_sources = tuple(getattr(hf, "kv_source_layer_ids", None) or ())
    for rank in range(pp):
        start, end = get_pp_indices(hf.num_hidden_layers, rank, pp)
        # A compressed layer finds its source in this rank's static_forward_context or
        # raises ('PP splits inside a v4.1 kv-sharing group are not supported').
        for i in range(start, end):
            if i < len(ratios) and ratios[i] > 0 and max(s for s in kv_sources if s <= i) < start:
                return {
                    "error": "NotImplementedError: PP splits inside a v4.1 kv-sharing group "
                    "are not supported"
                }
        worker: dict[str, Any] = {}
        for specs in layers[start:end]:
            worker.update(specs)
        workers.append(worker)
    planned: dict[str, Any] = plan_workers(case, workers, block_size)
    return planned


def main() -> None:
    import logging

    logging.disable(logging.WARNING)
    _bind_properties()
    cases = json.load(sys.stdin)
    json.dump([run_case(case) for case in cases], sys.stdout)


if __name__ == "__main__":
    main()
