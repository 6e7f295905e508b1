"""Reading a config file defensively: from untrusted bytes to a plain, bounded tree.

The file is untrusted input. Before any value reaches a model it must pass, in order:

1. the file: a regular file of at most `MAX_FILE_BYTES` (read as every file a user or a cache
   names is read: ``_files``), UTF-8 text, a known extension;
2. the count: at most `MAX_NODES` values, known before the tree is built, so that a small
   file of half a million scalars costs no more to refuse than one of `MAX_NODES`. TOML and
   JSON text is pre-scanned (strings and comments skipped, separators counted: a lower bound
   of the values, so a refusal is always true); YAML values are counted as libyaml composes
   them (and, explicitly tagged ones, as they are built), and it stops at the first one too
   many;
3. the parser: ``tomllib``, ``json`` (duplicate keys rejected; an integer of more than 19
   digits is never converted, and refused in step 4 with its path) or a YAML *safe* loader
   that also rejects duplicate keys and reads the YAML 1.2 core schema: a plain scalar that
   YAML 1.1 reads otherwise (``040``, ``1:00``, ``yes``, ``1_000``, ``2024-01-01``, a ``<<``
   merge key) is refused, so that a file means the same to every YAML reader; so are
   integers beyond int64 and explicit tags that YAML 1.2 does not define;
4. the tree: a mapping at the top, nesting at most `MAX_DEPTH` deep, string keys, strings
   of at most `MAX_STRING_CHARS`, integers within int64, finite floats, only JSON-like types,
   and no value reached twice (a YAML alias, ``*ref``, of a container or a scalar: so no
   "billion laughs"). Problems found while parsing YAML are reported here, with their path.
   A Hugging Face ``config.json`` may hold ``NaN`` and ``Infinity`` (Python's ``json`` writes
   them, and published files have them in fields no cache depends on); its reader refuses
   them, with the field's path, where it reads a number.

The models then take over (``_load``): quantity strings go through the strict
``"<integer> <unit>"`` grammar of ``_text``, and the unit's *name* is looked up in the unit
table of ``units.txt`` (``_units``); user text never reaches pint.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Final

from .._describe import describe
from ..errors import ConfigError, ConfigIssue
from ._files import check_path, read_regular_file, shown_path
from ._issues import MAX_ISSUES, config_error, join_path

MAX_FILE_BYTES: Final = 1 << 20
MAX_DEPTH: Final = 32
MAX_STRING_CHARS: Final = 4096
MAX_KEY_CHARS: Final = 128
#: The most values (scalars and containers, keys not counted) a config may hold: the largest
#: real ones hold a few hundred (a Hugging Face config.json) to about 25 000 (4096 single
#: layers of a kvunits config), and parsing this many costs well under a second.
MAX_NODES: Final = 50_000
_MAX_INT: Final = 2**63 - 1

#: Parsers by file extension.
FORMATS: Final = {".toml": "toml", ".yaml": "yaml", ".yml": "yaml", ".json": "json"}

_ALIAS_MESSAGE: Final = "YAML aliases (*name) are not allowed in a kvunits config"


class _TooManyValues(Exception):
    """Raised from inside a parser when the value count passes `MAX_NODES`."""


class ValueProblem:
    """A value refused while parsing (YAML's, or a JSON integer of more digits than int64
    has), kept in the tree so that the tree check reports it with its path (a parser knows
    the line, not the field)."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and parse one config file, with the checks of steps 1–3 (module doc).

    Raises:
        ConfigError: the file cannot be read, is too large, not UTF-8, not parseable, or
            its tree is hostile (too deep, huge values, odd types).
    """
    where = shown_path(path)
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        check_path(path)  # a NUL or an over-long name, before its extension is blamed
        raise config_error(
            where,
            f"unknown extension {Path(path).suffix!r}; a config is .toml, .yaml, "
            ".yml or .json (a Hugging Face config.json is .json)",
        )
    raw = read_regular_file(path, max_bytes=MAX_FILE_BYTES, what="a config")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise config_error(
            where, f"not UTF-8 text (byte {exc.start} is {raw[exc.start]:#04x})"
        ) from None
    return parse_config_text(text, fmt, where=where)


def parse_config_text(text: str, fmt: str, *, where: str) -> dict[str, Any]:
    """Parse ``text`` as ``fmt`` (``"toml"``, ``"yaml"`` or ``"json"``) and check its tree.

    Raises:
        ConfigError: a syntax error, or a tree that fails the checks of the module doc.
    """
    text = text.removeprefix("\ufeff")
    if not text.strip():  # YAML reads it as null, JSON as a syntax error, TOML as {}
        raise config_error(where, "the file is empty; a config has a [model] section")
    too_many = config_error(where, f"more than {MAX_NODES} values")
    if fmt in _PRESCANS:
        values, keys = count_values(text, fmt)
        if values > MAX_NODES:
            raise too_many
        if keys > 2 * MAX_NODES:
            raise config_error(
                where, f"more than {2 * MAX_NODES} keys (each part of a dotted key counts)"
            )
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
    except _TooManyValues:
        raise too_many from None
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
                if isinstance(key, ValueProblem):
                    issues.append(ConfigIssue(where, path, f"a key: {key.message}"))
                elif not isinstance(key, str):
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
        elif isinstance(node, ValueProblem):
            problem = node.message
        else:
            problem = f"unsupported value: {_kind(node)}"
        if problem is not None:
            issues.append(ConfigIssue(where, path, problem))
    return issues


# -- counting values before parsing ---------------------------------------------------------

#: What a TOML pre-scan skips: strings (their content is no structure) become ``0``, comments
#: vanish. Multi-line strings first, as ``"""`` starts with ``"``.
_TOML_SKIP: Final = re.compile(
    r'"""(?:[^"\\]|\\.|"(?!""))*"{3,5}'
    r"|'''(?:[^']|'(?!''))*'{3,5}"
    r'|"(?:[^"\\\n]|\\.)*"'
    r"|'[^'\n]*'"
    r"|(?P<comment>#[^\n]*)",
    re.S,
)
#: A line that is a table header (``[a.b]``, ``[[a]]``), or a one-element array on its own
#: line inside a multi-line array (``[1]``): either way one value no separator counts.
_TOML_HEADER: Final = re.compile(
    r"^[ \t]*\[\[?[ \t]*[^\s\[\],={}][^\[\]\n,={}]*\]\]?[ \t]*\r?$", re.M
)
#: A dot that separates the parts of a dotted key (in a float or a time it has digits on
#: both sides; TOML allows no other dot outside strings).
_KEY_DOT: Final = re.compile(r"(?<![0-9])\.|\.(?![0-9])")
_JSON_STRING: Final = re.compile(r'"(?:[^"\\]|\\.)*"')


