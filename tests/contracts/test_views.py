"""The two views of a layer (what the cache manager reads, what the kernel reads), derived
only by `manager_view` / `kernel_view`: golden cases with their arithmetic written out, the
boundary (no hand-built view), and a hypothesis check of every formula against a plain-int
re-implementation of the MISSION.md formulas."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvunits.contracts import (
    AdmissionCap,
    BlockSize,
    Bytes,
    CacheBlocks,
    CacheDType,
    Chunk,
    ChunkedLocalLayer,
    CrossAttentionLayer,
    Elements,
    EncoderOnlyLayer,
    EncoderTokens,
    FullAttentionLayer,
    KernelSpec,
    KVHeads,
    ManagerSpec,
    MLALayer,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    SpecError,
    SpecValidationError,
    StateLayer,
    TableBlocks,
    Tokens,
    UnitError,
    UnitTypeError,
    UnitValueError,
    Window,
    kernel_view,
    manager_view,
    pool_length,
    pool_window,
    slots_to_cache_blocks_ceil,
)
from kvunits.contracts._views import _admission_blocks as admission_blocks
from kvunits.contracts.internal import kernel_ints, manager_ints

from ..examples import examples
from .layer_model import ITEMSIZE, RawLayer, build, ceil_div, raw_layers


def voxtral_encoder_layer() -> SlidingWindowLayer:
    """Voxtral Realtime's causal Whisper encoder layer: window 750 encoder tokens, P = 4."""
    return SlidingWindowLayer(
        sliding_window=Window(750, EncoderTokens),
        pool=PoolFactor(4),
        kv_heads=KVHeads(32),
        head_size=Elements(64),
        dtype=CacheDType.bfloat16,
    )


def mistral_layer() -> SlidingWindowLayer:
    return SlidingWindowLayer(
        sliding_window=Window(4096, Tokens), kv_heads=KVHeads(8), head_size=Elements(128)
    )


# -- golden: Voxtral Realtime encoder ---------------------------------------------------------


def test_voxtral_manager_view() -> None:
    m = manager_view(voxtral_encoder_layer(), block_size_slots=16).expect(PooledBlocks)
    assert m.kind == "sliding_window" and m.slot_unit is PooledBlocks
    # window: cdiv(750 - 1, 4) + 1 = cdiv(749, 4) + 1 = 188 + 1 = 189 pooled blocks
    assert m.sliding_window == Window(189, PooledBlocks)
    assert str(m.sliding_window) == "189 pooled_block"
    assert manager_ints(m).sliding_window_slots == 189
    assert m.block_size == BlockSize(16, PooledBlocks)
    assert str(m.block_size) == "16 pooled_block/cache_block"
    # page: block 16 × P 4 × 32 heads × (64 + 64) × 2 byte = 524288 byte
    assert m.page_size == Bytes(16 * 4 * 32 * (64 + 64) * 2) == Bytes(524288)
    # vLLM's seed fix widened the heads instead (32 × 4 = 128 heads per slot): same bytes.
    assert m.widened_kv_heads == KVHeads(128)
    assert m.page_size == Bytes(16 * (32 * 4) * (64 + 64) * 2)
    assert m.kv_heads == KVHeads(32)
    assert str(m.page_size) == "524288 byte"


def test_voxtral_admission_cap_is_13() -> None:
    m = manager_view(voxtral_encoder_layer(), block_size_slots=16).expect(PooledBlocks)
    # cdiv(min(189 - 1 + 1, 100000), 16) + 1 = cdiv(189, 16) + 1 = 12 + 1 = 13 cache blocks
    cap = m.max_admission_blocks_per_request(PooledBlocks(1), PooledBlocks(100_000))
    assert cap == AdmissionCap(13)
    assert str(cap) == "13 cache_block"
    assert m.max_memory_per_request(PooledBlocks(1), PooledBlocks(100_000)) == Bytes(13 * 524288)
    # The seed's fix (window 188 = cdiv(750, 4), a length rule) also gives 13, which is why its
    # test could not tell the off-by-one apart: cdiv(188 - 1 + 1, 16) + 1 = 12 + 1 = 13.
    assert admission_blocks("sliding_window", 16, 188, None, None, 1, 100_000) == 13


