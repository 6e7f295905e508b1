"""DeepSeek sparse attention's caches as layer kinds: the indexer's key cache (`IndexerLayer`)
and the sparse MLA's fp8 layout (`MLALayer.sparse`), their unit-typed sizes, their views and
their plan per rank.

Golden numbers: vLLM 0.33 ``vllm/models/deepseek_v32/attention.py`` (``Indexer.__init__``:
``head_dim + head_dim // 128 * 4`` uint8 per token, 132 for ``index_head_dim = 128``) and
``vllm/model_executor/layers/attention/mla_attention.py`` (``MLAAttention.get_kv_cache_spec``:
``state_content_bytes = 656`` for ``fp8_ds_mla``, DeepSeek's 512-element latent and 64-element
RoPE key); tests/vllm_oracle/test_like_vllm.py checks the same pages with vLLM's own code.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvunits.contracts import (
    AdmissionCap,
    Bytes,
    CacheDType,
    Elements,
    IndexerLayer,
    KVHeads,
    Layers,
    LayerSpec,
    MLALayer,
    ModelSpec,
    SpecValidationError,
    Tokens,
    kernel_view,
    manager_view,
)
from kvunits.contracts.deploy import Parallelism, RankBytes, kv_heads_of, page_size_per_rank
from kvunits.runtime.deployment import stage_layers


def test_the_indexer_entry_is_fp8_keys_and_float32_scales() -> None:
    # 128 fp8 bytes + 128 / 128 = 1 float32 scale = 132 byte a token (vLLM's head_dim 132).
    assert IndexerLayer(head_size=Elements(128)).slot_size == Bytes(132)
    # 256 elements: 256 + 2 × 4 (two scale blocks).
    assert IndexerLayer(head_size=Elements(256)).slot_size == Bytes(264)
    assert IndexerLayer(head_size=Elements(64), scale_block=Elements(32)).slot_size == Bytes(72)


def test_a_scale_block_must_divide_the_key() -> None:
    with pytest.raises(SpecValidationError, match="scale_block is 128 element but must divide"):
        IndexerLayer.model_validate({"head_size": 130})


def test_the_indexer_manager_view_ignores_the_engines_cache_dtype() -> None:
    layer = IndexerLayer(head_size=Elements(128))
    # A block of 64 tokens: 64 × 132 = 8448 byte, whether the attention cache is bf16 or fp8.
    for dtype in (None, CacheDType.fp8_e4m3, CacheDType.float32):
        view = manager_view(layer, 64, cache_dtype=dtype)
        assert view.page_size == Bytes(8448)
        assert view.kind == "full_attention" and view.kv_heads == KVHeads(1)
    # Full attention's cap: every token of the request, cdiv(1000, 64) = 16 blocks.
    view = manager_view(layer, 64).expect(Tokens)
    cap = view.max_admission_blocks_per_request(Tokens(2048), Tokens(1000))
    assert cap == AdmissionCap(16)
    kernel = kernel_view(layer, 64)
    assert kernel.head_size_k == Elements(128) and kernel.dtype is CacheDType.fp8_e4m3


def test_a_sparse_mla_cache_in_fp8_is_flashmlas_ds_mla_layout() -> None:
    dense = MLALayer(kv_lora_rank=Elements(512), qk_rope_head_dim=Elements(64))
    sparse = MLALayer(kv_lora_rank=Elements(512), qk_rope_head_dim=Elements(64), sparse=True)
    # bf16: 576 × 2 = 1152 byte either way.
    assert dense.slot_size() == sparse.slot_size() == Bytes(1152)
    # fp8: a dense latent is 576 × 1; the sparse one 512 fp8 + 4 float32 scales + 64 bf16.
    assert dense.slot_size(CacheDType.fp8_e4m3) == Bytes(576)
    assert sparse.slot_size(CacheDType.fp8_e4m3) == Bytes(512 + 4 * 4 + 64 * 2)
    view = manager_view(sparse, 16, cache_dtype=CacheDType.fp8_e4m3)
    assert view.page_size == Bytes(16 * 656)


@given(
    rank=st.integers(1, 2048),
    rope=st.integers(1, 256),
    block=st.integers(1, 256),
)
def test_the_mla_page_is_its_slot_times_the_block(rank: int, rope: int, block: int) -> None:
    for sparse in (False, True):
        layer = MLALayer(
            kv_lora_rank=Elements(rank), qk_rope_head_dim=Elements(rope), sparse=sparse
        )
        for dtype in (CacheDType.bfloat16, CacheDType.fp8_e4m3):
            slot = layer.slot_size(dtype).numerical_value_in(Bytes)
            if sparse and dtype is CacheDType.fp8_e4m3:
                assert slot == rank + -(-rank // 128) * 4 + rope * 2
            else:
                assert slot == (rank + rope) * dtype.itemsize_bytes
            page = manager_view(layer, block, cache_dtype=dtype).page_size
            assert page == Bytes(block * slot)


def test_the_indexer_is_whole_on_every_tensor_parallel_rank() -> None:
    # vLLM's indexer spec has max_tp_shards = 1: every rank holds the full key cache.
    layer = IndexerLayer(head_size=Elements(128))
    assert kv_heads_of(layer) == KVHeads(1)
    page = page_size_per_rank(layer, manager_view(layer, 16), Parallelism(tensor_parallel_size=8))
    assert page == RankBytes(16 * 132)


def test_an_indexer_stays_on_its_layers_pipeline_stage() -> None:
    # GLM-5.2's schedule: indexers on layers 0, 1, 2, 6 of 8 (freq 4, offset 3). vLLM builds
    # each inside its decoder layer, so it lives on that layer's stage: 8 layers over 2
    # stages is 4 + 4, and layer 2's indexer is on stage 0 (the 4 indexers split as a stack
    # of their own would put it on stage 1).
    latent = MLALayer(kv_lora_rank=Elements(512), qk_rope_head_dim=Elements(64), sparse=True)
    keys = IndexerLayer(head_size=Elements(128))
    layers: dict[str, LayerSpec] = {}
    for i in range(8):
        layers[f"text.{i}"] = latent
        if i in (0, 1, 2, 6):
            layers[f"text.{i}.indexer"] = keys
    model = ModelSpec(name="glm", layers=layers)
    first, second = stage_layers(model, Parallelism(pipeline_parallel_size=2))
    assert first == (
        "text.0", "text.0.indexer", "text.1", "text.1.indexer", "text.2", "text.2.indexer",
        "text.3",
    )  # fmt: skip
    assert second == ("text.4", "text.5", "text.6", "text.6.indexer", "text.7")
    assert model.num_layers == Layers(12)
