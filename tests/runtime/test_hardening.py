"""What fuzzing and random load broke in the allocator (issue 13), fixed so it stays fixed.

* A coordinator costs memory that does not grow with its pools: a pool of 2**31 blocks no
  prefix cache uses is built as cheaply as one of 4 (measured by allocation counts, not by
  time; one a prefix cache uses builds its flags and ids, `BlockPool.add_map`), and a plan
  whose block ids do not fit int32 block tables is a `SpecError`.
* The lazy free queue keeps the exact FIFO order of a plain queue of every id.
* Request ids are checked: a str of 1 .. 256 characters, anything else a `RequestError`.
* Two threads driving one coordinator get `ConcurrentUseError`, never a corrupted pool.
"""

from __future__ import annotations

import sys
import threading
import time
import tracemalloc
from collections import deque
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvunits.contracts import (
    Bytes,
    CacheBlocks,
    Elements,
    EngineSpec,
    FullAttentionLayer,
    KVHeads,
    Layers,
    ModelSpec,
    PoolBlocks,
    SlidingWindowLayer,
    SpecError,
    StateLayer,
    Tokens,
    UnitTypeError,
    Window,
)
from kvunits.contracts.deploy import RankBytes
from kvunits.runtime import (
    AllocationError,
    ConcurrentUseError,
    KVCacheCoordinator,
    RequestError,
    plan,
)
from kvunits.runtime.block_pool import MAX_POOL_BLOCKS, BlockPool

from ..examples import examples
from .support import check_pools, coordinator, snapshot

# -- memory that does not grow with the pool -----------------------------------------------------


def _state_model() -> ModelSpec:
    # The case: a 1-byte page (one state of 1 byte per request, block size 1).
    return ModelSpec.stacked("tiny", {"s": (StateLayer(state_size=Bytes(1)), Layers(1))})


def _engine(budget: int) -> EngineSpec:
    return EngineSpec(
        block_size_slots=1,
        max_model_len=Tokens(8),
        max_num_batched_tokens=Tokens(8),
        memory_budget=RankBytes(budget),
    )


def _allocated_bytes(build: Any) -> int:
    """Peak bytes Python allocates while ``build()`` runs (tracemalloc counts allocations:
    a measure of work that a loaded machine cannot skew)."""
    tracemalloc.start()
    try:
        kept = build()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del kept
    return peak


def test_a_plan_beyond_int32_block_ids_is_refused_with_the_budget_that_fits() -> None:
    with pytest.raises(SpecError, match="block ids must fit int32 block tables") as excinfo:
        plan(_state_model(), _engine(1 << 40))  # "1 TiB": 549,755,813,888 blocks of 1 byte
    # The budget the message names is the largest that fits, exactly.
    fits = int(str(excinfo.value).split("at most ")[-1].split(" byte")[0])
    assert plan(_state_model(), _engine(fits)).groups[0].num_blocks == PoolBlocks(MAX_POOL_BLOCKS)
    with pytest.raises(SpecError, match="block ids must fit int32"):
        plan(_state_model(), _engine(fits + 1))


def test_building_a_coordinator_does_not_grow_with_its_pool() -> None:
    small = plan(_state_model(), _engine(4))
    huge = plan(_state_model(), _engine(MAX_POOL_BLOCKS))  # 2**31 blocks of 1 byte, all usable
    assert huge.groups[0].num_blocks.numerical_value_in(PoolBlocks) == MAX_POOL_BLOCKS
    KVCacheCoordinator.from_plan(small)  # warm caches (imports, the plan's objects)
    cost_small = _allocated_bytes(lambda: KVCacheCoordinator.from_plan(small))
    cost_huge = _allocated_bytes(lambda: KVCacheCoordinator.from_plan(huge))
    # Before the fix the huge one allocated lists of 2**31 entries (SystemError or the OOM
    # killer); now both cost the same few kilobytes.
    assert cost_huge <= cost_small + 1024, (cost_small, cost_huge)
    coord = KVCacheCoordinator.from_plan(huge)
    handle = coord.group("s", Tokens)
    step = coord.stepper(handle)
    step.admit("r1", Tokens(8))
    step.allocate("r1", Tokens(1))
    assert coord.block_table("r1", handle) == [1]
    assert coord.usage(handle).free == CacheBlocks(MAX_POOL_BLOCKS - 2)


