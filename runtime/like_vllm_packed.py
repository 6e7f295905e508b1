"""vLLM 0.33's plan of a model whose pages are packed side by side in each block: DeepSeek V4.

`kvunits.runtime.like_vllm` follows vLLM on FlashAttention's layout (``LBNHC``, layer-outer).
DeepSeek V4's indexer backend declares block-outermost layouts only
(``DeepseekV4IndexerBackend.supported_kv_cache_layouts``: ``BLHNC``, ``BLNHC``), so vLLM
resolves ``BLHNC`` for the whole model and groups its caches by
``_get_packed_kv_cache_groups`` (``vllm/v1/core/kv_cache_planning.py``), restated here:

1. **Buckets**: each layer joins the first bucket it is of one type with (vLLM's
   ``UniformTypeKVCacheSpecs.is_uniform_type``: the same block size, and full attention, or
   sliding windows of one size), else starts its own.
2. **Repeats**: a bucket is *balanced* when each of its page sizes has as many layers. The
   most layers of one page size in a balanced bucket of several page sizes is the floor
   ``m``; the repeats per group ``R`` are ``_approximate_gcd`` of the balanced buckets' counts
   from ``m`` up (the ``d`` padding them least, ties to the larger).
3. **Groups**: a balanced bucket becomes ``cdiv(count, R)`` groups (its layers' repeats
   ``[i::n]``); any other bucket one group.
   Recurrent-state and circular-buffer buckets (and sliding windows when nothing repeats)
   are capped at the states the widest other group's block fits: ``cdiv(layers,
   max(anchor // page, 1))`` groups, where the anchor is the widest group's bytes with
   each state bucket counted one layer a group.
4. **Blocks**: a block spans the widest group's pages side by side (the sum of its layers'
   pages on the rank), rounded up to the layers' block-stride alignments (none here);
   ``num_blocks = memory // bytes_per_block`` on each stage, the smallest for all.
5. **Headline**: as `plan_like_vllm` (a request holds, per group, ``cdiv(L, B)`` blocks of
   full attention, ``cdiv(min(W − 1 + in_flight, L), B) + 1`` of a window).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kvunits.contracts import Bytes, EngineSpec, SpecError, Tokens
from kvunits.contracts.compressed import COMPRESSED_BLOCK, DeepseekV4Model
from kvunits.contracts.deploy import RankBytes, layers_per_stage
from kvunits.contracts.internal import cdiv

from .like_vllm import (
    SpecKind,
    VllmPlan,
    _check_enough,
    _Group,
    _Limits,
    _longest_fitting,
    _Spec,
    _vllm_plan,
)

__all__ = ["plan_deepseek_v4_like_vllm"]


def plan_deepseek_v4_like_vllm(
    model: DeepseekV4Model,
    engine: EngineSpec,
    *,
    auto_fit: bool = False,
    num_gpu_blocks_override: int | None = None,
) -> VllmPlan:
    """Plan a DeepSeek V4 model on ``engine`` as vLLM 0.33 does on Hopper or Blackwell SM100
    (FlashMLA, ``fp8_ds_mla``; the module docstring's steps).

    The engine's settings are vLLM's, as in `plan_like_vllm`; the block size is the model's
    (256 tokens for the compressed caches: the only one vLLM's DeepSeek V4 backends take),
    so ``block_size_slots`` must be kvunits' default (16) or 256; the cache dtype ``auto``
    or an fp8 one (vLLM stores both as ``fp8_ds_mla``). Each cache's spec is
    `kvunits.contracts.compressed.DeepseekV4Layer.caches`. All its caches are whole on
    every tensor-parallel rank (one latent head, ``max_tp_shards=1``).

    Raises:
        SpecError: another cache dtype or block size (vLLM refuses them), decode context
            parallelism (vLLM's sliding windows refuse it), a stage without a layer, or the
            memory does not hold one request (vLLM's start-up error).

    Example (vLLM 0.33's own numbers for these 4 layers: tests/vllm_oracle/oracle_dsv4.py on
    DeepSeek-V4-Flash's config cut to ``compress_ratios [4, 4, 4, 4]``):

        >>> from kvunits.contracts import Elements
        >>> from kvunits.contracts.compressed import DeepseekV4Layer
        >>> layer = DeepseekV4Layer(4, Elements(512), Elements(128), Tokens(128))
        >>> model = DeepseekV4Model("toy", (layer,) * 4)
        >>> engine = EngineSpec(max_model_len=Tokens(65536), max_num_batched_tokens=Tokens(8192),
        ...                     memory_budget=RankBytes(8 << 30))
        >>> for line in plan_deepseek_v4_like_vllm(model, engine).headline().split(", "):
        ...     print(line)
        GPU KV cache size: 1,252,737 tokens
        Maximum concurrency for 65,536 tokens per request: 19.12x
    """
    _check_engine(engine)
    parallelism = engine.parallelism
    specs: dict[str, _Spec] = {}
    stage_of: dict[str, int] = {}
    stages = layers_per_stage(model.num_layers, parallelism)
    for stage, indices in enumerate(stages):
        if not indices:
            raise SpecError(
                f"pipeline stage {stage} holds no layer of {model.name!r}: vLLM 0.33 divides "
                "by its 0 bytes per block (ZeroDivisionError); use fewer stages"
            )
        for i in indices:
            prefix = f"model.layers.{i}.attn"
            for cache in model.layers[i].caches():
                name = f"{prefix}.{cache.suffix}" if cache.suffix else prefix
                kind: SpecKind = "mla" if cache.window is None else "sliding_window"
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


def packed_spec(kind: SpecKind, block_size: Tokens, window: Tokens | None, page: Bytes) -> _Spec:
    """One packed cache as the planner's spec: its page given whole (vLLM's page of the
    cache's own record and states, `kvunits.contracts.compressed`), one per block."""
    return _Spec(
        kind=kind,
        block_size_tokens=block_size.numerical_value_in(Tokens),
        kv_heads=1,
        head_size_k=0,
        head_size_v=0,
        dtype_bytes=1,
        states_per_token=1,
        window_tokens=None if window is None else window.numerical_value_in(Tokens),
        page_padded_bytes=page.numerical_value_in(Bytes),
    )


def plan_packed_specs(
    specs: dict[str, _Spec],
    stage_of: dict[str, int],
    num_stages: int,
    engine: EngineSpec,
    *,
    auto_fit: bool,
    num_gpu_blocks_override: int | None,
) -> VllmPlan:
    """The module docstring's steps 1–5 on the specs of every cache (by name, with the
    pipeline stage holding it)."""
    groups = packed_groups(specs)
    per_stage = [
        _packed_bytes_per_block(groups, {n for n, s in stage_of.items() if s == stage})
        for stage in range(num_stages)
    ]
    memory = engine.kv_cache_memory.numerical_value_in(RankBytes)
    if num_gpu_blocks_override is not None:
        memories = [num_gpu_blocks_override * b for b in per_stage]
    else:
        memories = [memory] * len(per_stage)
    batched = engine.max_num_batched_tokens.numerical_value_in(Tokens)
    limits = _Limits(
        max_model_len=engine.max_model_len.numerical_value_in(Tokens),
        in_flight=engine.concurrent_batches * batched,
        encoder_tokens=batched,
        dcp=1,
    )
    check = [m - b for m, b in zip(memories, per_stage, strict=True)]
    if auto_fit:
        fitted = min(
            _longest_fitting(groups, bpb, c, limits)
            for bpb, c in zip(per_stage, check, strict=True)
        )
        if fitted <= 0:
            raise SpecError(
                "cannot auto-fit max_model_len: not enough memory for the KV cache of even a "
                "single token (vLLM's error); raise gpu_memory_utilization or the memory"
            )
        limits = replace(limits, max_model_len=min(fitted, limits.max_model_len))
    for bpb, c in zip(per_stage, check, strict=True):
        _check_enough(groups, bpb, c, limits)
    num_blocks = min(m // b for m, b in zip(memories, per_stage, strict=True))
    if num_gpu_blocks_override is not None:
        num_blocks = num_gpu_blocks_override
    per_request = [
        max(g.specs[n].blocks_per_request(limits) for n in g.layer_names) for g in groups
    ]
    return _vllm_plan(groups, per_request, max(per_stage), num_blocks, limits, auto_fit)


def _check_engine(engine: EngineSpec, *, check_block: bool = True) -> None:
    block = engine.block_size_slots
    if check_block and block not in (16, COMPRESSED_BLOCK.numerical_value_in(Tokens)):
        raise SpecError(
            f"block size {block}: vLLM 0.33's DeepSeek V4 backends take blocks of 256 tokens "
            "only (DeepseekV4SparseMLABackend.get_supported_kernel_block_sizes); leave "
            "--block-size out (or give 256)"
        )
    dtype = engine.cache_dtype
    if dtype is not None and dtype.itemsize_bytes != 1:
        raise SpecError(
            f"cache dtype {dtype.name}: vLLM 0.33's FlashMLA layout for DeepSeek V4 "
            "(fp8_ds_mla) only supports an fp8 KV cache (_resolve_dsv4_kv_cache_dtype: "
            "'Please set --kv-cache-dtype fp8')"
        )
    if engine.num_speculative_tokens:
        raise SpecError(
            "speculative decoding: DeepSeek V4's multi-token-prediction layers then keep caches "
            "of their own and vLLM retains more of each window (extra_retained_tokens), which "
            "kvunits does not plan; plan without num_speculative_tokens"
        )
    if engine.parallelism.decode_context_parallel_size > 1:
        raise SpecError(
            "decode context parallelism: vLLM 0.33's sliding-window caches (DeepSeek V4's "
            "window and compressor states) refuse it ('DCP not support sliding window')"
        )


def packed_groups(specs: dict[str, _Spec]) -> list[_Group]:
    """vLLM 0.33's ``_get_packed_kv_cache_groups`` (the module docstring's steps 1–3)."""
    buckets: list[dict[str, _Spec]] = []
    for name, spec in specs.items():
        for bucket in buckets:
            first = next(iter(bucket.values()))
            if first.uniform_type() == spec.uniform_type():
                bucket[name] = spec
                break
        else:
            buckets.append({name: spec})
    described = []
    for bucket in buckets:
        by_page: dict[int, list[str]] = {}
        for name, spec in bucket.items():
            by_page.setdefault(spec.page_bytes, []).append(name)
        counts = [len(names) for names in by_page.values()]
        # get_max_layers_per_page_size: the layer count of the most common page size.
        described.append((bucket, by_page, len(set(counts)) == 1, max(counts)))
    floor = max(
        (count for _, by_page, balanced, count in described if balanced and len(by_page) > 1),
        default=0,
    )
    repeats = (
        approximate_gcd([count for _, _, balanced, count in described if balanced], floor)
        if floor
        else None
    )

    def groups_for(balanced: bool, count: int) -> int:
        return cdiv(count, repeats) if balanced and repeats is not None else 1

    def is_state_bucket(spec: _Spec) -> bool:
        # Mamba and circular-buffer buckets, and sliding windows when nothing repeats, can
        # split down to one state a group (vLLM's is_state_bucket).
        if spec.kind in ("mamba", "circular_buffer"):
            return True
        return repeats is None and spec.kind == "sliding_window"

    def widest(by_page: dict[int, list[str]], n: int) -> int:
        return sum(cdiv(len(names), n) * page for page, names in by_page.items())

    anchor = max(
        (
            widest(
                by_page,
                len(bucket) if is_state_bucket(_first(bucket)) else groups_for(balanced, count),
            )
            for bucket, by_page, balanced, count in described
        ),
        default=0,
    )
    groups: list[_Group] = []
    for bucket, by_page, balanced, count in described:
        n = groups_for(balanced, count)
        first = _first(bucket)
        if anchor and is_state_bucket(first):
            # Cap a state group at the states a block already fits (vLLM's state branch).
            n = max(n, cdiv(len(bucket), max(anchor // first.page_bytes, 1)))
        if n == 1:
            names = tuple(bucket)
            groups.append(_Group(names, dict(bucket)))
            continue
        pattern = list(zip(*by_page.values(), strict=False))
        for i in range(n):
            names = tuple(name for repeat in pattern[i::n] for name in repeat)
            groups.append(_Group(names, {m: bucket[m] for m in names}))
    return groups


def _first(bucket: dict[str, _Spec]) -> _Spec:
    return next(iter(bucket.values()))


def approximate_gcd(values: Sequence[int], lower_bound: int) -> int:
    """vLLM's ``_approximate_gcd``: the ``d`` from ``lower_bound`` (at least 1) to the largest
    value that pads the values least when each rounds up to a multiple of ``d``; ties to the
    larger ``d``; ``lower_bound`` itself when it passes the largest value.

    Example:
        >>> approximate_gcd([21, 20, 43], 21)
        22
    """
    low = max(1, lower_bound)
    high = max(values)
    if low > high:
        return low
    best, best_pad = low, None
    for d in range(low, high + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad <= best_pad:
            best, best_pad = d, pad
    return best


def _packed_bytes_per_block(groups: Sequence[_Group], on_rank: set[str]) -> int:
    """``_get_kv_cache_bytes_per_block`` on a block-outermost layout: the widest group's
    pages among the layers one rank holds (no block-stride alignment is set)."""
    return max(sum(g.specs[n].page_bytes for n in g.layer_names if n in on_rank) for g in groups)
