"""What ``vllm serve`` 0.33 makes of a model: its KV cache groups, blocks and headline numbers.

kvunits' own plan (`kvunits.runtime.capacity`) admits requests by their exact caps; vLLM 0.33
sizes its pool by its own rules, and users compare the two lines it logs at start-up::

    GPU KV cache size: 1,234,560 tokens, Maximum concurrency for 131,072 tokens per request: 9.42x

This module computes those numbers from the same `ModelSpec` and `EngineSpec`, following
vLLM 0.33 step by step (``vllm/v1/core/kv_cache_planning.py``, ``kv_cache_utils.py``,
``vllm/v1/kv_cache_interface.py``) on a CUDA GPU with the FlashAttention backend, whose
layout (``LBNHC``, vLLM's default preference) is not block-outermost:

1. **Per-layer specs on one rank** (each model's ``Attention.get_kv_cache_spec``): the rank's
   KV heads ``max(1, H // tp)``; a page of ``block_size × heads × (K + V) × dtype`` bytes
   (a pooled encoder layer stores ``P`` states a slot, vLLM's ``tokens_per_state =
   Fraction(1, P)``, and its window is ``cdiv(W, P) + 1`` slots: ``whisper_causal.py``); MLA
   one latent head and no V.
2. **Groups** (``get_kv_cache_groups``): one group when every layer has the same spec, or the
   same type (``UniformTypeKVCacheSpecs``: all full attention, or sliding windows of one
   size); else the pages are unified (a smaller page that divides the largest grows its block
   size; one that does not is padded to it), same specs are bucketed, and each bucket is cut
   into groups of ``group_size`` layers (the fewest layers of a bucket, or the most when that
   is under 1.5 times the fewest), ``layers[i::n]``.
3. **Blocks** (``get_kv_cache_configs``): a block of the pool spans the widest group's pages
   on a rank (its layers on that pipeline stage); ``num_blocks = memory // bytes_per_block``
   on each stage, the smallest of them for all; ``num_gpu_blocks_override`` replaces it.
   One block is the null block: the start-up check and auto-fit plan against the memory less
   one block.
4. **Headline** (``get_max_concurrency_for_kv_cache_config``, ``get_kv_cache_capacity``): a
   request at ``max_model_len`` needs ``Σ cdiv(max_memory_usage_bytes, page)`` blocks over
   the groups; the concurrency is ``num_blocks / that`` (the null block counted, as vLLM
   does), and the cache size ``int(concurrency × max_model_len)`` tokens.

vLLM's cap of a sliding-window group is ``cdiv(min(W − 1 + in_flight, max_model_len), B) + 1``
with ``in_flight = max_concurrent_batches × max_num_batched_tokens`` (its
``max_in_flight_tokens``: speculative tokens are not added); a chunked-local group
``cdiv(min(C + in_flight, max_model_len), B)``; a cross-attention group
``cdiv(max_num_encoder_input_tokens, B)`` (by default ``max_num_batched_tokens``, not
the encoder's length); full attention ``cdiv(max_model_len, B)`` (over
``dcp`` when DCP shards it).

Recurrent-state hybrids (Mamba-1, Mamba-2, gated delta nets and Kimi delta attention beside
attention or MLA) are planned as vLLM aligns them at start-up (`_hybrid_specs`): the
attention block size grows until its page holds a state, every state page is padded to it,
and a request's state holds 2 pages with prefix caching (vLLM's default) or 1 without.
DeepSeek sparse attention's indexer caches are MLA-like specs of their own bytes
(`IndexerLayer`), in the same group as the MLA layers.

Gated delta nets with prefix caching add a prefill checkpoint page and align blocks to the
checkpoints where the GPU's prefill backend exports them (`kvunits.runtime.vllm_gdn`).

What vLLM does that is not modelled here is refused with the reason (`SpecError`): gated
delta nets with prefix caching and no GPU named (Kimi-K3's KDA where its config admits
FlashKDA), hybrids whose attention layers differ per token, a model whose pages
cannot be unified, a pipeline stage without a cached layer, and no layer with a cache
(vLLM's attention-free models).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from math import lcm
from typing import Final, Literal, cast, final

from kvunits.contracts import (
    Bytes,
    Chunk,
    ChunkedLocalLayer,
    CrossAttentionLayer,
    Elements,
    EncoderOnlyLayer,
    EncoderTokens,
    EngineSpec,
    IndexerLayer,
    KVSharedLayer,
    LayerSpec,
    MLALayer,
    ModelSpec,
    SlidingWindowLayer,
    SpecError,
    StateLayer,
    Tokens,
    Window,
)
from kvunits.contracts.deploy import (
    Parallelism,
    RankBlocks,
    RankBytes,
    RankKVHeads,
    kv_heads_of,
    kv_heads_per_rank,
)
from kvunits.contracts.internal import cdiv
from kvunits.contracts.state import StateMixerLayer

from .deployment import check_every_stage_caches, stage_layers
from .vllm_gdn import gdn_checkpoints

#: The kinds of vLLM spec a layer becomes (``vllm/v1/kv_cache_interface.py``).
SpecKind = Literal[
    "full_attention",
    "mla",
    "sliding_window",
    "chunked_local",
    "cross_attention",
    "mamba",
    "circular_buffer",
]

#: vLLM ``CacheConfig.DEFAULT_BLOCK_SIZE`` (``vllm/config/cache.py``), FlashAttention's too.
DEFAULT_BLOCK_SIZE: Final = 16


@final
@dataclass(frozen=True, slots=True)
class _Spec:
    """One layer's vLLM spec on one rank (plain ints, each named with its unit)."""

    kind: SpecKind
    block_size_tokens: int
    kv_heads: int
    head_size_k: int
    head_size_v: int
    dtype_bytes: int
    states_per_token: int  # P of a pooled layer (vLLM: 1 / tokens_per_state)
    state_bytes: int | None = None  # a packed state (vLLM's state_content_bytes), a mamba's
    state_pages: int = 1  # pages a request's recurrent state holds (MambaSpec)
    indexer: bool = False  # a sparse-attention indexer's key cache (its own fixed bytes)
    window_tokens: int | None = None
    chunk_tokens: int | None = None
    page_padded_bytes: int | None = None

    @property
    def unpadded_page_bytes(self) -> int:
        if self.kind == "mamba":
            assert self.state_bytes is not None
            return self.state_bytes  # the whole state, whatever the block size
        per_state = (self.head_size_k + self.head_size_v) * self.dtype_bytes
        if self.state_bytes is not None:
            per_state = self.state_bytes
        return self.kv_heads * self.block_size_tokens * self.states_per_token * per_state

    @property
    def page_bytes(self) -> int:
        if self.page_padded_bytes is not None:
            return self.page_padded_bytes
        return self.unpadded_page_bytes

    def uniform_type(self) -> tuple[object, ...]:
        """What vLLM's ``is_uniform_with_collection`` compares: the kind (MLA is full
        attention), the window or chunk; block size and DCP sharding are compared apart."""
        kind = "full_attention" if self.kind == "mla" else self.kind
        if kind == "mamba":
            return (kind, self.page_bytes, self.state_pages)
        return (kind, self.window_tokens, self.chunk_tokens, self.block_size_tokens)

    def blocks_per_request(self, limits: _Limits) -> int:
        """``cdiv(max_memory_usage_bytes, page_size_bytes)``: the blocks one request at
        ``max_model_len`` holds (vLLM's ``max_admission_blocks_per_request`` for local kinds)."""
        bs = self.block_size_tokens
        if self.kind == "mamba":
            return self.state_pages
        if self.kind == "circular_buffer":
            return 1  # CircularBufferSpec.max_num_blocks_per_req: one ring a request
        if self.kind == "sliding_window":
            assert self.window_tokens is not None
            tokens = min(self.window_tokens - 1 + limits.in_flight, limits.max_model_len)
            return cdiv(tokens, bs) + 1
        if self.kind == "chunked_local":
            assert self.chunk_tokens is not None
            return cdiv(min(self.chunk_tokens + limits.in_flight, limits.max_model_len), bs)
        if self.kind == "cross_attention":
            return cdiv(limits.encoder_tokens, bs)
        length = limits.max_model_len
        if limits.dcp > 1:
            length = cdiv(length, limits.dcp)
        return cdiv(length, bs)


