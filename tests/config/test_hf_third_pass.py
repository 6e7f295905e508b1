"""Architectures read in issue 21's third pass, each as its vLLM 0.33 model file builds it:
AXK1 and Sarvam MLA (MLA without an indexer), Sarvam MoE (BailingMoe's attention), Hunyuan V4
(dense and sparse MLA layers, the indexer where ``indexer_types`` says ``full``), and the
decoders whose config class fills ``layer_types`` in ``__post_init__`` (CWM, Kolibri 1,
Mellum, Laguna, MuseGlimmer; Jais 2 has no window). The fixtures are
tests/config/hf_fixtures/synthetic (SOURCES.md: written here from the transformers config
classes); ``scripts/vllm-model-view`` compares each with vLLM's own ``ModelConfig`` (and
Hunyuan V4's indexers with vLLM's ``compute_skip_topk_layers``), and
tests/vllm_oracle/test_like_vllm.py plans them with vLLM's ``get_kv_cache_configs``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvunits.contracts import (
    Elements,
    FullAttentionLayer,
    IndexerLayer,
    KVHeads,
    MLALayer,
    SlidingWindowLayer,
    Tokens,
)
from kvunits.contracts.config import ConfigError, load_config, read_hf_config

SYNTHETIC = Path(__file__).resolve().parent / "hf_fixtures" / "synthetic"


def _data(name: str, **changes: Any) -> dict[str, Any]:
    path = SYNTHETIC / f"synthetic--{name}" / "config.json"
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    data.update(changes)
    for key, value in changes.items():
        if value is None:
            del data[key]
    return data


def _layers(data: dict[str, Any]) -> dict[str, Any]:
    return dict(read_hf_config(data, where="config.json").model.layers)


def _kinds(data: dict[str, Any]) -> str:
    letters = {FullAttentionLayer: "F", SlidingWindowLayer: "S"}
    return "".join(letters[type(layer)] for layer in _layers(data).values())


@pytest.mark.parametrize("arch", ["AXK1ForCausalLM", "SarvamMLAForCausalLM"])
def test_mla_without_an_indexer(arch: str) -> None:
    # AXK1.py AXK1MLAAttention and sarvam.py SarvamMLAAttention pass indexer=None: one latent
    # head of kv_lora_rank + qk_rope_head_dim (512 + 64) per layer, dense.
    layers = _layers(_data("axk1", architectures=[arch]))
    assert len(layers) == 8
    assert all(isinstance(layer, MLALayer) and not layer.sparse for layer in layers.values())
    layer = layers["text.0"]
    assert isinstance(layer, MLALayer)
    assert layer.kv_lora_rank == Elements(512) and layer.qk_rope_head_dim == Elements(64)


def test_sarvam_moe_reads_bailing_attention() -> None:
    # sarvam.py SarvamMoEForCausalLM(BailingMoeForCausalLM): head_dim (else hidden / heads)
    # and num_key_value_heads. Sarvam 30B's shape (19 layers, 64 heads, 4 KV heads of 64).
    data = {
        "architectures": ["SarvamMoEForCausalLM"],
        "model_type": "sarvam_moe",
        "hidden_size": 4096,
        "num_hidden_layers": 19,
        "num_attention_heads": 64,
        "num_key_value_heads": 4,
        "head_dim": 64,
        "max_position_embeddings": 131072,
    }
    layer = _layers(data)["text.18"]
    assert isinstance(layer, FullAttentionLayer)
    assert layer.kv_heads == KVHeads(4) and layer.head_size == Elements(64)


def test_hy_v4_indexers_follow_indexer_types() -> None:
    # layer_types: layer 0 full (dense MLA), 1-5 sparse; indexer_types full at 0, 1 and 5
    # (layer 0 is dense: no indexer; shared layers reuse the top-k of the layer before).
    layers = _layers(_data("hy_v4"))
    latents = {n: layer for n, layer in layers.items() if isinstance(layer, MLALayer)}
    assert [layer.sparse for layer in latents.values()] == [False] + [True] * 5
    indexed = [n for n, layer in layers.items() if isinstance(layer, IndexerLayer)]
    assert indexed == ["text.1.indexer", "text.5.indexer"]


def test_hy_v4_default_indexer_types_and_dense_without_layer_types() -> None:
    # HYV4Config.__post_init__: indexer_types "full" where i == 0 or (i - 1) % 4 == 0.
    layers = _layers(_data("hy_v4-default-indexers"))
    indexed = [n for n, layer in layers.items() if isinstance(layer, IndexerLayer)]
    assert indexed == ["text.1.indexer", "text.5.indexer", "text.9.indexer"]
    # Without layer_types no layer is sparse (requested_sparse needs the layer's type).
    layers = _layers(_data("hy_v4-dense"))
    assert all(isinstance(layer, MLALayer) and not layer.sparse for layer in layers.values())


def test_hy_v4_refuses_an_indexer_type_vllm_refuses() -> None:
    data = _data("hy_v4", indexer_types=["full", "full", "shared", "dense", "shared", "full"])
    with pytest.raises(ConfigError, match="indexer_types: 'dense': vLLM's hy_v4 reads only"):
        read_hf_config(data, where="config.json")


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        # CwmConfig.__post_init__: full where i % 4 == 0.
        ("cwm", "FSSSFSSS"),
        # Kolibri1Config: full where (i + 1) % 5 == 0.
        ("kolibri1", "SSSSFSSSSF"),
        # MuseGlimmerTextConfig: full where (n - 1 - i) % 4 == 0, counted from the last.
        ("muse_glimmer", "SSSFSSSF"),
        # Mellum's file gives layer_types; Laguna's too.
        ("mellum", "SSFSSF"),
        ("laguna", "FSSSFSSS"),
        ("jais2", "FFFF"),
    ],
)
def test_an_absent_layer_types_is_the_config_classs_pattern(name: str, kinds: str) -> None:
    assert _kinds(_data(name)) == kinds


def test_a_pattern_only_fills_what_the_file_leaves_out() -> None:
    # Mellum without layer_types: MellumConfig fills every layer full, whatever the window;
    # Laguna likewise. A written list wins.
    assert _kinds(_data("mellum", layer_types=None)) == "FFFFFF"
    assert _kinds(_data("laguna", layer_types=None)) == "F" * 8
    assert _kinds(_data("cwm", layer_types=["sliding_attention"] * 8)) == "S" * 8


def test_a_kolibri_window_is_its_sliding_window() -> None:
    layer = _layers(_data("kolibri1"))["text.0"]
    assert isinstance(layer, SlidingWindowLayer)
    assert layer.sliding_window.numerical_value_in(Tokens) == 513


def test_the_models_load_as_directories() -> None:
    config = load_config(SYNTHETIC / "synthetic--muse_glimmer")
    assert config.engine.max_model_len == Tokens(131072)
