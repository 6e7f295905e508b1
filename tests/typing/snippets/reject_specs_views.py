# ruff: noqa: E501
# fmt: off
"""The two views of a layer are different types, and each counts in its own unit.

A `KernelSpec` (encoder tokens) where a `ManagerSpec` (pooled blocks) is expected, encoder
tokens handed to a pooled manager, and the seed's naive derivation (the model's window of 750
encoder tokens read as pooled blocks: 48 cache blocks instead of 13) are all rejected by mypy,
and by the run time with a `UnitError` when the line runs anyway.
"""

from kvunits.contracts import (
    AdmissionCap,
    Elements,
    EncoderTokens,
    EngineSpec,
    KernelSpec,
    KVHeads,
    ManagerSpec,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    Tokens,
    Window,
    kernel_view,
    manager_view,
    slots_to_cache_blocks_ceil,
)
from kvunits.contracts.deploy import RankBytes

layer = SlidingWindowLayer(sliding_window=Window(750, EncoderTokens), pool=PoolFactor(4), kv_heads=KVHeads(32), head_size=Elements(64))
manager = manager_view(layer, block_size_slots=16).expect(PooledBlocks)
kernel = kernel_view(layer, block_size_slots=16).expect(EncoderTokens)
engine = EngineSpec(
    max_model_len=Tokens(8192),
    max_num_batched_tokens=Tokens(2048),
    max_encoder_len=EncoderTokens(6000),
    max_encoder_tokens_per_step=EncoderTokens(4),
    memory_budget=RankBytes(1 << 30),
)


def encoder_admission_cap(
    spec: ManagerSpec[PooledBlocks], max_in_flight: PooledBlocks, max_len: PooledBlocks
) -> AdmissionCap:
    """What an allocator for the encoder's cache does at its entry: narrow, then ask."""
    return spec.expect(PooledBlocks).max_admission_blocks_per_request(max_in_flight, max_len)


# Correct: the manager's own unit, derived at the boundary.
assert manager.sliding_window == Window(189, PooledBlocks)
assert encoder_admission_cap(manager, PooledBlocks(1), PooledBlocks(1500)) == AdmissionCap(13)
assert kernel.sliding_window == Window(750, EncoderTokens)
model_window = Window(750, EncoderTokens)
kernel_window = kernel.sliding_window
assert kernel_window is not None

# The kernel's view where the manager's is expected.
cap = encoder_admission_cap(kernel, PooledBlocks(1), PooledBlocks(1500))  # E: Argument 1 to "encoder_admission_cap" has incompatible type "KernelSpec[EncoderTokens, Any]"; expected "ManagerSpec[PooledBlocks, Any]"  [arg-type]

# The seed's naive derivation re-enacted: encoder tokens handed to a pooled manager.
cap = manager.max_admission_blocks_per_request(EncoderTokens(1), PooledBlocks(1500))  # E: Argument 1 to "max_admission_blocks_per_request" of "ManagerSpec" has incompatible type "EncoderTokens"; expected "PooledBlocks"  [arg-type]
window_slots = PooledBlocks(model_window)  # E: Argument 1 to "PooledBlocks" has incompatible type "Window[EncoderTokens]"; expected "int"  [arg-type]
blocks = slots_to_cache_blocks_ceil(kernel_window, manager.block_size)  # E: No overload variant of "slots_to_cache_blocks_ceil" matches argument types "Window[EncoderTokens]", "BlockSize[PooledBlocks]"  [call-overload]
same = manager.sliding_window == kernel_window  # E: Non-overlapping equality check (left operand type: "Window[PooledBlocks]", right operand type: "Window[EncoderTokens]")  [comparison-overlap]

# The decoder's limits (tokens) used for the encoder's group (pooled blocks).
cap = manager.max_admission_blocks_per_request(PooledBlocks(1), engine.max_model_len)  # E: Argument 2 to "max_admission_blocks_per_request" of "ManagerSpec" has incompatible type "Tokens"; expected "PooledBlocks"  [arg-type]
width = manager.block_table_width(engine.max_encoder_len)  # E: Argument 1 to "block_table_width" of "ManagerSpec" has incompatible type "EncoderTokens | None"; expected "PooledBlocks"  [arg-type]

# Narrowing to a unit the view does not count in.
tokens_manager = manager.expect(EncoderTokens)  # E: Value of type variable "_U" of "expect" of "ManagerSpec" cannot be "EncoderTokens"  [type-var]
pooled_kernel = kernel.expect(PooledBlocks)  # E: Value of type variable "_K" of "expect" of "KernelSpec" cannot be "PooledBlocks"  [type-var]


def kernel_rows(spec: KernelSpec[EncoderTokens]) -> int:
    return spec.expect(EncoderTokens).tokens_per_block.numerical_value_in(EncoderTokens)


rows = kernel_rows(manager)  # E: Argument 1 to "kernel_rows" has incompatible type "ManagerSpec[PooledBlocks, Any]"; expected "KernelSpec[EncoderTokens, Any]"  [arg-type]
