"""The figure of ``kvunits simulate --out``: what the cache does over time, one column per run.

Rows, top to bottom, sharing their y axis across the columns so that the runs compare at a
glance:

1. the compared group's blocks *per stream*: the most any one stream holds, against what each
   stream reserves (its admission cap);
2. one row per group: the blocks all streams hold, the blocks reserved, and the group's pool;
3. the streams: admitted (running) and waiting to be admitted.

A red line marks the first step at which a query read a key from a block its manager had
already freed. matplotlib is an optional dependency (``pip install "kvunits[plot]"``); it is
imported only here, through its object API (no pyplot, no global backend switch), so drawing
changes nothing in the caller's matplotlib state.
"""

from __future__ import annotations

import html
import io
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from kvunits.contracts import EncoderTokens

if TYPE_CHECKING:
    from kvunits.contracts.config import KvUnitsConfig

    from ._simulate import Run, Workload

#: The output formats of ``--out``, by suffix.
FIGURE_SUFFIXES: Final = (".png", ".svg", ".html")

#: What to install for a figure.
INSTALL_HINT: Final = 'pip install "kvunits[plot]"'

_HELD, _RESERVED, _POOL = "#1f77b4", "#d62728", "#555555"
_RUNNING, _WAITING, _LOST = "#2ca02c", "#ff7f0e", "#d62728"


def have_matplotlib() -> bool:
    """Whether matplotlib can be imported (without importing it)."""
    from importlib.util import find_spec

    try:
        return find_spec("matplotlib") is not None
    except (ImportError, ValueError):  # a module stubbed out in sys.modules
        return False


def focus_group(run: Run) -> str:
    """The group whose per-stream blocks the top row shows: the compared group, else the
    first pooled sliding-window group, else the first sliding-window group, else the first."""
    if run.variant.group is not None:
        return run.variant.group
    windowed = [g for g in run.groups if g.manager_window is not None]
    pooled = [g for g in windowed if any(w.unit is EncoderTokens for w in g.kernel_windows)]
    return (pooled or windowed or run.groups)[0].name


def write_figure(
    runs: list[Run], workload: Workload, config: KvUnitsConfig, path: Path, rows: list[list[str]]
) -> None:
    """Draw the runs into ``path`` (``.png``, ``.svg``, or ``.html``: the SVG in a page with
    the summary table ``rows``, header first).

    Raises:
        ImportError: matplotlib is not installed.
        OSError: the file cannot be written.
    """
    figure = _draw(runs, workload, config)
    suffix = path.suffix.lower()
    if suffix == ".png":
        figure.savefig(path, format="png", dpi=90)
    elif suffix == ".svg":
        figure.savefig(path, format="svg")
    else:
        svg = io.StringIO()
        figure.savefig(svg, format="svg")
        path.write_text(_page(svg.getvalue(), runs, workload, config, rows), encoding="utf-8")


