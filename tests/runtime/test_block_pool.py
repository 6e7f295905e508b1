"""The block pool: the null block, FIFO reuse, reference counts, failures without effects."""

from __future__ import annotations

import contextlib
import copy
from array import array
from unittest import mock

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from kvunits.contracts import CacheBlocks
from kvunits.runtime import NULL_BLOCK, AllocationError
from kvunits.runtime._guard import Ops, commit, ops_of
from kvunits.runtime.block_pool import (
    BlockPool,
    CacheMap,
    HeldBlocks,
    PoolPlan,
    filed,
    filed_op,
    holders,
    key_ops,
    lists_ops,
    unfiled_op,
)

from ..examples import examples


def test_null_block_is_never_handed_out() -> None:
    pool = BlockPool(4, name="g")
    assert pool.allocate_n(3) == [1, 2, 3]
    assert NULL_BLOCK == 0 and pool.ref_count(NULL_BLOCK) == 1
    assert pool.num_free == 0 and pool.num_used == 3


def test_freed_blocks_without_content_are_reused_last_in_first_out() -> None:
    pool = BlockPool(6, name="g")
    a = pool.allocate_n(3)
    pool.free([a[1]])
    pool.free([a[0]])
    # The ids never handed out first (4, 5), then the freed blocks, the latest first (vLLM
    # 0.33's ``free_blocks`` prepends a block without a hash to its free queue).
    assert pool.allocate_n(4) == [4, 5, 1, 2]


def test_freed_cached_blocks_wait_behind_those_without_content() -> None:
    # A cached block keeps its content at the back, least recently used first; a block
    # without content goes to the front, so an allocation evicts no cached block while one
    # without content is free (vLLM 0.33's eviction order).
    pool = BlockPool(6, name="g")
    cache: CacheMap = {}
    a = pool.allocate_n(5)
    pool.register(a[0], cache, b"k0")
    pool.register(a[1], cache, b"k1")
    pool.free(a[:3])  # 1 and 2 cached, to the back; 3 to the front
    pool.free(a[3:])  # 4 and 5 to the front, ahead of 3
    assert pool.free_queue() == [4, 5, 3, 1, 2]
    assert pool.allocate_n(3) == [4, 5, 3] and pool.num_cached_free == 2
    assert pool.allocate_n(1) == [1] and pool.num_cached_free == 1 and b"k0" not in cache


def test_short_allocation_changes_nothing() -> None:
    pool = BlockPool(3, name="audio")
    pool.allocate_n(1)
    with pytest.raises(
        AllocationError, match=r"cannot take 2 cache_block from pool 'audio': 1 free"
    ):
        pool.allocate_n(2)
    try:
        pool.allocate_n(2)
    except AllocationError as err:
        assert (err.group, err.needed, err.free) == ("audio", CacheBlocks(2), CacheBlocks(1))
    assert pool.num_free == 1
    assert pool.allocate_n(0) == []


def test_double_free_and_null_free_are_caught() -> None:
    pool = BlockPool(3, name="g")
    (block,) = pool.allocate_n(1)
    assert pool.ref_count(block) == 1
    pool.free([block])
    assert pool.ref_count(block) == 0 and pool.num_free == 2
    # A second free would queue the block twice and hand it to two requests.
    with pytest.raises(AssertionError, match="block 1 of pool 'g' freed: not held"):
        pool.free([block])
    with pytest.raises(AssertionError, match="the null block is never freed"):
        pool.free([NULL_BLOCK])
    assert pool.allocate_n(2) == [2, 1]


def _release_last(pool: BlockPool, blocks: list[int], front: bool = False) -> None:
    """Release ``blocks`` as the end of the last request does (`PoolPlan.last`; with
    ``front``, as a table's end, `PoolPlan.release_front`)."""
    plan = PoolPlan(pool)
    (plan.release_front if front else plan.release)(blocks)
    plan.last = True
    ops: Ops = []
    plan.emit(ops)
    commit(ops_of(ops))


