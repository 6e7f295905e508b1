"""Conversions between units. Each one names its rounding, in its name or in `CONVERSIONS`.

Lengths round up (capacity must cover a partial block); windows use the residency bound
(see `pool_window`); expansions back to finer units are exact; fitting a budget rounds down.
These are the only places one unit becomes another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, final

from ._factors import BlockSize, PoolFactor, check_pool
from ._quantity import (
    Bytes,
    CacheBlocks,
    EncoderTokens,
    PooledBlocks,
    SeqUnit,
    check_quantity,
)
from .errors import UnitValueError


def cdiv(numerator: int, denominator: int) -> int:
    """Ceiling division of plain ints, for code that already left the typed boundary."""
    return -(numerator // -denominator)


def pool_length(length: EncoderTokens, pool: PoolFactor) -> PooledBlocks:
    """Pooled blocks needed to store ``length`` encoder tokens: ``cdiv(n, P)``, rounds up.

    Example:
        >>> pool_length(EncoderTokens(750), PoolFactor(4))
        PooledBlocks(188)
    """
    n = check_quantity(length, EncoderTokens, "length").value
    return PooledBlocks(cdiv(n, _pool(pool)))


def pool_window(window: EncoderTokens, pool: PoolFactor) -> PooledBlocks:
    """The manager window (in pooled blocks) that keeps a kernel window of W tokens resident.

    A window of W tokens is the current token and the W − 1 before it. The query at the
    first token of pooled block c needs key ``P·c − (W − 1)``, in pooled block
    ``c − cdiv(W − 1, P)``; the manager keeps ``window − 1`` slots behind the current one,
    so the smallest sufficient window is ``cdiv(W − 1, P) + 1`` (rounds the look-back up).
    This is *not* `pool_length`: reading 750 tokens at P = 4 as a length gives 188, one
    short of the 189 this returns.

    Raises:
        UnitValueError: the window is 0 (a window holds at least the current token).

    Example:
        >>> pool_window(EncoderTokens(750), PoolFactor(4))
        PooledBlocks(189)
    """
    w = check_quantity(window, EncoderTokens, "window").value
    if w < 1:
        raise UnitValueError(
            "a sliding window must be >= 1 encoder_token (it holds the current token), got 0",
            field="window",
            expected="an int >= 1 of encoder_token",
            got=str(window),
        )
    return PooledBlocks(cdiv(w - 1, _pool(pool)) + 1)


def pool_span(run: EncoderTokens, pool: PoolFactor) -> PooledBlocks:
    """Slots a run of n consecutive encoder tokens can touch, wherever it starts:
    ``cdiv(n − 1, P) + 1`` (0 for an empty run).

    A step of a pooled stream is such a run, and need not start on a slot boundary (an audio
    chunk continues the partial slot the last one left): a step of 4 encoder tokens at P = 4
    can touch 2 slots. The admission cap reserves for the slots a step *touches*, so a pooled
    group's ``max_in_flight`` comes from here, not from `pool_length` (it is `pool_window`'s
    formula: a window is a run of W tokens too).

    Example:
        >>> pool_span(EncoderTokens(4), PoolFactor(4)), pool_length(EncoderTokens(4), PoolFactor(4))
        (PooledBlocks(2), PooledBlocks(1))
    """
    n = check_quantity(run, EncoderTokens, "run").value
    return PooledBlocks(cdiv(n - 1, _pool(pool)) + 1 if n else 0)


def pool_position(position: EncoderTokens, pool: PoolFactor) -> PooledBlocks:
    """The pooled slot that holds encoder-token position ``i``: ``i // P``, rounds down."""
    i = check_quantity(position, EncoderTokens, "position").value
    return PooledBlocks(i // _pool(pool))


def unpool_length(length: PooledBlocks, pool: PoolFactor) -> EncoderTokens:
    """Encoder tokens in ``s`` full pooled blocks: ``s × P``, exact.

    Example:
        >>> unpool_length(PooledBlocks(189), PoolFactor(4))
        EncoderTokens(756)
    """
    s = check_quantity(length, PooledBlocks, "length").value
    return EncoderTokens(s * _pool(pool))


def expand_block_size(
    block_size: BlockSize[PooledBlocks], pool: PoolFactor
) -> BlockSize[EncoderTokens]:
    """A pooled layer's cache block in encoder tokens: ``block_size × P``, exact.

    Example:
        >>> str(expand_block_size(BlockSize(16, PooledBlocks), PoolFactor(4)))
        '64 encoder_token/cache_block'
    """
    block_size.check(PooledBlocks)
    return BlockSize(block_size.slots * _pool(pool), EncoderTokens)


def slots_to_cache_blocks_ceil(slots: SeqUnit, block_size: BlockSize[SeqUnit]) -> CacheBlocks:
    """Cache blocks needed for ``slots`` slots: ``cdiv(slots, block_size)``, rounds up.

    The slots and the block size must count the same unit (pooled blocks with a pooled
    block size, tokens with a token one); mypy and the run time both check it.

    Example:
        >>> slots_to_cache_blocks_ceil(PooledBlocks(189), BlockSize(16, PooledBlocks))
        CacheBlocks(12)
    """
    n = check_quantity(slots, block_size.unit, "slots").value
    return CacheBlocks(cdiv(n, block_size.slots))


def cache_blocks_to_bytes(blocks: CacheBlocks, page_size: Bytes) -> Bytes:
    """Memory of ``blocks`` pages of ``page_size`` each: exact."""
    n = check_quantity(blocks, CacheBlocks, "blocks").value
    return Bytes(n * check_quantity(page_size, Bytes, "page_size").value)


def bytes_to_cache_blocks_floor(budget: Bytes, page_size: Bytes) -> CacheBlocks:
    """Whole pages of ``page_size`` that fit in ``budget``: ``budget // page_size``, rounds down.

    Raises:
        UnitValueError: ``page_size`` is 0.
    """
    page = check_quantity(page_size, Bytes, "page_size").value
    if page == 0:
        raise UnitValueError(
            "page_size must be > 0 byte to count pages", field="page_size", got=str(page_size)
        )
    return CacheBlocks(check_quantity(budget, Bytes, "budget").value // page)


def _pool(pool: object) -> int:
    return check_pool(pool).tokens_per_block


Rounding = Literal["ceil", "floor", "exact", "window"]


@final
@dataclass(frozen=True, slots=True)
class Conversion:
    """What one named conversion does, for documentation and the ``kvunits convert`` tool."""

    name: str
    source: str
    target: str
    rounding: Rounding
    formula: str


CONVERSIONS: Final[tuple[Conversion, ...]] = (
    Conversion("pool_length", "encoder_token", "pooled_block", "ceil", "cdiv(n, P)"),
    Conversion("pool_window", "encoder_token", "pooled_block", "window", "cdiv(W - 1, P) + 1"),
    Conversion("pool_span", "encoder_token", "pooled_block", "window", "cdiv(n - 1, P) + 1"),
    Conversion("pool_position", "encoder_token", "pooled_block", "floor", "i // P"),
    Conversion("unpool_length", "pooled_block", "encoder_token", "exact", "s * P"),
    Conversion(
        "expand_block_size",
        "pooled_block/cache_block",
        "encoder_token/cache_block",
        "exact",
        "block_size * P",
    ),
    Conversion("slots_to_cache_blocks_ceil", "slot", "cache_block", "ceil", "cdiv(n, block_size)"),
    Conversion("cache_blocks_to_bytes", "cache_block", "byte", "exact", "n * page_size"),
    Conversion(
        "bytes_to_cache_blocks_floor", "byte", "cache_block", "floor", "budget // page_size"
    ),
)
