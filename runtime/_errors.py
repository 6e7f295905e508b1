"""The runtime's errors, under `contracts.KvUnitsError`.

::

    KvUnitsError
    ├── AllocationError (RuntimeError)  not enough free cache blocks *now*: retry later, preempt
    ├── AdmissionError (ValueError)     the request can *never* fit: refuse it, do not queue it
    └── RequestError (ValueError)       the caller broke the protocol: unknown or duplicate
                                        request id, a step beyond the declared length or budget

Wrong units and bare ints are `contracts.UnitTypeError`, as everywhere in kvunits. Every error
carries typed fields and pickles (``__reduce__``), so it crosses a process boundary intact.
"""

from __future__ import annotations

from typing import Any

from contracts import CacheBlocks, KvUnitsError


class AllocationError(KvUnitsError, RuntimeError):
    """A group has fewer free cache blocks than a step or an admission needs, right now.

    Nothing was changed: a failed step or admission leaves every pool, table and length as it
    was. The condition is transient (blocks come back when requests finish).

    Args:
        message: the full message (what, the numbers, what to do).
        group: the name of the first group that fell short.
        needed: cache blocks the operation needs in that group.
        free: cache blocks it could have used there (free, plus what the step evicts, or
            not yet reserved for admission).
        request_id: the request concerned.

    Example:
        >>> err = AllocationError("short", group="audio", needed=CacheBlocks(3),
        ...                       free=CacheBlocks(1), request_id="r1")
        >>> str(err.shortfall)
        '2 cache_block'
    """

    def __init__(
        self,
        message: str,
        *,
        group: str,
        needed: CacheBlocks,
        free: CacheBlocks,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.group = group
        self.needed = needed
        self.free = free
        self.request_id = request_id

    @property
    def shortfall(self) -> CacheBlocks:
        """How many cache blocks the group lacked."""
        return self.needed - self.free

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_allocation,
            (type(self), self.message, self.group, self.needed, self.free, self.request_id),
        )

    def __str__(self) -> str:
        return self.message


def _rebuild_allocation(
    cls: type[AllocationError],
    message: str,
    group: str,
    needed: CacheBlocks,
    free: CacheBlocks,
    request_id: str | None,
) -> AllocationError:
    return cls(message, group=group, needed=needed, free=free, request_id=request_id)


class AdmissionError(KvUnitsError, ValueError):
    """A request can never be served: its admission cap exceeds what a group can ever give,
    or it declares a length beyond the group's limit. Refuse it; queueing it would wait
    forever.

    Args:
        message: the full message.
        request_id: the refused request.
        group: the group that refuses it.
        cap: cache blocks the request can hold at once in that group (its admission cap).
        usable: cache blocks the group has for requests (its pool less the null block).
    """

    def __init__(
        self,
        message: str,
        *,
        request_id: str,
        group: str,
        cap: CacheBlocks,
        usable: CacheBlocks,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.request_id = request_id
        self.group = group
        self.cap = cap
        self.usable = usable

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_admission,
            (type(self), self.message, self.request_id, self.group, self.cap, self.usable),
        )

    def __str__(self) -> str:
        return self.message


def _rebuild_admission(
    cls: type[AdmissionError],
    message: str,
    request_id: str,
    group: str,
    cap: CacheBlocks,
    usable: CacheBlocks,
) -> AdmissionError:
    return cls(message, request_id=request_id, group=group, cap=cap, usable=usable)


class RequestError(KvUnitsError, ValueError):
    """The caller broke the allocator's protocol for one request.

    Args:
        message: the full message.
        request_id: the request concerned.
        group: the group concerned, when there is one.
    """

    def __init__(self, message: str, *, request_id: str, group: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.request_id = request_id
        self.group = group

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_request, (type(self), self.message, self.request_id, self.group))

    def __str__(self) -> str:
        return self.message


def _rebuild_request(
    cls: type[RequestError], message: str, request_id: str, group: str | None
) -> RequestError:
    return cls(message, request_id=request_id, group=group)
