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
import random
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvunits.contracts import (
    Chunk,
    ChunkedLocalLayer,
    Elements,
    EncoderTokens,
    FullAttentionLayer,
    KVHeads,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    Tokens,
    Window,
)
from kvunits.contracts.internal import magnitude
from kvunits.runtime import AdmissionPolicy, ContentKeys, KVCacheCoordinator
from kvunits.runtime._core import CoordinatorCore
from kvunits.runtime._table import SKIPPED

from ..examples import every, examples
from .support import check_pools, coordinator, snapshot, unique_pools
from .test_fast_step import _generating, _sequences, _voxtral_toy, prefix_parts
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
            p.cached_free_blocks(),
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


def _exact(coord: KVCacheCoordinator) -> tuple[Any, ...]:
    """What an admission with content changes, exactly: `_raw` and `snapshot`, and in their
    order the pools' shared and stale counts and cache entries, the cache maps, and each
    request's extras as stored (active or resting, its streams)."""
    core = coord._core
    pools = tuple(
        (list(p._shared.items()), list(p._stale.items()), list(p._cached.items()))
        for p in unique_pools(coord)
    )
    maps = tuple(None if c is None else list(c.blocks.items()) for c in core.caches)
    extras: list[tuple[Any, ...]] = []
    for o, x in core.extras.items():
        if isinstance(x, tuple):
            extras.append((o, "resting", tuple(x)))
        else:
            streams = tuple(
                (s.axis, s.rows_per_block, tuple(s.hashes), s.tail.tolist(), s.parent)
                for s in x.streams
            )
            extras.append((o, "active", streams, x.stream_of, list(x.registered)))
    return _raw(coord), snapshot(coord), pools, maps, extras


def _general_only(core: CoordinatorCore) -> None:
    """``core`` without its generated admission with a prefix (its `_lean_prefix` is patched
    off where a test wants the general plan alone)."""
    core.fast = core.fast._replace(admit_prefix=None)


def _admitted_alike(
    one: KVCacheCoordinator,
    rid: str,
    lengths: list[Any],
    parts: dict[int, Any],
    seen: dict[str, int],
    interrupt: bool = False,
    path: str = "generated",
) -> Any:
    """``admit_with_prefix`` on ``one`` by its lean ``path`` where it takes it (``generated``:
    the layout's ``fast.admit_prefix``; ``planned``: `_lean_prefix`, the generated one off)
    compared, outcome and exact state (`_exact`), with the general path on a twin. With
    ``interrupt``, first interrupted at each of its events, each leaving ``one`` as it was."""
    core = one._core
    twin = copy.deepcopy(one)
    _general_only(twin._core)
    fast, took = core.fast, []

    def recorded(lean: Any) -> Any:
        def call(*args: Any) -> Any:
            got = lean(*args)
            took.append(got is not None)
            return got

        return call

    if path == "generated":
        assert fast.admit_prefix is not None
        core.fast = fast._replace(admit_prefix=recorded(fast.admit_prefix))
        planned = CoordinatorCore._lean_prefix
    else:
        core.fast = fast._replace(admit_prefix=None)
        planned = recorded(CoordinatorCore._lean_prefix)
    free_before = {b for p in unique_pools(one) for b in p.cached_free_blocks()}
    call = functools.partial(_outcome, core.admit_with_prefix, rid, lengths, parts)
    before, at = _exact(one), 1
    try:
        with mock.patch.object(CoordinatorCore, "_lean_prefix", planned):
            while interrupt:
                try:
                    mine = Interrupt(at).run(call)
                except KeyboardInterrupt:
                    assert _exact(one) == before, (rid, at)
                    at += every()
                    continue
                break
            else:
                mine = call()
    finally:
        core.fast = fast
    with mock.patch.object(CoordinatorCore, "_lean_prefix", lambda *args: None):
        theirs = _outcome(twin._core.admit_with_prefix, rid, lengths, parts)
    assert mine == theirs, rid
    assert _exact(one) == _exact(twin), rid
    seen["admitted"] += 1
    if took and took[-1]:  # (the call that ran to its end)
        seen["lean_admitted"] += 1
        o = core.table.offsets[rid]
        held = {b for g in range(len(core.names)) for b in core.table.live(o, g)}
        seen["hit"] += isinstance(mine, list) and any(mine)
        seen["taken_back"] += bool(held & free_before)
        seen["skipped"] += any(core.table.field(o, g, SKIPPED) for g in range(len(core.names)))
    return mine


