"""`benchmarks/vs_vllm.py`'s random traces (``--sweep``): drawn reproducibly, only traces its
replay models (others refused by name), and on each, every kvunits side (typed, raw,
fused, batched, content) does the same work as the others step by step (`check_equal_work`
with the typed side as the reference: no vLLM here)."""

from __future__ import annotations

import pytest

from benchmarks import vs_vllm


def test_a_sweep_is_drawn_again_from_its_seed() -> None:
    traces = vs_vllm.sweep(11, 40)
    assert len(traces) == 40 and traces == vs_vllm.sweep(11, 40)
    assert traces != vs_vllm.sweep(12, 40)
    assert {t.prefix for t in traces} == {"none", "prompt", "generated"}
    assert any(t.spec for t in traces) and any(t.shared_pool for t in traces)


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"prefix": "prompt", "prompt": 100, "chunk": 64}, "must fit one chunk"),
        ({"prefix": "prompt", "mixed": True}, "drawn lengths"),
        ({"shared_pool": True, "groups": ("audio", "text")}, "kv_cache_layout"),
    ],
)
def test_a_trace_the_replay_cannot_model_is_refused_with_its_reason(
    fields: dict[str, object], reason: str
) -> None:
    base: dict[str, object] = {"groups": ("text",)}
    with pytest.raises(ValueError, match=reason):
        vs_vllm.Trace("x", "y", **(base | fields))  # type: ignore[arg-type]


def test_every_kvunits_side_does_the_same_work_on_random_traces() -> None:
    # Twelve short traces of a seed whose draw has every side (fused and batched drafting,
    # content per stream and per batch, a prompt shared and every token cached), each side
    # checked step by step against the typed one.
    sides: set[str] = set()
    for trace in vs_vllm.sweep(6, 12, quick=True):
        vs_vllm._STEPS[trace.name] = vs_vllm.make_schedule(trace).stream_steps
        row = vs_vllm.measure(trace, None, 1, batch=True)
        assert "typed" in row.us and row.check != "-", trace
        sides |= set(row.ratios)
    assert sides == {"raw", "fused", "batch", "content"}, sides


def test_paths_counts_the_calls_that_leave_the_fast_paths_and_the_line_that_sent_them() -> None:
    # Long prompts in chunks past a sliding window (sweep 3's trace 3.23, shorter): every
    # chunk's evicted blocks go back as a run on the generated path, so no call leaves it for
    # the boundary or general path; the slabs compacted on the way (8 streams: small slabs,
    # their windows' segments moving often) are counted with the condition that compacted
    # them, a move that made the slab due (by the generated crossing's line of stores, which
    # takes the runs since session 41, then plans the step again; its ops-list form before).
    trace = vs_vllm.Trace(
        "x", "y", ("audio", "text", "chunked", "sliding"), streams=8, prompt=700, chunk=64,
        decode=5, total=400,
    )  # fmt: skip
    steps, counts = vs_vllm.paths(trace)
    assert steps == 400
    assert {path for path, _, _ in counts} == {"compact_ops"}, counts
    assert all(where.startswith("cross:") for _, where, _ in counts), counts
    assert all("due(garbage" in text for _, _, text in counts), counts


def test_drafting_with_every_token_cached_in_a_shared_pool_registers_on_the_fast_path() -> None:
    # Chunked + text in one pool, every generated token cached, one draft a step (sweep 4's
    # trace 4.34, shorter): each drafting step after a block filled with content registers it
    # (`respec_registering`, `plan_cross` with the rollback and the lookahead). Before, every
    # such step took the core's boundary path (70 of these 800 stream-steps; at 48 streams
    # 40% of the replay's time). A step the plan declines still goes there: once or so here.
    trace = vs_vllm.Trace(
        "x", "y", ("chunked", "text"), streams=8, prompt=100, chunk=512, decode=100,
        total=800, shared_pool=True, prefix="generated", spec=1,
    )  # fmt: skip
    steps, counts = vs_vllm.paths(trace)
    assert steps == 800
    boundary = sum(n for (path, _, _), n in counts.items() if path == "_boundary_step")
    assert boundary <= 3, counts
    assert not any("pending" in text for _, _, text in counts), counts


def test_paths_replays_the_side_asked_for_where_the_trace_has_it() -> None:
    # Short streams drafting 6 with every token cached, one call an engine step (sweep 29's
    # trace 29.32, shorter): each request's first drafting step found its content resting
    # and took the core's boundary path (581 of 1,600 stream-steps, on a side `--paths` did
    # not replay); now nothing leaves the fast paths but a compaction. A drafting trace whose
    # streams are still in their prompts' chunks has a batch side too
    # (`Stepper.advance_speculative_each`, session 51: each stream's own counts; before, it
    # had none), and its chunks beside the drafting steps never leave the fast paths; so has
    # every trace of a sweep. A plain one has (`Stepper.advance_each`), and its chunks beside
    # the decodes never leave the fast paths.
    trace = vs_vllm.Trace(
        "x", "y", ("text",), streams=8, prompt=1, chunk=512, decode=5, total=400,
        shared_pool=True, prefix="generated", spec=6,
    )  # fmt: skip
    assert vs_vllm.kvunits_modes(trace) == ["typed", "raw", "fused", "batch"]
    steps, counts = vs_vllm.paths(trace, "batch")
    assert steps == 400
    assert {path for path, _, _ in counts} <= {"compact_ops"}, counts
    chunked = vs_vllm.Trace(
        "x", "z", ("text", "sliding"), prompt=300, chunk=64, decode=20, total=400, spec=3
    )  # fmt: skip
    assert "batch" in vs_vllm.kvunits_modes(chunked)
    steps, counts = vs_vllm.paths(chunked, "batch")
    assert steps == 400
    assert {path for path, _, _ in counts} <= {"compact_ops"}, counts
    assert all("batch" in vs_vllm.kvunits_modes(t) for t in vs_vllm.sweep(51))
    plain = vs_vllm.Trace("x", "p", ("text", "sliding"), prompt=300, chunk=64, decode=20, total=400)
    assert "batch" in vs_vllm.kvunits_modes(plain)
    steps, counts = vs_vllm.paths(plain, "batch")
    assert steps == 400
    assert {path for path, _, _ in counts} <= {"compact_ops"}, counts
