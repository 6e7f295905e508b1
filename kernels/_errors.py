"""Errors the kernel wrappers raise beyond the contracts' unit and spec errors.

Every one of them derives from `contracts.KvUnitsError`, so a service can ``except
KvUnitsError`` around a step; each leaf also inherits the builtin it resembles, so ``except
ValueError`` / ``except TypeError`` in caller code keeps working::

    KvUnitsError
    ├── KernelArgumentError              a tensor argument the kernels cannot take
    │   ├── KernelTypeError (TypeError)    not a tensor, or the wrong dtype
    │   └── KernelValueError (ValueError)  wrong shape, device, stride or value
    └── ResidencyError (LookupError)     a query needs a key whose block is not resident

(A wrong *unit* is `contracts.UnitTypeError`, a spec the kernels cannot run
`contracts.SpecError`.) Every error carries typed fields and pickles.
"""

from __future__ import annotations

from typing import Any

from contracts import EncoderTokens, KvUnitsError, Tokens


class KernelArgumentError(KvUnitsError):
    """A tensor (or metadata) argument that a kernel launcher cannot take.

    Raised as one of its two leaves; catch this class for either.

    Args:
        message: the full human message (the argument, what it got, what it needs).
        argument: the launcher argument at fault, e.g. ``"k_cache"`` or ``"slot_mapping"``.
    """

    def __init__(self, message: str, *, argument: str) -> None:
        super().__init__(message)
        self.message = message
        self.argument = argument

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_argument, (type(self), self.message, self.argument))

    def __str__(self) -> str:
        return self.message


class KernelTypeError(KernelArgumentError, TypeError):
    """Not a tensor (or not a `KernelSpec`), or a tensor of the wrong dtype."""


class KernelValueError(KernelArgumentError, ValueError):
    """A tensor of the wrong shape, device or strides, or metadata with impossible values
    (offsets that decrease, a length shorter than the step, a block id outside the cache)."""


def _rebuild_argument(
    cls: type[KernelArgumentError], message: str, argument: str
) -> KernelArgumentError:
    return cls(message, argument=argument)


class ResidencyError(KvUnitsError, LookupError):
    """A query's window needs a key whose cache block is not in the block table.

    Args:
        message: the full human message.
        request: the request's index in the batch (row of the block table).
        query_position: the position of the first query that needs the block, in the kernel's
            unit (encoder tokens for a pooled layer).
        logical_block: the block-table column that holds (or should hold) the needed keys.
        table_entry: the cache-block id found there (0: the null block), or None when the
            column lies beyond the table's width.
    """

    def __init__(
        self,
        message: str,
        *,
        request: int,
        query_position: EncoderTokens | Tokens,
        logical_block: int,
        table_entry: int | None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.request = request
        self.query_position = query_position
        self.logical_block = logical_block
        self.table_entry = table_entry

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild,
            (self.message, self.request, self.query_position, self.logical_block, self.table_entry),
        )

    def __str__(self) -> str:
        return self.message


def _rebuild(
    message: str,
    request: int,
    query_position: EncoderTokens | Tokens,
    logical_block: int,
    table_entry: int | None,
) -> ResidencyError:
    return ResidencyError(
        message,
        request=request,
        query_position=query_position,
        logical_block=logical_block,
        table_entry=table_entry,
    )
