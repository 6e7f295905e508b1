"""Untrusted config files: every hostile or absurd file is refused quickly, with a clear
message, before any value reaches a model; user text never reaches pint (its evaluator nor its
name resolver): quantities are read with the unit table of ``units.txt``."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kvunits.contracts import UnitError, ureg
from kvunits.contracts.config import EngineConfig, load_config, read_config_file
from kvunits.contracts.errors import ConfigError

from ..examples import examples
from .conftest import VOXTRAL_TOML

Write = Callable[[str, str | bytes], Path]

#: How long a call may take before it counts as blocked forever (a hang, not a speed bound).
HANG_S = 60.0


def _refused(path: Path) -> list[str]:
    # No wall-clock bound here (speed is the benchmarks' job, and a loaded CI machine made a
    # 5 s bound flaky): the tests that guard against unbounded work check *where* the refusal
    # happens, before any layer is built (test_huge_counts_are_refused_before_building_layers).
    with pytest.raises(ConfigError) as excinfo:
        load_config(path)
    return [str(issue) for issue in excinfo.value.issues]


def _one(path: Path) -> str:
    issues = _refused(path)
    assert len(issues) >= 1
    return issues[0]


# -- the file ---------------------------------------------------------------------------------


def test_too_large(write: Write) -> None:
    path = write("big.toml", "# " + "x" * (1 << 20))
    assert (
        _one(path)
        == f"{path}: {(1 << 20) + 2} byte is larger than the 1048576 byte a config may have"
    )


def test_not_utf8(write: Write) -> None:
    assert _one(write("bin.toml", b"\xff\xfe[model]")).endswith("not UTF-8 text (byte 0 is 0xff)")


def test_unknown_extension_and_missing_file(write: Write, tmp_path: Path) -> None:
    assert "unknown extension '.ini'" in _one(write("c.ini", "[model]"))
    assert _one(tmp_path / "nope.toml").endswith("cannot read: No such file or directory")
    (tmp_path / "dir.json").mkdir()
    # A directory is read as a model directory: its config.json, which this one lacks.
    assert "dir.json: a directory with no config.json" in _one(tmp_path / "dir.json")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    # open() of a FIFO for reading blocks until a writer comes: `kvunits check pipe.toml`
    # used to hang forever. The file is now opened without blocking and refused.
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def load() -> None:
        try:
            load_config(fifo)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(HANG_S)
    if worker.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # release the blocked reader
        pytest.fail("load_config blocked on a FIFO")
    (error,) = outcome
    assert isinstance(error, ConfigError)
    assert str(error) == f"{fifo}: not a regular file: a FIFO"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.yaml", "", "the file is empty"),
        ("empty.json", " \n", "the file is empty"),
        ("empty.toml", "\ufeff", "the file is empty"),
        ("top.json", "[1, 2, 3]", "the top level must be a table (mapping), got a list"),
        ("top.yaml", "just a string", "the top level must be a table (mapping)"),
        ("syntax.toml", "[model\nname = 1", "not valid TOML"),
        ("syntax.json", '{"model": ', "not valid JSON"),
        ("nan.json", '{"model": {"name": NaN}}', "NaN is not a number a config can hold"),
        ("dupe.json", '{"model": {}, "model": {}}', "duplicate key 'model'"),
        ("dupe.yaml", "model: {}\nmodel: {}\n", "duplicate key 'model'"),
        ("dupe.toml", "[model]\n[model]\n", "not valid TOML"),
        ("int.json", '{"model": {"name": ' + "9" * 5000 + "}}", "out of the int64 range"),
        ("int.toml", "[model]\nname = " + "9" * 30, "integer out of the int64 range"),
        ("int.yaml", "model: {name: " + "9" * 30 + "}", "integer out of the int64 range"),
        ("digits.toml", "[model]\nname = " + "9" * 5000, "not valid TOML"),
        ("inf.yaml", "engine: {memory_budget: .inf}", "inf is not a finite number"),
        ("string.json", '{"model": {"name": "' + "x" * 100_000 + '"}}', "a string of 100000"),
        ("key.json", '{"' + "k" * 1000 + '": 1}', "a key is 1000 characters long"),
        ("deep.json", "[" * 100_000 + "]" * 100_000, "nested more than 32 levels deep"),
        ("deep.toml", "a = " + "[" * 100_000 + "]" * 100_000, "nested more than 32 levels"),
        ("deep.yaml", "a: " + "[" * 100_000 + "]" * 100_000, "nesting depth"),
        ("deep33.json", '{"a": ' + "[" * 40 + "]" * 40 + "}", "nested more than 32 levels deep"),
        (
            "python.yaml",
            "model: !!python/object/apply:os.system ['echo hi']",
            "model: the tag tag:yaml.org,2002:python/object/apply:os.system is not one of",
        ),
        (
            "binary.yaml",
            "model: {name: !!binary aGk=}",
            "model.name: the tag tag:yaml.org,2002:binary is not one",
        ),
        (
            "date.yaml",
            "model: {name: 2024-01-01}",
            "model.name: '2024-01-01' is a date in YAML 1.1 but a string in YAML 1.2",
        ),
        ("set.yaml", "model: !!set {a, b}", "model: the tag tag:yaml.org,2002:set is not one"),
        ("key.yaml", "model: {[1, 2]: x}", "not valid YAML"),
        ("intkey.yaml", "model: {1: x}", "keys must be strings, got 1 (a bare int, no unit)"),
        ("alias.yaml", "a: &x [1, 2]\nb: *x\n", "YAML aliases (*name) are not allowed"),
        ("cycle.yaml", "a: &x [*x]\n", "YAML aliases (*name) are not allowed"),
    ],
)
def test_hostile_files(write: Write, name: str, content: str, message: str) -> None:
    issues = _refused(write(name, content))
    assert any(message in issue for issue in issues), issues


def test_billion_laughs(write: Write) -> None:
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    path = write("laughs.yaml", "\n".join(lines))
    assert _refused(path) == [
        f"{path}: b[0]: YAML aliases (*name) are not allowed in a kvunits config"
    ]


def test_a_megabyte_of_entries_is_refused_quickly(write: Write) -> None:
    group = "    g{}:\n      kind: encoder_only\n"
    text = "model:\n  name: x\n  groups:\n" + "".join(group.format(i) for i in range(20_000))
    assert len(text) < 1 << 20
    issues = _refused(write("many.yaml", text))
    assert any("model.groups: 20000 groups; at most 256" in issue for issue in issues)


def test_huge_counts_are_refused_before_building_layers(write: Write) -> None:
    text = VOXTRAL_TOML.replace("count = 32", "count = 100000000")
    assert any("less than or equal to 4096" in issue for issue in _refused(write("n.toml", text)))


# -- quantity strings -------------------------------------------------------------------------

HOSTILE_QUANTITIES = [
    "__import__('os').system('echo pwned') encoder_token",
    "2**70 encoder_token",
    "750 * 4 encoder_token",
    "750 encoder_token * 4",
    "1e3 encoder_token",
    "750.5 encoder_token",
    "-750 encoder_token",
    "750 encoder_token / pooled_block",
    "750 kiloencoder_token",
    "750 encoder_token; rm -rf /",
    "750 meter",
    "750 encoder_token" + "0" * 100,
    "99999999999999999999 encoder_token",
    "750 token",
    "750 pooled_block",
    "",
    "encoder_token",
    "0x2ee encoder_token",
    "٧٥٠ encoder_token",  # Arabic-Indic digits: int() would take them, the grammar does not
]


@pytest.fixture
def pint_spy(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Record what reaches pint's expression evaluator and its unit-name resolver."""
    seen: list[Any] = []
    real_unit, real_parse = ureg.Unit, ureg.parse_expression

    def spy_parse(*args: Any, **kwargs: Any) -> Any:
        seen.append(args)
        return real_parse(*args, **kwargs)

    def spy_unit(name: Any) -> Any:
        seen.append(name)
        return real_unit(name)

    monkeypatch.setattr(ureg, "parse_expression", spy_parse)
    monkeypatch.setattr(ureg, "Unit", spy_unit)
    yield seen


