"""Manager units to kernel units for pooled groups: rows ``slot × P + i``, lengths in tokens."""

from __future__ import annotations

import re

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
from runtime import (
    PooledKernelInputs,
    expand_slot_mapping,
    kernel_seq_len,
    pooled_kernel_inputs,
)


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


def test_bare_ints_for_the_pool_or_the_block_size_raise_unit_type_error() -> None:
    # A bare 4 is neither a PoolFactor nor a BlockSize: the boundary names the argument
    # instead of failing with an AttributeError deep inside.
    with pytest.raises(UnitTypeError, match="pool must be a PoolFactor"):
        expand_slot_mapping([5], 4)  # type: ignore[arg-type]
    with pytest.raises(UnitTypeError, match="pool must be a PoolFactor"):
        kernel_seq_len(PooledBlocks(2), 4)  # type: ignore[arg-type]
    with pytest.raises(UnitTypeError, match="pool must be a PoolFactor"):
        pooled_kernel_inputs(
            block_table=[1],
            slot_mapping_slots=[16],
            num_slots=PooledBlocks(1),
            block_size=BlockSize(16, PooledBlocks),
            pool=4,  # type: ignore[arg-type]
        )
    with pytest.raises(UnitTypeError, match="block_size must be a BlockSize of pooled_block"):
        pooled_kernel_inputs(
            block_table=[1],
            slot_mapping_slots=[16],
            num_slots=PooledBlocks(1),
            block_size=16,  # type: ignore[arg-type]
            pool=PoolFactor(4),
        )


def test_step_tokens_and_seq_len_say_the_same_thing() -> None:
    # Slots 0-1, P = 4, and the step wrote slot 1 (cache slot 17, rows 68-71). The step's
    # last pooled block is the sequence's last, so its token count and the sequence length
    # follow from each other: 2 tokens in the step is a sequence of 4 + 2 = 6.
    def inputs(
        step: list[int], step_tokens: int | None = None, seq_len: int | None = None
    ) -> PooledKernelInputs:
        return pooled_kernel_inputs(
            block_table=[1],
            slot_mapping_slots=step,
            num_slots=PooledBlocks(2),
            block_size=BlockSize(16, PooledBlocks),
            pool=PoolFactor(4),
            step_tokens=None if step_tokens is None else EncoderTokens(step_tokens),
            seq_len=None if seq_len is None else EncoderTokens(seq_len),
        )

    both = inputs([17], step_tokens=2, seq_len=6)
    assert (both.slot_mapping_tokens, both.seq_len) == ((68, 69), EncoderTokens(6))
    assert inputs([17], step_tokens=2) == both
    # Only the exact length: the step's rows stop where the sequence does. A kernel given
    # rows 68-71 and a length of 7 would write a row it never reads (or, the other way round,
    # read a row no step wrote).
    only_len = inputs([17], seq_len=7)
    assert (only_len.slot_mapping_tokens, only_len.seq_len) == ((68, 69, 70), EncoderTokens(7))
    with pytest.raises(
        UnitValueError,
        match=re.escape(
            "seq_len is 8 encoder_token but the latest step's 2 encoder_token end the "
            "sequence at 6 encoder_token"
        ),
    ):
        inputs([17], step_tokens=2, seq_len=8)
    # A step of no slots says nothing about the last pooled block: the length is checked
    # against the slots only.
    assert inputs([], seq_len=7).seq_len == EncoderTokens(7)
    assert inputs([], step_tokens=0).seq_len == EncoderTokens(8)
    with pytest.raises(UnitValueError, match="seq_len is 4 encoder_token"):
        inputs([], seq_len=4)
