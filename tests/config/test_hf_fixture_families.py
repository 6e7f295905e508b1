"""The families read by vLLM 0.33's rules, on published configs (tests/config/hf_fixtures,
SOURCES.md: mlc-ai/mlc-llm's presets @ 79d603f0). Each expectation cites the vLLM file
whose attention construction gives it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvunits.contracts import (
    Elements,
    FullAttentionLayer,
    KVHeads,
    SlidingWindowLayer,
    Tokens,
    Window,
)
from kvunits.contracts.config import load_config

TUNING = Path(__file__).resolve().parent / "hf_fixtures" / "tuning"


@pytest.mark.parametrize(
    ("name", "layers", "kv_heads", "head_size", "why"),
    [
        # internlm2.py InternLM2Attention: num_key_value_heads, hidden_size / heads.
        ("internlm2_5_7b", 32, 8, 128, "internlm2.py"),
        # chatglm.py GLMAttention: multi_query_group_num KV heads, hidden_size / heads.
        ("chatglm", 28, 2, 128, "chatglm.py"),
        # qwen2_moe.py: hidden_size / heads; no window without use_sliding_window.
        ("qwen2moe", 24, 16, 128, "qwen2_moe.py"),
        # stablelm.py: hidden_size / heads (2560 / 32 = 80).
        ("stablelm", 32, 32, 80, "stablelm.py"),
        # minicpm.py: hidden_size / heads (2304 / 36 = 64).
        ("minicpm_2b", 40, 36, 64, "minicpm.py"),
        # gpt2.py: n_layer, n_head, n_embd / n_head (attribute_map names).
        ("gpt2", 12, 12, 64, "gpt2.py"),
        # gemma.py: head_dim 256, one KV head (Gemma 2B's multi-query attention).
        ("gemma_2b", 18, 1, 256, "gemma.py"),
        # The Transformers backend (transformers/base.py): head_dim or hidden_size / heads.
        ("olmo2_7b", 32, 32, 128, "transformers/base.py"),
        # orion.py, commandr.py (Cohere v1), deepseek_v2.py's DeepSeek v1 (no MLA).
        ("orion", 40, 40, 128, "orion.py"),
        ("aya-23", 32, 8, 128, "commandr.py"),
        ("deepseek", 28, 16, 128, "deepseek_v2.py"),
    ],
)
def test_full_attention_families(
    name: str, layers: int, kv_heads: int, head_size: int, why: str
) -> None:
    config = load_config(TUNING / name)
    kinds = set(config.model.layers.values())
    assert len(config.model.layers) == layers, why
    assert all(isinstance(layer, FullAttentionLayer) for layer in kinds), why
    expected = {(KVHeads(kv_heads), Elements(head_size))}
    assert {(layer.kv_heads, layer.head_size) for layer in kinds} == expected  # type: ignore[union-attr]


def test_starcoder2_slides_every_layer() -> None:
    # mlc's starcoder2 preset (32 layers, 36 heads of 4608 / 36 = 128, 4 KV heads):
    # sliding_window 4096 and no layer_types, so vLLM's Transformers backend gives every
    # layer the engine-wide window (arg_utils.py: set when layer_types is absent).
    config = load_config(TUNING / "starcoder2")
    layers = set(config.model.layers.values())
    assert len(config.model.layers) == 32
    ((layer,),) = [layers]
    assert isinstance(layer, SlidingWindowLayer)
    assert layer.sliding_window == Window(4096, Tokens)
    assert (layer.kv_heads, layer.head_size) == (KVHeads(4), Elements(128))


def test_phi3_vision_reads_its_flat_decoder() -> None:
    # microsoft/Phi-3.5-vision-instruct: model_type phi3_v, the decoder's fields at the top
    # (vLLM's phi3v.py builds a Phi3 decoder): 32 layers of 32 heads of 96.
    config = load_config(TUNING / "phi-3_5-vision")
    assert len(config.model.layers) == 32
    assert {layer.head_size for layer in config.model.layers.values()} == {Elements(96)}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("baichuan", "vLLM 0.33 no longer serves it"),
        ("qwen", "vLLM 0.33 no longer serves it"),
        ("rwkv5_3b", "kvunits does not read model type 'rwkv5'"),
        ("snowflake-arctic-embed-m", "kvunits does not read model type 'bert'"),
    ],
)
def test_refusals_name_the_reason(name: str, reason: str) -> None:
    with pytest.raises(Exception, match=reason):
        load_config(TUNING / name)
