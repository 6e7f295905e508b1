# ruff: noqa: E501
# fmt: off
# (A mark must stay on the line mypy reports, so the formatter must not wrap these lines.)
"""Values in the wrong unit, or in no unit, handed to a contract: mypy rejects, so does Python.

Functions here check their arguments with `kvunits.contracts.check_quantity` as a hot path does at its
entry, so the runtime rejects what mypy rejects.
"""

from kvunits.contracts import (
    BlockSize,
    CacheBlocks,
    EncoderTokens,
    PooledBlocks,
    PoolFactor,
    Tokens,
    Window,
    pool_window,
    slots_to_cache_blocks_ceil,
)
from kvunits.contracts.internal import check_quantity


def blocks_for_window(window: PooledBlocks) -> CacheBlocks:
    """Cache blocks a manager reserves for a window it counts in pooled blocks."""
    slots = check_quantity(window, PooledBlocks, "window").numerical_value_in(PooledBlocks)
    return CacheBlocks(-(slots // -16) + 1)


pool = PoolFactor(4)

blocks_for_window(EncoderTokens(750))  # E: Argument 1 to "blocks_for_window" has incompatible type "EncoderTokens"; expected "PooledBlocks"  [arg-type]
blocks_for_window(189)  # E: Argument 1 to "blocks_for_window" has incompatible type "int"; expected "PooledBlocks"  [arg-type]
blocks_for_window(Tokens(189))  # E: Argument 1 to "blocks_for_window" has incompatible type "Tokens"; expected "PooledBlocks"  [arg-type]

# The conversions check their source unit and their factor.
manager_window = Window(750, PooledBlocks)
pool_window(manager_window, pool)  # E: Argument 1 to "pool_window" has incompatible type "Window[PooledBlocks]"; expected "Window[EncoderTokens]"  [arg-type]
pool_window(750, pool)  # E: Argument 1 to "pool_window" has incompatible type "int"; expected "Window[EncoderTokens]"  [arg-type]
pool_window(EncoderTokens(750), pool)  # E: Argument 1 to "pool_window" has incompatible type "EncoderTokens"; expected "Window[EncoderTokens]"  [arg-type]
pool_window(Window(750, EncoderTokens), 4)  # E: Argument 2 to "pool_window" has incompatible type "int"; expected "PoolFactor"  [arg-type]

# Slots and block size must count the same unit: a pooled layer's slots with a token block size.
token_block_size = BlockSize(16, Tokens)
slots_to_cache_blocks_ceil(PooledBlocks(3), token_block_size)  # E: Argument 2 to "slots_to_cache_blocks_ceil" has incompatible type "BlockSize[Tokens]"; expected "BlockSize[PooledBlocks]"  [arg-type]

# Re-wrapping a quantity in another unit is not a conversion.
relabelled = PooledBlocks(EncoderTokens(750))  # E: Argument 1 to "PooledBlocks" has incompatible type "EncoderTokens"; expected "int"  [arg-type]
from_float = EncoderTokens(750.0)  # E: Argument 1 to "EncoderTokens" has incompatible type "float"; expected "int"  [arg-type]

# A block size counts sequence positions, never cache blocks.
odd_block = BlockSize(16, CacheBlocks)  # E: Value of type variable "SeqUnit" of "BlockSize" cannot be "CacheBlocks"  [type-var]

# The correct calls.
assert blocks_for_window(pool_window(Window(750, EncoderTokens), pool).lookback + PooledBlocks(1)) == CacheBlocks(13)
assert slots_to_cache_blocks_ceil(PooledBlocks(3), BlockSize(16, PooledBlocks)) == CacheBlocks(1)
