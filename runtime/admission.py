"""Admission control: a request's admission cap per group, and the reservation ledger.

The cap is `kvunits.contracts.internal.admission_cap`: the formula of
`kvunits.contracts.ManagerSpec.max_admission_blocks_per_request`, with which the capacity plan
(`kvunits.runtime.capacity.plan`) sizes the pools, so the two cannot drift. Here it runs on plain
ints (slots in the group's unit in, cache blocks out): no quantity is built on the admission path.

Policy (``reserve=True``, the default): admitting a request reserves its cap in every group,
and a request is admitted only if every group has its cap unreserved. The cap bounds the
blocks a request ever holds at once as long as its steps stay within the group's
``max_in_flight`` and its declared ``max_len`` (the coordinator enforces both), so an admitted
request's steps never fail for lack of blocks, and a plan that admits ``concurrent_requests``
full-length requests admits every one of them at run time.

With ``reserve=False`` (vLLM's optimistic policy) nothing is reserved: more requests run at
once, and a step may fail with `AllocationError`, after which the scheduler preempts.

Either way, a request whose cap exceeds a group's usable blocks (the pool less the null block),
or that declares a length beyond the group's limit, can never run: it is refused up front with
`AdmissionError` instead of waiting in a queue for ever. This is `PoolBlocks.fits(cap)` (and
the reservation check `CacheBlocks.covers(cap)`) on plain ints: the typed forms name the
comparison for callers, the ledger compares the ints their entry checked once.

Groups that share one pool reserve from it together: a request's caps summed over them must fit
what the pool has unreserved.

With prefix caching, a block two requests hold is reserved once (`shared`). That is exact only
where no holder drops a block before it ends (full attention; a window or chunk longer than
the group's limit): there a request's future blocks are at most its cap less what it holds,
so requests need ``Σ caps − Σ (references − 1)`` blocks in all. A sliding window drops a
shared block one holder at a time, after which each holder may need its whole cap of its own
blocks while the other still holds the shared one: such groups reserve every cap whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import setitem
from typing import Any

from kvunits.contracts import AdmissionCap, CacheBlocks, ManagerSpec
from kvunits.contracts.errors import AdmissionError, AllocationError
from kvunits.contracts.internal import admission_cap


class AdmissionLedger:
    """The blocks reserved per group, and the up-front refusal of requests that never fit.

    Plain ints inside; one instance per coordinator; not thread-safe (one scheduler thread).

    Args:
        names: the groups' names.
        specs: the groups' manager specs.
        usable_blocks: cache blocks per group that requests can hold (the pool less the null
            block).
        max_in_flight_slots: per group, the most slots one step adds (the group's unit).
        max_len_slots: per group, the longest sequence the engine serves (the group's unit).
        reserve: reserve each admitted request's cap (see the module docstring).

        pools: per group, the index of its pool (groups of one index share a pool, whose
            usable blocks are each one's ``usable_blocks``); default: a pool per group.

    Attributes:
        reserved: cache blocks reserved per group: the caps of its admitted requests (all 0
            without reservation).
        shared: per group, the references beyond the first to blocks requests share, in
            groups where each is reserved once (see the module docstring); the reservation
            in effect is ``reserved − shared``.
    """

    __slots__ = (
        "_in_flight",
        "_limit",
        "_names",
        "_pools",
        "_reserve",
        "_specs",
        "_usable",
        "reserved",
        "shared",
    )

    def __init__(
        self,
        names: Sequence[str],
        specs: Sequence[ManagerSpec[Any]],
        usable_blocks: Sequence[int],
        max_in_flight_slots: Sequence[int],
        max_len_slots: Sequence[int],
        *,
        reserve: bool,
        pools: Sequence[int] | None = None,
    ) -> None:
        self._names = tuple(names)
        self._specs = tuple(specs)
        self._usable = tuple(usable_blocks)
        self._in_flight = tuple(max_in_flight_slots)
        self._limit = tuple(max_len_slots)
        self._reserve = reserve
        self._pools = tuple(range(len(self._names)) if pools is None else pools)
        self.reserved = [0] * len(self._names)
        self.shared = [0] * len(self._names)

    def caps(self, request_id: str, max_len_slots: Sequence[int]) -> list[int]:
        """The request's cap in every group, in cache blocks.

        Args:
            request_id: the request (for messages).
            max_len_slots: per group, the request's declared longest sequence (its unit).

        Raises:
            AdmissionError: a declared length exceeds the group's limit, or a cap exceeds
                the group's usable blocks: the request can never run.
        """
        caps = self.caps_of(max_len_slots)
        for g, name in enumerate(self._names):
            spec, length, limit, cap = self._specs[g], max_len_slots[g], self._limit[g], caps[g]
            unit, usable, in_flight = spec.slot_unit.unit, self._usable[g], self._in_flight[g]
            if length > limit:
                reason = (
                    f"declares max_len {length} {unit} in group {name!r}, beyond the group's "
                    f"limit of {limit} {unit}; refuse it or raise the limit (and re-plan the "
                    "cache)"
                )
            elif cap > usable:
                reason = (
                    f"can never fit: in group {name!r} it can hold {cap} cache_block at once "
                    f"({spec.kind}, max_len {length} {unit}, max_in_flight {in_flight} {unit}) "
                    f"but the group has only {usable} cache_block for requests; refuse it, or "
                    "give the cache more memory"
                )
            else:
                continue
            raise AdmissionError(
                f"request {request_id!r} {reason}",
                request_id=request_id,
                group=name,
                cap=AdmissionCap(cap),
                usable=CacheBlocks(usable),
            )
        for members in self._members().values():
            total = sum(caps[g] for g in members)
            usable = self._usable[members[0]]
            if len(members) > 1 and total > usable:
                names = ", ".join(self._names[g] for g in members)
                raise AdmissionError(
                    f"request {request_id!r} can never fit: it can hold {total} cache_block "
                    f"at once in groups {names} ("
                    + " + ".join(str(caps[g]) for g in members)
                    + f"), which share a pool of only {usable} cache_block for requests; "
                    "refuse it, or give the cache more memory",
                    request_id=request_id,
                    group=self._names[members[0]],
                    cap=AdmissionCap(total),
                    usable=CacheBlocks(usable),
                )
        return caps

    def caps_of(self, max_len_slots: Sequence[int]) -> list[int]:
        """The caps (cache blocks per group) of a request declaring ``max_len_slots``, unchecked:
        what `caps` returns for an admitted request, so the core stores the lengths alone and
        derives the caps it gives back at the end."""
        specs, in_flight = self._specs, self._in_flight
        return [admission_cap(specs[g], in_flight[g], n) for g, n in enumerate(max_len_slots)]

    def in_effect(self, g: int) -> int:
        """The blocks group ``g`` has reserved now: its caps, a shared block once."""
        return self.reserved[g] - self.shared[g] if self._reserve else 0

    def _members(self) -> dict[int, list[int]]:
        """The groups of each pool, by pool index."""
        members: dict[int, list[int]] = {}
        for g, pool in enumerate(self._pools):
            members.setdefault(pool, []).append(g)
        return members

    def take(
        self, request_id: str, caps: Sequence[int], shares: Sequence[int] | None = None
    ) -> None:
        """Reserve ``caps`` (cache blocks per group) when reserving: all groups or none.

        Args:
            request_id: the request (for messages).
            caps: its cap per group.
            shares: per group, the blocks it will share with requests that hold them already
                (counted in ``shared``, so reserved once); None: none.

        Raises:
            AllocationError: some pool has less than the caps unreserved, now.
        """
        reserved, shared = self.plan_take(request_id, caps, shares)
        self.reserved[:], self.shared[:] = reserved, shared

    def plan_take(
        self, request_id: str, caps: Sequence[int], shares: Sequence[int] | None = None
    ) -> tuple[list[int], list[int]]:
        """What `take` would leave in ``reserved`` and ``shared``, changing nothing.

        Raises:
            AllocationError: as `take`.
        """
        shared = list(self.shared)
        if shares is not None:
            for g, n in enumerate(shares):
                shared[g] += n
        reserved = list(self.reserved)
        if not self._reserve:
            return reserved, shared
        usable, pools = self._usable, self._pools
        if len(set(pools)) == len(pools):
            for g, cap in enumerate(caps):
                left = usable[g] - reserved[g] + shared[g]
                if cap > left:
                    raise self._not_now(request_id, g, cap, left, usable[g])
        else:
            for members in self._members().values():
                left = usable[members[0]] - sum(reserved[g] - shared[g] for g in members)
                cap = sum(caps[g] for g in members)
                if cap > left:
                    raise self._not_now(request_id, members[0], cap, left, usable[members[0]])
        for g, cap in enumerate(caps):
            reserved[g] += cap
        return reserved, shared

    def take_ops(
        self,
        ops: list[tuple[Any, ...]],
        request_id: str,
        caps: Sequence[int],
        shares: Sequence[int] | None = None,
    ) -> None:
        """Add to ``ops`` (a call's planned operations, `kvunits.runtime._guard`) what `take`
        would do; raise as it does, having added nothing."""
        reserved, shared = self.plan_take(request_id, caps, shares)
        if reserved != self.reserved:
            ops.append((setitem, self.reserved, slice(None), reserved))
        if shared != self.shared:
            ops.append((setitem, self.shared, slice(None), shared))

    def give_back(self, caps: Sequence[int], unshared: Sequence[int] | None = None) -> None:
        """Release a finished request's reservation (``caps``, what `take` reserved), and the
        shares its blocks leave (``unshared``: per group, its blocks others also held)."""
        ops: list[tuple[Any, ...]] = []
        self.give_back_ops(ops, caps, unshared)
        for _, target, where, value in ops:
            target[where] = value

    def give_back_ops(
        self,
        ops: list[tuple[Any, ...]],
        caps: Sequence[int],
        unshared: Sequence[int] | None = None,
    ) -> None:
        """Add to ``ops`` what `give_back` would do."""
        if unshared is not None and any(unshared):
            shared = [s - n for s, n in zip(self.shared, unshared, strict=True)]
            ops.append((setitem, self.shared, slice(None), shared))
        if self._reserve and any(caps):
            reserved = [r - cap for r, cap in zip(self.reserved, caps, strict=True)]
            ops.append((setitem, self.reserved, slice(None), reserved))

    def shared_back(self, caps: Sequence[int], unshared: Sequence[int] | None = None) -> None:
        """Undo a `give_back` of the same arguments (a release undone)."""
        if unshared is not None:
            for g, n in enumerate(unshared):
                self.shared[g] += n
        if self._reserve:
            for g, cap in enumerate(caps):
                self.reserved[g] += cap

    def _not_now(
        self, request_id: str, g: int, cap: int, left: int, usable: int
    ) -> AllocationError:
        name = self._names[g]
        members = [h for h, p in enumerate(self._pools) if p == self._pools[g]]
        where = (
            f"group {name!r} has"
            if len(members) == 1
            else "the pool of groups " + ", ".join(self._names[h] for h in members) + " has"
        )
        return AllocationError(
            f"cannot admit request {request_id!r} now: {where} {left} of {usable} cache_block "
            f"unreserved and the request's cap is {cap}; admit it when a running request "
            "finishes",
            group=name,
            needed=CacheBlocks(cap),
            free=CacheBlocks(left),
            request_id=request_id,
        )
