"""Benchmark: the typed allocator API against its untyped inner core, on one streaming trace.

Model: a Voxtral Realtime server. Each request streams audio into the pooled encoder group
(sliding window 750 encoder tokens, P = 4, block size 16 pooled blocks: `pool_window` gives 189
slots) and text into the decoder group (full attention, block size 16 tokens). A request first
prefills in chunks (up to 16 pooled blocks and 64 tokens a step), then decodes one pooled block
and one token a step; requests arrive over time, wait while the cache is fully reserved, and
finish after a random stream length. A scheduler simulation, run once before timing, turns
this into a trace of admit / step / free events, one step being one request's allocation in
both groups, as a scheduler does it for each running request every iteration.

The same trace is replayed through

* the typed public API: ``coordinator.admit(id)``, ``stepper.allocate(id, EncoderTokens(a),
  Tokens(t))`` (one unit check per argument at the entry; the audio group is stepped in
  encoder tokens, as a stream arrives), ``coordinator.free(id)``;
* the untyped core: ``core.admit(id)``, ``core.allocate_step(id, (a, t))``, ``core.free(id)``
  (the core counts a pooled group's positions in encoder tokens too);
* for reference, the typed API again, building the two quantities of every step from ints
  inside the timed loop (what a caller that holds plain ints pays on top).

The replays run on fresh coordinators built from the same capacity plan, interleaved (in
rotating order), best of ``--repeats`` each, with the garbage collector paused (as ``timeit``
does). Times are this process's CPU time (``time.process_time``), not wall time: on a shared
machine, time spent descheduled would land in one replay and not another. The typed trace's
quantities are built before timing (they are the scheduler's decisions, not the allocator's
work; one object per value, as CPython keeps one object per small int), so
``typed_overhead_ratio`` (typed API / raw core) prices exactly what the typed entry adds. Each
replay is its own loop, written out: a shared loop calling a per-replay function would add the
same call to both sides and flatter the ratio. Before timing, the replays are run side by side,
event by event, and must compute the same slot mappings and end with the same free queues.

Run:
    .venv/bin/python -m benchmarks.allocator
"""

from __future__ import annotations

import argparse
import gc
import platform
import random
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from kvunits.contracts import (
    Bytes,
    Elements,
    EncoderTokens,
    EngineSpec,
    FullAttentionLayer,
    KVHeads,
    Layers,
    ModelSpec,
    PoolFactor,
    SlidingWindowLayer,
    Tokens,
    Window,
)
from kvunits.contracts.deploy import RankBytes
from kvunits.runtime import KVCacheCoordinator
from kvunits.runtime.capacity import CapacityPlan, plan

ADMIT, STEP, FREE = 0, 1, 2
POOL = 4  # P: encoder tokens per pooled block
AUDIO_CHUNK = 16  # pooled blocks a prefill step (64 encoder tokens)
TEXT_CHUNK = 64  # tokens a prefill step


@dataclass(frozen=True)
class Trace:
    """One scheduler run, as events: ``(kind, request id, audio slots, text slots)``."""

    raw: list[tuple[int, str, int, int]]
    typed: list[tuple[int, str, EncoderTokens, Tokens]]
    requests: int
    steps: int
    iterations: int
    slots: int


def voxtral_plan(concurrency: int) -> CapacityPlan:
    """The capacity plan of a Voxtral-like model with room for ``concurrency`` full requests."""
    audio = SlidingWindowLayer(
        sliding_window=Window(750, EncoderTokens),
        pool=PoolFactor(4),
        kv_heads=KVHeads(32),
        head_size=Elements(64),
    )
    text = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))
    model = ModelSpec.stacked(
        "voxtral-realtime", {"audio": (audio, Layers(32)), "text": (text, Layers(26))}
    )

    def engine(budget: int) -> EngineSpec:
        return EngineSpec(
            block_size_slots=16,
            max_model_len=Tokens(2048),
            max_num_batched_tokens=Tokens(TEXT_CHUNK),
            max_encoder_len=EncoderTokens(4 * 1024),
            max_encoder_tokens_per_step=EncoderTokens(POOL * AUDIO_CHUNK),
            memory_budget=RankBytes(budget),
        )

    one = plan(model, engine(1 << 40))
    null = sum(g.block_bytes.numerical_value_in(Bytes) for g in one.groups)
    return plan(model, engine(concurrency * one.bytes_per_request.numerical_value_in(Bytes) + null))