def _skip_toml(match: re.Match[str]) -> str:
    return "" if match.lastgroup == "comment" else "0"


def count_values(text: str, fmt: str) -> tuple[int, int]:
    """Lower bounds of the values and of the keys a TOML or JSON text holds, counted without
    parsing it (a few regular-expression passes at C speed: milliseconds for a 1 MiB file).

    Strings and comments are skipped; then every value needs a separator that is counted:
    in JSON each member has a ``:`` and each array element but the last a ``,``; in TOML each
    key/value pair has an ``=``, each array element but the last a ``,`` (an inline table's
    ``,`` separates pairs already counted by their ``=``, hence the larger of the two
    counts), and each table header line makes a table of its own. Keys: in JSON one per
    ``:``; in TOML one per ``=`` plus one per ``.`` not between two digits (the parts of
    dotted keys, which cost the parser as much as values).

    Example:
        >>> count_values('a.b = [1, 2, 3, 4]  # 5, 6, 7\\nc = "8, 9"', "toml")  # 8 values
        (3, 3)
    """
    if fmt == "json":
        bare = _JSON_STRING.sub("0", text)
        return max(bare.count(":"), bare.count(",")), bare.count(":")
    bare = _TOML_SKIP.sub(_skip_toml, text)
    equals = bare.count("=")
    values = max(equals, bare.count(",")) + len(_TOML_HEADER.findall(bare))
    return values, equals + len(_KEY_DOT.findall(bare))


_PRESCANS: Final = ("toml", "json")


# -- parsers --------------------------------------------------------------------------------


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key[:40]!r}")
        result[key] = value
    return result