def test_voxtral_naive_derivation_is_a_unit_error() -> None:
    layer = voxtral_encoder_layer()
    m = manager_view(layer, block_size_slots=16).expect(PooledBlocks)
    # The bug: 750 read as pooled blocks, cdiv(750 - 1 + 1, 16) + 1 = 47 + 1 = 48 blocks.
    assert admission_blocks("sliding_window", 16, 750, None, None, 1, 100_000) == 48
    # Every typed way to write it fails at run time too (mypy rejects each: see
    # tests/typing/snippets/reject_specs_views.py).
    with pytest.raises(
        UnitTypeError,
        match=r"PooledBlocks takes an int number of pooled_block, got 750 encoder_token \(a wind",
    ):
        PooledBlocks(layer.sliding_window)  # type: ignore[arg-type]
    with pytest.raises(
        UnitTypeError,
        match=r"slots must be PooledBlocks \(pooled_block\), got "
        r"750 encoder_token \(a window\)",
    ):
        slots_to_cache_blocks_ceil(layer.sliding_window, m.block_size)  # type: ignore[call-overload]
    with pytest.raises(
        UnitTypeError,
        match=r"max_in_flight must be PooledBlocks \(pooled_block\)"
        ", got 1 encoder_token",
    ):
        m.max_admission_blocks_per_request(
            EncoderTokens(1),  # type: ignore[arg-type]
            PooledBlocks(100_000),
        )


def test_voxtral_kernel_view() -> None:
    k = kernel_view(voxtral_encoder_layer(), block_size_slots=16).expect(EncoderTokens)
    assert k.seq_unit is EncoderTokens
    # A cache block holds 16 pooled blocks × 4 = 64 encoder tokens.
    assert k.tokens_per_block == BlockSize(64, EncoderTokens)
    assert str(k.tokens_per_block) == "64 encoder_token/cache_block"
    # The kernel keeps the model's own window and the real head count.
    assert k.sliding_window == Window(750, EncoderTokens)
    assert k.kv_heads == KVHeads(32) and k.pool == PoolFactor(4)
    assert (k.head_size_k, k.head_size_v) == (Elements(64), Elements(64))
    assert str(k) == (
        "sliding_window kernel: 64 encoder_token/cache_block, sliding_window 750 encoder_token, "
        "32 kv heads"
    )


def test_voxtral_printing() -> None:
    m = manager_view(voxtral_encoder_layer(), block_size_slots=16)
    assert str(m) == (
        "sliding_window manager: 16 pooled_block/cache_block, sliding_window 189 pooled_block, "
        "page 524288 byte"
    )


# -- golden: an ordinary decoder --------------------------------------------------------------


def test_mistral_like_decoder() -> None:
    m = manager_view(mistral_layer(), block_size_slots=16).expect(Tokens)
    assert m.slot_unit is Tokens
    assert m.sliding_window == Window(4096, Tokens) and m.pool == PoolFactor(1)
    # page: 16 tokens × 8 heads × (128 + 128) × 2 byte = 65536 byte
    assert m.page_size == Bytes(65536)
    # cdiv(min(4096 - 1 + 2048, 32768), 16) + 1 = cdiv(6143, 16) + 1 = 384 + 1 = 385
    cap = m.max_admission_blocks_per_request(Tokens(2048), Tokens(32768))
    assert cap == AdmissionCap(ceil_div(4095 + 2048, 16) + 1) == AdmissionCap(385)
    assert m.max_memory_per_request(Tokens(2048), Tokens(32768)) == Bytes(385 * 65536)
    # The block table spans the whole sequence (evicted entries hold the null block).
    assert m.block_table_width(Tokens(32768)) == TableBlocks(2048)
    k = kernel_view(mistral_layer(), block_size_slots=16).expect(Tokens)
    assert k.tokens_per_block == BlockSize(16, Tokens) and k.sliding_window == Window(4096, Tokens)


def test_window_longer_than_the_sequence() -> None:
    m = manager_view(mistral_layer(), block_size_slots=16).expect(Tokens)
    # min(4095 + 2048, 1000) = 1000: the window covers the whole request, which never holds
    # more than cdiv(1000, 16) = 63 blocks (no window starts mid-block): min(63 + 1, 63) = 63.
    assert m.max_admission_blocks_per_request(Tokens(2048), Tokens(1000)) == AdmissionCap(63)


