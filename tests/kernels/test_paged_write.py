"""The paged KV write: Triton kernel against the torch reference and a narrated toy case."""

from __future__ import annotations

import pytest
import torch

from kvunits.contracts import (
    Elements,
    EncoderTokens,
    KVHeads,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    Window,
    kernel_view,
)
from kvunits.kernels import (
    QueryStartLoc,
    SeqLens,
    SlotMapping,
    reference_write_kv,
    slot_start_loc,
    write_kv,
)

from ._scenario import DEVICE, PagedCache, Step, make_spec

#: (pool, block size in manager slots): None is an unpooled (token) layer.
GEOMETRIES = [
    (None, 1),
    (None, 16),
    (1, 4),
    (2, 1),
    (2, 4),
    (2, 16),
    (4, 1),
    (4, 4),
    (4, 16),
]


def _write_both(cache: PagedCache, ref: PagedCache, step: Step) -> None:
    spec = cache.spec
    key = cache.rows(
        step.num_rows,
        spec.kv_heads.numerical_value_in(KVHeads),
        spec.head_size_k.numerical_value_in(Elements),
    )
    value = cache.rows(
        step.num_rows,
        spec.kv_heads.numerical_value_in(KVHeads),
        spec.head_size_v.numerical_value_in(Elements),
    )
    args = (step.slot_mapping, step.query_start_loc, step.seq_lens, spec)
    write_kv(key, value, cache.k_cache, cache.v_cache, *args)
    reference_write_kv(key, value, ref.k_cache, ref.v_cache, *args)


def _assert_same(cache: PagedCache, ref: PagedCache) -> None:
    # Exact, NaN where nothing was written: the write moves bits, it computes nothing.
    torch.testing.assert_close(cache.k_cache, ref.k_cache, atol=0, rtol=0, equal_nan=True)
    torch.testing.assert_close(cache.v_cache, ref.v_cache, atol=0, rtol=0, equal_nan=True)


@pytest.mark.parametrize(("pool", "block_size"), GEOMETRIES)
def test_streamed_steps_match_reference(pool: int | None, block_size: int) -> None:
    """Chunked prefill then decode, with steps that start and end mid pooled block."""
    spec = make_spec(pool, block_size, sliding_window=None, kv_heads=3, head_k=16, head_v=8)
    cache = PagedCache.build(spec, num_requests=4, max_len=97, seed=block_size)
    ref = cache.clone()
    p = cache.pool
    # Lengths after each step: 54 and 97 at the end, one request idle in some steps, a
    # request whose length stays 1.
    schedule = [
        [13, 5, 1, 0],
        [7, 40, 0, 3],  # request 0 continues mid pooled block when P does not divide 13
        [34, 52, 0, 0],  # request 0 reaches 54: a partial last pooled block for P = 4
        [0, p, 0, 2 * p - 1],  # decode of one pooled block, and a ragged one
    ]
    for q_lens in schedule:
        _write_both(cache, ref, cache.step(q_lens))
        _assert_same(cache, ref)
    assert cache.lens == [54, 97 + p, 1, 3 + 2 * p - 1]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_dtypes_and_joint_cache(dtype: str) -> None:
    """K and V as strided views of one tensor (non-contiguous caches), each dtype."""
    spec = make_spec(4, 4, sliding_window=None, kv_heads=2, head_k=16, dtype=dtype)
    cache = PagedCache.build(spec, num_requests=2, max_len=60, seed=1, joint=True)
    assert not cache.k_cache.is_contiguous()
    ref = cache.clone()
    for q_lens in ([30, 9], [17, 4]):
        _write_both(cache, ref, cache.step(q_lens))
    _assert_same(cache, ref)


def test_padding_entries_are_skipped() -> None:
    spec = make_spec(4, 2, sliding_window=None)
    cache = PagedCache.build(spec, num_requests=2, max_len=32, seed=3)
    ref = cache.clone()
    step = cache.step([10, 9], skip_slots=frozenset({1, 3}))
    assert step.slot_mapping.tensor_in(step.slot_mapping.unit).tolist().count(-1) == 2
    _write_both(cache, ref, step)
    _assert_same(cache, ref)


