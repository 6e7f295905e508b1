"""Steps that take or evict many blocks at once (issue 25, item 3): a prefill chunk, a window
passed over by a long step, and the end of a request holding thousands of blocks.

A long step's blocks are a run of the pool's free queue (the ids never handed out, then the
queue's front) taken as array slices, written into the request's segment as one slice, and
a window's evicted blocks go back as one slice too (`CoordinatorCore._plan_boundary`,
`BlockPool.front`); a segment move into a slab whose garbage is due compacts the slab first,
on the same path. Anything else (a stale queue entry among the blocks, a shared block among
the evicted, a queue too short) goes to the general path before anything changed. So each
long step is compared with the general path call by call on twin coordinators of random
layouts (every kind, pooled or not, one pool or one per group, cached and stale blocks in
the queues), and the paths that run are checked to be the boundary path where no such
exception applies. A free that leaves its slab due compacts it in the same commit, without
the ended request's segments: the other requests' tables are as they were.
"""

from __future__ import annotations

import functools
import random
import sys
from array import array
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvunits.contracts import (
    Elements,
    FullAttentionLayer,
    KVHeads,
    SlidingWindowLayer,
    Tokens,
    Window,
)
from kvunits.runtime import KVCacheCoordinator, _table
from kvunits.runtime._table import CAPACITY, START
from kvunits.runtime.block_pool import BlockPool, id_run

from ..examples import examples
from .support import check_pools, coordinator
from .test_fast_step import _outcome, _state, fast, general, prefix_parts
from .test_interrupts import Interrupt
from .test_stateful import drawn_coordinators


def _garbage_counted(coord: KVCacheCoordinator) -> None:
    """Each slab's garbage count is every entry no segment owns (what compaction reads)."""
    table = coord._core.table
    for g, slab in enumerate(table.slabs):
        owned = sum(table.field(o, g, CAPACITY) for o in table.offsets.values())
        assert table.garbage[g] == len(slab) - owned, g


def _fields(coord: KVCacheCoordinator) -> dict[str, list[list[int]]]:
    """Every request's per-group fields but where its segment lies (``START``,
    ``CAPACITY``): its bounds for the next step (``SLACK``, ``ANCHOR``, ``BASE``, ``EVICT``)
    as well as its positions and table, which a path must set as the general path does."""
    table = coord._core.table
    return {
        rid: [
            [v for i, v in enumerate(table.read(o, g)) if i not in (START, CAPACITY)]
            for g in range(len(table.slabs))
        ]
        for rid, o in table.offsets.items()
    }


