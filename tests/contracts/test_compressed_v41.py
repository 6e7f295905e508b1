"""DeepSeek V4.1's caches (`kvunits.contracts.compressed_v41`) as vLLM 0.33 sizes them on Hopper.

Golden numbers are vLLM's own: the specs of ``DeepseekV4Attention``, ``DeepseekV4IndexerCache``,
``DeepseekV4SWACache`` and ``CompressorStateCache`` (``vllm/models/deepseek_v41``) computed by
``tests/vllm_oracle/oracle_dsv41.py`` (pages 19,008 / 4,608 / 37,440 / 8,640 / 32,768 bytes).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvunits.contracts import Bytes, Elements, SpecError, Tokens, UnitError
from kvunits.contracts.compressed_v41 import (
    DeepseekV41Layer,
    DeepseekV41Model,
    indexer_key_bytes,
)

_BASE: dict[str, Any] = {
    "num_hidden_layers": 4,
    "head_dim": 512,
    "qk_rope_head_dim": 64,
    "index_head_dim": 128,
    "sliding_window": 128,
    "compress_ratios": [0, 2, 2, 1],
    "kv_source_layer_ids": [1, 3],
    "index_source_layer_ids": [1, 3],
}


def test_pages_are_vllms() -> None:
    model = DeepseekV41Model.from_config("toy", _BASE)
    pages = [
        [(c.kind, c.page_size.numerical_value_in(Bytes)) for c in layer.caches()]
        for layer in model.layers
    ]
    assert pages == [
        [("swa", 19008)],
        [("compressed", 19008), ("indexer", 4608), ("swa", 19008), ("compressor", 32768)],
        [("swa", 19008)],
        [("compressed", 37440), ("indexer", 8640), ("swa", 19008)],
    ]
    assert model.kv_source_of == (None, 1, 1, 3)


def test_text_config_is_flattened_with_top_level_keys_winning() -> None:
    nested = {"text_config": dict(_BASE), "sliding_window": 1000}
    model = DeepseekV41Model.from_config("toy", nested)
    assert model.layers[0].sliding_window == Tokens(1000)


@given(st.integers(min_value=1, max_value=1 << 16))
def test_indexer_key_is_fp8_plus_a_float32_scale_per_128_rounding_down(d: int) -> None:
    size = indexer_key_bytes(Elements(d)).numerical_value_in(Bytes)
    assert size == d + 4 * (d // 128)
    assert d <= size <= d * 132 // 128


@given(st.sampled_from([0, 1, 2]), st.integers(1, 4096), st.sampled_from([64, 128, 256]))
def test_every_page_is_a_multiple_of_576_but_the_ring(ratio: int, window: int, d: int) -> None:
    layer = DeepseekV41Layer(
        ratio, bool(ratio), bool(ratio), Elements(512), Elements(d), Tokens(window)  # type: ignore[arg-type]
    )
    for cache in layer.caches():
        page = cache.page_size.numerical_value_in(Bytes)
        if cache.kind == "compressor":
            assert page == 8 * 2 * 512 * 4
        else:
            assert page % 576 == 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"compress_ratios": [0, 4, 2, 1]}, "takes 0"),
        ({"kv_source_layer_ids": [3]}, "no kv_source_layer_ids"),
        ({"kv_source_layer_ids": [0, 1, 3]}, "compress_ratio 0"),
        ({"index_source_layer_ids": [1, 2, 3], "kv_source_layer_ids": [1, 3]}, None),
        (
            {
                "compress_ratios": [1, 2, 2, 1],
                "kv_source_layer_ids": [0, 1, 3],
                "index_source_layer_ids": [0, 2, 3],
            },
            "runs no indexer",
        ),
        ({"index_source_layer_ids": [2, 3]}, "no kv_source_layer_ids or index_source"),
        ({"head_dim": 256}, "512 and 64"),
        ({"sliding_window": 0}, "sliding_window"),
        ({"compress_ratios": "0,2"}, "compress_ratios"),
    ],
)
def test_topologies_vllm_refuses_are_refused(change: dict[str, Any], message: str | None) -> None:
    config = {**_BASE, **change}
    if message is None:  # a consumer that indexes, reading its kv source's keys: served
        DeepseekV41Model.from_config("toy", config)
        return
    with pytest.raises(SpecError, match=message):
        DeepseekV41Model.from_config("toy", config)


def test_typed_fields_are_checked_at_run_time() -> None:
    with pytest.raises(UnitError, match="index_head_size"):
        DeepseekV41Layer(1, True, True, Elements(512), 128, Tokens(128))  # type: ignore[arg-type]
    with pytest.raises(UnitError, match="index_head_size"):
        indexer_key_bytes(Bytes(128))  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="compress_ratio"):
        DeepseekV41Layer(4, True, True, Elements(512), Elements(128), Tokens(128))  # type: ignore[arg-type]
