# ruff: noqa: E501
# fmt: off
# (A mark must stay on the line mypy reports, so the formatter must not wrap these lines.)
"""A window used as a length: the right unit with the wrong meaning.

The seed (vLLM's Voxtral Realtime fix, MISSION.md): the encoder's window of 750 encoder tokens
converted as a *length*, ``cdiv(750, 4) = 188`` pooled blocks, where the window's residency
bound is ``cdiv(750 - 1, 4) + 1 = 189``; with 188 the manager frees the block holding a key the
kernel still reads. Both numbers are pooled blocks from encoder tokens, so units alone cannot
tell them apart: the kinds can. xLLM #1515 (per issue 11) took ``window - 1`` and then a
length's conversion; here ``window - 1`` is not an expression at all (`Window.lookback` names
what it means). Every marked line is a mypy error, and a `UnitError` when run anyway.
"""

from kvunits.contracts import (
    AdmissionCap,
    BlockSize,
    Elements,
    EncoderTokens,
    KVHeads,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    Window,
    manager_view,
    pool_length,
    pool_span,
    pool_window,
    slots_to_cache_blocks_ceil,
)

pool = PoolFactor(4)
window = Window(750, EncoderTokens)
layer = SlidingWindowLayer(sliding_window=window, pool=pool, kv_heads=KVHeads(32), head_size=Elements(64))
manager = manager_view(layer, block_size_slots=16).expect(PooledBlocks)
manager_window = Window(189, PooledBlocks)

# Correct: the window's own conversion, and the look-back named when a length is meant.
assert pool_window(window, pool) == manager_window == manager.sliding_window
assert window.lookback == EncoderTokens(749) and manager_window.lookback == PooledBlocks(188)
assert pool_length(window.lookback, pool) + PooledBlocks(1) == PooledBlocks(189)

# The seed's reading: the window through a length's ceiling (188, one slot short).
slots = pool_length(window, pool)  # E: Argument 1 to "pool_length" has incompatible type "Window[EncoderTokens]"; expected "EncoderTokens"  [arg-type]
touched = pool_span(window, pool)  # E: Argument 1 to "pool_span" has incompatible type "Window[EncoderTokens]"; expected "EncoderTokens"  [arg-type]
# A length where a window is expected: the other direction of the same confusion.
lengthwise = pool_window(EncoderTokens(750), pool)  # E: Argument 1 to "pool_window" has incompatible type "EncoderTokens"; expected "Window[EncoderTokens]"  [arg-type]
layer_from_length = SlidingWindowLayer(sliding_window=EncoderTokens(750), pool=pool, kv_heads=KVHeads(32), head_size=Elements(64))  # E: Argument "sliding_window" to "SlidingWindowLayer" has incompatible type "EncoderTokens"; expected "Window[EncoderTokens] | Window[Tokens]"  [arg-type]

# xLLM #1515: window - 1, then a length's conversion. A window has no arithmetic.
look_back = window - EncoderTokens(1)  # E: Unsupported operand types for - ("Window[EncoderTokens]" and "EncoderTokens")  [operator]
minus_one = window - 1  # E: Unsupported operand types for - ("Window[EncoderTokens]" and "int")  [operator]
plus_step = manager_window + PooledBlocks(1)  # E: Unsupported operand types for + ("Window[PooledBlocks]" and "PooledBlocks")  [operator]
per_slot = window // 4  # E: Unsupported operand types for // ("Window[EncoderTokens]" and "int")  [operator]

# A window is compared with windows, never with a length.
same = manager_window == PooledBlocks(189)  # E: Non-overlapping equality check (left operand type: "Window[PooledBlocks]", right operand type: "PooledBlocks")  [comparison-overlap]
shorter = manager_window < PooledBlocks(190)  # E: Unsupported operand types for < ("Window[PooledBlocks]" and "PooledBlocks")  [operator]

# A window where the admission cap takes a length (the step in flight, the longest sequence).
cap = manager.max_admission_blocks_per_request(manager_window, PooledBlocks(8192))  # E: Argument 1 to "max_admission_blocks_per_request" of "ManagerSpec" has incompatible type "Window[PooledBlocks]"; expected "PooledBlocks"  [arg-type]
blocks = slots_to_cache_blocks_ceil(manager_window, BlockSize(16, PooledBlocks))  # E: No overload variant of "slots_to_cache_blocks_ceil" matches argument types "Window[PooledBlocks]", "BlockSize[PooledBlocks]"  [call-overload]

assert manager.max_admission_blocks_per_request(PooledBlocks(1), PooledBlocks(8192)) == AdmissionCap(13)
