"""Nothing per request stays allocated once every request is freed (issue 25, item 5).

A Python dict keeps its table's size after its entries are popped: the coordinator's maps
keyed by request (offsets, speculative tails, the policy's arrivals and priorities) are
emptied with ``clear`` when the last request ends, and the request table's arrays are
emptied. A pool whose every block is free and none cached is as built (no queue). What stays
with prefix caching is the cache: the free blocks holding a registered prefix, bounded by the
pool's size.
"""

from __future__ import annotations

import gc
import os
import sys
import tracemalloc
from array import array
from itertools import pairwise
from typing import Any

import pytest

import kvunits.runtime
from kvunits.contracts import (
    Elements,
    FullAttentionLayer,
    KVHeads,
    SlidingWindowLayer,
    Tokens,
    Window,
)
from kvunits.contracts.internal import magnitude
from kvunits.runtime import AdmissionPolicy, ContentKeys, KVCacheCoordinator, _table
from kvunits.runtime._table import CAPACITY, COLD, SKIPPED, START

from .support import check_pools, coordinator


def text_alone(*, block_size: int = 4, **sizes: Any) -> KVCacheCoordinator:
    """A coordinator of one full-attention text group (one head of 8: what is measured here
    is the allocator's own state, not the cache), in blocks of ``block_size`` tokens;
    ``sizes`` as `support.coordinator` takes them."""
    return coordinator(
        {"text": FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8))},
        block_size=block_size,
        **sizes,
    )


def test_every_map_keyed_by_request_is_emptied_when_the_last_request_ends() -> None:
    coord = text_alone(
        num_blocks=2_000,
        max_len=16,
        max_in_flight=8,
        admission=AdmissionPolicy(kind="on_demand", scheduling_policy="priority"),
    )
    text = coord.group("text", Tokens)
    step = coord.stepper(text)
    core = coord._core
    empty = sys.getsizeof({})
    for round_ in range(2):
        ids = [f"r{round_}-{i}" for i in range(300)]
        for i, rid in enumerate(ids):
            step.admit(rid, Tokens(16), priority=i % 3)
            step.allocate_speculative(rid, Tokens(4), lookahead=(Tokens(2),))
        maps = [core.table.offsets, core.specs]
        policy = coord._policy  # the policy's bookkeeping
        maps += [policy.arrival, policy.priority]
        assert all(sys.getsizeof(m) > empty for m in maps)
        for rid in ids:
            coord.free(rid)
        assert [sys.getsizeof(m) for m in maps] == [empty] * len(maps)
        assert len(core.table.hot) == len(core.table.st) == 0
        assert all(len(slab) == 0 for slab in core.table.slabs)


def test_fcfs_keeps_no_arrival_and_the_last_free_empties_the_priorities() -> None:
    """Only ``scheduling_policy = "priority"`` reads arrivals (vLLM 0.33's
    ``Scheduler.schedule``: fcfs preempts ``self.running[-1]``): fcfs stores none."""
    coord = text_alone(
        num_blocks=2_000,
        max_len=16,
        max_in_flight=8,
        admission=AdmissionPolicy(kind="on_demand", scheduling_policy="fcfs"),
    )
    step = coord.stepper(coord.group("text", Tokens))
    policy = coord._policy
    ids = [f"r{i}" for i in range(300)]
    for i, rid in enumerate(ids):
        step.admit(rid, Tokens(16), priority=i % 3)
    assert policy.arrival == {} and len(policy.priority) == 200
    for rid in ids:
        coord.free(rid)
    assert sys.getsizeof(policy.priority) == sys.getsizeof({})


