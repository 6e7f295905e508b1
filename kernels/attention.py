"""Paged sliding-window attention: the validating launcher of `_paged_swa`.

One kernel serves chunked prefill and decode: each request brings ``q_len`` query rows (its
last ``q_len`` positions; ``q_len = P`` for a pooled decode step) and reads its keys through
its block table. Units are declared: the lengths, the query offsets and the window count the
layer's kernel unit (`EncoderTokens` for a pooled layer), tied to the spec by one overload per
kernel unit, so a manager-unit length is a mypy ``[arg-type]`` error ("expected
SeqLens[EncoderTokens]") and, at run time, a `kvunits.contracts.UnitTypeError`.
"""

from __future__ import annotations

import math
from typing import Any, overload

import torch

from kvunits.contracts import EncoderTokens, KernelSpec, Tokens, Window
from kvunits.contracts.errors import KernelValueError
from kvunits.contracts.internal import ManagedKind, kernel_ints

from ._checks import (
    INDEX_DTYPES,
    check_caches,
    check_device,
    check_spec,
    check_step_tensors,
    check_tensor,
    interpreted,
    next_pow2,
    on_device,
    resolve_window,
    torch_dtype,
    validate_step,
)
from ._paged_swa import paged_swa_kernel
from ._residency import check_residency as _check_residency
from ._typed import (
    BlockTable,
    QueryStartLoc,
    SeqLens,
    check_block_table,
    check_query_start_loc,
    check_seq_lens,
)

_ATTENTION_KINDS: tuple[ManagedKind, ...] = ("sliding_window", "full_attention")
#: ``sliding_window_tok`` passed for full causal attention: beyond any sequence, far from int32
#: limits.
_NO_WINDOW = 1 << 30
_LOG2_E = 1.4426950408889634


@overload
def paged_attention(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: BlockTable,
    query_start_loc: QueryStartLoc[EncoderTokens],
    seq_lens: SeqLens[EncoderTokens],
    spec: KernelSpec[EncoderTokens],
    *,
    sliding_window: Window[EncoderTokens] | None = None,
    scale: float | None = None,
    check_residency: bool = False,
    validate: bool = True,
    out: torch.Tensor | None = None,
) -> torch.Tensor: ...


@overload
def paged_attention(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: BlockTable,
    query_start_loc: QueryStartLoc[Tokens],
    seq_lens: SeqLens[Tokens],
    spec: KernelSpec[Tokens],
    *,
    sliding_window: Window[Tokens] | None = None,
    scale: float | None = None,
    check_residency: bool = False,
    validate: bool = True,
    out: torch.Tensor | None = None,
) -> torch.Tensor: ...


