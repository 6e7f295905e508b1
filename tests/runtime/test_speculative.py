"""Speculative steps: lookahead slots with a step, and the rollback of rejected ones.

vLLM allocates ``num_lookahead_tokens`` slots beyond a step's tokens and, after verification,
lowers ``num_computed_tokens`` by the rejected drafts without freeing anything
(``Scheduler.update_from_output``; /work/research/prefix/SPEC.md §3). kvunits counts a
step's lookahead as positions of the step (every one gets its slot, the admission cap covers
them as in-flight positions) and `rollback` returns the blocks only rejected positions used.
"""

from __future__ import annotations

import pytest

from kvunits.contracts import (
    Elements,
    FullAttentionLayer,
    KVHeads,
    SlidingWindowLayer,
    Tokens,
    Window,
)
from kvunits.runtime import NULL_BLOCK, ContentKeys, RequestError

from .support import check_pools, coordinator, snapshot, toy, unresident_keys


def test_vllm_allocate_with_lookahead() -> None:
    """vLLM ``test_allocate_with_lookahead`` (``tests/v1/core/test_kv_cache_utils.py`` at
    commit eaba533a5e3853c730318c8b5960de4d159a82ed): block size 4, a step of 3 tokens with
    2 lookahead slots holds ``cdiv(5, 4) = 2`` blocks, with 4 ``cdiv(7, 4) = 2``."""
    for lookahead, blocks in ((2, 2), (4, 2)):
        coord = coordinator(
            {"layer1": FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8))},
            block_size=4,
            num_blocks=10,
            max_len=100,
            max_in_flight=100,
        )
        h = coord.group("layer1", Tokens)
        step = coord.stepper(h)
        step.admit("0", Tokens(36))  # vLLM declares no length; 9 blocks fit the pool
        mapping = step.allocate_speculative("0", Tokens(3), lookahead=(Tokens(lookahead),))
        assert len(coord.block_table("0", h)) == blocks
        assert len(mapping[0]) == 3 + lookahead  # a slot for every position


def test_rejected_drafts_return_the_blocks_only_they_used() -> None:
    """vLLM ``test_hybrid_model_mamba_align_with_dynamic_draft_tokens`` (issue #39271; vLLM
    main, 2026), with a full and a sliding-window group: 55 tokens, then a decode step of 1
    token and 16 drafts (positions 55-71, into block 4), 15 rejected, then 1 token and 1
    draft. vLLM keeps block 4 and the last round takes no block; kvunits returns block 4 at
    the rollback (positions 64-71 were all rejected), and the last round takes none either."""
    coord = coordinator(
        {
            "full": FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8)),
            "sw": SlidingWindowLayer(
                sliding_window=Window(32, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
            ),
        },
        block_size=16,
        num_blocks=30,
        max_len=256,
        max_in_flight=64,
    )
    full, sw = coord.group("full", Tokens), coord.group("sw", Tokens)
    step = coord.stepper(full, sw)
    step.admit("r", Tokens(256), Tokens(256))
    step.allocate("r", Tokens(55), Tokens(55))
    step.allocate_speculative("r", Tokens(1), Tokens(1), lookahead=(Tokens(16), Tokens(16)))
    table = list(coord.block_table("r", full))
    assert len(table) == 5  # cdiv(72, 16)
    step.rollback("r", Tokens(15), Tokens(15))  # 1 draft accepted
    assert step.seq_lens("r") == (Tokens(57), Tokens(57))
    assert list(coord.block_table("r", full)) == table[:4]
    assert coord._core.pools[0].ref_count(table[4]) == 0
    before = [len(coord.block_table("r", h)) for h in (full, sw)]
    step.allocate_speculative("r", Tokens(1), Tokens(1), lookahead=(Tokens(1), Tokens(1)))
    assert [len(coord.block_table("r", h)) for h in (full, sw)] == before
    check_pools(coord)