def test_a_pool_beyond_int32_ids_is_refused() -> None:
    assert BlockPool(MAX_POOL_BLOCKS).num_free == MAX_POOL_BLOCKS - 1
    with pytest.raises(SpecError, match=r"at most 2147483648 cache_block \(ids 0 .. 2147483647\)"):
        BlockPool(MAX_POOL_BLOCKS + 1, name="audio")
    with pytest.raises(SpecError, match="int32"):
        KVCacheCoordinator.from_plan(plan(_state_model(), _engine(4))).__class__(
            [p.group for p in plan(_state_model(), _engine(4)).groups],
            [PoolBlocks(MAX_POOL_BLOCKS + 1)],
        )


# -- the lazy free queue is a FIFO queue ----------------------------------------------------------


@settings(max_examples=examples(200))
@given(
    st.integers(1, 12),
    st.lists(
        st.tuples(st.sampled_from(["take", "free", "free_iter"]), st.integers(0, 5)), max_size=40
    ),
)
def test_the_lazy_queue_hands_out_what_a_plain_queue_does(num_blocks: int, ops: list[Any]) -> None:
    """A reference: a deque of every id never handed out, as the pool was before it became
    lazy, then a deque of the freed ones, each free's blocks (none cached) ahead of those
    freed before (`PoolPlan.release_front`). Blocks are freed from a list, or from a
    generator (read once: issue 23 found one freed block lost)."""
    pool = BlockPool(num_blocks, name="g")
    never, freed, held = deque(range(1, num_blocks)), deque[int](), list[int]()
    for op, n in ops:
        if op == "take":
            if n > len(never) + len(freed):
                with pytest.raises(AllocationError):
                    pool.allocate_n(n)
                continue
            taken = pool.allocate_n(n)
            assert taken == [(never or freed).popleft() for _ in range(n)]
            held.extend(taken)
        elif held:
            blocks = held[-n:] if n else []  # the newest first: any order is allowed
            del held[len(held) - len(blocks) :]
            pool.free(iter(blocks) if op == "free_iter" else blocks)
            freed.extendleft(reversed(blocks))
        queue = [*never, *freed]
        assert pool.free_queue() == queue
        assert pool.num_free == len(queue) and pool.num_used == len(held)
        assert all(pool.ref_count(b) == 1 for b in held)


def test_a_bad_free_changes_nothing() -> None:
    pool = BlockPool(5, name="g")
    taken = pool.allocate_n(3)
    with pytest.raises(AssertionError, match="block 1 of pool 'g' freed: not held"):
        pool.free([taken[0], taken[1], taken[0]])  # twice in one call
    assert pool.num_used == 3 and pool.num_free == 1
    assert pool.allocate_n(1) == [4]


# -- request ids ----------------------------------------------------------------------------------