def test_a_pool_idle_at_the_last_end_without_cached_blocks_is_as_built() -> None:
    """When the end of the last request leaves every block free and none holding a
    registered prefix, the pool is as built: no queue, ids handed out from 1 again
    (`PoolPlan._emit_built`). Frees that leave a block held, or that are not the last end
    (`BlockPool.free`: a pool alone), keep the queue; so does a cached free block: the
    queue's order is the prefix cache's eviction order."""
    pool = BlockPool(40, name="g")
    taken = pool.allocate_n(30)
    _release_last(pool, taken[:20])  # 10 still held
    assert len(pool._queue) == 20 and pool._fresh == 31
    _release_last(pool, taken[20:])
    assert (pool._fresh, len(pool._queue), pool._head, len(pool._iota)) == (1, 0, 0, 0)
    assert pool.num_free == 39 and pool.free_queue() == list(range(1, 40))
    assert pool.allocate_n(3) == [1, 2, 3]
    pool.free([1, 2, 3])  # not the last end: the queue is kept
    assert pool._fresh == 4 and pool.free_queue()[-3:] == [1, 2, 3]

    cache: CacheMap = {}
    blocks = pool.allocate_n(2)
    pool.register(blocks[0], cache, b"k")
    _release_last(pool, blocks)
    assert pool.num_cached_free == 1 and pool._fresh == 6
    assert pool.free_queue()[-5:] == [1, 2, 3, *blocks]
    _release_last(pool, list(pool.allocate_n(39)))  # the cached block evicted by the take
    assert (pool._fresh, len(pool._queue), pool._cached, cache) == (1, 0, {}, {})


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data())
def test_an_idle_pool_forgets_the_order_of_its_blocks_without_content(
    data: st.DataObject,
) -> None:
    # The end of the last request, in a pool that keeps cached blocks and whose queue is due
    # (`BlockPool.idle_due`, forced here), rewrites the queue (`PoolPlan._emit_idle`): the ids
    # above the highest cached block never handed out again, those below it without content
    # in id order, then the cached ones in the order the queue held them. Against the same
    # end without the rewrite: the same free blocks, cache and maps, and taking every free
    # block evicts the same cached blocks in the same order, after every block without content.
    size, pool, cache, held = _drawn_pool(data, 40, 30, keys=8, registers=2)
    twin, _ = copy.deepcopy((pool, cache))
    for each, due in ((pool, True), (twin, False)):
        with mock.patch.object(BlockPool, "idle_due", lambda self, due=due: due):
            _release_last(each, held, front=True)
    assert pool.num_used == twin.num_used == 0
    kept = set(twin._cached)
    event("cached blocks kept" if kept else "none kept: as built")
    assert _pool_state(pool)[2:] == _pool_state(twin)[2:]
    if not kept:
        assert (pool._fresh, len(pool._queue)) == (1, 0)
        return
    top = max(kept) + 1
    lru = [b for b in twin.free_queue() if b in kept]
    below = [b for b in range(1, top) if b not in kept]
    assert pool.free_queue() == [*range(top, size), *below, *lru]
    assert (pool._fresh, pool._head, pool._num_stale, pool._stale) == (top, 0, 0, {})
    assert pool._idle == len(pool._queue) == len(below) + len(lru)
    taken = [pool.allocate_n(pool.num_free), twin.allocate_n(twin.num_free)]
    evicted = [[b for b in t if b in kept] for t in taken]
    assert evicted[0] == evicted[1] == lru
    assert taken[0][-len(lru) :] == lru


def test_a_pool_holds_at_least_the_null_block() -> None:
    assert BlockPool(1).num_free == 0
    with pytest.raises(ValueError, match="needs >= 1 block"):
        BlockPool(0)


def _pool_state(pool: BlockPool) -> tuple[object, ...]:
    """What a plan's commit changes in a pool: the queue, counts, cached blocks and maps."""
    return (
        tuple(pool.free_queue()),
        tuple((b, pool.ref_count(b)) for b in pool.held_blocks()),
        tuple(sorted(pool._cached.items())),
        tuple(pool.cached_free_blocks()),
        tuple(sorted((k, tuple(holders(v))) for m in pool._maps for k, v in m.items())),
        pool.num_free,
        pool.num_used,
    )


