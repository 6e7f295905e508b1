"""Where a config problem is in its file: line and column, for ``kvunits check --format json``.

A `ConfigIssue` names the field by its dotted path (``model.groups.audio.sliding_window``); CI
annotations and editors want a line and a column. This module finds the key of that path in
the file's text (the longest prefix of it that the file has: a missing field points at its
table), or reads them from a syntax error's message (every parser kvunits uses gives them).
JSON and YAML keys are found with their parsers' positions (``json.decoder.scanstring``,
PyYAML's nodes); TOML keys with a line scanner of table headers, keys and one-line inline
tables (``tomllib`` keeps no positions). Lines and columns count from 1; a column counts
characters. Locating is best effort and never raises: no position is ``None``.
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

Key = tuple[str | int, ...]
Position = tuple[int, int]

#: The most a located file may hold (the loader refuses larger ones anyway).
_MAX_BYTES: Final = 1 << 20
_SYNTAX: Final = re.compile(r"line (\d+),? column (\d+)")
_PART: Final = re.compile(
    r"""\.?(?P<name>[A-Za-z0-9_\-]+)|\[(?P<quoted>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")\]"""
    r"|\[(?P<index>[0-9]+)\]"
)


def locate(file: str, field: str, message: str) -> Position | None:
    """The line and column of ``field`` in ``file`` (or of the syntax error ``message`` gives).

    Args:
        file: the config file.
        field: the issue's dotted path, as `ConfigIssue.path` writes it; empty for the file.
        message: the issue's message (a syntax error's carries its position).
    """
    found = _SYNTAX.search(message) if not field else None
    if found:
        return int(found[1]), int(found[2])
    parts = field_parts(field)
    if not parts:
        return None
    try:
        raw = Path(file).read_bytes()[: _MAX_BYTES + 1]
        if len(raw) > _MAX_BYTES:
            return None
        text = raw.decode("utf-8").removeprefix("\ufeff")
        keys = _KEYS[Path(file).suffix.lower()](text)
    except (OSError, UnicodeDecodeError, KeyError):
        return None
    for end in range(len(parts), 0, -1):
        if parts[:end] in keys:
            return keys[parts[:end]]
    return None


def field_parts(field: str) -> Key:
    """The keys of a dotted path (``model.layers['a.b'].kv_heads``); ``()`` if unreadable.

    Example:
        >>> field_parts("model.layers['text.0'].kv_heads")
        ('model', 'layers', 'text.0', 'kv_heads')
    """
    field = field.removesuffix(" (the name)")
    parts: list[str | int] = []
    at = 0
    while at < len(field):
        match = _PART.match(field, at)
        if match is None:
            return ()
        if match["name"] is not None:
            parts.append(match["name"])
        elif match["quoted"] is not None:
            parts.append(str(ast.literal_eval(match["quoted"])))
        else:
            parts.append(int(match["index"]))
        at = match.end()
    return tuple(parts)


class _Lines:
    """Offsets to (line, column), both from 1."""

    def __init__(self, text: str) -> None:
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def at(self, offset: int) -> Position:
        line = bisect.bisect_right(self._starts, offset)
        return line, offset - self._starts[line - 1] + 1


# -- JSON -------------------------------------------------------------------------------------


_DECODER: Final = json.JSONDecoder()


def _json_keys(text: str) -> dict[Key, Position]:
    found: dict[Key, Position] = {}
    lines = _Lines(text)
    # What was found before the text stopped making sense (a file refused for its syntax).
    with contextlib.suppress(IndexError, ValueError, RecursionError):
        _json_value(text, 0, (), found, lines)
    return found


def _skip(text: str, at: int) -> int:
    while text[at] in " \t\r\n":
        at += 1
    return at


def _json_value(text: str, at: int, path: Key, found: dict[Key, Position], lines: _Lines) -> int:
    at = _skip(text, at)
    char = text[at]
    if char == "{":
        at = _skip(text, at + 1)
        while text[at] != "}":
            key, end = _DECODER.raw_decode(text, at)
            if not isinstance(key, str):
                raise ValueError("a key that is not a string")
            found.setdefault((*path, key), lines.at(at))
            at = _skip(text, end)
            if text[at] != ":":
                raise ValueError("no colon")
            at = _skip(text, _json_value(text, at + 1, (*path, key), found, lines))
            if text[at] == ",":
                at = _skip(text, at + 1)
        return at + 1
    if char == "[":
        at, index = _skip(text, at + 1), 0
        while text[at] != "]":
            found.setdefault((*path, index), lines.at(at))
            at = _skip(text, _json_value(text, at, (*path, index), found, lines))
            if text[at] == ",":
                at, index = _skip(text, at + 1), index + 1
        return at + 1
    return int(_DECODER.raw_decode(text, at)[1])  # a string, number, true, false, null


# -- YAML -------------------------------------------------------------------------------------


def _yaml_keys(text: str) -> dict[Key, Position]:
    import yaml

    found: dict[Key, Position] = {}
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        root = yaml.compose(text, Loader=loader)
    except yaml.YAMLError:
        return found
    stack: list[tuple[Key, Any]] = [((), root)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    found.setdefault((*path, key.value), _mark(key))
                    stack.append(((*path, key.value), value))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                found.setdefault((*path, index), _mark(item))
                stack.append(((*path, index), item))
    return found


def _mark(node: Any) -> Position:
    return node.start_mark.line + 1, node.start_mark.column + 1


# -- TOML -------------------------------------------------------------------------------------

_TOML_KEY: Final = r"""(?:[A-Za-z0-9_\-]+|"(?:[^"\\]|\\.)*"|'[^']*')"""
_TOML_DOTTED: Final = rf"{_TOML_KEY}(?:[ \t]*\.[ \t]*{_TOML_KEY})*"
_TOML_HEADER: Final = re.compile(rf"[ \t]*(\[\[?)[ \t]*({_TOML_DOTTED})[ \t]*\]\]?")
_TOML_PAIR: Final = re.compile(rf"[ \t]*({_TOML_DOTTED})[ \t]*=")
_TOML_INLINE_PAIR: Final = re.compile(rf"[{{,][ \t]*({_TOML_DOTTED})[ \t]*=")


def _toml_parts(dotted: str) -> Iterator[str]:
    for match in re.finditer(_TOML_KEY, dotted):
        key = match[0]
        yield json.loads(key) if key[0] == '"' else key.strip("'")


def _toml_keys(text: str) -> dict[Key, Position]:
    found: dict[Key, Position] = {}
    table: Key = ()
    arrays: dict[Key, int] = {}
    keys: Key
    in_string: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if in_string is not None:  # inside a multi-line string: its end, if here
            if line.count(in_string) % 2:
                in_string = None
            continue
        header = _TOML_HEADER.match(line)
        if header:
            keys = tuple(_toml_parts(header[2]))
            if header[1] == "[[":
                arrays[keys] = arrays.get(keys, -1) + 1
                keys = (*keys, arrays[keys])
            table = keys
            _record(found, table, (number, header.start(2) + 1))
            continue
        pair = _TOML_PAIR.match(line)
        if not pair:
            continue
        keys = (*table, *_toml_parts(pair[1]))  # the key, within its table
        _record(found, keys, (number, pair.start(1) + 1))
        rest = line[pair.end() :]
        for quote in ('"""', "'''"):
            if rest.count(quote) % 2:
                in_string = quote
        if rest.lstrip().startswith("{"):  # a one-line inline table: its keys too
            start = pair.end() + rest.index("{")
            for inner in _TOML_INLINE_PAIR.finditer(line, start):
                _record(found, (*keys, *_toml_parts(inner[1])), (number, inner.start(1) + 1))
    return found


def _record(found: dict[Key, Position], keys: Sequence[str | int], at: Position) -> None:
    # A dotted key or header also places each table it opens (the first place wins).
    for end in range(1, len(keys) + 1):
        found.setdefault(tuple(keys[:end]), at)


_KEYS: Final = {".json": _json_keys, ".yaml": _yaml_keys, ".yml": _yaml_keys, ".toml": _toml_keys}


#: Where an issue may come from other than a file (`ConfigIssue.where`).
_NOT_FILES: Final = ("environment", "command line", "built-in defaults")


def error_records(config: str, error: Exception) -> list[dict[str, Any]]:
    """The errors of one checked config, located, as ``kvunits check --format json`` lists
    them: ``config`` (the argument), ``source`` (``file``, ``environment``, ``command line``,
    ``built-in defaults``), ``file``, ``line`` and ``column`` (``null`` where the problem is
    not in a file, or cannot be placed), ``field`` and ``message``."""
    from kvunits.contracts.errors import ConfigError, ConfigIssue

    issues = (
        error.issues if isinstance(error, ConfigError) else (ConfigIssue(config, "", str(error)),)
    )
    records = []
    for issue in issues:
        in_file = issue.where not in _NOT_FILES
        position = locate(issue.where, issue.path, issue.message) if in_file else None
        records.append(
            {
                "config": config,
                "source": "file" if in_file else issue.where,
                "file": issue.where if in_file else None,
                "line": position[0] if position else None,
                "column": position[1] if position else None,
                "field": issue.path or None,
                "message": issue.message,
            }
        )
    return records
