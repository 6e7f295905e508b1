"""Readers of the speech families: Whisper, Voxtral, Voxtral Realtime.

* whisper (vllm/model_executor/models/whisper.py): the encoder's attention keeps no cache;
  each decoder layer has a self-attention (full) and a cross-attention over the encoder's
  ``max_source_positions`` outputs, both with ``decoder_attention_heads`` KV heads of
  ``d_model / decoder_attention_heads``.
* voxtral: the audio encoder is a non-causal Whisper encoder (vLLM's voxtral.py builds it
  with ``is_causal`` false): no cache; the text decoder is a llama.
* voxtral_realtime: the audio encoder is causal, with a sliding window of
  ``audio_config.sliding_window`` **encoder tokens**, and its cache pools P =
  ``downsample_factor`` (or ``block_pool_size``) encoder tokens per slot
  (vllm/model_executor/models/whisper_causal.py); the text decoder is a sliding-window
  mistral.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._factors import PoolFactor
from .._layers import LayerSpec
from ._hf_fields import MAX_SEQ, Reader, Section
from ._hf_layers import Attention, DTypes, cross, full, head_size, heads, layer_count, no_cache
from ._hf_layers import sliding as sliding_layer

Layers = dict[str, LayerSpec]


def read_whisper(sec: Section, dtypes: DTypes) -> Layers | None:
    """whisper: ``audio.<i>`` encoder layers (no cache), ``text.<i>`` decoder
    self-attention, ``cross.<i>`` decoder cross-attention."""
    encoder = layer_count(sec, "encoder_layers")
    decoder = layer_count(sec, "decoder_layers")
    n_heads = sec.number("decoder_attention_heads")
    d_model = sec.number("d_model", maximum=1 << 24)
    outputs = sec.number("max_source_positions", maximum=MAX_SEQ)
    if None in (encoder, decoder, n_heads, d_model, outputs):
        return None
    assert encoder is not None and decoder is not None and n_heads is not None
    assert d_model is not None and outputs is not None
    if d_model % n_heads:
        sec.issue(
            "d_model",
            f"{d_model} is not a multiple of decoder_attention_heads {n_heads} (vLLM's "
            "WhisperAttention refuses it)",
        )
        return None
    size = sec.derived("d_model", d_model // n_heads, "d_model / decoder_attention_heads")
    if size is None:
        return None
    a = Attention(n_heads, size, dtypes.kv)
    layers: Layers = {f"audio.{i}": no_cache() for i in range(encoder)}
    self_attention, cross_attention = full(a), cross(a, outputs)
    layers.update((f"text.{i}", self_attention) for i in range(decoder))
    layers.update((f"cross.{i}", cross_attention) for i in range(decoder))
    return layers


def read_audio_encoder(sec: Section) -> Layers | None:
    """voxtral's audio encoder: ``num_hidden_layers`` layers without a cache."""
    n_layers = layer_count(sec)
    if n_layers is None:
        return None
    return {f"audio.{i}": no_cache() for i in range(n_layers)}


@dataclass(frozen=True, slots=True)
class PooledEncoder:
    """voxtral_realtime's audio encoder: its layers, and P (None after an issue)."""

    layers: Layers
    pool: PoolFactor | None
    streaming: bool


def read_pooled_encoder(
    reader: Reader, top: Section, sec: Section, dtypes: DTypes
) -> PooledEncoder | None:
    """voxtral_realtime's causal audio encoder: ``audio.<i>`` layers pooling P encoder tokens
    per slot; its ``sliding_window`` counts encoder tokens."""
    pool = _pool_factor(reader, top, sec)
    n_layers = layer_count(sec)
    counted = heads(sec)
    window = sec.window()
    if pool is None or n_layers is None or counted is None:
        return None
    size = head_size(sec, counted[0])
    if size is None:
        return None
    a = Attention(counted[1], size, dtypes.kv)
    layer = full(a, pool) if window is None else sliding_layer(a, window, pool)
    return PooledEncoder(
        {f"audio.{i}": layer for i in range(n_layers)}, pool, streaming=window is not None
    )


def _pool_factor(reader: Reader, top: Section, audio: Section) -> PoolFactor | None:
    """P: ``audio_config.block_pool_size``, ``block_pool_size`` or ``downsample_factor``
    (the published realtime config names it so: 4 encoder tokens per pooled block and per
    text token); all that are written must agree."""
    candidates: list[tuple[Section, str]] = [
        (audio, "block_pool_size"),
        (top, "block_pool_size"),
        (top, "downsample_factor"),
    ]
    found: list[tuple[str, int]] = []
    for section, key in candidates:
        if section.given(key) and section.value(key) is not None:
            value = section.number(key, maximum=1024)
            if value is None:
                return None
            found.append((section.path(key), value))
    if not found and top.value("downsample_factor") is not None:
        value = top.number("downsample_factor", maximum=1024)
        if value is None:
            return None
        found.append((top.source("downsample_factor"), value))
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
