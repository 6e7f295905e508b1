"""DeepSeek V4's caches as vLLM 0.33 sizes them (`kvunits.contracts.compressed`).

Golden pages are vLLM 0.33's own specs, from the classes named on each case
(``vllm/models/deepseek_v4/attention.py``, ``compressor.py``,
``vllm/v1/attention/backends/mla/sparse_swa.py``; ``kv_cache_interface.py``
``AttentionSpec.page_size_bytes`` and ``_apply_alignment_padding``); the same pages come out
of vLLM's classes at test time in tests/vllm_oracle/test_dsv4.py. The layer patterns are the
published configs' (tests/config/hf_fixtures/heldout, SOURCES.md).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvunits.contracts import Bytes, Elements, KvUnitsError, SpecError, Tokens
from kvunits.contracts.compressed import (
    DS_MLA_ALIGNMENT,
    DeepseekV4Layer,
    DeepseekV4Model,
    aligned_page_size,
    states_per_block,
)

HELDOUT = Path(__file__).resolve().parents[1] / "config" / "hf_fixtures" / "heldout"


def _config(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HELDOUT / name / "config.json").read_text("utf-8"))
    return data


def _pages(ratio: int) -> dict[str, tuple[int, int | None, int]]:
    layer = DeepseekV4Layer(ratio, Elements(512), Elements(128), Tokens(128))  # type: ignore[arg-type]
    return {
        c.role: (
            c.block_size.numerical_value_in(Tokens),
            None if c.window is None else c.window.numerical_value_in(Tokens),
            c.page_size.numerical_value_in(Bytes),
        )
        for c in layer.caches()
    }


def test_a_sliding_layer_keeps_its_window_only() -> None:
    # DeepseekV4SWACache: blocks of 64, 584 bytes a token (fp8_ds_mla), 37376 -> 37440 (x576).
    assert _pages(1) == {"swa": (64, 128, 37440)}


def test_a_c4_layer_keeps_five_caches() -> None:
    assert _pages(4) == {
        # DeepseekV4IndexerCache: 256 // 4 = 64 states of 128 + 128 // 128 * 4 = 132 bytes,
        # 8448 -> 8640.
        "indexer": (256, None, 8640),
        # CompressorStateCache of the indexer: window 2 * 4, blocks of 4, 2 * 2 * 128 float32
        # a token: 8192 -> 8640.
        "indexer_compressor": (4, 8, 8640),
        "swa": (64, 128, 37440),
        # DeepseekV4Attention: tokens_per_state 4, 64 states of 584 bytes, 37376 -> 37440.
        "compressed": (256, None, 37440),
        # CompressorStateCache: window 8, blocks of 4, 2 * 2 * 512 float32: 32768 -> 32832.
        "compressor": (4, 8, 32832),
    }


def test_a_c128_layer_keeps_three_caches() -> None:
    assert _pages(128) == {
        "swa": (64, 128, 37440),
        # tokens_per_state 128: 2 states of 584 bytes, 1168 -> 1728.
        "compressed": (256, None, 1728),
        # window 1 * 128, blocks of 8, 2 * 1 * 512 float32 a token: 32768 -> 32832.
        "compressor": (8, 128, 32832),
    }


def test_the_caches_come_in_vllms_registration_order() -> None:
    layer = DeepseekV4Layer(4, Elements(512), Elements(128), Tokens(128))
    assert [c.suffix for c in layer.caches()] == [
        "indexer.k_cache",
        "indexer.compressor.state_cache",
        "swa_cache",
        "",
        "compressor.state_cache",
    ]


@pytest.mark.parametrize(
    ("name", "counts"),
    [
        # compress_ratios [0, 0, 4, 128, ..., 4, 128, 4, 0]: the last entry is the MTP layer's.
        ("deepseek-ai--DeepSeek-V4-Flash", {1: 2, 4: 21, 128: 20}),
        ("nvidia--DeepSeek-V4-Flash-NVFP4", {1: 2, 4: 21, 128: 20}),
        # [128, 128, 4, 128, ..., 4, 0]
        ("deepseek-ai--DeepSeek-V4-Pro", {4: 30, 128: 31}),
        ("nvidia--DeepSeek-V4-Pro-NVFP4", {4: 30, 128: 31}),
    ],
)
def test_published_configs_read_as_transformers_gives_them_to_vllm(
    name: str, counts: dict[int, int]
) -> None:
    model = DeepseekV4Model.from_config(name, _config(name))
    assert Counter(layer.compress_ratio for layer in model.layers) == counts
    assert {layer.sliding_window for layer in model.layers} == {Tokens(128)}


def test_layer_types_win_over_compress_ratios_and_rates_apply() -> None:
    # DeepseekV4Config.__post_init__: explicit layer_types > legacy compress_ratios; the
    # ratio is compress_rates[type] (DeepseekV4Attention.__init__).
    base = {"num_hidden_layers": 3, "head_dim": 512, "index_head_dim": 128}
    model = DeepseekV4Model.from_config(
        "m",
        {
            **base,
            "compress_ratios": [0, 0, 0],
            "layer_types": [
                "heavily_compressed_attention",
                "sliding_attention",
                "compressed_sparse_attention",
            ],
        },
    )
    assert [layer.compress_ratio for layer in model.layers] == [128, 1, 4]
    # Neither: two heavily compressed layers, then compressed sparse and heavily alternating.
    default = DeepseekV4Model.from_config("m", {**base, "num_hidden_layers": 5})
    assert [layer.compress_ratio for layer in default.layers] == [128, 128, 128, 4, 128]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"head_dim": 256}, "take 512 only"),
        ({"index_head_dim": 100}, "multiple of 128"),
        ({"compress_ratios": [0, 8, 4]}, "0, 4 or 128"),
        ({"compress_rate_csa": 8, "compress_ratios": [4, 4, 4]}, "takes 4 and 128 only"),
        ({"compress_ratios": [0, 4]}, "lists 2 layers but num_hidden_layers is 3"),
        ({"layer_types": ["full_attention"] * 3}, "sliding_attention, compressed_sparse"),
        ({"num_hidden_layers": "3"}, "'num_hidden_layers' must be a positive integer"),
    ],
)
def test_what_vllm_cannot_build_is_refused(change: dict[str, Any], message: str) -> None:
    data = {"num_hidden_layers": 3, "head_dim": 512, "index_head_dim": 128, **change}
    with pytest.raises(SpecError, match=message):
        DeepseekV4Model.from_config("m", data)


@given(st.integers(1, 1 << 20), st.integers(1, 1 << 10))
def test_states_per_block_rounds_down(block: int, per_state: int) -> None:
    states = states_per_block(Tokens(block), per_state)
    assert states * per_state <= block < (states + 1) * per_state


@given(st.integers(0, 1 << 40), st.integers(1, 1 << 12))
def test_aligned_page_rounds_up_to_the_alignment(raw: int, alignment: int) -> None:
    page = aligned_page_size(Bytes(raw), Bytes(alignment)).numerical_value_in(Bytes)
    assert page % alignment == 0 and raw <= page < raw + alignment


def test_conversions_refuse_what_has_no_meaning() -> None:
    with pytest.raises(SpecError, match="tokens_per_state must be an int >= 1"):
        states_per_block(Tokens(256), 0)
    with pytest.raises(SpecError, match="alignment must be >= 1 byte"):
        aligned_page_size(Bytes(10), Bytes(0))
    assert aligned_page_size(Bytes(576), DS_MLA_ALIGNMENT) == Bytes(576)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((4, 512, Elements(128), Tokens(128)), "head_size must be Elements"),
        ((4, Elements(512), Elements(128), 128), "sliding_window must be Tokens"),
        ((8, Elements(512), Elements(128), Tokens(128)), "compress_ratio must be 1, 4 or 128"),
        ((4, Elements(512), Elements(100), Tokens(128)), "multiple of 128"),
        ((4, Elements(512), Elements(128), Tokens(0)), "sliding_window must be >= 1 token"),
    ],
)
def test_a_layer_built_in_python_is_checked_as_mypy_checks_it(
    args: tuple[Any, ...], error: str
) -> None:
    with pytest.raises(KvUnitsError, match=error):
        DeepseekV4Layer(*args)
