"""One crossing, end to end: coordinator → `write_kv` → `paged_attention`, audio chunks that are
not multiples of P, against dense attention over each whole sequence.

Two requests stream encoder tokens in chunks of 1 to 7 (P = 4), so most steps start or end in
the middle of a pooled block; every step goes through the real allocator (slot mappings,
evictions of the sliding window) and the real kernels, and the attention of every new position
must equal attention over the request's whole sequence with the model's window, computed
without any cache. The layer's window of 9 encoder tokens has ``W − 1`` a multiple of P: the
case where a window counted as a length would lose a key.
"""

from __future__ import annotations

import math

import torch

from kvunits.contracts import (
    CacheBlocks,
    CacheDType,
    Elements,
    EncoderTokens,
    EngineSpec,
    KVHeads,
    Layers,
    ModelSpec,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    Tokens,
    Window,
)
from kvunits.contracts.deploy import RankBytes
from kvunits.kernels import (
    BlockTable,
    QueryStartLoc,
    SeqLens,
    SlotMapping,
    paged_attention,
    write_kv,
)
from kvunits.runtime import KVCacheCoordinator, plan

from ._scenario import DEVICE, TOLERANCES

WINDOW, POOL, BLOCK_SLOTS, KV_HEADS, HEADS, HEAD = 9, 4, 2, 2, 4, 16
CHUNKS = {"a": [6, 4, 3, 1, 5, 7, 2, 6, 3], "b": [3, 5, 1, 6, 4, 2, 3, 7, 1]}


def _coordinator() -> KVCacheCoordinator:
    layer = SlidingWindowLayer(
        sliding_window=Window(WINDOW, EncoderTokens),
        pool=PoolFactor(POOL),
        kv_heads=KVHeads(KV_HEADS),
        head_size=Elements(HEAD),
        dtype=CacheDType.float32,
    )
    engine = EngineSpec(
        block_size_slots=BLOCK_SLOTS,
        max_model_len=Tokens(64),
        max_num_batched_tokens=Tokens(8),
        max_encoder_len=EncoderTokens(64),
        max_encoder_tokens_per_step=EncoderTokens(8),
        memory_budget=RankBytes(1 << 20),
    )
    return KVCacheCoordinator.from_plan(
        plan(ModelSpec.stacked("stream", {"audio": (layer, Layers(1))}), engine)
    )


def _dense(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, first: int) -> torch.Tensor:
    """Attention of queries at positions ``first ..`` over keys ``0 .. len(k) − 1``: causal,
    window of WINDOW positions, grouped-query heads; no cache involved."""
    out = torch.empty(q.shape[0], HEADS, HEAD, dtype=torch.float32)
    group = HEADS // KV_HEADS
    for j in range(q.shape[0]):
        pos = first + j
        lo = max(0, pos - WINDOW + 1)
        for h in range(HEADS):
            keys, values = k[lo : pos + 1, h // group], v[lo : pos + 1, h // group]
            scores = keys @ q[j, h] / math.sqrt(HEAD)
            out[j, h] = torch.softmax(scores, dim=0) @ values
    return out


def test_partial_pooled_blocks_stream_through_the_allocator_and_the_kernels() -> None:
    torch.manual_seed(0)
    coord = _coordinator()
    tokens = coord.group("audio", EncoderTokens)
    step = coord.stepper(tokens)
    spec = coord.groups[0].kernels["audio.0"]
    num_blocks = coord.usage(tokens).capacity.numerical_value_in(CacheBlocks) + 1
    rows = spec.tokens_per_block.numerical_value_in(EncoderTokens)
    k_cache = torch.zeros(num_blocks, rows, KV_HEADS, HEAD, device=DEVICE)
    v_cache = torch.zeros_like(k_cache)
    history = {
        rid: (torch.empty(0, KV_HEADS, HEAD), torch.empty(0, KV_HEADS, HEAD)) for rid in CHUNKS
    }
    for rid in CHUNKS:
        step.admit(rid, EncoderTokens(64))
    partial_steps = 0
    for i in range(len(CHUNKS["a"])):
        batch = []
        for rid, chunks in CHUNKS.items():
            step.allocate(rid, EncoderTokens(chunks[i]))
            batch.append((rid, coord.kernel_inputs(rid, tokens)))
        q_lens = [inputs.step_len.numerical_value_in(EncoderTokens) for _, inputs in batch]
        lens = [inputs.seq_len.numerical_value_in(EncoderTokens) for _, inputs in batch]
        partial_steps += sum((n - q) % POOL != 0 for n, q in zip(lens, q_lens, strict=True))
        keys = torch.randn(sum(q_lens), KV_HEADS, HEAD)
        values = torch.randn(sum(q_lens), KV_HEADS, HEAD)
        queries = torch.randn(sum(q_lens), HEADS, HEAD)
        width = max(len(inputs.block_table) for _, inputs in batch)
        table = torch.tensor(
            [
                list(inputs.block_table) + [0] * (width - len(inputs.block_table))
                for _, inputs in batch
            ],
            dtype=torch.int32,
        )
        starts = torch.tensor([0, *torch.tensor(q_lens).cumsum(0).tolist()], dtype=torch.int32)
        slots = torch.tensor(
            [s for _, inputs in batch for s in inputs.slot_mapping], dtype=torch.int64
        )
        qsl = QueryStartLoc(starts.to(DEVICE), EncoderTokens)
        seq_lens = SeqLens(torch.tensor(lens, dtype=torch.int32, device=DEVICE), EncoderTokens)
        write_kv(
            keys.to(DEVICE),
            values.to(DEVICE),
            k_cache,
            v_cache,
            SlotMapping(slots.to(DEVICE), PooledBlocks),
            qsl,
            seq_lens,
            spec,
        )
        out = paged_attention(
            queries.to(DEVICE),
            k_cache,
            v_cache,
            BlockTable(table.to(DEVICE)),
            qsl,
            seq_lens,
            spec,
            check_residency=True,
        ).cpu()
        for r, (rid, _) in enumerate(batch):
            rows_of = slice(int(starts[r]), int(starts[r + 1]))
            k_all = torch.cat([history[rid][0], keys[rows_of]])
            v_all = torch.cat([history[rid][1], values[rows_of]])
            history[rid] = (k_all, v_all)
            expected = _dense(queries[rows_of], k_all, v_all, lens[r] - q_lens[r])
            atol, rtol = TOLERANCES[torch.float32]
            torch.testing.assert_close(out[rows_of], expected, atol=atol, rtol=rtol)
        # The window has evicted blocks by now: the kernels read only what stayed resident.
    assert partial_steps > len(CHUNKS["a"])  # most steps start or end mid pooled block
    assert 0 in coord.block_table("a", tokens)  # evicted entries hold the null block
