"""The Hugging Face ``config.json`` adapter: the fields that size a KV cache, with units.

A ``config.json`` writes bare numbers; this adapter declares the unit of every field it
reads (`HF_FIELDS`) and builds the same frozen `ModelSpec` as a kvunits config. It reads:

* a decoder (Mistral, Llama, Qwen, Gemma …), at the top level or under ``text_config``:
  ``num_hidden_layers``, ``num_key_value_heads`` (default: ``num_attention_heads``),
  ``head_dim`` (default: ``hidden_size / num_attention_heads``), ``sliding_window`` (token;
  ``null`` or ``use_sliding_window: false`` means full attention), and which layers slide:
  ``layer_types`` per layer (``sliding_attention``, ``full_attention``,
  ``chunked_attention`` with ``attention_chunk_size``), else ``sliding_window_pattern``
  (every N-th layer is full, Gemma 3), else Gemma 2's alternation, else
  ``max_window_layers`` (the first N layers are full, Qwen 2), else all layers;
* an audio encoder under ``audio_config`` (Voxtral Realtime): its ``sliding_window`` is in
  **encoder_token**, and its layers pool by P = ``block_pool_size`` (in ``audio_config``
  or at the top level), else the top-level ``downsample_factor`` (Voxtral Realtime's
  published config names P that way: 4 encoder tokens per pooled block / text token).

Layers are named ``text.<i>`` and ``audio.<i>``. The adapter also derives engine limits the
file states (precedence: below the environment and flags): ``max_model_len`` from the
decoder's ``max_position_embeddings`` (token), ``max_encoder_len`` from the encoder's
(encoder_token) — or, for a streaming (sliding-window) encoder, P × ``max_model_len``: its
own ``max_position_embeddings`` is not a length limit, and it feeds one pooled block per text
token — and ``max_encoder_tokens_per_step`` = P encoder tokens (one pooled block per step:
the streaming cadence of a realtime encoder).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, final

from pydantic import ValidationError

from .._describe import describe
from .._dtype import CacheDType
from .._factors import PoolFactor
from .._layers import (
    ChunkedLocalLayer,
    FullAttentionLayer,
    LayerSpec,
    ModelSpec,
    SlidingWindowLayer,
)
from .._quantity import EncoderTokens, Tokens
from ..errors import ConfigError, ConfigIssue
from ._models import MAX_LAYERS

#: Every field the adapter reads, and the unit it declares for it (the file has none).
HF_FIELDS: Final[Mapping[str, str]] = {
    "num_hidden_layers": "layer",
    "num_attention_heads": "head",
    "num_key_value_heads": "head (default: num_attention_heads)",
    "head_dim": "element per head (default: hidden_size / num_attention_heads)",
    "hidden_size": "element (only to derive head_dim)",
    "sliding_window": "token in a decoder, encoder_token in audio_config",
    "use_sliding_window": "bool (false: full attention)",
    "layer_types": "per-layer kind: sliding_attention | full_attention | chunked_attention",
    "sliding_window_pattern": "layer (every N-th layer is full attention)",
    "max_window_layers": "layer (the first N layers are full attention)",
    "attention_chunk_size": "token",
    "max_position_embeddings": "token in a decoder, encoder_token in audio_config",
    "block_pool_size": "encoder_token per pooled_block (P)",
    "downsample_factor": "encoder_token per pooled_block (P, when block_pool_size is absent)",
    "torch_dtype, dtype": "cache dtype (default bfloat16)",
}

_MAX_COUNT: Final = 1 << 16
_MAX_SEQ: Final = 1 << 40


@final
@dataclass(frozen=True, slots=True)
class HfConfig:
    """What the adapter read: the model, and engine limits derived from the file.

    Attributes:
        model: the model spec.
        engine: engine settings by field name (typed quantities).
        engine_sources: per setting, ``"hf <field path>"``.
    """

    model: ModelSpec
    engine: Mapping[str, object] = field(default_factory=dict)
    engine_sources: Mapping[str, str] = field(default_factory=dict)


def read_hf_config(data: Mapping[str, Any], *, where: str, name: str | None = None) -> HfConfig:
    """Build a `ModelSpec` (and engine limits) from a parsed ``config.json``.

    Args:
        data: the parsed file (already checked by the loader for hostile content).
        where: the file, for messages.
        name: the model name when the file has no ``_name_or_path`` (e.g. its directory).

    Raises:
        ConfigError: every missing or malformed field, with its path and declared unit.
    """
    config, issues = read_hf_parts(data, where=where, name=name)
    if config.model is None:
        raise ConfigError(issues)
    return HfConfig(config.model, config.engine, config.engine_sources)


@final
@dataclass(frozen=True, slots=True)
class HfParts:
    """What could be read, even from a broken file (the loader reports everything at once)."""

    model: ModelSpec | None
    engine: Mapping[str, object]
    engine_sources: Mapping[str, str]


def read_hf_parts(
    data: Mapping[str, Any], *, where: str, name: str | None = None
) -> tuple[HfParts, list[ConfigIssue]]:
    """`read_hf_config` without raising: the parts read, and the issues found."""
    reader = _Reader(where)
    layers: dict[str, LayerSpec] = {}
    engine: dict[str, object] = {}
    sources: dict[str, str] = {}
    audio = data.get("audio_config")
    streaming, pool = False, None
    if audio is not None:
        if isinstance(audio, dict):
            pool = _pool_factor(reader, data, audio)
            encoder, max_len = _audio_encoder(reader, audio, pool, fallback=data)
            layers.update(encoder)
            streaming = any(isinstance(layer, SlidingWindowLayer) for layer in encoder.values())
            if max_len is not None and not streaming:
                engine["max_encoder_len"] = max_len
                sources["max_encoder_len"] = "hf audio_config.max_position_embeddings"
            if pool is not None:
                engine["max_encoder_tokens_per_step"] = EncoderTokens(pool.tokens_per_block)
                sources["max_encoder_tokens_per_step"] = (
                    "hf derived: one pooled block (P encoder_token) per step"
                )
        else:
            reader.issue("audio_config", f"expected a mapping, got {describe(audio)}")
    text = data.get("text_config", data)
    prefix = "text_config." if "text_config" in data else ""
    if not isinstance(text, dict):
        reader.issue("text_config", f"expected a mapping, got {describe(text)}")
    else:
        decoder, max_len_tokens = _decoder(reader, text, prefix, fallback=data)
        layers.update(decoder)
        if max_len_tokens is not None:
            engine["max_model_len"] = max_len_tokens
            sources["max_model_len"] = f"hf {prefix}max_position_embeddings"
            if streaming and pool is not None:
                # A causal sliding-window encoder (RoPE) streams without a length limit of its
                # own: its audio_config.max_position_embeddings (30 s) is not one. The stream
                # is as long as the text it feeds, one pooled block per text token.
                engine["max_encoder_len"] = EncoderTokens(
                    max_len_tokens.value * pool.tokens_per_block
                )
                sources["max_encoder_len"] = (
                    f"hf derived: P × {prefix}max_position_embeddings (one pooled block per "
                    "text token)"
                )
    model = None
    if not reader.issues:
        try:
            model = ModelSpec(name=_model_name(data, name), layers=layers)
        except ValidationError as exc:
            reader.issue("", f"invalid model: {exc.errors(include_url=False)[0]['msg']}")
    return HfParts(model, engine, sources), reader.issues


class _Reader:
    """Reads typed fields from the file, collecting every problem with its path."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.issues: list[ConfigIssue] = []

    def issue(self, path: str, message: str) -> None:
        self.issues.append(ConfigIssue(self.where, path, message))

    def count(
        self,
        section: Mapping[str, Any],
        prefix: str,
        key: str,
        *,
        required: bool = True,
        minimum: int = 1,
        maximum: int = _MAX_COUNT,
    ) -> int | None:
        """An int field of ``minimum`` to ``maximum`` (``null`` counts as absent)."""
        value, unit = section.get(key), HF_FIELDS.get(key, "int")
        if value is None:
            if required:
                self.issue(prefix + key, f"missing ({unit})")
            return None
        if type(value) is not int:
            self.issue(prefix + key, f"expected an integer ({unit}), got {describe(value)}")
            return None
        if not minimum <= value <= maximum:
            self.issue(
                prefix + key, f"must be between {minimum} and {maximum}, got {value} ({unit})"
            )
            return None
        return value


