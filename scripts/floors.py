"""Print pip constraints that pin each dependency to the lowest version pyproject.toml declares.

``python scripts/floors.py [EXTRA ...]``: the ``>=`` floor of every dependency of kvunits and
of the named extras, as ``name==version`` lines (the floors job of ``scripts/test`` installs
with them, so the declared floors are tested, not assumed). A dependency without a floor is
an error: every floor is declared and tested. ``--declared`` prints the requirements as
declared instead (``scripts/test`` installs them before kvunits itself, so that its jobs'
installs run side by side and only the short editable step takes turns).
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def declared(extras: list[str]) -> list[str]:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    return list(dict.fromkeys(requirements))


def floors(extras: list[str]) -> list[str]:
    requirements = declared([e for e in extras if e != "dev"])
    pins = []
    for requirement in requirements:
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)", requirement)
        if match is None:
            raise SystemExit(f"{requirement!r} declares no floor (name>=version)")
        pins.append(f"{match[1]}=={match[2]}")
    return sorted(dict.fromkeys(pins))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--declared"]:
        print("\n".join(declared(sys.argv[2:])))
    else:
        print("\n".join(floors(sys.argv[1:])))
