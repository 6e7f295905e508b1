"""Loading a config: read the file defensively, validate it, resolve the engine settings.

The file is untrusted input. Before any value reaches a model it must pass, in order:

1. the file: a regular file of at most `MAX_FILE_BYTES`, UTF-8 text, a known extension;
2. the parser: ``tomllib``, ``json`` (duplicate keys, NaN/Infinity and integers of more
   than 19 digits rejected) or a YAML *safe* loader that also rejects aliases (``*ref``,
   so no "billion laughs") and duplicate keys;
3. the tree: a mapping at the top, nesting at most `MAX_DEPTH` deep, string keys, strings
   of at most `MAX_STRING_CHARS`, integers within int64, finite floats, only JSON-like types;
4. the models: quantity strings go through the strict ``"<integer> <unit>"`` grammar of
   ``_registry`` before pint sees a unit *name*; pint's expression evaluator never sees
   user text.

Every problem found is collected and raised together as one `ConfigError`.

Engine settings resolve with this precedence, highest first: a command-line flag, a
``KVUNITS_*`` environment variable, the file (or what the Hugging Face adapter derives from
it), the built-in `ENGINE_DEFAULTS`.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from ._config import (
    ENGINE_DEFAULTS,
    ENGINE_FIELDS,
    KINDS,
    ConfigError,
    ConfigIssue,
    EngineConfig,
    KvUnitsConfig,
    ModelConfig,
)
from ._engine import EngineSpec
from ._layers import LayerSpec, ModelSpec, slot_unit_of
from ._quantity import PooledBlocks, describe

MAX_FILE_BYTES: Final = 1 << 20
MAX_DEPTH: Final = 32
MAX_STRING_CHARS: Final = 4096
MAX_KEY_CHARS: Final = 128
MAX_NODES: Final = 100_000
_MAX_INT: Final = 2**63 - 1
_MAX_ISSUES: Final = 50

#: Parsers by file extension.
FORMATS: Final = {".toml": "toml", ".yaml": "yaml", ".yml": "yaml", ".json": "json"}

ENV_PREFIX: Final = "KVUNITS_"

# -- reading --------------------------------------------------------------------------------


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and parse one config file, with the checks of steps 1–3 (module doc).

    Raises:
        ConfigError: the file cannot be read, is too large, not UTF-8, not parseable, or
            its tree is hostile (too deep, huge values, odd types).
    """
    where = str(path)
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise _error(
            where,
            f"unknown extension {Path(path).suffix!r}; a config is .toml, .yaml, "
            ".yml or .json (a Hugging Face config.json is .json)",
        )
    try:
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise _error(where, "not a regular file")
            if info.st_size > MAX_FILE_BYTES:
                raise _error(
                    where,
                    f"{info.st_size} byte is larger than the {MAX_FILE_BYTES} "
                    "byte a config may have",
                )
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise _error(where, f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise _error(where, f"larger than the {MAX_FILE_BYTES} byte a config may have")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _error(where, f"not UTF-8 text (byte {exc.start} is {raw[exc.start]:#04x})") from None
    return parse_config_text(text, fmt, where=where)


def parse_config_text(text: str, fmt: str, *, where: str) -> dict[str, Any]:
    """Parse ``text`` as ``fmt`` (``"toml"``, ``"yaml"`` or ``"json"``) and check its tree.

    Raises:
        ConfigError: a syntax error, or a tree that fails the checks of the module doc.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
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
            raise ValueError(f"unknown format {fmt!r}")
    except RecursionError:
        raise _error(where, f"nested more than {MAX_DEPTH} levels deep") from None
    except MemoryError:
        raise _error(where, "too large to parse") from None
    except ValueError as exc:  # tomllib, json and the hooks below raise ValueError subclasses
        raise _error(where, f"not valid {fmt.upper()}: {_first_line(exc)}") from None
    except Exception as exc:  # yaml.YAMLError (the yaml module is imported lazily)
        if type(exc).__module__.startswith("yaml"):
            raise _error(where, f"not valid YAML: {_yaml_problem(exc)}") from None
        raise
    if not isinstance(data, dict):
        raise _error(where, f"the top level must be a table (mapping), got {_kind(data)}")
    issues = check_tree(data, where=where)
    if issues:
        raise ConfigError(issues)
    return data


def check_tree(data: object, *, where: str) -> list[ConfigIssue]:
    """Step 3 of the module doc, iteratively (a hostile tree cannot exhaust the stack)."""
    issues: list[ConfigIssue] = []
    stack: list[tuple[object, str, int]] = [(data, "", 0)]
    seen: set[int] = set()
    nodes = 0
    while stack and len(issues) < _MAX_ISSUES:
        node, path, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            issues.append(ConfigIssue(where, "", f"more than {MAX_NODES} values"))
            break
        if depth > MAX_DEPTH:
            issues.append(ConfigIssue(where, path, f"nested more than {MAX_DEPTH} levels deep"))
            continue
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
                issues.append(ConfigIssue(where, path, "integer out of the int64 range"))
        elif isinstance(node, float):
            if not math.isfinite(node):
                issues.append(ConfigIssue(where, path, f"{node!r} is not a finite number"))
        elif isinstance(node, str):
            if len(node) > MAX_STRING_CHARS:
                issues.append(
                    ConfigIssue(
                        where,
                        path,
                        f"a string of {len(node)} characters; at most {MAX_STRING_CHARS}",
                    )
                )
        else:
            issues.append(ConfigIssue(where, path, f"unsupported value: {_kind(node)}"))
    return issues


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


def _json_constant(text: str) -> float:
    raise ValueError(f"{text} is not a number a config can hold")


_YAML_LOADER: type[Any] | None = None


def _load_yaml(text: str) -> object:
    """``yaml.safe_load`` with duplicate keys rejected; aliases are rejected by `check_tree`.

    libyaml's C parser is used when PyYAML has it (about 7× faster than the pure-Python one
    on a 1 MiB file, and it caps nesting at 1000 levels itself); the pure-Python fallback
    rejects aliases while composing.
    """
    global _YAML_LOADER
    import yaml

    if _YAML_LOADER is None:
        base: Any = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader

        class StrictLoader(base):  # type: ignore[misc]  # the base is chosen at run time
            """A safe loader: no Python tags, no duplicate keys, no aliases."""

            def compose_node(self, parent: Any, index: Any) -> Any:  # pure-Python loader only
                if self.check_event(yaml.AliasEvent):
                    event = self.peek_event()
                    raise yaml.composer.ComposerError(None, None, _ALIAS_MESSAGE, event.start_mark)
                return super().compose_node(parent, index)

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

        _YAML_LOADER = StrictLoader
    return yaml.load(text, Loader=_YAML_LOADER)  # a safe loader (see above)


_ALIAS_MESSAGE: Final = "YAML aliases (*name) are not allowed in a kvunits config"


# -- validation -----------------------------------------------------------------------------


def load_config(
    path: str | os.PathLike[str], *, flags: Mapping[str, object] | None = None
) -> KvUnitsConfig:
    """Load a kvunits config (TOML, YAML, JSON) or a Hugging Face ``config.json``.

    Args:
        path: the file; its extension picks the parser. A JSON file with ``model_type`` or
            ``architectures`` and no ``model``/``engine`` section is read as a Hugging Face
            config (see ``contracts._hf``).
        flags: engine settings from the command line, by field name (highest precedence).

    Raises:
        ConfigError: every problem of the file, the environment and the flags, together.

    Example:
        >>> cfg = load_config("examples/voxtral_realtime.toml")
        >>> str(cfg.engine.memory_budget)
        '42949672960 byte'
    """
    data = read_config_file(path)
    parent = Path(path).resolve().parent.name
    return load_config_data(data, where=str(path), flags=flags, name=parent or None)


def load_config_data(
    data: Mapping[str, Any],
    *,
    where: str,
    flags: Mapping[str, object] | None = None,
    name: str | None = None,
) -> KvUnitsConfig:
    """Validate an already parsed config (see `load_config`); ``where`` names it in errors.

    Args:
        name: the model name for a Hugging Face config that does not say it.
    """
    if not isinstance(data, Mapping):
        raise _error(where, f"the top level must be a table (mapping), got {_kind(data)}")
    tree_issues = check_tree(dict(data), where=where)  # data may come from any parser
    if tree_issues:
        raise ConfigError(tree_issues)
    issues: list[ConfigIssue] = []
    model: ModelSpec | None = None
    file_engine: dict[str, object] = {}
    file_sources: dict[str, str] = {}
    if is_hf_config(data):
        from ._hf import read_hf_parts

        hf, hf_issues = read_hf_parts(data, where=where, name=name)
        issues.extend(hf_issues)
        model = hf.model
        file_engine, file_sources = dict(hf.engine), dict(hf.engine_sources)
    else:
        unknown = "unknown section; a kvunits config has [model] and [engine] (kvunits schema)"
        issues.extend(
            ConfigIssue(where, join_path("", key), unknown)
            for key in data
            if key not in ("model", "engine")
        )
        if "model" not in data:
            missing = (
                "missing: a kvunits config needs a [model] section (or is this a Hugging Face "
                "config.json without model_type?)"
            )
            issues.append(ConfigIssue(where, "model", missing))
        else:
            model_config = _validate(ModelConfig, data["model"], where, ("model",), issues)
            if model_config is not None:
                model = _build_model(model_config, where, issues)
        engine_config = _validate(EngineConfig, data.get("engine", {}), where, ("engine",), issues)
        if engine_config is None:
            raise ConfigError(issues)
        file_engine = engine_config.given()
        file_sources = dict.fromkeys(file_engine, "file")
    engine, sources = resolve_engine(
        file_engine, file_sources, where=where, flags=flags, issues=issues
    )
    if model is not None and engine is not None:
        _check_engine_covers_model(model, engine, where, issues)
    if issues or model is None or engine is None:
        raise ConfigError(issues)
    return KvUnitsConfig(model=model, engine=engine, source=where, engine_sources=sources)


def is_hf_config(data: Mapping[str, Any]) -> bool:
    """A Hugging Face config: ``model_type`` or ``architectures``, no kvunits sections."""
    return (
        "model" not in data
        and "engine" not in data
        and ("model_type" in data or "architectures" in data)
    )


def _validate(
    cls: type[Any], value: object, where: str, prefix: tuple[str, ...], issues: list[ConfigIssue]
) -> Any:
    try:
        return cls.model_validate(value)
    except ValidationError as exc:
        issues.extend(issues_from_validation(exc, where, prefix))
        return None


def _build_model(config: ModelConfig, where: str, issues: list[ConfigIssue]) -> ModelSpec | None:
    """Build each entry's layer spec, so that a check of the spec layer (not repeated in the
    config models) is reported at the entry's own path."""
    built: dict[tuple[str, str], LayerSpec] = {}
    failed = False
    for section, name, entry in config.entries():
        try:
            built[section, name] = entry.layer()
        except ValidationError as exc:
            failed = True
            prefix = ("model", section, name)
            issues.extend(issues_from_validation(exc, where, prefix, rename=_SPEC_TO_CONFIG))
    if failed:
        return None
    try:
        return config.spec_from(built)
    except ValidationError as exc:
        issues.extend(issues_from_validation(exc, where, ("model",)))
        return None


