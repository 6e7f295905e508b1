"""The untyped inner core of the coordinator: plain ints, no unit objects, no checks of units.

`runtime.coordinator.KVCacheCoordinator` checks units once at its entry and delegates here;
the allocator benchmark runs the same trace through both to price that check. Groups are
addressed by index, lengths are plain ints in each group's slot unit, block counts in cache
blocks.

Not thread-safe: one scheduler thread drives a core (see `KVCacheCoordinator`).
"""

from __future__ import annotations

from collections.abc import Sequence

from contracts import CacheBlocks

from ._errors import AllocationError, RequestError
from .admission import AdmissionLedger
from .block_pool import NULL_BLOCK, BlockPool
from .managers import SingleTypeManager


class RequestState:
    """One admitted request's bookkeeping, one entry per group in each list (plain ints).

    Attributes:
        tables: block tables (cache-block ids; the null block where evicted).
        num_slots: slots allocated so far, in the group's unit (all computed by the time the
            next step comes).
        max_len: the declared longest sequence, in the group's unit.
        caps: the admission cap, in cache blocks (what the ledger reserved).
        skipped: leading table entries already evicted, in cache blocks (they hold the null
            block; the live blocks are ``tables[g][skipped[g]:]``). It equals the manager's
            ``skipped_blocks(num_slots − step_new)``, kept to spare that call every step.
        step_new: slots the latest step added, in the group's unit (it started at
            ``num_slots − step_new``).
    """

    __slots__ = ("caps", "max_len", "num_slots", "skipped", "step_new", "tables")

    def __init__(self, max_len: list[int], caps: list[int]) -> None:
        n = len(max_len)
        self.tables: list[list[int]] = [[] for _ in range(n)]
        self.num_slots = [0] * n
        self.max_len = max_len
        self.caps = caps
        self.skipped = [0] * n
        self.step_new = [0] * n


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
        "_has_rows",
        "_in_flight",
        "_limit",
        "_managers",
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
        self.requests: dict[str, RequestState] = {}

    # -- admission ------------------------------------------------------------------------

    def admit(self, request_id: str, max_len_slots: Sequence[int | None] | None = None) -> None:
        """Admit a request; ``max_len_slots`` per group, in its unit (None: the group's limit).

        Raises:
            RequestError: the id is already admitted.
            AdmissionError: it can never fit (nothing changes).
            AllocationError: it cannot be reserved now (nothing changes).
        """
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
        self.requests[request_id] = RequestState(lengths, caps)

    # -- steps ----------------------------------------------------------------------------

    def allocate_step(self, request_id: str, num_new: Sequence[int]) -> list[list[int]]:
        """Allocate one step of a request in every group, atomically.

        Args:
            request_id: an admitted request.
            num_new: per group, in group order, the slots the step adds (0: none). A cross
                attention or state group allocates its blocks at the request's first step.

        Returns:
            Per group, the cache slot of each new slot (manager units):
            ``table[p // block_size] × block_size + p % block_size`` for p in the step.

        Raises:
            RequestError: unknown request, a step beyond a group's ``max_in_flight`` or the
                request's ``max_len``.
            AllocationError: a group lacks blocks; nothing changed in any group.
        """
        req = self.requests.get(request_id)
        if req is None:
            raise self._unknown(request_id)
        managers, pools = self._managers, self.pools
        if len(num_new) != len(managers):
            raise self._arity(request_id, len(num_new))
        num_slots, tables, skipped = req.num_slots, req.tables, req.skipped
        in_flight, max_len = self._in_flight, req.max_len
        # Phase 1: what every group needs, checked before anything changes.
        skips = []
        wants = []
        short = None
        for g, n in enumerate(num_new):
            c = num_slots[g]
            if n > in_flight[g] or c + n > max_len[g]:
                raise self._too_long(request_id, g, c, n, in_flight[g], max_len[g])
            manager = managers[g]
            skip = manager.skipped_blocks(c)
            want = manager.table_length(c + n) - len(tables[g])
            if want > 0:
                # Blocks this step evicts go back to the pool before it allocates, as in
                # vLLM (no query of the step reads them). ``skip`` never decreases: it only
                # grows with num_slots.
                usable = pools[g].num_free + skip - skipped[g]
                if want > usable and short is None:
                    # A caller's mistake in a later group is reported first: it is not
                    # transient, a shortfall is.
                    short = (g, want, usable)
            skips.append(skip)
            wants.append(want)
        if short is not None:
            raise self._short(request_id, *short)
        # Phase 2: evict, allocate, record; nothing here can fail.
        out: list[list[int]] = []
        step_new = req.step_new
        for g, n in enumerate(num_new):
            table = tables[g]
            skip, done = skips[g], skipped[g]
            if skip > done:
                pools[g].free(table[done:skip])
                table[done:skip] = [NULL_BLOCK] * (skip - done)
                skipped[g] = skip
            want = wants[g]
            if want > 0:
                table.extend(pools[g].allocate_n(want))
            c = num_slots[g]
            num_slots[g] = c + n
            step_new[g] = n
            if self._has_rows[g]:
                bs = self._block_size[g]
                out.append([table[p // bs] * bs + p % bs for p in range(c, c + n)])
            else:
                out.append([])
        return out

    def free(self, request_id: str) -> None:
        """Return every block of a finished (or preempted) request, and its reservation."""
        req = self.requests.pop(request_id, None)
        if req is None:
            raise self._unknown(request_id)
        for g, table in enumerate(req.tables):
            self.pools[g].free(table[req.skipped[g] :])
        self.ledger.give_back(req.caps)

    # -- reading ----------------------------------------------------------------------------

    def request(self, request_id: str) -> RequestState:
        """The bookkeeping of an admitted request (read it, do not modify it)."""
        req = self.requests.get(request_id)
        if req is None:
            raise self._unknown(request_id)
        return req

    def block_table(self, request_id: str, g: int) -> list[int]:
        """The request's live block table in group ``g`` (do not modify)."""
        return self.request(request_id).tables[g]

    def slot_mapping(self, request_id: str, g: int) -> list[int]:
        """The cache slots of the latest step's new slots in group ``g`` (manager units)."""
        req = self.request(request_id)
        if not self._has_rows[g]:
            return []
        table, bs, end = req.tables[g], self._block_size[g], req.num_slots[g]
        return [table[p // bs] * bs + p % bs for p in range(end - req.step_new[g], end)]

    # -- errors -------------------------------------------------------------------------------

    def _unknown(self, request_id: str) -> RequestError:
        return RequestError(
            f"request {request_id!r} is not admitted (never admitted, or already freed); "
            "admit it first",
            request_id=request_id,
        )

    def _arity(self, request_id: str, given: int) -> RequestError:
        return RequestError(
            f"a step of request {request_id!r} gives {given} counts for "
            f"{len(self.names)} groups ({', '.join(self.names)}); give one per group, in order",
            request_id=request_id,
        )

    def _too_long(
        self, request_id: str, g: int, c: int, n: int, in_flight: int, max_len: int
    ) -> RequestError:
        unit = self._managers[g].spec.slot_unit.unit
        name = self.names[g]
        if n > in_flight:
            what = f"adds {n} {unit}, more than the group's max_in_flight of {in_flight} {unit}"
        else:
            what = (
                f"would hold {c + n} {unit} ({c} + {n}), beyond the request's max_len of "
                f"{max_len} {unit}"
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
