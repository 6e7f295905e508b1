"""kvunits kernels: Triton kernels for the pooled paged KV cache, torch references, wrappers.

The only package of kvunits that imports torch and triton.

Cache layout of one layer (``P`` = the layer's pool factor, 1 for an unpooled layer)::

    k_cache  [num_cache_blocks, tokens_per_block, kv_heads, head_size_k]
    v_cache  [num_cache_blocks, tokens_per_block, kv_heads, head_size_v]
              cache_block      kernel unit        heads     elements

Axis 0 counts cache blocks (block 0 is the null block, never a request's); axis 1 counts the
kernel's unit, ``tokens_per_block = block_size × P`` encoder tokens for a pooled layer
(``KernelSpec.tokens_per_block``); manager slot ``s`` fills rows ``(s % block_size) × P``
to ``(s % block_size) × P + P − 1`` of cache block ``s // block_size``.

Public API:

* `write_kv`: store a step's new K/V, given the manager's slot mapping (`SlotMapping`).
* `paged_attention`: sliding-window / causal attention through block tables, chunked prefill
  and decode in one kernel, optional residency check.
* `check_residency`, `ResidencyError`: does every block a query needs sit in the table?
* `KernelArgumentError` (`KernelTypeError`, `KernelValueError`): a tensor argument the
  launchers cannot take; with `ResidencyError`, under `kvunits.contracts.KvUnitsError`.
  `CacheDTypeError` (a `KernelTypeError` and a `kvunits.contracts.UnitTypeError`): a cache
  of another dtype than its layer's group stores.
* `SeqLens`, `QueryStartLoc`, `SlotMapping`, `BlockTable`: integer tensors with their unit;
  `unpool_seq_lens` converts manager lengths to exact encoder lengths; `slot_start_loc`
  says where each request's entries start in a slot mapping.
* `reference_write_kv`, `reference_paged_attention`: the plain-torch references.
* `sdpa_window_mask`: a `Window` as PyTorch SDPA's boolean ``attn_mask`` (the other backends'
  conventions are `kvunits.contracts.flash_attn_window_size`, `flashinfer_window_left` and
  `exclusive_window_bound`).
* `flash_attention_inputs`, `flashinfer_inputs`: a step batch's tensors for FlashAttention's
  and FlashInfer's paged calls; `allocate_kv_caches`: each layer's caches from a plan, a
  shared pool laid out as vLLM's (`PhysicalLayout`) (`kvunits.kernels.backends`, loaded on
  first use).
"""

if __name__ != "kvunits.kernels":
    # A checkout's root on sys.path exposes this directory as `kernels`: a second copy of every
    # class, and a name other distributions use. kvunits._names says where, and the fix.
    from kvunits._names import bare_name_error

    raise bare_name_error(__name__, __file__, "kvunits.kernels")

from kvunits._extras import require as _require

_require("kvunits.kernels", "kernels", "torch", "triton")  # before any import of them

from typing import TYPE_CHECKING

from kvunits.contracts.errors import CacheDTypeError as CacheDTypeError
from kvunits.contracts.errors import KernelArgumentError as KernelArgumentError
from kvunits.contracts.errors import KernelTypeError as KernelTypeError
from kvunits.contracts.errors import KernelValueError as KernelValueError
from kvunits.contracts.errors import ResidencyError as ResidencyError

from ._residency import check_residency as check_residency
from ._typed import BlockTable as BlockTable
from ._typed import QueryStartLoc as QueryStartLoc
from ._typed import SeqLens as SeqLens
from ._typed import SlotMapping as SlotMapping
from ._typed import unpool_seq_lens as unpool_seq_lens
from .attention import paged_attention as paged_attention
from .cache_write import manager_unit as manager_unit
from .cache_write import slot_start_loc as slot_start_loc
from .cache_write import write_kv as write_kv
from .masks import sdpa_window_mask as sdpa_window_mask
from .reference import reference_paged_attention as reference_paged_attention
from .reference import reference_write_kv as reference_write_kv

#: The backends' inputs, loaded on first use (`kvunits.kernels.backends`).
_LAZY = {
    "FlashAttentionInputs",
    "FlashInferInputs",
    "LayerCache",
    "PhysicalLayout",
    "allocate_kv_caches",
    "flash_attention_inputs",
    "flashinfer_inputs",
}


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import backends

    value = getattr(backends, name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from .backends import FlashAttentionInputs as FlashAttentionInputs
    from .backends import FlashInferInputs as FlashInferInputs
    from .backends import LayerCache as LayerCache
    from .backends import PhysicalLayout as PhysicalLayout
    from .backends import allocate_kv_caches as allocate_kv_caches
    from .backends import flash_attention_inputs as flash_attention_inputs
    from .backends import flashinfer_inputs as flashinfer_inputs

__all__ = [
    "BlockTable",
    "CacheDTypeError",
    "FlashAttentionInputs",
    "FlashInferInputs",
    "KernelArgumentError",
    "KernelTypeError",
    "KernelValueError",
    "LayerCache",
    "PhysicalLayout",
    "QueryStartLoc",
    "ResidencyError",
    "SeqLens",
    "SlotMapping",
    "allocate_kv_caches",
    "check_residency",
    "flash_attention_inputs",
    "flashinfer_inputs",
    "manager_unit",
    "paged_attention",
    "reference_paged_attention",
    "reference_write_kv",
    "sdpa_window_mask",
    "slot_start_loc",
    "unpool_seq_lens",
    "write_kv",
]
