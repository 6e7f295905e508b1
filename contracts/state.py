"""State layers of Mamba-like mixers: a fixed per-request state, kept as its tensors.

A recurrent mixer (Mamba-1, Mamba-2, gated delta net, short convolution) keeps no cache that
grows with the sequence: one request holds one convolution state and (but for a short
convolution) one SSM (recurrent) state per layer, whatever its length. vLLM sizes them in
``MambaStateShapeCalculator`` and ``MambaStateDtypeCalculator``
(``vllm/model_executor/layers/mamba/mamba_utils.py``, 0.33.0); these layers keep the mixer's
own sizes (heads, head sizes, groups, kernel width) so that the shapes, and a tensor-parallel
rank's share of them, are derived here by the same formulas instead of being written by hand:

============== ====================================== ===========================
mixer          conv state (state_len, dim)             SSM / recurrent state
============== ====================================== ===========================
mamba1         (K − 1, I / tp)                         (I / tp, N)
mamba2         (K − 1, (I + 2·G'·N) / tp)              (H / tp, P, N)
gated delta    (K − 1, (2·Hk·Dk + Hv·Dv) / tp)         (Hv / tp, Dv, Dk)
short conv     (L − 1, C / tp)                         none
============== ====================================== ===========================

(K: conv kernel width, I: inner size, N: SSM state size, H/P: SSM heads and head size,
G: groups, G' = G when tp divides G, else tp — vLLM replicates the groups across ranks;
Hk/Dk, Hv/Dv: key and value heads and their sizes; L, C: a short convolution's cache length
and channels.) A division that is not exact is an
error, as vLLM's ``divide`` asserts. The state's bytes are the tensors' bytes summed, each in
its own dtype (vLLM packs them back to back in one page: ``MambaSpec.page_size_bytes``).

Example:
    >>> from kvunits.contracts import Elements
    >>> layer = Mamba1Layer(intermediate_size=Elements(8192), ssm_state_size=Elements(16),
    ...                     conv_kernel=4)
    >>> [(t.name, t.shape) for t in layer.state_tensors()]
    [('conv', (3, 8192)), ('ssm', (8192, 16))]
    >>> str(layer.state_size)
    '311296 byte'
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Literal, final

from pydantic import ConfigDict, Field, ValidationInfo, field_validator

from ._counts import Elements, Heads
from ._dtype import CacheDType, parse_dtype_field
from ._model import SpecModel
from ._quantity import Bytes
from .errors import SpecError

#: The groups sharing a Mamba-2 mixer's B and C projections: a real positive int.
_Groups = Annotated[
    int, Field(strict=True, ge=1, le=1 << 20, json_schema_extra={"x-unit": "group"})
]
_Kernel = Annotated[
    int, Field(strict=True, ge=1, le=1 << 10, json_schema_extra={"x-unit": "token"})
]


@final
@dataclass(frozen=True, slots=True)
class StateTensor:
    """One tensor of a request's state in one layer (one rank's share).

    Attributes:
        name: ``"conv"``, ``"ssm"`` (Mamba) or ``"recurrent"`` (gated delta net).
        shape: elements per axis.
        dtype: element type.
    """

    name: str
    shape: tuple[int, ...]
    dtype: CacheDType

    @property
    def size(self) -> Bytes:
        """Bytes of the tensor: the product of its shape × the dtype's size."""
        return Bytes(math.prod(self.shape) * self.dtype.itemsize_bytes)


def _divide(numerator: int, tp: int, what: str) -> int:
    """``numerator / tp``, exact (vLLM's ``divide`` asserts the same)."""
    if numerator % tp:
        raise SpecError(
            f"{what} = {numerator} is not divisible by the tensor-parallel size {tp}: "
            "vLLM splits this state across ranks exactly"
        )
    return numerator // tp


