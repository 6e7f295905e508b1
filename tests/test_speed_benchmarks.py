"""The speed benchmarks of issues 14 and 25 run and print their figures (their speed is never
asserted: the figures are ratios to a baseline measured in the same run, printed for people)."""

from __future__ import annotations

import dataclasses
import gc
import re

import pytest

from benchmarks import replay, startup, validation, vs_vllm


def test_validation_benchmark_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    medians = validation.main(["--number", "3", "--rounds", "2", "--no-pint"])
    out = capsys.readouterr().out
    names = [case.name for case in validation.cases(with_pint=False)]
    assert list(medians) == names and all(value > 0 for value in medians.values())
    for name in names:
        assert name in out
    assert out.strip().splitlines()[-1].startswith("goal: <= 5.0 µs per quantity field")


def test_startup_benchmark_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    medians = startup.main(["--rounds", "1"])
    out = capsys.readouterr().out
    assert list(medians) == [command.name for command in startup.commands()]
    assert all(value > 0 for value in medians.values())
    assert "python -c pass (baseline)" in out and "kvunits plan" in out
    assert out.strip().splitlines()[-1].startswith("goal: kvunits plan <= 0.2 s wall")


def _expected_sides(trace: vs_vllm.Trace) -> set[str]:
    """The kvunits sides `vs_vllm.measure` times on a trace: typed and raw everywhere, one call
    per engine step (batch; a plain trace's prompt chunks beside decodes by `advance_each`,
    session 47), one call per request where the per-request form takes several (fused:
    drafting; content: caching generated tokens). (The family's drafting traces have no
    prompt in chunks, which a drafting batch does not take.)"""
    sides = {"typed", "raw", "batch"}
    if trace.spec:
        sides.add("fused")
    elif trace.prefix == "generated":
        sides.add("content")
    return sides


def test_vs_vllm_benchmark_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    # kvunits alone (no vLLM here): every side of every trace replays the same work as the
    # typed side, checked after every engine step (`check_equal_work` raises on a stream
    # whose length or blocks held differ), and finds the same prefix-cache hits.
    frozen = gc.get_freeze_count()
    rows = vs_vllm.main(["--no-vllm", "--quick", "--rounds", "1"])
    out = capsys.readouterr().out
    # The replays set the caller's heap aside from the collector, and give it back; what
    # the caller had set aside stays so.
    assert gc.get_freeze_count() == frozen
    assert "vLLM is NOT compared" in out
    traces = vs_vllm.family(quick=True)
    assert [row.trace for row in rows] == traces
    for row in rows:
        sides = _expected_sides(row.trace)
        assert set(row.us) == sides, row.trace.name
        assert set(row.ratios) == sides - {"typed"}, row.trace.name
        assert all(us > 0 for us in row.us.values()), row.trace.name
        # One verdict a side, each "same lengths" (and blocks held; or, drafting, at most
        # one block apart where one side rolls back after verification, counted).
        checked = re.findall(r"(?:^|; )(\w+): same lengths", row.check)
        assert sorted(checked) == sorted(sides - {"typed"}), row.check
        if row.trace.prefix != "none":
            hits = list(row.hits.values())
            assert len(hits) == len(sides) and all(h == hits[0] for h in hits), row.hits
            if row.trace.prefix == "unique":  # every prompt its own: queried, never hit
                assert all(h == 0 < q for h, q in hits[0].values()), hits[0]
            else:
                assert all(0 < h <= q for h, q in hits[0].values()), hits[0]
        assert f"-- {row.trace.name}: " in out
    assert out.rstrip().splitlines()[-1].startswith(traces[-1].name)


def test_the_replays_set_the_callers_heap_aside_and_give_it_back() -> None:
    # Nothing set aside before (Python 3.11 here): everything inside, nothing after. Some set
    # aside by the caller (Python 3.12 starts with some): left so, since the collector gives
    # everything back at once or nothing.
    mine = not gc.get_freeze_count()
    if mine:
        with vs_vllm.callers_heap_set_aside():
            assert gc.get_freeze_count() > 0
        assert gc.get_freeze_count() == 0
        gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with vs_vllm.callers_heap_set_aside():
            assert gc.get_freeze_count() == frozen
        assert gc.get_freeze_count() == frozen
    finally:
        if mine:
            gc.unfreeze()


def test_vs_vllm_reports_hits_split_by_sequence() -> None:
    # The pooled audio beside chunked local attention, prefix caching on (sweep 11.28, a
    # held-out trace of session 37): a fresh request's chunked group serves the positions
    # before its current chunk from no cached block at all (the null block, as vLLM's
    # ChunkedLocalAttentionManager.find_longest_cache_hit), while the audio, another
    # sequence, hits nothing. vLLM's one token axis takes 0 for both; kvunits gives each its
    # own hit. The replay records that; `measure` does not time it against vLLM where the
    # blocks held then differ (here 12 chunked blocks against vLLM's 44).
    trace = vs_vllm.Trace(
        "held", "audio + chunked", ("audio", "chunked"), streams=2, prompt=700, chunk=2048,
        decode=3, total=8, prefix="prompt",
    )
    seen = vs_vllm.Seen()
    vs_vllm.KvunitsSide(trace, vs_vllm.make_schedule(trace), "typed").run(seen)
    assert seen.split == (
        "request s0 hits at other token positions per group (audio 0, chunked 512): kvunits "
        "gives the audio and the text their own hits, vLLM one hit on one token axis"
    )
    # One sequence's groups hit alike: nothing recorded (audio and text of one content).
    plain = vs_vllm.Trace("held", "audio + text", ("audio", "text"), streams=2, decode=3,
                          total=8, prefix="prompt")
    seen = vs_vllm.Seen()
    vs_vllm.KvunitsSide(plain, vs_vllm.make_schedule(plain), "raw").run(seen)
    assert seen.split is None and seen.hits
    assert vs_vllm.split_hit(plain, "s1", [4 * 16, 16]) is None  # P = 4 encoder tokens a token
    assert vs_vllm.split_hit(plain, "s1", [0, 16]) is not None


@pytest.mark.parametrize(
    ("trace", "side"),
    [("held prefix chunked prompts", "batch"), ("spec 2 groups", "fused"),
     ("prefix generated", "content"), ("short prefix", "typed")],
)
def test_replay_benchmark_replays_a_runs_calls_to_its_state(
    trace: str, side: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # `benchmarks.replay` records a side's calls to kvunits and replays them alone on fresh
    # coordinators: each replay must leave what the run left (it raises otherwise).
    out = replay.main([trace, "--side", side, "--quick", "--rounds", "2"])
    assert out["us_per_stream_step"] > 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"{trace} ({side}): ") and "µs a stream-step" in printed


def test_replay_benchmark_refuses_a_replay_that_leaves_another_state() -> None:
    # The state check can fail: a recording less one of its frees (a request left admitted).
    recording = replay.record(replay.find("held prefix chunked prompts"), "batch")
    last = max(i for i, call in enumerate(recording.calls) if call[1] == "free")
    calls = recording.calls[:last] + recording.calls[last + 1 :]
    cut = dataclasses.replace(recording, calls=calls)
    replay.replay(recording)
    with pytest.raises(SystemExit, match="the replay left another state than the run"):
        replay.replay(cut)
