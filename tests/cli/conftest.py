"""A clean ``KVUNITS_*`` environment for in-process runs of the command line (the fixture of
the config tests, which the command line reads through)."""

from __future__ import annotations

from ..config.conftest import _clean_environment as _clean_environment