def make_trace(requests: int, concurrency: int, seed: int) -> Trace:
    """Simulate a scheduler: arrivals, admission up to ``concurrency``, one step per running
    request per iteration, frees at the end of each stream."""
    rng = random.Random(seed)
    waiting: deque[tuple[str, int, int, int]] = deque()
    running: dict[str, list[int]] = {}  # id -> [audio prefill left, text prompt left, steps left]
    raw: list[tuple[int, str, int, int]] = []
    arrived = iterations = slots = 0
    while arrived < requests or waiting or running:
        iterations += 1
        for _ in range(rng.choice((0, 0, 1, 1, 2))):
            if arrived < requests:
                # audio prefill (pooled blocks), text prompt (tokens), streaming steps
                waiting.append(
                    (
                        f"req{arrived}",
                        rng.randint(8, 64),
                        rng.randint(16, 256),
                        rng.randint(50, 700),
                    )
                )
                arrived += 1
        while waiting and len(running) < concurrency:
            rid, audio, prompt, stream = waiting.popleft()
            raw.append((ADMIT, rid, 0, 0))
            running[rid] = [audio, prompt, stream]
        for rid in list(running):
            left = running[rid]
            a = min(AUDIO_CHUNK, left[0]) if left[0] else 1
            t = min(TEXT_CHUNK, left[1]) if left[1] else 1
            left[0] -= min(a, left[0])
            left[1] -= min(t, left[1])
            raw.append((STEP, rid, a * POOL, t))  # the audio chunk in encoder tokens
            slots += a + t
            if not left[0] and not left[1]:
                left[2] -= 1
                if left[2] == 0:
                    raw.append((FREE, rid, 0, 0))
                    del running[rid]
    # One quantity object per value, as CPython keeps one object per small int: both traces
    # then read the same few hot objects, and the ratio is not about memory traffic.
    audio_q = {a: EncoderTokens(a) for a in {e[2] for e in raw}}
    text_q = {t: Tokens(t) for t in {e[3] for e in raw}}
    typed = [(k, rid, audio_q[a], text_q[t]) for k, rid, a, t in raw]
    steps = sum(1 for e in raw if e[0] == STEP)
    return Trace(raw, typed, requests, steps, iterations, slots)


def replay_typed(coord: KVCacheCoordinator, trace: Trace) -> Callable[[], object]:
    """The typed replay, bound to a fresh coordinator."""
    step = coord.stepper(coord.group("audio", EncoderTokens), coord.group("text", Tokens))
    allocate, admit, free = step.allocate, coord.admit, coord.free
    events = trace.typed

    def run() -> object:
        out = None
        for kind, rid, a, t in events:
            if kind == STEP:
                out = allocate(rid, a, t)
            elif kind == ADMIT:
                admit(rid)
            else:
                free(rid)
        return out

    return run


def replay_raw(coord: KVCacheCoordinator, trace: Trace) -> Callable[[], object]:
    """The untyped replay, on the coordinator's inner core (no unit checks: ints only)."""
    core = coord._core  # the untyped core itself is what this benchmark prices against
    allocate, admit, free = core.allocate_step, core.admit, core.free
    events = trace.raw

    def run() -> object:
        out = None
        for kind, rid, a, t in events:
            if kind == STEP:
                out = allocate(rid, (a, t))
            elif kind == ADMIT:
                admit(rid)
            else:
                free(rid)
        return out

    return run


def replay_typed_from_ints(coord: KVCacheCoordinator, trace: Trace) -> Callable[[], object]:
    """The typed replay, building ``EncoderTokens(a)`` and ``Tokens(t)`` at every step."""
    step = coord.stepper(coord.group("audio", EncoderTokens), coord.group("text", Tokens))
    allocate, admit, free = step.allocate, coord.admit, coord.free
    events = trace.raw

    def run() -> object:
        out = None
        for kind, rid, a, t in events:
            if kind == STEP:
                out = allocate(rid, EncoderTokens(a), Tokens(t))
            elif kind == ADMIT:
                admit(rid)
            else:
                free(rid)
        return out

    return run


