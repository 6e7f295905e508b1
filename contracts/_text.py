"""The strict boundary between user text and a quantity: ``"<integer> <unit>"``, without pint.

`parse_quantity_text` matches a strict grammar (an integer, then one unit name) and looks the
name up in the unit table (`kvunits.contracts._units`, read from ``units.txt``); `text_to_int`
converts the result exactly to a unit of the same dimension. pint is never imported here:
user text reaches neither pint's expression evaluator nor its name resolver, and the error
messages print quantities as pint prints them (``40 GiB``, ``40 gibibyte``).

`split_text` is the one match of the config validators' fast path
(`kvunits.contracts._quantity.read_text_quantity`, which binds a text to a quantity class).
"""

from __future__ import annotations

import re
from typing import Final, final

from ._describe import describe
from ._units import UnitInfo, unit_named
from .errors import UnitTypeError, UnitValueError

#: An integer (digits, optional ``_`` or ``,`` grouping), whitespace, one unit name.
_GRAMMAR: Final = re.compile(r"(?P<num>[0-9][0-9_,]{0,24})[ \t]*(?P<unit>[A-Za-z][A-Za-z_]{0,31})")
_UNIT_NAME: Final = re.compile(r"[A-Za-z][A-Za-z_]{0,31}")
_BARE: Final = re.compile(r"[0-9_,.]+")
_NUMBER: Final = re.compile(r"[0-9_,]+")
_FRACTION: Final = re.compile(r"[0-9_,]*[.eE]")
_MAX_TEXT: Final = 64
#: The whitespace stripped around a quantity: ASCII only, as the JSON Schema's patterns say
#: (str.strip() would also take a non-breaking space, which no schema pattern can match alike).
SPACE: Final = " \t\n\r\f\v"
#: The largest magnitude accepted from text: 2**63 - 1, an int64 the kernels can index with.
MAX_MAGNITUDE: Final = 2**63 - 1

_KNOWN: Final = (
    "kvunits knows encoder_token, pooled_block, token, cache_block and byte (B, KiB, MiB, GiB, "
    "TiB, kB, MB, GB, TB)"
)


@final
class TextQuantity:
    """A quantity read from text: a non-negative int and the unit its text names.

    ``str()`` and ``format(q, "~")`` print it as pint prints its quantities (``40 gibibyte``,
    ``40 GiB``), for the error messages.
    """

    __slots__ = ("magnitude", "unit")

    def __init__(self, magnitude: int, unit: UnitInfo) -> None:
        self.magnitude = magnitude
        self.unit = unit

    def __str__(self) -> str:
        return self.unit.long(self.magnitude)

    def __format__(self, spec: str) -> str:
        return self.unit.short(self.magnitude) if spec == "~" else format(str(self), spec)

    def __repr__(self) -> str:
        return f"TextQuantity({self.magnitude}, {self.unit.name!r})"


def resolve_unit(name: str, *, field: str | None = None) -> UnitInfo:
    """The unit one *name* (or alias, or plural) of the kvunits registry names.

    Raises:
        UnitTypeError: the name is not a kvunits unit.
    """
    if not _UNIT_NAME.fullmatch(name):
        raise UnitTypeError(
            _where(field) + f"{name!r} is not a unit name", field=field, got=repr(name)
        )
    unit = unit_named(name)
    if unit is None:
        raise UnitTypeError(
            _where(field) + f"unknown unit {name!r}; {_KNOWN}", field=field, got=repr(name)
        )
    return unit


def parse_quantity_text(
    text: str, *, field: str | None = None, expected_unit: str | None = None
) -> TextQuantity:
    """Parse ``"<integer> <unit>"`` (e.g. ``"750 encoder_token"``, ``"40 GiB"``) strictly.

    Args:
        text: the user's text.
        field: the field or config path, prefixed to error messages.
        expected_unit: the unit the caller expects, named in the hint for a bare number.

    Raises:
        UnitTypeError: not a string, a bare number (no unit), not of the grammar, or a name
            that is not a kvunits unit.
        UnitValueError: a number larger than 2**63 - 1.
    """
    if not isinstance(text, str):
        raise UnitTypeError(
            _where(field) + f"expected a string such as '750 encoder_token', got {describe(text)}",
            field=field,
            got=describe(text),
        )
    stripped = text.strip(SPACE)
    if len(stripped) > _MAX_TEXT:
        raise UnitTypeError(
            _where(field) + f"quantity text is {len(stripped)} characters long; write "
            "'<integer> <unit>', e.g. '750 encoder_token'",
            field=field,
            got=describe(text),
        )
    match = _GRAMMAR.fullmatch(stripped)
    if match is None:
        if _BARE.fullmatch(stripped):
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
    magnitude = int(match["num"].replace("_", "").replace(",", ""))
    if magnitude > MAX_MAGNITUDE:
        raise UnitValueError(
            _where(field) + f"{match['num']} is larger than 2**63 - 1",
            field=field,
            got=describe(text),
        )
    return TextQuantity(magnitude, resolve_unit(match["unit"], field=field))


def text_to_int(quantity: TextQuantity, unit: str, *, field: str | None = None) -> int:
    """The exact integer number of ``unit`` (a base unit: a quantity class's) in ``quantity``.

    Raises:
        UnitTypeError: ``quantity`` is of another dimension.
        UnitValueError: more than 2**63 - 1 of ``unit``.
    """
    target = unit_named(unit)
    assert target is not None and target.factor == 1, f"{unit!r} is not a base unit"
    if quantity.unit.dimension != target.dimension:
        raise UnitTypeError(
            _where(field) + f"{quantity:~} is not in {unit} (a different dimension); convert "
            "with a named function from kvunits.contracts",
            field=field,
            expected=unit,
            got=str(quantity),
        )
    magnitude = quantity.magnitude * quantity.unit.factor
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


def split_text(text: str) -> tuple[str, str] | None:
    """The number and the unit name of ``text`` when it matches the strict grammar (ASCII
    whitespace around allowed), else ``None``: the fast path's one match."""
    stripped = text.strip(SPACE)
    match = _GRAMMAR.fullmatch(stripped)
    if match is None or len(stripped) > _MAX_TEXT:
        return None
    digits, name = match.group(1, 2)
    return digits, name


def dimension_of(unit: str) -> str:
    """The dimension of a unit of the table (``"GiB"`` → ``"[byte]"``)."""
    info = unit_named(unit)
    assert info is not None, f"{unit!r} is not in units.txt"
    return info.dimension


def _why_not(text: str) -> str:
    """The likely reason a text missed the grammar, for the error message ('' if none)."""
    if text.startswith("-"):
        return ": a quantity is never negative"
    number = _NUMBER.match(text)
    if number and len(number.group()) > 25:
        return ": the number is longer than any int64 (at most 19 digits)"
    if _FRACTION.match(text):
        return ": the number must be a whole integer (no decimal point, no exponent)"
    return ""


def _where(field: str | None) -> str:
    return f"{field}: " if field else ""