def test_toy_case_row_by_row() -> None:
    """P = 4, block size 2 pooled slots = 8 encoder tokens per cache block.

    The request already holds 6 encoder tokens (pooled slots 0 and half of 1) and writes 5
    more, positions 6..10. They touch pooled slot 1 (positions 6, 7: the second half of a
    block the previous step started) and pooled slot 2 (positions 8, 9, 10: one short of
    full). Its block table is [6, 7], so slot 1 is manager slot 6 × 2 + 1 = 13 (cache block
    6, rows 4..7) and slot 2 is 7 × 2 + 0 = 14 (cache block 7, rows 0..3).
    """
    layer = SlidingWindowLayer(
        sliding_window=Window(9, EncoderTokens),
        pool=PoolFactor(4),
        kv_heads=KVHeads(1),
        head_size=Elements(16),
    )
    spec = kernel_view(layer, 2).expect(EncoderTokens)
    k_cache = torch.zeros(8, 8, 1, 16, dtype=torch.bfloat16, device=DEVICE)
    v_cache = torch.zeros_like(k_cache)
    # Row j of the step carries the value 100 + position (6 + j) in every element.
    positions = torch.arange(6, 11, device=DEVICE)
    key = (100 + positions).to(torch.bfloat16)[:, None, None].expand(5, 1, 16).contiguous()
    value = -key
    qsl = QueryStartLoc(torch.tensor([0, 5], dtype=torch.int32, device=DEVICE), EncoderTokens)
    lens = SeqLens(torch.tensor([11], dtype=torch.int32, device=DEVICE), EncoderTokens)
    assert slot_start_loc(qsl, lens, spec).tolist() == [0, 2]
    slots = SlotMapping(torch.tensor([13, 14], device=DEVICE), PooledBlocks)

    write_kv(key, value, k_cache, v_cache, slots, qsl, lens, spec)

    written = {
        (blk, row): int(k_cache[blk, row, 0, 0])
        for blk in range(8)
        for row in range(8)
        if k_cache[blk, row, 0, 0] != 0
    }
    # Positions 6, 7 -> block 6 rows 6, 7 (slot offset 1 × P + i, i = 2, 3); rows 4, 5 of
    # block 6 (positions 4, 5, written last step) untouched. Positions 8..10 -> block 7 rows
    # 0..2; row 3 (position 11, not computed yet) untouched.
    assert written == {(6, 6): 106, (6, 7): 107, (7, 0): 108, (7, 1): 109, (7, 2): 110}
    assert torch.equal(v_cache, -k_cache)


def test_empty_step_is_a_no_op() -> None:
    spec = make_spec(4, 4, sliding_window=None)
    cache = PagedCache.build(spec, num_requests=2, max_len=16, seed=0)
    before = cache.clone()
    _write_both(cache, before.clone(), cache.step([0, 0]))
    _assert_same(cache, before)


def test_key_value_views_of_a_fused_projection() -> None:
    """K and V as column slices of one [rows, 3 × heads, head] QKV output: row stride
    3 × heads × head, not heads × head; -1 entries in the middle of a request skipped; an
    int32 slot mapping with int64 offsets and lengths."""
    spec = make_spec(2, 4, sliding_window=None, kv_heads=2, head_k=16)
    cache = PagedCache.build(spec, num_requests=2, max_len=40, seed=4)
    ref = cache.clone()
    for q_lens, skip in (([9, 20], frozenset({6})), ([15, 3], frozenset())):
        step = cache.step(q_lens, skip_slots=skip)
        fused = cache.rows(step.num_rows, 6, 16)
        key, value = fused[:, 2:4], fused[:, 4:6]
        assert key.stride(0) == 6 * 16
        slots = SlotMapping(step.slot_mapping.tensor_in(step.slot_mapping.unit).int(), PooledBlocks)
        qsl = QueryStartLoc(
            step.query_start_loc.tensor_in(step.query_start_loc.unit).long(), EncoderTokens
        )
        lens = SeqLens(step.seq_lens.tensor_in(step.seq_lens.unit).long(), EncoderTokens)
        write_kv(key, value, cache.k_cache, cache.v_cache, slots, qsl, lens, spec)
        reference_write_kv(key, value, ref.k_cache, ref.v_cache, slots, qsl, lens, spec)
    _assert_same(cache, ref)
