"""Plain-torch references for the Triton kernels: same arguments, same results, no Triton.

They favour obviousness over speed: the write expands slots to rows on the host side with
index arithmetic, and attention gathers each request's window of keys through the block
table into a dense tensor and runs masked softmax attention in fp32. They validate units the
same way as the launchers, but not every shape; the tests compare the kernels against them,
the benchmark times them as the baseline.
"""

from __future__ import annotations

import math

import torch

from kvunits.contracts import KernelSpec, KernelUnit, PooledBlocks, Tokens, Window
from kvunits.contracts.internal import kernel_ints

from ._checks import resolve_window
from ._typed import (
    BlockTable,
    QueryStartLoc,
    SeqLens,
    SlotMapping,
    check_block_table,
    check_query_start_loc,
    check_seq_lens,
    check_slot_mapping,
)
from .cache_write import manager_unit, slot_start_loc


def reference_write_kv(
    key: torch.Tensor,
    value: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: SlotMapping[PooledBlocks] | SlotMapping[Tokens],
    query_start_loc: QueryStartLoc[KernelUnit],
    seq_lens: SeqLens[KernelUnit],
    spec: KernelSpec[KernelUnit],
) -> None:
    """What `kvunits.kernels.write_kv` does, with the slot-to-row expansion done by torch
    indexing."""
    unit = spec.seq_unit
    slots = check_slot_mapping(slot_mapping, manager_unit(spec), "slot_mapping").long()
    starts = check_query_start_loc(query_start_loc, unit, "query_start_loc").long()
    lens = check_seq_lens(seq_lens, unit, "seq_lens").long()
    ints = kernel_ints(spec)
    pool, block_size_slots = ints.pool, ints.block_size_slots
    entry_starts = slot_start_loc(query_start_loc, seq_lens, spec).long()

    num_rows = int(starts[-1])
    rows = torch.arange(num_rows, device=key.device)
    req = torch.searchsorted(starts[1:], rows, right=True)
    q_lens = starts[1:] - starts[:-1]
    context = lens - q_lens
    pos = context[req] + rows - starts[req]
    entry = entry_starts[req] + pos // pool - context[req] // pool
    slot = slots[entry]
    keep = slot >= 0
    blk = slot[keep] // block_size_slots
    tok = (slot[keep] % block_size_slots) * pool + pos[keep] % pool
    k_cache[blk, tok] = key[:num_rows][keep].to(k_cache.dtype)
    v_cache[blk, tok] = value[:num_rows][keep].to(v_cache.dtype)


def reference_paged_attention(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: BlockTable,
    query_start_loc: QueryStartLoc[KernelUnit],
    seq_lens: SeqLens[KernelUnit],
    spec: KernelSpec[KernelUnit],
    *,
    sliding_window: Window[KernelUnit] | None = None,
    scale: float | None = None,
) -> torch.Tensor:
    """What `kvunits.kernels.paged_attention` computes: gather each request's window, dense
    attention.

    Returns:
        ``[num_rows, num_heads, head_size_v]`` in the query's dtype.
    """
    unit = spec.seq_unit
    table = check_block_table(block_table, "block_table").tensor.long()
    starts = check_query_start_loc(query_start_loc, unit, "query_start_loc").long()
    lens = check_seq_lens(seq_lens, unit, "seq_lens").long()
    sliding_window_tok = resolve_window(spec, sliding_window)
    tpb = kernel_ints(spec).tokens_per_block
    num_rows, num_heads, head_k = query.shape
    kv_heads = k_cache.shape[2]
    group = num_heads // kv_heads
    if scale is None:
        scale = 1.0 / math.sqrt(head_k)
    device = query.device

    q_lens = starts[1:] - starts[:-1]
    context = lens - q_lens
    if sliding_window_tok is None:
        lo = torch.zeros_like(context)
    else:
        lo = (context - sliding_window_tok + 1).clamp(min=0)
    span = int((lens - lo).max()) if lens.numel() else 0
    max_q = int(q_lens.max()) if q_lens.numel() else 0
    out = torch.zeros(num_rows, num_heads, v_cache.shape[-1], dtype=query.dtype, device=device)
    if span <= 0 or max_q <= 0:
        return out

    # Keys [R, S]: positions lo .. lo + S - 1, valid below the length.
    key_pos = lo[:, None] + torch.arange(span, device=device)[None, :]
    key_ok = key_pos < lens[:, None]
    col = (key_pos // tpb).clamp(max=table.shape[1] - 1)
    blk = torch.where(key_ok, table.gather(1, col), torch.zeros_like(col))
    # A masked key may sit in an evicted block (the null block, any garbage): zero it.
    keys = torch.where(key_ok[..., None, None], k_cache[blk, key_pos % tpb].float(), 0.0)
    values = torch.where(key_ok[..., None, None], v_cache[blk, key_pos % tpb].float(), 0.0)
    keys = keys.repeat_interleave(group, dim=2)  # [R, S, H, Dk]
    values = values.repeat_interleave(group, dim=2)  # [R, S, H, Dv]

    # Queries [R, Qmax]: the last q_len positions of each sequence.
    q_idx = torch.arange(max_q, device=device)[None, :]
    q_ok = q_idx < q_lens[:, None]
    q_rows = torch.where(q_ok, starts[:-1, None] + q_idx, torch.zeros_like(q_idx))
    q_pos = context[:, None] + q_idx
    queries = query[q_rows].float()  # [R, Qmax, H, Dk]

    scores = torch.einsum("rqhd,rshd->rhqs", queries, keys) * scale
    visible = key_ok[:, None, :] & (key_pos[:, None, :] <= q_pos[:, :, None])
    if sliding_window_tok is not None:
        visible &= key_pos[:, None, :] > q_pos[:, :, None] - sliding_window_tok
    scores = scores.masked_fill(~visible[:, None], float("-inf"))
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # padded query rows see nothing
    dense = torch.einsum("rhqs,rshd->rqhd", probs, values)
    out[q_rows[q_ok]] = dense[q_ok].to(query.dtype)
    return out