def _pool_factor(
    reader: _Reader, data: Mapping[str, Any], audio: Mapping[str, Any]
) -> PoolFactor | None:
    candidates = [
        ("audio_config.", audio, "block_pool_size"),
        ("", data, "block_pool_size"),
        ("", data, "downsample_factor"),
    ]
    found: list[tuple[str, int]] = []
    for prefix, section, key in candidates:
        if section.get(key) is not None:
            value = reader.count(section, prefix, key, maximum=1024)
            if value is not None:
                found.append((prefix + key, value))
    if not found:
        reader.issue(
            "audio_config.block_pool_size",
            "missing: the audio encoder pools encoder tokens into cache slots; kvunits reads "
            "P from audio_config.block_pool_size, block_pool_size or downsample_factor",
        )
        return None
    if len({value for _, value in found}) > 1:
        shown = ", ".join(f"{path} = {value}" for path, value in found)
        reader.issue(found[0][0], f"the pooling factors disagree: {shown}")
        return None
    return PoolFactor(found[0][1])


def _audio_encoder(
    reader: _Reader,
    audio: Mapping[str, Any],
    pool: PoolFactor | None,
    *,
    fallback: Mapping[str, Any],
) -> tuple[dict[str, LayerSpec], EncoderTokens | None]:
    prefix = "audio_config."
    shape = _shape(reader, audio, prefix)
    window = reader.count(audio, prefix, "sliding_window", required=False, maximum=_MAX_SEQ)
    max_len = reader.count(
        audio, prefix, "max_position_embeddings", required=False, maximum=_MAX_SEQ
    )
    dtype = _dtype(reader, audio, prefix, fallback=fallback)
    limit = None if max_len is None else EncoderTokens(max_len)
    if shape is None or pool is None or dtype is None:
        return {}, limit
    n_layers, kv_heads, head_size = shape
    common: dict[str, Any] = {
        "kv_heads": kv_heads,
        "head_size": head_size,
        "dtype": dtype,
        "pool": pool,
    }
    layer: LayerSpec
    if window is None:
        layer = FullAttentionLayer(**common)
    else:
        layer = SlidingWindowLayer(sliding_window=EncoderTokens(window), **common)
    layers: dict[str, LayerSpec] = {f"audio.{i}": layer for i in range(n_layers)}
    return layers, limit


