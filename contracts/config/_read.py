"""Reading a config file defensively: from untrusted bytes to a plain, bounded tree.

The file is untrusted input. Before any value reaches a model it must pass, in order:

1. the file: a regular file of at most `MAX_FILE_BYTES`, UTF-8 text, a known extension;
2. the parser: ``tomllib``, ``json`` (duplicate keys and integers of more than 19 digits
   rejected) or a YAML *safe* loader that also rejects duplicate keys;
3. the tree: a mapping at the top, nesting at most `MAX_DEPTH` deep, string keys, strings
   of at most `MAX_STRING_CHARS`, integers within int64, finite floats, only JSON-like types,
   and no container reached twice (a YAML alias, ``*ref``: so no "billion laughs"). A Hugging
   Face ``config.json`` may hold ``NaN`` and ``Infinity`` (Python's ``json`` writes them, and
   published files have them in fields no cache depends on); its reader refuses them, with
   the field's path, where it reads a number.

The models then take over (``_load``): quantity strings go through the strict
``"<integer> <unit>"`` grammar of ``_registry`` before pint sees a unit *name*; pint's
expression evaluator never sees user text.
"""

from __future__ import annotations

import functools
import json
import math
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from .._describe import describe
from ..errors import ConfigError, ConfigIssue
from ._issues import MAX_ISSUES, config_error, join_path

MAX_FILE_BYTES: Final = 1 << 20
MAX_DEPTH: Final = 32
MAX_STRING_CHARS: Final = 4096
MAX_KEY_CHARS: Final = 128
MAX_NODES: Final = 100_000
_MAX_INT: Final = 2**63 - 1

#: Parsers by file extension.
FORMATS: Final = {".toml": "toml", ".yaml": "yaml", ".yml": "yaml", ".json": "json"}

