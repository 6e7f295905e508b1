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
* ``kda_full_rank_gate`` (Kimi-K3's ``KimiK3DeltaAttention``, ``models/kimi_k3/nvidia/
  kda.py``): no alignment (no ``get_prefill_checkpoint_alignment``, so none for the whole
  model), but its ``get_kv_cache_spec`` adds the page whenever its prefill backend is
  FlashKDA (``kda_prefill_checkpoint_alignment``, ``layers/mamba/kda_checkpoint.py``).
  ``resolve_kda_prefill_backend("auto", ...)`` (``--kda-prefill-backend`` unset) picks
  FlashKDA where ``is_flashkda_supported`` holds: compute capability 9, 10 or 12 and the
  layer's ``flashkda`` (the config's half). FlashInfer's KDA prefill is taken only when asked
  for by name, so flashinfer-python's version does not matter; elsewhere Triton, no page.
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
#: ``is_flashkda_supported``: FlashKDA's compute capability majors (SM90, SM10x, SM12x).
_FLASHKDA_MAJORS: Final = (9, 10, 12)
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
        SpecError: a layer whose checkpoints depend on the GPU with no GPU given.
    """
    alignment: int | None = 1
    per_layer: dict[str, int] = {}
    flashkda: set[str] = set()  # KimiK3DeltaAttention's page, whatever the others
    for name, layer in states:
        own: int | None = None
        by_gpu = isinstance(layer, GatedDeltaNetLayer) and (
            layer.mixer == "gdn" or (layer.mixer == "kda_full_rank_gate" and layer.flashkda)
        )
        if isinstance(layer, GatedDeltaNetLayer) and by_gpu:
            if capability is None:
                raise SpecError(
                    f"layer {name!r} is a gated delta net and prefix caching is on: vLLM 0.33 "
                    "then adds a prefill checkpoint page and aligns blocks by the GPU's "
                    "prefill backend; name the GPU with --like-vllm, or plan with "
                    "--no-enable-prefix-caching"
                )
            if layer.mixer == "kda_full_rank_gate":
                if capability[0] in _FLASHKDA_MAJORS:
                    flashkda.add(name)
            elif _flashinfer_gdn(layer, capability):
                own = FLASHINFER_GDN_CHECKPOINT_ALIGNMENT
                per_layer[name] = own
        if own is None:
            alignment = None
        elif alignment is not None:
            alignment = lcm(alignment, own)
    if alignment is None:  # a layer without checkpoints: none exports (_exports_checkpoints)
        return GdnCheckpoints(1, frozenset(flashkda))
    return GdnCheckpoints(alignment, frozenset(per_layer) | flashkda)
