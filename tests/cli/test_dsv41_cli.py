"""``kvunits plan`` on DeepSeek V4.1: vLLM 0.33's numbers on Hopper, its reasons elsewhere.

No V4.1 ``config.json`` is published in a public repository that we found, so the model
here is **synthetic** (4 layers: ratios 0, 2, 2, 1; kv and index sources 1 and 3), nested
under ``text_config`` as vLLM's ``DeepseekV41Config`` reads it. The golden numbers are vLLM
0.33's own for it: ``tests/vllm_oracle/oracle_dsv41.py`` (vLLM's cache classes,
``get_kv_cache_configs`` and ``get_kv_cache_capacity``) at 8 GiB, 65,536 tokens, 8,192
batched tokens, async scheduling: 123,248 blocks, 2,611,439 tokens, 39.85x.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvunits.cli import main

_TEXT = {
    "num_hidden_layers": 4,
    "num_attention_heads": 64,
    "max_position_embeddings": 65536,
    "head_dim": 512,
    "qk_rope_head_dim": 64,
    "index_head_dim": 128,
    "sliding_window": 128,
    "compress_ratios": [0, 2, 2, 1],
    "kv_source_layer_ids": [1, 3],
    "index_source_layer_ids": [1, 3],
}
_FLAGS = ["--kv-cache-memory-bytes", "8G", "--max-num-batched-tokens", "8192"]


def _model(root: Path, **text: object) -> str:
    data = {
        "architectures": ["DeepseekV41ForCausalLM"],
        "model_type": "deepseek_v41",
        "text_config": {**_TEXT, **text},
    }
    (root / "config.json").write_text(json.dumps(data), "utf-8")
    return str(root)


def test_plan_on_hopper_gives_vllms_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["plan", _model(tmp_path), "--like-vllm", "h200", *_FLAGS, "--format", "json"]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert "DeepSeek V4.1" in data["own_plan"]
    vllm = data["vllm"]
    assert vllm["num_blocks"] == {"value": 123248, "unit": "cache_block/rank"}
    assert vllm["kv_cache_size"] == {"value": 2611439, "unit": "token"}
    assert [g["layers"] for g in vllm["groups"]] == [1, 1, 1, 1, 4, 1]
    assert main(["plan", _model(tmp_path), "--like-vllm", "h100", *_FLAGS]) == 0
    out = capsys.readouterr().out
    assert "4 DeepSeek V4.1 layers" in out
    assert "GPU KV cache size: 2,611,439 tokens" in out


@pytest.mark.parametrize(
    ("flags", "text", "message"),
    [
        ([], {}, "name it with --like-vllm h100 or h200"),
        (["--like-vllm", "b200"], {}, "mega attention"),
        (["--like-vllm", "a100-80gb"], {}, "compute capability 9"),
        (["--like-vllm", "h200", "--kv-cache-dtype", "bfloat16"], {}, "fp8"),
        (["--like-vllm", "h200"], {"compress_ratios": [0, 4, 2, 1]}, "takes 0"),
        (["--like-vllm", "h200", "-pp", "2"], {}, "kv-sharing group"),
        (["--like-vllm", "h200", "--block-size", "128"], {}, "64 tokens"),
    ],
)
def test_what_vllm_refuses_or_kvunits_does_not_model_is_refused_by_name(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    text: dict[str, object],
    message: str,
) -> None:
    assert main(["plan", _model(tmp_path, **text), *_FLAGS, *flags]) == 2
    assert message in capsys.readouterr().err