def _one_group() -> KVCacheCoordinator:
    layer = SlidingWindowLayer(
        sliding_window=Window(4, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
    )
    return coordinator({"g": layer}, block_size=2, num_blocks=9, max_len=16, max_in_flight=4)


@pytest.mark.parametrize(
    ("request_id", "message"),
    [
        (1, r"a request id is a str, got 1 \(int\)"),
        (None, r"a request id is a str, got None \(NoneType\)"),
        (b"r0", r"a request id is a str, got b'r0' \(bytes\); decode it first"),
        (["r"], r"a request id is a str, got \['r'\] \(list\)"),
        ("", "a request id must not be empty"),
        ("r" * 257, "a request id is at most 256 characters long, got 257"),
    ],
)
def test_request_ids_are_checked(request_id: Any, message: str) -> None:
    coord = _one_group()
    g = coord.group("g", Tokens)
    step = coord.stepper(g)
    step.admit("ok", Tokens(8))
    before = snapshot(coord)
    with pytest.raises(RequestError, match=message):
        coord.admit(request_id)
    with pytest.raises(RequestError, match=message):
        step.admit(request_id, Tokens(8))
    with pytest.raises(RequestError, match=message):
        step.allocate(request_id, Tokens(1))
    with pytest.raises(RequestError, match=message):
        coord.free(request_id)
    with pytest.raises(RequestError, match=message):
        coord.kernel_inputs(request_id, g)
    assert request_id not in coord
    assert snapshot(coord) == before
    step.admit("r" * 256, Tokens(1))  # the longest id accepted


# -- threads --------------------------------------------------------------------------------------


@pytest.mark.parametrize("per_step", [2, 1])
def test_two_threads_get_a_clear_error_and_lose_no_block(per_step: int) -> None:
    """Two threads drive one coordinator without a lock (the issue's scenario: no reservation,
    4 of 12 trials lost blocks for good). Each call now either runs as if alone or raises
    `ConcurrentUseError` having changed nothing; at the end the pools are consistent, every
    request's blocks are where its thread's bookkeeping says, and freeing all leaks nothing.
    Steps of 2 tokens take the general path, steps of 1 the specialised one (issue 14)."""
    layer = SlidingWindowLayer(
        sliding_window=Window(4, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
    )
    full = FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8))
    coord = coordinator(
        {"swa": layer, "full": full},
        block_size=2,
        num_blocks=40,
        max_len=24,
        max_in_flight=3,
        reserve=False,
    )
    step = coord.stepper(coord.group("swa", Tokens), coord.group("full", Tokens))
    refused = [0, 0]
    lengths: list[dict[str, int]] = [{}, {}]
    failures: list[BaseException] = []

    start = threading.Barrier(2)
    enough = threading.Event()  # both threads run until they have collided often enough

    def drive(worker: int) -> None:
        mine = lengths[worker]
        try:
            start.wait()
            for i in range(200_000):
                if enough.is_set():
                    break
                rid = f"w{worker}-{i % 6}"
                try:
                    if rid not in mine:
                        coord.admit(rid)
                        mine[rid] = 0
                    elif mine[rid] >= 22:
                        coord.free(rid)
                        del mine[rid]
                    else:
                        step.allocate(rid, Tokens(per_step), Tokens(per_step))
                        mine[rid] += per_step
                except ConcurrentUseError:
                    refused[worker] += 1
                    if sum(refused) >= 50:
                        enough.set()
                except AllocationError:
                    pass  # no reservation: a step may run short, and then changes nothing
        except BaseException as exc:  # anything else is a failure of the test
            failures.append(exc)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as CPython allows
    try:
        threads = [threading.Thread(target=drive, args=(w,)) for w in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(old)
    assert not failures, failures
    assert sum(refused) > 0, "the threads never overlapped: the scenario tested nothing"
    check_pools(coord)
    for mine in lengths:
        for rid, length in mine.items():
            assert coord.seq_len(rid, coord.group("full", Tokens)) == Tokens(length)
            coord.free(rid)
    check_pools(coord)
    assert all(u.used == CacheBlocks(0) for u in coord.usage_by_group().values())


def test_a_call_from_inside_a_call_is_refused_and_the_outer_call_completes() -> None:
    from .support import Interference

    coord = _one_group()
    g = coord.group("g", Tokens)
    step = coord.stepper(g)
    step.admit("r1", Tokens(8))
    step.admit("r2", Tokens(8))
    with Interference(coord._core.pools[0], "allocate_n", "reenter", lambda: coord.free("r2")) as i:
        assert step.allocate("r1", Tokens(3)) == [[2, 3, 4]]
    assert i.hits == 1 and len(i.refused) == 1
    (error,) = i.refused
    assert isinstance(error, ConcurrentUseError) and error.operation == "free"
    assert "r2" in coord and coord.usage(g).used == CacheBlocks(2)
    check_pools(coord)


# -- copies (issue 24, item 2) ---------------------------------------------------------------------


def _streams() -> tuple[KVCacheCoordinator, Any, Any]:
    """Two groups (a window of 4 tokens and full attention, blocks of 2), requests a and b
    mid-stream, b with a speculative tail."""
    coord = coordinator(
        {
            "swa": SlidingWindowLayer(
                sliding_window=Window(4, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
            ),
            "full": FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8)),
        },
        block_size=2,
        num_blocks=60,
        max_len=30,
        max_in_flight=6,
    )
    swa, full = coord.group("swa", Tokens), coord.group("full", Tokens)
    step = coord.stepper(swa, full)
    for rid in ("a", "b"):
        step.admit(rid, Tokens(30), Tokens(30))
        step.allocate(rid, Tokens(5), Tokens(5))
    step.allocate_speculative("b", Tokens(1), Tokens(1), lookahead=(Tokens(2), Tokens(2)))
    return coord, swa, full


