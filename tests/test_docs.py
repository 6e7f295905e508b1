"""The examples in docstrings run and print what they say (the README's and docs/' snippets:
test_doc_snippets)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import kvunits
import kvunits.contracts
import kvunits.runtime
from kvunits._extras import missing

ROOT = Path(__file__).resolve().parent.parent


def _modules() -> list[str]:
    # kvunits.kernels needs the kernels extra (torch, triton): without it, its docstrings
    # are not run (tests/kernels says why it is skipped).
    skipped = ("kvunits.kernels",) if missing("torch", "triton") else ()
    names = []
    for package in (kvunits.contracts, kvunits.runtime, kvunits):
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."):
            if not info.name.endswith("__main__") and not info.name.startswith(skipped):
                names.append(info.name)
    return list(dict.fromkeys(names))


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
