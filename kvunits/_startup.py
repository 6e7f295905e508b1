"""What the ``kvunits`` program sets up in its own process before a command runs: pydantic's
plugins off, and a garbage collector tuned for a short run. Never done for a caller that
imports ``kvunits.cli`` and calls ``main(argv)`` (their process, their settings).

Why (``benchmarks/startup.py``, issue 14's goal of 0.2 s for ``kvunits plan``):

* pydantic looks for plugins (entry points of every installed distribution) when it builds its
  first validator. ``PYDANTIC_DISABLE_PLUGINS=__all__`` skips the scan, but the module that
  reads the variable (``pydantic.plugin._loader``) imports ``importlib.metadata`` first (email,
  zipfile, csv …: about 55 M instructions, 12 ms here). When plugins are off, kvunits puts in
  its place a module whose ``get_plugins()`` answers what pydantic's answers then, ``()``; any
  other name loads pydantic's own module, so a pydantic that asks for more still gets it.
* CPython's collector runs a full collection ever more often while ~300,000 objects of
  imported modules pile up; a short process frees them all at exit anyway. A first-generation
  threshold of 50,000 allocations (CPython's: 700) keeps cycles collected during long runs
  (``simulate``) with memory bounded all the same.
"""

from __future__ import annotations

import gc
import os
import sys
import types
from typing import Any, Final

#: The module pydantic's ``create_schema_validator`` imports ``get_plugins`` from.
PYDANTIC_PLUGIN_LOADER: Final = "pydantic.plugin._loader"

#: The first-generation threshold of the program's collector (CPython's default: 700).
GC_THRESHOLD_ALLOCATIONS: Final = 50_000


def no_plugins() -> tuple[()]:
    """pydantic's ``get_plugins()`` when ``PYDANTIC_DISABLE_PLUGINS`` is ``__all__``."""
    return ()


def _pydantic_loader(name: str) -> Any:
    """Any other name of the loader: drop the stand-in, import pydantic's own module.
    (Not for the import system's questions, ``__path__`` …: a plain module has no answer.)"""
    if name.startswith("__"):
        raise AttributeError(f"module {PYDANTIC_PLUGIN_LOADER!r} has no attribute {name!r}")
    if sys.modules.get(PYDANTIC_PLUGIN_LOADER) is _STAND_IN:
        del sys.modules[PYDANTIC_PLUGIN_LOADER]
    import importlib

    return getattr(importlib.import_module(PYDANTIC_PLUGIN_LOADER), name)


_STAND_IN: Final = types.ModuleType(PYDANTIC_PLUGIN_LOADER, "kvunits: pydantic's plugins are off")
_STAND_IN.__dict__.update(get_plugins=no_plugins, __getattr__=_pydantic_loader)  # PEP 562


def prepare_process() -> None:
    """Set up the program's own process (call once, before anything imports pydantic).

    Plugins stay as the user set them: ``PYDANTIC_DISABLE_PLUGINS`` is only defaulted to
    ``__all__``, and the stand-in goes in only when it is ``__all__`` and pydantic's loader
    was not imported yet.
    """
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if os.environ["PYDANTIC_DISABLE_PLUGINS"] == "__all__":
        sys.modules.setdefault(PYDANTIC_PLUGIN_LOADER, _STAND_IN)
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD_ALLOCATIONS, older, oldest)
