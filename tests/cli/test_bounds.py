"""Every count a user gives has a bound that keeps the work proportional, and the error states
it (issue 24, item 6); the command line's smaller promises (item 8).

The bounds (``kvunits._simulate``): ``--streams`` at most 65,536 clients (each costs memory
only once it has opened a stream); at most 1,000,000 scheduler steps in a simulation, all its
compared windows together (the series of every step are kept: a few tens of bytes a step and
group); ``--steps`` and ``--arrival`` at most that too (a stream longer than any simulation
never ends); at most 16 compared windows. ``fit``: an answer is a quantity of int64, so
``--requests`` and ``--length`` are refused where the budget they need would pass it, naming
the most requests that fit. ``-pp`` up to its bound (65,536 stages) splits layers in time
linear in the stages.
"""

from __future__ import annotations

import json
import os
import random
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kvunits._simulate import Simulation, Workload, _real_kernels, as_configured, load_example
from kvunits.cli import main
from kvunits.contracts import Layers
from kvunits.contracts.config import ConfigError, load_config
from kvunits.contracts.deploy import Parallelism, layers_per_stage

from ..examples import examples

REPO = Path(__file__).resolve().parents[2]
LLAMA = str(REPO / "examples" / "hf" / "llama-3.1-8b" / "config.json")
#: A refusal or plan slower than this is a hang (each measures in milliseconds to a second).
HANG_S = 10.0


def _exits_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(args) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err