#: Spec field names that the config format spells differently.
_SPEC_TO_CONFIG: Final = {"window": "sliding_window"}


def _check_engine_covers_model(
    model: ModelSpec, engine: EngineSpec, where: str, issues: list[ConfigIssue]
) -> None:
    """Pooled layers (other than cross attention, sized by its own encoder length) count
    their limits in encoder tokens: the engine must state both encoder limits."""
    pooled = [
        name
        for name, layer in model.layers.items()
        if slot_unit_of(layer) is PooledBlocks and layer.kind != "cross_attention"
    ]
    if not pooled:
        return
    for field in ("max_encoder_len", "max_encoder_tokens_per_step"):
        if getattr(engine, field) is None:
            issues.append(
                ConfigIssue(
                    where,
                    f"engine.{field}",
                    f"required: the model has encoder-side (pooled) layers ({pooled[0]} …), "
                    f"whose limits count encoder_token; {_how_to_set(field)}",
                )
            )


# -- engine settings ------------------------------------------------------------------------


def resolve_engine(
    file_values: Mapping[str, object],
    file_sources: Mapping[str, str],
    *,
    where: str,
    flags: Mapping[str, object] | None = None,
    issues: list[ConfigIssue],
) -> tuple[EngineSpec | None, dict[str, str]]:
    """Merge the engine settings by precedence and validate them as one `EngineSpec`.

    Precedence, highest first: ``flags``, ``KVUNITS_*`` environment variables,
    ``file_values``, `ENGINE_DEFAULTS`. Problems are appended to ``issues``, each naming the
    place the bad value came from.

    Returns:
        The engine spec (``None`` if invalid) and, per setting, where its value came from.
    """
    values: dict[str, object] = dict(ENGINE_DEFAULTS)
    sources = dict.fromkeys(ENGINE_DEFAULTS, "default")
    values.update(file_values)
    sources.update({key: file_sources.get(key, "file") for key in file_values})
    for key, value in environment_values(issues).items():
        values[key] = _coerce_text(key, value)
        sources[key] = f"env {ENV_PREFIX}{key.upper()}"
    for key, flag in (flags or {}).items():
        if key not in ENGINE_FIELDS:
            raise ValueError(f"unknown engine flag {key!r}")  # a programming error
        if flag is not None:
            values[key] = _coerce_text(key, flag)
            sources[key] = f"flag --{key.replace('_', '-')}"
    try:
        engine = EngineSpec.model_validate(values)
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            field = str(error["loc"][0]) if error["loc"] else ""
            source = sources.get(field)
            if error["type"] == "missing" or source is None:
                issues.append(ConfigIssue(where, f"engine.{field}", _required(field)))
                continue
            origin, path = _origin(field, source, where)
            message = _message(error, field)
            issues.append(ConfigIssue(origin, path, message))
        return None, sources
    return engine, {key: sources[key] for key in ENGINE_FIELDS if key in sources}


