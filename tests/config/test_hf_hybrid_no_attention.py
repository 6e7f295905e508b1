"""A hybrid family read with states on every layer and no attention layer is refused.

vLLM 0.33 builds such a model (granitemoehybrid.py ``GraniteMoeHybridModel``: each layer's
class from ``ALL_DECODER_LAYER_TYPES[config.layer_types[i]]``; ``GraniteMoeHybridConfig``'s
``__post_init__`` makes an absent ``layer_types`` all ``linear_attention``), but as a hybrid
(``IsHybrid``) it pads every state page to an attention page of the model-level geometry
(``Platform._align_hybrid_block_size``, vllm/platforms/interface.py), which no layer uses.
The oracle showed the difference on GraniteMoeHybridConfig's default (32 Mamba-2 layers at
TP 1, 16 GiB: vLLM's ``get_kv_cache_configs`` 120 blocks of 4,456,448 byte pages; kvunits
planned 126 unpadded blocks of 4,246,528): silently wrong, so refused. vLLM's attention-free
Mamba models (mamba.py, mamba2.py: ``IsAttentionFree``, no alignment) are still read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvunits.contracts.config import ConfigError, load_config, read_hf_config
from kvunits.contracts.state import Mamba2Layer

FIXTURES = Path(__file__).parent / "hf_fixtures"


def _load(*parts: str) -> dict[str, Any]:
    path = FIXTURES.joinpath(*parts, "config.json")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_granite_without_layer_types_is_refused_naming_the_padding() -> None:
    data = _load("excerpts", "ibm-granite--granite-4.0-h-350m")
    assert read_hf_config(data, where="config.json").model.layers  # as published: read
    del data["layer_types"]
    with pytest.raises(ConfigError, match=r"layer_types: .*_align_hybrid_block_size"):
        read_hf_config(data, where="config.json")


def test_every_hybrid_family_follows_the_rule() -> None:
    # Nemotron-H with a pattern of Mamba and MLP layers only; Kimi Linear with every layer
    # in kda_layers: the same alignment to a page no layer uses.
    nemotron = _load("heldout", "nvidia--Nemotron-H-56B-Base-8K")
    nemotron["hybrid_override_pattern"] = "M-" * (len(nemotron["hybrid_override_pattern"]) // 2)
    nemotron["num_hidden_layers"] = len(nemotron["hybrid_override_pattern"])
    kimi = _load("reports", "moonshotai--Kimi-Linear-48B-A3B-Instruct")
    kimi["linear_attn_config"]["kda_layers"] = list(range(1, 28))
    # Each refusal names the field that set the pattern in that config.
    for data, field in ((nemotron, "hybrid_override_pattern"), (kimi, "linear_attn_config")):
        with pytest.raises(ConfigError, match=rf"json: {field}: .* none attention"):
            read_hf_config(data, where="config.json")


def test_attention_free_mamba_models_are_still_read() -> None:
    layers = load_config(FIXTURES / "synthetic" / "synthetic--mamba2").model.layers
    assert layers and all(isinstance(layer, Mamba2Layer) for layer in layers.values())
