"""``kvunits plan`` on DeepSeek V4: vLLM 0.33's numbers, kvunits' own plan refused by name.

The numbers are `plan_deepseek_v4_like_vllm`'s (tests/vllm_oracle/test_dsv4.py checks them
against vLLM 0.33's own cache classes and planner); the checkpoints are the published configs
of the held-out set (tests/config/hf_fixtures/heldout, SOURCES.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvunits.cli import main
from kvunits.contracts.config import ConfigError, load_config

HELDOUT = Path(__file__).resolve().parents[1] / "config" / "hf_fixtures" / "heldout"
FLASH = str(HELDOUT / "deepseek-ai--DeepSeek-V4-Flash")


def test_plan_prints_vllms_numbers_and_why_kvunits_own_plan_is_not_given(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", FLASH, "--like-vllm", "h200", "--kv-cache-memory-bytes", "80G"]) == 0
    out = capsys.readouterr().out
    # vLLM 0.33's get_kv_cache_capacity for this config (tests/runtime/test_like_vllm_packed.py)
    # at 16384 batched tokens (--like-vllm h200).
    assert "GPU KV cache size: " in out and "for 1,048,576 tokens per request" in out
    assert "kvunits' own plan is not given" in out
    assert "FlashMLA, fp8_ds_mla, layout BLHNC" in out


def test_plan_json_carries_the_same_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", FLASH, "--kv-cache-memory-bytes", "80G", "--max-num-batched-tokens", "8192"]
    assert main([*args, "--async-scheduling", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["vllm"]["num_blocks"] == {"value": 85707, "unit": "cache_block/rank"}
    assert data["vllm"]["kv_cache_size"] == {"value": 8338309, "unit": "token"}
    assert [g["layers"] for g in data["vllm"]["groups"]] == [22, 21, 62, 42, 20]


def test_the_vision_variant_plans_its_backbone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # vl_model.py DeepseekV4ForConditionalGeneration: the vision tower (MMEncoderAttention)
    # keeps no cache; the language model is DeepseekV4ForCausalLM on the same config.
    data = json.loads((Path(FLASH) / "config.json").read_text("utf-8"))
    data.update(architectures=["DeepseekV4ForConditionalGeneration"], vision_n_layers=2)
    (tmp_path / "config.json").write_text(json.dumps(data), "utf-8")
    args = ["--kv-cache-memory-bytes", "80G", "--max-num-batched-tokens", "8192"]
    assert main(["plan", str(tmp_path), *args, "--async-scheduling", "--format", "json"]) == 0
    vision = json.loads(capsys.readouterr().out)["vllm"]
    assert main(["plan", FLASH, *args, "--async-scheduling", "--format", "json"]) == 0
    assert vision == json.loads(capsys.readouterr().out)["vllm"]


@pytest.mark.parametrize(
    ("name", "flags", "message"),
    [
        # transformers knows no deepseek_ref: vLLM's ModelConfig refuses the file.
        ("sgl-project--DeepSeek-V4-Pro-FP8", [], "'deepseek_ref' is not a config class"),
        ("deepseek-ai--DeepSeek-V4-Pro", ["-tp", "3"], "does not divide the model's 128"),
        ("deepseek-ai--DeepSeek-V4-Pro", ["--max-model-len", "2000000"], "above the model's"),
        # DeepseekV4SparseMLABackend.supports_compute_capability: majors 9 and 10 only.
        ("deepseek-ai--DeepSeek-V4-Flash", ["--like-vllm", "a100-80gb"], "capability 9 or 10"),
    ],
)
def test_what_vllm_refuses_is_refused(
    name: str, flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["plan", str(HELDOUT / name), "--kv-cache-memory-bytes", "80G", *flags]
    assert main(args) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and message in captured.err


def test_what_vllm_cannot_start_with_is_refused_with_vllms_reason(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # No plan of kvunits' own to show: vLLM's start-up error is the command's (exit 2), with
    # vLLM's estimate of the longest length that fits (tests/runtime/test_like_vllm_packed.py).
    assert main(["plan", FLASH, "--kv-cache-memory-bytes", "4G", "--async-scheduling"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "vLLM refuses to start" in captured.err
    assert (
        main(["plan", FLASH, "--kv-cache-memory-bytes", "80G", "--kv-cache-dtype", "bfloat16"]) == 2
    )
    assert "only supports an fp8 KV cache" in capsys.readouterr().err


def test_the_typed_loader_still_refuses_it_naming_the_way_to_vllms_numbers() -> None:
    with pytest.raises(ConfigError, match="`kvunits plan` gives vLLM's numbers"):
        load_config(FLASH)