def test_slab_garbage_stays_bounded_on_the_fast_and_boundary_paths() -> None:
    """A long decode moves segments on the boundary path; a move into a slab whose garbage
    is due goes to the general path, which compacts first: a held block costs its entry and
    a bounded share of spare room and garbage, however long requests run. A pool that only
    takes a few blocks at a time keeps no table of ids."""
    coord = text_alone(
        num_blocks=80_000,
        max_len=1_024,
        max_in_flight=8,
    )
    step = coord.stepper(coord.group("text", Tokens))
    core = coord._core
    table = core.table
    ids = [f"r{i}" for i in range(256)]
    for rid in ids:
        step.admit(rid, Tokens(1_024))
    for _ in range(600):
        for rid in ids:
            step.advance(rid, Tokens(1))
        slab, garbage = table.slabs[0], table.garbage[0]
        biggest = max(table.field(table.offsets[rid], 0, CAPACITY) for rid in ids)
        assert garbage < max(_table._COMPACT_MIN, len(slab) >> 2) + biggest
    held = sum(len(core.block_table(rid, 0)) for rid in ids)  # 150 blocks each
    assert len(slab) < 2 * held  # live entries, their spare room (a quarter), the garbage
    assert len(core.pools[0]._iota) == 0
    for rid in ids:
        coord.free(rid)
    assert len(core.pools[0]._iota) == 0


@pytest.mark.parametrize("streams", [1, 2, 4, 16])
def test_a_handful_of_requests_keeps_the_garbage_of_a_few_blocks(streams: int) -> None:
    """The garbage a slab keeps before it is compacted ahead of growing is a quarter of it,
    or `_table._COMPACT_MIN` entries (64: 256 byte) where that is more: at a handful of
    requests a held block costs what it costs at hundreds (above), where a floor of 1,024
    entries (4 KiB) was most of the slab: 4 requests of 21 blocks, the memory trace of
    `benchmarks/vs_vllm.py`, held 13.7 byte a block, vLLM 9.3. A segment's move into a slab
    that would then be due compacts it first, per request and in a batch."""
    coord = text_alone(
        num_blocks=5_000,
        max_len=1_024,
        max_in_flight=32,
    )
    step = coord.stepper(coord.group("text", Tokens))
    table = coord._core.table
    ids = [f"r{i}" for i in range(streams)]
    for rid in ids:
        step.admit(rid, Tokens(1_024))
        step.advance(rid, Tokens(32))
    for n in range(568):
        if n % 2:
            step.advance_all(ids, Tokens(1))
        else:
            for rid in ids:
                step.advance(rid, Tokens(1))
        slab, garbage = table.slabs[0], table.garbage[0]
        biggest = max(table.field(table.offsets[rid], 0, CAPACITY) for rid in ids)
        # 64 entries, or a quarter of the slab, and the segment whose move made it so.
        assert garbage < max(64, len(slab) >> 2) + biggest, (n, garbage, len(slab))
    held = sum(len(coord._core.block_table(rid, 0)) for rid in ids)
    assert held == 150 * streams
    # Live entries, their room (a quarter more), garbage short of a quarter of the slab:
    # 6.7 byte a held block at most, where the 1,024 entries' floor allowed 4,096 byte more.
    assert len(slab) <= held * 5 // 3, (len(slab), held)


def test_a_table_is_placed_first_without_spare_room() -> None:
    """A request's segment is placed first with its entries alone (`_table.grown`): 300
    requests whose prompt fills 3 blocks hold 900 slab entries (with 4 spare entries each, as
    before, 2,100); the block after the prompt moves the segment with a quarter more room, at
    least 8 (4 entries -> capacity 12). The fields' table, grown a row at a time, holds no
    spare rows: only what an array keeps to append (a sixteenth)."""
    coord = text_alone(
        num_blocks=5_000,
        max_len=64,
        max_in_flight=16,
    )
    step = coord.stepper(coord.group("text", Tokens))
    table = coord._core.table
    ids = [f"r{i}" for i in range(300)]
    for rid in ids:
        step.admit(rid, Tokens(64))
        step.advance(rid, Tokens(12))
    assert len(table.slabs[0]) == 900
    st = table.st
    # Rows for the 300 requests, none spare (grown by doubling, it held 512), and an array's
    # own room to append: a sixteenth and 7 items (CPython's `array_resize`).
    assert len(st) == 300 * COLD and not table.spare
    room = (sys.getsizeof(st) - sys.getsizeof(array(st.typecode))) // st.itemsize - len(st)
    assert 0 <= room <= (len(st) >> 4) + 7, room
    assert {table.field(table.offsets[rid], 0, CAPACITY) for rid in ids} == {3}
    step.advance(ids[0], Tokens(1))
    assert table.field(table.offsets[ids[0]], 0, CAPACITY) == 12
    assert len(table.slabs[0]) == 912


