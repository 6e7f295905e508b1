"""Readers of the Mamba families beside Jamba and Nemotron-H: Granite 4.0 hybrids, Falcon-H1,
Zamba2, the attention-free Mamba-1, Falcon-Mamba and Mamba-2, and LFM2's short convolutions.

Each follows its vLLM 0.33 model file's ``get_mamba_state_shape_from_config`` (the state's
dimensions, through ``MambaStateShapeCalculator``) and ``get_mamba_state_dtype_from_config``
(both states in the model dtype unless ``--mamba-cache-dtype`` / ``--mamba-ssm-cache-dtype``
say otherwise: ``MambaStateDtypeCalculator.mamba1_state_dtype`` / ``mamba2_state_dtype``; none
of these files has a dtype hook), and its attention layers' ``Attention(...)`` arguments. The
class defaults are transformers' config classes', which vLLM reads through; where such a
class derives a field in ``__post_init__`` whatever the file says (Zamba2's head sizes), the
reader derives it the same way; each rule is checked against vLLM's own
``get_mamba_state_shape_from_config`` by tests/vllm_oracle.
"""

from __future__ import annotations

from typing import Final

from .._layers import LayerSpec
from ._hf_decoders import layer_types
from ._hf_fields import MAX_COUNT, MAX_ELEMENTS, Section
from ._hf_layers import (
    Attention,
    DTypes,
    full,
    heads,
    layer_count,
    mamba1,
    mamba2,
    short_conv,
)

Layers = dict[str, LayerSpec]

_HIDDEN: Final = 1 << 24
_KERNEL: Final = 1 << 10