def environment_values(issues: list[ConfigIssue]) -> dict[str, str]:
    """The ``KVUNITS_*`` engine settings of the environment (read with pydantic-settings).

    An unknown ``KVUNITS_*`` variable is an issue: a typo would otherwise be ignored.
    """
    names = [name for name in os.environ if name.upper().startswith(ENV_PREFIX)]
    if not names:
        return {}  # nothing to read: pydantic-settings is not even imported
    known = {f"{ENV_PREFIX}{field.upper()}" for field in ENGINE_FIELDS}
    for name in sorted(names):
        if name.upper() not in known:
            issues.append(
                ConfigIssue(
                    "environment",
                    name,
                    "unknown kvunits variable; known: " + ", ".join(sorted(known)),
                )
            )
    from ._settings import EngineSettings

    settings = EngineSettings()
    return {
        field: value for field in ENGINE_FIELDS if (value := getattr(settings, field)) is not None
    }


def _coerce_text(field: str, value: object) -> object:
    # Environment variables and flags are text; the block size is the one plain integer.
    text = value if isinstance(value, str) else ""
    if field == "block_size_slots" and re.fullmatch(r"\s*[0-9]{1,9}\s*", text):
        return int(text)
    return value


def _origin(field: str, source: str, where: str) -> tuple[str, str]:
    kind, _, detail = source.partition(" ")
    if kind == "env":
        return "environment", detail
    if kind == "flag":
        return "command line", detail
    if kind == "hf":
        return where, detail
    if kind == "default":
        return "built-in defaults", field
    return where, f"engine.{field}"


