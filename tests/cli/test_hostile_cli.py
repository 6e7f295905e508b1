"""The command line under hostile conditions (issue 13): an ASCII-only stdout, a reader that
leaves, results past int64, plan errors caused by a flag, a unit pint knows but kvunits does
not, and a YAML integer of thousands of digits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .test_cli import EXAMPLES, REPO, run

VOXTRAL = str(EXAMPLES / "voxtral_realtime.toml")


def test_an_ascii_stdout_gets_an_ascii_table() -> None:
    done = run("plan", env={"PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.isascii() and "Traceback" not in done.stderr
    assert "750 encoder_token -> 189 pooled_block" in done.stdout
    assert "--+--" in done.stdout  # rich's ASCII box
    assert "concurrent requests admitted: 32" in done.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("convert", "750 encoder_token", "--to", "pooled_block", "--pool", "4", "--as", "window"),
        ("schema",),
        ("check", VOXTRAL),
    ],
)
def test_every_command_writes_to_an_ascii_stdout(args: tuple[str, ...]) -> None:
    done = run(*args, env={"PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.isascii()


def test_a_reader_that_leaves_ends_the_command_quietly() -> None:
    # `kvunits plan | head -1`: the reader closes the pipe after one line.
    for args in (("plan",), ("plan", "--format", "json"), ("schema",)):
        reader, writer = os.pipe()
        with subprocess.Popen(
            [sys.executable, "-m", "kvunits", *args],
            cwd=REPO,
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
        ) as process:
            os.close(writer)
            with os.fdopen(reader) as pipe:
                assert pipe.readline()
            _, stderr = process.communicate(timeout=120)
        assert (process.returncode, stderr) == (0, ""), (args, stderr)


@pytest.mark.parametrize(
    ("args", "step"),
    [
        (("9223372036854775807 pooled_block", "--to", "encoder_token", "--pool", "4"), "unpool"),
        (("9223372036854775807 cache_block", "--to", "byte", "--page-size", "2 byte"), "cache_"),
    ],
)
def test_convert_refuses_a_result_past_int64(args: tuple[str, ...], step: str) -> None:
    done = run("convert", *args)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"kvunits: error: {step}" in done.stderr
    assert "past 2**63 - 1, the int64 bound every input is held to" in done.stderr
    assert (
        run(
            "convert", "4611686018427387903 cache_block", "--to", "byte", "--page-size", "2 byte"
        ).returncode
        == 0
    )


def test_a_plan_error_caused_by_a_flag_says_it_came_from_the_command_line() -> None:
    done = run("plan", "--memory-budget", "1 KiB")
    assert done.returncode == 2
    assert done.stderr.startswith(
        "command line: --memory-budget: memory_budget 1024 byte/rank cannot hold one full-length"
    )
    done = run("check", VOXTRAL, env={"KVUNITS_MEMORY_BUDGET": "1 KiB"})
    assert done.stderr.startswith("environment: KVUNITS_MEMORY_BUDGET: memory_budget 1024 byte")
    assert done.stderr.rstrip().endswith(f"(planning {VOXTRAL})")


def test_dimensionless_is_an_unknown_unit() -> None:
    done = run("convert", "1 dimensionless", "--to", "token")
    assert done.returncode == 2
    assert done.stderr == (
        "kvunits: error: QUANTITY: unknown unit 'dimensionless'; kvunits knows encoder_token, "
        "pooled_block, token, cache_block and byte (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)\n"
    )
    done = run("plan", "--max-model-len", "1 dimensionless")
    assert "command line: --max-model-len: unknown unit 'dimensionless'" in done.stderr


def test_a_yaml_integer_of_thousands_of_digits_is_refused_with_its_path(tmp_path: Path) -> None:
    bad = tmp_path / "big.yaml"
    text = (EXAMPLES / "voxtral_realtime.yaml").read_text(encoding="utf-8")
    bad.write_text(text.replace("block_size_slots: 16", "block_size_slots: " + "9" * 5000))
    assert bad.read_text() != text
    done = run("check", str(bad))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr == (
        f"{bad}: engine.block_size_slots: integer out of the int64 range (5000 digits)\n"
    )
