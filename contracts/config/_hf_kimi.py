"""Kimi Linear's decoder (``kimi_linear``: Kimi-Linear-48B, Kimi-K3's ``text_config``).

vLLM 0.33 builds it in ``vllm/models/kimi_k3/nvidia/model.py`` (``KimiDecoderLayer``): layer
``i`` is Kimi delta attention (KDA) when ``i + 1`` is in ``linear_attn_config.kda_layers``
(``KimiLinearConfig.is_kda_layer``, 1-based), else multi-head latent attention of
``kv_lora_rank + qk_rope_head_dim`` (``MultiHeadLatentAttention``; ``ModelConfig.use_mla``,
as ``is_deepseek_mla`` names ``kimi_linear``). A KDA layer keeps one request's state, sized
by ``KimiLinearForCausalLM.get_mamba_state_shape_from_config``:
``MambaStateShapeCalculator.kda_state_shape(tp, num_heads, head_dim,
conv_kernel_size=short_conv_kernel_size)`` (``vllm/model_executor/layers/mamba/
mamba_utils.py``): a conv state of ``3 × num_heads × head_dim`` channels over ``K − 1``
tokens and a recurrent state ``(num_heads, head_dim, head_dim)`` — a gated delta net's with
equal key and value heads. Its dtypes are ``MambaStateDtypeCalculator.kda_state_dtype``: the
conv state in the model dtype (or ``--mamba-cache-dtype``), the recurrent state float32.
Kimi-K3's ``use_full_rank_gate`` builds ``KimiK3DeltaAttention`` (``kda.py``) instead of
Kimi Linear's ``KimiGatedDeltaNetAttention``: the same shapes, and FlashKDA's prefill
checkpoints on the GPUs it runs on. ``KimiK3DeltaAttention.__init__`` picks FlashKDA with
``resolve_kda_prefill_backend("auto", ...)`` where ``is_flashkda_supported`` holds: compute
capability 9, 10 or 12 (the GPU's), ``linear_attn_config.head_dim == 128``, bf16 activations
(``model_config.dtype``), a bf16 or float32 recurrent state (the only two
``kda_state_dtype`` allows) and ``linear_attn_config.gate_lower_bound`` given; the model's
half is the layer's ``flashkda``.
"""

from __future__ import annotations

from typing import Literal

from .._dtype import CacheDType
from .._layers import LayerSpec
from ._hf_fields import MAX_ELEMENTS, Section
from ._hf_layers import DTypes, gated_delta_net, layer_count, mla
from ._models import MAX_LAYERS

Layers = dict[str, LayerSpec]


def read_kimi_linear(sec: Section, dtypes: DTypes) -> Layers | None:
    """kimi_linear (see the module doc): KDA state layers where ``kda_layers`` names them
    (1-based), MLA on the others; a null ``linear_attn_config`` is MLA on every layer."""
    n_layers = layer_count(sec)
    rank = sec.number("kv_lora_rank", maximum=MAX_ELEMENTS)
    rope = sec.number("qk_rope_head_dim", maximum=MAX_ELEMENTS)
    if n_layers is None or rank is None or rope is None:
        return None
    latent = mla(rank, rope, dtypes.kv)
    config = sec.value("linear_attn_config")
    if config is None:
        return {f"text.{i}": latent for i in range(n_layers)}
    if not isinstance(config, dict):
        sec.issue("linear_attn_config", "expected a mapping (kda_layers, num_heads, head_dim…)")
        return None
    lac = Section(sec.reader, config, sec.path("linear_attn_config."), sec.model_type, {})
    kda = _kda_layers(lac, n_layers)
    heads = lac.number("num_heads")
    head_dim = lac.number("head_dim", maximum=MAX_ELEMENTS)
    kernel = lac.number("short_conv_kernel_size", maximum=1 << 10)
    full_rank = lac.flag("use_full_rank_gate")
    bounded = _gate_lower_bound(lac) if full_rank else False
    if kda is None or heads is None or head_dim is None or kernel is None or bounded is None:
        return None
    mixer: Literal["kda", "kda_full_rank_gate"] = "kda_full_rank_gate" if full_rank else "kda"
    state = gated_delta_net(
        num_k_heads=heads,
        num_v_heads=heads,
        head_k_dim=head_dim,
        head_v_dim=head_dim,
        conv_kernel=kernel,
        conv_dtype=dtypes.model,
        ssm_dtype=CacheDType.float32,
        mixer=mixer,
        flashkda=bounded and head_dim == _FLASHKDA_HEAD_DIM and dtypes.model == CacheDType.bfloat16,
    )
    return {f"text.{i}": state if i + 1 in kda else latent for i in range(n_layers)}