def _required(field: str) -> str:
    return f"required and not given: {_how_to_set(field)}"


def _how_to_set(field: str) -> str:
    example = {
        "max_model_len": '"8192 token"',
        "max_num_batched_tokens": '"2048 token"',
        "max_encoder_len": '"6000 encoder_token"',
        "max_encoder_tokens_per_step": '"4 encoder_token"',
        "memory_budget": '"40 GiB"',
    }.get(field, "...")
    return (
        f"set {field} = {example} in [engine], or {ENV_PREFIX}{field.upper()}, or "
        f"--{field.replace('_', '-')}"
    )


# -- pydantic errors to issues --------------------------------------------------------------

#: The unit of the plain-integer fields, for messages (the quantity fields name their own).
_COUNT_UNITS: Final = {
    "count": "layer",
    "kv_heads": "head",
    "head_size": "element",
    "head_size_v": "element",
    "kv_lora_rank": "element",
    "qk_rope_head_dim": "element",
    "block_size_slots": "slot per cache_block",
    "pool": "encoder_token per pooled_block",
}


def issues_from_validation(
    error: ValidationError,
    where: str,
    prefix: tuple[str | int, ...] = (),
    *,
    rename: Mapping[str, str] | None = None,
) -> list[ConfigIssue]:
    """One `ConfigIssue` per pydantic error, with the dotted path of the field in the file.

    Args:
        rename: field names to replace in the error's location (spec name → config name).
    """
    issues = []
    for item in error.errors(include_url=False)[:_MAX_ISSUES]:
        loc = tuple((rename or {}).get(p, p) if isinstance(p, str) else p for p in item["loc"])
        loc = _strip_kind(prefix + loc)
        field = next((str(part) for part in reversed(loc) if isinstance(part, str)), "")
        issues.append(ConfigIssue(where, format_loc(loc), _message(item, field)))
    return issues