def _free_interrupted(one: KVCacheCoordinator, rid: str) -> None:
    """End ``rid`` on ``one``, first interrupted at each of its events (each leaving
    everything as it was), then to its end: the state an uninterrupted end leaves."""
    before = _raw(one)
    probe = copy.deepcopy(one)
    probe.free(rid)
    at = 1
    while True:
        try:
            Interrupt(at).run(functools.partial(one.free, rid))
        except KeyboardInterrupt:
            assert _raw(one) == before, (rid, at)
            at += every()
            continue
        break
    assert _raw(one) == _raw(probe), rid


def _ends_compared(
    layout: str, seed: int, interrupt: bool, path: str = "generated", drain: float = 0.0
) -> dict[str, int]:
    """Requests of a few prompts sharing their first blocks (prefix hits), each appending the
    tokens it samples as content (blocks registered, then cached once freed), some drafting
    (a speculative tail left), ending at random moments while the pools cycle through the
    cache; each admission (`_admitted_alike`) and each end by the generated ``free``
    compared with the general path on a twin: the same outcome and raw state (ids and
    orders). With ``interrupt``, each admission and each end is first interrupted at each of
    its events, each leaving everything as it was. Returns how many ends the lean path took,
    and of them how many found a shared block, a cached one, content, a speculative tail;
    and how many admissions it took, with a hit, with a block taken back from the queue,
    with evicted entries leading a table. ``drain``: the chance, at each call, that every
    running request ends (the last one's end empties the table, its pools keeping what they
    cache)."""
    one = _generating(layout)
    core = one._core
    units, handles, scale, pairs = _sequences(one)
    stepper = one.stepper(*handles)
    rng = random.Random(seed)
    prompts = [[1, 2, 3, 4, 5], [1, 2, 3, 4, 6, 7, 8, 9], [2, 2, 2]]
    fast = core.fast
    lean = [False]

    def counted(*args: Any) -> bool:
        lean[0] = bool(fast.free(*args))
        return lean[0]

    core.fast = fast._replace(free=counted)
    seen = dict.fromkeys(("lean", "shared", "cached", "content", "drafted", "last", "ends"), 0)
    seen.update(admitted=0, lean_admitted=0, hit=0, taken_back=0, skipped=0)
    running: dict[str, int] = {}
    drafts: dict[str, int] = {}

    def end(rid: str) -> None:
        o = core.table.offsets[rid]
        live = {b for g in range(len(handles)) for b in core.table.live(o, g)}
        pools = unique_pools(one)
        found = {
            "shared": any(p._shared.keys() & live for p in pools),
            "cached": any(p._cached.keys() & live for p in pools),
            "content": o in core.extras,
            "drafted": any(core.specs.get(o, ())),
            # The last request, its pools keeping cached blocks: the table emptied, the
            # pools not (`PoolPlan.emit`).
            "last": len(core.table.offsets) == 1 and any(p._cached for p in pools),
        }
        twin = copy.deepcopy(one)
        if interrupt:
            _free_interrupted(one, rid)
            mine = None
        else:
            mine = _outcome(one.free, rid)
        assert mine == _outcome(_general_free, twin, rid), rid
        assert _raw(one) == _raw(twin), rid
        seen["ends"] += 1
        if lean[0]:
            seen["lean"] += 1
            for name, hit in found.items():
                seen[name] += hit
        del running[rid]
        drafts.pop(rid, None)

    for i in range(240):
        if running and rng.random() < drain:
            for rid in sorted(running):
                end(rid)
            continue
        if len(running) < 4 and (not running or rng.random() < 0.6):
            rid = f"r{i}"
            prompt = rng.choice(prompts)
            parts = {}
            for h, unit in zip(handles, units.values(), strict=True):
                content = [k for k in prompt for _ in range(2)] if unit is EncoderTokens else prompt
                parts[h.index] = h.block_hashes(ContentKeys(content, unit)).part()
            hits = _admitted_alike(
                one, rid, [None] * len(handles), parts, seen, interrupt, path
            )
            if not isinstance(hits, list):
                continue  # refused for now (its caps): nothing changed
            running[rid] = len(prompt)
            left = [len(prompt) * s - hit for s, hit in zip(scale, hits, strict=True)]
            while any(left):  # its prompt in chunks within max_in_flight (4 positions)
                counts = [min(n, 2 * s) for n, s in zip(left, scale, strict=True)]
                if isinstance(_outcome(core.advance_step, rid, counts), tuple):
                    end(rid)  # the pool runs short: it ends before its prompt
                    break
                left = [n - q for n, q in zip(left, counts, strict=True)]
            continue
        rid = rng.choice(sorted(running))
        if running[rid] >= 18 or rng.random() < 0.05:
            end(rid)
            continue
        if rid in drafts:  # its drafts rejected first
            k = drafts.pop(rid)
            stepper.rollback(rid, *(h.unit(k * s) for h, s in zip(handles, scale, strict=True)))
        look = rng.choice((0, 0, 1, 2))
        ones = [h.unit(s) for h, s in zip(handles, scale, strict=True)]
        if look:
            got = _outcome(
                stepper.advance_speculative,
                rid,
                *ones,
                lookahead=tuple(h.unit(look * s) for h, s in zip(handles, scale, strict=True)),
                rejected=tuple(h.unit(0) for h in handles),
            )
        else:
            got = _outcome(stepper.advance, rid, *ones)
        if isinstance(got, tuple) and isinstance(got[0], str):
            end(rid)  # the pool runs short
            continue
        if look:
            drafts[rid] = look
        running[rid] += 1
        token = rng.randrange(3)
        for unit, g in pairs.items():
            keys = [token] * 2 if unit is EncoderTokens else [token]
            one.extend_content(rid, handles[g], ContentKeys(keys, unit))
    for rid in sorted(running):
        end(rid)
    check_pools(one)
    return seen


