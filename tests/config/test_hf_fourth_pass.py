"""Architectures read in issue 21's fourth pass, each as vLLM 0.33 builds it.

* Qwen2.5-Omni and Qwen3-Omni: vLLM's registry maps ``Qwen2_5OmniModel``,
  ``Qwen2_5OmniForConditionalGeneration`` and ``Qwen3OmniMoeForConditionalGeneration`` to
  their ``...ThinkerForConditionalGeneration`` (vllm/model_executor/models/registry.py
  ``_MULTIMODAL_MODELS``): the thinker alone is served, its decoder built on
  ``thinker_config.text_config`` (qwen2_5_omni_thinker.py: a ``Qwen2ForCausalLM``;
  qwen3_omni_moe_thinker.py: a ``Qwen3MoeLLMForCausalLM``), which is also the config
  transformers' ``get_text_config`` returns to vLLM. The talker keeps no cache in vLLM.

The published configs are in tests/config/hf_fixtures/excerpts (SOURCES.md);
``scripts/vllm-model-view`` compares them with vLLM's own ``ModelConfig`` and
tests/vllm_oracle/test_like_vllm.py plans them with vLLM's ``get_kv_cache_configs``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from kvunits.contracts import Elements, FullAttentionLayer, KVHeads, Tokens
from kvunits.contracts.config import ConfigError, read_hf_config

EXCERPTS = Path(__file__).resolve().parent / "hf_fixtures" / "excerpts"


def _published(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXCERPTS / name / "config.json").read_text("utf-8"))
    return data


def test_qwen2_5_omni_plans_the_thinker_decoder() -> None:
    # Qwen2.5-Omni-7B's thinker: 28 layers, 4 KV heads of 3584 / 28 = 128 (qwen2.py), full
    # attention (use_sliding_window false by Qwen2_5OmniTextConfig's default); the talker's
    # 24 layers of 2 KV heads are not served by vLLM and not planned.
    hf = read_hf_config(_published("Qwen--Qwen2.5-Omni-7B"), where="config.json")
    layers = hf.model.layers
    assert len(layers) == 28
    assert all(isinstance(layer, FullAttentionLayer) for layer in layers.values())
    first = next(iter(layers.values()))
    assert isinstance(first, FullAttentionLayer)
    assert first.kv_heads == KVHeads(4) and first.head_size == Elements(128)
    assert hf.engine["max_model_len"] == Tokens(32768)


def test_qwen3_omni_plans_the_thinker_decoder_with_its_head_dim() -> None:
    # Qwen3-Omni-30B-A3B's thinker text config: 48 layers, 4 KV heads of head_dim 128 (not
    # 2048 / 32 = 64: qwen3_moe.py takes head_dim), max_position_embeddings 65536.
    hf = read_hf_config(_published("Qwen--Qwen3-Omni-30B-A3B-Instruct"), where="config.json")
    layers = hf.model.layers
    assert len(layers) == 48
    first = next(iter(layers.values()))
    assert isinstance(first, FullAttentionLayer)
    assert first.kv_heads == KVHeads(4) and first.head_size == Elements(128)
    assert hf.engine["max_model_len"] == Tokens(65536)


@pytest.mark.parametrize("arch", ["Qwen2_5OmniModel", "Qwen2_5OmniForConditionalGeneration"])
def test_omni_text_config_without_a_model_type_is_the_thinkers_class(arch: str) -> None:
    # The published Qwen2.5-Omni excerpt writes no text_config.model_type: transformers builds
    # Qwen2_5OmniTextConfig from it all the same (the thinker's sub-config class), whose
    # defaults fill what the file leaves out.
    data = _published("Qwen--Qwen2.5-Omni-7B")
    data["architectures"] = [arch]
    assert "model_type" not in data["thinker_config"]["text_config"]
    del data["thinker_config"]["text_config"]["num_key_value_heads"]  # class default: 4
    layer = next(iter(read_hf_config(data, where="config.json").model.layers.values()))
    assert isinstance(layer, FullAttentionLayer) and layer.kv_heads == KVHeads(4)


def test_omni_thinker_layer_count_follows_the_file() -> None:
    # Changing the thinker's layers changes the plan; changing the talker's does not.
    data = _published("Qwen--Qwen2.5-Omni-7B")
    talker = copy.deepcopy(data)
    talker["talker_config"]["num_hidden_layers"] = 2
    thinker = copy.deepcopy(data)
    thinker["thinker_config"]["text_config"]["num_hidden_layers"] = 2
    assert len(read_hf_config(talker, where="c").model.layers) == 28
    assert len(read_hf_config(thinker, where="c").model.layers) == 2


def test_omni_thinker_errors_name_the_nested_field() -> None:
    data = _published("Qwen--Qwen3-Omni-30B-A3B-Instruct")
    data["thinker_config"]["text_config"]["num_key_value_heads"] = "four"
    with pytest.raises(ConfigError) as err:
        read_hf_config(data, where="config.json")
    assert "thinker_config.text_config.num_key_value_heads" in str(err.value)
