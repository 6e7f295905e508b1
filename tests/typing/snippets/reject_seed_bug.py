# ruff: noqa: E501
# fmt: off
# (A mark must stay on the line mypy reports, so the formatter must not wrap these lines.)
"""The seed's bug, re-enacted: the model's window in encoder tokens reaches a manager function
that counts pooled blocks.

In vLLM the Voxtral encoder's ``sliding_window`` was 750 encoder tokens, and the KV-cache
manager read it as 750 pooled blocks: 48 cache blocks reserved per request instead of 13.
"""

from kvunits.contracts import (
    BlockSize,
    CacheBlocks,
    EncoderTokens,
    PooledBlocks,
    PoolFactor,
    Window,
    pool_length,
    pool_window,
)
from kvunits.contracts.internal import check_kind, check_quantity


def max_admission_blocks(
    window: Window[PooledBlocks],
    max_in_flight: PooledBlocks,
    max_len: PooledBlocks,
    block_size: BlockSize[PooledBlocks],
) -> CacheBlocks:
    """Cache blocks one request may hold in a pooled sliding-window layer.

    ``cdiv(min(window - 1 + max_in_flight, max_len), block_size) + 1``: +1 because the window
    can start in the middle of a block.
    """
    window_slots = check_kind(window, Window, PooledBlocks, "sliding_window").numerical_value_in(PooledBlocks)
    in_flight_slots = check_quantity(max_in_flight, PooledBlocks, "max_in_flight").numerical_value_in(PooledBlocks)
    max_len_slots = check_quantity(max_len, PooledBlocks, "max_len").numerical_value_in(PooledBlocks)
    bs = block_size.numerical_value_in(PooledBlocks)
    return CacheBlocks(-(min(window_slots - 1 + in_flight_slots, max_len_slots) // -bs) + 1)


model_window = Window(750, EncoderTokens)  # what the model config says, in the kernel's unit
pool = PoolFactor(4)
block_size = BlockSize(16, PooledBlocks)
max_len = PooledBlocks(100_000)

# The fix: convert at the spec boundary, with the window rule.
assert max_admission_blocks(pool_window(model_window, pool), PooledBlocks(1), max_len, block_size) == CacheBlocks(13)

# The bug: the encoder-token window handed straight to the manager.
cap = max_admission_blocks(model_window, PooledBlocks(1), max_len, block_size)  # E: Argument 1 to "max_admission_blocks" has incompatible type "Window[EncoderTokens]"; expected "Window[PooledBlocks]"  [arg-type]
# The seed's fix, read as a length: the window's 750 encoder tokens through pool_length (188).
seed_slots = pool_length(model_window, pool)  # E: Argument 1 to "pool_length" has incompatible type "Window[EncoderTokens]"; expected "EncoderTokens"  [arg-type]
