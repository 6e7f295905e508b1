# ruff: noqa: E501
# fmt: off
# (A mark must stay on the line mypy reports, so the formatter must not wrap these lines.)
"""Class 1, whose value it is, for the dtype a page was sized with: real bugs where one
group's dtype (or an engine-wide one) sized another group's pages. The rule: a group's pages
are sized with the group's own dtype (its view's), an engine's ``cache_dtype`` never reaches
a state group (a mixer keeps its own state dtypes), and a cache tensor of another dtype than
its layer's group stores is a `CacheDTypeError`, both a `KernelTypeError` and a `UnitError`
naming the group and both dtypes. A tensor's dtype is a run-time value: mypy cannot see it.

* NVIDIA/TensorRT-LLM #16304: ``CppMambaHybridCacheManager`` gave its recurrent-state window
  no pool configuration of its own, so the C++ block manager fell back to the manager-level
  NVFP4 attention dtype for the Mamba states, which do not support FP4.
* vllm-project/vllm #37429 (a comment reproducing #43626): with an FP8 target KV cache and a
  BF16 drafter, ``KVBlockZeroer`` took one page size in elements for every attention group;
  the drafter's BF16 pages are twice the target's FP8 pages, so it zeroed them at the wrong
  stride.
"""

import torch

from kvunits.contracts import (
    CacheDType,
    Elements,
    EngineSpec,
    FullAttentionLayer,
    Heads,
    KVHeads,
    ModelSpec,
    Tokens,
    group_layers,
    manager_view,
)
from kvunits.contracts.deploy import RankBytes
from kvunits.contracts.state import GatedDeltaNetLayer
from kvunits.kernels import BlockTable, QueryStartLoc, SeqLens, allocate_kv_caches, paged_attention
from kvunits.runtime import plan

# -- an engine-wide dtype does not size a group with its own (TensorRT-LLM #16304) --------------
gdn = GatedDeltaNetLayer(num_k_heads=Heads(16), num_v_heads=Heads(32), head_k_dim=Elements(128), head_v_dim=Elements(128), conv_kernel=4)
own = manager_view(gdn, block_size_slots=16)
under_fp8 = manager_view(gdn, block_size_slots=16, cache_dtype=CacheDType.fp8_e4m3)  # the engine's attention dtype
assert under_fp8.page_size == own.page_size and under_fp8.dtype == own.dtype  # the state keeps its dtypes

# -- one group's cache is not another's (vLLM #37429: bf16 drafter, fp8 target) ----------------
target = FullAttentionLayer(kv_heads=KVHeads(2), head_size=Elements(8), dtype=CacheDType.float32)
drafter = FullAttentionLayer(kv_heads=KVHeads(2), head_size=Elements(8), dtype=CacheDType.bfloat16)
model = ModelSpec.model_validate({"name": "target-and-drafter", "layers": {"target.0": target, "draft.0": drafter}})
engine = EngineSpec(max_model_len=Tokens(64), max_num_batched_tokens=Tokens(8), memory_budget=RankBytes(1 << 20), block_size_slots=2)
caches = allocate_kv_caches(plan(model, engine))
(target_group, draft_group), _ = group_layers(model, engine)
draft_spec = draft_group.kernels["draft.0"].expect(Tokens)
assert caches["draft.0"].k_cache.dtype == torch.bfloat16 and caches["target.0"].k_cache.dtype == torch.float32
q = torch.zeros(1, 2, 8, dtype=torch.bfloat16)
table, starts, lens = BlockTable(torch.ones(1, 1, dtype=torch.int32)), QueryStartLoc(torch.tensor([0, 1], dtype=torch.int32), Tokens), SeqLens(torch.tensor([1], dtype=torch.int32), Tokens)
target_k, target_v = caches["target.0"].k_cache, caches["target.0"].v_cache
draft_k, draft_v = caches["draft.0"].k_cache, caches["draft.0"].v_cache
assert target_v is not None and draft_v is not None
out = paged_attention(q, draft_k, draft_v, table, starts, lens, draft_spec)  # the drafter's own cache
wrong = paged_attention(q, target_k, target_v, table, starts, lens, draft_spec)  # R: a tensor's dtype is a run-time value: CacheDTypeError (a UnitError) names group 'draft' and both dtypes
