"""Conversions between units and kinds. Each one names its rounding, in its name or in
`CONVERSIONS`, and takes the kind it is correct for.

Lengths round up (capacity must cover a partial block); windows use the residency bound
(see `pool_window`); positions round down; chunks and expansions back to finer units are
exact; fitting a budget rounds down. These are the only places one unit becomes another.
The blocks a window touches (`window_blocks`) are not the blocks of a length of the same
size: a window may start in the middle of a block.

The per-layer views (`ManagerSpec`, `KernelSpec`) call these with their own block size, pool
factor and page size (``view.window_blocks()``, ``view.block_of(position)``, ``view.page_size``):
code that has a view should ask it rather than pass another layer's geometry in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal, final, overload

from ._factors import BlockSize, PoolFactor, check_pool
from ._kinds import Chunk, Position, Window, check_kind
from ._quantity import (
    Bytes,
    CacheBlocks,
    EncoderTokens,
    PooledBlocks,
    SpanBlocks,
    Tokens,
    check_quantity,
)
from .errors import UnitTypeError, UnitValueError


def cdiv(numerator: int, denominator: int) -> int:
    """Ceiling division of plain ints, for code that already left the typed boundary."""
    return -(numerator // -denominator)


def pool_length(length: EncoderTokens, pool: PoolFactor) -> PooledBlocks:
    """Pooled blocks needed to store a *length* of n encoder tokens: ``cdiv(n, P)``, rounds up.

    A length only: a window goes through `pool_window`, a position through `pool_position`,
    a chunk through `pool_chunk` (mypy and the run time refuse them here).

    Example:
        >>> pool_length(EncoderTokens(750), PoolFactor(4))
        PooledBlocks(188)
    """
    n = check_quantity(length, EncoderTokens, "length")._value
    return PooledBlocks(cdiv(n, _pool(pool)))


def pool_window(window: Window[EncoderTokens], pool: PoolFactor) -> Window[PooledBlocks]:
    """The manager window (in pooled blocks) that keeps a kernel window of W tokens resident.

    A window of W tokens is the current token and the W − 1 before it. The query at the
    first token of pooled block c needs key ``P·c − (W − 1)``, in pooled block
    ``c − cdiv(W − 1, P)``; the manager keeps ``window − 1`` slots behind the current one,
    so the smallest sufficient window is ``cdiv(W − 1, P) + 1`` (rounds the look-back up).
    This is *not* `pool_length`: reading 750 tokens at P = 4 as a length gives 188, one
    short of the 189 this returns.

    Example:
        >>> pool_window(Window(750, EncoderTokens), PoolFactor(4))
        Window(189, PooledBlocks)
    """
    w = check_kind(window, Window, EncoderTokens, "window")._n
    return Window(cdiv(w - 1, _pool(pool)) + 1, PooledBlocks)


def unpool_window(window: Window[PooledBlocks], pool: PoolFactor) -> Window[EncoderTokens]:
    """The widest kernel window (in encoder tokens) that a manager window of S pooled blocks
    keeps resident: ``(S − 1)·P + 1``, exact (the upper end of the windows `pool_window` maps
    to S, so ``pool_window(unpool_window(S, P), P) == S``).

    The manager keeps ``S − 1`` slots behind the current one, ``(S − 1)·P`` encoder tokens
    however the eviction point falls, so a kernel window of W tokens is served when its
    look-back W − 1 fits: W <= (S − 1)·P + 1. Reading a window an engine states in pooled
    slots (vLLM's ``sliding_window`` with ``tokens_per_state = 1/P``) in the kernel's unit.

    Example:
        >>> unpool_window(Window(189, PooledBlocks), PoolFactor(4))
        Window(753, EncoderTokens)
        >>> unpool_window(Window(188, PooledBlocks), PoolFactor(4))  # 750 does not fit
        Window(749, EncoderTokens)
    """
    s = check_kind(window, Window, PooledBlocks, "window")._n
    return Window((s - 1) * _pool(pool) + 1, EncoderTokens)


def pool_span(run: EncoderTokens, pool: PoolFactor) -> PooledBlocks:
    """Slots a run of n consecutive encoder tokens can touch, wherever it starts:
    ``cdiv(n − 1, P) + 1`` (0 for an empty run). A length to a length (a count of slots).

    A step of a pooled stream is such a run, and need not start on a slot boundary (an audio
    chunk continues the partial slot the last one left): a step of 4 encoder tokens at P = 4
    can touch 2 slots. The admission cap reserves for the slots a step *touches*, so a pooled
    group's ``max_in_flight`` comes from here, not from `pool_length` (it is `pool_window`'s
    formula: a window is a run of W tokens too).

    Example:
        >>> pool_span(EncoderTokens(4), PoolFactor(4)), pool_length(EncoderTokens(4), PoolFactor(4))
        (PooledBlocks(2), PooledBlocks(1))
    """
    n = check_quantity(run, EncoderTokens, "run")._value
    return PooledBlocks(cdiv(n - 1, _pool(pool)) + 1 if n else 0)


def pool_position(position: Position[EncoderTokens], pool: PoolFactor) -> Position[PooledBlocks]:
    """The pooled slot that holds encoder-token position ``i``: ``i // P``, rounds down.

    Example:
        >>> pool_position(Position(812, EncoderTokens), PoolFactor(4))
        Position(203, PooledBlocks)
    """
    i = check_kind(position, Position, EncoderTokens, "position")._n
    return Position(i // _pool(pool), PooledBlocks)


def pool_chunk(chunk: Chunk[EncoderTokens], pool: PoolFactor) -> Chunk[PooledBlocks]:
    """The manager chunk of a pooled layer: ``C / P`` slots, exact.

    Raises:
        UnitValueError: P does not divide the chunk (the manager's chunk starts would drift
            from the kernel's).

    Example:
        >>> pool_chunk(Chunk(8192, EncoderTokens), PoolFactor(4))
        Chunk(2048, PooledBlocks)
    """
    c = check_kind(chunk, Chunk, EncoderTokens, "chunk")._n
    p = _pool(pool)
    if c % p:
        raise UnitValueError(
            f"a chunk of {c} encoder_token is not a whole number of pooled blocks of {p}: "
            f"write a multiple of {p} encoder_token",
            field="chunk",
            expected=f"a multiple of {p} encoder_token",
            got=f"{c} encoder_token",
        )
    return Chunk(c // p, PooledBlocks)


def unpool_length(length: PooledBlocks, pool: PoolFactor) -> EncoderTokens:
    """Encoder tokens in ``s`` full pooled blocks: ``s × P``, exact.

    Example:
        >>> unpool_length(PooledBlocks(189), PoolFactor(4))
        EncoderTokens(756)
    """
    s = check_quantity(length, PooledBlocks, "length")._value
    return EncoderTokens(s * _pool(pool))


def expand_block_size(
    block_size: BlockSize[PooledBlocks], pool: PoolFactor
) -> BlockSize[EncoderTokens]:
    """A pooled layer's cache block in encoder tokens: ``block_size × P``, exact.

    Example:
        >>> str(expand_block_size(BlockSize(16, PooledBlocks), PoolFactor(4)))
        '64 encoder_token/cache_block'
    """
    bs = block_size.check(PooledBlocks).numerical_value_in(PooledBlocks)
    return BlockSize(bs * _pool(pool), EncoderTokens)


@overload
def slots_to_cache_blocks_ceil(
    slots: PooledBlocks, block_size: BlockSize[PooledBlocks]
) -> CacheBlocks: ...
@overload
def slots_to_cache_blocks_ceil(slots: Tokens, block_size: BlockSize[Tokens]) -> CacheBlocks: ...
@overload
def slots_to_cache_blocks_ceil(
    slots: EncoderTokens, block_size: BlockSize[EncoderTokens]
) -> CacheBlocks: ...
def slots_to_cache_blocks_ceil(slots: Any, block_size: BlockSize[Any]) -> CacheBlocks:
    """Cache blocks needed for a *length* of ``slots``: ``cdiv(slots, block_size)``, rounds up.

    The slots and the block size must count the same unit (pooled blocks with a pooled
    block size, tokens with a token one); mypy and the run time both check it. Not for a
    window (`window_blocks`: it may start mid-block) nor a position (`block_of`).

    Example:
        >>> slots_to_cache_blocks_ceil(PooledBlocks(189), BlockSize(16, PooledBlocks))
        CacheBlocks(12)
    """
    unit = _block_unit(block_size)
    n = check_quantity(slots, unit, "slots")._value
    return CacheBlocks(cdiv(n, block_size.numerical_value_in(unit)))


@overload
def window_blocks(
    window: Window[PooledBlocks], block_size: BlockSize[PooledBlocks]
) -> SpanBlocks: ...
@overload
def window_blocks(window: Window[Tokens], block_size: BlockSize[Tokens]) -> SpanBlocks: ...
@overload
def window_blocks(
    window: Window[EncoderTokens], block_size: BlockSize[EncoderTokens]
) -> SpanBlocks: ...
def window_blocks(window: Window[Any], block_size: BlockSize[Any]) -> SpanBlocks:
    """The most cache blocks a window of W slots can touch: ``cdiv(W − 1, B) + 1``.

    A window can start anywhere in a block: the current slot's block plus the blocks its
    ``W − 1`` look-back reaches, rounded up. A length's ceiling ``cdiv(W, B)`` is one short
    unless ``W mod B == 1`` (TRT-LLM #16426); ``W // B`` drops the boundary block (vllm-gaudi
    before #1395), and ``W // B + 1`` (its fix) is still one short when ``W mod B >= 2``.

    The result is a `SpanBlocks`, not a cap: what a request holds is the window plus the
    steps in flight, bounded by its length (`ManagerSpec.max_admission_blocks_per_request`);
    a span used as a cap under-reserves (vLLM #11168: ``can_allocate`` counted the window's
    blocks where a prefill needs all of its own).

    Example:
        >>> window_blocks(Window(4, Tokens), BlockSize(2, Tokens))  # slots 1-4: blocks 0, 1, 2
        SpanBlocks(3)
    """
    unit = _block_unit(block_size)
    w = check_kind(window, Window, unit, "window")._n
    return SpanBlocks(cdiv(w - 1, block_size.numerical_value_in(unit)) + 1)


@overload
def block_of(
    position: Position[PooledBlocks], block_size: BlockSize[PooledBlocks]
) -> Position[CacheBlocks]: ...
@overload
def block_of(
    position: Position[Tokens], block_size: BlockSize[Tokens]
) -> Position[CacheBlocks]: ...
@overload
def block_of(
    position: Position[EncoderTokens], block_size: BlockSize[EncoderTokens]
) -> Position[CacheBlocks]: ...
def block_of(position: Position[Any], block_size: BlockSize[Any]) -> Position[CacheBlocks]:
    """The block-table column that holds position ``i``: ``i // block_size``, rounds down.

    Example:
        >>> block_of(Position(63, EncoderTokens), BlockSize(64, EncoderTokens))
        Position(0, CacheBlocks)
    """
    unit = _block_unit(block_size)
    i = check_kind(position, Position, unit, "position")._n
    return Position(i // block_size.numerical_value_in(unit), CacheBlocks)


def cache_blocks_to_bytes(blocks: CacheBlocks, page_size: Bytes) -> Bytes:
    """Memory of ``blocks`` pages of ``page_size`` each: exact."""
    n = check_quantity(blocks, CacheBlocks, "blocks")._value
    return Bytes(n * check_quantity(page_size, Bytes, "page_size")._value)


def bytes_to_cache_blocks_floor(budget: Bytes, page_size: Bytes) -> CacheBlocks:
    """Whole pages of ``page_size`` that fit in ``budget``: ``budget // page_size``, rounds down.

    Raises:
        UnitValueError: ``page_size`` is 0.
    """
    page = check_quantity(page_size, Bytes, "page_size")._value
    if page == 0:
        raise UnitValueError(
            "page_size must be > 0 byte to count pages", field="page_size", got=str(page_size)
        )
    return CacheBlocks(check_quantity(budget, Bytes, "budget")._value // page)


def _pool(pool: object) -> int:
    return check_pool(pool).tokens_per_block


def _block_unit(block_size: object) -> type[Any]:
    if type(block_size) is not BlockSize:
        raise UnitTypeError(
            f"block_size must be a BlockSize, got {block_size!r}",
            field="block_size",
            expected="BlockSize",
            got=repr(block_size),
        )
    return block_size.unit


Rounding = Literal["ceil", "floor", "exact", "window", "span"]


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
    Conversion(
        "flash_attn_window_size",
        "encoder_token or token window",
        "FlashAttention window_size",
        "exact",
        "(W - 1, 0)",
    ),
    Conversion(
        "flashinfer_window_left",
        "encoder_token or token window",
        "FlashInfer window_left",
        "exact",
        "W - 1",
    ),
    Conversion(
        "exclusive_window_bound",
        "encoder_token or token window",
        "exclusive bound (Triton kernels here)",
        "exact",
        "W",
    ),
    Conversion("last_position", "length", "position", "exact", "L - 1"),
    Conversion("length_through", "position", "length", "exact", "i + 1"),
    Conversion(
        "pool_window",
        "encoder_token window",
        "pooled_block window",
        "window",
        "cdiv(W - 1, P) + 1",
    ),
    Conversion(
        "unpool_window", "pooled_block window", "encoder_token window", "exact", "(S - 1) * P + 1"
    ),
    Conversion("pool_span", "encoder_token", "pooled_block", "span", "cdiv(n - 1, P) + 1"),
    Conversion(
        "pool_position", "encoder_token position", "pooled_block position", "floor", "i // P"
    ),
    Conversion("pool_chunk", "encoder_token chunk", "pooled_block chunk", "exact", "C / P"),
    Conversion("unpool_length", "pooled_block", "encoder_token", "exact", "s * P"),
    Conversion(
        "expand_block_size",
        "pooled_block/cache_block",
        "encoder_token/cache_block",
        "exact",
        "block_size * P",
    ),
    Conversion("slots_to_cache_blocks_ceil", "slot", "cache_block", "ceil", "cdiv(n, block_size)"),
    Conversion(
        "window_blocks", "slot window", "cache_block", "window", "cdiv(W - 1, block_size) + 1"
    ),
    Conversion("block_of", "slot position", "cache_block position", "floor", "i // block_size"),
    Conversion("cache_blocks_to_bytes", "cache_block", "byte", "exact", "n * page_size"),
    Conversion(
        "bytes_to_cache_blocks_floor", "byte", "cache_block", "floor", "budget // page_size"
    ),
)
