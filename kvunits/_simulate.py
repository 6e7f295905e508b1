"""``kvunits simulate``: a streaming workload through the real coordinator, step by step.

Nothing here models the allocator: each run plans the cache with `kvunits.runtime.plan`, builds a
`kvunits.runtime.KVCacheCoordinator` from the plan, and admits, steps and frees streams through it;
the series are what the coordinator reports after every scheduler step (`usage_by_group`, block
tables, the number of admitted requests). What this module adds is the workload and the
bookkeeping around it:

* **streams**: ``streams`` clients, each opening one stream after another. A stream is admitted
  at the engine's limits (a live stream does not know its length, so the coordinator reserves
  each group's admission cap), then runs a prefill step and ``steps`` decode steps, and is
  freed; its client's next stream arrives ``arrival`` steps later on average (exponential
  gaps, seeded). The clients' first streams arrive evenly spread over one stream's life. A stream
  that cannot be reserved now waits, first come first served.
* **cadence**: a pooled group is stepped in encoder tokens (`KVCacheCoordinator.group(name,
  EncoderTokens)`), so a cadence that is not a multiple of P continues the partial pooled
  slot, as a live audio stream does; token groups are stepped in tokens; a cross-attention
  group is written whole at a stream's first step.
* **residency**: after every step of every stream, the keys its queries read are checked
  against its block table with the *kernel's* window (`kvunits.contracts.crossing.first_unresident`,
  the rule of `kvunits.kernels.check_residency`), so a manager window too small for the kernel shows
  up as the first key freed while a query still read it.
* **window variants**: `window_variants` builds the same model with another *manager* window
  for one group. A `ManagerSpec` is never built by hand: the group's layers are declared with
  the window ``W' = (S − 1)·P + 1`` in the kernel's unit, whose ``pool_window(W', P)`` is the S
  slots asked for, while the residency check keeps the kernel's real window.

Example:
    Two streams of 300 decode steps on the shipped Voxtral Realtime example, its manager
    window 188 pooled blocks (the seed's first fix) against 189:

    >>> from kvunits._simulate import Workload, load_example, simulate, window_variants
    >>> config = load_example()
    >>> work = Workload.for_config(config, streams=2, steps=300, duration=320)
    >>> runs = simulate(config, work, window_variants(config, ["188 pooled_block",
    ...                                                          "189 pooled_block"]))
    >>> [(r.variant.label, r.group_stats("audio").peak_held_per_stream) for r in runs]
    [('188 pooled_block', 13), ('189 pooled_block', 13)]
    >>> print(runs[0].first_lost)  # s0 arrived at step 0; its step 203 starts at token 812
    step 203: stream s0 (its step 203), group audio: query 812 encoder_token reads key 63
    encoder_token (block-table column 0), freed
    >>> runs[1].first_lost is None
    True
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final, cast, final

from kvunits.contracts import (
    AdmissionCap,
    AnyLayerGroup,
    CacheBlocks,
    EncoderTokens,
    IntQuantity,
    LayerSpec,
    ModelSpec,
    PoolBlocks,
    PooledBlocks,
    Position,
    SlidingWindowLayer,
    SpecError,
    Tokens,
    UnitTypeError,
    UnitValueError,
    Window,
    manager_view,
    unpool_length,
)
from kvunits.contracts.crossing import first_unresident
from kvunits.contracts.errors import AllocationError
from kvunits.contracts.internal import kernel_ints, magnitude
from kvunits.runtime import (
    NULL_BLOCK,
    AdmissionPolicy,
    ContentKeys,
    Fits,
    GroupHandle,
    KVCacheCoordinator,
    plan,
)

if TYPE_CHECKING:
    from kvunits.contracts.config import KvUnitsConfig
    from kvunits.runtime import CapacityPlan

#: The label of a run with the config's own windows.
AS_CONFIGURED: Final = "as configured"

#: The kinds whose kernels read the group's own positions (residency is checked for them).
_ATTENTION_OVER_OWN_POSITIONS: Final = ("sliding_window", "chunked_local", "full_attention")

#: A workload's default text prompt, the prefill of each stream (a choice of this workload,
#: not a fact of the model).
DEFAULT_PROMPT: Final = Tokens(16)

#: Decoder tokens per decode step: one (streaming transcription emits one a step).
DEFAULT_DECODER_STEP: Final = Tokens(1)

#: The most clients (``--streams``); each costs memory once it has opened a stream.
MAX_STREAMS: Final = 1 << 16
#: The most scheduler steps a simulation runs, its compared windows together: the series of
#: every step are kept (a few tens of bytes a step and group). ``--steps`` and ``--arrival``
#: are bounded by it too: a stream longer than any simulation never ends.
MAX_SCHEDULER_STEPS: Final = 1_000_000
#: The most windows ``--compare-windows`` runs (one simulation each).
MAX_WINDOWS: Final = 16
_MAX_SEED: Final = 2**63 - 1


@final
@dataclass(frozen=True, slots=True)
class Workload:
    """The streams a simulation runs (the same for every window compared).

    Attributes:
        streams: clients, each opening one stream after another (streams open at once, at
            most).
        steps: decode steps per stream, after its prefill step.
        duration: scheduler steps simulated.
        arrival: mean scheduler steps between a stream's end and its client's next stream
            (exponential, seeded; 0: at once).
        prompt: the text tokens of a stream's prefill step (token groups).
        encoder_step: encoder tokens a stream adds per step in pooled groups (None: the model
            has none).
        decoder_step: tokens a stream adds per decode step in token groups.
        seed: seeds the gaps between a client's streams (with ``arrival`` > 0).
        shared_prompt: every stream brings the same prompt (its prefill: ``prompt`` tokens,
            and its first encoder step): streams are admitted with prefix caching
            (`kvunits.runtime.Stepper.admit_with_prefix`) and start after what the cache holds.
    """

    streams: int
    steps: int
    duration: int
    arrival: int
    prompt: Tokens
    encoder_step: EncoderTokens | None
    decoder_step: Tokens
    seed: int = 0
    shared_prompt: bool = False

    @classmethod
    def for_config(
        cls,
        config: KvUnitsConfig,
        *,
        streams: int | None = None,
        steps: int = 1000,
        duration: int | None = None,
        arrival: int = 0,
        prompt: Tokens = DEFAULT_PROMPT,
        encoder_step: EncoderTokens | None = None,
        decoder_step: Tokens = DEFAULT_DECODER_STEP,
        seed: int = 0,
        shared_prompt: bool = False,
        runs: int = 1,
    ) -> Workload:
        """A workload checked against the config's engine limits and the bounds of a
        simulation (`MAX_STREAMS`, `MAX_SCHEDULER_STEPS`).

        Defaults: the engine's ``max_encoder_tokens_per_step`` encoder tokens and one token a
        step (the streaming cadence), ``streams`` a quarter more than the plan admits at once
        (so that some wait; at most `MAX_STREAMS`), ``duration`` three stream lives.

        Args:
            runs: the simulations this workload is run in (the windows compared): their
                scheduler steps together are bounded.

        Raises:
            UnitValueError: a count below its minimum or above its bound (the error states
                it), or a stream the engine cannot run (a step beyond its per-step limit, a
                stream beyond its longest sequence); the error names the setting to change.
        """
        engine = config.engine
        pooled = any(_is_stepped_pooled(g) for g in _groups(config.model, config))
        if encoder_step is None and pooled:
            encoder_step = engine.max_encoder_tokens_per_step
        elif encoder_step is not None and not pooled:
            raise UnitTypeError(
                f"--cadence: {encoder_step} is for pooled (encoder-side) groups, and "
                f"{config.model.name!r} has none; give its step in token",
                field="--cadence",
                expected="token",
                got=str(encoder_step),
            )
        if streams is None:
            admitted = plan(config.model, engine).concurrent_requests
            streams = min(-(-admitted * 5 // 4), MAX_STREAMS)
        given_duration = duration is not None
        for name, value, least, most, what in (
            ("streams", streams, 1, MAX_STREAMS, " (clients)"),
            ("steps", steps, 0, MAX_SCHEDULER_STEPS, " (a stream longer than a simulation)"),
            ("duration", duration, 1, MAX_SCHEDULER_STEPS, ""),
            ("arrival", arrival, 0, MAX_SCHEDULER_STEPS, " (a gap longer than a simulation)"),
            ("seed", seed, 0, _MAX_SEED, ""),
        ):
            if value is not None and not least <= value <= most:
                bound = f">= {least}" if value < least else f"<= {most}{what}"
                raise UnitValueError(
                    f"--{name} must be {bound}, got {value}",
                    field=f"--{name}",
                    expected=f"an int from {least} to {most}",
                    got=str(value),
                )
        if duration is None:
            duration = 3 * (steps + 1)
        if duration * runs > MAX_SCHEDULER_STEPS:
            plural = "run" if runs == 1 else "runs"
            raise UnitValueError(
                f"--duration: {duration * runs} scheduler steps in all ({runs} {plural} of "
                f"{duration}) is more than the {MAX_SCHEDULER_STEPS} a simulation runs"
                + (
                    ""
                    if given_duration
                    else "; the default --duration is 3 × (--steps + 1): give --duration"
                ),
                field="--duration",
                expected=f"duration × runs <= {MAX_SCHEDULER_STEPS}",
                got=str(duration * runs),
            )
        prompt_tok = prompt.numerical_value_in(Tokens)
        cadence_tok = decoder_step.numerical_value_in(Tokens)
        text_len = prompt_tok + steps * cadence_tok
        checks: list[tuple[str, int, IntQuantity, str]] = [
            ("--prompt", prompt_tok, engine.max_num_batched_tokens, "max_num_batched_tokens"),
            ("--cadence", cadence_tok, engine.max_num_batched_tokens, "max_num_batched_tokens"),
            ("--steps", text_len, engine.max_model_len, "max_model_len"),
        ]
        if pooled and encoder_step is not None:
            limit_step, limit_len = engine.max_encoder_tokens_per_step, engine.max_encoder_len
            assert limit_step is not None and limit_len is not None  # the plan checked both
            cadence_enc = encoder_step.numerical_value_in(EncoderTokens)
            audio_len = (steps + 1) * cadence_enc
            checks += [
                ("--cadence", cadence_enc, limit_step, "max_encoder_tokens_per_step"),
                ("--steps", audio_len, limit_len, "max_encoder_len"),
            ]
        for flag, value, limit, setting in checks:
            if value > limit.numerical_value_in(type(limit)):
                raise UnitValueError(
                    f"{flag}: a stream would need {value} {limit.unit} where the engine's "
                    f"{setting} is {limit}; lower {flag} or raise --{setting.replace('_', '-')}",
                    field=flag,
                    expected=f"<= {limit}",
                    got=f"{value} {limit.unit}",
                )
        if prompt.numerical_value_in(Tokens) < 1:
            raise UnitValueError(
                f"--prompt must be at least 1 token, got {prompt}",
                field="--prompt",
                expected=">= 1 token",
                got=str(prompt),
            )
        return cls(
            streams=streams,
            steps=steps,
            duration=duration,
            arrival=arrival,
            prompt=prompt,
            encoder_step=encoder_step if pooled else None,
            decoder_step=decoder_step,
            seed=seed,
            shared_prompt=shared_prompt,
        )

    def describe(self) -> str:
        """One line for people: what each stream does, and for how long the run goes."""
        per_step = [str(q) for q in (self.encoder_step, self.decoder_step) if q is not None]
        prefill = " + ".join(
            [str(self.prompt)] + ([str(self.encoder_step)] if self.encoder_step else [])
        )
        gap = "at once" if self.arrival == 0 else f"about {self.arrival} steps"
        shared = "; every stream brings the same prompt (prefix caching)"
        return (
            f"{self.streams} streams, each a prefill ({prefill}) then {self.steps} decode "
            f"steps of {' + '.join(per_step)}; a client's next stream arrives {gap} after its "
            f"last ends; {self.duration} scheduler steps, seed {self.seed}"
            + (shared if self.shared_prompt else "")
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, quantities as ``{"value", "unit"}``."""
        from ._render import quantity

        return {
            "streams": self.streams,
            "steps": self.steps,
            "duration": self.duration,
            "arrival": self.arrival,
            "prompt": quantity(self.prompt),
            "encoder_step": quantity(self.encoder_step),
            "decoder_step": quantity(self.decoder_step),
            "seed": self.seed,
            "shared_prompt": self.shared_prompt,
        }


