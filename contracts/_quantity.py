"""Typed integer quantities: one final class per unit.

A quantity is a non-negative ``int`` tagged with its unit. The classes are deliberately
small (one slot, no pint inside) so that constructing and adding them costs little; pint
enters only at the boundary (`to_pint`, `from_pint`, config parsing).

Mixing units is rejected twice:

* statically: every operator takes ``Self``, the classes are ``@final`` and unrelated, so
  mypy reports ``EncoderTokens(1) + PooledBlocks(1)`` as ``[operator]``, a comparison of the
  two as ``[comparison-overlap]`` (strict equality), a bare ``int`` argument as ``[arg-type]``;
* at run time: the same operations raise `UnitTypeError` naming both units.

Example:
    >>> from contracts import EncoderTokens
    >>> w = EncoderTokens(750)
    >>> str(w), repr(w), (w + EncoderTokens(2)).value
    ('750 encoder_token', 'EncoderTokens(750)', 752)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, Self, TypeVar, final

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from ._describe import describe
from .errors import UnitError, UnitTypeError, UnitValueError


class IntQuantity:
    """Base of the typed quantities; not used directly (each unit is a final subclass).

    Attributes:
        value: the magnitude, a plain non-negative ``int`` (read it on hot paths).
        unit: the pint unit name of the class, e.g. ``"encoder_token"``.
    """

    __slots__ = ("value",)
    unit: ClassVar[str]
    value: int

    def __init__(self, value: int) -> None:
        if type(value) is not int:
            self._bad_magnitude(value)
        if value < 0:
            raise UnitValueError(
                f"{type(self).__name__} must be >= 0, got {value} {self.unit}",
                expected=f"a non-negative number of {self.unit}",
                got=f"{value} {self.unit}",
            )
        _set_value(self, value)

    @classmethod
    def _trusted(cls, value: int) -> Self:
        # Results of same-unit arithmetic are already checked ints: skip __init__'s checks.
        new = object.__new__(cls)
        _set_value(new, value)
        return new

    @classmethod
    def _bad_magnitude(cls, value: object) -> NoReturn:
        if isinstance(value, IntQuantity):
            raise UnitTypeError(
                f"{cls.__name__} expects an int of {cls.unit}, got {value}: convert it with "
                f"the named function in contracts instead of re-wrapping it",
                expected=cls.unit,
                got=str(value),
            )
        if isinstance(value, float) and value.is_integer():
            hint = f"; write {cls.__name__}({int(value)}) if the value is exact"
        else:
            hint = ""
        raise UnitTypeError(
            f"{cls.__name__} takes an int number of {cls.unit}, got {describe(value)}{hint}",
            expected=cls.unit,
            got=describe(value),
        )

    # -- same-unit arithmetic --------------------------------------------------------------

    def _mismatch(self, op: str, other: object) -> NoReturn:
        raise UnitTypeError(
            f"cannot apply {op!r} to {self} and {describe(other)}: both sides must be in "
            f"{self.unit}; convert one with a named function from contracts",
            expected=self.unit,
            got=describe(other),
        )

    def __add__(self, other: Self) -> Self:
        if type(other) is not type(self):
            self._mismatch("+", other)
        new = _new(type(self))
        _set_value(new, self.value + other.value)
        return new

    def __radd__(self, other: Self) -> Self:
        self._mismatch("+", other)

    def __sub__(self, other: Self) -> Self:
        if type(other) is not type(self):
            self._mismatch("-", other)
        diff = self.value - other.value
        if diff < 0:
            raise UnitValueError(
                f"{self} - {other} is negative; a {type(self).__name__} cannot be below 0",
                expected=f"a non-negative number of {self.unit}",
                got=f"{diff} {self.unit}",
            )
        return self._trusted(diff)

    def __rsub__(self, other: Self) -> Self:
        self._mismatch("-", other)

    def __mul__(self, factor: int) -> Self:
        if type(factor) is not int:
            self._bad_factor(factor)
        return type(self)(self.value * factor)  # a negative factor must still be refused

    def __rmul__(self, factor: int) -> Self:
        return self.__mul__(factor)

    def _bad_factor(self, factor: object) -> NoReturn:
        raise UnitTypeError(
            f"{self} can be scaled only by a plain int, got {describe(factor)}",
            expected="int",
            got=describe(factor),
        )

    def __lt__(self, other: Self) -> bool:
        if type(other) is not type(self):
            self._mismatch("<", other)
        return self.value < other.value

    def __le__(self, other: Self) -> bool:
        if type(other) is not type(self):
            self._mismatch("<=", other)
        return self.value <= other.value

    def __gt__(self, other: Self) -> bool:
        if type(other) is not type(self):
            self._mismatch(">", other)
        return self.value > other.value

    def __ge__(self, other: Self) -> bool:
        if type(other) is not type(self):
            self._mismatch(">=", other)
        return self.value >= other.value

    def __bool__(self) -> bool:
        return self.value != 0

    # Equality and hashing are hidden from mypy on purpose: with object's ``__eq__`` visible,
    # strict equality reports ``EncoderTokens(1) == PooledBlocks(1)`` as comparison-overlap;
    # a visible custom ``__eq__`` would switch that check off.
    if not TYPE_CHECKING:

        def __eq__(self, other):
            if type(other) is type(self):
                return self.value == other.value
            if isinstance(other, _NUMBERS):
                self._mismatch("==", other)
            # Not a number at all (None, a sentinel such as mock.ANY, a string): let the other
            # side answer, or Python fall back to identity, so `q == None` is False and
            # `None in [q]` works.
            return NotImplemented

        def __ne__(self, other):
            if type(other) is type(self):
                return self.value != other.value
            if isinstance(other, _NUMBERS):
                self._mismatch("!=", other)
            return NotImplemented

        def __hash__(self):
            return hash((self.unit, self.value))

        def __index__(self):
            raise UnitTypeError(
                f"{self} cannot be used as a plain index or int; read .value where a plain "
                f"int of {self.unit} is really meant (a block table index, a loop bound)",
                expected="int",
                got=str(self),
            )

    # -- immutability, printing, pickling --------------------------------------------------

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.value,))

    def __str__(self) -> str:
        return f"{self.value} {self.unit}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value})"

    def __format__(self, spec: str) -> str:
        return f"{format(self.value, spec)} {self.unit}"

    # -- pint boundary ----------------------------------------------------------------------

    def to_pint(self) -> Any:
        """This quantity as a pint ``Quantity`` of the kvunits registry (imports pint)."""
        from ._registry import ureg

        return ureg.Quantity(self.value, self.unit)

    @classmethod
    def from_pint(cls, quantity: object, *, field: str | None = None) -> Self:
        """Convert a pint quantity of the kvunits registry to this unit, exactly.

        Raises:
            UnitTypeError: not a pint quantity, from another registry, or another dimension.
            UnitValueError: not an integral, non-negative number of this unit after conversion.
        """
        from ._registry import quantity_to_int

        return cls(quantity_to_int(quantity, cls.unit, field=field))

    # -- pydantic boundary ------------------------------------------------------------------

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> CoreSchema:
        return quantity_core_schema((cls,))

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> JsonSchemaValue:
        return quantity_json_schema((cls,))


# The slot's setter and the allocator, bound once: cheaper than object.__setattr__ on every
# construction, and same-unit results skip __init__'s checks (their operands passed them).
_set_value = IntQuantity.__dict__["value"].__set__
#: What `==` refuses to compare with a quantity: another unit, or a bare number (a unit
#: mistake); anything else is simply not equal.
_NUMBERS = (IntQuantity, int, float)
_new = object.__new__


@final
class EncoderTokens(IntQuantity):
    """Positions of an encoder's sequence: the unit the attention kernel and model configs use."""

    __slots__ = ()
    unit: ClassVar[str] = "encoder_token"


