"""Triton kernel: store a step's new K/V rows into the paged cache, expanding pooled slots.

Private; `kvunits.kernels.cache_write.write_kv` validates the inputs and launches it.

One program per (slot-mapping entry, group of KV heads). The entry is a *manager* slot ``s``
(a pooled block for a pooled layer); the program finds the request the entry belongs to, the
encoder-token positions of ``s`` that this step writes (up to P: the first slot of a request's
step may continue a pooled block started in an earlier step, the last may be partial), and
copies those rows to cache block ``s // BLOCK_SIZE_SLOTS``, rows ``(s % BLOCK_SIZE_SLOTS) × P +
i``. The expansion from slots to rows happens here, not on the host.

Unit of every plain int below: ``*_tok`` counts the kernel's unit (encoder tokens, or tokens
for an unpooled layer), ``*_slot`` the manager's (pooled blocks, or tokens), ``entry`` indexes
the slot mapping, ``blk`` cache blocks.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._search import find_owner


@triton.jit  # type: ignore[untyped-decorator]  # triton ships no type stubs
def paged_write_kernel(
    key_ptr: tl.tensor,  # [num_rows_tok, kv_heads, HEAD_K]
    value_ptr: tl.tensor,  # [num_rows_tok, kv_heads, HEAD_V]
    k_cache_ptr: tl.tensor,  # [num_cache_blocks, tokens_per_block, kv_heads, HEAD_K]
    v_cache_ptr: tl.tensor,  # [num_cache_blocks, tokens_per_block, kv_heads, HEAD_V]
    slot_mapping_ptr: tl.tensor,  # [num_entries] manager slots, -1 = skip
    slot_start_loc_ptr: tl.tensor,  # [num_requests + 1] entries of request r start here
    query_start_loc_ptr: tl.tensor,  # [num_requests + 1] rows (tok) of request r start here
    seq_lens_ptr: tl.tensor,  # [num_requests] length after the step, tok
    num_requests: tl.tensor,
    kv_heads: tl.tensor,
    block_size_slots: tl.tensor,  # slots per cache block (manager unit)
    stride_key_row: tl.tensor,
    stride_key_head: tl.tensor,
    stride_value_row: tl.tensor,
    stride_value_head: tl.tensor,
    stride_kc_blk: tl.tensor,
    stride_kc_tok: tl.tensor,
    stride_kc_head: tl.tensor,
    stride_vc_blk: tl.tensor,
    stride_vc_tok: tl.tensor,
    stride_vc_head: tl.tensor,
    POOL: tl.constexpr,  # P, tok per slot
    POOL_PAD: tl.constexpr,  # next power of two >= P
    BLOCK_H: tl.constexpr,  # KV heads per program (power of two)
    HEAD_K: tl.constexpr,
    HEAD_V: tl.constexpr,
    HEAD_K_PAD: tl.constexpr,
    HEAD_V_PAD: tl.constexpr,
) -> None:
    tl.static_assert(POOL_PAD >= POOL, "POOL_PAD must cover the pooling factor")
    tl.static_assert(HEAD_K_PAD >= HEAD_K, "HEAD_K_PAD must cover head_size_k")
    tl.static_assert(HEAD_V_PAD >= HEAD_V, "HEAD_V_PAD must cover head_size_v")
    entry = tl.program_id(0)
    head_block = tl.program_id(1)

    slot = tl.load(slot_mapping_ptr + entry).to(tl.int64)
    if slot < 0:  # padding entry
        return

    req = find_owner(slot_start_loc_ptr, entry, num_requests, 1, 0)
    first_entry = tl.load(slot_start_loc_ptr + req)
    row_start = tl.load(query_start_loc_ptr + req)
    q_len_tok = tl.load(query_start_loc_ptr + req + 1) - row_start
    seq_len_tok = tl.load(seq_lens_ptr + req)
    context_tok = seq_len_tok - q_len_tok
    # The request's first entry is the pooled slot holding its first new position (which may
    # be in the middle of that slot, continuing an earlier step).
    slot_index = context_tok // POOL + (entry - first_entry)

    offs = tl.arange(0, POOL_PAD * BLOCK_H)
    i_tok = offs // BLOCK_H  # encoder token within the pooled slot
    head = head_block * BLOCK_H + offs % BLOCK_H
    pos_tok = slot_index * POOL + i_tok
    ok = (i_tok < POOL) & (pos_tok >= context_tok) & (pos_tok < seq_len_tok) & (head < kv_heads)
    src_row = (row_start + pos_tok - context_tok).to(tl.int64)
    blk = slot // block_size_slots
    dst_tok = (slot % block_size_slots) * POOL + i_tok

    dk = tl.arange(0, HEAD_K_PAD)
    k_mask = ok[:, None] & (dk < HEAD_K)[None, :]
    k_src = key_ptr + src_row[:, None] * stride_key_row + head[:, None] * stride_key_head
    k_rows = tl.load(k_src + dk[None, :], mask=k_mask)
    k_dst = (
        k_cache_ptr
        + blk * stride_kc_blk
        + dst_tok[:, None] * stride_kc_tok
        + head[:, None] * stride_kc_head
        + dk[None, :]
    )
    tl.store(k_dst, k_rows.to(k_cache_ptr.dtype.element_ty), mask=k_mask)

    dv = tl.arange(0, HEAD_V_PAD)
    v_mask = ok[:, None] & (dv < HEAD_V)[None, :]
    v_src = value_ptr + src_row[:, None] * stride_value_row + head[:, None] * stride_value_head
    v_rows = tl.load(v_src + dv[None, :], mask=v_mask)
    v_dst = (
        v_cache_ptr
        + blk * stride_vc_blk
        + dst_tok[:, None] * stride_vc_tok
        + head[:, None] * stride_vc_head
        + dv[None, :]
    )
    tl.store(v_dst, v_rows.to(v_cache_ptr.dtype.element_ty), mask=v_mask)
