"""Narrated toy cases for every eviction rule: block size 2, window 4, step by step.

Each case drives a one-group coordinator and shows the block table after every step (cache-block
ids; 0 is the null block that stands where a block was evicted) and the step's slot mapping.
The pool hands blocks out first-in first-out, starting from block 1.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvunits.contracts import (
    AdmissionCap,
    Bytes,
    CacheBlocks,
    Chunk,
    ChunkedLocalLayer,
    CrossAttentionLayer,
    Elements,
    EncoderTokens,
    FullAttentionLayer,
    KVHeads,
    LayerSpec,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    StateLayer,
    Tokens,
    Window,
    manager_view,
)
from kvunits.runtime.managers import (
    MANAGER_BY_KIND,
    NEVER,
    ChunkedLocalManager,
    CrossAttentionManager,
    FullAttentionManager,
    SlidingWindowManager,
    StateManager,
    make_manager,
)

from ..examples import examples
from .support import check_pools, toy, unresident_keys


def test_sliding_window_block_size_2_window_4() -> None:
    coord, swa, step = toy(
        "swa",
        SlidingWindowLayer(
            sliding_window=Window(4, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
        ),
        Tokens,
    )
    step.admit("r", Tokens(100))

    # Prefill tokens 0-3: blocks 1 and 2. Token 3's window is tokens 0-3: nothing to free.
    assert step.allocate("r", Tokens(4)) == [[2, 3, 4, 5]]
    assert coord.block_table("r", swa) == [1, 2]

    # Token 4 (4 computed): its window is tokens 1-4, so the first needed token is
    # 4 - 4 + 1 = 1, inside block 0 (tokens 0-1): nothing is wholly below it.
    assert step.allocate("r", Tokens(1)) == [[6]]
    assert coord.block_table("r", swa) == [1, 2, 3]

    # Token 5: window 2-5. Tokens 0-1 are out of the window: block 0 (id 1) goes, the null
    # block takes its place, and id 1 joins the back of the free queue.
    assert step.allocate("r", Tokens(1)) == [[7]]
    assert coord.block_table("r", swa) == [0, 2, 3]

    # Token 6: window 3-6. Block 1 (tokens 2-3) still holds token 3 and stays. Token 6 needs
    # a new block: the front of the queue is id 4 (id 1 waits behind 4-7).
    assert step.allocate("r", Tokens(1)) == [[8]]
    assert coord.block_table("r", swa) == [0, 2, 3, 4]

    # Token 7: window 4-7. Tokens 2-3 are out: block 1 (id 2) goes.
    assert step.allocate("r", Tokens(1)) == [[9]]
    assert coord.block_table("r", swa) == [0, 0, 3, 4]
    assert coord.usage(swa).used == CacheBlocks(2)

    # A chunk of 3 (tokens 8-10, 8 computed): the step's first query, token 8, reads back to
    # token 5, so block 2 (tokens 4-5) stays although tokens 9 and 10 no longer need it.
    assert step.allocate("r", Tokens(3)) == [[10, 11, 12]]
    assert coord.block_table("r", swa) == [0, 0, 3, 4, 5, 6]
    check_pools(coord)
    coord.free("r")
    check_pools(coord)


def test_sliding_window_zero_steps_jumps_free_and_readmit() -> None:
    layer = SlidingWindowLayer(
        sliding_window=Window(3, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
    )
    # 6 usable blocks: the cap, cdiv(3 - 1 + 8, 2) + 1.
    coord, swa, step = toy("swa", layer, Tokens, num_blocks=7, max_in_flight=8)
    step.admit("r", Tokens(40))
    # Tokens 0-7 in one step (0 computed before it: nothing to evict): blocks 1-4.
    step.allocate("r", Tokens(8))
    assert coord.block_table("r", swa) == [1, 2, 3, 4]
    # A step of no tokens still evicts: 8 computed, the next query (token 8) reads 6-8, so
    # blocks 0-2 (tokens 0-5) go at once, to the back of the queue behind blocks 5 and 6,
    # the last first.
    assert step.allocate("r", Tokens(0)) == [[]]
    assert coord.block_table("r", swa) == [0, 0, 0, 4]
    assert coord.slot_mapping("r", swa) == []
    # Nothing more to evict: a second empty step frees nothing twice (the null entries stay
    # null, and the pool would refuse a double free).
    step.allocate("r", Tokens(0))
    assert coord.block_table("r", swa) == [0, 0, 0, 4]
    assert coord.usage(swa).free == CacheBlocks(5)
    # Token 8 takes the front of the queue, block 5 (3, 2, 1 wait behind 6).
    assert step.allocate("r", Tokens(1)) == [[10]]
    assert coord.block_table("r", swa) == [0, 0, 0, 4, 5]
    check_pools(coord)
    # Freed mid-stream, the request returns its two live blocks (not the null ones) ...
    coord.free("r")
    assert coord.usage(swa).free == CacheBlocks(6)
    check_pools(coord)
    # ... and its id can be admitted again, with a fresh table: the last end left the pool
    # as built (no block cached), so block 1, the front of its ids again.
    step.admit("r", Tokens(40))
    assert step.allocate("r", Tokens(2)) == [[2, 3]]
    assert coord.block_table("r", swa) == [1]
    check_pools(coord)


def test_a_step_reuses_the_blocks_it_evicts() -> None:
    # Window 3, 3 tokens a step: the cap is cdiv(3 - 1 + 3, 2) + 1 = 4 blocks, and the pool
    # has exactly 4, so a stream can only go on if each step counts the blocks it evicts.
    layer = SlidingWindowLayer(
        sliding_window=Window(3, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
    )
    coord, swa, step = toy("swa", layer, Tokens, num_blocks=5, max_in_flight=3)
    step.admit("r", Tokens(300))
    assert coord.request_cap("r", swa) == AdmissionCap(4)
    assert coord.usage(swa).capacity == CacheBlocks(4)
    assert step.allocate("r", Tokens(3)) == [[2, 3, 4]]  # tokens 0-2: blocks 1, 2
    assert step.allocate("r", Tokens(3)) == [[5, 6, 7]]  # tokens 3-5: block 3; 4 is free
    # Tokens 6-8 need 2 blocks and 1 is free. The step's first query, token 6, reads 4-6, so
    # blocks 1 and 2 (tokens 0-3) go first, to the back of the queue, the last first (as
    # vLLM 0.33's `_remove_blocks_in_range` frees them): the step gets 4 (never handed out)
    # and 2. (vLLM puts them at its queue's front, ahead of 4: its step gets 2 and 1.)
    assert step.allocate("r", Tokens(3)) == [[8, 9, 4]]
    assert coord.block_table("r", swa) == [0, 0, 3, 4, 2]
    for _ in range(97):  # and so on, to the declared 300 tokens
        step.allocate("r", Tokens(3))
    assert coord.seq_len("r", swa) == Tokens(300)
    check_pools(coord)


def test_pooled_sliding_window_block_size_2() -> None:
    # The kernel's window is 7 encoder tokens, P = 2: the manager keeps
    # pool_window(7, 2) = cdiv(6, 2) + 1 = 4 pooled slots (a block holds 2 slots = 4 tokens).
    layer = SlidingWindowLayer(
        sliding_window=Window(7, EncoderTokens),
        pool=PoolFactor(2),
        kv_heads=KVHeads(1),
        head_size=Elements(8),
    )
    assert manager_view(layer, block_size_slots=2).sliding_window == Window(4, PooledBlocks)
    coord, audio, step = toy("audio", layer, PooledBlocks)
    step.admit("r", PooledBlocks(100))
    for _ in range(5):  # slots 0-4: encoder tokens 0-9
        step.allocate("r", PooledBlocks(1))
    assert coord.block_table("r", audio) == [1, 2, 3]
    # Slot 5 (5 computed) holds tokens 10-11; token 10 reads back to 10 - 6 = 4, in slot 2,
    # block 1. The first needed slot is 5 - 4 + 1 = 2: block 0 (slots 0-1) goes.
    step.allocate("r", PooledBlocks(1))
    assert coord.block_table("r", audio) == [0, 2, 3]
    table = list(coord.block_table("r", audio))
    assert not unresident_keys(
        table, block_size=2, pool=2, kind="sliding_window", sliding_window=7, chunk=None,
        first_query=10, end_query=12,
    )  # fmt: skip
    # In kernel units: slot 5 is row 2 of block id 3; its tokens are rows 3·4 + 2, + 3.
    inputs = coord.kernel_inputs("r", audio)
    assert inputs.row_mapping == (14, 15)
    assert inputs.seq_len == EncoderTokens(12)
    assert str(inputs.tokens_per_block) == "4 encoder_token/cache_block"


def test_full_attention_block_size_2() -> None:
    coord, full, step = toy(
        "full", FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8)), Tokens
    )
    step.admit("r", Tokens(14))  # at most 7 blocks: the whole pool
    # Tokens 0-2: two blocks, the second half full.
    assert step.allocate("r", Tokens(3)) == [[2, 3, 4]]
    # Token 3 fills block 1; token 4 opens block 2. Nothing is ever evicted.
    assert step.allocate("r", Tokens(1)) == [[5]]
    assert step.allocate("r", Tokens(1)) == [[6]]
    assert coord.block_table("r", full) == [1, 2, 3]
    coord.free("r")
    assert coord.usage(full).free.numerical_value_in(CacheBlocks) == 7


def test_chunked_local_block_size_2_chunk_4() -> None:
    layer = ChunkedLocalLayer(chunk=Chunk(4, Tokens), kv_heads=KVHeads(1), head_size=Elements(8))
    coord, local, step = toy("local", layer, Tokens)
    step.admit("r", Tokens(100))
    # Tokens 0-2, chunk 0 (tokens 0-3).
    assert step.allocate("r", Tokens(3)) == [[2, 3, 4]]
    # Token 3, still chunk 0: everything stays.
    assert step.allocate("r", Tokens(1)) == [[5]]
    assert coord.block_table("r", local) == [1, 2]
    # Token 4 opens chunk 1 (tokens 4-7): it reads only tokens 4..4, so chunk 0's blocks go.
    assert step.allocate("r", Tokens(1)) == [[6]]
    assert coord.block_table("r", local) == [0, 0, 3]
    # Tokens 5-9 in one step: the first query, token 5, is in chunk 1 (starts at token 4);
    # the step spills into chunk 2 (tokens 8-11), all of it allocated.
    assert step.allocate("r", Tokens(5)) == [[7, 8, 9, 10, 11]]
    assert coord.block_table("r", local) == [0, 0, 3, 4, 5]
    # Token 10 (10 computed, chunk 2 from token 8): blocks 2 and 3 (tokens 4-7) go.
    assert step.allocate("r", Tokens(1)) == [[12]]
    assert coord.block_table("r", local) == [0, 0, 0, 0, 5, 6]
    check_pools(coord)


def test_cross_attention_allocated_once() -> None:
    layer = CrossAttentionLayer(
        encoder_length=EncoderTokens(5), kv_heads=KVHeads(1), head_size=Elements(8)
    )
    coord, cross, step = toy("cross", layer, PooledBlocks)  # P = 1: one encoder token a slot
    coord.admit("r")
    # The first step allocates the whole declared encoder length, 5 slots = 3 blocks, even
    # when it writes none of it yet.
    assert step.allocate("r", PooledBlocks(0)) == [[]]
    assert coord.block_table("r", cross) == [1, 2, 3]
    assert step.allocate("r", PooledBlocks(5)) == [[2, 3, 4, 5, 6]]
    # Decode steps write nothing here and allocate nothing.
    assert step.allocate("r", PooledBlocks(0)) == [[]]
    assert coord.block_table("r", cross) == [1, 2, 3]
    assert coord.request_cap("r", cross).numerical_value_in(AdmissionCap) == 3


def test_state_one_block_per_request() -> None:
    coord, mamba, step = toy(
        "mamba", StateLayer(state_size=Bytes(4096)), Tokens, num_blocks=3, max_in_flight=9
    )
    coord.admit("a")
    coord.admit("b")
    # One state per request, whatever the length; a state has no rows per token.
    assert step.allocate("a", Tokens(7)) == [[]]
    assert step.allocate("b", Tokens(1)) == [[]]
    assert step.allocate("a", Tokens(9)) == [[]]
    assert coord.block_table("a", mamba) == [1]
    assert coord.block_table("b", mamba) == [2]
    assert coord.slot_mapping("a", mamba) == []


@pytest.mark.parametrize(
    ("layer", "cls"),
    [
        (FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8)), FullAttentionManager),
        (
            SlidingWindowLayer(
                sliding_window=Window(4, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
            ),
            SlidingWindowManager,
        ),
        (
            ChunkedLocalLayer(chunk=Chunk(4, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)),
            ChunkedLocalManager,
        ),
        (
            CrossAttentionLayer(
                encoder_length=EncoderTokens(5), kv_heads=KVHeads(1), head_size=Elements(8)
            ),
            CrossAttentionManager,
        ),
        (StateLayer(state_size=Bytes(1024)), StateManager),
    ],
)
def test_dispatch_table(layer: object, cls: type) -> None:
    spec = manager_view(layer, block_size_slots=2)  # type: ignore[arg-type]
    assert MANAGER_BY_KIND[spec.kind] is cls
    assert type(make_manager(spec)) is cls
    other = next(k for k in MANAGER_BY_KIND.values() if k is not cls)
    with pytest.raises(Exception, match="manages"):
        other(spec)


def test_sliding_rule_matches_pool_window_for_every_small_geometry() -> None:
    # skipped_blocks(c) frees exactly the blocks below c - window + 1, for pooled windows too.
    for window in range(1, 20):
        for pool in range(1, 5):
            layer = SlidingWindowLayer(
                sliding_window=Window(window, EncoderTokens),
                pool=PoolFactor(pool),
                kv_heads=KVHeads(1),
                head_size=Elements(8),
            )
            for block_size in (1, 2, 3, 16):
                manager = make_manager(manager_view(layer, block_size_slots=block_size))
                w = -(-(window - 1) // pool) + 1
                for c in range(60):
                    assert manager.skipped_blocks(c) == max(0, c - w + 1) // block_size


@settings(max_examples=examples(200))
@given(
    kind=st.sampled_from(("full", "sliding", "chunked", "cross", "state")),
    block_size=st.integers(1, 6),
    size=st.integers(1, 20),
    pool=st.integers(1, 4),
    done=st.integers(0, 12),
)
def test_reach_and_first_evicting_answer_for_the_rules(
    kind: str, block_size: int, size: int, pool: int, done: int
) -> None:
    # The step's shortcuts (issue 14): reach(b) is the most slots with table_length <= b,
    # first_evicting(k) the first num_computed with skipped_blocks > k, NEVER where none is:
    # checked against the two rules themselves, over every count up to well past both.
    layer: LayerSpec
    if kind == "full":
        layer = FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8))
    elif kind == "sliding":
        layer = SlidingWindowLayer(
            sliding_window=Window(size, EncoderTokens),
            pool=PoolFactor(pool),
            kv_heads=KVHeads(1),
            head_size=Elements(8),
        )
    elif kind == "chunked":
        layer = ChunkedLocalLayer(
            chunk=Chunk(size * block_size, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
        )
    elif kind == "cross":
        layer = CrossAttentionLayer(
            encoder_length=EncoderTokens(size), kv_heads=KVHeads(1), head_size=Elements(8)
        )
    else:
        layer = StateLayer(state_size=Bytes(64))
    m = make_manager(manager_view(layer, block_size_slots=block_size))
    horizon = range(0, 8 * (size + block_size) * (done + 2))
    for blocks in range(done + 1):
        fitting = [s for s in horizon if m.table_length(s) <= blocks]
        if not fitting:
            assert m.reach(blocks) == -1
        elif fitting[-1] == horizon[-1]:
            assert m.reach(blocks) == NEVER
        else:
            assert m.reach(blocks) == fitting[-1]
            assert fitting == list(range(fitting[-1] + 1))  # table_length never decreases
    evicting = [n for n in horizon if m.skipped_blocks(n) > done]
    assert m.first_evicting(done) == (evicting[0] if evicting else NEVER)
