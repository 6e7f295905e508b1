"""MiMo-V2-Flash read as vLLM 0.33's mimo_v2.py builds it (``MiMoV2DecoderLayer``): the
published config (tests/config/hf_fixtures/heldout, SOURCES.md: ai-dynamo/aiconfigurator @
095f58a5); tests/vllm_oracle compares its plans with vLLM's own ``get_kv_cache_configs``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvunits.contracts import (
    Elements,
    FullAttentionLayer,
    KVHeads,
    SlidingWindowLayer,
    Tokens,
    Window,
)
from kvunits.contracts.config import ConfigError, load_config, read_hf_config

FLASH = Path(__file__).resolve().parent / "hf_fixtures" / "heldout" / "XiaomiMiMo--MiMo-V2-Flash"


def test_mimo_v2_flash_layers_follow_hybrid_layer_pattern() -> None:
    layers = load_config(FLASH).model.layers
    # hybrid_layer_pattern: 0 at layer 0 and every 6th from 5 (full attention, 4 KV heads),
    # 1 elsewhere (sliding over sliding_window_size = 128 tokens, swa_ geometry: 8 KV heads).
    full = [i for i in range(48) if isinstance(layers[f"text.{i}"], FullAttentionLayer)]
    assert full == [0, 5, 11, 17, 23, 29, 35, 41, 47]
    swa = layers["text.1"]
    assert isinstance(swa, SlidingWindowLayer)
    assert swa.sliding_window == Window(128, Tokens)  # not transformers' sliding_window (129)
    assert (swa.kv_heads, swa.head_size, swa.head_size_v) == (
        KVHeads(8),
        Elements(192),
        Elements(128),
    )
    glob = layers["text.0"]
    assert isinstance(glob, FullAttentionLayer)
    assert (glob.kv_heads, glob.head_size, glob.head_size_v) == (
        KVHeads(4),
        Elements(192),
        Elements(128),
    )


def test_a_pattern_that_does_not_cover_every_layer_is_refused() -> None:
    data: dict[str, Any] = json.loads((FLASH / "config.json").read_text(encoding="utf-8"))
    data["hybrid_layer_pattern"] = data["hybrid_layer_pattern"][:40]
    with pytest.raises(ConfigError, match="hybrid_layer_pattern: expected 48 entries"):
        read_hf_config(data, where="config.json")
