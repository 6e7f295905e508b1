"""vLLM 0.33's plan of DeepSeek V4.1 on Hopper: shared compressed caches, rings, pages packed.

DeepSeek V4.1's indexer backend (``DeepseekV41IndexerBackend``, a ``DeepseekV4IndexerBackend``)
lays blocks out outermost, so vLLM groups its caches with ``_get_packed_kv_cache_groups`` as
for V4 (`kvunits.runtime.like_vllm_packed`), here with circular-buffer buckets (the
compressor rings, ``CircularBufferSpec``: one block a request) that the grouping caps at
the states the widest other group's block fits. Each cache's spec is
`kvunits.contracts.compressed_v41.DeepseekV41Layer.caches`; a layer that only reads a
source's caches owns none of them.
"""

from __future__ import annotations

from kvunits.contracts import EngineSpec, SpecError, Tokens
from kvunits.contracts.compressed_v41 import HOPPER_BLOCK, DeepseekV41Model
from kvunits.contracts.deploy import layers_per_stage

from .like_vllm import SpecKind, VllmPlan, _Spec
from .like_vllm_packed import _check_engine, packed_spec, plan_packed_specs

__all__ = ["plan_deepseek_v41_like_vllm"]


def plan_deepseek_v41_like_vllm(
    model: DeepseekV41Model,
    engine: EngineSpec,
    *,
    auto_fit: bool = False,
    num_gpu_blocks_override: int | None = None,
) -> VllmPlan:
    """Plan a DeepSeek V4.1 model on ``engine`` as vLLM 0.33 does on Hopper (FlashMLA,
    ``fp8_ds_mla``, blocks of 64 tokens).

    The engine's settings are vLLM's, as in `plan_like_vllm`; ``block_size_slots`` must be
    kvunits' default (16) or 64; the cache dtype ``auto`` or an fp8 one.

    Raises:
        SpecError: another cache dtype or block size, speculative decoding or decode
            context parallelism (not modelled / refused by vLLM), a pipeline stage without
            a layer, a stage boundary inside a kv-sharing group (vLLM: 'PP splits inside a
            v4.1 kv-sharing group are not supported'), or too little memory for one request.

    Example (vLLM 0.33's own numbers, tests/vllm_oracle/oracle_dsv41.py on this synthetic
    topology: 123,248 blocks of 69,696 bytes; 4 windows of 517 blocks a request, 1,024
    compressed, 1 ring):

        >>> from kvunits.contracts.compressed_v41 import DeepseekV41Model
        >>> from kvunits.contracts.deploy import RankBytes
        >>> model = DeepseekV41Model.from_config("toy", {
        ...     "num_hidden_layers": 4, "head_dim": 512, "qk_rope_head_dim": 64,
        ...     "index_head_dim": 128, "sliding_window": 128, "compress_ratios": [0, 2, 2, 1],
        ...     "kv_source_layer_ids": [1, 3], "index_source_layer_ids": [1, 3]})
        >>> engine = EngineSpec(max_model_len=Tokens(65536), async_scheduling=True,
        ...     max_num_batched_tokens=Tokens(8192), memory_budget=RankBytes(8 << 30))
        >>> for line in plan_deepseek_v41_like_vllm(model, engine).headline().split(", "):
        ...     print(line)
        GPU KV cache size: 2,611,439 tokens
        Maximum concurrency for 65,536 tokens per request: 39.85x
    """
    block = engine.block_size_slots
    if block not in (16, HOPPER_BLOCK.numerical_value_in(Tokens)):
        raise SpecError(
            f"block size {block}: vLLM 0.33's DeepSeek V4.1 backends take blocks of 64 tokens "
            "on Hopper (DeepseekV4FlashMLABackend.get_supported_kernel_block_sizes); leave "
            "--block-size out (or give 64)"
        )
    _check_engine(engine, check_block=False)
    stages = layers_per_stage(model.num_layers, engine.parallelism)
    specs: dict[str, _Spec] = {}
    stage_of: dict[str, int] = {}
    for stage, indices in enumerate(stages):
        if not indices:
            raise SpecError(
                f"pipeline stage {stage} holds no layer of {model.name!r}: vLLM 0.33 divides "
                "by its 0 bytes per block (ZeroDivisionError); use fewer stages"
            )
        for i in indices:
            source = model.kv_source_of[i]
            if source is not None and source not in indices:
                raise SpecError(
                    f"layer {i} reads the compressed caches of layer {source} on another "
                    "pipeline stage: vLLM 0.33 refuses it ('PP splits inside a v4.1 "
                    "kv-sharing group are not supported'); use fewer stages"
                )
            prefix = f"model.layers.{i}.attn"
            for cache in model.layers[i].caches():
                name = f"{prefix}.{cache.suffix}" if cache.suffix else prefix
                kind: SpecKind = (
                    "circular_buffer"
                    if cache.kind == "compressor"
                    else "mla"
                    if cache.window is None
                    else "sliding_window"
                )
                specs[name] = packed_spec(kind, cache.block_size, cache.window, cache.page_size)
                stage_of[name] = stage
    return plan_packed_specs(
        specs,
        stage_of,
        len(stages),
        engine,
        auto_fit=auto_fit,
        num_gpu_blocks_override=num_gpu_blocks_override,
    )