def _draw(runs: list[Run], workload: Workload, config: KvUnitsConfig) -> Any:
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    from ._render import human_bytes

    groups = [g.name for g in runs[0].groups]
    focus = focus_group(runs[0])
    nrows, ncols = len(groups) + 2, len(runs)
    figure = Figure(figsize=(4.4 * ncols + 0.8, 2.0 * nrows + 1.6), layout="constrained")
    axes = figure.subplots(nrows, ncols, sharex=True, sharey="row", squeeze=False)
    for col, run in enumerate(runs):
        steps = run.series["step"]
        column = [axes[row][col] for row in range(nrows)]
        stats = {g.name: g for g in run.groups}

        ax = column[0]
        ax.set_title(_column_title(run), fontsize=10, loc="left")
        ax.plot(steps, run.series[f"{focus}.held_max"], color=_HELD, lw=1.4)
        ax.axhline(stats[focus].reserved_per_stream, color=_RESERVED, ls="--", lw=1.2)
        _note(
            ax,
            f"one stream holds {stats[focus].peak_held_per_stream}, "
            f"reserves {stats[focus].reserved_per_stream}",
            bold=True,
        )
        lost = run.first_lost
        verdict = "no key lost" if lost is None else f"keys lost in {run.lost_steps} stream steps"
        ax.text(
            0.98,
            0.5,
            verdict,
            transform=ax.transAxes,
            ha="right",
            va="top",
            fontsize=9,
            weight="bold",
            color=_RUNNING if lost is None else _LOST,
        )

        for row, name in enumerate(groups, start=1):
            ax = column[row]
            used, reserved = run.series[f"{name}.used"], run.series[f"{name}.reserved"]
            ax.fill_between(steps, used, color=_HELD, alpha=0.35, lw=0)
            ax.plot(steps, used, color=_HELD, lw=1.0)
            ax.plot(steps, reserved, color=_RESERVED, lw=1.2, ls="--")
            ax.axhline(stats[name].capacity, color=_POOL, ls=":", lw=1.4)
            _note(
                ax,
                f"pool {stats[name].capacity}; most held {stats[name].peak_used}, "
                f"reserved {stats[name].peak_reserved}",
            )

        ax = column[-1]
        ax.stackplot(
            steps,
            run.series["running"],
            run.series["waiting"],
            colors=(_RUNNING, _WAITING),
            alpha=0.6,
        )
        note = f"the plan admits {run.plan.concurrent_requests} at once; {run.finished} ended"
        if run.preemptions:
            # on_demand: each preemption as a red tick at its step (how many, in the note).
            preempted = run.series["preempted"]
            ticks = [x for x, n in zip(steps, preempted, strict=True) if n]
            ax.plot(ticks, [0] * len(ticks), "|", color=_LOST, ms=8)
            note += f"; {run.preemptions} preempted (red ticks)"
        _note(ax, note)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("scheduler step", fontsize=9)

        if lost is not None:
            for ax in column:
                ax.axvline(lost.step, color=_LOST, lw=1.4)
            column[0].annotate(
                f"step {lost.step}: query {lost.query}\nreads key {lost.key},\nalready freed",
                xy=(lost.step, 0.78),
                xycoords=("data", "axes fraction"),
                xytext=(5, 0),
                textcoords="offset points",
                color=_LOST,
                fontsize=8,
                va="center",
            )
        for ax in column:
            ax.tick_params(labelsize=8)
            ax.grid(alpha=0.25)
            ax.margins(x=0)

    axes[0][0].set_ylabel(f"{focus}: cache blocks\nper stream", fontsize=9)
    for row, name in enumerate(groups, start=1):
        axes[row][0].set_ylabel(f"{name}: cache blocks\nall streams", fontsize=9)
    axes[-1][0].set_ylabel("streams", fontsize=9)
    for row in axes:
        # After every column's data: the row's shared limits cover all of them.
        row[0].set_ylim(bottom=0)

    figure.legend(
        handles=[
            Patch(color=_HELD, alpha=0.6, label="held (top row: the stream holding most)"),
            Line2D([], [], color=_RESERVED, ls="--", label="reserved (top row: one stream's cap)"),
            Line2D([], [], color=_POOL, ls=":", label="pool"),
            Patch(color=_RUNNING, alpha=0.6, label="streams admitted"),
            Patch(color=_WAITING, alpha=0.6, label="streams waiting"),
            Line2D([], [], color=_LOST, label="first key read from a freed block"),
        ],
        loc="outside lower center",
        ncols=min(6, 2 * ncols),
        fontsize=8,
        frameon=False,
        title=textwrap.fill(workload.describe(), width=40 * ncols + 20),
        title_fontsize=8,
    )
    budget = human_bytes(config.engine.kv_cache_memory)
    figure.suptitle(
        f"kvunits simulate: {config.model.name}, {budget} of KV cache", fontsize=12, weight="bold"
    )
    return figure


def _note(ax: Any, text: str, *, bold: bool = False) -> None:
    """A panel's numbers, bottom right, on a white ground so lines do not hide them."""
    ax.text(
        0.98,
        0.05,
        text,
        transform=ax.transAxes,
        ha="right",
        va="bottom",
        fontsize=9 if bold else 8,
        weight="bold" if bold else "normal",
        bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1.5},
    )


def _column_title(run: Run) -> str:
    variant = run.variant
    head = (
        "windows as configured"
        if variant.group is None
        else f"{variant.group} manager window: {variant.label}"
    )
    if variant.admission is not None:
        head = f"admission {variant.admission.kind}; " + head.split(", ")[0]
    stats = next((g for g in run.groups if g.name == focus_group(run)), None)
    if stats is not None and stats.kernel_windows:
        head += f"\nkernel reads {', '.join(str(w) for w in stats.kernel_windows)}"
    if run.interrupted:
        head += f" (stopped at step {run.steps_done})"
    return head


def _page(
    svg: str, runs: list[Run], workload: Workload, config: KvUnitsConfig, rows: list[list[str]]
) -> str:
    """A self-contained HTML page: title, workload, summary table, the SVG inline."""
    from ._simulate import lost_keys

    notes = "".join(f"<p>{html.escape(line)}</p>\n" for line in lost_keys(runs))
    start = svg.find("<svg")
    inline = svg[start:] if start >= 0 else svg
    header, *body = rows
    table = "<tr>" + "".join(f"<th>{html.escape(cell)}</th>" for cell in header) + "</tr>\n"
    for row in body:
        table += "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>\n"
    title = html.escape(f"kvunits simulate: {config.model.name}")
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }}
th, td {{ border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; }}
th {{ background: #f3f3f3; }}
svg {{ max-width: 100%; height: auto; }}
</style>
</head>
<body>
<h1>{title}</h1>
<p>{html.escape(config.source)}: {html.escape(workload.describe())}.</p>
<table>
{table}</table>
{notes}{inline}
</body>
</html>
"""
