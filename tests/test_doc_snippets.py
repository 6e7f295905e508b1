"""Every Python snippet of the README and of docs/ runs as shown, printing what it says.

A file's ``python`` blocks run in order in one namespace, from the repository's root (as a
reader pastes them into one session). Conventions the snippets follow, which this test holds
them to:

* ``print(...)`` followed by ``# ...`` lines: those lines are what it prints;
* a statement whose comment says ``run time: SomeError`` (or ``mypy: [code]; SomeError``) is a
  mistake shown on purpose: it must raise that error (a subclass counts), and must be
  rejected by mypy with that error code (checked over all the marked statements at once,
  with the repository's mypy.ini);
* a snippet that imports torch or ``kvunits.kernels`` needs the kernels extra (skipped
  without it, with the reason) and runs the kernels under Triton's interpreter.
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from kvunits._extras import missing

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
_RAISES = re.compile(r"(?:run time: |mypy: \[[a-z-]+\]; )([A-Z]\w*Error)")
_MYPY_CODE = re.compile(r"mypy: \[([a-z-]+)\]")


@dataclass(frozen=True)
class Statement:
    """One top-level statement of a snippet, with what the comments after it promise."""

    source: str
    line: int  # in the markdown file
    output: tuple[str, ...] | None  # a print's expected lines
    raises: str | None  # the error a mistake must raise
    mypy_code: str | None  # the error code mypy must give it


def statements(markdown: str) -> list[Statement]:
    """The statements of every python block of ``markdown``, in order."""
    found = []
    for block in _BLOCK.finditer(markdown):
        code = block[1]
        offset = markdown.count("\n", 0, block.start(1))
        lines = code.splitlines()
        body = ast.parse(code).body
        for index, node in enumerate(body):
            end = body[index + 1].lineno - 1 if index + 1 < len(body) else len(lines)
            start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
            own = lines[start - 1 : node.end_lineno or node.lineno]
            after = lines[(node.end_lineno or node.lineno) : end]
            comments = []  # the comment lines right below it (a blank line ends them)
            for line in after:
                if not line.strip().startswith("#"):
                    break
                comments.append(line.strip())
            promise = " ".join([*(c.partition("#")[2] for c in own if "#" in c), *comments])
            is_print = isinstance(node, ast.Expr) and ast.unparse(node).startswith("print(")
            output = tuple(c[2:] for c in comments) if is_print and comments else None
            raises = _RAISES.search(promise)
            code_match = _MYPY_CODE.search(promise)
            found.append(
                Statement(
                    source="\n".join(own),
                    line=offset + start,
                    output=output,
                    raises=raises[1] if raises else None,
                    mypy_code=code_match[1] if code_match else None,
                )
            )
    return found


def _needs_kernels(markdown: str) -> bool:
    blocks = [block[1] for block in _BLOCK.finditer(markdown)]
    return any("import torch" in code or "kvunits.kernels" in code for code in blocks)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_snippets_run_and_print_what_they_say(
    doc: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    markdown = doc.read_text(encoding="utf-8")
    if _needs_kernels(markdown) and missing("torch", "triton"):
        pytest.skip("the kernels extra (torch, triton) is not installed")
    if _needs_kernels(markdown):
        write = sys.modules.get("kvunits.kernels._paged_write")
        if write is not None and type(write.paged_write_kernel).__name__ != "InterpretedFunction":
            # Triton reads the variable when a kernel is defined: imported earlier in this
            # process without it, the kernels are compiled for a GPU (scripts/test sets it).
            pytest.skip("kvunits.kernels was imported without TRITON_INTERPRET=1: run with it")
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.chdir(ROOT)
    for name in list(os.environ):
        if name.upper().startswith("KVUNITS_"):
            monkeypatch.delenv(name)
    module = types.ModuleType("doc_snippet")  # a real module: dataclasses look it up
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    for statement in statements(markdown):
        where = f"{doc.name}:{statement.line}"
        code = compile(statement.source, where, "exec")
        if statement.raises is not None:
            with pytest.raises(Exception) as info:
                exec(code, namespace)
            names = [cls.__name__ for cls in type(info.value).__mro__]
            assert statement.raises in names, f"{where}: {names[0]}, not {statement.raises}"
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(code, namespace)
        if statement.output is not None:
            assert tuple(out.getvalue().splitlines()) == statement.output, where


def test_the_conventions_are_read() -> None:
    text = (
        "```python\nx = 1\nprint(x)\n# 1\nx + 'a'  # mypy: [operator]; run time: TypeError\n"
        "f(\n    2,\n)\n# mypy: [arg-type]; at run time: UnitTypeError\n```\n"
    )
    found = statements(text)
    assert [(s.line, s.output, s.raises, s.mypy_code) for s in found] == [
        (2, None, None, None),
        (3, ("1",), None, None),
        (5, None, "TypeError", "operator"),
        (6, None, "UnitTypeError", "arg-type"),
    ]


@pytest.mark.slow
def test_mypy_rejects_each_mistake_with_its_code(tmp_path: Path, mypy_cache: Path) -> None:
    # Each doc's snippets as one module, the statements shown as mistakes kept in place:
    # mypy must report each of them, with the code its comment names, and nothing else.
    checked = []
    for doc in DOCS:
        markdown = doc.read_text(encoding="utf-8")
        if _needs_kernels(markdown) and missing("torch", "triton"):
            continue
        found = statements(markdown)
        if not any(s.mypy_code for s in found):
            continue
        module = tmp_path / f"doc_{doc.stem.replace('-', '_')}.py"  # not types.py: a stdlib name
        # Redefinition is this module's own option: on the command line it would be every
        # module's, and the session's cache of kvunits (tests/conftest.py) would be stale.
        lines: list[str] = ["# mypy: allow-redefinition"]
        marked: dict[int, str] = {}
        for statement in found:
            if statement.mypy_code:
                marked[len(lines) + 1] = statement.mypy_code
            lines += statement.source.splitlines()
        module.write_text("\n".join(lines) + "\n", encoding="utf-8")
        checked.append((module, marked))
    assert checked, "no snippet shows a mistake mypy rejects"
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "mypy.ini"),
         "--cache-dir", str(mypy_cache), "--no-pretty", "--show-error-codes",
         *(str(m) for m, _ in checked)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    got = {
        (Path(m[1]).name, int(m[2]), m[3])
        for m in re.finditer(r"^(.+?):(\d+): error: .*\[([a-z-]+)\]$", done.stdout, re.M)
    }
    expected = {(m.name, line, code) for m, marked in checked for line, code in marked.items()}
    assert got == expected, done.stdout
