"""The torch references against loops one can check by eye (so the kernels' yardstick is
itself checked)."""

from __future__ import annotations

import math

import pytest
import torch

from kvunits.contracts import EncoderTokens, KVHeads, PooledBlocks
from kvunits.kernels import (
    BlockTable,
    QueryStartLoc,
    SeqLens,
    SlotMapping,
    reference_paged_attention,
    reference_write_kv,
)

from ._scenario import PagedCache, make_spec


def _naive_attention(
    cache: PagedCache, query: torch.Tensor, starts: list[int], lens: list[int], window: int | None
) -> torch.Tensor:
    tpb = cache.spec.tokens_per_block.numerical_value_in(cache.spec.seq_unit)
    group = query.shape[1] // cache.spec.kv_heads.numerical_value_in(KVHeads)
    scale = 1.0 / math.sqrt(query.shape[2])
    out = torch.zeros(query.shape[0], query.shape[1], cache.v_cache.shape[-1])
    for r, seq_len in enumerate(lens):
        q_len = starts[r + 1] - starts[r]
        for j in range(q_len):
            pos = seq_len - q_len + j
            first = 0 if window is None else max(0, pos - window + 1)
            for head in range(query.shape[1]):
                kv_head = head // group
                keys, values = [], []
                for k in range(first, pos + 1):
                    blk = int(cache.table[r, k // tpb])
                    keys.append(cache.k_cache[blk, k % tpb, kv_head].float())
                    values.append(cache.v_cache[blk, k % tpb, kv_head].float())
                scores = torch.stack(keys) @ query[starts[r] + j, head].float() * scale
                out[starts[r] + j, head] = torch.softmax(scores, 0) @ torch.stack(values)
    return out


@pytest.mark.parametrize("window", [1, 5, 9, None])
@pytest.mark.parametrize(("pool", "block_size"), [(None, 2), (4, 1), (2, 2)])
def test_reference_attention_matches_loops(
    pool: int | None, block_size: int, window: int | None
) -> None:
    spec = make_spec(pool, block_size, window, kv_heads=2, head_k=16, head_v=8)
    cache = PagedCache.build(spec, num_requests=3, max_len=13, seed=7)
    tpb = spec.tokens_per_block.numerical_value_in(spec.seq_unit)
    # Fill every row with data the loops can read (no NaN: the loops do not mask).
    cache.k_cache.normal_(generator=cache.generator)
    cache.v_cache.normal_(generator=cache.generator)
    starts, lens = [0, 3, 8, 8], [13, 5, 2]  # request 2 is idle this step
    query = cache.rows(8, 4, 16)
    unit = spec.seq_unit
    got = reference_paged_attention(
        query, cache.k_cache, cache.v_cache, BlockTable(cache.table),
        QueryStartLoc(torch.tensor(starts), unit), SeqLens(torch.tensor(lens), unit), spec,
    )  # fmt: skip
    assert tpb * cache.table.shape[1] >= 13
    torch.testing.assert_close(got, _naive_attention(cache, query, starts, lens, window))


def test_reference_write_by_hand() -> None:
    """P = 4, 2 pooled slots per block (see the kernel's toy case): slots 13 and 14."""
    spec = make_spec(4, 2, 9, kv_heads=1).expect(EncoderTokens)
    k_cache = torch.zeros(8, 8, 1, 16)
    v_cache = torch.zeros(8, 8, 1, 16)
    key = torch.arange(106, 111, dtype=torch.float32)[:, None, None].expand(5, 1, 16)
    reference_write_kv(
        key, -key, k_cache, v_cache,
        SlotMapping(torch.tensor([13, 14]), PooledBlocks),
        QueryStartLoc(torch.tensor([0, 5]), EncoderTokens),
        SeqLens(torch.tensor([11]), EncoderTokens),
        spec,
    )  # fmt: skip
    written = (k_cache[..., 0, 0] != 0).nonzero().tolist()
    nonzero = {(b, r): int(k_cache[b, r, 0, 0]) for b, r in written}
    assert nonzero == {(6, 6): 106, (6, 7): 107, (7, 0): 108, (7, 1): 109, (7, 2): 110}
    assert torch.equal(v_cache, -k_cache)