def test_caps_are_derived_from_the_declared_lengths_and_given_back() -> None:
    """A request stores its declared length, not its cap: the cap it reserved is derived from
    it (`AdmissionLedger.caps_of`) when read and when given back. Requests declaring lengths of
    1 .. 64 tokens (caps of 1 .. 16 blocks of 4) and a sliding window (its cap: the window
    plus a step, `admission_cap`) leave the reservation at the sum of the caps of those still
    admitted after every free, and at 0 after the last."""
    coord = coordinator(
        {
            "text": FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8)),
            "local": SlidingWindowLayer(
                sliding_window=Window(8, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
            ),
        },
        block_size=4,
        num_blocks=5_000,
        max_len=64,
        max_in_flight=4,
    )
    text, local = coord.group("text", Tokens), coord.group("local", Tokens)
    step = coord.stepper(text, local)
    ledger = coord._core.ledger
    caps = {}
    for i in range(40):
        rid, length = f"r{i}", 1 + (i * 37) % 64
        step.admit(rid, Tokens(length), Tokens(length))
        caps[rid] = ledger.caps(rid, [length, length])
        assert [magnitude(coord.request_cap(rid, h)) for h in (text, local)] == caps[rid]
    assert len({c[0] for c in caps.values()}) > 10  # many caps, not one
    for rid in list(caps):
        coord.free(rid)
        del caps[rid]
        assert ledger.reserved == [sum(c[g] for c in caps.values()) for g in (0, 1)]
    assert ledger.reserved == [0, 0]


def _runtime_bytes() -> int:
    """What the runtime's files hold now (tracemalloc must be tracing), after a collection."""
    gc.collect()
    runtime = os.path.dirname(kvunits.runtime.__file__)
    snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, runtime + "/*")])
    return sum(s.size for s in snap.statistics("filename"))


#: What the runtime's lines may still hold after the last free, whatever ran: the
#: interpreter's one cached slice object (56 byte, CPython keeps the last one freed) and
#: allocator slack; nothing that grows with requests, steps or blocks.
_LEFT_BOUND = 256


@pytest.mark.parametrize("shared", [False, True], ids=["pool per group", "shared pool"])
def test_after_the_last_free_the_runtime_holds_what_it_held_when_built(shared: bool) -> None:
    """Admit, step (prompts, decode, speculative steps and rollbacks), free: three waves of
    60 requests, then one more, leave the runtime's files holding what they held when the
    coordinator was built, within `_LEFT_BOUND`: no request's fields, maps or table room,
    and no block id handed out (a pool whose every block is free and none cached is as
    built, `PoolPlan._emit_built`: its queue emptied, its ids handed out from 1 again). The
    pools below run out of fresh ids, so later steps take freed ones from the queue."""
    coord = coordinator(
        {
            "text": FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8)),
            "local": SlidingWindowLayer(
                sliding_window=Window(8, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
            ),
        },
        block_size=4,
        num_blocks=1_200 if shared else 600,
        max_len=128,
        max_in_flight=16,
        reserve=False,
        shared=shared,
    )
    text, local = coord.group("text", Tokens), coord.group("local", Tokens)
    step = coord.stepper(text, local)
    pools = list({id(p): p for p in coord._core.pools}.values())
    tracemalloc.start()
    try:
        built = _runtime_bytes()
        ran_out = False
        for wave in range(3):
            ids = [f"w{wave}-{i}" for i in range(60)]
            for rid in ids:
                step.admit(rid, Tokens(128), Tokens(128))
                step.advance(rid, Tokens(16), Tokens(16))
            for _ in range(8):
                for rid in ids:
                    step.allocate_speculative(rid, Tokens(1), Tokens(1), lookahead=(Tokens(2),) * 2)
                    step.rollback(rid, Tokens(1), Tokens(1))
            ran_out = ran_out or all(p._fresh == p.num_blocks for p in pools)
            for rid in ids[:-1]:
                coord.free(rid)
            assert all(p.num_used and len(p._queue) for p in pools)  # not idle: queue kept
            coord.free(ids[-1])
            assert all((p._fresh, len(p._queue)) == (1, 0) for p in pools)
        step.admit("last", Tokens(128), Tokens(128))
        step.advance("last", Tokens(16), Tokens(16))
        coord.free("last")
        left = _runtime_bytes() - built
    finally:
        tracemalloc.stop()
    assert ran_out  # every id was handed out before the frees
    assert all((p._fresh, len(p._queue), p._head, len(p._iota)) == (1, 0, 0, 0) for p in pools)
    assert not coord._core._caps_by_lengths  # the lean admission's caps per lengths, emptied too
    assert left <= _LEFT_BOUND, left