class StateMixerLayer(SpecModel):
    """The base of the recurrent-mixer layers: two state tensors per request, sized from the
    mixer's own dimensions (see the module doc). Their manager view is a ``state`` layer."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)

    conv_kernel: _Kernel = Field(description="K: the causal convolution's width (tokens)")
    conv_dtype: CacheDType = Field(
        default=CacheDType.bfloat16, description="element type of the conv state"
    )
    ssm_dtype: CacheDType = Field(
        default=CacheDType.bfloat16, description="element type of the SSM / recurrent state"
    )

    @field_validator("conv_dtype", "ssm_dtype", mode="before")
    @classmethod
    def _parse_dtype(cls, value: object, info: ValidationInfo) -> object:
        return parse_dtype_field(value, info)

    def state_tensors(self, tp: int = 1) -> tuple[StateTensor, ...]:
        """The conv and SSM tensors one request holds in this layer on one of ``tp`` ranks.

        Raises:
            SpecError: ``tp`` does not divide a size vLLM splits exactly.
        """
        if type(tp) is not int or tp < 1:
            raise SpecError(f"tp must be an int >= 1 (tensor-parallel ranks), got {tp!r}")
        conv, ssm, ssm_name = self._shapes(tp)
        return (
            StateTensor("conv", conv, self.conv_dtype),
            StateTensor(ssm_name, ssm, self.ssm_dtype),
        )

    @property
    def state_size(self) -> Bytes:
        """Bytes of state one request holds in this layer (tp = 1): the tensors summed."""
        return Bytes(sum(t.size.numerical_value_in(Bytes) for t in self.state_tensors()))

    def _shapes(self, tp: int) -> tuple[tuple[int, ...], tuple[int, ...], str]:
        raise NotImplementedError  # each mixer below


class Mamba1Layer(StateMixerLayer):
    """A Mamba-1 mixer (Jamba): conv ``(K − 1, I)``, SSM ``(I, N)``
    (vLLM ``MambaStateShapeCalculator.mamba1_state_shape``)."""

    kind: Literal["mamba1"] = "mamba1"
    intermediate_size: Elements = Field(description="I: the mixer's inner size (expand × hidden)")
    ssm_state_size: Elements = Field(description="N: the SSM state size per channel")

    def _shapes(self, tp: int) -> tuple[tuple[int, ...], tuple[int, ...], str]:
        inner = _divide(self.intermediate_size._value, tp, "intermediate_size")
        return (self.conv_kernel - 1, inner), (inner, self.ssm_state_size._value), "ssm"


class Mamba2Layer(StateMixerLayer):
    """A Mamba-2 mixer (Nemotron-H): conv ``(K − 1, I + 2·G·N)``, SSM ``(H, P, N)``
    (vLLM ``MambaStateShapeCalculator.mamba2_state_shape``)."""

    kind: Literal["mamba2"] = "mamba2"
    intermediate_size: Elements = Field(description="I: the mixer's inner size")
    num_heads: Heads = Field(description="H: SSM heads")
    head_dim: Elements = Field(description="P: elements per SSM head")
    n_groups: _Groups = Field(description="G: groups sharing the B and C projections")
    ssm_state_size: Elements = Field(description="N: the SSM state size")

    def _shapes(self, tp: int) -> tuple[tuple[int, ...], tuple[int, ...], str]:
        # vLLM's extra_groups_for_head_shards: groups a rank cannot own are replicated.
        groups = self.n_groups if self.n_groups % tp == 0 else tp
        state = self.ssm_state_size._value
        conv_dim = self.intermediate_size._value + 2 * groups * state
        conv = (self.conv_kernel - 1, _divide(conv_dim, tp, "conv dim (I + 2·G·N)"))
        heads = _divide(self.num_heads._value, tp, "num_heads")
        return conv, (heads, self.head_dim._value, state), "ssm"


class GatedDeltaNetLayer(StateMixerLayer):
    """A gated delta net (Qwen3-Next, Qwen3.5 ``linear_attention``): conv
    ``(K − 1, 2·Hk·Dk + Hv·Dv)``, recurrent ``(Hv, Dv, Dk)``
    (vLLM ``MambaStateShapeCalculator.gated_delta_net_state_shape``). Kimi delta attention
    (KDA) is the same state with ``Hk = Hv`` heads and ``Dk = Dv`` (``kda_state_shape``: conv
    ``3·H·D``, recurrent ``(H, D, D)``); ``mixer`` names vLLM's class."""

    kind: Literal["gated_delta_net"] = "gated_delta_net"
    mixer: Literal["gdn", "olmo_gdn", "kda", "kda_full_rank_gate"] = Field(
        default="gdn",
        description="vLLM's mixer class: gdn (QwenGatedDeltaNetAttention; prefill checkpoints "
        "by the GPU's GDN backend), olmo_gdn (OLMo Hybrid's OlmoHybridGatedDeltaNetAttention: "
        "Triton prefill, no prefill checkpoints), kda (Kimi Linear's "
        "KimiGatedDeltaNetAttention: no prefill checkpoints, recurrent state float32), "
        "kda_full_rank_gate (Kimi-K3's KimiK3DeltaAttention: FlashKDA prefill checkpoints by GPU)",
    )
    num_k_heads: Heads = Field(description="Hk: key heads")
    num_v_heads: Heads = Field(description="Hv: value heads")
    head_k_dim: Elements = Field(description="Dk: elements per key head")
    head_v_dim: Elements = Field(description="Dv: elements per value head")
    flashkda: bool = Field(
        default=False,
        description="kda_full_rank_gate only: the model's half of vLLM's is_flashkda_supported "
        "holds (linear_attn_config.gate_lower_bound given, head dim 128, bf16 activations), "
        "so the GPU's compute capability decides FlashKDA's prefill checkpoint page",
    )

    @field_validator("flashkda")
    @classmethod
    def _flashkda_is_kimi_k3s(cls, value: bool, info: ValidationInfo) -> bool:
        """Only Kimi-K3's ``KimiK3DeltaAttention`` picks FlashKDA (vLLM 0.33 ``kda.py``)."""
        mixer = info.data.get("mixer")
        if value and mixer != "kda_full_rank_gate":
            raise ValueError(
                f"flashkda: only the mixer kda_full_rank_gate (Kimi-K3) runs FlashKDA, got "
                f"mixer {mixer!r}; leave flashkda false"
            )
        return value

    def _shapes(self, tp: int) -> tuple[tuple[int, ...], tuple[int, ...], str]:
        hk, hv = self.num_k_heads._value, self.num_v_heads._value
        dk, dv = self.head_k_dim._value, self.head_v_dim._value
        conv_dim = 2 * hk * dk + hv * dv
        conv = (self.conv_kernel - 1, _divide(conv_dim, tp, "conv dim (2·Hk·Dk + Hv·Dv)"))
        heads = _divide(hv, tp, "num_v_heads")
        return conv, (heads, dv, dk), "recurrent"


