# ruff: noqa: E501
# fmt: off
"""Whose count it is: the model's KV heads, bytes and blocks against one rank's.

At tensor-parallel size 16 a layer's 8 KV heads are 1 head on each rank; the model's 65536-byte
page is an 8192-byte page there; a rank's budget buys pages of its own. Mixing the two (sizing
a rank's pool with the model's page, as transformers #48566 did) is rejected by mypy here and
at run time (`UnitTypeError`); the named conversions of `contracts` cross between them.
"""

from kvunits.contracts import Bytes, CacheBlocks
from kvunits.contracts.deploy import (
    KVHeads,
    Parallelism,
    RankBlocks,
    RankBytes,
    RankKVHeads,
    engine_blocks,
    kv_heads_per_rank,
    rank_blocks_to_bytes,
    rank_bytes_to_blocks_floor,
)

tp16 = Parallelism(tensor_parallel_size=16)
heads = KVHeads(8)
per_rank = kv_heads_per_rank(heads, tp16)

# Heads: the model's 8 are not a rank's 1, nor a bare int.
all_heads = heads + per_rank  # E: Unsupported operand types for + ("KVHeads" and "RankKVHeads")  [operator]
same_heads = heads == per_rank  # E: Non-overlapping equality check (left operand type: "KVHeads", right operand type: "RankKVHeads")  [comparison-overlap]
twice = kv_heads_per_rank(per_rank, tp16)  # E: Argument 1 to "kv_heads_per_rank" has incompatible type "RankKVHeads"; expected "KVHeads"  [arg-type]
bare = kv_heads_per_rank(8, tp16)  # E: Argument 1 to "kv_heads_per_rank" has incompatible type "int"; expected "KVHeads"  [arg-type]

# Bytes: the model's page is not a rank's; a rank's budget is not the model's memory.
model_page = Bytes(65536)
rank_page = RankBytes(8192)
budget = RankBytes(16 << 30)
left = budget - model_page  # E: Unsupported operand types for - ("RankBytes" and "Bytes")  [operator]
fits = model_page <= budget  # E: Unsupported operand types for <= ("Bytes" and "RankBytes")  [operator]
pages = rank_bytes_to_blocks_floor(budget, model_page)  # E: Argument 2 to "rank_bytes_to_blocks_floor" has incompatible type "Bytes"; expected "RankBytes"  [arg-type]

# Blocks: the pages a rank holds are not the scheduler's block ids until named so.
bought = rank_bytes_to_blocks_floor(budget, rank_page)
ids = CacheBlocks(13)
more = bought + ids  # E: Unsupported operand types for + ("RankBlocks" and "CacheBlocks")  [operator]
held = rank_blocks_to_bytes(ids, rank_page)  # E: Argument 1 to "rank_blocks_to_bytes" has incompatible type "CacheBlocks"; expected "RankBlocks"  [arg-type]
same_blocks = engine_blocks([ids])  # E: List item 0 has incompatible type "CacheBlocks"; expected "RankBlocks"  [list-item]
# One rank's pages are not the scheduler's block ids: the engine's are the fewest over every
# rank (nano-vllm #187: rank 0's count sized the block manager; rank 1 had fewer pages).
one_rank = engine_blocks(bought)  # E: Argument 1 to "engine_blocks" has incompatible type "RankBlocks"; expected "Sequence[RankBlocks]"  [arg-type]

# Through the named conversions, each in its own scope, it all adds up.
assert per_rank.numerical_value_in(RankKVHeads) == 1
assert bought == RankBlocks(2097152)
assert engine_blocks([bought, RankBlocks(2097160)]).usable + ids == CacheBlocks(2097164)
assert rank_blocks_to_bytes(bought, rank_page) == budget