@final
@dataclass(frozen=True, slots=True)
class Variant:
    """One model to simulate: the config's, or the config's with another manager window.

    Attributes:
        label: what the run is called (``"188 pooled_block"``, or ``"as configured"``).
        model: the model whose plan and coordinator the run uses.
        group: the group whose manager window was changed (None: the config's model).
        manager_window: that group's manager window in this model.
        admission: the admission policy (None: the engine's, ``admission``).
    """

    label: str
    model: ModelSpec
    group: str | None = None
    manager_window: Window[PooledBlocks] | Window[Tokens] | None = None
    admission: AdmissionPolicy | None = None


def as_configured(config: KvUnitsConfig) -> list[Variant]:
    """The one variant of a plain ``simulate``: the config's own model."""
    return [Variant(AS_CONFIGURED, config.model)]


def admission_variants(
    config: KvUnitsConfig, kinds: Sequence[str], variants: Sequence[Variant] | None = None
) -> list[Variant]:
    """Each variant (default: the config's model) once per admission policy, for
    ``--compare-admission``: the kinds given (``reserve``, ``on_demand``, ``declared``), with
    the engine's ``scheduling_policy`` and ``watermark``.

    Raises:
        SpecError: no kind, or an unknown one.
    """
    engine = config.engine
    if not kinds:
        raise SpecError("--compare-admission needs at least one policy")
    policies = [
        AdmissionPolicy(
            kind=cast(Any, kind.strip()),  # AdmissionPolicy checks it
            scheduling_policy=engine.scheduling_policy,
            watermark=engine.watermark,
        )
        for kind in kinds
    ]
    out = []
    for variant in as_configured(config) if variants is None else variants:
        for policy in policies:
            label: str = policy.kind
            if variant.label != AS_CONFIGURED:
                label = f"{variant.label}, {policy.kind}"
            out.append(replace(variant, label=label, admission=policy))
    return out


