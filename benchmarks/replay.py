"""The allocator calls of one `vs_vllm` trace alone, replayed (issue 25): a figure that load on
a shared machine does not move, to compare two versions of kvunits exactly.

One run of the trace on a kvunits side (``--side``: typed, raw, batch, fused or content, as
`vs_vllm.KvunitsSide` makes its calls) records every call it makes to kvunits (the stepper's
and the coordinator's, with their arguments); the calls are then replayed on fresh
coordinators, nothing else between them: no schedule, no equal-work checks, no vLLM. Each
replay must leave its coordinator as the recorded run left its own (`fingerprint`). It prints
the µs per stream-step of the replays (median and spread over ``--rounds``) and, with
``--instructions``, the instructions per stream-step that valgrind's callgrind counts
(``PYTHONHASHSEED=0``): ``--replays`` replays less the same process with none replayed,
divided by the trace's stream-steps. The recording and the coordinators' making are in
both processes, so only the calls are counted; the figure moves by a few tenths of a
percent between runs (sessions 48-49 measured their changes so: docs/benchmarks.md).

    python -m benchmarks.replay "held prefix chunked prompts" --side batch --instructions
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks import startup, vs_vllm
from kvunits.runtime import GroupHandle, KVCacheCoordinator
from kvunits.runtime.coordinator import Stepper

#: The stepper's and the coordinator's calls a side makes (each recorded where it has it).
STEPPER_CALLS = (
    "admit",
    "admit_with_prefix",
    "allocate",
    "advance",
    "advance_all",
    "advance_each",
    "allocate_speculative",
    "rollback",
    "advance_speculative",
    "advance_speculative_all",
    "advance_speculative_each",
    "advance_speculative_with_content",
    "advance_speculative_all_with_content",
    "advance_with_content",
    "advance_with_content_all",
)
COORDINATOR_CALLS = ("free", "extend_content")


@dataclass(frozen=True)
class Recording:
    """One run's calls: (``"stepper"`` or ``"coordinator"``, name, args, kwargs), its groups'
    handles replaced by their place (`_Place`), and what the run left (`fingerprint`)."""

    trace: vs_vllm.Trace
    calls: list[tuple[str, str, tuple[Any, ...], dict[str, Any]]]
    stream_steps: int
    left: tuple[Any, ...]


@dataclass(frozen=True)
class _Place:
    """A group handle of the recorded run, by its place among the stepper's handles."""

    index: int


def find(name: str, quick: bool = False) -> vs_vllm.Trace:
    """The family's or the held-out trace called ``name`` (as `vs_vllm` prints it), or a
    sweep's (``sweep SEED.N``: the Nth random trace of seed SEED, `vs_vllm.sweep`)."""
    traces = vs_vllm.family(quick) + vs_vllm.held_out(quick)
    seed = name.removeprefix("sweep ").partition(".")[0]
    if name.startswith("sweep ") and seed.isdigit():
        traces += vs_vllm.sweep(int(seed), quick=quick)
    for trace in traces:
        if trace.name == name:
            return trace
    known = ", ".join(repr(t.name) for t in traces)
    raise SystemExit(f"no trace {name!r}; the traces are {known}")


def fingerprint(coord: KVCacheCoordinator) -> tuple[Any, ...]:
    """What a run leaves that a replay must leave too: the admitted requests, and each pool's
    counters, queue and cached blocks."""
    core = coord._core
    pools = tuple(
        (p._fresh, p._head, p._used, p._queue.tolist(), sorted(p._cached.items()))
        for p in core.pools
    )
    return tuple(sorted(core.table.offsets)), pools


def record(trace: vs_vllm.Trace, side: str) -> Recording:
    """Run ``trace`` once on kvunits' ``side``, recording every call it makes to kvunits."""
    calls: list[tuple[str, str, tuple[Any, ...], dict[str, Any]]] = []
    places: dict[int, int] = {}  # id of a handle -> its place among the stepper's

    def placed(value: Any) -> Any:
        if isinstance(value, GroupHandle):
            return _Place(places[id(value)])
        if type(value) is tuple:
            return tuple(placed(v) for v in value)
        if type(value) is list:
            return [placed(v) for v in value]
        return value

    def recorded(kind: str, name: str, call: Callable[..., Any], bound: bool = False) -> Any:
        """``call`` that records each call first (``bound``: a method, its instance not
        recorded)."""

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = args[1:] if bound else args
            calls.append((kind, name, placed(given), {k: placed(v) for k, v in kwargs.items()}))
            return call(*args, **kwargs)

        return wrapper

    make_stepper = KVCacheCoordinator.stepper
    saved = {name: KVCacheCoordinator.__dict__[name] for name in COORDINATOR_CALLS}
    # A stepper's entries: its class's methods, or generated functions it holds.
    methods = {n: Stepper.__dict__[n] for n in STEPPER_CALLS if callable(Stepper.__dict__.get(n))}

    def stepper(self: KVCacheCoordinator, *handles: Any) -> Any:
        made = make_stepper(self, *handles)
        places.update((id(h), i) for i, h in enumerate(handles))
        for name in STEPPER_CALLS:
            if name not in methods and hasattr(made, name):
                object.__setattr__(made, name, recorded("stepper", name, getattr(made, name)))
        return made


    schedule = vs_vllm.make_schedule(trace)
    run = vs_vllm.KvunitsSide(trace, schedule, side)
    KVCacheCoordinator.stepper = stepper  # type: ignore[method-assign]
    for name, method in saved.items():
        setattr(KVCacheCoordinator, name, recorded("coordinator", name, method, bound=True))
    for name, method in methods.items():
        setattr(Stepper, name, recorded("stepper", name, method, bound=True))
    try:
        run.run()
    finally:
        KVCacheCoordinator.stepper = make_stepper  # type: ignore[method-assign]
        for name, method in saved.items():
            setattr(KVCacheCoordinator, name, method)
        for name, method in methods.items():
            setattr(Stepper, name, method)
    assert run.coordinator is not None
    return Recording(trace, calls, schedule.stream_steps, fingerprint(run.coordinator))