def _drawn_pool(
    data: st.DataObject, most: int, calls: int, keys: int, registers: int = 1
) -> tuple[int, BlockPool, CacheMap, list[int]]:
    """A pool of 2 .. ``most`` blocks after up to ``calls`` drawn takes, frees, registrations
    (under one of ``keys`` keys; ``registers``: their weight) and touches of cached blocks:
    shared (touched), registered, cached-free and stale blocks. Returns its size, the pool,
    its cache map and the blocks held (a touched one once per touch)."""
    size = data.draw(st.integers(2, most), label="blocks")
    pool = BlockPool(size, name="g")
    cache: CacheMap = {}
    held: list[int] = []
    ops = ("take", "free", *["register"] * registers, "touch")
    for _ in range(data.draw(st.integers(0, calls), label="calls")):
        op = data.draw(st.sampled_from(ops), label="op")
        if op == "take" and pool.num_free:
            held += pool.allocate_n(data.draw(st.integers(1, pool.num_free), label="n"))
        elif op == "free" and held:
            pool.free([held.pop(data.draw(st.integers(0, len(held) - 1), label="freed"))])
        elif op == "register" and held:
            block = data.draw(st.sampled_from(held), label="registered")
            if not pool.is_cached(block):
                key = data.draw(st.integers(0, keys - 1), label="key")
                pool.register(block, cache, bytes([key]))
        elif op == "touch" and pool._cached:
            block = data.draw(st.sampled_from(sorted(pool._cached)), label="touched")
            pool.touch(block)
            held.append(block)
    return size, pool, cache, held