@pytest.mark.parametrize("layout", ["text", "audio+text", "text+sliding+audio"])
def test_lean_ends_of_requests_that_cached_shared_or_drafted_do_what_the_general_path_does(
    layout: str,
) -> None:
    # vLLM's default (prefix caching on) and drafting: the generated ``free`` ends such
    # requests (`BlockPool.ended`: shared blocks one reference less, cached ones free with
    # their content, tail first; content and speculative tail forgotten) as the general path
    # does, and takes nearly every end (the last request's too, its pools keeping cached
    # blocks: the table emptied, a pool that caches nothing as built).
    seen = _ends_compared(layout, 5, interrupt=False, drain=0.05)
    assert seen["lean"] >= seen["ends"] * 3 // 4, seen
    for name in ("shared", "cached", "content", "drafted"):
        assert seen[name] > 0, seen
    assert seen["last"] >= 5, seen  # (the batch ended together now and then)


@pytest.mark.parametrize("path", ["generated", "planned"])
def test_a_lean_end_that_caches_shares_or_drafted_interrupted_anywhere_changes_nothing(
    path: str,
) -> None:
    # The same, each lean admission (generated, or `_lean_prefix`) and end also interrupted
    # at each of its events.
    seen = _ends_compared("audio+text", 6, interrupt=True, path=path)
    assert seen["lean"] > 10 and seen["shared"] and seen["cached"] and seen["last"], seen
    assert seen["lean_admitted"] > 10 and seen["hit"] and seen["taken_back"], seen