def window_variants(
    config: KvUnitsConfig, windows: Sequence[str], group: str | None = None
) -> list[Variant]:
    """The config's model once per manager window, for ``--compare-windows``.

    Each window is ``"<n> <unit>"``: in the group's slot unit (``pooled_block``, or
    ``token`` for an unpooled group) it is the manager window S itself; in the kernel's unit
    (``encoder_token``) it is a window the layers declare, whose manager window is
    ``pool_window(W, P)``. The group's layers are declared with ``W' = (S − 1)·P + 1``, the
    smallest window whose ``pool_window`` is S: the manager spec is derived as always.

    Args:
        config: the loaded config.
        windows: the windows to compare, in order.
        group: the sliding-window group to vary; by default the only one that counts the
            windows' unit. With ``kv_cache_layout = "shared"`` a group split into parts
            (``text/sliding_window[0]`` …) is named by its own name or any part's: the window
            is the manager spec its parts share, so all of them vary; the runs' summaries show
            the part named (the first, for the group's own name).

    Raises:
        UnitTypeError: a window without a unit, or in a unit no sliding-window group counts.
        UnitValueError: a window below 1.
        SpecError: no such group, several candidates (name one with ``group``), or a window
            that would merge the group with another.
    """
    from kvunits.contracts.internal import parse_any_quantity

    if not windows:
        raise SpecError("--compare-windows needs at least one window")
    if len(windows) > MAX_WINDOWS:
        raise UnitValueError(
            f"--compare-windows: {len(windows)} windows; at most {MAX_WINDOWS} are compared "
            "(one run each)",
            field="--compare-windows",
            expected=f"at most {MAX_WINDOWS} windows",
            got=str(len(windows)),
        )
    parsed = [parse_any_quantity(text.strip(), field="--compare-windows") for text in windows]
    for index, window in enumerate(parsed):
        if str(window) in {str(w) for w in parsed[:index]}:  # windows of two units never equal
            raise UnitValueError(
                f"--compare-windows: {window} given twice; each window is one run",
                field="--compare-windows",
                expected="distinct windows",
                got=", ".join(str(w) for w in parsed),
            )
    target, focus = _target_group(config, parsed, group)
    names = target.layer_names
    pool = target.manager.pool.tokens_per_block
    variants = []
    for window in parsed:
        size = window.numerical_value_in(type(window))
        if size < 1:
            raise UnitValueError(
                f"--compare-windows: a window holds the current position, so it is at least 1; "
                f"got {window}",
                field="--compare-windows",
                expected=">= 1",
                got=str(window),
            )
        # A window in slots S is declared as the kernel window (S − 1)·P + 1 encoder tokens.
        declared = size if type(window) is EncoderTokens else (size - 1) * pool + 1
        layers = dict(config.model.layers)
        for name in names:
            layers[name] = _with_window(layers[name], declared)
        model = ModelSpec(name=config.model.name, layers=layers)
        manager = manager_view(layers[names[0]], config.engine.block_size_slots).sliding_window
        assert manager is not None and manager.unit in (PooledBlocks, Tokens)
        if type(window) is not EncoderTokens:
            # pool_window((S − 1)·P + 1, P) = cdiv((S − 1)·P, P) + 1 = S: derived, not assumed.
            assert str(manager) == str(window), (window, manager)
        regrouped = [g.name for g in _groups(model, config)]
        laid_out = [g.name for g in _layout_groups(model, config)]
        if target.name not in regrouped or focus not in laid_out:
            raise SpecError(
                f"--compare-windows {window}: group {target.name!r} would then share its "
                f"manager spec with another group ({', '.join(regrouped)}); compare other "
                "windows"
            )
        variants.append(Variant(str(manager), model, focus, manager))
    return variants