@settings(max_examples=examples(200), deadline=None)
@given(data=st.data())
def test_a_released_run_matches_releasing_one_block_at_a_time(data: st.DataObject) -> None:
    # `PoolPlan.release` of many blocks (a finished request's table) takes a run path in C
    # (`_release_run`) when the plan knows none of them, else the per-block loop; the two
    # must do what the per-block loop alone does: the same
    # error for a block not held, the same planned counts and free blocks, the same pool after
    # the commit. Pools drawn with shared (touched), registered, cached-free and stale blocks;
    # the plan may already have taken, touched, registered or released blocks.
    size, pool, cache, held = _drawn_pool(data, 14, 12, keys=3)
    twins = [copy.deepcopy((pool, cache)) for _ in range(2)]  # each with its own map
    plans = [PoolPlan(p) for p, _ in twins]
    maps = {id(plan): m for plan, (_, m) in zip(plans, twins, strict=True)}
    # Planned before the release, on both plans alike.
    for _ in range(data.draw(st.integers(0, 2), label="planned")):
        op = data.draw(st.sampled_from(("take", "touch", "register", "release")), label="planned")
        for plan in plans:
            fresh = [b for b in held if plan.count(b) and plan.cached(b) is None]
            if op == "register" and fresh:
                plan.register(fresh[0], maps[id(plan)], b"p")
            elif op == "take" and plan.num_free:
                plan.take(1)
            elif op == "touch" and plan.pool._cached:
                plan.touch(sorted(plan.pool._cached)[0])
            elif op == "release" and held:
                with contextlib.suppress(AssertionError):
                    plan._release_each([held[0]])
    # Mostly a table (held blocks, each once), else anything (a block twice, one not held).
    candidates = [*sorted(set(held)), NULL_BLOCK, size - 1]
    tables = st.lists(st.sampled_from(sorted(set(held))), unique=True) if held else st.just([])
    blocks = data.draw(
        tables | tables | st.lists(st.sampled_from(candidates), max_size=8), label="released"
    )
    run = plans[0]

    def run_else_each(given: list[int]) -> None:
        if not run._release_run(given):
            run._release_each(given)

    outcomes: list[str | None] = []
    for release in (run_else_each, plans[1]._release_each):
        try:
            release(blocks)
        except AssertionError as exc:
            outcomes.append(str(exc))
            continue
        outcomes.append(None)
    assert outcomes[0] == outcomes[1]
    if outcomes[0] is not None:
        return  # the caller discards a plan that raised
    one, two = plans
    assert [one.count(b) for b in range(size)] == [two.count(b) for b in range(size)]
    assert one.num_free == two.num_free and one.used == two.used
    assert [one.cached(b) for b in range(size)] == [two.cached(b) for b in range(size)]
    for plan in plans:
        ops: Ops = []
        plan.emit(ops)
        commit(ops_of(ops))
    assert _pool_state(twins[0][0]) == _pool_state(twins[1][0])


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data())
def test_an_end_split_in_a_loop_matches_the_split_in_passes_in_c(data: st.DataObject) -> None:
    # `BlockPool.ended` splits a short table's end in a loop (`_ended_few`), a longer one in
    # passes in C (`_ended_sets`): on any pool (shared, cached, cached-free and stale blocks)
    # and any blocks (a table, or a block twice, the null block, one free or never handed
    # out) both refuse alike or give the same front, the same back and, committed, the same
    # pool. The route for a table in a request's order (`_ended_in_order`, tried first where
    # the pool caches and has no stale entry) never takes what the loop refuses or splits
    # otherwise.
    size, pool, _, held = _drawn_pool(data, 40, 30, keys=4, registers=2)
    table = st.lists(st.sampled_from(sorted(set(held))), unique=True) if held else st.just([])
    anything = st.lists(st.integers(0, size), max_size=20)
    # A table and one block that spoils it: a free cached one, a free one, the null block,
    # one never handed out, or one of its own twice.
    kinds = [pool.cached_free_blocks(), sorted(pool.free_queue()), [NULL_BLOCK, size], held]
    spoiler = st.one_of([st.sampled_from(kind) for kind in kinds if kind])
    spoiled = st.tuples(table, spoiler).map(lambda t: [*t[0], t[1]])
    blocks = array("i", data.draw(table | table | anything | spoiled, label="ended"))
    twins = [copy.deepcopy(pool) for _ in range(3)]
    few, sets = twins[0]._ended_few(blocks), twins[1]._ended_sets(blocks)
    in_order = (
        twins[2]._ended_in_order(blocks, blocks.tolist())
        if len(set(blocks)) == len(blocks)  # (`_ended_sets` refuses a block twice first)
        else None
    )
    if in_order is not None:
        assert few is not None
        assert (list(in_order[0]), list(in_order[1])) == (list(few[0]), list(few[1]))
        assert in_order[3] == few[3]
        commit(ops_of(in_order[2]))
    if few is None or sets is None:
        assert few is sets is None
        return
    (front, back, ops, held_too), (front_c, back_c, ops_c, held_too_c) = few, sets
    assert (list(front), list(back)) == (list(front_c), list(back_c))
    # (the blocks another table holds too: they stay held, and the ledger's shares drop)
    assert held_too == held_too_c == pool.count_shared(blocks)
    commit(ops_of(ops))  # each twin's own operations
    commit(ops_of(ops_c))
    assert _pool_state(twins[0]) == _pool_state(twins[1])
    assert twins[0]._shared == twins[1]._shared
    if in_order is not None:
        assert _pool_state(twins[2]) == _pool_state(twins[0])
        assert twins[2]._shared == twins[0]._shared


@settings(max_examples=examples(200), deadline=None)
@given(data=st.data())
def test_an_end_in_a_requests_order_splits_as_the_loop_does(data: st.DataObject) -> None:
    # A table as a request's end gives it: tail first where it cached content (its blocks
    # without content, its cached ones, its prefix hits, which other tables share), else the
    # other way round. `_ended_sets` then takes front and back as slices of it; they are
    # what the loop gives, and, committed, the same pool; tail first, in a pool that caches
    # and has no stale entry, by the route that finds the three parts by their ends
    # (`_ended_in_order`). (Pools drawn with many touches: shared blocks in most tables.)
    _, pool, _, held = _drawn_pool(data, 40, 40, keys=4, registers=3)
    own = sorted(set(held))
    drawn = st.lists(st.sampled_from(own), min_size=1, unique=True) if own else st.just([])
    blocks = data.draw(drawn, label="table")

    def kind(b: int) -> int:
        return 2 if b in pool._shared else 1 if b in pool._cached or b in pool._stale else 0

    tail_first = data.draw(st.booleans(), label="tail first")
    blocks.sort(key=kind, reverse=not tail_first)
    twins = [copy.deepcopy(pool) for _ in range(2)]
    table = array("i", blocks)
    few, sets = twins[0]._ended_few(table), twins[1]._ended_sets(table)
    assert few is not None and sets is not None  # (a table: each block once, held)
    if tail_first and pool._cached and not pool._stale:
        assert pool._ended_in_order(table, blocks) is not None
    assert [list(few[0]), list(few[1])] == [list(sets[0]), list(sets[1])]
    assert few[3] == sets[3] == pool.count_shared(blocks)
    commit(ops_of(few[2]))
    commit(ops_of(sets[2]))
    assert _pool_state(twins[0]) == _pool_state(twins[1])
    assert twins[0]._shared == twins[1]._shared