def test_cached_free_blocks_are_what_stays_with_prefix_caching() -> None:
    """With prefix caching the free blocks that hold a registered prefix stay after the last
    free, with their place in the queue (the order evicts the least recently used first):
    that is the cache, bounded by the pool's size. What stays is their queue entries, their
    keys in the pool and the prefix cache's map, within a bound per cached block; the pool
    is not reset while one is cached."""
    coord = text_alone(
        num_blocks=2_000,
        max_len=128,
        max_in_flight=128,
        reserve=False,
    )
    text = coord.group("text", Tokens)
    step = coord.stepper(text)
    pool = coord._core.pools[0]
    prompt = list(range(64))  # 16 blocks shared by every request
    tracemalloc.start()
    try:
        built = _runtime_bytes()
        for wave in range(2):
            ids = [f"w{wave}-{i}" for i in range(100)]
            for i, rid in enumerate(ids):
                own = [1_000 + 100 * wave + i] * 8  # 2 blocks of each request's own
                hashes = text.block_hashes(ContentKeys(prompt + own, Tokens))
                got = step.admit_with_prefix(rid, Tokens(128), prefix=(hashes,))
                step.advance(rid, Tokens(72 - magnitude(got[0])))
            for _ in range(20):
                for rid in ids:
                    step.advance(rid, Tokens(1))
            for rid in ids:
                coord.free(rid)
        left = _runtime_bytes() - built
    finally:
        tracemalloc.stop()
    cached = pool.num_cached_free
    assert cached == 16 + 2 * 200  # the prompt's blocks and each request's own two
    assert pool.num_used == 0 and pool._fresh > 1
    queued = len(pool._queue) - pool._head
    assert queued >= cached
    # Per cached block (about 430 byte): its id (an int), its key (a 32-byte digest), its
    # entries in the pool's maps (its key and map; free) and its list in the cache map; 4
    # byte a queue entry. Nothing else: no request's fields, maps or table room.
    assert left <= 512 * cached + 4 * queued * 17 // 16 + _LEFT_BOUND, (left, cached, queued)


