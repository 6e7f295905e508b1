"""The paged KV write: store a step's new K/V rows into the cache, given manager slots.

Contract of a step (R requests, their rows concatenated):

* ``key``/``value``: one row per *kernel-unit* position written this step (encoder tokens for
  a pooled layer); request r's rows are ``query_start_loc[r]:query_start_loc[r + 1]`` and hold
  its positions ``seq_len − q_len .. seq_len − 1`` (``seq_lens`` counts after the step).
* ``slot_mapping``: one entry per *manager* slot (pooled block) a request's new rows touch,
  requests in order. Request r's entries are ``slot_start_loc[r]:slot_start_loc[r + 1]``
  (see `slot_start_loc`): the slot holding its first new position, then the next ones. That
  first slot may already hold the first tokens of its pooled block (a step that continues a
  partial block); the last one may stay partial. An entry of -1 keeps its place in that
  layout but writes nothing (a slot the caller does not store, a padded request).
* Slot ``s`` is cache block ``s // block_size`` (``block_size`` = spec block size in slots),
  rows ``(s % block_size) × P + i``, i in [0, P): the kernel expands each slot to its rows.

Example (P = 4, block size 2 slots = 8 encoder tokens per cache block): a request at length 6
writes 5 encoder tokens (positions 6..10, length 11 after the step). They touch pooled slots 1
(positions 6, 7: the second half of a block written last step) and 2 (positions 8..10, one
short), so its slot mapping has 2 entries, say ``[13, 14]``: positions 6, 7 go to cache block
6, rows 6, 7; positions 8, 9, 10 to cache block 7, rows 0, 1, 2.
"""

from __future__ import annotations

from typing import Any, overload

import torch

from kvunits.contracts import EncoderTokens, KernelSpec, KernelUnit, PooledBlocks, Tokens
from kvunits.contracts.crossing import touched_slots
from kvunits.contracts.errors import KernelValueError
from kvunits.contracts.internal import ManagedKind, kernel_ints

from ._checks import (
    INDEX_DTYPES,
    check_caches,
    check_device,
    check_spec,
    check_step_tensors,
    check_tensor,
    next_pow2,
    on_device,
    torch_dtype,
    validate_step,
)
from ._paged_write import paged_write_kernel
from ._typed import (
    QueryStartLoc,
    SeqLens,
    SlotMapping,
    check_query_start_loc,
    check_seq_lens,
    check_slot_mapping,
)

_WRITE_KINDS: tuple[ManagedKind, ...] = (
    "full_attention",
    "sliding_window",
    "chunked_local",
    "cross_attention",
)
#: Elements of one program's tile (rows × head size): enough work per program, few registers.
_WRITE_TILE = 8192


def manager_unit(spec: KernelSpec[KernelUnit]) -> type[PooledBlocks] | type[Tokens]:
    """The unit the layer's cache manager counts slots in: pooled blocks for a pooled layer
    (its kernel counts encoder tokens), tokens otherwise."""
    # Compared by name: mypy checks this body once per constraint of KernelUnit.
    return PooledBlocks if spec.seq_unit.unit == EncoderTokens.unit else Tokens


def slot_start_loc(
    query_start_loc: QueryStartLoc[KernelUnit],
    seq_lens: SeqLens[KernelUnit],
    spec: KernelSpec[KernelUnit],
) -> torch.Tensor:
    """Where each request's entries start in a step's slot mapping (see the module doc).

    Request r with ``q_len`` new positions ending at ``seq_len`` touches the slots
    ``(seq_len − q_len) // P .. cdiv(seq_len, P) − 1``: none when ``q_len == 0``
    (`kvunits.contracts.crossing.touched_slots`, as the coordinator counts them).

    Returns:
        ``[num_requests + 1]`` int32 on the metadata's device (no host sync).

    Example:
        >>> import torch
        >>> from kvunits.contracts import (
        ...     Elements, EncoderTokens, KVHeads, PoolFactor, SlidingWindowLayer, Window,
        ...     kernel_view)
        >>> layer = SlidingWindowLayer(sliding_window=Window(750, EncoderTokens),
        ...                            pool=PoolFactor(4), kv_heads=KVHeads(1),
        ...                            head_size=Elements(16))
        >>> spec = kernel_view(layer, 2).expect(EncoderTokens)
        >>> qsl = QueryStartLoc(torch.tensor([0, 5, 9]), EncoderTokens)
        >>> lens = SeqLens(torch.tensor([11, 4]), EncoderTokens)
        >>> slot_start_loc(qsl, lens, spec)
        tensor([0, 2, 3], dtype=torch.int32)
    """
    unit = spec.seq_unit
    starts = check_query_start_loc(query_start_loc, unit, "query_start_loc")
    lens = check_seq_lens(seq_lens, unit, "seq_lens")
    q_lens = starts[1:] - starts[:-1]
    counts = touched_slots(lens - q_lens, q_lens, spec.pool.tokens_per_block)
    out = torch.zeros(counts.shape[0] + 1, dtype=torch.int32, device=counts.device)
    out[1:] = torch.cumsum(counts, dim=0)
    return out