def _released_drawn(data: st.DataObject) -> tuple[int, BlockPool, list[int]]:
    """A drawn pool's size, the pool, and blocks a step's windows release (each held by one
    table, none shared), drawn from its held blocks."""
    size, pool, _, held = _drawn_pool(data, 20, 16, keys=3)
    once = sorted(b for b in set(held) if held.count(b) == 1 and b not in pool._shared)
    released = data.draw(
        st.lists(st.sampled_from(once), unique=True) if once else st.just([]), label="released"
    )
    return size, pool, released


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data())
def test_a_run_past_the_queue_takes_the_released_blocks_as_a_plan_does(data: st.DataObject) -> None:
    # `BlockPool.front` with ``released`` (the blocks a step's windows evicted, which go to
    # the queue's back before its take): the fresh ids, the queue's front, then the released
    # blocks, exactly what a plan that releases them and then takes gives; or None (a stale
    # entry among them, or too few), never another run. Two runs in a row: the second
    # starts where the first left the head, which may be past the queue, into the released.
    size, pool, released = _released_drawn(data)
    plan = PoolPlan(pool)
    plan.release(released)
    fresh, head = pool._fresh, pool._head
    for label in ("first", "second"):
        n = data.draw(st.integers(1, max(1, plan.num_free + 1)), label=label)
        run = pool.front(fresh, head, n, released)
        if n > plan.num_free:
            assert run is None
            return
        taken = list(plan.take(n))
        if run is None:
            event("refused")
            return
        event("past the queue" if head + n - min(n, size - fresh) > len(pool._queue) else "in it")
        assert list(run) == taken
        k = min(n, size - fresh)
        fresh, head = fresh + k, head + n - k


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data())
def test_a_batch_run_past_the_queue_takes_what_front_takes(data: st.DataObject) -> None:
    # `BlockPool.front_released` (a batch's run past the queue's entries: its earlier
    # requests' evictions, then the taking group's own, each in queue order, given apart so
    # that the batch's growing list is not copied per take): where the take goes past the
    # queue's entries, the run `front` takes with the two lists joined (itself checked
    # against a plan above), unless a block it takes past the queue is cached (None: the
    # core's to plan); None too where the queue's entries suffice or all are too few.
    size, pool, released = _released_drawn(data)
    cut = data.draw(st.integers(0, len(released)), label="own from")
    earlier, own = array("i", released[:cut]), array("i", released[cut:][::-1])
    joined = [*earlier, *own]
    fresh, head = pool._fresh, pool._head
    for label in ("first", "second"):
        # (mostly a take past the queue's entries: the fresh ids and live ones all taken)
        least = size - fresh + max(len(pool._queue) - head, 0) + 1
        n = data.draw(
            st.integers(least, least + len(joined)) | st.integers(1, size + len(joined)),
            label=label,
        )
        k = min(n, size - fresh)
        past = head + n - k > len(pool._queue)
        run = pool.front_released(fresh, head, n, earlier, own)
        expected = pool.front(fresh, head, n, joined) if past else None
        beyond = [] if expected is None else list(expected)[k + max(len(pool._queue) - head, 0):]
        if expected is not None and any(b in pool._cached for b in beyond):
            event("a cached one past the queue")
            expected = None
        assert (None if run is None else list(run)) == (
            None if expected is None else list(expected)
        ), (fresh, head, n)
        if run is None:
            return
        event("past the queue")
        fresh, head = fresh + k, head + n - k


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data())
def test_a_run_past_stale_entries_takes_what_a_plan_takes(data: st.DataObject) -> None:
    # `BlockPool.front_past_stale` (a lean crossing's run in a pool of one group, where a
    # prefix hit took blocks back out of the queue): the fresh ids, then the queue's live
    # entries, its stale ones skipped, exactly what a plan's take gives; the queue's index
    # after the last taken, where the plan's head goes; and, its ops committed, the stale
    # counts the take leaves. None, and no op, where fewer are free. Pools drawn with many
    # touches: stale entries.
    _, pool, cache, _ = _drawn_pool(data, 24, 12, keys=4)
    # Blocks cached and freed (their entries in the queue), then some taken back by hits.
    if pool.num_free:
        # (most of the free ones: the fresh ids handed out, so that takes reach the queue)
        free = pool.num_free
        more = pool.allocate_n(data.draw(st.integers(max(1, free - 2), free), label="cached"))
        for i, block in enumerate(more):
            if not pool.is_cached(block):
                pool.register(block, cache, bytes([100 + i]))
        pool.free(more)
        hits = st.lists(st.sampled_from(more), min_size=1, unique=True)
        for block in data.draw(hits, label="hits"):
            pool.touch(block)
    # (takes reaching past those entries: most of the free blocks, or one more than there are)
    n = data.draw(st.integers(max(1, pool.num_free - 4), max(1, pool.num_free + 1)), label="n")
    ops: Ops = []
    got = pool.front_past_stale(pool._fresh, pool._head, n, ops)
    if n > pool.num_free:
        assert got is None and not ops
        return
    assert got is not None
    run, after = got
    taker = copy.deepcopy(pool)
    plan = PoolPlan(taker)
    assert list(run) == list(plan.take(n))
    assert after == plan.head  # (before the commit drops the entries taken)
    taker._apply(plan)
    event("stale skipped" if ops else "none stale")
    commit(ops_of(ops))
    assert pool._stale == taker._stale
    assert pool._num_stale == taker._num_stale


