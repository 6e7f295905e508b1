"""A step batch's tensors for real attention backends, and KV-cache tensors from a plan.

`kvunits.runtime.KVCacheCoordinator.step_batch` describes one group's step batch
(`kvunits.contracts.batch.StepBatch`: block tables, lengths, query lengths, in the group's kernel
unit); these functions build what the libraries take, for the whole batch at once, with
tensor operations (no Python loop over positions; one over requests only to flatten the
tables):

* FlashAttention's varlen paged call (``flash_attn_varlen_func(q, k_cache, v_cache,
  cu_seqlens_q, seqused_k=..., block_table=...)``, and vLLM's ``reshape_and_cache_flash``
  for the write): a padded int32 ``block_table [R, W]``, int32 ``seqused_k [R]`` and
  ``cu_seqlens_q [R + 1]``, and an int64 ``slot_mapping [T]``: the cache row of each query
  row, ``table[p // tokens_per_block] × tokens_per_block + p % tokens_per_block``.
* FlashInfer's paged KV cache (``BatchPrefillWithPagedKVCacheWrapper.plan(qo_indptr,
  paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, ...)``): int32
  ``paged_kv_indptr [R + 1]`` (each request's pages, ``cdiv(seq_len, page_size)``, summed),
  ``paged_kv_indices [nnz]`` (their ids, request after request), ``paged_kv_last_page_len
  [R]`` (positions in each last page, 1 .. page_size) and ``qo_indptr [R + 1]``.

Each layer's sliding window goes to a library through its named convention, never as the
window's plain number: FlashAttention's ``window_size=(left, right)`` is
`kvunits.contracts.flash_attn_window_size` (``(W − 1, 0)``), FlashInfer's ``window_left`` is
`kvunits.contracts.flashinfer_window_left` (``W − 1``), per layer of the group
(``fa.window_size["text.3"]``): layers of one group share its tables, not always a window.

For a pooled group every length is in encoder tokens and a page holds ``block_size × P`` of
them (the kernel view's ``tokens_per_block``): the caches are laid out as the kernels here
read them, ``[num_blocks, tokens_per_block, kv_heads, head_size]``, which is both libraries'
NHD layout. A sliding window's evicted entries are the null block (0): the libraries read them
only for keys their window masks, which is what kvunits' residency guarantee makes true.

`allocate_kv_caches` gives each layer of a capacity plan its ``k_cache`` and ``v_cache``,
shapes and dtypes from its kernel view: a tensor pair per layer for a ``per_group`` plan, views
of one buffer laid out as vLLM 0.33 lays it out for a ``shared`` one
(`kvunits.kernels._shared_caches`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from types import MappingProxyType
from typing import Any, Generic, Protocol, final

import torch

from kvunits.contracts import (
    AnyLayerGroup,
    CacheBlocks,
    EngineSpec,
    KernelUnit,
    PoolBlocks,
    SpecError,
    flash_attn_window_size,
    flashinfer_window_left,
)
from kvunits.contracts.batch import StepBatch
from kvunits.contracts.internal import describe, kernel_ints

from ._checks import _TORCH_DTYPES, torch_dtype
from ._shared_caches import PhysicalLayout as PhysicalLayout
from ._shared_caches import shared_views
from ._typed import BlockTable, QueryStartLoc, SeqLens


@final
@dataclass(frozen=True, slots=True, eq=False)
class FlashAttentionInputs(Generic[KernelUnit]):
    """FlashAttention's varlen paged inputs of one step batch (see the module docstring).

    Attributes:
        block_table: ``[R, W]`` int32 cache-block ids, padded with the null block (0).
        seqused_k: ``[R]`` int32, each request's keys after the step (kernel unit).
        cu_seqlens_q: ``[R + 1]`` int32, where each request's query rows start.
        slot_mapping: ``[T]`` int64, the cache row (kernel unit) each query row's K/V is
            written to (vLLM's ``reshape_and_cache_flash`` slot mapping).
        max_seqlen_q: the longest query of the batch (kernel unit).
        max_seqlen_k: the longest key sequence of the batch (kernel unit).
        window_size: per layer of the group, its ``window_size=(left, right)``:
            `kvunits.contracts.flash_attn_window_size` of the layer's kernel window
            (``(W − 1, 0)``; ``(-1, -1)`` without one).
    """

    block_table: BlockTable
    seqused_k: SeqLens[KernelUnit]
    cu_seqlens_q: QueryStartLoc[KernelUnit]
    slot_mapping: torch.Tensor
    max_seqlen_q: KernelUnit
    max_seqlen_k: KernelUnit
    window_size: Mapping[str, tuple[int, int]]


@final
@dataclass(frozen=True, slots=True, eq=False)
class FlashInferInputs(Generic[KernelUnit]):
    """FlashInfer's paged inputs of one step batch (see the module docstring).

    Attributes:
        qo_indptr: ``[R + 1]`` int32, where each request's query rows start.
        paged_kv_indptr: ``[R + 1]`` int32, where each request's pages start in the indices.
        paged_kv_indices: ``[nnz]`` int32 cache-block ids.
        paged_kv_last_page_len: ``[R]`` int32 positions in each request's last page (1 ..
            ``page_size``; 0 for a request without positions).
        page_size: positions per page, in the kernel unit (``tokens_per_block``).
        window_left: per layer of the group, its ``window_left``:
            `kvunits.contracts.flashinfer_window_left` of the layer's kernel window (``W − 1``;
            ``-1`` without one).
    """

    qo_indptr: QueryStartLoc[KernelUnit]
    paged_kv_indptr: torch.Tensor
    paged_kv_indices: torch.Tensor
    paged_kv_last_page_len: torch.Tensor
    page_size: KernelUnit
    window_left: Mapping[str, int]


def _check_batch(batch: object) -> StepBatch[Any, Any]:
    if type(batch) is not StepBatch:
        raise SpecError(
            f"expected a StepBatch (coordinator.step_batch(handle, request_ids)), got "
            f"{describe(batch)}"
        )
    return batch


def _tables(batch: StepBatch[Any, Any], width: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The padded int32 block table ``[R, W]`` and the tables' lengths ``[R]`` (int64)."""
    tables = [t.ids_in(CacheBlocks) for t in batch.block_tables]
    lengths = torch.tensor([len(t) for t in tables], dtype=torch.int64)
    most = int(lengths.max()) if len(tables) else 0
    if width is None:
        width = most
    elif most > width:
        raise SpecError(f"a block table has {most} entries, wider than the width {width}")
    flat = torch.tensor(list(chain.from_iterable(tables)), dtype=torch.int32)
    table = torch.zeros((len(tables), width), dtype=torch.int32)
    if flat.numel():
        rows = torch.repeat_interleave(torch.arange(len(tables)), lengths)
        starts = torch.repeat_interleave(torch.cumsum(lengths, 0) - lengths, lengths)
        table[rows, torch.arange(flat.numel()) - starts] = flat
    return table, lengths