@overload
def write_kv(
    key: torch.Tensor,
    value: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: SlotMapping[PooledBlocks],
    query_start_loc: QueryStartLoc[EncoderTokens],
    seq_lens: SeqLens[EncoderTokens],
    spec: KernelSpec[EncoderTokens],
    *,
    slot_starts: torch.Tensor | None = None,
    validate: bool = True,
) -> None: ...


@overload
def write_kv(
    key: torch.Tensor,
    value: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: SlotMapping[Tokens],
    query_start_loc: QueryStartLoc[Tokens],
    seq_lens: SeqLens[Tokens],
    spec: KernelSpec[Tokens],
    *,
    slot_starts: torch.Tensor | None = None,
    validate: bool = True,
) -> None: ...


def write_kv(
    key: torch.Tensor,
    value: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: SlotMapping[Any],
    query_start_loc: QueryStartLoc[Any],
    seq_lens: SeqLens[Any],
    spec: KernelSpec[Any],
    *,
    slot_starts: torch.Tensor | None = None,
    validate: bool = True,
) -> None:
    # The overloads tie the four units together for mypy; the checks below do it at run time.
    """Store a step's new K/V rows into the paged cache (Triton), slots in manager units.

    Args:
        key: ``[num_rows, kv_heads, head_size_k]``: one row per position of the step, in the
            kernel's unit (encoder tokens for a pooled layer).
        value: ``[num_rows, kv_heads, head_size_v]``.
        k_cache: ``[num_cache_blocks, tokens_per_block, kv_heads, head_size_k]``: axis 1 counts
            the kernel's unit (``block_size × P`` encoder tokens per cache block), block 0 is
            the null block. Written in place.
        v_cache: ``[num_cache_blocks, tokens_per_block, kv_heads, head_size_v]``.
        slot_mapping: ``[num_entries]`` manager slots (`PooledBlocks` for a pooled layer,
            `Tokens` otherwise), laid out per request as `slot_start_loc` says; -1 skips.
        query_start_loc: ``[num_requests + 1]`` the rows of each request, kernel unit.
        seq_lens: ``[num_requests]`` each request's length after the step, kernel unit.
        spec: the layer's `KernelSpec` (P, block size, heads, dtype).
        slot_starts: ``[num_requests + 1]`` the step's `slot_start_loc`, computed once per
            step and shared by every layer that writes it; computed here (a few small device
            ops) when None.
        validate: also check values that need a device-to-host copy (offsets, lengths, slot
            ids in range and outside the null block, ``slot_starts``); turn off on hot paths
            once the caller is trusted.

    Raises:
        UnitTypeError: an argument in another unit than the layer's (e.g. a token slot
            mapping for a pooled layer) or a bare tensor.
        SpecError: a spec the kernel cannot run (fp8 cache, no V head).
        KernelTypeError: a wrong dtype or type (also a ``TypeError``).
        KernelValueError: a wrong shape, device, stride or value (also a ``ValueError``).
    """
    check_spec(spec, _WRITE_KINDS, "write_kv")
    unit = spec.seq_unit
    ints = kernel_ints(spec)
    pool, block_size_slots = ints.pool, ints.block_size_slots
    slots = check_slot_mapping(slot_mapping, manager_unit(spec), "slot_mapping")
    starts = check_query_start_loc(query_start_loc, unit, "query_start_loc")
    lens = check_seq_lens(seq_lens, unit, "seq_lens")

    dtype = torch_dtype(spec.dtype)
    ints = kernel_ints(spec)
    heads, head_k, head_v = ints.kv_heads, ints.head_size_k, ints.head_size_v
    device: torch.device = getattr(k_cache, "device", torch.device("cpu"))
    num_blocks = check_caches(k_cache, v_cache, spec, device)
    check_tensor(
        "key", key, (None, heads, head_k), "[num_rows, kv_heads, head_size_k]",
        dtype=dtype, device=device,
    )  # fmt: skip
    num_rows = key.shape[0]
    check_tensor(
        "value", value, (num_rows, heads, head_v), "[num_rows, kv_heads, head_size_v]",
        dtype=dtype, device=device,
    )  # fmt: skip
    check_tensor(
        "slot_mapping", slots, (None,), "[num_entries]",
        dtype=INDEX_DTYPES, device=device, contiguous=True,
    )  # fmt: skip
    num_requests = check_step_tensors(starts, lens, device)
    if slot_starts is None:
        entry_starts = slot_start_loc(query_start_loc, seq_lens, spec)
    else:
        entry_starts = check_tensor(
            "slot_starts", slot_starts, (num_requests + 1,), "[num_requests + 1]",
            dtype=INDEX_DTYPES, device=device, contiguous=True,
        )  # fmt: skip
    check_device(device, paged_write_kernel, "write_kv", "k_cache")
    num_entries = slots.shape[0]
    if validate:
        validate_step(starts, lens, num_rows, "key", "new positions")
        if slot_starts is not None:
            _check_slot_starts(entry_starts, slot_start_loc(query_start_loc, seq_lens, spec))
        _validate_slots(slots, int(entry_starts[-1]), num_blocks, block_size_slots)
    if num_entries == 0 or num_requests == 0:
        return

    meta = write_meta(pool=pool, kv_heads=heads, head_k=head_k, head_v=head_v)
    grid = (num_entries, -(-heads // int(meta["BLOCK_H"])))
    with on_device(device):
        paged_write_kernel[grid](
            key, value, k_cache, v_cache, slots, entry_starts, starts, lens,
            num_requests, heads, block_size_slots,
            key.stride(0), key.stride(1), value.stride(0), value.stride(1),
            k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
            v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
            **meta,
        )  # fmt: skip


def write_meta(*, pool: int, kv_heads: int, head_k: int, head_v: int) -> dict[str, int]:
    """The ``tl.constexpr`` meta-parameters of one launch (the benchmark compiles these)."""
    pool_pad = next_pow2(pool)
    head_pad_k, head_pad_v = next_pow2(head_k), next_pow2(head_v)
    rows_budget = max(1, _WRITE_TILE // (pool_pad * max(head_pad_k, head_pad_v)))
    block_h = min(next_pow2(kv_heads), 1 << (rows_budget.bit_length() - 1))
    return {
        "POOL": pool,
        "POOL_PAD": pool_pad,
        "BLOCK_H": block_h,
        "HEAD_K": head_k,
        "HEAD_V": head_v,
        "HEAD_K_PAD": head_pad_k,
        "HEAD_V_PAD": head_pad_v,
    }


def _check_slot_starts(given: torch.Tensor, expected: torch.Tensor) -> None:
    if not torch.equal(given.to(expected.dtype), expected):
        raise KernelValueError(
            f"slot_starts is {given.tolist()[:8]}... but this step's slot_start_loc is "
            f"{expected.tolist()[:8]}...: pass slot_start_loc(query_start_loc, seq_lens, spec) "
            "of this very step",
            argument="slot_starts",
        )


def _validate_slots(
    slots: torch.Tensor, expected: int, num_blocks: int, block_size_slots: int
) -> None:
    if slots.shape[0] != expected:
        raise KernelValueError(
            f"slot_mapping has {slots.shape[0]} entries but the step's rows touch {expected} "
            "slots (one entry per manager slot touched, per request; see slot_start_loc)",
            argument="slot_mapping",
        )
    if not slots.numel():
        return
    num_slots = num_blocks * block_size_slots
    low, high = int(slots.min()), int(slots.max())
    if low < -1 or high >= num_slots:
        raise KernelValueError(
            f"slot_mapping holds slots {low}..{high}; valid slots are 0..{num_slots - 1} "
            "(num_cache_blocks × block_size) and -1 (skip)",
            argument="slot_mapping",
        )
    # Block 0 is the null block, shared by every table for evicted or unallocated columns:
    # a slot in it was computed from such a column, a manager bug to surface, not store.
    null = (slots >= 0) & (slots < block_size_slots)
    if bool(null.any()):
        entry = int(null.nonzero()[0, 0])
        raise KernelValueError(
            f"slot_mapping[{entry}] is slot {int(slots[entry])}, in the null block 0 (slots "
            f"0..{block_size_slots - 1}), which belongs to no request; skip an entry with -1",
            argument="slot_mapping",
        )
