"""The one pint registry of kvunits, and the strict boundary between user text and pint.

pint is imported here and nowhere else in ``contracts``; the typed quantities do not need it,
so ``import contracts`` stays cheap and pint loads on the first boundary call. The registry
is built from ``units.txt`` (our units only: no default registry, no SI prefixes).

User text never reaches pint's expression evaluator: `parse_quantity_text` first matches a
strict grammar (an integer, then one unit name), then asks pint to resolve the *name* only.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any, Final, TypeAlias

import pint

from ._describe import describe
from .errors import UnitTypeError, UnitValueError

_DEFINITIONS: Final = resources.files(__package__).joinpath("units.txt")

#: pint quantities of this registry hold int (or, after a fractional conversion, float).
PintQuantity: TypeAlias = "pint.Quantity[Any]"
Registry: TypeAlias = "pint.UnitRegistry[Any]"


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

#: An integer (digits, optional ``_`` or ``,`` grouping), whitespace, one unit name.
_GRAMMAR: Final = re.compile(r"(?P<num>[0-9][0-9_,]{0,24})[ \t]*(?P<unit>[A-Za-z][A-Za-z_]{0,31})")
_MAX_TEXT: Final = 64
#: The whitespace stripped around a quantity: ASCII only, as the JSON Schema's patterns say
#: (str.strip() would also take a non-breaking space, which no schema pattern can match alike).
_SPACE: Final = " \t\n\r\f\v"
#: The largest magnitude accepted from text: 2**63 - 1, an int64 the kernels can index with.
MAX_MAGNITUDE: Final = 2**63 - 1


def resolve_unit(name: str, *, field: str | None = None) -> pint.Unit:
    """Resolve one unit *name* (or alias, or plural) of the kvunits registry.

    Raises:
        UnitTypeError: the name is not a kvunits unit.
    """
    if not re.fullmatch(r"[A-Za-z][A-Za-z_]{0,31}", name):
        raise UnitTypeError(
            _where(field) + f"{name!r} is not a unit name", field=field, got=repr(name)
        )
    try:
        unit = ureg.Unit(name)
    except (pint.UndefinedUnitError, pint.DefinitionSyntaxError, AttributeError, ValueError):
        unit = None
    # pint knows "dimensionless" (and its plural) in every registry: not a unit of ours.
    if unit is None or unit.dimensionless:
        raise UnitTypeError(
            _where(field)
            + f"unknown unit {name!r}; kvunits knows encoder_token, pooled_block, token, "
            "cache_block and byte (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)",
            field=field,
            got=repr(name),
        ) from None
    return unit


def parse_quantity_text(
    text: str, *, field: str | None = None, expected_unit: str | None = None
) -> PintQuantity:
    """Parse ``"<integer> <unit>"`` (e.g. ``"750 encoder_token"``, ``"40 GiB"``) strictly.

    Args:
        text: the user's text.
        field: the field or config path, prefixed to error messages.
        expected_unit: the unit the caller expects, named in the hint for a bare number.

    Raises:
        UnitTypeError: not a string, a bare number (no unit), or not of the grammar.
    """
    if not isinstance(text, str):
        raise UnitTypeError(
            _where(field) + f"expected a string such as '750 encoder_token', got {describe(text)}",
            field=field,
            got=describe(text),
        )
    stripped = text.strip(_SPACE)
    if len(stripped) > _MAX_TEXT:
        raise UnitTypeError(
            _where(field) + f"quantity text is {len(stripped)} characters long; write "
            "'<integer> <unit>', e.g. '750 encoder_token'",
            field=field,
            got=describe(text),
        )
    match = _GRAMMAR.fullmatch(stripped)
    if match is None:
        if re.fullmatch(r"[0-9_,.]+", stripped):
            examples = (
                f"'{stripped} {expected_unit}'"
                if expected_unit
                else " or ".join(f"'{stripped} {u}'" for u in ("encoder_token", "token", "byte"))
            )
            message = f"{stripped!r} has no unit; write it with one, e.g. {examples}"
        else:
            message = f"{stripped!r} is not '<integer> <unit>' (e.g. '750 encoder_token')"
            message += _why_not(stripped)
        raise UnitTypeError(_where(field) + message, field=field, got=describe(text))
    digits = match["num"].replace("_", "").replace(",", "")
    magnitude = int(digits)
    if magnitude > MAX_MAGNITUDE:
        raise UnitValueError(
            _where(field) + f"{match['num']} is larger than 2**63 - 1",
            field=field,
            got=describe(text),
        )
    unit = resolve_unit(match["unit"], field=field)
    return ureg.Quantity(magnitude, unit)


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
            "contracts.ureg (one registry per process)",
            field=field,
            expected=unit,
            got=str(quantity),
        )
    target = ureg.Unit(unit)
    if quantity.dimensionality != target.dimensionality:
        raise UnitTypeError(
            _where(field) + f"{quantity:~} is not in {unit} (a different dimension); convert "
            "with a named function from contracts",
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


def _why_not(text: str) -> str:
    """The likely reason a text missed the grammar, for the error message ('' if none)."""
    if text.startswith("-"):
        return ": a quantity is never negative"
    number = re.match(r"[0-9_,]+", text)
    if number and len(number.group()) > 25:
        return ": the number is longer than any int64 (at most 19 digits)"
    if re.match(r"[0-9_,]*[.eE]", text):
        return ": the number must be a whole integer (no decimal point, no exponent)"
    return ""


def _where(field: str | None) -> str:
    return f"{field}: " if field else ""