@final
@dataclass(frozen=True, slots=True)
class LostKey:
    """The first key a query read from a block its manager had already freed.

    Attributes:
        step: the scheduler step (0-based).
        stream: the stream's id.
        stream_step: the stream's own step (0: its prefill).
        group: the group.
        query: the query's position, kernel unit.
        key: the lowest key of the freed block the query reads, kernel unit.
        column: the block-table column of that key.
    """

    step: int
    stream: str
    stream_step: int
    group: str
    query: Position[Any]
    key: Position[Any]
    column: int

    def __str__(self) -> str:
        return (
            f"step {self.step}: stream {self.stream} (its step {self.stream_step}), group "
            f"{self.group}: query {self.query} reads key {self.key} (block-table column "
            f"{self.column}), freed"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, positions as ``{"value", "unit"}``."""
        from ._render import quantity

        return {
            "step": self.step,
            "stream": self.stream,
            "stream_step": self.stream_step,
            "group": self.group,
            "query": quantity(self.query),
            "key": quantity(self.key),
            "column": self.column,
        }


@final
@dataclass(frozen=True, slots=True)
class GroupStats:
    """One group over one run.

    Attributes:
        name: the group.
        kind: its manager's kind.
        manager_window: the manager's window (slot unit), if it has one.
        kernel_windows: the windows the kernels read (kernel unit), what residency is
            checked against.
        capacity: cache blocks requests can hold (the plan's, less the null block).
        reserved_per_stream: the admission cap a stream reserves.
        peak_held_per_stream: the most blocks any one stream held at once (its steady state
            once streams outlive the window).
        peak_used: the most blocks held by all streams at once.
        peak_reserved: the most blocks reserved at once.
        prefix_hits: positions the streams found in the prefix cache (kernel unit; None
            without a shared prompt, or for a group no prefix serves).
        prefix_queried: positions of prompt they brought.
        recomputed: positions the preempted streams had computed, recomputed when they
            resumed (kernel unit; ``on_demand`` only).
    """

    name: str
    kind: str
    manager_window: Window[Any] | None
    kernel_windows: tuple[Window[Any], ...]
    capacity: int
    reserved_per_stream: int
    peak_held_per_stream: int
    peak_used: int
    peak_reserved: int
    prefix_hits: IntQuantity | None = None
    prefix_queried: IntQuantity | None = None
    recomputed: IntQuantity | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; quantities as ``{"value", "unit"}``, block counts in cache blocks."""
        from ._render import quantity

        def blocks(n: int) -> dict[str, Any]:
            return {"value": n, "unit": "cache_block"}

        return {
            "name": self.name,
            "kind": self.kind,
            "manager_window": quantity(self.manager_window),
            "kernel_windows": [quantity(w) for w in self.kernel_windows],
            "capacity": blocks(self.capacity),
            "reserved_per_stream": blocks(self.reserved_per_stream),
            "peak_held_per_stream": blocks(self.peak_held_per_stream),
            "peak_used": blocks(self.peak_used),
            "peak_reserved": blocks(self.peak_reserved),
            "prefix_hits": quantity(self.prefix_hits),
            "prefix_queried": quantity(self.prefix_queried),
            "recomputed": quantity(self.recomputed),
        }


@final
@dataclass(slots=True)
class Run:
    """One variant's simulation (built by `simulate`).

    Attributes:
        variant: the model simulated.
        plan: its capacity plan (what sized the coordinator's pools).
        series: one list per measure, one entry per scheduler step, after the step:
            ``step``, ``running`` (streams admitted), ``waiting``, ``finished``, and per group
            ``<g>.used``, ``<g>.reserved`` (cache blocks) and ``<g>.held_max`` (the most blocks
            one stream holds); ``preempted``: streams preempted in the step (``on_demand``).
        groups: per group, the run's summary.
        first_lost: the first key read from a freed block, or None.
        lost_steps: stream steps that read a freed block.
        interrupted: the run was stopped (Ctrl-C) before its last step.
        admission: the admission policy's kind.
    """

    variant: Variant
    plan: CapacityPlan
    series: dict[str, list[int]]
    groups: list[GroupStats] = field(default_factory=list)
    first_lost: LostKey | None = None
    lost_steps: int = 0
    interrupted: bool = False
    admission: str = "reserve"

    @property
    def preemptions(self) -> int:
        """Streams preempted over the run (``on_demand``)."""
        return sum(self.series.get("preempted", ()))

    @property
    def steps_done(self) -> int:
        """Scheduler steps simulated."""
        return len(self.series["step"])

    @property
    def peak_running(self) -> int:
        """The most streams admitted at once."""
        return max(self.series["running"], default=0)

    @property
    def peak_waiting(self) -> int:
        """The most streams waiting at once."""
        return max(self.series["waiting"], default=0)

    @property
    def finished(self) -> int:
        """Streams that ran to their end."""
        return self.series["finished"][-1] if self.series["finished"] else 0

    def group_stats(self, name: str) -> GroupStats:
        """The summary of group ``name``."""
        for stats in self.groups:
            if stats.name == name:
                return stats
        raise SpecError(f"no group {name!r}; groups: {', '.join(g.name for g in self.groups)}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the summary, the first lost key and the series."""
        return {
            "window": self.variant.label,
            "group": self.variant.group,
            "steps_done": self.steps_done,
            "interrupted": self.interrupted,
            "admission": self.admission,
            "concurrent_requests_planned": self.plan.concurrent_requests,
            "peak_running": self.peak_running,
            "preemptions": self.preemptions,
            "peak_waiting": self.peak_waiting,
            "finished": self.finished,
            "groups": [g.to_dict() for g in self.groups],
            "first_lost_key": None if self.first_lost is None else self.first_lost.to_dict(),
            "lost_key_steps": self.lost_steps,
            "series": self.series,
        }


#: Called after every scheduler step with (run index, step index); may raise
#: KeyboardInterrupt, which stops the simulation cleanly.
StepCallback = Callable[[int, int], None]


def simulate(
    config: KvUnitsConfig,
    workload: Workload,
    variants: Sequence[Variant],
    *,
    on_step: StepCallback | None = None,
) -> list[Run]:
    """Run the workload once per variant, each through a coordinator of its own plan.

    A KeyboardInterrupt (Ctrl-C) stops the simulation: the run under way is returned with
    what it simulated (``interrupted``), the variants after it are not run.

    Raises:
        SpecError: the budget cannot hold one full-length request (from the plan).
        AdmissionError: a stream can never be admitted.
    """
    kernels = _real_kernels(config)
    # Every coordinator first (plans are quick): from here on, a Ctrl-C keeps the whole steps.
    sims = [Simulation(config, workload, variant, kernels) for variant in variants]
    runs: list[Run] = []
    for index, sim in enumerate(sims):
        runs.append(sim.run)
        try:
            for step in range(workload.duration):
                sim.step()
                if on_step is not None:
                    on_step(index, step)
        except KeyboardInterrupt:
            sim.run.interrupted = True
            sim.finish()
            break
        sim.finish()
    return runs


class _Stream:
    __slots__ = ("client", "hits", "id", "lost", "recompute", "step")

    def __init__(self, stream_id: str, client: int) -> None:
        self.id = stream_id
        self.client = client
        self.step = 0
        self.hits: tuple[IntQuantity, ...] | None = None
        # A preempted stream: the positions per group (handle units) it recomputes first,
        # and what its preemption lost (recomputed = lost - recompute).
        self.recompute: list[int] | None = None
        self.lost: list[int] = []


def _replay_chunk(
    remaining: Sequence[int],
    replayed: Sequence[int],
    prefill: Sequence[int],
    decode: Sequence[int],
    limit: Sequence[int],
) -> list[int]:
    """What a preempted stream recomputes in one scheduler step, per group (handle units):
    its own steps replayed in order, every group up to the same stream step, as many as
    every group's per-step ``limit`` allows.

    vLLM 0.33 recomputes a resumed request on one token axis: ``_preempt_request`` sets
    ``num_computed_tokens = 0`` and the request prefills its history again, each scheduled
    position carrying its text token *and* its P encoder tokens (Voxtral Realtime's
    encoder runs inside the decoder's forward: ``voxtral_realtime.py``, ``forward``). No
    group runs ahead of another: text does not re-prefill 2048 tokens at once while its
    audio comes back 4 encoder tokens a step, holding every text block for nothing. A
    stream step that alone exceeds a limit (a prompt longer than a step) is chunked in the
    groups still short of it.

    Args:
        remaining: positions left to recompute.
        replayed: positions recomputed since the preemption.
        prefill: the positions of the stream's first step (its prompt, less its hits).
        decode: the positions of each later step.
        limit: the most positions a scheduler step adds.

    Example:
        Voxtral's cadence (audio 4 encoder tokens a step, at most 4; text 1 token, at most
        2048), a prompt of 4 encoder tokens and 16 tokens, preempted after 10 steps: the
        first replay step recomputes the prompt, each next one step of both, never more.

        >>> _replay_chunk([40, 25], [0, 0], [4, 16], [4, 1], [4, 2048])
        [4, 16]
        >>> _replay_chunk([36, 9], [4, 16], [4, 16], [4, 1], [4, 2048])
        [4, 1]
        >>> _replay_chunk([40, 25], [0, 0], [4, 16], [4, 1], [8192, 2048])  # vLLM's budget
        [40, 25]
    """

    def steps(x: int, p: int, d: int) -> float:  # whole stream steps x positions cover
        return 0 if x < p else math.inf if d == 0 else 1 + (x - p) // d

    def positions(t: float, p: int, d: int) -> float:  # of the first t stream steps
        return 0 if t == 0 else p + (t - 1) * d

    groups = list(zip(remaining, replayed, prefill, decode, limit, strict=True))
    active = [g for g in groups if g[0]]
    reach = min(steps(x + c, p, d) for _, x, p, d, c in active)
    now = min(steps(x, p, d) for _, x, p, d, _ in active)
    if now < reach < math.inf:
        return [min(r, max(0, int(positions(reach, p, d)) - x)) for r, x, p, d, _ in groups]
    # One stream step is more than a limit allows (or only steps without positions are
    # left): chunk it in the groups still short of it.
    return [min(r, c) if r and steps(x, p, d) == now else 0 for r, x, p, d, c in groups]


def _prompt_hashes(handle: GroupHandle[Any], prefill: IntQuantity) -> Any:
    """The block hashes of the prompt every stream brings, in a group (None where no prefix
    serves): token ids 0, 1, …, or as many encoder tokens of the same audio."""
    if handle.spec.kind not in _ATTENTION_OVER_OWN_POSITIONS:
        return None
    unit: Any = EncoderTokens if handle.unit is EncoderTokens else Tokens
    return handle.block_hashes(ContentKeys(range(magnitude(prefill)), unit))


def _limit(handle: GroupHandle[Any], group: AnyLayerGroup) -> IntQuantity:
    """A group's longest sequence in its handle's unit (what ``admit`` declares)."""
    max_len = group.limits.max_len
    if handle.unit is EncoderTokens:
        return unpool_length(group.expect(PooledBlocks).limits.max_len, group.manager.pool)
    return max_len


#: (sliding_window, chunk) of a layer's kernel, plain ints of its unit.
_KernelWindow = tuple[int | None, int | None]
#: (tokens_per_block, sliding_window, chunk) of a kernel, plain ints of its unit.
_KernelGeometry = tuple[int, int | None, int | None]


class Simulation:
    """One variant's scheduler over a real coordinator; `step` runs one scheduler step.

    Args:
        config: the loaded config (engine, and the kernels' real windows).
        workload: the streams.
        variant: the model to plan and run.
        kernels: per layer, the window and chunk its kernel reads (`_real_kernels`).

    Attributes:
        coordinator: the coordinator, built from ``run.plan``.
        handles: one handle per group, in the coordinator's order, each in the unit the
            group is stepped in.
        run: the run being recorded.
    """

    def __init__(
        self,
        config: KvUnitsConfig,
        workload: Workload,
        variant: Variant,
        kernels: dict[str, _KernelWindow],
    ) -> None:
        capacity = plan(variant.model, config.engine)
        self.coordinator = coord = KVCacheCoordinator.from_plan(
            capacity, admission=variant.admission
        )
        self.admission = coord.admission.kind
        self.workload = workload
        handles: list[GroupHandle[Any]] = []
        prefill: list[IntQuantity] = []
        decode: list[IntQuantity] = []
        for group in coord.groups:
            if _is_stepped_pooled(group):
                assert workload.encoder_step is not None
                handles.append(coord.group(group.name, EncoderTokens))
                prefill.append(workload.encoder_step)
                decode.append(workload.encoder_step)
            elif group.manager.slot_unit is PooledBlocks:
                # Cross attention: the encoder's output, written whole at the first step.
                handles.append(coord.group(group.name, PooledBlocks))
                prefill.append(PooledBlocks(0))
                decode.append(PooledBlocks(0))
            else:
                handles.append(coord.group(group.name, Tokens))
                prefill.append(workload.prompt)
                decode.append(workload.decoder_step)
        self.handles = tuple(handles)
        stepper: Any = coord.stepper(*handles)  # bound to as many groups as the model has
        self._stepper = stepper
        self._allocate: Callable[..., Any] = stepper.allocate
        self._admit_with_prefix: Callable[..., Any] = stepper.admit_with_prefix
        self._prefix: tuple[Any, ...] | None = None
        self._limits = tuple(_limit(h, g) for h, g in zip(handles, coord.groups, strict=True))
        if workload.shared_prompt:
            pairs = zip(handles, prefill, coord.groups, strict=True)
            self._prefix = tuple(_prompt_hashes(h, q) for h, q, _ in pairs)
        # ``declared``: a stream declares its whole length (its prefill and every step);
        # a group written whole (cross attention) its limit.
        self._declared = tuple(
            limit if magnitude(d) == 0 else type(d)(magnitude(p) + work_steps * magnitude(d))
            for limit, p, d, work_steps in zip(
                self._limits, prefill, decode, [workload.steps] * len(handles), strict=True
            )
        )
        # Per group, the most a step may add (handle units): a preempted stream replays its
        # steps within them, every group in step (`_replay_chunk`).
        engine = config.engine
        self._chunk = tuple(
            (engine.max_encoder_tokens_per_step or EncoderTokens(0)).numerical_value_in(
                EncoderTokens
            )
            if h.unit is EncoderTokens
            else engine.max_num_batched_tokens.numerical_value_in(Tokens)
            if h.unit is Tokens
            else 0
            for h in handles
        )
        self._prefill, self._decode = tuple(prefill), tuple(decode)
        self._prefill_rows = tuple(q.numerical_value_in(type(q)) for q in prefill)
        self._decode_rows = tuple(q.numerical_value_in(type(q)) for q in decode)
        # Residency is checked where the kernels read a window of the group's own positions
        # (not for a cross-attention or state group), in the blocks of this run's layout (the
        # shared one grows block sizes) with the kernels' real windows.
        self._geometries = {g.name: _geometries(g, kernels) for g in coord.groups}
        self._checks = [
            self._geometries[h.name] if h.spec.kind in _ATTENTION_OVER_OWN_POSITIONS else []
            for h in handles
        ]
        self._names = coord.group_names
        self.run = Run(variant, capacity, {key: [] for key in _series_keys(self._names)})
        self.run.admission = self.admission
        self._preempted_now = 0
        self._recomputed = [0] * len(handles)
        # The gaps between a client's streams are drawn from the client's own generator, so
        # that every variant sees the same draws; made when first drawn from (a client costs
        # nothing until its first stream ends).
        self._rngs: dict[int, random.Random] = {}
        # The clients' first streams arrive evenly spread over one stream's life, so that the
        # streams running at once are of every age after one life (client 0 at step 0).
        self._arrivals: dict[int, list[int]] = {}
        life = workload.steps + 1
        for client in range(workload.streams):
            self._arrivals.setdefault(client * life // workload.streams, []).append(client)
        # Clients whose next stream waits, and (on demand) preempted streams waiting to resume.
        self._waiting: deque[int | _Stream] = deque()
        self._running: dict[str, _Stream] = {}
        self._started = 0
        self._finished = 0
        self._t = 0

    def step(self) -> None:
        """One scheduler step: arrivals, admissions (first come first served), one step of
        every admitted stream (freeing those that end), then the series' entries.

        ``on_demand`` runs vLLM 0.33's order instead (`_step_on_demand`)."""
        if self.admission == "on_demand":
            self._step_on_demand()
            return
        t, coord, work = self._t, self.coordinator, self.workload
        self._waiting.extend(self._arrivals.pop(t, ()))
        while self._waiting:
            client = self._waiting[0]
            assert isinstance(client, int)  # only on demand preempts
            stream = _Stream(f"s{self._started}", client)
            try:
                if self.admission == "declared":
                    self._stepper.admit(stream.id, *self._declared)
                elif self._prefix is None:
                    coord.admit(stream.id)
                else:
                    stream.hits = self._admit_with_prefix(
                        stream.id, *self._limits, prefix=self._prefix
                    )
            except AllocationError:
                break  # not now: the head of the queue waits for a stream to end
            self._waiting.popleft()
            self._started += 1
            self._running[stream.id] = stream
        held = [0] * len(self.handles)
        self._preempted_now = 0
        for stream in list(self._running.values()):
            first = stream.step == 0
            counts = self._prefill if first else self._decode
            rows = self._prefill_rows if first else self._decode_rows
            if first and stream.hits is not None:
                # The stream starts after what the cache holds: its prefill is the rest.
                counts = tuple(q - hit for q, hit in zip(counts, stream.hits, strict=True))
                rows = tuple(magnitude(q) for q in counts)
            self._allocate(stream.id, *counts)
            stream.step += 1
            done = stream.step > work.steps
            self._observe(stream, rows, held if not done else None)
            if done:
                coord.free(stream.id)
                del self._running[stream.id]
                self._finished += 1
                gap = (
                    0
                    if work.arrival == 0
                    else round(self._rng(stream.client).expovariate(1 / work.arrival))
                )
                self._arrivals.setdefault(t + 1 + gap, []).append(stream.client)
        self._record(held)
        self._t += 1

    def _rng(self, client: int) -> random.Random:
        rng = self._rngs.get(client)
        if rng is None:
            rng = self._rngs[client] = random.Random(f"{self.workload.seed}:{client}")
        return rng

    def _step_on_demand(self) -> None:
        """One step as vLLM 0.33's scheduler takes it (``Scheduler.schedule``): every running
        stream in admission order takes its step, preempting the latest admitted (or the
        lowest priority) when blocks run short; the preempted go to the front of the waiting
        queue. Only if nothing was preempted, waiting streams are admitted, first come first
        served, while their first step fits (with the watermark), and take it. Streams that
        ended are freed after the step, as vLLM frees them after the step's output."""
        self._waiting.extend(self._arrivals.pop(self._t, ()))
        held = [0] * len(self.handles)
        ended: list[_Stream] = []
        self._preempted_now = 0
        advanced: set[str] = set()
        for stream in list(self._running.values()):
            if stream.id not in self._running:
                continue  # preempted for a stream before it, this step
            counts, rows, advance, left = self._next_step(stream)
            outcome = self._stepper.allocate_preempting(stream.id, *counts)
            if outcome.ran:
                stream.recompute = left
                if advance:
                    advanced.add(stream.id)
                self._after_step(stream, rows, advance, held, ended)
            for record in outcome.preempted:
                victim = self._running.pop(record.request_id)
                if victim.id in advanced:
                    victim.step -= 1  # its step of this iteration is undone with it
                    advanced.discard(victim.id)
                if victim in ended:
                    ended.remove(victim)
                victim.recompute = [
                    magnitude(record.lost[h.name]) // h.rows_per_unit for h in self.handles
                ]
                victim.lost = list(victim.recompute)
                for g, handle in enumerate(self.handles):
                    self._recomputed[g] += victim.recompute[g] * handle.rows_per_unit
                self._waiting.appendleft(victim)
                self._preempted_now += 1
        while self._waiting and not self._preempted_now:
            head = self._waiting[0]
            new = not isinstance(head, _Stream)
            stream = _Stream(f"s{self._started}", head) if isinstance(head, int) else head
            if new and self._prefix is not None:
                try:
                    stream.hits = self._admit_with_prefix(
                        stream.id, *self._limits, prefix=self._prefix
                    )
                except AllocationError:
                    break
                counts, rows, advance, left = self._next_step(stream)
                if not isinstance(self._stepper.try_allocate(stream.id, *counts), Fits):
                    self.coordinator.free(stream.id)
                    break
            else:
                counts, rows, advance, left = self._next_step(stream)
                try:
                    self._stepper.admit(stream.id, *self._limits, prompt=counts)
                except AllocationError:
                    break  # not now: the head of the queue waits
                self._allocate(stream.id, *counts)
            self._waiting.popleft()
            self._started += new
            self._running[stream.id] = stream
            stream.recompute = left
            self._after_step(stream, rows, advance, held, ended)
        for stream in ended:
            self._end(stream)
        self._record(held)
        self._t += 1

    def _next_step(
        self, stream: _Stream
    ) -> tuple[tuple[IntQuantity, ...], tuple[int, ...], bool, list[int] | None]:
        """A stream's next step, changing nothing: the counts (handle units), its positions
        per group, whether it is one of the stream's own steps (False: a chunk of
        recomputation only), and what is left to recompute after it."""
        first = stream.step == 0
        counts = self._prefill if first else self._decode
        if first and stream.hits is not None:
            counts = tuple(q - hit for q, hit in zip(counts, stream.hits, strict=True))
        if stream.recompute is None:
            return counts, tuple(magnitude(q) for q in counts), True, None
        remaining = stream.recompute
        fused = [r + magnitude(q) for r, q in zip(remaining, counts, strict=True)]
        if all(f <= c or f == 0 for f, c in zip(fused, self._chunk, strict=True)):
            # The last chunk of recomputation takes the stream's own step with it (vLLM
            # computes a resumed request's tokens and its next one in one step).
            typed = tuple(type(q)(f) for q, f in zip(counts, fused, strict=True))
            return typed, tuple(fused), True, None
        prefill = [magnitude(q) for q in self._prefill]
        if stream.hits is not None:
            prefill = [p - magnitude(h) for p, h in zip(prefill, stream.hits, strict=True)]
        replayed = [lost - r for lost, r in zip(stream.lost, remaining, strict=True)]
        chunk = _replay_chunk(remaining, replayed, prefill, self._decode_rows, self._chunk)
        left = [r - c for r, c in zip(remaining, chunk, strict=True)]
        typed = tuple(type(q)(c) for q, c in zip(counts, chunk, strict=True))
        return typed, tuple(chunk), False, left

    def _after_step(
        self,
        stream: _Stream,
        rows: tuple[int, ...],
        advance: bool,
        held: list[int],
        ended: list[_Stream],
    ) -> None:
        """Residency and the blocks held after a stream's step; note it if it ended."""
        if advance:
            stream.step += 1
        self._observe(stream, rows, held)
        if stream.step > self.workload.steps:
            ended.append(stream)

    def _observe(self, stream: _Stream, rows: tuple[int, ...], held: list[int] | None) -> None:
        """Per group, the residency of the step a stream just took (``rows`` positions) and,
        unless ``held`` is None, the most blocks a stream holds. The lengths are read once,
        for every group, and only where a step is checked."""
        coord = self.coordinator
        lengths: tuple[Any, ...] | None = None
        for g, handle in enumerate(self.handles):
            geometries = self._checks[g]
            checked = bool(geometries) and rows[g] > 0
            if not checked and held is None:
                continue
            table = coord.block_table(stream.id, handle).ids_in(CacheBlocks)
            if checked:
                if lengths is None:
                    lengths = self._stepper.seq_lens(stream.id)
                self._check(stream, handle, table, geometries, rows[g], magnitude(lengths[g]))
            if held is not None:
                held[g] = max(held[g], len(table) - table.count(NULL_BLOCK))

    def _end(self, stream: _Stream) -> None:
        """Free a stream that ended; its client's next stream arrives later."""
        work = self.workload
        self.coordinator.free(stream.id)
        del self._running[stream.id]
        self._finished += 1
        rng = self._rng(stream.client)
        gap = 0 if work.arrival == 0 else round(rng.expovariate(1 / work.arrival))
        self._arrivals.setdefault(self._t + 1 + gap, []).append(stream.client)

    def _check(
        self,
        stream: _Stream,
        handle: GroupHandle[Any],
        table: Sequence[int],
        geometries: list[_KernelGeometry],
        step_rows: int,
        seq_len: int,
    ) -> None:
        """Residency of the step just taken (``step_rows`` positions of ``seq_len``, the kernel's
        unit), with the kernels' own windows."""
        for tokens_per_block, window, chunk in geometries:
            lost = first_unresident(
                table,
                tokens_per_block,
                seq_len - step_rows,
                step_rows,
                sliding_window=window,
                chunk=chunk,
            )
            if lost is None:
                continue
            run = self.run
            run.lost_steps += 1
            if run.first_lost is None:
                query, key, column = lost
                unit = handle.unit
                run.first_lost = LostKey(
                    self._t,
                    stream.id,
                    stream.step - 1,
                    handle.name,
                    Position(query, unit),
                    Position(key, unit),
                    column,
                )
            return

    def _record(self, held: list[int]) -> None:
        series, coord = self.run.series, self.coordinator
        series["step"].append(self._t)
        series["running"].append(coord.num_requests)
        series["waiting"].append(len(self._waiting))
        series["finished"].append(self._finished)
        series["preempted"].append(self._preempted_now)
        usage = coord.usage_by_group()
        for handle, most in zip(self.handles, held, strict=True):
            name = handle.name
            series[f"{name}.used"].append(usage[name].used.numerical_value_in(CacheBlocks))
            series[f"{name}.reserved"].append(usage[name].reserved.numerical_value_in(CacheBlocks))
            series[f"{name}.held_max"].append(most)

    def finish(self) -> None:
        """Summarize the run per group (after its last step, or an interruption)."""
        run, series = self.run, self.run.series
        if run.interrupted:
            # Ctrl-C may have come in the middle of recording a step: keep whole steps only.
            whole = min(len(values) for values in series.values())
            for values in series.values():
                del values[whole:]
        run.groups = []
        for g, handle in enumerate(self.handles):
            name = handle.name
            kernel_unit: type[Any] = Tokens if handle.unit is Tokens else EncoderTokens
            group_plan = run.plan.group(name)
            spec = handle.spec
            stats = None
            if self.workload.shared_prompt and spec.kind in _ATTENTION_OVER_OWN_POSITIONS:
                stats = self.coordinator.prefix_cache_stats(handle)
            run.groups.append(
                GroupStats(
                    name=name,
                    kind=spec.kind,
                    manager_window=spec.sliding_window,
                    kernel_windows=tuple(
                        Window(w, Tokens if handle.unit is Tokens else EncoderTokens)
                        for _, w, _ in self._geometries[name]
                        if w is not None
                    ),
                    capacity=group_plan.num_blocks.numerical_value_in(PoolBlocks) - 1,
                    reserved_per_stream=group_plan.admission_cap.numerical_value_in(AdmissionCap),
                    peak_held_per_stream=max(series[f"{name}.held_max"], default=0),
                    peak_used=max(series[f"{name}.used"], default=0),
                    peak_reserved=max(series[f"{name}.reserved"], default=0),
                    prefix_hits=None if stats is None else stats.hits,
                    prefix_queried=None if stats is None else stats.queried,
                    recomputed=kernel_unit(self._recomputed[g])
                    if self.admission == "on_demand"
                    else None,
                )
            )


def load_example() -> KvUnitsConfig:
    """The shipped Voxtral Realtime example (``kvunits simulate`` without a config)."""
    from importlib import resources

    from kvunits.contracts.config import load_config

    example = resources.files("kvunits").joinpath("examples", "voxtral_realtime.toml")
    with resources.as_file(example) as path:
        return load_config(path)


# -- helpers ----------------------------------------------------------------------------------


def _series_keys(names: Sequence[str]) -> list[str]:
    keys = ["step", "running", "waiting", "finished", "preempted"]
    for name in names:
        keys += [f"{name}.used", f"{name}.reserved", f"{name}.held_max"]
    return keys


def _groups(model: ModelSpec, config: KvUnitsConfig) -> tuple[AnyLayerGroup, ...]:
    from kvunits.contracts import group_layers

    return group_layers(model, config.engine)[0]


def _is_stepped_pooled(group: AnyLayerGroup) -> bool:
    """A pooled group that grows with the stream (not a cross-attention one, written once)."""
    return group.manager.slot_unit is PooledBlocks and group.manager.kind != "cross_attention"


def _real_kernels(config: KvUnitsConfig) -> dict[str, _KernelWindow]:
    """Per layer of the config, the window and chunk its kernel reads: what residency is
    checked against, whatever manager window a variant gives the layer's group. The block
    a kernel reads is the run's own (`Simulation`): the shared layout grows block sizes."""
    out: dict[str, _KernelWindow] = {}
    for group in _groups(config.model, config):
        for name, kernel in group.kernels.items():
            ints = kernel_ints(kernel)
            out[name] = (ints.sliding_window_tok, ints.chunk_tok)
    return out


def _geometries(group: AnyLayerGroup, kernels: dict[str, _KernelWindow]) -> list[_KernelGeometry]:
    """The distinct geometries a group's kernels read: its own blocks (the run's layout), each
    layer's real window and chunk."""
    found: list[_KernelGeometry] = []
    for name, kernel in group.kernels.items():
        window, chunk = kernels[name]
        geometry = (kernel_ints(kernel).tokens_per_block, window, chunk)
        if geometry not in found:
            found.append(geometry)
    return found


def _layout_groups(model: ModelSpec, config: KvUnitsConfig) -> tuple[AnyLayerGroup, ...]:
    """The groups as the engine's ``kv_cache_layout`` lays them out, the coordinator's: with
    ``shared``, block sizes unified and large groups split into parts (``name[i]``)."""
    if config.engine.kv_cache_layout != "shared":
        return _groups(model, config)
    from kvunits.runtime.shared_pool import shared_layout

    return shared_layout(model, config.engine).groups


def _parts(group: AnyLayerGroup, layout: Sequence[AnyLayerGroup]) -> list[str]:
    """The names the layout gives ``group``'s layers: itself, or the parts it is split into."""
    members = set(group.layer_names)
    return [g.name for g in layout if members.issuperset(g.layer_names)]


def _target_group(
    config: KvUnitsConfig, windows: Sequence[IntQuantity], name: str | None
) -> tuple[AnyLayerGroup, str]:
    """The sliding-window group whose manager window the comparison varies, and the name the
    runs' summaries show it by (the part named, in a layout that splits the group)."""
    groups = [g for g in _groups(config.model, config) if g.manager.kind == "sliding_window"]
    layout = _layout_groups(config.model, config)
    units = {type(w) for w in windows}
    if len(units) != 1:
        raise UnitTypeError(
            "--compare-windows: write every window in one unit, got "
            + ", ".join(sorted(u.unit for u in units)),
            field="--compare-windows",
            expected="one unit",
            got=", ".join(str(w) for w in windows),
        )
    unit = units.pop()

    def counts(group: AnyLayerGroup) -> bool:
        slot = group.manager.slot_unit
        return unit is slot or (unit is EncoderTokens and slot is PooledBlocks)

    if name is not None:
        chosen = [(g, name) for g in groups if g.name == name]
        chosen += [(g, name) for g in groups if name != g.name and name in _parts(g, layout)]
        if not chosen:
            known = [p for g in groups for p in dict.fromkeys([g.name, *_parts(g, layout)])]
            raise SpecError(
                f"--group {name!r} is not a sliding-window group of {config.model.name!r}; "
                f"sliding-window groups: {', '.join(known) or 'none'}"
            )
        group, shown = chosen[0]
        if not counts(group):
            slot = group.manager.slot_unit
            raise UnitTypeError(
                f"--compare-windows: group {name!r} counts its manager window in {slot.unit}, "
                f"not {unit.unit}",
                field="--compare-windows",
                expected=slot.unit,
                got=unit.unit,
            )
        return group, shown if shown != group.name else _parts(group, layout)[0]
    candidates = [g for g in groups if counts(g)]
    if len(candidates) == 1:
        return candidates[0], _parts(candidates[0], layout)[0]
    if not candidates:
        raise UnitTypeError(
            f"--compare-windows: no sliding-window group of {config.model.name!r} counts "
            f"{unit.unit}; its sliding-window groups: "
            + (", ".join(f"{g.name} ({g.manager.slot_unit.unit})" for g in groups) or "none"),
            field="--compare-windows",
            expected=" or ".join(sorted({g.manager.slot_unit.unit for g in groups})) or "-",
            got=unit.unit,
        )
    raise SpecError(
        f"--compare-windows: several sliding-window groups count {unit.unit} ("
        + ", ".join(g.name for g in candidates)
        + "); name one with --group"
    )


def _with_window(layer: LayerSpec, declared: int) -> SlidingWindowLayer:
    """The same layer declaring a window of ``declared`` in its kernel unit (validated)."""
    assert isinstance(layer, SlidingWindowLayer)
    window = Window(declared, EncoderTokens) if layer.pooled else Window(declared, Tokens)
    return SlidingWindowLayer.model_validate({**dict(layer), "sliding_window": window})


def lost_keys(runs: Sequence[Run]) -> list[str]:
    """One line per run that read a freed block: where it first did, and how often."""
    lines = []
    for run in runs:
        if run.first_lost is not None:
            lines.append(
                f"{run.variant.label}: {run.first_lost}; {run.lost_steps} stream steps read a "
                "freed block"
            )
    return lines
