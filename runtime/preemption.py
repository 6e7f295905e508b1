"""The untyped side of the admission policies: what a step or an admission lacks, and
preemption, on plain ints over a `kvunits.runtime._core.CoordinatorCore`.

`kvunits.runtime.policy` says what the policies mean; the typed entry is
`kvunits.runtime.Stepper` (``can_admit``, ``try_allocate``, ``allocate_preempting``). Built on the
core's own operations: its step (atomic: a step that runs short changes nothing), its
``release`` (the body of ``free``) and ``restore`` (its undo). A preemption is a release and
the record of who and why: the blocks go back to the pools through the same path a finished
request's do, so each returns exactly once, and a block another request shares (a prefix) only
loses a reference.

The questions (`step_needs`, `admission_needs`) change nothing; each mirrors the check its
operation makes first (the core's phase 1, the ledger's ``take``), and the stateful tests
check that they agree: `Fits` exactly when the operation succeeds.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvunits.contracts.errors import AllocationError

from ._core import CoordinatorCore, Released
from .policy import AdmissionPolicy


class PolicyState:
    """A coordinator's policy, its requests' order of preemption, and its counters.

    Args:
        core: the coordinator's core.
        policy: the admission policy.

    Attributes:
        policy: the policy.
        priority: per admitted request, its priority (0 unless given).
        arrival: per admitted request, when it first arrived (a counter): kept across its
            preemptions, as vLLM keeps ``Request.arrival_time``, until it is freed.
        num_preemptions: preemptions so far (vLLM's ``num_preemptions``).
        preempted_rows: per group, the positions the preempted requests had computed (kernel
            unit): what the scheduler recomputes.
        watermark_blocks: per group, the free blocks admission keeps for running requests.
    """

    __slots__ = (
        "_core",
        "_next",
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
        self.num_preemptions = 0
        self.preempted_rows = [0] * len(core.names)
        self.watermark_blocks = [policy.watermark_blocks(p.num_blocks) for p in core.pools]

    def admitted(self, request_id: str, priority: int) -> None:
        """Record an admission (after the core admitted it)."""
        arrival = self._waiting_arrival.pop(request_id, None)
        if arrival is None:
            arrival, self._next = self._next, self._next + 1
        self.arrival[request_id] = arrival
        self.priority[request_id] = priority

    def freed(self, request_id: str) -> None:
        """Forget a request that finished (after the core freed it)."""
        self.arrival.pop(request_id, None)
        self.priority.pop(request_id, None)
        self._waiting_arrival.pop(request_id, None)

    def victim(self) -> str:
        """The request to preempt next: vLLM 0.33's ``Scheduler.schedule`` rule.

        ``fcfs``: the request admitted last (``self.running[-1]``; the core keeps its requests
        in admission order). ``priority``: the largest ``(priority, arrival)``.
        """
        requests = self._core.requests
        if self.policy.scheduling_policy == "fcfs":
            return next(reversed(requests))
        priority, arrival = self.priority, self.arrival
        return max(requests, key=lambda r: (priority.get(r, 0), arrival.get(r, 0)))

    def preempt(self, request_id: str) -> tuple[Released, list[int]]:
        """Release a victim (the core taken): its blocks back to the pools. Returns the
        release (for `restore`) and the positions per group it had computed."""
        lost = list(self._core.requests[request_id].num_rows)
        released = self._core.release(request_id)
        return released, lost

    def count(self, request_id: str, lost: Sequence[int]) -> None:
        """Count a preemption that stands (the call that made it succeeded)."""
        self.num_preemptions += 1
        for g, rows in enumerate(lost):
            self.preempted_rows[g] += rows
        self.priority.pop(request_id, None)
        arrival = self.arrival.pop(request_id, None)
        if arrival is not None:
            self._waiting_arrival[request_id] = arrival


def allocate_preempting(
    state: PolicyState, request_id: str, num_new: Sequence[int]
) -> tuple[list[list[int]] | None, list[tuple[str, str, list[int], int]]]:
    """One step of ``request_id``; while it runs short, preempt the policy's victim and retry
    (vLLM's loop). Atomic: if an exception escapes, every request preempted is admitted again,
    in its place, and the pools are as before.

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
    except AllocationError as err:
        if state.policy.kind != "on_demand":
            raise
        first_short: AllocationError = err
    core.enter("allocate_preempting")
    try:
        order = list(core.requests)
        done: list[tuple[Released, list[int], str]] = []
        short = first_short
        try:
            while True:
                victim = state.victim()
                reason = (
                    f"group {short.group!r}: the step of request {request_id!r} needed "
                    f"{short.needed} and {short.free} were free"
                )
                released, lost = state.preempt(victim)
                done.append((released, lost, reason))
                if victim == request_id:
                    out = None
                    break
                req = core.requests[request_id]
                try:
                    out = core.step_taken(request_id, req, num_new)
                    break
                except AllocationError as again:
                    short = again
        except BaseException:
            for released, _, _ in reversed(done):
                core.restore(released)
            if list(core.requests) != order:
                requests = dict(core.requests)
                core.requests.clear()
                core.requests.update((r, requests[r]) for r in order)
            raise
        preempted = []
        for released, lost, reason in done:
            victim = released.request_id
            preempted.append((victim, reason, lost, state.priority.get(victim, 0)))
            state.count(victim, lost)
        return out, preempted
    finally:
        core.leave()


def step_needs(
    core: CoordinatorCore, request_id: str, num_new: Sequence[int]
) -> tuple[int, str] | list[int]:
    """What one step of ``request_id`` lacks, changing nothing: ``(group, reason)`` when it can
    never be taken (beyond the group's ``max_in_flight`` or the request's ``max_len``), else
    the cache blocks short per group (all 0: it fits now).

    The core's phase 1, asked of the managers themselves (the core skips them below its
    bounds, with the same answers). With one pool for all groups, the shortfall is the
    pool's, charged to the last group that takes blocks (as the core's error names it).

    Raises:
        RequestError: the request is not admitted, or not one count per group.
    """
    req = core.request(request_id)
    if len(num_new) != len(core.names):
        raise core._arity(request_id, len(num_new))
    n = len(core.names)
    short = [0] * n
    wants = [0] * n
    frees = [0] * n
    for g, q in enumerate(num_new):
        c, p = req.num_rows[g], core._pool[g]
        first, end = (c, c + q) if p == 1 else (c // p, -(-(c + q) // p))
        if (end - first if q else 0) > core._in_flight[g] or end > req.max_len[g]:
            error = core._too_long(request_id, g, first, end, q, core._in_flight[g], req.max_len[g])
            return g, error.args[0]
        manager, pool, table = core._managers[g], core.pools[g], req.tables[g]
        done = req.skipped[g]
        skip = max(manager.skipped_blocks(first), done)
        wants[g] = manager.table_length(end) - len(table)
        frees[g] = skip - done - (pool.count_shared(table[done:skip]) if skip > done else 0)
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