@final
class PooledBlocks(IntQuantity):
    """Pooled slots: P consecutive encoder tokens stored as one cache slot (a pooled layer's
    manager unit)."""

    __slots__ = ()
    unit: ClassVar[str] = "pooled_block"


@final
class Tokens(IntQuantity):
    """Decoder tokens: kernel unit and manager unit of an unpooled layer."""

    __slots__ = ()
    unit: ClassVar[str] = "token"


@final
class CacheBlocks(IntQuantity):
    """Pages of the paged cache, ``block_size`` slots each: the block allocator's unit."""

    __slots__ = ()
    unit: ClassVar[str] = "cache_block"


@final
class Bytes(IntQuantity):
    """Memory, for capacity planning."""

    __slots__ = ()
    unit: ClassVar[str] = "byte"

    def __str__(self) -> str:
        return f"{self.value} byte"


#: Any one of the typed quantities; a constrained TypeVar, so two arguments typed ``Q``
#: must be the *same* unit (a bound TypeVar would let mypy join two units into the base).
Q = TypeVar("Q", EncoderTokens, PooledBlocks, Tokens, CacheBlocks, Bytes)

#: A unit that counts sequence positions (what a window, a length or a block size counts).
SeqUnit = TypeVar("SeqUnit", EncoderTokens, PooledBlocks, Tokens)

#: A unit that the manager counts slots in: pooled blocks (pooled layer) or tokens.
SlotUnit = TypeVar("SlotUnit", PooledBlocks, Tokens)

QUANTITY_CLASSES: tuple[type[IntQuantity], ...] = (
    EncoderTokens,
    PooledBlocks,
    Tokens,
    CacheBlocks,
    Bytes,
)


def quantity_class_for_unit(unit: str) -> type[IntQuantity]:
    """The typed class whose unit is ``unit`` (a canonical pint name such as ``"token"``)."""
    for cls in QUANTITY_CLASSES:
        if cls.unit == unit:
            return cls
    raise UnitTypeError(
        f"no kvunits quantity counts in {unit!r}; known units: "
        + ", ".join(c.unit for c in QUANTITY_CLASSES),
        expected=" | ".join(c.unit for c in QUANTITY_CLASSES),
        got=repr(unit),
    )


def check_quantity(value: object, cls: type[Q], field: str) -> Q:
    """Runtime entry check: ``value`` must be an instance of ``cls``; return it typed.

    This is the one check a hot path does at its entry, for callers without mypy.

    Raises:
        UnitTypeError: naming ``field``, the expected unit and what was given.
    """
    if type(value) is cls:
        return value
    raise UnitTypeError(
        f"{field} must be {cls.__name__} ({cls.unit}), got {describe(value)}",
        field=field,
        expected=cls.unit,
        got=describe(value),
    )


# -- pydantic glue: quantity fields that parse "750 encoder_token" and reject bare numbers --------
#
# A field typed with a quantity class (or `AnyOf` several) accepts an instance of the class,
# a strict "<integer> <unit>" string, or a pint quantity of the kvunits registry; anything else
# (a bare int included) is a validation error that names the unit to write. Values serialise
# back to the same string form, and the JSON schema shows the unit of each field.

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
