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

import dataclasses
import math
from typing import Any

import pytest
import torch

from kvunits.contracts import (
    CacheDType,
    Elements,
    EncoderTokens,
    FullAttentionLayer,
    KVHeads,
    PooledBlocks,
    PoolFactor,
    Position,
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
    kv_heads=KVHeads(HEADS),
    head_size=Elements(DIM),
    dtype=CacheDType.float32,
)
TEXT = FullAttentionLayer(
    kv_heads=KVHeads(HEADS), head_size=Elements(DIM), dtype=CacheDType.float32
)

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
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, fi: Any, window_left: int
) -> torch.Tensor:
    """Attention as FlashInfer reads a paged cache: request r's keys are its pages
    ``indices[indptr[r]:indptr[r + 1]]`` concatenated, the last one cut at
    ``last_page_len[r]``; causal, and ``window_left`` as FlashInfer documents it ("the left
    (inclusive) window size"): query i reads keys ``i − window_left .. i``."""
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
            lo = max(0, pos - window_left)
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
    # Each library is handed the layer's window by its named convention (W = 9 encoder tokens).
    (layer,) = batch.windows
    assert batch.windows[layer] == Window(9, EncoderTokens)
    assert fi.window_left[layer] == 8 and fa.window_size[layer] == (8, 0)
    reference = _flashinfer_reference(q, k_cache, v_cache, fi, fi.window_left[layer])
    torch.testing.assert_close(got, reference, rtol=1e-4, atol=1e-4)
    # And both are the truth: dense attention over each request's own K/V, in the window as
    # FlashAttention documents window_size=(left, right): keys [i − left, i + right], causal.
    left, right = fa.window_size[layer]
    start = 0
    for r in ids:
        n, m = sum(STEPS[r]), STEPS[r][-1]
        for j in range(m):
            pos = n - m + j
            lo = max(0, pos - left)
            assert min(pos + right, n - 1) == pos  # right = 0: the query's own key last
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
    # Full attention: each library's "no window".
    assert dict(fa.window_size) == {"text.0": (-1, -1)}
    assert dict(flashinfer_inputs(text_batch).window_left) == {"text.0": -1}
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
    heads, head_k = (
        spec.kv_heads.numerical_value_in(KVHeads),
        spec.head_size_k.numerical_value_in(Elements),
    )
    assert layer.k_cache.shape == (blocks, 64, heads, head_k)
    assert layer.v_cache is not None and layer.k_cache.dtype == torch.bfloat16
    assert len(caches) == sum(len(g.group.layer_names) for g in small.groups)
    # A shared plan (tests/kernels/test_shared_caches.py): views of one buffer, text blocks
    # grown to 128 tokens to match the audio page.
    shared = plan(config.model, engine.model_copy(update={"kv_cache_layout": "shared"}))
    views = allocate_kv_caches(shared, device="meta")
    assert views["text.0"].k_cache.shape == (2560, 128, 8, 128)
    assert views["audio.0"].k_cache.untyped_storage().nbytes() == 2560 * 32 * 512 * 1024


def test_a_step_batchs_tables_are_its_groups_block_ids() -> None:
    """A batch's tables are the group's `BlockIds` (not bare tuples a slot mapping passes
    for): indexed by the group's columns, refusing another group's, and a batch built with
    anything else is refused."""
    coord, audio, *_ = _run()
    batch = coord.step_batch(audio, ["a", "c"])
    for r, table in zip(batch.request_ids, batch.block_tables, strict=True):
        assert table == coord.block_table(r, audio) and table.owner == "audio"
    text = coord.group("text", Tokens)
    column = text.block_of(Position(0, Tokens))
    with pytest.raises(UnitTypeError, match="computed by group 'text'"):
        batch.block_tables[0][column]
    slots = coord.slot_mapping("a", audio)
    with pytest.raises(UnitTypeError, match=r"block_tables\[0\] must be a BlockIds"):
        dataclasses.replace(batch, block_tables=(slots,))
    with pytest.raises(UnitTypeError, match="must be a Window of encoder_token"):
        dataclasses.replace(batch, windows={"audio": Window(3, PooledBlocks)})


def test_a_cache_of_another_groups_dtype_is_a_unit_error() -> None:
    """The dtype a page was sized with owns it: a cache allocated for one group (float32) used
    for a layer of a group that stores bfloat16 is a `CacheDTypeError`, both a
    `KernelTypeError` and a `UnitTypeError`, naming the group and both dtypes (the shape of
    TensorRT-LLM #16304, an engine-wide dtype for a group with its own, and vLLM #37429's
    one page size for bf16 and fp8 groups)."""
    from kvunits.contracts import EngineSpec, ModelSpec, UnitError, group_layers
    from kvunits.contracts.deploy import RankBytes
    from kvunits.kernels import BlockTable, CacheDTypeError, KernelTypeError, SeqLens
    from kvunits.runtime import plan

    text_bf16 = TEXT.model_copy(update={"dtype": CacheDType.bfloat16})
    model = ModelSpec.model_validate(
        {"name": "two-dtypes", "layers": {"audio.0": AUDIO, "text.0": text_bf16}}
    )
    engine = EngineSpec(
        max_model_len=Tokens(64),
        max_num_batched_tokens=Tokens(8),
        max_encoder_len=EncoderTokens(256),
        max_encoder_tokens_per_step=EncoderTokens(8),
        memory_budget=RankBytes(1 << 20),
        block_size_slots=2,
    )
    caches = allocate_kv_caches(plan(model, engine))
    assert caches["audio.0"].k_cache.dtype == torch.float32
    assert caches["text.0"].k_cache.dtype == torch.bfloat16
    (_, text), _ = group_layers(model, engine)
    spec = text.kernels["text.0"].expect(Tokens)
    q = torch.zeros(1, HEADS, DIM, dtype=torch.bfloat16)
    audio_cache = caches["audio.0"]
    assert audio_cache.v_cache is not None
    # The audio group's cache shaped like the text layer's, in the audio group's dtype.
    k = audio_cache.k_cache[:, :2].contiguous()
    v = audio_cache.v_cache[:, :2].contiguous()
    with pytest.raises(CacheDTypeError) as info:
        paged_attention(
            q,
            k,
            v,
            BlockTable(torch.ones(1, 1, dtype=torch.int32)),
            QueryStartLoc(torch.tensor([0, 1], dtype=torch.int32), Tokens),
            SeqLens(torch.tensor([1], dtype=torch.int32), Tokens),
            spec,
        )
    error = info.value
    assert isinstance(error, UnitError)
    assert isinstance(error, KernelTypeError)
    assert (error.group, error.expected, error.got) == ("text", "bfloat16", "torch.float32")
    assert "k_cache is torch.float32 but group 'text' stores bfloat16" in str(error)