def test_an_idle_pool_keeps_one_prompts_cache_and_not_the_order_of_the_rest() -> None:
    """One prompt for all (a shared system prompt: 16 cached blocks), each request's own
    tokens generated without content: once the last request ends, the pool keeps the
    prompt's blocks and their order, not the order of the thousands of others freed
    (`PoolPlan._emit_idle`; vLLM 0.33 keeps only its hashes then, its queue being built up
    front): what stays is within the bound per cached block of the test above. A second
    wave runs as the first (it takes the prompt again, evicting nothing), and taking every
    other block evicts none of the prompt's."""
    coord = text_alone(num_blocks=6_000, max_len=128, max_in_flight=256, reserve=False)
    text = coord.group("text", Tokens)
    step = coord.stepper(text)
    pool = coord._core.pools[0]
    prompt = text.block_hashes(ContentKeys(list(range(66)), Tokens))  # 16 blocks, 2 tokens
    tracemalloc.start()
    try:
        built = _runtime_bytes()
        for wave in range(2):
            ids = [f"w{wave}-{i}" for i in range(256)]
            for rid in ids:
                got = step.admit_with_prefix(rid, Tokens(128), prefix=(prompt,))
                assert magnitude(got[0]) == (64 if wave or rid != ids[0] else 0)
                step.advance(rid, Tokens(80 - magnitude(got[0])))
            for _ in range(12):
                for rid in ids:
                    step.advance(rid, Tokens(1))
            for rid in ids[:-1]:
                coord.free(rid)
            assert len(pool._queue) - pool._head > 1_000  # the order of those freed, kept
            assert not coord._core.fast.free(ids[-1], {}, {}, {})  # due: the general path
            coord.free(ids[-1])
            assert pool.num_cached_free == len(pool._queue) == pool._idle == 16
            assert pool._fresh == 17 and pool.free_queue()[-16:] == list(range(16, 0, -1))
        left = _runtime_bytes() - built
    finally:
        tracemalloc.stop()
    assert left <= 512 * 16 + _LEFT_BOUND, left
    check_pools(coord)
    taken = pool.allocate_n(pool.num_free - 16)  # every block but the prompt's: none evicted
    assert len(taken) == pool.num_blocks - 17 and pool.num_cached_free == pool.num_free == 16
    assert pool.allocate_n(1) == [16]  # then its tail (freed first by each request)


