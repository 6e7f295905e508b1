"""Paged sliding-window attention: Triton kernel against the torch reference.

Each case streams a history into the cache (chunks that start and end mid pooled block),
then runs one mixed step: a chunked-prefill request at length 54, a decode request at 97, a
short prefill from empty and an idle request. Before the step, every block no query of the
step needs is evicted (nulled in the table) and poisoned with NaN, and so is the null
block: a kernel that reads one of them outputs NaN. The history is written with the torch
reference (the write kernel has its own tests; under the interpreter it dominates the time),
except where a test says it checks the two kernels together.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from kvunits.contracts import (
    Elements,
    KernelSpec,
    KVHeads,
    Window,
)
from kvunits.kernels import (
    BlockTable,
    QueryStartLoc,
    SeqLens,
    paged_attention,
    reference_paged_attention,
    reference_write_kv,
    write_kv,
)

from ._scenario import DEVICE, TOLERANCES, TORCH_DTYPES, PagedCache, Step, make_spec
from .test_paged_write import GEOMETRIES


def _history_and_step(
    spec: KernelSpec[Any],
    *,
    decode_only: bool = False,
    seed: int = 0,
    joint: bool = False,
    kernel_write: bool = False,
) -> tuple[PagedCache, Step, torch.Tensor]:
    cache = PagedCache.build(spec, num_requests=4, max_len=97 + 4, seed=seed, joint=joint)
    p = cache.pool
    final = [[0, p, 0, 0]] if decode_only else [[13, p, 7, 0]]
    history = [[19, 45, 0, 1], [22, 97 - 45 - p, 0, 0]] if not decode_only else [[54, 93, 7, 1]]
    write = write_kv if kernel_write else reference_write_kv
    for q_lens in [*history, *final]:
        step = cache.step(q_lens)
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
        write(key, value, cache.k_cache, cache.v_cache, step.slot_mapping,
              step.query_start_loc, step.seq_lens, spec)  # fmt: skip
    num_heads = spec.kv_heads.numerical_value_in(KVHeads) * 2
    query = cache.rows(step.num_rows, num_heads, spec.head_size_k.numerical_value_in(Elements))
    return cache, step, query


def _compare(
    cache: PagedCache,
    step: Step,
    query: torch.Tensor,
    *,
    sliding_window: Any = None,
    scale: float | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    spec = cache.spec
    table = BlockTable(cache.table)
    args = (query, cache.k_cache, cache.v_cache, table, step.query_start_loc, step.seq_lens)
    out = paged_attention(
        *args, spec, sliding_window=sliding_window, scale=scale, check_residency=True, out=out
    )
    expected = reference_paged_attention(*args, spec, sliding_window=sliding_window, scale=scale)
    assert torch.isfinite(out).all(), "the kernel read a poisoned (evicted or null) block"
    atol, rtol = TOLERANCES[query.dtype]
    torch.testing.assert_close(out, expected, atol=atol, rtol=rtol)
    return out


WINDOWS = ["one", "multiple_of_p_plus_one", "ten", "longer_than_sequence", "none"]


def _window(name: str, pool: int | None) -> int | None:
    p = pool or 1
    return {
        "one": 1,  # the query sees itself only
        "multiple_of_p_plus_one": 4 * p + 1,  # W − 1 a multiple of P: cdiv(W−1, P) is exact
        "ten": 10,
        "longer_than_sequence": 1000,
        "none": None,  # a full-attention layer: causal
    }[name]


@pytest.mark.parametrize("window_name", WINDOWS)
@pytest.mark.parametrize(("pool", "block_size"), GEOMETRIES)
def test_geometries_fp32(pool: int | None, block_size: int, window_name: str) -> None:
    window = _window(window_name, pool)
    spec = make_spec(pool, block_size, window, kv_heads=2, head_k=16)
    cache, step, query = _history_and_step(spec, seed=block_size)
    dropped = cache.evict_outside(step, window)
    if window is not None and window <= 10:
        assert dropped > 0  # the case exercises eviction
    _compare(cache, step, query)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize(("pool", "block_size"), [(None, 16), (2, 4), (4, 1), (4, 16)])
def test_half_precision(pool: int | None, block_size: int, dtype: str) -> None:
    spec = make_spec(pool, block_size, 10, kv_heads=2, head_k=32, dtype=dtype)
    cache, step, query = _history_and_step(spec)
    cache.evict_outside(step, 10)
    out = _compare(cache, step, query)
    assert out.dtype == TORCH_DTYPES[dtype]


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_decode_step(dtype: str) -> None:
    """Voxtral-like decode: each stream adds one pooled block (P = 4 encoder tokens)."""
    spec = make_spec(4, 16, 17, kv_heads=2, head_k=32, dtype=dtype)
    cache, step, query = _history_and_step(spec, decode_only=True, kernel_write=True)
    assert step.q_lens == [0, 4, 0, 0]
    cache.evict_outside(step, 17)
    _compare(cache, step, query)


def test_gqa_group_of_three_and_unequal_heads() -> None:
    """6 query heads over 2 KV heads (a group that is no power of two), K head 24, V head 8."""
    spec = make_spec(2, 4, 10, kv_heads=2, head_k=24, head_v=8)
    cache, step, _ = _history_and_step(spec)
    query = cache.rows(step.num_rows, 6, 24)
    cache.evict_outside(step, 10)
    out = _compare(cache, step, query)
    assert out.shape == (step.num_rows, 6, 8)


def test_scale_window_override_and_out() -> None:
    spec = make_spec(4, 4, 10)
    cache, step, query = _history_and_step(spec)
    out = torch.empty(step.num_rows, query.shape[1], 16, device=DEVICE)
    window = Window(6, spec.seq_unit)
    got = _compare(cache, step, query, sliding_window=window, scale=0.3, out=out)
    assert got.data_ptr() == out.data_ptr()


def test_window_one_is_the_value_of_the_query_itself() -> None:
    """With W = 1 each query sees only its own key, so the output is its own V row."""
    spec = make_spec(4, 4, 1, kv_heads=1)
    cache, step, query = _history_and_step(spec)
    out = _compare(cache, step, query)
    qsl = step.query_start_loc.tensor_in(step.query_start_loc.unit).tolist()
    tpb = spec.tokens_per_block.numerical_value_in(spec.seq_unit)
    for r, (ctx, q_len) in enumerate(zip(step.context, step.q_lens, strict=True)):
        for j in range(q_len):
            pos = ctx + j
            blk = int(cache.table[r, pos // tpb])
            expected = cache.v_cache[blk, pos % tpb, 0]
            for head in range(query.shape[1]):
                torch.testing.assert_close(out[qsl[r] + j, head], expected)


def test_uniform_keys_average_the_window() -> None:
    """Equal keys: softmax is flat over the window, so the output is the mean of its values."""
    spec = make_spec(4, 2, 5, kv_heads=1)
    cache = PagedCache.build(spec, num_requests=1, max_len=20)
    step = cache.step([20])
    key = torch.ones(20, 1, 16, device=DEVICE)
    value = torch.arange(20, dtype=torch.float32, device=DEVICE)[:, None, None].expand(20, 1, 16)
    write_kv(key, value.contiguous(), cache.k_cache, cache.v_cache, step.slot_mapping,
             step.query_start_loc, step.seq_lens, spec)  # fmt: skip
    out = paged_attention(
        torch.ones(20, 1, 16, device=DEVICE), cache.k_cache, cache.v_cache,
        BlockTable(cache.table), step.query_start_loc, step.seq_lens, spec,
    )  # fmt: skip
    means = [sum(range(max(0, q - 4), q + 1)) / (q + 1 - max(0, q - 4)) for q in range(20)]
    torch.testing.assert_close(out[:, 0, 0].cpu(), torch.tensor(means))
    assert not math.isnan(float(out.sum()))


def test_strided_caches_and_int64_metadata() -> None:
    """K and V as views of one [N, 2, ...] tensor; block table and lengths in int64."""
    spec = make_spec(4, 4, 10, kv_heads=2, head_k=16)
    cache, step, query = _history_and_step(spec, joint=True, kernel_write=True)
    assert not cache.k_cache.is_contiguous()
    cache.evict_outside(step, 10)
    cache.table = cache.table.long()
    wide = Step(
        q_lens=step.q_lens,
        context=step.context,
        query_start_loc=QueryStartLoc(
            step.query_start_loc.tensor_in(step.query_start_loc.unit).long(), spec.seq_unit
        ),
        seq_lens=SeqLens(step.seq_lens.tensor_in(step.seq_lens.unit).long(), spec.seq_unit),
        slot_mapping=step.slot_mapping,
    )
    _compare(cache, wide, query)


@pytest.mark.parametrize("group", [1, 3])
def test_tall_prefill_tiles_strided_query(group: int) -> None:
    """Long chunks take the prefill tiling (64 rows a tile: 64 queries, or 16 × a group of 3
    padded to 4), with tiles that straddle request boundaries; head sizes 20 and 12 are no
    powers of two (12 < 16, the smallest dot); the query and the output are column slices
    of wider tensors (a fused QKV projection), so their row stride is not heads × head."""
    spec = make_spec(4, 2, 40, kv_heads=2, head_k=20, head_v=12)
    cache = PagedCache.build(spec, num_requests=3, max_len=220, seed=5)
    for q_lens in ([90, 5, 0], [70, 0, 130]):  # request 1 idle in the measured step
        step = cache.step(q_lens)
        key = cache.rows(step.num_rows, 2, 20)
        value = cache.rows(step.num_rows, 2, 12)
        reference_write_kv(key, value, cache.k_cache, cache.v_cache, step.slot_mapping,
                           step.query_start_loc, step.seq_lens, spec)  # fmt: skip
    assert cache.evict_outside(step, 40) > 0
    heads = 2 * group
    fused = cache.rows(step.num_rows, 3 * heads, 20)
    query = fused[:, heads : 2 * heads]
    out_wide = torch.full((step.num_rows, heads + 1, 12), float("nan"), device=DEVICE)
    out = out_wide[:, 1:]
    assert query.stride(0) == 3 * heads * 20 and not out.is_contiguous()
    got = _compare(cache, step, query, out=out)
    assert got.data_ptr() == out.data_ptr()
    assert torch.isnan(out_wide[:, 0]).all()  # the neighbouring column is not touched


def test_negative_block_id_is_never_read() -> None:
    """With validate=False the launcher trusts the table; a -1 in a needed column must not
    send the kernel to the memory before the cache: its keys are skipped. One decode query
    under full attention sees every key, so skipping column 1 equals attending to a request
    whose table is the other columns (positions shift, visibility does not)."""
    spec = make_spec(None, 4, None, kv_heads=1)
    cache = PagedCache.build(spec, num_requests=1, max_len=13, seed=2)
    history = cache.step([12])
    key, value = cache.rows(12, 1, 16), cache.rows(12, 1, 16)
    reference_write_kv(key, value, cache.k_cache, cache.v_cache, history.slot_mapping,
                       history.query_start_loc, history.seq_lens, spec)  # fmt: skip
    step = cache.step([1])
    key, value = cache.rows(1, 1, 16), cache.rows(1, 1, 16)
    reference_write_kv(key, value, cache.k_cache, cache.v_cache, step.slot_mapping,
                       step.query_start_loc, step.seq_lens, spec)  # fmt: skip
    query = cache.rows(1, 2, 16)
    table = cache.table.clone()
    table[0, 1] = -1  # positions 4..7
    got = paged_attention(query, cache.k_cache, cache.v_cache, BlockTable(table),
                          step.query_start_loc, step.seq_lens, spec, validate=False)  # fmt: skip
    kept = torch.cat([cache.table[:, :1], cache.table[:, 2:]], dim=1)
    shorter = SeqLens(step.seq_lens.tensor_in(step.seq_lens.unit) - 4, spec.seq_unit)
    expected = reference_paged_attention(query, cache.k_cache, cache.v_cache, BlockTable(kept),
                                         step.query_start_loc, shorter, spec)  # fmt: skip
    torch.testing.assert_close(got, expected, atol=2e-5, rtol=2e-5)
