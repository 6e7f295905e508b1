"""KV-cache tensors of a shared-pool plan (issue 23): one buffer laid out as vLLM 0.33 lays it
out, every layer viewing it with its own shape, and the coordinator's block ids indexing it.

Checked four ways:

* the geometry vLLM 0.33 gives the shipped Voxtral Realtime example, measured with vLLM's own
  ``get_kv_cache_config_from_groups`` and ``allocate_kv_cache`` (``benchmarks/vs_vllm_layout.py``,
  in the vLLM venv; it also runs as a test there, for Voxtral, Gemma-3-1B and Gemma-4-26B-A4B
  and every ``KVCacheLayout``);
* the rule of ``vllm/v1/kv_cache_interface.py``'s ``KVCacheTensor`` ("layer ``layers[l]``'s
  page for block ``b`` starts at ``offset + l * layer_stride + b * block_stride``", groups
  overlaid from byte 0), written out here, for the three models' real configs;
* by writing: block ``b`` written through one group's layer touches exactly the bytes of
  block ``b`` of the layer at the same position in every other group, and nothing else;
* end to end: K/V written by the Triton write kernel through a shared-layout coordinator's
  slot mappings and read back by ``paged_attention`` through its block tables, while a pooled
  window group frees blocks that text groups take (one page of 1 KiB, text blocks grown from
  2 to 8 tokens, the text group split in two), equal to dense attention at every step.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import Any

import pytest
import torch

from kvunits.contracts import (
    CacheDType,
    Elements,
    EncoderTokens,
    EngineSpec,
    FullAttentionLayer,
    KVHeads,
    Layers,
    ModelSpec,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    SpecError,
    Tokens,
    Window,
)
from kvunits.contracts.config import load_config
from kvunits.contracts.deploy import RankBytes
from kvunits.contracts.internal import kernel_ints
from kvunits.kernels import (
    LayerCache,
    PhysicalLayout,
    SlotMapping,
    allocate_kv_caches,
    flash_attention_inputs,
    paged_attention,
    write_kv,
)
from kvunits.runtime import AdmissionPolicy, CapacityPlan, KVCacheCoordinator, plan

#: The real configs compared with vLLM (``benchmarks/vs_vllm_layout.py``'s cases).
CASES = {
    "voxtral-realtime": ("examples/voxtral_realtime.toml", {}),
    "gemma-3-1b": ("examples/hf/gemma-3-1b-it/config.json", {"memory_budget": "4 GiB"}),
    "gemma-4-26b-a4b": ("examples/hf/gemma-4-26b-a4b/config.json", {"memory_budget": "64 GiB"}),
}


def _shared_plan(path: str, flags: Mapping[str, str]) -> CapacityPlan:
    config = load_config(path, flags={**flags, "kv_cache_layout": "shared"})
    return plan(config.model, config.engine)


def _bytes(t: torch.Tensor) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """Shape, byte strides and byte offset into the buffer."""
    size = t.element_size()
    return tuple(t.shape), tuple(s * size for s in t.stride()), int(t.storage_offset()) * size


def test_voxtral_views_are_vllms() -> None:
    # Measured with vLLM 0.33 (benchmarks/vs_vllm_layout.py, layout LBNHC, 2560 blocks):
    # vllm.v1.worker.utils.allocate_kv_cache gives audio.0 a [2560, 32, 64, 128] bf16 view
    # with element strides (262144, 128, 4096, 1) at offset 0, and text.25 a [2560, 8, 128,
    # 256] view, strides (262144, 256, 2048, 1), at element offset 16777216000; K and V are
    # its transpose(1, 2) split at head_size (FlashAttentionImpl.forward).
    shared = _shared_plan(*CASES["voxtral-realtime"])
    caches = allocate_kv_caches(shared, device="meta")
    audio, text = caches["audio.0"], caches["text.25"]
    assert audio.v_cache is not None and text.v_cache is not None
    assert _bytes(audio.k_cache) == ((2560, 64, 32, 64), (524288, 8192, 256, 2), 0)
    assert _bytes(audio.v_cache) == ((2560, 64, 32, 64), (524288, 8192, 256, 2), 128)
    text_offset = 16777216000 * 2
    assert _bytes(text.k_cache) == ((2560, 128, 8, 128), (524288, 4096, 512, 2), text_offset)
    assert _bytes(text.v_cache)[2] == text_offset + 256
    assert audio.k_cache.dtype == text.k_cache.dtype == torch.bfloat16
    assert len(caches) == 58


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("layout", ["LBNHC", "LBHNC"])
def test_views_follow_vllms_placement_rule(case: str, layout: Any) -> None:
    shared = _shared_plan(*CASES[case])
    caches = allocate_kv_caches(shared, device="meta", physical_layout=layout)
    num_blocks = shared.groups[0].num_blocks.numerical_value_in(type(shared.groups[0].num_blocks))
    page = shared.groups[0].page_size.numerical_value_in(type(shared.groups[0].page_size))
    seen = 0
    for group_plan in shared.groups:
        group = group_plan.group
        for position, name in enumerate(group.layer_names):
            spec = kernel_ints(group.kernels[name])
            rows = spec.tokens_per_block
            size = 2  # every case is bfloat16
            cell = (spec.head_size_k + spec.head_size_v) * size
            # KVCacheTensor: layer l of every group at l × layer_stride, a layer-outer
            # layer_stride being num_blocks pages, block b at b × page; inside the page
            # [N, H, C] (LBNHC) or [H, N, C] (LBHNC), C = K then V.
            heads_stride, rows_stride = (
                (cell, spec.kv_heads * cell) if layout == "LBNHC" else (rows * cell, cell)
            )
            base = position * num_blocks * page
            k, v = caches[name].k_cache, caches[name].v_cache
            assert v is not None
            strides = (page, rows_stride, heads_stride, size)
            assert _bytes(k) == ((num_blocks, rows, spec.kv_heads, spec.head_size_k), strides, base)
            assert _bytes(v) == (
                (num_blocks, rows, spec.kv_heads, spec.head_size_v),
                strides,
                base + spec.head_size_k * size,
            )
            assert rows * spec.kv_heads * cell == page  # the unified page, whatever the shape
            seen += 1
    assert seen == len(caches) == len(shared.model.layers)


# -- a small shared plan, real memory -----------------------------------------------------

HEADS, DIM = 2, 8
AUDIO = SlidingWindowLayer(
    sliding_window=Window(9, EncoderTokens),
    pool=PoolFactor(4),
    kv_heads=KVHeads(HEADS),
    head_size=Elements(DIM),
    dtype=CacheDType.float32,
)
#: Another page shape than the audio's (1 head of 16, not 2 of 8), one page size once grown.
TEXT = FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(16), dtype=CacheDType.float32)


def _small_plan(blocks: int, text_layers: int = 3) -> CapacityPlan:
    """Audio pages (2 pooled slots × 4 × 2 heads × (8 + 8) × 4 byte = 1 KiB) beside text pages
    of 256 byte (2 tokens × 1 head × (16 + 16) × 4 byte): text blocks grow from 2 to 8 tokens;
    2 audio layers beside 3 text layers makes 2 layers a block, the text group split in two
    (text.0, text.2 | text.1)."""
    model = ModelSpec.stacked(
        "small", {"audio": (AUDIO, Layers(2)), "text": (TEXT, Layers(text_layers))}
    )
    engine = EngineSpec(
        block_size_slots=2,
        max_model_len=Tokens(32),
        max_num_batched_tokens=Tokens(8),
        max_encoder_len=EncoderTokens(128),
        max_encoder_tokens_per_step=EncoderTokens(8),
        memory_budget=RankBytes(blocks * 2 * 1024),
        kv_cache_layout="shared",
        admission="on_demand",
    )
    return plan(model, engine)


def _buffer(caches: Mapping[str, LayerCache]) -> torch.Tensor:
    """The one buffer every view of a shared plan looks into, as bytes."""
    storage = next(iter(caches.values())).k_cache.untyped_storage()
    assert {c.k_cache.untyped_storage().data_ptr() for c in caches.values()} == {storage.data_ptr()}
    return torch.empty(0, dtype=torch.uint8).set_(storage)


def _written(caches: Mapping[str, LayerCache], name: str, block: int) -> set[int]:
    """The bytes of ``block`` of layer ``name``: write them, see which changed."""
    raw = _buffer(caches)
    raw.zero_()
    cache = caches[name]
    cache.k_cache[block].view(torch.uint8).fill_(1)
    if cache.v_cache is not None:
        cache.v_cache[block].view(torch.uint8).fill_(2)
    return set(raw.nonzero().flatten().tolist())


def test_a_block_is_the_same_bytes_in_every_group() -> None:
    shared = _small_plan(blocks=13)
    assert [p.group.layer_names for p in shared.groups] == [
        ("audio.0", "audio.1"),
        ("text.0", "text.2"),
        ("text.1",),
    ]
    caches = allocate_kv_caches(shared)
    page, blocks = 1024, 13
    assert _buffer(caches).numel() == blocks * 2 * page
    for position, names in enumerate([("audio.0", "text.0", "text.1"), ("audio.1", "text.2")]):
        for block in range(blocks):
            # The whole page: layer position l, block b, K and V, nothing else.
            start = position * blocks * page + block * page
            expected = set(range(start, start + page))
            for name in names:
                assert _written(caches, name, block) == expected, (name, block)


def test_layouts_that_would_overlay_blocks_are_refused() -> None:
    shared = _small_plan(blocks=13)
    with pytest.raises(SpecError, match=r"LHBNC puts heads or positions outside the block"):
        allocate_kv_caches(shared, device="meta", physical_layout="LHBNC")
    with pytest.raises(SpecError, match=r"BLNHC is block-outermost.*groups text\[0\], text\[1\]"):
        allocate_kv_caches(shared, device="meta", physical_layout="BLNHC")
    with pytest.raises(SpecError, match=r"'NHD' is not one of vLLM's KV-cache layouts"):
        allocate_kv_caches(shared, device="meta", physical_layout="NHD")  # type: ignore[arg-type]
    engine = shared.engine.model_copy(update={"kv_cache_layout": "per_group"})
    per_group = plan(shared.model, engine)
    with pytest.raises(SpecError, match=r"drop physical_layout"):
        allocate_kv_caches(per_group, device="meta", physical_layout="LBNHC")


def test_uniform_pages_take_every_layout_and_keep_blocks_apart() -> None:
    # One page shape everywhere (Gemma-3-like): heads outside blocks (LHBNC) and blocks
    # outermost (B...) keep the groups apart too, and kvunits lays them out as vLLM does
    # (benchmarks/vs_vllm_layout.py, Gemma-3-1B, all six layouts). In BHLNC a layer's bytes
    # within a block depend on its group's layer count (heads stride over the group's
    # layers), so only the block, not the position, is the same bytes across groups.
    heads, dim = KVHeads(2), Elements(8)
    swa = SlidingWindowLayer(
        sliding_window=Window(16, Tokens), kv_heads=heads, head_size=dim, dtype=CacheDType.float32
    )
    full = FullAttentionLayer(kv_heads=heads, head_size=dim, dtype=CacheDType.float32)
    model = ModelSpec.stacked("uniform", {"swa": (swa, Layers(3)), "full": (full, Layers(2))})
    engine = _small_plan(blocks=13).engine.model_copy(
        update={"memory_budget": RankBytes(48 * 2 * 256)}
    )
    shared = plan(model, engine)
    assert [len(p.group.layer_names) for p in shared.groups] == [2, 1, 2]  # swa split in two
    layouts: tuple[PhysicalLayout, ...] = ("LBNHC", "LBHNC", "LHBNC", "BLNHC", "BLHNC", "BHLNC")
    for layout in layouts:
        caches = allocate_kv_caches(shared, physical_layout=layout)
        block_of: list[dict[int, int]] = []  # per group: byte -> the block that wrote it
        for group_plan in shared.groups:
            owner: dict[int, int] = {}
            for name in group_plan.group.layer_names:
                for block in range(48):
                    got = _written(caches, name, block)
                    assert len(got) == 256
                    assert not got & owner.keys(), (layout, name, block)  # a group's own pages
                    owner.update(dict.fromkeys(got, block))
            block_of.append(owner)
        for a in block_of:
            for b in block_of:
                shared_bytes = a.keys() & b.keys()
                assert all(a[x] == b[x] for x in shared_bytes), layout  # block b only over b
        assert len(block_of[0].keys() & block_of[2].keys()) == 2 * 48 * 256  # groups overlay


# -- end to end: the Triton kernels through a shared-layout coordinator -----------------------


def _dense(
    q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, window: int | None
) -> torch.Tensor:
    """Causal attention of the last ``len(q)`` positions over ``keys``/``values``."""
    n, out = keys.shape[0], torch.empty_like(q)
    for j in range(q.shape[0]):
        pos = n - q.shape[0] + j
        lo = 0 if window is None else max(0, pos - window + 1)
        s = torch.einsum("hd,khd->hk", q[j], keys[lo : pos + 1]) / math.sqrt(q.shape[-1])
        out[j] = torch.einsum("hk,khd->hd", s.softmax(-1), values[lo : pos + 1])
    return out


#: Per request: (first step, steps). Each step adds 4 encoder tokens (one pooled slot) and one
#: text token, as a Voxtral Realtime stream does; requests end and others start in the
#: blocks they freed.
STREAMS = {"a": (0, 8), "b": (1, 4), "c": (3, 6), "d": (5, 5)}

#: Per (layer, request): every position's K and V, in the layer's kernel unit.
History = dict[tuple[str, str], tuple[torch.Tensor, torch.Tensor]]


def _step_group(
    coord: KVCacheCoordinator,
    handle: Any,
    batch: list[str],
    done: Mapping[str, int],
    caches: Mapping[str, LayerCache],
    history: History,
    gen: torch.Generator,
) -> None:
    """One group's step: write each layer's new K/V through the coordinator's slot mapping
    (the Triton write kernel), read it back through its block tables (``paged_attention``),
    and compare with dense attention over the request's own history."""
    group = next(g for g in coord.groups if g.name == handle.name)
    fa = flash_attention_inputs(coord.step_batch(handle, batch))
    pooled = handle.unit is EncoderTokens
    per = 4 if pooled else 1  # positions a step adds, in the kernel unit
    slots = torch.tensor([s for r in batch for s in coord.slot_mapping(r, handle)])
    mapping: SlotMapping[Any] = (
        SlotMapping(slots, PooledBlocks) if pooled else SlotMapping(slots, Tokens)
    )
    new = [slice(per * (done[r] - 1), per * done[r]) for r in batch]
    for name in group.layer_names:
        spec, cache = group.kernels[name], caches[name]
        assert cache.v_cache is not None
        new_k, new_v = (
            torch.cat([history[name, r][i][rows] for r, rows in zip(batch, new, strict=True)])
            for i in (0, 1)
        )
        write_kv(
            new_k, new_v, cache.k_cache, cache.v_cache, mapping,
            fa.cu_seqlens_q, fa.seqused_k, spec,
        )  # fmt: skip
        q = torch.randn(new_k.shape, generator=gen)
        got = paged_attention(
            q, cache.k_cache, cache.v_cache, fa.block_table, fa.cu_seqlens_q, fa.seqused_k,
            spec, check_residency=True,
        )  # fmt: skip
        for i, r in enumerate(batch):
            keys, values = (x[: per * done[r]] for x in history[name, r])
            rows = slice(per * i, per * (i + 1))
            expected = _dense(q[rows], keys, values, 9 if pooled else None)
            torch.testing.assert_close(got[rows], expected, rtol=1e-4, atol=1e-4)


