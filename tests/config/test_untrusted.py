"""Untrusted config text (issue 13): refused by counting before building, read as YAML 1.2.

Work is bounded by counts, never by absolute times: a TOML or JSON file over the value count
never reaches its parser (the pre-scan refuses it), a YAML one stops being composed at the
first node too many, and the pre-scan's count is a lower bound of the real one, so that every
refusal is true. One ratio, measured in the same run, prices a refusal against parsing the
largest file that is accepted.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kvunits.contracts.config import read_config_file
from kvunits.contracts.config._read import MAX_NODES, count_values, parse_config_text
from kvunits.contracts.errors import ConfigError

from ..examples import examples

CAP = 1 << 20

#: Files just under the 1 MiB cap, each of far more values than MAX_NODES, in the shapes the
#: fuzzing found slow (a TOML or YAML flow list of 500 000 scalars took 2-5 s to refuse).
HOSTILE: dict[str, tuple[str, str]] = {
    "toml list": ("a = [" + ",".join(["1"] * ((CAP - 10) // 2)) + "]", "toml"),
    "toml tables": ("\n".join(f"[t{i}]" for i in range(120_000))[: CAP - 10], "toml"),
    "toml pairs": ("\n".join(f"a{i}=1" for i in range(110_000)), "toml"),
    "toml inline tables": ("a = [" + ",".join(["{}"] * ((CAP - 10) // 3)) + "]", "toml"),
    "toml dotted keys": ("\n".join(f"x{i}.a.b.c.d.e.f.g = 1" for i in range(40_000)), "toml"),
    "json list": ('{"a": [' + ",".join(["1"] * ((CAP - 10) // 2)) + "]}", "json"),
    "json strings": ('{"a": [' + ",".join(['""'] * ((CAP - 10) // 3)) + "]}", "json"),
    "yaml flow list": ("a: [" + ",".join(["1"] * ((CAP - 10) // 2)) + "]", "yaml"),
    "yaml block list": ("a:\n" + "- 1\n" * ((CAP - 10) // 4), "yaml"),
    "yaml mapping": ("".join(f"k{i}: 1\n" for i in range(90_000)), "yaml"),
    "yaml tagged list": ("a: [" + ",".join(["!!str 1"] * ((CAP - 10) // 8)) + "]", "yaml"),
}


@pytest.fixture
def parser_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Count the calls of the TOML and JSON parsers and of the YAML resolver (one per node
    composed)."""
    import tomllib

    from kvunits.contracts.config._read import _yaml_loader

    calls = {"toml": 0, "json": 0, "yaml nodes": 0, "yaml built": 0}

    def counting(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def spy(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return real(*args, **kwargs)

        return spy

    monkeypatch.setattr(tomllib, "loads", counting("toml", tomllib.loads))
    monkeypatch.setattr(json, "loads", counting("json", json.loads))
    loader = _yaml_loader()
    monkeypatch.setattr(loader, "resolve", counting("yaml nodes", loader.resolve))
    built = counting("yaml built", loader.construct_object)
    monkeypatch.setattr(loader, "construct_object", built)
    yield calls


@pytest.mark.parametrize("shape", sorted(HOSTILE))
def test_a_file_of_too_many_values_is_refused_before_its_tree_is_built(
    shape: str, parser_calls: dict[str, int]
) -> None:
    text, fmt = HOSTILE[shape]
    assert len(text.encode()) <= CAP
    with pytest.raises(ConfigError, match=r"x: more than (50000 values|100000 keys)"):
        parse_config_text(text, fmt, where="x")
    if fmt == "yaml":
        # Keys are nodes too: at most 2 × MAX_NODES nodes composed (or, explicitly tagged
        # ones, which libyaml composes without asking, built), then the refusal.
        composed, built = parser_calls["yaml nodes"], parser_calls["yaml built"]
        assert max(composed, built) == 2 * MAX_NODES + 1, (composed, built)
        assert built <= 2 * MAX_NODES + 1
    else:
        assert parser_calls[fmt] == 0, "the parser was given a file the count refuses"


def test_refusing_costs_less_than_parsing_the_largest_accepted_file() -> None:
    """The ratio, measured in this run: refusing a 1 MiB TOML of 500 000 values (before the
    fix: building all of them, 2-5 s) against parsing a TOML of MAX_NODES values."""
    accepted = "a = [" + ",".join(["1"] * (MAX_NODES - 2)) + "]"
    assert len(parse_config_text(accepted, "toml", where="x")["a"]) == MAX_NODES - 2
    hostile, _ = HOSTILE["toml list"]

    def best(run: Callable[[], object]) -> float:
        times = []
        for _ in range(3):
            start = time.perf_counter()
            with contextlib.suppress(ConfigError):
                run()
            times.append(time.perf_counter() - start)
        return min(times)

    baseline = best(lambda: parse_config_text(accepted, "toml", where="x"))
    refusal = best(lambda: parse_config_text(hostile, "toml", where="x"))
    print(f"refusal / largest accepted parse = {refusal / baseline:.3f}")
    assert refusal < baseline, (refusal, baseline)


# -- the count is a lower bound -----------------------------------------------------------------

_TEXT = st.text(alphabet=st.sampled_from(list("ab,=:#[]{}.'\"\\ \n1")), max_size=8)
_SCALARS = st.one_of(
    st.integers(-(2**40), 2**40), st.booleans(), _TEXT, st.floats(allow_nan=False, width=32)
)
_KEYS = st.one_of(st.sampled_from(["a", "b", "c.d", "x y", "k"]), _TEXT)


def _trees(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
        max_leaves=20,
    )


def _nodes(tree: object) -> int:
    """Values in a tree, as the tree check counts them (the top mapping included)."""
    if isinstance(tree, dict):
        return 1 + sum(_nodes(v) for v in tree.values())
    if isinstance(tree, list):
        return 1 + sum(_nodes(v) for v in tree)
    return 1


def _toml_key(key: str) -> str:
    return json.dumps(key) if not key.isalnum() else key


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value) if math.isfinite(value) else "nan"
    if isinstance(value, str):
        # Basic, literal and multi-line strings, so that the pre-scan must skip them all.
        if "'" not in value and "\n" not in value and len(value) % 3 == 0:
            return f"'{value}'"
        if len(value) % 3 == 1 and '"' not in value and "\\" not in value:
            return f'"""{value}"""'
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"


def _toml(tree: dict[str, Any], path: str = "") -> str:
    """TOML text of a tree: sub-tables as headers, the rest inline; comments with separators."""
    lines = []
    for key, value in tree.items():
        if not isinstance(value, dict):
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}  # a, b = c, [d]")
    for key, value in tree.items():
        if isinstance(value, dict):
            header = f"{path}.{_toml_key(key)}" if path else _toml_key(key)
            lines.append(f"[{header}]")
            lines.append(_toml(value, header))
    return "\n".join(lines)


