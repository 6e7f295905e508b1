"""The residency check, and the seed's window (188) against the tight one (189).

The Voxtral Realtime encoder layer: W = 750 encoder tokens, P = 4, block size 16 pooled
slots (64 encoder tokens per cache block). A stream decodes one pooled block (4 encoder
tokens) per step. Before each step the manager frees, as vLLM does, every block wholly below
slot ``num_computed − window_slots + 1`` (its table entry becomes the null block 0).
"""

from __future__ import annotations

import pickle

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kvunits.contracts import (
    Elements,
    EncoderTokens,
    FullAttentionLayer,
    KernelSpec,
    KVHeads,
    KvUnitsError,
    PooledBlocks,
    PoolFactor,
    Position,
    SlidingWindowLayer,
    Window,
    kernel_view,
    manager_view,
    pool_length,
)
from kvunits.contracts.crossing import first_unresident
from kvunits.contracts.internal import cdiv
from kvunits.kernels import (
    BlockTable,
    QueryStartLoc,
    ResidencyError,
    SeqLens,
    check_residency,
    paged_attention,
)

from ._scenario import DEVICE

LAYER = SlidingWindowLayer(
    sliding_window=Window(750, EncoderTokens),
    pool=PoolFactor(4),
    kv_heads=KVHeads(1),
    head_size=Elements(16),
)
P = 4
BLOCK_SIZE = 16  # pooled slots per cache block


def _spec() -> KernelSpec[EncoderTokens]:
    return kernel_view(LAYER, BLOCK_SIZE).expect(EncoderTokens)


def _decode_step(slot: int) -> tuple[QueryStartLoc[EncoderTokens], SeqLens[EncoderTokens]]:
    """The step that computes pooled slot ``slot``: its 4 encoder tokens are the queries."""
    qsl = QueryStartLoc(torch.tensor([0, P], dtype=torch.int32, device=DEVICE), EncoderTokens)
    lens = SeqLens(torch.tensor([P * (slot + 1)], dtype=torch.int32, device=DEVICE), EncoderTokens)
    return qsl, lens


