"""A clean ``KVUNITS_*`` environment (these tests load configs with engine flags), and the
config writer."""

from __future__ import annotations

from ..config.conftest import _clean_environment as _clean_environment
from ..config.conftest import write as write