def prepared(
    recording: Recording,
) -> tuple[KVCacheCoordinator, list[tuple[Any, tuple[Any, ...], dict[str, Any]]]]:
    """A fresh coordinator and the recorded calls bound to it (its stepper's handles in their
    places), ready to replay."""
    trace = recording.trace
    coord = vs_vllm.kvunits_coordinator(trace)
    handles = [coord.group(g, vs_vllm._unit_of(g)) for g in trace.groups]
    stepper: Stepper[Any] = coord.stepper(*handles)

    def bound(value: Any) -> Any:
        if type(value) is _Place:
            return handles[value.index]
        if type(value) is tuple:
            return tuple(bound(v) for v in value)
        if type(value) is list:
            return [bound(v) for v in value]
        return value

    return coord, [
        (
            getattr(stepper if kind == "stepper" else coord, name),
            bound(args),
            {k: bound(v) for k, v in kwargs.items()},
        )
        for kind, name, args, kwargs in recording.calls
    ]


def replay(recording: Recording, calls_too: bool = True, check: bool = True) -> float:
    """Replay the recorded calls once on a fresh coordinator (the collector off; with
    ``calls_too`` false, everything but the calls: a counted baseline); the seconds the
    calls took. With ``check``, raises where the replay leaves another state than the run."""
    coord, calls = prepared(recording)
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        if calls_too:
            for call, args, kwargs in calls:
                call(*args, **kwargs)
        elapsed = time.perf_counter() - t0
    finally:
        gc.enable()
    if check and fingerprint(coord) != recording.left:
        raise SystemExit(f"{recording.trace.name}: the replay left another state than the run")
    return elapsed


def instructions(name: str, side: str, replays: int, quick: bool) -> float:
    """Instructions per stream-step of ``replays`` replays, counted by callgrind: a process
    that records and replays, less one that records and prepares as many replays."""

    def counted(*extra: str) -> int:  # (`startup.instructions`: PYTHONHASHSEED=0)
        argv = (sys.executable, "-m", "benchmarks.replay", name, "--side", side, "--count",
                str(replays), *extra, *(["--quick"] if quick else []))
        return startup.instructions(argv, dict(os.environ))

    steps = record(find(name, quick), side).stream_steps
    return (counted() - counted("--baseline")) / replays / steps


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.replay", description=__doc__)
    parser.add_argument("trace", help="a trace's name as vs_vllm prints it")
    parser.add_argument("--side", default="typed", help="typed, raw, batch, fused or content")
    parser.add_argument("--rounds", type=int, default=5, help="timed replays")
    parser.add_argument("--quick", action="store_true", help="the trace 50 times shorter")
    parser.add_argument(
        "--instructions", action="store_true", help="also count instructions with valgrind"
    )
    parser.add_argument("--replays", type=int, default=3, help="replays counted by valgrind")
    # (the counted processes': replay ``--count`` times, or with --baseline only prepare)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--baseline", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    recording = record(find(args.trace, args.quick), args.side)
    if args.count is not None:  # (a counted process: no state compared, nothing printed)
        for _ in range(args.count):
            replay(recording, calls_too=not args.baseline, check=False)
        return {}
    seconds = [replay(recording) for _ in range(args.rounds)]
    per_step = [s / recording.stream_steps * 1e6 for s in seconds]
    out = {"us_per_stream_step": statistics.median(per_step)}
    print(
        f"{args.trace} ({args.side}): {len(recording.calls):,} calls, "
        f"{recording.stream_steps:,} stream-steps; {out['us_per_stream_step']:.3f} µs a "
        f"stream-step ({min(per_step):.3f}–{max(per_step):.3f}, {args.rounds} replays)"
    )
    if args.instructions:
        if shutil.which("valgrind") is None:
            raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
        count = instructions(args.trace, args.side, args.replays, args.quick)
        out["instructions_per_stream_step"] = count
        print(f"instructions a stream-step: {count:,.0f} (callgrind, {args.replays} replays)")
    return out


if __name__ == "__main__":
    main()