@final
@dataclass(frozen=True, slots=True)
class _Limits:
    max_model_len: int
    in_flight: int
    encoder_tokens: int
    dcp: int


@final
@dataclass(frozen=True, slots=True)
class _Group:
    layer_names: tuple[str, ...]
    specs: Mapping[str, _Spec]  # per layer (one spec for all when uniform)

    @property
    def first(self) -> _Spec:
        return self.specs[self.layer_names[0]]


@final
@dataclass(frozen=True, slots=True)
class VllmGroup:
    """One of vLLM's KV cache groups.

    Attributes:
        kind: the group's spec kind (its first layer's).
        layer_names: its layers, in vLLM's order (a split bucket takes ``layers[i::n]``).
        block_size: tokens per block after page unification (a smaller page grows it).
        page_size: one layer's page on one rank (padded where vLLM pads it).
        blocks_per_request: blocks a request at ``max_model_len`` holds in this group.
    """

    kind: SpecKind
    layer_names: tuple[str, ...]
    block_size: Tokens
    page_size: RankBytes
    blocks_per_request: RankBlocks


@final
@dataclass(frozen=True, slots=True)
class VllmPlan:
    """The numbers ``vllm serve`` 0.33 computes for a model on an engine.

    Attributes:
        groups: the KV cache groups.
        bytes_per_block: one block of the pool on the fullest rank (the widest group's pages).
        num_blocks: the pool's blocks, the null block included (the smallest stage's).
        max_model_len: the length planned for (after auto-fit when it was asked).
        max_concurrency: ``num_blocks / Σ blocks_per_request`` (vLLM's ratio; the null
            block counted).
        kv_cache_size: ``int(max_concurrency × max_model_len)`` (vLLM's "GPU KV cache size").
        auto_fit: whether ``max_model_len`` was fitted to the memory (vLLM's ``-1``).
    """

    groups: tuple[VllmGroup, ...]
    bytes_per_block: RankBytes
    num_blocks: RankBlocks
    max_model_len: Tokens
    max_concurrency: float
    kv_cache_size: Tokens
    auto_fit: bool = False

    def headline(self) -> str:
        """The line vLLM logs at start-up (``update_kv_cache_capacity``), character for
        character."""
        tokens = self.kv_cache_size.numerical_value_in(Tokens)
        length = self.max_model_len.numerical_value_in(Tokens)
        return (
            f"GPU KV cache size: {tokens:,} tokens, Maximum concurrency for {length:,} "
            f"tokens per request: {self.max_concurrency:.2f}x"
        )


