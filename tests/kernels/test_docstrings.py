"""The examples in the kernels' docstrings run and print what they say."""

from __future__ import annotations

import doctest
from types import ModuleType

import pytest

from kvunits.kernels import _residency, _typed, cache_write


@pytest.mark.parametrize("module", [_typed, cache_write, _residency], ids=lambda m: m.__name__)
def test_docstring_examples(module: ModuleType) -> None:
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0
