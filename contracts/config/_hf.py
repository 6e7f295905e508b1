"""The Hugging Face ``config.json`` reader: each model family read as vLLM 0.33 reads it.

A ``config.json`` writes bare numbers and leaves out what its transformers class defaults;
this reader picks the family by ``model_type`` (else ``architectures[0]``), applies the
class defaults, reads every field with a declared unit (`HF_FIELDS`), and builds the same
frozen `ModelSpec` as a kvunits config, layer by layer:

* the decoder, at the top level or under a multimodal wrapper's ``text_config``, as
  ``text.<i>``: full, sliding-window, chunked-local, MLA, or state (Mamba-1, Mamba-2, gated
  delta net) layers, as the family's vLLM model code builds them (``kvunits models``, and
  `kvunits.contracts.config._hf_families`, list what each family is read as);
* Whisper's decoder cross-attention as ``cross.<i>``, and audio encoders as ``audio.<i>``:
  without a cache (Whisper, Voxtral), or pooled (Voxtral Realtime, whose
  ``audio_config.sliding_window`` is in **encoder_token**, P = ``downsample_factor``).

It never guesses: an unknown model type, or a cache-sizing field the family's reader does
not read, is a `ConfigError` naming the model type, the field and the families it reads.

The cache dtype follows vLLM's ``dtype=auto`` (float32 checkpoints are served in bfloat16);
the engine's ``cache_dtype`` overrides it. Engine limits the file states are derived at a
precedence below the environment and flags: ``max_model_len`` as vLLM derives its default
(the smallest length key, ``model_max_length``, the RoPE factor, longrope); for a pooled
streaming encoder ``max_encoder_len`` = P × ``max_model_len`` (one pooled block per text
token: its own ``max_position_embeddings`` is not a length limit) and
``max_encoder_tokens_per_step`` = P (one pooled block per step).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar, final

from pydantic import ValidationError

from .._layers import LayerSpec, ModelSpec
from .._quantity import EncoderTokens, Tokens
from ..errors import ConfigError, ConfigIssue
from ._hf_families import (
    BY_ARCHITECTURE,
    BY_MODEL_TYPE,
    ENCODER_DEFAULTS,
    KV_HEADS_DIVIDE_TP,
    TOP_DEFAULTS,
    WRAPPERS,
    Family,
    check_cache_fields,
    supported,
)
from ._hf_fields import HF_FIELDS as HF_FIELDS
from ._hf_fields import MAX_SEQ, Reader, Section
from ._hf_hybrids import check_hybrid_has_attention
from ._hf_layers import DTypes, max_model_len, resolve_dtypes
from ._hf_registry import MULTIMODAL, REFUSED_MODEL_TYPES, architecture_refusal
from ._hf_speech import read_audio_encoder, read_pooled_encoder
from ._hf_strict import kv_heads_not_null

_T = TypeVar("_T")


@final
@dataclass(frozen=True, slots=True)
class HfConfig:
    """What the reader read: the model, and engine limits derived from the file.

    Attributes:
        model: the model spec.
        engine: engine settings by field name (typed quantities).
        engine_sources: per setting, ``"hf <field path>"``.
        family: the family reader that read the decoder (``kvunits models``).
    """

    model: ModelSpec
    engine: Mapping[str, object] = field(default_factory=dict)
    engine_sources: Mapping[str, str] = field(default_factory=dict)
    family: str | None = None
    attention_heads: int | None = None
    max_len_bound: tuple[int, str] | None = None


def read_hf_config(data: Mapping[str, Any], *, where: str, name: str | None = None) -> HfConfig:
    """Build a `ModelSpec` (and engine limits) from a parsed ``config.json``.

    Args:
        data: the parsed file (already checked by the loader for hostile content).
        where: the file, for messages.
        name: the model name when the file has no ``_name_or_path`` (e.g. its directory).

    Raises:
        ConfigError: every missing or malformed field, with its path and declared unit; an
            unknown model type; a cache-sizing field the family's reader does not read.
    """
    config, issues = read_hf_parts(data, where=where, name=name)
    if config.model is None:
        raise ConfigError(issues)
    return HfConfig(
        config.model,
        config.engine,
        config.engine_sources,
        config.family,
        config.attention_heads,
        config.max_len_bound,
    )


@final
@dataclass(frozen=True, slots=True)
class HfParts:
    """What could be read, even from a broken file (the loader reports everything at once)."""

    model: ModelSpec | None
    engine: Mapping[str, object]
    engine_sources: Mapping[str, str]
    family: str | None = None
    #: The decoder's attention heads, which vLLM requires TP to divide
    #: (``ModelConfig.verify_with_parallel_config``).
    attention_heads: int | None = None
    #: The longest ``max_model_len`` vLLM accepts without ``VLLM_ALLOW_LONG_MAX_MODEL_LEN``.
    max_len_bound: tuple[int, str] | None = None
    #: The KV heads TP must divide, for model files that assert it (no KV-head replication).
    kv_heads: int | None = None


def read_hf_parts(
    data: Mapping[str, Any], *, where: str, name: str | None = None
) -> tuple[HfParts, list[ConfigIssue]]:
    """`read_hf_config` without raising: the parts read, and the issues found."""
    reader = Reader(where)
    engine: dict[str, object] = {}
    sources: dict[str, str] = {}
    top_type = _model_type(reader, data)
    if top_type is None:
        return HfParts(None, engine, sources), reader.issues
    wrapper = WRAPPERS.get(top_type)
    top = Section(reader, data, "", top_type, TOP_DEFAULTS.get(top_type, {}))
    located = _decoder_section(reader, data, top_type)
    dtypes = resolve_dtypes(reader, data, top_type)
    if located is None:
        return HfParts(None, engine, sources), reader.issues
    family, sec = located
    layers: dict[str, LayerSpec] = {}
    if dtypes is not None and check_cache_fields(sec, family) and kv_heads_not_null(sec):
        read = _guarded(reader, sec, lambda: family.read(sec, dtypes))
        if read is not None:
            check_hybrid_has_attention(sec, family.name, read)
            layers.update(read)
    found = max_model_len(sec)
    bound: tuple[int, str] | None = None
    if found is not None:
        engine["max_model_len"] = Tokens(found[0])
        sources["max_model_len"] = f"hf {found[1]}"
        bound = found[2]
    if wrapper is not None and wrapper.audio != "none" and dtypes is not None:
        _audio(reader, top, wrapper.audio, top_type, dtypes, layers, engine, sources)
    model = None
    if not reader.issues:
        try:
            model = ModelSpec(name=_model_name(data, name), layers=layers)
        except ValidationError as exc:
            reader.issue("", f"invalid model: {exc.errors(include_url=False)[0]['msg']}")
    heads = next(
        (
            value
            for key in ("num_attention_heads", "encoder_attention_heads")
            if type(value := sec.value(key)) is int and value > 0
        ),
        None,
    )
    kv = sec.value("num_key_value_heads") if family.name in KV_HEADS_DIVIDE_TP else None
    kv_heads = kv if type(kv) is int and kv > 0 else None
    return HfParts(model, engine, sources, family.name, heads, bound, kv_heads), reader.issues


def _model_type(reader: Reader, data: Mapping[str, Any]) -> str | None:
    """The config's model type as vLLM dispatches: the first of ``architectures`` that vLLM
    0.33 registers names the family (``model_type`` wins when it is of the same family);
    an architecture vLLM serves that kvunits does not read is refused with the feature not
    modelled; a file without a registered architecture goes by ``model_type``."""
    model_type = data.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        reader.issue("model_type", f"expected a string, got {type(model_type).__name__}")
        return None
    architectures = data.get("architectures")
    if architectures is not None and not isinstance(architectures, list):
        reader.issue(
            "architectures", f"expected a list of class names, got {_shown(architectures)}"
        )
        return None
    for index, arch in enumerate(architectures or []):
        if not isinstance(arch, str):  # class names only, whatever model_type says
            reader.issue(
                f"architectures[{index}]",
                f"expected a class name (a string, e.g. LlamaForCausalLM), got {_shown(arch)}",
            )
            return None
    for index, arch in enumerate(architectures or []):
        found = BY_ARCHITECTURE.get(arch)
        if found is not None:
            same = BY_MODEL_TYPE.get(found)
            if (
                isinstance(model_type, str)
                and same is not None
                and BY_MODEL_TYPE.get(model_type) is same
            ):
                return model_type
            return found
        reason = architecture_refusal(arch)
        if reason is not None:
            reader.issue(
                f"architectures[{index}]",
                f"{arch[:60]}: kvunits does not plan it: {reason}",
            )
            return None
        if arch in MULTIMODAL and _text_section(data) is not None:
            return GENERIC_WRAPPER
    if model_type is not None:
        if model_type not in WRAPPERS and model_type not in BY_MODEL_TYPE:
            reader.issue(
                "model_type",
                f"kvunits does not read model type {model_type[:60]!r}: it plans only the "
                f"families whose caches it reads as vLLM does: {supported()}",
            )
            return None
        return model_type
    first = first_architecture(reader, data.get("architectures"))
    if first is None:
        return None
    if first not in BY_ARCHITECTURE:
        reader.issue(
            "architectures",
            f"no model_type, and architecture {first[:60]!r} is not one kvunits reads: "
            + ", ".join(sorted(BY_ARCHITECTURE)),
        )
        return None
    return BY_ARCHITECTURE[first]


#: The top-level type of a multimodal config vLLM serves whose decoder is its text config.
GENERIC_WRAPPER: Final = "(multimodal)"
#: Where multimodal configs keep their decoder's config.
_TEXT_KEYS: Final = ("text_config", "llm_config", "language_config")


#: The decoder's model type when an omni config's thinker ``text_config`` does not say it
#: (transformers' sub-config class of the thinker).
_THINKER_TEXT_TYPES: Final[Mapping[str, str]] = {
    "qwen2_5_omni": "qwen2_5_omni_text",
    "qwen3_omni_moe": "qwen3_omni_moe_text",
}


def _text_section(data: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    """Where the decoder's config is, as transformers' ``get_text_config`` (which vLLM's
    ``get_hf_text_config`` calls) finds it: ``text_config`` (or ``llm_config``,
    ``language_config``), or an omni config's ``thinker_config.text_config`` (vLLM 0.33
    serves the thinker alone: its registry maps Qwen2.5-Omni and Qwen3-Omni to their
    ``...ThinkerForConditionalGeneration``; the talker and the vocoder are not loaded)."""
    for key in _TEXT_KEYS:
        value = data.get(key)
        if isinstance(value, Mapping):
            return key, value
    thinker = data.get("thinker_config")
    if isinstance(thinker, Mapping):
        found = _text_section(thinker)
        if found is not None:
            key, value = found
            top_type = data.get("model_type")
            default = _THINKER_TEXT_TYPES.get(top_type) if isinstance(top_type, str) else None
            if "model_type" not in value and default is not None:
                value = {**value, "model_type": default}
            return f"thinker_config.{key}", value
    return None


def _with_aliases(family: Family, model_type: str, data: Mapping[str, Any]) -> Mapping[str, Any]:
    """The section with each field also under its canonical name (transformers'
    ``attribute_map``: GPT-2's ``n_layer`` is ``num_hidden_layers``)."""
    aliases = family.aliases.get(model_type)
    if not aliases:
        return data
    extra = {k: data[v] for k, v in aliases.items() if v in data and k not in data}
    return {**data, **extra}


def first_architecture(reader: Reader, architectures: object) -> str | None:
    """``architectures[0]``, the class transformers and vLLM load, if the field is a list
    whose first entry is a class name; otherwise an issue saying what the field holds."""
    if not isinstance(architectures, list):
        reader.issue(
            "architectures",
            f"expected a list of class names, got {_shown(architectures)}"
            if architectures is not None
            else "absent or null, and no model_type: the file does not say which model it is",
        )
        return None
    if not architectures:
        reader.issue(
            "architectures",
            "an empty list, and no model_type: the file does not say which model it is",
        )
        return None
    first = architectures[0]
    if not isinstance(first, str):
        reader.issue(
            "architectures[0]",
            f"expected a class name (a string, e.g. LlamaForCausalLM), got {_shown(first)}",
        )
        return None
    return first


def _shown(value: object) -> str:
    """A value of the file in a message: its type and its start."""
    text = repr(value)
    return f"{type(value).__name__} {text[:40]}{'…' if len(text) > 40 else ''}"


def _language_type(inner: Mapping[str, Any]) -> object:
    """The model type of a multimodal config's decoder as vLLM builds it: a text config's
    ``model_type`` of a family kvunits reads, else the first of its own ``architectures``
    that vLLM registers (vllm/config/vllm.py ``VllmConfig.with_hf_config``: the language
    model is built by the text config's ``architectures`` unless the wrapper's model file
    names one; EXAONE 4.5's ``exaone4_5_text`` decoder is ``Exaone4ForCausalLM``, the class
    vllm/model_executor/models/exaone4_5.py builds)."""
    inner_type = inner.get("model_type")
    if isinstance(inner_type, str) and inner_type in BY_MODEL_TYPE:
        return inner_type
    architectures = inner.get("architectures")
    for arch in architectures if isinstance(architectures, list) else []:
        found = BY_ARCHITECTURE.get(arch) if isinstance(arch, str) else None
        if found is not None:
            return found
    return inner_type


def _decoder_section(
    reader: Reader, data: Mapping[str, Any], top_type: str
) -> tuple[Family, Section] | None:
    """The decoder's family and section: the top level, or a wrapper's ``text_config``."""
    wrapper = WRAPPERS.get(top_type)
    if top_type == GENERIC_WRAPPER:
        key, inner = _text_section(data) or ("text_config", {})
        inner_type = _language_type(inner)
        found = BY_MODEL_TYPE.get(inner_type) if isinstance(inner_type, str) else None
        if found is None or not isinstance(inner_type, str):
            refused = REFUSED_MODEL_TYPES.get(inner_type) if isinstance(inner_type, str) else None
            reason = architecture_refusal(refused) if refused is not None else None
            reader.issue(
                f"{key}.model_type",
                f"the multimodal config's decoder is {str(inner_type)[:60]!r} ({refused}): "
                f"kvunits does not plan it: {reason}"
                if reason is not None
                else f"the multimodal config's decoder is {str(inner_type)[:60]!r}, which "
                f"kvunits does not read: it reads {supported()}",
            )
            return None
        section = _with_aliases(found, inner_type, inner)
        defaults = found.defaults.get(inner_type, {})
        return found, Section(reader, section, f"{key}.", inner_type, defaults)
    if wrapper is None:
        family = BY_MODEL_TYPE[top_type]
        section = _with_aliases(family, top_type, data)
        return family, Section(reader, section, "", top_type, family.defaults.get(top_type, {}))
    text: object = data.get("text_config")
    prefix = "text_config."
    if text is None:
        text, prefix = (data, "") if wrapper.flat else ({}, prefix)
    if not isinstance(text, Mapping):
        reader.issue("text_config", f"expected a mapping, got {type(text).__name__}")
        return None
    text_type = text.get("model_type") if text is not data else None
    if text_type is None:
        text_type = wrapper.text_type
    elif isinstance(text_type, str) and text_type not in BY_MODEL_TYPE:
        text_type = _language_type(text)  # as vLLM builds it: by its own architectures
    found = BY_MODEL_TYPE.get(text_type) if isinstance(text_type, str) else None
    if found is None or not isinstance(text_type, str):
        reader.issue(
            prefix + "model_type",
            f"the {top_type} config's decoder is {str(text_type)[:60]!r}, which kvunits does "
            f"not read: it reads {supported()}",
        )
        return None
    defaults = {**found.defaults.get(text_type, {}), **wrapper.text_defaults}
    return found, Section(
        reader, _with_aliases(found, text_type, text), prefix, text_type, defaults
    )


def _guarded(reader: Reader, sec: Section, read: Callable[[], _T | None]) -> _T | None:
    """Run a reader; a layer spec that fails validation becomes an issue (the reader checks
    every field first, so this is a last line, not the way errors are reported)."""
    try:
        return read()
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in error["loc"])
        reader.issue(sec.prefix.rstrip("."), f"a layer is invalid: {where}: {error['msg']}")
        return None


