"""Pydantic glue: quantity fields that parse ``"750 encoder_token"`` and reject bare numbers.

A field typed with a quantity class (or `AnyOf` several) accepts an instance of the class,
a strict ``"<integer> <unit>"`` string, or a pint quantity of the kvunits registry; anything
else (a bare int included) is a validation error that names the unit to write. Values
serialise back to the same string form, and the JSON schema shows the unit of each field.
"""

from __future__ import annotations

from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from ._errors import UnitError, UnitTypeError
from ._quantity import IntQuantity, describe

QUANTITY_PATTERN = r"^\s*[0-9][0-9_,]*\s*[A-Za-z][A-Za-z_]*\s*$"


def coerce_quantity(value: object, classes: tuple[type[IntQuantity], ...]) -> IntQuantity:
    """Turn config input into one of ``classes``; raise `UnitError` with the fix otherwise."""
    if type(value) in classes:
        return value  # type: ignore[return-value]  # exact-type membership checked above
    units = " or ".join(c.unit for c in classes)
    example = f"{_example(value)} {classes[0].unit}"
    if isinstance(value, IntQuantity):
        raise UnitTypeError(
            f"expected {units}, got {value}; convert it with the named function in contracts",
            expected=units,
            got=str(value),
        )
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        if _is_pint_quantity(value):
            return _from_pint(value, classes)
        raise UnitTypeError(
            f"expected a quantity in {units} such as {example!r}, got {describe(value)}",
            expected=units,
            got=describe(value),
        )
    if isinstance(value, int):
        raise UnitTypeError(
            f"{value} has no unit: write it as {f'{value} {classes[0].unit}'!r}",
            expected=units,
            got=describe(value),
        )
    from ._registry import parse_quantity_text

    # The first class's unit names the fix in the hint for a bare number ("40" -> "40 byte").
    return _from_pint(parse_quantity_text(value, expected_unit=classes[0].unit), classes)


def _from_pint(quantity: Any, classes: tuple[type[IntQuantity], ...]) -> IntQuantity:
    from ._registry import quantity_to_int, ureg

    units = " or ".join(c.unit for c in classes)
    for cls in classes:
        if quantity.dimensionality == ureg.Unit(cls.unit).dimensionality:
            return cls(quantity_to_int(quantity, cls.unit))
    raise UnitTypeError(
        f"expected {units}, got {quantity:~}"
        + (
            "; a manager-side unit cannot be written here, write the model's unit"
            if "pooled_block" in str(quantity.units)
            else ""
        ),
        expected=units,
        got=f"{quantity}",
    )


def _is_pint_quantity(value: object) -> bool:
    return type(value).__module__.startswith("pint")


def _example(value: object) -> str:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else "750"


def quantity_core_schema(classes: tuple[type[IntQuantity], ...]) -> core_schema.CoreSchema:
    """A pydantic core schema for a field holding one of ``classes``."""

    def validate(value: object) -> IntQuantity:
        try:
            return coerce_quantity(value, classes)
        except UnitError as exc:
            raise PydanticCustomError(
                "unit_error",
                "{message}",
                {
                    "message": exc.message,
                    "expected": exc.expected or " or ".join(c.unit for c in classes),
                    "got": exc.got,
                },
            ) from None

    return core_schema.no_info_plain_validator_function(
        validate,
        serialization=core_schema.plain_serializer_function_ser_schema(str, when_used="always"),
    )


def quantity_json_schema(classes: tuple[type[IntQuantity], ...]) -> JsonSchemaValue:
    """The JSON schema of a quantity field: a string with its unit in ``x-unit``."""
    units = [c.unit for c in classes]
    return {
        "type": "string",
        "pattern": QUANTITY_PATTERN,
        "description": "an integer and a unit: " + " or ".join(units),
        "x-unit": units[0] if len(units) == 1 else units,
        "examples": [f"750 {u}" for u in units],
    }


class AnyOf:
    """``Annotated[EncoderTokens | Tokens, AnyOf(EncoderTokens, Tokens)]``: a field that
    holds one of several units, parsed with one clear error instead of one per union arm."""

    def __init__(self, *classes: type[IntQuantity]) -> None:
        self.classes = classes

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return quantity_core_schema(self.classes)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return quantity_json_schema(self.classes)
