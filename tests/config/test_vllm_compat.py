"""Hugging Face configs read and validated as vLLM 0.33 reads them (issue 21).

Golden facts cite their source: vLLM 0.33.0's registry (vllm/model_executor/models/
registry.py), its config code (vllm/config/model.py, vllm/transformers_utils/config.py),
and published config.json files kept in tests/config/hf_fixtures (SOURCES.md).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from kvunits.contracts import CacheDType, Elements, FullAttentionLayer, KVHeads
from kvunits.contracts.config import ConfigError, load_config
from kvunits.contracts.config._hf_families import BY_ARCHITECTURE
from kvunits.contracts.config._hf_registry import (
    MULTIMODAL,
    REFUSED,
    TEXT_GENERATION,
    TRANSFORMERS_BACKEND,
    architecture_refusal,
)
from kvunits.contracts.config._weights import weights_memory
from kvunits.contracts.deploy import Parallelism, RankBytes

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "config" / "hf_fixtures"
HF = ROOT / "examples" / "hf"


def _write(tmp_path: Path, data: dict[str, Any], name: str = "config.json") -> Path:
    (tmp_path / name).write_text(json.dumps(data), encoding="utf-8")
    return tmp_path


def _llama() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HF / "llama-3.1-8b" / "config.json").read_text("utf-8"))
    return data


# -- dispatch -------------------------------------------------------------------------------


def test_every_text_generating_architecture_is_read_or_refused_with_a_reason() -> None:
    # vLLM 0.33's _TEXT_GENERATION_MODELS and _TRANSFORMERS_SUPPORTED_MODELS: never "unknown".
    for arch in sorted(TEXT_GENERATION | TRANSFORMERS_BACKEND):
        assert arch in BY_ARCHITECTURE or architecture_refusal(arch), arch


@pytest.mark.parametrize("arch", sorted(REFUSED))
def test_a_refused_architecture_names_the_feature(arch: str, tmp_path: Path) -> None:
    data = {**_llama(), "architectures": [arch]}
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, data))
    assert f"architectures[0]: {arch}: kvunits does not plan it: {REFUSED[arch]}" in str(err.value)


def test_a_multimodal_architecture_reads_its_text_config(tmp_path: Path) -> None:
    # InternVL keeps its decoder under llm_config (vLLM's InternVLChatModel reads it there).
    assert "InternVLChatModel" in MULTIMODAL
    llm = {**_llama(), "architectures": ["LlamaForCausalLM"]}
    data = {
        "architectures": ["InternVLChatModel"],
        "model_type": "internvl_chat",
        "llm_config": llm,
    }
    config = load_config(_write(tmp_path, data))
    assert len(config.model.layers) == 32
    assert all(isinstance(layer, FullAttentionLayer) for layer in config.model.layers.values())


def test_nemotron_nas_layers_differ_and_some_have_no_attention() -> None:
    # nvidia/Llama-3_3-Nemotron-Super-49B-v1 (published config.json, SOURCES.md): 80 block
    # configs; vLLM's nemotron_nas.py builds no attention where attention.no_op, and
    # num_attention_heads // n_heads_in_group KV heads elsewhere.
    path = FIXTURES / "heldout" / "nvidia--Llama-3_3-Nemotron-Super-49B-v1"
    raw = json.loads((path / "config.json").read_text(encoding="utf-8"))
    blocks = raw["block_configs"]
    config = load_config(path)
    with_attention = [i for i, b in enumerate(blocks) if not b["attention"]["no_op"]]
    assert sorted(int(n.split(".")[1]) for n in config.model.layers) == with_attention
    for i in with_attention:
        layer = config.model.layers[f"text.{i}"]
        assert isinstance(layer, FullAttentionLayer)
        expected = raw["num_attention_heads"] // blocks[i]["attention"]["n_heads_in_group"]
        assert layer.kv_heads == KVHeads(expected) and layer.head_size == Elements(128)


# -- the model directory: hf_quant_config.json, --hf-overrides ------------------------------


def test_hf_quant_config_beside_config_json_gives_an_fp8_cache() -> None:
    # nvidia/Llama-3.1-70B-Instruct-FP8: config.json has no quantization_config; ModelOpt
    # 0.23 wrote kv_cache_quant_algo FP8 in hf_quant_config.json, which vLLM reads
    # (vllm/transformers_utils/config.py get_config): the cache is fp8, pages half of bf16.
    config = load_config(FIXTURES / "heldout" / "nvidia--Llama-3.1-70B-Instruct-FP8")
    dtypes = {layer.dtype for layer in config.model.layers.values()}  # type: ignore[union-attr]
    assert dtypes == {CacheDType.fp8_e4m3}


def test_hf_overrides_merge_into_the_config(tmp_path: Path) -> None:
    path = _write(tmp_path, _llama())
    config = load_config(path, hf_overrides={"num_key_value_heads": 4})
    assert {layer.kv_heads for layer in config.model.layers.values()} == {KVHeads(4)}  # type: ignore[union-attr]


# -- validation as vLLM ---------------------------------------------------------------------


def test_tensor_parallelism_must_divide_the_attention_heads() -> None:
    # Qwen2.5-7B-Instruct: 28 attention heads, 4 KV heads. TP 4 divides both; TP 8 divides
    # neither the 28 attention heads (vLLM: "must be divisible by tensor parallel size").
    load_config(HF / "qwen2.5-7b-instruct", flags={"tensor_parallel_size": "4"})
    with pytest.raises(ConfigError, match="does not divide the model's 28 attention heads"):
        load_config(HF / "qwen2.5-7b-instruct", flags={"tensor_parallel_size": "8"})


def test_max_model_len_above_the_model_needs_vllms_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    # Whisper's decoder: max_target_positions 448 (vllm/config/model.py
    # _get_and_verify_max_len refuses more unless VLLM_ALLOW_LONG_MAX_MODEL_LEN is set).
    flags = {"max_model_len": "32768 token"}
    with pytest.raises(ConfigError, match=r"max_model_len 32768 token is above the model's 448"):
        load_config(HF / "whisper-large-v3", flags=flags)
    load_config(HF / "whisper-large-v3", flags={"max_model_len": "448 token"})
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
    assert load_config(HF / "whisper-large-v3", flags=flags).engine.max_model_len._value == 32768


def test_gpu_memory_utilization_without_gpu_memory_is_refused() -> None:
    with pytest.raises(ConfigError, match="gpu_memory_utilization is a fraction of gpu_memory"):
        load_config(HF / "llama-3.1-8b", flags={"gpu_memory_utilization": "0.5"})


# -- weights from the model directory -------------------------------------------------------


def _safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    header: dict[str, Any] = {}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = 2
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text)  # the header alone: sizes only


def test_weights_are_split_per_rank_from_safetensors_headers(tmp_path: Path) -> None:
    # Two layers of a 2-D weight (1 MiB each) and a norm (8 KiB), an embedding (4 MiB) and an
    # LM head (4 MiB): TP 2 halves the 2-D tensors and keeps the norm whole; PP 2 puts layer
    # 0 and the embedding on stage 0, layer 1 and the head on stage 1.
    mib = 1 << 20
    _safetensors(
        tmp_path / "model.safetensors",
        {
            "model.embed_tokens.weight": ("BF16", [2048, 1024]),  # 4 MiB
            "model.layers.0.self_attn.q_proj.weight": ("BF16", [512, 1024]),  # 1 MiB
            "model.layers.0.input_layernorm.weight": ("BF16", [4096]),  # 8 KiB
            "model.layers.1.self_attn.q_proj.weight": ("BF16", [512, 1024]),
            "model.layers.1.input_layernorm.weight": ("BF16", [4096]),
            "lm_head.weight": ("BF16", [2048, 1024]),
        },
    )
    found = weights_memory(
        tmp_path, 2, Parallelism(tensor_parallel_size=2, pipeline_parallel_size=2)
    )
    assert found is not None and found.total._value == 10 * mib + 16 * 1024
    # Stage 0: embedding 4 MiB / 2 + q_proj 1 MiB / 2 + norm 8 KiB; stage 1 the same.
    assert found.per_rank == RankBytes(2 * mib + mib // 2 + 8 * 1024)
    assert found.how.startswith("estimate: safetensors headers")


def test_weights_from_the_index_alone_are_an_even_estimate(tmp_path: Path) -> None:
    index = {"metadata": {"total_size": 16_060_522_496}, "weight_map": {}}
    _write(tmp_path, index, "model.safetensors.index.json")
    found = weights_memory(tmp_path, 32, Parallelism(tensor_parallel_size=2))
    assert found is not None and found.per_rank == RankBytes(8_030_261_248)
    assert "split evenly" in found.how
