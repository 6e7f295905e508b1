"""One pool for every group: page unification, layer grouping, the pool's size, and the
coordinator drawing on it.

Golden numbers: vLLM's ``test_get_kv_cache_config_one_worker`` and
``test_get_max_concurrency_for_kv_cache_config`` (``tests/v1/core/test_kv_cache_utils.py`` at
commit eaba533a5e3853c730318c8b5960de4d159a82ed), and the worked numbers of
/work/research/prefix/SHARED_POOL.md §7 for the shipped Voxtral Realtime example and
Gemma-3-1B (read from ``unify_kv_cache_spec_page_size``,
``_get_kv_cache_groups_uniform_page_size``, ``get_kv_cache_config_from_groups`` in vLLM's
``kv_cache_utils.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvunits.contracts import (
    AdmissionCap,
    Bytes,
    CacheBlocks,
    CacheDType,
    Elements,
    EncoderTokens,
    EngineSpec,
    FullAttentionLayer,
    KVHeads,
    Layers,
    LayerSpec,
    ModelSpec,
    PoolBlocks,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    SpecError,
    StateLayer,
    Tokens,
    Window,
)
from kvunits.contracts.config import load_config
from kvunits.contracts.deploy import RankBytes
from kvunits.runtime import AdmissionError, AllocationError, KVCacheCoordinator, plan
from kvunits.runtime.shared_pool import shared_layout

from .support import check_pools, coordinator

ROOT = Path(__file__).resolve().parents[2]

#: vLLM's ``new_kv_cache_spec()`` page: 16 tokens × 2 heads × 64 × (K + V) × float32.
PAGE = 16 * 2 * 64 * 2 * 4


def full(head_size: int = 64) -> FullAttentionLayer:
    """vLLM's ``new_kv_cache_spec``: 2 KV heads, float32, blocks of 16."""
    return FullAttentionLayer(
        kv_heads=KVHeads(2), head_size=Elements(head_size), dtype=CacheDType.float32
    )


def sliding(head_size: int = 64) -> SlidingWindowLayer:
    """vLLM's ``new_sliding_window_spec``: a window of 1 token."""
    return SlidingWindowLayer(
        sliding_window=Window(1, Tokens),
        kv_heads=KVHeads(2),
        head_size=Elements(head_size),
        dtype=CacheDType.float32,
    )


def engine(budget: int, **kw: object) -> EngineSpec:
    return EngineSpec(
        max_model_len=Tokens(16),
        max_num_batched_tokens=Tokens(16),
        memory_budget=RankBytes(budget),
        kv_cache_layout="shared",
        **kw,  # type: ignore[arg-type]
    )


def layout_of(layers: list[LayerSpec], budget: int) -> tuple[list[tuple[str, ...]], int]:
    model = ModelSpec(name="m", layers={f"layer_{i + 1}": x for i, x in enumerate(layers)})
    layout = shared_layout(model, engine(budget))
    return [g.layer_names for g in layout.groups], layout.num_blocks.numerical_value_in(PoolBlocks)


@pytest.mark.parametrize(
    ("layers", "budget", "groups", "num_blocks"),
    [
        # full + sliding: one tensor shared by both layers, twice the blocks of one group.
        ([full(), sliding()], PAGE * 2 * 32, [("layer_1",), ("layer_2",)], 64),
        # 2 full + 4 sliding: 2 layers per block, the sliding group split in 2, strided.
        (
            [full(), full(), sliding(), sliding(), sliding(), sliding()],
            PAGE * 2 * 32,
            [("layer_1", "layer_2"), ("layer_3", "layer_5"), ("layer_4", "layer_6")],
            32,
        ),
        # 3 full + 7 sliding: 7 >= 1.5 × 3, so 3 layers per block; 7 split in 3.
        (
            [full()] * 3 + [sliding()] * 7,
            PAGE * 3 * 32,
            [
                ("layer_1", "layer_2", "layer_3"),
                ("layer_4", "layer_7", "layer_10"),
                ("layer_5", "layer_8"),
                ("layer_6", "layer_9"),
            ],
            32,
        ),
        # 6 full + 5 sliding: 6 < 1.5 × 5, so 6 layers per block and no split (gpt-oss + eagle).
        (
            [full()] * 6 + [sliding()] * 5,
            PAGE * 6 * 32,
            [tuple(f"layer_{i}" for i in range(1, 7)), tuple(f"layer_{i}" for i in range(7, 12))],
            32,
        ),
    ],
)
def test_vllm_grouping_and_pool_size(
    layers: list[LayerSpec], budget: int, groups: list[tuple[str, ...]], num_blocks: int
) -> None:
    """vLLM ``test_get_kv_cache_config_one_worker`` (commit eaba533a): the groups (in
    kvunits' order: a model's group in order of first layer, then its splits) and
    ``num_blocks = memory // page // layers per block``."""
    got, blocks = layout_of(layers, budget)
    assert sorted(got) == sorted(groups)
    assert blocks == num_blocks


