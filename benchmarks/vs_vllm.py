"""Benchmark: kvunits' allocator against vLLM's ``KVCacheManager`` on one streaming trace.

The trace (issue 14's): 64 concurrent streams of Voxtral Realtime, each a 32-token prefill step
then 1000 one-token decode steps; a stream that ends is freed in that engine step's output
processing and replaced at the next engine step; 100,000 stream-steps in all (1563 engine
steps, 128 streams). Two groups, block size 16: audio, a pooled sliding window of 750 encoder
tokens at P = 4 (189 pooled slots; 32 KV heads × 64, bf16), one pooled slot per text token;
text, full attention (8 KV heads × 128, bf16). The *prefix* trace is the same with every
stream bringing one shared prompt (32 tokens, and their 128 encoder tokens of audio).

Sides, each replaying the same engine steps, timed around the allocator calls only, as vLLM's
scheduler makes them:

* **vLLM** 0.33 (when importable): ``new_step_starts`` once per engine step, ``allocate_slots``
  per running stream, ``get_computed_blocks`` + ``allocate_slots`` +
  ``record_prefix_cache_stats`` per new stream, ``free`` per finished one. One pool of 6000
  blocks. Untimed: building the ``Request`` objects (their block hashes included), the
  scheduler's bookkeeping, appending the sampled token (which runs vLLM's hasher when caching).
* **kvunits typed**: ``stepper.allocate(id, EncoderTokens(4), Tokens(1))`` per running stream
  (the audio group stepped in encoder tokens, as a stream arrives), ``stepper.admit`` (or
  ``admit_with_prefix``) + ``allocate`` per new stream, ``coordinator.free``. A pool per group
  (1000 audio, 5000 text), caps reserved at admission. The quantities and block hashes are
  built before timing (as vLLM's requests are).
* **kvunits raw**: the untyped core (``allocate_step(id, (4, 1))``), the same calls.

Rounds alternate the sides, the order rotated each round; each round's times are paired, and
the ratios reported are the medians of the per-round ratios. Times are CPU time of this
process (`CLOCK`), read around the calls of each engine step. Peak blocks per group (distinct
blocks held by live requests after each engine step) and prefix-cache hits come from one more,
untimed run of each side.

Differences of behaviour, on purpose: kvunits hashes only the content a caller gives (here the
prompt; vLLM hashes every generated token too, and caches decode blocks nobody will hit), and it
hits the audio and text sequences each on its own (vLLM takes one hit for both: when the
shared audio block has been evicted, vLLM recomputes the text too).

vLLM is not a dependency of kvunits. To run its side, make the venv that
``benchmarks/vllm-nodeps.txt`` describes (torch 2.13.0 CPU, then ``vllm==0.33.0`` and its imports
with ``pip install --no-deps``, then kvunits)::

    .venv-vllm/bin/python benchmarks/vs_vllm.py
    .venv/bin/python benchmarks/vs_vllm.py          # no vLLM: kvunits' sides only, and says so

This module is not imported by the test suite (importing vLLM takes ~10 s).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import platform
import random
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from any venv: kvunits from this checkout
    sys.path.insert(0, str(ROOT))

from kvunits.contracts import (  # noqa: E402
    CacheDType,
    Elements,
    EncoderTokens,
    EngineSpec,
    FullAttentionLayer,
    KVHeads,
    Layers,
    ModelSpec,
    PoolBlocks,
    PoolFactor,
    SlidingWindowLayer,
    Tokens,
    Window,
    group_layers,
)
from kvunits.contracts.deploy import RankBytes  # noqa: E402
from kvunits.contracts.internal import magnitude  # noqa: E402
from kvunits.runtime import ContentKeys, KVCacheCoordinator  # noqa: E402

BLOCK = 16
P = 4
STREAMS = 64
PROMPT = 32
DECODE = 1000
STEPS_PER_STREAM = 1 + DECODE
TOTAL = 100_000
LENGTH = PROMPT + DECODE  # tokens with a slot (the last sampled token has none)
VLLM_BLOCKS = 6000
AUDIO_BLOCKS, TEXT_BLOCKS = 1000, 5000
VOCAB = 32000

#: The clock around the allocator calls: this process's CPU time, as `benchmarks.allocator`
#: takes it. On a shared machine, time spent descheduled would land in one side and not the
#: other; both sides read the same clock the same number of times per engine step.
CLOCK = time.process_time_ns


@dataclass(frozen=True)
class Schedule:
    """The engine steps: per step, the slots running, the (slot, stream) admitted, and the
    slots whose stream ended with the step."""

    steps: list[tuple[list[int], list[tuple[int, int]], list[int]]]
    streams: int
    stream_steps: int


def make_schedule() -> Schedule:
    """64 slots in lockstep, a stream replaced the engine step after it ends, the last step
    scheduling only what is left of the 100,000 stream-steps (as the vLLM harness)."""
    slots: list[int | None] = [None] * STREAMS
    done_in = [0] * STREAMS
    waiting = list(range(STREAMS))
    steps: list[tuple[list[int], list[tuple[int, int]], list[int]]] = []
    started = total = 0
    while total < TOTAL:
        budget = min(STREAMS, TOTAL - total)
        running = [s for s in range(STREAMS) if slots[s] is not None][:budget]
        new = [(s, started + i) for i, s in enumerate(waiting[: max(0, budget - len(running))])]
        started += len(new)
        waiting = waiting[len(new) :]
        for s, i in new:
            slots[s], done_in[s] = i, 0
        freed = []
        for s in running + [s for s, _ in new]:
            done_in[s] += 1
            if done_in[s] == STEPS_PER_STREAM:
                freed.append(s)
                slots[s] = None
                waiting.append(s)
        total += len(running) + len(new)
        steps.append((running, new, freed))
    return Schedule(steps, started, total)


@dataclass
class Result:
    """One side's run: allocator time, and what the untimed run saw."""

    seconds: float = 0.0
    peak_audio: int = 0
    peak_text: int = 0
    hits: dict[str, tuple[int, int]] = field(default_factory=dict)


