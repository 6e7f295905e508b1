"""``kvunits simulate``: the series are the coordinator's own counts, the window comparison finds
the seed's numbers, the figure is a real file, and the command line behaves (errors, Ctrl-C,
no matplotlib, no torch).

Golden numbers, all of the shipped Voxtral Realtime example (encoder window 750 encoder
tokens, P = 4, block size 16 pooled slots, one pooled block of audio a step):

* 48 and 13 cache blocks per stream: the seed document's vLLM fix (the window of 750 encoder
  tokens read as 750 pooled blocks reserved 48 blocks per request instead of 13;
  ``max_admission_blocks_per_request(...) == 13`` in its test). 48 = cdiv(749 + 1, 16) + 1.
* The first key lost with 188 slots: tests/runtime/test_voxtral.py derives it. With slots
  0-202 computed, a manager window of 188 frees block 0 (slots 0-15, encoder tokens 0-63)
  before the step of slot 203, whose first query, token 812, reads back to 812 - 749 = 63.
  189 never frees a key that is read.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

import kvunits
from kvunits._simulate import (
    Simulation,
    Workload,
    _real_kernels,
    as_configured,
    load_example,
    simulate,
    window_variants,
)
from kvunits.cli import main
from kvunits.contracts import (
    AdmissionCap,
    CacheBlocks,
    EncoderTokens,
    PooledBlocks,
    Tokens,
    Window,
)
from kvunits.runtime import NULL_BLOCK

REPO = Path(__file__).resolve().parents[2]
SEED_WINDOWS = ["750 pooled_block", "188 pooled_block", "189 pooled_block"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def example() -> Any:
    return load_example()


def small(config: Any, **kwargs: Any) -> Workload:
    """A workload small enough for a test: a few streams, short lives."""
    values: dict[str, Any] = {"streams": 3, "steps": 60, "duration": 150} | kwargs
    return Workload.for_config(config, **values)


# -- the series are the coordinator's --------------------------------------------------------


@pytest.mark.parametrize("arrival", [0, 7])
def test_series_equal_the_coordinators_counts_step_by_step(example: Any, arrival: int) -> None:
    # More streams than the budget admits (a small budget), so that some wait and admission,
    # eviction and freeing all happen within the run.
    from kvunits.contracts.config import load_config

    config = load_config(
        Path(kvunits.__file__).parent / "examples" / "voxtral_realtime.toml",
        flags={"memory_budget": "2 GiB", "max_model_len": "4096 token"},
    )
    work = Workload.for_config(config, streams=6, steps=70, duration=260, arrival=arrival)
    sim = Simulation(config, work, as_configured(config)[0], _real_kernels(config))
    coord, series = sim.coordinator, sim.run.series
    assert sim.run.plan.concurrent_requests < work.streams
    waited = 0
    for step in range(work.duration):
        sim.step()
        usage = coord.usage_by_group()
        live = coord._core.requests
        assert series["step"][-1] == step
        assert series["running"][-1] == coord.num_requests == len(live)
        waited = max(waited, series["waiting"][-1])
        for handle in sim.handles:
            name = handle.name
            tables = [coord.block_table(rid, handle) for rid in live]
            held = [len(t) - t.ids_in(CacheBlocks).count(NULL_BLOCK) for t in tables]
            # The coordinator's own usage, and the same count taken from the block tables.
            assert (
                series[f"{name}.used"][-1]
                == usage[name].used.numerical_value_in(CacheBlocks)
                == sum(held)
            )
            caps = sum(
                coord.request_cap(rid, handle).numerical_value_in(AdmissionCap) for rid in live
            )
            assert (
                series[f"{name}.reserved"][-1]
                == usage[name].reserved.numerical_value_in(CacheBlocks)
                == caps
            )
            assert series[f"{name}.held_max"][-1] == max(held, default=0)
    assert waited > 0, "no stream ever waited: the test does not exercise admission"
    assert sim.run.series["finished"][-1] > work.streams, "streams must end and be replaced"
    assert all(len(v) == work.duration for v in series.values())


# -- the window comparison ------------------------------------------------------------------


def test_compare_windows_finds_48_and_13_and_the_lost_key(example: Any) -> None:
    # One stream of 800 decode steps: past the 750-slot window, so each run reaches its
    # steady state.
    work = Workload.for_config(example, streams=1, steps=800, duration=900)
    runs = simulate(example, work, window_variants(example, SEED_WINDOWS))
    assert [r.variant.label for r in runs] == SEED_WINDOWS
    assert [r.variant.manager_window for r in runs] == [
        Window(750, PooledBlocks),
        Window(188, PooledBlocks),
        Window(189, PooledBlocks),
    ]
    audio = [r.group_stats("audio") for r in runs]
    assert [a.peak_held_per_stream for a in audio] == [48, 13, 13]
    assert [a.reserved_per_stream for a in audio] == [48, 13, 13]
    # The kernel's window stays the model's 750 encoder tokens in every run.
    assert all(str(a.kernel_windows[0]) == "750 encoder_token" for a in audio)

    wrong, seed_fix, right = runs
    assert wrong.first_lost is None and right.first_lost is None and right.lost_steps == 0
    lost = seed_fix.first_lost
    assert lost is not None
    # The one stream arrives at step 0, so its step 203 is the scheduler's.
    assert (lost.stream, lost.stream_step, lost.step) == ("s0", 203, 203)
    assert (str(lost.query), str(lost.key), lost.column) == (
        "812 encoder_token",
        "63 encoder_token",
        0,
    )
    # The plan buys fewer streams with the seed's mistake: 48 blocks a stream, not 13.
    assert wrong.plan.concurrent_requests < right.plan.concurrent_requests
    assert seed_fix.plan.concurrent_requests == right.plan.concurrent_requests


def test_a_cadence_off_the_pool_continues_the_partial_slot(example: Any) -> None:
    # 3 encoder tokens a step at P = 4: steps start inside a pooled slot. 189 slots still
    # keep every key the kernel reads, 188 do not; a stream never holds more than 13 blocks.
    # When: with c tokens computed, 188 slots free the slots below (c // 4 - 187) // 16 * 16
    # while the first query reads back to token c - 749, in slot (c - 749) // 4; that slot is
    # gone exactly when c = 64 m + 748 (m >= 1): 812, 876, ...; the first multiple of 3 is
    # 876, the context of the stream's step 292.
    work = Workload.for_config(
        example,
        streams=1,
        steps=400,
        duration=420,
        encoder_step=EncoderTokens(3),
        decoder_step=Tokens(1),
    )
    seed_fix, right = simulate(
        example, work, window_variants(example, ["188 pooled_block", "189 pooled_block"])
    )
    assert right.first_lost is None
    lost = seed_fix.first_lost
    assert lost is not None
    assert (lost.group, lost.stream_step, str(lost.query)) == ("audio", 292, "876 encoder_token")
    assert right.group_stats("audio").peak_held_per_stream == 13


def test_windows_in_encoder_tokens_are_declared_as_they_are(example: Any) -> None:
    variants = window_variants(example, ["749 encoder_token", "750 encoder_token"])
    # pool_window(749, 4) = cdiv(748, 4) + 1 = 188; pool_window(750, 4) = 189.
    assert [v.manager_window for v in variants] == [
        Window(188, PooledBlocks),
        Window(189, PooledBlocks),
    ]


def test_a_token_window_varies_the_text_group(example: Any) -> None:
    (variant,) = window_variants(example, ["4096 token"])
    assert (variant.group, variant.manager_window) == ("text", Window(4096, Tokens))


def test_the_same_seed_gives_the_same_series(example: Any) -> None:
    def series(seed: int) -> dict[str, list[int]]:
        work = small(example, arrival=5, seed=seed)
        return simulate(example, work, as_configured(example))[0].series

    assert series(3) == series(3)
    assert series(3) != series(4)


def test_ctrl_c_keeps_what_was_simulated(example: Any) -> None:
    def stop(index: int, step: int) -> None:
        if (index, step) == (1, 40):
            raise KeyboardInterrupt

    work = small(example)
    runs = simulate(example, work, window_variants(example, SEED_WINDOWS), on_step=stop)
    assert [r.interrupted for r in runs] == [False, True]  # the third is never run
    assert runs[0].steps_done == work.duration
    assert runs[1].steps_done == 41
    assert {len(v) for v in runs[1].series.values()} == {41}
    assert runs[1].group_stats("audio").peak_held_per_stream >= 1


# -- the figure -------------------------------------------------------------------------------


def _check_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert data[12:16] == b"IHDR"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width > 600 and height > 400
    assert data[-8:-4] == b"IEND"


@pytest.mark.parametrize("suffix", [".png", ".svg", ".html"])
def test_the_figure_is_written(tmp_path: Path, suffix: str, capsys: Any) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / f"sim{suffix}"
    status = main(
        [
            *("simulate", "--streams", "2", "--steps", "40", "--duration", "60"),
            *("--compare-windows", "188 pooled_block,189 pooled_block", "--out", str(out)),
        ]
    )
    assert status == 0
    captured = capsys.readouterr()
    assert f"wrote {out}" in captured.err
    if suffix == ".png":
        _check_png(out)
    elif suffix == ".svg":
        root = ET.parse(out).getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert "188 pooled_block" in out.read_text(encoding="utf-8")
    else:
        page = out.read_text(encoding="utf-8")
        assert page.startswith("<!doctype html>")
        assert "<svg" in page and "<table>" in page and "189 pooled_block" in page


def test_without_matplotlib_out_fails_before_simulating_and_names_the_extra(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    out = tmp_path / "sim.png"
    args = ["simulate", "--streams", "2", "--steps", "20", "--duration", "30"]
    import kvunits._simulate as simulation

    def no_run(*args: object, **kwargs: object) -> object:
        raise AssertionError("simulated although the figure cannot be drawn")

    with monkeypatch.context() as patch:
        patch.setattr(simulation, "simulate", no_run)
        assert main([*args, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f'kvunits: error: --out {out} needs matplotlib: pip install "kvunits[plot]"\n'
    )
    assert not out.exists()
    assert main(args) == 0
    assert 'pip install "kvunits[plot]"' in capsys.readouterr().err


# -- the command line -----------------------------------------------------------------------


def test_the_table_names_the_numbers(capsys: Any) -> None:
    status = main(
        [
            *("simulate", "--streams", "1", "--steps", "800", "--duration", "850"),
            *("--compare-windows", ",".join(SEED_WINDOWS)),
        ]
    )
    out = capsys.readouterr().out
    assert status == 0
    rows = {
        " ".join(line.split()[:2]): line.split()[2:]
        for line in out.splitlines()
        if line.split()[1:2] == ["pooled_block"] and "cache_block" in line
    }
    assert rows["750 pooled_block"][:4] == ["48", "cache_block", "48", "cache_block"]
    assert rows["188 pooled_block"][:4] == ["13", "cache_block", "13", "cache_block"]
    assert rows["188 pooled_block"][-2:] == ["step", "203"]
    assert rows["189 pooled_block"][-1] == "none"
    assert (
        "188 pooled_block: step 203: stream s0 (its step 203), group audio: query 812 "
        "encoder_token reads key 63 encoder_token (block-table column 0), freed" in out
    )


def test_json_and_csv_series(capsys: Any) -> None:
    args = ["simulate", "--streams", "2", "--steps", "30", "--duration", "50", "--seed", "1"]
    windows = ["--compare-windows", "188 pooled_block,189 pooled_block"]
    assert main([*args, *windows, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["workload"]["duration"] == 50 and data["workload"]["seed"] == 1
    assert [r["window"] for r in data["runs"]] == ["188 pooled_block", "189 pooled_block"]
    first = data["runs"][0]
    assert len(first["series"]["audio.used"]) == 50
    assert data["schema_version"] == 2
    assert data["kv_cache_memory"] == {"value": 40 << 30, "unit": "byte/rank"}
    assert data["workload"]["encoder_step"] == {"value": 4, "unit": "encoder_token"}
    assert first["groups"][0]["reserved_per_stream"] == {"value": 13, "unit": "cache_block"}
    assert first["groups"][0]["manager_window"] == {
        "value": 188,
        "unit": "pooled_block",
        "kind": "window",
    }

    assert main([*args, *windows, "--format", "csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0][:3] == ["window", "step", "running"]
    assert len(rows) == 1 + 2 * 50
    by_window = [r for r in rows[1:] if r[0] == "189 pooled_block"]
    used = rows[0].index("audio.used")
    assert [int(r[used]) for r in by_window] == data["runs"][1]["series"]["audio.used"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--compare-windows", "750"], "has no unit"),
        (["--compare-windows", "750 byte"], "no sliding-window group"),
        (["--compare-windows", "188 pooled_block,750 encoder_token"], "one unit"),
        (["--compare-windows", "0 pooled_block"], "at least 1"),
        (["--compare-windows", "188 pooled_block", "--group", "nope"], "--group 'nope'"),
        (["--group", "audio"], "--compare-windows"),
        (["--steps", "200000"], "--steps"),
        (["--cadence", "6 encoder_token"], "max_encoder_tokens_per_step"),
        (["--cadence", "1 GiB"], "--cadence"),
        (
            ["--cadence", "4 encoder_token", str(REPO / "examples/hf/llama-3.1-8b/config.json")],
            "has none",
        ),
        (["--prompt", "4096 token"], "max_num_batched_tokens"),
        (["--streams", "0"], "--streams must be >= 1"),
        (["--out", "sim.pdf"], ".png, .svg, .html"),
        (["--out", "/no/such/folder/sim.png"], "does not exist"),
    ],
)
def test_bad_input_exits_2_naming_the_flag(flags: list[str], message: str, capsys: Any) -> None:
    assert main(["simulate", "--duration", "5", *flags]) == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.out == ""


def test_ctrl_c_on_the_command_line_prints_what_was_simulated(
    capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kvunits import _simulate_cli

    def interrupt(self: Any, index: int, step: int) -> None:
        if step == 20:
            raise KeyboardInterrupt

    monkeypatch.setattr(_simulate_cli._Progress, "__call__", interrupt)
    status = main(["simulate", "--streams", "2", "--steps", "30", "--duration", "50"])
    captured = capsys.readouterr()
    assert status == 130
    assert "stopped by Ctrl-C after 21 of 50 scheduler steps" in captured.err
    assert "kvunits simulate: voxtral-mini-4b-realtime" in captured.out
    assert "Traceback" not in captured.err


_PROBE = """
import json, sys
import kvunits.cli
sys.argv = ["kvunits", "simulate", "--streams", "2", "--steps", "20", "--duration", "30",
            "--format", "json"]
