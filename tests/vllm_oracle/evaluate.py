"""Score kvunits' reading of model directories against vLLM's view of them.

    .venv-vllm/bin/python tests/vllm_oracle/model_view.py < dirs.json > views.json  (in /tmp)
    .venv/bin/python -m tests.vllm_oracle.evaluate views.json

prints, per directory, the outcome of `compare.compare` (exact, differs, refused,
vllm-refuses, unverified, not-generative) and the differences, then the counts per
fixture set (the tuning set, the held-out set, the shipped examples). The exact-rate is
exact / (exact + differs + refused): every directory vLLM serves and its view can check.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from .compare import compare, kvunits_view


def main(argv: list[str]) -> int:
    views = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    counts: dict[str, Counter[str]] = {}
    for path, view in sorted(views.items()):
        parts = Path(path).parts
        group = parts[-2] if "hf_fixtures" in parts else "examples"
        outcome, diffs = compare(view, kvunits_view(path))
        counts.setdefault(group, Counter())[outcome] += 1
        print(f"{group:9} {outcome:12} {Path(path).name}: {'; '.join(diffs)}")
    for group, count in sorted(counts.items()):
        checked = count["exact"] + count["differs"] + count["refused"]
        rate = count["exact"] / checked if checked else 0.0
        print(f"{group}: {dict(count)}; exact {count['exact']}/{checked} = {rate:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