#: ``kda.py`` ``is_flashkda_supported``: FlashKDA's head dim.
_FLASHKDA_HEAD_DIM = 128
#: ``kda.py`` ``_KDA_GATE_LOGBOUND_MIN``: ``KimiK3DeltaAttention`` asserts the bound in [-5, 0).
_GATE_BOUND_MIN = -5.0


def _gate_lower_bound(lac: Section) -> bool | None:
    """Whether Kimi-K3's ``gate_lower_bound`` is given (``kda_config.get``: null is none);
    vLLM asserts ``-5 <= bound < 0`` at start-up, so another number is refused here."""
    value = lac.value("gate_lower_bound")
    if value is None:
        return False
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (_GATE_BOUND_MIN <= value < 0)
    ):
        lac.issue(
            "gate_lower_bound",
            f"expected a number in [-5, 0) or null (KimiK3DeltaAttention asserts it), got "
            f"{value!r}",
        )
        return None
    return True


def _kda_layers(lac: Section, n_layers: int) -> frozenset[int] | None:
    """``kda_layers``: 1-based layer numbers (vLLM's config asserts the list is given)."""
    value = lac.value("kda_layers")
    if not isinstance(value, list) or not all(
        type(v) is int and 1 <= v <= MAX_LAYERS for v in value
    ):
        lac.issue(
            "kda_layers",
            f"expected a list of 1-based layer numbers (up to {n_layers}), the layers of Kimi "
            "delta attention",
        )
        return None
    return frozenset(value)


def kda_state_dtypes(
    mixer: str, conv: CacheDType | None, ssm: CacheDType | None
) -> tuple[dict[str, CacheDType], str | None]:
    """``--mamba-cache-dtype`` (``conv``) and ``--mamba-ssm-cache-dtype`` (``ssm``) on a
    KDA layer as vLLM 0.33's ``MambaStateDtypeCalculator.kda_state_dtype`` takes them: the
    conv state takes ``conv``; the recurrent state stays float32 unless Kimi-K3's
    ``KimiK3DeltaAttention.get_state_dtype`` is given float32 or bfloat16 (any other raises
    in vLLM). Kimi Linear's ``KimiGatedDeltaNetAttention.get_state_dtype`` passes no SSM
    dtype (float32 always) while its model's hook sizes the pages with it, so a non-float32
    ``ssm`` is refused there. Returns the fields to update and the refusal, if any."""
    update = {} if conv is None else {"conv_dtype": conv}
    if ssm is None or ssm == CacheDType.float32:
        return update, None
    if mixer == "kda_full_rank_gate" and ssm == CacheDType.bfloat16:
        return {**update, "ssm_dtype": ssm}, None
    if mixer == "kda_full_rank_gate":
        return update, (
            f"{ssm.value}: Kimi-K3's KDA recurrent state takes only float32 or bfloat16 "
            "(vLLM 0.33 MambaStateDtypeCalculator.kda_state_dtype raises)"
        )
    return update, (
        f"{ssm.value}: Kimi Linear's KDA layer keeps its recurrent state float32 "
        "(KimiGatedDeltaNetAttention.get_state_dtype passes no SSM dtype) while vLLM 0.33 "
        "sizes its pages with this dtype: leave it auto (float32)"
    )
