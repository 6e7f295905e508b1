"""docs/types.md runs and prints what it says (issue 20): its code blocks run in order in one
namespace; each ``print(...)`` is followed by its expected output as ``# ...`` lines, and a
mistake the page shows prints the error it raises."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_types_doc_prints_what_it_says(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "docs" / "types.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 6
    monkeypatch.chdir(ROOT)
    namespace: dict[str, object] = {}
    for code in blocks:
        lines = code.splitlines()
        expected = []
        for index, line in enumerate(lines):
            if line.lstrip().startswith("print("):
                following = index + 1
                while following < len(lines) and lines[following].startswith("# "):
                    expected.append(lines[following][2:])
                    following += 1
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "docs/types.md", "exec"), namespace)
        assert out.getvalue().splitlines() == expected
