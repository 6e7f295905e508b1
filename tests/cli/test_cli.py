"""``kvunits plan|check|schema|convert``: golden output, JSON output, exit statuses, errors on
stderr without a traceback, engine precedence, and imports (no torch, no triton)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import kvunits
from kvunits.cli import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
#: The console script pip installed next to this interpreter (pyproject's [project.scripts]).
KVUNITS = Path(sys.executable).with_name("kvunits")


def run(
    *args: str, env: dict[str, str] | None = None, cwd: Path = REPO, entry_point: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the command line in a fresh interpreter, with a clean ``KVUNITS_*`` environment."""
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("KVUNITS_")}
    clean.update(env or {})
    command = [str(KVUNITS)] if entry_point else [sys.executable, "-m", "kvunits"]
    return subprocess.run(
        [*command, *args],
        cwd=cwd,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def shipped_examples() -> list[Path]:
    """The examples the installed package ships (a checkout's examples/ through its link)."""
    shipped = Path(kvunits.__file__).parent / "examples"
    return [
        *sorted(shipped.glob("*.toml")),
        *sorted(shipped.glob("*.yaml")),
        *sorted(shipped.glob("*.json")),
        *sorted(shipped.glob("hf/*/config.json")),
    ]


# -- plan -------------------------------------------------------------------------------------


def test_plan_from_the_installed_entry_point_anywhere(tmp_path: Path) -> None:
    # The entry point, from a directory that is not the repository: the default example is
    # package data, found without a path.
    assert KVUNITS.is_file(), f"the kvunits console script is not installed at {KVUNITS}"
    done = run("plan", cwd=tmp_path, entry_point=True)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "kvunits plan: voxtral-mini-4b-realtime" in out
    assert "750 encoder_token → 189 pooled_block" in out
    assert "13 cache_block" in out
    assert "524288 byte" in out
    assert "8192 token → 8192 token" in out
    assert "641 cache_block" in out
    assert "concurrent requests admitted: 32" in out
    assert "pool_window = cdiv(W - 1, P) + 1" in out
    assert done.stderr == ""


def q(value: int, unit: str, kind: str | None = None) -> dict[str, Any]:
    """A quantity as the JSON output writes it (a window, position or chunk names its kind)."""
    return (
        {"value": value, "unit": unit}
        if kind is None
        else {"value": value, "unit": unit, "kind": kind}
    )


def test_plan_json_for_machines() -> None:
    done = run("plan", str(EXAMPLES / "voxtral_realtime.yaml"), "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["schema_version"] == 2
    audio, text = data["groups"]
    assert audio["name"] == "audio"
    assert audio["layers"] == 32
    assert audio["sliding_window"] == q(750, "encoder_token", "window")
    assert audio["manager_sliding_window"] == q(189, "pooled_block", "window")
    assert audio["sliding_window_conversion"] == "pool_window"
    assert audio["page_size"] == q(524288, "byte")
    assert audio["admission_cap"] == q(13, "cache_block")
    assert audio["block_size"] == q(16, "pooled_block/cache_block")
    assert audio["kernel_block_size"] == q(64, "encoder_token/cache_block")
    assert audio["max_in_flight"] == q(2, "pooled_block")  # a 4-token step can straddle 2 slots
    assert text["manager_sliding_window"] == q(8192, "token", "window")
    # Each setting once: its value, its unit and where it came from.
    assert data["engine"]["memory_budget"] == {
        "value": 42949672960,
        "unit": "byte/rank",
        "from": "file",
    }
    assert data["engine"]["tensor_parallel_size"] == {"value": 1, "unit": "rank", "from": "default"}
    assert data["engine"]["async_scheduling"] == {"value": False, "from": "default"}
    assert data["kv_cache_memory"] == q(42949672960, "byte/rank")
    assert data["in_flight"]["max_in_flight"] == q(2048, "token")
    assert data["bytes_per_request"] == q(1310326784, "byte")
    assert data["concurrent_requests"] == 32
    # One device: one stage whose rank holds all of it, the model's numbers per rank.
    (stage,) = data["stages"]
    assert stage["bytes_per_request"] == q(1310326784, "byte/rank")
    assert [g["num_blocks"] for g in stage["groups"]] == [
        q(426, "cache_block/rank"),
        q(21002, "cache_block/rank"),
    ]
    assert [g["num_blocks"] for g in data["groups"]] == [
        q(426, "cache_block"),
        q(21002, "cache_block"),
    ]


def test_plan_of_a_hugging_face_config() -> None:
    done = run("plan", str(EXAMPLES / "hf" / "gemma-3-1b-it" / "config.json"), "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert [g["name"] for g in data["groups"]] == ["text/sliding_window", "text/full_attention"]
    assert data["engine"]["max_model_len"]["from"] == "hf max_position_embeddings"
    assert data["engine"]["memory_budget"]["from"] == "default"


def test_plan_that_the_budget_cannot_hold_exits_2() -> None:
    done = run("plan", "--memory-budget", "1 MiB")
    assert done.returncode == 2
    # Said at the place the setting came from (issue 13): the flag.
    assert done.stderr.startswith(
        "command line: --memory-budget: memory_budget 1048576 byte/rank cannot hold"
    )
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


# -- precedence -------------------------------------------------------------------------------


def test_environment_then_flag_precedence() -> None:
    env = {"KVUNITS_MEMORY_BUDGET": "80 GiB", "KVUNITS_BLOCK_SIZE_SLOTS": "32"}
    from_env = json.loads(run("plan", "--format", "json", env=env).stdout)
    assert from_env["engine"]["memory_budget"] == {
        "value": 80 << 30,
        "unit": "byte/rank",
        "from": "env KVUNITS_MEMORY_BUDGET",
    }
    assert from_env["engine"]["block_size_slots"]["value"] == 32
    # 32 slots × 4 × 32 × 128 × 2
    assert from_env["groups"][0]["page_size"] == q(1048576, "byte")
    done = run("plan", "--format", "json", "--memory-budget", "20 GiB", env=env)
    from_flag = json.loads(done.stdout)
    assert from_flag["engine"]["memory_budget"]["value"] == 20 << 30
    assert from_flag["engine"]["memory_budget"]["from"] == "flag --memory-budget"
    assert from_flag["engine"]["block_size_slots"]["from"] == "env KVUNITS_BLOCK_SIZE_SLOTS"


def test_another_tools_kvunits_variable_warns_once_and_the_plan_runs() -> None:
    # KVUNITS_ROOT, set by some other tool, names no setting: a warning line, exit 0.
    examples = [str(EXAMPLES / "voxtral_realtime.toml"), str(EXAMPLES / "voxtral_realtime.yaml")]
    done = run("check", *examples, env={"KVUNITS_ROOT": "/srv/kvunits"})
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        "kvunits: warning: KVUNITS_ROOT is not a kvunits setting and is ignored; kvunits reads "
        "KVUNITS_<setting> (the settings: kvunits plan --help)\n"
    )
    assert done.stdout.count("ok: ") == 2


def test_bad_environment_variable_exits_2() -> None:
    done = run(
        "check", str(EXAMPLES / "voxtral_realtime.toml"), env={"KVUNITS_MEMORY_BUDGET": "40"}
    )
    assert done.returncode == 2
    assert done.stderr == (
        "environment: KVUNITS_MEMORY_BUDGET: '40' has no unit; write it with one, e.g. "
        "'40 byte' (expected byte)\n"
    )


# -- check ------------------------------------------------------------------------------------


def test_every_shipped_example_checks_clean() -> None:
    examples = shipped_examples()
    assert len(examples) >= 8
    # One full-length request of Llama 4 Scout (max_model_len 10485760) needs 481 GiB: the
    # budget must hold it for `check` to pass, as it would for `plan`.
    done = run("check", *map(str, examples), "--memory-budget", "1 TiB")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("ok: ") == len(examples)
    assert done.stderr == ""


def test_check_reports_every_error_of_every_file(tmp_path: Path) -> None:
    text = (EXAMPLES / "voxtral_realtime.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(
        text.replace('"750 encoder_token"', "750")
        .replace('memory_budget = "40 GiB"', 'memory_budget = "40 gigs"')
        .replace("kv_heads = 8", "kv_heads = 8.5")
    )
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 50_000 + "]" * 50_000)
    good = EXAMPLES / "voxtral_realtime.json"
    start = time.perf_counter()
    done = run("check", str(bad), str(good), str(deep))
    assert time.perf_counter() - start < 30
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stdout == f"ok: {good}: voxtral-mini-4b-realtime, 58 layers in 2 cache groups\n"
    lines = done.stderr.splitlines()
    assert lines == [
        f'{bad}: model.groups.audio.sliding_window: 750 has no unit: write it as "750 '
        'encoder_token" (the group pools: pool = 4)',
        f"{bad}: model.groups.text.kv_heads: expected a whole number of kv_head (a plain "
        "integer); got 8.5 (a float)",
        f"{bad}: engine.memory_budget: unknown unit 'gigs'; kvunits knows encoder_token, "
        "pooled_block, token, cache_block and byte (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB) "
        "(expected byte)",
        f"{deep}: nested more than 32 levels deep",
    ]


def test_errors_cannot_drive_the_terminal(tmp_path: Path) -> None:
    evil = tmp_path / "evil.toml"
    evil.write_text('[model]\nname = "m"\n[model.groups.g]\nkind = "\\u001b[2J"\n')
    done = run("check", str(evil))
    assert done.returncode == 2
    assert "\x1b" not in done.stderr
    assert "\\x1b[2J" in done.stderr


# -- schema -----------------------------------------------------------------------------------


def test_schema() -> None:
    done = run("schema")
    assert done.returncode == 0, done.stderr
    schema = json.loads(done.stdout)
    assert schema["$schema"].startswith("https://json-schema.org/")
    group = schema["$defs"]["SlidingWindowGroup"]["properties"]
    assert group["sliding_window"]["x-unit"] == ["encoder_token", "token"]
    engine = schema["$defs"]["EngineConfig"]["properties"]
    # null is no block size (issue 13: the schema takes only what the loader takes); a
    # memory budget may be null, where gpu_memory sizes the KV cache instead.
    assert engine["block_size_slots"]["x-unit"] == "slot/cache_block"
    assert engine["memory_budget"]["x-unit"] == "byte"
    assert engine["memory_budget"]["type"] == ["string", "null"]
    assert schema["$id"] == "urn:kvunits:config"
    assert engine["tensor_parallel_size"]["x-unit"] == "rank"


def test_schema_hf(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "--hf"]) == 0
    fields = json.loads(capsys.readouterr().out)
    assert "encoder_token" in fields["sliding_window"]