def test_a_finished_table_with_shared_and_cached_blocks_is_released_as_a_run() -> None:
    # A finished request's table: a prompt block a prefix hit shares (another request holds
    # it too), a block it registered, blocks of its own. The run path takes it (one reference
    # less on the shared block, the rest to the back of the queue, the registered one free
    # and still cached), as the per-block loop would.
    pool = BlockPool(8, name="g")
    cache: CacheMap = {}
    shared, registered, *own = pool.allocate_n(4)
    pool.register(shared, cache, b"a")
    pool.register(registered, cache, b"b")
    pool.touch(shared)
    twin = copy.deepcopy(pool)
    plan, each = PoolPlan(pool), PoolPlan(twin)
    table = [shared, registered, *own]
    assert plan._release_run(table)
    each._release_each(table)
    for p in (plan, each):
        ops: Ops = []
        p.emit(ops)
        commit(ops_of(ops))
    assert _pool_state(pool) == _pool_state(twin)
    assert pool.ref_count(shared) == 1 and pool.free_queue()[-3:] == [registered, *own]
    assert pool.is_cached(registered) and pool.num_cached_free == 1


def _commit_plan(plan: PoolPlan) -> None:
    ops: Ops = []
    plan.emit(ops)
    commit(ops_of(ops))


def test_blocks_a_rollback_gives_back_go_to_the_front_and_are_taken_again_first() -> None:
    # Blocks 1-6 taken, then freed to the back in an end's order: the queue 7, then 6 .. 1.
    pool = BlockPool(8, name="g")
    taken = pool.allocate_n(6)
    pool.free(reversed(taken))
    held = pool.allocate_n(3)  # 7, 6, 5: the queue is now 4, 3, 2, 1
    assert held == [7, 6, 5] and pool.free_queue() == [4, 3, 2, 1]
    # A rollback gives back 5, another then 6: each ahead of the queue, the later first.
    for block in (5, 6):
        plan = PoolPlan(pool)
        plan.release_front([block])
        _commit_plan(plan)
    assert pool.free_queue() == [6, 5, 4, 3, 2, 1] and pool.num_used == 1
    # The same two rollbacks on one plan (a batch) leave the same queue; a take on that plan
    # gets the last one given back first, as a take committed after them would.
    again = BlockPool(8, name="g")
    again.free(reversed(again.allocate_n(6)))
    again.allocate_n(3)
    plan = PoolPlan(again)
    plan.release_front([5])
    plan.release_front([6])
    assert plan.num_free == 6 and list(plan.take(1)) == [6]
    plan.release_front([6])
    _commit_plan(plan)
    assert again.free_queue() == pool.free_queue() and again.num_used == pool.num_used
    # With ids never handed out, those come first (the queue's front follows them).
    fresh = BlockPool(8, name="g")
    b = fresh.allocate_n(2)[1]
    plan = PoolPlan(fresh)
    plan.release_front([b])
    assert list(plan.take(2)) == [3, 4]
    _commit_plan(plan)
    assert fresh.free_queue() == [5, 6, 7, b]


