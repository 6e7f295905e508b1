"""Correct use of the contracts: mypy reports nothing and the code runs."""

from typing import assert_type

from kvunits.contracts import (
    BlockSize,
    Bytes,
    CacheBlocks,
    Chunk,
    EncoderTokens,
    PooledBlocks,
    PoolFactor,
    Position,
    SpanBlocks,
    Tokens,
    Window,
    block_of,
    bytes_to_cache_blocks_floor,
    cache_blocks_to_bytes,
    expand_block_size,
    parse_quantity,
    pool_chunk,
    pool_length,
    pool_position,
    pool_window,
    slots_to_cache_blocks_ceil,
    unpool_length,
    window_blocks,
)

pool = PoolFactor(4)
length = parse_quantity("750 encoder_tokens", EncoderTokens)
assert_type(length, EncoderTokens)

# Each kind converts with the function that is correct for it.
window = Window(750, EncoderTokens)
window_slots = pool_window(window, pool)
assert_type(window_slots, Window[PooledBlocks])
assert window_slots == Window(189, PooledBlocks)
assert pool_length(length, pool) == PooledBlocks(188)
assert pool_position(Position(812, EncoderTokens), pool) == Position(203, PooledBlocks)
assert pool_chunk(Chunk(8192, EncoderTokens), pool) == Chunk(2048, PooledBlocks)
assert_type(unpool_length(PooledBlocks(189), pool), EncoderTokens)

block_size = BlockSize(16, PooledBlocks)
assert_type(expand_block_size(block_size, pool), BlockSize[EncoderTokens])
# The blocks a window touches (it may start mid-block) are not a length's blocks.
assert window_blocks(window_slots, block_size) == SpanBlocks(13)
held = slots_to_cache_blocks_ceil(window_slots.lookback + PooledBlocks(1), block_size)
assert_type(held, CacheBlocks)
assert held == CacheBlocks(12)
assert slots_to_cache_blocks_ceil(Tokens(4096), BlockSize(16, Tokens)) == CacheBlocks(256)
assert block_of(Position(203, PooledBlocks), block_size) == Position(12, CacheBlocks)

page = Bytes(16 * 128 * 2 * 64 * 2)
assert_type(cache_blocks_to_bytes(held, page), Bytes)
assert bytes_to_cache_blocks_floor(parse_quantity("40 GiB", Bytes), page) == CacheBlocks(81920)

# Positions and lengths: position - position is a length, position + length a position.
query = Position(812, EncoderTokens)
step = query - Position(808, EncoderTokens)
assert_type(step, EncoderTokens)
assert query + EncoderTokens(4) == Position(816, EncoderTokens)
assert window.first_position(query) == Position(63, EncoderTokens)  # 812 - (750 - 1)
assert Chunk(8192, Tokens).start_of(Position(9000, Tokens)) == Position(8192, Tokens)

# Same-unit arithmetic, scaling, ordering, hashing, sums with a start in the unit.
longest = max(length, EncoderTokens(1500))
assert_type(longest, EncoderTokens)
assert length - EncoderTokens(1) < length <= longest
assert 2 * PooledBlocks(189) == PooledBlocks(189) * 2
assert len({CacheBlocks(1), CacheBlocks(1)}) == 1
assert EncoderTokens.total([length, EncoderTokens(2)]) == EncoderTokens(752)
assert sum([Tokens(1), Tokens(2)], Tokens(0)) == Tokens(3)
# A plain int leaves a quantity only naming its unit (a block-table index, a loop bound).
block_table = [5, 6, 7]
assert block_table[CacheBlocks(2).numerical_value_in(CacheBlocks)] == 7
column = block_of(query, BlockSize(64, EncoderTokens))
assert block_table[column.numerical_value_in(CacheBlocks) - 10] == 7
assert f"{length}" == "750 encoder_token" and str(window) == "750 encoder_token"