def test_models_lists_every_family_and_what_it_is_read_as(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for family in ("llama", "gemma4", "deepseek", "jamba", "nemotron_h", "whisper"):
        assert f"\n{family} " in out
    assert "MLA on every layer: one latent head of kv_lora_rank + qk_rope_head_dim" in out
    assert "voxtral_realtime" in out and "is refused with its name" in out
    assert main(["models", "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    by_name = {row["family"]: row for row in listed["families"]}
    assert by_name["qwen3_next"]["model_types"] == [
        "qwen3_next",
        "qwen3_5_text",
        "qwen3_5_moe_text",
    ]
    assert "head_dim" in by_name["qwen2"]["ignores"]
    assert {"llava", "gemma3", "voxtral"} <= {row["model_type"] for row in listed["wrappers"]}


def test_an_unknown_model_type_exits_2_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "rwkv", "num_hidden_layers": 2}')
    done = run("plan", str(path))
    assert done.returncode == 2
    assert done.stderr.startswith(f"{path}: model_type: kvunits does not read model type ")
    assert done.stderr.count("\n") == 1  # no engine noise after it


def test_a_huge_derived_head_size_exits_2_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(
        '{"model_type":"llama","num_hidden_layers":1,"num_attention_heads":1,'
        '"hidden_size":16777216}'
    )
    done = run("plan", str(path))
    assert done.returncode == 2
    assert done.stderr == (
        f"{path}: head_dim: hidden_size / num_attention_heads = 16777216, which must be "
        "between 1 and 1048576\n"
    )


# -- convert ----------------------------------------------------------------------------------


def test_convert_window_in_a_subprocess() -> None:
    done = run(
        "convert", "750 encoder_token", "--to", "pooled_block", "--pool", "4", "--as", "window"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "750 encoder_token → 189 pooled_block  (pool_window: cdiv(W - 1, P) + 1, window "
        "residency bound: the look-back rounds up, plus the current slot; P = 4)\n"
    )


def _convert(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["convert", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_convert_length_is_the_default_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _convert(capsys, "750 encoder_token", "--to", "pooled_block", "--pool", "4")
    assert status == 0
    assert out.splitlines() == [
        "750 encoder_token → 188 pooled_block  (pool_length: cdiv(n, P), rounds up; P = 4)",
        "  note: read as a length (the default); a window of 750 encoder_token keeps 189 "
        "pooled_block resident: use --as window",
    ]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["189 pooled_block", "--to", "cache_block", "--block-size", "16"],
            "189 pooled_block → 12 cache_block  (slots_to_cache_blocks_ceil: cdiv(n, block_size),"
            " rounds up; block_size = 16 pooled_block/cache_block)",
        ),
        (
            ["750 encoder_token", "--to", "cache_block", "--pool", "4", "--block-size", "16"],
            "750 encoder_token → 188 pooled_block → 12 cache_block",
        ),
        (
            ["189 pooled_block", "--to", "encoder_token", "--pool", "4"],
            "189 pooled_block → 756 encoder_token  (unpool_length: s * P, exact; P = 4)",
        ),
        (
            ["40 GiB", "--to", "cache_block", "--page-size", "524288 byte"],
            "40 GiB = 42949672960 byte → 81920 cache_block  (bytes_to_cache_blocks_floor: "
            "budget // page_size, rounds down; page_size = 524288 byte)",
        ),
        (
            ["13 cache_block", "--to", "MiB", "--page-size", "512 KiB"],
            "13 cache_block → 6815744 byte → 6.5",  # not whole: refused below
        ),
        (["40 GiB", "--to", "MiB"], "40 GiB = 42949672960 byte → 40960 MiB  (exact unit change"),
        (["12 tokens", "--to", "tok"], "12 tokens = 12 token → 12 token  (identity, exact)"),
    ],
)
def test_convert(capsys: pytest.CaptureFixture[str], args: list[str], expected: str) -> None:
    status, out, err = _convert(capsys, *args)
    if "6.5" in expected:
        assert status == 2
        assert "is not a whole number of MiB (6.5)" in err
        return
    assert status == 0, err
    assert out.startswith(expected)


def test_convert_json(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _convert(
        capsys,
        "750 encoder_token",
        "--to",
        "pooled_block",
        "--pool",
        "4",
        "--as",
        "window",
        "--format",
        "json",
    )
    assert status == 0
    data: dict[str, Any] = json.loads(out)
    assert data["schema_version"] == 2
    assert data["written"] == "750 encoder_token"
    assert data["input"] == q(750, "encoder_token")
    assert data["output"] == q(189, "pooled_block")
    assert data["parameters"] == {"P": q(4, "encoder_token/pooled_block")}
    assert data["steps"] == [
        {
            "conversion": "pool_window",
            "formula": "cdiv(W - 1, P) + 1",
            "rounding": "window",
            "result": q(189, "pooled_block"),
        }
    ]


def test_convert_json_in_a_byte_multiple(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _convert(capsys, "40 GiB", "--to", "MiB", "--format", "json")
    assert status == 0
    data: dict[str, Any] = json.loads(out)
    assert data["input"] == q(40 << 30, "byte")
    assert data["output"] == q(40960, "MiB")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["750 encoder_token", "--to", "pooled_block"], "needs --pool P"),
        (["750 encoder_token", "--to", "token", "--pool", "4"], "no conversion relates them"),
        (["750", "--to", "pooled_block", "--pool", "4"], "'750' has no unit"),
        (["2**10 token", "--to", "token"], "is not '<integer> <unit>'"),
        (["750 encoder_token", "--to", "parsec"], "unknown unit 'parsec'"),
        (["750 encoder_token", "--to", "1 token"], "is not a unit name"),
        (["750 encoder_token", "--to", "pooled_block", "--pool", "0"], "PoolFactor must be >= 1"),
        (["1 cache_block", "--to", "byte"], "needs --page-size"),
        (["10 token", "--to", "cache_block"], "needs --block-size"),
        # A window or a position is not a length: ceil-dividing it into cache blocks would
        # print 12 for a 189-slot window that can span 13, and 12 for the block of slot 187
        # (block 11). Both stop at pooled_block.
        (
            [
                "750 encoder_token",
                "--to",
                "cache_block",
                "--pool",
                "4",
                "--as",
                "window",
                "--block-size",
                "16",
            ],
            "--as window converts to pooled_block only: a window is not a length",
        ),
        (
            ["750 encoder_token", "--to", "byte", "--pool", "4", "--as", "position"],
            "--as position converts to pooled_block only",
        ),
    ],
)
def test_convert_errors(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    status, out, err = _convert(capsys, *args)
    assert status == 2
    assert out == ""
    assert message in err
    assert "Traceback" not in err


# -- help, imports ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command", [[], ["plan"], ["check"], ["models"], ["schema"], ["convert"], ["fit"]]
)
def test_help_with_examples(capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    with pytest.raises(SystemExit) as excinfo:
        main([*command, "--help"])
    assert excinfo.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out
    assert "kvunits" in out


def test_help_and_version_from_the_entry_point() -> None:
    done = run("--help", entry_point=True)
    assert done.returncode == 0
    assert "kvunits plan" in done.stdout
    version = run("--version", entry_point=True)
    assert version.returncode == 0 and version.stdout.startswith("kvunits ")


def test_usage_errors_exit_2() -> None:
    done = run("plan", "--format", "yaml")
    assert done.returncode == 2
    assert "invalid choice" in done.stderr
    assert "Traceback" not in done.stderr


_PROBE = """
import json, sys
import kvunits.cli
after_import = sorted(
    m for m in ("torch", "triton", "pint", "rich", "pydantic", "contracts") if m in sys.modules
)
sys.argv = ["kvunits", "plan", "--format", "json"]
status = kvunits.cli.main()  # as the console script calls it
after_plan = sorted(m for m in ("torch", "triton", "numpy", "rich", "pint") if m in sys.modules)
print(json.dumps({"after_import": after_import, "after_plan": after_plan, "status": status}))
"""


def test_the_command_line_imports_no_torch_no_triton() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # Only the standard library at import (runtime/__init__ is lazy): --help is instant.
    # After a JSON plan: no torch, no triton, no numpy, no pint (text quantities are read with
    # the unit table of units.txt), no rich (only tables need it).
    assert result == {"after_import": [], "after_plan": [], "status": 0}
