"""``kvunits simulate``: the subcommand's flags, its output (table, JSON, CSV) and its figure.

`add_simulate_command` registers the subcommand (standard library only, so that ``--help``
stays instant); `run_simulate` runs it. The simulation itself is `kvunits._simulate`, the
figure `kvunits._figure`.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

if TYPE_CHECKING:
    from kvunits.contracts import Window
    from kvunits.contracts.config import KvUnitsConfig

    from ._simulate import Run, Workload

EXIT_OK: Final = 0
EXIT_INVALID: Final = 2
#: Stopped by Ctrl-C (128 + SIGINT), after printing what was simulated.
EXIT_INTERRUPTED: Final = 130

_DESCRIPTION: Final = (
    "Run a streaming workload through the real cache coordinator (the plan, admission and "
    "eviction code of kvunits' runtime) and report what the cache does: blocks held and "
    "reserved per group over time, streams admitted and waiting, and whether a query ever read "
    "a key from a block its manager had already freed (checked with the kernel's own window). "
    "--compare-windows runs the same workload once per manager window of one group."
)

_EPILOG: Final = """\
examples:
  kvunits simulate                               the shipped Voxtral Realtime example
  kvunits simulate --compare-windows "750 pooled_block,188 pooled_block,189 pooled_block" \\
      --out sim.png
  kvunits simulate --streams 8 --steps 400 --format csv > series.csv
  kvunits simulate examples/hf/gemma-3-1b-it/config.json --compare-windows "511 token,512 token"
  kvunits simulate --compare-admission "reserve,on_demand,declared"

the workload: --streams clients each open one stream after another; a stream is admitted at
the engine's limits (each group reserves its admission cap), runs a prefill step (--prompt
tokens, and one step of encoder tokens) then --steps decode steps of --cadence, and is freed;
its client's next stream arrives --arrival steps later on average. A stream that cannot be
reserved waits, first come first served.

--admission (an engine setting): reserve, as above; declared: a stream declares its whole
length and reserves exactly that; on_demand: vLLM's scheduler: blocks as steps need them, a
running stream that runs short preempts the latest admitted, which recomputes what it had
when it resumes; --compare-admission "reserve,on_demand,declared" runs each.

--compare-windows: each window in the group's manager unit (pooled_block, or token) is the
manager window itself: the group's layers are declared with the window W' = (S - 1) * P + 1,
whose pool_window is S slots, while residency is checked with the kernel's real window. A
window in encoder_token is declared as it is (manager window pool_window(W, P)).