def _mamba2_layer(
    sec: Section,
    dtypes: DTypes,
    *,
    inner: int,
    heads_key: str,
    head_key: str,
    groups_key: str,
    state_key: str,
    conv_key: str,
) -> LayerSpec | None:
    """A Mamba-2 state of inner size ``inner`` (vLLM ``mamba2_state_shape``); the head size
    ``"auto"`` is ``inner // heads`` (transformers' ``__post_init__``). The heads must tile
    the inner size exactly: transformers' ``validate_architecture`` (GraniteMoeHybridConfig,
    FalconH1Config, Mamba2Config), through which vLLM loads the file, refuses it otherwise."""
    n_heads = sec.number(heads_key)
    groups = sec.number(groups_key)
    state = sec.number(state_key, maximum=MAX_ELEMENTS)
    kernel = sec.number(conv_key, maximum=_KERNEL)
    if None in (n_heads, groups, state, kernel):
        return None
    assert n_heads is not None and groups is not None and state is not None
    assert kernel is not None
    if sec.value(head_key) == "auto":
        head = sec.derived(head_key, inner // n_heads, f"inner size {inner} / {heads_key}")
    else:
        head = sec.number(head_key, maximum=MAX_ELEMENTS)
    if head is None:
        return None
    if n_heads * head != inner:
        sec.issue(
            head_key,
            f"{n_heads} heads ({heads_key}) × {head} ({head_key}) is not the mixer's inner size "
            f"{inner}: transformers' config class refuses the file (validate_architecture), "
            "and vLLM with it",
        )
        return None
    return mamba2(
        num_heads=n_heads,
        head_dim=head,
        n_groups=groups,
        ssm_state_size=state,
        conv_kernel=kernel,
        conv_dtype=dtypes.model,
        ssm_dtype=dtypes.model,
        intermediate_size=inner,
    )


def _expand_inner(sec: Section, expand_key: str) -> int | None:
    """``int(expand × hidden_size)`` (transformers and vLLM round a fractional expand down)."""
    expand = sec.value(expand_key)
    hidden = sec.number("hidden_size", maximum=_HIDDEN)
    if hidden is None:
        return None
    if type(expand) is float and expand > 0 and expand * hidden < MAX_ELEMENTS:
        return sec.derived(expand_key, int(expand * hidden), f"{expand_key} × hidden_size")
    factor = sec.number(expand_key, maximum=MAX_COUNT)
    if factor is None:
        return None
    return sec.derived(expand_key, factor * hidden, f"{expand_key} × hidden_size")


def _derived_attention(sec: Section, dtypes: DTypes, key: str = "hidden_size") -> Attention | None:
    """KV heads ``num_key_value_heads`` (null: the attention heads), head size
    ``hidden_size // num_attention_heads``."""
    counted = heads(sec)
    hidden = sec.number(key, maximum=_HIDDEN)
    if counted is None or hidden is None:
        return None
    n_heads, kv = counted
    if hidden % n_heads:
        sec.issue(key, f"{hidden} is not a multiple of num_attention_heads {n_heads}")
        return None
    size = sec.derived("head_dim", hidden // n_heads, f"{key} / num_attention_heads")
    return None if size is None else Attention(kv, size, dtypes.kv)


#: transformers' names (and their legacy ones, ``remap_legacy_layer_types``) of a layer.
_GRANITE_TYPES: Final = {
    "mamba": "state",
    "linear_attention": "state",
    "attention": "full",
    "full_attention": "full",
}


def _mamba_fields_state(sec: Section, dtypes: DTypes, inner: int) -> LayerSpec | None:
    """The Mamba-2 state of a hybrid whose fields carry the ``mamba_`` prefix (Granite 4.0-H,
    Falcon-H1): ``mamba_n_heads`` heads of ``mamba_d_head``, ``mamba_n_groups``,
    ``mamba_d_state``, ``mamba_d_conv``."""
    return _mamba2_layer(
        sec,
        dtypes,
        inner=inner,
        heads_key="mamba_n_heads",
        head_key="mamba_d_head",
        groups_key="mamba_n_groups",
        state_key="mamba_d_state",
        conv_key="mamba_d_conv",
    )


def read_granite_hybrid(sec: Section, dtypes: DTypes) -> Layers | None:
    """granitemoehybrid, Granite 4.0-H (vllm/model_executor/models/granitemoehybrid.py):
    ``layer_types`` (``layers_block_type``) per layer, ``mamba``/``linear_attention`` a
    Mamba-2 mixer of inner size ``mamba_expand × hidden_size`` (``mamba_n_heads`` heads of
    ``mamba_d_head``, ``mamba_n_groups``, ``mamba_d_state``, ``mamba_d_conv``),
    ``attention``/``full_attention`` full attention with ``num_key_value_heads`` KV heads of
    ``hidden_size // num_attention_heads`` (``GraniteMoeHybridAttention``); no window."""
    n_layers = layer_count(sec)
    a = _derived_attention(sec, dtypes)
    inner = _expand_inner(sec, "mamba_expand")
    if n_layers is None or a is None or inner is None:
        return None
    key = "layer_types" if sec.value("layer_types") is not None else "layers_block_type"
    if sec.value(key) is None:
        kinds = ["state"] * n_layers  # GraniteMoeHybridConfig: every layer a Mamba mixer
    else:
        found = layer_types(sec, n_layers, _GRANITE_TYPES, key)
        if found is None:
            return None
        kinds = found
    state = _mamba_fields_state(sec, dtypes, inner)
    if state is None:
        return None
    by_kind = {"full": full(a), "state": state}
    return {f"text.{i}": by_kind[kind] for i, kind in enumerate(kinds)}


def read_falcon_h1(sec: Section, dtypes: DTypes) -> Layers | None:
    """falcon_h1 (vllm/model_executor/models/falcon_h1.py ``FalconH1ParallelHybrid``): every
    layer runs attention and a Mamba-2 mixer side by side, so each keeps a KV cache
    (``num_key_value_heads`` KV heads of ``head_dim``, else ``hidden_size //
    num_attention_heads``: ``FalconH1AttentionDecoderLayer``) and a state (``text.<i>.mamba``)
    of inner size ``mamba_d_ssm`` (else ``int(mamba_expand × hidden_size)``)."""
    n_layers = layer_count(sec)
    counted = heads(sec)
    if n_layers is None or counted is None:
        return None
    n_heads, kv = counted
    if sec.value("head_dim") is not None:
        size = sec.number("head_dim", maximum=MAX_ELEMENTS)
    else:
        hidden = sec.number("hidden_size", maximum=_HIDDEN)
        size = None if hidden is None else sec.derived("head_dim", hidden // n_heads, "h / n")
    if sec.value("mamba_d_ssm") is not None:
        inner = sec.number("mamba_d_ssm", maximum=MAX_ELEMENTS)
    else:
        inner = _expand_inner(sec, "mamba_expand")
    if size is None or inner is None:
        return None
    state = _mamba_fields_state(sec, dtypes, inner)
    if state is None:
        return None
    attn = full(Attention(kv, size, dtypes.kv))
    layers: Layers = {}
    for i in range(n_layers):
        layers[f"text.{i}"] = attn
        layers[f"text.{i}.mamba"] = state
    return layers


_ZAMBA_TYPES: Final = {
    "mamba": "state",
    "linear_attention": "state",
    "hybrid": "hybrid",
}


def read_zamba2(sec: Section, dtypes: DTypes) -> Layers | None:
    """zamba2 (vllm/model_executor/models/zamba2.py): every layer of ``layers_block_type``
    has a Mamba-2 mixer of inner size ``mamba_expand × hidden_size``; a ``hybrid`` layer
    also runs the shared attention block with an ``Attention`` of its own (``dpa_list``), of
    ``num_attention_heads`` KV heads (no GQA) of ``2 × hidden_size // num_attention_heads``
    (``Zamba2Config.__post_init__`` sets ``attention_head_dim`` so, whatever the file says;
    likewise ``mamba_headdim = mamba_expand × hidden_size // n_mamba_heads``)."""
    n_layers = layer_count(sec)
    n_heads = sec.number("num_attention_heads")
    hidden = sec.number("hidden_size", maximum=_HIDDEN)
    inner = _expand_inner(sec, "mamba_expand")
    n_mamba = sec.number("n_mamba_heads")
    if None in (n_layers, n_heads, hidden, inner, n_mamba):
        return None
    assert n_layers is not None and n_heads is not None and hidden is not None
    assert inner is not None and n_mamba is not None
    names = sec.text_list("layers_block_type", n_layers)
    if names is None:
        if sec.value("layers_block_type") is None:
            sec.issue("layers_block_type", "missing: one block type per layer")
        return None
    kinds = []
    for index, name in enumerate(names):
        if name not in _ZAMBA_TYPES:
            sec.issue(
                f"layers_block_type[{index}]",
                f"{name[:40]!r} is not a zamba2 block type; it reads {', '.join(_ZAMBA_TYPES)}",
            )
            return None
        kinds.append(_ZAMBA_TYPES[name])
    size = sec.derived("attention_head_dim", 2 * hidden // n_heads, "2 × hidden_size / heads")
    head = sec.derived("mamba_headdim", inner // n_mamba, "mamba_expand × hidden / n_mamba_heads")
    groups = sec.number("mamba_ngroups")
    state_size = sec.number("mamba_d_state", maximum=MAX_ELEMENTS)
    kernel = sec.number("mamba_d_conv", maximum=_KERNEL)
    if None in (size, head, groups, state_size, kernel):
        return None
    assert size is not None and head is not None and groups is not None
    assert state_size is not None and kernel is not None
    state = mamba2(
        num_heads=n_mamba,
        head_dim=head,
        n_groups=groups,
        ssm_state_size=state_size,
        conv_kernel=kernel,
        conv_dtype=dtypes.model,
        ssm_dtype=dtypes.model,
        intermediate_size=inner,
    )
    attn = full(Attention(n_heads, size, dtypes.kv))
    layers: Layers = {}
    for i, kind in enumerate(kinds):
        if kind == "hybrid":
            layers[f"text.{i}"] = attn
            layers[f"text.{i}.mamba"] = state
        else:
            layers[f"text.{i}"] = state
    return layers


def read_mamba(sec: Section, dtypes: DTypes) -> Layers | None:
    """mamba, falcon_mamba (vllm/model_executor/models/mamba.py ``MambaForCausalLM``):
    attention-free, a Mamba-1 mixer per layer of inner size ``intermediate_size`` (the file's:
    vLLM 0.33 sizes falcon-mamba-7b's state with its 8192, not ``expand × hidden_size``),
    else ``int(expand × hidden_size)``, ``state_size`` and ``conv_kernel``."""
    n_layers = layer_count(sec)
    if sec.value("intermediate_size") is not None:
        inner = sec.number("intermediate_size", maximum=MAX_ELEMENTS)
    else:
        inner = _expand_inner(sec, "expand")
    state = sec.number("state_size", maximum=MAX_ELEMENTS)
    kernel = sec.number("conv_kernel", maximum=_KERNEL)
    if None in (n_layers, inner, state, kernel):
        return None
    assert n_layers is not None and inner is not None and state is not None
    assert kernel is not None
    layer = mamba1(inner, state, kernel, dtypes.model)
    return {f"text.{i}": layer for i in range(n_layers)}


def read_mamba2(sec: Section, dtypes: DTypes) -> Layers | None:
    """mamba2 (vllm/model_executor/models/mamba2.py ``Mamba2ForCausalLM``): attention-free,
    a Mamba-2 mixer per layer of inner size ``expand × hidden_size``, ``num_heads`` heads of
    ``head_dim``, ``n_groups``, ``state_size`` and ``conv_kernel``."""
    n_layers = layer_count(sec)
    inner = _expand_inner(sec, "expand")
    if n_layers is None or inner is None:
        return None
    layer = _mamba2_layer(
        sec,
        dtypes,
        inner=inner,
        heads_key="num_heads",
        head_key="head_dim",
        groups_key="n_groups",
        state_key="state_size",
        conv_key="conv_kernel",
    )
    return None if layer is None else {f"text.{i}": layer for i in range(n_layers)}


def read_lfm2(sec: Section, dtypes: DTypes) -> Layers | None:
    """lfm2 (vllm/model_executor/models/lfm2.py), lfm2_moe (lfm2_moe.py): a layer whose
    ``layer_types`` entry is ``full_attention`` is full attention with ``num_key_value_heads``
    KV heads of ``hidden_size // num_attention_heads`` (``Lfm2Attention``); any other a short
    convolution whose state is ``(conv_L_cache − 1, C)`` in the model dtype
    (``get_mamba_state_shape_from_config``: ``short_conv_state_shape`` with ``C`` =
    ``conv_dim`` for lfm2, ``hidden_size`` for lfm2_moe). An absent ``layer_types`` is
    Lfm2Config's ``__post_init__`` list: full attention on ``full_attn_idxs`` (default every
    layer); Lfm2MoeConfig fills none, and vLLM then fails: it is refused."""
    n_layers = layer_count(sec)
    a = _derived_attention(sec, dtypes)
    moe = sec.model_type == "lfm2_moe"
    channels_key = "hidden_size" if moe else "conv_dim"
    if sec.value(channels_key) is None:
        sec.issue(channels_key, "missing: vLLM's lfm2.py sizes the convolution state with it")
        return None
    channels = sec.number(channels_key, maximum=_HIDDEN)
    cache = sec.number("conv_L_cache", maximum=_KERNEL)
    if n_layers is None or a is None or channels is None or cache is None:
        return None
    if sec.value("layer_types") is not None:
        names = sec.text_list("layer_types", n_layers)
        if names is None:
            return None
        attends = [name == "full_attention" for name in names]
    elif moe:
        sec.issue("layer_types", "missing: vLLM's lfm2_moe.py reads each layer's type from it")
        return None
    else:
        idxs = sec.value("full_attn_idxs")
        if idxs is None:
            attends = [True] * n_layers
        elif isinstance(idxs, list) and all(type(i) is int for i in idxs):
            attends = [i in idxs for i in range(n_layers)]
        else:
            sec.issue("full_attn_idxs", "expected a list of layer indices")
            return None
    state = short_conv(conv_dim=channels, cache_length=cache, dtype=dtypes.model)
    attention_layer = full(a)
    return {f"text.{i}": attention_layer if att else state for i, att in enumerate(attends)}
