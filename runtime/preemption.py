"""The untyped side of the admission policies: what a step or an admission lacks, and
preemption, on plain ints over a `kvunits.runtime._core.CoordinatorCore`.

`kvunits.runtime.policy` says what the policies mean; the typed entry is
`kvunits.runtime.Stepper` (``can_admit``, ``try_allocate``, ``allocate_preempting``). Built on the
core's own operations: a preemption is the core's `~kvunits.runtime._core.CoordinatorCore.
step_preempting`, which plans the victims' ends and the step in one commit: the blocks go back to
the pools through the same path a finished request's do, so each returns exactly once, a block
another request shares (a prefix) only loses a reference, and an exception leaves every
request admitted as it was. The policy's own bookkeeping (arrivals, priorities, counters)
changes in the same commits (`PolicyState.admitted_ops` and the others), so that it too is all
or nothing.

The questions (`step_needs`, `admission_needs`) change nothing; each mirrors the check its
operation makes first (the core's phase 1, the ledger's ``take``), and the stateful tests
check that they agree: `Fits` exactly when the operation succeeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import setitem

from kvunits.contracts.errors import AllocationError

from ._core import CoordinatorCore, Preempted
from ._guard import Ops
from ._table import ANCHOR, LENGTH, MAXLEN, SKIPPED, SLACK
from .policy import AdmissionPolicy


class PolicyState:
    """A coordinator's policy, its requests' order of preemption, and its counters.

    Args:
        core: the coordinator's core.
        policy: the admission policy.

    Attributes:
        policy: the policy.
        priority: per admitted request whose priority is not 0, its priority.
        arrival: per admitted request, when it first arrived (a counter): kept across its
            preemptions, as vLLM keeps ``Request.arrival_time``, until it is freed. Kept only
            under ``scheduling_policy = "priority"``, the one order that reads it (``fcfs``
            preempts the latest admitted): a request costs no counter otherwise.
        num_preemptions: preemptions so far (vLLM's ``num_preemptions``).
        preempted_rows: per group, the positions the preempted requests had computed (kernel
            unit): what the scheduler recomputes.
        watermark_blocks: per group, the free blocks admission keeps for running requests.
    """

    __slots__ = (
        "_core",
        "_next",
        "_ordered",
        "_waiting_arrival",
        "arrival",
        "num_preemptions",
        "policy",
        "preempted_rows",
        "priority",
        "watermark_blocks",
    )

    def __init__(self, core: CoordinatorCore, policy: AdmissionPolicy) -> None:
        self._core = core
        self.policy = policy
        self.priority: dict[str, int] = {}
        self.arrival: dict[str, int] = {}
        # The arrival of preempted requests, until they are admitted again.
        self._waiting_arrival: dict[str, int] = {}
        self._next = 0
        self._ordered = policy.scheduling_policy == "priority"  # arrivals read: kept
        self.num_preemptions = 0
        self.preempted_rows = [0] * len(core.names)
        self.watermark_blocks = [policy.watermark_blocks(p.num_blocks) for p in core.pools]

    def admitted_ops(self, request_id: str, priority: int) -> Ops:
        """What recording an admission changes (committed with the core's admission)."""
        ops: Ops = []
        if type(request_id) is not str:
            return ops  # the core refuses the id, with its message
        if self._ordered:
            arrival = self._waiting_arrival.get(request_id)
            if arrival is None:
                arrival = self._next
                ops.append((setattr, self, "_next", arrival + 1))
            else:
                ops.append((self._waiting_arrival.pop, request_id, None))
            ops.append((setitem, self.arrival, request_id, arrival))
        if priority:  # 0 unless given: not stored (read with .get(request_id, 0))
            ops.append((setitem, self.priority, request_id, priority))
        return ops

    def freed_ops(self, request_id: str) -> Ops:
        """What forgetting a finished request changes (committed with the core's free)."""
        if type(request_id) is not str:
            return []  # the core refuses the id, with its message
        admitted = self._core.table.offsets  # the request is freed after these ops are made
        if len(admitted) == 1 and request_id in admitted:
            # The last one: emptied so (a dict keeps its size after pops, not after clear).
            return [
                (self.arrival.clear,),
                (self.priority.clear,),
                (self._waiting_arrival.pop, request_id, None),
            ]
        return [
            (self.arrival.pop, request_id, None),
            (self.priority.pop, request_id, None),
            (self._waiting_arrival.pop, request_id, None),
        ]

    def victim(self, running: Sequence[str]) -> str:
        """The request to preempt next among ``running`` (admission order): vLLM 0.33's
        ``Scheduler.schedule`` rule.

        ``fcfs``: the request admitted last (``self.running[-1]``). ``priority``: the largest
        ``(priority, arrival)``.
        """
        if self.policy.scheduling_policy == "fcfs":
            return running[-1]
        priority, arrival = self.priority, self.arrival
        return max(running, key=lambda r: (priority.get(r, 0), arrival.get(r, 0)))

    def counted_ops(self, done: Sequence[Preempted]) -> Ops:
        """What counting the preemptions ``done`` changes (committed with them): the counters,
        and each victim's arrival kept for when it is admitted again."""
        if not done:
            return []
        ops: Ops = [(setattr, self, "num_preemptions", self.num_preemptions + len(done))]
        rows = list(self.preempted_rows)
        for ended in done:
            rows = [a + b for a, b in zip(rows, ended.rows, strict=True)]
            ops.append((self.priority.pop, ended.request_id, None))
            ops.append((self.arrival.pop, ended.request_id, None))
            arrival = self.arrival.get(ended.request_id)
            if arrival is not None:
                ops.append((setitem, self._waiting_arrival, ended.request_id, arrival))
        ops.append((setitem, self.preempted_rows, slice(None), rows))
        return ops


def allocate_preempting(
    state: PolicyState, request_id: str, num_new: Sequence[int]
) -> tuple[list[list[int]] | None, list[tuple[str, str, list[int], int]]]:
    """One step of ``request_id``; while it runs short, preempt the policy's victim and retry
    (vLLM's loop). Atomic: one commit for the victims' ends, the step and the counters.

    Returns:
        The step's slot mappings (None: the request itself was preempted), and per
        preemption, in order: the victim, the reason, the positions it had computed per group,
        its priority.

    Raises:
        RequestError: as the core's step (unknown request, a step beyond a limit).
        AllocationError: the policy does not preempt (``reserve``, ``declared``) and the step
            runs short (nothing changed).
    """
    core = state._core
    try:
        return core.step_function(request_id, num_new), []
    except AllocationError:
        if state.policy.kind != "on_demand":
            raise
    priorities = dict(state.priority)
    out, done = core.step_preempting(request_id, num_new, state.victim, state.counted_ops)
    preempted = []
    for ended in done:
        short = ended.short
        reason = (
            f"group {short.group!r}: the step of request {request_id!r} needed "
            f"{short.needed} and {short.free} were free"
        )
        priority = priorities.get(ended.request_id, 0)
        preempted.append((ended.request_id, reason, ended.rows, priority))
    return out, preempted


def step_needs(
    core: CoordinatorCore, request_id: str, num_new: Sequence[int]
) -> tuple[int, str] | list[int]:
    """What one step of ``request_id`` lacks, changing nothing: ``(group, reason)`` when it can
    never be taken (beyond the group's ``max_in_flight`` or the request's ``max_len``), else
    the cache blocks short per group (all 0: it fits now).

    The core's phase 1, asked of the managers themselves (the core skips them below its
    bounds, with the same answers), read at one moment. With one pool for all groups, the
    shortfall is the pool's, charged to the last group that takes blocks (as the core's error
    names it).

    Raises:
        RequestError: the request is not admitted, or not one count per group.
    """
    return core.read("try_allocate", _step_needs, core, request_id, num_new)


def _step_needs(
    core: CoordinatorCore, request_id: str, num_new: Sequence[int]
) -> tuple[int, str] | list[int]:
    o = core.offset(request_id)
    if len(num_new) != len(core.names):
        raise core._arity(request_id, len(num_new))
    n = len(core.names)
    table = core.table
    short = [0] * n
    wants = [0] * n
    frees = [0] * n
    for g, q in enumerate(num_new):
        fields = table.read(o, g)
        c, p = fields[ANCHOR] - fields[SLACK], core._pool[g]
        max_len = fields[MAXLEN]
        first, end = (c, c + q) if p == 1 else (c // p, -(-(c + q) // p))
        if (end - first if q else 0) > core._in_flight[g] or end > max_len:
            error = core._too_long(request_id, o, g, first, end, q, core._in_flight[g], max_len)
            return g, error.args[0]
        manager, pool = core._managers[g], core.pools[g]
        done, length = fields[SKIPPED], fields[LENGTH]
        skip = max(manager.skipped_blocks(first), done)
        wants[g] = manager.table_length(end) - done - length
        evicted = table.live(o, g)[: skip - done]
        frees[g] = skip - done - (pool.count_shared(evicted) if skip > done else 0)
    if core._one_pool is None:
        for g in range(n):
            if wants[g] > 0:
                short[g] = max(0, wants[g] - core.pools[g].num_free - frees[g])
        return short
    want = sum(w for w in wants if w > 0)
    usable = core._one_pool.num_free + sum(frees)
    if want > usable:
        last = max(g for g, w in enumerate(wants) if w > 0)
        short[last] = want - usable
    return short


def admission_needs(
    state: PolicyState,
    request_id: str,
    caps: Sequence[int],
    prompt_slots: Sequence[int] | None,
) -> list[int]:
    """The cache blocks short per group to admit a request now, changing nothing (all 0: it
    fits). ``caps``: its admission caps (the ledger's ``caps``, which refuses a request that
    never fits).

    ``reserve`` and ``declared``: the caps against what each pool has unreserved (the
    ledger's ``take``; groups that share a pool together, charged to the first). ``on_demand``:
    the blocks its first step (``prompt_slots``, per group in slots; None: none), each at most
    its cap (vLLM's admission cap), and, while other requests are admitted, the watermark,
    against the free blocks (vLLM 0.33's ``KVCacheManager.allocate_slots``).
    """
    core = state._core
    n = len(core.names)
    short = [0] * n
    if state.policy.reserves:
        ledger = core.ledger
        members: dict[int, list[int]] = {}
        for g, pool in enumerate(core.pools):
            members.setdefault(id(pool), []).append(g)
        for groups in members.values():
            usable = core.pools[groups[0]].num_blocks - 1
            left = usable - sum(ledger.reserved[g] - ledger.shared[g] for g in groups)
            need = sum(caps[g] for g in groups)
            if need > left:
                short[groups[0]] = need - left
        return short
    wanted = [0] * n
    if prompt_slots is not None:
        for g, slots in enumerate(prompt_slots):
            wanted[g] = min(core._managers[g].table_length(slots), caps[g])
    seen: dict[int, list[int]] = {}
    for g, pool in enumerate(core.pools):
        seen.setdefault(id(pool), []).append(g)
    for groups in seen.values():
        pool = core.pools[groups[0]]
        need = sum(wanted[g] for g in groups)
        if core.requests:
            need += state.watermark_blocks[groups[0]]
        if need > pool.num_free:
            short[groups[-1]] = need - pool.num_free
    return short