def _stream(window_slots: int, num_slots: int) -> tuple[list[int], ResidencyError | None, int]:
    """Decode ``num_slots`` pooled slots under a manager window of ``window_slots``.

    Returns the block table when it stopped, the first `ResidencyError` (None if none) and
    the slot whose step raised it (or ``num_slots``).
    """
    spec = _spec()
    table = [0] * cdiv(num_slots, BLOCK_SIZE)
    next_block = 1
    for slot in range(num_slots):
        # Manager, before the step: num_computed = slot pooled slots are in the cache.
        first_kept = slot - window_slots + 1
        for col in range(max(0, first_kept) // BLOCK_SIZE):
            table[col] = 0
        if table[slot // BLOCK_SIZE] == 0:
            table[slot // BLOCK_SIZE] = next_block
            next_block += 1
        qsl, lens = _decode_step(slot)
        block_table = BlockTable(torch.tensor([table], dtype=torch.int32, device=DEVICE))
        try:
            check_residency(block_table, qsl, lens, spec)
        except ResidencyError as exc:
            return table, exc, slot
    return table, None, num_slots


def test_manager_windows() -> None:
    manager = manager_view(LAYER, BLOCK_SIZE).expect(PooledBlocks)
    assert manager.sliding_window == Window(189, PooledBlocks)  # pool_window: cdiv(750 − 1, 4) + 1
    assert pool_length(EncoderTokens(750), PoolFactor(4)) == PooledBlocks(188)  # the seed's


def test_seed_window_188_evicts_a_block_the_kernel_reads() -> None:
    # Slot 203 is the first step where the eviction point, 203 − 188 + 1 = 16, falls on a
    # block boundary: block 0 (slots 0..15, encoder tokens 0..63) is freed. The step's first
    # query, encoder token 4 × 203 = 812, still needs key 812 − 749 = 63, in that block.
    table, error, slot = _stream(188, 300)
    assert error is not None
    assert slot == 203
    assert table[0] == 0
    assert error.request == 0
    assert error.query_position == Position(812, EncoderTokens)
    assert error.logical_block == 0
    assert error.table_entry == 0
    assert "needs keys 63..812" in str(error)
    assert "null block 0" in str(error)


def test_tight_window_189_keeps_every_needed_block() -> None:
    table, error, slot = _stream(189, 300)
    assert error is None
    assert slot == 300
    # Not vacuous: the manager did evict. At the last step (slot 299) it keeps slots from
    # 299 − 189 + 1 = 111 on, so blocks 0..5 (slots 0..95) are freed, blocks 6..18 held.
    assert table[:6] == [0] * 6
    assert all(entry > 0 for entry in table[6:])


def test_the_wrapper_option_raises_before_launching() -> None:
    """Through `paged_attention(check_residency=True)` at the step that trips 188."""
    spec = _spec()
    num_blocks = 24
    k_cache = torch.zeros(num_blocks, BLOCK_SIZE * P, 1, 16, dtype=torch.bfloat16, device=DEVICE)
    query = torch.ones(P, 1, 16, dtype=torch.bfloat16, device=DEVICE)
    qsl, lens = _decode_step(203)
    for window_slots, raises in ((188, True), (189, False)):
        table, _, _ = _stream(window_slots, 204)
        block_table = BlockTable(torch.tensor([table], dtype=torch.int32, device=DEVICE))
        args = (query, k_cache, k_cache, block_table, qsl, lens, spec)
        if raises:
            with pytest.raises(ResidencyError, match=r"request 0: the query at encoder_token "
                               r"position 812 needs keys 63\.\.812 .* column 0"):  # fmt: skip
                paged_attention(*args, check_residency=True)
        else:
            out = paged_attention(*args, check_residency=True)
            assert torch.equal(out, torch.zeros_like(out))


def test_beyond_the_table() -> None:
    spec = _spec()
    qsl, lens = _decode_step(20)  # encoder positions 80..83: column 1
    table = BlockTable(torch.tensor([[5]], dtype=torch.int32))
    with pytest.raises(ResidencyError, match=r"column 1 .*beyond the table's 1 columns") as info:
        check_residency(table, qsl, lens, spec)
    assert info.value.table_entry is None
    assert info.value.query_position == Position(80, EncoderTokens)


def test_the_window_decides_which_blocks_are_needed() -> None:
    spec = _spec()
    qsl, lens = _decode_step(20)  # queries at encoder positions 80..83
    table = BlockTable(torch.tensor([[0, 7]], dtype=torch.int32))
    # W = 10: keys 71..83, all in column 1.
    check_residency(table, qsl, lens, spec, sliding_window=Window(10, EncoderTokens))
    # W = 750 (the spec's): the query at 80 needs keys from 0, in column 0.
    with pytest.raises(ResidencyError, match=r"column 0 .* null block 0: .* = 189 slots") as info:
        check_residency(table, qsl, lens, spec)
    assert info.value.query_position == Position(80, EncoderTokens)


def test_residency_error_is_a_kvunits_lookup_error_and_pickles() -> None:
    error = ResidencyError(
        "request 1 ...", request=1, query_position=Position(812, EncoderTokens), logical_block=0,
        table_entry=0,
    )  # fmt: skip
    assert isinstance(error, KvUnitsError)
    assert isinstance(error, LookupError)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is ResidencyError
    assert (copy.request, copy.query_position, copy.logical_block, copy.table_entry) == (
        1,
        Position(812, EncoderTokens),
        0,
        0,
    )
    assert str(copy) == "request 1 ..."


@given(
    pool=st.integers(1, 4),
    block_size=st.integers(1, 4),
    window=st.one_of(st.none(), st.integers(1, 40)),
    table=st.lists(st.integers(0, 9), min_size=1, max_size=12),
    context=st.integers(0, 80),
    step=st.integers(1, 12),
)
def test_the_torch_free_rule_is_the_kernels_check(
    pool: int, block_size: int, window: int | None, table: list[int], context: int, step: int
) -> None:
    """`kvunits.contracts.crossing.first_unresident` (used without torch by ``kvunits simulate``)
    finds exactly what `check_residency` raises: the same query, column and entry."""
    layer = SlidingWindowLayer(
        sliding_window=Window(window or 1, EncoderTokens),
        pool=PoolFactor(pool),
        kv_heads=KVHeads(1),
        head_size=Elements(16),
    )
    spec = kernel_view(layer, block_size).expect(EncoderTokens)
    tpb = spec.tokens_per_block.numerical_value_in(EncoderTokens)
    override = Window(window, EncoderTokens) if window is not None else None
    if window is None:
        spec = kernel_view(
            FullAttentionLayer(pool=PoolFactor(pool), kv_heads=KVHeads(1), head_size=Elements(16)),
            block_size,
        ).expect(EncoderTokens)
    block_table = BlockTable(torch.tensor([table], dtype=torch.int32))
    qsl = QueryStartLoc(torch.tensor([0, step], dtype=torch.int32), EncoderTokens)
    lens = SeqLens(torch.tensor([context + step], dtype=torch.int32), EncoderTokens)
    found = first_unresident(table, tpb, context, step, sliding_window=window)
    if found is None:
        check_residency(block_table, qsl, lens, spec, sliding_window=override)
        return
    query, key, column = found
    with pytest.raises(ResidencyError) as info:
        check_residency(block_table, qsl, lens, spec, sliding_window=override)
    assert info.value.query_position == Position(query, EncoderTokens)
    assert info.value.logical_block == column
    assert info.value.table_entry == (table[column] if column < len(table) else None)
    assert column * tpb <= key <= query