def _json_int(text: str) -> int | ValueProblem:
    # Checked before int() so that a 300 000-digit number costs nothing; refused in the tree,
    # with its path, as YAML's are (19 digits past int64 are refused there too).
    digits = len(text.lstrip("-"))
    if digits > _MAX_INT_DIGITS:
        return ValueProblem(f"integer out of the int64 range ({digits} digits)")
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
    """Parse YAML with the loader below; aliases of containers are refused by the tree check
    (an alias yields the same object twice), every other refusal becomes a `ValueProblem`."""
    import yaml

    return yaml.load(text, Loader=_yaml_loader())  # a safe loader (see below)


#: The YAML 1.2 core schema's plain scalars (yaml.org/spec/1.2.2, 10.3.2), by tag.
_CORE_12: Final = (
    ("null", re.compile(r"~|null|Null|NULL|")),
    ("bool", re.compile(r"true|True|TRUE|false|False|FALSE")),
    ("int", re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+")),
    (
        "float",
        re.compile(
            r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
            r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
        ),
    ),
)
_TAG: Final = "tag:yaml.org,2002:"
#: Where YAML 1.1 and 1.2 agree on the type but not the value: a leading zero is octal in 1.1.
_OCTAL_11: Final = re.compile(r"[-+]?0[0-9]+")
#: Digits past which a YAML integer cannot be int64, checked before int() (which refuses
#: 4300 digits with its own message and no field path).
_MAX_INT_DIGITS: Final = 19


def _core_12_tag(value: str) -> str:
    """The YAML 1.2 core schema's tag of a plain scalar (``str`` if no other matches)."""
    for tag, pattern in _CORE_12:
        if pattern.fullmatch(value):
            return tag
    return "str"


def _yaml_11_tag(value: str) -> str:
    """The tag PyYAML's YAML 1.1 resolver gives a plain scalar."""
    from yaml.resolver import Resolver

    table = Resolver.yaml_implicit_resolvers
    for tag, pattern in [*table.get(value[:1], []), *table.get(None, [])]:
        if pattern.match(value):
            return str(tag).removeprefix(_TAG)
    return "str"


def _core_12_value(tag: str, value: str) -> object:
    """The value of a plain scalar of YAML 1.2 core tag ``tag`` (see `_CORE_12`)."""
    if tag == "null":
        return None
    if tag == "bool":
        return value.lower() == "true"
    if tag == "int":
        digits = value.lstrip("+-")
        if len(digits) > _MAX_INT_DIGITS + 2:  # past int64 in any base: no int() of it
            return ValueProblem(f"integer out of the int64 range ({len(digits)} digits)")
        if digits.startswith(("0o", "0x")):
            return int(value[2:], 8 if value[1] == "o" else 16)
        return int(value)
    if tag == "float":
        lowered = value.lower()
        if lowered.endswith((".inf", ".nan")):
            return float(lowered.replace(".", ""))
        return float(value)
    return value


def _ambiguity(value: str, tag_11: str, tag_12: str) -> str | None:
    """Why a plain scalar means something else in YAML 1.1 than in 1.2, or None."""
    if tag_11 == tag_12 and not (tag_12 == "int" and _OCTAL_11.fullmatch(value)):
        return None
    reading_11 = {
        "int": "an integer",
        "float": "a number",
        "bool": "a bool",
        "null": "null",
        "timestamp": "a date",
        "merge": "a merge key",
        "value": "a value key",
        "str": "a string",
    }.get(tag_11, tag_11)
    if tag_11 == "int" and tag_12 == "int":
        reading_11, reading_12 = f"the octal {value}", f"the decimal {value}"
    else:
        reading_12 = {"str": "a string", "int": "an integer", "float": "a number"}[tag_12]
    return (
        f"{value!r} is {reading_11} in YAML 1.1 but {reading_12} in YAML 1.2; kvunits reads "
        "YAML 1.2 and refuses what the two read differently: quote it for a string, or "
        "write the number plainly (no leading zero, '_', ':' or 0o/0b prefix)"
    )


@functools.cache
def _yaml_loader() -> type[Any]:
    """A safe loader of the YAML 1.2 core schema that refuses duplicate keys, counts values as
    they are composed, and turns every other problem into a `ValueProblem` at its place in
    the tree; libyaml's C parser when PyYAML has it (about 7× faster than the pure-Python one
    on a 1 MiB file, and it caps nesting at 1000 levels itself)."""
    import yaml

    base: Any = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader
    problem_tag = "tag:kvunits:problem"
    tags = {f"{_TAG}{name}": name for name in ("null", "bool", "int", "float", "str", "seq", "map")}

    str_tag = f"{_TAG}str"
    # First characters of a plain scalar that YAML 1.1 or 1.2 may read as other than a string
    # (the rest skip every pattern: most keys and names).
    special = {"", *"~nNtTfF+-.0123456789"} | {
        key for key in yaml.resolver.Resolver.yaml_implicit_resolvers if key is not None
    }

    class StrictLoader(base):  # type: ignore[misc]  # the base is chosen at run time
        """A safe loader: YAML 1.2 core scalars, no Python tags, no duplicate keys."""

        yaml_implicit_resolvers: ClassVar[dict[Any, Any]] = {}

        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.nodes = 0  # composed (resolve), then built (construct_object)
            self.built = 0
            self.tags: dict[str, str] = {}  # the tag of each plain scalar seen, by its text
            self.problems: dict[str, str] = {}

        def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
            # libyaml's composer calls this for every node without an explicit tag: the
            # place to count values before the tree is built. Keys are nodes too, and every
            # key has a value: more than 2 × MAX_NODES nodes are more than MAX_NODES values.
            self.nodes += 1
            if self.nodes > 2 * MAX_NODES:
                raise _TooManyValues
            if kind is not yaml.ScalarNode:
                return f"{_TAG}seq" if kind is yaml.SequenceNode else f"{_TAG}map"
            if not implicit[0] or value[:1] not in special:  # a string in every YAML
                return str_tag
            tag = self.tags.get(value)
            if tag is None:
                tag_12 = _core_12_tag(value)
                why = _ambiguity(value, _yaml_11_tag(value), tag_12)
                if why is not None:
                    self.problems[value] = why
                tag = self.tags[value] = problem_tag if why else f"{_TAG}{tag_12}"
            return tag

        def construct_object(self, node: Any, deep: bool = False) -> Any:
            # Explicitly tagged nodes (!!str 1) never reach resolve: count them here, before
            # building more of them.
            self.built += 1
            if self.built > 2 * MAX_NODES:
                raise _TooManyValues
            if isinstance(node, yaml.ScalarNode) and node in self.constructed_objects:
                # The same scalar node twice: an alias of it (containers are caught by the
                # tree check, which then names the alias's path).
                return ValueProblem(_ALIAS_MESSAGE)
            return super().construct_object(node, deep=deep)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            # Duplicates are found on the nodes: constructing a key here and again in the
            # base class would look like an alias of it.
            keys: set[tuple[str, str]] = set()
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    raise yaml.constructor.ConstructorError(
                        None, None, "a mapping key must be a string", key_node.start_mark
                    )
                key = (key_node.tag, key_node.value)
                if key in keys:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"duplicate key {key_node.value[:40]!r}",
                        key_node.start_mark,
                    )
                keys.add(key)
            return super().construct_mapping(node, deep=deep)

    def construct_scalar(loader: Any, node: Any) -> object:
        # An explicit !!int, !!bool, !!null or !!float, or a plain scalar resolved above: its
        # text must be the YAML 1.2 form of its tag (PyYAML's own constructors read 1.1).
        value = loader.construct_scalar(node)
        tag = tags[node.tag]
        if tag == "str":
            return value
        if _core_12_tag(value) != tag and not (tag == "float" and _core_12_tag(value) == "int"):
            return ValueProblem(f"{value!r} is not a YAML 1.2 {tag}")
        why = _ambiguity(value, _yaml_11_tag(value), _core_12_tag(value))
        if why is not None:
            return ValueProblem(why)
        result = _core_12_value(_core_12_tag(value), value)
        return float(result) if tag == "float" and isinstance(result, int) else result

    def construct_problem(loader: Any, node: Any) -> object:
        return ValueProblem(loader.problems[node.value])

    def construct_other(loader: Any, node: Any) -> object:
        return ValueProblem(
            f"the tag {str(node.tag)[:60]} is not one of YAML 1.2's core schema (a kvunits "
            "config holds mappings, lists, strings, numbers, bools and nulls)"
        )

    StrictLoader.yaml_constructors = {
        **{tag: construct_scalar for tag, name in tags.items() if name not in ("seq", "map")},
        f"{_TAG}seq": base.yaml_constructors[f"{_TAG}seq"],
        f"{_TAG}map": base.yaml_constructors[f"{_TAG}map"],
        problem_tag: construct_problem,
        None: construct_other,
    }
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
