"""Parse user text such as ``"750 encoder_token"`` into a typed quantity (pint at the boundary)."""

from __future__ import annotations

from ._errors import UnitTypeError
from ._quantity import Q, describe


def parse_quantity(text: str, kind: type[Q], *, field: str | None = None) -> Q:
    """Parse ``"<integer> <unit>"`` strictly and convert it exactly to ``kind``'s unit.

    The text must name its unit; a bare number is rejected with a hint naming the unit to
    add. Units of the same dimension convert exactly (``"40 GiB"`` to `Bytes`).

    Raises:
        UnitTypeError: no unit, an unknown unit, a unit of another dimension, not a string.
        UnitValueError: a number that is too large, or a conversion that is not whole.

    Example:
        >>> parse_quantity("750 encoder_tokens", EncoderTokens)
        EncoderTokens(750)
    """
    from ._registry import parse_quantity_text, quantity_to_int

    if isinstance(text, int) and not isinstance(text, bool):
        where = f"{field}: " if field else ""
        raise UnitTypeError(
            f'{where}{text} has no unit; write it as "{text} {kind.unit}"',
            field=field,
            expected=kind.unit,
            got=describe(text),
        )
    quantity = parse_quantity_text(text, field=field, expected_unit=kind.unit)
    return kind(quantity_to_int(quantity, kind.unit, field=field))