def _strip_kind(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    # A tagged union puts the tag in the location: model.groups.audio.<kind>.sliding_window.
    if len(loc) > 3 and loc[0] == "model" and loc[1] in ("groups", "layers") and loc[3] in KINDS:
        return loc[:3] + loc[4:]
    return loc


def format_loc(loc: tuple[str | int, ...]) -> str:
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


def _message(item: Any, field: str) -> str:
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
        return "required field is missing"
    if kind == "extra_forbidden":
        return f"unknown field (got {describe(given)}); see `kvunits schema` for the format"
    if kind == "union_tag_not_found":
        return "missing kind: one of " + ", ".join(KINDS)
    if kind == "union_tag_invalid":
        tag = given.get("kind") if isinstance(given, dict) else given
        return f"unknown kind {describe(tag)}; one of " + ", ".join(KINDS)
    if kind in ("int_type", "int_parsing", "int_from_float") and field in _COUNT_UNITS:
        message = f"expected a whole number of {_COUNT_UNITS[field]} (a plain integer)"
    elif kind == "dict_type":
        message = "expected a table (mapping)"
    return f"{message}; got {describe(given)}"


# -- helpers --------------------------------------------------------------------------------


def _error(where: str, message: str) -> ConfigError:
    return ConfigError([ConfigIssue(where, "", message)])


def _yaml_problem(exc: BaseException) -> str:
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None)
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if not isinstance(problem, str):
        return _first_line(exc)
    if mark is not None:
        problem += f" (line {mark.line + 1}, column {mark.column + 1})"
    return problem


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return " ".join(text.split())[:300]


def _kind(value: object) -> str:
    if isinstance(value, (dict, list)):
        return f"a {type(value).__name__}"
    return describe(value)