exit status: 0, 2 for invalid input (or --out without matplotlib, before simulating), 130
when stopped with Ctrl-C (what was simulated is still printed and drawn). On a terminal a
progress bar shows on stderr while it runs; nothing is shown on a pipe or with --format json
or csv.
"""


def add_simulate_command(
    commands: Any,
    engine_flags: argparse.ArgumentParser,
    formatter: type[argparse.HelpFormatter],
    load: Callable[[str | None, argparse.Namespace], KvUnitsConfig],
) -> None:
    """Register ``simulate`` on the command line's subparsers; ``load`` reads the config as
    every command does (the shipped example by default, engine flags applied)."""
    simulate = commands.add_parser(
        "simulate",
        parents=[engine_flags],
        formatter_class=formatter,
        help="run a streaming workload through the real coordinator; draw what the cache does",
        description=textwrap.fill(_DESCRIPTION, width=88),
        epilog=_EPILOG,
    )
    simulate.add_argument(
        "config",
        nargs="?",
        metavar="CONFIG",
        help="a kvunits config or a Hugging Face config.json; default: the shipped "
        "voxtral_realtime.toml",
    )
    work = simulate.add_argument_group("workload")
    work.add_argument(
        "--streams",
        type=int,
        metavar="N",
        help="streams open at once, at most (clients); default: a quarter more than the plan "
        "admits, so that some wait",
    )
    work.add_argument(
        "--steps", type=int, default=1000, metavar="N", help="decode steps per stream (1000)"
    )
    work.add_argument(
        "--duration",
        type=int,
        metavar="N",
        help="scheduler steps to simulate; default: three stream lives, 3 × (steps + 1)",
    )
    work.add_argument(
        "--arrival",
        type=int,
        default=0,
        metavar="N",
        help="mean steps between a stream's end and its client's next stream (exponential; "
        "default 0: at once)",
    )
    work.add_argument(
        "--prompt", default="16 token", metavar="QTY", help='prefill text, "16 token" (default)'
    )
    work.add_argument(
        "--cadence",
        metavar="QTY,QTY",
        help='what a stream adds per step, e.g. "4 encoder_token,1 token" (default: the '
        "engine's max_encoder_tokens_per_step, and 1 token); encoder tokens need not be a "
        "multiple of P",
    )
    work.add_argument(
        "--seed", type=int, default=0, metavar="N", help="seeds the gaps of --arrival (0)"
    )
    work.add_argument(
        "--shared-prompt",
        action="store_true",
        help="every stream brings the same prompt: admitted with prefix caching, a stream "
        "starts after the full blocks the cache holds (a hit is whole blocks, at most the "
        "prompt less one position); the tables show the hits",
    )
    compare = simulate.add_argument_group("comparisons")
    compare.add_argument(
        "--compare-admission",
        metavar="LIST",
        help='admission policies to compare, e.g. "reserve,on_demand,declared" (one run each; '
        "with --compare-windows, each window under each policy); one policy for every run: "
        "--admission",
    )
    compare.add_argument(
        "--compare-windows",
        metavar="LIST",
        help='manager windows to compare, e.g. "750 pooled_block,188 pooled_block,189 '
        'pooled_block"',
    )
    compare.add_argument(
        "--group",
        metavar="NAME",
        help="the sliding-window group whose window to vary (default: the only one counting "
        "the windows' unit); with --kv-cache-layout shared, a part of a split group "
        "(text/sliding_window[0]) names the group, whose parts all vary",
    )
    output = simulate.add_argument_group("output")
    output.add_argument(
        "--out",
        metavar="FILE",
        help="draw the figure into FILE: .png, .svg, or .html (needs matplotlib: "
        'pip install "kvunits[plot]")',
    )
    output.add_argument(
        "--format",
        choices=("table", "json", "csv"),
        default="table",
        help="table for people (default); json or csv: the series of every step, for your own "
        "tools",
    )
    simulate.set_defaults(command=run_simulate, load=load)


def run_simulate(args: argparse.Namespace) -> int:
    """The ``simulate`` command (see the module docstring)."""
    from ._figure import FIGURE_SUFFIXES, INSTALL_HINT, have_matplotlib

    out = None if args.out is None else Path(args.out)
    if out is not None:
        _check_out(out, FIGURE_SUFFIXES)
        if not have_matplotlib():  # before the run, not after it
            print(f"kvunits: error: --out {out} needs matplotlib: {INSTALL_HINT}", file=sys.stderr)
            return EXIT_INVALID
    try:
        return _run(args, out, have_matplotlib(), INSTALL_HINT)
    except KeyboardInterrupt:  # before or after the simulation: nothing to show
        print("kvunits: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _run(args: argparse.Namespace, out: Path | None, can_draw: bool, hint: str) -> int:
    from kvunits.contracts import SpecError

    from ._simulate import as_configured, simulate, window_variants

    config = args.load(args.config, args)
    if args.compare_windows is not None:
        variants = window_variants(config, args.compare_windows.split(","), args.group)
    elif args.group is not None:
        raise SpecError("--group names the group of --compare-windows; give that too")
    else:
        variants = as_configured(config)
    if args.compare_admission is not None:
        from ._simulate import admission_variants

        variants = admission_variants(config, args.compare_admission.split(","), variants)
    workload = _workload(args, config, runs=len(variants))

    shown = args.format == "table" and sys.stdout.isatty()  # a pipe or a program: no bar
    progress = _Progress(workload.duration, [v.label for v in variants], shown)
    try:
        runs = simulate(config, workload, variants, on_step=progress)
    finally:
        progress.close()
    stopped = any(r.interrupted for r in runs)

    if args.format == "json":
        json.dump(to_dict(config, workload, runs), sys.stdout)
        sys.stdout.write("\n")
    elif args.format == "csv":
        write_csv(runs, sys.stdout)
    else:
        render(config, workload, runs, sys.stdout)
    sys.stdout.flush()

    status = EXIT_INTERRUPTED if stopped else EXIT_OK
    if stopped:
        done = sum(r.steps_done for r in runs)
        print(
            f"kvunits: stopped by Ctrl-C after {done} of "
            f"{workload.duration * len(variants)} scheduler steps; shown: what was simulated",
            file=sys.stderr,
        )
    if out is None:
        if args.format == "table" and not can_draw:
            print(f"kvunits: to draw these series: {hint}, then --out sim.png", file=sys.stderr)
        return status
    from ._figure import write_figure

    try:
        write_figure(runs, workload, config, out, summary_rows(runs))
    except OSError as exc:
        print(f"kvunits: error: cannot write --out {out}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_INVALID
    print(f"kvunits: wrote {out}", file=sys.stderr)
    return status


def _check_out(out: Path, suffixes: tuple[str, ...]) -> None:
    """Refuse an output the figure cannot be written to, before simulating: a path no system
    call takes, another suffix, a folder that does not exist, or something other than a
    regular file (a directory, a FIFO, a device) already there."""
    from kvunits.contracts import UnitValueError
    from kvunits.contracts.config import ConfigError, check_path, file_kind

    try:
        check_path(out)
    except ConfigError as error:
        (issue,) = error.issues
        raise UnitValueError(
            f"--out {issue.where}: {issue.message}",
            field="--out",
            expected="a file name a system call takes",
            got=issue.where,
        ) from None
    kind = file_kind(out)
    if kind not in (None, "a regular file"):
        raise UnitValueError(
            f"--out {out}: {kind} is there; the figure is written to a regular file",
            field="--out",
            expected="a new or regular file",
            got=kind or "",
        )
    if out.suffix.lower() not in suffixes:
        raise UnitValueError(
            f"--out {out}: the figure is written as {', '.join(suffixes)}; name the file so",
            field="--out",
            expected=" | ".join(suffixes),
            got=out.suffix or "no suffix",
        )
    if file_kind(out.parent) != "a directory":
        raise UnitValueError(
            f"--out {out}: the folder {out.parent} does not exist",
            field="--out",
            expected="a file in an existing folder",
            got=str(out),
        )


def _workload(args: argparse.Namespace, config: KvUnitsConfig, *, runs: int) -> Workload:
    from kvunits.contracts import (
        EncoderTokens,
        Tokens,
        UnitTypeError,
        UnitValueError,
        parse_quantity,
    )

    from ._simulate import Workload

    encoder_step: EncoderTokens | None = None
    decoder_step = Tokens(1)
    if args.cadence is not None:
        from kvunits.contracts.internal import parse_any_quantity

        given: dict[str, str] = {}
        for text in args.cadence.split(","):
            value = parse_any_quantity(text.strip(), field="--cadence")
            unit = type(value).unit
            if unit in given:
                raise UnitValueError(
                    f"--cadence: {unit} given twice ({given[unit]}, {value}); give one step "
                    "per unit",
                    field="--cadence",
                    expected="one encoder_token step and one token step at most",
                    got=args.cadence,
                )
            given[unit] = str(value)
            if type(value) is EncoderTokens:
                encoder_step = value
            elif type(value) is Tokens:
                decoder_step = value
            else:
                raise UnitTypeError(
                    f"--cadence: {value} is neither encoder_token (pooled groups) nor token "
                    "(the decoder's groups)",
                    field="--cadence",
                    expected="encoder_token, token",
                    got=str(value),
                )
    return Workload.for_config(
        config,
        streams=args.streams,
        steps=args.steps,
        duration=args.duration,
        arrival=args.arrival,
        prompt=parse_quantity(args.prompt, Tokens, field="--prompt"),
        encoder_step=encoder_step,
        decoder_step=decoder_step,
        seed=args.seed,
        shared_prompt=args.shared_prompt,
        runs=runs,
    )


class _Progress:
    """A progress bar on stderr for runs longer than a moment, when ``shown`` and stderr is a
    terminal (the table's reader is there too; a pipe or a JSON reader gets none)."""

    DELAY_S = 0.5  # a run shorter than this shows no bar at all

    def __init__(self, duration: int, labels: list[str], shown: bool = True) -> None:
        self._duration = duration
        self._labels = labels
        self._start = time.monotonic()
        self._bar: Any = None
        self._task: Any = None
        self._tty = shown and sys.stderr.isatty()

    def __call__(self, index: int, step: int) -> None:
        if not self._tty or step % 32:
            return
        if self._bar is None:
            if time.monotonic() - self._start < self.DELAY_S:
                return
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(
                TextColumn("simulate {task.description}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total} steps"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("", total=self._duration * len(self._labels))
        self._bar.update(
            self._task,
            completed=index * self._duration + step + 1,
            description=self._labels[index],
        )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


# -- output ---------------------------------------------------------------------------------


def summary_rows(runs: list[Run]) -> list[list[str]]:
    """One row per run (header first): the compared group's blocks per stream, the streams
    admitted and waiting, and the step of the first key read from a freed block (`lost_keys`
    says more)."""
    from ._figure import focus_group

    focus = focus_group(runs[0]) if runs else "-"
    header = [
        "run",
        f"{focus}: held per stream",
        "reserved per stream",
        "streams at once",
        "waiting (most)",
        "ended",
        "preempted",
        "recomputed",
        "first key read from a freed block",
    ]
    rows = [header]
    for run in runs:
        stats = run.group_stats(focus)
        lost = "none" if run.first_lost is None else f"step {run.first_lost.step}"
        if run.interrupted:
            lost += f" (stopped at step {run.steps_done})"
        rows.append(
            [
                run.variant.label,
                f"{stats.peak_held_per_stream} cache_block",
                f"{stats.reserved_per_stream} cache_block",
                str(run.peak_running),
                str(run.peak_waiting),
                str(run.finished),
                str(run.preemptions) if run.admission == "on_demand" else "-",
                ", ".join(str(g.recomputed) for g in run.groups if g.recomputed is not None) or "-",
                lost,
            ]
        )
    return rows


def group_rows(runs: list[Run]) -> list[list[str]]:
    """One row per run and group (header first): windows, pool, blocks reserved and held."""
    header = [
        "run",
        "group",
        "window: kernel → manager",
        "pool",
        "reserved per stream",
        "held per stream (most)",
        "held (most)",
        "reserved (most)",
    ]
    hits = any(g.prefix_queried is not None for run in runs for g in run.groups)
    if hits:
        header.append("prefix cache hits")
    rows = [header]
    for run in runs:
        for i, g in enumerate(run.groups):
            rows.append(
                [
                    run.variant.label if i == 0 else "",
                    g.name,
                    _window(g.kernel_windows, g.manager_window, g.kind),
                    str(g.capacity),
                    str(g.reserved_per_stream),
                    str(g.peak_held_per_stream),
                    str(g.peak_used),
                    str(g.peak_reserved),
                ]
            )
            if hits:
                rows[-1].append(
                    "-"
                    if g.prefix_hits is None or g.prefix_queried is None
                    else f"{g.prefix_hits} of {g.prefix_queried}"
                )
    return rows


def _window(kernel: tuple[Window[Any], ...], manager: Window[Any] | None, kind: str) -> str:
    if manager is None:
        return kind
    return f"{', '.join(str(w) for w in kernel) or '-'} → {manager}"


def render(config: KvUnitsConfig, workload: Workload, runs: list[Run], out: TextIO) -> None:
    """The tables for people."""
    from ._render import clean
    from ._simulate import lost_keys
    from ._table import Line, Screen, Table

    screen = Screen(out)
    screen.print(
        Line("kvunits simulate: ")
        .append(clean(config.model.name), "bold")
        .append(f"  ({clean(config.source)})", "dim")
    )
    screen.print(f"workload: {workload.describe()}", "dim")
    for rows, notes in (
        (group_rows(runs), ["cache blocks per group; pool: what the budget buys, less the null"]),
        (summary_rows(runs), lost_keys(runs)),
    ):
        table = Table(rows[0])
        for row in rows[1:]:
            table.add_row(*row)
        screen.print(table)
        for note in notes:
            screen.print(note, "dim")


def to_dict(config: KvUnitsConfig, workload: Workload, runs: list[Run]) -> dict[str, Any]:
    """``--format json``: the engine settings once, the workload and every run with its
    series; quantities as ``{"value", "unit"}`` (the series are counts of cache blocks and
    streams)."""
    from ._render import SCHEMA_VERSION, engine_settings, quantity

    return {
        "schema_version": SCHEMA_VERSION,
        "model": config.model.name,
        "source": config.source,
        "engine": engine_settings(config),
        "kv_cache_memory": quantity(config.engine.kv_cache_memory),
        "workload": workload.to_dict(),
        "runs": [run.to_dict() for run in runs],
    }


def write_csv(runs: list[Run], out: TextIO) -> None:
    """``--format csv``: one row per run and scheduler step; block counts in cache_block."""
    if not runs:
        return
    keys = list(runs[0].series)
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["window", *keys])
    for run in runs:
        columns = [run.series[k] for k in keys]
        for values in zip(*columns, strict=True):
            writer.writerow([run.variant.label, *values])