def test_window_of_one() -> None:
    layer = SlidingWindowLayer(
        sliding_window=Window(1, EncoderTokens),
        pool=PoolFactor(4),
        kv_heads=KVHeads(1),
        head_size=Elements(8),
    )
    m = manager_view(layer, block_size_slots=2).expect(PooledBlocks)
    # Only the current token: cdiv(0, 4) + 1 = 1 slot; cdiv(1 - 1 + 1, 2) + 1 = 2 blocks.
    assert m.sliding_window == Window(1, PooledBlocks)
    assert m.max_admission_blocks_per_request(PooledBlocks(1), PooledBlocks(50)) == AdmissionCap(2)


def test_window_minus_one_multiple_of_pool() -> None:
    # W - 1 = 8 is a multiple of P = 4: cdiv(8, 4) + 1 = 3 slots (vLLM's later cdiv(W, P) + 1
    # would give 4, one too many; the seed's cdiv(W, P) gives 3 here by luck).
    layer = SlidingWindowLayer(
        sliding_window=Window(9, EncoderTokens),
        pool=PoolFactor(4),
        kv_heads=KVHeads(1),
        head_size=Elements(8),
    )
    assert manager_view(layer, 16).expect(PooledBlocks).sliding_window == Window(3, PooledBlocks)


# -- golden: chunked local, MLA, state, cross attention ---------------------------------------


def test_chunked_local_llama4_like() -> None:
    layer = ChunkedLocalLayer(
        chunk=Chunk(8192, Tokens), kv_heads=KVHeads(8), head_size=Elements(128)
    )
    m = manager_view(layer, block_size_slots=16).expect(Tokens)
    assert m.kind == "chunked_local" and m.chunk == Chunk(8192, Tokens) and m.sliding_window is None
    # cdiv(min(8192 + 2048, 32768), 16) = cdiv(10240, 16) = 640; no +1: chunks start on a
    # chunk boundary, not mid-block.
    assert m.max_admission_blocks_per_request(Tokens(2048), Tokens(32768)) == AdmissionCap(640)
    # Shorter than a chunk: cdiv(min(8192 + 2048, 4000), 16) = cdiv(4000, 16) = 250
    assert m.max_admission_blocks_per_request(Tokens(2048), Tokens(4000)) == AdmissionCap(250)
    assert m.page_size == Bytes(16 * 8 * 256 * 2)
    k = kernel_view(layer, 16).expect(Tokens)
    assert k.chunk == Chunk(8192, Tokens) and k.sliding_window is None


def test_pooled_chunked_local() -> None:
    layer = ChunkedLocalLayer(
        chunk=Chunk(64, EncoderTokens),
        pool=PoolFactor(4),
        kv_heads=KVHeads(2),
        head_size=Elements(32),
    )
    m = manager_view(layer, block_size_slots=8).expect(PooledBlocks)
    # chunk: 64 / 4 = 16 pooled blocks; cdiv(min(16 + 2, 1000), 8) = cdiv(18, 8) = 3
    assert m.chunk == Chunk(16, PooledBlocks)
    assert m.max_admission_blocks_per_request(PooledBlocks(2), PooledBlocks(1000)) == AdmissionCap(
        3
    )
    # page: 8 slots × 4 tokens × 2 heads × (32 + 32) × 2 byte = 8192 byte
    assert m.page_size == Bytes(8192)
    k = kernel_view(layer, 8).expect(EncoderTokens)
    assert k.chunk == Chunk(64, EncoderTokens) and k.tokens_per_block == BlockSize(
        32, EncoderTokens
    )


