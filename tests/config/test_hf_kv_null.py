"""``num_key_value_heads: null``: the attention heads where the config class fills it,
refused where the class declares an int or keeps the null.

transformers 5.20's config classes are strict dataclasses. ``LlamaConfig`` declares
``num_key_value_heads: int | None = None`` and its ``__post_init__`` sets a null to
``num_attention_heads`` (models/llama/configuration_llama.py); ``Qwen3MoeConfig`` and
``Qwen3VLMoeTextConfig`` declare ``int``, so ``AutoConfig`` raises
``StrictDataclassFieldValidationError`` on a null, and vLLM 0.33's ``ModelConfig``, which loads
every config through it, refuses the model. kvunits read such a null as the attention heads
(a plan for a file vLLM cannot load: 32 KV heads for Qwen3-30B-A3B instead of a refusal).
tests/vllm_oracle/sweep.py found it, writing each class's default config with the field null
and comparing with vLLM's ``ModelConfig``. The configs are the published ones
(hf_fixtures, SOURCES.md) with the field set to null.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvunits.contracts import FullAttentionLayer, KVHeads
from kvunits.contracts.config import ConfigError, read_hf_config

FIXTURES = Path(__file__).resolve().parent / "hf_fixtures"


def _published(group: str, name: str) -> dict[str, Any]:
    path = FIXTURES / group / name / "config.json"
    data: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return data


def test_a_null_the_class_fills_is_the_attention_heads() -> None:
    # Llama-3.1-8B: 32 attention heads; LlamaConfig fills a null with them (vLLM serves it).
    data = _published("heldout", "meta-llama--Meta-Llama-3.1-8B")
    data["num_key_value_heads"] = None
    layers = read_hf_config(data, where="config.json").model.layers
    first = next(iter(layers.values()))
    assert isinstance(first, FullAttentionLayer)
    assert first.kv_heads == KVHeads(data["num_attention_heads"])


@pytest.mark.parametrize(
    ("group", "name", "path", "model_type"),
    [
        ("heldout", "Qwen--Qwen3-30B-A3B", "num_key_value_heads", "qwen3_moe"),
        (
            "heldout",
            "Qwen--Qwen3-VL-30B-A3B-Instruct",
            "text_config.num_key_value_heads",
            "qwen3_vl_moe_text",
        ),
    ],
)
def test_a_null_the_class_refuses_is_refused(
    group: str, name: str, path: str, model_type: str
) -> None:
    data = _published(group, name)
    section = data["text_config"] if path.startswith("text_config.") else data
    assert isinstance(section["num_key_value_heads"], int)  # the published file is read
    read_hf_config(data, where="config.json")
    section["num_key_value_heads"] = None
    with pytest.raises(ConfigError) as caught:
        read_hf_config(data, where="config.json")
    message = str(caught.value)
    assert f"{path}: null" in message
    assert f"transformers' {model_type} config class refuses" in message


def test_a_null_the_class_keeps_is_refused() -> None:
    # Qwen1.5-MoE-A2.7B (mlc-llm's qwen2moe preset): Qwen2MoeConfig declares
    # ``num_key_value_heads: int | None = 16`` and keeps a null (no fill in __post_init__);
    # vLLM's ModelConfig then fails validating ``total_num_kv_heads`` (an int field,
    # vllm/config/model.py), as the sweep's qwen2_moe@kv-null directory showed.
    data = _published("tuning", "qwen2moe")
    read_hf_config(data, where="config.json")
    data["num_key_value_heads"] = None
    with pytest.raises(ConfigError) as caught:
        read_hf_config(data, where="config.json")
    message = str(caught.value)
    assert "num_key_value_heads: null" in message
    assert "qwen2_moe config class keeps as null" in message


def test_an_absent_field_is_still_the_class_default() -> None:
    # The check is on a null written in the file: an absent field is the class default
    # (Qwen3MoeConfig's 4), not refused.
    data = _published("heldout", "Qwen--Qwen3-30B-A3B")
    del data["num_key_value_heads"]
    layers = read_hf_config(data, where="config.json").model.layers
    first = next(iter(layers.values()))
    assert isinstance(first, FullAttentionLayer)
    assert first.kv_heads == KVHeads(4)
