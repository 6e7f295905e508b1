"""``kvunits simulate --admission`` and ``--compare-admission`` (issue 23): the same streams
under reserve, on_demand and declared admission, through the real coordinator.

On the shipped Voxtral Realtime example (40 GiB: audio pool 425 blocks, text 21001; a stream
holds at most 13 audio blocks once its window is full, and its cap of 641 text blocks for the
engine's 131072 tokens while a 300-step stream holds 20): reserve runs what the caps allow,
32 streams (``kvunits plan``: the audio caps, 425 // 13); on demand runs what the blocks held
allow, and every preemption it makes is counted, in the series and by the coordinator.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kvunits._simulate import Workload, admission_variants, load_example, simulate
from kvunits.cli import main
from kvunits.contracts import CacheBlocks


@pytest.fixture(scope="module")
def example() -> Any:
    return load_example()


def test_on_demand_runs_more_streams_than_reserve_at_equal_memory(example: Any) -> None:
    work = Workload.for_config(example, streams=48, steps=300, duration=700)
    runs = simulate(
        example, work, admission_variants(example, ["reserve", "on_demand", "declared"])
    )
    reserve, on_demand, declared = runs
    assert [r.admission for r in runs] == ["reserve", "on_demand", "declared"]
    assert reserve.peak_running == 32 == example_plan_concurrency(example)
    assert on_demand.peak_running > reserve.peak_running
    # What the blocks held allow: the audio pool over the blocks a stream holds at most.
    audio = on_demand.group_stats("audio")
    assert on_demand.peak_running <= 48 and audio.peak_used <= audio.capacity
    # Declared reserves a 300-step stream's text blocks, not the engine's limit's.
    assert declared.group_stats("text").peak_reserved < reserve.group_stats("text").peak_reserved
    for run in runs:
        assert run.first_lost is None, run.first_lost  # no key read from a freed block
        assert run.finished > 0


def example_plan_concurrency(config: Any) -> int:
    from kvunits.runtime import plan

    return plan(config.model, config.engine).concurrent_requests


def test_every_preemption_is_counted(example: Any) -> None:
    """Streams far more than the audio pool holds: on demand preempts; the series' count
    equals the coordinator's, and each preempted stream recomputes what it had."""
    work = Workload.for_config(example, streams=80, steps=300, duration=450)
    (variant,) = admission_variants(example, ["on_demand"])
    from kvunits._simulate import Simulation, _real_kernels

    sim = Simulation(example, work, variant, _real_kernels(example))
    for _ in range(work.duration):
        sim.step()
        usage = sim.coordinator.usage_by_group()
        for u in usage.values():
            assert u.used <= u.capacity and u.reserved == CacheBlocks(0)
    sim.finish()
    run = sim.run
    assert run.preemptions > 0
    assert run.preemptions == sim.coordinator.metrics().num_preemptions
    metrics = sim.coordinator.metrics()
    assert run.group_stats("text").recomputed == metrics.group("text").preempted
    assert run.first_lost is None


def test_command_line_json(capsys: Any) -> None:
    status = main(
        [
            "simulate",
            "--compare-admission",
            "reserve,on_demand",
            "--streams",
            "6",
            "--steps",
            "40",
            "--duration",
            "90",
            "--format",
            "json",
        ]
    )
    assert status == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["admission"] for r in data["runs"]] == ["reserve", "on_demand"]
    assert [r["window"] for r in data["runs"]] == ["reserve", "on_demand"]
    assert all(len(r["series"]["preempted"]) == 90 for r in data["runs"])
    assert data["engine"]["admission"]["value"] == "reserve"
    text_groups = {g["name"]: g for g in data["runs"][1]["groups"]}
    assert text_groups["text"]["recomputed"]["unit"] == "token"


def test_admission_flag_and_table(capsys: Any) -> None:
    status = main(["simulate", "--admission", "on_demand", "--streams", "4", "--steps", "30"])
    assert status == 0
    out = capsys.readouterr().out
    assert "preempted" in out and "recomputed" in out
    assert main(["simulate", "--compare-admission", "optimistic"]) == 2
    assert "admission is one of" in capsys.readouterr().err


def test_a_preempted_stream_replays_its_groups_in_step(example: Any) -> None:
    """vLLM recomputes a resumed Voxtral Realtime request on one token axis (its encoder runs
    inside the decoder's forward, ``voxtral_realtime.py``): the text and the audio of the
    same stream steps come back together. So a replaying stream's groups always cover the
    same whole stream steps: its text never re-prefills ahead of its audio (at 4 encoder
    tokens a step, the example's limit), holding blocks it cannot use yet."""
    from kvunits._simulate import Simulation, _real_kernels

    work = Workload.for_config(example, streams=80, steps=300, duration=450)
    (variant,) = admission_variants(example, ["on_demand"])
    sim = Simulation(example, work, variant, _real_kernels(example))
    audio, text = sim.handles
    assert (audio.name, text.name) == ("audio", "text")
    prefill = [4, 16]  # the workload's prompt: 4 encoder tokens, 16 tokens
    replays = 0
    for _ in range(work.duration):
        sim.step()
        for stream in sim._running.values():
            if stream.recompute is None:
                continue
            replays += 1
            done = [lost - left for lost, left in zip(stream.lost, stream.recompute, strict=True)]
            # Whole stream steps covered: the prompt, then one position a step (4 for audio).
            covered = [
                0 if d < p else 1 + (d - p) // step
                for d, p, step in zip(done, prefill, (4, 1), strict=True)
            ]
            assert covered[0] == covered[1], (stream.id, done)
            assert done[1] == (0 if covered[1] == 0 else 16 + covered[1] - 1)
    assert replays > 100
    assert sim.run.preemptions > 0