@pytest.mark.parametrize(
    ("dtype", "block", "page"),
    [
        # DeepSeek-V3: one latent "head" of 512 + 64 = 576 elements, K only.
        (CacheDType.bfloat16, 64, 64 * 576 * 2),  # 73728 byte
        (CacheDType.fp8_e4m3, 64, 64 * 576 * 1),  # 36864 byte
        (CacheDType.bfloat16, 16, 16 * 576 * 2),  # 18432 byte
    ],
)
def test_mla_deepseek_v3_like(dtype: CacheDType, block: int, page: int) -> None:
    layer = MLALayer(kv_lora_rank=Elements(512), qk_rope_head_dim=Elements(64), dtype=dtype)
    m = manager_view(layer, block_size_slots=block).expect(Tokens)
    assert m.kind == "full_attention"
    assert (m.kv_heads, m.head_size_k, m.head_size_v) == (KVHeads(1), Elements(576), Elements(0))
    assert m.page_size == Bytes(page)
    # Full attention: cdiv(163840, 64) = 2560 (block 64), cdiv(163840, 16) = 10240 (block 16)
    cap = m.max_admission_blocks_per_request(Tokens(2048), Tokens(163840))
    assert cap == AdmissionCap(163840 // block)
    k = kernel_view(layer, block).expect(Tokens)
    assert (k.kv_heads, k.head_size_k, k.head_size_v) == (KVHeads(1), Elements(576), Elements(0))
    assert k.tokens_per_block == BlockSize(block, Tokens)


def test_mla_cache_dtype_override() -> None:
    layer = MLALayer(kv_lora_rank=Elements(512), qk_rope_head_dim=Elements(64))
    m = manager_view(layer, 64, cache_dtype=CacheDType.fp8_e5m2)
    assert m.dtype is CacheDType.fp8_e5m2 and m.page_size == Bytes(36864)


def test_state_layer_mamba_like() -> None:
    layer = StateLayer.model_validate({"state_size": "2 MiB"})
    m = manager_view(layer, block_size_slots=16).expect(Tokens)
    assert m.kind == "state"
    # One page per request, the size of the state: 2 × 1024 × 1024 = 2097152 byte.
    assert m.page_size == Bytes(2097152) and m.state_size == Bytes(2097152)
    for max_len in (1, 16, 1_000_000):
        assert m.max_admission_blocks_per_request(Tokens(2048), Tokens(max_len)) == AdmissionCap(1)
        assert m.max_memory_per_request(Tokens(2048), Tokens(max_len)) == Bytes(2097152)
        assert m.block_table_width(Tokens(max_len)) == TableBlocks(1)
    with pytest.raises(SpecError, match="a state layer has no paged KV cache for the kernels"):
        kernel_view(layer, 16)


def test_cross_attention_sized_by_encoder_length() -> None:
    layer = CrossAttentionLayer(
        encoder_length=EncoderTokens(1500), kv_heads=KVHeads(20), head_size=Elements(64)
    )
    m = manager_view(layer, block_size_slots=16).expect(PooledBlocks)
    assert m.kind == "cross_attention" and m.pool == PoolFactor(1)
    assert m.fixed_length == PooledBlocks(1500)
    # cdiv(1500, 16) = 94 cache blocks, whatever the decoder's length or step.
    for in_flight, max_len in ((1, 1), (1, 448), (2048, 10**6)):
        cap = m.max_admission_blocks_per_request(PooledBlocks(in_flight), PooledBlocks(max_len))
        assert cap == AdmissionCap(94)
        assert m.block_table_width(PooledBlocks(max_len)) == TableBlocks(94)
    # page: 16 × 1 × 20 × (64 + 64) × 2 = 81920 byte
    assert m.page_size == Bytes(81920)
    k = kernel_view(layer, 16).expect(EncoderTokens)
    assert k.tokens_per_block == BlockSize(16, EncoderTokens) and k.sliding_window is None


def test_pooled_cross_attention() -> None:
    layer = CrossAttentionLayer(
        encoder_length=EncoderTokens(1501),
        pool=PoolFactor(2),
        kv_heads=KVHeads(4),
        head_size=Elements(64),
    )
    m = manager_view(layer, 16).expect(PooledBlocks)
    # cdiv(1501, 2) = 751 slots (a length rounds up), cdiv(751, 16) = 47 blocks
    assert m.fixed_length == PooledBlocks(751)
    assert m.max_admission_blocks_per_request(PooledBlocks(1), PooledBlocks(1)) == AdmissionCap(47)
    assert kernel_view(layer, 16).expect(EncoderTokens).tokens_per_block == BlockSize(
        32, EncoderTokens
    )


def test_encoder_only_has_no_views() -> None:
    with pytest.raises(SpecError, match="an encoder_only layer keeps no KV cache"):
        manager_view(EncoderOnlyLayer(), 16)
    with pytest.raises(SpecError, match="encoder_only layer has no paged KV cache"):
        kernel_view(EncoderOnlyLayer(), 16)


def test_full_attention_pooled_and_unpooled() -> None:
    layer = FullAttentionLayer(
        kv_heads=KVHeads(8), head_size=Elements(128), head_size_v=Elements(64)
    )
    m = manager_view(layer, 16).expect(Tokens)
    # K and V differ: 16 × 8 × (128 + 64) × 2 = 49152 byte; cdiv(8191, 16) = 512 blocks
    assert m.page_size == Bytes(49152)
    assert m.max_admission_blocks_per_request(Tokens(1), Tokens(8191)) == AdmissionCap(512)
    pooled = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128), pool=PoolFactor(3))
    pm = manager_view(pooled, 16).expect(PooledBlocks)
    assert pm.page_size == Bytes(16 * 3 * 8 * 256 * 2)
    assert kernel_view(pooled, 16).expect(EncoderTokens).tokens_per_block == BlockSize(
        48, EncoderTokens
    )


