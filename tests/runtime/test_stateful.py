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

Prefix caching, speculation and one shared pool (issue 16) are drawn too: requests admitted
with content (prefixes of a few base sequences, salted or not, so that they share), speculative
steps and rollbacks, coordinators whose groups share one pool. Every block's content is kept by
the test itself, position by position, as each step writes it: a prefix hit must serve blocks
holding exactly the new request's content (never a block whose content differs), the groups
of one sequence hit alike, in whole blocks, never the last position; a block is in two tables
only when the prefix cache registered it, its reference count equals its holders, a
registered block holds only committed positions; a rollback returns exactly the blocks only
the rejected positions used and leaves the table a plain step would have; reservations stay
exact (a shared block reserved once where requests keep it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kvunits.contracts import (
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
)
from kvunits.contracts.internal import admission_cap, kernel_ints, magnitude, manager_ints
from kvunits.runtime import (
    NULL_BLOCK,
    AdmissionError,
    AdmissionPolicy,
    AllocationError,
    BlockHashes,
    ConcurrentUseError,
    ContentKeys,
    Fits,
    GroupHandle,
    KVCacheCoordinator,
    Never,
    RequestError,
    Wait,
)

from ..examples import examples
from .support import (
    Injected,
    Interference,
    check_pools,
    coordinator,
    drawn_blocks,
    group_of,
    quantity,
    snapshot,
    unique_pools,
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
def layers(draw: st.DrawFn, kind: str, block_size: int, same_page: bool = False) -> LayerSpec:
    """One layer of ``kind`` with an awkward small geometry.

    Chunks are whole cache blocks (the coordinator refuses others: their admission cap is not
    a bound, see `test_coordinator.test_misaligned_chunk_is_refused`), and pooled chunks are
    whole pooled blocks (the layer spec refuses others). With ``same_page``, every layer's
    page is ``block_size × 96`` bytes (head size 24 / P), so that the groups may share a pool.
    """

    def head(pool: int) -> Elements:
        return Elements(24 // pool if same_page else 8)

    if kind == "full":
        return FullAttentionLayer(kv_heads=KVHeads(1), head_size=head(1))
    if kind == "sliding":
        return SlidingWindowLayer(
            sliding_window=Window(draw(st.integers(1, 8)), Tokens),
            kv_heads=KVHeads(1),
            head_size=head(1),
        )
    if kind == "sliding_pooled":
        pool = draw(st.integers(1, 4))
        return SlidingWindowLayer(
            sliding_window=Window(draw(st.integers(1, 16)), EncoderTokens),
            pool=PoolFactor(pool),
            kv_heads=KVHeads(1),
            head_size=head(pool),
        )
    if kind == "chunked":
        return ChunkedLocalLayer(
            chunk=Chunk(block_size * draw(st.integers(1, 4)), Tokens),
            kv_heads=KVHeads(1),
            head_size=head(1),
        )
    if kind == "chunked_pooled":
        pool = draw(st.integers(1, 4))
        chunk = pool * block_size * draw(st.integers(1, 3))
        return ChunkedLocalLayer(
            chunk=Chunk(chunk, EncoderTokens),
            pool=PoolFactor(pool),
            kv_heads=KVHeads(1),
            head_size=head(pool),
        )
    if kind == "cross":
        pool = draw(st.integers(1, 3))
        return CrossAttentionLayer(
            encoder_length=EncoderTokens(draw(st.integers(1, 20))),
            pool=PoolFactor(pool),
            kv_heads=KVHeads(1),
            head_size=head(pool),
        )
    return StateLayer(state_size=Bytes(block_size * 96 if same_page else 1024))


def drawn_layout(
    draw: Callable[..., Any], kinds: Sequence[str], most_groups: int
) -> tuple[int, bool, dict[str, LayerSpec]]:
    """A layout as the runtime's property tests draw it (``draw``: hypothesis' ``data.draw``):
    1 to ``most_groups`` one-layer groups named g0, g1, ... of ``kinds`` (`layers`), their block
    size and whether they share one pool (every layer then of one page size). Returns the
    block size, that, and the layers."""
    count = draw(st.integers(1, most_groups), label="groups")
    block_size = draw(st.integers(1, 4), label="block_size")
    shared = draw(st.booleans(), label="one pool")
    specs = {
        f"g{i}": draw(layers(draw(st.sampled_from(kinds)), block_size, shared), label=f"g{i}")
        for i in range(count)
    }
    return block_size, shared, specs


@dataclass(frozen=True)
class DrawnLayout:
    """A drawn layout (`drawn_coordinators`): its layers, block size and limits, and what
    builds a coordinator over it (each call a new one, identical to the others)."""

    specs: dict[str, LayerSpec]
    block_size: int
    max_len: int
    max_in_flight: int
    build: Callable[[], KVCacheCoordinator]


def drawn_coordinators(
    draw: Callable[..., Any],
    kinds: Sequence[str],
    most_groups: int,
    lengths: st.SearchStrategy[int],
    in_flight: st.SearchStrategy[int],
    counts: Callable[[int], st.SearchStrategy[int]],
    **policy: Any,
) -> DrawnLayout:
    """A layout drawn as `drawn_layout` draws it, its max_len from ``lengths`` and
    max_in_flight from ``in_flight``, each pool's blocks from ``counts(cap)``
    (`support.drawn_blocks`; one pool of their sum where the layout shares one), and the
    coordinators over it built with ``policy`` (`support.coordinator`'s ``reserve`` or
    ``admission``; no reservation where neither is given): what the differential tests
    build their twins from."""
    block_size, shared, specs = drawn_layout(draw, kinds, most_groups)
    max_len = draw(lengths, label="max_len")
    max_in_flight = draw(in_flight, label="max_in_flight")
    blocks = drawn_blocks(
        draw, specs, counts, block_size=block_size, max_len=max_len, max_in_flight=max_in_flight
    )
    if "admission" not in policy:
        policy.setdefault("reserve", False)

    def build() -> KVCacheCoordinator:
        return coordinator(
            specs,
            block_size=block_size,
            num_blocks=1 + sum(n - 1 for n in blocks.values()) if shared else blocks,
            max_len=max_len,
            max_in_flight=max_in_flight,
            shared=shared,
            **policy,
        )

    return DrawnLayout(specs, block_size, max_len, max_in_flight, build)


def spec_pool(handle: GroupHandle[Any]) -> int:
    """P of a handle's group (1 for a token group)."""
    return handle.spec.pool.tokens_per_block


@dataclass
class Live:
    """The test's own record of an admitted request.

    Attributes:
        max_len: per group, its declared length in slots.
        steps: steps taken.
        content: per sequence (True: the encoder's, False: the tokens'), the content it
            brought and its salt (none: every position is the request's own).
        spec: per group, the latest step's lookahead positions not yet rolled back or
            accepted (kernel unit).
    """

    max_len: list[int]
    steps: int = 0
    content: dict[bool, tuple[tuple[int, ...], str | None]] = field(default_factory=dict)
    spec: list[int] = field(default_factory=list)
    priority: int = 0
    arrival: int = 0


#: Base sequences the requests' content is cut from: they share prefixes of every length
#: (the first two are equal for 20 positions), so that hits, misses and partial hits occur.
BASES = (
    tuple([1, 2] * 10 + [3] * 80),
    tuple([1, 2] * 10 + [4] * 80),
    tuple(range(100)),
)


class AllocatorMachine(RuleBasedStateMachine):
    """Random admissions, steps and frees against an independent record of what must hold."""

    def __init__(self) -> None:
        super().__init__()
        self.coord: KVCacheCoordinator
        self.handles: list[GroupHandle[Any]] = []
        self.live: dict[str, Live] = {}
        self.next_id = 0
        self.reserve = True
        self.policy = AdmissionPolicy()
        # Requests preempted (their record, to admit them again), and every request's first
        # arrival (kept across its preemptions, as vLLM keeps Request.arrival_time).
        self.preempted: dict[str, Live] = {}
        self.arrivals = 0
        # What each block holds, position by position, as the steps wrote it:
        # (pool id, block) -> {row in the block: the key written there}.
        self.written: dict[tuple[int, int], dict[int, object]] = {}

    @initialize(data=st.data())
    def build(self, data: st.DataObject) -> None:
        count = data.draw(st.integers(1, 3), label="groups")
        kinds = [data.draw(st.sampled_from(KINDS), label=f"kind{i}") for i in range(count)]
        self.block_size = data.draw(st.integers(1, 4), label="block_size")
        self.shared = data.draw(st.booleans(), label="one pool")
        specs = {
            f"g{i}": data.draw(layers(k, self.block_size, self.shared), label=f"layer{i}")
            for i, k in enumerate(kinds)
        }
        self.max_len = data.draw(st.integers(1, 48), label="max_len")
        self.max_in_flight = data.draw(st.integers(1, 9), label="max_in_flight")
        self.policy = AdmissionPolicy(
            kind=data.draw(st.sampled_from(("reserve", "on_demand", "declared")), label="policy"),
            scheduling_policy=data.draw(st.sampled_from(("fcfs", "priority")), label="order"),
            watermark=data.draw(st.sampled_from((0.0, 0.0, 0.25)), label="watermark"),
        )
        self.reserve = self.policy.kind != "on_demand"
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
            num_blocks=1 + sum(n - 1 for n in blocks.values()) if self.shared else blocks,
            max_len=self.max_len,
            max_in_flight=self.max_in_flight,
            shared=self.shared,
            admission=self.policy,
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
        prompt = None
        if data.draw(st.booleans(), label="prompt"):
            prompt = [data.draw(st.integers(0, n), label="prompt len") for n in lengths]
        self.try_admit(
            lengths,
            priority=data.draw(st.integers(0, 2), label="priority"),
            prompt=prompt,
            ask=data.draw(st.booleans(), label="ask first"),
        )

    @rule(data=st.data())
    def readmit_preempted(self, data: st.DataObject) -> None:
        """A preempted request comes back (the scheduler's waiting queue): admitted again
        under its id, it keeps its first arrival for the order of preemption."""
        if self.preempted:
            rid = data.draw(st.sampled_from(sorted(self.preempted)), label="preempted rid")
            old = self.preempted[rid]
            lengths = [
                n * spec_pool(h) if h.unit is EncoderTokens else n
                for h, n in zip(self.handles, old.max_len, strict=True)
            ]
            self.try_admit(lengths, priority=old.priority, rid=rid)

    @rule(data=st.data())
    def admit_with_prefix(self, data: st.DataObject) -> None:
        lengths = [
            data.draw(st.just(limit) | st.integers(0, limit), label="max_len")
            for limit in self.limits()
        ]
        self.try_admit(lengths, self.draw_content(data, lengths))

    @rule(data=st.data())
    def prefill_then_share(self, data: st.DataObject) -> None:
        """A request with content steps through it; then another brings the same content (a
        prefix of it, or more), and should find its full blocks cached."""
        lengths = self.limits()
        content = self.draw_content(data, lengths)
        before = set(self.live)
        self.try_admit(lengths, content)
        added = set(self.live) - before
        if not added:
            return
        (rid,) = added
        for _ in range(12):
            if rid not in self.live:
                break
            counts = [max(0, self.room(rid, g)) for g in range(len(self.handles))]
            if not any(counts):
                break
            self.try_step(rid, counts)
        if data.draw(st.booleans(), label="free the first"):
            self.coord.free(rid)
            del self.live[rid]
        self.try_admit(self.limits(), content)

    @rule(data=st.data())
    def admit_with_prefix_fails_midway(self, data: st.DataObject) -> None:
        """A failure while the hit blocks gain their references: nothing changes."""
        lengths = self.limits()
        content = self.draw_content(data, lengths)
        pool = unique_pools(self.coord)[0]
        with Interference(pool, "touch", "fail") as failing:
            self.try_admit(lengths, content, failing)

    @rule(data=st.data())
    def extend_content(self, data: st.DataObject) -> None:
        """A request's content grows by what it generated (its next positions), in every
        group of the sequence: blocks it has computed enter the cache once full."""
        with_content = [rid for rid, live in self.live.items() if live.content]
        if not with_content:
            return
        rid = data.draw(st.sampled_from(sorted(with_content)), label="rid")
        live = self.live[rid]
        encoder = data.draw(st.sampled_from(sorted(live.content)), label="sequence")
        keys, salt = live.content[encoder]
        more = data.draw(st.integers(0, 9), label="more")
        new = [self.generated(rid, p) for p in range(len(keys), len(keys) + more)]
        unit: Any = EncoderTokens if encoder else Tokens
        # Once per sequence: every group reading it (with content) extends it.
        readers = [
            h
            for h in self.handles
            if (h.spec.slot_unit is PooledBlocks) == encoder
            and h.spec.kind not in ("cross_attention", "state")
        ]
        if readers:
            self.coord.extend_content(rid, readers[0], ContentKeys(new, unit))
        live.content[encoder] = (keys + tuple(new), salt)
        event("content extended")

    @rule(data=st.data())
    def step_speculative(self, data: st.DataObject) -> None:
        """A step whose last positions are a drafter's lookahead."""
        if self.live:
            rid = data.draw(st.sampled_from(sorted(self.live)), label="rid")
            counts = self.draw_counts(data, rid)
            ahead = [data.draw(st.integers(0, n), label="lookahead") for n in counts]
            self.try_step(rid, counts, lookahead=ahead)
            if any(self.live[rid].spec) and data.draw(st.booleans(), label="verify now"):
                self.roll_back(data, rid)

    @rule(data=st.data())
    def rollback(self, data: st.DataObject) -> None:
        """Reject some of the latest step's lookahead: the blocks only they used go back."""
        ahead = [rid for rid, live in self.live.items() if any(live.spec)]
        if ahead:
            self.roll_back(data, data.draw(st.sampled_from(sorted(ahead)), label="rid"))

    def roll_back(self, data: st.DataObject, rid: str) -> None:
        live = self.live[rid]
        core = self.coord._core
        req = core.requests[rid]
        rejected = [
            data.draw(st.integers(0, spec // h.rows_per_unit), label="rejected")
            for h, spec in zip(self.handles, live.spec, strict=True)
        ]
        tables = [list(t) for t in req.tables]
        rows = list(req.num_rows)
        counts = (quantity(h.unit, r) for h, r in zip(self.handles, rejected, strict=True))
        self.stepper.rollback(rid, *counts)
        event("rollback")
        for g, (h, r) in enumerate(zip(self.handles, rejected, strict=True)):
            r_rows = r * h.rows_per_unit
            assert req.num_rows[g] == rows[g] - r_rows
            slots = -(-req.num_rows[g] // spec_pool(h))
            # The table a plain step to this length would have left; the rest came back.
            keep = core._managers[g].table_length(slots)
            assert req.tables[g] == tables[g][:keep], (tables[g], req.tables[g])
            pool = core.pools[g]
            for block in tables[g][keep:]:
                assert pool.ref_count(block) == 0, f"block {block} kept after its rollback"
            if tables[g][keep:]:
                event("rollback: blocks returned")
            live.spec[g] -= r_rows

    @rule(data=st.data())
    def rollback_too_much(self, data: st.DataObject) -> None:
        """Rolling back more than the latest step's lookahead: `RequestError`, no change."""
        if not self.live:
            return
        rid = data.draw(st.sampled_from(sorted(self.live)), label="rid")
        g = data.draw(st.integers(0, len(self.handles) - 1), label="group")
        h = self.handles[g]
        rejected = [0] * len(self.handles)
        rejected[g] = self.live[rid].spec[g] // h.rows_per_unit + 1
        before = snapshot(self.coord)
        with pytest.raises(RequestError, match="only those can be rolled back"):
            self.stepper.rollback(
                rid, *(quantity(h.unit, r) for h, r in zip(self.handles, rejected, strict=True))
            )
        assert snapshot(self.coord) == before

    @rule()
    def reset_prefix_cache(self) -> None:
        before = snapshot(self.coord)
        if any(p.num_used for p in unique_pools(self.coord)):  # vLLM: only the null block held
            assert self.coord.reset_prefix_cache() is False
            assert snapshot(self.coord) == before
            return
        assert self.coord.reset_prefix_cache() is True
        for cache in self.coord._core.caches:
            assert cache is None or not cache.blocks
        for pool in unique_pools(self.coord):
            # Every block free and none cached: the pool as built (`BlockPool.reset_ops`).
            assert not pool._cached and (pool._fresh, len(pool._queue)) == (1, 0)
            queue = before[0][unique_pools(self.coord).index(pool)][0]
            assert pool.free_queue() == list(range(1, pool.num_blocks)) == sorted(queue)

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
    def try_step_answer(self, data: st.DataObject) -> None:
        """`try_allocate`: its answer agrees with what `allocate` does (a step beyond a limit
        half of the time)."""
        if self.live:
            rid = data.draw(st.sampled_from(sorted(self.live)), label="rid")
            counts = self.draw_counts(data, rid)
            if data.draw(st.booleans(), label="beyond"):
                g = data.draw(st.integers(0, len(counts) - 1), label="group beyond")
                counts[g] = self.room(rid, g) + 1
            self.try_step(rid, counts, mode="try")

    @rule(data=st.data())
    def step_preempting(self, data: st.DataObject) -> None:
        if self.live:
            rid = data.draw(st.sampled_from(sorted(self.live)), label="rid")
            self.try_step(rid, self.draw_counts(data, rid), mode="preempt")

    @rule(data=st.data())
    def schedule_preempting(self, data: st.DataObject) -> None:
        """vLLM's scheduler iteration: every running request in admission order takes its
        step, preempting the latest (or the lowest priority) when it runs short."""
        for rid in list(self.live):
            if rid in self.live:
                self.try_step(rid, self.draw_counts(data, rid), mode="preempt")

    @rule(data=st.data())
    def step_preempting_fails_midway(self, data: st.DataObject) -> None:
        """An interrupt inside a preempting step (in a victim's release, or in the step):
        every preempted request is back, in its place, and nothing else changed."""
        if self.live:
            rid = data.draw(st.sampled_from(sorted(self.live)), label="rid")
            counts = self.draw_counts(data, rid)
            g = data.draw(st.integers(0, len(counts) - 1), label="group failing")
            operation = data.draw(st.sampled_from(("free", "allocate_n")), label="operation")
            with Interference(self.coord._core.pools[g], operation, "fail") as failing:
                self.try_step(rid, counts, failing, mode="preempt")

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
            "admit": lambda: self.stepper.admit(
                f"r{self.next_id}",
                *(quantity(h.unit, n) for h, n in zip(self.handles, self.limits(), strict=True)),
            ),
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

    def draw_content(
        self, data: st.DataObject, lengths: list[int]
    ) -> dict[bool, tuple[tuple[int, ...], str | None]]:
        """Content per sequence (the encoder's, the tokens'): a prefix of a base sequence,
        salted or not, within every bound group's declared length (in its kernel unit)."""
        content = {}
        for encoder in (True, False):
            rows = [
                n * (spec_pool(h) if h.unit is PooledBlocks else 1)
                for h, n in zip(self.handles, lengths, strict=True)
                if (h.spec.slot_unit is PooledBlocks) == encoder
            ]
            if not rows:
                continue
            base = data.draw(st.sampled_from(BASES), label="base")
            length = data.draw(st.integers(0, min(min(rows), len(base))), label="content")
            salt = data.draw(st.sampled_from((None, None, "salt")), label="salt")
            content[encoder] = (base[:length], salt)
        return content

    def prefix_of(
        self, data_content: dict[bool, tuple[tuple[int, ...], str | None]]
    ) -> tuple[BlockHashes[Any] | None, ...]:
        """The block hashes each bound group gets (None where no prefix can serve it)."""
        out: list[BlockHashes[Any] | None] = []
        for h in self.handles:
            encoder = h.spec.slot_unit is PooledBlocks
            if h.spec.kind in ("cross_attention", "state") or encoder not in data_content:
                out.append(None)
                continue
            keys, salt = data_content[encoder]
            unit: Any = EncoderTokens if encoder else Tokens
            out.append(h.block_hashes(ContentKeys(keys, unit, salt=salt)))
        return tuple(out)

    def try_admit(
        self,
        lengths: list[int],
        content: dict[bool, tuple[tuple[int, ...], str | None]] | None = None,
        failing: Interference | None = None,
        *,
        priority: int = 0,
        prompt: list[int] | None = None,
        ask: bool = False,
        rid: str | None = None,
    ) -> None:
        """Admit a request (``rid``: one preempted before; else a new id), checking the
        outcome against the policy; ``ask``: `can_admit` first, whose answer must agree."""
        if rid is None:
            rid = f"r{self.next_id}"
            self.next_id += 1
        before = snapshot(self.coord)
        args = [quantity(h.unit, n) for h, n in zip(self.handles, lengths, strict=True)]
        first = (
            None
            if prompt is None
            else tuple(quantity(h.unit, n) for h, n in zip(self.handles, prompt, strict=True))
        )
        answer: Any = None
        if ask and content is None:
            asking: Any = self.stepper
            answer = asking.can_admit(rid, *args, prompt=first)
            assert snapshot(self.coord) == before, "can_admit changed something"
        beyond = any(n > limit for n, limit in zip(lengths, self.limits(), strict=True))
        slots = [
            math.ceil(n / spec_pool(h)) if h.unit is EncoderTokens else n
            for h, n in zip(self.handles, lengths, strict=True)
        ]
        hits: tuple[Any, ...] | None = None
        try:
            if content is None:
                self.stepper.admit(rid, *args, priority=priority, prompt=first)
            else:
                prefix = self.prefix_of(content)
                stepper: Any = self.stepper  # bound to 1 .. 3 groups, drawn at run time
                hits = stepper.admit_with_prefix(rid, *args, prefix=prefix, priority=priority)
        except Injected:
            event("admit: failed midway, undone")
            assert failing is not None and failing.hits == 1
            assert snapshot(self.coord) == before, "an admission that failed left changes"
            return
        except AdmissionError as err:
            event("admit: never fits")
            assert snapshot(self.coord) == before
            assert beyond or not err.usable.covers(err.cap), err
            assert answer is None or isinstance(answer, Never), answer
            return
        except AllocationError as err:
            event("admit: not now")
            assert self.reserve or self.policy.watermark or prompt, (
                "on demand, only a first step or the watermark makes admission wait"
            )
            assert snapshot(self.coord) == before
            assert err.needed > err.free
            assert answer is None or isinstance(answer, Wait), answer
            if answer is not None:
                event("can_admit: wait, and admit agreed")
                assert answer.shortfall and all(
                    n.numerical_value_in(CacheBlocks) > 0 for n in answer.shortfall.values()
                )
            return
        assert not beyond
        assert failing is None or failing.hits == 0
        assert answer is None or isinstance(answer, Fits), answer
        event("admit: ok")
        old = self.preempted.pop(rid, None)
        arrival = self.arrivals if old is None else old.arrival
        self.arrivals += old is None
        self.live[rid] = Live(
            slots,
            content=content or {},
            spec=[0] * len(self.handles),
            priority=priority,
            arrival=arrival,
        )
        if hits is not None:
            self.check_hits(rid, hits)

    @staticmethod
    def generated(rid: str, position: int) -> int:
        """The token a request generates at a position past its content (its own)."""
        return 1_000_000 * (int(rid[1:]) + 1) + position

    def key(self, rid: str, encoder: bool, position: int) -> object:
        """What a position of a request holds: its content's key there, else what it
        generated (the content a later `extend_content` gives), under its salt."""
        keys, salt = self.live[rid].content.get(encoder, ((), None))
        token = keys[position] if position < len(keys) else self.generated(rid, position)
        return (salt, token)

    def rows_per_block(self, g: int) -> int:
        spec = self.handles[g].spec
        return manager_ints(spec).block_size_slots * spec.pool.tokens_per_block

    def check_hits(self, rid: str, hits: tuple[Any, ...]) -> None:
        """A hit: the groups of one sequence alike, in whole blocks, never the last position,
        and every position of every hit block holding exactly this request's content."""
        core = self.coord._core
        req = core.requests[rid]
        live = self.live[rid]
        by_sequence: dict[bool, set[int]] = {}
        for g, (h, hit) in enumerate(zip(self.handles, hits, strict=True)):
            rows = magnitude(hit) * h.rows_per_unit
            assert rows == req.num_rows[g]
            encoder = h.spec.slot_unit is PooledBlocks
            by_sequence.setdefault(encoder, set()).add(rows)
            if h.spec.kind == "cross_attention":
                assert rows == 0
                continue
            keys = live.content.get(encoder, ((), None))[0]
            assert rows <= max(len(keys) - 1, 0), (rows, len(keys))
            rpb = self.rows_per_block(g)
            assert rows % rpb == 0
            table = req.tables[g]
            assert len(table) == rows // rpb
            if rows:
                event("admit: a prefix hit")
            pool = core.pools[g]
            for i, block in enumerate(table):
                if block == NULL_BLOCK:
                    assert i < req.skipped[g]
                    continue
                event("admit: a hit block checked")
                held = self.written[(id(pool), block)]
                for offset in range(rpb):
                    assert held.get(offset) == self.key(rid, encoder, i * rpb + offset), (
                        f"group {h.name}: block {block} (table entry {i}) holds other content"
                    )
        for encoder, lengths in by_sequence.items():
            members = [
                h
                for h in self.handles
                if (h.spec.slot_unit is PooledBlocks) == encoder
                and h.spec.kind != "cross_attention"
            ]
            if members:
                assert len({req.num_rows[h.index] for h in members}) == 1, lengths

    def try_step(
        self,
        rid: str,
        counts: list[int],
        failing: Interference | None = None,
        lookahead: list[int] | None = None,
        mode: str = "allocate",
    ) -> None:
        """One step of ``counts`` (each handle's unit), of which the last ``lookahead`` are
        speculative (an ``allocate_speculative``); checked against the test's record.

        ``mode``: ``allocate``; ``try`` (`try_allocate`: its answer must agree with what
        ``allocate`` does); ``preempt`` (`allocate_preempting`: under ``on_demand`` it never
        runs short, and the requests it preempts are the policy's, in order)."""
        before = snapshot(self.coord)
        order = list(self.coord._core.requests)
        live = self.live[rid]
        req = self.coord._core.requests[rid]
        start = list(req.num_rows)
        lengths = [len(t) for t in req.tables]
        spans = [self.touches(rid, g, n) for g, n in enumerate(counts)]
        too_long = any(self.too_long(rid, g, n) for g, n in enumerate(counts))
        try:
            if mode == "try":
                args = [quantity(h.unit, n) for h, n in zip(self.handles, counts, strict=True)]
                answer = self.stepper.try_allocate(rid, *args)
                if isinstance(answer, Never):
                    event("try_allocate: never")
                    assert too_long and answer.group in self.coord.group_names
                    assert snapshot(self.coord) == before
                    return
                if isinstance(answer, Wait):
                    event("try_allocate: wait")
                    assert not too_long and not self.reserve
                    assert snapshot(self.coord) == before, "try_allocate changed something"
                    assert answer.shortfall and all(
                        n.numerical_value_in(CacheBlocks) > 0 for n in answer.shortfall.values()
                    )
                    with pytest.raises(AllocationError):  # allocate agrees
                        self.stepper.allocate(rid, *args)
                    assert snapshot(self.coord) == before
                    return
                assert isinstance(answer, Fits)
                mappings = answer.result
            elif mode == "preempt":
                args = [quantity(h.unit, n) for h, n in zip(self.handles, counts, strict=True)]
                held = {r: list(self.coord._core.requests[r].num_rows) for r in order}
                outcome = self.stepper.allocate_preempting(rid, *args)
                self.check_preempted(rid, order, held, outcome.preempted)
                if outcome.slot_mappings is None:
                    event("preempt: the request itself")
                    assert outcome.preempted[-1].request_id == rid
                    return
                mappings = outcome.slot_mappings
            elif lookahead is None:
                args = [quantity(h.unit, n) for h, n in zip(self.handles, counts, strict=True)]
                mappings = self.stepper.allocate(rid, *args)
            else:
                new = [
                    quantity(h.unit, n - k)
                    for h, n, k in zip(self.handles, counts, lookahead, strict=True)
                ]
                ahead = tuple(
                    quantity(h.unit, k) for h, k in zip(self.handles, lookahead, strict=True)
                )
                mappings = self.stepper.allocate_speculative(rid, *new, lookahead=ahead)
        except Injected:
            event("step: failed midway, undone")
            assert failing is not None and failing.hits == 1
            assert snapshot(self.coord) == before, "a step that failed midway left changes"
            assert list(self.coord._core.requests) == order, "the admission order changed"
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
            assert mode != "preempt", f"on demand, a preempting step ran short: {err}"
            assert snapshot(self.coord) == before, "a failed step changed something"
            assert err.needed > err.free and err.request_id == rid
            return
        assert not too_long
        live.steps += 1
        event("step: done" if lookahead is None else "step: speculative, done")
        if any(s > 0 for s in req.skipped):
            event("step: done, with evictions")
        live.spec = [
            0 if lookahead is None else k * h.rows_per_unit
            for h, k in zip(self.handles, lookahead or counts, strict=True)
        ]
        for g, handle in enumerate(self.handles):
            q = req.num_rows[g] - start[g]
            if handle.unit is EncoderTokens and (start[g] + q) % spec_pool(handle):
                event("step: a partial pooled slot")
            self.check_step(rid, g, handle, start[g], q, spans[g], mappings[g])
            self.write(rid, g, lengths[g], start[g], q)

    def write(self, rid: str, g: int, old_length: int, start: int, q: int) -> None:
        """Record what the step wrote in group ``g``: positions ``start .. start + q − 1``,
        in the blocks the table holds them in (a block the step took starts empty)."""
        handle = self.handles[g]
        if handle.spec.kind in ("cross_attention", "state"):
            return
        core = self.coord._core
        table, pool = core.requests[rid].tables[g], id(core.pools[g])
        for block in table[old_length:]:
            self.written[(pool, block)] = {}
        rpb = self.rows_per_block(g)
        encoder = handle.spec.slot_unit is PooledBlocks
        for position in range(start, start + q):
            block = table[position // rpb]
            self.written[(pool, block)][position % rpb] = self.key(rid, encoder, position)

    # -- checks -----------------------------------------------------------------------------------

    def check_preempted(
        self, rid: str, order: list[str], held: dict[str, list[int]], preempted: Any
    ) -> None:
        """The victims are the policy's, in order; each is gone, with what it had computed
        recorded; under ``reserve`` and ``declared`` nothing is preempted."""
        if self.reserve:
            assert not preempted
            return
        remaining = list(order)
        for record in preempted:
            if self.policy.scheduling_policy == "fcfs":
                expected = remaining[-1]  # vLLM: self.running.pop()
            else:
                expected = max(
                    remaining, key=lambda r: (self.live[r].priority, self.live[r].arrival)
                )
            assert record.request_id == expected, (record.request_id, expected, remaining)
            assert record.for_request == rid and record.priority == self.live[expected].priority
            assert [magnitude(q) for q in record.lost.values()] == held[expected]
            assert expected not in self.coord, "a preempted request is still admitted"
            remaining.remove(expected)
            self.preempted[expected] = self.live.pop(expected)
            event("preempt: a request")
        assert list(self.coord._core.requests) == remaining
        assert self.coord.metrics().num_preemptions >= len(preempted)

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
        """Held <= cap; the reservations are the caps, and a block requests share counts
        once (in groups that keep their blocks) in what each pool must have unreserved."""
        if not self.handles:
            return
        core = self.coord._core
        reserved = [0] * len(self.handles)
        extra_refs = [0] * len(self.handles)
        for req in core.requests.values():
            for g, table in enumerate(req.tables):
                held = sum(1 for b in table if b != NULL_BLOCK)
                assert held <= req.caps[g], (self.coord.group_names[g], held, req.caps[g])
                reserved[g] += req.caps[g]
        for g in range(len(self.handles)):
            blocks = {b for r in core.requests.values() for b in r.tables[g]} - {NULL_BLOCK}
            if core._keeps[g]:
                extra_refs[g] = sum(core.pools[g].ref_count(b) - 1 for b in blocks)
        assert extra_refs == core.ledger.shared, (extra_refs, core.ledger.shared)
        if self.reserve:
            assert reserved == core.ledger.reserved
            for pool in unique_pools(self.coord):
                members = [g for g, p in enumerate(core.pools) if p is pool]
                assert sum(reserved[g] - extra_refs[g] for g in members) <= pool.num_blocks - 1

    @invariant()
    def cached_blocks_hold_committed_positions(self) -> None:
        """The prefix cache registers only full blocks of committed positions, and the
        coordinator's speculative tail is the test's."""
        if not self.handles:
            return
        core = self.coord._core
        for rid, req in core.requests.items():
            extra = req.extra
            spec = [0] * len(self.handles) if extra is None else extra.spec
            assert list(spec) == self.live[rid].spec, (spec, self.live[rid].spec)
            if extra is None:
                continue
            for g, registered in enumerate(extra.registered):
                if extra.hashes[g] is not None:
                    rpb = self.rows_per_block(g)
                    assert registered * rpb <= req.num_rows[g] - spec[g]
                    for i, block in enumerate(req.tables[g][:registered]):
                        if block != NULL_BLOCK:
                            assert core.pools[g].is_cached(block) == self.kept(g, i), (g, i)

    def kept(self, g: int, index: int) -> bool:
        """Whether the prefix cache keeps block ``index`` of group ``g``: every block, except
        in a sliding window only those an aligned hit can use (vLLM 0.33's
        ``SlidingWindowManager.reachable_block_mask``): a hit ends on a multiple of the
        sequence's alignment (the common multiple of its cacheable groups' blocks) and reads
        the ``cdiv(window − 1, block_size)`` blocks before it."""
        spec = self.handles[g].spec
        if spec.kind != "sliding_window":
            return True
        encoder = spec.slot_unit is PooledBlocks
        align = math.lcm(
            *(
                self.rows_per_block(h)
                for h, handle in enumerate(self.handles)
                if handle.spec.kind in ("full_attention", "sliding_window", "chunked_local")
                and (handle.spec.slot_unit is PooledBlocks) == encoder
            )
        )
        ints = manager_ints(spec)
        assert ints.sliding_window_slots is not None
        per = align // self.rows_per_block(g)
        need = -(-(ints.sliding_window_slots - 1) // ints.block_size_slots)
        return need >= per or index % per >= per - need

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
    max_examples=examples(300), stateful_step_count=50, deadline=None
)
TestAllocator = AllocatorMachine.TestCase