@settings(max_examples=examples(300))
@given(st.dictionaries(_KEYS, _trees(_SCALARS), max_size=5))
def test_the_count_never_exceeds_the_values_in_the_file(tree: dict[str, Any]) -> None:
    import tomllib

    text = _toml(tree)
    try:
        parsed = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return  # a key path the writer cannot express (a dotted key meeting a header)
    assert count_values(text, "toml")[0] <= _nodes(parsed), text
    as_json = json.dumps(tree)
    assert count_values(as_json, "json")[0] <= _nodes(json.loads(as_json)), as_json


# -- YAML: the 1.2 core schema, and no reading that YAML 1.1 would make otherwise --------------


def _yaml(text: str) -> Any:
    return parse_config_text(text, "yaml", where="c.yaml")


@pytest.mark.parametrize(
    ("scalar", "reading_11"),
    [
        ("040", "the octal 040"),  # count: 040 was 32 layers
        ("1:00", "an integer"),  # sexagesimal 60
        ("1_000", "an integer"),
        ("0b101", "an integer"),
        ("yes", "a bool"),
        ("No", "a bool"),
        ("on", "a bool"),
        ("2024-01-01", "a date"),
        ("0o17", "a string"),  # YAML 1.2's octal: a string to 1.1
        ("1e3", "a string"),  # YAML 1.2's float: a string to 1.1 (no dot)
        ("=", "a value key"),
    ],
)
def test_yaml_forms_read_differently_by_1_1_are_refused_with_their_path(
    scalar: str, reading_11: str
) -> None:
    with pytest.raises(ConfigError) as excinfo:
        _yaml(f"model:\n  groups:\n    audio:\n      count: {scalar}\n")
    (issue,) = excinfo.value.issues
    assert issue.path == "model.groups.audio.count"
    assert f"{scalar!r} is {reading_11} in YAML 1.1 but" in issue.message
    assert "quote it for a string" in issue.message
    # Quoted, it is the string it looks like, in every YAML.
    assert _yaml(f'a: "{scalar}"') == {"a": scalar}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0x10", 16),  # hexadecimal: 16 in YAML 1.1 and 1.2 alike
        ("40", 40),
        ("-7", -7),
        ("true", True),
        ("FALSE", False),
        ("~", None),
        ("1.5", 1.5),
        ("audio", "audio"),
    ],
)
def test_yaml_forms_both_versions_agree_on_are_read(text: str, value: object) -> None:
    assert _yaml(f"a: {text}") == {"a": value}