def _recording(ran: list[str]) -> Any:
    def record(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            ran.append(frame.f_code.co_name)

    return record


@settings(max_examples=examples(40), deadline=None)
@given(data=st.data())
def test_long_steps_do_what_the_general_path_does(data: st.DataObject) -> None:
    kinds = ("full", "full", "sliding", "sliding_pooled", "chunked", "chunked_pooled")
    # Pools for two to four requests at their caps, sometimes fewer: steps run short too.
    drawn = drawn_coordinators(
        data.draw,
        kinds,
        3,
        st.integers(20, 200),
        st.integers(8, 80),
        lambda cap: st.integers(cap, 4 * cap),
    )
    count = len(drawn.specs)
    block_size, max_len, max_in_flight = drawn.block_size, drawn.max_len, drawn.max_in_flight
    one, two = drawn.build(), drawn.build()
    pools = [spec.pool.tokens_per_block for spec in (g.manager for g in one.groups)]

    def counts() -> list[int]:
        # A long step (a prefill chunk: up to the step limit), a few blocks' worth (a run that
        # often fits the segment's spare room), or a decode step.
        size = data.draw(st.sampled_from(("long", "few", "one")), label="size")
        spans = {
            "long": st.integers(max_in_flight // 2, max_in_flight),
            "few": st.integers(block_size + 1, min(3 * block_size, max_in_flight)),
            "one": st.just(1),
        }
        return [data.draw(spans[size]) * p for p in pools]

    for _ in range(data.draw(st.integers(1, 30), label="calls")):
        rid = f"r{data.draw(st.integers(0, 3), label='request')}"
        typed = "_typed" if data.draw(st.booleans(), label="typed entry") else ""
        op = data.draw(
            st.sampled_from(
                ("advance",) * 4
                + ("step", "speculative", "advance_all", "admit", "admit", "admit_prefix")
                + ("free", "free")
            ),
            label="op",
        )
        if op == "admit":
            got = [_outcome(c._core.admit, rid) for c in (one, two)]
        elif op == "admit_prefix":
            # Cached blocks (in tables, then in the queues once freed) and stale entries.
            size = data.draw(st.integers(0, max_len), label="prompt")
            content = [i % data.draw(st.integers(1, 3), label="period") for i in range(size)]
            got = [
                _outcome(
                    c._core.admit_with_prefix, rid, [None] * count, prefix_parts(c, content)
                )
                for c in (one, two)
            ]
        elif op == "free":
            got = [_outcome(c._core.free, rid) for c in (one, two)]
        elif op == "advance_all":
            live = [r for r in sorted(one._core.requests) if data.draw(st.booleans())]
            q = counts()
            got = [
                _outcome(fast, one._core, op + typed, live, q),
                _outcome(general, two._core, op, live, q),
            ]
        else:
            q = counts()
            args: tuple[Any, ...] = (rid, q)
            if op == "speculative":
                args += ([data.draw(st.integers(0, n), label="lookahead") for n in q],)
            got = [
                _outcome(fast, one._core, op + typed, *args),
                _outcome(general, two._core, op, *args),
            ]
        assert got[0] == got[1], (op, rid)
        assert _state(one) == _state(two), (op, rid)
        assert _fields(one) == _fields(two), (op, rid)
        _garbage_counted(one)
    check_pools(one)


def _text(window: int | None = None) -> dict[str, Any]:
    layers: dict[str, Any] = {
        "text": FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8))
    }
    if window is not None:
        layers["swa"] = SlidingWindowLayer(
            sliding_window=Window(window, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
        )
    return layers


@pytest.mark.parametrize("drafting", [False, True])
def test_a_chunked_prefill_takes_its_blocks_and_evicts_its_window_as_runs_on_the_fast_path(
    monkeypatch: pytest.MonkeyPatch, drafting: bool
) -> None:
    # The prefill trace in miniature: 4 streams at once, blocks of 4 tokens, prompts of 256
    # tokens in chunks of 64 (16 blocks a chunk: fresh ids first, then the queue's front once
    # the first streams ended), a window of 32 tokens passed over by each chunk (12 blocks
    # evicted as a run; a window's prefill past its reach: Mistral, Gemma), then decode
    # steps (drafting 3 tokens a step, a seeded number rejected: the first of them evicts
    # the blocks the last chunk left behind the window, a run too), then the ends; slabs
    # compacted from 16 entries of garbage on. Every call is compared with a twin driven by
    # the general path. The generated functions plan every step: neither the boundary path
    # nor the general path runs (before, each chunk past the window and each first drafting
    # step took the boundary path: `benchmarks/vs_vllm.py --sweep 3`, traces 3.16, 3.23).
    monkeypatch.setattr(_table, "_COMPACT_MIN", 16)
    monkeypatch.setattr(_table, "_RETURN_MIN", 16)  # the ends' too

    def build() -> KVCacheCoordinator:
        return coordinator(
            _text(window=32), block_size=4, num_blocks=400, max_len=340, max_in_flight=64
        )

    one, two = build(), build()
    ran: list[str] = []
    rejected = 0
    for cycle in range(3):
        ids = [f"c{cycle}s{i}" for i in range(4)]
        for c in (one, two):
            for rid in ids:
                c._core.admit(rid)
        for chunk in range(4):
            for rid in ids:
                sys.setprofile(_recording(ran))
                try:
                    fast(one._core, "advance_typed", rid, (64, 64))
                finally:
                    sys.setprofile(None)
                general(two._core, "advance", rid, [64, 64])
                assert _state(one) == _state(two), (cycle, chunk, rid)
                assert _fields(one) == _fields(two), (cycle, chunk, rid)
        for step in range(20):
            for rid in ids:
                sys.setprofile(_recording(ran))
                try:
                    if drafting:
                        back = (0, 0) if step == 0 else (rejected, rejected)
                        fast(one._core, "respec_typed", rid, (4, 4), (3, 3), back)
                    else:
                        fast(one._core, "advance_typed", rid, (1, 1))
                finally:
                    sys.setprofile(None)
                if drafting:
                    general(two._core, "respec", rid, [4, 4], [3, 3], list(back))
                else:
                    general(two._core, "advance", rid, [1, 1])
                assert _state(one) == _state(two), (cycle, step, rid)
                assert _fields(one) == _fields(two), (cycle, step, rid)
            rejected = (cycle + step) % 4
        _garbage_counted(one)
        for rid in ids:
            for c in (one, two):
                c._core.free(rid)
            _garbage_counted(one)
        check_pools(one)
    # The chunks' runs, and the windows' evicted runs, on the line of stores (``cross``,
    # since session 41; before, its ops-list form ``cross_ops``).
    assert "cross" in ran and "front" in ran
    assert "_boundary_step" not in ran, ran.count("_boundary_step")
    assert "_general_step" not in ran and "_plan_step" not in ran, set(ran)
    assert "compact_ops" in ran  # slabs compacted on the way, on the same path


def test_a_chunked_prefills_segment_moves_on_every_other_chunk_at_most(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The 32k prefill trace (benchmarks/vs_vllm.py) in its own sizes: 4 prompts of 4 chunks of
    # 8,192 tokens (512 blocks of 16) prefilled side by side, as vLLM schedules long prompts.
    # A segment that moves for a chunk gets room for the next one (`grown`'s step) and a
    # compaction keeps a segment the room it has where that is more than a quarter, so a
    # segment moves to the slab's end on every other chunk at most and the slab is compacted
    # half as often as chunks come at most. Before, with a quarter's room only, each of the 3
    # later chunks moved it and the fast function compacted 11 times in 16 chunks. The fast
    # function and the general path (its own planner, `segment_ops`) each keep to that, with
    # the same positions, tables and pools.
    compactions: list[object] = []
    compact = _table.RequestTable.compact_ops

    def counted(self: _table.RequestTable, ops: Any, *args: Any, **kwargs: Any) -> None:
        before = len(ops)
        compact(self, ops, *args, **kwargs)
        if len(ops) > before:  # a slab rewritten, not only considered
            compactions.append(self)

    monkeypatch.setattr(_table.RequestTable, "compact_ops", counted)
    chunk, chunks = 8_192, 4
    one, two = (
        coordinator(
            _text(), block_size=16, num_blocks=8_256, max_len=chunk * chunks, max_in_flight=chunk
        )
        for _ in range(2)
    )
    ids = [f"s{i}" for i in range(4)]
    for c in (one, two):
        for rid in ids:
            c._core.admit(rid)
    both = (one, two)
    moves = {(c, rid): 0 for c in both for rid in ids}
    for n in range(chunks):
        for rid in ids:
            starts = {c: c._core.table.field(c._core.table.offsets[rid], 0, START) for c in both}
            before = len(compactions)
            fast(one._core, "advance_typed", rid, (chunk,))
            general(two._core, "advance", rid, [chunk])
            assert one._core.block_table(rid, 0) == two._core.block_table(rid, 0), (n, rid)
            assert _fields(one) == _fields(two), (n, rid)
            for c in both:
                table = c._core.table
                o = table.offsets[rid]
                length, capacity = table.field(o, 0, _table.LENGTH), table.field(o, 0, CAPACITY)
                assert capacity - length <= max(8, length >> 2, 512), (n, rid)  # a chunk at most
                if c._core.table not in compactions[before:]:  # a move, not a compaction
                    moves[c, rid] += n > 0 and table.field(o, 0, START) != starts[c]
    assert max(moves.values()) <= chunks // 2, moves  # of the 3 after the first: 2 at most
    assert _state(one) == _state(two)
    for c in both:
        assert compactions.count(c._core.table) <= 4 * chunks // 2
        _garbage_counted(c)


@pytest.mark.parametrize(
    ("prompt", "max_len", "capacity"),
    [
        # 64 blocks of 16 whose max_len reaches 67: room up to it, and never a move.
        (1_024, 1_064, 67),
        # 64 blocks, max_len far beyond: the room a first move gives (one more such step).
        (1_024, 8_192, 128),
        # 63 blocks: placed exactly (`_table._FIRST_ROOM`), a move copies 63 entries.
        (1_008, 8_192, 63),
        # 64 blocks, max_len exactly there: nothing to grow into.
        (1_024, 1_024, 64),
    ],
)
@pytest.mark.parametrize("path", ["cross", "boundary", "general"])
def test_a_long_first_chunk_is_placed_with_room_up_to_its_max_len(
    prompt: int, max_len: int, capacity: int, path: str
) -> None:
    # The 8k prefill trace's first decode step used to move its request's 512 entries (placed
    # exactly) to the slab's end, leaving them as garbage (a compaction every other prompt).
    # A first placement of 64 entries or more gets the room a move gives, up to the blocks its
    # max_len reaches; each of the three planners places it so: the generated `cross` (a chunk
    # without a slot mapping), the core's boundary plan (`_plan_boundary`: with one) and the
    # general path (`segment_ops`). Then decode steps to max_len stay in place.
    coord = coordinator(
        _text(), block_size=16, num_blocks=2 * 1_024, max_len=max_len, max_in_flight=2_048
    )
    core = coord._core
    core.admit("r")
    ran: list[str] = []
    sys.setprofile(_recording(ran))
    try:
        if path == "general":
            general(core, "advance", "r", [prompt])
        else:
            fast(core, "advance_typed" if path == "cross" else "step_typed", "r", (prompt,))
    finally:
        sys.setprofile(None)
    planner = {"cross": "cross", "boundary": "_plan_boundary", "general": "segment_ops"}[path]
    assert planner in ran, set(ran)
    assert "_general_step" not in ran or path == "general", set(ran)
    table = core.table
    o = table.offsets["r"]
    assert table.field(o, 0, CAPACITY) == capacity
    assert table.field(o, 0, _table.LENGTH) == prompt // 16
    assert len(table.slabs[0]) == capacity and table.garbage[0] == 0
    for _ in range(max_len - prompt):
        fast(core, "advance_typed", "r", (1,))
    assert core.block_table("r", 0) == list(range(1, -(-max_len // 16) + 1))
    if capacity * 16 >= max_len:  # reached without a move
        assert table.field(o, 0, START) == 0 and table.garbage[0] == 0
    _garbage_counted(coord)
    check_pools(coord)


@pytest.mark.parametrize("compact_min", [1024, 16])
@pytest.mark.parametrize("layout", ["text", "text + window, one pool", "text + window"])
def test_a_prefill_chunk_within_reach_takes_its_run_on_the_fast_function(
    monkeypatch: pytest.MonkeyPatch, layout: str, compact_min: int
) -> None:
    # 4 streams at once, prompts of 128 tokens in chunks of 32 (8 blocks of 4 a chunk: fresh
    # ids first, then the queue's front once the first streams ended, for both groups from
    # one pool in the second layout), a window (200 tokens) no chunk passes over, decode
    # steps, the ends, three cycles; a few chunks ask for their slot mappings; slabs compacted
    # from 1024 entries of garbage on (never here) or from 16. Every call is compared with a
    # twin driven by the general path. A chunk whose table has room, or moves (into a slab
    # that the move would make due: compacted first), is planned by the generated `cross`
    # alone: its line of stores (a run of blocks too, since session 41: into its room, grown
    # in place where it ends its slab, or moved, a due slab compacted first); the core's
    # boundary path runs only for chunks with slot mappings that ``cross_ops`` plans.
    monkeypatch.setattr(_table, "_COMPACT_MIN", compact_min)
    window = None if layout == "text" else 200
    groups = 1 if window is None else 2

    def build() -> KVCacheCoordinator:
        return coordinator(
            _text(window=window),
            block_size=4,
            num_blocks=4 * 40 * groups + 1 if "one pool" in layout else 4 * 40 + 1,
            max_len=150,
            max_in_flight=32,
            shared="one pool" in layout,
        )

    one, two = build(), build()
    ran: list[str] = []
    compacting: list[str] = []  # who called compact_ops

    def record(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            ran.append(frame.f_code.co_name)
            if frame.f_code.co_name == "compact_ops":
                compacting.append(frame.f_back.f_code.co_name)

    chunks = mapped = 0
    for cycle in range(3):
        ids = [f"c{cycle}s{i}" for i in range(4)]
        for c in (one, two):
            for rid in ids:
                c._core.admit(rid)
        for chunk in range(4):
            for n, rid in enumerate(ids):
                kind = "step" if (cycle + chunk + n) % 7 == 3 else "advance"
                sys.setprofile(record)
                try:
                    got = fast(one._core, kind + "_typed", rid, (32,) * groups)
                finally:
                    sys.setprofile(None)
                assert got == general(two._core, kind, rid, [32] * groups)
                assert _state(one) == _state(two), (cycle, chunk, rid)
                assert _fields(one) == _fields(two), (cycle, chunk, rid)
                chunks += 1
                mapped += kind == "step"
        for _ in range(20):
            for rid in ids:
                fast(one._core, "advance", rid, [1] * groups)
                general(two._core, "advance", rid, [1] * groups)
        assert _state(one) == _state(two)
        _garbage_counted(one)
        for rid in ids:
            for c in (one, two):
                c._core.free(rid)
        check_pools(one)
    assert ran.count("_boundary_step") <= mapped and mapped > 0
    assert ran.count("cross") >= chunks
    # The runs on the line of stores, but for those with slot mappings that ``cross_ops``
    # plans (a segment that ends its slab grows in place on the line of stores too).
    assert ran.count("cross_ops") <= mapped, ran.count("cross_ops")
    # Moves into a due slab: compacted on the way, by `cross` (then planned again there).
    assert ("cross" in compacting) == (compact_min == 16), compacting
    assert "_general_step" not in ran and "_plan_step" not in ran, set(ran)


def test_cached_blocks_in_a_run_are_evicted_and_stale_entries_go_to_the_general_path() -> None:
    # Two prompts cached (p, q share all but their last token) then freed: their blocks wait
    # in the queue with their content, behind the few ids never handed out. A long step of x
    # takes those ids and the queue's front: the cached blocks among them are evicted from
    # the prefix cache, by the generated crossing's line of stores (each its key's one block:
    # `BlockPool.evicted_ops`; on the boundary path before session 41). A prefix hit of h
    # then takes the rest back out of the queue (stale entries left there): h's long step
    # over them goes to the general path. Every call compared with a twin driven by the
    # general path.
    def build() -> KVCacheCoordinator:
        return coordinator(
            _text(window=8),
            block_size=2,
            num_blocks=64,
            max_len=80,
            max_in_flight=40,
            reserve=False,
        )

    one, two = build(), build()
    prompt = [i % 5 for i in range(38)]
    for c in (one, two):
        core = c._core
        for rid in ("p", "q"):
            hits = core.admit_with_prefix(rid, [None, None], prefix_parts(c, [*prompt, ord(rid)]))
            core.advance_step(rid, [39 - h for h in hits])
        core.admit("f")
        core.advance_step("f", [40, 40])  # holds fresh ids: few are left
        core.free("p")
        core.free("q")
        core.admit("x")
    assert one._core.pools[0].num_cached_free

    def both(rid: str, q: list[int], ran: list[str]) -> None:
        sys.setprofile(_recording(ran))
        try:
            got = _outcome(fast, one._core, "advance", rid, q)
        finally:
            sys.setprofile(None)
        assert got == _outcome(general, two._core, "advance", rid, q), (rid, q)
        assert _state(one) == _state(two), (rid, q)
        assert _fields(one) == _fields(two), (rid, q)
        check_pools(one)

    ran: list[str] = []
    cached = len(one._core.pools[0]._cached)
    both("x", [40, 40], ran)
    both("x", [20, 20], ran)  # the last fresh ids, then cached free blocks
    assert len(one._core.pools[0]._cached) < cached  # evicted
    assert "evicted_ops" in ran and "cross_ops" not in ran, set(ran)
    assert "_boundary_step" not in ran and "_general_step" not in ran, set(ran)
    # ("f" still holds its blocks: freed, having no content, they would go to the queue's
    # front, and h's step would take them, not the stale entries.)
    for c in (one, two):
        hits = c._core.admit_with_prefix("h", [None, None], prefix_parts(c, prompt))
    assert hits[0] > 0 and one._core.pools[0]._stale
    ran = []
    both("h", [38 - h for h in hits], ran)  # over the stale entries: the general path
    assert "_general_step" in ran
    both("x", [1, 1], [])


def test_a_drafting_step_that_moves_a_segment_into_a_due_slab_compacts_it_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Short drafting requests (the benchmark's *short drafting* row in miniature): waves of
    # 4, an 8-token prompt, 5 drafting steps of 3 drafts each, a seeded number rejected, most
    # ended once the next wave has taken its first step; slabs compacted from 8 entries of
    # garbage on. The ends leave garbage; a
    # drafting step whose segment outgrows its room moves it to the slab's end, and where
    # that makes the slab due, the generated `respec_ops` compacts it first and plans again
    # (before: the core's boundary path, about 50 µs more than the compaction a call). Every
    # call compared with a twin driven by the general path.
    monkeypatch.setattr(_table, "_COMPACT_MIN", 8)
    monkeypatch.setattr(_table, "_RETURN_MIN", 1024)  # (only the steps compact here)

    def build() -> KVCacheCoordinator:
        return coordinator(_text(), block_size=4, num_blocks=400, max_len=64, max_in_flight=64)

    one, two = build(), build()
    ran: list[str] = []
    compacting: list[str] = []

    def record(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            ran.append(frame.f_code.co_name)
            if frame.f_code.co_name == "compact_ops":
                compacting.append(frame.f_back.f_code.co_name)

    ended: list[str] = []
    moves = 0
    for wave in range(6):
        ids = [f"w{wave}r{i}" for i in range(4)]
        for c in (one, two):
            for rid in ids:
                c._core.admit(rid)
                c._core.advance_step(rid, [8])
            for rid in ended:  # the last wave's ends: garbage the first step did not see
                c._core.free(rid)
        for step in range(5):
            for n, rid in enumerate(ids):
                back = 0 if step == 0 else (wave + step + n) % 4
                before = len(compacting)
                sys.setprofile(record)
                try:
                    got = _outcome(fast, one._core, "respec_typed", rid, (4,), (3,), (back,))
                finally:
                    sys.setprofile(None)
                if "respec_ops" in compacting[before:]:  # compacted, then moved: not due now
                    table = one._core.table
                    assert not _table.due(table.garbage[0], len(table.slabs[0]))
                    moves += 1
                assert got == _outcome(general, two._core, "respec", rid, [4], [3], [back])
                assert _state(one) == _state(two), (wave, step, rid)
                assert _fields(one) == _fields(two), (wave, step, rid)
        _garbage_counted(one)
        ended = ids[: 2 + wave % 3]
        check_pools(one)
    assert moves, compacting
    assert "_boundary_step" not in ran and "_general_respec" not in ran, set(ran)


def test_a_step_at_stale_queue_entries_skips_them_on_the_fast_path() -> None:
    # Two prompts cached, then freed (their blocks wait in the queue with their content, p's
    # before q's); f holds every id never handed out. A prefix hit of h on p's prompt takes
    # p's first blocks back out of the queue: their entries stay there, stale. x then takes
    # one block a step: p's last block (cached: evicted), then, past the stale entries (the
    # general path's take skips them, spending their counts), q's blocks. Each step is
    # planned by the generated functions (before: a stale entry at the head sent it to the
    # general path, `benchmarks/vs_vllm.py --sweep 3`, trace 3.10), and compared with a twin
    # driven by the general path.
    def build() -> KVCacheCoordinator:
        return coordinator(
            _text(), block_size=2, num_blocks=32, max_len=60, max_in_flight=60, reserve=False
        )

    one, two = build(), build()
    prompts = {"p": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "q": [11, 12, 13, 14, 15, 16, 17, 18, 19, 20]}
    for c in (one, two):
        core = c._core
        for rid, prompt in prompts.items():
            core.admit_with_prefix(rid, [None], prefix_parts(c, prompt))
            core.advance_step(rid, [10])
        core.admit("f")
        core.advance_step("f", [2 * (32 - 1 - 10)])  # every id never handed out
        core.free("p")
        core.free("q")
        hits = core.admit_with_prefix("h", [None], prefix_parts(c, prompts["p"]))
        core.admit("x")
        core.advance_step("x", [1])  # (a fresh table: its first block, p's last)
    pool = one._core.pools[0]
    assert hits == [8] and pool._num_stale == 4 and pool._fresh == pool.num_blocks
    ran: list[str] = []
    for _ in range(5):
        sys.setprofile(_recording(ran))
        try:
            got = _outcome(fast, one._core, "advance", "x", [2])
        finally:
            sys.setprofile(None)
        assert got == _outcome(general, two._core, "advance", "x", [2])
        assert _state(one) == _state(two)
        assert _fields(one) == _fields(two)
        check_pools(one)
    assert pool._num_stale == 0 and not pool._stale  # every stale entry skipped
    assert "past_stale" in ran
    assert "_boundary_step" not in ran and "_general_step" not in ran, set(ran)


def test_a_free_that_leaves_its_slab_due_compacts_it_without_the_ended_segments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_table, "_RETURN_MIN", 16)  # an end compacts from 16 entries on
    coord = coordinator(
        _text(), block_size=1, num_blocks=300, max_len=120, max_in_flight=40, reserve=False
    )
    core = coord._core
    ids = [f"r{i}" for i in range(4)]
    for rid in ids:
        core.admit(rid)
    for _ in range(2):
        for rid in ids:
            core.advance_step(rid, [30])
    table = core.table
    for n, rid in enumerate(ids):
        others = {r: core.block_table(r, 0) for r in ids[n + 1 :]}
        length = len(table.slabs[0])
        core.free(rid)
        assert {r: core.block_table(r, 0) for r in others} == others
        _garbage_counted(coord)
        check_pools(coord)
        if others:
            # A quarter of the slab (or more) became garbage: compacted at once.
            assert table.garbage[0] == 0 and len(table.slabs[0]) < length
    assert len(table.slabs[0]) == 0


def test_an_end_compacts_without_giving_the_other_segments_room(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An end's compaction only returns memory: the segments it keeps keep their capacity
    # (here exactly their entries, as first placed), where a compaction ahead of a growth
    # gives each the room a move gives. Room given at every end was garbage again at the
    # request's own end: a server of short requests (sweep 11.12: 600 streams of 5 drafting
    # steps) compacted a slab every 64 ends, a quarter of its time in `free`.
    monkeypatch.setattr(_table, "_RETURN_MIN", 16)
    coord = coordinator(
        _text(), block_size=1, num_blocks=300, max_len=120, max_in_flight=40, reserve=False
    )
    core, table = coord._core, coord._core.table
    ids = [f"r{i}" for i in range(4)]
    for rid in ids:
        core.admit(rid)
        core.advance_step(rid, [30])
    tables = {rid: core.block_table(rid, 0) for rid in ids}
    for fast_free in (False, True):  # the general path's end, then the generated one's
        assert table.garbage[0] == 0
        rid = ids.pop(0)
        if fast_free:
            coord.free(rid)
        else:
            core.free(rid)
        del tables[rid]
        assert {r: core.block_table(r, 0) for r in tables} == tables
        assert table.garbage[0] == 0  # compacted: 30 of 120 entries (or 90) were garbage
        offsets = [table.offsets[r] for r in ids]
        assert [table.field(o, 0, CAPACITY) for o in offsets] == [30] * len(ids)
        assert len(table.slabs[0]) == 30 * len(ids)
        _garbage_counted(coord)
        check_pools(coord)


def test_a_long_step_and_a_compacting_free_interrupted_anywhere_change_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A chunk of 5 blocks from the queue's front (cached blocks, evicted) into a segment that
    # moves, its slab compacted first; the same with slot mappings; a free that compacts:
    # interrupted at each of their events, nothing changes, then each does what it does on a
    # twin.
    monkeypatch.setattr(_table, "_COMPACT_MIN", 8)
    monkeypatch.setattr(_table, "_RETURN_MIN", 8)  # the ends' too

    def build() -> KVCacheCoordinator:
        coord = coordinator(
            _text(window=3),
            block_size=1,
            num_blocks=41,
            max_len=30,
            max_in_flight=5,
            reserve=False,
        )
        core = coord._core
        core.admit_with_prefix("a", [None, None], prefix_parts(coord, [1] * 5))
        for rid in ("a", "b", "c"):
            if rid != "a":
                core.admit(rid)
            core.advance_step(rid, [5, 5])
        for _ in range(2):
            for rid in ("b", "c"):
                core.advance_step(rid, [5, 5])
        core.free("a")
        core.advance_step("c", [5, 5])  # every id handed out: a's cached blocks queued
        return coord

    calls: list[tuple[Callable[[KVCacheCoordinator], object], str]] = [
        # (on the generated crossing's line of stores since session 41: the compaction
        # committed first, then the step planned again, its cached blocks evicted there)
        (lambda c: c._core.advance_step("b", [5, 5]), "evicted_ops"),
        (lambda c: c._core.allocate_step("b", [4, 4]), "evicted_ops"),
        (lambda c: c._core.free("b"), "compact_ops"),
    ]
    for call, path in calls:
        probe, ran = build(), list[str]()
        sys.setprofile(_recording(ran))
        try:
            call(probe)
        finally:
            sys.setprofile(None)
        assert path in ran and "_general_step" not in ran, set(ran)
        probe = build()
        counter = Interrupt(None)
        counter.run(functools.partial(call, probe))
        coord = build()
        before = _state(coord)
        assert _state(probe) != before
        for at in range(1, counter.seen + 1):
            try:
                Interrupt(at).run(functools.partial(call, coord))
            except KeyboardInterrupt:
                assert _state(coord) == before, at
                continue
            # The interrupt came as the call returned (Python swallows it there): all done.
            assert _state(coord) == _state(probe), at
            coord = build()
        twin = build()
        assert _outcome(call, coord) == _outcome(call, twin)
        assert _state(coord) == _state(twin) == _state(probe)
        _garbage_counted(coord)
        check_pools(coord)


@pytest.mark.parametrize("kind", ["advance", "step"])
@pytest.mark.parametrize("window", [None, 6])
def test_a_chunked_prompt_with_prefix_caching_registers_on_the_lean_crossing(
    window: int | None, kind: str
) -> None:
    # vLLM's defaults: prefix caching on and long prompts in chunks. Each prompt's hashes are
    # known from its admission; each chunk registers the blocks it fills, the rest ahead (the
    # request's fields held: its next step registers them). Waves of 4 prompts of 48 tokens
    # (12 blocks of 4) in chunks of 3, 1 and 5 blocks; the later waves take the blocks the
    # earlier ones cached (evicted as the run is taken) and a wave hits the one before's
    # first blocks (a prompt shared but for its tail). Every call compared with a twin driven
    # by the general path, without slot mappings and with them (``step``). The lean crossing
    # plans every chunk (before session 41 each went to the core's boundary path, 20 to 70 us
    # a chunk against 3 to 5 without caching).
    def build() -> KVCacheCoordinator:
        return coordinator(
            _text(window=window), block_size=4, num_blocks=60, max_len=56, max_in_flight=20,
            reserve=False,
        )  # fmt: skip

    one, two = build(), build()
    groups = 1 if window is None else 2
    ran: list[str] = []
    steps = 0
    for wave in range(4):
        ids = [f"w{wave}.{i}" for i in range(4)]
        hit = []
        for i, rid in enumerate(ids):
            head = 1000 * (wave // 2) + 100 * i  # waves 0, 1 and 2, 3 share their first 24
            prompt = [head + k for k in range(24)] + [wave * 7 + i + k for k in range(24)]
            got = [c._core.admit_with_prefix(rid, [None] * groups, prefix_parts(c, prompt))
                   for c in (one, two)]  # fmt: skip
            assert got[0] == got[1]
            hit.append(got[0][0])
        for chunk in (12, 4, 20, 12):
            for rid, h in zip(ids, hit, strict=True):
                left = 48 - h - (one._core.table.rows(one._core.table.offsets[rid], 0))
                q = min(chunk, left)
                if q <= 0:
                    continue
                sys.setprofile(_recording(ran))
                try:
                    out = _outcome(fast, one._core, kind, rid, [q] * groups)
                finally:
                    sys.setprofile(None)
                assert out == _outcome(general, two._core, kind, rid, [q] * groups)
                assert _state(one) == _state(two), (wave, chunk, rid)
                assert _fields(one) == _fields(two), (wave, chunk, rid)
                steps += 1
        for rid in ids:
            for c in (one, two):
                c._core.free(rid)
        assert _state(one) == _state(two)
        check_pools(one)
    assert steps == 32  # (a hit shortens waves 1 and 3)
    # (a first step with a slot mapping, ``first_step`` declines: the boundary path's)
    firsts = 8 if kind == "step" else 0
    assert ran.count("_boundary_step") <= firsts and "_general_step" not in ran, set(ran)
    assert ran.count("cross_ops") <= steps // 10 + firsts, ran.count("cross_ops")


@pytest.mark.parametrize("step", ["first", "chunk", "chunk, one block"])
def test_prompt_steps_that_evict_and_register_interrupted_anywhere_change_nothing(
    step: str,
) -> None:
    # Prefix caching on (vLLM's default), the pool cycled: its free blocks hold the content
    # of prompts that ended. A new prompt's first chunk (``first_step``) and its next chunk
    # (the lean crossing, a run) take cached free blocks, evict them from the prefix cache
    # and register the prompt's blocks they fill, hashes left ahead (held); a chunk of one
    # block the same way on its one-block path. Interrupted at each event of the call,
    # nothing changes; then it does what it does on a twin. (Before session 41 the first
    # step's commit called `BlockPool.evict_sole` and `file_new`, Python methods, after its
    # stores: an interrupt inside them left the stores made and the cache as it was.)
    def build() -> KVCacheCoordinator:
        coord = coordinator(
            _text(), block_size=2, num_blocks=40, max_len=30, max_in_flight=24, reserve=False
        )
        core = coord._core
        for n, rid in enumerate(("p", "q", "r")):  # three prompts cached, then freed
            prompt = [n * 50 + i for i in range(24)]
            core.admit_with_prefix(rid, [None], prefix_parts(coord, prompt))
            core.advance_step(rid, [24])
        core.admit("f")
        core.advance_step("f", [6])  # the last fresh ids handed out: takes come from the queue
        for rid in ("p", "q", "r"):
            core.free(rid)
        hits = core.admit_with_prefix("x", [None], prefix_parts(coord, [7] * 24))
        assert hits == [0]
        if step != "first":
            core.advance_step("x", [8])
        return coord

    chunk = {"first": 8, "chunk": 8, "chunk, one block": 2}[step]
    probe = build()
    cached = len(probe._core.pools[0]._cached)
    ran: list[str] = []
    sys.setprofile(_recording(ran))
    try:
        probe._core.advance_step("x", [chunk])
    finally:
        sys.setprofile(None)
    assert len(probe._core.pools[0]._cached) < cached + chunk // 2  # some evicted
    assert "_boundary_step" not in ran and "_general_step" not in ran, set(ran)
    assert ("first_step" in ran) == (step == "first"), set(ran)
    counter = Interrupt(None)
    counter.run(functools.partial(build()._core.advance_step, "x", [chunk]))
    coord = build()
    before = _state(coord)
    for at in range(1, counter.seen + 1):
        try:
            Interrupt(at).run(functools.partial(coord._core.advance_step, "x", [chunk]))
        except KeyboardInterrupt:
            assert _state(coord) == before, at
            continue
        assert _state(coord) == _state(probe), at  # the interrupt came as it returned
        coord = build()
    twin = build()
    twin._core.advance_step("x", [chunk])
    assert _state(twin) == _state(probe)
    check_pools(probe)


@settings(max_examples=examples(60), deadline=None)
@given(
    num_blocks=st.integers(1, 5_000),
    takes=st.lists(st.tuples(st.integers(0, 5_000), st.integers(0, 3_000)), max_size=6),
)
def test_fresh_ids_are_the_range_they_stand_for(
    num_blocks: int, takes: list[tuple[int, int]]
) -> None:
    # The ids table grows by doubling (each new half is the old one plus its length, lane by
    # lane in one int): whatever the order of takes, a slice is the range it stands for.
    pool = BlockPool(num_blocks)
    for start, n in takes:
        start = min(start, num_blocks)
        end = min(start + n, num_blocks)
        assert pool.ids(start, end) == array("i", range(start, end)), (start, end)
    assert len(pool._iota) <= num_blocks


def test_a_prefill_taking_fresh_ids_in_order_grows_the_table_and_a_far_take_does_not() -> None:
    # A 128k-token prefill takes its fresh ids 512 at a time, in order: each take reaches the
    # table's end, so the table grows by a quarter (a few dozen id_run calls in all, each
    # cheap per id) instead of each take past 16,384 building its 512 ids on its own (an
    # id_run call per chunk, a quarter of that prefill's allocator time). A take far past the
    # table builds its own.
    pool = BlockPool(200_000)
    grew = 0
    for start in range(0, 131_072, 512):
        before = len(pool._iota)
        assert pool.ids(start, start + 512) == array("i", range(start, start + 512))
        assert len(pool._iota) >= start + 512
        grew += len(pool._iota) != before
    # Never past a quarter more than was taken (doubled, up to twice: 4 byte an id).
    assert 131_072 <= len(pool._iota) <= 131_072 * 5 // 4 and grew <= 40
    far = BlockPool(200_000)
    far.ids(0, 64)
    assert far.ids(150_000, 150_512) == array("i", range(150_000, 150_512))
    assert len(far._iota) == 64


@settings(max_examples=examples(100), deadline=None)
@given(start=st.integers(0, 2**31), n=st.integers(0, 70_000))
def test_a_run_of_ids_is_built_byte_plane_by_byte_plane(start: int, n: int) -> None:
    # Across every byte boundary of an id: 256, 65,536 and 2**24, up to the last id 2**31 - 1.
    end = min(start + n, 2**31)
    assert id_run(start, end) == array("i", range(start, end))


@pytest.mark.parametrize("drafting", [False, True])
def test_a_window_evicting_blocks_a_prefix_hit_shares_or_cached_plans_it_on_the_fast_path(
    drafting: bool,
) -> None:
    # Full attention + a window of 12 tokens in blocks of 4, prefix caching: "a" computes a
    # prompt of 20 tokens and decodes; "b" and "c" are admitted with the same prompt (a hit
    # of 16 tokens), so their window tables share a's live blocks (a reference each) and hold
    # cached ones a's window already let go (free, cached: taken back out of the queue).
    # Each computes the rest of its prompt, then steps one token at a time (drafting 3 a
    # step, a seeded number rejected, with ``drafting``). Every block their windows evict is
    # shared (one reference less, not freed) or cached (free, its content kept): the
    # generated steps plan both (before, a drafting step sent each to the core's boundary
    # path: `benchmarks/vs_vllm.py --sweep 3`, trace 3.31, 191 of 1,600 steps). Every call is
    # compared with a twin driven by the general path.
    def build() -> KVCacheCoordinator:
        return coordinator(
            _text(window=12), block_size=4, num_blocks=80, max_len=80, max_in_flight=20
        )

    one, two = build(), build()
    prompt = list(range(1, 21))
    ran: list[str] = []
    tails: dict[str, int] = {}  # drafts each request's latest step left speculative

    def step(rid: str, q: int, seed: int) -> None:
        # A plain step of q tokens, or (drafting, after the request's first step) q tokens
        # and 3 drafts, rolling back up to ``seed`` of the latest step's drafts first.
        draft = drafting and rid in tails
        back = min(seed, tails.get(rid, 0))
        sys.setprofile(_recording(ran))
        try:
            if draft:
                fast(one._core, "respec_typed", rid, (q + 3, q + 3), (3, 3), (back, back))
            else:
                fast(one._core, "advance_typed", rid, (q, q))
        finally:
            sys.setprofile(None)
        if draft:
            general(two._core, "respec", rid, [q + 3, q + 3], [3, 3], [back, back])
        else:
            general(two._core, "advance", rid, [q, q])
        tails[rid] = 3 if draft else 0
        assert _state(one) == _state(two), rid
        assert _fields(one) == _fields(two), rid

    for c in (one, two):
        assert c._core.admit_with_prefix("a", [None, None], prefix_parts(c, prompt)) == [0, 0]
    step("a", 20, 0)
    for i in range(6):
        step("a", 1, i % 4)
    for rid in ("b", "c"):
        for c in (one, two):
            hits = c._core.admit_with_prefix(rid, [None, None], prefix_parts(c, prompt))
            assert hits == [16, 16], hits
    pool = one._core.pools[1]
    shared = dict(pool._shared)
    assert shared, "the hits share a's window blocks"
    step("c", 4, 0)  # the rest of its prompt
    step("b", 4, 0)
    for i in range(12):
        for rid in ("b", "c"):
            step(rid, 1, (i * 7) % 4)
    check_pools(one)
    # Every block the hits shared was evicted by a window (a reference less each), and the
    # cached ones it evicted wait in the queue with their content.
    assert set(shared) <= set(range(1, pool._fresh)) and not pool._shared
    assert pool.num_cached_free
    assert "_boundary_step" not in ran, ran.count("_boundary_step")
    assert "_general_step" not in ran and "_plan_step" not in ran, set(ran)
    for rid in ("a", "b", "c"):
        for c in (one, two):
            c._core.free(rid)
        assert _state(one) == _state(two)
    check_pools(one)


@pytest.mark.parametrize("chunk", [None, 12])
def test_a_prompts_chunk_registers_its_blocks_as_a_run_on_the_boundary_path(
    chunk: int | None,
) -> None:
    # Prefix caching on, prompts not seen before (vLLM's default, a service's common case):
    # each request's prompt in one step (or ``chunk``: in chunks of 12 tokens, each before
    # the last leaving hashes ahead of its positions: the request's fields held, as the
    # general plan holds them), each a run of blocks taken from the queue's
    # front (cached ones among them once the pool has cycled: evicted from the prefix cache
    # as a run) and registered under the prompt's hashes (as a run: one op each, not a plan
    # per block). None of the first 24 takes the general plan (`_plan_step`): the boundary
    # path plans them (before, it declined every run with content, and a prompt of 128
    # blocks cost 1.6 ms on the general path: docs/benchmarks.md, session 34). Then every
    # few prompts repeat an earlier one's start (a partial hit: its rest a shorter run; the
    # blocks it takes back out of the queue leave stale entries there, which a run's take
    # leaves to the general path). Each step is compared with a twin driven by the general
    # path.
    def build() -> KVCacheCoordinator:
        return coordinator(_text(), block_size=4, num_blocks=60, max_len=40, max_in_flight=40)

    one, two = build(), build()
    ran: list[str] = []
    rng = random.Random(3)
    prompts: list[list[int]] = []
    running: list[str] = []
    for i in range(40):
        if i >= 24 and i % 4 == 3:  # an earlier prompt's first blocks, then its own
            base = rng.choice(prompts)
            prompt = base[: rng.randrange(4, len(base))] + [10_000 + i] * rng.randrange(1, 9)
        else:
            prompt = [i * 100 + k for k in range(rng.randrange(5, 37))]
        prompts.append(prompt)
        rid = f"r{i}"
        hits = [c._core.admit_with_prefix(rid, [None], prefix_parts(c, prompt)) for c in (one, two)]
        assert hits[0] == hits[1], rid
        rest = len(prompt) - hits[0][0]
        while rest:
            q = min(rest, chunk or rest)
            sys.setprofile(_recording(ran if i < 24 else []))
            try:
                got = _outcome(fast, one._core, "advance_typed", rid, (q,))
            finally:
                sys.setprofile(None)
            assert got == _outcome(general, two._core, "advance", rid, [q]), rid
            assert _state(one) == _state(two), rid
            assert _fields(one) == _fields(two), rid
            rest -= q
        running.append(rid)
        if len(running) > 3:
            done = running.pop(0)
            for c in (one, two):
                c._core.free(done)
            assert _state(one) == _state(two), done
        check_pools(one)
    pool = one._core.pools[0]
    assert pool._cached and pool.num_cached_free  # the pool cycled through cached blocks
    assert "_plan_step" not in ran and "_general_step" not in ran, set(ran)
    # Planned once: the generated crossing hands the run to the core's boundary plan, which
    # holds a chunk before the last (not declined, then planned again by `_boundary_step`,
    # which only a slab due a compaction sends a step to: it compacts first).
    assert ran.count("_boundary_step") <= ran.count("compact_ops"), ran.count("_boundary_step")
    assert "register_run" in ran and "evict_run" in ran
