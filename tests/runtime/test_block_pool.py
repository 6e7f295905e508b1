"""The block pool: the null block, FIFO reuse, reference counts, failures without effects."""

from __future__ import annotations

import pytest

from kvunits.contracts import CacheBlocks
from kvunits.runtime import NULL_BLOCK, AllocationError
from kvunits.runtime.block_pool import BlockPool


def test_null_block_is_never_handed_out() -> None:
    pool = BlockPool(4, name="g")
    assert pool.allocate_n(3) == [1, 2, 3]
    assert NULL_BLOCK == 0 and pool.ref_count(NULL_BLOCK) == 1
    assert pool.num_free == 0 and pool.num_used == 3


def test_freed_blocks_are_reused_first_in_first_out() -> None:
    pool = BlockPool(6, name="g")
    a = pool.allocate_n(3)
    pool.free([a[1]])
    pool.free([a[0]])
    # 4 and 5 were free before 2 and 1 came back.
    assert pool.allocate_n(4) == [4, 5, 2, 1]


def test_short_allocation_changes_nothing() -> None:
    pool = BlockPool(3, name="audio")
    pool.allocate_n(1)
    with pytest.raises(
        AllocationError, match=r"cannot take 2 cache_block from pool 'audio': 1 free"
    ):
        pool.allocate_n(2)
    try:
        pool.allocate_n(2)
    except AllocationError as err:
        assert (err.group, err.needed, err.free) == ("audio", CacheBlocks(2), CacheBlocks(1))
    assert pool.num_free == 1
    assert pool.allocate_n(0) == []


def test_double_free_and_null_free_are_caught() -> None:
    pool = BlockPool(3, name="g")
    (block,) = pool.allocate_n(1)
    assert pool.ref_count(block) == 1
    pool.free([block])
    assert pool.ref_count(block) == 0 and pool.num_free == 2
    # A second free would queue the block twice and hand it to two requests.
    with pytest.raises(AssertionError, match="block 1 of pool 'g' freed: not held"):
        pool.free([block])
    with pytest.raises(AssertionError, match="the null block is never freed"):
        pool.free([NULL_BLOCK])
    assert pool.allocate_n(2) == [2, 1]


def test_a_pool_holds_at_least_the_null_block() -> None:
    assert BlockPool(1).num_free == 0
    with pytest.raises(ValueError, match="needs >= 1 block"):
        BlockPool(0)
