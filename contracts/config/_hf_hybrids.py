"""Readers of the hybrid families: attention layers next to recurrent state layers.

vLLM 0.33 gives a Mamba or gated-delta-net layer a ``MambaSpec``: one state per request,
sized by ``MambaStateShapeCalculator`` from the mixer's dimensions, in the dtypes of
``MambaStateDtypeCalculator`` (conv state and SSM state in the model dtype, unless a
per-architecture hook in vllm/model_executor/models/config.py sets the SSM state's: float32
for NemotronH by default, ``mamba_ssm_dtype`` for Qwen3.5). The layers here keep those
dimensions (`kvunits.contracts.state.Mamba1Layer` …), so their manager view's page is the state's
bytes. MLP and MoE layers keep no cache and are not layers of the model spec.
"""

from __future__ import annotations

from typing import Final

from .._dtype import CacheDType
from .._layers import LayerSpec
from ..state import StateMixerLayer
from ._hf_decoders import layer_types
from ._hf_fields import MAX_COUNT, MAX_ELEMENTS, Section
from ._hf_layers import (
    Attention,
    DTypes,
    attention,
    full,
    gated_delta_net,
    heads,
    layer_count,
    mamba1,
    mamba2,
    sliding,
)
from ._models import MAX_LAYERS

Layers = dict[str, LayerSpec]

_STATE_DTYPES: Final = {
    "float32": CacheDType.float32,
    "float16": CacheDType.float16,
    "bfloat16": CacheDType.bfloat16,
}


def _state_dtype(sec: Section, key: str, default: CacheDType) -> CacheDType | None:
    name = sec.text(key)
    if name is None:
        return default if sec.value(key) is None else None
    dtype = _STATE_DTYPES.get(name.strip().lower().removeprefix("torch."))
    if dtype is None:
        sec.issue(key, f"expected a state dtype ({', '.join(_STATE_DTYPES)}), got {name[:40]!r}")
    return dtype


def read_jamba(sec: Section, dtypes: DTypes) -> Layers | None:
    """jamba (vllm/model_executor/models/jamba.py): layer i is full attention iff
    ``i % attn_layer_period == attn_layer_offset``, else Mamba-1 with inner size
    ``mamba_expand × hidden_size``; the head size is ``hidden_size // num_attention_heads``;
    both states in the model dtype (no dtype hook)."""
    n_layers, a = layer_count(sec), attention(sec, dtypes.kv, head="derived")
    period = sec.number("attn_layer_period", maximum=MAX_LAYERS)
    offset = sec.number("attn_layer_offset", minimum=0, maximum=MAX_LAYERS)
    expand = sec.number("mamba_expand", maximum=MAX_COUNT)
    state = sec.number("mamba_d_state", maximum=MAX_ELEMENTS)
    kernel = sec.number("mamba_d_conv", maximum=1 << 10)
    hidden = sec.number("hidden_size", maximum=1 << 24)
    if None in (n_layers, a, period, offset, expand, state, kernel, hidden):
        return None
    assert n_layers is not None and a is not None and period is not None and offset is not None
    assert expand is not None and state is not None and kernel is not None and hidden is not None
    if offset >= period:
        sec.issue(
            "attn_layer_offset",
            f"{offset} must be below attn_layer_period {period} (transformers' JambaConfig)",
        )
        return None
    inner = sec.derived("mamba_expand", expand * hidden, "mamba_expand × hidden_size")
    if inner is None:
        return None
    state_layer = mamba1(inner, state, kernel, dtypes.model)
    attn = full(a)
    return {f"text.{i}": attn if i % period == offset else state_layer for i in range(n_layers)}