def test_vllm_smaller_page_grows_its_block_size() -> None:
    """vLLM ``test_get_kv_cache_config_one_worker``, "different hidden size and different
    type, align by different block size": a sliding layer of head 32 has half the page of a
    full layer of head 64, so its block grows to 32 tokens; one tensor, 32 blocks."""
    model = ModelSpec(name="m", layers={"layer_1": full(64), "layer_2": sliding(32)})
    layout = shared_layout(model, engine(PAGE * 32))
    assert [str(g.manager.block_size) for g in layout.groups] == [
        "16 token/cache_block",
        "32 token/cache_block",
    ]
    assert layout.page_size == Bytes(PAGE) and layout.num_blocks == PoolBlocks(32)
    assert layout.grown == {"layer_2": 2}  # a group of one layer is named after it


def test_vllm_pages_that_cannot_be_unified_are_refused() -> None:
    """vLLM raises ``NotImplementedError`` for a page (head 96) that does not divide the
    largest (head 64 → 3:2); kvunits refuses the shared layout with the reason, and the plan
    still plans the per-group layout and reports why the shared one is refused."""
    model = ModelSpec(name="m", layers={"layer_1": full(64), "layer_2": sliding(96)})
    with pytest.raises(SpecError, match="does not divide the largest") as err:
        shared_layout(model, engine(PAGE * 64))
    assert "group 'layer_1' (full_attention, page 16384 byte) and group 'layer_2' (page 24576" in (
        str(err.value)
    )
    assert "use kv_cache_layout = 'per_group'" in str(err.value)
    per_group = plan(model, engine(PAGE * 64).model_copy(update={"kv_cache_layout": "per_group"}))
    assert [layout.layout for layout in per_group.layouts] == ["per_group", "shared"]
    assert per_group.layouts[1].concurrent_requests is None
    assert per_group.layouts[1].refused is not None and "does not divide" in (
        per_group.layouts[1].refused
    )