# -- kvunits ----------------------------------------------------------------------------------


def kvunits_coordinator() -> KVCacheCoordinator:
    audio = SlidingWindowLayer(
        sliding_window=Window(750, EncoderTokens),
        pool=PoolFactor(P),
        kv_heads=KVHeads(32),
        head_size=Elements(64),
        dtype=CacheDType.bfloat16,
    )
    text = FullAttentionLayer(
        kv_heads=KVHeads(8), head_size=Elements(128), dtype=CacheDType.bfloat16
    )
    model = ModelSpec.stacked(
        "voxtral-realtime", {"audio": (audio, Layers(32)), "text": (text, Layers(26))}
    )
    engine = EngineSpec(
        block_size_slots=BLOCK,
        max_model_len=Tokens(LENGTH),
        max_num_batched_tokens=Tokens(PROMPT),
        max_encoder_len=EncoderTokens(P * LENGTH),
        max_encoder_tokens_per_step=EncoderTokens(P * PROMPT),
        memory_budget=RankBytes(1 << 40),
    )
    groups, _ = group_layers(model, engine)
    return KVCacheCoordinator(groups, [PoolBlocks(AUDIO_BLOCKS), PoolBlocks(TEXT_BLOCKS)])


def prompts(schedule: Schedule, shared: bool, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """Each stream's prompt: token ids, and one key per encoder token of its audio."""
    rng = random.Random(seed)

    def one() -> tuple[list[int], list[int]]:
        return (
            [rng.randrange(VOCAB) for _ in range(PROMPT)],
            [rng.randrange(1 << 62) for _ in range(P * PROMPT)],
        )

    common = one()
    return [common if shared else one() for _ in range(schedule.streams)]


def kvunits_replay(
    schedule: Schedule, content: list[tuple[list[int], list[int]]] | None, raw: bool
) -> Callable[[bool], Result]:
    """A replay of the schedule on a fresh coordinator, typed or raw; ``content``: admit with
    the prompts as prefix content (prefix caching), else plainly."""

    def run(track: bool) -> Result:
        coord = kvunits_coordinator()
        audio, text = coord.group("audio", EncoderTokens), coord.group("text", Tokens)
        step = coord.stepper(audio, text)
        core = coord._core  # the raw side prices the untyped core itself
        rids = [f"s{i}" for i in range(schedule.streams)]
        a_len, t_len = EncoderTokens(P * LENGTH), Tokens(LENGTH)
        lengths = [LENGTH, LENGTH]
        prefixes: list[Any] = []
        parts: list[Any] = []
        if content is not None:
            for tokens, frames in content:
                a = audio.block_hashes(ContentKeys(frames, EncoderTokens))
                t = text.block_hashes(ContentKeys(tokens, Tokens))
                prefixes.append((a, t))
                parts.append({0: a.part(), 1: t.part()})
        # The step counts a scheduler holds, one object per value.
        a_one, t_one = EncoderTokens(P), Tokens(1)
        a_fill = {h: EncoderTokens(P * PROMPT - h) for h in range(0, P * PROMPT + 1, P * BLOCK)}
        t_fill = {h: Tokens(PROMPT - h) for h in range(0, PROMPT + 1, BLOCK)}
        result = Result()
        allocate, admit, admit_prefix = step.allocate, step.admit, step.admit_with_prefix
        free = coord.free
        c_allocate, c_admit, c_admit_prefix, c_free = (
            core.allocate_step,
            core.admit,
            core.admit_with_prefix,
            core.free,
        )
        stream_of = [0] * STREAMS
        perf = CLOCK
        elapsed = 0
        gc.collect()
        gc.disable()
        try:
            for running, new, freed in schedule.steps:
                t0 = perf()
                if raw:
                    for s in running:
                        c_allocate(rids[stream_of[s]], (P, 1))
                    for _, i in new:
                        rid = rids[i]
                        if content is None:
                            c_admit(rid, lengths)
                            c_allocate(rid, (P * PROMPT, PROMPT))
                        else:
                            ha, ht = c_admit_prefix(rid, lengths, parts[i])
                            c_allocate(rid, (P * PROMPT - ha, PROMPT - ht))
                else:
                    for s in running:
                        allocate(rids[stream_of[s]], a_one, t_one)
                    for _, i in new:
                        rid = rids[i]
                        if content is None:
                            admit(rid, a_len, t_len)
                            allocate(rid, a_fill[0], t_fill[0])
                        else:
                            a_hit, t_hit = admit_prefix(rid, a_len, t_len, prefix=prefixes[i])
                            allocate(rid, a_fill[magnitude(a_hit)], t_fill[magnitude(t_hit)])
                elapsed += perf() - t0
                for s, i in new:
                    stream_of[s] = i
                if track:
                    _peaks(result, core)
                for s in freed:
                    t0 = perf()
                    (c_free if raw else free)(rids[stream_of[s]])
                    elapsed += perf() - t0
        finally:
            gc.enable()
        result.seconds = elapsed / 1e9
        if content is not None:
            for name, handle in (("audio", audio), ("text", text)):
                stats = coord.prefix_cache_stats(handle)
                result.hits[name] = (magnitude(stats.hits), magnitude(stats.queried))
        return result

    return run


def _peaks(result: Result, core: Any) -> None:
    for g, attr in ((0, "peak_audio"), (1, "peak_text")):
        held = {b for r in core.requests.values() for b in r.tables[g]} - {0}
        setattr(result, attr, max(getattr(result, attr), len(held)))


# -- vLLM -------------------------------------------------------------------------------------


def import_vllm() -> dict[str, Any] | str:
    """vLLM's scheduler-side classes, or why they cannot be imported."""
    warnings.filterwarnings("ignore")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    try:
        names = {
            "torch": ("torch", None),
            "vllm": ("vllm", None),
            "SamplingParams": ("vllm.sampling_params", "SamplingParams"),
            "get_hash_fn_by_name": ("vllm.utils.hashing", "get_hash_fn_by_name"),
            "KVCacheManager": ("vllm.v1.core.kv_cache_manager", "KVCacheManager"),
            "get_request_block_hasher": ("vllm.v1.core.kv_cache_utils", "get_request_block_hasher"),
            "init_none_hash": ("vllm.v1.core.kv_cache_utils", "init_none_hash"),
            "FullAttentionSpec": ("vllm.v1.kv_cache_interface", "FullAttentionSpec"),
            "KVCacheConfig": ("vllm.v1.kv_cache_interface", "KVCacheConfig"),
            "KVCacheGroupSpec": ("vllm.v1.kv_cache_interface", "KVCacheGroupSpec"),
            "KVCacheTensor": ("vllm.v1.kv_cache_interface", "KVCacheTensor"),
            "SlidingWindowSpec": ("vllm.v1.kv_cache_interface", "SlidingWindowSpec"),
            "Request": ("vllm.v1.request", "Request"),
            "RequestStatus": ("vllm.v1.request", "RequestStatus"),
        }
        out: dict[str, Any] = {}
        for key, (module, attr) in names.items():
            mod = importlib.import_module(module)
            out[key] = mod if attr is None else getattr(mod, attr)
        return out
    except Exception as exc:  # ImportError, or vLLM failing inside its own imports
        return f"{type(exc).__name__}: {exc}"


def vllm_replay(
    v: dict[str, Any], schedule: Schedule, content: list[tuple[list[int], list[int]]] | None
) -> Callable[[bool], Result]:
    """The vLLM harness's replay of the same schedule (``harness.py``'s ``run_once``)."""
    from fractions import Fraction

    torch = v["torch"]
    caching = content is not None

    def manager() -> Any:
        audio = v["SlidingWindowSpec"](
            block_size=BLOCK,
            num_kv_heads=32,
            head_size=Elements(64),
            dtype=torch.bfloat16,
            sliding_window=-(-750 // P) + 1,  # vLLM 0.33 whisper_causal: cdiv(750, 4) + 1
            tokens_per_state=Fraction(1, P),
        )
        text = v["FullAttentionSpec"](
            block_size=BLOCK, num_kv_heads=8, head_size=Elements(128), dtype=torch.bfloat16
        )
        tensors = [
            v["KVCacheTensor"](
                size=spec.page_size_bytes * VLLM_BLOCKS,
                layers=[name],
                layer_stride=spec.page_size_bytes * VLLM_BLOCKS,
                block_stride=spec.page_size_bytes,
            )
            for name, spec in (("audio.0", audio), ("text.0", text))
        ]
        config = v["KVCacheConfig"](
            num_blocks=VLLM_BLOCKS,
            kv_cache_tensors=tensors,
            kv_cache_groups=[
                v["KVCacheGroupSpec"](["audio.0"], audio),
                v["KVCacheGroupSpec"](["text.0"], text),
            ],
        )
        return v["KVCacheManager"](
            kv_cache_config=config,
            max_model_len=2048,
            scheduler_block_size=BLOCK,
            hash_block_size=BLOCK,
            max_in_flight_tokens=STREAMS * PROMPT,
            enable_caching=caching,
            log_stats=True,
        )

    def requests() -> list[Any]:
        hasher = None
        if caching:
            fn = v["get_hash_fn_by_name"]("sha256")
            v["init_none_hash"](fn)
            hasher = v["get_request_block_hasher"](BLOCK, fn)
        rng = random.Random(1)
        out = []
        for i in range(schedule.streams):
            tokens = (
                content[i][0]
                if content is not None
                else [rng.randrange(VOCAB) for _ in range(PROMPT)]
            )
            out.append(
                v["Request"](
                    request_id=f"s{i}",
                    prompt_token_ids=list(tokens),
                    sampling_params=v["SamplingParams"](max_tokens=STEPS_PER_STREAM),
                    pooling_params=None,
                    block_hasher=hasher,
                )
            )
        return out

    def run(track: bool) -> Result:
        mgr, reqs = manager(), requests()
        out_tok = [
            [(i * 7919 + k * 104729) % VOCAB for k in range(STEPS_PER_STREAM)]
            for i in range(schedule.streams)
        ]
        running_status, finished = v["RequestStatus"].RUNNING, v["RequestStatus"]
        slot_req: list[Any] = [None] * STREAMS
        slot_stream = [0] * STREAMS
        done_in = [0] * STREAMS
        allocate, gcb, record = (
            mgr.allocate_slots,
            mgr.get_computed_blocks,
            (mgr.record_prefix_cache_stats),
        )
        result = Result()
        perf = CLOCK
        elapsed = 0
        gc.collect()
        gc.disable()
        try:
            for running, new, freed in schedule.steps:
                scheduled = []
                t0 = perf()
                mgr.new_step_starts()
                for s in running:
                    if allocate(slot_req[s], 1) is None:
                        raise RuntimeError("vLLM: pool exhausted (running)")
                for _, i in new:
                    r = reqs[i]
                    blocks, hit, _ = gcb(r)
                    n = r.num_tokens - hit
                    if allocate(r, n, hit, blocks) is None:
                        raise RuntimeError("vLLM: pool exhausted (new)")
                    record(r, hit)
                    scheduled.append((r, n, hit))
                elapsed += perf() - t0
                # The scheduler's bookkeeping (_update_after_schedule), untimed.
                for s in running:
                    r = slot_req[s]
                    r.num_computed_tokens += 1
                    r.num_in_flight_tokens += 1
                for (s, i), (r, n, hit) in zip(new, scheduled, strict=True):
                    r.status = running_status
                    r.num_computed_tokens = hit + n
                    r.num_in_flight_tokens += n
                    slot_req[s], slot_stream[s], done_in[s] = r, i, 0
                if track:
                    for g, attr in ((0, "peak_audio"), (1, "peak_text")):
                        m = mgr.coordinator.single_type_managers[g]
                        ids = {
                            b.block_id
                            for blocks in m.req_to_blocks.values()
                            for b in blocks
                            if not b.is_null
                        }
                        setattr(result, attr, max(getattr(result, attr), len(ids)))
                # update_from_output: one sampled token each; the finished are freed.
                for s in running + [s for s, _ in new]:
                    r = slot_req[s]
                    r.num_in_flight_tokens = 0
                    r.append_output_token_ids(out_tok[slot_stream[s]][done_in[s]])
                    done_in[s] += 1
                for s in freed:
                    slot_req[s].status = finished.FINISHED_LENGTH_CAPPED
                    t0 = perf()
                    mgr.free(slot_req[s])
                    elapsed += perf() - t0
        finally:
            gc.enable()
        result.seconds = elapsed / 1e9
        stats = mgr.make_prefix_cache_stats()
        if caching and stats is not None:
            result.hits["tokens"] = (stats.hits, stats.queries)
        return result

    return run


# -- the comparison -----------------------------------------------------------------------------


def compare(
    name: str, sides: dict[str, Callable[[bool], Result]], rounds: int, stream_steps: int
) -> dict[str, float]:
    """Time each side ``rounds`` times, alternating, the order rotated each round; print the
    figures; return the median µs per stream-step of each side."""
    order = list(sides)
    times: dict[str, list[float]] = {k: [] for k in order}
    for r in range(rounds):
        for key in order[r % len(order) :] + order[: r % len(order)]:
            times[key].append(sides[key](False).seconds)
        line = ", ".join(f"{k} {times[k][-1] / stream_steps * 1e6:.2f}" for k in order)
        print(f"  round {r + 1}: µs per stream-step: {line}")
    seen = {k: sides[k](True) for k in order}
    per_step = {k: statistics.median(times[k]) / stream_steps * 1e6 for k in order}
    print(f"{name}: median µs per stream-step over {rounds} rounds (allocator calls only):")
    for k in order:
        print(f"  {k:>14}: {per_step[k]:7.3f} µs")
    pairs = [("kvunits typed", "kvunits raw")]
    if "vLLM" in times:
        pairs[:0] = [("vLLM", "kvunits typed"), ("vLLM", "kvunits raw")]
    for a, b in pairs:
        ratios = [x / y for x, y in zip(times[a], times[b], strict=True)]
        best = min(times[a]) / min(times[b])
        print(
            f"  paired ratio {a} / {b}: {statistics.median(ratios):.2f} (of best times: {best:.2f})"
        )
    for k in order:
        hits = "; ".join(
            f"{g} hits {h} of {q} queried ({h / q:.1%})" if q else f"{g} none"
            for g, (h, q) in seen[k].hits.items()
        )
        print(
            f"  {k:>14}: peak blocks held: audio {seen[k].peak_audio}, text {seen[k].peak_text}"
            + (f"; prefix cache: {hits}" if hits else "")
        )
    return per_step


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per side")
    parser.add_argument(
        "--trace", choices=("streaming", "prefix", "both"), default="both", help="which traces"
    )
    args = parser.parse_args(argv)

    schedule = make_schedule()
    vllm = import_vllm()
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus")
    if isinstance(vllm, str):
        print(
            f"vLLM is NOT importable ({vllm}): timing kvunits only. Make the venv that "
            "benchmarks/vllm-nodeps.txt describes and run this script with its python to "
            "compare."
        )
    else:
        print(f"vLLM {vllm['vllm'].__version__}, torch {vllm['torch'].__version__}")
    print(
        f"schedule: {schedule.stream_steps} stream-steps, {len(schedule.steps)} engine steps, "
        f"{schedule.streams} streams of {PROMPT} + {DECODE} steps, {STREAMS} at once"
    )
    traces = ("streaming", "prefix") if args.trace == "both" else (args.trace,)
    for trace in traces:
        content = prompts(schedule, shared=True) if trace == "prefix" else None
        sides: dict[str, Callable[[bool], Result]] = {}
        if not isinstance(vllm, str):
            sides["vLLM"] = vllm_replay(vllm, schedule, content)
        sides["kvunits typed"] = kvunits_replay(schedule, content, raw=False)
        sides["kvunits raw"] = kvunits_replay(schedule, content, raw=True)
        label = "streaming trace" if trace == "streaming" else "prefix trace (one shared prompt)"
        print(f"-- {label}")
        compare(label, sides, args.rounds, schedule.stream_steps)


if __name__ == "__main__":
    main(sys.argv[1:])
