"""A clean ``KVUNITS_*`` environment for in-process runs of the command line."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.upper().startswith("KVUNITS_"):
            monkeypatch.delenv(name)
    yield
