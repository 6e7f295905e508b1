"""The one pint registry of kvunits, for the pint quantities a caller hands in.

pint is imported here and nowhere else in ``contracts``; the typed quantities do not need it,
and neither does text: ``"750 encoder_token"`` is read by ``kvunits.contracts._text`` with the unit
table of ``kvunits.contracts._units``, built from the same ``units.txt``. So ``import contracts``,
config loading and the command line never import pint; it loads when a caller uses
`kvunits.contracts.ureg` or hands in a pint quantity. The registry is built from ``units.txt`` (our
units only: no default registry, no SI prefixes).
"""

from __future__ import annotations

from importlib import resources
from typing import Any, Final, TypeAlias

import pint

from ._describe import describe
from ._text import MAX_MAGNITUDE
from .errors import UnitTypeError, UnitValueError

_DEFINITIONS: Final = resources.files(__package__).joinpath("units.txt")

# pint 0.25 made UnitRegistry generic; 0.24.4 (the floor) is not: the ignore covers the floor.
Registry: TypeAlias = "pint.UnitRegistry[Any]"  # type: ignore[type-arg, unused-ignore]


def _build_registry() -> Registry:
    with resources.as_file(_DEFINITIONS) as path:
        registry: Registry = pint.UnitRegistry(
            str(path),
            cache_folder=None,
            on_redefinition="raise",
            autoconvert_offset_to_baseunit=False,
        )
    return registry


#: The kvunits unit registry. Quantities of any other registry are rejected.
ureg: Final[Registry] = _build_registry()


def quantity_to_int(quantity: object, unit: str, *, field: str | None = None) -> int:
    """The exact integer number of ``unit`` in a pint quantity of the kvunits registry.

    Raises:
        UnitTypeError: not a quantity of this registry, or a different dimension.
        UnitValueError: negative, or not a whole number of ``unit``.
    """
    if not isinstance(quantity, pint.Quantity):
        raise UnitTypeError(
            _where(field) + f"expected a pint quantity in {unit}, got {describe(quantity)}",
            field=field,
            expected=unit,
            got=describe(quantity),
        )
    if getattr(quantity, "_REGISTRY", None) is not ureg:
        raise UnitTypeError(
            _where(field) + f"{quantity} comes from another pint registry; build it with "
            "kvunits.contracts.ureg (one registry per process)",
            field=field,
            expected=unit,
            got=str(quantity),
        )
    target = ureg.Unit(unit)
    if quantity.dimensionality != target.dimensionality:
        raise UnitTypeError(
            _where(field) + f"{quantity:~} is not in {unit} (a different dimension); convert "
            "with a named function from kvunits.contracts",
            field=field,
            expected=unit,
            got=str(quantity),
        )
    magnitude = quantity.to(target).magnitude
    if isinstance(magnitude, bool) or not isinstance(magnitude, (int, float)):
        raise UnitTypeError(
            _where(field) + f"{quantity} has a non-numeric magnitude",
            field=field,
            expected=unit,
            got=str(quantity),
        )
    if isinstance(magnitude, float):
        if not magnitude.is_integer():
            raise UnitValueError(
                _where(field) + f"{quantity} is not a whole number of {unit}",
                field=field,
                expected=unit,
                got=str(quantity),
            )
        magnitude = int(magnitude)
    if magnitude < 0:
        raise UnitValueError(
            _where(field) + f"{quantity} is negative",
            field=field,
            expected=f"a non-negative number of {unit}",
            got=str(quantity),
        )
    # The text grammar bounds the number as written; a large prefix ("8388608 TiB") can still
    # convert past what the kernels index with, so the bound applies to the result too.
    if magnitude > MAX_MAGNITUDE:
        raise UnitValueError(
            _where(field) + f"{quantity} is {magnitude} {unit}, larger than 2**63 - 1",
            field=field,
            expected=f"at most 2**63 - 1 {unit}",
            got=str(quantity),
        )
    return magnitude


def _where(field: str | None) -> str:
    return f"{field}: " if field else ""
