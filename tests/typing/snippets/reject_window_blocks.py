# ruff: noqa: E501
# fmt: off
# (A mark must stay on the line mypy reports, so the formatter must not wrap these lines.)
"""The cache blocks a window touches counted with a length's ceiling.

A window of W slots can start anywhere in a block, so it touches up to ``cdiv(W - 1, B) + 1``
blocks of B slots (`window_blocks`, `ManagerSpec.window_blocks`), one more than a length of W
slots needs whenever it straddles a block boundary. vllm-gaudi #1395 kept ``W // B`` blocks of
the table in decode and dropped the boundary block ("silently loses up to block_size - 1
tokens"); its fix, ``W // B + 1``, is still one short when ``W mod B >= 2``. TRT-LLM #16426
sized a pool from one alignment of the window and missed the straddle block (a 2x under-count
for a window of 11). With kinds, a window is no argument of a length's ceiling and has no
division: the only way to its blocks is the conversion that says how it rounds.
"""

from kvunits.contracts import (
    BlockSize,
    Elements,
    EncoderTokens,
    KVHeads,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    SpanBlocks,
    Tokens,
    Window,
    manager_view,
    slots_to_cache_blocks_ceil,
    window_blocks,
)

block_size = BlockSize(16, PooledBlocks)
window = Window(189, PooledBlocks)  # pool_window(750 encoder_token, P = 4)
layer = SlidingWindowLayer(sliding_window=Window(750, EncoderTokens), pool=PoolFactor(4), kv_heads=KVHeads(32), head_size=Elements(64))
manager = manager_view(layer, block_size_slots=16).expect(PooledBlocks)

# Correct: the window's own conversion (13), from the view or with its block size.
assert window_blocks(window, block_size) == manager.window_blocks() == SpanBlocks(13)
# TRT-LLM #16426's geometry: a window of 11 tokens, blocks of 8: up to 3 blocks, not 2.
assert window_blocks(Window(11, Tokens), BlockSize(8, Tokens)) == SpanBlocks(3)

# A length's ceiling, cdiv(189, 16) = 12: one block short whenever the window straddles.
blocks = slots_to_cache_blocks_ceil(window, block_size)  # E: No overload variant of "slots_to_cache_blocks_ceil" matches argument types "Window[PooledBlocks]", "BlockSize[PooledBlocks]"  [call-overload]
# vllm-gaudi #1395: W // B (and its fix W // B + 1) on the window itself.
kept = window // 16  # E: Unsupported operand types for // ("Window[PooledBlocks]" and "int")  [operator]
kept_plus_one = window // 16 + 1  # E: Unsupported operand types for // ("Window[PooledBlocks]" and "int")  [operator]
# The view's blocks are the view's: a token window with a pooled block size is refused too.
token_window = Window(11, Tokens)
mixed = window_blocks(token_window, block_size)  # E: Argument 1 to "window_blocks" has incompatible type "Window[Tokens]"; expected "Window[PooledBlocks]"  [arg-type]
# A length where the window's conversion takes a window.
length_blocks = window_blocks(PooledBlocks(189), block_size)  # E: No overload variant of "window_blocks" matches argument types "PooledBlocks", "BlockSize[PooledBlocks]"  [call-overload]
