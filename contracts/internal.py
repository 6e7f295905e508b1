"""Helpers that ``runtime``, ``kernels`` and the ``kvunits`` command line share with contracts.

Not public API: a user's code should not need them, and they may change without notice.
They are the entry checks a hot path does once (`check_quantity`, `check_pool`), the message
helper (`describe`), plain-int arithmetic for code past its typed entry (`cdiv`,
`admission_cap`), and the quantity classes by unit (`QUANTITY_CLASSES`, `parse_any_quantity`)
for tools that read a unit from text.
"""

from ._convert import cdiv as cdiv
from ._describe import describe as describe
from ._factors import check_pool as check_pool
from ._parse import parse_any_quantity as parse_any_quantity
from ._quantity import QUANTITY_CLASSES as QUANTITY_CLASSES
from ._quantity import check_quantity as check_quantity
from ._views import ManagedKind as ManagedKind
from ._views import admission_cap as admission_cap

__all__ = [
    "QUANTITY_CLASSES",
    "ManagedKind",
    "admission_cap",
    "cdiv",
    "check_pool",
    "check_quantity",
    "describe",
    "parse_any_quantity",
]
