"""The lean admission and end (issue 25): `Stepper.admit` and `KVCacheCoordinator.free` of a
plain request take the generated ``admit`` / ``free`` (`kvunits.runtime._fast`), which must
leave exactly what the general path (`CoordinatorCore.admit` / ``free``) leaves, or decline
before changing anything.

So they are compared with the general path call by call, on twin coordinators of random
layouts (1 to 4 groups of every kind, pooled or not, one shared pool or one each, each
admission policy, priorities): the same results, the same errors, and the same internal state
after every call, compared raw (table fields and slabs, offsets in order, spare offsets,
garbage, free queues and their heads, reservations, the policy's dicts); and each of their
commits interrupted anywhere changes nothing.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

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
from kvunits.runtime import AdmissionPolicy, KVCacheCoordinator

from ..examples import every, examples
from .support import check_pools, coordinator, unique_pools
from .test_fast_step import _voxtral_toy
from .test_interrupts import Interrupt
from .test_stateful import drawn_coordinators


def _raw(coord: KVCacheCoordinator) -> tuple[Any, ...]:
    """The internal state an admission or an end changes, raw: what the general path and the
    lean one must leave alike (ids and order included)."""
    core = coord._core
    table, ledger, policy = core.table, core.ledger, coord._policy
    pools = tuple(
        (
            p._fresh,
            p._head,
            p._queue.tolist(),
            len(p._iota),
            p._used,
            p._num_stale,
            sorted(p._shared.items()),
            sorted(p._stale.items()),
            sorted(p._cached.items()),
            sorted(p._cached_free),
        )
        for p in unique_pools(coord)
    )
    return (
        list(table.offsets.items()),
        list(table.hot),
        table.st.tolist(),
        list(table.spare),
        [s.tolist() for s in table.slabs],
        list(table.garbage),
        sorted(core.extras),
        sorted(core.specs.items()),
        pools,
        list(ledger.reserved),
        list(ledger.shared),
        sorted(policy.arrival.items()),
        sorted(policy.priority.items()),
        sorted(policy._waiting_arrival.items()),
        policy._next,
    )


def _outcome(call: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return call(*args, **kwargs)
    except Exception as exc:  # compared with the twin's: class and message
        return type(exc).__name__, str(exc)


def _handles(coord: KVCacheCoordinator) -> list[Any]:
    return [
        coord.group(g.name, EncoderTokens if g.manager.slot_unit is PooledBlocks else Tokens)
        for g in coord.groups
    ]


def _general_free(coord: KVCacheCoordinator, request_id: str) -> None:
    coord._core.free(request_id, coord._policy.freed_ops(request_id))


@settings(max_examples=examples(100), deadline=None)
@given(data=st.data())
def test_lean_admissions_and_ends_do_what_the_general_path_does(data: st.DataObject) -> None:
    kinds = ("full", "sliding", "sliding_pooled", "chunked", "chunked_pooled", "cross", "state")
    policy = AdmissionPolicy(
        kind=data.draw(st.sampled_from(("reserve", "on_demand", "declared")), label="kind"),
        scheduling_policy=data.draw(st.sampled_from(("fcfs", "priority")), label="order"),
        watermark=data.draw(st.sampled_from((0.0, 0.2)), label="watermark"),
    )
    drawn = drawn_coordinators(
        data.draw,
        kinds,
        4,
        st.integers(1, 40),
        st.integers(1, 40),
        lambda cap: st.integers(0, 4 * cap),
        admission=policy,
    )
    count, max_len, max_in_flight = len(drawn.specs), drawn.max_len, drawn.max_in_flight
    lean, plain = drawn.build(), drawn.build()
    lean_step, plain_step = (c.stepper(*_handles(c)) for c in (lean, plain))
    plain_step._lean_admit = None  # the general path only
    for _ in range(data.draw(st.integers(1, 80), label="calls")):
        op = data.draw(st.sampled_from(("admit",) * 3 + ("advance",) * 4 + ("free",) * 2))
        admitted = sorted(lean._core.table.offsets)
        if op != "admit" and admitted and data.draw(st.integers(0, 4), label="admitted"):
            rid = data.draw(st.sampled_from(admitted), label="request")
        else:
            rid = f"r{data.draw(st.integers(0, 5), label='request')}"
        if op == "admit":
            lengths = [
                data.draw(st.integers(0, max_len + 1), label="max_len") for _ in range(count)
            ]
            priority = data.draw(st.sampled_from((0, 0, 0, 1)), label="priority")
            got = [
                _outcome(
                    s.admit,
                    rid,
                    *(h.unit(n) for h, n in zip(s.handles, lengths, strict=True)),
                    priority=priority,
                )
                for s in (lean_step, plain_step)
            ]
        elif op == "advance":
            q = [data.draw(st.integers(0, max_in_flight), label="positions") for _ in range(count)]
            got = [
                _outcome(s.advance, rid, *(h.unit(n) for h, n in zip(s.handles, q, strict=True)))
                for s in (lean_step, plain_step)
            ]
        else:
            got = [_outcome(lean.free, rid), _outcome(_general_free, plain, rid)]
        assert got[0] == got[1], (op, rid)
        assert _raw(lean) == _raw(plain), (op, rid)
    check_pools(lean)


def _prefill(blocks: int = 200) -> tuple[KVCacheCoordinator, Any]:
    # One full-attention group of blocks of 2 tokens, long prompts: admissions and ends of
    # requests that hold many blocks (slabs left due, queues with taken entries to drop).
    coord = coordinator(
        {"text": FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8))},
        block_size=2,
        num_blocks=blocks,
        max_len=4096,
        max_in_flight=4096,
        reserve=False,
    )
    return coord, coord.stepper(coord.group("text", Tokens))


def test_lean_ends_compact_and_empty_as_the_general_path_does() -> None:
    # Requests of many blocks in turn, four at once: ends that leave a slab due (compacted
    # with the end), the last end (everything emptied, ids from 1 again), admissions into
    # spare offsets and into a grown table; each call both ways, every state compared.
    lean, lean_step = _prefill(8000)
    plain, plain_step = _prefill(8000)
    plain_step._lean_admit = None
    taken = {"admit": 0, "free": 0}
    core = lean._core
    fast = core.fast

    def counted(name: str, *args: Any) -> bool:
        done = bool(getattr(fast, name)(*args))
        taken[name] += done
        return done

    core.fast = fast._replace(free=functools.partial(counted, "free"))
    lean_step._lean_admit = functools.partial(counted, "admit")
    for wave in range(4):
        rids = [f"w{wave}r{i}" for i in range(4)]
        for n, rid in enumerate(rids):
            for s in (lean_step, plain_step):
                s.admit(rid, Tokens(4096))
                s.advance(rid, Tokens(2000 + 300 * n))
            assert _raw(lean) == _raw(plain)
        for rid in rids[1:] + rids[:1]:
            lean.free(rid)
            _general_free(plain, rid)
            assert _raw(lean) == _raw(plain), rid
    assert taken == {"admit": 16, "free": 16}
    assert not lean._core.table.hot  # the last end emptied it
    check_pools(lean)


def test_a_lean_admission_or_end_interrupted_anywhere_changes_nothing() -> None:
    # Each lean call (an admission into a grown table and into a spare offset; an end, one
    # that compacts a slab, the last) interrupted at each of its events: nothing changes, and
    # the call then leaves what it leaves on a twin never interrupted.
    coord, step = _prefill(8000)

    def calls() -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        for i in range(3):
            out.append(("admit", f"r{i}"))
            out.append(("advance", f"r{i}"))
        out += [("free", "r1"), ("admit", "r3"), ("advance", "r3"), ("free", "r0")]
        out += [("free", "r2"), ("free", "r3")]
        return out

    def run(c: KVCacheCoordinator, s: Any, kind: str, rid: str) -> None:
        if kind == "admit":
            s.admit(rid, Tokens(4096))
        elif kind == "advance":
            s.advance(rid, Tokens(2500))
        else:
            c.free(rid)

    interrupted = 0
    for kind, rid in calls():
        if kind != "advance":
            before = _raw(coord)
            probe = copy.deepcopy(coord)
            run(probe, probe.stepper(probe.group("text", Tokens)), kind, rid)
            # Interrupted at its 1st, 2nd, ... event (each fifth in quick mode) until it runs to
            # its end (a run may have fewer events than the first: the caps it memoized), which
            # leaves the twin's state.
            at = 1
            while True:
                try:
                    Interrupt(at).run(functools.partial(run, coord, step, kind, rid))
                except KeyboardInterrupt:
                    assert _raw(coord) == before, (kind, rid, at)
                    interrupted += 1
                    at += every()
                    continue
                break
            assert _raw(coord) == _raw(probe), (kind, rid)
        else:
            run(coord, step, kind, rid)
        check_pools(coord)
    assert interrupted > 100 // every()


def test_a_pooled_layout_admits_and_ends_leanly() -> None:
    # Audio (pooled window) and text in pools of their own: both groups' fields, caps and
    # blocks, both ways.
    lean, plain = _voxtral_toy(96), _voxtral_toy(96)
    steps = [
        c.stepper(c.group("audio", EncoderTokens), c.group("text", Tokens)) for c in (lean, plain)
    ]
    steps[1]._lean_admit = None
    for i in range(12):
        rid = f"r{i}"
        for s in steps:
            s.admit(rid, EncoderTokens(30), Tokens(15))
            s.advance(rid, EncoderTokens(8), Tokens(4))
        assert _raw(lean) == _raw(plain)
        if i >= 2:
            gone = f"r{i - 2}"
            lean.free(gone)
            _general_free(plain, gone)
            assert _raw(lean) == _raw(plain), gone
    check_pools(lean)