def test_a_deep_copy_is_an_independent_coordinator() -> None:
    """The probe's deep copy shared the original's step closure and token: stepping the copy
    advanced the original, whose next call then failed. Now a deep copy has its own state,
    functions and token: each steps, frees and is checked on its own."""
    import copy

    original, swa, full = _streams()
    before = snapshot(original)
    twin = copy.deepcopy(original)
    assert snapshot(twin) == before
    t_swa, t_full = twin.group("swa", Tokens), twin.group("full", Tokens)
    t_step = twin.stepper(t_swa, t_full)
    for _ in range(6):
        t_step.allocate("a", Tokens(1), Tokens(1))
    t_step.rollback("b", Tokens(2), Tokens(2))
    t_step.admit("c", Tokens(30), Tokens(30))
    assert snapshot(original) == before  # nothing of the copy's steps reached the original
    step = original.stepper(swa, full)
    step.allocate("a", Tokens(1), Tokens(1))
    assert original.seq_len("a", full) == Tokens(6) and twin.seq_len("a", t_full) == Tokens(11)
    assert "c" in twin and "c" not in original
    for coord in (original, twin):
        check_pools(coord)
        for rid in list(coord._core.requests):
            coord.free(rid)
        check_pools(coord)
        assert all(u.used == CacheBlocks(0) for u in coord.usage_by_group().values())
    # A handle binds its own coordinator.
    with pytest.raises(UnitTypeError, match="GroupHandle of this coordinator"):
        twin.block_table("a", swa)


def test_shallow_copies_and_pickles_are_refused_clearly() -> None:
    import copy
    import pickle

    coord, swa, full = _streams()
    before = snapshot(coord)
    with pytest.raises(TypeError, match=r"use copy\.deepcopy for an independent coordinator"):
        copy.copy(coord)
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(coord)
    with pytest.raises(TypeError, match="deep-copy the coordinator"):
        copy.deepcopy(swa)
    with pytest.raises(TypeError, match="deep-copy the coordinator"):
        copy.deepcopy(coord.stepper(swa, full))
    assert copy.copy(swa) is swa  # a handle is a fixed reference
    assert snapshot(coord) == before


def test_a_deep_copy_from_inside_a_call_is_refused() -> None:
    from .support import Interference

    coord, swa, full = _streams()
    step = coord.stepper(swa, full)
    import copy

    def reenter() -> object:
        return copy.deepcopy(coord)

    with Interference(coord._core.pools[1], "allocate_n", "reenter", reenter) as i:
        step.allocate("a", Tokens(4), Tokens(4))  # two blocks a group: the general path
    assert i.hits == 1 and isinstance(i.refused[0], ConcurrentUseError)
    check_pools(coord)


