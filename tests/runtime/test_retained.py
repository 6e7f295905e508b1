"""Nothing per request stays allocated once every request is freed (issue 25, item 5).

A Python dict keeps its table's size after its entries are popped: the coordinator's maps
keyed by request (offsets, speculative tails, the policy's arrivals and priorities) are
emptied with ``clear`` when the last request ends, and the request table's arrays are
emptied. What stays is bounded by the pool (its free queue of block ids once handed out).
"""

from __future__ import annotations

import sys

from kvunits.contracts import Elements, FullAttentionLayer, KVHeads, Tokens
from kvunits.runtime import AdmissionPolicy

from .support import coordinator


def test_every_map_keyed_by_request_is_emptied_when_the_last_request_ends() -> None:
    coord = coordinator(
        {"text": FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8))},
        block_size=4,
        num_blocks=2_000,
        max_len=16,
        max_in_flight=8,
        admission=AdmissionPolicy(kind="on_demand", scheduling_policy="priority"),
    )
    text = coord.group("text", Tokens)
    step = coord.stepper(text)
    core = coord._core
    empty = sys.getsizeof({})
    for round_ in range(2):
        ids = [f"r{round_}-{i}" for i in range(300)]
        for i, rid in enumerate(ids):
            step.admit(rid, Tokens(16), priority=i % 3)
            step.allocate_speculative(rid, Tokens(4), lookahead=(Tokens(2),))
        maps = [core.table.offsets, core.specs]
        policy = coord._policy  # the policy's bookkeeping
        maps += [policy.arrival, policy.priority]
        assert all(sys.getsizeof(m) > empty for m in maps)
        for rid in ids:
            coord.free(rid)
        assert [sys.getsizeof(m) for m in maps] == [empty] * len(maps)
        assert len(core.table.hot) == len(core.table.st) == 0
        assert all(len(slab) == 0 for slab in core.table.slabs)
