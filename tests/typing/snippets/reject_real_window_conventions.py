# ruff: noqa: E501
# fmt: off
# (A mark must stay on the line mypy reports, so the formatter must not wrap these lines.)
"""Class 4, the conversions users need: real bugs where a window's number went to an attention
backend in another convention. The rule: a `Window` reaches a backend only through the named
conversion to that backend's convention, each tested against the backend's documentation
(tests/kernels/test_backend_windows.py); a length is not a window, and a manager's window of
pooled slots is no kernel's window.

* huggingface/transformers #39408: FlashAttention was given ``window_size=(W, W)``, which
  attends to ``2W + 1`` keys (``W + 1`` with a causal mask); its convention is ``(W − 1, 0)``.
* zml/zml #763: ``window_size_left = W`` where FlashAttention's left bound is inclusive of the
  current position: one key too many.
* huggingface/transformers #29623: Mistral's window of 2048 read 2048 keys with the eager
  backend and 2049 with FlashAttention-2.
* The seed (vLLM, Voxtral Realtime) in the other direction: the manager's window counts
  pooled slots (189), the kernel attends over encoder tokens (750).
"""

from kvunits.contracts import (
    Elements,
    EncoderTokens,
    KVHeads,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    Tokens,
    Window,
    flash_attn_window_size,
    flashinfer_window_left,
    manager_view,
)

window = Window(2048, Tokens)  # Mistral's sliding window: the token and the 2047 before it
assert flash_attn_window_size(window) == (2047, 0)  # not (2048, 2048), not (2048, 0)
assert flashinfer_window_left(window) == 2047
# A backend that wants "the window's size" is handed a length: which one is a guess.
size = flash_attn_window_size(window.keys)  # E: Argument 1 to "flash_attn_window_size" has incompatible type "Tokens"; expected "Window[EncoderTokens] | Window[Tokens] | None"  [arg-type]
left = flashinfer_window_left(window.lookback)  # E: Argument 1 to "flashinfer_window_left" has incompatible type "Tokens"; expected "Window[EncoderTokens] | Window[Tokens] | None"  [arg-type]

layer = SlidingWindowLayer(sliding_window=Window(750, EncoderTokens), pool=PoolFactor(4), kv_heads=KVHeads(32), head_size=Elements(64))
manager = manager_view(layer, block_size_slots=16).expect(PooledBlocks)
assert flash_attn_window_size(layer.sliding_window) == (749, 0)  # the kernel's window, in its unit
pooled = flash_attn_window_size(manager.sliding_window)  # E: Argument 1 to "flash_attn_window_size" has incompatible type "Window[PooledBlocks] | None"; expected "Window[EncoderTokens] | Window[Tokens] | None"  [arg-type]
