"""Multimodal decoders read through their text config as vLLM 0.33 builds them:

* Ernie 4.5 VL (``ernie4_5_vl_moe_text``): ernie45_vl_moe.py ``Ernie4_5_VLMoeAttention``, full
  attention with ``num_key_value_heads`` KV heads of ``head_dim`` (else ``hidden_size //
  heads``) on every layer;
* Granite 4 Vision (``granite4_vision_text``): granite4_vision.py builds
  ``Granite4VisionLLMForCausalLM``, a ``GraniteForCausalLM``, on ``text_config``;
* Molmo 2 (``molmo2_text``): molmo2.py ``Molmo2Attention``, full attention of the text
  config's ``head_dim`` on every layer.

Fixtures: ``synthetic/`` (SOURCES.md), sized from transformers' config classes; each equals
vLLM's ``ModelConfig`` view (scripts/vllm-model-view) and its plans vLLM's
``get_kv_cache_configs`` (tests/vllm_oracle/test_like_vllm.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvunits.contracts import FullAttentionLayer, SlidingWindowLayer, Tokens
from kvunits.contracts.config import load_config, read_hf_config
from kvunits.contracts.deploy import KVHeads

SYNTHETIC = Path(__file__).parent / "hf_fixtures" / "synthetic"


@pytest.mark.parametrize(
    ("name", "layers", "kv_heads", "head_size", "length"),
    [
        # hidden_size 2560 / 20 heads (no head_dim), Ernie4_5_VLMoeTextConfig's sizes.
        ("synthetic--ernie4_5_vl_moe", 28, 4, 128, 131072),
        # hidden_size 4096 / 32 heads, as GraniteAttention takes it.
        ("synthetic--granite4_vision", 32, 8, 128, 131072),
        # head_dim 128 where hidden_size / heads is 80: Molmo2Attention takes head_dim.
        ("synthetic--molmo2", 36, 8, 128, 36864),
    ],
)
def test_the_decoder_is_full_attention_on_every_layer(
    name: str, layers: int, kv_heads: int, head_size: int, length: int
) -> None:
    config = load_config(SYNTHETIC / name)
    read = list(config.model.layers.values())
    assert len(read) == layers
    assert all(isinstance(layer, FullAttentionLayer) for layer in read)
    first = read[0]
    assert isinstance(first, FullAttentionLayer)
    assert first.kv_heads.numerical_value_in(KVHeads) == kv_heads
    assert first.head_size._value == head_size
    assert config.engine.max_model_len._value == length


@pytest.mark.parametrize(
    ("wrapper", "architecture", "text", "layers", "length"),
    [
        # The config classes' defaults (transformers 5.20) where a text_config leaves the
        # fields out, as vLLM reads them through transformers.
        ("ernie4_5_vl_moe", "Ernie4_5_VLMoeForConditionalGeneration", "ernie4_5_vl_moe_text",
         28, 131072),
        ("granite4_vision", "Granite4VisionForConditionalGeneration", "granite4_vision_text",
         32, 2048),
        ("molmo2", "Molmo2ForConditionalGeneration", "molmo2_text", 36, 36864),
        # cohere_compass.py CohereCompassAttention; cosmos3_edge.py (Nemotron-H attention on
        # each of num_hidden_layers layers, _to_nemotron_h_config).
        ("cohere_compass", "CohereCompassForConditionalGeneration", "cohere_compass_text",
         40, 8192),
        ("cosmos3_edge", "Cosmos3EdgeForConditionalGeneration", "cosmos3_edge_text",
         28, 131072),
    ],
)
def test_an_empty_text_config_takes_the_class_defaults(
    wrapper: str, architecture: str, text: str, layers: int, length: int
) -> None:
    data = {
        "architectures": [architecture],
        "model_type": wrapper,
        "torch_dtype": "bfloat16",
        "text_config": {"model_type": text},
    }
    config = read_hf_config(data, where="config.json")
    assert len(config.model.layers) == layers
    assert config.engine["max_model_len"] == Tokens(length)


def test_cohere_compass_slides_its_sliding_attention_layers() -> None:
    # CohereCompassAttention: sliding_window where layer_types says sliding_attention (no + 1,
    # unlike Cohere 2's commandr.py), the other layers full.
    types = ["sliding_attention"] * 3 + ["full_attention"]
    data = {
        "architectures": ["CohereCompassForConditionalGeneration"],
        "model_type": "cohere_compass",
        "torch_dtype": "bfloat16",
        "text_config": {
            "model_type": "cohere_compass_text",
            "num_hidden_layers": 4,
            "sliding_window": 4096,
            "layer_types": types,
        },
    }
    layers = list(read_hf_config(data, where="config.json").model.layers.values())
    assert [type(layer).__name__ for layer in layers] == ["SlidingWindowLayer"] * 3 + [
        "FullAttentionLayer"
    ]
    first = layers[0]
    assert isinstance(first, SlidingWindowLayer) and first.sliding_window._n == 4096
