# ruff: noqa: E501
# fmt: off
# (A mark must stay on the line mypy reports, so the formatter must not wrap these lines.)
"""Class 3, plain ints at the edges: real bugs where a count travelled as a bare int and was
divided or reused as something it is not. The rule: heads, KV heads, head sizes and layers are
counts of their own in the specs; a block table and a slot mapping are containers that refuse
each other; a count does not divide or scale by a bare int (the named conversion does).

* tenstorrent/vllm #50: KV heads per device were ``num_kv_heads / num_devices``: 8 heads over a
  32-device Galaxy gave 0 heads a device (fixed by dividing by the smaller of the two);
  PaddlePaddle/FastDeploy #3717: ERNIE-4.5-0.3B at TP 4 with 2 KV heads computed
  ``kv_num_head = 2 // 4 = 0`` and the cache manager never started (fixed with
  ``max(1, ...)``); vllm-project/vllm-ascend #3366 is the same class in KV transfer.
  `kv_heads_per_rank` is ``max(1, H // tp)`` with the divisibility vLLM asserts.
* ericcurtin/vllm-vulkan #78: a test built each step's ``slot_mapping`` and its
  ``block_table`` independently, from one integer, so they named different cache slots for
  every step but the first. A block table is built from block ids, never from slots.
"""

from kvunits.contracts import (
    BlockIds,
    CacheBlocks,
    Elements,
    FullAttentionLayer,
    KVHeads,
    SlotIds,
    Tokens,
)
from kvunits.contracts.deploy import Parallelism, RankKVHeads, kv_heads_per_rank

# -- KV heads per device (tenstorrent/vllm #50, FastDeploy #3717) -------------------------------
layer = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))
galaxy = Parallelism(tensor_parallel_size=32)
assert kv_heads_per_rank(layer.kv_heads, galaxy) == RankKVHeads(1)  # replicated, never 0
per_device = layer.kv_heads // 32  # E: Unsupported operand types for // ("KVHeads" and "int")  [operator]

# -- a slot mapping is no block table (vllm-vulkan #78) -----------------------------------------
slots = SlotIds([16, 17, 18], Tokens, owner="text")  # the step's cache slots (block 1, 16 a block)
table = BlockIds([1], owner="text")
assert BlockIds(table.ids_in(CacheBlocks), owner="text") == table  # ids from ids
table_from_slots = BlockIds(slots)  # E: Argument 1 to "BlockIds" has incompatible type "SlotIds[Tokens, Any]"; expected "Sequence[int]"  [arg-type]
