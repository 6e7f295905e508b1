"""Optional parts of kvunits and the extra that installs each: a clear error before any work.

``kvunits.kernels`` needs torch and triton (the ``kernels`` extra); ``kvunits simulate
--out`` needs matplotlib (the ``plot`` extra). A missing one is reported when the part is
imported or the command starts, naming the extra, instead of a bare ``ModuleNotFoundError``
deep in an import or after a long run. Standard library only.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Final

#: How to install each extra; torch's build is the caller's choice (see the README).
INSTALL: Final = {
    "kernels": 'pip install "kvunits[kernels]" (torch first, with the build you want: on a '
    "CPU-only machine pip install torch --index-url https://download.pytorch.org/whl/cpu)",
    "plot": 'pip install "kvunits[plot]"',
}


def missing(*modules: str) -> list[str]:
    """The modules of ``modules`` that cannot be imported here (none is imported)."""
    absent = []
    for name in modules:
        try:
            found = find_spec(name) is not None
        except (ImportError, ValueError):  # stubbed out in sys.modules, or a broken parent
            found = False
        if not found:
            absent.append(name)
    return absent


def require(part: str, extra: str, *modules: str) -> None:
    """Raise `ModuleNotFoundError` naming ``extra`` unless every module of ``modules`` is there.

    Args:
        part: what needs them, for the message (``kvunits.kernels``).
        extra: the extra that installs them (``kernels``).
        modules: the top-level modules it imports.

    Example:
        >>> require("kvunits.example", "plot", "json")
        >>> require("kvunits.example", "plot", "no_such_module_here")
        Traceback (most recent call last):
        ...
        ModuleNotFoundError: kvunits.example needs no_such_module_here, which is not installed: ...
    """
    absent = missing(*modules)
    if absent:
        raise ModuleNotFoundError(
            f"{part} needs {' and '.join(absent)}, which "
            f"{'is' if len(absent) == 1 else 'are'} not installed: {INSTALL[extra]}",
            name=absent[0],
        )
