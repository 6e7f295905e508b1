# ruff: noqa: E501
# fmt: off
# (A mark must stay on the line mypy reports, so the formatter must not wrap these lines.)
"""No anonymous exits: a number leaves a typed value only naming its unit.

``PooledBlocks(w.value)``, ``BlockSize(bs.slots, EncoderTokens)`` and
``SeqLens(pooled.tensor, EncoderTokens)`` relabelled a value silently (issue 11). There is no
``.value``, ``.slots`` nor ``.tensor``: ``numerical_value_in(unit)`` / ``tensor_in(unit)``
name the unit the number counts (as mp-units' ``numerical_value_in``), and the unit must be
the value's own, so a relabelling reads as one: ``PooledBlocks(w.numerical_value_in(
EncoderTokens))`` writes both units on one line, and is the greppable exception. The views
keep no plain-int copies (``manager.sliding_window_slots`` is gone), and a tensor is wrapped
in one unit for its lifetime: relabelling the same tensor fails at run time even when the
unit is named (the ``# R:`` line). The conversions are `pool_window`, `expand_block_size`,
`unpool_seq_lens`.
"""

import torch

from kvunits.contracts import (
    BlockSize,
    Elements,
    EncoderTokens,
    KVHeads,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    Window,
    expand_block_size,
    manager_view,
)
from kvunits.kernels import SeqLens, unpool_seq_lens

window = EncoderTokens(750)
manager_window = Window(189, PooledBlocks)
block_size = BlockSize(16, PooledBlocks)
pooled = SeqLens(torch.tensor([188, 14]), PooledBlocks)
layer = SlidingWindowLayer(sliding_window=Window(750, EncoderTokens), pool=PoolFactor(4), kv_heads=KVHeads(32), head_size=Elements(64))
manager = manager_view(layer, block_size_slots=16).expect(PooledBlocks)

# Correct: the number leaves in its own unit; the conversions make new values.
assert window.numerical_value_in(EncoderTokens) == 750
assert manager_window.numerical_value_in(PooledBlocks) == 189
assert expand_block_size(block_size, PoolFactor(4)) == BlockSize(64, EncoderTokens)
assert unpool_seq_lens(pooled, PoolFactor(4)).tensor_in(EncoderTokens).tolist() == [752, 56]

# The anonymous exits are gone.
slots = PooledBlocks(window.value)  # E: "EncoderTokens" has no attribute "value"  [attr-defined]
rows = BlockSize(block_size.slots, EncoderTokens)  # E: "BlockSize[PooledBlocks]" has no attribute "slots"  [attr-defined]
lens = SeqLens(pooled.tensor, EncoderTokens)  # E: "SeqLens[PooledBlocks]" has no attribute "tensor"; maybe "tensor_in"?  [attr-defined]
window_slots = manager.sliding_window_slots  # E: "ManagerSpec[PooledBlocks, Any]" has no attribute "sliding_window_slots"; maybe "sliding_window"?  [attr-defined]
# Naming a unit the value does not count is refused.
relabelled = PooledBlocks(window.numerical_value_in(PooledBlocks))  # E: Argument 1 to "numerical_value_in" of "IntQuantity" has incompatible type "type[PooledBlocks]"; expected "type[EncoderTokens]"  [arg-type]
kernel_rows = BlockSize(block_size.numerical_value_in(EncoderTokens), EncoderTokens)  # E: Argument 1 to "numerical_value_in" of "BlockSize" has incompatible type "type[EncoderTokens]"; expected "type[PooledBlocks]"  [arg-type]
kernel_window = Window(manager_window.numerical_value_in(EncoderTokens), EncoderTokens)  # E: Argument 1 to "numerical_value_in" of "Window" has incompatible type "type[EncoderTokens]"; expected "type[PooledBlocks]"  [arg-type]
exact = SeqLens(pooled.tensor_in(EncoderTokens), EncoderTokens)  # E: Argument 1 to "tensor_in" of "SeqLens" has incompatible type "type[EncoderTokens]"; expected "type[PooledBlocks]"  [arg-type]
# The unit named, the same tensor relabelled: the run time still knows what it counts.
tokens = SeqLens(pooled.tensor_in(PooledBlocks), EncoderTokens)  # R: the tensor object already counts pooled_block; mypy cannot follow a tensor's history