def plan_like_vllm(
    model: ModelSpec,
    engine: EngineSpec,
    *,
    auto_fit: bool = False,
    num_gpu_blocks_override: int | None = None,
    max_num_encoder_input_tokens: int | None = None,
    enable_prefix_caching: bool = True,
    gpu: VllmGpu | None = None,
) -> VllmPlan:
    """Plan ``model`` on ``engine`` as vLLM 0.33 does (the steps of the module docstring).

    The engine's settings are vLLM's: ``block_size_slots`` its ``--block-size``,
    ``max_num_batched_tokens``, ``async_scheduling`` and the parallel sizes its own, and the
    memory each rank's KV cache gets (vLLM's ``available_memory``: ``--kv-cache-memory-bytes``,
    or what profiling leaves of ``gpu_memory × gpu_memory_utilization``). A speculative
    decoder's ``num_speculative_tokens`` does not enter vLLM's caps.

    Args:
        model: the model's layers.
        engine: the engine's settings.
        auto_fit: ``--max-model-len auto`` (or ``-1``): the longest length up to the engine's
            ``max_model_len`` whose request fits the memory less the null block.
        num_gpu_blocks_override: vLLM's ``--num-gpu-blocks-override``.
        max_num_encoder_input_tokens: the encoder budget a cross-attention group is sized by
            (vLLM's ``scheduler_config.max_num_encoder_input_tokens``); default, as vLLM's,
            ``max_num_batched_tokens``.
        enable_prefix_caching: vLLM's ``--enable-prefix-caching`` (on by default): with it a
            recurrent state holds 2 pages a request (``mamba_cache_mode = "align"``), without
            it 1 (see `_hybrid_specs`).
        gpu: the GPU vLLM runs on (``--like-vllm``): a gated delta net's prefill
            checkpoints depend on its compute capability (`kvunits.runtime.vllm_gdn`).

    Raises:
        SpecError: a layer kind or a layout vLLM builds in ways not modelled here (the message
            says which); the memory does not hold one request (vLLM's start-up error, with
            its estimate of the longest length that fits); auto-fit finds not even 1 token.

    Example:
        >>> from kvunits.contracts import Elements, FullAttentionLayer, KVHeads, Layers
        >>> layer = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))
        >>> model = ModelSpec.stacked("llama", {"text": (layer, Layers(32))})
        >>> engine = EngineSpec(max_model_len=Tokens(131072), max_num_batched_tokens=Tokens(8192),
        ...                     memory_budget=RankBytes(40 << 30))
        >>> for line in plan_like_vllm(model, engine).headline().split(", "):
        ...     print(line)
        GPU KV cache size: 327,680 tokens
        Maximum concurrency for 131,072 tokens per request: 2.50x
    """
    parallelism = engine.parallelism
    specs = _rank_specs(model, engine, parallelism, enable_prefix_caching, gpu)
    if not specs:
        raise SpecError(
            f"model {model.name!r} has no layer with a KV cache: vLLM serves it attention-free "
            "(one null block, no KV cache line); there is nothing to plan"
        )
    groups = _groups(specs)
    all_stages = stage_layers(model, parallelism)
    check_every_stage_caches(all_stages, specs.keys(), parallelism)
    stages = [[name for name in names if name in specs] for names in all_stages]
    per_stage = [_bytes_per_block(groups, set(names)) for names in stages]
    memory = engine.kv_cache_memory.numerical_value_in(RankBytes)
    if num_gpu_blocks_override is not None:
        memories = [num_gpu_blocks_override * b for b in per_stage]
    else:
        memories = [memory] * len(per_stage)
    batched = engine.max_num_batched_tokens.numerical_value_in(Tokens)
    # vLLM's SchedulerConfig.__post_init__: the encoder budget is the batched-token budget.
    encoder = batched if max_num_encoder_input_tokens is None else max_num_encoder_input_tokens
    in_flight = engine.concurrent_batches * batched
    limits = _Limits(
        max_model_len=engine.max_model_len.numerical_value_in(Tokens),
        in_flight=in_flight,
        encoder_tokens=encoder,
        dcp=parallelism.decode_context_parallel_size,
    )
    # The null block is held back: plan against the memory less one block.
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
    per_request = [g.first.blocks_per_request(limits) for g in groups]
    return _vllm_plan(groups, per_request, max(per_stage), num_blocks, limits, auto_fit)


