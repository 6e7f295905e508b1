"""Engine-step batches against each request in turn, over random layouts and schedules.

A scheduler calls the batch steps (`Stepper.advance_all`, `advance_each`,
`advance_speculative_all`, `advance_speculative_each`, `advance_with_content_all`,
`advance_speculative_all_with_content`) once per engine step for all its running requests;
each is defined as the per-request call of
every request in turn, atomically over the batch. Here, on random layouts (1-4 groups of every
kind, pooled audio counted in its own unit or in pooled blocks, pools of their own or one
shared pool, small enough that steps run short and cached blocks are taken again, reservation
or none) and random schedules (admissions with prompts that share their starts or without
content, prefills, decode steps of every size, drafting steps with rejections and with what
each step produced, prompt chunks beside drafting steps, generating steps with their content,
per-request steps between them, frees
mid-run, requests unknown or given twice), every call through the typed layer is compared with
its general path on a twin: the same outcome (result, or error class and message) and the same
state after it (`test_fast_step._state`: tables, free queues, reference counts, the prefix
caches, reservations); and every batch also with each request in turn on the general path (all
or nothing), as `tests/runtime/test_fast_step.py` defines that reference. A failed call changes
nothing.
"""

from __future__ import annotations

import copy
import re
import sys
from array import array
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from kvunits.contracts import (
    Elements,
    EncoderTokens,
    FullAttentionLayer,
    KVHeads,
    PooledBlocks,
    Tokens,
)
from kvunits.runtime import ContentBatch, ContentKeys, KVCacheCoordinator

from ..examples import examples
from .support import check_pools, coordinator
from .test_fast_step import (
    _outcome,
    _state,
    contents_in_turn,
    general,
    in_turn,
    prefix_parts,
    respec_contents_in_turn,
    respec_then_content,
)
from .test_stateful import drawn_coordinators

KINDS = ("full", "full", "sliding", "sliding_pooled", "chunked", "chunked_pooled", "cross", "state")
CACHEABLE = ("full_attention", "sliding_window", "chunked_local")


def advances_in_turn(coord: KVCacheCoordinator, ids: list[str], q: list[int]) -> Any:
    """What `advance_all` is: each request's step on the general path in turn, all or nothing
    (as `test_fast_step.in_turn`). Returns the coordinator to go on with and the outcome."""
    return each_in_turn(coord, ids, [q] * len(ids))


def each_in_turn(coord: KVCacheCoordinator, ids: list[str], qs: list[list[int]]) -> Any:
    """What `advance_each` is: each request's own step on the general path in turn, all or
    nothing (`advances_in_turn`, each with its own counts)."""
    before = copy.deepcopy(coord)
    try:
        for rid, q in zip(ids, qs, strict=True):
            general(coord._core, "advance", rid, q)
    except Exception as exc:
        return before, (type(exc).__name__, str(exc))
    return coord, None


def _said(outcome: Any) -> str:
    """An outcome for the statistics: ok, or the error's class."""
    return str(outcome[0]) if type(outcome) is tuple else "ok"


def drafts_in_turn(coord: KVCacheCoordinator, steps: list[tuple[str, Any, Any, Any]]) -> Any:
    """What `advance_speculative_all` is: each request's `advance_speculative` (its rollback
    and its step in one call) on the general path in turn, all or nothing. (Its rollback
    then its step as two calls, `test_fast_step.in_turn`, hold the same blocks but for the
    ids of those the one call keeps: the two calls give them back to the queue's front and
    take them again, or an id never handed out while any is left.) Returns the coordinator
    to go on with and the outcome."""
    before = copy.deepcopy(coord)
    try:
        for rid, q, k, r in steps:
            general(coord._core, "respec", rid, q, k, r)
    except Exception as exc:
        return before, (type(exc).__name__, str(exc))
    return coord, None


