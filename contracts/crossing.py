"""The one crossing from the cache manager's slots to the kernel's rows.

A pooled layer's manager counts *slots* of P encoder tokens (`PooledBlocks`); its kernel counts
*rows*, one per encoder token (`EncoderTokens`). An unpooled layer has P = 1 and both count
tokens. The runtime's coordinator and the kernels' launchers both cross here, with the same
formulas, so that the slots the allocator hands out are the slots the kernels write::

    position i (kernel unit)   lives in slot i // P, row i % P of that slot
    slot s (manager unit)      lives in cache block table[s // block_size], at
                               cache slot table[s // block_size] × block_size + s % block_size
    cache row of position i    cache_slot(i // P) × P + i % P

A *step* of q positions after a context of c positions (``c = seq_len − q``):

* touches the slots ``c // P .. cdiv(c + q, P) − 1`` (`touched_slots` of them, none when
  q = 0): the first may already hold the context's last positions (a step that continues a
  partial pooled block), the last may stay partial;
* holds ``cdiv(c + q, P)`` slots after it (`slots_holding`), of which
  ``cdiv(c + q, P) − cdiv(c, P)`` are new;
* is evicted from slot ``c // P`` (`slot_of`): the step's first query sits there, so a
  sliding window counts its look-back from that slot, not from ``cdiv(c, P)``.

These are plain-int formulas (and `touched_slots` also takes integer tensors), for code that
already checked its units at its typed entry: like `kvunits.contracts.internal`, not a user's API
(an int has no unit and no kind; a user's code converts with the typed functions of `contracts`).
The Triton kernels compute the same rows on the device; their tests check them against
`step_cache_rows`.

Example:
    P = 4, block size 2 slots, table [5, 7]: a step of 4 positions after 6 (rows 6-9) touches
    slots 1 (positions 6, 7: the second half of a slot written by the previous step) and 2.

    >>> touched_slots(6, 4, 4), slots_holding(10, 4)
    (2, 3)
    >>> step_cache_slots([5, 7], 2, 6, 4, 4)
    [11, 14]
    >>> step_cache_rows([5, 7], 2, 6, 4, 4)
    [46, 47, 56, 57]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar, overload

_N = TypeVar("_N")


def slots_holding(positions: int, pool: int) -> int:
    """Slots that hold ``positions`` positions: ``cdiv(n, P)``, rounds up (the plain-int form
    of `kvunits.contracts.pool_length`)."""
    return -(-positions // pool)


def slot_of(position: int, pool: int) -> int:
    """The slot holding position ``i``: ``i // P``, rounds down (the plain-int form of
    `kvunits.contracts.pool_position`)."""
    return position // pool


@overload
def touched_slots(context: int, step: int, pool: int) -> int: ...
@overload
def touched_slots(context: _N, step: _N, pool: int) -> _N: ...
def touched_slots(context: Any, step: Any, pool: int) -> Any:
    """Slots a step of ``step`` positions after ``context`` positions writes into:
    ``cdiv(c + q, P) − c // P``, and 0 for an empty step.

    Works elementwise on integer tensors too (the kernels' `slot_start_loc` sums it per
    request); the ``(q > 0)`` factor keeps an empty step at 0 even after a partial slot.
    """
    return (-(-(context + step) // pool) - context // pool) * (step > 0)


def cache_slot(table: Sequence[int], block_size: int, slot: int) -> int:
    """The cache slot of a request's slot ``s``: ``table[s // block_size] × block_size +
    s % block_size`` (manager units; what a slot mapping holds)."""
    return table[slot // block_size] * block_size + slot % block_size


def cache_slots(table: Sequence[int], block_size: int, first: int, end: int) -> list[int]:
    """The cache slots of a request's slots ``first .. end − 1``, in order (manager units)."""
    return [table[s // block_size] * block_size + s % block_size for s in range(first, end)]


def step_cache_slots(
    table: Sequence[int], block_size: int, context: int, step: int, pool: int
) -> list[int]:
    """The slot mapping of a step: the cache slot of every slot it touches, in order.

    This is what the coordinator returns for a step and what `kvunits.kernels.write_kv` takes
    (``slot_mapping``, manager units): for a pooled layer, the first entry may be the partial
    slot the step continues.
    """
    if step == 0:
        return []
    first, end = context // pool, -(-(context + step) // pool)
    return cache_slots(table, block_size, first, end)


def step_cache_rows(
    table: Sequence[int], block_size: int, context: int, step: int, pool: int
) -> list[int]:
    """The cache row of every position of a step: ``cache_slot(i // P) × P + i % P`` (kernel
    units; a pooled block of ``block_size`` slots holds ``block_size × P`` rows)."""
    return [
        cache_slot(table, block_size, i // pool) * pool + i % pool
        for i in range(context, context + step)
    ]


def first_unresident(
    table: Sequence[int],
    tokens_per_block: int,
    context: int,
    step: int,
    *,
    sliding_window: int | None = None,
    chunk: int | None = None,
) -> tuple[int, int, int] | None:
    """The first key a step's queries read that is not resident: ``(query, key, column)``.

    The residency rule of `kvunits.kernels.check_residency`, on plain ints of the kernel's unit
    (encoder tokens for a pooled layer), for code without torch (the runtime, ``kvunits
    simulate``). The queries are positions ``context .. context + step − 1``; the query at q
    reads keys ``lo(q) .. q``: ``lo(q) = max(0, q − W + 1)`` with a sliding window of W,
    ``q // chunk × chunk`` with a chunk, 0 otherwise. The key at position k lives in column
    ``k // tokens_per_block`` of ``table``, which is resident when it exists and holds a
    block id above 0 (0 is the null block an evicted entry holds, a negative id padding).

    Because ``lo`` never decreases, the keys the step reads are ``lo(context) .. context +
    step − 1`` and the first query that reads column c is ``max(context, c ×
    tokens_per_block)``.

    Returns:
        None when every key read is resident; otherwise the lowest missing column, the
        first query that reads it and the lowest key of that column this query reads.

    Example:
        The seed's manager window (188 pooled slots for W = 750, P = 4, 16 slots a block,
        so 64 encoder tokens a column) has freed column 0 when the step of pooled slot 203
        runs; its first query, encoder token 812, still reads key 812 − 749 = 63:

        >>> first_unresident([0, *range(1, 13)], 64, 812, 4, sliding_window=750)
        (812, 63, 0)
        >>> first_unresident([0, *range(1, 13)], 64, 816, 4, sliding_window=750) is None
        True
    """
    if step <= 0:
        return None

    def lowest(query: int) -> int:
        if sliding_window is not None:
            return max(0, query - sliding_window + 1)
        if chunk is not None:
            return query // chunk * chunk
        return 0

    first_col = lowest(context) // tokens_per_block
    end_col = (context + step - 1) // tokens_per_block + 1
    # The common case, everything resident, costs one C-level scan of the columns read.
    if end_col <= len(table) and min(table[first_col:end_col]) > 0:
        return None
    for col in range(first_col, end_col):
        if col >= len(table) or table[col] <= 0:
            query = max(context, col * tokens_per_block)
            return query, max(lowest(query), col * tokens_per_block), col
    return None  # pragma: no cover - the scan above found a missing column