def _vllm_plan(
    groups: Sequence[_Group],
    per_request: Sequence[int],
    bytes_per_block: int,
    num_blocks: int,
    limits: _Limits,
    auto_fit: bool,
) -> VllmPlan:
    """vLLM's plan from its groups, the blocks a full-length request holds per group and the
    blocks in the pool: concurrency is the pool's blocks over a request's
    (``get_max_concurrency_for_kv_cache_config``), the cache size that times the length,
    rounded down (``get_kv_cache_capacity``)."""
    concurrency = num_blocks / sum(per_request)
    return VllmPlan(
        groups=tuple(
            VllmGroup(
                kind=g.first.kind,
                layer_names=g.layer_names,
                block_size=Tokens(g.first.block_size_tokens),
                page_size=RankBytes(g.first.page_bytes),
                blocks_per_request=RankBlocks(n),
            )
            for g, n in zip(groups, per_request, strict=True)
        ),
        bytes_per_block=RankBytes(bytes_per_block),
        num_blocks=RankBlocks(num_blocks),
        max_model_len=Tokens(limits.max_model_len),
        max_concurrency=concurrency,
        kv_cache_size=Tokens(int(concurrency * limits.max_model_len)),
        auto_fit=auto_fit,
    )


# -- step 1: the per-layer specs --------------------------------------------------------------


def _rank_specs(
    model: ModelSpec,
    engine: EngineSpec,
    parallelism: Parallelism,
    prefix_caching: bool,
    gpu: VllmGpu | None = None,
) -> dict[str, _Spec]:
    """Each layer's spec on one rank (layers without a cache of their own have none)."""
    states = {
        name: layer
        for name, layer in model.layers.items()
        if isinstance(layer, (StateMixerLayer, StateLayer))
    }
    if states:
        return _hybrid_specs(model, engine, parallelism, states, prefix_caching, gpu)
    bs = engine.block_size_slots
    specs: dict[str, _Spec] = {}
    for name, layer in model.layers.items():
        spec = _layer_spec(name, layer, bs, engine, parallelism)
        if spec is not None:
            specs[name] = spec
    return _mixed_dtype_specs(specs, bs)