status = kvunits.cli.main()
print(json.dumps({"status": status,
                  "loaded": sorted(m for m in ("torch", "triton") if m in sys.modules)}))
"""


def test_simulate_imports_no_torch() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"status": 0, "loaded": []}


# -- prefix caching ---------------------------------------------------------------------------


def test_a_shared_prompt_is_served_from_the_prefix_cache(example: Any) -> None:
    """Every stream brings the same 64-token prompt: the first computes it, every later one
    finds its first 3 blocks of 16 cached (a hit is at most 63 tokens, whole blocks) and
    prefills only the rest. The audio prompt, one step of 4 encoder tokens, is no full block
    of 64: no audio hit."""
    work = small(example, streams=4, steps=30, duration=100, prompt=Tokens(64))
    shared = Workload.for_config(
        example, streams=4, steps=30, duration=100, prompt=Tokens(64), shared_prompt=True
    )
    (plain,) = simulate(example, work, as_configured(example))
    (run,) = simulate(example, shared, as_configured(example))
    started = run.finished + run.series["running"][-1]
    text = run.group_stats("text")
    assert text.prefix_queried == Tokens(64 * started)
    assert text.prefix_hits == Tokens(48 * (started - 1))
    assert run.group_stats("audio").prefix_hits == EncoderTokens(0)
    assert plain.group_stats("text").prefix_hits is None
    # Sharing the prompt's blocks, the streams hold fewer text blocks together.
    assert max(run.series["text.used"]) < max(plain.series["text.used"])
    assert "every stream brings the same prompt" in shared.describe()


def test_cli_shows_the_hits(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "--streams", "3", "--steps", "20", "--duration", "50"]
    assert main([*args, "--prompt", "40 token", "--shared-prompt"]) == 0
    out = capsys.readouterr().out
    assert "prefix cache hits" in out and "224 token of 320" in out  # 7 of 8 streams hit 32


# -- the progress bar -------------------------------------------------------------------------

#: A run long enough for the bar to appear (it waits half a second), short enough for a test.
_LONG_RUN = ("simulate", "--streams", "4", "--steps", "300", "--duration", "6000")


# The bar waits half a second before it shows; a fast machine finishes this run sooner, so the
# child shows it from the first step (the bar's delay is not what is tested here).
_NO_DELAY = (
    "import sys; from kvunits import _simulate_cli; _simulate_cli._Progress.DELAY_S = 0.0; "
    "from kvunits.cli import main; sys.exit(main(sys.argv[1:]))"
)


def _on_a_terminal(*args: str) -> str:
    """What ``kvunits`` writes when both its stdout and stderr are a terminal (a pty)."""
    import os
    import pty

    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-c", _NO_DELAY, *args],
        stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, cwd=REPO,
    )  # fmt: skip
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the program closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert process.wait(timeout=120) == 0
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.slow
def test_a_progress_bar_on_a_terminal_only() -> None:
    shown = _on_a_terminal(*_LONG_RUN)
    assert "simulate as configured" in shown and "/6000 steps" in shown  # the bar's text
    assert "voxtral-mini-4b-realtime" in shown  # then the table
    # --format json on a terminal: the document only.
    as_json = _on_a_terminal(*_LONG_RUN, "--format", "json")
    assert "steps" not in as_json.split("{", 1)[0] and "/6000 steps" not in as_json
    json.loads(as_json)
    # A pipe: no bar (stderr empty).
    piped = subprocess.run(
        [sys.executable, "-m", "kvunits", *_LONG_RUN],
        capture_output=True, text=True, timeout=120, check=True, cwd=REPO,
    )  # fmt: skip
    assert piped.stderr == "" and "kvunits simulate:" in piped.stdout
