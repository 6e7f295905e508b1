"""The allocator benchmark runs, replays the same trace both ways, and ends with its ratio."""

from __future__ import annotations

import pytest

from benchmarks import allocator
from kvunits.contracts import EncoderTokens, Tokens


def test_benchmark_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    ratio = allocator.main(["--requests", "12", "--concurrency", "3", "--repeats", "1"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == f"typed_overhead_ratio={ratio:.3f}"
    assert ratio > 0
    assert any("steps/s" in line and "typed API" in line for line in lines)
    assert any("steps/s" in line and "raw core" in line for line in lines)
    assert any("steps/s" in line and "ints wrapped per step" in line for line in lines)


def test_trace_streams_prefill_then_decode() -> None:
    trace = allocator.make_trace(requests=5, concurrency=2, seed=1)
    kinds = [e[0] for e in trace.raw]
    assert kinds.count(allocator.ADMIT) == kinds.count(allocator.FREE) == 5
    steps = [e for e in trace.raw if e[0] == allocator.STEP]
    assert len(steps) == trace.steps
    # Prefill chunks first, then one pooled block and one token a step.
    first = next(e for e in steps if e[1] == "req0")
    last = [e for e in steps if e[1] == "req0"][-1]
    # Decode: one pooled block (4 encoder tokens) and one text token a step.
    assert first[2] > 4 and first[3] > 1 and last[2:] == (4, 1)
    # The typed trace holds the same counts, as quantities.
    assert [
        (k, r, a.numerical_value_in(EncoderTokens), t.numerical_value_in(Tokens))
        for k, r, a, t in trace.typed
    ] == trace.raw
