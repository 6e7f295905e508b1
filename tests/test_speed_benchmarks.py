"""The speed benchmarks of issue 14 run and print their figures (their speed is never asserted:
the figures are ratios to a baseline measured in the same run, printed for people)."""

from __future__ import annotations

import pytest

from benchmarks import startup, validation


def test_validation_benchmark_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    medians = validation.main(["--number", "3", "--rounds", "2", "--no-pint"])
    out = capsys.readouterr().out
    names = [case.name for case in validation.cases(with_pint=False)]
    assert list(medians) == names and all(value > 0 for value in medians.values())
    for name in names:
        assert name in out
    assert out.strip().splitlines()[-1].startswith("goal: <= 5.0 µs per quantity field")


def test_startup_benchmark_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    medians = startup.main(["--rounds", "1"])
    out = capsys.readouterr().out
    assert list(medians) == [command.name for command in startup.commands()]
    assert all(value > 0 for value in medians.values())
    assert "python -c pass (baseline)" in out and "kvunits plan" in out
    assert out.strip().splitlines()[-1].startswith("goal: kvunits plan <= 0.2 s wall")