# -- the boundary: views are derived, never built --------------------------------------------


def manager_fields(window: object) -> dict[str, Any]:
    return {
        "kind": "sliding_window",
        "slot_unit": PooledBlocks,
        "block_size": BlockSize(16, PooledBlocks),
        "pool": PoolFactor(4),
        "kv_heads": 32,
        "head_size_k": 64,
        "head_size_v": 64,
        "dtype": CacheDType.bfloat16,
        "sliding_window": window,
    }


@pytest.mark.parametrize("window", [PooledBlocks(189), PooledBlocks(750)])
def test_manager_spec_cannot_be_built_by_hand(window: PooledBlocks) -> None:
    # Even with the right figure: the only way in is manager_view.
    with pytest.raises(
        SpecError,
        match=r"ManagerSpec is derived, never built by hand \(nor "
        r"with dataclasses.replace\): use manager_view",
    ):
        ManagerSpec(**manager_fields(window))
    with pytest.raises(SpecError):
        ManagerSpec[PooledBlocks](**manager_fields(window))


def test_manager_spec_cannot_be_replaced() -> None:
    # mypy accepts these calls (the fields are typed right): only the run time can refuse.
    m = manager_view(voxtral_encoder_layer(), 16).expect(PooledBlocks)
    with pytest.raises(SpecError, match="ManagerSpec is derived"):
        dataclasses.replace(m, sliding_window=Window(750, PooledBlocks))
    with pytest.raises(SpecError, match="ManagerSpec is derived"):
        dataclasses.replace(m)


def test_kernel_spec_cannot_be_built_or_replaced() -> None:
    k = kernel_view(voxtral_encoder_layer(), 16).expect(EncoderTokens)
    with pytest.raises(SpecError, match="KernelSpec is derived, never built by hand"):
        KernelSpec(
            kind="sliding_window",
            seq_unit=EncoderTokens,
            tokens_per_block=BlockSize(64, EncoderTokens),
            pool=PoolFactor(4),
            kv_heads=KVHeads(32),
            head_size_k=Elements(64),
            head_size_v=Elements(64),
            dtype=CacheDType.bfloat16,
            sliding_window=Window(750, EncoderTokens),
        )
    with pytest.raises(SpecError, match="KernelSpec is derived"):
        dataclasses.replace(k, sliding_window=Window(3000, EncoderTokens))


def test_views_cannot_be_subclassed_around_the_check() -> None:
    # Before the fix, a subclass overriding __post_init__ built a ManagerSpec with any window.
    with pytest.raises(SpecError, match="ManagerSpec is final"):

        class Sneaky(ManagerSpec):  # type: ignore[misc,type-arg]  # @final: mypy rejects it
            def __post_init__(self) -> None:
                pass

    with pytest.raises(SpecError, match="KernelSpec is final"):

        class SneakyKernel(KernelSpec):  # type: ignore[misc,type-arg]
            pass


def test_views_are_frozen() -> None:
    m = manager_view(voxtral_encoder_layer(), 16)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.sliding_window = Window(750, PooledBlocks)  # type: ignore[misc]
    k = kernel_view(voxtral_encoder_layer(), 16)
    with pytest.raises(dataclasses.FrozenInstanceError):
        k.kv_heads = KVHeads(128)  # type: ignore[misc]


