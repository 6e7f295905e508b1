"""Gemma 4's ``per_layer_config`` and the multimodal wrappers read since the Kimi pass.

transformers 5.20's ``Gemma4TextConfig`` keeps per-layer overrides of ``head_dim`` and
``num_key_value_heads`` keyed by layer index (``"05"`` in ``config.json``); an unnamed layer
takes the config's own. ``to_dict`` writes the mapping its ``__post_init__`` derives (one
``{"head_dim": global_head_dim}``, with ``attention_k_eq_v`` also
``num_global_key_value_heads``, per full-attention layer), so a re-saved checkpoint carries it.
vLLM 0.33's ``Gemma4DecoderLayer`` reads ``config.per_layer_config[layer_idx]``
(vllm/model_executor/models/gemma4.py). Gemma 4 Unified (gemma4_unified.py builds
``Gemma4ForCausalLM`` on its text config) and MuseGlimmer VL (muse_glimmer.py
``_text_config``) read their text configs as those families.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from kvunits.contracts import FullAttentionLayer, SlidingWindowLayer
from kvunits.contracts.config import ConfigError, read_hf_config
from kvunits.contracts.deploy import KVHeads

GEMMA4 = Path(__file__).parent / "hf_fixtures" / "heldout" / "google--gemma-4-26B-A4B"


def _published() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GEMMA4 / "config.json").read_text(encoding="utf-8"))
    return data


def _geometry(data: dict[str, Any]) -> list[tuple[str, int, int]]:
    out: list[tuple[str, int, int]] = []
    for layer in read_hf_config(data, where="config.json").model.layers.values():
        assert isinstance(layer, (FullAttentionLayer, SlidingWindowLayer))
        out.append((layer.kind, layer.kv_heads.numerical_value_in(KVHeads), layer.head_size._value))
    return out


def test_the_derived_mapping_reads_as_the_global_fields() -> None:
    # The published file: full layers (every 6th, from 5) global_head_dim 512 with
    # num_global_key_value_heads 2 (attention_k_eq_v); written as transformers' to_dict does.
    data = _published()
    text = data["text_config"]
    full = [i for i, t in enumerate(text["layer_types"]) if t == "full_attention"]
    derived = copy.deepcopy(data)
    derived["text_config"]["per_layer_config"] = {
        f"{i:02d}": {"head_dim": 512, "num_key_value_heads": 2} for i in full
    }
    assert _geometry(derived) == _geometry(data)
    assert _geometry(data)[5] == ("full_attention", 2, 512)


def test_an_override_changes_that_layer_only() -> None:
    data = _published()
    data["text_config"]["per_layer_config"] = {"05": {"head_dim": 384}}
    geometry = _geometry(data)
    # Layer 5 takes head_dim 384 and the config's 8 KV heads (no override of them); the
    # other full layers, unnamed, take the config's head_dim 256: the global fields are
    # not read once the mapping is given.
    assert geometry[5] == ("full_attention", 8, 384)
    assert geometry[11] == ("full_attention", 8, 256)
    assert geometry[0] == ("sliding_window", 8, 256)


@pytest.mark.parametrize(
    "bad",
    [{"5x": {"head_dim": 64}}, {"99": {"head_dim": 64}}, {"05": {"sliding_window": 64}}, [1]],
)
def test_a_mapping_kvunits_cannot_read_is_refused_by_name(bad: object) -> None:
    data = _published()
    data["text_config"]["per_layer_config"] = bad
    with pytest.raises(ConfigError, match="per_layer_config"):
        read_hf_config(data, where="config.json")


@pytest.mark.parametrize(
    ("wrapper", "architecture", "text", "layers"),
    [
        # Gemma4UnifiedTextConfig's defaults: 30 layers, the last of every 6 full.
        ("gemma4_unified", "Gemma4UnifiedForConditionalGeneration", "gemma4_unified_text", 30),
        # MuseGlimmer's text config class defaults (52 layers).
        ("muse_glimmer", "MuseGlimmerForConditionalGeneration", "muse_glimmer_text", 52),
    ],
)
def test_wrappers_read_their_text_config_as_the_family(
    wrapper: str, architecture: str, text: str, layers: int
) -> None:
    data = {
        "architectures": [architecture],
        "model_type": wrapper,
        "torch_dtype": "bfloat16",
        "text_config": {"model_type": text},
    }
    assert len(read_hf_config(data, where="config.json").model.layers) == layers
