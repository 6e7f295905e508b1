"""``on_demand`` against vLLM 0.33's own Scheduler on the same trace (issue 23): running
requests and preemptions equal at every step. Runs where vLLM is importable (its own venv,
``benchmarks/vllm-nodeps.txt``); measured there on 4,000 steps of 20 streams and 3,000 of 40
(``benchmarks/vs_vllm_scheduler.py``)."""

from __future__ import annotations

import pytest


def test_on_demand_matches_vllms_scheduler_step_by_step() -> None:
    pytest.importorskip("vllm")
    from benchmarks.vs_vllm_scheduler import main

    assert main(["--streams", "12", "--steps", "600", "--duration", "1200"]) == 0
