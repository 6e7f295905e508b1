"""Print pip constraints that pin each dependency to the lowest version pyproject.toml declares.

``python scripts/floors.py [EXTRA ...]``: the ``>=`` floor of every dependency of kvunits and
of the named extras, as ``name==version`` lines (the floors job of ``scripts/test`` installs
with them, so the declared floors are tested, not assumed). A dependency without a floor is
an error: every floor is declared and tested.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def floors(extras: list[str]) -> list[str]:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    pins = []
    for requirement in requirements:
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)", requirement)
        if match is None:
            raise SystemExit(f"{requirement!r} declares no floor (name>=version)")
        pins.append(f"{match[1]}=={match[2]}")
    return sorted(dict.fromkeys(pins))


if __name__ == "__main__":
    print("\n".join(floors(sys.argv[1:])))
