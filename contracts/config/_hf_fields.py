"""Reading the fields of a Hugging Face ``config.json`` as transformers and vLLM see them.

A ``config.json`` is read by a transformers config class before vLLM sees it: a key the file
omits takes the class default (``Gemma3TextConfig.head_dim`` is 256), while a key written as
``null`` is ``None`` (``"sliding_window": null`` turns sliding off, where omitting it would
slide at the default). A `Section` is one mapping of the file with the defaults of its class,
and reads each field with its declared unit (`HF_FIELDS`), range-checked whether it was
given or derived; every problem becomes a `ConfigIssue` naming the field's path.

Real files hold ``NaN`` and ``Infinity`` (Python's ``json`` writes them: Nemotron-H's
``time_step_limit``): they pass where the reader does not look, and are refused, with the
field's path, where it reads a number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from .._describe import describe
from ..errors import ConfigIssue

#: Every field the readers use, and the unit (or meaning) each declares for it: the file has
#: none. ``kvunits schema --hf`` prints this table.
HF_FIELDS: Final[Mapping[str, str]] = {
    "model_type": "the family reader (kvunits models lists them); else architectures[0]",
    "architectures": "the family reader, when model_type is absent",
    "num_hidden_layers": "layer",
    "num_attention_heads": "head",
    "num_key_value_heads": "head (null: num_attention_heads)",
    "head_dim": "element per head (null: hidden_size / num_attention_heads)",
    "hidden_size": "element (to derive head_dim where the family does)",
    "sliding_window": "token in a decoder, encoder_token in audio_config",
    "use_sliding_window": "bool (qwen2, qwen3: false means full attention)",
    "max_window_layers": "layer (qwen2, qwen3: layers below it are full)",
    "layer_types": "per layer: sliding_attention | full_attention | linear_attention | ...",
    "sliding_window_pattern": "layer (gemma3, cohere2: every N-th layer is full)",
    "attention_chunk_size": "token (llama4: the chunk of its RoPE layers)",
    "no_rope_layers": "per layer 0 | 1 (llama4: 0 = NoPE layer, full attention)",
    "no_rope_layer_interval": "layer (llama4: every N-th layer is NoPE)",
    "global_head_dim": "element per head (gemma4 full-attention layers)",
    "num_global_key_value_heads": "head (gemma4 full-attention layers, with attention_k_eq_v)",
    "attention_k_eq_v": "bool (gemma4)",
    "num_kv_shared_layers": "layer (gemma4: the last N layers reuse an earlier cache)",
    "per_layer_config": "refused (gemma4: kvunits derives each layer's geometry)",
    "use_bidirectional_attention": "refused when true or 'all' (an embedding model)",
    "kv_lora_rank": "element (MLA latent size)",
    "qk_rope_head_dim": "element (MLA decoupled RoPE key)",
    "index_topk": "token (DeepSeek sparse attention: set means an indexer cache per layer)",
    "index_head_dim": "element (the indexer's fp8 key; a float32 scale per 128)",
    "index_topk_freq": "layer (every N-th layer runs the indexer; the rest reuse its top-k)",
    "index_skip_topk_offset": "layer (where index_topk_freq starts counting, default 2)",
    "index_topk_pattern": "one letter per layer: F runs the indexer, S reuses the top-k",
    "hybrid_layer_pattern": "per layer 0 | 1 (mimo_v2: 1 slides with the swa_ geometry)",
    "sliding_window_size": "token (mimo_v2: the window vLLM's mimo_v2.py takes)",
    "v_head_dim": "element per head of V (mimo_v2: V heads are smaller than K's)",
    "interleaved_sliding_window": "token, or a list of them cycled by layer (openpangu)",
    "attn_layer_period": "layer (jamba)",
    "attn_layer_offset": "layer (jamba)",
    "mamba_expand": "element per hidden element (jamba: I = expand × hidden_size)",
    "mamba_d_state": "element (jamba: N)",
    "mamba_d_conv": "token (jamba: conv kernel width K)",
    "full_attention_interval": "layer (qwen3_next, qwen3_5: every N-th layer is full)",
    "linear_num_key_heads": "head (gated delta net Hk)",
    "linear_num_value_heads": "head (gated delta net Hv)",
    "linear_key_head_dim": "element per head (Dk)",
    "linear_value_head_dim": "element per head (Dv)",
    "linear_conv_kernel_dim": "token (gated delta net conv kernel width K)",
    "mamba_ssm_dtype": "dtype of the recurrent state (qwen3_5)",
    "hybrid_override_pattern": "one character per layer: M mamba2, * attention, - mlp, E moe",
    "layers_block_type": "per layer: linear_attention | full_attention | mlp | moe",
    "mamba_num_heads": "head (nemotron_h: H)",
    "mamba_head_dim": "element per head (nemotron_h: P)",
    "n_groups": "group (nemotron_h: G)",
    "ssm_state_size": "element (nemotron_h: N)",
    "conv_kernel": "token (nemotron_h: conv kernel width K)",
    "mamba_ssm_cache_dtype": "dtype of the SSM state (nemotron_h, default float32)",
    "attention_head_dim": "element per head (nemotron_h: must agree with head_dim)",
    "encoder_layers": "layer (whisper encoder: no cache)",
    "decoder_layers": "layer (whisper decoder: self- and cross-attention)",
    "decoder_attention_heads": "head (whisper decoder)",
    "d_model": "element (whisper: head_dim = d_model / decoder_attention_heads)",
    "max_source_positions": "encoder_token (whisper: the encoder output cross-attention reads)",
    "block_pool_size": "encoder_token per pooled_block (P)",
    "downsample_factor": "encoder_token per pooled_block (P, when block_pool_size is absent)",
    "max_position_embeddings": "token in a decoder (max_model_len), encoder_token in audio_config",
    "max_target_positions": "token (whisper decoder: max_model_len)",
    "model_max_length": "token (overrides the other length keys, as vLLM reads it)",
    "original_max_position_embeddings": "token (longrope: the default max_model_len)",
    "rope_parameters, rope_scaling": "rope_type and factor (a factor scales max_model_len)",
    "torch_dtype, dtype": "model dtype; float32 is served in bfloat16 (vLLM dtype=auto)",
    "quantization_config": "kv_cache_scheme / kv_cache_quant_algo: an fp8 KV cache",
}

#: The field bounds: counts of layers, heads, elements; sequence lengths.
MAX_COUNT: Final = 1 << 16
MAX_ELEMENTS: Final = 1 << 20
MAX_SEQ: Final = 1 << 40

_ABSENT: Final = object()


class Reader:
    """Collects every problem of one file, each with its path."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.issues: list[ConfigIssue] = []

    def issue(self, path: str, message: str) -> None:
        self.issues.append(ConfigIssue(self.where, path, message))


