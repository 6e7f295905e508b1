"""The untyped inner core of the coordinator: plain ints, no unit objects, no checks of units.

`kvunits.runtime.coordinator.KVCacheCoordinator` checks units once at its entry and delegates here;
the allocator benchmark runs the same trace through both to price that check. Groups are
addressed by index. A step counts *positions* in each group's kernel unit (encoder tokens for
a pooled group, tokens otherwise); the core turns them into slots with the formulas of
`kvunits.contracts.crossing` (a pooled step may continue a partial slot), and limits, caps and
eviction work in slots; block counts are in cache blocks.

One scheduler thread drives a core (see `KVCacheCoordinator`). Each call that changes state
takes the core's token, a non-blocking lock (see `CoordinatorCore.enter`): a second thread (or
a re-entrant callback) that enters while a call is in progress gets `ConcurrentUseError` at
once and changes nothing, so concurrent use is a clear error rather than a silent corruption.
Every such call is atomic: it checks before it changes anything, and if an exception still
escapes mid-change (a bug, a failure injected by a test), what it had changed is undone before
the exception propagates.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from kvunits.contracts import CacheBlocks, PooledBlocks
from kvunits.contracts.crossing import cache_slots, step_cache_rows, step_cache_slots
from kvunits.contracts.errors import AllocationError, ConcurrentUseError, RequestError

from .admission import AdmissionLedger
from .block_pool import NULL_BLOCK, BlockPool
from .managers import SingleTypeManager
from .prefix_cache import (
    CACHEABLE_KINDS,
    GroupCache,
    PrefixPart,
    chain_hashes,
    longest_common_hit,
)

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
        max_len: the declared longest sequence, in the group's slot unit.
        caps: the admission cap, in cache blocks (what the ledger reserved).
        skipped: leading table entries already evicted, in cache blocks (they hold the null
            block; the live blocks are ``tables[g][skipped[g]:]``). It is the manager's
            ``skipped_blocks`` at the latest step's first slot (or more, after a prefix hit),
            kept to spare that call.
        step_rows: positions the latest step added, in the kernel unit (it started at
            ``num_rows − step_rows``).
        extra: what only a request that uses prefix caching or speculation has
            (`RequestExtras`), else None: the others pay nothing for either.
        room: the slots a step may end at without a new block and within ``max_len``: at most
            ``min(manager.reach(len(tables[g])), max_len[g])``.
        evict: the first slot a step may start at that evicts: at most
            ``manager.first_evicting(skipped[g])``.
        bound: the first slot a step may start at without its group needing the pools or
            another block of its table: at most ``room``, ``evict`` and the end of the block
            holding the next step's first slot.
        base: the cache slot of slot 0 were every slot in that block's place:
            ``(table[b] − b) × block_size`` for that block ``b``, so that a slot ``s`` below
            ``bound`` is at cache slot ``base + s``.

    ``room``, ``evict`` and ``bound`` only let a step skip the managers and the pools (see
    `_make_step`): the general path sets them exact, and anything may set them lower (-1 and
    0, as at admission: the next step then takes the general path), never higher; ``base``
    is read only below ``bound``.
    """

    __slots__ = (
        "_pools",
        "base",
        "bound",
        "caps",
        "evict",
        "extra",
        "max_len",
        "num_rows",
        "room",
        "skipped",
        "step_rows",
        "tables",
    )

    def __init__(self, max_len: list[int], caps: list[int], pools: tuple[int, ...]) -> None:
        n = len(max_len)
        self.tables: list[list[int]] = [[] for _ in range(n)]
        self.num_rows = [0] * n
        self.max_len = max_len
        self.caps = caps
        self.skipped = [0] * n
        self.step_rows = [0] * n
        self.extra: RequestExtras | None = None
        self.room = [-1] * n
        self.evict = [0] * n
        self.bound = [-1] * n
        self.base = [0] * n
        self._pools = pools

    @property
    def num_slots(self) -> list[int]:
        """Slots held so far per group, in its slot unit: ``cdiv(num_rows, P)`` (a copy)."""
        return [-(-rows // p) for rows, p in zip(self.num_rows, self._pools, strict=True)]


class RequestExtras:
    """A request's prefix-cache and speculation state, one entry per group in each list.

    Attributes:
        hashes: its block hashes at the group's granularity (None: no content given).
        tails: the content keys after its last full block (the next block's start).
        parents: the hash the next full block chains from.
        registered: leading table entries already in the prefix cache (hit or registered).
        spec: positions of the latest step that are speculative (kernel unit): not yet
            committed, so not cached; `CoordinatorCore.rollback` may remove them.
        idle: nothing for a step to commit: no speculative position, and every block whose
            hash is known is registered (a decode step past the given content then costs
            the request one check).
    """

    __slots__ = ("hashes", "idle", "parents", "registered", "spec", "tails")

    def __init__(self, num_groups: int) -> None:
        self.hashes: list[list[bytes] | None] = [None] * num_groups
        self.tails: list[list[int]] = [[] for _ in range(num_groups)]
        self.parents: list[bytes] = [b""] * num_groups
        self.registered = [0] * num_groups
        self.spec = [0] * num_groups
        self.idle = False

    def settle(self) -> None:
        """Set `idle` from the state."""
        self.idle = not any(self.spec) and all(
            h is None or r >= len(h) for h, r in zip(self.hashes, self.registered, strict=True)
        )


class Released:
    """What `CoordinatorCore.release` freed, for `CoordinatorCore.restore`."""

    __slots__ = ("freed", "request", "request_id", "unshared")

    def __init__(
        self,
        request_id: str,
        request: RequestState,
        freed: list[tuple[BlockPool, list[int]]],
        unshared: list[int] | None,
    ) -> None:
        self.request_id = request_id
        self.request = request
        self.freed = freed
        self.unshared = unshared


class CoordinatorCore:
    """Block pools, managers and requests of all groups, on plain ints.

    Args:
        names: the groups' names (for messages).
        managers: one manager per group.
        pools: the block pool of each group; one pool object in every entry when the groups
            share one pool.
        ledger: the admission ledger over the same groups.
        max_in_flight_slots: per group, the most slots one step may add (the group's unit).
        max_len_slots: per group, the longest sequence a request may declare (its unit).

    Attributes:
        names: the groups' names, in order.
        pools: the groups' block pools, in order.
        caches: each group's prefix cache (None for a kind no prefix can serve).
        ledger: the admission ledger.
        requests: the admitted requests by id.
    """

    __slots__ = (
        "_block_size",
        "_bounded",
        "_give",
        "_has_rows",
        "_in_flight",
        "_keeps",
        "_limit",
        "_managers",
        "_one_pool",
        "_pool",
        "_step",
        "_take",
        "_token",
        "caches",
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
        # One pool for every group: a step's groups draw on one free count together.
        distinct = {id(p) for p in pools}
        self._one_pool = self.pools[0] if len(distinct) == 1 and len(pools) > 1 else None
        self.caches = tuple(
            GroupCache(m.spec, p) if m.kind in CACHEABLE_KINDS else None
            for m, p in zip(managers, pools, strict=True)
        )
        # Whether a group's requests keep every block until they end (no window or chunk
        # ever evicts one within the group's limit): only there is a shared block reserved
        # once (see admit_with_prefix).
        self._keeps = tuple(
            m.skipped_blocks(limit) == 0 for m, limit in zip(managers, max_len_slots, strict=True)
        )
        self.requests: dict[str, RequestState] = {}
        # The core's token: a call takes it for its length (`enter`) and puts it back
        # (`leave`); a call that finds it taken is refused. Taking it is ``list.pop``, one
        # atomic operation (a single C call under the GIL, under the list's own lock in a
        # free-threaded build), as a non-blocking ``Lock.acquire`` is, at about a third of its
        # cost (an acquire parses its arguments): a step pays the pair on every call.
        self._token = [True]
        self._take = self._token.pop
        self._give = self._token.append
        # Whether this layout has a specialised step, which reads each request's bound.
        self._bounded = _specialises(self)
        self._step = _make_step(self)

    @property
    def step_function(self) -> StepFn:
        """``step(request_id, num_new)``: the step `allocate_step` runs without lookahead,
        chosen for these groups at construction (`_make_step`); the typed
        `kvunits.runtime.Stepper.allocate` calls it after its unit checks."""
        return self._step

    def enter(self, operation: str) -> None:
        """Take the core for one call, or raise `ConcurrentUseError` if a call is in progress.
        Pair with `leave` in a ``finally``."""
        try:
            self._take()
        except IndexError:
            raise self._concurrent(operation) from None

    def leave(self) -> None:
        """Give the core back after `enter`."""
        assert not self._token, "leave without enter"
        self._give(True)

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
        self.enter("admit")
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
                self.requests[request_id] = RequestState(lengths, caps, self._pool)
            except BaseException:
                self.ledger.give_back(caps)
                raise
        finally:
            self.leave()

    def admit_with_prefix(
        self,
        request_id: str,
        max_len_slots: Sequence[int | None],
        prefix: Mapping[int, PrefixPart | None],
    ) -> list[int]:
        """Admit a request whose leading positions may be in the prefix cache, and adopt them.

        Args:
            request_id: the new request.
            max_len_slots: per group, its longest sequence in the group's unit (None: the
                group's limit).
            prefix: by group index, for the groups the caller binds: the request's content
                there (`prefix_cache.PrefixPart`: its block hashes at the group's granularity,
                its length in the kernel unit), or None (no content, so no hit). A group
                not in it takes no part.

        Returns:
            Per group, the positions found in the cache (kernel unit, whole blocks): the
            request starts there, its first step computes the rest.

        The hit of groups of one sequence is one (`prefix_cache.longest_common_hit`); a state
        group, or a bound group given no content, makes its sequence's hit 0. Hit blocks gain
        a reference; the admission reserves the request's caps less the hit blocks another
        request already holds in groups that keep their blocks (reserved once, by both).

        Raises:
            RequestError: a bad or admitted id, content longer than the declared length,
                hashes for a group no prefix can serve, or groups of one sequence given
                content of different lengths.
            AdmissionError, AllocationError: as `admit` (nothing changes).
        """
        check_request_id(request_id)
        self.enter("admit")
        try:
            if request_id in self.requests:
                raise RequestError(
                    f"request {request_id!r} is already admitted; free it before reusing its id",
                    request_id=request_id,
                )
            n = len(self.names)
            if len(max_len_slots) != n:
                raise self._arity(request_id, len(max_len_slots))
            lengths = [
                self._limit[g] if length is None else length
                for g, length in enumerate(max_len_slots)
            ]
            hits, tables = self._lookup(request_id, lengths, prefix)
            caps = self.ledger.caps(request_id, lengths)
            discount = [0] * n
            for g, table in enumerate(tables):
                if table and self._keeps[g]:
                    ref = self.pools[g].ref_count
                    discount[g] = sum(1 for b in table if b != NULL_BLOCK and ref(b) > 0)
            for pool in {id(p): p for p in self.pools}.values():
                pool.compact()
            self.ledger.take(request_id, caps, discount)
            touched: list[tuple[BlockPool, int]] = []
            try:
                req = RequestState(lengths, caps, self._pool)
                extra = RequestExtras(n)
                for g, table in enumerate(tables):
                    pool = self.pools[g]
                    for block in table:
                        if block != NULL_BLOCK:
                            pool.touch(block)
                            touched.append((pool, block))
                    req.tables[g] = list(table)
                    req.num_rows[g] = hits[g]
                    req.skipped[g] = sum(1 for b in table if b == NULL_BLOCK)
                    part = prefix.get(g)
                    if part is not None and self.caches[g] is not None:
                        extra.hashes[g] = list(part.hashes)
                        extra.tails[g] = list(part.tail)
                        extra.parents[g] = part.parent
                        extra.registered[g] = len(table)
                extra.settle()
                req.extra = extra
                self.requests[request_id] = req
            except BaseException:
                for pool, block in reversed(touched):
                    pool.untouch(block)
                self.ledger.give_back(caps, discount)
                raise
            for g, part in prefix.items():
                cache = self.caches[g]
                if part is not None and cache is not None:
                    cache.requests += 1
                    cache.queried += part.rows
                    cache.hits += hits[g]
            return hits
        finally:
            self.leave()

    def _lookup(
        self,
        request_id: str,
        lengths: Sequence[int],
        prefix: Mapping[int, PrefixPart | None],
    ) -> tuple[list[int], list[list[int]]]:
        """The hit of every group (kernel unit) and its table prefix; changes nothing."""
        n = len(self.names)
        hits = [0] * n
        tables: list[list[int]] = [[] for _ in range(n)]
        axes: dict[int, list[int]] = {}  # 1: the encoder's sequence (pooled groups), 0: tokens
        for g, part in sorted(prefix.items()):
            manager = self._managers[g]
            rows = 0 if part is None else part.rows
            if part is not None and self.caches[g] is None:
                raise RequestError(
                    f"request {request_id!r} gives content for group {self.names[g]!r}, a "
                    f"{manager.kind} group, which no prefix can serve (it is written whole, or "
                    "holds one state); give it none",
                    request_id=request_id,
                    group=self.names[g],
                )
            encoder = manager.spec.slot_unit is PooledBlocks
            if part is not None and rows > lengths[g] * self._pool[g]:
                unit = "encoder_token" if encoder else "token"
                raise RequestError(
                    f"request {request_id!r} gives {rows} {unit} of content in group "
                    f"{self.names[g]!r}, beyond its max_len of {lengths[g] * self._pool[g]} "
                    f"{unit}; declare a longer max_len",
                    request_id=request_id,
                    group=self.names[g],
                )
            if manager.kind == "cross_attention":
                continue
            axes.setdefault(int(encoder), []).append(g)
        for members in axes.values():
            given = [prefix[g] for g in members]
            parts = [p for p in given if p is not None]
            caches = [self.caches[g] for g in members]
            ready = [c for c in caches if c is not None]
            if len(parts) < len(members) or len(ready) < len(members):
                continue  # a member that cannot hit holds its whole sequence to 0
            sizes = {p.rows for p in parts}
            if len(sizes) > 1:
                raise RequestError(
                    f"request {request_id!r}: groups {', '.join(self.names[g] for g in members)} "
                    f"read one sequence but were given content of {sorted(sizes)} positions; "
                    "give them the same content",
                    request_id=request_id,
                )
            (length,) = sizes
            hit, found = longest_common_hit(
                ready,
                [p.hashes for p in parts],
                max(length - 1, 0),  # the last position is always computed (its output)
            )
            for g, table in zip(members, found, strict=True):
                hits[g] = hit
                tables[g] = table
        return hits, tables

    # -- steps ----------------------------------------------------------------------------

    def allocate_step(
        self,
        request_id: str,
        num_new: Sequence[int],
        lookahead: Sequence[int] | None = None,
    ) -> list[list[int]]:
        """Allocate one step of a request in every group, atomically.

        Args:
            request_id: an admitted request.
            num_new: per group, in group order, the positions the step adds in the group's
                kernel unit (encoder tokens for a pooled group; 0: none). A cross attention
                or state group allocates its blocks at the request's first step.
            lookahead: per group, how many of the step's last positions are speculative
                (checked by `allocate_speculative`, the way to give it): they stay
                uncommitted, so not cached, until a later step; `rollback` may remove them.

        Returns:
            Per group, the step's slot mapping (`kvunits.contracts.crossing.step_cache_slots`): the
            cache slot of every slot the step touches, manager units. For a pooled group the
            first may be the partial slot the step continues.

        Raises:
            RequestError: unknown request, a step touching more slots than the group's
                ``max_in_flight``, or ending beyond the request's ``max_len``.
            AllocationError: a group lacks blocks; nothing changed in any group.
            ConcurrentUseError: another call is in progress (nothing changes).

        A step without lookahead runs the step function chosen for this core's groups at
        construction (`_make_step`), the one the typed `Stepper.allocate` runs too.
        """
        if lookahead is None:
            return self._step(request_id, num_new)
        self.enter("allocate")
        try:
            req = self.requests.get(request_id) if type(request_id) is str else None
            if req is None:
                raise self._unknown(request_id)
            if len(num_new) != len(self.names):
                raise self._arity(request_id, len(num_new))
            return self._allocate(request_id, req, num_new, lookahead)
        finally:
            self.leave()

    def step_taken(
        self, request_id: str, req: RequestState, num_new: Sequence[int]
    ) -> list[list[int]]:
        """A step without lookahead with the core already taken (inside another call, as a
        preemption's retry), by the general path: atomic as `allocate_step`."""
        return self._allocate(request_id, req, num_new, None)

    def _allocate(
        self,
        request_id: str,
        req: RequestState,
        num_new: Sequence[int],
        lookahead: Sequence[int] | None,
    ) -> list[list[int]]:
        """`allocate_step`'s general path, with the core taken and one count per group: a
        step that allocates or evicts in some group, a multi-slot step, a speculative one, one
        with content to cache, and any step of a layout `_make_step` does not specialise."""
        managers, pools, pool_of = self._managers, self.pools, self._pool
        num_rows, tables, skipped = req.num_rows, req.tables, req.skipped
        room, evict = req.room, req.evict
        in_flight, max_len = self._in_flight, req.max_len
        # Phase 1: what every group needs, checked before anything changes.
        plan = []  # per group: the slots touched (first, end), entries skipped after, blocks
        short = None
        grew = False
        for g, q in enumerate(num_new):
            c, p = num_rows[g], pool_of[g]
            # The slots the step touches, first..end-1 (kvunits.contracts.crossing): the first holds
            # the step's first position, so eviction counts back from it.
            if p == 1:
                first, end = c, c + q
            else:
                first, end = c // p, -(-(c + q) // p)
            if (end - first if q else 0) > in_flight[g] or end > max_len[g]:
                raise self._too_long(request_id, g, first, end, q, in_flight[g], max_len[g])
            # Below its bounds a group neither evicts nor allocates (the managers would answer
            # ``done`` and ``<= 0``): they are asked only past one.
            skip = done = skipped[g]
            want = 0
            if first >= evict[g]:
                skip = max(managers[g].skipped_blocks(first), done)
            if end > room[g]:
                want = managers[g].table_length(end) - len(tables[g])
                if want > 0:
                    # Blocks this step evicts go back to the pool before it allocates, as in
                    # vLLM (no query of the step reads them). ``skip`` never decreases: it
                    # only grows with the step's first slot. (One pool for all groups:
                    # checked for all of them together, below.)
                    grew = True
                    if self._one_pool is None:
                        usable = pools[g].num_free + skip - done
                        if skip > done and pools[g].has_shared:
                            # An evicted block another request shares stays held.
                            usable -= pools[g].count_shared(tables[g][done:skip])
                        if want > usable and short is None:
                            # A caller's mistake in a later group is reported first: it is
                            # not transient, a shortfall is.
                            short = (g, want, usable)
            plan.append((first, end, skip, want))
        if grew and self._one_pool is not None:
            short = self._short_together(
                tables, skipped, [s for _, _, s, _ in plan], [w for *_, w in plan]
            )
        if short is not None:
            raise self._short(request_id, *short)
        # Phase 2: evict, allocate, map; nothing here fails when the checks above hold. Each
        # change to a pool and a table is journaled right after it is made (most steps make
        # none), so that an exception escaping anyway is undone before it propagates.
        journal: list[tuple[Any, ...]] = []
        step_rows = req.step_rows
        last_steps = step_rows[:]
        has_rows, block_size = self._has_rows, self._block_size
        updated = 0
        try:
            if grew and self._one_pool is not None:
                # One pool: every group's evictions go back before any group allocates,
                # as the check above counted them (vLLM's remove_skipped_blocks first).
                for g, (_, _, skip, _) in enumerate(plan):
                    done = skipped[g]
                    if skip > done:
                        evicted = tables[g][done:skip]
                        pools[g].free(evicted)
                        journal.append((g, done, evicted, None, 0))
                        tables[g][done:skip] = [NULL_BLOCK] * (skip - done)
                        skipped[g] = skip
            out: list[list[int]] = []
            for g, q in enumerate(num_new):
                first, end, skip, want = plan[g]
                table, done = tables[g], skipped[g]
                if skip > done:
                    evicted = table[done:skip]
                    pools[g].free(evicted)
                    journal.append((g, done, evicted, None, 0))
                    table[done:skip] = [NULL_BLOCK] * (skip - done)
                    skipped[g] = skip
                if want > 0:
                    mark = pools[g].mark()
                    taken = pools[g].allocate_n(want)
                    journal.append((g, 0, None, taken, mark))
                    table.extend(taken)
                if not q or not has_rows[g]:
                    out.append([])
                elif end - first == 1:
                    size = block_size[g]
                    out.append([table[first // size] * size + first % size])
                else:
                    out.append(cache_slots(table, block_size[g], first, end))
                num_rows[g] += q
                step_rows[g] = q
                updated = g + 1
                # The bounds this step passed, set again (exact) for the next.
                if end > room[g]:
                    room[g] = min(managers[g].reach(len(table)), max_len[g])
                if first >= evict[g]:
                    evict[g] = managers[g].first_evicting(skip)
            if self._bounded:
                for g in range(len(plan)):
                    self._rebound(req, g)
            extra = req.extra
            if (extra is not None and not extra.idle) or lookahead is not None:
                self._after_step(req, lookahead)
        except BaseException:
            for g in range(updated):
                num_rows[g] -= num_new[g]
            step_rows[:] = last_steps
            self._undo(req, journal)
            # Lower is always right: the next step sets them again.
            room[:] = [-1] * len(room)
            evict[:] = [0] * len(evict)
            req.bound[:] = [-1] * len(room)
            raise
        if journal:
            for entry in journal:
                if entry[3] is not None:
                    pools[entry[0]].settle()
        return out

    def _rebound(self, req: RequestState, g: int) -> None:
        """Set ``req``'s ``bound`` and ``base`` in group ``g`` for its next step, from its
        ``room`` and ``evict`` there (see `RequestState`)."""
        table, size = req.tables[g], self._block_size[g]
        index = req.num_rows[g] // self._pool[g] // size  # the next step's first slot's block
        block = table[index] if index < len(table) else NULL_BLOCK
        if block == NULL_BLOCK:  # a block to take first: the next step is past room
            req.bound[g] = -1
            return
        req.base[g] = (block - index) * size
        req.bound[g] = min(req.room[g], req.evict[g], (index + 1) * size)

    def allocate_speculative(
        self, request_id: str, num_new: Sequence[int], lookahead: Sequence[int]
    ) -> list[list[int]]:
        """A step whose last ``lookahead[g]`` positions of ``num_new[g]`` are speculative (a
        drafter's proposals, to be verified): `allocate_step` with them marked, so that
        `rollback` can remove the rejected ones and the prefix cache waits for the rest.

        Raises:
            RequestError: a lookahead is negative or more than the step's positions, or as
                `allocate_step`.
        """
        if len(lookahead) != len(num_new):
            raise RequestError(
                f"a speculative step of request {request_id!r} gives {len(lookahead)} "
                f"lookahead counts for {len(num_new)} groups; give one per group",
                request_id=str(request_id),
            )
        for g, (k, q) in enumerate(zip(lookahead, num_new, strict=True)):
            if not 0 <= k <= q:
                raise RequestError(
                    f"a speculative step of request {request_id!r} in group "
                    f"{self.names[g]!r} marks {k} of its {q} positions as lookahead; the "
                    "lookahead positions are the step's last ones (0 .. the step's positions)",
                    request_id=str(request_id),
                    group=self.names[g],
                )
        return self.allocate_step(request_id, num_new, lookahead)

    def extend_content(self, request_id: str, g: int, keys: Sequence[int]) -> None:
        """Append content to an admitted request's content in group ``g`` (the tokens it
        generated, the audio that arrived): its full blocks get hashes, and those its steps
        have committed enter the prefix cache, as vLLM hashes a request's tokens as they are
        appended.

        Raises:
            RequestError: unknown request, or one admitted without content in group ``g``.
            ConcurrentUseError: another call is in progress (nothing changes).
        """
        self.enter("extend_content")
        try:
            req = self.requests.get(request_id) if type(request_id) is str else None
            if req is None:
                raise self._unknown(request_id)
            extra, cache = req.extra, self.caches[g]
            hashes = None if extra is None else extra.hashes[g]
            if extra is None or hashes is None or cache is None:
                raise RequestError(
                    f"request {request_id!r} was admitted without content in group "
                    f"{self.names[g]!r}: admit it with admit_with_prefix to cache its blocks",
                    request_id=request_id,
                    group=self.names[g],
                )
            rows = cache.rows_per_block
            old_tail, old_parent = extra.tails[g], extra.parents[g]
            combined = old_tail + list(keys)
            new = chain_hashes(old_parent, combined, rows)
            hashes.extend(new)
            extra.tails[g] = combined[len(new) * rows :]
            if new:
                extra.parents[g] = new[-1]
            try:
                self._register(req, extra, g, extra.spec[g])
            except BaseException:
                del hashes[len(hashes) - len(new) :]
                extra.tails[g], extra.parents[g] = old_tail, old_parent
                raise
            extra.settle()
        finally:
            self.leave()

    def _register(self, req: RequestState, extra: RequestExtras, g: int, spec: int) -> None:
        """Put group ``g``'s full blocks of committed positions (all but the ``spec`` last)
        whose hashes are known into the prefix cache; all or none."""
        hashes, cache = extra.hashes[g], self.caches[g]
        assert hashes is not None and cache is not None
        full = min((req.num_rows[g] - spec) // cache.rows_per_block, len(hashes))
        start = extra.registered[g]
        if full <= start:
            return
        table, pool = req.tables[g], self.pools[g]
        done: list[int] = []
        try:
            for i in range(start, full):
                block = table[i]
                if block != NULL_BLOCK:
                    pool.register(block, cache.blocks, hashes[i])
                    done.append(block)
        except BaseException:
            for block in reversed(done):
                pool.unregister(block)
            raise
        extra.registered[g] = full

    def _short_together(
        self,
        tables: Sequence[list[int]],
        skipped: Sequence[int],
        skips: Sequence[int],
        wants: Sequence[int],
    ) -> tuple[int, int, int] | None:
        """With one pool for every group, the step's groups draw on it together: what they
        want in all against what is free and what their evictions give back (a block another
        request shares stays held)."""
        pool = self._one_pool
        assert pool is not None
        want = sum(w for w in wants if w > 0)
        usable = pool.num_free
        for table, done, skip in zip(tables, skipped, skips, strict=True):
            usable += skip - done - pool.count_shared(table[done:skip])
        if want <= usable:
            return None
        last = max(g for g, w in enumerate(wants) if w > 0)
        return last, want, usable

    def _after_step(self, req: RequestState, lookahead: Sequence[int] | None) -> None:
        """Commit what a step committed: the previous step's lookahead (accepted by taking
        this step), this step's lookahead as the new speculative tail, and the full blocks of
        committed positions into the prefix cache. Undoes its own changes if it fails."""
        extra = req.extra
        if extra is None:
            extra = RequestExtras(len(self.names))
        spec = list(lookahead) if lookahead is not None else [0] * len(self.names)
        registered = list(extra.registered)
        try:
            for g, hashes in enumerate(extra.hashes):
                if hashes is not None:
                    self._register(req, extra, g, spec[g])
        except BaseException:
            for g, start in enumerate(registered):
                pool, table = self.pools[g], req.tables[g]
                for i in range(start, extra.registered[g]):
                    if table[i] != NULL_BLOCK:
                        pool.unregister(table[i])
            extra.registered = registered
            raise
        extra.spec = spec
        extra.settle()
        req.extra = extra

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
        self.enter("free")
        try:
            self.release(request_id)
        finally:
            self.leave()

    def release(self, request_id: str) -> Released:
        """`free` with the core already taken (a preemption inside another call): returns
        what `restore` needs to take it back, if that call fails later.

        Raises:
            RequestError: the request is not admitted (nothing changes).
        """
        req = self.requests.pop(request_id, None) if type(request_id) is str else None
        if req is None:
            raise self._unknown(request_id)
        freed: list[tuple[BlockPool, list[int]]] = []
        extra = req.extra
        # A request that cached its prefix frees it tail first, as vLLM does: among blocks
        # freed together, the chain's head (the most shared) is evicted last.
        cached = extra is not None and any(h is not None for h in extra.hashes)
        unshared = self._unshared(req) if extra is not None else None
        try:
            for g, table in enumerate(req.tables):
                live = table[req.skipped[g] :]
                if cached:
                    live.reverse()
                self.pools[g].free(live)
                freed.append((self.pools[g], live))
            self.ledger.give_back(req.caps, unshared)
        except BaseException:
            for pool, live in reversed(freed):
                pool.undo_free(live)
            self.requests[request_id] = req
            raise
        return Released(request_id, req, freed, unshared)

    def restore(self, released: Released) -> None:
        """Undo a `release`, the last change to the pools since (several: newest first).

        The request is admitted again in its old place of the admission order only if no
        request was admitted since: the callers undo releases inside one call."""
        for pool, live in reversed(released.freed):
            pool.undo_free(live)
        self.ledger.shared_back(released.request.caps, released.unshared)
        self.requests[released.request_id] = released.request

    def _unshared(self, req: RequestState) -> list[int] | None:
        """Per group, the shared blocks of ``req`` that its free leaves with one holder less,
        where the ledger counts them (groups that keep their blocks); None if none."""
        shared = self.ledger.shared
        if not any(shared):
            return None
        out = [0] * len(self.names)
        for g, table in enumerate(req.tables):
            if shared[g] and self._keeps[g]:
                ref = self.pools[g].ref_count
                out[g] = sum(1 for b in table[req.skipped[g] :] if ref(b) > 1)
        return out

    def rollback(self, request_id: str, rejected: Sequence[int]) -> None:
        """Remove the rejected speculative positions of the latest step, per group (kernel
        unit): the length goes back, and the blocks only they used go back to the pool.

        Eviction stays right: the next step starts at or after where the rolled-back step
        started, so the window's first needed slot never moves back, and every block the
        next step's queries read is still held.

        Raises:
            RequestError: unknown request, or more rejected positions than the latest step
                left speculative in a group (nothing changes).
            ConcurrentUseError: another call is in progress (nothing changes).
        """
        self.enter("rollback")
        try:
            req = self.requests.get(request_id) if type(request_id) is str else None
            if req is None:
                raise self._unknown(request_id)
            if len(rejected) != len(self.names):
                raise self._arity(request_id, len(rejected))
            extra = req.extra
            spec = extra.spec if extra is not None else [0] * len(self.names)
            for g, r in enumerate(rejected):
                if not 0 <= r <= spec[g]:
                    raise RequestError(
                        f"request {request_id!r} rolls back {r} positions in group "
                        f"{self.names[g]!r}, but its latest step left {spec[g]} speculative "
                        "there (allocate_speculative's lookahead, less what was rolled back); "
                        "only those can be rolled back",
                        request_id=request_id,
                        group=self.names[g],
                    )
            if extra is None or not any(rejected):
                return
            freed: list[tuple[int, list[int]]] = []
            try:
                for g, r in enumerate(rejected):
                    if not r:
                        continue
                    rows = req.num_rows[g] - r
                    slots = -(-rows // self._pool[g])
                    table = req.tables[g]
                    keep = self._managers[g].table_length(slots)
                    tail = table[keep:]
                    assert NULL_BLOCK not in tail, (table, keep)
                    self.pools[g].free(tail)
                    freed.append((g, tail))
                    del table[keep:]
                    # The table is shorter: the next step sets these again.
                    req.room[g] = req.bound[g] = -1
                    req.num_rows[g] = rows
                    req.step_rows[g] -= r
                    spec[g] -= r
            except BaseException:
                for g, tail in reversed(freed):
                    self.pools[g].undo_free(tail)
                    req.tables[g].extend(tail)
                    r = rejected[g]
                    req.num_rows[g] += r
                    req.step_rows[g] += r
                    spec[g] += r
                raise
        finally:
            self.leave()

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
        where = f"in group {name!r}"
        if self._one_pool is not None:
            where = f"from the pool all groups share (group {name!r} among them)"
        return AllocationError(
            f"step of request {request_id!r} needs {want} new cache_block {where} "
            f"but only {usable} are free (evictions of this step included), "
            f"{want - usable} short; nothing was allocated in any group: preempt a request "
            "or retry after one finishes",
            group=name,
            needed=CacheBlocks(want),
            free=CacheBlocks(usable),
            request_id=request_id,
        )


#: A core's step without lookahead: ``step(request_id, num_new) -> slot mappings``.
StepFn = Callable[[str, Sequence[int]], list[list[int]]]


def _specialises(core: CoordinatorCore) -> bool:
    """Whether `_make_step` writes a step out for ``core``'s layout: one or two groups with slot
    rows, each drawing on a pool of its own, whose steps may touch a slot (max_in_flight >= 1)."""
    return (
        len(core.names) <= 2
        and all(core._has_rows)
        and min(core._in_flight) >= 1
        and core._one_pool is None
    )


def _make_step(core: CoordinatorCore) -> StepFn:
    """The step function of ``core``'s layout, chosen once: what `CoordinatorCore.allocate_step`
    and the typed `Stepper.allocate` run for a step without lookahead.

    Most steps of a running request touch one slot per group, inside the block the previous
    step touched or the next one, and evict nothing; every ``block_size`` slots a group takes
    a block, and a sliding window drops one as often. For the layouts `_specialises` names,
    such steps are written out here, their groups unrolled, on plain locals:

    * below each group's ``bound`` (see `RequestState`; an empty step: below ``evict``), the
      step is ints: the slot mapping is ``base + first``, and it writes the request's rows
      and step;
    * past a bound, ``room`` and ``evict`` stand for the managers' answers, which are asked
      only past them; a pool is called only for the block it gives or takes, journaled as the
      general path journals it (`CoordinatorCore._undo`), and the bounds are set again.

    Every change is undone if an exception escapes anyway. Any other step (several slots in
    a group, a shortfall or a caller's mistake to report, content to cache) takes the general
    path, `CoordinatorCore._allocate`, before changing anything: the specialised step only
    ever declines, and the general path decides.
    """
    take, give, requests, general = core._take, core._give, core.requests, core._allocate
    undo, rebound = core._undo, core._rebound
    n = len(core.names)

    def step_any(request_id: str, num_new: Sequence[int]) -> list[list[int]]:
        try:
            take()
        except IndexError:
            raise core._concurrent("allocate") from None
        try:
            req = requests.get(request_id) if type(request_id) is str else None
            if req is None:
                raise core._unknown(request_id)
            if len(num_new) != n:
                raise core._arity(request_id, len(num_new))
            return general(request_id, req, num_new, None)
        finally:
            give(True)

    if not _specialises(core):
        return step_any
    if n == 1:
        ((p0,), (b0,)) = core._pool, core._block_size
        ((m0,), (pool0,)) = core._managers, core.pools

        def grow_1(
            request_id: str, req: RequestState, num_new: Sequence[int], q0: int, c0: int, f0: int
        ) -> list[list[int]]:
            # step_1 past a bound: one slot (or none) that may need the pool.
            room, evict, max_len, skipped = req.room, req.evict, req.max_len, req.skipped
            t0 = req.tables[0]
            e0 = f0 + 1 if q0 else -(-c0 // p0)
            if e0 > max_len[0]:
                return general(request_id, req, num_new, None)
            k0 = d0 = skipped[0]
            w0 = 0
            if f0 >= evict[0]:
                k0 = max(m0.skipped_blocks(f0), d0)
            if e0 > room[0]:
                w0 = m0.table_length(e0) - len(t0)
                if w0 > 0 and w0 > pool0.num_free + k0 - d0 - (
                    pool0.count_shared(t0[d0:k0]) if k0 > d0 else 0
                ):
                    return general(request_id, req, num_new, None)  # it reports the shortfall
            journal: list[tuple[Any, ...]] = []
            step = req.step_rows
            s0 = step[0]
            try:
                if k0 > d0:
                    evicted = t0[d0:k0]
                    pool0.free(evicted)
                    journal.append((0, d0, evicted, None, 0))
                    t0[d0:k0] = [NULL_BLOCK] * (k0 - d0)
                    skipped[0] = k0
                if w0 > 0:
                    mark = pool0.mark()
                    taken = pool0.allocate_n(w0)
                    journal.append((0, 0, None, taken, mark))
                    t0.extend(taken)
                if e0 > room[0]:
                    room[0] = min(m0.reach(len(t0)), max_len[0])
                if f0 >= evict[0]:
                    evict[0] = m0.first_evicting(k0)
                out = [[t0[f0 // b0] * b0 + f0 % b0] if q0 else []]
                req.num_rows[0], step[0] = c0 + q0, q0
                rebound(req, 0)
            except BaseException:
                req.num_rows[0], step[0] = c0, s0
                undo(req, journal)
                room[0], evict[0], req.bound[0] = -1, 0, -1
                raise
            if w0 > 0:
                pool0.settle()
            return out

        def step_1(request_id: str, num_new: Sequence[int]) -> list[list[int]]:
            try:
                take()
            except IndexError:
                raise core._concurrent("allocate") from None
            try:
                req = requests.get(request_id) if type(request_id) is str else None
                if req is None:
                    raise core._unknown(request_id)
                try:
                    (q0,) = num_new
                except ValueError:
                    raise core._arity(request_id, len(num_new)) from None
                rows, extra = req.num_rows, req.extra
                c0 = rows[0]
                # The step's first slot; it touches that one, or none past those held (an
                # empty step). Any other step is general.
                f0 = c0 // p0
                if c0 + q0 > (f0 + 1) * p0 or q0 < 0 or (extra is not None and not extra.idle):
                    return general(request_id, req, num_new, None)
                # An empty step holds no new slot: only an eviction needs more than ints.
                if f0 >= (req.bound[0] if q0 else req.evict[0]):
                    return grow_1(request_id, req, num_new, q0, c0, f0)
                out = [[req.base[0] + f0] if q0 else []]
                step = req.step_rows
                s0 = step[0]
                try:
                    rows[0], step[0] = c0 + q0, q0
                except BaseException:
                    rows[0], step[0] = c0, s0
                    raise
                return out
            finally:
                give(True)

        return step_1
    (p0, p1), (b0, b1) = core._pool, core._block_size
    (m0, m1), (pool0, pool1) = core._managers, core.pools

    def grow_2(
        request_id: str,
        req: RequestState,
        num_new: Sequence[int],
        q0: int,
        q1: int,
        c0: int,
        c1: int,
        f0: int,
        f1: int,
    ) -> list[list[int]]:
        # grow_1, for two groups: both checked before either changes.
        room, evict, max_len, skipped = req.room, req.evict, req.max_len, req.skipped
        t0, t1 = req.tables
        e0 = f0 + 1 if q0 else -(-c0 // p0)
        e1 = f1 + 1 if q1 else -(-c1 // p1)
        if e0 > max_len[0] or e1 > max_len[1]:
            return general(request_id, req, num_new, None)
        k0 = d0 = skipped[0]
        k1 = d1 = skipped[1]
        w0 = w1 = 0
        if f0 >= evict[0]:
            k0 = max(m0.skipped_blocks(f0), d0)
        if f1 >= evict[1]:
            k1 = max(m1.skipped_blocks(f1), d1)
        if e0 > room[0]:
            w0 = m0.table_length(e0) - len(t0)
            if w0 > 0 and w0 > pool0.num_free + k0 - d0 - (
                pool0.count_shared(t0[d0:k0]) if k0 > d0 else 0
            ):
                return general(request_id, req, num_new, None)
        if e1 > room[1]:
            w1 = m1.table_length(e1) - len(t1)
            if w1 > 0 and w1 > pool1.num_free + k1 - d1 - (
                pool1.count_shared(t1[d1:k1]) if k1 > d1 else 0
            ):
                return general(request_id, req, num_new, None)
        journal: list[tuple[Any, ...]] = []
        rows, step = req.num_rows, req.step_rows
        s0, s1 = step
        try:
            if k0 > d0:
                evicted = t0[d0:k0]
                pool0.free(evicted)
                journal.append((0, d0, evicted, None, 0))
                t0[d0:k0] = [NULL_BLOCK] * (k0 - d0)
                skipped[0] = k0
            if w0 > 0:
                mark = pool0.mark()
                taken = pool0.allocate_n(w0)
                journal.append((0, 0, None, taken, mark))
                t0.extend(taken)
            if k1 > d1:
                evicted = t1[d1:k1]
                pool1.free(evicted)
                journal.append((1, d1, evicted, None, 0))
                t1[d1:k1] = [NULL_BLOCK] * (k1 - d1)
                skipped[1] = k1
            if w1 > 0:
                mark = pool1.mark()
                taken = pool1.allocate_n(w1)
                journal.append((1, 0, None, taken, mark))
                t1.extend(taken)
            if e0 > room[0]:
                room[0] = min(m0.reach(len(t0)), max_len[0])
            if e1 > room[1]:
                room[1] = min(m1.reach(len(t1)), max_len[1])
            if f0 >= evict[0]:
                evict[0] = m0.first_evicting(k0)
            if f1 >= evict[1]:
                evict[1] = m1.first_evicting(k1)
            out = [
                [t0[f0 // b0] * b0 + f0 % b0] if q0 else [],
                [t1[f1 // b1] * b1 + f1 % b1] if q1 else [],
            ]
            rows[0], step[0] = c0 + q0, q0
            rows[1], step[1] = c1 + q1, q1
            rebound(req, 0)
            rebound(req, 1)
        except BaseException:
            rows[0], step[0] = c0, s0
            rows[1], step[1] = c1, s1
            undo(req, journal)
            room[0] = room[1] = req.bound[0] = req.bound[1] = -1
            evict[0] = evict[1] = 0
            raise
        if w0 > 0:
            pool0.settle()
        if w1 > 0:
            pool1.settle()
        return out

    def step_2(request_id: str, num_new: Sequence[int]) -> list[list[int]]:
        # step_1, for two groups.
        try:
            take()
        except IndexError:
            raise core._concurrent("allocate") from None
        try:
            req = requests.get(request_id) if type(request_id) is str else None
            if req is None:
                raise core._unknown(request_id)
            try:
                q0, q1 = num_new
            except ValueError:
                raise core._arity(request_id, len(num_new)) from None
            rows, extra = req.num_rows, req.extra
            c0, c1 = rows
            f0 = c0 // p0
            f1 = c1 // p1
            if (
                c0 + q0 > (f0 + 1) * p0
                or c1 + q1 > (f1 + 1) * p1
                or (q0 | q1) < 0
                or (extra is not None and not extra.idle)
            ):
                return general(request_id, req, num_new, None)
            bound, evict = req.bound, req.evict
            if f0 >= (bound[0] if q0 else evict[0]) or f1 >= (bound[1] if q1 else evict[1]):
                return grow_2(request_id, req, num_new, q0, q1, c0, c1, f0, f1)
            base = req.base
            out = [[base[0] + f0] if q0 else [], [base[1] + f1] if q1 else []]
            step = req.step_rows
            s0, s1 = step
            try:
                rows[0], step[0] = c0 + q0, q0
                rows[1], step[1] = c1 + q1, q1
            except BaseException:
                rows[0], step[0] = c0, s0
                rows[1], step[1] = c1, s1
                raise
            return out
        finally:
            give(True)

    return step_2
