"""`kvunits._table` draws what rich draws (issue 14: the plan's tables without rich's import).

Where a table fits, its drawing must be rich's, byte for byte (``box.SIMPLE_HEAD``, no edge,
no edge padding, as the command line drew them with rich): compared on generated tables and
lines, in UTF-8 and in ASCII. Where rich would differ on purpose it is said: a stream that is
no terminal is never wrapped (rich wrapped at 160 columns), text is made ASCII before it is
measured (rich measured ``→`` as one column, then wrote ``->``), and a table or line wider
than a terminal is drawn by rich itself.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich import box
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from kvunits._table import Column, Line, Screen, Table, cell_width

from ..examples import examples

# ASCII, a wide CJK character, an accented letter, kvunits' own symbols, spaces.
_CELL = st.text(alphabet=st.sampled_from(list("ab Z09_./()→×−漢é")), max_size=12)
_ASCII_CELL = st.text(alphabet=st.sampled_from(list("ab Z09_./()-")), max_size=12)


@st.composite
def _tables(draw: Any, cells: Any = _CELL) -> tuple[list[Column], list[list[str]]]:
    columns = [
        Column(
            draw(cells.filter(bool)),  # kvunits' headers are never empty (rich: 1 column)
            draw(st.sampled_from(["left", "right"])),
            draw(st.sampled_from([None, "dim"])),
        )
        for _ in range(draw(st.integers(1, 6)))
    ]
    rows = draw(st.lists(st.lists(cells, min_size=len(columns), max_size=len(columns)), max_size=5))
    return columns, rows


def _ours(columns: list[Column], rows: list[list[str]], out: Any) -> None:
    table = Table(columns)
    for row in rows:
        table.add_row(*row)
    Screen(out).print(table)


def _rich(columns: list[Column], rows: list[list[str]], out: Any) -> None:
    table = RichTable(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column in columns:
        table.add_column(column.header, justify=column.justify, style=column.style)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    console = Console(file=out, width=10_000, highlight=False, markup=False, emoji=False)
    console.print(table)


def _drawn(draw: Any, encoding: str) -> str:
    out = io.TextIOWrapper(io.BytesIO(), encoding=encoding, newline="\n")
    draw(out)
    out.flush()
    return out.buffer.getvalue().decode(encoding)


@settings(max_examples=examples(300))
@given(_tables())
def test_a_table_is_drawn_as_rich_draws_it(table: tuple[list[Column], list[list[str]]]) -> None:
    columns, rows = table
    assert _drawn(lambda out: _ours(columns, rows, out), "utf-8") == _drawn(
        lambda out: _rich(columns, rows, out), "utf-8"
    )


@settings(max_examples=examples(200))
@given(_tables(_ASCII_CELL))
def test_an_ascii_table_is_drawn_as_rich_draws_it(
    table: tuple[list[Column], list[list[str]]],
) -> None:
    # A stream that cannot encode '─': rich's ASCII box ('|' between columns, '-+-' rule).
    columns, rows = table
    assert _drawn(lambda out: _ours(columns, rows, out), "ascii") == _drawn(
        lambda out: _rich(columns, rows, out), "ascii"
    )


@settings(max_examples=examples(200))
@given(st.lists(st.tuples(_CELL, st.sampled_from([None, "bold", "dim"])), max_size=6))
def test_a_line_is_written_as_rich_writes_it(spans: list[tuple[str, Any]]) -> None:
    line, text = Line(), Text()
    for part, style in spans:
        line.append(part, style)
        text.append(part, style=style)
    ours = _drawn(lambda out: Screen(out).print(line), "utf-8")
    theirs = _drawn(
        lambda out: Console(file=out, width=10_000, highlight=False).print(text), "utf-8"
    )
    assert ours == theirs


def test_the_plan_table_measures_its_ascii_text() -> None:
    # rich measured '→' as one column and wrote '->' (two): the rows shifted against the
    # header. Made ASCII first, every '|' of the table lines up.
    table = Table(("window", Column("blocks", "right")))
    table.add_row("750 encoder_token → 189 pooled_block", "13")
    table.add_row("8192 token → 8192 token", "641")
    drawn = _drawn(lambda out: Screen(out).print(table), "ascii").splitlines()
    assert drawn[2] == "750 encoder_token -> 189 pooled_block |     13"
    assert {line.index("|") for line in drawn if "|" in line} == {38}
    assert drawn[1] == "-" * 38 + "+" + "-" * 7


def test_a_pipe_gets_whole_lines() -> None:
    # Written to a pipe or a file, nothing is wrapped (rich wrapped at 160 columns).
    line = "word " * 100
    table = Table(("a", "b"))
    table.add_row("x" * 300, "y")
    out = io.StringIO()
    screen = Screen(out)
    screen.print(line)
    screen.print(table)
    lines = out.getvalue().splitlines()
    assert lines[0] == line and lines[3] == "x" * 300 + "   y"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_styles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("TERM", "xterm-256color")
    out = _Terminal()
    screen = Screen(out)
    table = Table(("name", Column("from", style="dim")))
    table.add_row("block_size_slots", "file")
    screen.print(table)
    screen.print(Line("plan: ").append("voxtral", "bold"))
    assert out.getvalue().splitlines() == [
        "\x1b[1mname            \x1b[0m   \x1b[1mfrom\x1b[0m",
        "─" * 23,
        "block_size_slots   \x1b[2mfile\x1b[0m",
        "plan: \x1b[1mvoxtral\x1b[0m",
    ]
    monkeypatch.setenv("TERM", "dumb")
    plain = _Terminal()
    Screen(plain).print(table)
    assert "\x1b" not in plain.getvalue()


def test_a_table_wider_than_the_terminal_is_wrapped_by_rich(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setenv("TERM", "dumb")
    table = Table(("a long header here", Column("another long header", "right"), "third one"))
    table.add_row("some words in a cell", "12345", "and more words here")
    out = _Terminal()
    Screen(out).print(table)
    Screen(out).print("word " * 20)
    lines = out.getvalue().splitlines()
    assert len(lines) > 4 and all(cell_width(line) <= 40 for line in lines)


def test_a_row_has_one_cell_per_column() -> None:
    with pytest.raises(ValueError, match="a row of 1 cells in a table of 2"):
        Table(("a", "b")).add_row("x")


def test_cell_width() -> None:
    assert [cell_width(t) for t in ("abc", "漢字", "é", "e\u0301", "→")] == [3, 4, 1, 1, 1]
