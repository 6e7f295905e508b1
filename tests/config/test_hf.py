"""The Hugging Face ``config.json`` adapter: the shipped examples (Voxtral Realtime, Mistral,
Llama, Gemma 3), the declared unit of each field, per-layer kinds, and its errors."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from contracts import EncoderTokens, FullAttentionLayer, PoolFactor, SlidingWindowLayer, Tokens
from contracts.config import HF_FIELDS, load_config, load_config_data, read_hf_config
from contracts.errors import ConfigError
from runtime.capacity import plan

from .conftest import EXAMPLES

HF = EXAMPLES / "hf"


def _data(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((HF / name / "config.json").read_text())
    return loaded


def _kinds(data: dict[str, Any]) -> list[str]:
    model = read_hf_config(data, where="config.json").model
    return [layer.kind for layer in model.layers.values()]


def _issues(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as excinfo:
        load_config_data(data, where="config.json")
    return [str(issue) for issue in excinfo.value.issues]


def test_voxtral_realtime_config() -> None:
    config = load_config(HF / "voxtral-mini-4b-realtime-2602" / "config.json")
    assert config.model.name == "voxtral-mini-4b-realtime-2602"  # the directory's name
    audio, text = config.model.layers["audio.0"], config.model.layers["text.25"]
    assert isinstance(audio, SlidingWindowLayer)
    assert audio.sliding_window == EncoderTokens(750)  # audio_config.sliding_window: encoder_token
    assert audio.pool == PoolFactor(4)  # downsample_factor
    assert (audio.kv_heads, audio.head_size) == (32, 64)
    assert isinstance(text, SlidingWindowLayer)
    assert text.sliding_window == Tokens(8192)  # text_config.sliding_window: token
    assert (text.kv_heads, text.head_size) == (8, 128)
    assert len(config.model.layers) == 32 + 26
    assert config.engine_sources["max_model_len"] == "hf text_config.max_position_embeddings"
    # A streaming sliding-window encoder has no length limit of its own (its
    # max_position_embeddings, 30 s, is not one): it feeds one pooled block per text token.
    assert config.engine.max_encoder_len == EncoderTokens(4 * 131072)
    assert config.engine_sources["max_encoder_len"].startswith("hf derived: P × text_config.")
    assert str(config.engine.max_encoder_tokens_per_step) == "4 encoder_token"
    result = plan(config.model, config.engine)
    audio_plan = result.group("audio")
    assert str(audio_plan.group.manager.sliding_window) == "189 pooled_block"
    assert str(audio_plan.page_size) == "524288 byte"
    assert str(audio_plan.admission_cap) == "13 cache_block"


def test_mistral_derives_head_dim_and_slides_everywhere() -> None:
    config = load_config(HF / "mistral-7b-v0.1" / "config.json")
    layers = list(config.model.layers.values())
    assert len(layers) == 32
    assert all(isinstance(layer, SlidingWindowLayer) for layer in layers)
    first = layers[0]
    assert isinstance(first, SlidingWindowLayer)
    assert first.head_size == 4096 // 32  # no head_dim in the file
    assert (first.sliding_window, first.kv_heads) == (Tokens(4096), 8)
    assert str(config.engine.max_model_len) == "32768 token"
    assert config.engine_sources["max_model_len"] == "hf max_position_embeddings"
    assert str(plan(config.model, config.engine).group("text").admission_cap) == "385 cache_block"


def test_llama_is_full_attention() -> None:
    config = load_config(HF / "llama-3.1-8b" / "config.json")
    assert set(_kinds(_data("llama-3.1-8b"))) == {"full_attention"}
    result = plan(config.model, config.engine)
    assert str(result.group("text").admission_cap) == "8192 cache_block"  # 131072 / 16
    assert str(result.group("text").page_size) == "65536 byte"


def test_gemma_layer_types_mix_sliding_and_full() -> None:
    data = _data("gemma-3-1b-it")
    kinds = _kinds(data)
    full = [i for i, kind in enumerate(kinds) if kind == "full_attention"]
    assert full == [5, 11, 17, 23]
    assert kinds.count("sliding_window") == 22
    config = load_config(HF / "gemma-3-1b-it" / "config.json")
    result = plan(config.model, config.engine)
    names = [group.group.name for group in result.groups]
    assert names == ["text/sliding_window", "text/full_attention"]
    sliding = result.group("text/sliding_window")
    assert str(sliding.group.manager.sliding_window) == "512 token"
    assert str(sliding.page_size) == "16384 byte"  # 16 × 1 head × (256 + 256) × 2


def test_sliding_window_pattern_without_layer_types() -> None:
    data = _data("gemma-3-1b-it")
    expected = _kinds(data)
    del data["layer_types"]
    assert _kinds(data) == expected  # every 6th layer is full


def test_gemma2_alternates() -> None:
    data = _data("gemma-3-1b-it")
    for key in ("layer_types", "sliding_window_pattern"):
        del data[key]
    data["model_type"] = "gemma2"
    assert _kinds(data)[:4] == ["sliding_window", "full_attention"] * 2


def test_qwen2_max_window_layers_keeps_the_first_layers_full() -> None:
    # transformers' Qwen2Config: layer i slides when i >= max_window_layers. Reading every
    # layer as sliding would plan a window-sized cache for full-attention layers.
    data = {**_data("mistral-7b-v0.1"), "model_type": "qwen2", "num_hidden_layers": 4}
    data.update(use_sliding_window=True, max_window_layers=2)
    assert _kinds(data) == ["full_attention"] * 2 + ["sliding_window"] * 2
    assert set(_kinds({**data, "max_window_layers": 0})) == {"sliding_window"}
    assert set(_kinds({**data, "max_window_layers": 4})) == {"full_attention"}
    assert set(_kinds({**data, "use_sliding_window": False})) == {"full_attention"}
    assert "config.json: max_window_layers: must be between 0 and 4096, got -1 (layer" in "\n".join(
        _issues({**data, "max_window_layers": -1})
    )


@pytest.mark.parametrize(
    ("edit", "kind"),
    [
        ({"use_sliding_window": False}, "full_attention"),
        ({"sliding_window": None}, "full_attention"),
    ],
)
def test_no_sliding_window_means_full(edit: dict[str, Any], kind: str) -> None:
    data = {**_data("mistral-7b-v0.1"), **edit}
    assert set(_kinds(data)) == {kind}


def test_chunked_attention_layers() -> None:
    data = _data("mistral-7b-v0.1")
    data["layer_types"] = ["chunked_attention", "full_attention"] * 16
    data["attention_chunk_size"] = 8192
    model = read_hf_config(data, where="config.json").model
    assert model.layers["text.0"].kind == "chunked_local"


def test_block_pool_size_is_read_first() -> None:
    data = _data("voxtral-mini-4b-realtime-2602")
    del data["downsample_factor"]
    data["audio_config"]["block_pool_size"] = 4
    layer = read_hf_config(data, where="config.json").model.layers["audio.0"]
    assert isinstance(layer, SlidingWindowLayer) and layer.pool == PoolFactor(4)
    data["downsample_factor"] = 2
    assert _issues(data) == [
        "config.json: audio_config.block_pool_size: the pooling factors disagree: "
        "audio_config.block_pool_size = 4, downsample_factor = 2"
    ]


def test_full_attention_audio_encoder_without_window() -> None:
    data = _data("voxtral-mini-4b-realtime-2602")
    del data["audio_config"]["sliding_window"]
    layer = read_hf_config(data, where="config.json").model.layers["audio.0"]
    assert isinstance(layer, FullAttentionLayer) and layer.pool == PoolFactor(4)


def test_errors_name_the_field_and_its_declared_unit() -> None:
    data = copy.deepcopy(_data("voxtral-mini-4b-realtime-2602"))
    del data["downsample_factor"]
    data["audio_config"]["sliding_window"] = "750"
    data["text_config"]["num_hidden_layers"] = True
    data["text_config"]["head_dim"] = None
    data["text_config"]["hidden_size"] = 3000  # not a multiple of 32 heads
    assert _issues(data) == [
        "config.json: audio_config.block_pool_size: missing: the audio encoder pools encoder "
        "tokens into cache slots; kvunits reads P from audio_config.block_pool_size, "
        "block_pool_size or downsample_factor",
        "config.json: audio_config.sliding_window: expected an integer (token in a decoder, "
        "encoder_token in audio_config), got '750' (a str)",
        "config.json: text_config.num_hidden_layers: expected an integer (layer), got True "
        "(a bool)",
        "config.json: text_config.head_dim: missing, and hidden_size 3000 is not a multiple of "
        "num_attention_heads 32; write head_dim",
    ]


@pytest.mark.parametrize(
    ("edit", "path", "message"),
    [
        ({"layer_types": ["full_attention"]}, "layer_types", "expected a list of 26 layer types"),
        (
            {"layer_types": ["sliding_attention"] * 25 + ["mamba"]},
            "layer_types[25]",
            "unsupported layer type 'mamba'",
        ),
        ({"num_key_value_heads": 0}, "num_key_value_heads", "must be between 1 and 65536, got 0"),
        ({"torch_dtype": "int4"}, "torch_dtype", "unknown cache dtype 'int4'"),
        ({"num_hidden_layers": 5000}, "num_hidden_layers", "must be between 1 and 4096"),
        (
            {"sliding_window": None},
            "sliding_window",
            "missing: layer_types has sliding_attention layers",
        ),
    ],
)
def test_decoder_errors(edit: dict[str, Any], path: str, message: str) -> None:
    data = {**_data("gemma-3-1b-it"), **edit}
    issues = _issues(data)
    assert any(issue.startswith(f"config.json: {path}: {message}") for issue in issues), issues


def test_engine_settings_still_apply_to_hf_configs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVUNITS_MAX_MODEL_LEN", "8192 token")
    config = load_config(HF / "llama-3.1-8b" / "config.json", flags={"memory_budget": "16 GiB"})
    assert str(config.engine.max_model_len) == "8192 token"
    assert config.engine_sources["max_model_len"] == "env KVUNITS_MAX_MODEL_LEN"
    assert config.engine_sources["memory_budget"] == "flag --memory-budget"


def test_detection() -> None:
    # A kvunits section wins over HF-looking keys (which are then unknown sections).
    issues = _issues({"model_type": "llama", "model": {"name": "m"}})
    assert "config.json: model_type: unknown section" in issues[0]
    assert _issues({"name": "x"})[0].startswith("config.json: name: unknown section")


def test_every_field_read_declares_a_unit() -> None:
    assert {"sliding_window", "block_pool_size", "head_dim", "max_position_embeddings"} <= set(
        HF_FIELDS
    )
    assert "encoder_token" in HF_FIELDS["sliding_window"]


def test_examples_are_the_published_numbers() -> None:
    # Guard the example files themselves against edits (see examples/hf/README.md).
    voxtral = _data("voxtral-mini-4b-realtime-2602")
    assert voxtral["audio_config"]["sliding_window"] == 750
    assert voxtral["downsample_factor"] == 4
    assert _data("mistral-7b-v0.1")["sliding_window"] == 4096
    assert _data("gemma-3-1b-it")["sliding_window"] == 512
    assert Path(HF / "README.md").is_file()