@pytest.mark.parametrize("waves", [1, 3])
def test_the_last_end_beside_a_pool_that_caches_nothing_is_the_general_paths(waves: int) -> None:
    # Audio and text with a pool each, the prompt's content given for the text only: the end
    # of the last request leaves the text's pool keeping its cached blocks (the queue as
    # `PoolPlan.emit` leaves it) and the audio's, which caches nothing, as built
    # (`PoolPlan._emit_built`). The generated ``free`` takes it, as the general path does it
    # (its ids and orders), and an interrupt at any of its events changes nothing.
    one = _generating("audio+text")
    core = one._core
    _, handles, _, _ = _sequences(one)
    stepper: Any = one.stepper(*handles)  # (as many groups as the layout has)
    a = next(h for h in handles if h.unit is EncoderTokens)
    t = next(h for h in handles if h.unit is Tokens)
    audio_pool, text_pool = core.pools[a.index], core.pools[t.index]
    fast = core.fast
    lean: list[bool] = []

    def counted(*args: Any) -> bool:
        lean.append(bool(fast.free(*args)))
        return lean[-1]

    core.fast = fast._replace(free=counted)
    for wave in range(waves):
        rids = [f"w{wave}r{i}" for i in range(2)]
        for k, rid in enumerate(rids):
            prompt = [1, 2, 3, 4, 5, 6, 7, 8, wave, k]  # two text blocks of 4 cached
            hashes = t.block_hashes(ContentKeys(prompt, Tokens))
            prefix = tuple(hashes if h is t else None for h in handles)
            hits = stepper.admit_with_prefix(
                rid, *(a.unit(20) if h is a else t.unit(10) for h in handles), prefix=prefix
            )
            left = 10 - max(magnitude(n) for n in hits)  # the text's hit (the audio has none)
            for _ in range(0, left, 2):  # the prompt in chunks of 2 tokens
                stepper.advance(rid, *(a.unit(4) if h is a else t.unit(2) for h in handles))
        assert text_pool._cached and not audio_pool._cached
        for rid in rids:
            twin = copy.deepcopy(one)
            _free_interrupted(one, rid)
            assert lean[-1], rid  # the generated end, the last one's too
            _general_free(twin, rid)
            assert _raw(one) == _raw(twin), rid
        # Every request ended: the audio's pool as built, the text's keeping its cache.
        assert (audio_pool._fresh, len(audio_pool._queue), audio_pool._used) == (1, 0, 0)
        assert text_pool._cached and text_pool._used == 0 and not core.table.offsets
    check_pools(one)


@pytest.mark.parametrize("path", ["generated", "planned"])
@pytest.mark.parametrize("ended", [False, True])
def test_a_lean_admission_whose_window_hit_leads_with_evicted_entries_is_the_general_paths(
    ended: bool, path: str
) -> None:
    # A sliding window of 4 tokens in blocks of 2 beside full attention: a prompt of 13 tokens
    # like one computed (running, or ended: its blocks free but cached) hits 12 tokens, the
    # window's table leading with the null entries it evicted (SKIPPED, no segment entries).
    # The lean admission touches only the window's live blocks (another table's one more,
    # or taken back out of the queue) and places them as the general path does; then a
    # request the pool cannot take now (refused alike), one with no content for a group (the
    # general path's), and one given its content in another order, each compared with the
    # general path.
    one = coordinator(
        {
            "text": FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8)),
            "window": SlidingWindowLayer(
                sliding_window=Window(4, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
            ),
        },
        block_size=2,
        num_blocks={"text": 20, "window": 11},
        max_len=16,
        max_in_flight=4,
    )
    handles = [one.group("text", Tokens), one.group("window", Tokens)]
    prompt = list(range(1, 14))
    parts = {h.index: h.block_hashes(ContentKeys(prompt, Tokens)).part() for h in handles}
    core = one._core
    seen = dict.fromkeys(("admitted", "lean_admitted", "hit", "taken_back", "skipped"), 0)
    assert _admitted_alike(one, "a", [None, None], parts, seen, path=path) == [0, 0]
    for chunk in (4, 4, 4, 1):
        core.advance_step("a", [chunk, chunk])
    if ended:
        one.free("a")
    assert _admitted_alike(one, "b", [None, None], parts, seen, path=path) == [12, 12]
    assert seen["lean_admitted"] == 2 and seen["skipped"] == 1, seen
    assert seen["taken_back"] >= ended, seen  # (running, its window evicted some of them)
    # With "a" running, caps the window's pool cannot reserve now (AllocationError; its
    # blocks are not kept, so not reserved once); then content for one group only.
    got = _admitted_alike(one, "c", [None, None], parts, seen, path=path)
    assert isinstance(got, list) if ended else got[0] == "AllocationError", got
    one.free("b")
    only_text = {0: parts[0], 1: None}
    assert _admitted_alike(one, "d", [None, None], only_text, seen, path=path) == [0, 0]
    assert seen["lean_admitted"] == 2 + ended, seen
    # Content given in another order than the groups' (a stepper bound window first): the
    # same admission, the extras' streams in group order on both paths.
    one.free("d")
    reordered = {1: parts[1], 0: parts[0]}
    assert _admitted_alike(one, "e", [None, None], reordered, seen, path=path) == [12, 12]
    assert seen["lean_admitted"] == 3 + ended, seen
    check_pools(one)