def paged_attention(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: BlockTable,
    query_start_loc: QueryStartLoc[Any],
    seq_lens: SeqLens[Any],
    spec: KernelSpec[Any],
    *,
    sliding_window: Any = None,
    scale: float | None = None,
    check_residency: bool = False,
    validate: bool = True,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Causal (sliding-window) attention of a step's queries over the paged cache (Triton).

    Query j of request r sits at position ``seq_lens[r] − q_len + j`` and sees keys
    ``q − (W − 1) .. q``. Grouped-query attention: query head h reads KV head
    ``h // (num_heads // kv_heads)``. Scores and softmax accumulate in fp32.

    Args:
        query: ``[num_rows, num_heads, head_size_k]``, one row per query position (kernel
            unit); ``num_heads`` a multiple of ``spec.kv_heads``.
        k_cache: ``[num_cache_blocks, tokens_per_block, kv_heads, head_size_k]``; axis 1
            counts the kernel unit (``block_size × P`` encoder tokens for a pooled layer).
        v_cache: ``[num_cache_blocks, tokens_per_block, kv_heads, head_size_v]``.
        block_table: ``[num_requests, max_blocks]`` cache-block ids; 0 is the null block.
        query_start_loc: ``[num_requests + 1]`` each request's query rows, kernel unit.
        seq_lens: ``[num_requests]`` lengths after this step (queries included), kernel unit
            (exact encoder lengths for a pooled layer: see `unpool_seq_lens`).
        spec: the layer's `KernelSpec` (a sliding-window or full-attention layer).
        sliding_window: overrides the spec's: a `Window` of the spec's unit; by default a
            sliding-window layer uses its own window and a full-attention layer none.
        scale: the softmax scale; ``1 / sqrt(head_size_k)`` by default.
        check_residency: first check on the host that every block a query needs is in the
            table (`check_residency`); raise `ResidencyError` otherwise. Costs a sync.
        validate: check values that need a device-to-host copy (offsets, lengths, block ids).
            Without it the kernel trusts them, except that it reads no column past the
            table's width and skips the keys of a negative block id.
        out: ``[num_rows, num_heads, head_size_v]`` to write into; allocated if None.

    Returns:
        ``[num_rows, num_heads, head_size_v]`` in the query's dtype. Rows past
        ``query_start_loc[-1]`` (padding) are not written.

    Raises:
        UnitTypeError: a length, offset or window not in the spec's unit, or a bare tensor.
        ResidencyError: with ``check_residency``, a needed block is not resident.
        SpecError: a layer kind, dtype or head size the kernel cannot run.
        KernelTypeError: a wrong dtype or type (also a ``TypeError``).
        KernelValueError: a wrong shape, device, stride or value (also a ``ValueError``).
    """
    check_spec(spec, _ATTENTION_KINDS, "paged_attention")
    unit = spec.seq_unit
    table = check_block_table(block_table, "block_table").tensor
    starts = check_query_start_loc(query_start_loc, unit, "query_start_loc")
    lens = check_seq_lens(seq_lens, unit, "seq_lens")
    sliding_window_tok = resolve_window(spec, sliding_window)

    dtype = torch_dtype(spec.dtype)
    ints = kernel_ints(spec)
    kv_heads, head_k, head_v = ints.kv_heads, ints.head_size_k, ints.head_size_v
    tokens_per_block = kernel_ints(spec).tokens_per_block
    device: torch.device = getattr(query, "device", torch.device("cpu"))
    check_tensor(
        "query", query, (None, None, head_k), "[num_rows, num_heads, head_size_k]",
        dtype=dtype, device=device,
    )  # fmt: skip
    num_rows, num_heads = query.shape[0], query.shape[1]
    if num_heads % kv_heads != 0 or num_heads == 0:
        raise KernelValueError(
            f"query has {num_heads} heads, not a positive multiple of the layer's "
            f"{kv_heads} KV heads (grouped-query attention shares a KV head per group)",
            argument="query",
        )
    num_blocks = check_caches(k_cache, v_cache, spec, device)
    num_requests = check_step_tensors(starts, lens, device)
    check_tensor(
        "block_table", table, (num_requests, None), "[num_requests, max_blocks]",
        dtype=INDEX_DTYPES, device=device, contiguous=True,
    )  # fmt: skip
    if out is None:
        out = torch.empty(num_rows, num_heads, head_v, dtype=dtype, device=device)
    else:
        check_tensor(
            "out", out, (num_rows, num_heads, head_v), "[num_rows, num_heads, head_size_v]",
            dtype=dtype, device=device,
        )  # fmt: skip
    check_device(device, paged_swa_kernel, "paged_attention", "query")
    if check_residency:
        _check_residency(
            block_table, query_start_loc, seq_lens, spec, sliding_window=sliding_window
        )
    if validate:
        _validate_attention(starts, lens, table, num_rows, num_blocks, tokens_per_block)
    if num_rows == 0 or num_requests == 0:
        return out

    if scale is None:
        scale = 1.0 / math.sqrt(head_k)
    meta = attention_meta(
        num_rows=num_rows,
        num_requests=num_requests,
        group=num_heads // kv_heads,
        head_k=head_k,
        head_v=head_v,
        dtype=dtype,
        interpreted=interpreted(paged_swa_kernel),
    )
    grid = (num_rows // int(meta["BLOCK_Q"]) + num_requests, kv_heads)
    with on_device(device):
        paged_swa_kernel[grid](
            query, k_cache, v_cache, out, table, starts, lens,
            num_requests, table.shape[1], tokens_per_block,
            _NO_WINDOW if sliding_window_tok is None else sliding_window_tok, scale * _LOG2_E,
            query.stride(0), query.stride(1), out.stride(0), out.stride(1),
            k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
            v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
            table.stride(0),
            **meta,
        )  # fmt: skip
    return out


def attention_meta(
    *,
    num_rows: int,
    num_requests: int,
    group: int,
    head_k: int,
    head_v: int,
    dtype: torch.dtype,
    interpreted: bool,
) -> dict[str, int | str | bool]:
    """The ``tl.constexpr`` meta-parameters of one launch (also used by the benchmark's
    compile check, so that it compiles exactly what the launcher runs)."""
    group_pad = next_pow2(group)
    # Decode (a few rows per request) wants small tiles, so little of a tile is padding;
    # prefill wants tall ones, so each key read from memory serves many queries.
    rows_target = 16 if num_rows <= 16 * max(1, num_requests) else 64
    block_q = max(1, rows_target // group_pad)
    return {
        "GROUP": group,
        "GROUP_PAD": group_pad,
        "BLOCK_Q": block_q,
        "BLOCK_M": block_q * group_pad,
        "BLOCK_N": 64,
        "HEAD_K": head_k,
        "HEAD_V": head_v,
        "HEAD_K_PAD": max(16, next_pow2(head_k)),
        "HEAD_V_PAD": max(16, next_pow2(head_v)),
        "DOT_PRECISION": "ieee" if dtype == torch.float32 else "tf32",
        # Triton's interpreter computes a bf16 tl.dot on the raw bits (see _paged_swa).
        "UPCAST": interpreted and dtype == torch.bfloat16,
    }


def _validate_attention(
    starts: torch.Tensor,
    lens: torch.Tensor,
    table: torch.Tensor,
    num_rows: int,
    num_blocks: int,
    tokens_per_block: int,
) -> None:
    _, host_lens = validate_step(starts, lens, num_rows, "query", "queries")
    capacity = table.shape[1] * tokens_per_block
    for req, seq_len in enumerate(host_lens):
        if seq_len > capacity:
            raise KernelValueError(
                f"request {req} has length {seq_len} but its block table covers "
                f"{table.shape[1]} blocks × {tokens_per_block} = {capacity} positions",
                argument="seq_lens",
            )
    if table.numel():
        low, high = int(table.min()), int(table.max())
        if low < 0 or high >= num_blocks:
            raise KernelValueError(
                f"block_table holds ids {low}..{high}; the cache has blocks 0..{num_blocks - 1} "
                "(pad a table with the null block 0, not a negative id)",
                argument="block_table",
            )
