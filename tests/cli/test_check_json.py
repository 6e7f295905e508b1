"""``kvunits check --format json``: every error with its file, line and column, for CI.

The positions are checked against the text itself: every key of every shipped example (TOML,
YAML, JSON and the Hugging Face ``config.json`` files) is located where that key is written,
and the errors of broken files point at the broken field, in each format.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import kvunits
from kvunits._locate import field_parts, locate

from .test_cli import run

SHIPPED = Path(kvunits.__file__).parent / "examples"
EXAMPLES = [
    *sorted(SHIPPED.glob("voxtral_realtime.*")),
    *sorted(SHIPPED.glob("hf/*/config.json")),
]


def _tree(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".toml":
        return tomllib.loads(text)
    if path.suffix == ".yaml":
        return yaml.safe_load(text)
    return json.loads(text)


def _keys(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*path, key)
            yield from _keys(value, (*path, key))


def _dotted(path: tuple[str, ...]) -> str:
    from kvunits.contracts.config._issues import join_path

    dotted = ""
    for key in path:
        dotted = join_path(dotted, key)
    return dotted


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.relative_to(SHIPPED).as_posix())
def test_every_key_of_an_example_is_located_where_it_is_written(example: Path) -> None:
    lines = example.read_text(encoding="utf-8").splitlines()
    keys = list(_keys(_tree(example)))
    assert keys
    for path in keys:
        assert field_parts(_dotted(path)) == path
        position = locate(str(example), _dotted(path), "")
        assert position is not None, path
        line, column = position
        written = lines[line - 1][column - 1 :]
        # The key itself (quoted in JSON, maybe in TOML), or the table header that opens it.
        key = path[-1]
        assert written.lstrip("\"'").startswith(key) or f".{key}" in written.split("]")[0], (
            path,
            line,
            written,
        )


_BROKEN = {
    "toml": (
        '[model]\nname = "x"\n\n[model.groups.text]\nkind = "full_attention"\ncount = 2\n'
        'kv_heads = "8"\nhead_size = 128\n\n[engine]\nmax_model_len = "8 GiB"\n'
    ),
    "yaml": (
        "model:\n  name: x\n  groups:\n    text:\n      kind: full_attention\n      count: 2\n"
        '      kv_heads: "8"\n      head_size: 128\nengine:\n  max_model_len: 8 GiB\n'
    ),
    "json": (
        '{\n  "model": {\n    "name": "x",\n    "groups": {\n      "text": {\n'
        '        "kind": "full_attention",\n        "count": 2,\n        "kv_heads": "8",\n'
        '        "head_size": 128\n      }\n    }\n  },\n  "engine": {\n'
        '    "max_model_len": "8 GiB"\n  }\n}\n'
    ),
}


@pytest.mark.parametrize("suffix", sorted(_BROKEN))
def test_each_error_points_at_its_field(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"broken.{suffix}"
    path.write_text(_BROKEN[suffix], encoding="utf-8")
    done = run("check", "--format", "json", str(path))
    assert done.returncode == 2, done.stderr
    report = json.loads(done.stdout)
    assert report["check_version"] == 1 and report["valid"] is False
    assert report["files"] == [{"config": str(path), "valid": False}]
    lines = _BROKEN[suffix].splitlines()
    by_field = {error["field"]: error for error in report["errors"]}
    assert sorted(by_field) == ["engine.max_model_len", "model.groups.text.kv_heads"]
    for field, error in by_field.items():
        assert error["source"] == "file" and error["file"] == str(path)
        written = lines[error["line"] - 1][error["column"] - 1 :]
        assert written.lstrip('"').startswith(field.split(".")[-1])


def test_an_error_outside_the_file_has_no_position() -> None:
    example = str(SHIPPED / "voxtral_realtime.toml")
    done = run("check", "--format", "json", example, env={"KVUNITS_MEMORY_BUDGET": "40"})
    assert done.returncode == 2
    (environment,) = json.loads(done.stdout)["errors"]
    assert environment["config"] == example and environment["field"] == "KVUNITS_MEMORY_BUDGET"
    assert environment["source"] == "environment"
    assert environment["file"] is environment["line"] is environment["column"] is None
    assert "'40' has no unit" in environment["message"]


def _parser_position(name: str, text: str) -> tuple[int, int]:
    """Where the format's own parser places the syntax error (messages vary by version)."""
    try:
        if name.endswith(".toml"):
            tomllib.loads(text)
        elif name.endswith(".json"):
            json.loads(text)
        else:
            yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        return exc.lineno, exc.colno
    except yaml.MarkedYAMLError as exc:
        assert exc.problem_mark is not None
        return exc.problem_mark.line + 1, exc.problem_mark.column + 1
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"line (\d+), column (\d+)", str(exc))
        assert found is not None
        return int(found[1]), int(found[2])
    raise AssertionError(f"{name} parsed")


def test_a_syntax_error_carries_its_parsers_position(tmp_path: Path) -> None:
    texts = {
        "a.toml": '[model\nname = "x"\n',
        "b.json": '{"model": {"name": 3,}}',
        "c.yaml": "model:\n  name: [\n",
    }
    cases = {name: (text, _parser_position(name, text)) for name, text in texts.items()}
    for name, text in texts.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    done = run("check", "--format", "json", *(str(tmp_path / n) for n in cases))
    assert done.returncode == 2
    errors = json.loads(done.stdout)["errors"]
    assert [(Path(e["file"]).name, (e["line"], e["column"])) for e in errors] == [
        (name, position) for name, (_, position) in cases.items()
    ]
    assert all(e["field"] is None and e["message"].startswith("not valid") for e in errors)


def test_valid_configs_exit_0_with_a_document_and_nothing_on_stderr() -> None:
    files = [str(SHIPPED / "voxtral_realtime.toml"), str(SHIPPED / "voxtral_realtime.json")]
    done = run("check", "--format", "json", *files)
    assert done.returncode == 0 and done.stderr == ""
    report = json.loads(done.stdout)
    assert report["valid"] is True and report["errors"] == []
    assert [f["config"] for f in report["files"]] == files
    assert all(f["valid"] and f["model"] == "voxtral-mini-4b-realtime" for f in report["files"])
