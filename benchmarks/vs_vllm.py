"""Benchmark: kvunits' allocator against vLLM 0.33's ``KVCacheManager`` on a family of traces.

Each trace is a schedule of engine steps replayed, in one process, through

* **vLLM** 0.33 (when importable): ``new_step_starts`` once per engine step,
  ``allocate_slots`` per scheduled stream (``get_computed_blocks`` and
  ``record_prefix_cache_stats`` first for a new one), ``free`` per finished one, as its
  scheduler calls them; one pool for all groups;
* **kvunits typed**: the `Stepper` of the groups (``admit`` or ``admit_with_prefix``,
  ``advance`` per scheduled stream; when drafting, ``advance_speculative`` with nothing to
  roll back (a drafting step without a slot mapping, as ``advance``; ``allocate_speculative``
  would build one per position, which vLLM leaves to its model runner) and ``rollback``
  after verification; ``extend_content`` for generated tokens), ``coordinator.free``; a pool
  per group (or one shared pool where the trace says so), caps reserved at admission;
* **kvunits raw**: the untyped core behind it (plain ints), the same calls;
* **kvunits batch** (streaming traces, the shared prompt's too): every running stream's step
  of an engine step in one call (``Stepper.advance_all``; where a stream's prompt chunk runs
  beside the others' decodes, ``Stepper.advance_each``, one tuple of counts per stream: the
  scheduler holds the counts and knows which steps have chunks); in the speculative traces, every
  running stream's rollback of its latest step's rejected drafts and its next speculative
  step in one call (``Stepper.advance_speculative_all``; where streams in their prompt's
  chunks run beside the drafting ones, ``Stepper.advance_speculative_each``, each stream's own
  counts), in *spec generated* with what each
  stream's latest step produced (``Stepper.advance_speculative_all_with_content``: one
  ``ContentBatch`` per sequence, each stream's keys); in the *generated* prefix trace, every
  running stream's step and the tokens they sampled (one ``ContentKeys`` of the batch's
  tokens, one of their audio) in one call (``Stepper.advance_with_content_all``);
* **kvunits fused** (speculative traces): per stream, that rollback and that step in one call
  (``Stepper.advance_speculative``), where *typed* makes two (the step, then ``rollback``
  after verification); in *spec generated*, with what the stream's latest step
  produced (``Stepper.advance_speculative_with_content``), where typed appends it after the
  step (``extend_content`` per sequence);
* **kvunits content** (the *generated* prefix trace): per running stream, its step and the
  token it sampled (and the audio that came with it) in one call
  (``Stepper.advance_with_content``), where *typed* makes three (``advance``, then
  ``extend_content`` per sequence); a new stream's first step too.

The work is the same on every side and checked: before timing, the sides run side by side and,
after every engine step, every running stream has the same length on each, and the same number
of blocks held in each group (a speculative trace's rollback returns the blocks only rejected
drafts used, which vLLM keeps for the next step: there kvunits holds at most one block less;
the fused and batched sides roll back with the next step, so between steps they hold what
vLLM holds, and their length is compared less the drafts still to roll back).
A trace on which kvunits does other work by design is named, not timed: with prefix caching
kvunits gives each sequence its own hit (the audio's encoder tokens, the text's tokens), where
vLLM takes the one hit every group serves on one token axis. Where an admission's groups hit at
other token positions (`split_hit`) and the blocks held then differ from vLLM's (the pooled
audio beside chunked local attention, whose current chunk needs no cached block before it),
the row says "not compared" and gives no ratio; where they hold the same blocks (the text
takes a cached block where vLLM takes a fresh one: *prefix prompt*'s second wave), it is
compared as any other.
Neither side builds per-token slot mappings (vLLM leaves them to its model runner; kvunits'
``advance`` returns none, and ``allocate`` would build them per block).

Timing: CPU time of this process (`CLOCK`) around the allocator calls of each engine step, less
the cost of reading the clock (calibrated), with the garbage collector paused. Rounds alternate
the sides, the order rotated each round; a trace's ratio is the median of its rounds' paired
ratios (vLLM time ÷ kvunits time of one round), printed with their spread (lowest–highest).
Untimed on the vLLM side: building requests, the scheduler's bookkeeping (``num_computed_tokens``,
appending sampled tokens), except in the *generated* prefix trace, where appending a token runs
vLLM's block hasher, the work kvunits' ``extend_content`` does, and both are timed. There the
tokens an engine step sampled (the model's output) and the lists of their keys are made before
the timed region on both sides; kvunits' timed region makes their ``ContentKeys`` (its typed
input, checked when made), vLLM's appends them to its requests. On both sides an engine
step's arguments are made before its timed region, as a scheduler holds them (per running
stream its request and counts; a batch's request ids, and its rejected drafts per stream), and
the loop that makes the calls with them is timed.

The traces (block size 16; "audio" is Voxtral Realtime's pooled sliding window of 750 encoder
tokens at P = 4 (189 pooled slots, 32 KV heads × 64), one pooled slot per text token; "text"
full attention (8 × 128); "sliding" a 512-token window and "chunked" 256-token chunks (8 ×
128)):

==========  =====================================================================
streams     N = 16, 64, 256, 1024 streams at once, audio + text, 32-token prompt
            then 1000 decode steps (200 at 1024 streams)
groups      64 streams: text; + sliding; + chunked; + audio
pool        64 streams of text + sliding, one pool per group, then one shared pool
prefix      64 streams sharing one prompt (audio + text); *prompt*: only the prompt
            is hashed; *generated*: every generated token is hashed too, as vLLM
            hashes a request's tokens as they are appended
spec        64 streams, 4 draft tokens a step, a seeded acceptance of 0..4 then a
            rollback of the rest; text, then text + sliding; then text with prefix
            caching on (vLLM's default), every step's output cached: its accepted
            drafts and the token sampled after them appended as vLLM's
            ``update_from_output`` appends them (*generated*); then text + sliding +
            chunked, audio + text, and text with 8 draft tokens a step
short       64 streams of short answers: text drafting 3 tokens a step for 5 steps;
            audio + text sharing one prompt, 20 decode steps; text sharing one
            prompt, drafting 3 tokens a step for 5 steps
prefill     4 streams at once (64 in all) of text, prompts of 8k / 32k / 128k tokens
            in 8192-token chunks, then 128 decode steps
==========  =====================================================================

``--held-out`` runs, instead, variants no change was tuned on (`held_out`): stream counts
that are not powers of two, chunked prompts of 500 and 16k tokens, short answers (20 decode
steps: admissions, first steps and ends weigh), three groups in one pool, a shared prompt on
three groups, every generated token cached on one group, 2 drafts, drafting at 256 streams
and in a shared pool, four groups at 256 streams; requests of mixed lengths (each
prompt and answer drawn: a step's streams at different stages); prompts of 2,048 tokens in
chunks of 512 with prefix caching on (vLLM's defaults: each chunk registers the blocks it
fills); and one prompt given again and again in a pool of 10,000 blocks (each request
recomputes its last block: thousands of cached blocks hold one content).

``--sweep SEED`` runs, instead, 40 random traces drawn from that seed (`sweep`): any groups,
stream counts, prompt and chunk sizes, answers of 5 to 400 steps, drafting, prefix caching,
one pool or one per group, mixed lengths; each a row (traces this replay cannot model are
drawn again). A new seed is a new held-out set: the way session 32 found short requests'
ends, admissions and first steps after a hit far slower than their decode steps.

``--paths`` times nothing: it replays each selected trace once on kvunits' typed side and
counts the calls that left the generated functions for the core's boundary or general plans
(or compacted a slab), by the line that sent them there and the condition on it (`paths`).
A class of trace that leaves them often is one the fast paths do not cover yet: with
``--sweep 3`` it showed a window passed over by each prefill chunk (session 33).

``--memory`` measures each side's allocator memory (tracemalloc, counting only allocations made
in the allocator's own files: ``vllm/v1/core`` and ``kvunits/runtime``) with 1024 streams of
audio + text: bytes per held block and per request (two fills with different held blocks
separate the two), what stays allocated after every request is freed, and what the allocator
held when built (vLLM makes a block object per pool block then; kvunits' pools are counters).

vLLM is not a dependency of kvunits. Make the venv ``benchmarks/vllm-nodeps.txt`` describes,
then::

    .venv-vllm/bin/python benchmarks/vs_vllm.py             # the whole family, one table
    .venv-vllm/bin/python benchmarks/vs_vllm.py --memory    # memory per block and request
    .venv-vllm/bin/python benchmarks/vs_vllm.py --held-out  # traces outside the family
    .venv-vllm/bin/python benchmarks/vs_vllm.py --sweep 7   # 40 random traces of seed 7
    .venv/bin/python benchmarks/vs_vllm.py --paths --sweep 7  # where they leave the fast paths
    .venv/bin/python benchmarks/vs_vllm.py --paths --paths-side batch --sweep 7  # one call a step
    .venv/bin/python benchmarks/vs_vllm.py --quick          # no vLLM: kvunits alone, says so

Not imported by the test suite's timed paths (importing vLLM takes ~10 s);
``tests/runtime/test_benchmark.py`` runs a small trace without vLLM.
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
import tracemalloc
import warnings
from array import array
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any, Final

import kvunits
from kvunits.contracts import (
    CacheDType,
    Chunk,
    ChunkedLocalLayer,
    Elements,
    EncoderTokens,
    EngineSpec,
    FullAttentionLayer,
    KVHeads,
    Layers,
    LayerSpec,
    ModelSpec,
    PoolBlocks,
    PoolFactor,
    SlidingWindowLayer,
    Tokens,
    Window,
    group_layers,
)
from kvunits.contracts.deploy import RankBytes
from kvunits.contracts.internal import admission_cap, magnitude, manager_ints
from kvunits.runtime import ContentBatch, ContentKeys, KVCacheCoordinator

BLOCK = 16
P = 4
VOCAB = 32000

#: The clock around the allocator calls: this process's CPU time. On a shared machine, time
#: spent descheduled would land in one side and not the other.
CLOCK = time.process_time_ns


# -- the traces ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trace:
    """One trace of the family.

    Attributes:
        row: the table's row (what varies along it).
        label: this trace's column in that row.
        groups: the layer groups, from `GROUP_NAMES`.
        streams: streams running at once.
        prompt: prompt tokens of each stream.
        chunk: prefill tokens per step.
        decode: decode steps per stream.
        total: stream-steps in all (the last engine step schedules only what is left).
        shared_pool: kvunits draws every group from one pool (vLLM always does).
        prefix: "none", "prompt" (one prompt shared by every stream, hashed), "generated"
            (that, and every generated token hashed too) or "unique" (prefix caching on, each
            stream's prompt its own: no hit, every block registered, a service's common case)
            or "system" (the first half of the prompt shared, a system prompt, the rest each
            stream's own).
        spec: draft tokens per decode step (0: none).
        mixed: each stream's prompt and decode steps drawn (seeded) from 1 .. ``prompt`` and
            1 .. ``decode``, as a server's requests come: streams at different stages.
        stagger: each stream's decode steps drawn (seeded) from 1 .. ``decode``, its prompt
            whole (so a shared one stays whole): the streams that replace ended ones start at
            other engine steps, out of phase with the rest, as a server's are; without it,
            streams admitted together fill and cross blocks at the same engine steps.
        pool: the blocks of the pool (one group only; 0: as many as the streams' caps, a
            stream's whole length each). A pool far larger than the streams need keeps the
            blocks of ended requests cached longer: a prompt given again and again (the
            shared prompt's last block recomputed by every request) then leaves thousands of
            blocks holding one content, as a server's pool does.
    """

    row: str
    label: str
    groups: tuple[str, ...]
    streams: int = 64
    prompt: int = 32
    chunk: int = 32
    decode: int = 1000
    total: int = 100_000
    shared_pool: bool = False
    prefix: str = "none"
    spec: int = 0
    mixed: bool = False
    pool: int = 0
    stagger: bool = False

    def __post_init__(self) -> None:
        # What this replay cannot model, refused by name (a sweep of random traces found each):
        # a prefix hit is taken from the first step, which is the whole prompt only when it
        # fits a chunk (a hit past the first chunk would shorten a schedule made without it)
        # and is the shared prompt (not one of a drawn length); one pool for the audio and
        # another group needs one page size, which kvunits plans with
        # ``kv_cache_layout = 'shared'``, not this trace's one-layer groups.
        if self.prefix in ("prompt", "generated") and self.prompt > self.chunk:
            raise ValueError(
                f"trace {self.name!r}: prefix caching with a prompt of {self.prompt} tokens in "
                f"chunks of {self.chunk}: the replay takes the hit from the first step only, "
                "so the prompt must fit one chunk"
            )
        if self.prefix != "none" and self.mixed:
            raise ValueError(
                f"trace {self.name!r}: prefix caching with prompts of drawn lengths: every "
                "stream's content is the one shared prompt, whose hit may pass a shorter "
                "prompt's first step"
            )
        if self.pool and len(self.groups) > 1:
            raise ValueError(
                f"trace {self.name!r}: a pool size with {len(self.groups)} groups (vLLM's one "
                "pool against kvunits' one per group would not hold the same blocks)"
            )
        if self.shared_pool and "audio" in self.groups and len(self.groups) > 1:
            raise ValueError(
                f"trace {self.name!r}: one pool for the audio and other groups needs their "
                "pages unified (kv_cache_layout = 'shared'), which this replay does not plan"
            )

    @property
    def name(self) -> str:
        return f"{self.row} {self.label}"

    @property
    def length(self) -> int:
        """Tokens with a slot at the end of a stream (its drafts included)."""
        return self.prompt + self.decode + self.spec


GROUP_NAMES = ("audio", "text", "sliding", "chunked")


def held_out(quick: bool = False) -> list[Trace]:
    """Variants of the family that no change was tuned on (session 30's sweep): where a rule
    fitted to the family's parameters would show (a table grown by doubling at 300 streams,
    a first step or a prefill chunk costing what a decode step saves)."""
    two = ("audio", "text")
    three = ("text", "sliding", "chunked")
    traces = [
        Trace("held", "streams 100", two, streams=100),
        Trace("held", "streams 300", two, streams=300, decode=600, total=200_000),
        Trace("held", "prompt 500 chunk 256", two, prompt=500, chunk=256, decode=300),
        Trace("held", "short answers", two, decode=20, total=60_000),
        Trace("held", "3 groups shared", three, shared_pool=True),
        Trace("held", "prefix prompt 3 groups", three, prefix="prompt"),
        Trace("held", "prefix generated 1 group", ("text",), prefix="generated"),
        Trace("held", "spec 2 drafts", ("text",), spec=2, chunk=32),
        Trace("held", "spec 4, 256 streams", ("text",), spec=4, streams=256, total=200_000),
        Trace("held", "spec shared pool", ("text", "sliding"), spec=4, shared_pool=True),
        Trace(
            "held",
            "prefill 16k chunk 2k",
            ("text",),
            streams=4,
            prompt=16_384,
            chunk=2048,
            decode=128,
            total=64 * 136,
        ),
        Trace("held", "4 groups 256 streams", (*three, "audio"), streams=256, total=200_000),
        # (session 31) Requests as a server gets them: each prompt and answer its own length,
        # so a step's streams are at different stages (chunked prefill beside decode).
        Trace("held", "mixed lengths", two, prompt=2000, chunk=512, decode=1000, mixed=True),
        Trace("held", "mixed short", ("text",), prompt=32, decode=200, total=60_000, mixed=True),
        # (session 46, whose change was measured on it) Every generated token cached, the
        # streams out of phase (each answer its own length): at most engine steps some fill a
        # block and others cross one, where the family's, admitted together, do it at once.
        Trace("held", "prefix generated out of phase", two, prefix="generated", stagger=True),
        # (session 41) vLLM's defaults: prefix caching on, long prompts in chunks (each chunk
        # registers the blocks it fills, the prompt's hashes known from its admission).
        Trace(
            "held",
            "prefix chunked prompts",
            ("text",),
            streams=16,
            prompt=2048,
            chunk=512,
            decode=64,
            total=16 * 68 * 4,
            prefix="unique",
        ),
        # (session 42) One prompt given again and again (retries, an evaluation harness,
        # parallel sampling) in a pool of 10,000 blocks: every request recomputes the prompt's
        # last block and registers it under the same hash, and the blocks of ended requests
        # stay cached until reused, thousands holding one content.
        Trace(
            "held",
            "one prompt again",
            ("text",),
            streams=8,
            decode=2,
            total=30_000,
            prefix="prompt",
            pool=10_000,
        ),
    ]
    if quick:
        traces = [replace(t, total=max(t.streams * 4, t.total // 50)) for t in traces]
    return traces


def sweep(seed: int, count: int = 40, quick: bool = False) -> list[Trace]:
    """``count`` random traces of ``seed``: groups, streams, prompt, chunk, answer length,
    drafts, prefix caching, pools and mixed lengths drawn independently (a trace this replay
    cannot model, `Trace.__post_init__`, drawn again), at most 30,000 stream-steps each."""
    rng = random.Random(seed)
    traces: list[Trace] = []
    while len(traces) < count:
        groups = tuple(rng.sample(GROUP_NAMES, rng.choice((1, 1, 2, 2, 3, 4))))
        streams = rng.choice((8, 48, 200, 600))
        try:
            trace = Trace(
                "sweep",
                f"{seed}.{len(traces)}",
                groups,
                streams=streams,
                prompt=rng.choice((1, 17, 100, 700, 3000)),
                chunk=rng.choice((16, 64, 512, 2048)),
                decode=rng.choice((5, 50, 400)),
                total=min(30_000, streams * 200),
                shared_pool=rng.random() < 0.3,
                prefix=rng.choice(("none", "none", "prompt", "generated")),
                spec=rng.choice((0, 0, 1, 3, 6)),
                mixed=rng.random() < 0.4,
            )
        except ValueError:
            continue
        traces.append(trace)
    if quick:
        traces = [replace(t, total=max(t.streams * 4, t.total // 50)) for t in traces]
    return traces


def family(quick: bool = False) -> list[Trace]:
    """The traces of issue 25's table, in order (``quick``: far fewer stream-steps each)."""
    two = ("audio", "text")
    traces = [
        Trace("streams", "16", two, streams=16),
        Trace("streams", "64", two),
        Trace("streams", "256", two, streams=256, decode=1000, total=300_000),
        Trace("streams", "1024", two, streams=1024, decode=200, total=300_000),
        Trace("groups", "1", ("text",)),
        Trace("groups", "2", ("text", "sliding")),
        Trace("groups", "3", ("text", "sliding", "chunked")),
        Trace("groups", "4", ("text", "sliding", "chunked", "audio")),
        Trace("pool", "per group", ("text", "sliding")),
        Trace("pool", "shared", ("text", "sliding"), shared_pool=True),
        Trace("prefix", "prompt", two, prefix="prompt"),
        Trace("prefix", "generated", two, prefix="generated"),
        Trace("spec", "1 group", ("text",), spec=4, chunk=32),
        Trace("spec", "2 groups", ("text", "sliding"), spec=4, chunk=32),
        Trace("spec", "generated", ("text",), spec=4, chunk=32, prefix="generated"),
        # Drafting beyond the table (session 27): three groups, the pooled audio
        # window, 8 drafts a step.
        Trace("spec", "3 groups", ("text", "sliding", "chunked"), spec=4, chunk=32),
        Trace("spec", "audio + text", two, spec=4, chunk=32),
        Trace("spec", "8 drafts", ("text",), spec=8, chunk=32),
        # Short answers (session 32's sweep): a request's admission, first step and end weigh
        # as much as its decode steps; drafting, prefix caching (vLLM's default) and both.
        Trace("short", "drafting", ("text",), decode=5, spec=3, total=30_000),
        Trace("short", "prefix", two, decode=20, prefix="prompt", total=60_000),
        Trace("short", "prefix + drafting", ("text",), decode=5, spec=3, prefix="prompt",
              total=30_000),
        # Prefix caching on, prompts not seen before (session 34): each request's prompt of
        # 512 tokens in one chunk registers 32 blocks, evicting as many cached ones.
        Trace("prefix", "unique prompts", ("text",), prompt=512, chunk=512, decode=32,
              prefix="unique", total=30_000),
    ]
    # 64 streams in all, 16 waves of 4: a round's kvunits time is some 8 ms, not 2, so that a
    # round's ratio is a measurement (at 16 streams the rounds of one run spread 4-10x).
    for k in (8, 32, 128):
        prompt = k * 1024
        steps = -(-prompt // 8192) + 128
        traces.append(
            Trace(
                "prefill",
                f"{k}k",
                ("text",),
                streams=4,
                prompt=prompt,
                chunk=8192,
                decode=128,
                total=64 * steps,
            )
        )
    if quick:
        traces = [replace(t, total=max(t.streams * 4, t.total // 50)) for t in traces]
    return traces


#: One stream's step: (new tokens, of which drafts, drafts accepted).
Step = tuple[int, int, int]


@dataclass(frozen=True)
class Schedule:
    """The engine steps of a trace: per engine step, the slots running (each takes its stream's
    next step), the (slot, stream) admitted (each takes its first step), and the slots whose
    stream ended with the step; and each stream's steps."""

    steps: list[tuple[list[int], list[tuple[int, int]], list[int]]]
    plans: list[list[Step]]
    stream_steps: int


def stream_plan(trace: Trace, rng: random.Random) -> list[Step]:
    """One stream's steps: its prompt in chunks, then decode steps (with ``spec`` drafts each,
    of which a seeded 0 .. spec are accepted, until its length is reached)."""
    out: list[Step] = []
    left, decode = trace.prompt, trace.decode
    if trace.mixed:
        left, decode = rng.randint(1, trace.prompt), rng.randint(1, trace.decode)
    elif trace.stagger:
        decode = rng.randint(1, trace.decode)
    while left > 0:
        n = min(trace.chunk, left)
        out.append((n, 0, 0))
        left -= n
    done = 0
    while done < decode:
        if trace.spec:
            accepted = min(rng.randrange(trace.spec + 1), decode - done - 1)
            out.append((1 + trace.spec, trace.spec, accepted))
            done += 1 + accepted
        else:
            out.append((1, 0, 0))
            done += 1
    return out


def make_schedule(trace: Trace, seed: int = 0) -> Schedule:
    """``trace.streams`` slots in lockstep; a stream that ends is freed in that engine step's
    output processing and its slot takes the next stream at the next engine step."""
    rng = random.Random(seed)
    plans: list[list[Step]] = []
    slots: list[int | None] = [None] * trace.streams
    at = [0] * trace.streams
    waiting = list(range(trace.streams))
    steps: list[tuple[list[int], list[tuple[int, int]], list[int]]] = []
    total = 0
    while total < trace.total:
        budget = min(trace.streams, trace.total - total)
        running = [s for s in range(trace.streams) if slots[s] is not None][:budget]
        new = []
        for s in waiting[: max(0, budget - len(running))]:
            new.append((s, len(plans)))
            plans.append(stream_plan(trace, rng))
        waiting = waiting[len(new) :]
        for s, i in new:
            slots[s], at[s] = i, 0
        freed = []
        for s in running + [s for s, _ in new]:
            at[s] += 1
            stream = slots[s]
            assert stream is not None
            if at[s] == len(plans[stream]):
                freed.append(s)
                slots[s] = None
                waiting.append(s)
        total += len(running) + len(new)
        steps.append((running, new, freed))
    return Schedule(steps, plans, total)


def contents(trace: Trace, count: int, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """Each stream's prompt content: token ids, and one key per encoder token of its audio
    (one prompt for every stream when the trace shares it)."""
    rng = random.Random(seed)

    def one() -> tuple[list[int], list[int]]:
        # Random bytes read as integers: a 128k-token prompt in milliseconds, not seconds.
        tokens = array("I", rng.randbytes(4 * trace.prompt))
        frames = array("Q", rng.randbytes(8 * P * trace.prompt))
        return [t % VOCAB for t in tokens], [f >> 2 for f in frames]  # ids; keys < 2**62

    if trace.prefix in ("prompt", "generated"):
        common = one()
        return [common] * count
    if trace.prefix == "system":  # a shared first half (a system prompt), then its own
        (tokens, frames), half = one(), trace.prompt // 2
        return [
            (tokens[:half] + own[half:], frames[: P * half] + keys[P * half :])
            for own, keys in (one() for _ in range(count))
        ]
    return [one() for _ in range(count)]


def sampled(stream: int, k: int) -> int:
    """The token stream ``stream`` samples at its ``k``-th decode position (both sides)."""
    return (stream * 7919 + k * 104729) % VOCAB


def step_tokens(stream: int, decoded: int, step: Step) -> list[int]:
    """The tokens a step of stream ``stream`` (``decoded`` tokens so far) appends to it: its
    accepted drafts and the token sampled after them (one when it drafts none), as vLLM's
    ``update_from_output`` appends a speculative step's output (both sides)."""
    return [sampled(stream, decoded + j) for j in range(1 + step[2])]


# -- kvunits ----------------------------------------------------------------------------------


def kvunits_layer(name: str) -> LayerSpec:
    """The layer of one group of the family."""
    bf16 = CacheDType.bfloat16
    if name == "audio":
        return SlidingWindowLayer(
            sliding_window=Window(750, EncoderTokens),
            pool=PoolFactor(P),
            kv_heads=KVHeads(32),
            head_size=Elements(64),
            dtype=bf16,
        )
    if name == "sliding":
        return SlidingWindowLayer(
            sliding_window=Window(512, Tokens),
            kv_heads=KVHeads(8),
            head_size=Elements(128),
            dtype=bf16,
        )
    if name == "chunked":
        return ChunkedLocalLayer(
            chunk=Chunk(256, Tokens), kv_heads=KVHeads(8), head_size=Elements(128), dtype=bf16
        )
    return FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128), dtype=bf16)


def _unit_of(group: str) -> Any:
    """The step unit of a trace's group (audio groups step in encoder tokens)."""
    return EncoderTokens if group == "audio" else Tokens


def kvunits_coordinator(trace: Trace) -> KVCacheCoordinator:
    """The trace's coordinator: pools that never run short for its streams."""
    model = ModelSpec.stacked("family", {g: (kvunits_layer(g), Layers(1)) for g in trace.groups})
    in_flight = max(trace.chunk, 1 + trace.spec)
    engine = EngineSpec(
        block_size_slots=BLOCK,
        max_model_len=Tokens(trace.length),
        max_num_batched_tokens=Tokens(in_flight),
        max_encoder_len=EncoderTokens(P * trace.length),
        max_encoder_tokens_per_step=EncoderTokens(P * in_flight),
        memory_budget=RankBytes(1 << 40),
    )
    groups, _ = group_layers(model, engine)
    caps = []
    for g in groups:
        ints = manager_ints(g.manager)
        caps.append(
            admission_cap(g.manager, magnitude(g.limits.max_in_flight), magnitude(g.limits.max_len))
        )
        assert ints.block_size_slots == BLOCK
    if trace.pool:
        if trace.pool < 1 + trace.streams * caps[0]:
            raise ValueError(f"trace {trace.name!r}: a pool of {trace.pool} blocks is short")
        return KVCacheCoordinator(groups, PoolBlocks(trace.pool))
    if trace.shared_pool:
        return KVCacheCoordinator(groups, PoolBlocks(1 + trace.streams * sum(caps)))
    return KVCacheCoordinator(groups, [PoolBlocks(1 + trace.streams * c) for c in caps])


@dataclass
class Seen:
    """What the untimed side-by-side run recorded, per engine step: per running stream, its
    length and the blocks it holds per group."""

    steps: list[dict[int, tuple[int, tuple[int, ...]]]] = field(default_factory=list)
    hits: dict[str, tuple[int, int]] = field(default_factory=dict)
    # A kvunits side's first admission whose groups hit at different token positions (see
    # `split_hit`): None while every admission's groups agree.
    split: str | None = None



def positions_per_token(trace: Trace) -> list[int]:
    """Per group of ``trace``, the positions of its kernel unit a token is: P encoder tokens
    for the audio, one for the others."""
    return [P if g == "audio" else 1 for g in trace.groups]

def split_hit(trace: Trace, request: str, hits: Sequence[int]) -> str | None:
    """Where one admission's hits, per group in its kernel unit (P encoder tokens a token for
    the audio), are not one token position: what it says, else None.

    vLLM runs every group on one token axis and takes the hit all of them serve. kvunits gives
    each sequence of another unit its own hit (the audio's encoder tokens, the text's tokens:
    `kvunits.runtime.prefix_cache`), so its first step there starts each group at its own
    hit: where that holds other blocks than vLLM's, other work, which no ratio compares
    (`measure`)."""
    scale = positions_per_token(trace)
    tokens = [h // s for h, s in zip(hits, scale, strict=True)]
    if len(set(tokens)) <= 1:
        return None
    at = ", ".join(f"{g} {t}" for g, t in zip(trace.groups, tokens, strict=True))
    return (
        f"request {request} hits at other token positions per group ({at}): kvunits gives the "
        "audio and the text their own hits, vLLM one hit on one token axis"
    )


class KvunitsSide:
    """A replay of a schedule on a fresh kvunits coordinator: typed, raw or batched."""

    def __init__(self, trace: Trace, schedule: Schedule, mode: str) -> None:
        self.trace, self.schedule, self.mode = trace, schedule, mode
        self.coordinator: KVCacheCoordinator | None = None  # the latest run's

    def run(self, watch: Seen | None = None) -> int:
        """Replay the schedule; return the CPU ns spent in allocator calls."""
        trace, schedule = self.trace, self.schedule
        coord = self.coordinator = kvunits_coordinator(trace)
        handles: list[Any] = [coord.group(g, _unit_of(g)) for g in trace.groups]
        scale = positions_per_token(trace)
        stepper: Any = coord.stepper(*handles)
        core = coord._core
        n = len(handles)
        count = len(schedule.plans)
        plans = schedule.plans
        rids = [f"s{i}" for i in range(count)]
        lengths = [h.unit(trace.length * s) for h, s in zip(handles, scale, strict=True)]
        raw_lengths = [trace.length] * n  # slots: one pooled slot per token
        # The counts a scheduler holds, one object per value (as vLLM's ints are).
        typed: dict[int, tuple[Any, ...]] = {}
        raw: dict[int, list[int]] = {}
        for plan in schedule.plans:
            for t, _, a in plan:
                for v in (t, a, t - 1 - a, t - 1):
                    if v >= 0 and v not in typed:
                        typed[v] = tuple(h.unit(v * s) for h, s in zip(handles, scale, strict=True))
                        raw[v] = [v * s for s in scale]
        # Per group, the count of a new stream's first step after each possible hit.
        q_of = [
            {v: h.unit(v) for v in range(0, plans[0][0][0] * s + 1)}
            if trace.prefix != "none"
            else {}
            for h, s in zip(handles, scale, strict=True)
        ]
        ranks = list(enumerate(scale))
        prefixes: list[Any] = []
        parts: list[Any] = []
        sequences: list[Any] = []  # per stream, (handle, unit) per sequence with content
        if trace.prefix != "none":
            for tokens, frames in contents(trace, count):
                hashes = tuple(
                    h.block_hashes(
                        ContentKeys(frames, EncoderTokens)
                        if g == "audio"
                        else ContentKeys(tokens, Tokens)
                    )
                    for h, g in zip(handles, trace.groups, strict=True)
                )
                prefixes.append(hashes)
                parts.append({h.index: hs.part() for h, hs in zip(handles, hashes, strict=True)})
            by_unit: dict[Any, Any] = {}
            for h, g in zip(handles, trace.groups, strict=True):
                by_unit.setdefault(EncoderTokens if g == "audio" else Tokens, h)
            sequences = list(by_unit.items())
        slot_of = [0] * trace.streams
        at = [0] * trace.streams
        decoded = [0] * trace.streams
        perf = CLOCK
        elapsed = 0
        reads = 0
        generated = trace.prefix == "generated"
        mode = self.mode
        allocate, admit = getattr(stepper, "advance", stepper.allocate), stepper.admit
        admit_prefix = stepper.admit_with_prefix
        # A drafting step without a slot mapping (as ``advance``; ``allocate_speculative`` would
        # build one per position, which vLLM leaves to its model runner): the fused call
        # with nothing to roll back first, the rollback after verification a call of its own.
        speculative, rollback = stepper.advance_speculative, stepper.rollback
        extend, free = coord.extend_content, coord.free
        c_step = getattr(core, "advance_step", core.allocate_step)
        c_admit, c_admit_prefix, c_free = core.admit, core.admit_with_prefix, core.free
        c_spec, c_rollback = core.advance_speculative, core.rollback
        c_extend = core.extend_content
        batch = stepper.advance_all if mode == "batch" and not trace.spec else None
        # An engine step whose prefill chunks run beside its decodes: each request's own
        # counts in one call (the same counts for all: ``advance_all``).
        each: Any = getattr(stepper, "advance_each", None) if batch is not None else None
        counts: Any = None
        # A drafting scheduler's one call per step (fused) or per engine step (batch): the
        # latest step's rejected drafts rolled back with the next speculative step.
        fused = mode in ("fused", "batch") and trace.spec > 0
        respec: Any = getattr(stepper, "advance_speculative", None)
        # Drafting with every generated token cached, one call per stream-step (fused): the
        # step, with what the stream's latest step produced (its content, the previous engine
        # step's keys: ``produced``), where typed and batch append it after the step.
        respec_content: Any = getattr(stepper, "advance_speculative_with_content", None)
        fused_content = mode == "fused" and generated and respec_content is not None
        # The same per engine step (batch): one call for the batch's steps and contents.
        respec_content_all: Any = getattr(stepper, "advance_speculative_all_with_content", None)
        batch_content = (
            mode == "batch" and generated and trace.spec > 0 and respec_content_all is not None
        )
        produced: list[Any] = [None] * trace.streams
        respec_all: Any = getattr(stepper, "advance_speculative_all", None)
        # A drafting engine step whose prompt chunks run beside its drafting decodes: each
        # stream's own counts in one call (the same counts for all: ``respec_all``).
        respec_each: Any = getattr(stepper, "advance_speculative_each", None)
        each_args: Any = None
        # A generating scheduler's one call per stream-step (content) or per engine step
        # (batch): the step and its sampled token (and the audio that came with it).
        with_content: Any = getattr(stepper, "advance_with_content", None)
        with_content_all: Any = getattr(stepper, "advance_with_content_all", None)
        content_mode = mode in ("content", "batch") and generated and not trace.spec
        content_all = mode == "batch" and generated and not trace.spec
        pending = [0] * trace.streams  # per slot: its latest step's rejected drafts
        zeros = typed[0]
        gc.collect()
        gc.disable()
        try:
            for running, new, freed in schedule.steps:
                if generated:
                    # The tokens the engine step sampled (the model's output, made before the
                    # timed region on both sides) and the keys of each sequence: per stream
                    # (a running one's, then a new one's) a list per sequence, or the batch's
                    # one list per sequence (its audio: P keys a token).
                    keys_now = [
                        [[k for k in ts for _ in range(P)] if unit is EncoderTokens else ts
                         for unit, _ in sequences]
                        for ts in [
                            step_tokens(slot_of[s], decoded[s], plans[slot_of[s]][at[s]])
                            for s in running
                        ]
                        + [step_tokens(i, 0, plans[i][0]) for _, i in new]
                    ]
                    if content_all:
                        batch_keys = [
                            [k for keys in keys_now[: len(running)] for k in keys[j]]
                            for j in range(len(sequences))
                        ]
                # The running streams' calls, with the counts a scheduler holds (made before the
                # timed region, as on vLLM's side): per stream, or the batch's.
                ids = [rids[slot_of[s]] for s in running]
                steps = [plans[slot_of[s]][at[s]] for s in running]
                sampling = ids + [rids[i] for _, i in new]  # the streams that sample a token
                calls: list[Any] = []
                if fused and mode == "batch":
                    t, k, _ = steps[0] if running else (0, 0, 0)
                    # Each request's rejected counts in a tuple of its own, as a scheduler
                    # that counts each request's rejected drafts makes them (the quantities
                    # are shared: one object per value).
                    batch_args = (
                        typed[t - k],
                        typed[k],
                        [tuple([*typed[pending[s]]]) for s in running],
                    )
                    outs = [produced[s] for s in running] if batch_content else []
                    each_args = (
                        (
                            [typed[t - k] for t, k, _ in steps],
                            [typed[k] for _, k, _ in steps],
                            batch_args[2],
                        )
                        if any(x[:2] != (t, k) for x in steps) and not batch_content
                        else None
                    )
                elif fused_content:
                    calls = [
                        (rid, typed[t - k], typed[k], typed[pending[s]], produced[s])
                        if k
                        else (rid, typed[t])
                        for rid, s, (t, k, _) in zip(ids, running, steps, strict=True)
                    ]
                elif fused:
                    calls = [
                        (rid, typed[t - k], typed[k], typed[pending[s]]) if k else (rid, typed[t])
                        for rid, s, (t, k, _) in zip(ids, running, steps, strict=True)
                    ]
                elif content_all or batch is not None:
                    first = typed[steps[0][0]] if running else zeros
                    counts = (
                        [typed[t] for t, _, _ in steps]
                        if each is not None and any(t != steps[0][0] for t, _, _ in steps)
                        else None
                    )
                elif content_mode:
                    calls = [(rid, typed[t]) for rid, (t, _, _) in zip(ids, steps, strict=True)]
                elif mode == "raw":
                    calls = [
                        (rid, raw[t], raw[k], raw[k - a] if k - a else None) if k else (rid, raw[t])
                        for rid, (t, k, a) in zip(ids, steps, strict=True)
                    ]
                else:
                    calls = [
                        (rid, typed[t - k], typed[k], typed[k - a] if k - a else None)
                        if k
                        else (rid, typed[t])
                        for rid, (t, k, a) in zip(ids, steps, strict=True)
                    ]
                t0 = perf()
                if each_args is not None:
                    num, look, rejected = each_args
                    respec_each(ids, num, lookahead=look, rejected=rejected)
                elif fused and mode == "batch" and running:
                    num, look, rejected = batch_args
                    if batch_content:
                        respec_content_all(
                            ids,
                            *num,
                            lookahead=look,
                            rejected=rejected,
                            content=[
                                (h, ContentBatch([out[j] for out in outs], unit))
                                for j, (unit, h) in enumerate(sequences)
                            ],
                        )
                    else:
                        respec_all(ids, *num, lookahead=look, rejected=rejected)
                elif fused_content:
                    for call in calls:
                        if len(call) == 5:
                            rid, num, look, given, out = call
                            respec_content(
                                rid,
                                *num,
                                lookahead=look,
                                rejected=given,
                                content=[
                                    (h, ContentKeys(k, unit))
                                    for (unit, h), k in zip(sequences, out, strict=True)
                                ],
                            )
                        else:
                            allocate(call[0], *call[1])
                elif fused:
                    for call in calls:
                        if len(call) == 4:
                            rid, num, look, given = call
                            respec(rid, *num, lookahead=look, rejected=given)
                        else:
                            allocate(call[0], *call[1])
                elif content_all and running:
                    # The engine step's sampled tokens, one per stream in batch order, and their
                    # audio (P encoder tokens each): one ContentKeys per sequence.
                    with_content_all(
                        ids,
                        *first,
                        content=[
                            (h, ContentKeys(keys, unit))
                            for (unit, h), keys in zip(sequences, batch_keys, strict=True)
                        ],
                    )
                elif content_mode and not content_all:
                    for (rid, num), keys in zip(calls, keys_now, strict=False):
                        with_content(
                            rid,
                            *num,
                            content=[
                                (h, ContentKeys(k, unit))
                                for (unit, h), k in zip(sequences, keys, strict=True)
                            ],
                        )
                elif counts is not None:
                    each(ids, counts)
                elif batch is not None and running:
                    batch(ids, *first)
                elif mode == "raw":
                    for call in calls:
                        if len(call) == 4:
                            rid, num, look, back = call
                            c_spec(rid, num, look, raw[0])
                            if back is not None:
                                c_rollback(rid, back)
                        else:
                            c_step(call[0], call[1])
                else:
                    for call in calls:
                        if len(call) == 4:
                            rid, num, look, back = call
                            speculative(rid, *num, lookahead=look, rejected=zeros)
                            if back is not None:
                                rollback(rid, *back)
                        else:
                            allocate(call[0], *call[1])
                for j, (_, i) in enumerate(new, len(running)):
                    rid = rids[i]
                    t = plans[i][0][0]
                    if mode == "raw":
                        if trace.prefix == "none":
                            c_admit(rid, raw_lengths)
                            c_step(rid, raw[t])
                        else:
                            hits = c_admit_prefix(rid, raw_lengths, parts[i])
                            if watch is not None and watch.split is None:
                                watch.split = split_hit(trace, rid, hits)
                            c_step(rid, [t * s - h for s, h in zip(scale, hits, strict=True)])
                    elif trace.prefix == "none":
                        admit(rid, *lengths)
                        allocate(rid, *typed[t])
                    else:
                        got = admit_prefix(rid, *lengths, prefix=prefixes[i])
                        if watch is not None and watch.split is None:
                            watch.split = split_hit(trace, rid, [magnitude(n) for n in got])
                        first_step = (q_of[g][t * s - magnitude(got[g])] for g, s in ranks)
                        if content_mode:  # its first step and its first sampled token
                            with_content(
                                rid,
                                *first_step,
                                content=[
                                    (h, ContentKeys(k, unit))
                                    for (unit, h), k in zip(sequences, keys_now[j], strict=True)
                                ],
                            )
                        else:
                            allocate(rid, *first_step)
                if generated and (fused_content or batch_content):
                    # What each stream's step produced goes with its next step's call (a
                    # stream's last step's output is appended by none: vLLM hashes it, and
                    # caches none of it either, the stream ending).
                    for j, s in enumerate(running + [s for s, _ in new]):
                        produced[s] = keys_now[j]
                elif generated and not content_mode:
                    # Each stream's sampled token (and the audio that came with it).
                    for rid, keys in zip(sampling, keys_now, strict=True):
                        for (unit, h), added in zip(sequences, keys, strict=True):
                            if mode == "raw":
                                c_extend(rid, h.index, added)
                            else:
                                extend(rid, h, ContentKeys(added, unit))
                elapsed += perf() - t0
                reads += 1
                if fused:
                    for s in running:
                        t, k, a = plans[slot_of[s]][at[s]]
                        pending[s] = k - a
                    for s, _ in new:
                        pending[s] = 0
                for s, i in new:
                    slot_of[s], at[s], decoded[s] = i, 0, 0
                for s in running + [s for s, _ in new]:
                    decoded[s] += 1 + plans[slot_of[s]][at[s]][2]
                    at[s] += 1
                if watch is not None:
                    slots = running + [s for s, _ in new]
                    watch.steps.append(self._look(coord, slots, slot_of, pending))
                for s in freed:
                    t0 = perf()
                    (c_free if mode == "raw" else free)(rids[slot_of[s]])
                    elapsed += perf() - t0
                    reads += 1
        finally:
            gc.enable()
        if watch is not None and trace.prefix != "none":
            for h, g in zip(handles, trace.groups, strict=True):
                stats = coord.prefix_cache_stats(h)
                watch.hits[g] = (magnitude(stats.hits), magnitude(stats.queried))
        del zeros
        return elapsed - reads * clock_cost()

    def _look(
        self, coord: KVCacheCoordinator, slots: list[int], slot_of: list[int], pending: list[int]
    ) -> dict[int, tuple[int, tuple[int, ...]]]:
        """Per stream, its length (less the drafts a fused side rolls back with its next
        step: ``pending``, in tokens) and its blocks held per group."""
        handles: list[Any] = [coord.group(g, _unit_of(g)) for g in self.trace.groups]
        tokens = [h for h, g in zip(handles, self.trace.groups, strict=True) if g != "audio"]
        out = {}
        for s in slots:
            rid = f"s{slot_of[s]}"
            length = magnitude(coord.seq_len(rid, tokens[0])) - pending[s] if tokens else 0
            held = tuple(sum(1 for b in coord.block_table(rid, h) if b) for h in handles)
            out[slot_of[s]] = (length, held)
        return out


# -- vLLM -------------------------------------------------------------------------------------


def import_vllm() -> dict[str, Any] | str:
    """vLLM's scheduler-side classes, or why they cannot be imported.

    kvunits' checkout root must not be on ``sys.path`` meanwhile: transformers (which vLLM
    imports) looks for a top-level ``kernels`` package, and the checkout's ``kernels/``
    directory (kvunits.kernels, which refuses the bare name) would answer."""
    warnings.filterwarnings("ignore")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    root = str(Path(__file__).resolve().parents[1])
    hidden = [p for p in sys.path if p in ("", ".", root) or Path(p or ".").resolve() == Path(root)]
    for p in hidden:
        sys.path.remove(p)
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
            "ChunkedLocalAttentionSpec": (
                "vllm.v1.kv_cache_interface",
                "ChunkedLocalAttentionSpec",
            ),
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
    finally:
        sys.path[:0] = hidden


def vllm_spec(v: dict[str, Any], name: str) -> Any:
    """vLLM's spec of one group of the family."""
    from fractions import Fraction

    bf16 = v["torch"].bfloat16
    if name == "audio":
        return v["SlidingWindowSpec"](
            block_size=BLOCK,
            num_kv_heads=32,
            head_size=64,
            dtype=bf16,
            sliding_window=-(-750 // P) + 1,  # vLLM 0.33 whisper_causal: cdiv(750, 4) + 1
            tokens_per_state=Fraction(1, P),
        )
    if name == "sliding":
        return v["SlidingWindowSpec"](
            block_size=BLOCK, num_kv_heads=8, head_size=128, dtype=bf16, sliding_window=512
        )
    if name == "chunked":
        return v["ChunkedLocalAttentionSpec"](
            block_size=BLOCK, num_kv_heads=8, head_size=128, dtype=bf16, attention_chunk_size=256
        )
    return v["FullAttentionSpec"](block_size=BLOCK, num_kv_heads=8, head_size=128, dtype=bf16)


def vllm_manager(v: dict[str, Any], trace: Trace, num_blocks: int, caching: bool) -> Any:
    """vLLM's KVCacheManager for the trace's groups, one pool of ``num_blocks``."""
    specs = [(f"{g}.0", vllm_spec(v, g)) for g in trace.groups]
    tensors = [
        v["KVCacheTensor"](
            size=spec.page_size_bytes * num_blocks,
            layers=[name],
            layer_stride=spec.page_size_bytes * num_blocks,
            block_stride=spec.page_size_bytes,
        )
        for name, spec in specs
    ]
    config = v["KVCacheConfig"](
        num_blocks=num_blocks,
        kv_cache_tensors=tensors,
        kv_cache_groups=[v["KVCacheGroupSpec"]([name], spec) for name, spec in specs],
    )
    return v["KVCacheManager"](
        kv_cache_config=config,
        max_model_len=trace.length,
        scheduler_block_size=BLOCK,
        hash_block_size=BLOCK,
        max_in_flight_tokens=trace.streams * max(trace.chunk, 1 + trace.spec),
        enable_caching=caching,
        log_stats=True,
    )


class VllmSide:
    """The same schedule through vLLM's KVCacheManager."""

    def __init__(self, v: dict[str, Any], trace: Trace, schedule: Schedule) -> None:
        self.v, self.trace, self.schedule = v, trace, schedule

    def run(self, watch: Seen | None = None) -> int:
        v, trace, schedule = self.v, self.trace, self.schedule
        caching = trace.prefix != "none"
        per_stream = sum(-(-trace.length // BLOCK) + 2 for _ in trace.groups)
        mgr = vllm_manager(v, trace, trace.pool or 1 + trace.streams * per_stream, caching)
        count = len(schedule.plans)
        hasher = None
        if caching:
            fn = v["get_hash_fn_by_name"]("sha256")
            v["init_none_hash"](fn)
            hasher = v["get_request_block_hasher"](BLOCK, fn)
        prompts = contents(trace, count)
        reqs = [
            v["Request"](
                request_id=f"s{i}",
                prompt_token_ids=list(prompts[i][0]),
                sampling_params=v["SamplingParams"](max_tokens=trace.decode + trace.spec + 1),
                pooling_params=None,
                block_hasher=hasher,
            )
            for i in range(count)
        ]
        running_status, finished = v["RequestStatus"].RUNNING, v["RequestStatus"]
        plans = schedule.plans
        slot_req: list[Any] = [None] * trace.streams
        slot_of = [0] * trace.streams
        at = [0] * trace.streams
        decoded = [0] * trace.streams
        allocate, gcb = mgr.allocate_slots, mgr.get_computed_blocks
        record, new_step = mgr.record_prefix_cache_stats, mgr.new_step_starts
        generated = trace.prefix == "generated"
        perf = CLOCK
        elapsed = 0
        reads = 0
        gc.collect()
        gc.disable()
        try:
            for running, new, freed in schedule.steps:
                scheduled = []
                # The running requests with their counts, as its scheduler holds them (made
                # before the timed region, as on kvunits' side).
                calls = [(slot_req[s], plans[slot_of[s]][at[s]][0]) for s in running]
                t0 = perf()
                new_step()
                for r, t in calls:
                    if allocate(r, t) is None:
                        raise RuntimeError("vLLM: pool exhausted (running)")
                for _, i in new:
                    r = reqs[i]
                    blocks, hit, _ = gcb(r)
                    n = plans[i][0][0] - hit
                    if allocate(r, n, hit, blocks) is None:
                        raise RuntimeError("vLLM: pool exhausted (new)")
                    record(r, hit)
                    scheduled.append((r, n, hit))
                elapsed += perf() - t0
                reads += 1
                # The scheduler's bookkeeping (_update_after_schedule), untimed.
                for s in running:
                    r = slot_req[s]
                    t, k, a = plans[slot_of[s]][at[s]]
                    r.num_computed_tokens += t - (k - a)
                for (s, i), (r, n, hit) in zip(new, scheduled, strict=True):
                    r.status = running_status
                    r.num_computed_tokens = hit + n
                    slot_req[s], slot_of[s], at[s], decoded[s] = r, i, 0, 0
                # update_from_output: in the generated trace, each stream's sampled token is
                # appended (vLLM's block hasher runs on it): timed, as kvunits' extend_content.
                if generated:
                    # (the tokens sampled before the timed region, as on kvunits' side)
                    made = [
                        (slot_req[s], step_tokens(slot_of[s], decoded[s], plans[slot_of[s]][at[s]]))
                        for s in running + [s for s, _ in new]
                    ]
                    out = [(r, tokens[0] if len(tokens) == 1 else tokens) for r, tokens in made]
                    t0 = perf()
                    for r, token in out:
                        r.append_output_token_ids(token)
                    elapsed += perf() - t0
                    reads += 1
                for s in running + [s for s, _ in new]:
                    decoded[s] += 1 + plans[slot_of[s]][at[s]][2]
                    at[s] += 1
                if watch is not None:
                    watch.steps.append(self._look(mgr, running + [s for s, _ in new], slot_req))
                for s in freed:
                    slot_req[s].status = finished.FINISHED_LENGTH_CAPPED
                    t0 = perf()
                    mgr.free(slot_req[s])
                    elapsed += perf() - t0
                    reads += 1
        finally:
            gc.enable()
        if watch is not None and caching:
            stats = mgr.make_prefix_cache_stats()
            if stats is not None:
                watch.hits["tokens"] = (stats.hits, stats.queries)
        return elapsed - reads * clock_cost()

    def _look(
        self, mgr: Any, slots: list[int], slot_req: list[Any]
    ) -> dict[int, tuple[int, tuple[int, ...]]]:
        out = {}
        managers = mgr.coordinator.single_type_managers
        for s in slots:
            r = slot_req[s]
            if r is None:
                continue
            held = tuple(
                sum(1 for b in m.req_to_blocks.get(r.request_id, ()) if not b.is_null)
                for m in managers
            )
            out[int(r.request_id[1:])] = (r.num_computed_tokens, held)
        return out


# -- measuring ------------------------------------------------------------------------------------

_CLOCK_COST: list[int] = []


def clock_cost() -> int:
    """What one timed region costs with nothing in it (two reads of `CLOCK`), in ns."""
    if not _CLOCK_COST:
        samples = []
        for _ in range(2000):
            t0 = CLOCK()
            samples.append(CLOCK() - t0)
        _CLOCK_COST.append(int(statistics.median(samples)))
    return _CLOCK_COST[0]


def check_equal_work(
    trace: Trace, vllm: Seen, kvunits: Seen, side: str, reference_lags: bool = False
) -> str:
    """Compare the side-by-side records; return a short verdict (raises on a difference).
    ``reference_lags``: the reference (``vllm``) is a kvunits side that rolls back drafts
    after verification (no vLLM to compare with)."""
    assert len(vllm.steps) == len(kvunits.steps), (len(vllm.steps), len(kvunits.steps))
    fewer = 0
    for n, (a, b) in enumerate(zip(vllm.steps, kvunits.steps, strict=True)):
        assert a.keys() == b.keys(), (trace.name, side, n)
        for stream, (length_v, held_v) in a.items():
            length_k, held_k = b[stream]
            if "text" in trace.groups or "sliding" in trace.groups:
                assert length_v == length_k, (trace.name, side, n, stream, length_v, length_k)
            for g, (x, y) in enumerate(zip(held_v, held_k, strict=True)):
                # A side that rolls back after verification holds at most one block less
                # than one that rolls back with the next step (vLLM, fused, batch).
                lags = side in ("typed", "raw")
                if trace.spec and lags != reference_lags and 0 <= (x - y) * (2 * lags - 1) <= 1:
                    fewer += abs(x - y)
                    continue
                assert x == y, (trace.name, side, n, stream, trace.groups[g], x, y)
    if fewer:
        return f"{side}: same lengths; {fewer} block-steps apart after rollbacks"
    return f"{side}: same lengths and blocks held"


@dataclass
class Row:
    trace: Trace
    us: dict[str, float]
    ratios: dict[str, list[float]]
    check: str
    hits: dict[str, dict[str, tuple[int, int]]]


def kvunits_modes(trace: Trace, batch: bool = True) -> list[str]:
    """kvunits' sides of ``trace`` (`KvunitsSide` modes): typed and raw always; with
    ``batch``, a generating trace's one call a stream-step (content), a drafting trace's
    (fused), and one call an engine step (batch): of one count for every running stream, or
    (streams in their prompt's chunks) of each stream's own counts, drafting too (a trace
    whose every generated token is cached has its prompt in one chunk: `Trace` refuses
    others)."""
    modes = ["typed", "raw"]
    plain = trace.spec == 0 and trace.prefix != "generated"
    chunked = trace.prompt > trace.chunk  # (prefill chunks beside decodes: ``advance_each``)
    if batch and plain and _has_batch() and (not chunked or _has_each()):
        modes.append("batch")
    if batch and trace.prefix == "generated" and trace.spec == 0 and _has_content():
        modes += ["content", "batch"] if _has_content_all() else ["content"]
    if batch and trace.spec and _has_fused():
        # (prompt chunks beside drafting decodes: ``advance_speculative_each``)
        each = _has_respec_each()
        modes += ["fused", "batch"] if trace.prompt <= trace.chunk or each else ["fused"]
    return modes


@contextmanager
def callers_heap_set_aside() -> Iterator[None]:
    """The objects alive on entry set aside from the collector (`gc.freeze`) until exit, so
    that the collection before each replay scans what the replays made, not the heap of the
    program running the benchmark: inside a test suite's process (torch, hypothesis, every
    module loaded) the quick family's 164 collections took 56 of its 62 s, against 0.3 s
    set aside. Replays time with the collector off either way. The caller's garbage is set
    aside with the rest, and collected after. A caller that set objects aside itself (a
    server before it forks; an interpreter that froze some at start-up) keeps them so: the
    collector gives everything back at once or nothing, so then this sets nothing aside."""
    mine = not gc.get_freeze_count()
    if mine:
        gc.freeze()
    try:
        yield
    finally:
        if mine:
            gc.unfreeze()


@callers_heap_set_aside()
def measure(trace: Trace, v: dict[str, Any] | None, rounds: int, batch: bool) -> Row:
    """Check one trace's work on every side, then time ``rounds`` rounds of each."""
    schedule = make_schedule(trace)
    sides: dict[str, Any] = {}
    if v is not None:
        sides["vLLM"] = VllmSide(v, trace, schedule)
    for mode in kvunits_modes(trace, batch):
        sides[mode] = KvunitsSide(trace, schedule, mode)
    seen = {k: Seen() for k in sides}
    for k, side in sides.items():
        side.run(seen[k])
    checks = []
    reference = seen["vLLM"] if v is not None else seen["typed"]
    split = next((s.split for s in seen.values() if s.split is not None), None)
    for k in sides:
        if k != "vLLM" and reference is not seen[k]:
            try:
                checks.append(check_equal_work(trace, reference, seen[k], k, v is None))
            except AssertionError as exc:
                if v is None or split is None:
                    raise
                # Other work than vLLM's by design (a hit split by sequence that holds other
                # blocks): reported, not timed, and a sweep goes on. A split that holds the
                # same blocks (a cached block taken where vLLM takes a fresh one) is compared.
                verdict = f"not compared with vLLM: {split}; {k} differs: {exc}"
                return Row(trace, {}, {}, verdict, {})
    order = list(sides)
    times: dict[str, list[int]] = {k: [] for k in order}
    for r in range(rounds):
        for key in order[r % len(order) :] + order[: r % len(order)]:
            times[key].append(sides[key].run())
    us = {k: statistics.median(t) / schedule.stream_steps / 1e3 for k, t in times.items()}
    ratios: dict[str, list[float]] = {}
    base = "vLLM" if v is not None else "typed"
    for k in order:
        if k != base:
            ratios[k] = [x / y for x, y in zip(times[base], times[k], strict=True)]
    return Row(
        trace,
        us,
        ratios,
        "; ".join(checks) if checks else "-",
        {k: s.hits for k, s in seen.items() if s.hits},
    )


def print_table(rows: list[Row], with_vllm: bool) -> None:
    """One table: µs per stream-step of each side, and each kvunits side's median ratio to
    vLLM (lowest–highest round)."""
    kinds = [
        k for k in ("typed", "raw", "fused", "batch", "content") if any(k in r.us for r in rows)
    ]
    head = ["trace", "stream-steps"] + (["vLLM µs"] if with_vllm else [])
    head += [f"{k} µs" for k in kinds]
    head += [
        f"vLLM ÷ {k}" if with_vllm else f"typed ÷ {k}"
        for k in kinds
        if with_vllm or k != "typed"
    ]
    lines = [head]
    for row in rows:
        cells = [row.trace.name, f"{make_steps(row.trace):,}"]
        if with_vllm:
            cells.append(f"{row.us['vLLM']:.2f}" if "vLLM" in row.us else "-")
        cells += [f"{row.us[k]:.2f}" if k in row.us else "-" for k in kinds]
        for k in kinds:
            if not with_vllm and k == "typed":
                continue
            rs = row.ratios.get(k)
            cells.append(
                f"{statistics.median(rs):.1f} ({min(rs):.1f}–{max(rs):.1f})" if rs else "-"
            )
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    for n, line in enumerate(lines):
        placed = enumerate(zip(line, widths, strict=True))
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in placed))
        if n == 0:
            print("  ".join("-" * w for w in widths))


_STEPS: dict[str, int] = {}


def _has_batch() -> bool:
    from kvunits.runtime import Stepper

    return hasattr(Stepper, "advance_all")


def _has_each() -> bool:
    from kvunits.runtime import Stepper

    return "advance_each" in Stepper.__slots__


def _has_respec_each() -> bool:
    from kvunits.runtime import Stepper

    return "advance_speculative_each" in Stepper.__slots__


def _has_fused() -> bool:
    from kvunits.runtime import Stepper

    return "advance_speculative" in Stepper.__slots__


def _has_content() -> bool:
    from kvunits.runtime import Stepper

    return "advance_with_content" in Stepper.__slots__


def _has_content_all() -> bool:
    from kvunits.runtime import Stepper

    return "advance_with_content_all" in Stepper.__slots__


def make_steps(trace: Trace) -> int:
    return _STEPS.get(trace.name, trace.total)


# -- memory ---------------------------------------------------------------------------------------


#: A side's memory: per fill (bytes then, blocks held then), bytes left after every request
#: is freed, bytes when built, free blocks still holding a cached prefix after the frees.
Memory = tuple[list[tuple[int, int]], int, int, int]


def _traced(pattern: str) -> int:
    """Bytes tracemalloc sees allocated from files matching ``pattern``, a ``|``-separated
    list of file patterns (after a collection)."""
    gc.collect()
    snap = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(True, one) for one in pattern.split("|")]
    )
    return sum(s.size for s in snap.statistics("filename"))


def vllm_memory(v: dict[str, Any], trace: Trace) -> Memory:
    """vLLM's side of `memory`: its KVCacheManager (one pool), every request admitted with a
    32-token prompt (hashed when the trace caches prefixes), then 300 decode steps, then
    freed."""
    streams = trace.streams
    caching = trace.prefix != "none"
    mgr = vllm_manager(v, trace, 1 + streams * 200, caching=caching)
    hasher = None
    if caching:
        fn = v["get_hash_fn_by_name"]("sha256")
        v["init_none_hash"](fn)
        hasher = v["get_request_block_hasher"](BLOCK, fn)
    prompts = contents(trace, streams)
    reqs = [
        v["Request"](
            request_id=f"s{i}",
            prompt_token_ids=list(prompts[i][0]),
            sampling_params=v["SamplingParams"](max_tokens=2000),
            pooling_params=None,
            block_hasher=hasher,
        )
        for i in range(streams)
    ]
    pattern = "*/vllm/v1/core/*"
    m0 = _traced(pattern)

    def held() -> int:
        return sum(
            1
            for m in mgr.coordinator.single_type_managers
            for bl in m.req_to_blocks.values()
            for b in bl
            if not b.is_null
        )

    fills = []
    for r in reqs:
        mgr.new_step_starts()
        blocks, hit, _ = mgr.get_computed_blocks(r)
        mgr.allocate_slots(r, trace.prompt - hit, hit, blocks)
        r.status = v["RequestStatus"].RUNNING
        r.num_computed_tokens = trace.prompt
    fills.append((_traced(pattern) - m0, held()))
    for _ in range(300):
        mgr.new_step_starts()
        for r in reqs:
            mgr.allocate_slots(r, 1)
            r.num_computed_tokens += 1
    fills.append((_traced(pattern) - m0, held()))
    for r in reqs:
        r.status = v["RequestStatus"].FINISHED_LENGTH_CAPPED
        mgr.free(r)
    pool = mgr.block_pool
    cached = sum(
        1 for b in pool.blocks if b.block_hash is not None and b.ref_cnt == 0 and not b.is_null
    )
    return fills, _traced(pattern) - m0, m0, cached


def kvunits_memory(trace: Trace) -> Memory:
    """kvunits' side of `memory`, the same requests through the typed `Stepper`
    (``admit_with_prefix`` with the prompt's hashes when the trace caches prefixes)."""
    streams = trace.streams
    coord = kvunits_coordinator(trace)
    handles: list[Any] = [coord.group(g, _unit_of(g)) for g in trace.groups]
    scale = positions_per_token(trace)
    stepper: Any = coord.stepper(*handles)
    # Its files, and the code it generates for a coordinator's groups (`kvunits.runtime._fast`
    # and the typed entries): what that code allocates counts as kvunits'.
    pattern = "*/kvunits/runtime/*|<kvunits *"
    rids = [f"s{i}" for i in range(streams)]
    lengths = [h.unit(trace.length * s) for h, s in zip(handles, scale, strict=True)]
    one = [h.unit(s) for h, s in zip(handles, scale, strict=True)]
    prefixes = []
    if trace.prefix != "none":
        for tokens, frames in contents(trace, streams):
            prefixes.append(
                tuple(
                    h.block_hashes(
                        ContentKeys(frames, EncoderTokens)
                        if g == "audio"
                        else ContentKeys(tokens, Tokens)
                    )
                    for h, g in zip(handles, trace.groups, strict=True)
                )
            )
    m0 = _traced(pattern)

    def held() -> int:
        return sum(sum(1 for b in coord.block_table(rid, h) if b) for rid in rids for h in handles)

    fills = []
    for i, rid in enumerate(rids):
        if prefixes:
            got = stepper.admit_with_prefix(rid, *lengths, prefix=prefixes[i])
            hits = [magnitude(n) for n in got]
        else:
            stepper.admit(rid, *lengths)
            hits = [0] * len(handles)
        stepper.advance(
            rid,
            *(h.unit(trace.prompt * s - n) for h, s, n in zip(handles, scale, hits, strict=True)),
        )
    fills.append((_traced(pattern) - m0, held()))
    for _ in range(300):
        for rid in rids:
            stepper.advance(rid, *one)
    fills.append((_traced(pattern) - m0, held()))
    for rid in rids:
        coord.free(rid)
    cached = sum(p.num_cached_free for p in {id(p): p for p in coord._core.pools}.values())
    return fills, _traced(pattern) - m0, m0, cached


@callers_heap_set_aside()
def measure_memory(v: dict[str, Any] | None, trace: Trace) -> dict[str, Memory]:
    """Each side's `Memory` on ``trace`` (vLLM's where ``v`` is given), under tracemalloc."""
    tracemalloc.start(1)
    try:
        results: dict[str, Memory] = {}
        if v is not None:
            results["vLLM"] = vllm_memory(v, trace)
        results["kvunits"] = kvunits_memory(trace)
    finally:
        tracemalloc.stop()
    return results


def per_block_and_request(memory: Memory, streams: int) -> tuple[float, float]:
    """Bytes per held block (the second fill's bytes over the first's, per block more held)
    and per request (the first fill's bytes less its blocks', per request)."""
    (m_a, h_a), (m_b, h_b) = memory[0]
    per_block = (m_b - m_a) / (h_b - h_a)
    return per_block, (m_a - per_block * h_a) / streams


def memory(v: dict[str, Any] | None, streams: int = 1024) -> None:
    """Bytes per held block, per request, and left after freeing every request, of each side's
    allocator, by tracemalloc over the allocator's own files (issue 25's figures): audio +
    text with a pool per group (kvunits) and one pool (vLLM), ``streams`` of them; then, with
    a quarter as many streams, text + sliding with one pool on both sides (kvunits' shared
    pool), audio + text with the prompt's blocks cached (the free blocks holding a cached
    prefix stay, and the pool's queue with them: its order is the cache's eviction order; the
    prefix cache, bounded by the pool's size), one group of text with prefix caching on
    (vLLM's default: one prompt for all, then prompts of their own ending within a block,
    whose last keys kvunits keeps to hash the block they start once content fills it, at a
    quarter and at all of ``streams``), and one group of text alone (kvunits' request costs
    its entry in the ids' dict, and then per group; vLLM's only per group), at a quarter and
    at all of ``streams`` (an offset past 256 would be an int object of 28 byte: kvunits
    takes it from a pool's ids), and
    the first layout with 16 requests (a slab's garbage, up to a quarter of it or
    `_COMPACT_MIN` entries, is a share of few blocks), and 300 requests (not a power of two:
    the requests' fields grow a row at a time)."""
    plain = Trace("memory", str(streams), ("audio", "text"), streams=streams, decode=1000)
    fewer = replace(plain, streams=max(1, streams // 4))
    variants = [
        ("audio + text, a pool per group", plain),
        ("text + sliding, one pool", replace(fewer, groups=("text", "sliding"), shared_pool=True)),
        ("audio + text, the prompt cached", replace(fewer, prefix="prompt")),
        # Prefix caching on (vLLM's default) with one group, as most models serve: one prompt
        # for all, then each request its own, ending within a block (a tail of 8 keys).
        ("text alone, the prompt cached", replace(fewer, groups=("text",), prefix="prompt")),
        (
            "text alone, prefix caching on, each prompt its own of 40 tokens",
            replace(fewer, groups=("text",), prefix="unique", prompt=40, chunk=64),
        ),
        # The same at all of ``streams`` (block ids and offsets past 256 are int objects
        # unless taken from a pool's ids: `BlockPool.add_map`).
        (
            "text alone, prefix caching on, each prompt its own of 40 tokens, as many streams",
            replace(plain, groups=("text",), prefix="unique", prompt=40, chunk=64),
        ),
        ("text alone, one group", replace(fewer, groups=("text",))),
        # Offsets past 256: each one of a pool's id objects, not an int of its own.
        ("text alone, one group, as many streams", replace(plain, groups=("text",))),
        ("audio + text, a pool per group, few requests", replace(plain, streams=16)),
        # Not a power of two: a table grown by doubling held up to twice its rows here.
        ("audio + text, a pool per group, 300 requests", replace(plain, streams=300)),
    ]
    print_memory(v, variants)


def memory_held_out(v: dict[str, Any] | None) -> None:
    """`memory` on variants no change was measured on (``--memory --held-out``, session 44):
    prompts of 40 to 500 tokens, one for all, each its own, and (session 45) a system prompt
    shared with the rest each its own, on text alone, text + sliding (one pool) and audio +
    text, at 64 to 1,024 requests, and without caching at 100 to 2,000 requests, prompts of
    32 to 1,000 tokens. One kind stays above vLLM's (`docs/benchmarks.md`): per request with
    200 prompts of 1,000 tokens (vLLM's figure is negative there). Left after every free with
    one prompt for all was above it until session 45 (the pool's queue of every freed block:
    `PoolPlan._emit_idle`)."""
    base = Trace("memory", "held out", ("text",), streams=256, decode=1000)
    variants = []
    layouts = ((("text",), False), (("text", "sliding"), True), (("audio", "text"), False))
    for groups, shared in layouts:
        # (Audio's window drops more blocks than decode adds after a prompt of 500: the held
        # blocks fall between the two fills, and per held block is no figure; 40 tokens.)
        for prefix, prompt, streams in (
            ("unique", 100, 256),
            ("unique", 40 if "audio" in groups else 500, 64),
            ("prompt", 100, 1024),
            ("system", 100, 256),
        ):
            title = f"{' + '.join(groups)}, {prompt}-token prompts, {prefix}"
            trace = replace(
                base, groups=groups, shared_pool=shared, prefix=prefix, prompt=prompt,
                chunk=max(64, prompt), streams=streams,
            )
            variants.append((title, trace))
    for groups, prompt, streams in (
        (("text",), 32, 2000),
        (("text",), 1000, 200),
        (("text", "sliding"), 100, 500),
        (("audio", "text"), 32, 700),
    ):
        title = f"{' + '.join(groups)}, {prompt}-token prompts, no caching"
        trace = replace(
            base, groups=groups, shared_pool=len(groups) > 1 and "sliding" in groups,
            prompt=prompt, chunk=max(64, prompt), streams=streams,
        )
        variants.append((title, trace))
    print_memory(v, variants)


def print_memory(v: dict[str, Any] | None, variants: Sequence[tuple[str, Trace]]) -> None:
    """Each variant's `Memory` on each side, and whether kvunits' is at most vLLM's."""
    print("memory of the allocator (tracemalloc):")
    for title, trace in variants:
        results = measure_memory(v, trace)
        print(f"  {title}, {trace.streams} streams:")
        figures = {}
        for side, (((m_a, h_a), (m_b, h_b)), left, built, cached) in results.items():
            per_block, per_request = per_block_and_request(results[side], trace.streams)
            figures[side] = (per_block, per_request, left)
            print(
                f"  {side:>8}: {per_block:6.1f} byte per held block, {per_request:6.0f} byte "
                f"per request ({h_a} then {h_b} blocks held: {m_a:,} then {m_b:,} byte); "
                f"{left:,} byte left after freeing all ({cached} cached free blocks); "
                f"{built:,} byte when built"
            )
        if len(figures) == 2:
            names = ("per held block", "per request", "left after freeing all")
            verdict = [
                f"{name} {'yes' if k <= w else 'NO'}"
                for name, k, w in zip(names, figures["kvunits"], figures["vLLM"], strict=True)
            ]
            print("    kvunits at most vLLM's: " + ", ".join(verdict))


# -- paths ----------------------------------------------------------------------------------------

#: The core's paths a call of the generated functions leaves them for (`--paths`): the
#: boundary and general plans, and a slab's compaction (a table rewritten: the cost grows with
#: the requests).
SLOW_PATHS: Final = frozenset(
    {
        "_boundary_step",
        "_boundary_rollback",
        "_general_step",
        "_general_respec",
        "_general_rollback",
        "_general_all",
        "_general_each",
        "_general_respec_all",
        "_general_content",
        "_general_content_all",
        "_general_respec_content_all",
        "_general_free",
        "_general_prefix",
        "_extend_general",
        # A drafting step with content on the core's boundary plan (per request; in a batch,
        # a request there: a resting one's was, every first such step, before session 38).
        "_planned_respec_content",
        "_respec_content_planned",
        "_admit_with_prefix",
        "compact_ops",
    }
)


@callers_heap_set_aside()
def paths(trace: Trace, mode: str = "typed") -> tuple[int, Counter[tuple[str, str, str]]]:
    """Where one replay of ``trace`` (kvunits' ``mode`` side) leaves the fast paths: per slow
    path (`SLOW_PATHS`) and the line that called it (its function, and in the generated
    functions the condition that sent it there: the nearest ``if`` above the line), how many
    times; and the replay's stream-steps. A class of trace whose steps leave the generated
    functions often is where the core's general plans cost it its lead (how session 33
    found a window passed over by a prefill chunk, a stale queue entry at the head)."""
    schedule = make_schedule(trace)
    _STEPS[trace.name] = schedule.stream_steps
    side = KvunitsSide(trace, schedule, mode)
    counts: Counter[tuple[str, str, str, int]] = Counter()

    def record(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_name in SLOW_PATHS and frame.f_back is not None:
            caller = frame.f_back
            counts[frame.f_code.co_name, caller.f_code.co_filename, caller.f_code.co_name,
                   caller.f_lineno] += 1  # fmt: skip

    sys.setprofile(record)
    try:
        side.run()
    finally:
        sys.setprofile(None)
    assert side.coordinator is not None
    source = _fast_source(side.coordinator).splitlines()
    out: Counter[tuple[str, str, str]] = Counter()
    for (slow, filename, function, line), n in counts.items():
        text = ""
        if filename.startswith("<kvunits fast steps"):
            # The condition that sent it there: the nearest `if` above the line.
            above = [x.strip() for x in source[max(line - 5, 0) : line - 1]]
            text = next((x for x in reversed(above) if x.startswith(("if ", "elif "))), "")
        out[slow, f"{function}:{line}", text] += n
    return schedule.stream_steps, out


def _fast_source(coord: KVCacheCoordinator) -> str:
    """The source of ``coord``'s generated functions (`kvunits.runtime._fast`)."""
    from kvunits.runtime import _fast

    return _fast._source(coord._core)


def print_paths(traces: Sequence[Trace], mode: str = "typed", top: int = 4) -> None:
    """`paths` of each trace on kvunits' ``mode`` side (where the trace has one:
    `kvunits_modes`): calls that left the fast paths per 1,000 stream-steps, and the most
    frequent lines that left them."""
    for trace in traces:
        if mode not in kvunits_modes(trace):
            print(f"-- {trace.name}: no {mode} side")
            continue
        steps, counts = paths(trace, mode)
        slow = sum(counts.values())
        print(f"-- {trace.name}: {steps:,} stream-steps, {1000 * slow / steps:.1f} per 1,000 "
              f"left the fast paths ({trace})")  # fmt: skip
        for (path, where, text), n in counts.most_common(top):
            print(f"   {n:7,} {path} <- {where}" + (f"  [{text[:90]}]" if text else ""))


# -- main -----------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per side")
    parser.add_argument("--quick", action="store_true", help="every trace 50 times shorter")
    parser.add_argument("--only", action="append", default=[], help="traces whose name has this")
    parser.add_argument("--no-vllm", action="store_true", help="time kvunits alone")
    parser.add_argument("--memory", action="store_true", help="measure memory instead")
    parser.add_argument(
        "--held-out", action="store_true", help="the variants outside the family (held_out)"
    )
    parser.add_argument("--sweep", type=int, default=None, help="random traces of this seed")
    parser.add_argument(
        "--paths", action="store_true", help="where kvunits leaves its fast paths, untimed"
    )
    parser.add_argument(
        "--paths-side",
        default="typed",
        choices=("typed", "raw", "fused", "batch", "content"),
        help="the kvunits side --paths replays (batches leave by paths of their own)",
    )
    args = parser.parse_args(argv)

    v: dict[str, Any] | None = None
    got = "not tried" if args.no_vllm else import_vllm()
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus")
    # Which tree is measured: run from a git worktree, this script imports the installed
    # (editable) kvunits unless the worktree is on sys.path (PYTHONPATH=.).
    print(f"kvunits from {os.path.dirname(os.path.dirname(os.path.realpath(kvunits.__file__)))}")
    if isinstance(got, str):
        print(
            f"vLLM is NOT compared ({got}): timing kvunits only. Make the venv that "
            "benchmarks/vllm-nodeps.txt describes and run this script with its python."
        )
    else:
        v = got
        print(f"vLLM {v['vllm'].__version__}, torch {v['torch'].__version__}")
    if args.memory:
        (memory_held_out if args.held_out else memory)(v)
        return []
    if args.sweep is not None:
        traces = sweep(args.sweep, quick=args.quick)
    else:
        traces = (held_out if args.held_out else family)(args.quick)
    if args.paths:
        print_paths(
            [t for t in traces if not args.only or any(o in t.name for o in args.only)],
            args.paths_side,
        )
        return []
    print(f"clock: {clock_cost()} ns per timed region (subtracted)")
    rows = []
    for trace in traces:
        if args.only and not any(o in trace.name for o in args.only):
            continue
        _STEPS[trace.name] = make_schedule(trace).stream_steps
        row = measure(trace, v, args.rounds, batch=True)
        rows.append(row)
        spread = "; ".join(
            f"{k} {statistics.median(r):.2f} ({min(r):.2f}–{max(r):.2f})"
            for k, r in row.ratios.items()
        )
        hits = "; ".join(
            f"{side}: " + ", ".join(f"{g} {h}/{q}" for g, (h, q) in hh.items())
            for side, hh in row.hits.items()
        )
        print(
            f"-- {trace.name}: {row.check}"
            + (f"; ratios {spread}" if spread else "")
            + (f"; hits {hits}" if hits else "")
        )
    print()
    print_table(rows, v is not None)
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