def read_gated_delta_net(sec: Section, dtypes: DTypes) -> Layers | None:
    """qwen3_next, qwen3_5_text, qwen3_5_moe_text (vllm/model_executor/models/qwen3_next.py,
    qwen3_5.py): ``layer_types`` of ``full_attention`` and ``linear_attention`` (a gated
    delta net), derived when absent as every ``full_attention_interval``-th layer full; the
    recurrent state's dtype is ``mamba_ssm_dtype`` for Qwen3.5 (its config hook), else the
    model dtype."""
    n_layers, a = layer_count(sec), attention(sec, dtypes.kv)
    k_heads = sec.number("linear_num_key_heads")
    v_heads = sec.number("linear_num_value_heads")
    k_dim = sec.number("linear_key_head_dim", maximum=MAX_ELEMENTS)
    v_dim = sec.number("linear_value_head_dim", maximum=MAX_ELEMENTS)
    kernel = sec.number("linear_conv_kernel_dim", maximum=1 << 10)
    ssm_dtype: CacheDType | None = dtypes.model
    if sec.model_type.startswith("qwen3_5"):
        ssm_dtype = _state_dtype(sec, "mamba_ssm_dtype", dtypes.model)
    if None in (n_layers, a, k_heads, v_heads, k_dim, v_dim, kernel, ssm_dtype):
        return None
    assert n_layers is not None and a is not None and k_heads is not None
    assert v_heads is not None and k_dim is not None and v_dim is not None
    assert kernel is not None and ssm_dtype is not None
    if sec.value("layer_types") is not None:
        kinds = layer_types(sec, n_layers, {"full_attention": "full", "linear_attention": "state"})
        if kinds is None:
            return None
    else:
        every = sec.number("full_attention_interval", maximum=MAX_LAYERS)
        if every is None:
            return None
        kinds = ["full" if (i + 1) % every == 0 else "state" for i in range(n_layers)]
    state = gated_delta_net(
        num_k_heads=k_heads,
        num_v_heads=v_heads,
        head_k_dim=k_dim,
        head_v_dim=v_dim,
        conv_kernel=kernel,
        conv_dtype=dtypes.model,
        ssm_dtype=ssm_dtype,
    )
    by_kind = {"full": full(a), "state": state}
    return {f"text.{i}": by_kind[kind] for i, kind in enumerate(kinds)}