def test_a_window_segment_moves_a_logarithmic_number_of_times() -> None:
    """A sliding window's table holds a few live entries but grows at its end for ever (its
    evictions free room at its front, which it cannot reuse): the room a move gives follows
    the entries evicted too (`_table.grown`), so 1,000 blocks of decode move the segment
    about a dozen times, not once every few blocks (about 200 times with a quarter of the live
    entries as room), and the room stays within half the entries evicted."""
    coord = coordinator(
        {
            "local": SlidingWindowLayer(
                sliding_window=Window(8, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
            )
        },
        block_size=4,
        num_blocks=64,
        max_len=4_096,
        max_in_flight=4,
    )
    step = coord.stepper(coord.group("local", Tokens))
    table = coord._core.table
    step.admit("r", Tokens(4_096))
    starts = []
    for _ in range(4_000):
        step.advance("r", Tokens(1))
        starts.append(table.field(table.offsets["r"], 0, START))
    moves = sum(1 for a, b in pairwise(starts) if b < a or b > a + 1)
    skipped = table.field(table.offsets["r"], 0, SKIPPED)
    assert skipped > 990 and 8 <= moves <= 20, (moves, skipped)
    assert table.field(table.offsets["r"], 0, CAPACITY) <= 3 + 8 + skipped // 2


@pytest.mark.parametrize("last", ["with content", "plain"])
def test_content_batches_leave_nothing_once_the_last_request_ends_and_the_cache_is_reset(
    last: str,
) -> None:
    """Generated tokens given a batch at a time, two a request a step
    (`Stepper.advance_with_content_all`, whose fast path keeps its latest batch's requests
    classified for the next engine step, and per batch shape the slices and the `struct`
    that cut its keys), then every request freed and the prefix cache reset: the runtime's
    files hold what they held when built (the reset leaves the pool as built, no queue:
    `BlockPool.reset_ops`) and the layout's one stream shape, within `_LEFT_BOUND`. Those
    caches held the requests' extras (their hashes and tails) and a slice a request until
    the last free emptied them; the last request ends with content (the core's path) or is
    a plain one, stepped after the reset, that ends with nothing cached (the generated
    ``free``'s end of the last request)."""
    coord = text_alone(
        block_size=8,
        num_blocks=4_000,
        max_len=512,
        max_in_flight=64,
        reserve=False,
    )
    text = coord.group("text", Tokens)
    step = coord.stepper(text)
    core = coord._core
    ids = [f"r{i}" for i in range(32)]
    ContentKeys(range(2 * len(ids)), Tokens)  # (struct's cache of the format that packs 64)
    tracemalloc.start()
    try:
        built = _runtime_bytes()
        for i, rid in enumerate(ids):
            hashes = text.block_hashes(ContentKeys([i] * 8, Tokens))
            got = step.admit_with_prefix(rid, Tokens(512), prefix=(hashes,))
            step.advance(rid, Tokens(8 - magnitude(got[0])))
        for k in range(0, 400, 2):  # a block filled every fourth step, each request's own
            keys = ContentKeys([1_000 * i + k + j for i in range(len(ids)) for j in (0, 1)], Tokens)
            step.advance_with_content_all(ids, Tokens(2), content=[(text, keys)])
        kept, cuts, chunks = core._batch_caches
        assert any(kept) and cuts and chunks  # kept for the next engine step
        if last == "plain":
            step.admit("plain", Tokens(16))
        for rid in ids:
            coord.free(rid)
        assert coord.reset_prefix_cache()  # ("plain" holds no block yet)
        if last == "plain":
            # Its step and its end with nothing cached: the generated ``free``'s last end.
            step.advance("plain", Tokens(4))
            assert any(kept)  # the batch's requests ended, one is running
            coord.free("plain")
        del keys, hashes, got  # (made in the runtime's files: ContentKeys, BlockHashes, hits)
        left = _runtime_bytes() - built
    finally:
        tracemalloc.stop()
    assert not any(kept) and not cuts and not chunks
    queue = core.pools[0]._queue
    assert not len(queue)  # the reset, then the plain request's end: the pool as built
    queued = sys.getsizeof(queue) - sys.getsizeof(array(queue.typecode))
    shapes = sys.getsizeof(core._shapes) - sys.getsizeof({}) + sum(map(sys.getsizeof, core._shapes))
    assert left <= queued + shapes + _LEFT_BOUND, (left, queued, shapes)


def test_a_new_requests_offset_is_one_of_the_pools_id_objects() -> None:
    # A request's offset (its fields' place) is a dict value: past 256 an int object of 28
    # byte, a third of what a request costs with one group. A new row's offset is taken from
    # the largest pool's ids (`BlockPool.add_map`), on every path that claims a row: the
    # generated admission, with and without a prefix, and the core's planned ones (an
    # admission policy that orders requests; a prefix's admission in passes, the generated
    # one off); an ended request's offset is reused as it is.
    coord = text_alone(num_blocks=2_000, max_len=8, max_in_flight=8, reserve=False)
    planned = text_alone(
        num_blocks=2_000,
        max_len=8,
        max_in_flight=8,
        admission=AdmissionPolicy(kind="on_demand", scheduling_policy="priority"),
    )
    lean = text_alone(num_blocks=2_000, max_len=8, max_in_flight=8, reserve=False)
    lean._core.fast = lean._core.fast._replace(admit_prefix=None)
    for c in (coord, planned, lean):
        text = c.group("text", Tokens)
        step = c.stepper(text)
        ids = c._core.pools[0]._ids
        table = c._core.table
        assert type(ids) is tuple and table.offset_ints is ids
        for i in range(300):
            rid = f"r{i}"
            if i % 2:
                step.admit_with_prefix(
                    rid, Tokens(8), prefix=(text.block_hashes(ContentKeys([i, i + 1], Tokens)),)
                )
            else:
                step.admit(rid, Tokens(8))
        offsets = list(table.offsets.values())
        assert max(offsets) > 256 and all(o is ids[o] for o in offsets)
        c.free("r7")
        step.admit("again", Tokens(8))
        assert table.offsets["again"] is ids[table.offsets["again"]]
