# ruff: noqa: E501
# fmt: off
# (A mark must stay on the line mypy reports, so the formatter must not wrap these lines.)
"""Class 2, one type with several meanings: real bugs where a count of the right unit but the
wrong meaning went through. The rule: counts that share a unit but not a meaning are types of
their own (a window's span of blocks, a table's width, the pages a request holds; the layers
of the model, of a stage, of a group), and the functions that return each say which.

* vLLM #11168 (fixed by #17834): the block manager's ``can_allocate`` counted the blocks of the
  sliding window where ``allocate`` takes the prompt's: requests were admitted that the pool
  could not hold, and ``allocate`` raised ``NoFreeBlocksError``. A window's span is not what a
  request holds.
* lightseekorg/tokenspeed #194: for a hybrid model (Jamba) the memory profiler multiplied the
  attention page by all of the model's layers (Mamba layers counted as if they held KV pages),
  and sized the pool too small. A group's pages are per layer *of the group*.
* vLLM #52520 (fixed by #52530): start-up compared a request's worst-case blocks with *all* the
  blocks the pool would have, but the block pool keeps one as the null block: a request whose
  cap equals the pool passed the check, was accepted, prefilled to 99 % and never scheduled
  again (the HTTP request never returned). A cap is compared with a pool by name,
  ``pool.fits(cap)``, which leaves the null block out; ``cap <= pool`` is refused.
* TensorRT-LLM #15017: ``get_num_spec_layers`` read ``num_eagle_layers``, which the draft-tree
  code sets to ``max_draft_len`` (a count of draft *tokens*), as the number of draft layers,
  and allocated the draft's KV cache that many times over.
"""

from kvunits.contracts import (
    AdmissionCap,
    CacheBlocks,
    Elements,
    EncoderTokens,
    EngineSpec,
    FullAttentionLayer,
    KVHeads,
    Layers,
    ModelSpec,
    PoolBlocks,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    SpanBlocks,
    StateLayer,
    Tokens,
    Window,
    group_layers,
    manager_view,
)
from kvunits.contracts.deploy import RankBytes, rank_block_bytes

# -- a window's span is not a request's cap (vLLM #11168) ---------------------------------------
layer = SlidingWindowLayer(sliding_window=Window(750, EncoderTokens), pool=PoolFactor(4), kv_heads=KVHeads(32), head_size=Elements(64))
manager = manager_view(layer, block_size_slots=16).expect(PooledBlocks)
free = CacheBlocks(13)
span = manager.window_blocks()  # cdiv(189 - 1, 16) + 1 = 13: the window alone
cap = manager.max_admission_blocks_per_request(PooledBlocks(64), PooledBlocks(100_000))  # the window and a step in flight: 17
assert span == SpanBlocks(13) and cap == AdmissionCap(17)
assert not free.covers(cap)  # the request does not fit now: 13 free blocks, 17 held at once
admitted = span <= free  # E: Unsupported operand types for <= ("SpanBlocks" and "CacheBlocks")  [operator]
admitted_cap = cap <= free  # E: Unsupported operand types for <= ("AdmissionCap" and "CacheBlocks")  [operator]

# -- a cap is compared with what a pool can hold, not with its size (vLLM #52520) ---------------
pool = PoolBlocks(17)  # the group's blocks, the null block included: 16 for requests
assert not pool.fits(cap)  # 17 blocks at once can never be held: refuse the request up front
assert PoolBlocks(18).fits(cap)
never_refused = cap <= pool  # E: Unsupported operand types for <= ("AdmissionCap" and "PoolBlocks")  [operator]

# -- a group's pages are per layer of the group (tokenspeed #194) --------------------------------
attention = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))
mamba = StateLayer.model_validate({"state_size": "1 MiB"})
jamba = ModelSpec.model_validate({"name": "jamba-like", "layers": {**{f"attn.{i}": attention for i in range(4)}, **{f"mamba.{i}": mamba for i in range(28)}}})
engine = EngineSpec(max_model_len=Tokens(4096), max_num_batched_tokens=Tokens(512), memory_budget=RankBytes(1 << 30))
groups, _ = group_layers(jamba, engine)
attn = next(g for g in groups if g.manager.kind == "full_attention")
assert attn.num_layers == Layers(4) and jamba.num_layers == Layers(32)
assert attn.block_bytes == attn.manager.page_size * 4  # one page in each of the group's 4 layers
per_block = attn.manager.page_size * jamba.num_layers  # E: Unsupported operand types for * ("Bytes" and "Layers")  [operator]

# -- a count of draft tokens is not a count of layers (TensorRT-LLM #15017) ----------------------
max_draft_len = 3  # the draft tree's depth: tokens drafted a step
draft_page = RankBytes(16 * 8 * 256 * 2)
draft_bytes = draft_page * max_draft_len  # E: Unsupported operand types for * ("RankBytes" and "int")  [operator]
named = rank_block_bytes(draft_page, max_draft_len)  # E: Argument 2 to "rank_block_bytes" has incompatible type "int"; expected "StageLayers"  [arg-type]
