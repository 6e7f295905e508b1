"""Helpers that ``runtime``, ``kernels`` and the ``kvunits`` command line share with contracts.

Not public API: a user's code should not need them, and they may change without notice.
They are the entry checks a hot path does once (`check_quantity`, `check_kind`,
`check_pool`), the message helper (`describe`), the clearly named ways out of the types for
code past its typed entry (`magnitude` of a quantity whose class was just checked, a view's
sizes as plain ints: `manager_ints`, `kernel_ints`), plain-int arithmetic (`cdiv`,
`admission_cap`), a group's limits in its own unit (`group_limits`, for a plan that derives a
group again at another block size), and the quantity classes by unit (`QUANTITY_CLASSES`,
`parse_any_quantity`) for tools that read a unit from text.
"""

from collections.abc import Callable
from operator import attrgetter
from typing import Any

from ._convert import cdiv as cdiv
from ._describe import describe as describe
from ._factors import check_pool as check_pool
from ._group_marker import GroupT as GroupT
from ._group_marker import marker_name as marker_name
from ._groups import check_marker as check_marker
from ._groups import group_limits as group_limits
from ._kinds import Position
from ._kinds import check_kind as check_kind
from ._parse import parse_any_quantity as parse_any_quantity
from ._quantity import QUANTITY_CLASSES as QUANTITY_CLASSES
from ._quantity import CacheBlocks, IntQuantity
from ._quantity import check_quantity as check_quantity
from ._views import KernelInts as KernelInts
from ._views import ManagedKind as ManagedKind
from ._views import ManagerInts as ManagerInts
from ._views import admission_cap as admission_cap
from ._views import bind_group as bind_group
from ._views import kernel_ints as kernel_ints
from ._views import manager_ints as manager_ints

#: The plain int of a quantity whose class the caller has *just checked* (``type(q) is
#: unit``), for paths past a typed entry: one C call, no second check. Anywhere else, name the
#: unit with ``q.numerical_value_in(unit)``. (The allocator's per-step closures read the slot
#: itself, ``q._value``: there even one call is measurable.)
magnitude: Callable[[IntQuantity], int] = attrgetter("_value")


def owned_column(index: int, group: str) -> Position[CacheBlocks, Any]:
    """Column ``index`` of group ``group``'s block tables, as a group's view computes it
    (`kvunits.contracts.BlockIds` refuses it in another group's table)."""
    return Position._column(index, group)


__all__ = [
    "QUANTITY_CLASSES",
    "GroupT",
    "KernelInts",
    "ManagedKind",
    "ManagerInts",
    "admission_cap",
    "bind_group",
    "cdiv",
    "check_kind",
    "check_marker",
    "check_pool",
    "check_quantity",
    "describe",
    "group_limits",
    "kernel_ints",
    "magnitude",
    "manager_ints",
    "marker_name",
    "owned_column",
    "parse_any_quantity",
]
