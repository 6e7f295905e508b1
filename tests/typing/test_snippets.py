"""Negative type tests: mypy must reject exactly the marked lines of each snippet, and Python
must reject them too.

A snippet line that mypy must reject ends in ``# E: <message>  [code]``, the message exactly as
mypy prints it. The runner checks mypy once over all snippets (with the repository's
``mypy.ini``, so with CI's strict settings) and compares the exact set of (file, line, message)
errors with the marks; notes are ignored. Then, for agreement at run time, it executes each
snippet without its marked lines (correct code must run) and each marked line alone in that
namespace (it must raise `kvunits.contracts.UnitError`, or a spec model's `SpecValidationError`
whose every entry is a unit error), so a marked line is one top-level statement.

A line ending in ``# R: <why>`` is a known static gap: mypy accepts it (so it must report
nothing there), and only the run-time check rejects it. If mypy learns to reject one, this test
fails and the line becomes an ``# E:`` line.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import re
import subprocess
import sys
import tokenize
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from kvunits.contracts import SpecValidationError, UnitError

REPO = Path(__file__).resolve().parents[2]
SNIPPETS = sorted((REPO / "tests" / "typing" / "snippets").glob("*.py"))

#: Without the kernels extra, the snippets that use torch or kvunits.kernels are skipped.
_NO_KERNELS = [name for name in ("torch", "triton") if importlib.util.find_spec(name) is None]


def _needs_kernels(path: Path) -> bool:
    text = path.read_text()
    return "import torch" in text or "kvunits.kernels" in text


#: The snippets this environment can check (all of them with the kernels extra installed).
CHECKED = [p for p in SNIPPETS if not (_NO_KERNELS and _needs_kernels(p))]
_PARAMS = [
    pytest.param(p, id=p.stem)
    if p in CHECKED
    else pytest.param(
        p,
        id=p.stem,
        marks=pytest.mark.skip(
            reason=f"{' and '.join(_NO_KERNELS)} not installed (the kernels extra)"
        ),
    )
    for p in SNIPPETS
]

#: A mark: "E" mypy and the run time reject the line; "R" only the run time does.
_MARKS = {"# E: ": "E", "# R: ": "R"}
_ERROR = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+): error: (?P<message>.+)$")
_SUMMARY = re.compile(
    r"(?:Found \d+ errors? in \d+ files? \(checked|Success: no issues found in) (\d+) source files?"
)

#: (snippet file name, line number, full message with its [code])
Error = tuple[str, int, str]


@dataclass(frozen=True)
class MarkedLine:
    """One line that must be rejected: by mypy and at run time (E), or at run time only (R)."""

    line: int
    code: str
    message: str
    kind: str = "E"


def marked_lines(source: str) -> list[MarkedLine]:
    """The lines of a snippet whose comment (a real one, not text in a string) is a mark."""
    lines = source.splitlines()
    marks = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        for prefix, kind in _MARKS.items():
            if token.string.startswith(prefix):
                number, column = token.start
                code = lines[number - 1][:column].rstrip()
                text = token.string[len(prefix) :].strip()
                marks.append(MarkedLine(number, code, text, kind))
    return marks


def without_marked_lines(source: str) -> str:
    """The snippet with each marked line blanked (line numbers kept for tracebacks)."""
    marked = {m.line for m in marked_lines(source)}
    lines = source.splitlines()
    return "\n".join("" if n in marked else t for n, t in enumerate(lines, start=1)) + "\n"


def parse_mypy_errors(stdout: str) -> Counter[Error]:
    """The errors (not notes) of a mypy run, keyed by snippet file name and line."""
    errors: Counter[Error] = Counter()
    for text in stdout.splitlines():
        match = _ERROR.match(text)
        if match:
            errors[(Path(match["path"]).name, int(match["line"]), match["message"])] += 1
    return errors


def expected_errors(path: Path) -> Counter[Error]:
    """The errors the marks of one snippet ask for."""
    marks = marked_lines(path.read_text())
    return Counter((path.name, m.line, m.message) for m in marks if m.kind == "E")


@dataclass(frozen=True)
class MypyRun:
    """The outcome of the one mypy run over all snippets."""

    errors: Counter[Error]
    checked_files: int
    output: str


@pytest.fixture(scope="session")
def mypy_run(mypy_cache: Path) -> MypyRun:
    """Run mypy once over every snippet, with the repository's configuration.

    ``mypy.ini`` excludes the snippets from the normal run (they are meant to fail); files
    named on the command line are checked regardless. The session's cache (tests/conftest.py)
    keeps this run independent of any other mypy run in the checkout.
    """
    cache = mypy_cache
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(REPO / "mypy.ini"),
        "--cache-dir",
        str(cache),
        "--no-pretty",
        "--show-error-codes",
        "--hide-error-context",
        "--no-color-output",
        *(str(p.relative_to(REPO)) for p in CHECKED),
    ]
    done = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )
    # 0: clean, 1: type errors; anything else is mypy failing to run.
    assert done.returncode in (0, 1), done.stdout + done.stderr
    summary = _SUMMARY.search(done.stdout)
    assert summary is not None, done.stdout + done.stderr
    return MypyRun(parse_mypy_errors(done.stdout), int(summary[1]), done.stdout)


def test_there_are_snippets_of_both_kinds() -> None:
    names = [p.name for p in SNIPPETS]
    assert any(n.startswith("accept_") for n in names)
    assert sum(n.startswith("reject_") for n in names) >= 3
    assert all(n.startswith(("accept_", "reject_")) for n in names), names


@pytest.mark.mypy
def test_mypy_checked_every_snippet(mypy_run: MypyRun) -> None:
    assert mypy_run.checked_files == len(CHECKED), mypy_run.output


@pytest.mark.mypy
@pytest.mark.parametrize("snippet", _PARAMS)
def test_mypy_reports_exactly_the_marked_errors(mypy_run: MypyRun, snippet: Path) -> None:
    expected = expected_errors(snippet)
    if snippet.name.startswith("accept_"):
        assert not marked_lines(snippet.read_text()), "an accept_ snippet must not mark lines"
    else:
        assert marked_lines(snippet.read_text()), "a reject_ snippet must mark a line"
    got = Counter({k: n for k, n in mypy_run.errors.items() if k[0] == snippet.name})
    missing = sorted((expected - got).elements())
    unexpected = sorted((got - expected).elements())
    assert not missing and not unexpected, (
        f"marked but not reported: {missing}\nreported but not marked: {unexpected}"
    )


@pytest.mark.parametrize("snippet", _PARAMS)
def test_snippet_runs_and_marked_lines_raise(snippet: Path) -> None:
    source = snippet.read_text()
    namespace: dict[str, object] = {"__name__": f"snippet_{snippet.stem}"}
    # Accepted code runs (its asserts included).
    exec(compile(without_marked_lines(source), str(snippet), "exec"), namespace)
    for mark in marked_lines(source):
        where = f"{snippet.name}:{mark.line}"
        tree = ast.parse(mark.code)
        assert len(tree.body) == 1 and not mark.code[:1].isspace(), (
            f"{where}: a marked line must be one top-level statement"
        )
        with pytest.raises((UnitError, SpecValidationError)) as info:
            exec(compile(mark.code, where, "exec"), namespace)
            pytest.fail(f"{where}: {mark.code!r} ran without a UnitError")
        if isinstance(info.value, SpecValidationError):
            kinds = {entry["type"] for entry in info.value.errors()}
            assert kinds == {"unit_error"}, f"{where}: not a unit error: {info.value}"


# -- the runner's own parsing -----------------------------------------------------------------


def test_marks_and_mypy_output_are_parsed_exactly() -> None:
    source = (
        "a = 1\n"
        'b = x + y  # E: Unsupported operand types for + ("A" and "B")  [operator]\n'
        "c = 2  # a comment, not a mark\n"
        'd = "# E: text in a string is not a mark"\n'
        "e = f(True)  # R: bool is an int to mypy\n"
    )
    assert marked_lines(source) == [
        MarkedLine(2, "b = x + y", 'Unsupported operand types for + ("A" and "B")  [operator]'),
        MarkedLine(5, "e = f(True)", "bool is an int to mypy", "R"),
    ]
    assert without_marked_lines(source) == source.replace(
        'b = x + y  # E: Unsupported operand types for + ("A" and "B")  [operator]', ""
    ).replace("e = f(True)  # R: bool is an int to mypy", "")
    stdout = (
        'tests/typing/snippets/s.py:2: error: Unsupported operand types for + ("A" and "B")  '
        "[operator]\n"
        "tests/typing/snippets/s.py:2: note: Possible overload variants:\n"
        "Found 1 error in 1 file (checked 1 source file)\n"
    )
    assert parse_mypy_errors(stdout) == Counter(
        {("s.py", 2, 'Unsupported operand types for + ("A" and "B")  [operator]'): 1}
    )
    summary = _SUMMARY.search(stdout)
    assert summary is not None and summary[1] == "1"
