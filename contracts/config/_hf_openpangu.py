"""openPangu (vllm/model_executor/models/openpangu.py): one decoder, three attentions.

vLLM 0.33 serves PanguEmbeddedForCausalLM, PanguProMoEV2ForCausalLM and
PanguUltraMoEForCausalLM with the same ``OpenPanguDecoderLayer``, which picks one attention
for every layer from the config (not a mix per layer):

* **MLA** when the config has ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``
  and ``kv_lora_rank`` (``use_mla``: ``OpenPanguMLAAttention``, vLLM's
  ``MultiHeadLatentAttentionWrapper``): one latent head of ``kv_lora_rank +
  qk_rope_head_dim`` a layer, as DeepSeek's (openPangu-Ultra-MoE);
* **static sink attention** when ``param_sink_number > 0`` (``OpenPanguSinkAttention``:
  ``SinkFullAttentionSpec`` with ``sink_len`` sink tokens, K of ``qk_nope_dim +
  qk_rope_dim``, V of ``v_channels``): not modelled, refused naming it;
* else **grouped-query attention** (``OpenPanguEmbeddedAttention``):
  ``num_key_value_heads`` (default the attention heads) of ``head_dim`` (else
  ``hidden_size / heads``), full attention, or sliding over ``interleaved_sliding_window``:
  an int for every layer, a list cycled by layer index (``layer_idx % len``).
"""

from __future__ import annotations

from typing import Final

from .._layers import LayerSpec
from ._hf_fields import MAX_ELEMENTS, Section
from ._hf_layers import DTypes, attention, full, layer_count, mla, sliding

Layers = dict[str, LayerSpec]

#: ``OpenPanguDecoderLayer.use_mla``: all four present (``hasattr``) selects MLA.
_MLA_FIELDS: Final = ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank")


def read_openpangu(sec: Section, dtypes: DTypes) -> Layers | None:
    """openPangu's layers as ``OpenPanguDecoderLayer`` builds them (the module docstring)."""
    n_layers = layer_count(sec)
    if n_layers is None:
        return None
    if all(sec.value(key) is not None for key in _MLA_FIELDS):
        rank = sec.number("kv_lora_rank", maximum=MAX_ELEMENTS)
        rope = sec.number("qk_rope_head_dim", maximum=MAX_ELEMENTS)
        if rank is None or rope is None:
            return None
        latent = mla(rank, rope, dtypes.kv)
        return {f"text.{i}": latent for i in range(n_layers)}
    sink = sec.value("param_sink_number")
    if isinstance(sink, int) and not isinstance(sink, bool) and sink > 0:
        sec.issue(
            "param_sink_number",
            f"{sink}: openpangu.py then runs static sink attention (OpenPanguSinkAttention: "
            "vLLM's SinkFullAttentionSpec with sink_len sink tokens a layer and V of "
            "v_channels), which kvunits does not model",
        )
        return None
    geometry = attention(sec, dtypes.kv)
    if geometry is None:
        return None
    windows = _windows(sec, n_layers)
    if windows is None:
        return None
    return {
        f"text.{i}": full(geometry) if w is None else sliding(geometry, w)
        for i, w in enumerate(windows)
    }


def _windows(sec: Section, n_layers: int) -> list[int | None] | None:
    """Each layer's window: ``interleaved_sliding_window`` (an int, or a list cycled by
    layer index: ``OpenPanguEmbeddedAttention.__init__``), else none."""
    key = "interleaved_sliding_window"
    value = sec.value(key)
    if value is None:
        return [None] * n_layers
    if isinstance(value, list) and value:
        if not all(isinstance(w, int) and not isinstance(w, bool) and w > 0 for w in value):
            sec.issue(
                key,
                "expected positive integers (a window per layer, cycled by layer index), got "
                f"{str(value)[:80]}",
            )
            return None
        return [value[i % len(value)] for i in range(n_layers)]
    window = sec.number(key, maximum=1 << 30)
    if window is None:
        return None
    return [window] * n_layers