class Section:
    """One mapping of the file, read with the defaults of its transformers config class.

    Args:
        reader: where issues go.
        data: the mapping as parsed.
        prefix: its path in the file (``""`` or ``"text_config."``).
        model_type: the config class the defaults come from, for messages.
        defaults: the class defaults of the fields the reader uses.
    """

    def __init__(
        self,
        reader: Reader,
        data: Mapping[str, Any],
        prefix: str,
        model_type: str,
        defaults: Mapping[str, Any],
    ) -> None:
        self.reader = reader
        self.data = data
        self.prefix = prefix
        self.model_type = model_type
        self.defaults = defaults

    def path(self, key: str) -> str:
        return self.prefix + key

    def without(self, key: str) -> Section:
        """The same section with ``key`` absent, in the file and in the class defaults."""
        return Section(
            self.reader,
            {k: v for k, v in self.data.items() if k != key},
            self.prefix,
            self.model_type,
            {k: v for k, v in self.defaults.items() if k != key},
        )

    def filled(self, key: str, value: Any) -> Section:
        """The same section with ``value`` for ``key`` where the file leaves it absent or null:
        what a config class's ``__post_init__`` fills in (a layer pattern it derives)."""
        if self.value(key) is not None:
            return self
        return Section(
            self.reader,
            {k: v for k, v in self.data.items() if k != key},
            self.prefix,
            self.model_type,
            {**self.defaults, key: value},
        )

    def issue(self, key: str, message: str) -> None:
        self.reader.issue(self.path(key), message)

    def given(self, key: str) -> bool:
        """Whether the file writes ``key`` (``null`` included)."""
        return key in self.data

    def value(self, key: str) -> Any:
        """The value transformers would hold: the file's (``null`` is ``None``), else the
        class default, else ``None``."""
        if key in self.data:
            return self.data[key]
        return self.defaults.get(key)

    def source(self, key: str) -> str:
        """Where a value came from, for engine-setting sources."""
        if key in self.data:
            return self.path(key)
        return f"{self.path(key)} (absent: {self.model_type} default)"

    def number(
        self,
        key: str,
        *,
        minimum: int = 1,
        maximum: int = MAX_COUNT,
        nullable: bool = False,
    ) -> int | None:
        """An integer field of ``minimum`` to ``maximum``; ``None`` (and an issue unless
        ``nullable``) when it is null or absent without a default."""
        value, unit = self.value(key), HF_FIELDS.get(key, "int")
        if value is None:
            if not nullable:
                self.issue(key, f"missing ({unit})")
            return None
        return self.check_number(key, value, unit, minimum=minimum, maximum=maximum)

    def check_number(
        self, key: str, value: object, unit: str, *, minimum: int = 1, maximum: int = MAX_COUNT
    ) -> int | None:
        """``value`` (read at ``key``) as an int in range, or ``None`` and an issue."""
        if isinstance(value, float) and not math.isfinite(value):
            self.issue(key, f"{value!r} is not a finite number; kvunits reads this field ({unit})")
            return None
        if type(value) is not int:
            self.issue(key, f"expected an integer ({unit}), got {describe(value)}")
            return None
        if not minimum <= value <= maximum:
            self.issue(key, f"must be between {minimum} and {maximum}, got {value} ({unit})")
            return None
        return value

    def derived(self, key: str, value: int, how: str, *, maximum: int = MAX_ELEMENTS) -> int | None:
        """A value the reader derived (``how`` says from what), range-checked like a given one."""
        if not 1 <= value <= maximum:
            self.issue(key, f"{how} = {value}, which must be between 1 and {maximum}")
            return None
        return value

    def flag(self, key: str) -> bool | None:
        """A boolean field (``None`` when null or absent without a default)."""
        value = self.value(key)
        if value is None or isinstance(value, bool):
            return value
        self.issue(key, f"expected true or false, got {describe(value)}")
        return None

    def text(self, key: str) -> str | None:
        """A text field (``None`` when null or absent without a default)."""
        value = self.value(key)
        if value is None or isinstance(value, str):
            return value
        self.issue(key, f"expected a string, got {describe(value)}")
        return None

    def text_list(self, key: str, length: int | None = None) -> list[str] | None:
        """A list of strings (``None`` when null or absent), of ``length`` entries if given."""
        value = self.value(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.issue(key, f"expected a list of strings, got {_kind(value)}")
            return None
        if length is not None and len(value) != length:
            self.issue(key, f"expected {length} entries (one per layer), got {len(value)}")
            return None
        return list(value)

    def window(self, key: str = "sliding_window") -> int | None:
        """A sliding window in tokens: ``None`` when null, absent without default, or 0
        (vLLM's ``ModelConfig.get_sliding_window`` reads 0 as no window)."""
        value = self.value(key)
        if value == 0 and type(value) is int:
            return None
        return self.number(key, maximum=MAX_SEQ, nullable=True)


def _kind(value: object) -> str:
    if isinstance(value, list):
        return "a list with a non-string entry"
    return describe(value)
