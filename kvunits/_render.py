"""Rendering a capacity plan: a dict for ``--format json``, a rich table for people.

Quantities render as their unit strings (``"189 pooled_block"``), in JSON and in the table
alike; the table adds a binary-prefixed size next to large byte counts. rich is imported
only when a table is drawn, so ``--format json`` never pays for it. Text that came from the
user (model and file names) is shown as plain text: no rich markup, no control characters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, TextIO, cast

if TYPE_CHECKING:
    from contracts import IntQuantity
    from contracts.config import KvUnitsConfig
    from runtime.capacity import CapacityPlan, GroupPlan

_BINARY = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def plan_to_dict(config: KvUnitsConfig, plan: CapacityPlan) -> dict[str, Any]:
    """The plan as JSON-ready data; every quantity is a ``"<int> <unit>"`` string."""
    engine = config.engine
    return {
        "model": config.model.name,
        "source": config.source,
        "engine": {
            "block_size_slots": engine.block_size_slots,
            "max_model_len": str(engine.max_model_len),
            "max_num_batched_tokens": str(engine.max_num_batched_tokens),
            "max_encoder_len": _str(engine.max_encoder_len),
            "max_encoder_tokens_per_step": _str(engine.max_encoder_tokens_per_step),
            "memory_budget": str(engine.memory_budget),
            "cache_dtype": "auto" if engine.cache_dtype is None else engine.cache_dtype.value,
        },
        "engine_sources": dict(config.engine_sources),
        "groups": [_group_to_dict(group) for group in plan.groups],
        "uncached_layers": list(plan.uncached_layers),
        "bytes_per_request": str(plan.bytes_per_request),
        "memory_budget": str(plan.memory_budget),
        "concurrent_requests": plan.concurrent_requests,
    }


def _group_to_dict(plan: GroupPlan) -> dict[str, Any]:
    group, manager = plan.group, plan.group.manager
    kernel = next(iter(group.kernels.values()), None)
    return {
        "name": group.name,
        "kind": manager.kind,
        "layers": group.num_layers,
        "slot_unit": manager.slot_unit.unit,
        "pool": manager.pool.tokens_per_block,
        "block_size": str(manager.block_size),
        "kernel_block_size": None if kernel is None else str(kernel.tokens_per_block),
        "sliding_window": _str(plan.sliding_window),
        "manager_sliding_window": _str(manager.sliding_window),
        "sliding_window_conversion": _window_conversion(plan),
        "chunk": None if kernel is None else _str(kernel.chunk),
        "manager_chunk": _str(manager.chunk),
        "max_len": str(group.limits.max_len),
        "max_in_flight": str(group.limits.max_in_flight),
        "kv_heads": manager.kv_heads,
        "dtype": manager.dtype.value,
        "page_size": str(plan.page_size),
        "block_bytes": str(plan.block_bytes),
        "admission_cap": str(plan.admission_cap),
        "bytes_per_request": str(plan.bytes_per_request),
        "num_blocks": str(plan.num_blocks),
    }


def _window_conversion(plan: GroupPlan) -> str | None:
    if plan.group.manager.sliding_window is None:
        return None
    return "pool_window" if plan.group.manager.slot_unit.unit == "pooled_block" else "identity"


def render_table(config: KvUnitsConfig, plan: CapacityPlan, out: TextIO) -> None:
    """Draw the plan for people: the engine settings, one row per group, the totals.

    On a stream that cannot encode the drawing (``PYTHONIOENCODING=ascii``, a C locale),
    rich draws ASCII boxes and every text is written in ASCII (``->`` for ``→``; user text
    escaped).
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from contracts import CONVERSIONS

    if not isinstance(out, _Ascii) and not can_encode(out, "─→"):
        render_table(config, plan, cast(TextIO, _Ascii(out)))
        return

    class Quiet(Console):
        def on_broken_pipe(self) -> None:
            # rich exits with status 1 here; the command line ends quietly instead (cli).
            self.quiet = True
            raise BrokenPipeError

    # Piped output is not wrapped at 80 columns, so that a line can be grepped whole.
    console = Quiet(file=out, width=None if out.isatty() else 160, highlight=False)
    title = Text("kvunits plan: ")
    title.append(clean(config.model.name), style="bold")
    title.append(f"  ({clean(config.source)})", style="dim")
    console.print(title)

    engine = Table(box=box.SIMPLE, show_edge=False, pad_edge=False, title_justify="left")
    engine.add_column("engine setting")
    engine.add_column("value")
    engine.add_column("from", style="dim")
    for name, value in plan_to_dict(config, plan)["engine"].items():
        if value is None:
            continue
        shown = str(value)
        if name == "memory_budget":
            shown = f"{value} ({human_bytes(config.engine.memory_budget.value)})"
        engine.add_row(name, Text(shown), Text(clean(config.engine_sources.get(name, "-"))))
    console.print(engine)

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for header, justify in (
        ("group", "left"),
        ("kind", "left"),
        ("layers", "right"),
        ("window: model → manager", "left"),
        ("page size", "right"),
        ("admission cap", "right"),
        ("bytes per request", "right"),
        ("blocks bought", "right"),
    ):
        table.add_column(header, justify=justify)  # type: ignore[arg-type]
    pooled = False
    for group in plan.groups:
        manager = group.group.manager
        pooled = pooled or (
            manager.sliding_window is not None and manager.pool.tokens_per_block > 1
        )
        table.add_row(
            Text(group.group.name),
            manager.kind,
            str(group.group.num_layers),
            _window_cell(group),
            str(group.page_size),
            str(group.admission_cap),
            f"{group.bytes_per_request} ({human_bytes(group.bytes_per_request.value)})",
            str(group.num_blocks),
        )
    console.print(table)
    if pooled:
        conversion = next(c for c in CONVERSIONS if c.name == "pool_window")
        console.print(
            Text(
                f"pooled windows: {conversion.name} = {conversion.formula} "
                f"(rounding: {conversion.rounding}; the manager keeps every key the kernel "
                "reads)",
                style="dim",
            )
        )
    if plan.uncached_layers:
        console.print(Text(f"layers without a KV cache: {len(plan.uncached_layers)}"))
    summary = Text()
    summary.append(f"{human_bytes(plan.memory_budget.value)} buys ")
    summary.append(", ".join(f"{g.num_blocks} ({g.group.name})" for g in plan.groups))
    summary.append(" with one null block each;\none full-length request holds ")
    summary.append(f"{plan.bytes_per_request} ({human_bytes(plan.bytes_per_request.value)}); ")
    summary.append(f"concurrent requests admitted: {plan.concurrent_requests}", style="bold")
    console.print(summary)


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


