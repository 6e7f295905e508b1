"""Layer groups and capacity planning: models with an encoder and a decoder, mixed stacks,
golden plans with their arithmetic written out, and the plan's invariants over random models."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvunits.contracts import (
    AdmissionCap,
    Bytes,
    Chunk,
    ChunkedLocalLayer,
    CrossAttentionLayer,
    Elements,
    EncoderOnlyLayer,
    EncoderTokens,
    EngineSpec,
    FullAttentionLayer,
    KVHeads,
    Layers,
    LayerSpec,
    MLALayer,
    ModelSpec,
    PoolBlocks,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    SpecError,
    StateLayer,
    Tokens,
    Window,
    group_layers,
    manager_view,
)
from kvunits.contracts._groups import group_limits
from kvunits.contracts.deploy import RankBytes
from kvunits.runtime.capacity import CapacityPlan, plan

from ..examples import examples
from .layer_model import RawLayer, ceil_div, raw_layers

GiB = 1024**3


def voxtral_model() -> ModelSpec:
    """Voxtral Realtime: a pooled sliding-window audio encoder and a full-attention decoder."""
    audio = SlidingWindowLayer(
        sliding_window=Window(750, EncoderTokens),
        pool=PoolFactor(4),
        kv_heads=KVHeads(32),
        head_size=Elements(64),
    )
    text = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))
    return ModelSpec.stacked(
        "voxtral-realtime", {"audio": (audio, Layers(32)), "text": (text, Layers(26))}
    )


def voxtral_engine(budget: str = "40 GiB", **extra: object) -> EngineSpec:
    """Decoder limits in tokens, encoder limits in encoder tokens (4 = one pooled block)."""
    return EngineSpec.model_validate(
        {
            "block_size_slots": 16,
            "max_model_len": "8192 token",
            "max_num_batched_tokens": "2048 token",
            "max_encoder_len": "6000 encoder_token",
            "max_encoder_tokens_per_step": "4 encoder_token",
            "memory_budget": budget,
            **extra,
        }
    )


def gemma_like_model(num_layers: int = 26, every: int = 6) -> ModelSpec:
    """Gemma-like: sliding and full attention interleaved in one stack (every 6th is full)."""
    sliding = SlidingWindowLayer(
        sliding_window=Window(4096, Tokens), kv_heads=KVHeads(8), head_size=Elements(128)
    )
    full = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))
    layers: dict[str, LayerSpec] = {
        f"layers.{i}": full if i % every == every - 1 else sliding for i in range(num_layers)
    }
    return ModelSpec(name="gemma-like", layers=layers)


def decoder_engine(budget: int = 8 * GiB, max_model_len: int = 8192) -> EngineSpec:
    return EngineSpec(
        max_model_len=Tokens(max_model_len),
        max_num_batched_tokens=Tokens(2048),
        memory_budget=RankBytes(budget),
    )


# -- grouping ---------------------------------------------------------------------------------


def test_voxtral_groups_audio_and_text() -> None:
    groups, uncached = group_layers(voxtral_model(), voxtral_engine())
    assert [g.name for g in groups] == ["audio", "text"] and uncached == ()
    audio, text = groups
    assert audio.num_layers == Layers(32) and audio.layer_names[0] == "audio.0"
    assert text.num_layers == Layers(26) and text.layer_names[-1] == "text.25"
    assert audio.manager.expect(PooledBlocks).sliding_window == Window(189, PooledBlocks)
    assert text.manager.expect(Tokens).sliding_window is None
    # Every member keeps its own kernel view, in the kernel's unit.
    assert set(audio.kernels) == set(audio.layer_names)
    assert all(
        k.expect(EncoderTokens).sliding_window == Window(750, EncoderTokens)
        for k in audio.kernels.values()
    )
    # Limits in each group's slot unit: the longest sequence, cdiv(6000, 4) = 1500 pooled
    # blocks; a step of 4 encoder tokens, which touches 2 pooled blocks when it starts mid-slot.
    assert audio.limits.max_len == PooledBlocks(1500)
    assert audio.limits.max_in_flight == PooledBlocks(2)
    assert text.limits.max_len == Tokens(8192)
    assert text.limits.max_in_flight == Tokens(2048)


def test_layers_shared_or_copied_group_alike() -> None:
    # A config's group is one layer object under many names, and group_layers computes its
    # views once; layers that are equal copies must give the very same groups.
    shared = voxtral_model()
    copied = ModelSpec(
        name=shared.name,
        layers={name: layer.model_copy() for name, layer in shared.layers.items()},
    )
    assert len({id(layer) for layer in shared.layers.values()}) == 2
    assert len({id(layer) for layer in copied.layers.values()}) == len(copied.layers)
    engine = voxtral_engine()
    assert group_layers(shared, engine) == group_layers(copied, engine)
    assert plan(shared, engine) == plan(copied, engine)


def test_gemma_like_mixed_stack_gives_two_named_groups() -> None:
    groups, _ = group_layers(gemma_like_model(), decoder_engine())
    assert [g.name for g in groups] == ["layers/sliding_window", "layers/full_attention"]
    sliding, full = groups
    assert full.layer_names == ("layers.5", "layers.11", "layers.17", "layers.23")
    assert sliding.num_layers == Layers(22) and "layers.5" not in sliding.layer_names
    assert sliding.manager.kind == "sliding_window" and full.manager.kind == "full_attention"


def test_gemma_like_with_a_single_full_layer() -> None:
    groups, _ = group_layers(gemma_like_model(num_layers=8, every=6), decoder_engine())
    assert [(g.name, g.layer_names) for g in groups][1] == (
        "layers/full_attention",
        ("layers.5",),
    )


def test_two_windows_in_one_stack_get_distinct_names() -> None:
    short = SlidingWindowLayer(
        sliding_window=Window(512, Tokens), kv_heads=KVHeads(8), head_size=Elements(128)
    )
    long = SlidingWindowLayer(
        sliding_window=Window(4096, Tokens), kv_heads=KVHeads(8), head_size=Elements(128)
    )
    model = ModelSpec(
        name="m", layers={"layers.0": short, "layers.1": long, "layers.2": short, "layers.3": long}
    )
    groups, _ = group_layers(model, decoder_engine())
    assert [g.name for g in groups] == ["layers/sliding_window", "layers/sliding_window#2"]


def test_identical_stacks_merge_and_windows_that_manage_alike_share_a_group() -> None:
    a = SlidingWindowLayer(
        sliding_window=Window(750, EncoderTokens),
        pool=PoolFactor(4),
        kv_heads=KVHeads(4),
        head_size=Elements(64),
    )
    b = a.model_copy(update={"sliding_window": Window(751, EncoderTokens)})  # also 189 pooled
    model = ModelSpec(name="m", layers={"enc.0": a, "enc.1": b})
    groups, _ = group_layers(model, voxtral_engine())
    assert len(groups) == 1 and groups[0].name == "enc" and groups[0].num_layers == Layers(2)
    p = plan(model, voxtral_engine())
    # The kernels differ (750, 751), so the plan reports no single model window.
    assert p.groups[0].sliding_window is None
    assert p.groups[0].group.manager.sliding_window == Window(189, PooledBlocks)


def test_encoder_only_layers_are_listed_as_uncached() -> None:
    model = ModelSpec.stacked(
        "m",
        {
            "encoder": (EncoderOnlyLayer(), Layers(3)),
            "decoder": (FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(64)), Layers(2)),
        },
    )
    groups, uncached = group_layers(model, decoder_engine())
    assert uncached == ("encoder.0", "encoder.1", "encoder.2")
    assert [g.name for g in groups] == ["decoder"]
    assert plan(model, decoder_engine()).uncached_layers == uncached


def test_pooled_groups_need_the_encoder_limits() -> None:
    with pytest.raises(
        SpecError, match=r"set engine\.max_encoder_len and engine\.max_encoder_tokens_per_step"
    ):
        group_layers(voxtral_model(), decoder_engine())


def test_group_limits_of_a_cross_attention_group_are_its_encoder_length() -> None:
    layer = CrossAttentionLayer(
        encoder_length=EncoderTokens(1500),
        pool=PoolFactor(2),
        kv_heads=KVHeads(4),
        head_size=Elements(64),
    )
    m = manager_view(layer, 16).expect(PooledBlocks)
    # Before the fix this raised SpecError: the engine had to declare encoder limits that the
    # layer's cap never reads. cdiv(1500, 2) = 750 pooled blocks, written once per request.
    limits = group_limits(m, decoder_engine())
    assert limits.max_len == PooledBlocks(750) and limits.max_in_flight == PooledBlocks(750)


# -- golden plans -----------------------------------------------------------------------------


def test_voxtral_plan() -> None:
    p = plan(voxtral_model(), voxtral_engine("40 GiB"))
    audio, text = p.group("audio"), p.group("text")
    # audio: page 16 × 4 × 32 × (64 + 64) × 2 = 524288 byte; 32 layers: 16777216 byte a block
    assert audio.page_size == Bytes(524288)
    assert audio.block_bytes == Bytes(32 * 524288) == Bytes(16777216)
    assert audio.sliding_window == Window(750, EncoderTokens)
    assert audio.group.manager.sliding_window == Window(189, PooledBlocks)
    assert str(audio.group.manager.sliding_window) == "189 pooled_block"
    # cap: cdiv(min(189 - 1 + 1, 1500), 16) + 1 = 12 + 1 = 13
    assert audio.admission_cap == AdmissionCap(13)
    assert audio.bytes_per_request == Bytes(13 * 16777216) == Bytes(218103808)
    # text: page 16 × 8 × (128 + 128) × 2 = 65536 byte; 26 layers: 1703936 byte a block;
    # cap cdiv(8192, 16) = 512; 512 × 1703936 = 872415232 byte
    assert text.page_size == Bytes(65536) and text.block_bytes == Bytes(1703936)
    assert text.admission_cap == AdmissionCap(512)
    assert text.bytes_per_request == Bytes(872415232)
    assert text.sliding_window is None and text.group.manager.sliding_window is None
    # A request: 218103808 + 872415232 = 1090519040 byte. Null blocks: 16777216 + 1703936 =
    # 18481152 byte. Usable: 40 × 2**30 − 18481152 = 42931191808 byte.
    assert p.bytes_per_request == Bytes(1090519040)
    assert p.kv_cache_memory == RankBytes(42949672960)
    # Blocks: 1 + 42931191808 × 13 // 1090519040 = 1 + 511 = 512 (audio),
    #         1 + 42931191808 × 512 // 1090519040 = 1 + 20156 = 20157 (text).
    assert audio.num_blocks == PoolBlocks(512)
    assert text.num_blocks == PoolBlocks(20157)
    # Requests at full length: min(511 // 13, 20156 // 512) = min(39, 39) = 39
    #                        = 42931191808 // 1090519040.
    assert p.concurrent_requests == 39
    assert 40 * GiB >= 512 * 16777216 + 20157 * 1703936
    assert str(audio.admission_cap) == "13 cache_block"


def test_mistral_like_plan() -> None:
    layer = SlidingWindowLayer(
        sliding_window=Window(4096, Tokens), kv_heads=KVHeads(8), head_size=Elements(128)
    )
    model = ModelSpec.stacked("mistral-7b-like", {"layers": (layer, Layers(32))})
    p = plan(model, decoder_engine(budget=16 * GiB))
    (g,) = p.groups
    assert g.group.name == "layers"
    # cap: cdiv(min(4095 + 2048, 8192), 16) + 1 = cdiv(6143, 16) + 1 = 384 + 1 = 385
    assert g.admission_cap == AdmissionCap(ceil_div(4095 + 2048, 16) + 1) == AdmissionCap(385)
    # block: 32 layers × 65536 byte = 2 MiB; a request 385 × 2 MiB = 807403520 byte
    assert g.block_bytes == Bytes(2 * 1024 * 1024)
    assert p.bytes_per_request == Bytes(807403520)
    # One group takes the whole budget: 16 GiB / 2 MiB = 8192 blocks, the null one included;
    # 8191 // 385 = 21 requests.
    assert g.num_blocks == PoolBlocks(8192)
    assert p.concurrent_requests == 21
    assert g.sliding_window == Window(4096, Tokens) and g.group.manager.sliding_window == Window(
        4096, Tokens
    )


def test_gemma_like_plan() -> None:
    p = plan(gemma_like_model(), decoder_engine(budget=8 * GiB))
    sliding, full = p.group("layers/sliding_window"), p.group("layers/full_attention")
    # sliding: cap 385 (as Mistral), 22 × 65536 byte a block; full: cdiv(8192, 16) = 512,
    # 4 × 65536 byte a block. A request: 385 × 1441792 + 512 × 262144 = 689307648 byte.
    assert sliding.admission_cap == AdmissionCap(385) and full.admission_cap == AdmissionCap(512)
    assert p.bytes_per_request == Bytes(689307648)
    # Usable: 8 × 2**30 − (1441792 + 262144) = 8588230656; 8588230656 // 689307648 = 12
    assert p.concurrent_requests == 12


def test_whisper_like_plan_needs_no_encoder_limits() -> None:
    # The encoder keeps no cache; the decoder's cross attention is sized by the declared
    # encoder length (1500 encoder tokens), not by the decoder's 448 tokens.
    model = ModelSpec.stacked(
        "whisper-like",
        {
            "encoder": (EncoderOnlyLayer(), Layers(32)),
            "self": (FullAttentionLayer(kv_heads=KVHeads(20), head_size=Elements(64)), Layers(32)),
            "cross": (
                CrossAttentionLayer(
                    encoder_length=EncoderTokens(1500), kv_heads=KVHeads(20), head_size=Elements(64)
                ),
                Layers(32),
            ),
        },
    )
    engine = EngineSpec(
        max_model_len=Tokens(448),
        max_num_batched_tokens=Tokens(448),
        memory_budget=RankBytes(4 * GiB),
    )
    p = plan(model, engine)
    assert len(p.uncached_layers) == 32
    self_attn, cross = p.group("self"), p.group("cross")
    # page: 16 × 20 × (64 + 64) × 2 = 81920 byte; 32 layers: 2621440 byte a block
    assert self_attn.block_bytes == cross.block_bytes == Bytes(2621440)
    # self: cdiv(448, 16) = 28; cross: cdiv(1500, 16) = 94
    assert self_attn.admission_cap == AdmissionCap(28)
    assert cross.admission_cap == AdmissionCap(94)
    # (28 + 94) × 2621440 = 319815680 byte a request;
    # (4 × 2**30 − 2 × 2621440) // 319815680 = 4289724416 // 319815680 = 13
    assert p.bytes_per_request == Bytes(319815680)
    assert p.concurrent_requests == 13


def test_state_and_mla_plan() -> None:
    model = ModelSpec.stacked(
        "hybrid",
        {
            "mamba": (StateLayer(state_size=Bytes(2 * 1024 * 1024)), Layers(4)),
            "mla": (MLALayer(kv_lora_rank=Elements(512), qk_rope_head_dim=Elements(64)), Layers(2)),
        },
    )
    p = plan(model, decoder_engine(budget=GiB, max_model_len=4096))
    mamba, mla = p.group("mamba"), p.group("mla")
    # state: one 2 MiB page a layer a request, 4 layers: 8388608 byte a request
    assert mamba.admission_cap == AdmissionCap(1) and mamba.block_bytes == Bytes(8388608)
    # MLA: 16 × 576 × 2 = 18432 byte a page, 2 layers: 36864; cap cdiv(4096, 16) = 256
    assert mla.page_size == Bytes(18432) and mla.admission_cap == AdmissionCap(256)
    # A request: 8388608 + 256 × 36864 = 17825792 byte;
    # (2**30 − 8388608 − 36864) // 17825792 = 1065315328 // 17825792 = 59
    assert p.bytes_per_request == Bytes(17825792)
    assert p.concurrent_requests == 59


# -- the budget edge --------------------------------------------------------------------------


def test_budget_of_exactly_one_request_and_one_byte_less() -> None:
    layer = FullAttentionLayer(
        kv_heads=KVHeads(1), head_size=Elements(8)
    )  # page 16 × 1 × 16 × 2 = 512 byte
    model = ModelSpec.stacked("tiny", {"l": (layer, Layers(2))})
    # A request: cdiv(100, 16) = 7 blocks × 1024 byte = 7168 byte, plus 1024 of null block.
    exact = plan(model, decoder_engine(budget=7168 + 1024, max_model_len=100))
    assert exact.concurrent_requests == 1
    assert exact.groups[0].num_blocks == PoolBlocks(8)
    # One byte less: the longest max_model_len that fits is one block less, 6 × 16 = 96
    # (6 × 1024 + 1024 = 7168 <= 8191), as vLLM's estimate_max_model_len would search it.
    with pytest.raises(
        SpecError,
        match=r"^memory_budget 8191 byte/rank cannot hold one full-length "
        r"request: it needs 7168 byte/rank plus 1024 byte/rank of null blocks \(8192 "
        r"byte/rank in all\); the longest max_model_len that fits is 96 token \(kvunits "
        r"fit\)$",
    ):
        plan(model, decoder_engine(budget=7168 + 1023, max_model_len=100))


def test_chunk_that_is_not_whole_blocks_is_refused() -> None:
    # Block size 16, chunk 24, 2 tokens a step: at 47 computed the step writes 47-48 and the
    # chunk started at 24, so blocks 1-3 are held; cdiv(min(24 + 2, 8192), 16) = 2 would be
    # the cap. Planning with it would over-promise; 32 (two whole blocks) is fine.
    def model(chunk: int) -> ModelSpec:
        layer = ChunkedLocalLayer(
            chunk=Chunk(chunk, Tokens), kv_heads=KVHeads(8), head_size=Elements(128)
        )
        return ModelSpec.stacked("local", {"layers": (layer, Layers(4))})

    engine = EngineSpec(
        max_model_len=Tokens(8192), max_num_batched_tokens=Tokens(2), memory_budget=RankBytes(GiB)
    )
    with pytest.raises(
        SpecError,
        match="chunk of 24 token is not a whole number of cache blocks of 16 token",
    ):
        plan(model(24), engine)
    # cdiv(min(32 + 2, 8192), 16) = 3
    assert plan(model(32), engine).groups[0].admission_cap == AdmissionCap(3)


def test_voxtral_budget_too_small() -> None:
    with pytest.raises(SpecError, match="cannot hold one full-length request"):
        plan(voxtral_model(), voxtral_engine("1 GiB"))


def test_model_without_cache_cannot_be_planned() -> None:
    model = ModelSpec.stacked("encoder", {"enc": (EncoderOnlyLayer(), Layers(4))})
    with pytest.raises(SpecError, match="model 'encoder' has no layer with a KV cache to plan"):
        plan(model, decoder_engine())


def test_unknown_group_name() -> None:
    with pytest.raises(SpecError, match="no group 'vision'; groups: audio, text"):
        plan(voxtral_model(), voxtral_engine()).group("vision")


def test_engine_dtype_override_reaches_the_plan() -> None:
    p = plan(voxtral_model(), voxtral_engine(cache_dtype="fp8"))
    assert p.group("audio").page_size == Bytes(524288 // 2)
    kernels = p.group("audio").group.kernels.values()
    assert all(k.dtype.itemsize_bytes == 1 for k in kernels)


# -- invariants over random models -----------------------------------------------------------


def slot_limits(raw: RawLayer, engine: EngineSpec) -> tuple[int, int]:
    """(max_in_flight, max_len) in the layer's slot unit, computed here from the engine."""
    if raw.kind == "cross":
        fixed = ceil_div(raw.seq, raw.p)
        return fixed, fixed
    if raw.slot_is_pooled:
        assert engine.max_encoder_len is not None
        assert engine.max_encoder_tokens_per_step is not None
        # A step of Q encoder tokens need not start on a slot boundary: at worst its first
        # token is the last of a slot, and it touches 1 + ceil((Q - 1) / P) slots.
        step = engine.max_encoder_tokens_per_step.numerical_value_in(EncoderTokens)
        return (
            1 + ceil_div(step - 1, raw.p),
            ceil_div(engine.max_encoder_len.numerical_value_in(EncoderTokens), raw.p),
        )
    return engine.max_num_batched_tokens.numerical_value_in(
        Tokens
    ), engine.max_model_len.numerical_value_in(Tokens)


