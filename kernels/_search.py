"""Triton helper shared by the kernels: which request owns a program, without a host sync.

Private; `_paged_write` and `_paged_swa` call it from their programs.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit  # type: ignore[untyped-decorator]  # triton ships no type stubs
def find_owner(
    start_loc_ptr: tl.tensor,
    target: tl.tensor,
    num_requests: tl.tensor,
    PER_ITEM: tl.constexpr,
    PER_REQUEST: tl.constexpr,
) -> tl.tensor:
    """The largest r in [0, num_requests) with ``start_loc[r] // PER_ITEM + r × PER_REQUEST
    <= target`` (binary search; ``start_loc`` non-decreasing, so the key is too).

    With ``start_loc`` the cumulative counts of something per request, ``PER_ITEM = 1,
    PER_REQUEST = 0`` finds the request owning item ``target`` (requests with no items are
    skipped); ``PER_ITEM = BLOCK_Q, PER_REQUEST = 1`` the request owning tile ``target`` when
    request r's tiles start at ``start_loc[r] // BLOCK_Q + r``.
    """
    lo: tl.int32 = 0
    hi: tl.int32 = num_requests
    while lo < hi:
        mid = (lo + hi) // 2
        if tl.load(start_loc_ptr + mid) // PER_ITEM + mid * PER_REQUEST <= target:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1