@pytest.mark.parametrize("path", ["generated", "planned"])
@pytest.mark.parametrize("audio", [False, True])
def test_a_lean_admission_whose_chunked_hit_is_evicted_entries_only_is_the_general_paths(
    audio: bool, path: str
) -> None:
    # Chunked local attention (chunks of 4 tokens in blocks of 2) the only group reading its
    # sequence (alone, or beside the pooled audio window, another sequence), prefix caching
    # on: a prompt of 13 tokens hits the 12 positions before its current chunk with no block
    # at all, whatever the cache holds (vLLM's ChunkedLocalAttentionManager.
    # find_longest_cache_hit: null blocks up to the current chunk's start). Its table leads
    # with 6 evicted entries and has no segment. The lean admission takes it (before, every
    # such admission of a prompt longer than a chunk took the general path: `--paths` on a
    # lone chunked group of unique 512-token prompts, 581 of 6,000 stream-steps), placed as
    # the general path places it; then a second request while the first runs, and a third
    # after it ended, each compared with the general path; the first's steps and end between.
    layers: dict[str, Any] = {
        "chunked": ChunkedLocalLayer(
            chunk=Chunk(4, Tokens), kv_heads=KVHeads(1), head_size=Elements(8)
        )
    }
    if audio:  # its encoder tokens pooled 2 to a slot, keyed per encoder token
        layers["audio"] = SlidingWindowLayer(
            sliding_window=Window(8, EncoderTokens),
            pool=PoolFactor(2),
            kv_heads=KVHeads(1),
            head_size=Elements(8),
        )
    one = coordinator(layers, block_size=2, num_blocks=24, max_len=32, max_in_flight=4)
    handles: list[Any] = [one.group("chunked", Tokens)]
    prompt = list(range(1, 14))
    parts = {handles[0].index: handles[0].block_hashes(ContentKeys(prompt, Tokens)).part()}
    if audio:
        handles.append(one.group("audio", EncoderTokens))
        frames = ContentKeys([k for k in prompt for _ in range(2)], EncoderTokens)
        parts[handles[1].index] = handles[1].block_hashes(frames).part()
    lengths = [None] * len(handles)
    core = one._core
    seen = dict.fromkeys(("admitted", "lean_admitted", "hit", "taken_back", "skipped"), 0)
    got = _admitted_alike(one, "a", lengths, parts, seen, path=path)
    assert got[0] == 12 and seen["lean_admitted"] == 1 and seen["skipped"] == 1, (got, seen)
    o = core.table.offsets["a"]
    assert core.table.field(o, 0, SKIPPED) == 6 and not core.table.live(o, 0)
    core.advance_step("a", [1] * len(handles))  # the current chunk's last position
    assert _admitted_alike(one, "b", lengths, parts, seen, path=path)[0] == 12
    _free_interrupted(one, "a")
    assert _admitted_alike(one, "c", lengths, parts, seen, path=path)[0] == 12
    assert seen["lean_admitted"] == 3, seen
    check_pools(one)


def _cacheable_layout(data: st.DataObject, policy: AdmissionPolicy) -> Any:
    """A drawn layout of one to three groups of every cacheable kind (full, sliding, chunked,
    pooled or not, one pool or one each) under ``policy``, pools of 0 to 4 caps."""
    kinds = ("full", "sliding", "sliding_pooled", "chunked", "chunked_pooled")
    return drawn_coordinators(
        data.draw,
        kinds,
        3,
        st.integers(1, 24),
        st.integers(1, 24),
        lambda cap: st.integers(0, 4 * cap),
        admission=policy,
    )