def test_views_copy_and_pickle_as_the_same_value() -> None:
    m = manager_view(voxtral_encoder_layer(), 16)
    for clone in (copy.copy(m), copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert clone == m and hash(clone) == hash(m) and clone.page_size == Bytes(524288)
        assert manager_ints(clone) == manager_ints(m)
    k = kernel_view(voxtral_encoder_layer(), 16)
    assert pickle.loads(pickle.dumps(k)) == k


def test_manager_and_kernel_views_are_different_types() -> None:
    m = manager_view(voxtral_encoder_layer(), 16)
    k = kernel_view(voxtral_encoder_layer(), 16)
    assert ManagerSpec not in type(k).__mro__ and KernelSpec not in type(m).__mro__
    assert m != k  # type: ignore[comparison-overlap]


def test_a_copy_is_validated_and_the_views_recheck_layers_built_around_validation() -> None:
    # pydantic's model_copy(update=...) skips validation; a spec model's validates the update.
    with pytest.raises(SpecValidationError, match="sliding_window 750 has no unit"):
        voxtral_encoder_layer().model_copy(update={"sliding_window": 750})
    with pytest.raises(SpecValidationError, match=r"expected a window of .*, got the length"):
        voxtral_encoder_layer().model_copy(update={"sliding_window": EncoderTokens(750)})
    with pytest.raises(SpecValidationError, match="so it counts encoder_token"):
        mistral_layer().model_copy(update={"pool": PoolFactor(4)})  # window still in tokens
    # model_construct skips validation altogether: the views check the kinds and units again.
    fields = dict(voxtral_encoder_layer())
    bad = SlidingWindowLayer.model_construct(**{**fields, "sliding_window": 750})
    with pytest.raises(
        UnitTypeError,
        match=r"window must be a Window\[EncoderTokens\] \(window of encoder_token\), "
        r"got 750 \(a bare int, no unit\)",
    ):
        manager_view(bad, 16)
    bad = SlidingWindowLayer.model_construct(**{**fields, "sliding_window": PooledBlocks(189)})
    with pytest.raises(UnitTypeError, match="got 189 pooled_block"):
        manager_view(bad, 16)
    with pytest.raises(UnitTypeError, match="got 189 pooled_block"):
        kernel_view(bad, 16)
    tokens = dict(mistral_layer())
    bad = SlidingWindowLayer.model_construct(**{**tokens, "pool": PoolFactor(4)})
    with pytest.raises(
        UnitTypeError,
        match=r"must be a Window\[EncoderTokens\] \(window of encoder_token\), got 4096 token",
    ):
        manager_view(bad, 16)


@pytest.mark.parametrize(
    ("block_size", "error", "message"),
    [
        (0, UnitValueError, "block_size_slots must be >= 1 (slots per cache block), got 0"),
        (-16, UnitValueError, "got -16"),
        (True, UnitTypeError, "got True (a bool)"),
        (16.0, UnitTypeError, "got 16.0 (a float)"),
        ("16", UnitTypeError, "got '16' (a str)"),
        (PooledBlocks(16), UnitTypeError, "got 16 pooled_block"),
    ],
)
def test_block_size_argument(block_size: object, error: type[UnitError], message: str) -> None:
    for view in (manager_view, kernel_view):
        with pytest.raises(error) as exc:
            view(voxtral_encoder_layer(), block_size)  # type: ignore[arg-type]
        assert message in str(exc.value)
        assert exc.value.field == "block_size_slots"


# -- expect: narrowing to the caller's unit ---------------------------------------------------


def test_expect_narrows_or_raises() -> None:
    m = manager_view(voxtral_encoder_layer(), 16)
    assert m.expect(PooledBlocks) is m
    with pytest.raises(
        UnitTypeError, match="this sliding_window manager counts pooled_block, not token"
    ) as exc:
        m.expect(Tokens)
    assert (exc.value.expected, exc.value.got) == ("pooled_block", "token")
    with pytest.raises(UnitTypeError, match="counts pooled_block, not encoder_token"):
        m.expect(EncoderTokens)  # type: ignore[type-var]
    t = manager_view(mistral_layer(), 16)
    with pytest.raises(UnitTypeError, match="counts token, not pooled_block"):
        t.expect(PooledBlocks)
    k = kernel_view(voxtral_encoder_layer(), 16)
    assert k.expect(EncoderTokens) is k
    with pytest.raises(
        UnitTypeError, match="this sliding_window kernel counts encoder_token, not token"
    ):
        k.expect(Tokens)
    with pytest.raises(UnitTypeError, match="counts encoder_token, not pooled_block"):
        k.expect(PooledBlocks)  # type: ignore[type-var]


# -- the manager's methods take its own slot unit only ----------------------------------------


@pytest.mark.parametrize(
    ("in_flight", "max_len", "message"),
    [
        (
            EncoderTokens(1),
            PooledBlocks(8192),
            "max_in_flight must be PooledBlocks (pooled_block), got 1 encoder_token",
        ),
        (
            PooledBlocks(1),
            EncoderTokens(8192),
            "max_len must be PooledBlocks (pooled_block), got 8192 encoder_token",
        ),
        (
            1,
            PooledBlocks(8192),
            "max_in_flight must be PooledBlocks (pooled_block), got 1 (a bare int, no unit)",
        ),
        (PooledBlocks(1), 8192, "got 8192 (a bare int, no unit)"),
        (Tokens(1), PooledBlocks(8192), "got 1 token"),
        (PooledBlocks(1), CacheBlocks(8192), "got 8192 cache_block"),
        (True, PooledBlocks(8192), "got True (a bool)"),
    ],
)
def test_pooled_manager_rejects_other_units(
    in_flight: object, max_len: object, message: str
) -> None:
    m = manager_view(voxtral_encoder_layer(), 16).expect(PooledBlocks)
    for method in (m.max_admission_blocks_per_request, m.max_memory_per_request):
        with pytest.raises(UnitTypeError) as exc:
            method(in_flight, max_len)  # type: ignore[arg-type]
        assert message in str(exc.value)
        assert exc.value.field in ("max_in_flight", "max_len")


def test_token_manager_rejects_pooled_blocks() -> None:
    m = manager_view(mistral_layer(), 16).expect(Tokens)
    with pytest.raises(
        UnitTypeError,
        match=r"max_len must be Tokens \(token\), got 8 "
        "pooled_block",
    ):
        m.max_admission_blocks_per_request(Tokens(1), PooledBlocks(8))  # type: ignore[arg-type]
    with pytest.raises(UnitTypeError, match="got 8 encoder_token"):
        m.block_table_width(EncoderTokens(8))  # type: ignore[arg-type]


def test_windows_that_manage_alike_group_alike() -> None:
    # 750 and 751 encoder tokens at P = 4 both need 189 slots: one manager spec (one group),
    # two kernel specs.
    a = voxtral_encoder_layer()
    b = a.model_copy(update={"sliding_window": Window(751, EncoderTokens)})
    assert manager_view(a, 16) == manager_view(b, 16)
    assert hash(manager_view(a, 16)) == hash(manager_view(b, 16))
    assert kernel_view(a, 16) != kernel_view(b, 16)
    c = a.model_copy(update={"sliding_window": Window(753, EncoderTokens)})  # cdiv(752, 4) + 1
    d = a.model_copy(update={"sliding_window": Window(754, EncoderTokens)})  # = 190
    assert manager_view(c, 16) == manager_view(a, 16) != manager_view(d, 16)


def test_head_size_v_defaults_to_k_in_the_views() -> None:
    implicit = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))
    explicit = FullAttentionLayer(
        kv_heads=KVHeads(8), head_size=Elements(128), head_size_v=Elements(128)
    )
    assert manager_view(implicit, 16) == manager_view(explicit, 16)


