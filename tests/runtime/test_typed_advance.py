"""`Stepper.advance` in one frame (issue 25): the typed entry checks its quantities, then runs
the lines of the core's ``advance_typed`` (`kvunits.runtime._fast.advance_lines`): a step
within every group's slack is taken there, any other goes to the core's ``cross`` (a block
boundary, a speculative tail to accept) with the token held. So it is compared with the
general path call by call on twin coordinators of random layouts and random bindings (a
subset of the groups, in any order, pooled groups stepped in whole pooled blocks or in encoder
tokens): the same results, errors and state after every call, with speculative tails, frees
and re-admissions in between.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvunits.contracts import (
    Elements,
    EncoderTokens,
    FullAttentionLayer,
    KVHeads,
    PooledBlocks,
    Tokens,
)
from kvunits.contracts.errors import ConcurrentUseError, RequestError, UnitTypeError

from ..examples import examples
from .support import check_pools, coordinator
from .test_fast_step import _outcome, _state, general
from .test_stateful import drawn_coordinators


@settings(max_examples=examples(120), deadline=None)
@given(data=st.data())
def test_the_typed_advance_does_what_the_general_path_does(data: st.DataObject) -> None:
    kinds = ("full", "sliding", "sliding_pooled", "chunked", "chunked_pooled")
    drawn = drawn_coordinators(
        data.draw, kinds, 3, st.integers(1, 60), st.integers(1, 8), lambda c: st.integers(0, 2 * c)
    )
    count = len(drawn.specs)
    one, two = drawn.build(), drawn.build()
    # The binding: some groups, in some order; a pooled group's unit drawn.
    order = data.draw(st.permutations(range(count)), label="order")
    bound = order[: data.draw(st.integers(1, count), label="bound")]
    handles = []
    for g in bound:
        group = one.groups[g]
        if group.manager.slot_unit is PooledBlocks:
            unit: Any = data.draw(st.sampled_from((PooledBlocks, EncoderTokens)), label="unit")
        else:
            unit = Tokens
        handles.append(one.group(group.name, unit))
    stepper = one.stepper(*handles)
    for _ in range(data.draw(st.integers(1, 80), label="calls")):
        rid = f"r{data.draw(st.integers(0, 3), label='request')}"
        op = data.draw(
            st.sampled_from(("advance",) * 6 + ("speculative", "admit", "free", "wrong unit")),
            label="op",
        )
        if op == "admit":
            got = [_outcome(c._core.admit, rid) for c in (one, two)]
        elif op == "free":
            got = [_outcome(c._core.free, rid) for c in (one, two)]
        elif op == "speculative":
            # A speculative tail (both twins on the general path): the next advance accepts it.
            q = [data.draw(st.integers(0, 3), label="spec") for _ in range(count)]
            got = [_outcome(general, c._core, "speculative", rid, q, q) for c in (one, two)]
        else:
            given = [data.draw(st.integers(0, 2 * drawn.block_size + 1), label="n") for _ in bound]
            dense = [0] * count
            for h, n in zip(handles, given, strict=True):
                dense[h.index] = n * h.rows_per_unit
            args = [h.unit(n) for h, n in zip(handles, given, strict=True)]
            if op == "wrong unit":
                i = data.draw(st.integers(0, len(args) - 1), label="which")
                args[i] = (Tokens if handles[i].unit is not Tokens else EncoderTokens)(1)
                with pytest.raises(UnitTypeError, match=rf"num_new\[{i}\]"):
                    stepper.advance(rid, *args)
                got = []
            else:
                got = [
                    _outcome(stepper.advance, rid, *args),
                    _outcome(general, two._core, "advance", rid, dense),
                ]
        assert got[:1] == got[1:], (op, rid)
        assert _state(one) == _state(two), (op, rid)
    check_pools(one)


def test_a_step_within_its_slack_runs_in_the_typed_entry_alone() -> None:
    # Decode steps within a block: the typed entry's frame only. The step that crosses a block
    # and the one that accepts a speculative tail: the core's ``cross``, from that frame.
    coord = coordinator(
        {"text": FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8))},
        block_size=4,
        num_blocks=20,
        max_len=40,
        max_in_flight=8,
    )
    text = coord.group("text", Tokens)
    step = coord.stepper(text)
    step.admit("r", Tokens(40))
    step.advance("r", Tokens(3))  # the first step takes a block: the core's paths
    ran: list[str] = []

    def record(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            ran.append(frame.f_code.co_name)

    one = Tokens(1)
    sys.setprofile(record)
    try:
        step.advance("r", one)  # slot 3 of block 0: within
        inside = list(ran)
        step.advance("r", one)  # slot 4: a new block
        step.allocate_speculative("r", one, lookahead=(one,))
        step.advance("r", one)  # accepts the lookahead
    finally:
        sys.setprofile(None)
    assert inside == ["advance"], inside
    assert ran.count("cross") == 2 and "advance_typed" not in ran, ran
    assert coord.seq_len("r", text) == Tokens(8)
    with pytest.raises(RequestError, match="not admitted"):
        step.advance("nobody", Tokens(1))
    # Another call holding the token: refused, nothing changed.
    before = coord.seq_len("r", text)
    me: list[object] = []
    assert coord._core.guard.claim(0, me) is me
    try:
        with pytest.raises(ConcurrentUseError):
            step.advance("r", Tokens(1))
    finally:
        del coord._core.guard.owner[0]
    assert coord.seq_len("r", text) == before
    check_pools(coord)
