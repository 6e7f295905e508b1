"""From manager units to kernel units, for a pooled group: the kernel reads encoder tokens.

The manager of a pooled group counts slots of P encoder tokens (`PooledBlocks`); its cache
block holds ``block_size`` slots. The kernel sees the same cache as rows of one encoder token:
a block holds ``block_size × P`` tokens (`contracts.expand_block_size`), encoder token ``i`` of
slot ``s`` lives in row ``s × P + i``, and a sequence of S slots is ``S × P`` tokens long, or
the exact encoder length when its last pooled block is partial. Block ids do not change.

Example:
    >>> from contracts import BlockSize, PoolFactor, PooledBlocks
    >>> expand_slot_mapping([20, 21], PoolFactor(4))
    [80, 81, 82, 83, 84, 85, 86, 87]
    >>> expand_slot_mapping([20, 21], PoolFactor(4), EncoderTokens(6))
    [80, 81, 82, 83, 84, 85]
    >>> str(kernel_seq_len(PooledBlocks(22), PoolFactor(4), EncoderTokens(86)))
    '86 encoder_token'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import final

from contracts import (
    BlockSize,
    EncoderTokens,
    PooledBlocks,
    PoolFactor,
    UnitValueError,
    check_quantity,
    expand_block_size,
)


@final
@dataclass(frozen=True, slots=True)
class PooledKernelInputs:
    """What the paged attention kernel of a pooled group reads for one request.

    Attributes:
        block_table: cache-block ids, shape ``[cdiv(num_slots, block_size)]``, the null block
            (0) where evicted; block ``b`` holds encoder-token rows
            ``b × tokens_per_block .. (b + 1) × tokens_per_block − 1``.
        tokens_per_block: encoder tokens per cache block: ``block_size × P``.
        slot_mapping_tokens: the cache row of each encoder token of the latest step, shape
            ``[step encoder tokens]``: ``slot × P + i``.
        seq_len: the request's encoder tokens so far (the step's included).
        pool: P.
    """

    block_table: tuple[int, ...]
    tokens_per_block: BlockSize[EncoderTokens]
    slot_mapping_tokens: tuple[int, ...]
    seq_len: EncoderTokens
    pool: PoolFactor


def expand_slot_mapping(
    slot_mapping_slots: Sequence[int], pool: PoolFactor, num_tokens: EncoderTokens | None = None
) -> list[int]:
    """Expand pooled cache slots to encoder-token rows: ``slot × P + i`` for i in 0..P−1.

    Args:
        slot_mapping_slots: cache slots of consecutive pooled blocks (manager units).
        pool: P.
        num_tokens: the encoder tokens these slots hold, when the last one is partial
            (default: ``len × P``).

    Raises:
        UnitValueError: ``num_tokens`` does not fit the slots (not in ``((n−1)·P, n·P]``).
    """
    return _expand(slot_mapping_slots, pool, num_tokens, "num_tokens")


def kernel_seq_len(
    num_slots: PooledBlocks, pool: PoolFactor, exact: EncoderTokens | None = None
) -> EncoderTokens:
    """A pooled sequence's length in encoder tokens: ``S × P``, or ``exact`` when its last
    pooled block is partial (checked to fit ``((S−1)·P, S·P]``)."""
    slots = check_quantity(num_slots, PooledBlocks, "num_slots").value
    p = pool.tokens_per_block
    if exact is None:
        return EncoderTokens(slots * p)
    return EncoderTokens(_fit(exact, slots, p, "seq_len"))


def pooled_kernel_inputs(
    *,
    block_table: Sequence[int],
    slot_mapping_slots: Sequence[int],
    num_slots: PooledBlocks,
    block_size: BlockSize[PooledBlocks],
    pool: PoolFactor,
    step_tokens: EncoderTokens | None = None,
    seq_len: EncoderTokens | None = None,
) -> PooledKernelInputs:
    """Assemble `PooledKernelInputs` from a pooled group's manager-unit view of a request.

    When only ``step_tokens`` says the step's last pooled block is partial, the sequence
    length follows from it (the partial block is the sequence's last).

    Raises:
        UnitValueError: ``step_tokens`` or ``seq_len`` does not fit the slots.
    """
    slots = check_quantity(num_slots, PooledBlocks, "num_slots").value
    p = pool.tokens_per_block
    rows = _expand(slot_mapping_slots, pool, step_tokens, "step_tokens")
    if seq_len is None and step_tokens is not None:
        missing = len(slot_mapping_slots) * p - len(rows)
        seq_len = EncoderTokens(slots * p - missing)
    return PooledKernelInputs(
        block_table=tuple(block_table),
        tokens_per_block=expand_block_size(block_size, pool),
        slot_mapping_tokens=tuple(rows),
        seq_len=kernel_seq_len(PooledBlocks(slots), pool, seq_len),
        pool=pool,
    )


def _expand(
    slots: Sequence[int], pool: PoolFactor, num_tokens: EncoderTokens | None, field: str
) -> list[int]:
    p = pool.tokens_per_block
    rows = [s * p + i for s in slots for i in range(p)]
    if num_tokens is None:
        return rows
    return rows[: _fit(num_tokens, len(slots), p, field)]


def _fit(tokens: EncoderTokens, slots: int, p: int, field: str) -> int:
    n = check_quantity(tokens, EncoderTokens, field).value
    low = (slots - 1) * p + 1 if slots else 0
    if not low <= n <= slots * p:
        raise UnitValueError(
            f"{field} is {tokens} but {slots} pooled_block of {p} encoder_token hold "
            f"{low}..{slots * p} encoder_token (only the last pooled block can be partial)",
            field=field,
            expected=f"{low}..{slots * p} encoder_token",
            got=str(tokens),
        )
    return n
