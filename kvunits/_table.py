"""What the command line prints for people: lines of styled text and simple tables.

The layout is rich's (``box.SIMPLE_HEAD``, no edge, one space of padding: columns three
spaces apart, a rule under the header), drawn here without importing rich: rich's import and
first table cost about a seventh of ``kvunits plan`` (issue 14's goal of 0.2 s). rich draws
only what this module does not: a table or a line wider than the terminal it is shown on
(rich wraps the cells to fit). Written to a pipe or a file, lines are never wrapped, so a
line can be grepped whole. ``tests/cli/test_table.py`` compares the two drawings.

On a stream that cannot encode the drawing (``PYTHONIOENCODING=ascii``, a C locale) the
rule is ``-`` with ``+`` between columns, columns are separated by ``|`` (rich's ASCII box),
and the text is written in ASCII (``->`` for ``→``; anything else escaped) before it is
measured, so the columns stay aligned. Styles (bold, dim) are written only to a terminal
(not when ``TERM`` is ``dumb``).
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal, TextIO, cast

Style = Literal["bold", "dim"] | None
Justify = Literal["left", "right"]

#: ASCII for the symbols kvunits writes itself; anything else (user text) is escaped.
_ASCII: Final = str.maketrans({"→": "->", "↔": "<->", "…": "...", "×": "x", "−": "-", "─": "-"})
_SGR: Final = {"bold": "\x1b[1m", "dim": "\x1b[2m"}
_RESET: Final = "\x1b[0m"


def ascii_text(text: str) -> str:
    """``text`` in ASCII: kvunits' own symbols spelled out, anything else escaped."""
    return text.translate(_ASCII).encode("ascii", "backslashreplace").decode("ascii")


