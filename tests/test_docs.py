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

import contracts
import runtime

ROOT = Path(__file__).resolve().parent.parent


def _modules() -> list[str]:
    names = []
    for package in (contracts, runtime):
        names.append(package.__name__)
        for info in pkgutil.iter_modules(package.__path__):
            names.append(f"{package.__name__}.{info.name}")
    return names


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"


def test_readme_tour_prints_what_it_says() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## API tour\n\n```python\n(.*?)```", text, re.S)
    assert block is not None, "README.md has no API tour block"
    code = block.group(1)
    # Each `print(...)` is followed by its expected output as a `# ...` comment line.
    expected = [
        line[2:]
        for prev, line in zip(code.splitlines(), code.splitlines()[1:], strict=False)
        if prev.startswith("print(") and line.startswith("# ")
    ]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue().splitlines() == expected
    assert expected, "the tour shows no output to check"
