"""Preemption under ``on_demand`` on the shipped Voxtral Realtime example: how often, of whom,
and what it costs (issue 23).

Streams of 1000 steps at Voxtral's cadence (4 encoder tokens and 1 token a step) run through
``kvunits simulate``'s on_demand admission (`kvunits._simulate.Simulation`, vLLM 0.33's
scheduler order), once per engine setting given. Printed per run: preemptions, how many of
them hit a stream preempted before, the scheduler steps streams spent recomputing, the
positions recomputed, streams ended and the mean streams running.

Two settings matter (see docs/serving.md, "Preemption of streams"):

* the example's ``max_encoder_tokens_per_step = 4``: the audio group never steps more than
  real time, so a preempted stream replays its audio at 4 encoder tokens a step;
* ``8192 encoder_token`` (P × max_num_batched_tokens): vLLM's rate, whose Voxtral Realtime
  encoder runs on the decoder's token axis (a resumed request re-prefills up to
  max_num_batched_tokens positions a step, P encoder tokens each); the audio admission cap
  is then vLLM's own, 141 blocks.

Run::

    .venv/bin/python benchmarks/voxtral_preemption.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: (label, engine flags, streams)
RUNS: list[tuple[str, dict[str, str], int]] = [
    ("per_group, 4 encoder_token a step", {}, 40),
    (
        "per_group, 8192 encoder_token a step",
        {"max_encoder_tokens_per_step": "8192 encoder_token"},
        40,
    ),
    ("shared, 4 encoder_token a step", {"kv_cache_layout": "shared"}, 250),
    (
        "shared, 8192 encoder_token a step",
        {"kv_cache_layout": "shared", "max_encoder_tokens_per_step": "8192 encoder_token"},
        250,
    ),
]


def measure(flags: dict[str, str], streams: int, steps: int) -> dict[str, Any]:
    """One on_demand run: preemptions, re-preemptions, replay steps, recomputed, throughput."""
    from kvunits._simulate import Simulation, Workload, _real_kernels, _Stream, admission_variants
    from kvunits.contracts import EncoderTokens, Tokens
    from kvunits.contracts.config import load_config

    config = load_config(ROOT / "examples" / "voxtral_realtime.toml", flags=flags)
    work = Workload.for_config(
        config,
        streams=streams,
        steps=steps,
        encoder_step=EncoderTokens(4),
        decoder_step=Tokens(1),
    )
    (variant,) = admission_variants(config, ["on_demand"])
    sim = Simulation(config, work, variant, _real_kernels(config))
    preempted_before: set[str] = set()
    waiting_before: set[str] = set()
    again = replaying = 0
    for _ in range(work.duration):
        sim.step()
        # A step's preempted streams wait at its end (no admission follows a preemption).
        waiting = {s.id for s in sim._waiting if isinstance(s, _Stream)}
        for stream_id in waiting - waiting_before:
            again += stream_id in preempted_before
            preempted_before.add(stream_id)
        waiting_before = waiting
        replaying += sum(s.recompute is not None for s in sim._running.values())
    sim.finish()
    run = sim.run
    running = run.series["running"]
    return {
        "preemptions": run.preemptions,
        "of streams preempted before": again,
        "stream steps recomputing": replaying,
        "recomputed": ", ".join(str(g.recomputed) for g in run.groups),
        "ended": run.finished,
        "mean running": round(sum(running) / len(running), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args(argv)
    for label, flags, streams in RUNS:
        found = measure(flags, streams, args.steps)
        print(f"{label}, {streams} streams:", flush=True)
        print("  " + "; ".join(f"{k} {v}" for k, v in found.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
