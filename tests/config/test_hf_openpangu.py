"""openPangu read as vLLM 0.33's openpangu.py builds it (``OpenPanguDecoderLayer``).

One attention for every layer, chosen from the config: MLA when ``qk_nope_head_dim``,
``qk_rope_head_dim``, ``v_head_dim`` and ``kv_lora_rank`` are all set (``use_mla``), static
sink attention when ``param_sink_number > 0`` (refused), else grouped-query attention with
``interleaved_sliding_window`` (``OpenPanguEmbeddedAttention.__init__``: an int, or a list
cycled by ``layer_idx % len``). The published openPangu-Embedded-7B-V1.1 config is a fixture
(tests/config/hf_fixtures/SOURCES.md); the other configs are written from openpangu.py's
branches with that model's geometry.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvunits.contracts import (
    Elements,
    FullAttentionLayer,
    MLALayer,
    SlidingWindowLayer,
    Tokens,
    Window,
)
from kvunits.contracts.config import ConfigError, load_config
from kvunits.contracts.deploy import KVHeads

EMBEDDED = (
    Path(__file__).parent
    / "hf_fixtures"
    / "excerpts"
    / "FreedomIntelligence--openPangu-Embedded-7B-V1.1"
    / "config.json"
)


def _load(tmp_path: Path, **changes: Any) -> Any:
    data = json.loads(EMBEDDED.read_text("utf-8"))
    data.update(changes)
    data = {k: v for k, v in data.items() if v is not None}
    file = tmp_path / "config.json"
    file.write_text(json.dumps(data), "utf-8")
    return load_config(file)


def test_the_published_embedded_model_is_grouped_query_attention() -> None:
    # 32 heads, 8 KV heads, no head_dim: hidden_size / heads = 128; no window.
    config = load_config(EMBEDDED)
    layers = list(config.model.layers.values())
    assert len(layers) == 34
    assert all(isinstance(layer, FullAttentionLayer) for layer in layers)
    assert {layer.kv_heads for layer in layers} == {KVHeads(8)}  # type: ignore[union-attr]
    assert {layer.head_size for layer in layers} == {Elements(128)}  # type: ignore[union-attr]
    assert config.engine.max_model_len == Tokens(32768)


def test_all_four_mla_fields_make_every_layer_mla(tmp_path: Path) -> None:
    # openPangu-Ultra-MoE's attention: OpenPanguMLAAttention, DeepSeek's latent cache.
    config = _load(
        tmp_path,
        architectures=["PanguUltraMoEForCausalLM"],
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        qk_nope_head_dim=128,
        v_head_dim=128,
    )
    layers = list(config.model.layers.values())
    assert all(isinstance(layer, MLALayer) for layer in layers)
    assert layers[0].kv_lora_rank + layers[0].qk_rope_head_dim == Elements(576)


def test_without_v_head_dim_it_is_not_mla(tmp_path: Path) -> None:
    # use_mla needs all four fields (hasattr); three of them leave the GQA attention.
    config = _load(tmp_path, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128)
    assert all(isinstance(layer, FullAttentionLayer) for layer in config.model.layers.values())


def test_interleaved_windows_are_cycled_by_layer_index(tmp_path: Path) -> None:
    config = _load(tmp_path, interleaved_sliding_window=[4096, 8192, 4096])
    windows = [layer.sliding_window for layer in config.model.layers.values()]
    assert windows[:4] == [
        Window(4096, Tokens),
        Window(8192, Tokens),
        Window(4096, Tokens),
        Window(4096, Tokens),
    ]
    one = _load(tmp_path, interleaved_sliding_window=2048)
    assert all(isinstance(layer, SlidingWindowLayer) for layer in one.model.layers.values())


def test_static_sink_attention_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="SinkFullAttentionSpec"):
        _load(tmp_path, architectures=["PanguProMoEV2ForCausalLM"], param_sink_number=128)


def test_a_malformed_window_list_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="interleaved_sliding_window"):
        _load(tmp_path, interleaved_sliding_window=[4096, 0])