class ShortConvLayer(StateMixerLayer):
    """A short convolution (LFM2's ``conv`` layers): one conv state ``(L − 1, C)`` and no
    SSM state (vLLM ``MambaStateShapeCalculator.short_conv_state_shape``, its one dtype
    ``short_conv_state_dtype``: the model's, or ``--mamba-cache-dtype``). ``conv_kernel`` is
    ``L``, the file's ``conv_L_cache``; ``ssm_dtype`` is unused."""

    kind: Literal["short_conv"] = "short_conv"
    conv_dim: Elements = Field(description="C: the convolution's channels (conv_dim)")

    def state_tensors(self, tp: int = 1) -> tuple[StateTensor, ...]:
        """The one conv tensor a request holds in this layer on one of ``tp`` ranks.

        Raises:
            SpecError: ``tp`` does not divide ``conv_dim``.
        """
        if type(tp) is not int or tp < 1:
            raise SpecError(f"tp must be an int >= 1 (tensor-parallel ranks), got {tp!r}")
        channels = _divide(self.conv_dim._value, tp, "conv_dim")
        return (StateTensor("conv", (self.conv_kernel - 1, channels), self.conv_dtype),)


__all__ = [
    "GatedDeltaNetLayer",
    "Mamba1Layer",
    "Mamba2Layer",
    "ShortConvLayer",
    "StateMixerLayer",
    "StateTensor",
]