def read_olmo_hybrid(sec: Section, dtypes: DTypes) -> Layers | None:
    """olmo_hybrid (vllm/model_executor/models/olmo_hybrid.py ``OlmoHybridDecoderLayer``): a
    ``linear_attention`` layer of ``layer_types`` is a gated delta net
    (``get_mamba_state_shape_from_config``: ``gated_delta_net_state_shape`` of the
    ``linear_*`` fields; both states in the model dtype), any other full attention with
    ``num_key_value_heads`` (null: the heads) KV heads of ``hidden_size //
    num_attention_heads``. Absent fields are OlmoHybridConfig's ``__post_init__`` values:
    every 4th layer (i % 4 == 3; else the last) full attention, key and value heads the
    attention heads, key head size ``int(0.75 × hidden / key heads)``, value twice that."""
    n_layers = layer_count(sec)
    counted = heads(sec)
    hidden = sec.number("hidden_size", maximum=MAX_ELEMENTS)
    if n_layers is None or counted is None or hidden is None:
        return None
    n_heads, kv = counted
    if hidden % n_heads:
        sec.issue("hidden_size", f"{hidden} is not a multiple of num_attention_heads {n_heads}")
        return None
    if sec.value("layer_types") is not None:
        kinds = layer_types(sec, n_layers, {"full_attention": "full", "linear_attention": "state"})
        if kinds is None:
            return None
    else:
        kinds = ["full" if i % 4 == 3 else "state" for i in range(n_layers)]
        if "full" not in kinds:
            kinds[-1] = "full"
    k_heads = sec.filled("linear_num_key_heads", n_heads).number("linear_num_key_heads")
    v_heads = sec.filled("linear_num_value_heads", n_heads).number("linear_num_value_heads")
    kernel = sec.number("linear_conv_kernel_dim", maximum=1 << 10)
    if k_heads is None or v_heads is None or kernel is None:
        return None
    k_dim = sec.filled("linear_key_head_dim", int(0.75 * hidden / k_heads)).number(
        "linear_key_head_dim", maximum=MAX_ELEMENTS
    )
    if k_dim is None:
        return None
    v_dim = sec.filled("linear_value_head_dim", 2 * k_dim).number(
        "linear_value_head_dim", maximum=MAX_ELEMENTS
    )
    if v_dim is None:
        return None
    state = gated_delta_net(
        num_k_heads=k_heads,
        num_v_heads=v_heads,
        head_k_dim=k_dim,
        head_v_dim=v_dim,
        conv_kernel=kernel,
        conv_dtype=dtypes.model,
        ssm_dtype=dtypes.model,
        mixer="olmo_gdn",  # olmo_gdn_linear_attn.py: always FLA, no prefill checkpoints
    )
    size = sec.derived("head_dim", hidden // n_heads, "hidden_size / num_attention_heads")
    if size is None:
        return None
    by_kind = {"full": full(Attention(kv, size, dtypes.kv)), "state": state}
    return {f"text.{i}": by_kind[kind] for i, kind in enumerate(kinds)}


#: Nemotron-H's pattern characters (transformers ``NemotronHConfig._pattern_to_list``).
_PATTERN: Final = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
_BLOCK_TYPES: Final = {
    "linear_attention": "mamba",
    "mamba": "mamba",
    "full_attention": "attention",
    "attention": "attention",
    "mlp": "mlp",
    "moe": "moe",
}


def read_nemotron_h(sec: Section, dtypes: DTypes) -> Layers | None:
    """nemotron_h (vllm/model_executor/models/nemotron_h.py): one layer per character of
    ``hybrid_override_pattern`` (or entry of ``layers_block_type``) — ``M`` a Mamba-2 mixer,
    ``*`` attention, ``-`` an MLP and ``E`` a MoE (no cache); the layer count is the
    pattern's length. Attention slides when ``sliding_window`` is set; the head size is
    ``head_dim`` (class default 128). The Mamba-2 inner size is ``mamba_num_heads ×
    mamba_head_dim``; the SSM state is in ``mamba_ssm_cache_dtype`` (default float32, the
    NemotronH config hook), the conv state in the model dtype."""
    blocks = _nemotron_blocks(sec)
    a = attention(sec, dtypes.kv)
    window = sec.window()
    m_heads = sec.number("mamba_num_heads")
    m_dim = sec.number("mamba_head_dim", maximum=MAX_ELEMENTS)
    groups = sec.number(_alias(sec, "n_groups", "mamba_n_groups"))
    state_size = sec.number("ssm_state_size", maximum=MAX_ELEMENTS)
    kernel = sec.number(_alias(sec, "conv_kernel", "mamba_d_conv"), maximum=1 << 10)
    ssm_dtype = _state_dtype(sec, "mamba_ssm_cache_dtype", CacheDType.float32)
    if None in (blocks, a, m_heads, m_dim, groups, state_size, kernel, ssm_dtype):
        return None
    assert blocks is not None and a is not None and m_heads is not None and m_dim is not None
    assert groups is not None and state_size is not None and kernel is not None
    assert ssm_dtype is not None
    written = sec.value("attention_head_dim")
    if written is not None and (type(written) is not int or written != a.head_size):
        sec.issue(
            "attention_head_dim",
            f"{sec.value('attention_head_dim')!r} disagrees with the head size vLLM uses, "
            f"head_dim = {a.head_size}; write head_dim",
        )
        return None
    inner = sec.derived("mamba_head_dim", m_heads * m_dim, "mamba_num_heads × mamba_head_dim")
    if inner is None:
        return None
    attn = full(a) if window is None else sliding(a, window)
    state = mamba2(
        num_heads=m_heads,
        head_dim=m_dim,
        n_groups=groups,
        ssm_state_size=state_size,
        conv_kernel=kernel,
        conv_dtype=dtypes.model,
        ssm_dtype=ssm_dtype,
    )
    by_block = {"attention": attn, "mamba": state}
    return {f"text.{i}": by_block[b] for i, b in enumerate(blocks) if b in by_block}


def _alias(sec: Section, key: str, legacy: str) -> str:
    # transformers' NemotronHConfig: the legacy name, when the file writes it, wins.
    return legacy if sec.given(legacy) else key


def _nemotron_blocks(sec: Section) -> list[str] | None:
    if sec.value("layers_block_type") is not None:
        names = sec.text_list("layers_block_type")
        if names is None:
            return None
        blocks = []
        for index, name in enumerate(names):
            if name not in _BLOCK_TYPES:
                sec.issue(
                    f"layers_block_type[{index}]",
                    f"{name[:40]!r} is not a block type the nemotron_h reader knows; it reads "
                    + ", ".join(_BLOCK_TYPES),
                )
                return None
            blocks.append(_BLOCK_TYPES[name])
    else:
        pattern = sec.text("hybrid_override_pattern")
        if pattern is None:
            if sec.value("hybrid_override_pattern") is None:
                sec.issue("hybrid_override_pattern", "missing: one character per layer")
            return None
        bad = next((c for c in pattern if c not in _PATTERN), None)
        if bad is not None:
            sec.issue(
                "hybrid_override_pattern",
                f"character {bad!r} is not one the nemotron_h reader knows; it reads "
                + ", ".join(f"{c} ({kind})" for c, kind in _PATTERN.items()),
            )
            return None
        blocks = [_PATTERN[c] for c in pattern]
    if not 1 <= len(blocks) <= MAX_LAYERS:
        sec.issue("hybrid_override_pattern", f"{len(blocks)} layers; 1 to {MAX_LAYERS}")
        return None
    return blocks


#: vLLM 0.33's attention-free state models (``IsAttentionFree``: mamba.py, mamba2.py): the
#: only families whose states vLLM plans without an attention page beside them.
_ATTENTION_FREE_FAMILIES: Final = frozenset({"mamba", "mamba2"})

#: The fields a hybrid config sets its layer pattern with, across the families read: the
#: refusal below names the one the config gave (else ``layer_types``, the class default's).
_PATTERN_FIELDS: Final = (
    "layer_types",
    "hybrid_override_pattern",
    "layers_block_type",
    "full_attention_interval",
    "attn_layer_period",
    "attn_layer_offset",
    "linear_attn_config",
)


def check_hybrid_has_attention(sec: Section, family: str, layers: Layers) -> None:
    """A hybrid family (vLLM ``IsHybrid``) read with states and no cached attention layer is
    refused: vLLM 0.33 builds every layer as a state mixer (granitemoehybrid.py
    ``ALL_DECODER_LAYER_TYPES`` over an all-``linear_attention`` ``layer_types``, the class
    default) but still pads each state page to an attention page of the model-level geometry
    (``Platform._align_hybrid_block_size``: ``ModelConfig.get_num_kv_heads`` ×
    ``get_head_size``, or the MLA latent) that no layer uses, which a model of layers cannot
    express: its plan would be silently smaller than vLLM's."""
    if family in _ATTENTION_FREE_FAMILIES or not layers:
        return
    kinds = {isinstance(layer, StateMixerLayer) for layer in layers.values()}
    if kinds == {True}:
        field = next((f for f in _PATTERN_FIELDS if sec.value(f) is not None), "layer_types")
        sec.issue(
            field,
            f"every layer of this {family} config (its layer pattern) is a recurrent state and "
            "none attention: vLLM 0.33 serves it, but "
            "pads each state page to a model-level attention page no layer uses "
            "(Platform._align_hybrid_block_size), which kvunits does not model; give the "
            "attention layers' types",
        )
