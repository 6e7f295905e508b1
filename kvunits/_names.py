"""Why a kvunits package refuses to load under its directory's bare name, and the fix.

The repository keeps its packages in top-level directories (``contracts/``, ``runtime/``,
``kernels/``), which install as ``kvunits.contracts``, ``kvunits.runtime`` and
``kvunits.kernels``. A checkout's root on ``sys.path`` (Python puts the current directory
there for ``python -c``, ``python -m`` and the REPL) also exposes them as ``contracts``,
``runtime`` and ``kernels``: a second copy of every class (``isinstance`` fails across the
copies), and a directory that hides another distribution of that name, such as Hugging
Face's ``kernels``. Each package therefore refuses a bare name at import, with this message:
where the directory was found, what it hides, and how to import what was meant.

Standard library only: it runs before anything of kvunits is loaded.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys


def bare_name_error(name: str, init_file: str, qualified: str) -> ImportError:
    """The error a kvunits package raises when imported as ``name`` instead of ``qualified``.

    Args:
        name: the name it was imported under (``kernels``).
        init_file: its ``__init__.py``.
        qualified: the name it installs as (``kvunits.kernels``).
    """
    package_dir = os.path.dirname(os.path.abspath(init_file))
    root = os.path.dirname(package_dir)
    why = (
        " (the current directory: python -c, -m and the REPL put it there)"
        if os.path.realpath(root) == os.path.realpath(os.curdir)
        else ""
    )
    lines = [
        f"{package_dir} holds the source of {qualified}; it was imported as {name!r} because "
        f"the directory above it, {root}, is on sys.path{why}.",
        f"- for kvunits' package: import {qualified}",
    ]
    other = _hidden(name, root)
    if other is not None:
        lines.append(
            f"- for the {name!r} installed at {other}, which this directory hides: run from "
            f"another directory, or start Python with -P (PYTHONSAFEPATH=1) so that the "
            f"current directory is not on sys.path"
        )
    else:
        lines.append(
            f"- for another package named {name!r}: it is not installed here (pip install it), "
            "and then run from another directory, or start Python with -P (PYTHONSAFEPATH=1)"
        )
    return ImportError("\n".join(lines), name=name, path=init_file)


def _hidden(name: str, root: str) -> str | None:
    """Where another top-level package or module ``name`` is, on the rest of ``sys.path``."""
    real_root = os.path.realpath(root)
    rest = [p for p in sys.path if os.path.realpath(p or os.curdir) != real_root]
    try:
        spec = importlib.machinery.PathFinder.find_spec(name, rest)
    except (ImportError, ValueError):  # a broken entry elsewhere: nothing to point at
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return os.pathsep.join(spec.submodule_search_locations)
    return spec.origin