def _mixed_dtype_specs(specs: dict[str, _Spec], bs: int) -> dict[str, _Spec]:
    """Attention layers in two dtypes (``--kv-cache-dtype-skip-layers`` keeps some in the
    model's dtype while the rest are quantised) as vLLM 0.33 sizes them at start-up
    (``Platform._align_heterogeneous_kv_block_size``, ``Attention.get_kv_cache_spec``):

    * the block size grows to the smallest multiple of ``a = max(16, block_size)`` whose
      quantised page covers 16 tokens of the wider dtype: ``a × cdiv(16 × wide, a ×
      narrow)`` (per-token pages of the model's attention geometry);
    * full-attention layers, either dtype, take that block size;
    * a sliding-window layer takes the largest multiple of 16 tokens whose page fits the
      shared page ``block_size × narrow``, and is padded to it.

    Raises:
        SpecError: the attention layers differ in geometry, or chunked-local layers (vLLM
            aligns to the model-level geometry only; not modelled).
    """
    if len({s.dtype_bytes for s in specs.values() if s.kind == "mla" and not s.indexer}) > 1:
        raise SpecError(
            "MLA layers in two cache dtypes (--kv-cache-dtype-skip-layers): vLLM 0.33 aligns "
            "their blocks through a full-attention page of the latent, which kvunits does not "
            "model"
        )
    attention = {n: s for n, s in specs.items() if s.kind != "mla"}
    if len({s.dtype_bytes for s in attention.values()}) < 2:
        return specs
    shapes = {
        (s.kv_heads, s.head_size_k, s.head_size_v, s.states_per_token) for s in attention.values()
    }
    if len(shapes) > 1 or any(
        s.kind not in ("full_attention", "sliding_window") for s in attention.values()
    ):
        raise SpecError(
            "attention layers in two cache dtypes (--kv-cache-dtype-skip-layers) with different "
            "head geometries or kinds beside full and sliding attention: vLLM 0.33 aligns "
            "their blocks to the model-level geometry (Platform._align_heterogeneous_kv_"
            "block_size), which kvunits models for one geometry only"
        )
    heads, k, v, states = next(iter(shapes))
    per_dtype = {
        s.dtype_bytes: heads * (k + v) * states * s.dtype_bytes for s in attention.values()
    }
    narrow, wide = per_dtype[min(per_dtype)], per_dtype[max(per_dtype)]
    align = max(_FLASH_ATTN_KERNEL_BLOCK, bs)
    bs = max(bs, align * cdiv(wide * _FLASH_ATTN_KERNEL_BLOCK, align * narrow))
    shared = bs * narrow
    out: dict[str, _Spec] = {}
    for name, spec in specs.items():
        if spec.kind == "sliding_window":
            token = spec.unpadded_page_bytes // spec.block_size_tokens
            block = max(
                _FLASH_ATTN_KERNEL_BLOCK,
                shared // token // _FLASH_ATTN_KERNEL_BLOCK * _FLASH_ATTN_KERNEL_BLOCK,
            )
            if block * token > shared:
                block = _FLASH_ATTN_KERNEL_BLOCK
            out[name] = replace(spec, block_size_tokens=block, page_padded_bytes=shared)
        elif spec.kind == "full_attention":
            out[name] = replace(spec, block_size_tokens=bs)
        else:
            out[name] = spec
    return out


#: FlashAttention's kernel blocks (``get_supported_kernel_block_sizes``: ``MultipleOf(16)``).
_FLASH_ATTN_KERNEL_BLOCK: Final = 16
#: ``_align_hybrid_block_size``: with MLA the block aligns to at least 128 tokens.
_MLA_HYBRID_BLOCK: Final = 128


