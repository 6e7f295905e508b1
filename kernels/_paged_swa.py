"""Triton kernel: paged sliding-window attention for chunked prefill and decode.

Private; `kvunits.kernels.attention.paged_attention` validates the inputs and launches it.

One program per (tile of BLOCK_Q consecutive query rows of one request, KV head). The rows of
the tile are its BLOCK_Q queries × the GROUP query heads sharing the KV head (grouped-query
attention), BLOCK_M = BLOCK_Q × GROUP_PAD rows in all. Programs are numbered without a host
sync, as vLLM's unified attention does: request r owns tiles ``query_start_loc[r] // BLOCK_Q
+ r`` onwards (at most ``q_len // BLOCK_Q + 1`` of them), so a grid of ``num_rows // BLOCK_Q +
num_requests`` covers every request; surplus programs return at once.

Query j of request r sits at position ``seq_len − q_len + j`` (the step's queries are the
last positions of the sequence). Key k is visible to query q iff ``q − (W − 1) <= k <= q``.
A tile walks the keys ``[first_q − W + 1, last_q]`` only, in BLOCK_N steps, reading each key's
cache block through the block table, so it touches no block outside its queries' windows.
Softmax is online (running max and sum) in fp32, in base 2 (``scale_log2 = scale ×
log2(e)``); the output is cast to the query's dtype.

``UPCAST`` exists for Triton's interpreter only: it stores bfloat16 as raw uint16 and its
``tl.dot`` multiplies those bit patterns (triton-lang/triton#11584; the interpreter does not
support bf16 arithmetic). With it, bf16 operands are widened to fp32 after loading and P is
rounded to bf16 and widened again, which is what the tensor cores compute (exact products,
fp32 accumulation), so the interpreter checks the same numerics as the GPU.

Every plain int: ``*_tok`` counts the kernel's unit (encoder tokens for a pooled layer),
``blk`` cache blocks, ``col`` block-table columns (logical blocks).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._search import find_owner


@triton.jit  # type: ignore[untyped-decorator]  # triton ships no type stubs
def paged_swa_kernel(
    q_ptr: tl.tensor,  # [num_rows_tok, num_heads, HEAD_K]
    k_cache_ptr: tl.tensor,  # [num_cache_blocks, tokens_per_block, kv_heads, HEAD_K]
    v_cache_ptr: tl.tensor,  # [num_cache_blocks, tokens_per_block, kv_heads, HEAD_V]
    out_ptr: tl.tensor,  # [num_rows_tok, num_heads, HEAD_V]
    block_table_ptr: tl.tensor,  # [num_requests, table_width_col] cache-block ids
    query_start_loc_ptr: tl.tensor,  # [num_requests + 1] tok
    seq_lens_ptr: tl.tensor,  # [num_requests] tok
    num_requests: tl.tensor,
    table_width_col: tl.tensor,
    tokens_per_block: tl.tensor,  # tok per cache block (block_size × P)
    sliding_window_tok: tl.tensor,  # W; a huge value for full causal attention
    scale_log2: tl.tensor,  # softmax scale × log2(e)
    stride_q_row: tl.tensor,
    stride_q_head: tl.tensor,
    stride_o_row: tl.tensor,
    stride_o_head: tl.tensor,
    stride_kc_blk: tl.tensor,
    stride_kc_tok: tl.tensor,
    stride_kc_head: tl.tensor,
    stride_vc_blk: tl.tensor,
    stride_vc_tok: tl.tensor,
    stride_vc_head: tl.tensor,
    stride_bt_req: tl.tensor,
    GROUP: tl.constexpr,  # query heads per KV head
    GROUP_PAD: tl.constexpr,  # next power of two >= GROUP
    BLOCK_Q: tl.constexpr,  # queries per tile
    BLOCK_M: tl.constexpr,  # BLOCK_Q × GROUP_PAD rows per tile
    BLOCK_N: tl.constexpr,  # keys per inner step
    HEAD_K: tl.constexpr,
    HEAD_V: tl.constexpr,
    HEAD_K_PAD: tl.constexpr,
    HEAD_V_PAD: tl.constexpr,
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32 inputs (no tf32), else "tf32" (unused)
    UPCAST: tl.constexpr,  # compute on fp32 copies of bf16 inputs (the interpreter's bf16 dot)
) -> None:
    tl.static_assert(BLOCK_M == BLOCK_Q * GROUP_PAD, "BLOCK_M must be BLOCK_Q × GROUP_PAD")
    tl.static_assert(GROUP_PAD >= GROUP, "GROUP_PAD must cover the query heads per KV head")
    tl.static_assert(BLOCK_M >= 16, "tl.dot needs at least 16 rows")
    tl.static_assert(BLOCK_N >= 16, "tl.dot needs at least 16 keys")
    tl.static_assert(HEAD_K_PAD >= HEAD_K, "HEAD_K_PAD must cover head_size_k")
    tl.static_assert(HEAD_K_PAD >= 16, "tl.dot needs a reduction of at least 16")
    tl.static_assert(HEAD_V_PAD >= HEAD_V, "HEAD_V_PAD must cover head_size_v")
    tile = tl.program_id(0)
    kv_head = tl.program_id(1)

    req = find_owner(query_start_loc_ptr, tile, num_requests, BLOCK_Q, 1)
    row_start = tl.load(query_start_loc_ptr + req)
    q_len_tok = tl.load(query_start_loc_ptr + req + 1) - row_start
    q_first = (tile - (row_start // BLOCK_Q + req)) * BLOCK_Q  # first query of the tile
    if q_first >= q_len_tok:
        return
    seq_len_tok = tl.load(seq_lens_ptr + req)
    context_tok = seq_len_tok - q_len_tok

    offs_m = tl.arange(0, BLOCK_M)
    q_index = q_first + offs_m // GROUP_PAD
    group_index = offs_m % GROUP_PAD
    row_ok = (q_index < q_len_tok) & (group_index < GROUP)
    head = kv_head * GROUP + group_index
    pos_q_tok = context_tok + q_index

    dk = tl.arange(0, HEAD_K_PAD)
    dv = tl.arange(0, HEAD_V_PAD)
    q_rows = (row_start + q_index).to(tl.int64)
    q = tl.load(
        q_ptr + q_rows[:, None] * stride_q_row + head[:, None] * stride_q_head + dk[None, :],
        mask=row_ok[:, None] & (dk < HEAD_K)[None, :],
        other=0.0,
    )
    if UPCAST:
        q = q.to(tl.float32)

    # Keys the tile needs: the union of its queries' windows, [lo_tok, hi_tok].
    first_pos_tok = context_tok + q_first
    last_pos_tok = context_tok + tl.minimum(q_first + BLOCK_Q, q_len_tok) - 1
    lo_tok = tl.maximum(first_pos_tok - sliding_window_tok + 1, 0)
    hi_tok = last_pos_tok
    start_tok = (lo_tok // BLOCK_N) * BLOCK_N

    m_i = tl.full([BLOCK_M], -1.0e30, dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_V_PAD], dtype=tl.float32)
    table_row = block_table_ptr + req.to(tl.int64) * stride_bt_req
    for key0_tok in range(start_tok, hi_tok + 1, BLOCK_N):
        pos_k_tok = key0_tok + tl.arange(0, BLOCK_N)
        col = pos_k_tok // tokens_per_block
        # Only keys inside the union of windows are loaded: blocks outside it (evicted, the
        # null block) are never read. The table bound keeps a bad length from reading past it.
        key_ok = (pos_k_tok >= lo_tok) & (pos_k_tok <= hi_tok) & (col < table_width_col)
        blk = tl.load(table_row + col, mask=key_ok, other=0).to(tl.int64)
        # A negative id (padding the launcher rejects unless validate=False) is no block:
        # skip its keys rather than read memory before the cache.
        key_ok = key_ok & (blk >= 0)
        tok_in_blk = pos_k_tok % tokens_per_block

        k = tl.load(
            k_cache_ptr
            + blk[:, None] * stride_kc_blk
            + tok_in_blk[:, None] * stride_kc_tok
            + kv_head * stride_kc_head
            + dk[None, :],
            mask=key_ok[:, None] & (dk < HEAD_K)[None, :],
            other=0.0,
        )
        if UPCAST:
            k = k.to(tl.float32)
        scores = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * scale_log2
        visible = (
            key_ok[None, :]
            & (pos_k_tok[None, :] <= pos_q_tok[:, None])
            & (pos_k_tok[None, :] > pos_q_tok[:, None] - sliding_window_tok)
        )
        scores = tl.where(visible, scores, float("-inf"))

        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(scores - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)

        v = tl.load(
            v_cache_ptr
            + blk[:, None] * stride_vc_blk
            + tok_in_blk[:, None] * stride_vc_tok
            + kv_head * stride_vc_head
            + dv[None, :],
            mask=key_ok[:, None] & (dv < HEAD_V)[None, :],
            other=0.0,
        )
        # P is rounded to the input dtype for the second product, as FlashAttention does.
        p_in = p.to(v_cache_ptr.dtype.element_ty)
        if UPCAST:
            p_in = p_in.to(tl.float32)
            v = v.to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(p_in, v, input_precision=DOT_PRECISION)
        m_i = m_new

    # Every real query sees at least itself, so l_i > 0 on rows that are stored.
    l_safe = tl.where(l_i > 0.0, l_i, 1.0)
    out = acc / l_safe[:, None]
    tl.store(
        out_ptr + q_rows[:, None] * stride_o_row + head[:, None] * stride_o_head + dv[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=row_ok[:, None] & (dv < HEAD_V)[None, :],
    )