class Twins:
    """A coordinator driven through the typed layer (``one``) and its twin driven through the
    general path (``two``), compared after every call."""

    def __init__(self, data: st.DataObject, build: Any, max_len: int, max_in_flight: int) -> None:
        self.data, self.one, self.two = data, build(), build()
        self.max_len, self.max_in_flight, self.made = max_len, max_in_flight, 0
        self.latest: Any = None  # the latest call's error (class and message), if any
        groups = self.one.groups
        self.n = len(groups)
        self.pooled = [g.manager.slot_unit is PooledBlocks for g in groups]
        self.p = [g.manager.pool.tokens_per_block for g in groups]
        # Each group's argument unit: a pooled group in encoder tokens or in whole pooled
        # blocks (its counts then multiples of P); the stepper binds the groups in any order.
        self.units = [
            (PooledBlocks if data.draw(st.booleans(), label="in pooled blocks") else EncoderTokens)
            if axis
            else Tokens
            for axis in self.pooled
        ]
        self.scale = [
            p if u is PooledBlocks else 1 for u, p in zip(self.units, self.p, strict=True)
        ]
        self.order = data.draw(st.permutations(range(self.n)), label="stepper order")
        handles = [self.one.group(groups[g].name, self.units[g]) for g in self.order]
        self.stepper: Any = self.one.stepper(*handles)
        # One content pair per sequence (kernel unit): the first cacheable group reading it.
        self.sequences: dict[bool, int] = {}
        for g, group in enumerate(groups):
            if group.manager.kind in CACHEABLE:
                self.sequences.setdefault(self.pooled[g], g)
        self.content_handles = {
            g: self.one.group(groups[g].name, EncoderTokens if axis else Tokens)
            for axis, g in self.sequences.items()
        }

    # -- arguments ------------------------------------------------------------------------

    def typed(self, counts: list[int]) -> tuple[Any, ...]:
        """Per-group kernel counts as the stepper's arguments (its order, its units)."""
        return tuple(self.units[g](counts[g] // self.scale[g]) for g in self.order)

    def counts(self, label: str, most: int = 2) -> list[int]:
        """Per group, the positions of a step (kernel unit; multiples of P where counted in
        pooled blocks): mostly one slot, four (a token and three drafts) or none, else up to
        ``4 * most + 1`` of the argument's unit."""
        out = []
        for g in range(self.n):
            s = self.scale[g]
            one_slot = self.p[g] // s
            units = self.data.draw(
                st.sampled_from((one_slot, one_slot, 4 * one_slot, 0))
                | st.integers(0, most * 4 + 1),
                label=label,
            )
            out.append(units * s)
        return out

    def spec_tail(self, rid: str) -> tuple[int, ...]:
        core = self.one._core
        return tuple(core.specs.get(core.table.offsets.get(rid, -1), (0,) * self.n))

    def rejected(self, rid: str) -> list[int]:
        """A request's rejected drafts: 0 .. its speculative tail, now and then one too many."""
        out = []
        for g, held in enumerate(self.spec_tail(rid)):
            s = self.scale[g]
            units = self.data.draw(
                st.integers(
                    0, held // s + (self.data.draw(st.integers(0, 29), label="too many") == 0)
                ),
                label="rejected",
            )
            out.append(units * s)
        return out

    def drafting(self, rid: str) -> tuple[list[int], list[int], list[int], list[int]]:
        """A drafting step of ``rid``: its positions (drafts included), its drafts, the
        latest step's rejected drafts, and its positions less the drafts (the typed entry's
        counts)."""
        q = self.counts("positions")
        k = [
            self.data.draw(st.integers(0, x // s), label="drafts") * s
            for x, s in zip(q, self.scale, strict=True)
        ]
        return q, k, self.rejected(rid), [x - y for x, y in zip(q, k, strict=True)]

    def content(self, contents: list[tuple[int, list[int]]]) -> list[Any]:
        """Per-group keys as the stepper's content: (handle, keys in the sequence's unit)."""
        units: list[Any] = [EncoderTokens if axis else Tokens for axis in self.pooled]
        return [(self.content_handles[g], ContentKeys(keys, units[g])) for g, keys in contents]

    def keys(self, count: int, label: str) -> list[int]:
        return [self.data.draw(st.integers(0, 2), label=label) for _ in range(count)]

    # -- comparisons ----------------------------------------------------------------------

    def check(self, mine: Any, theirs: Any, before: Any, what: Any) -> None:
        assert mine == theirs, what
        if mine is not None and isinstance(mine, tuple) and mine[0].endswith("Error"):
            assert _state(self.one) == before, ("a failed call changed something", what)
        assert _state(self.one) == _state(self.two), what

    def single(self, kind: str, call: Any, *args: Any) -> None:
        """A per-request call through the stepper, and ``kind``'s general path on the twin."""
        before = _state(self.one)
        mine = _outcome(call)
        theirs = _outcome(general, self.two._core, kind, *args)
        self.check(mine, theirs, before, (kind, args))
        self.latest = mine if type(mine) is tuple else None
        event(f"{kind}: {_said(mine)}")

    def batch(self, kind: str, call: Any, args: tuple[Any, ...], reference: Any) -> Any:
        """A batch through the stepper against its own general path (exactly) and each
        request in turn (``reference(twin)``: the coordinator to go on with and the outcome);
        returns the two outcomes and the in-turn twin for the caller's comparisons."""
        before = _state(self.one)
        ids = args[0]
        if len(set(ids)) < len(ids):  # no request in turn: the batch refuses it
            turn, failed = self.two, ("RequestError", "twice")
        else:
            turn, failed = reference(copy.deepcopy(self.two))
        mine = _outcome(call)
        theirs = _outcome(general, self.two._core, kind, *args)
        self.check(mine, theirs, before, (kind, args))
        self.latest = mine if type(mine) is tuple else None
        event(f"{kind}: {_said(mine)}, {min(len(ids), 3)}+ requests")
        return mine, failed, turn


def _run(data: st.DataObject, steps: int = 30) -> None:
    reserve = data.draw(st.integers(0, 3), label="reserve") == 0
    # From half a request's worth (blocks run out, cached ones are taken) to a few.
    drawn = drawn_coordinators(
        data.draw,
        KINDS,
        4,
        st.integers(8, 96),
        st.integers(2, 12),
        lambda cap: st.integers(cap // 2, 4 * cap),
        reserve=reserve,
    )
    build, max_len, max_in_flight = drawn.build, drawn.max_len, drawn.max_in_flight

    t = Twins(data, build, max_len, max_in_flight)
    for _ in range(data.draw(st.integers(1, steps), label="engine steps")):
        t.latest = None
        _engine_step(t)
        error, said = t.latest or ("", "")
        named = re.search(r"request '(r\d+)'", said)
        victim = None
        if error == "AllocationError" and data.draw(st.booleans(), label="preempt"):
            # Out of blocks: the scheduler preempts its newest request for the others (its
            # blocks freed, registered ones staying cached).
            victim = max(t.one._core.requests, key=lambda r: int(r[1:]))
        elif named and named[1] in t.one._core.requests and data.draw(st.booleans()):
            victim = named[1]  # a request the batch refused (at its max_len, say): it ends
        if victim is not None:
            for c in (t.one, t.two):
                c._core.free(victim)
            assert _state(t.one) == _state(t.two), victim
        check_pools(t.one)


class _Id(str):
    """A request id of a ``str`` subclass (whose hash could run a caller's code)."""


def _engine_step(t: Twins) -> None:
    """One call (or an admission with its prefill, or a free) drawn for ``t``."""
    data, step, core, n = t.data, t.stepper, t.one._core, t.n
    max_len, max_in_flight = t.max_len, t.max_in_flight
    live = sorted(core.requests)
    op = data.draw(
        st.sampled_from(
            ("admit", "admit", "free")
            + ("advance_all",) * 3
            + ("advance_each",) * 3
            + ("respec_all",) * 4
            + ("respec_each",) * 3
            + ("content_all",) * 4
            + ("advance", "allocate", "speculative", "rollback", "respec", "content")
            + ("respec_content",)
            + ("respec_content_all",) * 3
        ),
        label="op",
    )
    if op == "admit" or len(live) < data.draw(st.integers(1, 3), label="running"):
        rid = f"r{t.made}"
        t.made += 1
        prefix = data.draw(st.integers(0, 3), label="with prefix") > 0
        size = data.draw(
            st.integers(1, max_in_flight) | st.integers(1, max_len + 2), label="prompt"
        )
        period = data.draw(st.integers(1, 3), label="period")
        prompt = [i % period for i in range(size)]
        hits = [0] * n
        for c in (t.one, t.two):
            if prefix:
                got = _outcome(c._core.admit_with_prefix, rid, [None] * n, prefix_parts(c, prompt))
            else:
                got = _outcome(c._core.admit, rid)
            hits = got if type(got) is list else hits
        assert _state(t.one) == _state(t.two), rid
        if rid not in core.requests:
            return
        # The prefill: the prompt past its hit, in each group's kernel unit.
        q = [max(size - h, 0) // s * s for h, s in zip(hits, t.scale, strict=True)]
        t.single("advance", lambda: step.advance(rid, *t.typed(q)), rid, q)
        return
    if op == "free":
        rid = data.draw(st.sampled_from(live), label="freed")
        got = [_outcome(c._core.free, rid) for c in (t.one, t.two)]
        assert got[0] == got[1] and _state(t.one) == _state(t.two), rid
        return
    # An engine step's batch: mostly every running request, in any order; now and then
    # a request left out, one unknown, or one twice (errors, nothing changed).
    if op == "content_all" and data.draw(st.integers(0, 5), label="with content"):
        # (a request admitted without content has none to extend: an error)
        live = [r for r in live if core.table.offsets[r] in core.extras] or live
    # (mostly in a stable order, as a scheduler keeps its running list)
    shuffled = data.draw(st.integers(0, 3), label="shuffled") == 0
    ids = [
        r
        for r in (data.draw(st.permutations(live), label="batch") if shuffled else live)
        if data.draw(st.integers(0, 7), label="left out")
    ]
    odd = data.draw(st.integers(0, 29), label="odd batch")
    if odd == 0:
        ids.append("nobody")
    elif odd == 1 and ids:
        ids.append(ids[0])
    elif odd == 2:
        # Not a str, anywhere in the batch: refused, as the general path refuses it.
        ids.insert(data.draw(st.integers(0, len(ids)), label="where"), 7)
    elif odd == 3 and ids:
        ids[-1] = _Id(ids[-1])  # a str subclass: refused, as a request's own call refuses it
    elif odd == 4:
        ids = tuple(ids)  # type: ignore[assignment]  # (a tuple of ids, as a list is)
    rid = data.draw(st.sampled_from(live), label="request")
    # Through the stepper (typed), or now and then the core's plain-int entries.
    plain_entry = data.draw(st.integers(0, 3), label="plain entry") == 0
    if op == "advance_all":
        q = t.counts("positions")
        mine, failed, turn = t.batch(
            op,
            (lambda: core.advance_all(ids, q))
            if plain_entry
            else lambda: step.advance_all(ids, *t.typed(q)),
            (ids, q),
            lambda c: advances_in_turn(c, ids, q),
        )
        assert (mine is None) == (failed is None), (mine, failed)
        assert _state(turn) == _state(t.two), ids
    elif op == "advance_each":
        # Each request's own step: a decode's slot, a prefill chunk (up to max_in_flight),
        # drafts' worth or none, as an engine step's chunks beside its decodes.
        qs = [
            t.counts("positions")
            if data.draw(st.integers(0, 2), label="chunk")
            else [
                data.draw(st.integers(0, max_in_flight // s), label="chunk size") * s
                for s in t.scale
            ]
            for _ in ids
        ]
        mine, failed, turn = t.batch(
            op,
            (lambda: core.advance_each(ids, qs))
            if plain_entry
            else lambda: step.advance_each(ids, [t.typed(q) for q in qs]),
            (ids, qs),
            lambda c: each_in_turn(c, ids, qs),
        )
        assert (mine is None) == (failed is None), (mine, failed)
        assert _state(turn) == _state(t.two), ids
    elif op == "respec_all":
        q = t.counts("positions")
        k = [
            data.draw(st.integers(0, x // s), label="drafts") * s
            for x, s in zip(q, t.scale, strict=True)
        ]
        rejected = [t.rejected(r) if r in core.requests else [0] * n for r in ids]
        plain = [x - y for x, y in zip(q, k, strict=True)]
        mine, failed, turn = t.batch(
            op,
            (lambda: core.advance_speculative_all(ids, q, k, rejected))
            if plain_entry
            else lambda: step.advance_speculative_all(
                ids,
                *t.typed(plain),
                lookahead=t.typed(k),
                rejected=[t.typed(r) for r in rejected],
            ),
            (ids, q, k, rejected),
            lambda c: drafts_in_turn(c, [(r, q, k, j) for r, j in zip(ids, rejected, strict=True)]),
        )
        # The same requests fail or none (a caller's mistake anywhere in the batch is
        # reported before a shortfall).
        assert (mine is None) == (failed is None), (mine, failed)
        assert _state(turn) == _state(t.two), ids
    elif op == "respec_each":
        # Each request's own drafting step, or a prefill chunk (no drafts) beside them: an
        # engine step of a drafting scheduler with chunked prefill, in one call.
        steps: list[tuple[str, list[int], list[int], list[int]]] = []
        for r in ids:
            if r not in core.requests:  # (unknown: the batch refuses it, whatever its counts)
                q, k, back = [0] * n, [0] * n, [0] * n
            elif data.draw(st.integers(0, 2), label="chunk"):
                q, k, back, _ = t.drafting(r)
            else:
                q = [
                    data.draw(st.integers(0, max_in_flight // s), label="chunk size") * s
                    for s in t.scale
                ]
                k, back = [0] * n, t.rejected(r)
            steps.append((r, q, k, back))
        qs, ks, backs = [x[1] for x in steps], [x[2] for x in steps], [x[3] for x in steps]
        looks: dict[tuple[int, ...], tuple[Any, ...]] = {}
        mine, failed, turn = t.batch(
            op,
            (lambda: core.advance_speculative_each(ids, qs, ks, backs))
            if plain_entry
            else lambda: step.advance_speculative_each(
                ids,
                [
                    t.typed([a - b for a, b in zip(q, k, strict=True)])
                    for q, k in zip(qs, ks, strict=True)
                ],
                # (one tuple for the requests of one lookahead, as a scheduler gives it)
                lookahead=[looks.setdefault(tuple(k), t.typed(k)) for k in ks],
                rejected=[t.typed(r) for r in backs],
            ),
            (ids, qs, ks, backs),
            lambda c: drafts_in_turn(c, steps),
        )
        assert (mine is None) == (failed is None), (mine, failed)
        assert _state(turn) == _state(t.two), ids
    elif op == "content_all":
        q = t.counts("positions", most=1)
        contents = []
        for g in t.sequences.values():
            share = (
                q[g]
                if data.draw(st.integers(0, 4), label="content")
                else (data.draw(st.integers(0, 2 * t.p[g] + 1), label="keys"))
            )
            contents.append((g, t.keys(share * len(ids), "key")))
        typed = t.content(contents)
        mine, failed, turn = t.batch(
            op,
            (lambda: core.advance_content_all(ids, q, contents))
            if plain_entry
            else lambda: step.advance_with_content_all(ids, *t.typed(q), content=typed),
            (ids, q, contents),
            lambda c: contents_in_turn(c, ids, q, contents),
        )
        assert (mine is None) == (failed is None or not ids), (mine, failed)
        if ids:
            assert _state(turn) == _state(t.two), ids
    elif op == "respec_content_all":
        # A drafting batch with what each request's latest step produced (any keys, per
        # request and sequence), in one call: against its general path exactly, and each
        # request's `advance_speculative` then `extend_content` in turn (all or nothing).
        q, k, _, plain = t.drafting(rid)
        rejected = [t.rejected(r) if r in core.requests else [0] * n for r in ids]
        outputs = [
            (
                g,
                [
                    t.keys(data.draw(st.integers(0, 2 * t.scale[g] + 1), label="produced"), "key")
                    for _ in ids
                ],
            )
            for g in t.sequences.values()
        ]
        units: list[Any] = [EncoderTokens if axis else Tokens for axis in t.pooled]
        batched = data.draw(st.booleans(), label="one ContentBatch a sequence")
        typed = [
            (
                t.content_handles[g],
                ContentBatch(per, units[g])
                if batched
                else [ContentKeys(keys, units[g]) for keys in per],
            )
            for g, per in outputs
        ]
        arrays = [(g, [array("q", keys) for keys in per]) for g, per in outputs]
        mine, failed, turn = t.batch(
            op,
            (lambda: core.advance_speculative_content_all(ids, q, k, rejected, arrays))
            if plain_entry
            else lambda: step.advance_speculative_all_with_content(
                ids,
                *t.typed(plain),
                lookahead=t.typed(k),
                rejected=[t.typed(r) for r in rejected],
                content=typed,
            ),
            (ids, q, k, rejected, outputs),
            lambda c: respec_contents_in_turn(c, ids, q, k, rejected, outputs),
        )
        assert (mine is None) == (failed is None), (mine, failed)
        assert _state(turn) == _state(t.two), ids
    elif op == "advance":
        q = t.counts("positions")
        t.single(
            op,
            (lambda: core.advance_step(rid, q))
            if plain_entry
            else lambda: step.advance(rid, *t.typed(q)),
            rid,
            q,
        )
    elif op == "allocate":  # a step with its slot mappings
        q = t.counts("positions")

        def mapped() -> Any:
            if plain_entry:
                return core.allocate_step(rid, q)
            out = step.allocate(rid, *t.typed(q))
            return [out[t.order.index(g)] for g in range(n)]  # in group order

        t.single("step", mapped, rid, q)
    elif op == "speculative":
        q = t.counts("positions")
        k = [
            data.draw(st.integers(0, x // s), label="drafts") * s
            for x, s in zip(q, t.scale, strict=True)
        ]
        plain = [x - y for x, y in zip(q, k, strict=True)]

        def drafted() -> Any:
            if plain_entry:
                return core.allocate_speculative(rid, q, k)
            out = step.allocate_speculative(rid, *t.typed(plain), lookahead=t.typed(k))
            return [out[t.order.index(g)] for g in range(n)]  # in group order

        t.single(op, drafted, rid, q, k)
    elif op == "rollback":
        r = t.rejected(rid)
        t.single(
            op,
            (lambda: core.rollback(rid, r))
            if plain_entry
            else lambda: step.rollback(rid, *t.typed(r)),
            rid,
            r,
        )
    elif op == "respec":
        q, k, r, plain = t.drafting(rid)
        t.single(
            op,
            (lambda: core.advance_speculative(rid, q, k, r))
            if plain_entry
            else lambda: step.advance_speculative(
                rid, *t.typed(plain), lookahead=t.typed(k), rejected=t.typed(r)
            ),
            rid,
            q,
            k,
            r,
        )
    elif op == "respec_content":
        # A drafting step with what the latest step produced (any keys, per sequence), in one
        # call: `advance_speculative` on the general path, then `extend_content` per pair, all
        # or nothing (which part fails first may differ: compared is whether the call failed,
        # and the state after it).
        q, k, r, plain = t.drafting(rid)
        contents = [
            (g, t.keys(data.draw(st.integers(0, 2 * t.scale[g] + 1), label="produced"), "key"))
            for g in t.sequences.values()
        ]
        typed = t.content(contents)
        before = _state(t.one)
        mine = _outcome(
            (lambda: core.advance_speculative_content(rid, q, k, r, contents))
            if plain_entry
            else lambda: step.advance_speculative_with_content(
                rid, *t.typed(plain), lookahead=t.typed(k), rejected=t.typed(r), content=typed
            )
        )
        t.two, failed = respec_then_content(t.two, rid, q, k, r, contents)
        assert (mine is None) == (failed is None), (op, rid, mine, failed)
        if mine is not None:
            assert _state(t.one) == before, ("a failed call changed something", op, rid)
        assert _state(t.one) == _state(t.two), (op, rid, q, k, r, contents)
        event(f"{op}: {_said(mine)}")
    else:  # content: the step and its content (one pair per sequence)
        q = t.counts("positions", most=1)
        contents = [(g, t.keys(q[g], "key")) for g in t.sequences.values()]
        typed = t.content(contents)
        before = _state(t.one)
        mine = _outcome(
            (lambda: core.advance_content(rid, q, contents))
            if plain_entry
            else lambda: step.advance_with_content(rid, *t.typed(q), content=typed)
        )
        theirs = _outcome(general, t.two._core, "content", rid, q, contents)
        t.check(mine, theirs, before, (op, rid, q, contents))


@settings(max_examples=examples(200), deadline=None)
@given(data=st.data())
def test_engine_step_batches_do_what_each_request_in_turn_does(data: st.DataObject) -> None:
    _run(data)


# Slow (300 layouts, schedules of up to 80 engine steps: about a minute): CI's py3.13 job, in
# full (the allocator alone: no torch).
@pytest.mark.slow
@pytest.mark.torchless
@settings(max_examples=examples(300), deadline=None)
@given(data=st.data())
def test_longer_schedules_of_engine_step_batches_do_what_each_request_in_turn_does(
    data: st.DataObject,
) -> None:
    _run(data, steps=80)


def test_a_drafting_batch_and_rollback_then_step_keep_the_block_and_evict_nothing() -> None:
    # A fused rollback and step keeps the block the step takes again (vLLM keeps
    # ``req_to_blocks``); two calls give it back to the queue's *front*
    # (`PoolPlan.release_front`) and the step takes it again, so both hold the same blocks
    # and evict nothing. (With the block given back to the queue's back, the step took the
    # queue's head, here a cached block, evicted from the prefix cache.) Blocks of 2 tokens,
    # 3 in the pool: "a" caches all three and ends; "b" drafts 3 of 4 tokens (blocks 3 and 2,
    # evicted from the cache), then 3 rejected and 2 tokens more.
    def build() -> KVCacheCoordinator:
        c = coordinator(
            {"t": FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8))},
            block_size=2,
            num_blocks=4,
            max_len=6,
            max_in_flight=6,
            reserve=False,
        )
        c._core.admit_with_prefix("a", [None], prefix_parts(c, list(range(6))))
        c._core.advance_step("a", [6])
        c.free("a")
        c._core.admit("b")
        c._core.allocate_speculative("b", [4], [3])
        return c

    one, two = build(), build()
    pool = one._core.pools[0]
    assert one.block_table("b", one.group("t", Tokens)) == [3, 2] and set(pool._cached) == {1}
    step: Any = one.stepper(one.group("t", Tokens))
    step.advance_speculative_all(["b"], Tokens(2), lookahead=(Tokens(0),), rejected=[(Tokens(3),)])
    assert one.block_table("b", one.group("t", Tokens)) == [3, 2] and set(pool._cached) == {1}
    twin, failed = drafts_in_turn(copy.deepcopy(two), [("b", [2], [0], [3])])
    assert failed is None and _state(twin) == _state(one)
    two, failed = in_turn(two, [("b", [2], [0], [3])])
    assert failed is None and two.block_table("b", two.group("t", Tokens)) == [3, 2]
    assert set(two._core.pools[0]._cached) == {1}  # block 2 taken again: block 1 stays cached


def _eight_blocks() -> KVCacheCoordinator:
    """One full-attention group in blocks of 4 tokens, 8 blocks, nothing reserved."""
    return coordinator(
        {"t": FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8))},
        block_size=4, num_blocks=9, max_len=32, max_in_flight=32, reserve=False,
    )


@pytest.mark.parametrize("path", ["typed", "core", "general"])
def test_a_block_one_request_gives_back_is_the_next_requests_in_the_same_batch(path: str) -> None:
    # The batch is each request's drafting step in turn: "a" rolls back 5 drafts past its
    # step's end, giving back block 2 (positions 4-7) to the queue's front; "b", later in the
    # batch, crosses into a new block and takes it, as it would in a call after "a"'s. Every
    # id was handed out (a request of 8 blocks ended first): the front is the first take.
    # On the generated batch, "a"'s rollback is the boundary plan's (`_plan_unroll`) and
    # "b" then takes that plan's path too, whose take reaches the block given back.
    def build() -> KVCacheCoordinator:
        c = _eight_blocks()
        core = c._core
        for rid in ("a", "b", "x"):
            core.admit(rid)
        core.advance_step("x", [32])
        c.free("x")  # not the last request: its ids stay handed out
        core.advance_step("a", [2])
        core.allocate_speculative("a", [6], [5])  # positions 2-7: blocks 1 and 2
        core.advance_step("b", [4])  # one full block
        core.allocate_speculative("b", [0], [0])
        return c

    one, ref = build(), build()
    pool = one._core.pools[0]
    h = one.group("t", Tokens)
    a_blocks, b_blocks = list(one.block_table("a", h)), list(one.block_table("b", h))
    assert len(a_blocks) == 2 and len(b_blocks) == 1 and pool._fresh == pool.num_blocks
    ids, q, k, r = ["a", "b"], [1], [0], [[5], [0]]
    if path == "typed":
        one.stepper(h).advance_speculative_all(
            ids, Tokens(1), lookahead=(Tokens(0),), rejected=[(Tokens(5),), (Tokens(0),)]
        )
    elif path == "core":
        one._core.fast.respec_all(ids, q, k, r)
    else:
        general(one._core, "respec_all", ids, q, k, r)
    ref, failed = drafts_in_turn(ref, [("a", q, k, r[0]), ("b", q, k, r[1])])
    assert failed is None and _state(one) == _state(ref)
    assert list(one.block_table("a", h)) == a_blocks[:1]
    assert list(one.block_table("b", h)) == [*b_blocks, a_blocks[1]]
    check_pools(one)


@pytest.mark.parametrize("path", ["generated", "general"])
def test_a_block_given_back_is_taken_by_a_later_request_with_content(path: str) -> None:
    # As above, with content: "a" (its two-token prompt at rest) rolls back 5 drafts past its
    # step's end on the boundary plan (`_plan_unroll`), giving back block 2; "b" (content
    # active, two keys past its 8-token prompt, one more given) crosses into a new block on
    # the generated `plan_cross`, whose take reaches the block given back.
    def build() -> KVCacheCoordinator:
        c = _eight_blocks()
        core = c._core
        core.admit_with_prefix("a", [None], prefix_parts(c, [1, 2]))
        core.admit_with_prefix("b", [None], prefix_parts(c, list(range(10, 18))))
        core.admit("x")
        core.advance_step("x", [32])
        c.free("x")  # not the last request: every id stays handed out
        core.advance_step("a", [2])
        core.allocate_speculative("a", [6], [5])
        core.advance_step("b", [8])
        c.extend_content("b", c.group("t", Tokens), ContentKeys([20, 21], Tokens))
        core.allocate_speculative("b", [0], [0])
        return c

    one, ref = build(), build()
    h = one.group("t", Tokens)
    a_blocks, b_blocks = list(one.block_table("a", h)), list(one.block_table("b", h))
    ids, q, k, r = ["a", "b"], [1], [0], [[5], [0]]
    contents = [(0, [array("q", [3]), array("q", [23])])]
    ran: list[str] = []

    def record(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            ran.append(frame.f_code.co_name)

    if path == "generated":
        sys.setprofile(record)
        try:
            one._core.fast.respec_content_all(ids, q, k, r, contents)
        finally:
            sys.setprofile(None)
        assert "plan_cross" in ran and "_general_respec_content_all" not in ran, ran
    else:
        general(one._core, "respec_content_all", ids, q, k, r, contents)
    ref, failed = respec_contents_in_turn(ref, ids, q, k, r, contents)
    assert failed is None and _state(one) == _state(ref)
    assert list(one.block_table("a", h)) == a_blocks[:1]
    assert list(one.block_table("b", h)) == [*b_blocks, a_blocks[1]]
    check_pools(one)


@pytest.mark.parametrize("drafting", [False, True])
def test_a_resting_request_wakes_on_the_generated_batch(drafting: bool) -> None:
    # "a" computed its 6-token prompt (one full block, registered: its content rests, one
    # object); "b" took a generated token after its 5-token prompt (its content active). The
    # batch's step with what each produced wakes "a" in the generated function, as the
    # per-request call wakes it, and stores its active form at the commit. Before, a resting
    # request sent a drafting batch's request to the core's boundary path (each request's
    # first such step: a short request's every step, nearly) and a generating batch whole to
    # the general path; both were slower than one call per request.
    def build() -> KVCacheCoordinator:
        c = _eight_blocks()
        core = c._core
        core.admit_with_prefix("a", [None], prefix_parts(c, [1, 2, 3, 4, 5, 6]))
        core.admit_with_prefix("b", [None], prefix_parts(c, [10, 11, 12, 13, 14]))
        core.advance_step("a", [6])
        core.advance_step("b", [5])
        c.extend_content("b", c.group("t", Tokens), ContentKeys([20], Tokens))
        return c

    one, ref = build(), build()
    core = one._core
    forms = [type(core.extras[core.offset(rid)]).__name__ for rid in ("a", "b")]
    assert forms == ["PrefixPart", "RequestExtras"]  # a at rest: its own part
    ids, q, k, r = ["a", "b"], [2 if drafting else 1], [1 if drafting else 0], [[0], [0]]
    ran: list[str] = []

    def record(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            ran.append(frame.f_code.co_name)

    sys.setprofile(record)
    try:
        if drafting:
            core.fast.respec_content_all(ids, q, k, r, [(0, [array("q", [7]), array("q", [21])])])
        else:
            core.fast.content_all(ids, q, [(0, [7, 21])])
    finally:
        sys.setprofile(None)
    assert not {"_respec_content_planned", "_general_content_all"} & set(ran), ran
    if drafting:
        ref, failed = respec_contents_in_turn(
            ref, ids, q, k, r, [(0, [array("q", [7]), array("q", [21])])]
        )
    else:
        ref, failed = contents_in_turn(ref, ids, q, [(0, [7, 21])])
    assert failed is None and _state(one) == _state(ref)
    assert type(core.extras[core.offset("a")]).__name__ == "RequestExtras"
    check_pools(one)