def test_a_token_an_ended_call_left_is_taken_over_beside_threads_in_other_code() -> None:
    """A token left with a call that ended (an interrupt in its exception handler before the
    release leaves it so) is taken over by the next call, though another thread runs: code
    of its own with a local ``me`` (never read: another thread's frames are only looked at
    for kvunits' own calls, whose locals are not read either, since reading a live frame's
    locals from another thread crashed CPython 3.11 once). A thread inside a kvunits call is
    a call that may hold it: the token is not taken over while it runs."""
    coord, swa, full = _streams()
    guard = coord._core.guard
    ended: list[object] = []
    assert guard.claim(0, ended) is ended  # held by a call no longer running
    inside, leave = threading.Event(), threading.Event()

    def elsewhere() -> None:
        me = object()  # the thread's own, unrelated to any token
        inside.set()
        leave.wait(10)
        del me

    thread = threading.Thread(target=elsewhere)
    thread.start()
    try:
        assert inside.wait(10)
        busy = guard.busy
        served = coord.block_table("a", swa)  # taken over
    finally:
        leave.set()
        thread.join()
    assert not busy and served == coord.block_table("a", swa) and guard.owner == {}
    # Another thread stopped inside a step of this coordinator: it holds the token, and a
    # call here is refused while it runs; once it returns, calls are served.
    from .support import Interference

    inside.clear()
    leave.clear()
    step = coord.stepper(swa, full)

    def stop_there() -> None:
        inside.set()
        leave.wait(10)

    with Interference(coord._core.pools[1], "allocate_n", "reenter", stop_there):
        stepping = threading.Thread(target=step.allocate, args=("a", Tokens(4), Tokens(4)))
        stepping.start()
        try:
            assert inside.wait(10)
            busy = guard.busy
            with pytest.raises(ConcurrentUseError):
                coord.block_table("a", swa)
        finally:
            leave.set()
            stepping.join()
    assert busy and not guard.busy
    coord.block_table("a", swa)
    check_pools(coord)


# -- torn reads (issue 24, item 7) -----------------------------------------------------------------


def test_reads_beside_a_stepping_thread_see_one_moment() -> None:
    """One thread steps a request in both groups at once (2 tokens each, then 1: the general
    path and the fast one), another reads it: its lengths (``seq_lens``), its table, its cap.
    Each read is refused (`ConcurrentUseError`) or returns what existed at one moment: both
    groups' lengths equal, a table of distinct live blocks, nulls only where the window
    evicted. The probe saw 80 of 190,000 reads return lengths that never existed together."""
    # On a loaded machine (or where CPython switches threads at fewer points, as 3.13 does) a
    # run may see no collision: more runs, for up to a minute, until one does (each run's
    # reads must all be of one moment).
    deadline = time.monotonic() + 60
    coord, reads = _read_beside_a_stepping_thread()
    while not reads[1] and time.monotonic() < deadline:
        coord, reads = _read_beside_a_stepping_thread()
    assert reads[0] > 50 and reads[1] > 0, reads  # it read, and collided
    check_pools(coord)


def _read_beside_a_stepping_thread() -> tuple[Any, list[int]]:
    coord = coordinator(
        {
            "swa": SlidingWindowLayer(
                sliding_window=Window(4, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
            ),
            "full": FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8)),
        },
        block_size=2,
        num_blocks={"swa": 10, "full": 5_010},
        max_len=10_000,
        max_in_flight=4,
    )
    swa, full = coord.group("swa", Tokens), coord.group("full", Tokens)
    step = coord.stepper(swa, full)
    step.admit("r", Tokens(10_000), Tokens(10_000))
    stop = threading.Event()
    torn: list[object] = []
    reads = [0, 0]

    def write() -> None:
        n = 0
        while not stop.is_set() and n < 9_000:
            try:
                count = 2 if n % 3 == 0 else 1
                step.allocate("r", Tokens(count), Tokens(count))
                n += count
            except ConcurrentUseError:
                pass
            if n % 16 == 0:
                time.sleep(0)  # let the reader in between steps too, not only inside them

    def read() -> None:
        while not stop.is_set():
            try:
                a, b = step.seq_lens("r")
                if a != b:
                    torn.append(("seq_lens", a, b))
                table = coord.block_table("r", full)
                if 0 in table or len(set(table)) != len(table):
                    torn.append(("block_table", table))
                window = list(coord.block_table("r", swa))
                nulls = window.count(0)
                if window[:nulls] != [0] * nulls:  # an evicted entry after a live one
                    torn.append(("window", window))
                coord.request_cap("r", swa)
                reads[0] += 1
            except ConcurrentUseError:
                reads[1] += 1

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        writer, reader = threading.Thread(target=write), threading.Thread(target=read)
        reader.start()
        writer.start()
        writer.join()
        stop.set()
        reader.join()
    finally:
        sys.setswitchinterval(old)
    assert not torn, torn[:5]
    check_pools(coord)
    return coord, reads
