"""Manager units to kernel units for pooled groups: rows ``slot × P + i``, lengths in tokens."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts import (
    BlockSize,
    EncoderTokens,
    PooledBlocks,
    PoolFactor,
    UnitTypeError,
    UnitValueError,
)
from runtime import expand_slot_mapping, kernel_seq_len, pooled_kernel_inputs


def test_expand_and_truncate() -> None:
    assert expand_slot_mapping([5, 9], PoolFactor(3)) == [15, 16, 17, 27, 28, 29]
    assert expand_slot_mapping([5, 9], PoolFactor(3), EncoderTokens(4)) == [15, 16, 17, 27]
    assert expand_slot_mapping([], PoolFactor(3), EncoderTokens(0)) == []
    assert expand_slot_mapping([7], PoolFactor(1)) == [7]
    with pytest.raises(UnitValueError, match=r"hold 4\.\.6 encoder_token"):
        expand_slot_mapping([5, 9], PoolFactor(3), EncoderTokens(3))
    with pytest.raises(UnitTypeError, match="num_tokens must be EncoderTokens"):
        expand_slot_mapping([5], PoolFactor(3), PooledBlocks(1))  # type: ignore[arg-type]


def test_sequence_length_in_encoder_tokens() -> None:
    assert kernel_seq_len(PooledBlocks(188), PoolFactor(4)) == EncoderTokens(752)
    assert kernel_seq_len(PooledBlocks(188), PoolFactor(4), EncoderTokens(750)) == EncoderTokens(
        750
    )
    assert kernel_seq_len(PooledBlocks(0), PoolFactor(4), EncoderTokens(0)) == EncoderTokens(0)
    with pytest.raises(UnitValueError, match="seq_len is 748 encoder_token"):
        kernel_seq_len(PooledBlocks(188), PoolFactor(4), EncoderTokens(748))
    with pytest.raises(UnitTypeError):
        kernel_seq_len(EncoderTokens(188), PoolFactor(4))  # type: ignore[arg-type]


@given(
    pool=st.integers(1, 6),
    block_size=st.integers(1, 8),
    start=st.integers(0, 40),
    n=st.integers(1, 10),
    cut=st.integers(0, 5),
    data=st.data(),
)
def test_rows_are_the_same_cache_positions(
    pool: int, block_size: int, start: int, n: int, cut: int, data: st.DataObject
) -> None:
    """Row r of the kernel's view is encoder token r % (B·P) of block r // (B·P); it must be
    the token the manager put in slot (r // P) at offset r % P."""
    table = data.draw(
        st.lists(st.integers(1, 99), min_size=(start + n - 1) // block_size + 1, unique=True)
    )
    slots = [table[q // block_size] * block_size + q % block_size for q in range(start, start + n)]
    step_tokens = max(n * pool - min(cut, pool - 1), (n - 1) * pool + 1)
    inputs = pooled_kernel_inputs(
        block_table=table,
        slot_mapping_slots=slots,
        num_slots=PooledBlocks(start + n),
        block_size=BlockSize(block_size, PooledBlocks),
        pool=PoolFactor(pool),
        step_tokens=EncoderTokens(step_tokens),
    )
    rows_per_block = inputs.tokens_per_block.slots
    assert rows_per_block == block_size * pool
    assert len(inputs.slot_mapping_tokens) == step_tokens
    for t, row in enumerate(inputs.slot_mapping_tokens):
        token = start * pool + t  # the step's t-th encoder token
        block, offset = divmod(row, rows_per_block)
        assert block == table[token // pool // block_size]
        assert offset == (token // pool % block_size) * pool + token % pool
    assert inputs.seq_len.value == (start + n) * pool - (n * pool - step_tokens)