@st.composite
def models(draw: st.DrawFn) -> tuple[ModelSpec, dict[str, RawLayer]]:
    stacks = draw(st.lists(raw_layers(), min_size=1, max_size=4))
    layers: dict[str, dict[str, object]] = {}
    raws: dict[str, RawLayer] = {}
    for s, raw in enumerate(stacks):
        for i in range(draw(st.integers(1, 4))):
            layers[f"s{s}.{i}"] = raw.config()
            raws[f"s{s}.{i}"] = raw
    if draw(st.booleans()):
        layers["enc.0"] = {"kind": "encoder_only"}
    return ModelSpec.model_validate({"name": "random", "layers": layers}), raws


@settings(max_examples=examples(150))
@given(
    model_and_raws=models(),
    bs=st.sampled_from([1, 16]) | st.integers(1, 64),
    max_len=st.integers(1, 65536),
    in_flight=st.integers(1, 4096),
    enc_len=st.integers(1, 20000),
    enc_step=st.integers(1, 2048),
    # The budget relative to what a request needs: a little short of it (SpecError), exactly
    # it, or up to 16 GiB more.
    slack=st.integers(-4096, 0) | st.integers(0, 1 << 34),
)
def test_plan_invariants(
    model_and_raws: tuple[ModelSpec, dict[str, RawLayer]],
    bs: int,
    max_len: int,
    in_flight: int,
    enc_len: int,
    enc_step: int,
    slack: int,
) -> None:
    model, raws = model_and_raws
    engine = EngineSpec(
        block_size_slots=bs,
        max_model_len=Tokens(max_len),
        max_num_batched_tokens=Tokens(in_flight),
        max_encoder_len=EncoderTokens(enc_len),
        max_encoder_tokens_per_step=EncoderTokens(enc_step),
        memory_budget=RankBytes(1),
    )
    if any(raw.chunk_misaligned(bs) for raw in raws.values()):
        with pytest.raises(SpecError, match="is not a whole number of cache blocks"):
            plan(model, engine)
        return
    groups, uncached = group_layers(model, engine)
    assert uncached == tuple(n for n in model.layers if n not in raws)
    # Every cached layer is in exactly one group; names are unique.
    members = [n for g in groups for n in g.layer_names]
    assert sorted(members) == sorted(raws)
    assert len({g.name for g in groups}) == len(groups)
    # Expected figures per group, from the plain-int model of each member layer.
    need = 0
    null = 0
    caps: dict[str, int] = {}
    for g in groups:
        figures = set()
        for name in g.layer_names:
            raw = raws[name]
            step, length = slot_limits(raw, engine)
            figures.add((raw.page_bytes(bs), raw.cap(bs, step, length)))
        assert len(figures) == 1, f"layers of one group disagree: {figures}"
        ((page, cap),) = figures
        caps[g.name] = cap
        layers = g.num_layers.numerical_value_in(Layers)
        need += cap * page * layers
        null += page * layers
    budget = max(1, need + null + slack)
    engine = EngineSpec.model_validate({**engine.model_dump(), "memory_budget": f"{budget} B"})
    if budget < need + null:
        with pytest.raises(SpecError, match="cannot hold one full-length request"):
            plan(model, engine)
        return
    p: CapacityPlan = plan(model, engine)
    assert p.bytes_per_request == Bytes(need)
    # The proportional split loses nothing to rounding: as many requests as the usable
    # budget holds whole.
    assert p.concurrent_requests == (budget - null) // need >= 1
    total = 0
    for gp in p.groups:
        cap = caps[gp.group.name]
        assert gp.admission_cap == AdmissionCap(cap)
        layers = gp.group.num_layers.numerical_value_in(Layers)
        assert gp.block_bytes == Bytes(gp.page_size.numerical_value_in(Bytes) * layers)
        assert gp.bytes_per_request == Bytes(cap * gp.block_bytes.numerical_value_in(Bytes))
        # Each group holds its null block and every admitted request at full length.
        assert gp.num_blocks.numerical_value_in(PoolBlocks) >= 1 + p.concurrent_requests * cap
        total += gp.num_blocks.numerical_value_in(PoolBlocks) * gp.block_bytes.numerical_value_in(
            Bytes
        )
    assert total <= budget


def test_layer_groups_are_hashable_values() -> None:
    groups, _ = group_layers(voxtral_model(), voxtral_engine())
    again, _ = group_layers(voxtral_model(), voxtral_engine())
    assert groups == again and {hash(g) for g in groups} == {hash(g) for g in again}
    assert len(set(groups) | set(again)) == 2
