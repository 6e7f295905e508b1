"""A pooled group stepped in encoder tokens: audio chunks that are not multiples of P.

The coordinator counts such a stream in encoder tokens; a step continues the partial pooled
slot the last one left, its slot mapping starts at that slot (what `kvunits.kernels.write_kv`
takes), and a sliding window evicts from the slot of the step's first position.
"""

from __future__ import annotations

import pytest

from kvunits.contracts import (
    Elements,
    EncoderTokens,
    FullAttentionLayer,
    KVHeads,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    Tokens,
    UnitTypeError,
    Window,
)
from kvunits.runtime import RequestError

from .support import check_pools, coordinator, snapshot

AUDIO = SlidingWindowLayer(
    sliding_window=Window(10, EncoderTokens),
    pool=PoolFactor(4),
    kv_heads=KVHeads(1),
    head_size=Elements(8),
)
TEXT = FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8))


def test_a_step_of_6_then_4_encoder_tokens_continues_the_partial_slot() -> None:
    # P = 4, block size 2 slots (8 encoder tokens a block).
    coord = coordinator({"audio": AUDIO}, block_size=2, num_blocks=10, max_in_flight=3)
    audio = coord.group("audio", EncoderTokens)
    step = coord.stepper(audio)
    step.admit("r", EncoderTokens(400))
    # Positions 0-5: slots 0 and 1 (slot 1 half full), both in block 1.
    assert step.allocate("r", EncoderTokens(6)) == [[2, 3]]
    # Positions 6-9: the second half of slot 1, then slot 2 (a new block, 2).
    assert step.allocate("r", EncoderTokens(4)) == [[3, 4]]
    inputs = coord.kernel_inputs("r", audio)
    assert inputs.slot_mapping == (3, 4)
    assert inputs.row_mapping == (14, 15, 16, 17)  # cache slot × 4 + position % 4
    assert inputs.seq_len == EncoderTokens(10) and inputs.step_len == EncoderTokens(4)
    assert coord.seq_len("r", audio) == EncoderTokens(10)
    assert coord.seq_len("r", coord.group("audio", PooledBlocks)) == PooledBlocks(3)
    assert coord.block_table("r", audio) == [1, 2]


def test_a_window_evicts_from_the_slot_of_the_step_s_first_position() -> None:
    # Window 9 encoder tokens at P = 4: W − 1 is a multiple of P, pool_window = 8 / 4 + 1 = 3
    # slots. Block size 1 slot, so each slot is its own block and evictions show one by one.
    layer = SlidingWindowLayer(
        sliding_window=Window(9, EncoderTokens),
        pool=PoolFactor(4),
        kv_heads=KVHeads(1),
        head_size=Elements(8),
    )
    coord = coordinator({"audio": layer}, block_size=1, num_blocks=20, max_in_flight=5)
    audio = coord.group("audio", EncoderTokens)
    step = coord.stepper(audio)
    step.admit("r", EncoderTokens(400))
    step.allocate("r", EncoderTokens(17))  # positions 0-16: slots 0-4, slot 4 holds one
    # The next query, position 17, sits in slot 4 and reads back to position 9 (slot 2): slots
    # 0-1 go, 2-4 stay. Counting from cdiv(17, 4) = 5 slots instead of slot 4 would free slot
    # 2 too, while the query still reads it.
    step.allocate("r", EncoderTokens(1))
    assert list(coord.block_table("r", audio)) == [0, 0, 3, 4, 5]


def test_limits_count_the_slots_a_step_touches() -> None:
    # max_in_flight 2 slots: 4 encoder tokens after 3 touch slots 0 and 1 (fine); 6 after 3
    # touch slots 0-2 (too many), though they add only cdiv(9, 4) − 1 = 2 new slots.
    coord = coordinator({"audio": AUDIO}, block_size=2, num_blocks=10, max_in_flight=2)
    audio = coord.group("audio", EncoderTokens)
    step = coord.stepper(audio)
    step.admit("r", EncoderTokens(38))  # 10 slots: cdiv(38, 4)
    step.allocate("r", EncoderTokens(3))
    before = snapshot(coord)
    with pytest.raises(RequestError, match=r"touches 3 pooled_block \(slots 0\.\.2\)"):
        step.allocate("r", EncoderTokens(6))
    assert snapshot(coord) == before
    step.allocate("r", EncoderTokens(5))  # positions 3-7: slots 0 and 1
    for _ in range(3):
        step.allocate("r", EncoderTokens(8))  # two whole slots a step: 32 positions, 8 slots
    # The request declared 10 slots; positions 32-40 would need an eleventh.
    with pytest.raises(RequestError, match=r"would hold 11 pooled_block \(8 \+ 3\)"):
        step.allocate("r", EncoderTokens(9))
    step.allocate("r", EncoderTokens(6))
    assert coord.seq_len("r", audio) == EncoderTokens(38)
    check_pools(coord)


def test_whole_pooled_blocks_and_encoder_tokens_step_the_same_group() -> None:
    coord = coordinator({"audio": AUDIO, "text": TEXT}, block_size=2, num_blocks=10, max_len=16)
    tokens, slots = coord.group("audio", EncoderTokens), coord.group("audio", PooledBlocks)
    text = coord.group("text", Tokens)
    coord.admit("r")
    coord.stepper(slots, text).allocate("r", PooledBlocks(1), Tokens(1))  # positions 0-3
    coord.stepper(tokens, text).allocate("r", EncoderTokens(2), Tokens(1))  # 4-5
    # A whole pooled block is P encoder tokens: positions 6-9, slots 1 (continued) and 2.
    assert coord.stepper(slots).allocate("r", PooledBlocks(1)) == [[3, 4]]
    assert coord.kernel_inputs("r", slots).seq_len == EncoderTokens(10)
    with pytest.raises(UnitTypeError, match="step this group in encoder tokens"):
        coord.stepper(slots).allocate("r", EncoderTokens(4))  # type: ignore[arg-type]
    with pytest.raises(UnitTypeError, match=r"coordinator.group\('text', Tokens\)"):
        coord.group("text", EncoderTokens)
