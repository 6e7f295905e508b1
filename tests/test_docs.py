"""The examples in docstrings and the README's API tour run and print what they say."""

from __future__ import annotations

import contextlib
import doctest
import importlib
import io
import pkgutil
import re
from pathlib import Path

import pytest

import kvunits
import kvunits.contracts
import kvunits.runtime
from kvunits._extras import missing

ROOT = Path(__file__).resolve().parent.parent


def _modules() -> list[str]:
    # kvunits.kernels needs the kernels extra (torch, triton): without it, its docstrings
    # are not run (tests/kernels says why it is skipped).
    skipped = ("kvunits.kernels",) if missing("torch", "triton") else ()
    names = []
    for package in (kvunits.contracts, kvunits.runtime, kvunits):
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."):
            if not info.name.endswith("__main__") and not info.name.startswith(skipped):
                names.append(info.name)
    return list(dict.fromkeys(names))


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"


@pytest.mark.parametrize(
    "section", ["API tour", "Runtime", "Prefix caching, one shared pool, speculative slots"]
)
def test_readme_example_prints_what_it_says(section: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.find(f"\n## {section}\n")
    assert start >= 0, f"README.md has no section {section!r}"
    block = re.compile(r"```python\n(.*?)```", re.S).search(text, start)
    assert block is not None, f"README.md has no {section} example"
    code = block.group(1)
    monkeypatch.chdir(ROOT)
    # Each `print(...)` is followed by its expected output as a `# ...` comment line.
    lines = code.splitlines()
    expected = [
        line[2:]
        for index, line in enumerate(lines)
        if line.startswith("# ") and index and lines[index - 1].startswith("print(")
    ]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue().splitlines() == expected
    assert expected, "the tour shows no output to check"