@pytest.mark.parametrize("text", HOSTILE_QUANTITIES)
def test_hostile_quantity_strings(write: Write, text: str, pint_spy: list[Any]) -> None:
    config = VOXTRAL_TOML.replace('"750 encoder_token"', _toml_string(text))
    (issue,) = [i for i in _refused(write("q.toml", config)) if "sliding_window" in i]
    assert "model.groups.audio.sliding_window" in issue
    assert pint_spy == []  # the text was read without pint


def test_valid_quantities_parse_without_pint(write: Write, pint_spy: list[Any]) -> None:
    config = load_config(write("ok.toml", VOXTRAL_TOML.replace('"40 GiB"', '"40_960 MiB"')))
    assert str(config.engine.memory_budget) == "42949672960 byte/rank"
    assert pint_spy == []
    # The spy does see pint being used: a pint quantity handed in goes through the registry.
    EngineConfig.model_validate({"memory_budget": ureg.Quantity(40, "GiB")})
    assert pint_spy


def test_quantity_errors_are_unit_errors() -> None:
    from kvunits.contracts import Tokens, parse_quantity

    with pytest.raises(UnitError, match="is not '<integer> <unit>'"):
        parse_quantity("2**70 token", Tokens)


def _toml_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def test_read_config_file_returns_plain_data(write: Write) -> None:
    data = read_config_file(write("c.toml", VOXTRAL_TOML))
    assert data["model"]["groups"]["audio"]["sliding_window"] == "750 encoder_token"


# -- any tree at all --------------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["750 encoder_token", "8192 token", "40 GiB", "sliding_window", "4"]),
)
_KEYS = st.sampled_from(
    ["model", "engine", "name", "groups", "layers", "audio", "kind", "count", "pool",
     "sliding_window", "kv_heads", "head_size", "memory_budget", "max_model_len",
     "model_type", "num_hidden_layers", "layer_types", "text_config", "audio_config", "x"]
)  # fmt: skip
_TREES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=examples(300))
@given(st.dictionaries(_KEYS, _TREES, max_size=4))
def test_any_tree_is_a_config_or_a_config_error(data: dict[str, Any]) -> None:
    from kvunits.contracts.config import KvUnitsConfig, load_config_data

    try:
        result = load_config_data(data, where="fuzz.json")
    except ConfigError as exc:
        assert exc.issues
        assert all(issue.message for issue in exc.issues)
    else:
        assert isinstance(result, KvUnitsConfig)