def test_a_merge_key_and_explicit_1_1_forms_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"a: a key: '<<' is a merge key in YAML 1\.1"):
        _yaml("a: {<<: {b: 1}}")
    with pytest.raises(ConfigError, match=r"a: '040' is the octal 040 in YAML 1.1"):
        _yaml("a: !!int 040")
    with pytest.raises(ConfigError, match=r"a: 'yes' is not a YAML 1\.2 bool"):
        _yaml("a: !!bool yes")
    assert _yaml("a: !!str 040") == {"a": "040"}


def test_scalar_aliases_are_refused_as_the_readme_says() -> None:
    with pytest.raises(ConfigError, match=r"c.yaml: b: YAML aliases \(\*name\) are not allowed"):
        _yaml("a: &n 32\nb: *n\n")
    with pytest.raises(ConfigError, match="YAML aliases"):
        _yaml("a: &k name\n*k : 1\n")
    assert _yaml("a: &n 32\n") == {"a": 32}  # an anchor alone changes nothing


def test_a_yaml_integer_of_thousands_of_digits_names_its_field(tmp_path: Any) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("engine:\n  block_size_slots: " + "9" * 5000 + "\n")
    with pytest.raises(ConfigError) as excinfo:
        read_config_file(path)
    assert [str(i) for i in excinfo.value.issues] == [
        f"{path}: engine.block_size_slots: integer out of the int64 range (5000 digits)"
    ]


_PLAIN = st.text(
    alphabet=st.sampled_from(list("0123456789+-._:eExobYyNnOTtrufalsFA~<=")), min_size=1, max_size=7
)


@settings(max_examples=examples(400))
@given(_PLAIN)
@example("0b_")  # PyYAML resolves it as an int, then fails to build it (the CI run of stop 17)
@example("0x_")
def test_a_plain_yaml_scalar_is_refused_or_read_as_both_versions_read_it(text: str) -> None:
    try:
        yaml_11 = yaml.safe_load(f"a: {text}")
    except yaml.YAMLError:
        return  # not a plain scalar in a flow context ('-', ':' …)
    except ValueError:
        # YAML 1.1 resolves it as an int PyYAML cannot build ('0b_', '0x_'): 1.1 and 1.2 read it
        # differently, so it must be refused as such.
        with pytest.raises(ConfigError, match=r"an integer in YAML 1\.1 but a string"):
            _yaml(f"a: {text}")
        return
    try:
        ours = _yaml(f"a: {text}")
    except ConfigError as exc:
        message = str(exc)
        # Read differently by 1.1; or read alike but refused by the tree check (.nan, .inf).
        assert any(why in message for why in ("in YAML 1.1 but", "int64", "not a finite number")), (
            message
        )
        return
    assert ours == yaml_11 or (ours["a"] != ours["a"] and yaml_11["a"] != yaml_11["a"])  # nan
    assert type(ours["a"]) is type(yaml_11["a"])
