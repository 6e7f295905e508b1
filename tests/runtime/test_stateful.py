"""Stateful tests: random admit / step / free sequences on coordinators of mixed groups.

After every operation: free + used = capacity in every group, no block in two live tables, no
leak (live tables hold exactly the used blocks); a failed call changed nothing (full snapshots
compared); sliding-window tables hold the null block exactly below the window; every key the
kernel reads for every query of a step is in a live block of that request, in the kernel's
units (encoder tokens for a pooled group, with the model's own window); a pooled group may be
stepped in whole pooled blocks or in encoder tokens (steps that continue a partial slot), and
its slot mapping and kernel rows are checked against the positions; a request never holds
more than its admission cap; with reservation, an admitted request's step never fails. Once
every request is freed, every pool is whole again.

Two rules stand for what one scheduler thread must never see but a misused coordinator can: a
step interrupted inside a pool operation (an injected failure, standing for a bug or an
interrupt) leaves everything as it was, in every group; and a call that enters the coordinator
while a step is in progress (another thread, a callback) is refused with `ConcurrentUseError`,
changes nothing, and the step in progress completes as if alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from contracts import (
    Bytes,
    CacheBlocks,
    Chunk,
    ChunkedLocalLayer,
    CrossAttentionLayer,
    EncoderTokens,
    FullAttentionLayer,
    LayerSpec,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    StateLayer,
    Tokens,
    Window,
)
from contracts.internal import admission_cap, kernel_ints, magnitude, manager_ints
from runtime import (
    NULL_BLOCK,
    AdmissionError,
    AllocationError,
    ConcurrentUseError,
    GroupHandle,
    KVCacheCoordinator,
    RequestError,
)

from .support import (
    Injected,
    Interference,
    check_pools,
    coordinator,
    group_of,
    quantity,
    snapshot,
    unresident_keys,
)

KINDS = (
    "full",
    "sliding",
    "sliding_pooled",
    "chunked",
    "chunked_pooled",
    "cross",
    "state",
)


@st.composite
def layers(draw: st.DrawFn, kind: str, block_size: int) -> LayerSpec:
    """One layer of ``kind`` with an awkward small geometry.

    Chunks are whole cache blocks (the coordinator refuses others: their admission cap is not
    a bound, see `test_coordinator.test_misaligned_chunk_is_refused`), and pooled chunks are
    whole pooled blocks (the layer spec refuses others).
    """
    if kind == "full":
        return FullAttentionLayer(kv_heads=1, head_size=8)
    if kind == "sliding":
        return SlidingWindowLayer(
            sliding_window=Window(draw(st.integers(1, 8)), Tokens), kv_heads=1, head_size=8
        )
    if kind == "sliding_pooled":
        return SlidingWindowLayer(
            sliding_window=Window(draw(st.integers(1, 16)), EncoderTokens),
            pool=PoolFactor(draw(st.integers(1, 4))),
            kv_heads=1,
            head_size=8,
        )
    if kind == "chunked":
        return ChunkedLocalLayer(
            chunk=Chunk(block_size * draw(st.integers(1, 4)), Tokens), kv_heads=1, head_size=8
        )
    if kind == "chunked_pooled":
        pool = draw(st.integers(1, 4))
        chunk = pool * block_size * draw(st.integers(1, 3))
        return ChunkedLocalLayer(
            chunk=Chunk(chunk, EncoderTokens), pool=PoolFactor(pool), kv_heads=1, head_size=8
        )
    if kind == "cross":
        return CrossAttentionLayer(
            encoder_length=EncoderTokens(draw(st.integers(1, 20))),
            pool=PoolFactor(draw(st.integers(1, 3))),
            kv_heads=1,
            head_size=8,
        )
    return StateLayer(state_size=Bytes(1024))


def spec_pool(handle: GroupHandle[Any]) -> int:
    """P of a handle's group (1 for a token group)."""
    return handle.spec.pool.tokens_per_block


@dataclass
class Live:
    """The test's own record of an admitted request."""

    max_len: list[int]
    steps: int = 0


