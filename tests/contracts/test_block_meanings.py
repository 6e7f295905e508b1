"""Counts of cache blocks by meaning (issue 20, class 2): a request's admission cap, a pool's
blocks, the pages held or free now, a window's span and a table's width share the unit
``cache_block`` and nothing else. Operators between two meanings are refused with both named
and the comparison that means something suggested; the named comparisons are the rules.

The rule of `PoolBlocks.fits` is vLLM's block pool: one block of every pool is the null block
(``BlockPool.__init__`` takes it out of the free queue, ``vllm/v1/core/block_pool.py``), so a
pool of n blocks holds at most n − 1 of one request's; vLLM #52520 is the bug of comparing a
request's worst case with all n.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvunits.contracts import (
    AdmissionCap,
    CacheBlocks,
    PoolBlocks,
    SpanBlocks,
    TableBlocks,
    UnitTypeError,
)

_SIZE = st.integers(0, 1 << 40)


@given(pool=_SIZE, cap=_SIZE)
def test_a_pool_fits_a_cap_within_its_blocks_but_the_null_one(pool: int, cap: int) -> None:
    assert PoolBlocks(pool).fits(AdmissionCap(cap)) == (cap <= max(pool - 1, 0))
    assert PoolBlocks(pool).usable == CacheBlocks(max(pool - 1, 0))
    assert PoolBlocks(pool).usable.covers(AdmissionCap(cap)) == PoolBlocks(pool).fits(
        AdmissionCap(cap)
    )


@given(pages=_SIZE, cap=_SIZE)
def test_pages_cover_a_cap_they_hold_whole(pages: int, cap: int) -> None:
    assert CacheBlocks(pages).covers(AdmissionCap(cap)) == (cap <= pages)


def test_the_seed_cap_and_the_boundary() -> None:
    # The seed's encoder group: a cap of 13 blocks needs a pool of 14 (13 and the null block).
    assert PoolBlocks(14).fits(AdmissionCap(13))
    assert not PoolBlocks(13).fits(AdmissionCap(13))


@pytest.mark.parametrize(
    ("left", "right", "hint"),
    [
        (AdmissionCap(13), PoolBlocks(13), r"ask pool\.fits\(cap\)"),
        (PoolBlocks(13), AdmissionCap(13), r"ask pool\.fits\(cap\)"),
        (AdmissionCap(13), CacheBlocks(13), r"ask pages\.covers\(cap\)"),
        (SpanBlocks(13), AdmissionCap(13), "not the window's span"),
        (SpanBlocks(13), CacheBlocks(13), "not a span"),
        (TableBlocks(13), CacheBlocks(13), "use the value that means what the code needs"),
    ],
)
def test_two_meanings_do_not_compare(left: object, right: object, hint: str) -> None:
    for op in ("<=", "<", "==", "+"):
        with pytest.raises(UnitTypeError, match=hint) as info:
            eval(f"left {op} right", {"left": left, "right": right})
        assert type(left).__name__ in str(info.value) and type(right).__name__ in str(info.value)


@pytest.mark.parametrize("wrong", [SpanBlocks(13), CacheBlocks(13), TableBlocks(13), 13])
def test_the_named_comparisons_take_a_cap_only(wrong: object) -> None:
    with pytest.raises(UnitTypeError, match="takes a request's AdmissionCap"):
        PoolBlocks(14).fits(wrong)  # type: ignore[arg-type]
    with pytest.raises(UnitTypeError, match="takes a request's AdmissionCap"):
        CacheBlocks(14).covers(wrong)  # type: ignore[arg-type]
