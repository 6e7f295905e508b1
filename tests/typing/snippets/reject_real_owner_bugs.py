# ruff: noqa: E501
# fmt: off
# (A mark must stay on the line mypy reports, so the formatter must not wrap these lines.)
"""Class 1, whose value it is: real bugs where a value of one owner (a rank, a layer group,
a model) went where another owner's belongs. The rule: a value that belongs to an owner says
so, and a consumer refuses another owner's with both named: statically where the owner is a
type (a rank's counts), at run time where it is a name (a group, a model).

* nano-vllm #187 (fixed by PRs #215, #259, #275): each rank sized its cache from its own free
  memory (rank 0: 2111 blocks, rank 1: 2055), and the block manager on rank 0 took rank 0's
  count for the engine's; rank 1 was handed block ids past its cache. The engine's count is
  the fewest over every rank.
* vLLM #50687 (fixed by #50742): recovering invalid blocks assumed one KV cache group and cut
  token boundaries with one group's block size for all; vLLM #53982: the slot-mapping kernel
  read a group's block table at columns computed from raw token positions, past the end of a
  group whose table is narrower. A column belongs to the group whose block size cut it.
* SGLang #8482 (and lightseekorg/tokenspeed #194's draft half): the draft model's KV cache was
  created for all of the target model's layers. A layer count belongs to its model.
"""

from kvunits.contracts import (
    Elements,
    EngineSpec,
    FullAttentionLayer,
    KVHeads,
    Layers,
    ModelSpec,
    PoolBlocks,
    Position,
    SlidingWindowLayer,
    Tokens,
    Window,
)
from kvunits.contracts.deploy import RankBlocks, RankBytes, engine_blocks
from kvunits.runtime import KVCacheCoordinator, plan

# -- a rank's count is not the engine's (nano-vllm #187) ---------------------------------------
rank0, rank1 = RankBlocks(2111), RankBlocks(2055)
assert engine_blocks([rank0, rank1]) == PoolBlocks(2055)  # every rank's, the fewest
blocks = engine_blocks(rank0)  # E: Argument 1 to "engine_blocks" has incompatible type "RankBlocks"; expected "Sequence[RankBlocks]"  [arg-type]

# -- a column belongs to its group (vLLM #50687, #53982) ----------------------------------------
full = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))
sliding = SlidingWindowLayer(sliding_window=Window(64, Tokens), kv_heads=KVHeads(8), head_size=Elements(256))
model = ModelSpec.model_validate({"name": "gemma-like", "layers": {"full.0": full, "sliding.0": sliding}})
engine = EngineSpec(max_model_len=Tokens(4096), max_num_batched_tokens=Tokens(1024), memory_budget=RankBytes(1 << 30), kv_cache_layout="shared")
coord = KVCacheCoordinator.from_plan(plan(model, engine))
text_full = coord.group(coord.group_names[0], Tokens)
text_sliding = coord.group(coord.group_names[1], Tokens)
step = coord.stepper(text_full, text_sliding)
step.admit("r", Tokens(4096), Tokens(4096))
step.allocate("r", Tokens(600), Tokens(600))
position = Position(599, Tokens)
own = coord.block_table("r", text_sliding)[text_sliding.block_of(position)]  # each group's own column
other = coord.block_table("r", text_sliding)[text_full.block_of(position)]  # R: mypy sees two columns of cache blocks; the run time knows whose block size cut each

# -- a layer count belongs to its model (SGLang #8482) -------------------------------------------
target = ModelSpec.stacked("target", {"text": (full, Layers(32))})
draft_layer = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))
draft = ModelSpec.stacked("draft", {"mtp": (draft_layer, Layers(1))})
assert draft.num_layers == Layers(1)
wrong_draft = ModelSpec.stacked("draft", {"mtp": (draft_layer, target.num_layers)})  # R: both are Layers to mypy; the count says which model it was read from
