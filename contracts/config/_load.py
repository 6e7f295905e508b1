"""Loading a config: read the file (``_read``), validate it, resolve the engine settings.

Every problem found is collected and raised together as one `ConfigError`: the file's,
the environment's and the flags', each naming where it is, the field, the expected unit and
what was given.

Engine settings resolve with this precedence, highest first: a command-line flag, a
``KVUNITS_*`` environment variable, the file (or what the Hugging Face adapter derives from
it), the built-in `ENGINE_DEFAULTS`. A ``KVUNITS_*`` variable that names no setting (another
tool's ``KVUNITS_ROOT``, a typo) is a `ConfigWarning` with the closest name, never an error;
a bad value of a known one is an error. ``environment=False`` reads no variable at all.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from .._engine import EngineSpec
from .._layers import ModelSpec, slot_unit_of
from .._quantity import PooledBlocks
from ..errors import ConfigError, ConfigIssue, ConfigWarning
from ._files import shown_path
from ._hf_cache import locate_config
from ._issues import issues_from_validation, join_path, message_of
from ._models import (
    ENGINE_DEFAULTS,
    ENGINE_FIELDS,
    EngineConfig,
    KvUnitsConfig,
    ModelConfig,
)
from ._read import checked_tree, is_hf_config, read_config_file
from ._vllm_checks import with_model_directory

ENV_PREFIX: Final = "KVUNITS_"
ENGINE_FIELDS_UPPER: Final = [field.upper() for field in ENGINE_FIELDS]
#: kvunits' own variables that are not engine settings: the vLLM plugin's audit, the opt-in
#: vLLM tests (read where they are used; the config reader passes over them in silence).
NOT_SETTINGS: Final = frozenset({"KVUNITS_VLLM_AUDIT", "KVUNITS_VLLM_TESTS"})

# -- validation -----------------------------------------------------------------------------


def load_config(
    path: str | os.PathLike[str],
    *,
    flags: Mapping[str, object] | None = None,
    environment: bool | Mapping[str, str] = True,
    hf_overrides: Mapping[str, Any] | None = None,
    revision: str | None = None,
) -> KvUnitsConfig:
    """Load a kvunits config (TOML, YAML, JSON) or a Hugging Face ``config.json``.

    Args:
        path: the file; its extension picks the parser. A JSON file with ``model_type`` or
            ``architectures`` and no ``model``/``engine`` section is read as a Hugging Face
            config (see ``kvunits.contracts.config._hf``). A model directory stands for its
            ``config.json``, and a model id ``org/name`` that is no file for the
            ``config.json`` of its snapshot in the local Hugging Face cache (``HF_HUB_CACHE``,
            ``HF_HOME``, ``~/.cache/huggingface/hub``; never the network).
        flags: engine settings from the command line, by field name (highest precedence).
        environment: where ``KVUNITS_*`` settings are read: ``True`` the process's
            environment, ``False`` none (a library caller's config is then the file and the
            flags only), or a mapping of its own.
        hf_overrides: merged into a Hugging Face config before it is read, as vLLM's
            ``--hf-overrides`` (a mapping merges into the mapping it names).
        revision: the revision of a model id in the local cache (vLLM's ``--revision``).

    A Hugging Face config without ``quantization_config`` takes the ``hf_quant_config.json``
    beside it (ModelOpt checkpoints), as vLLM's ``get_config`` does.

    Raises:
        ConfigError: every problem of the file, the environment and the flags, together.

    Warns:
        ConfigWarning: a ``KVUNITS_*`` variable that names no setting (ignored).

    Example:
        >>> cfg = load_config("examples/voxtral_realtime.toml")
        >>> str(cfg.engine.memory_budget)
        '42949672960 byte/rank'
    """
    file, name = locate_config(path, revision)
    data = read_config_file(file)
    if is_hf_config(data):
        data = with_model_directory(data, file, hf_overrides)
    return _resolve(data, shown_path(file), flags, name or _directory_name(file), environment)


def _directory_name(file: Path) -> str | None:
    """The name of the folder holding ``file`` (a model directory's name is the model's)."""
    try:
        return file.resolve().parent.name or None
    except (OSError, RuntimeError):  # a link loop above the file (3.11 raises RuntimeError)
        return file.absolute().parent.name or None


def load_config_data(
    data: Mapping[str, Any],
    *,
    where: str,
    flags: Mapping[str, object] | None = None,
    name: str | None = None,
    environment: bool | Mapping[str, str] = True,
) -> KvUnitsConfig:
    """Validate an already parsed config (see `load_config`); ``where`` names it in errors.

    Args:
        name: the model name for a Hugging Face config that does not say it.
    """
    tree = checked_tree(data, where=where)  # from any parser
    return _resolve(tree, where, flags, name, environment)


def _resolve(
    data: Mapping[str, Any],
    where: str,
    flags: Mapping[str, object] | None,
    name: str | None,
    environment: bool | Mapping[str, str] = True,
) -> KvUnitsConfig:
    """The config of a checked tree: the model, then the engine settings by precedence."""
    issues: list[ConfigIssue] = []
    hf = None
    if is_hf_config(data):
        from ._hf import read_hf_parts

        hf, hf_issues = read_hf_parts(data, where=where, name=name)
        issues.extend(hf_issues)
        model, file_engine, file_sources = hf.model, dict(hf.engine), dict(hf.engine_sources)
    else:
        model, file_engine = _read_sections(integral_numbers(data), where, issues)
        file_sources = dict.fromkeys(file_engine, "file")
    engine_issues: list[ConfigIssue] = []
    engine, sources = resolve_engine(
        file_engine,
        file_sources,
        where=where,
        flags=flags,
        issues=engine_issues,
        environment=environment,
    )
    if model is None and is_hf_config(data) and issues:
        # The Hugging Face reader stopped early (e.g. an unknown model type): the settings it
        # would have derived are not missing, they were never read.
        engine_issues = [i for i in engine_issues if "required and not given" not in i.message]
    issues.extend(engine_issues)
    if model is not None and engine is not None:
        _check_engine_covers_model(model, engine, where, issues)
        if hf is not None:
            from ._vllm_checks import check_like_vllm

            check_like_vllm(hf, engine, sources, where, issues)
    if issues or model is None or engine is None:
        raise ConfigError(issues)
    return KvUnitsConfig(model=model, engine=engine, source=where, engine_sources=sources)


_INT64: Final = 2**63


def integral_numbers(node: Any) -> Any:
    """``node`` with every number that has a zero fraction (``32.0``, ``3.2e1``) as the
    integer it equals: JSON Schema reads such a number as an integer (and cannot refuse it),
    so a kvunits config reads it so too, in TOML, YAML and JSON alike; ``32.5`` stays a float
    (an integer field refuses it) and so does an integral float past int64. A float field
    (``gpu_memory_utilization``) takes the integer as the same number. Not applied to a
    Hugging Face ``config.json``, which is read as vLLM reads it.

    Example:
        >>> integral_numbers({"count": 32.0, "x": [1.5, 2e0]})
        {'count': 32, 'x': [1.5, 2]}
    """
    if isinstance(node, dict):
        return {key: integral_numbers(value) for key, value in node.items()}
    if isinstance(node, list):
        return [integral_numbers(value) for value in node]
    if type(node) is float and node.is_integer() and -_INT64 <= node < _INT64:
        return int(node)
    return node


def _read_sections(
    data: Mapping[str, Any], where: str, issues: list[ConfigIssue]
) -> tuple[ModelSpec | None, dict[str, object]]:
    """The ``[model]`` section as a spec and the settings ``[engine]`` gives; problems are
    appended to ``issues``.

    Raises:
        ConfigError: the ``[engine]`` section is invalid (with every issue found so far).
    """
    unknown = "unknown section; a kvunits config has [model] and [engine] (kvunits schema)"
    issues.extend(
        ConfigIssue(where, join_path("", key), unknown)
        for key in data
        if key not in ("model", "engine", "$schema")
    )
    if not isinstance(data.get("$schema", ""), str):  # an editor's schema reference: ignored
        message = "the schema an editor reads is a string: a path or URL (kvunits ignores it)"
        issues.append(ConfigIssue(where, "['$schema']", message))
    model = None
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
    return model, engine_config.given()


def _validate(
    cls: type[Any], value: object, where: str, prefix: tuple[str, ...], issues: list[ConfigIssue]
) -> Any:
    try:
        return cls.model_validate(value)
    except ValidationError as exc:
        issues.extend(issues_from_validation(exc, where, prefix))
        return None


def _build_model(config: ModelConfig, where: str, issues: list[ConfigIssue]) -> ModelSpec | None:
    """The model spec of a valid ``[model]`` section (each group is already a valid layer
    spec: its model derives from the spec's)."""
    try:
        return config.spec()
    except ValidationError as exc:
        issues.extend(issues_from_validation(exc, where, ("model",)))
        return None


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
    environment: bool | Mapping[str, str] = True,
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
    variables = os.environ if environment is True else environment or {}
    for key, value in environment_values(variables).items():
        values[key] = _coerce_text(key, value)
        sources[key] = f"env {ENV_PREFIX}{key.upper()}"
    for key, flag in (flags or {}).items():
        if key not in ENGINE_FIELDS:
            raise ValueError(f"unknown engine flag {key!r}")  # a programming error
        if flag is not None:
            values[key] = _coerce_text(key, flag)
            sources[key] = f"flag --{key.replace('_', '-')}"
    if values.get("gpu_memory") is not None and sources.get("memory_budget") == "default":
        # The default budget stands in for a memory nobody gave: gpu_memory is one.
        del values["memory_budget"], sources["memory_budget"]
    if values.get("memory_budget") is not None and values.get("gpu_memory") is not None:
        # Both given: say where each came from (the spec's own check cannot).
        issues.append(
            ConfigIssue(
                where,
                "engine",
                f"memory_budget ({sources['memory_budget']}) and gpu_memory "
                f"({sources['gpu_memory']}) are both set: the KV cache budget of each GPU is "
                "memory_budget (vLLM's kv_cache_memory_bytes), or gpu_memory × "
                "gpu_memory_utilization − weights_memory − activation_memory; give one",
            )
        )
        return None, sources
    try:
        engine = EngineSpec.model_validate(values)
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            field = str(error["loc"][0]) if error["loc"] else ""
            if not field:  # a rule across settings: placed where the first it names came from
                issues.append(_across_settings(message_of(error, ""), sources, where))
                continue
            source = sources.get(field)
            if error["type"] == "missing":
                message = f"required and not given: {_how_to_set(field)}"
                issues.append(ConfigIssue(where, f"engine.{field}", message))
                continue
            if source is None:
                # Not given, and needed by another setting (weights_memory by gpu_memory).
                message = f"{message_of(error, field)}; {_how_to_set(field)}"
                issues.append(ConfigIssue(where, f"engine.{field}", message))
                continue
            origin, path = _origin(field, source, where)
            issues.append(ConfigIssue(origin, path, message_of(error, field)))
        return None, sources
    if engine.gpu_memory is None and sources["gpu_memory_utilization"] != "default":
        # A fraction of a memory nobody gave would be silently ignored: say so instead.
        origin, path = _origin(
            "gpu_memory_utilization", sources["gpu_memory_utilization"], where
        )
        issues.append(
            ConfigIssue(
                origin,
                path,
                "gpu_memory_utilization is a fraction of gpu_memory, which is not given, so it "
                "would change nothing: give gpu_memory (--gpu-memory, or --like-vllm GPU) with "
                "it, or set the KV cache itself with memory_budget (--kv-cache-memory-bytes)",
            )
        )
        return None, sources
    return engine, {key: sources[key] for key in ENGINE_FIELDS if key in sources}


def _across_settings(message: str, sources: Mapping[str, str], where: str) -> ConfigIssue:
    """An issue of a rule across engine settings, at the origin of the first setting the
    message names that was given (a flag, a variable, the file), else at the file."""
    for field in ENGINE_FIELDS:
        source = sources.get(field, "default")
        named = re.search(rf"(?<![a-z_]){field}(?![a-z_])", message)
        if named and source != "default":
            return ConfigIssue(_origin(field, source, where)[0], "engine", message)
    return ConfigIssue(where, "engine", message)


def environment_values(variables: Mapping[str, str]) -> dict[str, str]:
    """The ``KVUNITS_*`` engine settings among ``variables``, as text, by field name.

    Names are case-insensitive (``kvunits_memory_budget`` works too). A ``KVUNITS_*``
    variable that names no setting is ignored with a `ConfigWarning` giving the closest
    setting's name: it may be a typo, or another tool's (``KVUNITS_ROOT``), which must not
    break kvunits.
    """
    known = {f"{ENV_PREFIX}{field.upper()}": field for field in ENGINE_FIELDS}
    values: dict[str, str] = {}
    for name in sorted(variables):
        upper = name.upper()
        if upper in known:
            values[known[upper]] = variables[name]
        elif upper.startswith(ENV_PREFIX) and upper not in NOT_SETTINGS:
            import difflib  # only for a misspelt variable

            # The settings' names compared without the prefix all of them share.
            close = difflib.get_close_matches(upper.removeprefix(ENV_PREFIX), ENGINE_FIELDS_UPPER)
            guess = (
                f"did you mean {ENV_PREFIX}{close[0]}?"
                if close
                else "kvunits reads KVUNITS_<setting>"
            )
            warnings.warn(
                f"{name} is not a kvunits setting and is ignored; {guess} (the settings: "
                "kvunits plan --help)",
                ConfigWarning,
                stacklevel=5,  # load_config's caller
            )
    return values


#: Settings written as plain integers, not quantities (counts of slots, ranks, batches).
_INTEGER_FIELDS: Final = frozenset(
    {
        "block_size_slots",
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "decode_context_parallel_size",
        "max_concurrent_batches",
        "num_speculative_tokens",
    }
)
_BOOLEAN_TEXT: Final = {"true": True, "1": True, "false": False, "0": False}


#: An integer as text: digits, a sign; the longest read is far past any bound (the field's
#: range check then refuses it, naming the bound), and short enough for int() to be instant.
_INTEGER_TEXT: Final = re.compile(r"[+-]?[0-9]{1,64}")
#: A decimal number as text, as Python's float() and vLLM's argparse (type=float) read it,
#: exponent included (``0.92``, ``.5``, ``1e-3``); not ``nan`` or ``inf``.
_DECIMAL_TEXT: Final = re.compile(
    r"[+-]?(?:[0-9]{1,32}(?:\.[0-9]{0,32})?|\.[0-9]{1,32})(?:[eE][+-]?[0-9]{1,4})?"
)


def _coerce_text(field: str, value: object) -> object:
    # Environment variables and flags are text: a number is read as the number it spells
    # (then the spec checks its range, naming the bound), a boolean as one; anything else
    # stays text, for the spec to refuse with its own message.
    if not isinstance(value, str):
        return value
    text = value.strip()
    if field in _INTEGER_FIELDS and _INTEGER_TEXT.fullmatch(text):
        return int(text)
    if field == "async_scheduling" and text.lower() in _BOOLEAN_TEXT:
        return _BOOLEAN_TEXT[text.lower()]
    if field in ("gpu_memory_utilization", "watermark") and _DECIMAL_TEXT.fullmatch(text):
        return float(text)
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


def _how_to_set(field: str) -> str:
    example = {
        "max_model_len": '"8192 token"',
        "max_num_batched_tokens": '"2048 token"',
        "max_encoder_len": '"6000 encoder_token"',
        "max_encoder_tokens_per_step": '"4 encoder_token"',
        "memory_budget": '"40 GiB"',
        "gpu_memory": '"80 GiB"',
        "weights_memory": '"16 GiB"',
        "activation_memory": '"4 GiB"',
    }.get(field, "...")
    return (
        f"set {field} = {example} in [engine], or {ENV_PREFIX}{field.upper()}, or "
        f"--{field.replace('_', '-')}"
    )
