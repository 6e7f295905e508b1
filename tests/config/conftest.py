"""Shared fixtures: a clean ``KVUNITS_*`` environment and a config writer."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import kvunits

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
#: The example the installed package ships (a checkout's own, or a wheel's copy of it).
SHIPPED = Path(kvunits.__file__).parent / "examples" / "voxtral_realtime.toml"

#: The Voxtral Realtime example as a kvunits config (TOML text), for edits in tests.
VOXTRAL_TOML = SHIPPED.read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.upper().startswith("KVUNITS_"):
            monkeypatch.delenv(name)
    yield


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str | bytes], Path]:
    """``write("x.toml", text)``: a file in a fresh directory, for the loader."""

    def _write(name: str, content: str | bytes) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path

    return _write