# -- simulate ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        # 10^8 streams ran 48 s, then died of a MemoryError traceback.
        (["--streams", "100000000"], "--streams must be <= 65536 (clients), got 100000000"),
        (["--duration", "1000000000"], "--duration must be <= 1000000, got 1000000000"),
        (
            [
                "--duration",
                "400000",
                "--compare-windows",
                "188 pooled_block,189 pooled_block,190 pooled_block",
            ],
            "--duration: 1200000 scheduler steps in all (3 runs of 400000) is more than the "
            "1000000 a simulation runs",
        ),
        (
            ["--cadence", "4 encoder_token,0 token", "--steps", "400000"],
            "--duration: 1200003 scheduler steps in all (1 run of 1200003) is more than the "
            "1000000 a simulation runs; the default --duration is 3 × (--steps + 1): give "
            "--duration",
        ),
        (
            ["--steps", "1000001", "--cadence", "4 encoder_token,0 token"],
            "--steps must be <= 1000000",
        ),
        (["--arrival", "1000001"], "--arrival must be <= 1000000"),
        (["--seed", str(2**63)], f"--seed must be <= {2**63 - 1}"),
        (
            ["--compare-windows", "188 pooled_block,189 pooled_block,188 pooled_blocks"],
            "--compare-windows: 188 pooled_block given twice; each window is one run",
        ),
        (
            ["--compare-windows", ",".join(f"{n} pooled_block" for n in range(180, 197))],
            "--compare-windows: 17 windows; at most 16 are compared (one run each)",
        ),
    ],
)
def test_simulate_refuses_unbounded_counts_with_the_bound(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _exits_2(["simulate", *flags], capsys)
    assert message in err, err


def test_the_largest_stream_count_costs_only_the_streams_opened(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A client's generator is made when its first stream ends (the gaps of --arrival), not
    # for every client up front: 65,536 clients cost what the streams opened cost.
    made: list[int] = []

    class Counted(random.Random):
        def __init__(self, seed: Any = None) -> None:
            made.append(1)
            super().__init__(seed)

    monkeypatch.setattr("kvunits._simulate.random.Random", Counted)
    config = load_example()
    work = Workload.for_config(config, streams=65536, steps=3, duration=10, arrival=2)
    sim = Simulation(config, work, as_configured(config)[0], _real_kernels(config))
    assert made == []
    for _ in range(work.duration):
        sim.step()
    assert 0 < len(made) <= sim.run.series["finished"][-1]


def test_the_default_stream_count_is_bounded_too() -> None:
    # 4 TiB of budget for short requests admits far more than 65,536 at once.
    config = load_config(
        REPO / "examples" / "voxtral_realtime.toml",
        flags={
            "memory_budget": "4 TiB",
            "max_model_len": "64 token",
            "max_encoder_len": "64 encoder_token",
        },
    )
    work = Workload.for_config(config, steps=10)
    assert work.streams == 65536


# -- fit --------------------------------------------------------------------------------------


def test_fit_requests_stop_where_the_budget_passes_int64(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Llama 3.1 8B at 131072 tokens: a request holds 2^34 byte (16 GiB: 32 layers × 8 heads
    # × 128 × 2 × 2 byte × 131072), the null blocks 2^21 (32 pages of 65536 byte): at most
    # (2^63 - 1 - 2^21) // 2^34 = 2^29 - 1 = 536870911 requests fit in an int64 of bytes.
    assert main(["fit", LLAMA, "--requests", "536870911", "--format", "json"]) == 0
    needed = json.loads(capsys.readouterr().out)["kv_cache_memory_needed"]["value"]
    assert needed == 2**21 + 536870911 * 2**34 <= 2**63 - 1
    err = _exits_2(["fit", LLAMA, "--requests", "536870912"], capsys)
    assert "536870912 requests of 131072 token need more than 9223372036854775807 byte/rank" in err
    assert "at most 536870911 requests of 131072 token" in err
    err = _exits_2(["fit", LLAMA, "--requests", str(10**20)], capsys)
    assert "at most 536870911 requests" in err


def test_fit_length_whose_one_request_passes_int64(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2^50 tokens of 2^17 byte each (131072 = 2^34 / 2^17 per token) is 2^67 byte. The length
    # must be within max_model_len (vLLM rejects a longer request), itself past the model's
    # own only with vLLM's switch.
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
    length = f"{2**50} token"
    err = _exits_2(["fit", LLAMA, "--max-model-len", length, "--length", length], capsys)
    assert f"1 request of {2**50} token needs more than 9223372036854775807 byte/rank" in err
    assert "not even 1 request of" in err


# -- pipeline stages --------------------------------------------------------------------------


def test_the_largest_pipeline_splits_in_linear_time(capsys: pytest.CaptureFixture[str]) -> None:
    # 65536 stages took 30 s (a running sum recomputed per stage: 2^31 additions).
    spans = layers_per_stage(Layers(32), Parallelism(pipeline_parallel_size=65536))
    # vLLM's get_pp_indices: 0 layers a stage and 32 extra, given to stages -2, -3, … -33.
    assert [len(s) for s in spans[-34:]] == [0] + [1] * 32 + [0]
    assert [i for span in spans for i in span] == list(range(32))
    outcome: list[int] = []
    worker = threading.Thread(target=lambda: outcome.append(main(["plan", LLAMA, "-pp", "65536"])))
    worker.start()
    worker.join(HANG_S)
    assert not worker.is_alive(), "planning 65536 stages takes more than seconds"
    # Refused, quickly: vLLM 0.33 fails to start with a stage that holds no layer
    # (get_kv_cache_configs divides by its 0 bytes per block).
    assert outcome == [2]
    assert "pipeline_parallel_size 65536 leaves stage 0 with no layer" in capsys.readouterr().err


# -- the command line's smaller promises (item 8) ---------------------------------------------


def test_cadence_gives_each_unit_once(capsys: pytest.CaptureFixture[str]) -> None:
    # "7 token,3 token" silently kept the last.
    err = _exits_2(["simulate", "--cadence", "7 token,3 token", "--duration", "3"], capsys)
    assert "--cadence: token given twice (7 token, 3 token); give one step per unit" in err


@pytest.mark.parametrize(
    ("text", "value"), [("1e-3", 0.001), ("9.5e-1", 0.95), (".5", 0.5), ("1", 1.0), ("5E-1", 0.5)]
)
def test_gpu_memory_utilization_reads_any_decimal_number(text: str, value: float) -> None:
    # "1e-3" was "not a valid number": read as the number it is, then checked by range.
    flags = {"gpu_memory": "80 GiB", "gpu_memory_utilization": text, "weights_memory": "1 MiB"}
    flags["activation_memory"] = "1 MiB"
    try:
        config = load_config(LLAMA, flags=flags)
    except ConfigError as error:
        assert value == 0.001
        assert "number" not in str(error) and "valid" not in str(error)
        assert "memory" in str(error)
    else:
        assert config.engine.gpu_memory_utilization == value


@pytest.mark.parametrize(
    ("field", "text", "message"),
    [
        ("gpu_memory_utilization", "2e0", "less than or equal to 1"),
        ("gpu_memory_utilization", "nan", "got 'nan'"),
        ("block_size_slots", "99999999999", "less than or equal to 65536"),
        ("tensor_parallel_size", "12345678901234567890123", "less than or equal to 65536"),
    ],
)
def test_numbers_in_text_are_checked_by_range(field: str, text: str, message: str) -> None:
    flags = {field: text}
    if field == "gpu_memory_utilization":
        flags.update(gpu_memory="80 GiB", weights_memory="1 MiB", activation_memory="1 MiB")
    with pytest.raises(ConfigError) as excinfo:
        load_config(LLAMA, flags=flags)
    assert message in str(excinfo.value)


@pytest.mark.parametrize(
    ("args", "first"),
    [
        (
            ["simulate", "--steps", "abc"],
            "kvunits simulate: error: argument --steps: invalid int value: 'abc'",
        ),
        (["plan", "--bogus"], "kvunits: error: unrecognized arguments: --bogus"),
        (
            ["convert"],
            "kvunits convert: error: the following arguments are required: QUANTITY, --to",
        ),
        (
            ["fit", "--requests", "x"],
            "kvunits fit: error: argument --requests: invalid int value: 'x'",
        ),
    ],
)
def test_argparse_errors_print_the_line_that_matters_first(
    args: list[str], first: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The usage block of 14 to 19 lines came first; now the error, then a one-line usage.
    with pytest.raises(SystemExit) as excinfo:
        main(args)
    assert excinfo.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == first
    assert len(lines) <= 3
    assert lines[1].startswith("usage: kvunits") and "--help" in lines[-1]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
@pytest.mark.parametrize("kind", ["a directory", "a FIFO"])
def test_out_that_is_no_file_is_refused_before_the_simulation(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "sim.png"
    if kind == "a directory":
        out.mkdir()
    else:
        os.mkfifo(out)

    def never(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("simulated before --out was checked")

    monkeypatch.setattr("kvunits._simulate.simulate", never)
    err = _exits_2(["simulate", "--out", str(out)], capsys)
    assert f"--out {out}: {kind} is there; the figure is written to a regular file" in err


# -- factors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["convert", "750 encoder_token", "--to", "pooled_block", "--pool", str(10**23)],
            f"PoolFactor must be <= 65536 encoder_token per pooled_block, got {10**23}",
        ),
        (
            ["convert", "750 token", "--to", "cache_block", "--block-size", str(10**23)],
            f"--block-size must be from 1 to 65536 slots per cache_block, got {10**23}",
        ),
    ],
)
def test_convert_factors_have_the_configs_bounds(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Both were accepted at any size: "P = 99999999999999999999999".
    assert message in _exits_2(args, capsys)


def test_a_pool_factor_past_its_bound_names_its_field(tmp_path: Path) -> None:
    from kvunits.contracts import PoolFactor, UnitValueError

    assert PoolFactor(65536).tokens_per_block == 65536
    with pytest.raises(UnitValueError, match="PoolFactor must be <= 65536"):
        PoolFactor(65537)
    text = (REPO / "examples" / "voxtral_realtime.toml").read_text()
    path = tmp_path / "big.toml"
    path.write_text(text.replace("pool = 4", "pool = 4611686018427387904"))
    with pytest.raises(ConfigError) as excinfo:
        load_config(path)
    assert "model.groups.audio.pool: PoolFactor must be <= 65536" in str(excinfo.value)


def test_what_is_in_flight_stays_within_int64(capsys: pytest.CaptureFixture[str]) -> None:
    # 65536 batches of 2**63 - 1 tokens were planned, and --format json printed an
    # in-flight count of 604462909807314587288576 token.
    args = ["plan", LLAMA, "--max-concurrent-batches", "65536"]
    args += ["--max-num-batched-tokens", f"{2**63 - 1} token", "--format", "json"]
    err = _exits_2(args, capsys)
    assert err.startswith("command line: engine: max_concurrent_batches 65536 × ")
    assert "in flight is past 2**63 - 1 (int64); lower them" in err
    assert main(["plan", LLAMA, "--max-concurrent-batches", "65536", "--format", "json"]) == 0
    capsys.readouterr()


# -- every answer is an int64 -----------------------------------------------------------------

_INT64 = 2**63 - 1
_EXTREMES = {
    "memory_budget": ["1 GiB", "40 GiB", "1 PiB", "8388607 TiB", f"{_INT64} byte"],
    "max_model_len": ["1 token", "131072 token", f"{2**40} token", f"{_INT64} token"],
    "max_num_batched_tokens": ["1 token", "2048 token", f"{2**40} token", f"{_INT64} token"],
    "max_concurrent_batches": ["1", "2", "65536"],
    "num_speculative_tokens": ["0", "4", "1024"],
    "block_size_slots": ["1", "16", "65536"],
    "tensor_parallel_size": ["1", "8"],
    "pipeline_parallel_size": ["1", "3"],
}


def _past_int64(node: Any, path: str = "") -> list[str]:
    if isinstance(node, dict):
        return [p for key, value in node.items() for p in _past_int64(value, f"{path}.{key}")]
    if isinstance(node, list):
        return [p for i, value in enumerate(node) for p in _past_int64(value, f"{path}[{i}]")]
    if isinstance(node, int) and not isinstance(node, bool) and not -_INT64 - 1 <= node <= _INT64:
        return [f"{path} = {node}"]
    return []


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([
        "examples/hf/llama-3.1-8b/config.json",
        "examples/voxtral_realtime.toml",
        "examples/hf/gemma-3-1b-it/config.json",
    ]),
    st.fixed_dictionaries({}, optional={k: st.sampled_from(v) for k, v in _EXTREMES.items()}),
    st.sampled_from([None, "1 token", f"{2**50} token", f"{_INT64} token"]),
    st.integers(1, 2**70),
)  # fmt: skip
def test_every_answer_of_plan_and_fit_is_an_int64(
    path: str, flags: dict[str, str], length: str | None, requests: int
) -> None:
    from kvunits._fit import fit, fit_to_dict
    from kvunits._render import plan_to_dict
    from kvunits.contracts import KvUnitsError
    from kvunits.runtime import plan

    try:
        config = load_config(REPO / path, flags=flags)
    except ConfigError:
        event("refused by the loader")
        return
    answers: dict[str, Any] = {}
    try:
        answers["plan"] = plan_to_dict(config, plan(config.model, config.engine))
        event("planned")
    except KvUnitsError:
        event("refused by the plan")
    try:
        answers["fit"] = fit_to_dict(config, fit(config, length=length, requests=requests))
        event("fit answered")
    except KvUnitsError:
        event("refused by fit")
    assert _past_int64(answers) == []
