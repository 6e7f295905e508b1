"""DeepSeek sparse attention read as vLLM 0.33 reads it (vllm/models/deepseek_v32/attention.py,
``DeepseekV32Attention``): an MLA cache on every layer, and an indexer key cache on the layers
that run the indexer. The published configs are tests/config/hf_fixtures/heldout (SOURCES.md:
ai-dynamo/aiconfigurator @ 095f58a5); tests/vllm_oracle compares their plans with vLLM's own
``get_kv_cache_configs``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvunits.contracts import CacheDType, Elements, IndexerLayer, MLALayer
from kvunits.contracts.config import ConfigError, load_config, read_hf_config

HELDOUT = Path(__file__).resolve().parent / "hf_fixtures" / "heldout"


def _indexed(layers: dict[str, Any]) -> list[int]:
    keys = (n for n, layer in layers.items() if isinstance(layer, IndexerLayer))
    return sorted(int(n.split(".")[1]) for n in keys)


@pytest.mark.parametrize(
    ("name", "n_layers", "indexed", "kv_dtype"),
    [
        # index_topk set, no schedule: every layer runs the indexer.
        ("deepseek-ai--DeepSeek-V3.2", 61, list(range(61)), CacheDType.bfloat16),
        ("zai-org--GLM-5", 78, list(range(78)), CacheDType.bfloat16),
        # index_topk_freq 4, index_skip_topk_offset 3: max(i - 2, 0) % 4 == 0, i.e. layers
        # 0, 1, 2, then every 4th from 6 (its indexer_types says the same; vLLM reads the two
        # numbers, not the list).
        ("zai-org--GLM-5.2", 78, [0, 1, 2, *range(6, 78, 4)], CacheDType.bfloat16),
        # ModelOpt's hf_quant_config.json: kv_cache_quant_algo FP8.
        ("nvidia--GLM-5-NVFP4", 78, list(range(78)), CacheDType.fp8_e4m3),
    ],
)
def test_published_sparse_attention_configs(
    name: str, n_layers: int, indexed: list[int], kv_dtype: CacheDType
) -> None:
    layers = load_config(HELDOUT / name).model.layers
    latents = [layer for n, layer in layers.items() if n.count(".") == 1]
    assert len(latents) == n_layers
    assert all(isinstance(layer, MLALayer) and layer.sparse for layer in latents)
    assert {layer.dtype for layer in latents if isinstance(layer, MLALayer)} == {kv_dtype}
    assert _indexed(layers) == indexed
    keys = {layer for layer in layers.values() if isinstance(layer, IndexerLayer)}
    assert {k.head_size for k in keys} == {Elements(128)}


def _deepseek(**extra: Any) -> dict[str, Any]:
    path = HELDOUT / "deepseek-ai--DeepSeek-V3.2" / "config.json"
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    data.update(num_hidden_layers=6, **extra)
    return data


def test_an_index_topk_pattern_overrides_the_frequency() -> None:
    # "S" reuses the previous top-k (no indexer); past the pattern's end a layer runs it.
    data = _deepseek(index_topk_pattern="FSSF", index_topk_freq=2)
    assert _indexed(read_hf_config(data, where="config.json").model.layers) == [0, 3, 4, 5]


def test_deepseek_v3_with_index_topk_is_sparse_as_vllm_reads_it() -> None:
    # deepseek_v2.py: is_v32 = hasattr(config, "index_topk"), whatever the architecture.
    data = _deepseek(model_type="deepseek_v3", architectures=["DeepseekV3ForCausalLM"])
    layers = read_hf_config(data, where="config.json").model.layers
    assert _indexed(layers) == list(range(6))


def test_an_indexer_without_its_key_size_is_refused() -> None:
    data = _deepseek()
    del data["index_head_dim"]
    with pytest.raises(ConfigError, match="index_head_dim: missing"):
        read_hf_config(data, where="config.json")


def test_a_family_that_does_not_model_the_indexer_refuses_index_topk() -> None:
    data = json.loads((HELDOUT / "Qwen--Qwen3-8B" / "config.json").read_text(encoding="utf-8"))
    data["index_topk"] = 2048
    with pytest.raises(ConfigError, match="index_topk"):
        read_hf_config(data, where="config.json")