# -- every formula against an independent plain-int implementation (layer_model.py) ----------


@settings(max_examples=examples(300))
@given(
    raw=raw_layers(),
    bs=st.sampled_from([1, 2, 8, 16, 32]) | st.integers(1, 256),
    in_flight=st.integers(1, 4096),
    max_len=st.integers(0, 200_000) | st.sampled_from([1, 16, 17, 188, 189, 190]),
)
def test_manager_view_matches_plain_int_formulas(
    raw: RawLayer, bs: int, in_flight: int, max_len: int
) -> None:
    layer = build(raw)
    if raw.chunk_misaligned(bs):
        # The chunked-local cap bounds what a request holds only for whole-block chunks.
        with pytest.raises(SpecError, match="is not a whole number of cache blocks"):
            manager_view(layer, block_size_slots=bs)
        return
    m = manager_view(layer, block_size_slots=bs)
    assert m.page_size == Bytes(raw.page_bytes(bs))
    ints = manager_ints(m)
    assert ints.page_size_bytes == raw.page_bytes(bs) and ints.block_size_slots == bs
    if raw.slot_is_pooled:
        pm = m.expect(PooledBlocks)
        assert pm.pool == PoolFactor(raw.p)
        cap = pm.max_admission_blocks_per_request(PooledBlocks(in_flight), PooledBlocks(max_len))
        memory = pm.max_memory_per_request(PooledBlocks(in_flight), PooledBlocks(max_len))
        width = pm.block_table_width(PooledBlocks(max_len))
        with pytest.raises(UnitTypeError):
            pm.max_admission_blocks_per_request(
                EncoderTokens(in_flight),  # type: ignore[arg-type]
                PooledBlocks(max_len),
            )
    else:
        tm = m.expect(Tokens)
        cap = tm.max_admission_blocks_per_request(Tokens(in_flight), Tokens(max_len))
        memory = tm.max_memory_per_request(Tokens(in_flight), Tokens(max_len))
        width = tm.block_table_width(Tokens(max_len))
    expected_cap = raw.cap(bs, in_flight, max_len)
    assert cap == AdmissionCap(expected_cap)
    assert memory == Bytes(expected_cap * raw.page_bytes(bs))
    assert width == TableBlocks(raw.table_width(bs, max_len))
    # The admission function on plain ints is the same one the method calls.
    assert (
        admission_blocks(
            m.kind,
            bs,
            ints.sliding_window_slots,
            ints.chunk_slots,
            ints.fixed_slots,
            in_flight,
            max_len,
        )
        == expected_cap
    )
    if raw.kind == "sliding":
        assert ints.sliding_window_slots == raw.window_slots()
        assert m.sliding_window is not None
        assert str(m.sliding_window) == f"{raw.window_slots()} {m.slot_unit.unit}"
        # The typed conversion agrees: pool_window for pooled layers, identity otherwise.
        if raw.pool is not None:
            window = Window(raw.seq, EncoderTokens)
            assert m.sliding_window == pool_window(window, PoolFactor(raw.p))
    else:
        assert m.sliding_window is None
    if raw.kind == "chunked":
        assert ints.chunk_slots == raw.seq // raw.p
    if raw.kind == "cross":
        assert m.fixed_length == pool_length(EncoderTokens(raw.seq), PoolFactor(raw.p))


