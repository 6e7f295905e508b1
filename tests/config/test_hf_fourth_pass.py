"""Architectures read in issue 21's fourth pass, each as vLLM 0.33 builds it.

* Qwen2.5-Omni and Qwen3-Omni: vLLM's registry maps ``Qwen2_5OmniModel``,
  ``Qwen2_5OmniForConditionalGeneration`` and ``Qwen3OmniMoeForConditionalGeneration`` to
  their ``...ThinkerForConditionalGeneration`` (vllm/model_executor/models/registry.py
  ``_MULTIMODAL_MODELS``): the thinker alone is served, its decoder built on
  ``thinker_config.text_config`` (qwen2_5_omni_thinker.py: a ``Qwen2ForCausalLM``;
  qwen3_omni_moe_thinker.py: a ``Qwen3MoeLLMForCausalLM``), which is also the config
  transformers' ``get_text_config`` returns to vLLM. The talker keeps no cache in vLLM.
* Gemma 3n (vllm/model_executor/models/gemma3n.py ``Gemma3nAttention``): from ``first = n -
  num_kv_shared_layers`` on, a layer reads layer ``first - 2``'s cache when it slides and
  ``first - 1``'s when it is full (``kv_sharing_target_layer_name``: vLLM gives it no cache
  spec); its per-layer inputs (AltUp, Laurel, per-layer embeddings) keep no cache.

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

from kvunits.contracts import (
    Elements,
    FullAttentionLayer,
    KVHeads,
    KVSharedLayer,
    SlidingWindowLayer,
    Tokens,
    Window,
)
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


def _letters(data: dict[str, Any]) -> str:
    letters: dict[type, str] = {
        FullAttentionLayer: "F",
        SlidingWindowLayer: "S",
        KVSharedLayer: "-",
    }
    layers = read_hf_config(data, where="config.json").model.layers
    return "".join(letters[type(layer)] for layer in layers.values())


def test_gemma3n_e2b_shares_the_last_ten_layers() -> None:
    # gemma-3n-E2B: 30 layers, every 5th full, num_kv_shared_layers 10: layers 0-19 keep a
    # cache (16 sliding over 512 tokens, 4 full, 2 KV heads of 256); 20-29 read layer 18's
    # (sliding) or layer 19's (full).
    data = _published("google--gemma-3n-E2B-it")
    assert _letters(data) == "SSSSF" * 4 + "-" * 10
    layers = read_hf_config(data, where="config.json").model.layers
    sliding, full_, shared = layers["text.0"], layers["text.4"], layers["text.20"]
    assert isinstance(sliding, SlidingWindowLayer) and sliding.sliding_window == Window(512, Tokens)
    assert isinstance(full_, FullAttentionLayer) and full_.head_size == Elements(256)
    assert full_.kv_heads == KVHeads(2)
    assert isinstance(shared, KVSharedLayer) and shared.target == "text.18"
    last = layers["text.24"]
    assert isinstance(last, KVSharedLayer) and last.target == "text.19"


def test_gemma3n_targets_are_vllms_offsets_not_the_last_of_the_type() -> None:
    # gemma3n.py targets first - 2 (sliding) and first - 1 (full) whatever their types:
    # with 12 layers and 3 shared (first 9), layer 7 (sliding) and layer 8 (sliding) are
    # the targets; Gemma 4's rule (the last earlier layer of the type) would name 4 for the
    # full layer 9.
    data = _published("google--gemma-3n-E2B-it")
    text = data["text_config"]
    text["num_hidden_layers"], text["num_kv_shared_layers"] = 12, 3
    text["layer_types"] = text["layer_types"][:12]
    text["activation_sparsity_pattern"] = text["activation_sparsity_pattern"][:12]
    layers = read_hf_config(data, where="config.json").model.layers
    targets = {
        name: layer.target for name, layer in layers.items() if isinstance(layer, KVSharedLayer)
    }
    assert targets == {"text.9": "text.8", "text.10": "text.7", "text.11": "text.7"}


def test_gemma3n_a_negative_target_keeps_its_own_cache() -> None:
    # Every layer "shared": first = 0, targets -2 and -1 are negative, so vLLM gives no
    # kv_sharing_target_layer_name and every layer keeps its own cache.
    data = _published("google--gemma-3n-E2B-it")
    data["text_config"]["num_kv_shared_layers"] = 30
    assert _letters(data) == "SSSSF" * 6


def test_gemma3n_without_layer_types_is_every_fifth_full() -> None:
    # Gemma3nTextConfig.__post_init__: full where (i + 1) % 5 == 0; the class default of
    # num_kv_shared_layers is 15.
    data = _published("google--gemma-3n-E4B-it")
    del data["text_config"]["layer_types"]
    del data["text_config"]["num_kv_shared_layers"]
    assert _letters(data) == "SSSSF" * 4 + "-" * 15


@pytest.mark.parametrize(
    ("name", "layers", "kv_heads", "head", "length"),
    [
        # GLM-4.5V: glm4_1v.py builds Glm4MoeForCausalLM on text_config: 46 layers, 8 KV
        # heads of head_dim 128 (96 heads do not divide 4096: the file's head_dim is used).
        ("zai-org--GLM-4.5V", 46, 8, 128, 65536),
        # GLM-4.1V: Glm4ForCausalLM on text_config, 4096 / 32 = 128; no
        # max_position_embeddings in the excerpt: Glm4vTextConfig's 32768.
        ("zai-org--GLM-4.1V-9B-Thinking", 40, 2, 128, 32768),
    ],
)
def test_glm_v_reads_its_text_config_as_glm4(
    name: str, layers: int, kv_heads: int, head: int, length: int
) -> None:
    hf = read_hf_config(_published(name), where="config.json")
    assert len(hf.model.layers) == layers
    first = next(iter(hf.model.layers.values()))
    assert isinstance(first, FullAttentionLayer)
    assert first.kv_heads == KVHeads(kv_heads) and first.head_size == Elements(head)
    assert hf.engine["max_model_len"] == Tokens(length)


def test_phi4_multimodal_is_read_as_its_flat_phi3_decoder() -> None:
    # phi4mm.py builds a LlamaModel on the flat config: 32 layers, 8 KV heads of
    # 3072 / 24 = 128, every layer over sliding_window 262144 (as phi3); with its longrope
    # RoPE the default length is original_max_position_embeddings (as phi3).
    hf = read_hf_config(_published("microsoft--Phi-4-multimodal-instruct"), where="config.json")
    assert len(hf.model.layers) == 32
    first = next(iter(hf.model.layers.values()))
    assert isinstance(first, SlidingWindowLayer)
    assert first.kv_heads == KVHeads(8) and first.head_size == Elements(128)
    assert first.sliding_window == Window(262144, Tokens)
    assert hf.engine["max_model_len"] == Tokens(4096)


@pytest.mark.parametrize(
    ("arch", "text_type", "refused"),
    [
        ("Step3p7ForConditionalGeneration", "step3p5", "Step3p5ForCausalLM"),
        ("Glm5NextForConditionalGeneration", "glm5_next_text", "Glm5NextForCausalLM"),
    ],
)
def test_a_wrapper_around_a_refused_decoder_names_its_reason(
    arch: str, text_type: str, refused: str
) -> None:
    data = {"architectures": [arch], "text_config": {"model_type": text_type}}
    with pytest.raises(ConfigError) as err:
        read_hf_config(data, where="config.json")
    assert f"({refused}): kvunits does not plan it" in str(err.value)


def test_paligemma_text_config_takes_gemma_class_defaults() -> None:
    # PaliGemma's published text_config has no head_dim and no max_position_embeddings:
    # GemmaConfig's 256 and 8192 apply (vLLM's gemma.py reads config.head_dim); 18 layers
    # of one KV head.
    hf = read_hf_config(_published("google--paligemma-3b-pt-224"), where="config.json")
    assert len(hf.model.layers) == 18
    first = next(iter(hf.model.layers.values()))
    assert isinstance(first, FullAttentionLayer)
    assert first.kv_heads == KVHeads(1) and first.head_size == Elements(256)
    assert hf.engine["max_model_len"] == Tokens(8192)


SYNTHETIC = Path(__file__).resolve().parent / "hf_fixtures" / "synthetic"


def test_paddleocr_vl_reads_its_flat_config_as_ernie4_5() -> None:
    # The published PaddleOCR-VL config is flat: transformers' PaddleOCRVLConfig moves the
    # text fields into PaddleOCRTextConfig, and paddleocr_vl.py builds Ernie4_5ForCausalLM on
    # it (head_dim 128, 2 KV heads, 18 layers, 131072 positions).
    data = json.loads((SYNTHETIC / "synthetic--paddleocr_vl" / "config.json").read_text("utf-8"))
    hf = read_hf_config(data, where="config.json")
    assert len(hf.model.layers) == 18
    first = next(iter(hf.model.layers.values()))
    assert isinstance(first, FullAttentionLayer)
    assert first.kv_heads == KVHeads(2) and first.head_size == Elements(128)
    assert hf.engine["max_model_len"] == Tokens(131072)
    # The class defaults fill what a flat file leaves out.
    del data["head_dim"], data["max_position_embeddings"]
    hf = read_hf_config(data, where="config.json")
    first = next(iter(hf.model.layers.values()))
    assert isinstance(first, FullAttentionLayer) and first.head_size == Elements(128)
    assert hf.engine["max_model_len"] == Tokens(131072)


def test_aria_text_config_is_a_llama_decoder() -> None:
    # aria.py AriaTextModel(LlamaModel) on text_config: 2560 / 20 = 128, 20 KV heads.
    data = json.loads((SYNTHETIC / "synthetic--aria" / "config.json").read_text("utf-8"))
    layer = next(iter(read_hf_config(data, where="config.json").model.layers.values()))
    assert isinstance(layer, FullAttentionLayer)
    assert layer.kv_heads == KVHeads(20) and layer.head_size == Elements(128)


def _exaone4(**changes: Any) -> dict[str, Any]:
    data = _published("LGAI-EXAONE--EXAONE-4.5-shrunk")
    text: dict[str, Any] = data["text_config"]
    text.update(changes)
    for key, value in changes.items():
        if value is None:
            del text[key]
    return data


def test_exaone4_reads_layer_types_beside_a_string_pattern() -> None:
    # EXAONE 4.x files carry sliding_window_pattern "LLLG" beside layer_types; exaone4.py
    # reads config.layer_types (kvunits refused the pattern field before).
    assert _letters(_exaone4()) == "SSSF"


def test_exaone4_without_layer_types_is_the_config_class_pattern() -> None:
    # Exaone4Config.__post_init__: layer i slides where (i + 1) % sliding_window_pattern != 0;
    # the class default pattern is 4, not "every layer slides".
    data = _exaone4(layer_types=None, sliding_window_pattern=2, num_hidden_layers=6)
    assert _letters(data) == "SFSFSF"
    data = _exaone4(layer_types=None, sliding_window_pattern=None, num_hidden_layers=8)
    assert _letters(data) == "SSSFSSSF"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"layer_types": None}, "sliding_window_pattern"),  # "LLLG" cannot be divided by
        ({"layer_types": None, "sliding_window": "null"}, "sliding_window"),
    ],
)
def test_exaone4_refuses_what_exaone4config_cannot_derive(
    changes: dict[str, Any], field: str
) -> None:
    data = _exaone4(**changes)
    if changes.get("sliding_window") == "null":
        data["text_config"]["sliding_window"] = None
    with pytest.raises(ConfigError) as err:
        read_hf_config(data, where="config.json")
    assert f"text_config.{field}" in str(err.value)


def test_smollm3_nope_layers_change_no_cache() -> None:
    # SmolLM3-3B's published config carries no_rope_layers / no_rope_layer_interval (every
    # 4th layer skips RoPE); vLLM serves it through the Transformers backend, one Attention per
    # layer over the whole context: 36 full layers of 4 KV heads of 128. kvunits refused the
    # fields before (they shape Llama 4's chunked layers).
    hf = read_hf_config(_published("HuggingFaceTB--SmolLM3-3B"), where="config.json")
    assert _letters(_published("HuggingFaceTB--SmolLM3-3B")) == "F" * 36
    first = next(iter(hf.model.layers.values()))
    assert isinstance(first, FullAttentionLayer)
    assert first.kv_heads == KVHeads(4) and first.head_size == Elements(128)
