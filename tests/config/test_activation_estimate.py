"""``--activation-memory estimate``: kvunits' estimate of what vLLM's start-up profiling
keeps (contracts/config/_activations.py), compared with the one published vLLM log it was
checked against, and said to be an estimate wherever it is used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvunits.cli import main
from kvunits.contracts.config._activations import estimate_activation_memory

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "hf"
GIB = 1 << 30


def _llama() -> dict[str, object]:
    data: dict[str, object] = json.loads(
        (EXAMPLES / "llama-3.1-8b" / "config.json").read_text(encoding="utf-8")
    )
    return data


def test_the_pytorch_part_is_near_vllms_logged_peak_for_llama_3_8b() -> None:
    # vLLM #10511 (vllm serve meta-llama/Meta-Llama-3-8B, H100, 8192 batched tokens, 256
    # sequences): "PyTorch activation peak memory 1.26GiB", "non_torch_memory 1.79GiB".
    # Llama 3.1 8B has the same sizes (hidden 4096, MLP 14336, vocab 128256).
    found = estimate_activation_memory(_llama(), batched_tokens=8192, max_num_seqs=256, tp=1)
    assert found is not None
    torch_part = found.residual._value + found.transient._value + found.sampler._value
    assert abs(torch_part / GIB - 1.26) < 0.15  # 1.15 GiB: within 9 % of the log
    assert found.non_torch._value == int(1.79 * GIB)


def test_tensor_parallelism_splits_the_layer_transient_not_the_sampler() -> None:
    one = estimate_activation_memory(_llama(), batched_tokens=8192, max_num_seqs=256, tp=1)
    two = estimate_activation_memory(_llama(), batched_tokens=8192, max_num_seqs=256, tp=2)
    assert one is not None and two is not None
    assert two.transient._value * 2 == one.transient._value
    assert two.sampler == one.sampler and two.residual == one.residual


def test_a_config_without_the_sizes_gives_no_estimate() -> None:
    assert (
        estimate_activation_memory({"hidden_size": 4096}, batched_tokens=8, max_num_seqs=1, tp=1)
        is None
    )


def test_the_plan_says_it_is_an_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "plan", str(EXAMPLES / "llama-3.1-8b"), "--like-vllm", "h100",
        "--activation-memory", "estimate", "--weights-memory", "15 GiB",
        "--max-model-len", "32k",
    ]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "is kvunits' ESTIMATE of what vLLM profiles" in out