def test_kernels_read_what_they_wrote_through_a_shared_pool() -> None:
    shared = _small_plan(blocks=14)  # the null block, 12 for one full request, 1 spare
    coord = KVCacheCoordinator.from_plan(shared, admission=AdmissionPolicy(kind="on_demand"))
    caches = allocate_kv_caches(shared)
    for cache in caches.values():
        cache.k_cache.fill_(float("nan"))  # a page read before it is written shows as NaN
        assert cache.v_cache is not None
        cache.v_cache.fill_(float("nan"))
    audio = coord.group("audio", EncoderTokens)
    text0, text1 = coord.group("text[0]", Tokens), coord.group("text[1]", Tokens)
    step = coord.stepper(audio, text0, text1)
    gen = torch.Generator().manual_seed(23)
    total = {r: n for r, (_, n) in STREAMS.items()}
    history: History = {}
    for r, n in total.items():
        for group in coord.groups:
            for name, kernel in group.kernels.items():
                spec = kernel_ints(kernel)
                length = n * spec.pool  # one pooled slot or token a step
                shape = (length, spec.kv_heads, spec.head_size_k)
                history[name, r] = (
                    torch.randn(shape, generator=gen),
                    torch.randn(shape, generator=gen),
                )
    done: dict[str, int] = {}
    owners: dict[int, list[str]] = {}  # block id -> the groups that held it, in turn
    for t in range(max(s + n for s, n in STREAMS.values())):
        for r, (start, _) in STREAMS.items():
            if t == start:
                step.admit(r, EncoderTokens(128), Tokens(32), Tokens(32))
                done[r] = 0
        batch = [r for r in done if done[r] < total[r]]
        for r in batch:
            step.allocate(r, EncoderTokens(4), Tokens(1), Tokens(1))
            done[r] += 1
        handles: tuple[Any, ...] = (audio, text0, text1)
        for handle in handles:
            for r in batch:
                for block in coord.block_table(r, handle):
                    held = owners.setdefault(block, [])
                    if block and (not held or held[-1] != handle.name):
                        held.append(handle.name)
            _step_group(coord, handle, batch, done, caches, history, gen)
        for r in batch:
            if done[r] == total[r]:
                coord.free(r)
    # The pool was shared for real: blocks the audio window freed went to text, and back.
    turns = {(a, b) for held in owners.values() for a, b in itertools.pairwise(held)}
    texts = {"text[0]", "text[1]"}
    assert any(a == "audio" and b in texts for a, b in turns), turns
    assert any(a in texts and b == "audio" for a, b in turns), turns