def can_encode(out: TextIO, text: str) -> bool:
    """Whether ``out`` can write ``text`` (its encoding; UTF-8 when it has none)."""
    try:
        text.encode(getattr(out, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def cell_width(text: str) -> int:
    """Terminal columns ``text`` takes: East Asian wide and full-width characters two,
    combining marks none, others one (what rich measures for the text kvunits prints)."""
    if text.isascii():
        return len(text)
    width = 0
    for char in text:
        if unicodedata.combining(char):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


class Line:
    """One line of text (or several, split at ``\\n``) made of spans, each with a style."""

    __slots__ = ("spans",)

    def __init__(self, text: str = "", style: Style = None) -> None:
        self.spans: list[tuple[str, Style]] = [(text, style)] if text else []

    def append(self, text: str, style: Style = None) -> Line:
        """Add ``text`` in ``style`` at the end; returns the line."""
        if text:
            self.spans.append((text, style))
        return self

    @property
    def plain(self) -> str:
        """The text without its styles."""
        return "".join(text for text, _ in self.spans)


@dataclass(frozen=True, slots=True)
class Column:
    """A table column: its header, how its cells are justified, a style for all its cells."""

    header: str
    justify: Justify = "left"
    style: Style = None


class Table:
    """Rows under a header, columns sized to their widest cell."""

    __slots__ = ("columns", "rows")

    def __init__(self, columns: Iterable[Column | str]) -> None:
        self.columns = tuple(c if isinstance(c, Column) else Column(c) for c in columns)
        self.rows: list[tuple[str, ...]] = []

    def add_row(self, *cells: str) -> None:
        """One row, a plain text per column."""
        if len(cells) != len(self.columns):
            raise ValueError(f"a row of {len(cells)} cells in a table of {len(self.columns)}")
        self.rows.append(cells)


class Screen:
    """Where kvunits writes for people: a stream, in ASCII if it needs it, styled on a
    terminal, and as wide as the terminal (a stream that is no terminal has no width)."""

    __slots__ = ("_ascii", "_out", "_rich", "_styled", "_width")

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._ascii = not can_encode(out, "─→")
        terminal = out.isatty()
        self._styled = terminal and os.environ.get("TERM", "") not in ("dumb", "unknown")
        self._width = _terminal_width(out) if terminal else None
        self._rich: Any = None

    def print(self, item: str | Line | Table, style: Style = None) -> None:
        """Write ``item`` and a newline (a whole line in ``style``, when given)."""
        if isinstance(item, Table):
            self._table(item)
            return
        line = Line(item, style) if isinstance(item, str) else item
        if style is not None:
            line = Line(line.plain, style)
        spans = [(self._text(text), s) for text, s in line.spans]
        rows = "".join(text for text, _ in spans).split("\n")
        if self._width is not None and max(cell_width(r) for r in rows) > self._width:
            self._by_rich(_rich_text(line))
            return
        self._out.write("".join(self._styles(text, s) for text, s in spans) + "\n")

    def _table(self, table: Table) -> None:
        columns = table.columns
        headers = [self._text(c.header) for c in columns]
        rows = [[self._text(cell) for cell in row] for row in table.rows]
        widths = [
            max([cell_width(h)] + [cell_width(row[i]) for row in rows])
            for i, h in enumerate(headers)
        ]
        last = len(columns) - 1
        # rich's SIMPLE_HEAD without edges: one space of padding inside each column boundary.
        total = sum(widths) + 3 * last
        if self._width is not None and total > self._width:
            self._by_rich(_rich_table(table))
            return
        divider, rule, cross = (" | ", "-", "+") if self._ascii else ("   ", "─", "─")
        lines = [self._row(headers, columns, widths, divider, header=True)]
        lines.append(cross.join(rule * (w + (i > 0) + (i < last)) for i, w in enumerate(widths)))
        lines.extend(self._row(row, columns, widths, divider) for row in rows)
        self._out.write("\n".join(lines) + "\n")

    def _row(
        self,
        cells: list[str],
        columns: tuple[Column, ...],
        widths: list[int],
        divider: str,
        *,
        header: bool = False,
    ) -> str:
        parts = []
        for cell, column, width in zip(cells, columns, widths, strict=True):
            if column.justify == "right":
                cell = cell.rstrip()  # as rich justifies right: trailing spaces dropped
                text = " " * (width - cell_width(cell)) + cell
            else:
                text = cell + " " * (width - cell_width(cell))
            parts.append(self._styles(text, "bold" if header else column.style))
        return divider.join(parts)

    def _text(self, text: str) -> str:
        return ascii_text(text) if self._ascii else text

    def _styles(self, text: str, style: Style) -> str:
        if style is None or not self._styled or not text:
            return text
        return _SGR[style] + text + _RESET

    def _by_rich(self, renderable: Any) -> None:
        """A table or line wider than the terminal: rich wraps it to fit."""
        if self._rich is None:
            from rich.console import Console

            out = cast(TextIO, _AsciiStream(self._out)) if self._ascii else self._out
            # A height too, else rich takes 80 columns on a dumb terminal whatever the width.
            self._rich = Console(
                file=out,
                width=self._width,
                height=25,
                highlight=False,
                markup=False,
                emoji=False,
            )
        self._rich.print(renderable)


def _terminal_width(out: TextIO) -> int:
    """The terminal's columns (``COLUMNS`` first, as rich and the shell say), else 80."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size(out.fileno()).columns or 80
    except (OSError, ValueError, AttributeError):
        return 80


def _rich_text(line: Line) -> Any:
    from rich.text import Text

    text = Text()
    for part, style in line.spans:
        text.append(part, style=style)
    return text


def _rich_table(table: Table) -> Any:
    from rich import box
    from rich.table import Table as RichTable
    from rich.text import Text

    drawn = RichTable(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column in table.columns:
        drawn.add_column(column.header, justify=column.justify, style=column.style)
    for row in table.rows:
        drawn.add_row(*(Text(cell) for cell in row))
    return drawn


class _AsciiStream:
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