def _hybrid_specs(
    model: ModelSpec,
    engine: EngineSpec,
    parallelism: Parallelism,
    states: Mapping[str, LayerSpec],
    prefix_caching: bool,
    gpu: VllmGpu | None = None,
) -> dict[str, _Spec]:
    """The specs of a model with recurrent-state layers next to attention, as vLLM 0.33 makes
    them at start-up (``Platform._align_hybrid_block_size``, ``vllm/platforms/interface.py``;
    ``MambaModelConfig.verify_and_update_config``, ``vllm/model_executor/models/config.py``):

    * the attention block size grows to the smallest multiple of the kernel block (16, or the
      given block size if larger) whose page holds the largest state:
      ``a × cdiv(state, a × attention_page_per_token)``, ``a = max(16, block_size)``, and
      ``a`` at least 128 when the attention is MLA (``model_config.use_mla``: Kimi Linear's
      MLA page of ``kv_lora_rank + qk_rope_head_dim`` per token);
    * every state page is padded to that attention page;
    * with prefix caching (vLLM's default) a request's state holds 2 pages
      (``mamba_cache_mode = "align"``, the state at the last block boundary and the running
      one) and the state group's block size is the attention's; without it 1 page, in
      blocks of ``max_model_len``;
    * with prefix caching, gated delta nets whose prefill backend on ``gpu`` exports
      checkpoints (`kvunits.runtime.vllm_gdn`) hold one page more, and the kernel block ``a``
      becomes ``lcm(a, alignment)`` (64 for FlashInfer's GDN).

    Raises:
        SpecError: attention layers of different pages per token, or MLA beside other
            attention (vLLM aligns to the model-level head geometry only), gated delta nets
            with prefix caching and no ``gpu`` (`kvunits.runtime.vllm_gdn`), or a ``state``
            layer given in bytes only.
    """
    bs = engine.block_size_slots
    tp = parallelism.tensor_parallel_size
    attention: dict[str, _Spec] = {}
    for name, layer in model.layers.items():
        if name not in states:
            spec = _layer_spec(name, layer, 1, engine, parallelism)
            if spec is not None:
                attention[name] = spec
    per_token = {spec.unpadded_page_bytes for spec in attention.values()}
    kinds = {spec.kind == "mla" for spec in attention.values()}
    sparse = any(spec.kind == "mla" and spec.state_bytes for spec in attention.values())
    if len(kinds) > 1 or len(per_token) > 1 or sparse:
        raise SpecError(
            f"model {model.name!r} mixes recurrent states with attention layers of "
            f"{len(per_token)} page sizes per token (or MLA beside other attention, or a "
            "sparse MLA layout): vLLM 0.33 aligns its block size to the model-level attention "
            "geometry only (Platform._align_hybrid_block_size), which kvunits does not model "
            "for this mix; kvunits' own plan stands"
        )
    use_mla = kinds == {True}
    state_bytes: dict[str, int] = {}
    for name, layer in states.items():
        if not isinstance(layer, StateMixerLayer):
            raise SpecError(
                f"layer {name!r} is a state given in bytes only: vLLM sizes a recurrent state "
                "from its mixer's shapes (MambaStateShapeCalculator); give the mixer (mamba1, "
                "mamba2, gated_delta_net, short_conv) for vLLM's numbers"
            )
        state_bytes[name] = sum(t.size.numerical_value_in(Bytes) for t in layer.state_tensors(tp))
    checkpoints = (
        gdn_checkpoints(
            ((n, cast("StateMixerLayer", s)) for n, s in states.items()),
            gpu.compute_capability if gpu is not None else None,
            gpu.name if gpu is not None else "",
        )
        if prefix_caching
        else None
    )
    largest = max(state_bytes.values())
    token_page = next(iter(per_token)) if per_token else 0
    if token_page:
        align = max(_FLASH_ATTN_KERNEL_BLOCK, bs)
        if use_mla:
            # TRTLLM/FlashInfer MLA decode kernels: a manager block of a multiple of 128.
            align = max(align, _MLA_HYBRID_BLOCK)
        if checkpoints is not None:  # internal prefill checkpoints land on block boundaries
            align = lcm(align, checkpoints.alignment_tokens)
        needed = align * cdiv(largest, align * token_page)
        needed = _FLASH_ATTN_KERNEL_BLOCK * cdiv(needed, _FLASH_ATTN_KERNEL_BLOCK)
        bs = max(bs, needed)
    page = bs * token_page
    specs: dict[str, _Spec] = {}
    for name, layer in model.layers.items():
        if name in attention:
            specs[name] = replace(attention[name], block_size_tokens=bs)
        elif name in state_bytes:
            mixer = cast("StateMixerLayer", layer)
            specs[name] = _Spec(
                kind="mamba",
                block_size_tokens=bs if prefix_caching else _max_model_len(engine),
                kv_heads=1,
                head_size_k=0,
                head_size_v=0,
                dtype_bytes=mixer.ssm_dtype.itemsize_bytes,
                states_per_token=1,
                state_bytes=state_bytes[name],
                page_padded_bytes=page if page and page != largest else None,
                state_pages=(
                    1
                    if checkpoints is None
                    else 2 + (name in checkpoints.exporting)  # num_prefill_checkpoint_blocks
                ),
            )
    return specs


def _max_model_len(engine: EngineSpec) -> int:
    return engine.max_model_len.numerical_value_in(Tokens)


