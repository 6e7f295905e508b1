"""Backend inputs of a whole step batch (issue 23): FlashAttention's varlen paged tensors and
FlashInfer's paged tensors, built by `kvunits.kernels.backends` from the coordinator's
`step_batch`, checked three ways:

* against the coordinator's own per-request answers (`KVCacheCoordinator.kernel_inputs`, which
  computes each row in Python with `kvunits.contracts.crossing`): block tables, lengths, rows;
* against each library's documented layout, written out here in plain Python: FlashAttention
  (``flash_attn_varlen_func``: ``cu_seqlens_q`` ``[batch + 1]`` int32, ``seqused_k`` ``[batch]``
  int32, ``block_table`` ``[batch, max_num_blocks_per_seq]`` int32, cache ``[num_blocks,
  page_block_size, nheads_k, headdim]``) and FlashInfer (``paged_kv_indptr`` ``[batch + 1]``,
  ``paged_kv_indices`` ``[indptr[-1]]``, ``paged_kv_last_page_len`` ``[batch]`` in ``[1,
  page_size]``; flashinfer.ai docs, "KV-Cache Layout in FlashInfer"); neither library is
  installed here, so the FlashInfer reading is a torch reference;
* against the Triton kernel here: K/V written step by step through the FlashAttention slot
  mapping, then `paged_attention` over the FlashAttention block table equals dense attention
  over the keys the FlashInfer indices name, for a pooled sliding-window group (P = 4, window
  9 encoder tokens, 8 per block) whose windows evicted blocks others reuse.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from kvunits.contracts import (
    CacheDType,
    EncoderTokens,
    FullAttentionLayer,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    SpecError,
    Tokens,
    UnitTypeError,
    Window,
    kernel_view,
)
from kvunits.kernels import (
    QueryStartLoc,
    allocate_kv_caches,
    flash_attention_inputs,
    flashinfer_inputs,
    paged_attention,
)

from ..runtime.support import coordinator

HEADS, DIM = 2, 8
AUDIO = SlidingWindowLayer(
    sliding_window=Window(9, EncoderTokens),
    pool=PoolFactor(4),
    kv_heads=HEADS,
    head_size=DIM,
    dtype=CacheDType.float32,
)
TEXT = FullAttentionLayer(kv_heads=HEADS, head_size=DIM, dtype=CacheDType.float32)

#: Per request, its steps in encoder tokens: prefills of awkward lengths, then decode chunks
#: that continue partial pooled slots.
STEPS = {"a": [13, 4, 4, 3], "b": [5, 6], "c": [22, 1, 1, 1, 1, 2], "d": [3]}


def _run() -> tuple[Any, Any, dict[str, torch.Tensor], dict[str, torch.Tensor], Any]:
    """Step the requests through a coordinator, writing each step's K/V through the
    FlashAttention slot mapping; return the coordinator, the audio handle, every request's
    full K and V (by position), and the caches."""
    coord = coordinator(
        {"audio": AUDIO, "text": TEXT},
        block_size=2,
        num_blocks={"audio": 12, "text": 40},
        max_len=64,
        max_in_flight=8,
        reserve=False,
    )
    audio, text = coord.group("audio", EncoderTokens), coord.group("text", Tokens)
    step = coord.stepper(audio, text)
    gen = torch.Generator().manual_seed(23)
    keys = {r: torch.randn(sum(s), HEADS, DIM, generator=gen) for r, s in STEPS.items()}
    values = {r: torch.randn(sum(s), HEADS, DIM, generator=gen) for r, s in STEPS.items()}
    k_cache = torch.zeros(12, 8, HEADS, DIM)
    v_cache = torch.zeros(12, 8, HEADS, DIM)
    done = dict.fromkeys(STEPS, 0)
    for r in STEPS:
        step.admit(r, EncoderTokens(64 * 4), Tokens(64))
    for i in range(max(len(s) for s in STEPS.values())):
        batch_ids = [r for r, s in STEPS.items() if i < len(s)]
        for r in batch_ids:
            step.allocate(r, EncoderTokens(STEPS[r][i]), Tokens(1))
        fa = flash_attention_inputs(coord.step_batch(audio, batch_ids))
        new = torch.cat([keys[r][done[r] : done[r] + STEPS[r][i]] for r in batch_ids])
        newv = torch.cat([values[r][done[r] : done[r] + STEPS[r][i]] for r in batch_ids])
        # vLLM's reshape_and_cache_flash: row slot_mapping[t] of the flattened cache.
        k_cache.view(-1, HEADS, DIM)[fa.slot_mapping] = new
        v_cache.view(-1, HEADS, DIM)[fa.slot_mapping] = newv
        for r in batch_ids:
            done[r] += STEPS[r][i]
    return coord, audio, keys, values, (k_cache, v_cache)


def test_flash_attention_inputs_are_the_coordinators_rows() -> None:
    coord, audio, *_ = _run()
    ids = ["c", "a", "b"]  # any batch order
    batch = coord.step_batch(audio, ids)
    fa = flash_attention_inputs(batch)
    seq = [sum(STEPS[r]) for r in ids]
    last = [STEPS[r][-1] for r in ids]
    assert fa.seqused_k.tensor_in(EncoderTokens).tolist() == seq
    assert fa.seqused_k.tensor_in(EncoderTokens).dtype == torch.int32
    cu = fa.cu_seqlens_q.tensor_in(EncoderTokens)
    assert cu.tolist() == [0, *[sum(last[: i + 1]) for i in range(len(ids))]]
    assert cu.dtype == torch.int32 and fa.slot_mapping.dtype == torch.int64
    table = fa.block_table.tensor
    assert table.dtype == torch.int32 and table.shape == (3, max(math.ceil(n / 8) for n in seq))
    rows: list[int] = []
    for i, r in enumerate(ids):
        inputs = coord.kernel_inputs(r, audio)
        width = len(inputs.block_table)
        assert table[i, :width].tolist() == list(inputs.block_table)
        assert not table[i, width:].any()  # padded with the null block
        rows += inputs.row_mapping
    assert fa.slot_mapping.tolist() == rows
    assert (fa.max_seqlen_q, fa.max_seqlen_k) == (EncoderTokens(max(last)), EncoderTokens(28))
    padded = flash_attention_inputs(batch, pad_to_width=True)
    assert padded.block_table.tensor.shape == (3, 64 // 2)  # 64 pooled slots, 2 a block


def test_flashinfer_inputs_follow_the_documented_layout() -> None:
    coord, audio, *_ = _run()
    ids = ["a", "b", "c", "d"]
    fi = flashinfer_inputs(coord.step_batch(audio, ids))
    assert fi.page_size == EncoderTokens(8)
    indptr, indices = fi.paged_kv_indptr.tolist(), fi.paged_kv_indices.tolist()
    expected_indices: list[int] = []
    for i, r in enumerate(ids):
        n = sum(STEPS[r])
        pages = -(-n // 8)
        assert indptr[i + 1] - indptr[i] == pages
        assert 1 <= fi.paged_kv_last_page_len[i] <= 8
        assert (pages - 1) * 8 + int(fi.paged_kv_last_page_len[i]) == n
        expected_indices += coord.block_table(r, audio)[:pages]
    assert indices == expected_indices
    assert 0 in indices  # a window evicted blocks: the null block stands in the table
    assert fi.qo_indptr.tensor_in(EncoderTokens).tolist()[-1] == sum(STEPS[r][-1] for r in ids)
    for tensor in (fi.paged_kv_indptr, fi.paged_kv_indices, fi.paged_kv_last_page_len):
        assert tensor.dtype == torch.int32


def _flashinfer_reference(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, fi: Any, window: int
) -> torch.Tensor:
    """Attention as FlashInfer reads a paged cache: request r's keys are its pages
    ``indices[indptr[r]:indptr[r + 1]]`` concatenated, the last one cut at
    ``last_page_len[r]``; causal, keys within ``window`` of each query."""
    out = torch.empty_like(q)
    qo = fi.qo_indptr.tensor_in(EncoderTokens).tolist()
    indptr, page = fi.paged_kv_indptr.tolist(), 8
    for r in range(len(qo) - 1):
        pages = fi.paged_kv_indices[indptr[r] : indptr[r + 1]].long()
        n = (len(pages) - 1) * page + int(fi.paged_kv_last_page_len[r])
        keys = k_cache[pages].reshape(-1, HEADS, DIM)[:n]
        vals = v_cache[pages].reshape(-1, HEADS, DIM)[:n]
        rows = q[qo[r] : qo[r + 1]]
        first = n - rows.shape[0]
        for j in range(rows.shape[0]):
            pos = first + j
            lo = max(0, pos - window + 1)
            scores = torch.einsum("hd,khd->hk", rows[j], keys[lo : pos + 1]) / math.sqrt(DIM)
            out[qo[r] + j] = torch.einsum("hk,khd->hd", scores.softmax(-1), vals[lo : pos + 1])
    return out


def test_triton_kernel_reads_the_backend_tensors() -> None:
    coord, audio, keys, values, (k_cache, v_cache) = _run()
    ids = ["a", "b", "c", "d"]
    batch = coord.step_batch(audio, ids)
    fa, fi = flash_attention_inputs(batch), flashinfer_inputs(batch)
    rows = int(fa.cu_seqlens_q.tensor_in(EncoderTokens)[-1])
    q = torch.randn(rows, HEADS, DIM, generator=torch.Generator().manual_seed(5))
    spec = kernel_view(AUDIO, block_size_slots=2).expect(EncoderTokens)
    got = paged_attention(
        q,
        k_cache,
        v_cache,
        fa.block_table,
        fa.cu_seqlens_q,
        fa.seqused_k,
        spec,
        check_residency=True,
    )
    reference = _flashinfer_reference(q, k_cache, v_cache, fi, window=9)
    torch.testing.assert_close(got, reference, rtol=1e-4, atol=1e-4)
    # And both are the truth: dense attention over each request's own K/V in its window.
    start = 0
    for r in ids:
        n, m = sum(STEPS[r]), STEPS[r][-1]
        for j in range(m):
            pos = n - m + j
            lo = max(0, pos - 8)
            s = torch.einsum("hd,khd->hk", q[start + j], keys[r][lo : pos + 1]) / math.sqrt(DIM)
            dense = torch.einsum("hk,khd->hd", s.softmax(-1), values[r][lo : pos + 1])
            torch.testing.assert_close(got[start + j], dense, rtol=1e-4, atol=1e-4)
        start += m


def test_units_and_inputs_are_checked() -> None:
    coord, audio, *_ = _run()
    batch = coord.step_batch(audio, ["a"])
    with pytest.raises(UnitTypeError, match="counts encoder_token, not pooled_block"):
        batch.seq_lens_in(PooledBlocks)
    with pytest.raises(SpecError, match="expected a StepBatch"):
        flash_attention_inputs(coord.kernel_inputs("a", audio))
    text_batch = coord.step_batch(coord.group("text", Tokens), ["a", "b"])
    fa = flash_attention_inputs(text_batch)
    assert fa.seqused_k.unit is Tokens
    assert isinstance(fa.cu_seqlens_q, QueryStartLoc)
    assert flash_attention_inputs(coord.step_batch(audio, [])).slot_mapping.numel() == 0


def test_kv_caches_from_a_plan() -> None:
    from kvunits.contracts.config import load_config
    from kvunits.runtime import plan

    config = load_config("examples/voxtral_realtime.toml")
    engine = config.engine.model_copy(update={"memory_budget": config.engine.memory_budget})
    small = plan(config.model, engine.model_copy(update={"cache_dtype": None}))
    caches = allocate_kv_caches(small, device="meta")  # shapes only, no memory
    audio = small.group("audio")
    layer = caches[audio.group.layer_names[0]]
    blocks = audio.num_blocks.numerical_value_in(type(audio.num_blocks))
    spec = audio.group.kernels[audio.group.layer_names[0]]
    assert layer.k_cache.shape == (blocks, 64, spec.kv_heads, spec.head_size_k)
    assert layer.v_cache is not None and layer.k_cache.dtype == torch.bfloat16
    assert len(caches) == sum(len(g.group.layer_names) for g in small.groups)
    shared = plan(config.model, engine.model_copy(update={"kv_cache_layout": "shared"}))
    with pytest.raises(SpecError, match="per_group"):
        allocate_kv_caches(shared)