def test_a_cached_block_given_back_by_a_rollback_goes_to_the_back() -> None:
    # No rolled-back position is ever registered, but `release_front` keeps the rule for any
    # block: one whose content is cached waits at the back (LRU), one still held elsewhere
    # only loses a reference.
    pool = BlockPool(6, name="g")
    cache: CacheMap = {}
    blocks = pool.allocate_n(5)
    pool.register(blocks[0], cache, b"k")
    pool.free(reversed(blocks[2:]))  # the queue: 5, 4, 3
    plan = PoolPlan(pool)
    plan.release_front([blocks[0], blocks[1]])
    _commit_plan(plan)
    assert pool.free_queue() == [blocks[1], 5, 4, 3, blocks[0]]
    assert pool.num_cached_free == 1 and pool.num_used == 0


def test_blocks_put_at_the_front_copy_the_queue_once_an_eighth_of_it() -> None:
    # Where fewer entries were taken than blocks go to the front, the queue is copied once
    # with room for an eighth of it (`front_room`): the next ones are stored over that room,
    # not by a copy of the queue each (an end a step, thousands of cached blocks behind).
    pool = BlockPool(1001, name="g")
    blocks = pool.allocate_n(1000)
    pool.free(blocks[:800])  # 800 at the front of an empty queue: no room needed
    assert pool._head == 0 and len(pool._queue) == 800
    pool.free([blocks[800]])  # none taken: room for 100 made, then the block
    assert pool._head == 100 and len(pool._queue) == 901
    pool.free([blocks[801]])  # over the room: no copy
    assert pool._head == 99 and len(pool._queue) == 901
    assert pool.free_queue()[:3] == [blocks[801], blocks[800], blocks[0]]
    assert pool.num_free == 802 and pool.allocate_n(2) == [blocks[801], blocks[800]]


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data())
def test_a_keys_planned_changes_written_back_are_a_lists(data: st.DataObject) -> None:
    # A key's blocks in a prefix-cache map (none, one as an int, several as a list, oldest
    # first), then a plan's evictions and filings (`HeldBlocks`: a block evicted, one filed
    # new, one evicted and filed again) written back (`key_ops`), against the same changes on
    # a plain list. The entry ends as that list (none: the key gone; one: an int), and a list
    # entry that keeps two blocks or more is changed in place (the same object: no copy of
    # its blocks, since 6ef77c9). The one-change ops
    # (`filed_op`, `unfiled_op`) too.
    count = data.draw(st.integers(0, 6), label="blocks")
    blocks = list(range(10, 10 + count))
    cache: CacheMap = {}
    if count:
        cache[b"k"] = filed(blocks)
    entry = cache.get(b"k")
    planned, mirror = HeldBlocks(entry), list(blocks)
    fresh = iter(range(100, 200))
    for _ in range(data.draw(st.integers(0, 8), label="changes")):
        choice = data.draw(st.sampled_from(["evict", "file", "again"]))
        if choice == "file" or not mirror:
            block = next(fresh)
        elif choice == "evict":
            block = data.draw(st.sampled_from(mirror))
            planned.remove(block)
            mirror.remove(block)
            continue
        else:  # evicted, and filed again at once: its newest
            block = data.draw(st.sampled_from(mirror))
            planned.remove(block)
            mirror.remove(block)
        planned.append(block)
        mirror.append(block)
        assert list(planned) == mirror and len(planned) == len(mirror)
    with pytest.raises(ValueError):
        planned.remove(99)
    commit(ops_of(key_ops(cache, b"k", planned)))
    if not mirror:
        assert b"k" not in cache
    else:
        assert holders(cache[b"k"]) == mirror
        assert type(cache[b"k"]) is (int if len(mirror) == 1 else list)
        if type(entry) is list and len(mirror) >= 2:
            assert cache[b"k"] is entry
    # One change at a time, as the generated steps make them.
    if mirror:
        held = cache[b"k"]
        block = data.draw(st.sampled_from(mirror))
        commit(ops_of([unfiled_op(cache, b"k", held, block)]))
        mirror.remove(block)
        assert holders(cache.get(b"k")) == mirror
        assert len(mirror) != 1 or type(cache[b"k"]) is int
        if type(held) is list and len(mirror) >= 2:
            assert cache[b"k"] is held
    now = cache.get(b"k")
    commit(ops_of([filed_op(cache, b"k", now, 300)]))
    assert holders(cache[b"k"]) == [*mirror, 300]
    if type(now) is list:
        assert cache[b"k"] is now


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data())
def test_a_plans_few_keys_are_written_as_its_sorted_pass_writes_them(data: st.DataObject) -> None:
    # A boundary plan's planned keys (`_Boundary.lists`) in two prefix-cache maps: new keys
    # filed one block or more (lists, as the planners make them for a key with no entry, one
    # left empty), held keys changed (`HeldBlocks`: blocks evicted, filed, all evicted). A
    # request's plan writes them one key at a time (`lists_ops`, up to `_FEW_KEYS`); a
    # prompt's chunk sorted by map first. Both leave the maps alike: each key's blocks, in
    # order, one block as an int, several as a list (none: the key gone).
    from kvunits.runtime import _core

    maps: list[CacheMap] = [{}, {}]
    plan = _core._Boundary()
    fresh = iter(range(100, 400))
    for m, cache in enumerate(maps):
        for k in range(data.draw(st.integers(0, 4), label=f"keys of map {m}")):
            key = bytes([m, k])
            held = data.draw(st.integers(0, 3), label="held")
            if held:
                cache[key] = filed([next(fresh) for _ in range(held)])
            if not data.draw(st.booleans(), label="planned"):
                continue
            filing = [next(fresh) for _ in range(data.draw(st.integers(0, 2), label="filed"))]
            blocks: list[int] | HeldBlocks = filing  # (a key with no entry: a plain list)
            if held:
                blocks = HeldBlocks(cache[key])
                kept = holders(cache[key])
                for block in data.draw(st.lists(st.sampled_from(kept), unique=True)):
                    blocks.remove(block)
                for block in filing:
                    blocks.append(block)
            plan.lists[(id(cache), key)] = (cache, key, blocks)
    expected = {
        (m, key): list(blocks)
        for m, cache in enumerate(maps)
        for held_by, key, blocks in plan.lists.values()
        if held_by is cache
    }
    written = []
    for few in (0, 1000):  # the sorted pass, then one key at a time
        copied = copy.deepcopy((maps, plan))
        with mock.patch.object(_core, "_FEW_KEYS", few):
            ops: Ops = []
            _core.CoordinatorCore._emit_boundary(None, ops, copied[1])  # type: ignore[arg-type]
        commit(ops_of(ops))
        written.append(copied[0])
    assert written[0] == written[1]
    for m, cache in enumerate(written[1]):
        for key, entry in cache.items():
            assert isinstance(entry, int) or len(entry) >= 2, (m, key, entry)
    for (m, key), blocks in expected.items():
        assert holders(written[1][m].get(key)) == blocks, (m, key)
    ops = []
    lists_ops(ops, {})
    assert ops == []
