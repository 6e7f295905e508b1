"""``kvunits plan`` per rank and ``kvunits fit``: vLLM's flag names, the per-rank table and
JSON, the caps that work in flight raises, the reverse questions, and their errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kvunits.cli import main

from .test_cli import EXAMPLES, q, run

LLAMA = str(EXAMPLES / "hf" / "llama-3.1-8b" / "config.json")
MISTRAL = str(EXAMPLES / "hf" / "mistral-7b-v0.1" / "config.json")


def kvunits(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def plan_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    status, out, err = kvunits(capsys, "plan", *args, "--format", "json")
    assert status == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


def test_plan_per_rank_with_vllms_flag_names(capsys: pytest.CaptureFixture[str]) -> None:
    # The example: Llama-3.1-8B (8 KV heads, 32 layers) on TP 8 × PP 2.
    status, out, err = kvunits(
        capsys, "plan", LLAMA, "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2"
    )
    assert status == 0, err
    assert "per rank: TP 8 × PP 2 (DCP 1): 16 ranks" in out
    assert "tensor_parallel_size           8" in out and "flag --tensor-parallel-size" in out
    lines = [line.split() for line in out.splitlines()]
    # One row per stage: its layers, 1 of the 8 heads, an 8192-byte page, 8192 blocks a
    # request (cdiv(131072, 16)), 40 GiB // (8192 × 16 layers) = 327680 blocks.
    stage0 = next(line for line in lines if line[:3] == ["0", "text.0-15", "text"])
    stage1 = next(line for line in lines if line[:3] == ["1", "text.16-31", "text"])
    for row in (stage0, stage1):
        assert row[3:6] == ["1", "of", "8"]
        assert row[6:8] == ["8192", "byte/rank"] and row[8:10] == ["8192", "cache_block/rank"]
        assert row[-2:] == ["327680", "cache_block/rank"]
    assert "40 GiB per rank buys 327680 cache_block (text)" in out
    # (327680 − 1) // 8192 = 39 requests.
    assert "concurrent requests admitted: 39" in out
    # The short aliases plan the same.
    status, short, _ = kvunits(capsys, "plan", LLAMA, "-tp", "8", "-pp", "2")
    assert status == 0
    assert short.replace("flag --tensor-parallel-size", "") == out.replace(
        "flag --tensor-parallel-size", ""
    )


def test_plan_json_per_rank(capsys: pytest.CaptureFixture[str]) -> None:
    data = plan_json(capsys, LLAMA, "-tp", "16", "-pp", "2", "--memory-budget", "16 GiB")
    assert data["ranks"] == 32
    assert data["engine"]["tensor_parallel_size"] == {
        "value": 16,
        "unit": "rank",
        "from": "flag --tensor-parallel-size",
    }
    stages = data["stages"]
    assert [s["stage"] for s in stages] == [0, 1]
    assert [len(s["layers"]) for s in stages] == [16, 16]
    (group,) = stages[0]["groups"]
    assert group["kv_heads"] == q(8, "kv_head")
    assert group["kv_heads_per_rank"] == q(1, "kv_head/rank")
    assert group["head_replicas"] == 2  # 16 ranks, 8 heads: each head on 2 ranks
    assert group["page_size"] == q(8192, "byte/rank")
    assert group["admission_cap"] == q(8192, "cache_block/rank")
    # 16 GiB // (8192 × 16 layers) = 131072 pages of each layer on every rank.
    assert group["num_blocks"] == q(131072, "cache_block/rank")
    assert data["groups"][0]["num_blocks"] == q(131072, "cache_block")
    assert data["groups"][0]["page_size"] == q(65536, "byte")  # the model's: all 8 heads
    assert stages[0]["memory_used"] == q(131072 * 8192 * 16, "byte/rank")


def test_speculative_tokens_and_concurrent_batches_raise_the_caps(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Mistral-7B slides a 4096-token window: cdiv(4095 + 2048, 16) + 1 = 385; with 2 batches
    # and 4 drafted slots cdiv(4095 + 2 × 2048 + 4, 16) + 1 = 514 (vLLM: 513, it leaves the
    # lookahead out of the sliding-window cap).
    before = plan_json(capsys, MISTRAL)
    after = plan_json(
        capsys, MISTRAL, "--num-speculative-tokens", "4", "--max-concurrent-batches", "2"
    )
    assert before["groups"][0]["admission_cap"] == q(385, "cache_block")
    assert after["groups"][0]["admission_cap"] == q(514, "cache_block")
    assert after["in_flight"] == {
        "concurrent_batches": 2,
        "num_lookahead_tokens": q(4, "token"),
        "max_in_flight": q(4100, "token"),
        "max_encoder_in_flight": None,
    }
    status, out, _ = kvunits(
        capsys, "plan", MISTRAL, "--num-speculative-tokens", "4", "--max-concurrent-batches", "2"
    )
    assert status == 0
    assert (
        "in flight: 2 batches (max_concurrent_batches) × 2048 token + 4 token of speculative "
        "lookahead = 4100 token" in out
    )


def test_async_scheduling_flag_and_its_negation(capsys: pytest.CaptureFixture[str]) -> None:
    on = plan_json(capsys, MISTRAL, "--async-scheduling")
    assert on["engine"]["async_scheduling"] == {"value": True, "from": "flag --async-scheduling"}
    assert on["groups"][0]["admission_cap"] == q(513, "cache_block")  # vLLM 0.33's default
    done = run(
        "plan",
        MISTRAL,
        "--no-async-scheduling",
        "--format",
        "json",
        env={"KVUNITS_ASYNC_SCHEDULING": "true"},
    )
    assert done.returncode == 0, done.stderr
    off = json.loads(done.stdout)
    assert off["engine"]["async_scheduling"]["value"] is False
    assert off["groups"][0]["admission_cap"] == q(385, "cache_block")


def test_fit_answers_the_reverse_questions(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = kvunits(capsys, "fit", LLAMA, "--memory-budget", "16 GiB")
    assert status == 0, err
    # A request of 131072 tokens takes all 16 GiB; the null block does not fit beside it.
    assert (
        "longest max_model_len for one request: 131056 token (max_model_len 131072 token does "
        "not fit)" in out
    )
    assert "requests of 131072 token admitted at once: 0" in out
    assert "KV cache each rank needs for 1 request of 131072 token: 17181966336 byte/rank" in out
    status, out, err = kvunits(
        capsys,
        "fit",
        LLAMA,
        "-tp",
        "8",
        "--memory-budget",
        "16 GiB",
        "--length",
        "32768 token",
        "--requests",
        "64",
        "--format",
        "json",
    )
    assert status == 0, err
    data = json.loads(out)
    assert data["schema_version"] == 2
    assert data["longest_max_model_len"] == q(131072, "token")
    assert data["length"] == q(32768, "token")
    assert data["concurrent_requests"] == 31  # (65536 − 1) // 2048
    # 64 × 2048 pages × (8192 × 32) byte + one null block of 262144 byte.
    assert data["kv_cache_memory_needed"] == q(64 * 2048 * 262144 + 262144, "byte/rank")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["fit", "--requests", "0"], "--requests must be >= 1, got 0"),
        (["fit", "--length", "8 GiB"], "--length: 8 GiB is not in token"),
        (["fit", "--length", "0 token"], "--length must be >= 1 token"),
        (["plan", LLAMA, "-tp", "3"], "tensor_parallel_size 3 does not divide the model's 32"),
        (["plan", LLAMA, "-tp", "8", "-dcp", "3"], "--decode-context-parallel-size: 3 does not"),
        (["plan", LLAMA, "--async-scheduling", "-pp", "0"], "--pipeline-parallel-size: Input"),
        (["check", LLAMA, "--gpu-memory", "80 GiB"], "weights_memory: gpu_memory is set"),
        # The simulator steps the runtime's coordinator, which does not model DCP's blocks.
        (
            ["simulate", LLAMA, "-tp", "16", "-dcp", "2", "--streams", "1", "--steps", "2"],
            "the plan shards positions over decode_context_parallel_size 2",
        ),
        (
            ["plan", LLAMA, "--memory-budget", "8 GiB"],
            "the longest max_model_len that fits is 65520 token (kvunits fit)",
        ),
    ],
)
def test_deployment_errors_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    status, out, err = kvunits(capsys, *args)
    assert status == 2 and out == ""
    assert message in err, err
    assert "Traceback" not in err


def test_gpu_memory_flags(capsys: pytest.CaptureFixture[str]) -> None:
    data = plan_json(
        capsys,
        LLAMA,
        "-tp",
        "8",
        "--gpu-memory",
        "80 GiB",
        "--gpu-memory-utilization",
        "0.9",
        "--weights-memory",
        "2 GiB",
        "--activation-memory",
        "1 GiB",
    )
    # ceil(80 GiB × 0.9) − 3 GiB = 77309411328 − 3221225472 (request_memory, vLLM 0.33).
    assert data["kv_cache_memory"] == q(77309411328 - 3221225472, "byte/rank")
    assert data["engine"]["memory_budget"] == {"value": None, "unit": "byte/rank", "from": None}
    assert data["engine"]["gpu_memory_utilization"] == {
        "value": 0.9,
        "from": "flag --gpu-memory-utilization",
    }
    status, out, _ = kvunits(
        capsys,
        "plan",
        LLAMA,
        "--gpu-memory",
        "80 GiB",
        "--weights-memory",
        "16 GiB",
        "--activation-memory",
        "4 GiB",
    )
    assert status == 0
    assert "(KV cache memory)" in out and "57552561767 byte/rank" in out


def test_the_readmes_fit_example_prints_what_it_says(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import shlex

    from .test_cli import REPO

    monkeypatch.chdir(REPO)
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("    $ kvunits fit ")
    block = text[start : text.index("\n\n", start)].splitlines()
    command = shlex.split(block[0].strip()[len("$ ") :])
    status, out, err = kvunits(capsys, *command[1:])
    assert status == 0, err
    assert out.splitlines() == [line[4:] for line in block[1:]]
