"""vLLM 0.33's own planning of a DeepSeek V4 checkpoint: the oracle of `plan_deepseek_v4`.

Run with the interpreter of ``.venv-vllm`` (benchmarks/vllm-nodeps.txt), never kvunits' own.
vLLM cannot build DeepSeek V4's layers on the CPU (its attention classes need CUDA), so this
script builds the config as vLLM does (transformers' ``DeepseekV4Config``: ``layer_types``
from the legacy ``compress_ratios``, ``compress_rates``) and calls the ``get_kv_cache_spec``
of vLLM's own cache-layer classes on stand-ins carrying the attributes their ``__init__``
sets (``vllm/models/deepseek_v4/attention.py``: ``DeepseekV4Attention.__init__``,
``DeepseekV4Indexer.__init__``; ``compressor.py``: ``DeepseekCompressor.__init__``,
``CompressorStateCache.__init__``; ``vllm/v1/attention/backends/mla/sparse_swa.py``:
``DeepseekV4SWACache``), registered in the order ``__init__`` registers them. The attention
class is FlashMLA's (``_select_dsv4_attn_cls`` on Hopper and SM100: the ``fp8_ds_mla``
layout), the block size 256 (``DeepseekV4SparseMLABackend.get_supported_kernel_block_sizes``)
and the layout ``BLHNC`` (``DeepseekV4IndexerBackend.supported_kv_cache_layouts``). Then
vLLM's ``get_global_kv_cache_groups``, ``get_kv_cache_configs``,
``generate_scheduler_kv_cache_config`` and ``get_kv_cache_capacity`` plan them.

Input (stdin): ``[{"config": DIR, "pp": int, "max_model_len": int, "batched": int,
"async": bool, "memory": int, "auto_fit": bool, "override": int | null,
"cache_dtype": str}]``. Output: per case ``{"num_blocks", "max_concurrency",
"kv_cache_size", "max_model_len", "groups": [[kind, block_size, [page...], n_layers]]}`` or
``{"error": str}``.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace
from typing import Any

# The same VllmConfig stand-in as oracle.py, beside this script (run as a script, its
# directory is on sys.path; mypy reads the file as tests.vllm_oracle.oracle_dsv4).
from oracle import _bind_properties, _Config  # type: ignore[import-not-found]


def _layer_specs(hf: Any, cache_dtype: str, block_size: int) -> list[dict[str, Any]]:
    """Each decoder layer's specs, in registration order, as vLLM's classes make them."""
    import torch
    from vllm.models.deepseek_v4.attention import (
        DeepseekV4Attention,
        DeepseekV4IndexerCache,
        _resolve_dsv4_kv_cache_dtype,
    )
    from vllm.models.deepseek_v4.compressor import CompressorStateCache
    from vllm.v1.attention.backends.mla.sparse_swa import DeepseekV4SWACache

    cache_config = SimpleNamespace(cache_dtype=cache_dtype, block_size=block_size)
    # FlashMLA's attention class: use_fp8_ds_mla_layout = True (attention.py).
    kv_dtype, kv_torch = _resolve_dsv4_kv_cache_dtype(True, cache_dtype, cache_config)
    config = SimpleNamespace(cache_config=cache_config)
    layers = []
    for i in range(hf.num_hidden_layers):
        ratio = max(1, hf.compress_rates.get(hf.layer_types[i], 0))
        prefix = f"model.layers.{i}.attn"
        specs: dict[str, Any] = {}

        def compressor(
            name: str, head_dim: int, ratio: int = ratio, specs: dict[str, Any] = specs
        ) -> None:
            coff = 1 + (ratio == 4)
            state = SimpleNamespace(
                state_dim=2 * coff * head_dim,
                dtype=torch.float32,
                sliding_window=coff * ratio,
                block_size=4 if ratio == 4 else 8,
            )
            specs[name] = CompressorStateCache.get_kv_cache_spec(state, config)

        if ratio == 4:  # DeepseekV4Indexer: its k_cache, then its compressor's state
            index_head = hf.index_head_dim
            k_cache = SimpleNamespace(
                head_dim=index_head + index_head // 128 * 4,
                dtype=torch.uint8,
                cache_config=cache_config,
                compress_ratio=ratio,
            )
            specs[f"{prefix}.indexer.k_cache"] = DeepseekV4IndexerCache.get_kv_cache_spec(
                k_cache, config
            )
            compressor(f"{prefix}.indexer.compressor.state_cache", index_head)
        swa = SimpleNamespace(
            bounded_replay=False,
            block_size=64,
            head_dim=hf.head_dim,
            dtype=kv_torch,
            window_size=hf.sliding_window,
            cache_config=cache_config,
            packed_bytes_per_token=584,
            packed_page_alignment=576,
            packed_block_stride_alignment=None,
        )
        specs[f"{prefix}.swa_cache"] = DeepseekV4SWACache.get_kv_cache_spec(swa, config)
        attn = SimpleNamespace(
            compress_ratio=ratio,
            kv_cache_dtype=kv_dtype,
            kv_cache_torch_dtype=kv_torch,
            head_dim=hf.head_dim,
        )
        spec = DeepseekV4Attention.get_kv_cache_spec(attn, config)
        if spec is not None:
            specs[prefix] = spec
        if ratio > 1:
            compressor(f"{prefix}.compressor.state_cache", hf.head_dim)
        layers.append(specs)
    return layers


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    from transformers import AutoConfig
    from vllm.distributed.utils import get_pp_indices

    hf = AutoConfig.from_pretrained(case["config"])
    block_size = 256
    try:
        layers = _layer_specs(hf, case.get("cache_dtype", "auto"), block_size)
    except ValueError as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    pp = case.get("pp", 1)
    workers = []
    for rank in range(pp):
        start, end = get_pp_indices(hf.num_hidden_layers, rank, pp)
        worker: dict[str, Any] = {}
        for specs in layers[start:end]:
            worker.update(specs)
        workers.append(worker)
    return plan_workers(case, workers, block_size)


def plan_workers(
    case: dict[str, Any], workers: list[dict[str, Any]], block_size: int
) -> dict[str, Any]:
    """vLLM's own planning of the workers' specs (BLHNC, the packed grouping) and what the
    test compares: blocks, the two headline numbers, the length, the groups."""
    from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups, get_kv_cache_configs
    from vllm.v1.core.kv_cache_utils import (
        generate_scheduler_kv_cache_config,
        get_kv_cache_capacity,
    )
    from vllm.v1.kv_cache_interface import UniformTypeKVCacheSpecs

    pp = len(workers)
    engine = SimpleNamespace(
        block_size_slots=block_size,
        max_num_batched_tokens=SimpleNamespace(_value=case["batched"]),
        async_scheduling=case.get("async", True),
        tensor_parallel_size=case.get("tp", 1),
        pipeline_parallel_size=pp,
        decode_context_parallel_size=1,
    )
    cfg = _Config(engine, case["max_model_len"], bool(case.get("auto_fit")), case.get("override"))
    cfg.cache_config.kv_cache_layout = "BLHNC"
    try:
        groups = get_global_kv_cache_groups(cfg, workers)
        configs = get_kv_cache_configs(cfg, workers, [case["memory"]] * pp, groups)
    except (ValueError, NotImplementedError, AssertionError, ZeroDivisionError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    scheduler = generate_scheduler_kv_cache_config(configs)
    tokens, concurrency = get_kv_cache_capacity(cfg, scheduler)
    described = []
    for group in groups:
        spec = group.kv_cache_spec
        inner = (
            list(spec.kv_cache_specs.values())
            if isinstance(spec, UniformTypeKVCacheSpecs)
            else [spec]
        )
        described.append(
            [
                type(inner[0]).__name__,
                inner[0].block_size,
                sorted({s.page_size_bytes for s in inner}),
                len(group.layer_names),
            ]
        )
    return {
        "num_blocks": scheduler.num_blocks,
        "max_concurrency": concurrency,
        "kv_cache_size": tokens,
        "max_model_len": cfg.model_config.max_model_len,
        "groups": described,
    }


def main() -> None:
    import logging

    logging.disable(logging.WARNING)
    _bind_properties()
    cases = json.load(sys.stdin)
    json.dump([run_case(case) for case in cases], sys.stdout)


if __name__ == "__main__":
    main()
