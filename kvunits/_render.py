"""Rendering a capacity plan: a dict for ``--format json``, tables for people.

JSON is for programs: every quantity is a number with its unit beside it,
``{"value": 189, "unit": "pooled_block"}`` (a rank's: ``"unit": "byte/rank"``), plain counts
(layers, ranks, requests) are numbers, each engine setting appears once with where it came
from, and ``schema_version`` says which shape this is (`SCHEMA_VERSION`). The table shows the
same quantities as text (``"189 pooled_block"``), with a binary-prefixed size next to large
byte counts, drawn by `kvunits._table` (rich's layout, without rich's import). Text that came
from the user (model and file names) is shown as plain text: no markup, no control
characters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, TextIO

if TYPE_CHECKING:
    from kvunits.contracts import BlockSize, Chunk, IntQuantity, Position, Window
    from kvunits.contracts.config import KvUnitsConfig
    from kvunits.runtime.capacity import CapacityPlan, GroupPlan, LayoutPlan
    from kvunits.runtime.deployment import StagePlan

    from ._table import Table

#: The shape of kvunits' JSON output (plan, fit, convert, simulate): 2 since quantities are
#: ``{"value", "unit"}`` objects (1: ``"<int> <unit>"`` strings, no key).
SCHEMA_VERSION: Final = 2

_BINARY = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))

#: The unit of each engine setting (a fraction, a switch and a dtype have none).
_SETTING_UNITS: Final = {
    "block_size_slots": "slot/cache_block",
    "max_model_len": "token",
    "max_num_batched_tokens": "token",
    "max_encoder_len": "encoder_token",
    "max_encoder_tokens_per_step": "encoder_token",
    "tensor_parallel_size": "rank",
    "pipeline_parallel_size": "stage",
    "decode_context_parallel_size": "rank",
    "max_concurrent_batches": "batch",
    "num_speculative_tokens": "token",
    "memory_budget": "byte/rank",
    "gpu_memory": "byte/rank",
    "weights_memory": "byte/rank",
    "activation_memory": "byte/rank",
}


def quantity(
    value: IntQuantity | BlockSize[Any] | Window[Any] | Position[Any] | Chunk[Any] | None,
) -> dict[str, Any] | None:
    """A quantity for JSON: ``{"value": 189, "unit": "pooled_block"}`` (``None`` stays); a
    window, position or chunk says its kind: ``{"value": 750, "unit": "encoder_token",
    "kind": "window"}``.

    Example:
        >>> from kvunits.contracts import PooledBlocks, Window
        >>> quantity(PooledBlocks(189)), quantity(Window(189, PooledBlocks))["kind"]
        ({'value': 189, 'unit': 'pooled_block'}, 'window')
    """
    from kvunits.contracts import BlockSize, Chunk, Position, Window

    if value is None:
        return None
    if isinstance(value, BlockSize):  # slots of its unit per cache block
        slots = value.numerical_value_in(value.unit)
        return {"value": slots, "unit": f"{value.unit.unit}/cache_block"}
    if isinstance(value, (Window, Position, Chunk)):
        n = value.numerical_value_in(value.unit)
        return {"value": n, "unit": value.unit.unit, "kind": value.kind}
    return {"value": value.numerical_value_in(type(value)), "unit": value.unit}


def engine_settings(config: KvUnitsConfig) -> dict[str, Any]:
    """Every engine setting once: its value (with its unit), and where it came from."""
    from kvunits.contracts import IntQuantity
    from kvunits.contracts.config._models import ENGINE_FIELDS

    engine = config.engine
    settings: dict[str, Any] = {}
    for name in ENGINE_FIELDS:
        value = getattr(engine, name)
        entry: dict[str, Any]
        if isinstance(value, IntQuantity):
            entry = {"value": value.numerical_value_in(type(value))}
        elif name == "cache_dtype":
            entry = {"value": "auto" if value is None else value.value}
        else:
            entry = {"value": value}
        if name in _SETTING_UNITS:
            entry["unit"] = _SETTING_UNITS[name]
        entry["from"] = config.engine_sources.get(name)
        settings[name] = entry
    return settings


def plan_to_dict(config: KvUnitsConfig, plan: CapacityPlan) -> dict[str, Any]:
    """The plan as JSON-ready data (see the module doc)."""
    engine = config.engine
    return {
        "schema_version": SCHEMA_VERSION,
        "model": config.model.name,
        "source": config.source,
        "engine": engine_settings(config),
        "in_flight": {
            "concurrent_batches": engine.concurrent_batches,
            "num_lookahead_tokens": quantity(engine.num_lookahead_tokens),
            "max_in_flight": quantity(engine.max_in_flight),
            "max_encoder_in_flight": quantity(engine.max_encoder_in_flight),
        },
        "ranks": plan.parallelism.world_size,
        "kv_cache_memory": quantity(plan.kv_cache_memory),
        "groups": [_group_to_dict(group) for group in plan.groups],
        "stages": [_stage_to_dict(stage) for stage in plan.stages],
        "uncached_layers": list(plan.uncached_layers),
        "bytes_per_request": quantity(plan.bytes_per_request),
        "concurrent_requests": plan.concurrent_requests,
        "layouts": [_layout_to_dict(layout) for layout in plan.layouts],
    }


def _layout_to_dict(layout: LayoutPlan) -> dict[str, Any]:
    return {
        "layout": layout.layout,
        "concurrent_requests": layout.concurrent_requests,
        "num_blocks": [quantity(n) for n in layout.num_blocks],
        "bytes_per_request": quantity(layout.bytes_per_request),
        "page_size": quantity(layout.page_size),
        "refused": layout.refused,
    }


def _group_to_dict(plan: GroupPlan) -> dict[str, Any]:

    group, manager = plan.group, plan.group.manager
    kernel = next(iter(group.kernels.values()), None)
    return {
        "name": group.name,
        "kind": manager.kind,
        "layers": len(group.layer_names),
        "slot_unit": manager.slot_unit.unit,
        "pool": manager.pool.tokens_per_block,
        "block_size": quantity(manager.block_size),
        "kernel_block_size": None if kernel is None else quantity(kernel.tokens_per_block),
        "sliding_window": quantity(plan.sliding_window),
        "manager_sliding_window": quantity(manager.sliding_window),
        "sliding_window_conversion": _window_conversion(plan),
        "chunk": None if kernel is None else quantity(kernel.chunk),
        "manager_chunk": quantity(manager.chunk),
        "max_len": quantity(group.limits.max_len),
        "max_in_flight": quantity(group.limits.max_in_flight),
        "kv_heads": None if manager.kind == "state" else quantity(manager.kv_heads),
        "dtype": manager.dtype.value,
        "page_size": quantity(plan.page_size),
        "block_bytes": quantity(plan.block_bytes),
        "admission_cap": quantity(plan.admission_cap),
        "bytes_per_request": quantity(plan.bytes_per_request),
        "num_blocks": quantity(plan.num_blocks),
    }


def _stage_to_dict(stage: StagePlan) -> dict[str, Any]:
    return {
        "stage": stage.index,
        "layers": list(stage.layer_names),
        "groups": [
            {
                "name": g.name,
                "layers": list(g.layer_names),
                "kv_heads": quantity(g.kv_heads),
                "kv_heads_per_rank": quantity(g.kv_heads_per_rank),
                "head_replicas": g.head_replicas,
                "dcp_sharded": g.dcp_sharded,
                "page_size": quantity(g.page_size),
                "block_bytes": quantity(g.block_bytes),
                "admission_cap": quantity(g.admission_cap),
                "bytes_per_request": quantity(g.bytes_per_request),
                "num_blocks": quantity(g.num_blocks),
            }
            for g in stage.groups
        ],
        "null_bytes": quantity(stage.null_bytes),
        "bytes_per_request": quantity(stage.bytes_per_request),
        "memory_used": quantity(stage.memory_used),
    }


def _window_conversion(plan: GroupPlan) -> str | None:
    if plan.group.manager.sliding_window is None:
        return None
    return "pool_window" if plan.group.manager.slot_unit.unit == "pooled_block" else "identity"


def render_table(config: KvUnitsConfig, plan: CapacityPlan, out: TextIO) -> None:
    """Draw the plan for people: the engine settings, one row per group, the ranks' plan
    when there is more than one rank, the totals.

    On a stream that cannot encode the drawing (``PYTHONIOENCODING=ascii``, a C locale),
    the boxes are ASCII and every text is written in ASCII (``->`` for ``→``; user text
    escaped): `kvunits._table`.
    """
    from kvunits.contracts import CONVERSIONS

    from ._table import Column, Line, Screen, Table

    screen = Screen(out)
    screen.print(
        Line("kvunits plan: ")
        .append(clean(config.model.name), "bold")
        .append(f"  ({clean(config.source)})", "dim")
    )
    screen.print(settings_table(config))
    in_flight = in_flight_line(config)
    if in_flight:
        screen.print(in_flight, "dim")

    table = Table(
        (
            "group",
            "kind",
            Column("layers", "right"),
            "window: model → manager",
            Column("page size", "right"),
            Column("admission cap", "right"),
            Column("bytes per request", "right"),
            Column("blocks bought", "right"),
        )
    )
    pooled = False
    for group in plan.groups:
        manager = group.group.manager
        pooled = pooled or (
            manager.sliding_window is not None and manager.pool.tokens_per_block > 1
        )
        table.add_row(
            group.group.name,
            manager.kind,
            str(len(group.group.layer_names)),
            _window_cell(group),
            str(group.page_size),
            str(group.admission_cap),
            f"{group.bytes_per_request} ({human_bytes(group.bytes_per_request)})",
            str(group.num_blocks),
        )
    screen.print(table)
    if pooled:
        conversion = next(c for c in CONVERSIONS if c.name == "pool_window")
        screen.print(
            f"pooled windows: {conversion.name} = {conversion.formula} "
            f"(rounding: {conversion.rounding}; the manager keeps every key the kernel reads)",
            "dim",
        )
    if plan.uncached_layers:
        screen.print(f"layers without a KV cache: {len(plan.uncached_layers)}")
    parallelism = plan.parallelism
    if parallelism.world_size > 1 or parallelism.decode_context_parallel_size > 1:
        screen.print(f"\nper rank: {parallelism}", "bold")
        screen.print(rank_table(plan))
    budget = plan.kv_cache_memory
    summary = Line()
    each = " per rank" if parallelism.world_size > 1 else ""
    summary.append(f"{human_bytes(budget)}{each} buys ")
    if plan.layout == "shared":
        summary.append(f"{plan.groups[0].num_blocks} in one pool shared by all groups")
        summary.append(" (one null block);\none full-length request holds ")
    else:
        summary.append(", ".join(f"{g.num_blocks} ({g.group.name})" for g in plan.groups))
        summary.append(" with one null block each;\none full-length request holds ")
    summary.append(f"{plan.bytes_per_request} ({human_bytes(plan.bytes_per_request)})")
    if parallelism.world_size > 1:
        most = max(s.bytes_per_request for s in plan.stages)
        summary.append(f", {most} ({human_bytes(most)}) on its fullest rank")
    summary.append("; ")
    summary.append(f"concurrent requests admitted: {plan.concurrent_requests}", "bold")
    screen.print(summary)
    if plan.layout == "shared" and plan.layouts:
        # A group split to equal layer counts shows once: "text/sliding_window[0..5]".
        parts: dict[str, list[str]] = {}
        for g in plan.groups:
            base = g.group.name.split("[")[0]
            parts.setdefault(base, []).append(str(g.group.manager.block_size))
        sizes = ", ".join(
            f"{base}{f'[0..{len(s) - 1}]' if len(s) > 1 else ''} {s[0]}"
            for base, s in parts.items()
        )
        page = plan.layouts[0].page_size
        screen.print(
            f"one pool: a cache block is {plan.groups[0].block_bytes} ({page} per layer); "
            f"block sizes unified to that page: {sizes}",
            "dim",
        )
    for layout in plan.layouts[1:]:
        screen.print(_other_layout(layout), "dim")


def _other_layout(layout: LayoutPlan) -> str:
    """One line on the layout the engine did not choose, to compare."""
    name = "one pool shared by all groups" if layout.layout == "shared" else "a pool per group"
    if layout.refused is not None:
        return f"with kv_cache_layout = {layout.layout} ({name}): refused: {layout.refused}"
    page = f", pages unified to {layout.page_size}" if layout.page_size is not None else ""
    return (
        f"with kv_cache_layout = {layout.layout} ({name}{page}): "
        f"{layout.concurrent_requests} concurrent requests"
    )


def rank_table(plan: CapacityPlan) -> Table:
    """One row per stage and group: the layers the stage holds and what one rank holds."""
    from ._table import Column, Table

    table = Table(
        (
            Column("stage", "right"),
            "layers",
            "group",
            "kv heads: rank of model",
            Column("page size", "right"),
            Column("admission cap", "right"),
            Column("bytes per request", "right"),
            Column("blocks", "right"),
        )
    )
    for stage in plan.stages:
        first = True
        for group in stage.groups:
            heads = "-"
            if group.kv_heads is not None and group.kv_heads_per_rank is not None:
                per_rank, heads_total = group.kv_heads_per_rank, group.kv_heads
                heads = f"{_number(per_rank)} of {_number(heads_total)}"
                if group.head_replicas > 1:
                    heads += f" ({group.head_replicas} copies)"
            if group.dcp_sharded:
                heads += ", DCP"
            table.add_row(
                str(stage.index) if first else "",
                layer_span(group.layer_names),
                group.name,
                heads,
                str(group.page_size),
                str(group.admission_cap),
                f"{group.bytes_per_request} ({human_bytes(group.bytes_per_request)})",
                str(group.num_blocks),
            )
            first = False
    return table


def settings_table(config: KvUnitsConfig) -> Table:
    """The engine settings that are set, each with where it came from."""
    from kvunits.contracts.config._models import GPU_MEMORY_FIELDS

    from ._table import Column, Table

    table = Table(("engine setting", "value", Column("from", style="dim")))
    engine = config.engine
    for name, entry in engine_settings(config).items():
        value = entry["value"]
        if value is None or (name in GPU_MEMORY_FIELDS and engine.gpu_memory is None):
            continue
        shown = str(getattr(engine, name)) if "unit" in entry else str(value)
        if name == "cache_dtype":
            shown = str(value)
        if isinstance(value, bool):
            shown = "on" if value else "off"
        if entry.get("unit") in ("byte", "byte/rank"):
            shown = f"{shown} ({human_bytes(value)})"
        table.add_row(name, shown, clean(entry["from"] or "-"))
    if engine.memory_budget is None:
        budget = engine.kv_cache_memory
        table.add_row(
            "(KV cache memory)",
            f"{budget} ({human_bytes(budget)})",
            "gpu_memory × gpu_memory_utilization − weights − activations",
        )
    return table


def in_flight_line(config: KvUnitsConfig) -> str:
    """What is in flight, when it is more than one step: the batches, the lookahead."""
    engine = config.engine
    batches, lookahead = engine.concurrent_batches, engine.num_lookahead_tokens
    if batches == 1 and not lookahead:
        return ""
    why = (
        "max_concurrent_batches"
        if engine.max_concurrent_batches is not None
        else f"{engine.pipeline_parallel_size} pipeline stage"
        + ("s" if engine.pipeline_parallel_size > 1 else "")
        + (" + 1 for async scheduling" if engine.async_scheduling else "")
    )
    line = f"in flight: {batches} batch{'es' if batches > 1 else ''} ({why}) × "
    line += f"{engine.max_num_batched_tokens}"
    if lookahead:
        line += f" + {lookahead} of speculative lookahead"
    line += f" = {engine.max_in_flight}"
    encoder = engine.max_encoder_in_flight
    if encoder is not None and batches > 1:
        line += f"; encoder {encoder}"
    return line


def _window_cell(plan: GroupPlan) -> str:
    manager = plan.group.manager
    if plan.sliding_window is not None and manager.sliding_window is not None:
        return f"{plan.sliding_window} → {manager.sliding_window}"
    kernel = next(iter(plan.group.kernels.values()), None)
    if manager.chunk is not None and kernel is not None and kernel.chunk is not None:
        return f"chunk {kernel.chunk} → {manager.chunk}"
    if manager.kind == "full_attention":
        return f"all of max_len ({plan.group.limits.max_len})"
    if manager.fixed_length is not None:
        return f"encoder output ({manager.fixed_length})"
    if manager.kind == "state":
        return "fixed state"
    return "per layer"


def layer_span(names: tuple[str, ...]) -> str:
    """Layer names, runs of one stack shortened: ``text.0 … text.15`` → ``text.0-15``.

    Example:
        >>> layer_span(("text.0", "text.1", "text.2", "cross.0", "proj", "text.4"))
        'text.0-2, cross.0, proj, text.4'
    """
    parts: list[str] = []
    run: list[int] = []
    stack = ""

    def close() -> None:
        if run:
            parts.append(f"{stack}.{run[0]}" + (f"-{run[-1]}" if len(run) > 1 else ""))
            run.clear()

    for name in names:
        prefix, _, index = name.rpartition(".")
        if not (prefix and index.isdigit()):
            close()
            parts.append(name)
            continue
        if prefix == stack and run and int(index) == run[-1] + 1:
            run.append(int(index))
            continue
        close()
        stack = prefix
        run.append(int(index))
    close()
    return ", ".join(parts)


def _number(value: IntQuantity) -> int:
    """The plain number of a quantity, in its own unit (for a table cell)."""
    return value.numerical_value_in(type(value))


def human_bytes(size_in_bytes: int | IntQuantity) -> str:
    """``218103808`` → ``"208 MiB"``; ``1310326784`` → ``"1.22 GiB"``; a byte quantity
    (`Bytes`, `RankBytes`) is read in its own unit.

    Example:
        >>> human_bytes(524288)
        '512 KiB'
    """
    if isinstance(size_in_bytes, int):
        n = size_in_bytes
    else:
        n = size_in_bytes.numerical_value_in(type(size_in_bytes))
    for name, size in _BINARY:
        if n >= size:
            whole, rest = divmod(n, size)
            return f"{whole} {name}" if rest == 0 else f"{n / size:.2f} {name}"
    return f"{n} B"


def clean(text: str) -> str:
    """User text for a terminal: control characters escaped (no cursor tricks)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