def _audio(
    reader: Reader,
    top: Section,
    kind: str,
    top_type: str,
    dtypes: DTypes,
    layers: dict[str, LayerSpec],
    engine: dict[str, object],
    sources: dict[str, str],
) -> None:
    """The audio encoder of a voxtral (no cache) or voxtral_realtime (pooled) config."""
    audio: object = top.data.get("audio_config", {})
    if audio is None:
        audio = {}
    if not isinstance(audio, Mapping):
        reader.issue("audio_config", f"expected a mapping, got {type(audio).__name__}")
        return
    sec = Section(
        reader, audio, "audio_config.", f"{top_type} audio encoder", ENCODER_DEFAULTS[top_type]
    )
    if kind == "encoder":
        read = _guarded(reader, sec, lambda: read_audio_encoder(sec))
        if read is not None:
            layers.update(read)
        return
    pooled = _guarded(reader, sec, lambda: read_pooled_encoder(reader, top, sec, dtypes))
    if pooled is None or pooled.pool is None:
        return
    layers.update(pooled.layers)
    p = pooled.pool.tokens_per_block
    engine["max_encoder_tokens_per_step"] = EncoderTokens(p)
    sources["max_encoder_tokens_per_step"] = (
        "hf derived: one pooled block (P encoder_token) per step"
    )
    max_len = engine.get("max_model_len")
    if (
        pooled.streaming
        and isinstance(max_len, Tokens)
        and max_len.numerical_value_in(Tokens) * p <= MAX_SEQ
    ):
        # A causal sliding-window encoder (RoPE) streams without a length limit of its own:
        # its audio_config.max_position_embeddings (30 s) is not one. The stream is as long
        # as the text it feeds, one pooled block per text token.
        engine["max_encoder_len"] = EncoderTokens(max_len.numerical_value_in(Tokens) * p)
        sources["max_encoder_len"] = (
            f"hf derived: P × {sources['max_model_len'].removeprefix('hf ')} (one pooled "
            "block per text token)"
        )
    elif not pooled.streaming and sec.value("max_position_embeddings") is not None:
        length = sec.number("max_position_embeddings", maximum=MAX_SEQ)
        if length is not None:
            engine["max_encoder_len"] = EncoderTokens(length)
            sources["max_encoder_len"] = f"hf {sec.source('max_position_embeddings')}"


def _model_name(data: Mapping[str, Any], name: str | None) -> str:
    for candidate in (data.get("_name_or_path"), name, data.get("model_type")):
        if isinstance(candidate, str) and candidate.strip():
            return candidate.strip().rstrip("/").rsplit("/", 1)[-1][:128] or "hf-model"
    return "hf-model"
