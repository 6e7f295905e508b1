"""Cache offsets past 2^31 elements: the kernels must address the cache with int64.

A bf16 cache of 2^31 + a few blocks of elements is 4 GiB per K or V tensor. On the CPU the
caches are ``torch.empty``, so only the pages of the blocks used are ever touched (the whole
test stays under 0.5 GB resident); where the host will not even reserve the address space,
the test skips. Under the interpreter an int32 offset wraps and the kernel faults; on a GPU
it reads the wrong block or faults.
"""

from __future__ import annotations

import pytest
import torch

from kvunits.contracts import EncoderTokens, PooledBlocks
from kvunits.contracts.internal import cdiv
from kvunits.kernels import (
    BlockTable,
    QueryStartLoc,
    SeqLens,
    SlotMapping,
    paged_attention,
    reference_paged_attention,
    reference_write_kv,
    write_kv,
)

from ._scenario import DEVICE, make_spec

P, BLOCK_SIZE, HEAD = 4, 16, 64  # 64 encoder tokens × 1 head × 64 = 4096 elements a block


def test_blocks_past_two_to_the_31_elements() -> None:
    """One request of 300 encoder tokens (5 blocks) at the very end of a 2^31 + 8 block
    cache: its first element sits at offset (2^19 + 3) × 4096 > 2^31. The same rows written
    to a 6-block cache by the reference give the expected cache rows and attention."""
    spec = make_spec(P, BLOCK_SIZE, 750, kv_heads=1, head_k=HEAD, dtype="bfloat16")
    tpb = spec.tokens_per_block.numerical_value_in(spec.seq_unit)
    num_blocks = (1 << 31) // (tpb * HEAD) + 8
    try:
        big_k = torch.empty(num_blocks, tpb, 1, HEAD, dtype=torch.bfloat16, device=DEVICE)
        big_v = torch.empty_like(big_k)
    except (RuntimeError, MemoryError) as exc:  # torch.OutOfMemoryError is a RuntimeError
        pytest.skip(f"cannot reserve 2 × 4 GiB of caches here: {exc}")
    small_k = torch.zeros(6, tpb, 1, HEAD, dtype=torch.bfloat16, device=DEVICE)
    small_v = torch.zeros_like(small_k)
    big_ids = list(range(num_blocks - 5, num_blocks))
    assert big_ids[0] * tpb * HEAD > 2**31
    small_ids = [1, 2, 3, 4, 5]

    length = 300
    gen = torch.Generator().manual_seed(0)
    key, value, query = (
        torch.randn(length, heads, HEAD, generator=gen).to(torch.bfloat16).to(DEVICE)
        for heads in (1, 1, 2)
    )
    qsl = QueryStartLoc(torch.tensor([0, length], device=DEVICE), EncoderTokens)
    lens = SeqLens(torch.tensor([length], device=DEVICE), EncoderTokens)

    def slots(ids: list[int]) -> SlotMapping[PooledBlocks]:
        values = [
            ids[ps // BLOCK_SIZE] * BLOCK_SIZE + ps % BLOCK_SIZE for ps in range(cdiv(length, P))
        ]
        return SlotMapping(torch.tensor(values, device=DEVICE), PooledBlocks)

    write_kv(key, value, big_k, big_v, slots(big_ids), qsl, lens, spec)
    reference_write_kv(key, value, small_k, small_v, slots(small_ids), qsl, lens, spec)
    rows = slice(0, length - 4 * tpb)  # the last block holds 300 − 256 = 44 written rows
    torch.testing.assert_close(big_k[big_ids[:4]], small_k[small_ids[:4]], atol=0, rtol=0)
    torch.testing.assert_close(big_v[big_ids[4], rows], small_v[small_ids[4], rows], atol=0, rtol=0)

    def table(ids: list[int]) -> BlockTable:
        return BlockTable(torch.tensor([ids], dtype=torch.int32, device=DEVICE))

    got = paged_attention(query, big_k, big_v, table(big_ids), qsl, lens, spec)
    expected = reference_paged_attention(query, small_k, small_v, table(small_ids), qsl, lens, spec)
    torch.testing.assert_close(got, expected, atol=1.6e-2, rtol=1.6e-2)