def test_a_state_page_does_not_grow() -> None:
    """A state's page is the state, whatever the block size: a smaller one cannot be unified
    (vLLM pads Mamba pages; kvunits does not)."""
    model = ModelSpec(name="m", layers={"a": full(), "s": StateLayer(state_size=Bytes(PAGE // 2))})
    with pytest.raises(SpecError, match="a state's page does not grow"):
        shared_layout(model, engine(PAGE * 64))


def test_vllm_concurrency_uses_the_same_caps() -> None:
    """vLLM ``test_get_max_concurrency_for_kv_cache_config`` (commit eaba533a): Qwen1.5-7B's
    shape (32 heads × 128, fp16, blocks of 16), max_model_len 16384, 1024 tokens a step, a
    window of 1024: a request holds 1024 full blocks and 129 window blocks
    (``cdiv(1023 + 1024, 16) + 1``), so vLLM's concurrency ``num_blocks / Σ blocks`` is 1.5,
    3 and 3 for its pools of 1536, 129 × 3 and (1024 + 129) × 3 blocks. kvunits plans the same
    caps, and counts the pool's null block: one block less for requests."""
    layer_full = FullAttentionLayer(
        kv_heads=KVHeads(32), head_size=Elements(128), dtype=CacheDType.float16
    )
    layer_window = SlidingWindowLayer(
        sliding_window=Window(1024, Tokens),
        kv_heads=KVHeads(32),
        head_size=Elements(128),
        dtype=CacheDType.float16,
    )
    model = ModelSpec.stacked(
        "qwen", {"full": (layer_full, Layers(32)), "sw": (layer_window, Layers(32))}
    )
    spec = EngineSpec(
        max_model_len=Tokens(16384),
        max_num_batched_tokens=Tokens(1024),
        memory_budget=RankBytes((1024 + 129) * 3 * 32 * 16 * 32 * 256 * 2),
        kv_cache_layout="shared",
    )
    planned = plan(model, spec)
    caps = {g.group.name: g.admission_cap.numerical_value_in(AdmissionCap) for g in planned.groups}
    assert caps == {"full": 1024, "sw": 129}
    assert planned.groups[0].num_blocks == PoolBlocks((1024 + 129) * 3)
    assert (
        planned.groups[0].num_blocks.numerical_value_in(PoolBlocks) / sum(caps.values()) == 3
    )  # vLLM's figure
    assert planned.concurrent_requests == 2  # kvunits: (3459 - 1) // 1153


def test_shipped_voxtral_realtime_on_one_pool() -> None:
    """SHARED_POOL.md §7.1: the text page (8 heads × 128, 64 KiB) divides the audio page (32
    heads × 64 × P = 4, 512 KiB) 8 times, so text blocks grow to 128 tokens; 32 layers per
    block (26 < 32 < 1.5 × 26); 64 blocks per GiB. At 40 GiB: 2560 blocks; a request holds 13
    audio and ``cdiv(8191 + 2048, 128) + 1 = 81`` text blocks, so 27 requests share the pool,
    where a pool per group admits 32 (the text blocks leave 6 of their 32 pages unused)."""
    config = load_config(ROOT / "examples" / "voxtral_realtime.toml")
    shared = plan(config.model, config.engine.model_copy(update={"kv_cache_layout": "shared"}))
    audio, text = shared.groups
    assert str(audio.group.manager.block_size) == "16 pooled_block/cache_block"
    assert str(text.group.manager.block_size) == "128 token/cache_block"
    assert audio.page_size == text.page_size == Bytes(524_288)
    assert audio.block_bytes == Bytes(524_288 * 32)
    assert audio.num_blocks == text.num_blocks == PoolBlocks(40 * 64)
    assert (audio.admission_cap, text.admission_cap) == (AdmissionCap(13), AdmissionCap(81))
    assert shared.concurrent_requests == (2560 - 1) // (13 + 81) == 27
    assert [(lay.layout, lay.concurrent_requests) for lay in shared.layouts] == [
        ("shared", 27),
        ("per_group", 32),
    ]
    per_group = plan(config.model, config.engine)
    assert [(lay.layout, lay.concurrent_requests) for lay in per_group.layouts] == [
        ("per_group", 32),
        ("shared", 27),
    ]


def test_voxtral_worked_numbers_at_2_gib() -> None:
    """SHARED_POOL.md §7.1 at 2 GiB, max_model_len 4096, one pooled block and one token a
    step: 128 blocks; caps 13 (audio) and 32 (text: kvunits never reserves more than
    ``cdiv(4096, 128)``; vLLM's formula gives 33, its 2.78 concurrent requests)."""
    audio = SlidingWindowLayer(
        sliding_window=Window(750, EncoderTokens),
        pool=PoolFactor(4),
        kv_heads=KVHeads(32),
        head_size=Elements(64),
    )
    text = SlidingWindowLayer(
        sliding_window=Window(8192, Tokens), kv_heads=KVHeads(8), head_size=Elements(128)
    )
    model = ModelSpec.stacked("voxtral", {"audio": (audio, Layers(32)), "text": (text, Layers(26))})
    spec = EngineSpec(
        max_model_len=Tokens(4096),
        max_num_batched_tokens=Tokens(1),
        max_encoder_len=EncoderTokens(4 * 4096),
        max_encoder_tokens_per_step=EncoderTokens(1),
        memory_budget=RankBytes(2 << 30),
        kv_cache_layout="shared",
    )
    planned = plan(model, spec)
    assert planned.groups[0].num_blocks == PoolBlocks(128)
    assert [g.admission_cap for g in planned.groups] == [AdmissionCap(13), AdmissionCap(32)]
    assert round(128 / (13 + 33), 2) == 2.78  # vLLM's figure, with its text cap of 33
    assert planned.concurrent_requests == 127 // 45 == 2


def test_gemma_3_1b_on_one_pool() -> None:
    """SHARED_POOL.md §7.2: Gemma-3-1B's 22 sliding layers (window 512) and 4 full ones
    (every 6th), pages of 16 KiB both: 4 layers per block (22 ≥ 6), the sliding layers split
    in 6 groups, strided (``layers[i::6]``); 16384 blocks per GiB; a request at 32768 tokens
    with 2048 a step holds 2048 + 6 × 161 = 3014 blocks (vLLM: 5.44 per GiB)."""
    config = load_config(ROOT / "examples" / "hf" / "gemma-3-1b-it" / "config.json")
    spec = config.engine.model_copy(
        update={"kv_cache_layout": "shared", "memory_budget": RankBytes(1 << 30)}
    )
    assert spec.max_model_len == Tokens(32768) and spec.max_num_batched_tokens == Tokens(2048)
    planned = plan(config.model, spec)
    layers = {
        g.group.name: sorted(int(n.split(".")[1]) for n in g.group.layer_names)
        for g in planned.groups
    }
    assert layers == {
        "text/sliding_window[0]": [0, 7, 14, 21],
        "text/sliding_window[1]": [1, 8, 15, 22],
        "text/sliding_window[2]": [2, 9, 16, 24],
        "text/sliding_window[3]": [3, 10, 18, 25],
        "text/sliding_window[4]": [4, 12, 19],
        "text/sliding_window[5]": [6, 13, 20],
        "text/full_attention": [5, 11, 17, 23],
    }
    assert planned.groups[0].num_blocks == PoolBlocks(16384)
    assert planned.groups[0].block_bytes == Bytes(4 * 16384)
    assert AdmissionCap.total(g.admission_cap for g in planned.groups) == AdmissionCap(3014)
    assert 2048 + 6 * 161 == 3014
    assert round(16384 / 3014, 2) == 5.44
    assert planned.concurrent_requests == 16383 // 3014 == 5


def test_a_coordinator_from_a_shared_plan_draws_on_one_pool() -> None:
    config = load_config(ROOT / "examples" / "voxtral_realtime.toml")
    planned = plan(config.model, config.engine.model_copy(update={"kv_cache_layout": "shared"}))
    coord = KVCacheCoordinator.from_plan(planned)
    assert len({id(p) for p in coord._core.pools}) == 1
    audio, text = coord.group("audio", PooledBlocks), coord.group("text", Tokens)
    step = coord.stepper(audio, text)
    step.admit("r1", PooledBlocks(1000), Tokens(1000))
    step.allocate("r1", PooledBlocks(1), Tokens(129))  # 1 audio block; text: 128 tokens a block
    usage = coord.usage_by_group()
    assert usage["audio"].capacity == usage["text"].capacity == CacheBlocks(2559)
    assert usage["audio"].free == usage["text"].free == CacheBlocks(2559 - 3)
    assert (usage["audio"].used, usage["text"].used) == (CacheBlocks(1), CacheBlocks(2))
    assert coord.block_table("r1", audio) == [1] and coord.block_table("r1", text) == [2, 3]
    check_pools(coord)


def _two_windows(num_blocks: int, reserve: bool = False) -> KVCacheCoordinator:
    """A full-attention group b and a sliding window a of 2 tokens, blocks of 2 (pages
    equal), one pool."""
    layer = SlidingWindowLayer(
        sliding_window=Window(2, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
    )
    return coordinator(
        {"b": FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8)), "a": layer},
        block_size=2,
        num_blocks=num_blocks,
        max_len=20,
        max_in_flight=4,
        reserve=reserve,
        shared=True,
    )


def test_one_groups_evictions_feed_anothers_allocation_in_the_same_step() -> None:
    """Block size 2, a pool of 6 blocks. Groups b (full) and a (window 2) of request r hold
    slots 0-3 in blocks b [1, 3], a [2, 4]; request s holds the last two. The next step of r
    adds a slot to b only, and a (a step of 0 at slot 4: its next query reads slots 3 and 4)
    evicts its block 2 (slots 0-1). b's new block is that one, in the same step, although b
    comes first: every group's evictions go back before any group allocates (vLLM's
    remove_skipped_blocks first)."""
    coord = _two_windows(7)
    b, a = coord.group("b", Tokens), coord.group("a", Tokens)
    step = coord.stepper(b, a)
    step.admit("r", Tokens(6), Tokens(6))
    step.allocate("r", Tokens(2), Tokens(2))
    step.allocate("r", Tokens(2), Tokens(2))
    step.admit("s", Tokens(2), Tokens(2))
    step.allocate("s", Tokens(2), Tokens(2))
    assert coord.block_table("r", b) == [1, 3] and coord.block_table("r", a) == [2, 4]
    assert coord.usage(a).free == CacheBlocks(0)
    step.allocate("r", Tokens(1), Tokens(0))
    assert coord.block_table("r", b) == [1, 3, 2] and coord.block_table("r", a) == [0, 4]
    check_pools(coord)


def test_a_step_the_pool_cannot_hold_changes_nothing_in_any_group() -> None:
    """The two groups want 2 blocks together and 1 is free: the step fails whole, and the
    error names the shared pool."""
    coord = _two_windows(6)
    b, a = coord.group("b", Tokens), coord.group("a", Tokens)
    step = coord.stepper(b, a)
    step.admit("r", Tokens(6), Tokens(4))
    step.admit("s", Tokens(4), Tokens(0))
    step.allocate("r", Tokens(4), Tokens(2))  # 3 of the 5 blocks
    step.allocate("s", Tokens(2), Tokens(0))  # the 4th
    tables = [list(coord.block_table("r", h)) for h in (b, a)]
    with pytest.raises(AllocationError, match="from the pool all groups share") as err:
        step.allocate("r", Tokens(1), Tokens(1))
    assert (err.value.needed, err.value.free) == (CacheBlocks(2), CacheBlocks(1))
    assert [list(coord.block_table("r", h)) for h in (b, a)] == tables
    assert coord.usage(a).free == CacheBlocks(1)
    check_pools(coord)


def test_reservations_on_one_pool_sum_the_groups_caps() -> None:
    """With one pool, a request's caps in every group are reserved from it together: caps 10
    (b: ``cdiv(20, 2)``) and 4 (a: ``min(cdiv(2 − 1 + 4, 2) + 1, 10)``) make 14; a pool of
    14 usable blocks admits one such request, and refuses one whose caps exceed it."""
    coord = _two_windows(15, reserve=True)
    coord.admit("r1")
    usage = coord.usage_by_group()
    assert (usage["b"].reserved, usage["a"].reserved) == (CacheBlocks(10), CacheBlocks(4))
    with pytest.raises(AllocationError, match="the pool of groups b, a has 0 of 14"):
        coord.admit("r2")
    small = _two_windows(14, reserve=True)
    with pytest.raises(AdmissionError, match="can never fit: it can hold 14 cache_block at once"):
        small.admit("r1")


def test_a_shared_pool_needs_one_page_size() -> None:
    from .support import group_of

    groups = [
        group_of("a", FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8)), **LIMITS),
        group_of("b", FullAttentionLayer(kv_heads=KVHeads(2), head_size=Elements(8)), **LIMITS),
    ]
    with pytest.raises(SpecError, match="one pool for all groups needs one page size"):
        KVCacheCoordinator(groups, PoolBlocks(10))


LIMITS = {"block_size": 2, "max_len": 20, "max_in_flight": 4}


def test_cli_plan_shows_both_layouts(tmp_path: Path) -> None:
    from kvunits.cli import main

    out = tmp_path / "plan.json"
    import contextlib
    import io
    import json

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["plan", "--kv-cache-layout", "shared", "--format", "json"]) == 0
    out.write_text(buffer.getvalue())
    data = json.loads(out.read_text())
    assert data["engine"]["kv_cache_layout"] == {
        "value": "shared",
        "from": "flag --kv-cache-layout",
    }
    assert [(x["layout"], x["concurrent_requests"]) for x in data["layouts"]] == [
        ("shared", 27),
        ("per_group", 32),
    ]
    assert data["layouts"][0]["page_size"] == {"value": 524288, "unit": "byte"}
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["plan"]) == 0
    assert "with kv_cache_layout = shared (one pool shared by all groups" in buffer.getvalue()