def flash_attention_inputs(
    batch: StepBatch[KernelUnit, Any],
    *,
    device: torch.device | str | None = None,
    pad_to_width: bool = False,
) -> FlashAttentionInputs[KernelUnit]:
    """FlashAttention's varlen paged inputs for one group's step batch.

    Args:
        batch: the step batch (`kvunits.runtime.KVCacheCoordinator.step_batch`).
        device: where the tensors go (default: the CPU).
        pad_to_width: pad the block table to the group's widest table (its
            ``block_table_width``, a fixed shape for CUDA graphs), not the batch's widest.

    Raises:
        SpecError: not a StepBatch.
    """
    batch = _check_batch(batch)
    unit = batch.unit
    seq = torch.tensor(batch.seq_lens_in(unit), dtype=torch.int64)
    q = torch.tensor(batch.query_lens_in(unit), dtype=torch.int64)
    table, _ = _tables(batch, batch.block_table_width if pad_to_width else None)
    requests = len(batch)
    cu = torch.zeros(requests + 1, dtype=torch.int64)
    cu[1:] = torch.cumsum(q, 0)
    rows = int(cu[-1])
    per_block = batch.tokens_per_block.numerical_value_in(unit)
    # The position of every query row: request r's rows are its last q[r] positions.
    owner = torch.repeat_interleave(torch.arange(requests), q)
    position = torch.arange(rows) - torch.repeat_interleave(cu[:-1] - (seq - q), q)
    block = table[owner, position // per_block].to(torch.int64) if rows else position
    slot_mapping = block * per_block + position % per_block
    return FlashAttentionInputs(
        block_table=BlockTable(table.to(device)),
        seqused_k=SeqLens(seq.to(device=device, dtype=torch.int32), unit),
        cu_seqlens_q=QueryStartLoc(cu.to(device=device, dtype=torch.int32), unit),
        slot_mapping=slot_mapping.to(device),
        max_seqlen_q=unit(int(q.max()) if requests else 0),
        max_seqlen_k=unit(int(seq.max()) if requests else 0),
        window_size=MappingProxyType(
            {layer: flash_attn_window_size(w) for layer, w in batch.windows.items()}
        ),
    )


def flashinfer_inputs(
    batch: StepBatch[KernelUnit, Any], *, device: torch.device | str | None = None
) -> FlashInferInputs[KernelUnit]:
    """FlashInfer's paged inputs for one group's step batch (pages: ``cdiv(seq_len,
    page_size)`` entries of each table, the null block where a window evicted).

    Raises:
        SpecError: not a StepBatch.
    """
    batch = _check_batch(batch)
    unit = batch.unit
    seq = torch.tensor(batch.seq_lens_in(unit), dtype=torch.int64)
    q = torch.tensor(batch.query_lens_in(unit), dtype=torch.int64)
    per_block = batch.tokens_per_block.numerical_value_in(unit)
    table, _ = _tables(batch, None)
    pages = -(-seq // per_block)
    indptr = torch.zeros(len(batch) + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(pages, 0)
    used = torch.arange(table.shape[1])[None, :] < pages[:, None]
    qo = torch.zeros(len(batch) + 1, dtype=torch.int64)
    qo[1:] = torch.cumsum(q, 0)
    last = torch.where(pages > 0, seq - (pages - 1) * per_block, torch.zeros_like(seq))
    return FlashInferInputs(
        qo_indptr=QueryStartLoc(qo.to(device=device, dtype=torch.int32), unit),
        paged_kv_indptr=indptr.to(device=device, dtype=torch.int32),
        paged_kv_indices=table[used].to(device),
        paged_kv_last_page_len=last.to(device=device, dtype=torch.int32),
        page_size=unit(per_block),
        window_left=MappingProxyType(
            {layer: flashinfer_window_left(w) for layer, w in batch.windows.items()}
        ),
    )


# -- KV-cache tensors -------------------------------------------------------------------------


class _GroupPlan(Protocol):
    """What `allocate_kv_caches` reads of a group's plan (`kvunits.runtime.GroupPlan`)."""

    @property
    def group(self) -> AnyLayerGroup: ...
    @property
    def num_blocks(self) -> PoolBlocks: ...


class _Plan(Protocol):
    """What `allocate_kv_caches` reads of a capacity plan (`kvunits.runtime.CapacityPlan`)."""

    @property
    def engine(self) -> EngineSpec: ...
    @property
    def groups(self) -> Sequence[_GroupPlan]: ...
    @property
    def layout(self) -> str: ...


@final
@dataclass(frozen=True, slots=True, eq=False)
class LayerCache:
    """One layer's cache tensors.

    Attributes:
        k_cache: ``[num_blocks, tokens_per_block, kv_heads, head_size_k]``.
        v_cache: ``[num_blocks, tokens_per_block, kv_heads, head_size_v]``; None for a layer
            without values (MLA's latent). In a shared plan both are strided views of one
            buffer that other groups' layers view too (only the last axis is contiguous).
    """

    k_cache: torch.Tensor
    v_cache: torch.Tensor | None


def _pool_blocks(group_plan: _GroupPlan) -> int:
    """A group plan's pool size, its blocks with the null one, as a plain int."""
    blocks: object = group_plan.num_blocks
    if type(blocks) is not PoolBlocks:
        raise SpecError(f"num_blocks must be PoolBlocks (a pool's size), got {describe(blocks)}")
    return blocks.numerical_value_in(PoolBlocks)


def allocate_kv_caches(
    plan: _Plan,
    *,
    device: torch.device | str | None = None,
    physical_layout: PhysicalLayout | None = None,
) -> Mapping[str, LayerCache]:
    """Allocate the KV cache of every attention layer of a capacity plan, per layer: shapes
    and dtypes from its kernel view (`kvunits.contracts.KernelSpec`: ``tokens_per_block``
    positions of the kernel's unit, the real KV heads, ``head_size_k``/``head_size_v``, the
    cache dtype) and its group's ``num_blocks`` (the null block included), so that a block id
    the plan's coordinator hands out indexes axis 0. Uninitialised, as vLLM allocates them.
    State layers (recurrent mixers) hold no attention cache and are left out.

    A ``per_group`` plan gets two contiguous tensors per layer. A ``shared`` plan (one pool
    for all groups) gets views of one buffer, as vLLM 0.33 lays it out
    (`kvunits.kernels._shared_caches`): layer ``l`` of every group on the same bytes, each
    viewing them with its own shape and dtype, K and V strided slices of one
    ``[num_blocks, tokens_per_block, kv_heads, head_size_k + head_size_v]`` view.

    Args:
        plan: the capacity plan (`kvunits.runtime.plan`).
        device: where the tensors go (default: the CPU; ``"meta"`` for shapes only).
        physical_layout: a shared plan's byte order, a name of vLLM's ``KVCacheLayout``:
            ``LBNHC`` (the default: vLLM's, FlashAttention's NHD), ``LBHNC`` (HND), or another
            where it keeps the groups apart (see `kvunits.kernels._shared_caches`).

    Raises:
        SpecError: a dtype the kernels do not take, a physical_layout for a per_group plan,
            or one the shared plan cannot take.
    """
    if plan.layout == "shared":
        groups = [p.group for p in plan.groups]
        views = shared_views(
            groups,
            _pool_blocks(plan.groups[0]),
            plan.engine.block_size_slots,
            "LBNHC" if physical_layout is None else physical_layout,
            device,
        )
        return {name: LayerCache(k, v) for name, (k, v) in views.items()}
    if physical_layout is not None:
        raise SpecError(
            f"physical_layout {physical_layout!r} lays out a shared pool; this plan's "
            f"kv_cache_layout is {plan.layout!r}, whose layers each get their own K and V "
            "tensors: drop physical_layout, or plan with kv_cache_layout = 'shared'"
        )
    out: dict[str, LayerCache] = {}
    for group_plan in plan.groups:
        num_blocks = _pool_blocks(group_plan)
        for name, spec in group_plan.group.kernels.items():
            rows = spec.tokens_per_block.numerical_value_in(spec.seq_unit)
            if spec.dtype not in _TORCH_DTYPES:
                raise SpecError(
                    f"layer {name!r}: the kernels take {', '.join(map(str, _TORCH_DTYPES))} "
                    f"caches, not {spec.dtype}; plan with another cache_dtype"
                )
            dtype = torch_dtype(spec.dtype)
            ints = kernel_ints(spec)
            shape = (num_blocks, rows, ints.kv_heads)
            k = torch.empty((*shape, ints.head_size_k), dtype=dtype, device=device)
            v = None
            if ints.head_size_v:
                v = torch.empty((*shape, ints.head_size_v), dtype=dtype, device=device)
            out[name] = LayerCache(k, v)
    return out