@settings(max_examples=examples(60), deadline=None)
@given(data=st.data())
def test_lean_admissions_with_a_prefix_do_what_the_general_path_does(data: st.DataObject) -> None:
    # Random layouts of every cacheable kind (full, sliding, chunked, pooled or not, one pool
    # or one each), each admission policy: requests admitted with one of a few prompts that
    # share their first keys (prefix hits on blocks held, or free and cached), stepped and
    # ended at random. Each admission with content by the lean plan where it takes it,
    # compared (outcome, exact state) with the general plan on the twin; steps and ends
    # alike on both.
    policy = AdmissionPolicy(
        kind=data.draw(st.sampled_from(("reserve", "on_demand")), label="kind"),
        watermark=data.draw(st.sampled_from((0.0, 0.2)), label="watermark"),
    )
    drawn = _cacheable_layout(data, policy)
    count, max_in_flight = len(drawn.specs), drawn.max_in_flight
    lean, plain = drawn.build(), drawn.build()
    # The lean side's generated admission, or `_lean_prefix` alone; the plain side's neither.
    if data.draw(st.booleans(), label="planned"):
        _general_only(lean._core)
    _general_only(plain._core)
    steps = [c.stepper(*_handles(c)) for c in (lean, plain)]
    base = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=40), label="prompt")
    for i in range(data.draw(st.integers(1, 40), label="calls")):
        op = data.draw(st.sampled_from(("admit",) * 3 + ("advance",) * 4 + ("free",)))
        admitted = sorted(lean._core.table.offsets)
        if op != "admit" and admitted:
            rid = data.draw(st.sampled_from(admitted), label="request")
        elif op != "admit":
            continue
        if op == "admit":
            rid = f"r{i}"
            content = base[: data.draw(st.integers(1, len(base)), label="content")]
            parts = prefix_parts(lean, content)
            mine = _outcome(lean._core.admit_with_prefix, rid, [None] * count, parts)
            with mock.patch.object(CoordinatorCore, "_lean_prefix", lambda *args: None):
                theirs = _outcome(plain._core.admit_with_prefix, rid, [None] * count, parts)
            assert mine == theirs, rid
        elif op == "advance":
            q = [data.draw(st.integers(0, max_in_flight), label="positions") for _ in range(count)]
            got = [
                _outcome(s.advance, rid, *(h.unit(n) for h, n in zip(s.handles, q, strict=True)))
                for s in steps
            ]
            assert got[0] == got[1], (op, rid)
        else:
            assert _outcome(lean.free, rid) == _outcome(_general_free, plain, rid)
        assert _exact(lean) == _exact(plain), (op, rid)
    check_pools(lean)


