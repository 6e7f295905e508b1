"""Parse user text such as ``"750 encoder_token"`` into a typed quantity (no pint: the unit
table of ``units.txt``)."""

from __future__ import annotations

from ._describe import describe
from ._quantity import QUANTITY_CLASSES, IntQuantity, Q
from ._text import parse_quantity_text, resolve_unit, text_to_int
from .errors import UnitTypeError


def parse_quantity(text: str, kind: type[Q], *, field: str | None = None) -> Q:
    """Parse ``"<integer> <unit>"`` strictly and convert it exactly to ``kind``'s unit.

    The text must name its unit; a bare number is rejected with a hint naming the unit to
    add. Units of the same dimension convert exactly (``"40 GiB"`` to `Bytes`).

    Raises:
        UnitTypeError: no unit, an unknown unit, a unit of another dimension, not a string.
        UnitValueError: a number that is too large, or a conversion that is not whole.

    Example:
        >>> from kvunits.contracts import EncoderTokens
        >>> parse_quantity("750 encoder_tokens", EncoderTokens)
        EncoderTokens(750)
    """
    if isinstance(text, int) and not isinstance(text, bool):
        where = f"{field}: " if field else ""
        raise UnitTypeError(
            f'{where}{text} has no unit; write it as "{text} {kind.unit}"',
            field=field,
            expected=kind.unit,
            got=describe(text),
        )
    quantity = parse_quantity_text(text, field=field, expected_unit=kind.unit)
    return kind(text_to_int(quantity, kind.unit, field=field))


def parse_any_quantity(text: str, *, field: str | None = None) -> IntQuantity:
    """Parse ``"<integer> <unit>"`` strictly into the typed class of its unit's dimension.

    For callers that do not know the unit in advance (a unit calculator): byte multiples
    convert exactly to `Bytes`, aliases and plurals to their unit's class.

    Raises:
        UnitTypeError: no unit, an unknown unit, not a string.
        UnitValueError: a number that is too large, or a conversion that is not whole.

    Example:
        >>> parse_any_quantity("40 GiB")
        Bytes(42949672960)
    """
    quantity = parse_quantity_text(text, field=field)
    for cls in QUANTITY_CLASSES:
        if quantity.unit.dimension == resolve_unit(cls.unit).dimension:
            return cls(text_to_int(quantity, cls.unit, field=field))
    raise UnitTypeError(  # every unit of the registry has a class; kept for a future unit
        f"{text!r}: no kvunits quantity counts in this unit", field=field, got=describe(text)
    )