class AllocatorMachine(RuleBasedStateMachine):
    """Random admissions, steps and frees against an independent record of what must hold."""

    def __init__(self) -> None:
        super().__init__()
        self.coord: KVCacheCoordinator
        self.handles: list[GroupHandle[Any]] = []
        self.live: dict[str, Live] = {}
        self.next_id = 0
        self.reserve = True

    @initialize(data=st.data())
    def build(self, data: st.DataObject) -> None:
        count = data.draw(st.integers(1, 3), label="groups")
        kinds = [data.draw(st.sampled_from(KINDS), label=f"kind{i}") for i in range(count)]
        self.block_size = data.draw(st.integers(1, 4), label="block_size")
        specs = {
            f"g{i}": data.draw(layers(k, self.block_size), label=f"layer{i}")
            for i, k in enumerate(kinds)
        }
        self.max_len = data.draw(st.integers(1, 48), label="max_len")
        self.max_in_flight = data.draw(st.integers(1, 9), label="max_in_flight")
        self.reserve = data.draw(st.booleans(), label="reserve")
        # Pools from a little under one full-length request's cap to a few requests' worth,
        # so that admissions are refused, wait, and succeed, and steps run short.
        blocks = {}
        for name, layer in specs.items():
            group = group_of(
                name,
                layer,
                block_size=self.block_size,
                max_len=self.max_len,
                max_in_flight=self.max_in_flight,
            )
            fixed = manager_ints(group.manager).fixed_slots
            cap = admission_cap(
                group.manager,
                self.max_in_flight if fixed is None else fixed,
                self.max_len if fixed is None else fixed,
            )
            low = cap - 1 if data.draw(st.integers(0, 7), label="tight") == 0 else cap
            blocks[name] = 1 + data.draw(st.integers(max(0, low), 3 * cap), label=name)
        self.coord = coordinator(
            specs,
            block_size=self.block_size,
            num_blocks=blocks,
            max_len=self.max_len,
            max_in_flight=self.max_in_flight,
            reserve=self.reserve,
        )
        # A pooled group is stepped in whole pooled blocks or, half of the time, in encoder
        # tokens (steps then start and end mid-slot).
        self.handles = [
            self.coord.group(
                g.name,
                EncoderTokens
                if g.manager.slot_unit is PooledBlocks and data.draw(st.booleans(), label="tok")
                else g.manager.slot_unit,
            )
            for g in self.coord.groups
        ]
        self.stepper = self.coord.stepper(*self.handles)
        self.limit = [self.coord._core._limit[g] for g in range(count)]
        self.in_flight = [self.coord._core._in_flight[g] for g in range(count)]

    # -- rules ----------------------------------------------------------------------------------
    # Hypothesis picks a rule uniformly, so each rare path (a caller's mistake) is a rule of its
    # own rather than a coin flip inside a common one (its draws lean to the edges).

    @rule(data=st.data())
    def admit(self, data: st.DataObject) -> None:
        # Full length half of the time, as most requests are admitted.
        lengths = [
            data.draw(st.just(limit) | st.integers(0, limit), label="max_len")
            for limit in self.limits()
        ]
        self.try_admit(lengths)

    @rule(data=st.data())
    def admit_beyond_a_limit(self, data: st.DataObject) -> None:
        lengths = self.limits()
        g = data.draw(st.integers(0, len(lengths) - 1), label="group beyond")
        lengths[g] += 1
        self.try_admit(lengths)

    @rule(data=st.data())
    def step(self, data: st.DataObject) -> None:
        if self.live:
            rid = data.draw(st.sampled_from(sorted(self.live)), label="rid")
            self.try_step(rid, self.draw_counts(data, rid))

    @rule(data=st.data())
    def schedule(self, data: st.DataObject) -> None:
        """One scheduler iteration: a step for every live request, in admission order."""
        for rid in list(self.live):
            self.try_step(rid, self.draw_counts(data, rid))

    @rule(data=st.data())
    def step_beyond_a_limit(self, data: st.DataObject) -> None:
        """A step over the group's max_in_flight or the request's max_len: `RequestError`."""
        if self.live:
            rid = data.draw(st.sampled_from(sorted(self.live)), label="rid")
            counts = self.draw_counts(data, rid)
            g = data.draw(st.integers(0, len(counts) - 1), label="group beyond")
            counts[g] = self.room(rid, g) + 1
            self.try_step(rid, counts)

    @rule(data=st.data())
    def step_fails_midway(self, data: st.DataObject) -> None:
        if self.live:
            rid = data.draw(st.sampled_from(sorted(self.live)), label="rid")
            counts = self.draw_counts(data, rid)
            g = data.draw(st.integers(0, len(counts) - 1), label="group failing")
            operation = data.draw(st.sampled_from(("free", "allocate_n")), label="operation")
            with Interference(self.coord._core.pools[g], operation, "fail") as failing:
                self.try_step(rid, counts, failing)

    @rule(data=st.data())
    def step_entered_twice(self, data: st.DataObject) -> None:
        if not self.live:
            return
        rid = data.draw(st.sampled_from(sorted(self.live)), label="rid")
        counts = self.draw_counts(data, rid)
        g = data.draw(st.integers(0, len(counts) - 1), label="group re-entered")
        operation = data.draw(st.sampled_from(("free", "allocate_n")), label="operation")
        zeros = [quantity(h.unit, 0) for h in self.handles]
        other = data.draw(st.sampled_from(sorted(self.live)), label="other rid")
        calls = {
            "free": lambda: self.coord.free(other),
            "admit": lambda: self.coord.admit(f"r{self.next_id}"),
            "allocate": lambda: self.stepper.allocate(other, *zeros),
            "kernel_inputs": lambda: self.coord.kernel_inputs(other, self.handles[0]),
            "usage": self.coord.usage_by_group,
        }
        name = data.draw(st.sampled_from(sorted(calls)), label="re-entrant call")
        pool = self.coord._core.pools[g]
        with Interference(pool, operation, "reenter", calls[name]) as reentering:
            self.try_step(rid, counts)
        assert len(reentering.refused) == reentering.hits
        for error in reentering.refused:
            assert isinstance(error, ConcurrentUseError), error
            assert "changed nothing" in str(error)
        if reentering.hits:
            event("step: entered twice, refused")

    @rule(data=st.data())
    def free(self, data: st.DataObject) -> None:
        if self.live:
            rid = data.draw(st.sampled_from(sorted(self.live)), label="rid")
            self.coord.free(rid)
            del self.live[rid]

    @rule(data=st.data())
    def misuse_request_ids(self, data: st.DataObject) -> None:
        """A step or free of an id never admitted or already freed, a second admission of a
        live id: `RequestError`, and nothing changes."""
        before = snapshot(self.coord)
        gone = f"r{data.draw(st.integers(0, self.next_id), label='id')}"
        if gone not in self.live:
            counts = [quantity(h.unit, 0) for h in self.handles]
            with pytest.raises(RequestError, match="not admitted"):
                self.stepper.allocate(gone, *counts)
            with pytest.raises(RequestError, match="not admitted"):
                self.coord.free(gone)
        if self.live:
            live = data.draw(st.sampled_from(sorted(self.live)), label="live id")
            with pytest.raises(RequestError, match="already admitted"):
                self.coord.admit(live)
        assert snapshot(self.coord) == before

    def limits(self) -> list[int]:
        """The longest sequence per group, in each handle's unit."""
        return [
            limit * spec_pool(h) if h.unit is EncoderTokens else limit
            for h, limit in zip(self.handles, self.limit, strict=True)
        ]

    def touches(self, rid: str, g: int, count: int) -> tuple[int, int, int]:
        """Written from the positions, independently of the core: the step's first slot, the
        slots held after it, and the slots it touches."""
        handle = self.handles[g]
        p = spec_pool(handle)
        c = self.coord._core.requests[rid].num_rows[g]
        q = count * p if handle.unit is PooledBlocks else count
        first, end = c // p, math.ceil((c + q) / p)
        return first, end, (end - first if q else 0)

    def too_long(self, rid: str, g: int, count: int) -> bool:
        _, end, touched = self.touches(rid, g, count)
        return touched > self.in_flight[g] or end > self.live[rid].max_len[g]

    def room(self, rid: str, g: int) -> int:
        """The largest count of one step in group g within both limits (-1 if none)."""
        n = 0
        while not self.too_long(rid, g, n + 1):
            n += 1
        return n if not self.too_long(rid, g, 0) else -1

    def draw_counts(self, data: st.DataObject, rid: str) -> list[int]:
        """One step's count per group, in each handle's unit, within max_in_flight and the
        request's max_len."""
        return [
            data.draw(st.integers(0, max(0, self.room(rid, g))), label="num_new")
            for g in range(len(self.handles))
        ]

    def try_admit(self, lengths: list[int]) -> None:
        rid = f"r{self.next_id}"
        self.next_id += 1
        before = snapshot(self.coord)
        args = [quantity(h.unit, n) for h, n in zip(self.handles, lengths, strict=True)]
        beyond = any(n > limit for n, limit in zip(lengths, self.limits(), strict=True))
        slots = [
            math.ceil(n / spec_pool(h)) if h.unit is EncoderTokens else n
            for h, n in zip(self.handles, lengths, strict=True)
        ]
        try:
            self.stepper.admit(rid, *args)
        except AdmissionError as err:
            event("admit: never fits")
            assert snapshot(self.coord) == before
            assert beyond or err.cap > err.usable, err
            return
        except AllocationError as err:
            event("admit: not now")
            assert self.reserve, "without reservation, admission never waits"
            assert snapshot(self.coord) == before
            assert err.needed > err.free
            return
        assert not beyond
        event("admit: ok")
        self.live[rid] = Live(slots)

    def try_step(self, rid: str, counts: list[int], failing: Interference | None = None) -> None:
        args = [quantity(h.unit, n) for h, n in zip(self.handles, counts, strict=True)]
        before = snapshot(self.coord)
        live = self.live[rid]
        req = self.coord._core.requests[rid]
        start = list(req.num_rows)
        spans = [self.touches(rid, g, n) for g, n in enumerate(counts)]
        too_long = any(self.too_long(rid, g, n) for g, n in enumerate(counts))
        try:
            mappings = self.stepper.allocate(rid, *args)
        except Injected:
            event("step: failed midway, undone")
            assert failing is not None and failing.hits == 1
            assert snapshot(self.coord) == before, "a step that failed midway left changes"
            return
        except RequestError:
            event("step: beyond a limit")
            assert too_long
            assert snapshot(self.coord) == before
            return
        except AllocationError as err:
            event("step: short, nothing changed")
            assert not too_long
            assert not self.reserve, f"an admitted request ran short with reservation: {err}"
            assert snapshot(self.coord) == before, "a failed step changed something"
            assert err.needed > err.free and err.request_id == rid
            return
        assert not too_long
        live.steps += 1
        event("step: done")
        if any(s > 0 for s in req.skipped):
            event("step: done, with evictions")
        for g, handle in enumerate(self.handles):
            q = req.num_rows[g] - start[g]
            if handle.unit is EncoderTokens and (start[g] + q) % spec_pool(handle):
                event("step: a partial pooled slot")
            self.check_step(rid, g, handle, start[g], q, spans[g], mappings[g])

    # -- checks -----------------------------------------------------------------------------------

    def check_step(
        self,
        rid: str,
        g: int,
        handle: GroupHandle[Any],
        c: int,
        q: int,
        span: tuple[int, int, int],
        mapping: list[int],
    ) -> None:
        """Check one group after a step of ``q`` positions (kernel units) after ``c``."""
        spec = handle.spec
        ints = manager_ints(spec)
        bs = ints.block_size_slots
        p = spec_pool(handle)
        first, _, touched = span
        table = list(self.coord.block_table(rid, handle))
        if spec.kind == "state":
            assert mapping == [] and len(table) == 1 and table[0] != NULL_BLOCK
            return
        # The touched slots live in this request's blocks, at their offsets.
        assert len(mapping) == touched
        for s, slot in zip(range(first, first + touched), mapping, strict=True):
            assert table[s // bs] == slot // bs != NULL_BLOCK and slot % bs == s % bs
        if spec.kind == "cross_attention":
            assert ints.fixed_slots is not None
            assert len(table) == -(-ints.fixed_slots // bs) and NULL_BLOCK not in table
            return
        # Sliding windows: the null block exactly below (the step's first slot) - window + 1.
        if spec.kind == "sliding_window":
            assert ints.sliding_window_slots is not None
            first_needed = max(0, first - ints.sliding_window_slots + 1)
            for i, block in enumerate(table):
                assert (block == NULL_BLOCK) == ((i + 1) * bs <= first_needed), (i, table, c)
        # Residency, in the kernel's units, with the model's own window or chunk.
        (kernel,) = self.coord.groups[g].kernels.values()
        bad = unresident_keys(
            table,
            block_size=bs,
            pool=p,
            kind=spec.kind,
            sliding_window=kernel_ints(kernel).sliding_window_tok,
            chunk=kernel_ints(kernel).chunk_tok,
            first_query=c,
            end_query=c + q,
        )
        assert not bad, f"group {handle.name}: (query, key) not resident: {bad[:3]}"
        inputs = self.coord.kernel_inputs(rid, handle)
        assert inputs.slot_mapping == tuple(mapping)
        rows = tuple((table[i // p // bs] * bs + i // p % bs) * p + i % p for i in range(c, c + q))
        assert inputs.row_mapping == rows
        assert magnitude(inputs.seq_len) == c + q and magnitude(inputs.step_len) == q

    @invariant()
    def pools_are_consistent(self) -> None:
        if not self.handles:
            return
        check_pools(self.coord)

    @invariant()
    def requests_stay_within_their_caps(self) -> None:
        if not self.handles:
            return
        core = self.coord._core
        reserved = [0] * len(self.handles)
        for req in core.requests.values():
            for g, table in enumerate(req.tables):
                held = sum(1 for b in table if b != NULL_BLOCK)
                assert held <= req.caps[g], (self.coord.group_names[g], held, req.caps[g])
                reserved[g] += req.caps[g]
        if self.reserve:
            assert reserved == core.ledger.reserved
            for g, pool in enumerate(core.pools):
                assert reserved[g] <= pool.num_blocks - 1

    def teardown(self) -> None:
        if not self.handles:
            return
        for rid in list(self.live):
            self.coord.free(rid)
        check_pools(self.coord)
        for usage in self.coord.usage_by_group().values():
            assert usage.used.numerical_value_in(CacheBlocks) == 0 and usage.free == usage.capacity
            assert usage.reserved.numerical_value_in(CacheBlocks) == 0


AllocatorMachine.TestCase.settings = settings(
    max_examples=300, stateful_step_count=50, deadline=None
)
TestAllocator = AllocatorMachine.TestCase