@settings(max_examples=examples(200))
@given(raw=raw_layers(("full", "sliding", "chunked", "cross", "mla")), bs=st.integers(1, 256))
def test_kernel_view_matches_plain_int_formulas(raw: RawLayer, bs: int) -> None:
    k = kernel_view(build(raw), block_size_slots=bs)
    if raw.slot_is_pooled:
        ke = k.expect(EncoderTokens)
        # block_size × P encoder tokens per cache block; the model's own window and chunk.
        assert ke.tokens_per_block == BlockSize(bs * raw.p, EncoderTokens)
        if raw.kind == "sliding":
            assert ke.sliding_window == Window(raw.seq, EncoderTokens)
        if raw.kind == "chunked":
            assert ke.chunk == Chunk(raw.seq, EncoderTokens)
    else:
        kt = k.expect(Tokens)
        assert kt.tokens_per_block == BlockSize(bs, Tokens)
        if raw.kind == "sliding":
            assert kt.sliding_window == Window(raw.seq, Tokens)
    if raw.kind == "mla":
        assert (k.kv_heads, k.head_size_k, k.head_size_v) == (
            KVHeads(1),
            Elements(raw.head_k + raw.rope),
            Elements(0),
        )
    else:
        assert k.kv_heads == KVHeads(raw.kv_heads)  # never widened by P
        assert k.head_size_v == Elements(raw.head_k if raw.head_v is None else raw.head_v)
    if raw.chunk_misaligned(bs):
        return  # no manager view to compare with (see the test above)
    # Kernel and manager agree on the bytes of a block: tokens per block × heads × sizes.
    m = manager_view(build(raw), block_size_slots=bs)
    heads = k.kv_heads.numerical_value_in(KVHeads)
    row = heads * (k.head_size_k + k.head_size_v).numerical_value_in(Elements) * ITEMSIZE[raw.dtype]
    assert Bytes(kernel_ints(k).tokens_per_block * row) == m.page_size
