"""The residency check: every cache block a query's window needs is in the block table.

The manager evicts whole blocks that fell out of its window (vLLM replaces them with the null
block 0). If its window is too small in slots (the seed's 188 instead of ``pool_window(750,
4) = 189``), a block the kernel still reads is gone: the kernel would read the null block, or
whatever request the block was handed to next. This check runs on the host, before a launch,
and names the first request, query and block that would be read without being resident.
"""

from __future__ import annotations

from typing import Any, overload

from kvunits.contracts import EncoderTokens, KernelSpec, Position, Tokens, Window
from kvunits.contracts.crossing import first_unresident
from kvunits.contracts.errors import KernelValueError, ResidencyError
from kvunits.contracts.internal import kernel_ints

from ._checks import resolve_window
from ._typed import (
    BlockTable,
    QueryStartLoc,
    SeqLens,
    check_block_table,
    check_query_start_loc,
    check_seq_lens,
)


@overload
def check_residency(
    block_table: BlockTable,
    query_start_loc: QueryStartLoc[EncoderTokens],
    seq_lens: SeqLens[EncoderTokens],
    spec: KernelSpec[EncoderTokens],
    *,
    sliding_window: Window[EncoderTokens] | None = None,
) -> None: ...


@overload
def check_residency(
    block_table: BlockTable,
    query_start_loc: QueryStartLoc[Tokens],
    seq_lens: SeqLens[Tokens],
    spec: KernelSpec[Tokens],
    *,
    sliding_window: Window[Tokens] | None = None,
) -> None: ...


def check_residency(
    block_table: BlockTable,
    query_start_loc: QueryStartLoc[Any],
    seq_lens: SeqLens[Any],
    spec: KernelSpec[Any],
    *,
    sliding_window: Any = None,
) -> None:
    """Raise `ResidencyError` if a query of this step needs a key that is not resident.

    Query j of request r sits at position ``seq_len − q_len + j`` and needs the keys
    ``[q − W + 1, q]`` (all of ``[0, q]`` without a window); the key at position k lives in
    block-table column ``k // tokens_per_block``. A needed column is missing when it lies
    beyond the table or holds the null block 0 (or a negative padding id).

    Args:
        block_table: ``[num_requests, max_blocks]`` cache-block ids.
        query_start_loc: ``[num_requests + 1]`` the step's rows per request, kernel unit.
        seq_lens: ``[num_requests]`` lengths after the step, kernel unit.
        spec: the layer's kernel view (block size in the kernel unit, window).
        window: overrides ``spec.sliding_window`` (same unit).

    Raises:
        ResidencyError: naming the request, the first query position that needs the block,
            the block-table column and its entry.
        UnitTypeError: an argument in another unit than ``spec.seq_unit``.
        KernelValueError: the table, lengths and offsets disagree on the request count.

    Example:
        The seed's manager window (188 pooled slots for W = 750, P = 4) has just freed
        block-table column 0 (encoder tokens 0..63) at the step computing pooled slot 203;
        its first query, at encoder token 812, still needs key 812 − 749 = 63:

        >>> import torch
        >>> from kvunits.contracts import (
        ...     Elements, EncoderTokens, KVHeads, PoolFactor, SlidingWindowLayer, Window,
        ...     kernel_view)
        >>> layer = SlidingWindowLayer(sliding_window=Window(750, EncoderTokens),
        ...                            pool=PoolFactor(4), kv_heads=KVHeads(1),
        ...                            head_size=Elements(16))
        >>> spec = kernel_view(layer, 16).expect(EncoderTokens)
        >>> table = BlockTable(torch.tensor([[0] + list(range(1, 13))]))
        >>> qsl = QueryStartLoc(torch.tensor([0, 4]), EncoderTokens)
        >>> lens = SeqLens(torch.tensor([816]), EncoderTokens)
        >>> try:
        ...     check_residency(table, qsl, lens, spec)
        ... except ResidencyError as exc:
        ...     print(exc.request, exc.query_position, exc.logical_block, exc.table_entry)
        0 812 encoder_token 0 0
    """
    unit = spec.seq_unit
    table = check_block_table(block_table, "block_table").tensor.cpu()
    starts = check_query_start_loc(query_start_loc, unit, "query_start_loc").tolist()
    lens = check_seq_lens(seq_lens, unit, "seq_lens").tolist()
    sliding_window_tok = resolve_window(spec, sliding_window)
    tpb = kernel_ints(spec).tokens_per_block
    width = int(table.shape[1])
    if len(starts) != len(lens) + 1 or table.shape[0] != len(lens):
        raise KernelValueError(
            f"block_table has {table.shape[0]} rows, seq_lens {len(lens)} entries and "
            f"query_start_loc {len(starts)}: they must describe the same requests "
            "(num_requests, num_requests, num_requests + 1)",
            argument="block_table",
        )
    rows = table.tolist()
    for req, seq_len in enumerate(lens):
        q_len = starts[req + 1] - starts[req]
        if q_len <= 0:
            continue
        context = seq_len - q_len
        found = first_unresident(rows[req], tpb, context, q_len, sliding_window=sliding_window_tok)
        if found is not None:
            query, _, col = found
            entry = rows[req][col] if col < width else None
            first_key = 0 if sliding_window_tok is None else max(0, query - sliding_window_tok + 1)
            reach = (
                "causal"
                if sliding_window_tok is None
                else f"window {sliding_window_tok} {unit.unit}"
            )
            if entry is None:
                where = f"beyond the table's {width} columns"
                fix = (
                    f"the table must cover cdiv(seq_len, tokens_per_block) = "
                    f"{(seq_len + tpb - 1) // tpb} columns"
                )
            else:
                where = "which holds the null block 0" if entry == 0 else f"which holds {entry}"
                fix = "the manager freed (or never allocated) a block the kernel still reads"
                if sliding_window_tok is not None:
                    p = spec.pool.tokens_per_block
                    fix += (
                        f"; its window must be at least pool_window(W, P) = cdiv(W − 1, P) + 1 "
                        f"= {(sliding_window_tok - 1 + p - 1) // p + 1} slots "
                        f"(W = {sliding_window_tok}, P = {p})"
                    )
            raise ResidencyError(
                f"request {req}: the query at {unit.unit} position {query} needs keys "
                f"{first_key}..{query} ({reach}), including block-table column {col} "
                f"(positions {col * tpb}..{col * tpb + tpb - 1}), {where}: {fix}",
                request=req,
                query_position=Position(query, unit),
                logical_block=col,
                table_entry=entry,
            )