def _decoder(
    reader: _Reader, text: Mapping[str, Any], prefix: str, *, fallback: Mapping[str, Any]
) -> tuple[dict[str, LayerSpec], Tokens | None]:
    shape = _shape(reader, text, prefix)
    window = reader.count(text, prefix, "sliding_window", required=False, maximum=_MAX_SEQ)
    if text.get("use_sliding_window") is False:
        window = None
    max_len = reader.count(
        text, prefix, "max_position_embeddings", required=False, maximum=_MAX_SEQ
    )
    dtype = _dtype(reader, text, prefix, fallback=fallback)
    limit = None if max_len is None else Tokens(max_len)
    if shape is None or dtype is None:
        return {}, limit
    n_layers, kv_heads, head_size = shape
    kinds = _layer_kinds(reader, text, prefix, n_layers, window)
    if kinds is None:
        return {}, limit
    common: dict[str, Any] = {"kv_heads": kv_heads, "head_size": head_size, "dtype": dtype}
    full = FullAttentionLayer(**common)
    sliding = (
        None if window is None else SlidingWindowLayer(sliding_window=Tokens(window), **common)
    )
    chunked: LayerSpec | None = None
    if "chunked" in kinds:
        chunk = reader.count(text, prefix, "attention_chunk_size", maximum=_MAX_SEQ)
        if chunk is None:
            return {}, limit
        chunked = ChunkedLocalLayer(chunk=Tokens(chunk), **common)
    by_kind: dict[str, LayerSpec | None] = {"full": full, "sliding": sliding, "chunked": chunked}
    layers: dict[str, LayerSpec] = {}
    for index, kind in enumerate(kinds):
        layer = by_kind[kind]
        assert layer is not None  # _layer_kinds only names kinds whose fields were read
        layers[f"text.{index}"] = layer
    return layers, limit