_ALIAS_MESSAGE: Final = "YAML aliases (*name) are not allowed in a kvunits config"


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and parse one config file, with the checks of steps 1–3 (module doc).

    Raises:
        ConfigError: the file cannot be read, is too large, not UTF-8, not parseable, or
            its tree is hostile (too deep, huge values, odd types).
    """
    where = str(path)
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise config_error(
            where,
            f"unknown extension {Path(path).suffix!r}; a config is .toml, .yaml, "
            ".yml or .json (a Hugging Face config.json is .json)",
        )
    try:
        # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever;
        # the file type is checked on the open descriptor (no race with a swapped path).
        with open(path, "rb", opener=_open_nonblocking) as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise config_error(where, "not a regular file")
            if info.st_size > MAX_FILE_BYTES:
                raise config_error(
                    where,
                    f"{info.st_size} byte is larger than the {MAX_FILE_BYTES} "
                    "byte a config may have",
                )
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise config_error(where, f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:  # it grew after the size check
        raise config_error(where, f"larger than the {MAX_FILE_BYTES} byte a config may have")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise config_error(
            where, f"not UTF-8 text (byte {exc.start} is {raw[exc.start]:#04x})"
        ) from None
    return parse_config_text(text, fmt, where=where)


def _open_nonblocking(path: str, flags: int) -> int:
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0))


def parse_config_text(text: str, fmt: str, *, where: str) -> dict[str, Any]:
    """Parse ``text`` as ``fmt`` (``"toml"``, ``"yaml"`` or ``"json"``) and check its tree.

    Raises:
        ConfigError: a syntax error, or a tree that fails the checks of the module doc.
    """
    text = text.removeprefix("\ufeff")
    if not text.strip():  # YAML reads it as null, JSON as a syntax error, TOML as {}
        raise config_error(where, "the file is empty; a config has a [model] section")
    try:
        if fmt == "toml":
            import tomllib

            data: object = tomllib.loads(text)
        elif fmt == "json":
            data = json.loads(
                text,
                object_pairs_hook=_json_object,
                parse_int=_json_int,
                parse_constant=_json_constant,
            )
        elif fmt == "yaml":
            data = _load_yaml(text)
        else:
            raise AssertionError(f"unknown format {fmt!r}")  # FORMATS names every parser
    except RecursionError:
        raise config_error(where, f"nested more than {MAX_DEPTH} levels deep") from None
    except MemoryError:
        raise config_error(where, "too large to parse") from None
    except ValueError as exc:  # tomllib, json and the hooks below raise ValueError subclasses
        raise config_error(where, f"not valid {fmt.upper()}: {_first_line(exc)}") from None
    except Exception as exc:  # yaml.YAMLError (the yaml module is imported lazily)
        if type(exc).__module__.startswith("yaml"):
            raise config_error(where, f"not valid YAML: {_yaml_problem(exc)}") from None
        raise
    return checked_tree(data, where=where)


def is_hf_config(data: Mapping[str, Any]) -> bool:
    """A Hugging Face config: ``model_type`` or ``architectures``, no kvunits sections."""
    return (
        "model" not in data
        and "engine" not in data
        and ("model_type" in data or "architectures" in data)
    )


def checked_tree(data: object, *, where: str) -> dict[str, Any]:
    """``data`` as a dict, if it is a mapping that passes step 3 of the module doc.

    Raises:
        ConfigError: not a mapping, or every problem of the tree (up to a limit).
    """
    if not isinstance(data, Mapping):
        raise config_error(where, f"the top level must be a table (mapping), got {_kind(data)}")
    tree = dict(data)
    issues = _tree_issues(tree, where=where, nonfinite=is_hf_config(tree))
    if issues:
        raise ConfigError(issues)
    return tree


def _tree_issues(data: dict[str, Any], *, where: str, nonfinite: bool) -> list[ConfigIssue]:
    """Step 3, iteratively (a hostile tree cannot exhaust the stack); ``nonfinite``: NaN and
    infinities pass (a Hugging Face config)."""
    issues: list[ConfigIssue] = []
    stack: list[tuple[object, str, int]] = [(data, "", 0)]
    seen: set[int] = set()
    nodes = 0
    while stack and len(issues) < MAX_ISSUES:
        node, path, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            issues.append(ConfigIssue(where, "", f"more than {MAX_NODES} values"))
            break
        if depth > MAX_DEPTH:
            issues.append(ConfigIssue(where, path, f"nested more than {MAX_DEPTH} levels deep"))
            continue
        problem: str | None = None
        if isinstance(node, (dict, list)):
            # A container reached twice is a YAML alias (or a cycle): the parsers build
            # trees otherwise. Aliases are how "billion laughs" files grow, so none pass.
            if id(node) in seen:
                issues.append(ConfigIssue(where, path, _ALIAS_MESSAGE))
                break
            seen.add(id(node))
        if isinstance(node, dict):
            children: list[tuple[object, str, int]] = []
            for key, value in node.items():
                if not isinstance(key, str):
                    issues.append(
                        ConfigIssue(where, path, f"keys must be strings, got {_kind(key)}")
                    )
                elif len(key) > MAX_KEY_CHARS:
                    issues.append(
                        ConfigIssue(
                            where,
                            path,
                            f"a key is {len(key)} characters long; at most {MAX_KEY_CHARS}",
                        )
                    )
                else:
                    children.append((value, join_path(path, key), depth + 1))
            stack.extend(reversed(children))
        elif isinstance(node, list):
            stack.extend(
                (value, f"{path}[{index}]", depth + 1)
                for index, value in reversed(list(enumerate(node)))
            )
        elif node is None or isinstance(node, bool):
            pass
        elif isinstance(node, int):
            if not -_MAX_INT - 1 <= node <= _MAX_INT:
                problem = "integer out of the int64 range"
        elif isinstance(node, float):
            if isinstance(node, _JsonConstant) and not nonfinite:
                problem = f"{node.text} is not a number a config can hold"
            elif not math.isfinite(node) and not nonfinite:
                problem = f"{node!r} is not a finite number"
        elif isinstance(node, str):
            if len(node) > MAX_STRING_CHARS:
                problem = f"a string of {len(node)} characters; at most {MAX_STRING_CHARS}"
        else:
            problem = f"unsupported value: {_kind(node)}"
        if problem is not None:
            issues.append(ConfigIssue(where, path, problem))
    return issues


# -- parsers --------------------------------------------------------------------------------


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key[:40]!r}")
        result[key] = value
    return result


def _json_int(text: str) -> int:
    # Checked before int() so that a 300 000-digit number costs nothing.
    if len(text.lstrip("-")) > 19:
        raise ValueError(f"integer {text[:24]}… is out of the int64 range")
    return int(text)


class _JsonConstant(float):
    """``NaN``, ``Infinity`` or ``-Infinity`` as a JSON file writes them (the tree check keeps
    the spelling for its message)."""

    text: str


def _json_constant(text: str) -> float:
    value = _JsonConstant(text.replace("Infinity", "inf"))
    value.text = text
    return value


def _load_yaml(text: str) -> object:
    """``yaml.safe_load`` with duplicate keys rejected; aliases are rejected by the tree check
    (an alias yields the same object twice)."""
    import yaml

    return yaml.load(text, Loader=_yaml_loader())  # a safe loader (see below)


@functools.cache
def _yaml_loader() -> type[Any]:
    """A safe loader that refuses duplicate keys; libyaml's C parser when PyYAML has it
    (about 7× faster than the pure-Python one on a 1 MiB file, and it caps nesting at 1000
    levels itself)."""
    import yaml

    base: Any = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader

    class StrictLoader(base):  # type: ignore[misc]  # the base is chosen at run time
        """A safe loader: no Python tags, no duplicate keys."""

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            keys: set[object] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in keys
                except TypeError:
                    raise yaml.constructor.ConstructorError(
                        None, None, "a mapping key must be a string", key_node.start_mark
                    ) from None
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {str(key)[:40]!r}", key_node.start_mark
                    )
                keys.add(key)
            return super().construct_mapping(node, deep=deep)

    return StrictLoader


def _yaml_problem(exc: BaseException) -> str:
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None)
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if not isinstance(problem, str):
        return _first_line(exc)
    if mark is not None:
        problem += f" (line {mark.line + 1}, column {mark.column + 1})"
    return problem


def _first_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


def _kind(value: object) -> str:
    if isinstance(value, (dict, list)):
        return f"a {type(value).__name__}"
    return describe(value)
