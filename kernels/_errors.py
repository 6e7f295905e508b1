"""Errors the kernel wrappers raise beyond the contracts' unit errors.

`ResidencyError` is the leaf of the kvunits tree (`contracts.KvUnitsError`) for a kernel that
would read a key whose cache block is not resident: the block-table entry is the null block,
or the block lies beyond the table. It also inherits `LookupError` (a key looked up where it
is not), carries typed fields and pickles.
"""

from __future__ import annotations

from typing import Any

from contracts import EncoderTokens, KvUnitsError, Tokens


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
