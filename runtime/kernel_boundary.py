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
    UnitTypeError,
    UnitValueError,
    check_pool,
    check_quantity,
    describe,
    expand_block_size,
    pooled_slot_rows,
    unpool_length,
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

    Returns:
        The cache row (kernel units) of each encoder token, shape ``[num_tokens]``.

    Raises:
        UnitTypeError: ``pool`` is not a `PoolFactor`, ``num_tokens`` not `EncoderTokens`.
        UnitValueError: ``num_tokens`` does not fit the slots (not in ``((n−1)·P, n·P]``).
    """
    rows = pooled_slot_rows(slot_mapping_slots, pool)
    if num_tokens is None:
        return rows
    return rows[: _fit(num_tokens, len(slot_mapping_slots), _pool(pool), "num_tokens")]


def kernel_seq_len(
    num_slots: PooledBlocks, pool: PoolFactor, exact: EncoderTokens | None = None
) -> EncoderTokens:
    """A pooled sequence's length in encoder tokens: ``S × P``, or ``exact`` when its last
    pooled block is partial (checked to fit ``((S−1)·P, S·P]``).

    Raises:
        UnitTypeError: an argument not in its unit (``pool`` not a `PoolFactor`).
        UnitValueError: ``exact`` does not fit ``num_slots``.
    """
    if exact is None:
        return unpool_length(num_slots, pool)
    slots = check_quantity(num_slots, PooledBlocks, "num_slots").value
    return EncoderTokens(_fit(exact, slots, _pool(pool), "seq_len"))


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

    Only the sequence's last pooled block can be partial, so when the latest step added slots
    its last one is that block: ``step_tokens`` and ``seq_len`` then say the same thing, and
    either one gives the other (``seq_len = num_slots × P − (step slots × P − step_tokens)``).
    Given both, they must agree. When the step added no slots, ``seq_len`` only has to fit
    ``num_slots``.

    Args:
        block_table: the request's cache-block ids, the null block where evicted.
        slot_mapping_slots: the cache slots (manager units) of the latest step's new slots.
        num_slots: the request's pooled blocks so far, the step's included.
        block_size: pooled blocks per cache block.
        pool: P.
        step_tokens: the encoder tokens of the latest step (default: P per new slot).
        seq_len: the request's exact encoder length (default: ``num_slots × P``).

    Raises:
        UnitTypeError: an argument not in its unit (a bare int for ``pool`` or ``block_size``,
            a block size of another unit, lengths not in `EncoderTokens`).
        UnitValueError: ``step_tokens`` or ``seq_len`` does not fit the slots, or they
            disagree.
    """
    slots = check_quantity(num_slots, PooledBlocks, "num_slots").value
    p = _pool(pool)
    given: object = block_size  # for callers without mypy
    if type(given) is not BlockSize or given.unit is not PooledBlocks:
        raise UnitTypeError(
            f"block_size must be a BlockSize of pooled_block, got {describe(block_size)}",
            field="block_size",
            expected="pooled_block/cache_block",
            got=describe(block_size),
        )
    new = len(slot_mapping_slots)
    step_len = new * p if step_tokens is None else _fit(step_tokens, new, p, "step_tokens")
    # What the step's last pooled block lacks, the sequence lacks: it is the sequence's last
    # block. A step of no slots says nothing about the last block (missing is 0).
    missing = new * p - step_len
    if seq_len is None:
        length = slots * p - missing
    else:
        length = _fit(seq_len, slots, p, "seq_len")
        if new and step_tokens is None:
            step_len -= slots * p - length
        elif new and length != slots * p - missing:
            raise UnitValueError(
                f"seq_len is {seq_len} but the latest step's {step_tokens} end the sequence "
                f"at {slots * p - missing} encoder_token (only the last pooled block can be "
                "partial); give one of them, or both in agreement",
                field="seq_len",
                expected=f"{slots * p - missing} encoder_token",
                got=str(seq_len),
            )
    rows = pooled_slot_rows(slot_mapping_slots, pool)[:step_len]
    return PooledKernelInputs(
        block_table=tuple(block_table),
        tokens_per_block=expand_block_size(block_size, pool),
        slot_mapping_tokens=tuple(rows),
        seq_len=EncoderTokens(length),
        pool=pool,
    )


def _pool(pool: object) -> int:
    return check_pool(pool).tokens_per_block


def _fit(tokens: EncoderTokens, slots: int, p: int, field: str) -> int:
    """The value of ``tokens``, checked to fill ``slots`` pooled blocks of ``p`` tokens, the
    last one possibly partial: ``((slots − 1)·p, slots·p]`` (0 for no slots)."""
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
