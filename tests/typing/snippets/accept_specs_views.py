"""Correct use of the layer views and the plan: mypy reports nothing, every figure is typed."""

from typing import assert_type

from kvunits.contracts import (
    AdmissionCap,
    BlockSize,
    Bytes,
    CacheBlocks,
    Elements,
    EncoderTokens,
    EngineSpec,
    KernelSpec,
    KVHeads,
    Layers,
    ManagerSpec,
    ModelSpec,
    PoolBlocks,
    PooledBlocks,
    PoolFactor,
    Position,
    SlidingWindowLayer,
    SpanBlocks,
    TableBlocks,
    Tokens,
    Window,
    kernel_view,
    manager_view,
)
from kvunits.contracts.deploy import RankBlocks, RankBytes, RankKVHeads, engine_blocks
from kvunits.runtime.capacity import plan

layer = SlidingWindowLayer(
    sliding_window=Window(750, EncoderTokens),
    pool=PoolFactor(4),
    kv_heads=KVHeads(32),
    head_size=Elements(64),
)

either = manager_view(layer, block_size_slots=16)
assert_type(either, ManagerSpec[PooledBlocks] | ManagerSpec[Tokens])
manager = either.expect(PooledBlocks)
assert_type(manager, ManagerSpec[PooledBlocks])
assert_type(manager.sliding_window, Window[PooledBlocks] | None)
assert_type(manager.block_size, BlockSize[PooledBlocks])
assert_type(manager.page_size, Bytes)
cap = manager.max_admission_blocks_per_request(PooledBlocks(1), PooledBlocks(1500))
assert_type(cap, AdmissionCap)
assert_type(manager.max_memory_per_request(PooledBlocks(1), PooledBlocks(1500)), Bytes)
assert_type(manager.block_table_width(PooledBlocks(1500)), TableBlocks)
assert str(manager.sliding_window) == "189 pooled_block" and str(cap) == "13 cache_block"
# The view's own geometry: the blocks its window touches, a slot's block, its pages' bytes.
assert_type(manager.window_blocks(), SpanBlocks)
assert manager.window_blocks() == SpanBlocks(13)  # cdiv(189 - 1, 16) + 1
assert manager.block_of(Position(203, PooledBlocks)) == Position(12, CacheBlocks)
assert manager.bytes_for(cap) == Bytes(13 * 524288)

kernel = kernel_view(layer, block_size_slots=16).expect(EncoderTokens)
assert_type(kernel, KernelSpec[EncoderTokens])
assert_type(kernel.tokens_per_block, BlockSize[EncoderTokens])
assert_type(kernel.sliding_window, Window[EncoderTokens] | None)
assert str(kernel.tokens_per_block) == "64 encoder_token/cache_block"
assert kernel.block_of(Position(812, EncoderTokens)) == Position(12, CacheBlocks)

engine = EngineSpec(
    max_model_len=Tokens(8192),
    max_num_batched_tokens=Tokens(2048),
    max_encoder_len=EncoderTokens(6000),
    max_encoder_tokens_per_step=EncoderTokens(4),
    memory_budget=RankBytes(40 * 1024**3),
)
capacity = plan(ModelSpec.stacked("voxtral", {"audio": (layer, Layers(32))}), engine)
audio = capacity.group("audio")
assert_type(audio.admission_cap, AdmissionCap)
assert_type(audio.num_blocks, PoolBlocks)
assert_type(audio.bytes_per_request, Bytes)
assert_type(capacity.bytes_per_request, Bytes)
assert audio.admission_cap == AdmissionCap(13)
# A cap and a pool compare by name: the pool's null block is no request's.
assert audio.num_blocks.fits(audio.admission_cap)
assert_type(audio.num_blocks.usable, CacheBlocks)

# Per rank: one rank's budget, page, cap and pool are typed as a rank's.
assert_type(capacity.kv_cache_memory, RankBytes)
(rank,) = capacity.stages[0].groups
assert_type(rank.kv_heads_per_rank, RankKVHeads | None)
assert_type(rank.page_size, RankBytes)
assert_type(rank.admission_cap, RankBlocks)
assert_type(rank.num_blocks, RankBlocks)
# The scheduler's block ids: the fewest pages any rank holds (here one stage, one group).
every_rank = [g.num_blocks for stage in capacity.stages for g in stage.groups]
assert_type(engine_blocks(every_rank), PoolBlocks)
assert engine_blocks(every_rank) == audio.num_blocks
