"""Gemma 4's ``per_layer_config``: per-layer overrides of the attention geometry.

transformers' ``Gemma4TextConfig`` (5.20) keeps a ``per_layer_config`` mapping of layer index
(a string such as ``"05"`` in ``config.json``) to overrides; a layer it does not name takes the
config's ``head_dim`` and ``num_key_value_heads`` (``_PerLayerConfigView``). Without the
mapping, ``__post_init__`` writes one of ``global_head_dim`` (and, with ``attention_k_eq_v``,
``num_global_key_value_heads``) for every full-attention layer; given, those two fields are
not read. vLLM 0.33's ``Gemma4DecoderLayer`` takes each layer's
``config.per_layer_config[layer_idx].head_dim`` and ``.num_key_value_heads``
(vllm/model_executor/models/gemma4.py).
"""

from __future__ import annotations

from typing import Final

from ._hf_fields import MAX_ELEMENTS, Section
from ._hf_layers import Attention

#: The overrides that size a layer's cache; any other key is refused by name.
_KEYS: Final = ("head_dim", "num_key_value_heads")


def per_layer_attention(sec: Section, n_layers: int, base: Attention) -> list[Attention] | None:
    """Each layer's geometry from ``per_layer_config`` over ``base`` (None: refused, the
    issue recorded)."""
    value = sec.value("per_layer_config")
    if not isinstance(value, dict):
        sec.issue("per_layer_config", "expected a mapping of layer index to overrides")
        return None
    out = [base] * n_layers
    for key, overrides in value.items():
        index = int(key) if isinstance(key, str) and key.isdigit() else None
        if index is None or index >= n_layers or not isinstance(overrides, dict):
            sec.issue(
                "per_layer_config",
                f"entry {str(key)[:20]!r}: expected a layer index below {n_layers} mapping to "
                "overrides",
            )
            return None
        layer = Section(sec.reader, overrides, sec.path(f"per_layer_config.{key}."), "", {})
        unknown = sorted(set(overrides) - set(_KEYS))
        if unknown:
            layer.issue(unknown[0], "a per-layer override kvunits does not read")
            return None
        heads = base.kv_heads
        if "num_key_value_heads" in overrides:
            heads = layer.number("num_key_value_heads") or 0
        size = base.head_size
        if "head_dim" in overrides:
            size = layer.number("head_dim", maximum=MAX_ELEMENTS) or 0
        if not heads or not size:
            return None
        out[index] = Attention(heads, size, base.dtype)
    return out