#: The replays, by the name the report gives them.
REPLAYS: dict[str, Callable[[KVCacheCoordinator, Trace], Callable[[], object]]] = {
    "typed API": replay_typed,
    "raw core": replay_raw,
    "typed, ints wrapped per step": replay_typed_from_ints,
}


def check_same(p: CapacityPlan, trace: Trace) -> None:
    """Replay the typed API and the raw core side by side, event by event: every step's slot
    mappings, and the pools' free queues at the end, must be the same."""
    typed, raw = KVCacheCoordinator.from_plan(p), KVCacheCoordinator.from_plan(p)
    step = typed.stepper(typed.group("audio", EncoderTokens), typed.group("text", Tokens))
    core = raw._core
    for (kind, rid, a, t), (_, _, qa, qt) in zip(trace.raw, trace.typed, strict=True):
        if kind == STEP:
            if step.allocate(rid, qa, qt) != core.allocate_step(rid, (a, t)):
                raise SystemExit(f"the replays differ at a step of {rid}")
        elif kind == ADMIT:
            typed.admit(rid)
            core.admit(rid)
        else:
            typed.free(rid)
            core.free(rid)
    typed_end, raw_end = ([pool.free_queue() for pool in c._core.pools] for c in (typed, raw))
    if typed_end != raw_end:
        raise SystemExit("the replays end with different free queues")


def best_times(p: CapacityPlan, trace: Trace, repeats: int) -> dict[str, float]:
    """Best seconds of each replay, interleaved, each on a fresh coordinator."""
    best = dict.fromkeys(REPLAYS, float("inf"))
    names = list(REPLAYS)
    for i in range(repeats):
        # Rotate which goes first, so that none always inherits another's heap.
        for name in names[i % len(names) :] + names[: i % len(names)]:
            run = REPLAYS[name](KVCacheCoordinator.from_plan(p), trace)
            # As timeit does: a collection landing in one replay and not the other is noise.
            gc.collect()
            gc.disable()
            try:
                start = time.process_time()
                run()
                elapsed = time.process_time() - start
            finally:
                gc.enable()
            best[name] = min(best[name], elapsed)
    return best


def main(argv: list[str] | None = None) -> float:
    """Build the trace, check both replays agree, time them; print the figures and the ratio."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=400, help="requests in the trace")
    parser.add_argument("--concurrency", type=int, default=64, help="streams the plan admits")
    parser.add_argument("--repeats", type=int, default=9, help="replays of each; best is kept")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    p = voxtral_plan(args.concurrency)
    trace = make_trace(args.requests, min(args.concurrency, p.concurrent_requests), args.seed)
    check_same(p, trace)
    best = best_times(p, trace, args.repeats)
    audio, text = p.group("audio"), p.group("text")
    print(f"python {platform.python_version()} on {platform.machine()}")
    print(
        f"plan: audio {audio.num_blocks} (cap {audio.admission_cap}), text {text.num_blocks} "
        f"(cap {text.admission_cap}); {p.concurrent_requests} concurrent requests"
    )
    print(
        f"trace: {trace.requests} requests, {trace.iterations} scheduler iterations, "
        f"{trace.steps} request-steps, {trace.slots} slots, "
        f"{len(trace.raw) - trace.steps} admits and frees"
    )
    for name, seconds in best.items():
        print(
            f"{name:>28}: {seconds * 1e3:8.1f} ms  {trace.steps / seconds:12,.0f} steps/s  "
            f"{seconds / trace.steps * 1e9:7.0f} ns/step"
        )
    raw = best["raw core"]
    wrapped = best["typed, ints wrapped per step"] / raw
    print(f"typed API with ints wrapped per step / raw core = {wrapped:.3f}")
    ratio = best["typed API"] / raw
    print(f"typed_overhead_ratio={ratio:.3f}")
    return ratio


if __name__ == "__main__":
    main(sys.argv[1:])
