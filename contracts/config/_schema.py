"""The JSON Schema of a kvunits config file: the loader's rules, wherever JSON Schema can say them.

pydantic derives a schema from `ConfigFile`; this module tightens it until an editor or a CI
validator that uses it agrees with `load_config` on every rule JSON Schema can express (a
differential test over generated configs holds the two together):

* a quantity is ``"<integer> <unit>"`` with one of the unit *names* the registry accepts for
  the field's unit (aliases and plurals included: ``"750 encoder_tokens"``, ``"40 GiB"``),
  a number that is not zero, spaces or tabs between the two, ASCII whitespace around, at most
  64 characters once stripped; a window or chunk counts encoder_token when its group pools
  (``pool`` set) and token otherwise;
* a dtype is any name `CacheDType.parse` takes (``bf16``, ``FP8``, ``torch.bfloat16``) and
  ``cache_dtype`` may also be ``auto``, in any case, with ASCII whitespace around;
* group and layer names match their patterns (no dot in a group name), a single layer takes
  no ``count``, and a model declares at least one layer;
* an engine setting is null only where the engine takes None (``cache_dtype``, the encoder
  limits, ``memory_budget`` beside ``gpu_memory``): null is a value in the file, not "not
  given".

Editors read it as well (one mistake, one error): a layer's ``kind`` picks its definition
with standard ``if``/``then`` branches, not pydantic's ``discriminator`` (an OpenAPI keyword
JSON Schema validators ignore, leaving a ``oneOf`` that reports every kind that did not
match), and a window's unit is checked once, by the branch its group's ``pool`` selects. The
schema has an ``$id`` (`SCHEMA_ID`), and a file may name its schema for its editor: a
``"$schema"`` key (JSON, or TOML), ``#:schema`` (TOML) or the ``yaml-language-server``
modeline (YAML) are comments or ignored by the loader.

Patterns end with ``(?![\\s\\S])``, not ``$``: in Python's ``re`` (which python-jsonschema
uses) ``$`` also matches before a final newline, in ECMA 262 (the standard's dialect) it does
not; the lookahead means "end of the text" in both.

A number with a zero fraction is an integer to JSON Schema, which cannot refuse it, and so it
is to the loader too (``count = 32.0`` is 32; ``32.5`` is refused by both).

What JSON Schema cannot say stays with the loader, and the schema's description lists it:
a quantity's bound of 2**63 - 1 once converted to the field's unit (``"8388608 TiB"``); rules
across fields (layer names that collide, more than 4096 layers in all, a pooled chunk that is
not a whole number of pooled blocks); settings the environment or flags may give instead of the
file (``max_model_len``; the encoder limits a pooled layer needs); the limits on the file
itself (1 MiB, nesting, value count, YAML forms).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any, Final

from .._dtype import _ALIASES, CacheDType
from .._engine import EngineSpec
from .._quantity import IntQuantity, quantity_class_for_unit

#: The whitespace a quantity, a dtype or ``auto`` may have around it (the loader strips it).
SPACE: Final = " \t\n\r\f\v"
_WS: Final = r"[ \t\n\r\f\v]*"
#: "End of the text" in ECMA 262 and Python alike (see the module docstring).
_END: Final = r"(?![\s\S])"

#: The schema's identifier (``$id``): the config format, not a place to fetch it from.
#: ``kvunits schema > kvunits.schema.json`` writes a copy an editor can read.
SCHEMA_ID: Final = "urn:kvunits:config"

_DESCRIPTION: Final = (
    "A kvunits config (TOML, YAML or JSON). An integer field takes a number with a zero "
    "fraction as the integer it equals (count = 32.0 is 32), as JSON Schema reads it. The "
    "loader also checks what JSON Schema cannot say: a quantity converted to its field's "
    "unit is at most 2**63 - 1; layer names (g.0, g.1, …) do not collide and number at "
    "most 4096; a pooled chunk is a whole number of pooled blocks; max_model_len, and "
    "max_encoder_len and max_encoder_tokens_per_step for a model with pooled layers, are "
    "given by the file, the environment (KVUNITS_*) or flags; a file is at most 1 MiB, 32 "
    "levels deep and 50000 values, and YAML is read as YAML 1.2 with no aliases and no "
    "plain scalar that YAML 1.1 reads otherwise."
)


def config_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a kvunits config file (``kvunits schema``).

    Example:
        >>> schema = config_json_schema()
        >>> schema["$defs"]["EngineConfig"]["properties"]["max_num_batched_tokens"]["x-unit"]
        'token'
    """
    from ._models import ConfigFile

    schema: dict[str, Any] = ConfigFile.model_json_schema()
    defs: dict[str, Any] = schema["$defs"]
    for node in _walk(schema):
        _tighten(node)
    for node in list(_walk(schema)):
        _branch_on_kind(node)
    defs["CacheDType"] = _dtype_schema(auto=False)
    engine = defs["EngineConfig"]["properties"]
    engine["cache_dtype"] = {
        "anyOf": [_dtype_schema(auto=True), {"type": "null"}],
        "default": None,
        "description": engine["cache_dtype"].get("description", ""),
        "title": "Cache Dtype",
    }
    for name, spec_field in EngineSpec.model_fields.items():
        # null in the file is a value, not "not given": only where the engine takes None.
        branches = engine[name].get("anyOf")
        if spec_field.default is not None and branches:
            kept = [b for b in branches if b != {"type": "null"}]
            engine[name] = {
                **{k: v for k, v in engine[name].items() if k not in ("anyOf", "default")},
                **(kept[0] if len(kept) == 1 else {"anyOf": kept}),
            }
    for name, definition in defs.items():
        if name.endswith("Group"):
            _unit_follows_pool(definition)
    for node in _walk(schema):
        _nullable(node)
    model = defs["ModelConfig"]
    for field in ("groups", "layers"):
        entries = model["properties"][field]
        ((pattern, entry),) = entries.pop("patternProperties").items()
        if field == "layers":
            entry = {"allOf": [entry, {"not": {"required": ["count"]}}]}
        entries["patternProperties"] = {_portable(pattern): entry}
        entries["additionalProperties"] = False
    model["anyOf"] = [
        {"required": [field], "properties": {field: {"minProperties": 1}}}
        for field in ("groups", "layers")
    ]
    # A file may name its schema for its editor (JSON, TOML): the loader ignores the key.
    schema["properties"] = {
        "$schema": {"type": "string", "description": "the schema, for editors (ignored)"},
        **schema["properties"],
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **schema,
        "description": _DESCRIPTION,
    }