@settings(max_examples=examples(60), deadline=None)
@given(data=st.data())
def test_a_steppers_admission_with_a_prefix_is_the_general_paths(data: st.DataObject) -> None:
    # `Stepper.admit_with_prefix` takes its typed entry's written-out checks and the core's
    # generated admission (`_admit_prefix_lines`, `_fast._admit_prefix`) where both take it:
    # random layouts of every cacheable kind (pooled audio bound in encoder tokens, groups
    # bound in a drawn order), each policy; requests admitted with prompts that share their
    # first keys (hits on held blocks and on free cached ones), advanced and ended at random;
    # now and then an admission the checks refuse (hashes made for another handle, lengths
    # in another unit, content longer than the request, a priority). Each is
    # compared (typed outcome or error, exact state) with a twin on the general path alone.
    policy = AdmissionPolicy(
        kind=data.draw(st.sampled_from(("reserve", "on_demand")), label="kind"),
        scheduling_policy=data.draw(st.sampled_from(("fcfs", "priority")), label="scheduling"),
    )
    drawn = _cacheable_layout(data, policy)
    lean, plain = drawn.build(), drawn.build()
    _general_only(plain._core)
    order = data.draw(st.permutations(range(len(drawn.specs))), label="order")
    steppers = [c.stepper(*(_handles(c)[i] for i in order)) for c in (lean, plain)]
    typed = steppers[0]._lean_admit_prefix
    assert steppers[1]._lean_admit_prefix is None
    base = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=40), label="prompt")
    for i in range(data.draw(st.integers(1, 30), label="calls")):
        op = data.draw(st.sampled_from(("admit",) * 4 + ("advance",) * 3 + ("free",)))
        admitted = sorted(lean._core.table.offsets)
        if op != "admit" and not admitted:
            continue
        if op == "admit":
            rid = f"r{i}"
            odd = data.draw(st.sampled_from(("none",) * 6 + ("unit", "other", "priority", "long")))
            most = len(base) if odd == "long" else min(len(base), drawn.max_len)
            content = base[: data.draw(st.integers(1, most), label="content")]
            longest = data.draw(st.integers(min(len(content), drawn.max_len), drawn.max_len))
            got = []
            for s in steppers:
                prefix = [h.block_hashes(ContentKeys(content, h.unit)) for h in s.handles]
                lengths = [h.unit(longest * h._rows_per_slot) for h in s.handles]
                priority = 0
                if odd == "unit":  # a length in another unit: a bare int
                    lengths[0] = drawn.max_len
                elif odd == "other" and len(prefix) > 1:  # another handle's hashes
                    prefix[0] = prefix[1]
                elif odd == "priority":
                    priority = 1
                got.append(
                    _outcome(s.admit_with_prefix, rid, *lengths, prefix=tuple(prefix),
                             priority=priority)
                )
            assert got[0] == got[1], (rid, odd)
        elif op == "advance":
            rid = data.draw(st.sampled_from(admitted), label="request")
            q = [data.draw(st.integers(0, drawn.max_in_flight), label="n") for _ in order]
            got = [
                _outcome(s.advance, rid, *(h.unit(n) for h, n in zip(s.handles, q, strict=True)))
                for s in steppers
            ]
            assert got[0] == got[1], (op, rid)
        else:
            rid = data.draw(st.sampled_from(admitted), label="request")
            assert _outcome(lean.free, rid) == _outcome(plain.free, rid)
        assert _exact(lean) == _exact(plain), (op, rid)
    check_pools(lean)
    if typed is None:  # a group that caches nothing, or a policy with a check or ordering
        core = lean._core
        assert core.fast.admit_prefix is None or policy.scheduling_policy == "priority"


def test_the_typed_admission_with_a_prefix_takes_its_written_out_entry() -> None:
    # Audio (a pooled window, bound in encoder tokens) + text, bound text first: a prompt
    # admitted twice, the second hitting its first blocks in both groups, by the typed entry
    # and the core's generated admission (neither `_lean_prefix` nor the general plan runs;
    # for the second, each group reads its sequence alone and every block it reads is cached,
    # so neither hit is `longest_common_hit`'s).
    one = _voxtral_toy()
    audio, text = one.group("audio", EncoderTokens), one.group("text", Tokens)
    step = one.stepper(text, audio)
    tokens = list(range(1, 9))
    frames = [k for k in tokens for _ in range(2)]
    prefix = (
        text.block_hashes(ContentKeys(tokens, Tokens)),
        audio.block_hashes(ContentKeys(frames, EncoderTokens)),
    )
    lengths = (Tokens(40), EncoderTokens(80))
    with (
        mock.patch.object(CoordinatorCore, "_lean_prefix", side_effect=AssertionError),
        mock.patch.object(CoordinatorCore, "_general_prefix", side_effect=AssertionError),
    ):
        assert step.admit_with_prefix("a", *lengths, prefix=prefix) == (
            Tokens(0),
            EncoderTokens(0),
        )
        for _ in range(2):
            step.advance("a", Tokens(4), EncoderTokens(8))
        written = one._core.fast.admit_prefix
        assert written is not None
        generated = written.__globals__  # (its source's imports)
        with mock.patch.dict(generated, longest_common_hit=mock.Mock(side_effect=AssertionError)):
            got = step.admit_with_prefix("b", *lengths, prefix=prefix)
    assert got == (Tokens(6), EncoderTokens(12)), got
    assert one.block_table("b", text)[:3] == one.block_table("a", text)[:3]
    check_pools(one)
