"""The sliding-window admission cap against the blocks a request really holds.

The cap is ``min(cdiv(min(W − 1 + F, L), B) + 1, cdiv(L, B))`` (W window slots, F slots in
flight per step, L the request's longest sequence, B slots per block): the +1 covers a window
that starts mid-block, and when the window covers the whole request (``L ≤ W − 1 + F``) no
window starts mid-block, so the request never holds more than its ``cdiv(L, B)`` blocks.
One formula sizes the plan and gates admission (`kvunits.contracts.internal.admission_cap`); here it
is checked exhaustively on small geometries against the runtime's own eviction rule
(`kvunits.runtime.managers.SlidingWindowManager`), and end to end on the geometry of vLLM's
``test_get_num_blocks_to_allocate``.
"""

from __future__ import annotations

from kvunits.contracts import (
    AdmissionCap,
    CacheBlocks,
    Elements,
    KVHeads,
    SlidingWindowLayer,
    Tokens,
    Window,
    manager_view,
)
from kvunits.contracts.internal import admission_cap
from kvunits.runtime.managers import make_manager

from .support import check_pools, coordinator


def _most_held(window: int, block_size: int, in_flight: int, max_len: int) -> tuple[int, int]:
    """The most blocks a request holds at once over every schedule within the limits, found
    by the manager's eviction rule; and the formula's cap for the same geometry."""
    layer = SlidingWindowLayer(
        sliding_window=Window(window, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
    )
    spec = manager_view(layer, block_size_slots=block_size)
    manager = make_manager(spec)
    # Steps of one slot reach every num_computed c; after a step of q slots from c the
    # request holds its table less the entries evicted before the step (the coordinator
    # frees them before it allocates).
    held = max(
        manager.table_length(c + q) - manager.skipped_blocks(c)
        for c in range(max_len + 1)
        for q in range(min(in_flight, max_len - c) + 1)
    )
    return held, admission_cap(spec, in_flight, max_len)


def test_the_cap_bounds_what_a_request_holds_and_is_exact_when_the_window_covers_it() -> None:
    checked = covered = 0
    for window in range(1, 10):
        for block_size in range(1, 6):
            for in_flight in range(1, 7):
                for max_len in range(25):
                    held, cap = _most_held(window, block_size, in_flight, max_len)
                    geometry = (window, block_size, in_flight, max_len)
                    assert held <= cap, f"cap {cap} < {held} held at W, B, F, L = {geometry}"
                    if max_len <= window - 1 + in_flight:
                        # The window covers the whole request: exactly its blocks.
                        assert cap == held == -(-max_len // block_size), geometry
                        covered += 1
                    checked += 1
    assert checked == 9 * 5 * 6 * 25 and covered > 1000


def test_the_plus_one_is_needed_when_the_window_starts_mid_block() -> None:
    # B = 2, W = 4, one slot per step, L = 20: before the step from c = 6 to 7, blocks
    # wholly below 6 - 4 + 1 = 3 (block 0) are freed; the window 3-6 spans blocks 1-3 and
    # the step's slot 6 lives in block 3: cdiv(4 - 1 + 1, 2) + 1 = 3 blocks.
    assert _most_held(4, 2, 1, 20) == (3, 3)


def test_an_exact_fit_is_admitted_and_runs() -> None:
    # vLLM's test_get_num_blocks_to_allocate (tests/v1/core/test_single_type_kv_cache_manager.py):
    # block size 2, window 4, a request of 40 tokens prefilled in one step needs 20 blocks.
    # A pool of exactly 20 usable blocks (+ the null block) admits it; the old cap,
    # cdiv(min(3 + 40, 40), 2) + 1 = 21, refused it as one that "can never fit".
    layer = SlidingWindowLayer(
        sliding_window=Window(4, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
    )
    coord = coordinator({"swa": layer}, block_size=2, num_blocks=21, max_len=40, max_in_flight=40)
    swa = coord.group("swa", Tokens)
    step = coord.stepper(swa)
    step.admit("r1", Tokens(40))
    assert coord.request_cap("r1", swa) == AdmissionCap(20)
    mapping = step.allocate("r1", Tokens(40))
    assert len(mapping[0]) == 40 and coord.usage(swa).free == CacheBlocks(0)
    check_pools(coord)
    coord.free("r1")
    assert coord.usage(swa).free == CacheBlocks(20)
