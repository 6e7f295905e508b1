"""docs/serving.md's worked service loop runs and prints what the page says (issue 23): the
stepper, the on_demand admission policy with preemption, the backend tensors, a shared
pool's KV caches and the metrics, end to end. Its code blocks run in order in one
namespace; each ``print(...)`` is followed by its expected output as ``# ...`` lines."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_serving_doc_prints_what_it_says(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("prometheus_client")
    text = (ROOT / "docs" / "serving.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 4
    monkeypatch.chdir(ROOT)
    for name in ("KVUNITS_ADMISSION", "KVUNITS_MEMORY_BUDGET", "KVUNITS_MAX_MODEL_LEN"):
        monkeypatch.delenv(name, raising=False)
    namespace: dict[str, object] = {}
    for code in blocks:
        lines = code.splitlines()
        expected = []
        for index, line in enumerate(lines):
            if line.startswith("print(") or (line.startswith("        print(")):
                following = index + 1
                while following < len(lines) and lines[following].lstrip().startswith("# "):
                    expected.append(lines[following].lstrip()[2:])
                    following += 1
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "docs/serving.md", "exec"), namespace)
        assert out.getvalue().splitlines() == expected