def test_a_window_stays_resident_across_rollbacks() -> None:
    """Block size 2, window 4 tokens (the query at t reads t − 3 .. t). Slots 0-4 are
    computed. A step of 1 token and 4 drafts (slots 5-9) starts at slot 5, so it evicts
    block 0 (slots 0-1: the query at 5 reads 2-5) and takes blocks for slots 6-9. All 4
    drafts are rejected: blocks 3 and 4 (slots 6-9) go back, to the queue's front; block 0
    stays evicted, and the
    next step, at slot 6, finds every key it reads (slots 3-6) resident."""
    coord, h, step = toy(
        "sw",
        SlidingWindowLayer(
            sliding_window=Window(4, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
        ),
        Tokens,
        num_blocks=10,
    )
    step.admit("r", Tokens(40))
    step.allocate("r", Tokens(5))
    assert list(coord.block_table("r", h)) == [1, 2, 3]
    step.allocate_speculative("r", Tokens(1), lookahead=(Tokens(4),))
    assert list(coord.block_table("r", h)) == [NULL_BLOCK, 2, 3, 4, 5]
    step.rollback("r", Tokens(4))
    assert list(coord.block_table("r", h)) == [NULL_BLOCK, 2, 3]
    # The ids never handed out, then the blocks the rollback gave back (at the queue's front:
    # taken again first), then block 1, which the window evicted (at the back).
    assert coord._core.pools[0].free_queue() == [6, 7, 8, 9, 4, 5, 1]
    step.allocate("r", Tokens(1))
    table = list(coord.block_table("r", h))
    assert not unresident_keys(
        table,
        block_size=2,
        pool=1,
        kind="sliding_window",
        sliding_window=4,
        chunk=None,
        first_query=6,
        end_query=7,
    )
    check_pools(coord)


def test_lookahead_is_cached_only_once_accepted() -> None:
    """A block filled by lookahead positions is not cached until a later step accepts them:
    content of 48 tokens (a hit is at most 47, 2 blocks of 16); a step of 16 tokens and 16
    drafts leaves block 1 uncommitted, so another request finds 16 tokens; once the next step
    (of 0 tokens) accepts the drafts, a third finds 32."""
    coord = coordinator(
        {"t": FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8))},
        block_size=16,
        num_blocks=20,
        max_len=64,
        max_in_flight=64,
    )
    h = coord.group("t", Tokens)
    step = coord.stepper(h)
    content = ContentKeys(list(range(48)), Tokens)

    def admit(rid: str) -> int:
        (hit,) = step.admit_with_prefix(rid, Tokens(64), prefix=(h.block_hashes(content),))
        return hit.numerical_value_in(Tokens)

    assert admit("a") == 0
    step.allocate_speculative("a", Tokens(16), lookahead=(Tokens(16),))
    assert admit("b") == 16
    step.allocate("a", Tokens(0))
    assert admit("c") == 32
    check_pools(coord)


def test_a_rollback_beyond_the_latest_lookahead_changes_nothing() -> None:
    coord, _, step = toy(
        "t",
        FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8)),
        Tokens,
        num_blocks=10,
        max_in_flight=8,
    )
    step.admit("r", Tokens(18))
    step.allocate("r", Tokens(3))
    before = snapshot(coord)
    with pytest.raises(RequestError, match="its latest step left 0 speculative"):
        step.rollback("r", Tokens(1))
    step.allocate_speculative("r", Tokens(1), lookahead=(Tokens(2),))
    step.rollback("r", Tokens(1))
    before = snapshot(coord)
    with pytest.raises(RequestError, match="its latest step left 1 speculative"):
        step.rollback("r", Tokens(2))
    assert snapshot(coord) == before
    # A step accepts what is left: nothing more can be rolled back.
    step.allocate("r", Tokens(1))
    with pytest.raises(RequestError, match="only those can be rolled back"):
        step.rollback("r", Tokens(1))
    # The lookahead counts in the step's max_in_flight.
    with pytest.raises(RequestError, match="more than the group's max_in_flight of 8"):
        step.allocate_speculative("r", Tokens(1), lookahead=(Tokens(8),))
