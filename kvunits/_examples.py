"""The examples kvunits ships, found where a command names them as ``examples/...``.

The README and ``--help`` show commands such as ``kvunits plan
examples/hf/llama-3.1-8b/config.json``. In a checkout they read the repository's examples;
installed from a wheel, the same command names a directory the user does not have. A path
under ``examples/`` that does not exist here (the shell passes a glob that matched nothing as
it is) names the copy in the package, and a note on stderr says which file was read.
"""

from __future__ import annotations

import glob
import os
import sys
from pathlib import Path, PurePosixPath

_GLOB = frozenset("*?[")


def shipped(argument: str) -> list[str]:
    """The files a command-line path names: itself, or the shipped examples it names.

    Args:
        argument: a path as the user typed it (maybe a glob the shell left unexpanded).

    Returns:
        ``[argument]`` unless it is a missing path under ``examples/`` that the package
        ships (then the shipped files, sorted, for a glob).
    """
    parts = PurePosixPath(argument.replace(os.sep, "/")).parts
    if os.path.exists(argument) or len(parts) < 2 or parts[0] != "examples" or ".." in parts:
        return [argument]
    root = Path(__file__).parent / "examples"
    inside = root.joinpath(*parts[1:])
    if _GLOB & set(argument):
        found = sorted(glob.glob(str(inside)))
    else:
        found = [str(inside)] if inside.exists() else []  # a file, or a model directory
    if not found:
        return [argument]  # the loader says it cannot be read, by the name the user gave
    what = found[0] if len(found) == 1 else f"{len(found)} files under {root}"
    print(f"kvunits: no {argument} here: reading the shipped {what}", file=sys.stderr)
    return found