#: ASCII for the symbols kvunits writes itself; anything else (user text) is escaped.
_ASCII: Final = str.maketrans({"→": "->", "↔": "<->", "…": "...", "×": "x", "−": "-", "─": "-"})


def can_encode(out: TextIO, text: str) -> bool:
    """Whether ``out`` can write ``text`` (its encoding; UTF-8 when it has none)."""
    try:
        text.encode(getattr(out, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def ascii_text(text: str) -> str:
    """``text`` in ASCII: kvunits' own symbols spelled out, anything else escaped."""
    return text.translate(_ASCII).encode("ascii", "backslashreplace").decode("ascii")


class _Ascii:
    """A text stream that writes ASCII to ``out``; rich, seeing its encoding, draws ASCII
    boxes."""

    encoding = "ascii"

    def __init__(self, out: TextIO) -> None:
        self._out = out

    def write(self, text: str) -> int:
        return self._out.write(ascii_text(text))

    def flush(self) -> None:
        self._out.flush()

    def isatty(self) -> bool:
        return self._out.isatty()

    def fileno(self) -> int:
        return self._out.fileno()


def human_bytes(n: int) -> str:
    """``218103808`` → ``"208 MiB"``; ``1310326784`` → ``"1.22 GiB"``.

    Example:
        >>> human_bytes(524288)
        '512 KiB'
    """
    for name, size in _BINARY:
        if n >= size:
            whole, rest = divmod(n, size)
            return f"{whole} {name}" if rest == 0 else f"{n / size:.2f} {name}"
    return f"{n} B"


def clean(text: str) -> str:
    """User text for a terminal: control characters escaped (no cursor tricks)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _str(value: IntQuantity | None) -> str | None:
    return None if value is None else str(value)