def _layer_spec(
    name: str, layer: LayerSpec, bs: int, engine: EngineSpec, parallelism: Parallelism
) -> _Spec | None:
    if isinstance(layer, (EncoderOnlyLayer, KVSharedLayer)):
        return None
    assert not isinstance(layer, (StateMixerLayer, StateLayer))  # _hybrid_specs plans them
    heads = kv_heads_of(layer)
    assert heads is not None
    per_rank = kv_heads_per_rank(heads, parallelism).numerical_value_in(RankKVHeads)
    if isinstance(layer, MLALayer):
        dtype = layer.dtype if engine.cache_dtype is None else engine.cache_dtype
        head = (layer.kv_lora_rank + layer.qk_rope_head_dim).numerical_value_in(Elements)
        slot = layer.slot_size(dtype).numerical_value_in(Bytes)
        return _Spec(
            kind="mla",
            block_size_tokens=bs,
            kv_heads=1,
            head_size_k=head,
            head_size_v=0,
            dtype_bytes=dtype.itemsize_bytes,
            states_per_token=1,
            # A sparse layer's fp8 cache is FlashMLA's fp8_ds_mla layout (656 byte a token
            # for DeepSeek's), vLLM's state_content_bytes (mla_attention.py).
            state_bytes=None if slot == head * dtype.itemsize_bytes else slot,
        )
    if isinstance(layer, IndexerLayer):
        # deepseek_v2.py DeepseekV32IndexerCache: an MLAAttentionSpec of one head of
        # head_dim + head_dim // 128 * 4 uint8, whatever the engine's cache dtype.
        return _Spec(
            kind="mla",
            block_size_tokens=bs,
            kv_heads=1,
            head_size_k=layer.slot_size.numerical_value_in(Bytes),
            head_size_v=0,
            dtype_bytes=1,
            states_per_token=1,
            indexer=True,
        )
    dtype = layer.dtype if engine.cache_dtype is None else engine.cache_dtype
    pool = 1
    if isinstance(layer, CrossAttentionLayer):
        pool = layer.pool_factor.tokens_per_block
    elif layer.pool is not None:
        pool = layer.pool.tokens_per_block
    base = _Spec(
        kind="full_attention",
        block_size_tokens=bs,
        kv_heads=per_rank,
        head_size_k=layer.head_size_k.numerical_value_in(Elements),
        head_size_v=layer.head_size_v_or_k.numerical_value_in(Elements),
        dtype_bytes=dtype.itemsize_bytes,
        states_per_token=pool,
    )
    if isinstance(layer, SlidingWindowLayer):
        w = _window_in_kernel_unit(layer)
        # whisper_causal.py: a pooled window is cdiv(W, P) + 1 slots in vLLM's manager.
        window = w if pool == 1 else cdiv(w, pool) + 1
        return replace(base, kind="sliding_window", window_tokens=window)
    if isinstance(layer, ChunkedLocalLayer):
        chunk = _chunk_in_kernel_unit(layer)
        return replace(base, kind="chunked_local", chunk_tokens=chunk // pool)
    if isinstance(layer, CrossAttentionLayer):
        return replace(base, kind="cross_attention")
    return base


def _window_in_kernel_unit(layer: SlidingWindowLayer) -> int:
    """The window's count in the layer's own unit (the layer checks which one it is)."""
    if layer.pool is not None:
        return cast("Window[EncoderTokens]", layer.sliding_window).numerical_value_in(EncoderTokens)
    return cast("Window[Tokens]", layer.sliding_window).numerical_value_in(Tokens)


def _chunk_in_kernel_unit(layer: ChunkedLocalLayer) -> int:
    """The chunk's count in the layer's own unit."""
    if layer.pool is not None:
        return cast("Chunk[EncoderTokens]", layer.chunk).numerical_value_in(EncoderTokens)
    return cast("Chunk[Tokens]", layer.chunk).numerical_value_in(Tokens)


# -- step 2: the groups --------------------------------------------------------------------------


def _groups(specs: dict[str, _Spec]) -> list[_Group]:
    """vLLM's ``get_kv_cache_groups`` on a non-block-outermost layout."""
    values = list(specs.values())
    names = tuple(specs)
    if all(s == values[0] for s in values):
        return [_Group(names, {n: values[0] for n in names})]
    if all(s.uniform_type() == values[0].uniform_type() for s in values):
        return [_Group(names, dict(specs))]
    unified = _unify_pages(specs)
    buckets: dict[_Spec, list[str]] = {}
    for name, spec in unified.items():
        buckets.setdefault(spec, []).append(name)
    sizes = [len(layers) for layers in buckets.values()]
    group_size = min(sizes)
    if max(sizes) < min(sizes) * 1.5:
        group_size = max(sizes)
    groups: list[_Group] = []
    for spec, layers in buckets.items():
        n = cdiv(len(layers), group_size)
        for i in range(n):
            members = tuple(layers[i::n])
            groups.append(_Group(members, {m: spec for m in members}))
    return groups


def _unify_pages(specs: dict[str, _Spec]) -> dict[str, _Spec]:
    """vLLM's ``unify_kv_cache_spec_page_size``: the largest page stays; a page dividing it
    grows its block size; another non-MLA page is padded to it; an MLA one is refused."""
    largest = max(s.page_bytes for s in specs.values())
    out: dict[str, _Spec] = {}
    for name, spec in specs.items():
        page = spec.page_bytes
        if page == largest:
            out[name] = spec
        elif largest % page == 0:
            if spec.page_padded_bytes is not None:
                # vLLM grows the block of a padded page too, then finds the padding smaller
                # than the grown page (AttentionSpec.page_size_bytes asserts it).
                raise SpecError(
                    f"layer {name!r}: its page is padded to {page} byte but must grow to "
                    f"{largest} byte to unify with the largest page: vLLM 0.33 fails at "
                    "start-up here (AssertionError in AttentionSpec.page_size_bytes; e.g. "
                    "--kv-cache-dtype-skip-layers keeping full-attention layers unquantised "
                    "beside quantised sliding-window ones)"
                )
            out[name] = replace(spec, block_size_tokens=spec.block_size_tokens * largest // page)
        elif spec.kind != "mla":
            out[name] = replace(spec, page_padded_bytes=largest)
        else:
            raise SpecError(
                f"layer {name!r}: its MLA page of {page} byte does not divide the largest page "
                f"({largest} byte) and vLLM cannot pad an MLA page: vLLM refuses this model "
                "(unify_kv_cache_spec_page_size)"
            )
    return out


# -- step 3: blocks, the start-up check, auto-fit ----------------------------------------------


def _bytes_per_block(groups: Sequence[_Group], on_rank: set[str]) -> int:
    """The widest group's pages among the layers one rank holds."""
    return max(sum(g.specs[n].page_bytes for n in g.layer_names if n in on_rank) for g in groups)


def _needed(groups: Sequence[_Group], bytes_per_block: int, limits: _Limits) -> int:
    """``_max_memory_usage_bytes_from_groups``: a block per group-page a request holds."""
    total = 0
    for group in groups:
        total += max(group.specs[n].blocks_per_request(limits) for n in group.layer_names)
    return bytes_per_block * total


def _longest_fitting(
    groups: Sequence[_Group], bytes_per_block: int, memory: int, limits: _Limits
) -> int:
    """vLLM's binary search (``_estimate_max_model_len_from_groups``): the longest length up
    to ``max_model_len`` whose request fits ``memory``; 0 when 1 token does not."""

    def fits(length: int) -> bool:
        return _needed(groups, bytes_per_block, replace(limits, max_model_len=length)) <= memory

    left, right = 1, limits.max_model_len
    if not fits(left):
        return 0
    result = 1
    while left <= right:
        mid = (left + right) // 2
        if fits(mid):
            result, left = mid, mid + 1
        else:
            right = mid - 1
    return result


def _check_enough(
    groups: Sequence[_Group], bytes_per_block: int, memory: int, limits: _Limits
) -> None:
    """vLLM's start-up check (``_check_enough_kv_cache_memory``)."""
    if memory <= 0:
        raise SpecError(
            "no memory is left for the KV cache blocks beyond the null block (vLLM: 'No "
            "available memory for the cache blocks'); raise the KV cache memory"
        )
    needed = _needed(groups, bytes_per_block, limits)
    if needed > memory:
        longest = _longest_fitting(groups, bytes_per_block, memory, limits)
        hint = f"; the longest max_model_len that fits is {longest} token" if longest else ""
        raise SpecError(
            f"vLLM refuses to start: one request of max_model_len {limits.max_model_len} "
            f"token needs {needed} byte of KV cache, more than the {memory} byte available "
            f"(the memory less the null block){hint}; lower max_model_len or raise the memory"
        )


# -- the GPUs of `--like-vllm` ---------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class VllmGpu:
    """A GPU as ``vllm serve`` 0.33 sizes its defaults on it.

    Attributes:
        name: the name ``--like-vllm`` takes (lower case).
        memory: the total memory the driver reports (``nvidia-smi`` ``memory.total``, which
            ``torch.cuda.get_device_properties().total_memory`` returns in bytes).
        max_num_batched_tokens: ``vllm serve``'s default on it (``EngineArgs.get_batch_defaults``,
            ``UsageContext.OPENAI_API_SERVER``): 16384 from 160 GiB, 8192 from 70 GiB unless an
            A100, else 2048.
        compute_capability: CUDA's (major, minor): which prefill kernels vLLM picks.
    """

    name: str
    memory: RankBytes
    max_num_batched_tokens: Tokens
    compute_capability: tuple[int, int]


def _gpu(name: str, memory_mib: int, capability: tuple[int, int]) -> VllmGpu:
    memory = memory_mib << 20
    if memory >= 160 << 30:
        batched = 16384
    elif memory >= 70 << 30 and "a100" not in name:
        batched = 8192
    else:
        batched = 2048
    return VllmGpu(name, RankBytes(memory), Tokens(batched), capability)


#: The GPUs ``--like-vllm`` knows, by ``nvidia-smi``'s ``memory.total`` in MiB.
VLLM_GPUS: Final[Mapping[str, VllmGpu]] = {
    gpu.name: gpu
    for gpu in (
        _gpu("h100", 81559, (9, 0)),
        _gpu("h200", 143771, (9, 0)),
        _gpu("b200", 183359, (10, 0)),
        _gpu("a100-80gb", 81920, (8, 0)),
        _gpu("a100-40gb", 40960, (8, 0)),
        _gpu("l40s", 46068, (8, 9)),
        _gpu("l4", 23034, (8, 9)),
        _gpu("a10g", 23028, (8, 6)),
    )
}
