"""The specialised step (issue 14): it must do what the general path does, or decline.

A coordinator of one or two groups, each with a pool of its own, takes a step that touches one
slot per group (or none) in a function written out for its layout
(`kvunits.runtime._core._make_step`): the request's ``room`` and ``evict`` stand for the managers'
answers, and the pools are called only for the block a step gives or takes. Everything else goes the
general path, which is also what a step with a lookahead of zeros runs. So the two can be compared
call by call: the same slot mappings, the same errors with the same messages, the same tables,
lengths, evictions and free queues after every call. And a step interrupted inside any pool
operation it makes changes nothing, after which the same step gives what it gives on a twin that was
never interrupted.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvunits.contracts import (
    CacheBlocks,
    Elements,
    EncoderTokens,
    FullAttentionLayer,
    KVHeads,
    LayerSpec,
    PoolFactor,
    SlidingWindowLayer,
    Tokens,
    Window,
)
from kvunits.contracts.internal import admission_cap, manager_ints
from kvunits.runtime import ConcurrentUseError, KVCacheCoordinator

from .support import Injected, Interference, check_pools, coordinator, group_of, unique_pools
from .test_stateful import layers


def _state(coord: KVCacheCoordinator) -> tuple[Any, ...]:
    """What a step changes: the pools' queues and references, every request's bookkeeping
    (not ``extra``: the general path run with a lookahead gives every request one)."""
    core = coord._core
    pools = tuple(
        (tuple(p.free_queue()), tuple(sorted((b, p.ref_count(b)) for b in p._held)))
        for p in unique_pools(coord)
    )
    requests = tuple(
        sorted(
            (
                rid,
                tuple(tuple(t) for t in r.tables),
                tuple(r.num_rows),
                tuple(r.num_slots),
                tuple(r.skipped),
                tuple(r.step_rows),
            )
            for rid, r in core.requests.items()
        )
    )
    return pools, requests, tuple(core.ledger.reserved)


def _outcome(call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except Exception as exc:  # compared with the other side's: class and message
        return type(exc).__name__, str(exc)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_the_specialised_step_does_what_the_general_path_does(data: st.DataObject) -> None:
    count = data.draw(st.integers(1, 2), label="groups")
    kinds = ("full", "sliding", "sliding_pooled", "chunked", "chunked_pooled", "cross", "state")
    block_size = data.draw(st.integers(1, 4), label="block_size")
    specs = {
        f"g{i}": data.draw(layers(data.draw(st.sampled_from(kinds)), block_size), label=f"g{i}")
        for i in range(count)
    }
    max_len = data.draw(st.integers(1, 60), label="max_len")
    max_in_flight = data.draw(st.integers(1, 6), label="max_in_flight")
    # Small pools and no reservation: steps run short too.
    blocks = {}
    for name, layer in specs.items():
        group = group_of(
            name, layer, block_size=block_size, max_len=max_len, max_in_flight=max_in_flight
        )
        fixed = manager_ints(group.manager).fixed_slots
        cap = admission_cap(
            group.manager,
            max_in_flight if fixed is None else fixed,
            max_len if fixed is None else fixed,
        )
        blocks[name] = 1 + data.draw(st.integers(0, 2 * cap), label=f"blocks {name}")

    def build() -> KVCacheCoordinator:
        return coordinator(
            specs,
            block_size=block_size,
            num_blocks=blocks,
            max_len=max_len,
            max_in_flight=max_in_flight,
            reserve=False,
        )

    fast, general = build(), build()
    pools = [spec.pool.tokens_per_block for spec in (g.manager for g in fast.groups)]
    zeros = [0] * count
    for _ in range(data.draw(st.integers(1, 100), label="calls")):
        rid = f"r{data.draw(st.integers(0, 3), label='request')}"
        op = data.draw(st.sampled_from(("step",) * 6 + ("admit", "free")), label="op")
        if op == "admit":
            got = [_outcome(c._core.admit, rid) for c in (fast, general)]
        elif op == "free":
            got = [_outcome(c._core.free, rid) for c in (fast, general)]
        else:
            # Positions in the kernel unit: mostly one slot's worth (P encoder tokens of a
            # pooled group) or none (a group that waits, a cross-attention group after its
            # first step), else anything up to two slots and more.
            counts = [
                data.draw(
                    st.just(p) | st.just(p) | st.just(0) | st.integers(0, 2 * p + 1),
                    label="positions",
                )
                for p in pools
            ]
            got = [
                _outcome(fast._core.allocate_step, rid, counts),
                _outcome(general._core.allocate_step, rid, counts, zeros),
            ]
        assert got[0] == got[1], (op, rid)
        assert _state(fast) == _state(general)
    check_pools(fast)


@pytest.mark.parametrize("kinds", [("sliding",), ("sliding", "full"), ("full", "sliding_p2")])
@pytest.mark.parametrize("positions", [1, 2])
def test_one_slot_and_empty_steps_match_the_general_path(
    kinds: tuple[str, ...], positions: int
) -> None:
    # Slots in every phase of a block and of the window are the first slot of an empty step
    # and of a non-empty one: group g waits (an empty step) every 3rd or 5th step, so that the
    # groups' boundaries fall apart, and otherwise adds ``positions`` (a pooled group at P = 2
    # then stays in a slot for a step, or moves one slot a step).
    layers: dict[str, LayerSpec] = {
        "full": FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8)),
        "sliding": SlidingWindowLayer(
            sliding_window=Window(5, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
        ),
        "sliding_p2": SlidingWindowLayer(
            sliding_window=Window(5, EncoderTokens),
            pool=PoolFactor(2),
            kv_heads=KVHeads(1),
            head_size=Elements(8),
        ),
    }
    chosen = {f"{k}{i}": layers[k] for i, k in enumerate(kinds)}

    def build() -> KVCacheCoordinator:
        return coordinator(chosen, block_size=2, num_blocks=100, max_len=160, max_in_flight=4)

    fast, general = build(), build()
    for c in (fast, general):
        c._core.admit("r")
    zeros = [0] * len(kinds)
    for i in range(90):
        counts = [0 if i % (3 + 2 * g) == 0 else positions for g in range(len(kinds))]
        expected = general._core.allocate_step("r", counts, zeros)
        assert fast._core.allocate_step("r", counts) == expected, (i, counts)
        assert _state(fast) == _state(general), (i, counts)


def _voxtral_toy() -> KVCacheCoordinator:
    # Audio: a pooled sliding window (P = 2, 5 encoder tokens: pool_window gives 3 slots) in
    # blocks of 2 slots; text: full attention in blocks of 2 tokens. Pools of their own.
    layers: dict[str, LayerSpec] = {
        "audio": SlidingWindowLayer(
            sliding_window=Window(5, EncoderTokens),
            pool=PoolFactor(2),
            kv_heads=KVHeads(1),
            head_size=Elements(8),
        ),
        "text": FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8)),
    }
    return coordinator(layers, block_size=2, num_blocks=48, max_len=40, max_in_flight=4)


def test_a_decode_step_interrupted_in_any_pool_operation_changes_nothing() -> None:
    # A stream of one-slot steps (2 encoder tokens, 1 token) crosses block boundaries in both
    # groups and evicts audio blocks. Before each step, each pool operation in turn is made to
    # fail: where the step reaches it, nothing changes; then the step runs with that operation
    # re-entering the coordinator, which is refused, and gives what the uninterrupted run gives.
    steps = 30
    twin = _voxtral_toy()
    twin.admit("r")
    twin_step = twin.stepper(twin.group("audio", EncoderTokens), twin.group("text", Tokens))
    expected = [twin_step.allocate("r", EncoderTokens(2), Tokens(1)) for _ in range(steps)]

    def replayed(n: int) -> tuple[KVCacheCoordinator, Any]:
        coord = _voxtral_toy()
        coord.admit("r")
        coord.admit("other")
        step = coord.stepper(coord.group("audio", EncoderTokens), coord.group("text", Tokens))
        for out in expected[:n]:
            assert step.allocate("r", EncoderTokens(2), Tokens(1)) == out
        return coord, step

    reached = set()
    for i in range(steps):
        for g, operation in ((0, "free"), (0, "allocate_n"), (1, "allocate_n")):
            coord, step = replayed(i)
            before = _state(coord)
            pool = coord._core.pools[g]
            with Interference(pool, operation, "fail"):
                try:
                    out = step.allocate("r", EncoderTokens(2), Tokens(1))
                except Injected:
                    out = None
            if out is not None:  # the step does not reach this operation
                assert out == expected[i]
                continue
            reached.add((g, operation))
            assert _state(coord) == before, (i, g, operation)
            check_pools(coord)
            free_other = partial(coord.free, "other")
            with Interference(pool, operation, "reenter", free_other) as r:
                assert step.allocate("r", EncoderTokens(2), Tokens(1)) == expected[i]
            assert r.hits == 1 and isinstance(r.refused[0], ConcurrentUseError)
            assert "other" in coord
            assert step.allocate("r", EncoderTokens(2), Tokens(1)) == expected[i + 1]
            check_pools(coord)
    # Each pool operation a decode step makes was interrupted, at several steps.
    assert reached == {(0, "free"), (0, "allocate_n"), (1, "allocate_n")}
    # 30 slots of audio: the last query, at slot 29, reads slots 27-29: entries 13 and 14 hold
    # ids 14 and 15 (fresh ids, in order), every entry before them the null block.
    assert twin.block_table("r", twin.group("audio", EncoderTokens))[12:] == [0, 14, 15]
    assert twin.usage(twin.group("audio", EncoderTokens)).used == CacheBlocks(2)
