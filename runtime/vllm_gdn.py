"""vLLM 0.33's prefill checkpoints of gated delta nets, by GPU: the rule `plan_like_vllm`
follows for Qwen3-Next, Qwen3.5/3.6, OLMo Hybrid and Kimi-K3 with prefix caching.

With prefix caching (``mamba_cache_mode = "align"``) a gated-delta-net layer whose prefill
kernel emits states mid-prefill exports a checkpoint at a prefix-cache boundary: its spec
holds one more page a request (``MambaSpec.num_prefill_checkpoint_blocks = 1``, so
``max_memory_usage_bytes`` is ``3 × page``), and the block size is aligned to the layers'
checkpoint alignment (``Platform._align_hybrid_block_size``: the kernel block
``lcm(max(16, block_size), alignment)``, ``alignment`` the LCM over every Mamba layer of
``get_prefill_checkpoint_alignment``, or none when any layer has none:
``get_mamba_prefill_checkpoint_alignment``, ``vllm/model_executor/layers/mamba/abstract.py``).
By vLLM class (``GatedDeltaNetLayer.mixer``):

* ``gdn``, ``QwenGatedDeltaNetAttention`` (``qwen_gdn_linear_attn.py``): alignment 64
  (``FLASHINFER_GDN_CHECKPOINT_ALIGNMENT``, ``v1/attention/backends/gdn_attn.py``) and the
  page when its prefill backend is FlashInfer's (``_resolve_gdn_prefill_backend``: compute
  capability 9.0, or the 10.x and 12.x families with ``linear_key_head_dim == 128`` and a
  CUDA 13 runtime, vLLM 0.33's main build: ``envs.VLLM_MAIN_CUDA_VERSION``); otherwise
  (Triton) none;
* ``olmo_gdn`` (``OlmoHybridGatedDeltaNetAttention``, always Triton) and ``kda`` (Kimi
  Linear's ``KimiGatedDeltaNetAttention``): none;
* ``kda_full_rank_gate`` (Kimi-K3's ``KimiK3DeltaAttention``): no alignment, but the page
  where FlashKDA runs (``kda.py`` ``get_kv_cache_spec`` with ``kda_prefill_checkpoint_alignment``;
  ``is_flashkda_supported``: compute capability 9, 10 or 12 and a bounded gate, bf16
  activations, head dim 128), which kvunits does not read: refused on those GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from math import lcm
from typing import Final, final

from kvunits.contracts import Elements, SpecError
from kvunits.contracts.state import GatedDeltaNetLayer, StateMixerLayer

__all__ = ["FLASHINFER_GDN_CHECKPOINT_ALIGNMENT", "GdnCheckpoints", "gdn_checkpoints"]

#: ``vllm/v1/attention/backends/gdn_attn.py``: FlashInfer's GDN checkpoints, in tokens.
FLASHINFER_GDN_CHECKPOINT_ALIGNMENT: Final = 64
#: ``_resolve_gdn_prefill_backend``: FlashInfer on Blackwell needs a key head of 128.
_FLASHINFER_BLACKWELL_HEAD_K: Final = 128


def _flashinfer_gdn(layer: GatedDeltaNetLayer, capability: tuple[int, int]) -> bool:
    """``_resolve_gdn_prefill_backend`` on CUDA with ``gdn_prefill_backend`` ``auto``."""
    if capability == (9, 0):
        return True
    head_k = layer.head_k_dim.numerical_value_in(Elements)
    return capability[0] in (10, 12) and head_k == _FLASHINFER_BLACKWELL_HEAD_K


@final
@dataclass(frozen=True, slots=True)
class GdnCheckpoints:
    """What the prefill checkpoints add, for one model on one GPU, in align mode.

    Attributes:
        alignment_tokens: the block alignment (``get_mamba_prefill_checkpoint_alignment``),
            1 when none.
        exporting: names of the layers whose spec holds the checkpoint page.
    """

    alignment_tokens: int
    exporting: frozenset[str]


def gdn_checkpoints(
    states: Iterable[tuple[str, StateMixerLayer]],
    capability: tuple[int, int] | None,
    gpu: str,
) -> GdnCheckpoints:
    """The checkpoint alignment and pages of a model's state layers on a GPU of
    ``capability`` (vLLM's rule in the module docstring; call it with prefix caching on).

    Raises:
        SpecError: a layer whose checkpoints depend on the GPU with no GPU given, or
            Kimi-K3's on a GPU where FlashKDA may run.
    """
    alignment: int | None = 1
    per_layer: dict[str, int] = {}
    for name, layer in states:
        own: int | None = None
        if isinstance(layer, GatedDeltaNetLayer) and layer.mixer in ("gdn", "kda_full_rank_gate"):
            if capability is None:
                raise SpecError(
                    f"layer {name!r} is a gated delta net and prefix caching is on: vLLM 0.33 "
                    "then adds a prefill checkpoint page and aligns blocks by the GPU's "
                    "prefill backend; name the GPU with --like-vllm, or plan with "
                    "--no-enable-prefix-caching"
                )
            if layer.mixer == "kda_full_rank_gate":
                if capability[0] in (9, 10, 12):
                    raise SpecError(
                        f"layer {name!r} (Kimi-K3's KimiK3DeltaAttention) with prefix caching on "
                        f"{gpu}: vLLM 0.33 adds a checkpoint page where FlashKDA runs "
                        "(is_flashkda_supported: a bounded gate, bf16, head dim 128), which "
                        "kvunits does not read; plan with --no-enable-prefix-caching"
                    )
            elif _flashinfer_gdn(layer, capability):
                own = FLASHINFER_GDN_CHECKPOINT_ALIGNMENT
                per_layer[name] = own
        if own is None:
            alignment = None
        elif alignment is not None:
            alignment = lcm(alignment, own)
    if alignment is None:  # a layer without checkpoints: none exports (_exports_checkpoints)
        return GdnCheckpoints(1, frozenset())
    return GdnCheckpoints(alignment, frozenset(per_layer))
