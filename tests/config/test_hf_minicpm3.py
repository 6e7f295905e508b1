"""MiniCPM3 as vLLM 0.33 caches it: plain attention over the expanded latent, not MLA.

vllm/model_executor/models/minicpm3.py ``MiniCPM3Attention`` builds
``Attention(num_local_heads, qk_head_dim, num_kv_heads=num_local_heads)`` with ``qk_head_dim =
qk_nope_head_dim + qk_rope_head_dim``, expands ``kv_b_proj``'s output to every head's K and V,
and pads V to ``qk_head_dim``: the cache holds K and V of every attention head. kvunits read
minicpm3 with DeepSeek's MLA rule (one latent head of ``kv_lora_rank + qk_rope_head_dim``), a
page 26.7× too small, silently (tests/vllm_oracle/sweep.py showed vLLM's view and kvunits'
differ; other engines' calculators make the same mistake and list MiniCPM3 as MLA).
The config is synthetic, MiniCPM3-4B-sized (its published file needs remote code).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvunits.cli import main
from kvunits.contracts import Elements, FullAttentionLayer, KVHeads
from kvunits.contracts.config import read_hf_config

MINICPM3: dict[str, Any] = {
    "architectures": ["MiniCPM3ForCausalLM"],
    "model_type": "minicpm3",
    "hidden_size": 2560,
    "num_hidden_layers": 62,
    "num_attention_heads": 40,
    "num_key_value_heads": 40,
    "qk_nope_head_dim": 64,
    "qk_rope_head_dim": 32,
    "kv_lora_rank": 256,
    "q_lora_rank": 768,
    "v_head_dim": 64,
    "max_position_embeddings": 32768,
    "torch_dtype": "bfloat16",
}


def test_every_head_keeps_k_and_v_of_the_query_head_size() -> None:
    layers = read_hf_config(MINICPM3, where="config.json").model.layers
    assert len(layers) == 62
    for layer in layers.values():
        assert type(layer) is FullAttentionLayer  # not an MLALayer
        assert layer.kv_heads == KVHeads(40)
        assert layer.head_size == Elements(64 + 32)  # qk_nope_head_dim + qk_rope_head_dim


def test_a_full_length_request_holds_vllms_attention_pages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # vLLM's FullAttentionSpec: num_kv_heads × head_size × 2 (K, V) × 2 byte (bf16) a token a
    # layer = 40 × 96 × 2 × 2 = 15360 (MLA's rule gave (256 + 32) × 2 = 576); × 62 layers ×
    # 32768 tokens = 31205621760 byte.
    (tmp_path / "config.json").write_text(json.dumps(MINICPM3), encoding="utf-8")
    assert main(["plan", str(tmp_path), "--memory-budget", "64 GiB"]) == 0
    assert "one full-length request holds 31205621760 byte" in capsys.readouterr().out


@pytest.mark.parametrize("field", ["qk_nope_head_dim", "qk_rope_head_dim", "num_attention_heads"])
def test_a_missing_head_field_is_named(field: str) -> None:
    from kvunits.contracts.config import ConfigError

    data = {k: v for k, v in MINICPM3.items() if k != field}
    with pytest.raises(ConfigError) as error:
        read_hf_config(data, where="config.json")
    assert field in str(error.value)
