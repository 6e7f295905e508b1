# ruff: noqa: E501
# fmt: off
# (A mark must stay on the line mypy reports, so the formatter must not wrap these lines.)
"""Class 1, whose value it is, statically: a layer group asked for by its `GroupMarker` types
what its handle and its views compute, so that mypy refuses one group's column in another
group's table, as the run time does by name.

The issue's example: a Gemma-like model shares one pool between a full-attention group (32
tokens a block once the plan unifies page sizes) and a sliding group (16 a block); position
599 is column 18 of the full group's tables and column 37 of the sliding group's. The full
group's column read in the sliding group's table names another page (vLLM #50687, #53982).
User code declares one marker per group and asks for each group by it; nothing else changes.
"""

from kvunits.contracts import (
    Elements,
    EngineSpec,
    FullAttentionLayer,
    GroupMarker,
    KVHeads,
    ModelSpec,
    Position,
    SlidingWindowLayer,
    Tokens,
    Window,
    group_layers,
)
from kvunits.contracts.deploy import RankBytes
from kvunits.runtime import KVCacheCoordinator, plan


class Full(GroupMarker, name="full"): ...


class Sliding(GroupMarker, name="sliding"): ...


full_layer = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))
sliding_layer = SlidingWindowLayer(sliding_window=Window(64, Tokens), kv_heads=KVHeads(8), head_size=Elements(256))
model = ModelSpec.model_validate({"name": "gemma-like", "layers": {"full.0": full_layer, "sliding.0": sliding_layer}})
engine = EngineSpec(max_model_len=Tokens(4096), max_num_batched_tokens=Tokens(1024), memory_budget=RankBytes(1 << 30), kv_cache_layout="shared")
coord = KVCacheCoordinator.from_plan(plan(model, engine))
text_full, text_sliding = coord.group(Full, Tokens), coord.group(Sliding, Tokens)
step = coord.stepper(text_full, text_sliding)
step.admit("r", Tokens(4096), Tokens(4096))
step.allocate("r", Tokens(600), Tokens(600))
position = Position(599, Tokens)
table = coord.block_table("r", text_sliding)
own = table[text_sliding.block_of(position)]  # each group's own column
assert own > 0
other = table[text_full.block_of(position)]  # E: Invalid index type "Position[CacheBlocks, Full]" for "BlockIds[Sliding]"; expected type "Position[CacheBlocks, Sliding] | int"  [index]
# The kernel inputs and the step batch's tables carry the group too.
inputs = coord.kernel_inputs("r", text_sliding)
kernel_other = inputs.block_table[text_full.block_of(position)]  # E: Invalid index type "Position[CacheBlocks, Full]" for "BlockIds[Sliding]"; expected type "Position[CacheBlocks, Sliding] | int"  [index]
batch = coord.step_batch(text_sliding, ["r"])
batch_other = batch.block_tables[0][text_full.block_of(position)]  # E: Invalid index type "Position[CacheBlocks, Full]" for "BlockIds[Sliding]"; expected type "Position[CacheBlocks, Sliding] | int"  [index]

# A layer group's views, typed by the same marker (group_layers keeps the engine's block size:
# 16 tokens a block in both groups here, so a column says which group cut it, not its size).
(full_group, sliding_group), _ = group_layers(model, engine)
full_view = full_group.expect(Tokens, Full).manager
sliding_view = sliding_group.expect(Tokens, Sliding).manager
view_other = table[full_view.block_of(position)]  # E: Invalid index type "Position[CacheBlocks, Full]" for "BlockIds[Sliding]"; expected type "Position[CacheBlocks, Sliding] | int"  [index]
# A marker names its group: asked for as another group's, refused (a run-time check only,
# since the name is a string to mypy).
misnamed = sliding_group.expect(Tokens, Full)  # R: the marker says "full", the group is "sliding"