def _shape(reader: _Reader, section: Mapping[str, Any], prefix: str) -> tuple[int, int, int] | None:
    n_layers = reader.count(section, prefix, "num_hidden_layers", maximum=MAX_LAYERS)
    heads = reader.count(section, prefix, "num_attention_heads")
    kv_heads = reader.count(section, prefix, "num_key_value_heads", required=False)
    head_dim = reader.count(section, prefix, "head_dim", required=False, maximum=1 << 20)
    if head_dim is None and heads is not None:
        hidden = reader.count(section, prefix, "hidden_size", maximum=1 << 24)
        if hidden is not None:
            if hidden % heads:
                reader.issue(
                    prefix + "head_dim",
                    f"missing, and hidden_size {hidden} is not a multiple of "
                    f"num_attention_heads {heads}; write head_dim",
                )
            else:
                head_dim = hidden // heads
    if n_layers is None or heads is None or head_dim is None:
        return None
    return n_layers, heads if kv_heads is None else kv_heads, head_dim


def _layer_kinds(
    reader: _Reader, text: Mapping[str, Any], prefix: str, n_layers: int, window: int | None
) -> list[str] | None:
    types = text.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != n_layers:
            reader.issue(
                prefix + "layer_types",
                f"expected a list of {n_layers} layer types (num_hidden_layers), got "
                + (f"{len(types)} entries" if isinstance(types, list) else describe(types)),
            )
            return None
        names = {
            "sliding_attention": "sliding",
            "full_attention": "full",
            "chunked_attention": "chunked",
        }
        kinds = []
        for index, name in enumerate(types):
            kind = names.get(name) if isinstance(name, str) else None
            if kind is None:
                reader.issue(
                    f"{prefix}layer_types[{index}]",
                    f"unsupported layer type {describe(name)}; kvunits reads " + ", ".join(names),
                )
                return None
            kinds.append(kind)
        if "sliding" in kinds and window is None:
            reader.issue(
                prefix + "sliding_window",
                "missing: layer_types has sliding_attention layers (sliding_window is in token)",
            )
            return None
        return kinds
    if window is None:
        return ["full"] * n_layers
    pattern_key = next(
        (k for k in ("sliding_window_pattern", "_sliding_window_pattern") if k in text), None
    )
    if pattern_key is not None:
        every = reader.count(text, prefix, pattern_key, maximum=n_layers + 1)
        if every is None:
            return None
        return ["full" if (i + 1) % every == 0 else "sliding" for i in range(n_layers)]
    if text.get("model_type") == "gemma2":
        # Gemma 2 alternates, starting with a sliding layer (its modeling code: layer_idx % 2).
        return ["sliding" if i % 2 == 0 else "full" for i in range(n_layers)]
    if text.get("max_window_layers") is not None:
        # Qwen 2 (transformers' Qwen2Config): layer i slides when i >= max_window_layers.
        full = reader.count(text, prefix, "max_window_layers", minimum=0, maximum=MAX_LAYERS)
        if full is None:
            return None
        return ["full" if i < full else "sliding" for i in range(n_layers)]
    return ["sliding"] * n_layers


def _dtype(
    reader: _Reader,
    section: Mapping[str, Any],
    prefix: str,
    *,
    fallback: Mapping[str, Any] | None = None,
) -> CacheDType | None:
    for where, source in ((prefix, section), ("", fallback or {})):
        for key in ("torch_dtype", "dtype"):
            value = source.get(key)
            if value is None:
                continue
            if not isinstance(value, str):
                reader.issue(where + key, f"expected a dtype name, got {describe(value)}")
                return None
            try:
                return CacheDType.parse(value)
            except ValueError as exc:
                reader.issue(where + key, str(exc))
                return None
    return CacheDType.bfloat16


def _model_name(data: Mapping[str, Any], name: str | None) -> str:
    for candidate in (data.get("_name_or_path"), name, data.get("model_type")):
        if isinstance(candidate, str) and candidate.strip():
            return candidate.strip().rstrip("/").rsplit("/", 1)[-1][:128] or "hf-model"
    return "hf-model"
