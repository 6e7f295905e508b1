"""Admission control: a request's admission cap per group, and the reservation ledger.

The cap is `contracts.internal.admission_cap`: the formula of
`contracts.ManagerSpec.max_admission_blocks_per_request`, with which the capacity plan
(`runtime.capacity.plan`) sizes the pools, so the two cannot drift. Here it runs on plain ints
(slots in the group's unit in, cache blocks out): no quantity is built on the admission path.

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
`AdmissionError` instead of waiting in a queue for ever.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contracts import CacheBlocks, ManagerSpec
from contracts.errors import AdmissionError, AllocationError
from contracts.internal import admission_cap


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

    Attributes:
        reserved: cache blocks reserved per group (all 0 without reservation).
    """

    __slots__ = ("_in_flight", "_limit", "_names", "_reserve", "_specs", "_usable", "reserved")

    def __init__(
        self,
        names: Sequence[str],
        specs: Sequence[ManagerSpec[Any]],
        usable_blocks: Sequence[int],
        max_in_flight_slots: Sequence[int],
        max_len_slots: Sequence[int],
        *,
        reserve: bool,
    ) -> None:
        self._names = tuple(names)
        self._specs = tuple(specs)
        self._usable = tuple(usable_blocks)
        self._in_flight = tuple(max_in_flight_slots)
        self._limit = tuple(max_len_slots)
        self._reserve = reserve
        self.reserved = [0] * len(self._names)

    def caps(self, request_id: str, max_len_slots: Sequence[int]) -> list[int]:
        """The request's cap in every group, in cache blocks.

        Args:
            request_id: the request (for messages).
            max_len_slots: per group, the request's declared longest sequence (its unit).

        Raises:
            AdmissionError: a declared length exceeds the group's limit, or a cap exceeds
                the group's usable blocks: the request can never run.
        """
        caps = []
        for g, name in enumerate(self._names):
            spec, length, limit = self._specs[g], max_len_slots[g], self._limit[g]
            unit, usable, in_flight = spec.slot_unit.unit, self._usable[g], self._in_flight[g]
            cap = admission_cap(spec, in_flight, length)
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
                caps.append(cap)
                continue
            raise AdmissionError(
                f"request {request_id!r} {reason}",
                request_id=request_id,
                group=name,
                cap=CacheBlocks(cap),
                usable=CacheBlocks(usable),
            )
        return caps

    def take(self, request_id: str, caps: Sequence[int]) -> None:
        """Reserve ``caps`` (cache blocks per group) when reserving: all groups or none.

        Raises:
            AllocationError: some group has less than the cap unreserved, now.
        """
        if not self._reserve:
            return
        reserved, usable = self.reserved, self._usable
        for g, cap in enumerate(caps):
            left = usable[g] - reserved[g]
            if cap > left:
                raise AllocationError(
                    f"cannot admit request {request_id!r} now: group {self._names[g]!r} has "
                    f"{left} of {usable[g]} cache_block unreserved and the request's cap is "
                    f"{cap}; admit it when a running request finishes",
                    group=self._names[g],
                    needed=CacheBlocks(cap),
                    free=CacheBlocks(left),
                    request_id=request_id,
                )
        for g, cap in enumerate(caps):
            reserved[g] += cap

    def give_back(self, caps: Sequence[int]) -> None:
        """Release a finished request's reservation (``caps``, what `take` reserved)."""
        if self._reserve:
            for g, cap in enumerate(caps):
                self.reserved[g] -= cap
