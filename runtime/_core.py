"""The untyped inner core of the coordinator: plain ints, no unit objects, no checks of units.

`runtime.coordinator.KVCacheCoordinator` checks units once at its entry and delegates here;
the allocator benchmark runs the same trace through both to price that check. Groups are
addressed by index. A step counts *positions* in each group's kernel unit (encoder tokens for
a pooled group, tokens otherwise); the core turns them into slots with the formulas of
`contracts.crossing` (a pooled step may continue a partial slot), and limits, caps and
eviction work in slots; block counts are in cache blocks.

One scheduler thread drives a core (see `KVCacheCoordinator`). Each call that changes state
takes a non-blocking lock: a second thread (or a re-entrant callback) that enters while a call is
in progress gets `ConcurrentUseError` at once and changes nothing, so concurrent use is a clear
error rather than a silent corruption. Every such call is atomic: it checks before it changes
anything, and if an exception still escapes mid-change (a bug, a failure injected by a test),
what it had changed is undone before the exception propagates.
"""

from __future__ import annotations

import reprlib
import threading
from collections.abc import Sequence
from typing import Any, Final

from contracts import CacheBlocks
from contracts.crossing import cache_slots, step_cache_rows, step_cache_slots
from contracts.errors import AllocationError, ConcurrentUseError, RequestError

from .admission import AdmissionLedger
from .block_pool import NULL_BLOCK, BlockPool
from .managers import SingleTypeManager

#: The longest request id accepted (characters).
MAX_REQUEST_ID_CHARS: Final = 256


def check_request_id(request_id: object) -> None:
    """Raise `RequestError` unless ``request_id`` is a str of 1 .. `MAX_REQUEST_ID_CHARS`
    characters (ids key dicts and appear in every message: no bytes, ints, None, lists)."""
    if type(request_id) is str and 0 < len(request_id) <= MAX_REQUEST_ID_CHARS:
        return
    if type(request_id) is not str:
        shown = reprlib.repr(request_id)  # bounded, whatever the object
        problem = f"a request id is a str, got {shown} ({type(request_id).__name__})"
        if isinstance(request_id, bytes):
            problem += "; decode it first"
    else:
        problem = (
            "a request id must not be empty"
            if not request_id
            else f"a request id is at most {MAX_REQUEST_ID_CHARS} characters long, got "
            f"{len(request_id)}"
        )
        shown = repr(request_id[:80])
    raise RequestError(problem, request_id=shown)


class RequestState:
    """One admitted request's bookkeeping, one entry per group in each list (plain ints).

    Attributes:
        tables: block tables (cache-block ids; the null block where evicted).
        num_rows: positions so far in the group's kernel unit (encoder tokens for a pooled
            group, else tokens; all computed by the time the next step comes).
        num_slots: slots held so far, in the group's slot unit: ``cdiv(num_rows, P)``.
        max_len: the declared longest sequence, in the group's slot unit.
        caps: the admission cap, in cache blocks (what the ledger reserved).
        skipped: leading table entries already evicted, in cache blocks (they hold the null
            block; the live blocks are ``tables[g][skipped[g]:]``). It equals the manager's
            ``skipped_blocks`` at the latest step's first slot, kept to spare that call.
        step_rows: positions the latest step added, in the kernel unit (it started at
            ``num_rows − step_rows``).
    """

    __slots__ = ("caps", "max_len", "num_rows", "num_slots", "skipped", "step_rows", "tables")

    def __init__(self, max_len: list[int], caps: list[int]) -> None:
        n = len(max_len)
        self.tables: list[list[int]] = [[] for _ in range(n)]
        self.num_rows = [0] * n
        self.num_slots = [0] * n
        self.max_len = max_len
        self.caps = caps
        self.skipped = [0] * n
        self.step_rows = [0] * n


