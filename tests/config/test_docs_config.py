"""docs/config.md: every Python snippet runs and prints what the page says it prints (each
``print(...)``'s output is the ``# ...`` line after it)."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from .conftest import REPO

PAGE = REPO / "docs" / "config.md"
SNIPPETS = re.compile(r"```python\n(.*?)```", re.S).findall(PAGE.read_text(encoding="utf-8"))


@pytest.mark.parametrize("code", SNIPPETS, ids=[f"snippet {i}" for i in range(len(SNIPPETS))])
def test_the_snippet_prints_what_the_page_says(code: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    lines = code.splitlines()
    expected = [line[2:] for line in lines if line.startswith("# ")]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(PAGE), "exec"), {})
    assert out.getvalue().splitlines() == expected


def test_the_page_has_its_snippets() -> None:
    assert len(SNIPPETS) == 4
