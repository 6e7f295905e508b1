"""`vllm serve`'s flags, values and presets on kvunits' commands, and vLLM's two headline
numbers in every plan (issue 21).

The numbers printed are `plan_like_vllm`'s, which tests/vllm_oracle/test_like_vllm.py checks
against vLLM 0.33's own get_kv_cache_configs and get_kv_cache_capacity; the value grammar is
vLLM's human_readable_int (vllm/utils/argparse_utils.py, its docstring's examples).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvunits._vllm import human_readable_int
from kvunits.cli import main
from kvunits.contracts.config import load_config
from kvunits.runtime.like_vllm import VLLM_GPUS, plan_like_vllm

ROOT = Path(__file__).resolve().parents[2]
GEMMA = str(ROOT / "examples" / "hf" / "gemma-3-1b-it" / "config.json")
LLAMA = str(ROOT / "examples" / "hf" / "llama-3.1-8b" / "config.json")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def plan_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    status, out, err = run(capsys, "plan", *args, "--format", "json")
    assert status == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


@pytest.mark.parametrize(
    ("text", "value"),
    [
        # vllm/utils/argparse_utils.py human_readable_int's docstring.
        ("1k", 1000),
        ("1K", 1024),
        ("25.6k", 25600),
        ("32768", 32768),
        ("16G", 16 << 30),
        ("16g", 16_000_000_000),
        ("1.5K", None),  # vLLM: "Decimals are not allowed with binary suffixes"
        ("16 GiB", None),  # kvunits' own text, read by kvunits' grammar
    ],
)
def test_human_readable_int_is_vllms(text: str, value: int | None) -> None:
    assert human_readable_int(text) == value


def test_vllm_values_are_read_as_vllm_reads_them(capsys: pytest.CaptureFixture[str]) -> None:
    data = plan_json(
        capsys,
        LLAMA,
        "--max-model-len",
        "32k",
        "--kv-cache-memory-bytes",
        "16G",
        "--max_num_batched_tokens",
        "8K",
        "--block-size",
        "32",
        "--kv-cache-dtype",
        "fp8",
    )
    engine = data["engine"]
    assert engine["max_model_len"]["value"] == 32000
    assert engine["memory_budget"]["value"] == 16 << 30
    assert engine["max_num_batched_tokens"]["value"] == 8192
    assert engine["block_size_slots"]["value"] == 32
    assert engine["cache_dtype"]["value"] == "fp8_e4m3"


def test_every_plan_prints_vllms_two_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(
        capsys, "plan", GEMMA, "--like-vllm", "h100", "--kv-cache-memory-bytes", "16G"
    )
    assert status == 0, err
    config = load_config(
        GEMMA,
        flags={
            "memory_budget": "16 GiB",
            "max_num_batched_tokens": "8192 token",
            "async_scheduling": True,
            "kv_cache_layout": "shared",
        },
    )
    expected = plan_like_vllm(config.model, config.engine).headline()
    # vLLM 0.33 logs this line for gemma-3-1b-it at 16 GiB, 8192 batched tokens, async on
    # (tests/vllm_oracle checks the numbers against vLLM's own functions).
    assert expected == (
        "GPU KV cache size: 1,023,830 tokens, Maximum concurrency for 32,768 tokens per "
        "request: 31.24x"
    )
    assert expected in out
    assert "vllm serve 0.33 with --like-vllm h100" in out


def test_like_vllm_presets_vllms_defaults_on_the_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    data = plan_json(capsys, GEMMA, "--like-vllm", "H200", "--kv-cache-memory-bytes", "16G")
    engine = data["engine"]
    # vllm serve's defaults (EngineArgs.get_batch_defaults, OPENAI_API_SERVER): 8192 tokens
    # from 70 GiB (not an A100), 16384 from 160 GiB; async scheduling on.
    assert engine["max_num_batched_tokens"]["value"] == 8192
    assert engine["async_scheduling"]["value"] is True
    assert engine["kv_cache_layout"]["value"] == "shared"
    assert data["vllm"]["headline"].startswith("GPU KV cache size: ")
    assert VLLM_GPUS["b200"].max_num_batched_tokens._value == 16384
    assert VLLM_GPUS["a100-80gb"].max_num_batched_tokens._value == 2048
    status, _, err = run(capsys, "plan", GEMMA, "--like-vllm", "tpu9")
    assert status == 2 and "unknown GPU 'tpu9'" in err


QWEN35 = str(ROOT / "tests" / "config" / "hf_fixtures" / "heldout" / "Qwen--Qwen3.5-27B")


def test_like_vllm_plans_a_hybrid_whose_pages_share_no_pool(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Qwen3.5-27B (the held-out published config): gated-delta-net states of 3,207,168 byte
    # a page beside full attention of 65,536 (16 tokens). kvunits' shared pool does not pad a
    # state's page as vLLM does, so the preset's one pool falls back to a pool per group and
    # says so; the preset used to end the plan with "--kv-cache-layout: one pool needs one
    # page size", an error about a flag the user never gave.
    args = ("--like-vllm", "h100", "--kv-cache-memory-bytes", "40G")
    data = plan_json(capsys, QWEN35, *args, "--no-enable-prefix-caching")
    layout = data["engine"]["kv_cache_layout"]
    assert layout["value"] == "per_group" and layout["from"].startswith("flag --like-vllm")
    assert any("a pool per group" in note for note in data["vllm"]["notes"])
    assert data["vllm"]["headline"].startswith("GPU KV cache size: ")
    # A layout the user asks for is theirs: its refusal stands, naming the flag.
    status, _, err = run(capsys, "plan", QWEN35, *args, "--kv-cache-layout", "shared")
    assert status == 2 and "one pool needs one page size" in err
    # A model whose pages share one pool keeps the preset's one pool.
    gemma = plan_json(capsys, GEMMA, "--like-vllm", "h100", "--kv-cache-memory-bytes", "16G")
    assert gemma["engine"]["kv_cache_layout"]["value"] == "shared"


def test_like_vllm_takes_the_gpus_memory_and_asks_for_the_rest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, _, err = run(capsys, "plan", GEMMA, "--like-vllm", "h100")
    assert status == 2
    assert "weights_memory" in err and "activation_memory" in err  # not profiled: asked for
    data = plan_json(
        capsys,
        GEMMA,
        "--like-vllm",
        "h100",
        "--weights-memory",
        "2G",
        "--activation-memory",
        "4G",
        "--gpu-memory-utilization",
        "0.9",
    )
    memory = VLLM_GPUS["h100"].memory._value
    assert data["engine"]["gpu_memory"]["value"] == memory
    # vLLM's requested memory: ceil(memory × utilization), less what is not KV cache.
    assert data["kv_cache_memory"]["value"] == -(-memory * 9 // 10) - (6 << 30)


def test_max_model_len_auto_fits_as_vllm(capsys: pytest.CaptureFixture[str]) -> None:
    data = plan_json(capsys, LLAMA, "--max-model-len", "auto", "--kv-cache-memory-bytes", "6G")
    # 6 GiB of 128 KiB blocks (32 layers × 4 KiB pages) less the null block: 49136 tokens.
    assert data["vllm"]["max_model_len"]["value"] == 49136
    assert data["engine"]["max_model_len"]["value"] == 49136
    assert data["vllm"]["auto_fit"] is True
    assert (
        plan_json(capsys, LLAMA, "--max-model-len", "-1", "--kv-cache-memory-bytes", "6G")["vllm"][
            "max_model_len"
        ]["value"]
        == 49136
    )


def test_a_vllm_serve_yaml_config(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    serve = tmp_path / "serve.yaml"
    serve.write_text(
        f"model: {LLAMA}\nmax-model-len: 16k\nkv_cache_memory_bytes: 8G\nasync-scheduling: true\n"
        "tensor-parallel-size: 2\n",
        encoding="utf-8",
    )
    data = plan_json(capsys, "--config", str(serve), "-tp", "4")
    engine = data["engine"]
    assert engine["max_model_len"]["value"] == 16000
    assert engine["memory_budget"]["value"] == 8 << 30
    assert engine["async_scheduling"]["value"] is True
    assert engine["tensor_parallel_size"]["value"] == 4  # the command line wins, as in vLLM
    bad = tmp_path / "serve.toml"
    bad.write_text("x = 1\n", encoding="utf-8")
    status, _, err = run(capsys, "plan", "--config", str(bad))
    assert status == 2 and "--config takes a vllm serve YAML file" in err


def test_a_vllm_flag_and_its_kvunits_name_together_are_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, _, err = run(
        capsys, "plan", LLAMA, "--kv-cache-memory-bytes", "8G", "--memory-budget", "8 GiB"
    )
    assert status == 2 and "--kv-cache-memory-bytes: given with --memory-budget" in err


def test_the_docs_example_prints_what_it_says(monkeypatch: pytest.MonkeyPatch) -> None:
    import contextlib
    import io
    import re

    text = (ROOT / "docs" / "vllm-compat.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", text, re.S)
    assert block is not None
    lines = block.group(1).splitlines()
    expected = [
        line[2:]
        for i, line in enumerate(lines)
        if line.startswith("# ") and i and lines[i - 1].startswith("print(")
    ]
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.group(1), "docs/vllm-compat.md", "exec"), {})
    assert out.getvalue().splitlines() == expected


def test_fit_refuses_a_length_vllm_would_reject(capsys: pytest.CaptureFixture[str]) -> None:
    # vLLM rejects a request longer than max_model_len: fit does not count it as admitted.
    status, _, err = run(capsys, "fit", LLAMA, "--length", "200000 token")
    assert status == 2
    assert "--length 200000 token is longer than max_model_len 131072 token" in err


@pytest.mark.parametrize(
    ("gpu", "headline", "checkpoint"),
    [
        ("h100", "GPU KV cache size: 634,791 tokens", True),
        ("a100-80gb", "GPU KV cache size: 641,906 tokens", False),
    ],
)
def test_like_vllm_plans_gated_delta_nets_with_prefix_caching_on_the_gpu(
    capsys: pytest.CaptureFixture[str], gpu: str, headline: str, checkpoint: bool
) -> None:
    # Qwen3.5-27B (held-out config), vLLM's defaults (prefix caching on), 40 GiB of KV cache:
    # the numbers are vLLM 0.33's own (tests/vllm_oracle/test_like_vllm.py, the named-GPU
    # cases: get_kv_cache_capacity on QwenGatedDeltaNetAttention's get_kv_cache_spec); the
    # H100's FlashInfer GDN prefill adds a checkpoint page, the A100's Triton none.
    model = str(ROOT / "tests" / "config" / "hf_fixtures" / "heldout" / "Qwen--Qwen3.5-27B")
    status, out, err = run(
        capsys, "plan", model, "--like-vllm", gpu, "--kv-cache-memory-bytes", "40G",
        "--kv-cache-layout", "per_group",
    )  # fmt: skip
    assert status == 0, err
    assert headline in out and "not computed" not in out
    assert ("prefill checkpoint" in out) is checkpoint
