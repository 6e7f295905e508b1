"""Config problems as `ConfigIssue`\\ s: pydantic's errors translated for people.

A pydantic error names a location tuple and a type; an issue names the dotted path of the
field in the file (``model.groups.audio.sliding_window``), the expected unit and what was
given, in words: ``expected a whole number of kv_head (a plain integer); got '8' (a str)``.
"""

from __future__ import annotations

import re
from typing import Any, Final

from pydantic import ValidationError

from .._describe import describe
from ..errors import ConfigError, ConfigIssue
from ._models import KINDS

#: The most issues reported for one file (a hostile file can have millions).
MAX_ISSUES: Final = 50

#: The unit of the plain-integer fields, for messages (the quantity fields name their own).
_COUNT_UNITS: Final = {
    "count": "layer",
    "kv_heads": "kv_head",
    "head_size": "element",
    "head_size_v": "element",
    "kv_lora_rank": "element",
    "qk_rope_head_dim": "element",
    "intermediate_size": "element",
    "ssm_state_size": "element",
    "head_dim": "element",
    "head_k_dim": "element",
    "head_v_dim": "element",
    "num_heads": "head",
    "num_k_heads": "head",
    "num_v_heads": "head",
    "n_groups": "group",
    "conv_kernel": "token",
    "block_size_slots": "slot per cache_block",
    "pool": "encoder_token per pooled_block",
}

#: The unit of the quantity fields whose unit does not depend on the group, and an example.
_QUANTITY_UNITS: Final = {
    "encoder_length": ("encoder_token", "1500 encoder_token"),
    "state_size": ("byte", "1 MiB"),
}

#: Pydantic's bound errors, in words.
_BOUNDS: Final = {
    "greater_than_equal": ("ge", "greater than or equal to"),
    "greater_than": ("gt", "greater than"),
    "less_than_equal": ("le", "less than or equal to"),
    "less_than": ("lt", "less than"),
}


def config_error(where: str, message: str) -> ConfigError:
    """A `ConfigError` with one issue about the whole of ``where`` (no field path)."""
    return ConfigError([ConfigIssue(where, "", message)])


def issues_from_validation(
    error: ValidationError, where: str, prefix: tuple[str | int, ...] = ()
) -> list[ConfigIssue]:
    """One `ConfigIssue` per pydantic error, with the dotted path of the field in the file."""
    issues = []
    for item in error.errors(include_url=False)[:MAX_ISSUES]:
        loc = _strip_kind(prefix + tuple(item["loc"]))
        field = next((str(part) for part in reversed(loc) if isinstance(part, str)), "")
        issues.append(ConfigIssue(where, format_loc(loc), message_of(item, field)))
    return issues


def _strip_kind(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    # A tagged union puts the tag in the location: model.groups.audio.<kind>.sliding_window.
    if len(loc) > 3 and loc[0] == "model" and loc[1] in ("groups", "layers") and loc[3] in KINDS:
        return loc[:3] + loc[4:]
    return loc


def format_loc(loc: tuple[str | int, ...]) -> str:
    """A pydantic location as the dotted path of the field in the file.

    Example:
        >>> format_loc(("model", "groups", "audio", "sliding_window"))
        'model.groups.audio.sliding_window'
        >>> format_loc(("model", "groups", "a.b", "[key]"))
        "model.groups['a.b'] (the name)"
    """
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part == "[key]":
            path += " (the name)"
        else:
            path = join_path(path, part)
    return path


def join_path(path: str, key: str) -> str:
    """``path.key``, quoting a key that is not a plain name."""
    if re.fullmatch(r"[A-Za-z0-9_\-]{1,64}", key):
        return f"{path}.{key}" if path else key
    shown = key if len(key) <= 40 else key[:37] + "..."
    return f"{path}[{shown!r}]"


def message_of(item: Any, field: str) -> str:
    """The message of one pydantic error (``item``) about ``field``, for people."""
    kind = item["type"]
    message = str(item["msg"]).removeprefix("Value error, ")
    given = item.get("input")
    if kind == "unit_error":
        expected = (item.get("ctx") or {}).get("expected")
        if expected and "expected" not in message:
            message += f" (expected {expected})"
        return message
    if kind in ("value_error", "assertion_error"):
        return message  # a check of ours: its message already names the value
    if kind == "missing":
        expected = _expected(field, given)
        return "required field is missing" + (f"; expected {expected}" if expected else "")
    if kind == "extra_forbidden":
        return f"unknown field (got {_shown(given)}); see `kvunits schema` for the format"
    if kind == "union_tag_not_found":
        return "missing kind: one of " + ", ".join(KINDS)
    if kind == "union_tag_invalid":
        tag = given.get("kind") if isinstance(given, dict) else given
        return f"unknown kind {describe(tag)}; one of " + ", ".join(KINDS)
    unit = _COUNT_UNITS.get(field)
    if unit is not None and kind in ("int_type", "int_parsing", "int_from_float"):
        message = f"expected a whole number of {unit} (a plain integer)"
    elif unit is not None and kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        message = f"expected a whole number of {unit}, {words} {(item.get('ctx') or {})[key]}"
    elif kind == "dict_type":
        message = "expected a table (mapping)"
    return f"{message}; got {_shown(given)}"


def _expected(field: str, parent: object) -> str | None:
    """The unit a missing field is written in (``parent`` is its group's input)."""
    if field in _COUNT_UNITS:
        return f"a whole number of {_COUNT_UNITS[field]}"
    if field in _QUANTITY_UNITS:
        unit, example = _QUANTITY_UNITS[field]
    elif field in ("sliding_window", "chunk"):
        pools = isinstance(parent, dict) and parent.get("pool") is not None
        unit = "encoder_token (the group pools)" if pools else "token (the group has no pool)"
        example = "750 encoder_token" if pools else "4096 token"
    else:
        return None
    return f'{unit}, e.g. {field} = "{example}"'


def _shown(value: object) -> str:
    # describe() says "a bare int, no unit" of an int: right for a quantity, misleading for
    # the fields reported here (counts, names, dtypes), which take no unit.
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value} (an int)"
    return describe(value)
