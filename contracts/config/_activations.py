"""An estimate of the GPU memory vLLM keeps for activations: ``--activation-memory estimate``.

vLLM does not compute this number, it measures it: at start-up ``profile_run`` runs one
forward pass of ``max_num_batched_tokens`` dummy tokens and a dummy sampler pass, and the
KV cache gets ``gpu_memory × gpu_memory_utilization`` less the weights, that pass's PyTorch
peak and the memory outside PyTorch (CUDA context, cuBLAS and NCCL buffers) it saw grow
(``vllm/v1/worker/gpu_worker.py determine_available_memory``; the log lines "PyTorch
activation peak memory" and "non_torch_memory"). Without a GPU kvunits can only estimate it,
from ``config.json``, and says so wherever it is used. The rule, per rank (TP ``t``, model
dtype of ``d`` bytes, ``T`` = ``max_num_batched_tokens``):

* the residual stream, live through the pass: ``2 × T × hidden × d`` (hidden states and
  the residual vLLM's fused add-norm keeps);
* plus the largest transient of one layer: attention's ``T × (q + 2·kv + q) / t ×
  head_dim × d`` (QKV projection and attention output), or the MLP's ``3 × T × I / t × d``
  (gate-up projection and activation), or a mixture of experts' ``T × k × (3 × I_moe / t
  + hidden) × d + T × E × 4`` (vLLM's fused-MoE work caches for ``k`` routed experts per
  token, and the router's float32 logits over ``E`` experts);
* plus the dummy sampler's ``3 × S × vocab × 4`` (float32 logits and two working copies,
  ``S = min(max_num_seqs, T)``);
* plus what vLLM logged outside PyTorch for Llama-3-8B on an H100 (vLLM #10511:
  ``non_torch_memory`` 1.79 GiB at TP 1, 3.58 GiB at TP 2, NCCL's buffers added), taken as
  the allowance for any model: 1.79 GiB at TP 1, 3.58 GiB above.

CUDA-graph pools are not in it (vLLM's ``--enforce-eager`` footprint). It is a rough
estimate (checked against that one published log: 1.26 GiB of PyTorch peak for Llama-3-8B),
meant to answer "does it fit" to within about a GiB; for vLLM's exact numbers give the
"Available KV cache memory" vLLM logs as ``--kv-cache-memory-bytes``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..deploy import RankBytes

#: vLLM #10511 (Llama-3-8B, H100): non_torch_memory at TP 1 and TP 2.
_NON_TORCH_TP1: Final = int(1.79 * (1 << 30))
_NON_TORCH_TP2: Final = int(3.58 * (1 << 30))
#: float32 logits and two working copies in the dummy sampler pass.
_SAMPLER_COPIES: Final = 3


@dataclass(frozen=True, slots=True)
class ActivationEstimate:
    """The estimate and its parts (each per rank).

    Attributes:
        per_rank: the sum, what ``activation_memory`` is set to.
        residual, transient, sampler, non_torch: its parts (see the module doc).
    """

    per_rank: RankBytes
    residual: RankBytes
    transient: RankBytes
    sampler: RankBytes
    non_torch: RankBytes

    def describe(self) -> str:
        """One line for the plan: the parts, and that it is an estimate."""
        gib = 1 << 30
        parts = (
            f"residual {self.residual._value / gib:.2f}, largest layer transient "
            f"{self.transient._value / gib:.2f}, sampler {self.sampler._value / gib:.2f}, "
            f"outside PyTorch {self.non_torch._value / gib:.2f} GiB"
        )
        return (
            f"activation_memory {self.per_rank} is kvunits' ESTIMATE of what vLLM profiles "
            f"({parts}; docs/vllm-compat.md): for vLLM's exact numbers give "
            "--kv-cache-memory-bytes"
        )


def estimate_activation_memory(
    config: Mapping[str, Any], *, batched_tokens: int, max_num_seqs: int, tp: int
) -> ActivationEstimate | None:
    """The estimate of the module doc for a ``config.json`` (its ``text_config`` if it has
    one), or None when a size it needs is missing or not a positive int.

    Example:
        >>> llama = {"hidden_size": 4096, "intermediate_size": 14336, "vocab_size": 128256,
        ...          "num_attention_heads": 32, "num_key_value_heads": 8}
        >>> e = estimate_activation_memory(llama, batched_tokens=8192, max_num_seqs=256, tp=1)
        >>> round(e.transient._value / 2**30, 3), round(e.sampler._value / 2**30, 3)
        (0.656, 0.367)
    """
    text = config.get("text_config")
    section: Mapping[str, Any] = text if isinstance(text, Mapping) else config
    hidden = _positive(section, "hidden_size")
    vocab = _positive(section, "vocab_size") or _positive(config, "vocab_size")
    heads = _positive(section, "num_attention_heads")
    if hidden is None or vocab is None or heads is None or tp < 1 or batched_tokens < 1:
        return None
    kv = _positive(section, "num_key_value_heads") or heads
    head_dim = _positive(section, "head_dim") or hidden // heads
    dtype_bytes = 2  # bf16 / fp16; a float32 checkpoint is served in bf16 (dtype auto)
    tokens = batched_tokens
    attention = tokens * (2 * heads + 2 * kv) * head_dim * dtype_bytes // tp
    transient = attention
    experts = _positive(section, "n_routed_experts") or _positive(section, "num_experts")
    per_token = _positive(section, "num_experts_per_tok")
    moe = _positive(section, "moe_intermediate_size")
    if experts and per_token and moe:
        routed = tokens * per_token * (3 * moe // tp + hidden) * dtype_bytes
        transient = max(transient, routed + tokens * experts * 4)
    inner = _positive(section, "intermediate_size")
    if inner:
        transient = max(transient, 3 * tokens * inner * dtype_bytes // tp)
    residual = 2 * tokens * hidden * dtype_bytes
    sampler = _SAMPLER_COPIES * min(max_num_seqs, tokens) * vocab * 4
    non_torch = _NON_TORCH_TP1 if tp == 1 else _NON_TORCH_TP2
    total = residual + transient + sampler + non_torch
    return ActivationEstimate(
        per_rank=RankBytes(total),
        residual=RankBytes(residual),
        transient=RankBytes(transient),
        sampler=RankBytes(sampler),
        non_torch=RankBytes(non_torch),
    )


def _positive(section: Mapping[str, Any], key: str) -> int | None:
    value = section.get(key)
    return value if type(value) is int and value > 0 else None