class CoordinatorCore:
    """Block pools, managers and requests of all groups, on plain ints.

    Args:
        names: the groups' names (for messages).
        managers: one manager per group.
        pools: one block pool per group.
        ledger: the admission ledger over the same groups.
        max_in_flight_slots: per group, the most slots one step may add (the group's unit).
        max_len_slots: per group, the longest sequence a request may declare (its unit).

    Attributes:
        names: the groups' names, in order.
        pools: the groups' block pools, in order.
        ledger: the admission ledger.
        requests: the admitted requests by id.
    """

    __slots__ = (
        "_block_size",
        "_busy",
        "_enter",
        "_has_rows",
        "_in_flight",
        "_leave",
        "_limit",
        "_managers",
        "_pool",
        "ledger",
        "names",
        "pools",
        "requests",
    )

    def __init__(
        self,
        names: Sequence[str],
        managers: Sequence[SingleTypeManager],
        pools: Sequence[BlockPool],
        ledger: AdmissionLedger,
        max_in_flight_slots: Sequence[int],
        max_len_slots: Sequence[int],
    ) -> None:
        self.names = tuple(names)
        self._managers = tuple(managers)
        self.pools = tuple(pools)
        self.ledger = ledger
        self._in_flight = tuple(max_in_flight_slots)
        self._limit = tuple(max_len_slots)
        # Read once per step per group: plain attributes of the managers, kept at hand.
        self._block_size = tuple(m.block_size_slots for m in managers)
        self._has_rows = tuple(m.has_slot_rows for m in managers)
        self._pool = tuple(m.spec.pool.tokens_per_block for m in managers)
        self.requests: dict[str, RequestState] = {}
        self._busy = threading.Lock()
        # Bound once: the step's entry and exit cost one call each.
        self._enter = self._busy.acquire
        self._leave = self._busy.release

    def enter(self, operation: str) -> None:
        """Take the core for one call, or raise `ConcurrentUseError` if a call is in progress.
        Pair with `leave` in a ``finally``."""
        if not self._busy.acquire(False):
            raise self._concurrent(operation)

    def leave(self) -> None:
        """Give the core back after `enter`."""
        self._busy.release()

    # -- admission ------------------------------------------------------------------------

    def admit(self, request_id: str, max_len_slots: Sequence[int | None] | None = None) -> None:
        """Admit a request; ``max_len_slots`` per group, in its unit (None: the group's limit).

        Raises:
            RequestError: the id is not a str of 1 .. `MAX_REQUEST_ID_CHARS` characters, or is
                already admitted.
            AdmissionError: it can never fit (nothing changes).
            AllocationError: it cannot be reserved now (nothing changes).
        """
        check_request_id(request_id)
        if not self._busy.acquire(False):
            raise self._concurrent("admit")
        try:
            if request_id in self.requests:
                raise RequestError(
                    f"request {request_id!r} is already admitted; free it before reusing its id",
                    request_id=request_id,
                )
            lengths = list(self._limit)
            if max_len_slots is not None:
                for g, length in enumerate(max_len_slots):
                    if length is not None:
                        lengths[g] = length
            caps = self.ledger.caps(request_id, lengths)
            self.ledger.take(request_id, caps)
            try:
                self.requests[request_id] = RequestState(lengths, caps)
            except BaseException:
                self.ledger.give_back(caps)
                raise
        finally:
            self._busy.release()

    # -- steps ----------------------------------------------------------------------------

    def allocate_step(self, request_id: str, num_new: Sequence[int]) -> list[list[int]]:
        """Allocate one step of a request in every group, atomically.

        Args:
            request_id: an admitted request.
            num_new: per group, in group order, the positions the step adds in the group's
                kernel unit (encoder tokens for a pooled group; 0: none). A cross attention
                or state group allocates its blocks at the request's first step.

        Returns:
            Per group, the step's slot mapping (`contracts.crossing.step_cache_slots`): the
            cache slot of every slot the step touches, manager units. For a pooled group the
            first may be the partial slot the step continues.

        Raises:
            RequestError: unknown request, a step touching more slots than the group's
                ``max_in_flight``, or ending beyond the request's ``max_len``.
            AllocationError: a group lacks blocks; nothing changed in any group.
            ConcurrentUseError: another call is in progress (nothing changes).
        """
        if not self._enter(False):
            raise self._concurrent("allocate")
        try:
            req = self.requests.get(request_id) if type(request_id) is str else None
            if req is None:
                raise self._unknown(request_id)
            managers, pools, pool_of = self._managers, self.pools, self._pool
            if len(num_new) != len(managers):
                raise self._arity(request_id, len(num_new))
            num_rows, tables, skipped = req.num_rows, req.tables, req.skipped
            in_flight, max_len = self._in_flight, req.max_len
            # Phase 1: what every group needs, checked before anything changes.
            firsts = []
            ends = []
            skips = []
            wants = []
            short = None
            for g, q in enumerate(num_new):
                c, p = num_rows[g], pool_of[g]
                # The slots the step touches, first..end-1 (contracts.crossing): the first holds
                # the step's first position, so eviction counts back from it.
                if p == 1:
                    first, end = c, c + q
                else:
                    first, end = c // p, -(-(c + q) // p)
                if (end - first if q else 0) > in_flight[g] or end > max_len[g]:
                    raise self._too_long(request_id, g, first, end, q, in_flight[g], max_len[g])
                manager = managers[g]
                skip = manager.skipped_blocks(first)
                want = manager.table_length(end) - len(tables[g])
                if want > 0:
                    # Blocks this step evicts go back to the pool before it allocates, as in
                    # vLLM (no query of the step reads them). ``skip`` never decreases: it only
                    # grows with the step's first slot.
                    usable = pools[g].num_free + skip - skipped[g]
                    if want > usable and short is None:
                        # A caller's mistake in a later group is reported first: it is not
                        # transient, a shortfall is.
                        short = (g, want, usable)
                firsts.append(first)
                ends.append(end)
                skips.append(skip)
                wants.append(want)
            if short is not None:
                raise self._short(request_id, *short)
            # Phase 2: evict, allocate, map; nothing here fails when the checks above hold. Each
            # change to a pool and a table is journaled right after it is made (most steps make
            # none), so that an exception escaping anyway is undone before it propagates.
            journal: list[tuple[Any, ...]] = []
            num_slots, step_rows = req.num_slots, req.step_rows
            last_steps = step_rows[:]
            updated = 0
            try:
                out: list[list[int]] = []
                for g, q in enumerate(num_new):
                    table = tables[g]
                    skip, done = skips[g], skipped[g]
                    if skip > done:
                        evicted = table[done:skip]
                        pools[g].free(evicted)
                        journal.append((g, done, evicted, None, 0))
                        table[done:skip] = [NULL_BLOCK] * (skip - done)
                        skipped[g] = skip
                    want = wants[g]
                    if want > 0:
                        mark = pools[g].mark()
                        taken = pools[g].allocate_n(want)
                        journal.append((g, 0, None, taken, mark))
                        table.extend(taken)
                    if self._has_rows[g] and q:
                        out.append(cache_slots(table, self._block_size[g], firsts[g], ends[g]))
                    else:
                        out.append([])
                    num_rows[g] += q
                    num_slots[g] = ends[g]
                    step_rows[g] = q
                    updated = g + 1
            except BaseException:
                for g in range(updated):  # num_slots is cdiv(num_rows, P) before as after
                    num_rows[g] -= num_new[g]
                    num_slots[g] = -(-num_rows[g] // pool_of[g])
                step_rows[:] = last_steps
                self._undo(req, journal)
                raise
            return out
        finally:
            self._leave()

    def _undo(self, req: RequestState, journal: list[tuple[Any, ...]]) -> None:
        """Undo a step's journaled changes, newest first: the pools' queues, the tables and
        the evictions are then exactly as before the step."""
        for g, done, evicted, taken, mark in reversed(journal):
            table, pool = req.tables[g], self.pools[g]
            if taken is not None:
                del table[len(table) - len(taken) :]
                pool.undo_allocate(taken, mark)
            else:
                table[done : done + len(evicted)] = evicted
                req.skipped[g] = done
                pool.undo_free(evicted)

    def free(self, request_id: str) -> None:
        """Return every block of a finished (or preempted) request, and its reservation.

        Raises:
            RequestError: the request is not admitted.
            ConcurrentUseError: another call is in progress (nothing changes).
        """
        if not self._busy.acquire(False):
            raise self._concurrent("free")
        try:
            req = self.requests.pop(request_id, None) if type(request_id) is str else None
            if req is None:
                raise self._unknown(request_id)
            freed: list[tuple[BlockPool, list[int]]] = []
            try:
                for g, table in enumerate(req.tables):
                    live = table[req.skipped[g] :]
                    self.pools[g].free(live)
                    freed.append((self.pools[g], live))
                self.ledger.give_back(req.caps)
            except BaseException:
                for pool, live in reversed(freed):
                    pool.undo_free(live)
                self.requests[request_id] = req
                raise
        finally:
            self._busy.release()

    # -- reading ----------------------------------------------------------------------------

    def request(self, request_id: str) -> RequestState:
        """The bookkeeping of an admitted request (read it, do not modify it)."""
        req = self.requests.get(request_id) if type(request_id) is str else None
        if req is None:
            raise self._unknown(request_id)
        return req

    def block_table(self, request_id: str, g: int) -> list[int]:
        """The request's live block table in group ``g`` (do not modify)."""
        return self.request(request_id).tables[g]

    def slot_mapping(self, request_id: str, g: int) -> list[int]:
        """The latest step's slot mapping in group ``g`` (manager units; see `allocate_step`)."""
        req = self.request(request_id)
        if not self._has_rows[g]:
            return []
        q = req.step_rows[g]
        return step_cache_slots(
            req.tables[g], self._block_size[g], req.num_rows[g] - q, q, self._pool[g]
        )

    def step_rows(self, request_id: str, g: int) -> list[int]:
        """The cache row of every position of the latest step in group ``g`` (kernel units)."""
        req = self.request(request_id)
        if not self._has_rows[g]:
            return []
        q = req.step_rows[g]
        return step_cache_rows(
            req.tables[g], self._block_size[g], req.num_rows[g] - q, q, self._pool[g]
        )

    # -- errors -------------------------------------------------------------------------------

    def _unknown(self, request_id: object) -> RequestError:
        check_request_id(request_id)
        return RequestError(
            f"request {request_id!r} is not admitted (never admitted, or already freed); "
            "admit it first",
            request_id=str(request_id),
        )

    def _concurrent(self, operation: str) -> ConcurrentUseError:
        return ConcurrentUseError(
            f"{operation} entered a KVCacheCoordinator while another call was still in "
            "progress on it (a second thread, or a callback from inside a call); this call "
            "changed nothing. One scheduler thread drives a coordinator: share one between "
            "threads only under one lock held around every call",
            operation=operation,
        )

    def _arity(self, request_id: str, given: int) -> RequestError:
        return RequestError(
            f"a step of request {request_id!r} gives {given} counts for "
            f"{len(self.names)} groups ({', '.join(self.names)}); give one per group, in order",
            request_id=request_id,
        )

    def _too_long(
        self, request_id: str, g: int, first: int, end: int, q: int, in_flight: int, max_len: int
    ) -> RequestError:
        unit = self._managers[g].spec.slot_unit.unit
        name = self.names[g]
        held = self.requests[request_id].num_slots[g]
        if end > max_len:
            what = (
                f"would hold {end} {unit} ({held} + {end - held}), beyond the request's "
                f"max_len of {max_len} {unit}"
            )
        elif self._pool[g] == 1:
            what = f"adds {q} {unit}, more than the group's max_in_flight of {in_flight} {unit}"
        else:
            what = (
                f"touches {end - first} {unit} (slots {first}..{end - 1}), more than the "
                f"group's max_in_flight of {in_flight} {unit}"
            )
        return RequestError(
            f"a step of request {request_id!r} in group {name!r} {what}; the admission cap "
            "only covers steps within both limits: split the step or admit with a larger "
            "max_len",
            request_id=request_id,
            group=name,
        )

    def _short(self, request_id: str, g: int, want: int, usable: int) -> AllocationError:
        name = self.names[g]
        return AllocationError(
            f"step of request {request_id!r} needs {want} new cache_block in group {name!r} "
            f"but only {usable} are free (evictions of this step included), "
            f"{want - usable} short; nothing was allocated in any group: preempt a request "
            "or retry after one finishes",
            group=name,
            needed=CacheBlocks(want),
            free=CacheBlocks(usable),
            request_id=request_id,
        )
