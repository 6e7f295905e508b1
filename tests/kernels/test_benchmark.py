"""benchmarks/kernels.py runs: without a GPU it says so, its smoke mode checks the kernels
against the references under the interpreter, and its compile check builds sm_90 cubins."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "kernels.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present: it would time")
def test_without_cuda_it_says_so_and_exits_0() -> None:
    done = _run()
    assert done.returncode == 0, done.stderr
    assert "no CUDA device here, nothing timed" in done.stdout


def test_interpret_smoke() -> None:
    done = _run("--interpret-smoke")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "Triton interpreter on the CPU" in done.stdout
    for step in ("decode", "prefill"):
        for kernel in ("write_kv", "paged_attention"):
            assert any(line.split()[:2] == [step, kernel] for line in lines), done.stdout
    assert "GB/s" in done.stdout and "the torch reference" in done.stdout
    assert "MISMATCH" not in done.stdout


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("triton.backends.nvidia") is None,
    reason="triton without its NVIDIA backend cannot compile for sm_90",
)
def test_compile_check_builds_sm90_cubins() -> None:
    done = _run("--compile-check")
    assert done.returncode == 0, done.stdout + done.stderr
    compiled = [line for line in done.stdout.splitlines() if line.startswith("sm_90 ")]
    assert len(compiled) == 10, done.stdout
    assert all("cubin" in line for line in compiled), done.stdout
