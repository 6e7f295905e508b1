"""Correct use of the contracts: mypy reports nothing and the code runs."""

from typing import assert_type

from contracts import (
    BlockSize,
    Bytes,
    CacheBlocks,
    EncoderTokens,
    PooledBlocks,
    PoolFactor,
    Tokens,
    bytes_to_cache_blocks_floor,
    cache_blocks_to_bytes,
    expand_block_size,
    parse_quantity,
    pool_length,
    pool_position,
    pool_window,
    slots_to_cache_blocks_ceil,
    unpool_length,
)

pool = PoolFactor(4)
window = parse_quantity("750 encoder_tokens", EncoderTokens)
assert_type(window, EncoderTokens)

window_slots = pool_window(window, pool)
assert_type(window_slots, PooledBlocks)
assert window_slots == PooledBlocks(189)
assert pool_length(window, pool) == PooledBlocks(188)
assert pool_position(EncoderTokens(812), pool) == PooledBlocks(203)
assert_type(unpool_length(window_slots, pool), EncoderTokens)

block_size = BlockSize(16, PooledBlocks)
assert_type(expand_block_size(block_size, pool), BlockSize[EncoderTokens])
blocks = slots_to_cache_blocks_ceil(window_slots + PooledBlocks(1), block_size)
assert_type(blocks, CacheBlocks)
assert blocks == CacheBlocks(12)
assert slots_to_cache_blocks_ceil(Tokens(4096), BlockSize(16, Tokens)) == CacheBlocks(256)

page = Bytes(16 * 128 * 2 * 64 * 2)
assert_type(cache_blocks_to_bytes(blocks, page), Bytes)
assert bytes_to_cache_blocks_floor(parse_quantity("40 GiB", Bytes), page) == CacheBlocks(81920)

# Same-unit arithmetic, scaling, ordering, hashing; a plain int only through .value.
longest = max(window, EncoderTokens(1500))
assert_type(longest, EncoderTokens)
assert window - EncoderTokens(1) < window <= longest
assert 2 * window_slots == window_slots * 2
assert len({CacheBlocks(1), CacheBlocks(1)}) == 1
block_table = [5, 6, 7]
assert block_table[CacheBlocks(2).value] == 7
assert f"{window}" == "750 encoder_token"