def _walk(node: object) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _tighten(node: dict[str, Any]) -> None:
    """A quantity's pattern names its units."""
    unit = node.get("x-unit")
    if node.get("type") == "string" and "pattern" in node and unit is not None:
        units = [unit] if isinstance(unit, str) else list(unit)
        node["pattern"] = quantity_pattern(*(quantity_class_for_unit(u) for u in units))


def _nullable(node: dict[str, Any]) -> None:
    """``anyOf: [X, null]`` as X with ``"type": [t, "null"]``: the same values, and a wrong
    one is one error (X's), not X's and "is not null"."""
    branches = node.get("anyOf")
    if not isinstance(branches, list) or len(branches) != 2 or {"type": "null"} not in branches:
        return
    (other,) = [b for b in branches if b != {"type": "null"}]
    if not isinstance(other.get("type"), str):  # a $ref, or a union of its own
        return
    del node["anyOf"]
    node.update({key: value for key, value in other.items() if key not in node})
    node["type"] = [other["type"], "null"]


def _branch_on_kind(node: dict[str, Any]) -> None:
    """pydantic's ``discriminator`` + ``oneOf`` as standard JSON Schema: ``kind`` is one of
    the names, and the branch whose ``kind`` matches applies (``if``/``then``), so a mistake
    in a layer is one error, not one per kind."""
    discriminator = node.pop("discriminator", None)
    if discriminator is None:
        return
    tag: str = discriminator["propertyName"]
    mapping: dict[str, str] = discriminator["mapping"]
    node.pop("oneOf")
    node["type"] = "object"
    node["required"] = [tag]
    node["properties"] = {tag: {"enum": sorted(mapping)}}
    node["allOf"] = [
        {
            "if": {"properties": {tag: {"const": name}}, "required": [tag]},
            "then": {"$ref": ref},
        }
        for name, ref in sorted(mapping.items())
    ]


def _unit_follows_pool(group: dict[str, Any]) -> None:
    """A window or chunk counts encoder_token when the group pools, token otherwise; the
    branch alone checks the unit (one error for a wrong one, not two)."""
    fields = [f for f in ("sliding_window", "chunk") if f in group.get("properties", {})]
    if not fields or "pool" not in group["properties"]:
        return
    for field in fields:
        group["properties"][field].pop("pattern", None)
    # Any pool that is not null (a wrong one too: its own error) selects encoder_token.
    group["if"] = {"properties": {"pool": {"not": {"type": "null"}}}, "required": ["pool"]}
    for branch, cls in (("then", "encoder_token"), ("else", "token")):
        pattern = quantity_pattern(quantity_class_for_unit(cls))
        group[branch] = {"properties": {f: {"pattern": pattern} for f in fields}}


@functools.cache
def unit_names(unit: str) -> tuple[str, ...]:
    """Every unit name the registry reads as ``unit``'s dimension: names, symbols, aliases and
    the plurals pint accepts (longest first, for the pattern's alternation)."""
    from .._units import unit_named, unit_table

    target = unit_named(unit)
    assert target is not None, f"{unit!r} is not in units.txt"
    names = [name for name, info in unit_table().items() if info.dimension == target.dimension]
    return tuple(sorted(names, key=lambda n: (-len(n), n)))


def quantity_pattern(*classes: type[IntQuantity]) -> str:
    """The pattern of a quantity string of one of ``classes`` (see the module docstring)."""
    names = "|".join(n for cls in classes for n in unit_names(cls.unit))
    return (
        f"^{_WS}"
        r"(?=[0-9_, \tA-Za-z]{1,64}[ \t\n\r\f\v]*(?![\s\S]))"  # at most 64 once stripped
        r"(?=[0-9_,]*[1-9])"  # not zero
        rf"[0-9][0-9_,]{{0,24}}[ \t]*(?:{names}){_WS}{_END}"
    )


def _dtype_schema(*, auto: bool) -> dict[str, Any]:
    names = sorted({*(d.value for d in CacheDType), *_ALIASES} | ({"auto"} if auto else set()))
    spelled = "|".join(_any_case(n) for n in sorted(names, key=lambda n: (-len(n), n)))
    return {
        "type": "string",
        "pattern": f"^{_WS}(?:{spelled}){_WS}{_END}",
        "description": "a cache dtype, any case: "
        + ", ".join(d.value for d in CacheDType)
        + " or an alias ("
        + ", ".join(sorted(_ALIASES))
        + ")"
        + ("; auto keeps each layer's own" if auto else ""),
        "examples": ["bfloat16", "fp8"] + (["auto"] if auto else []),
    }


def _any_case(name: str) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in name)


def _portable(pattern: str) -> str:
    return pattern.removesuffix("$") + _END
