"""Typed integer quantities: one final class per unit.

A quantity is a non-negative ``int`` tagged with its unit. The classes are deliberately
small (one slot, no pint inside) so that constructing and adding them costs little; pint
enters only at the boundary (`to_pint`, `from_pint`, a pint quantity in a config field); text
(``"750 encoder_token"``) is read without it (``kvunits.contracts._text``).

Mixing units is rejected twice:

* statically: every operator takes ``Self``, the classes are ``@final`` and unrelated, so
  mypy reports ``EncoderTokens(1) + PooledBlocks(1)`` as ``[operator]``, a comparison of the
  two as ``[comparison-overlap]`` (strict equality), a bare ``int`` argument as ``[arg-type]``;
* at run time: the same operations raise `UnitTypeError` naming both units.

A quantity is a *length* (a count of positions, slots, blocks or bytes). Windows, positions and
chunks of a sequence are other kinds over the same units (`kvunits.contracts.Window`, `Position`,
`Chunk`). The plain number leaves a quantity only through `IntQuantity.numerical_value_in`,
which names the unit it counts (as mp-units' ``numerical_value_in``): there is no anonymous
``.value``, so ``PooledBlocks(w.numerical_value_in(EncoderTokens))`` shows the relabelling it is.

Example:
    >>> from kvunits.contracts import EncoderTokens
    >>> w = EncoderTokens(750)
    >>> str(w), repr(w), (w + EncoderTokens(2)).numerical_value_in(EncoderTokens)
    ('750 encoder_token', 'EncoderTokens(750)', 752)
    >>> EncoderTokens.total([w, EncoderTokens(2)])
    EncoderTokens(752)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, Self, TypeAlias, TypeVar, final

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler, ValidationInfo
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from ._describe import describe
from ._origin import in_python, written_in_python
from ._text import (
    MAX_MAGNITUDE,
    TextQuantity,
    dimension_of,
    parse_quantity_text,
    split_text,
    text_to_int,
)
from ._units import unit_named
from .errors import UnitAttributeError, UnitError, UnitTypeError, UnitValueError


class IntQuantity:
    """Base of the typed quantities; not used directly (each unit is a final subclass).

    The magnitude (a plain non-negative ``int``) is read with `numerical_value_in`, which
    names the unit; there is no ``.value``.

    Attributes:
        unit: the pint unit name of the class, e.g. ``"encoder_token"``.
    """

    __slots__ = ("_value",)
    unit: ClassVar[str]
    _value: int
    #: What a count of the class means, where two classes share a unit (cache blocks).
    meaning: ClassVar[str] = "a count"
    #: The named conversions a refused ``//`` points to.
    _divide_hint: ClassVar[str] = "pool_length, slots_to_cache_blocks_ceil, window_blocks, …"

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

    def numerical_value_in(self, unit: type[Self]) -> int:
        """The plain number of ``unit`` this quantity holds: the one way out of the type.

        ``unit`` must be the quantity's own class (mypy checks it, and so does the run time):
        a number leaves with the name of what it counts, for a block-table index, a loop
        bound, a message. Hot paths past a typed entry use `kvunits.contracts.internal.magnitude`.

        Raises:
            UnitTypeError: ``unit`` is another class than the quantity's.

        Example:
            >>> EncoderTokens(750).numerical_value_in(EncoderTokens)
            750
        """
        if unit is not type(self):
            raise UnitTypeError(
                f"{self} counts {self.unit}, not {getattr(unit, 'unit', describe(unit))}: a "
                f"number leaves a quantity in its own unit; convert the quantity with the "
                f"named function from kvunits.contracts first",
                field="unit",
                expected=self.unit,
                got=describe(unit),
            )
        return self._value

    @classmethod
    def total(cls, quantities: Iterable[Self]) -> Self:
        """The sum of ``quantities``, all of this unit (0 of it for none): ``sum()`` with
        its start in the unit, as mypy and the run time both check.

        ``sum(items, EncoderTokens(0))`` does the same; a bare ``sum(items)`` starts from the
        unitless int 0 and is refused.

        Raises:
            UnitTypeError: an item of another unit (or not a quantity).

        Example:
            >>> Tokens.total([Tokens(3), Tokens(4)]), Tokens.total([])
            (Tokens(7), Tokens(0))
        """
        n = 0
        for item in quantities:
            if type(item) is not cls:
                raise UnitTypeError(
                    f"{cls.__name__}.total takes {cls.unit} only, got {describe(item)}",
                    field="quantities",
                    expected=cls.unit,
                    got=describe(item),
                )
            n += item._value
        return cls._trusted(n)

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
        if isinstance(other, IntQuantity) and other.unit == self.unit:
            # One unit, two meanings (a window's span of blocks, a request's cap).
            pair = {type(self).__name__, type(other).__name__}
            hint = next((h for names, h in _SAME_UNIT_HINTS if names == pair), "")
            raise UnitTypeError(
                f"cannot apply {op!r} to {self!r} and {other!r}: both count {self.unit} but "
                f"{type(self).__name__} is {self.meaning} and {type(other).__name__} "
                f"{other.meaning}; {hint or 'use the value that means what the code needs'}",
                expected=type(self).__name__,
                got=type(other).__name__,
            )
        raise UnitTypeError(
            f"cannot apply {op!r} to {self} and {describe(other)}: both sides must be in "
            f"{self.unit}; convert one with a named function from kvunits.contracts",
            expected=self.unit,
            got=describe(other),
        )

    def __add__(self, other: Self) -> Self:
        if type(other) is not type(self):
            self._mismatch("+", other)
        new = _new(type(self))
        _set_value(new, self._value + other._value)
        return new

    def __radd__(self, other: Self) -> Self:
        if _is_sum_start(other):
            # sum(items) starts from the int 0: name the typed ways instead.
            raise UnitTypeError(
                f"sum() of {self.unit} quantities needs a start in their unit: write "
                f"{type(self).__name__}.total(items) or sum(items, {type(self).__name__}(0))",
                expected=self.unit,
                got="int 0 (the start of sum())",
            )
        self._mismatch("+", other)

    def __sub__(self, other: Self) -> Self:
        if type(other) is not type(self):
            self._mismatch("-", other)
        diff = self._value - other._value
        if diff < 0:
            raise UnitValueError(
                f"{self} - {other} is negative; a {type(self).__name__} cannot be below 0",
                expected=f"a non-negative number of {self.unit}",
                got=f"{diff} {self.unit}",
            )
        return self._trusted(diff)

    def __rsub__(self, other: Self) -> Self:
        self._mismatch("-", other)

    def _bad_factor(self, factor: object) -> NoReturn:
        raise UnitTypeError(
            f"{self} can be scaled only by a plain int, got {describe(factor)}",
            expected="int",
            got=describe(factor),
        )

    def __lt__(self, other: Self) -> bool:
        if type(other) is not type(self):
            self._mismatch("<", other)
        return self._value < other._value

    def __le__(self, other: Self) -> bool:
        if type(other) is not type(self):
            self._mismatch("<=", other)
        return self._value <= other._value

    def __gt__(self, other: Self) -> bool:
        if type(other) is not type(self):
            self._mismatch(">", other)
        return self._value > other._value

    def __ge__(self, other: Self) -> bool:
        if type(other) is not type(self):
            self._mismatch(">=", other)
        return self._value >= other._value

    def __bool__(self) -> bool:
        return self._value != 0

    # Equality and hashing are hidden from mypy on purpose: with object's ``__eq__`` visible,
    # strict equality reports ``EncoderTokens(1) == PooledBlocks(1)`` as comparison-overlap;
    # a visible custom ``__eq__`` would switch that check off.
    if not TYPE_CHECKING:

        def __eq__(self, other):
            if type(other) is type(self):
                return self._value == other._value
            if isinstance(other, _NUMBERS):
                self._mismatch("==", other)
            # Not a number at all (None, a sentinel such as mock.ANY, a string): let the other
            # side answer, or Python fall back to identity, so `q == None` is False and
            # `None in [q]` works.
            return NotImplemented

        def __ne__(self, other):
            if type(other) is type(self):
                return self._value != other._value
            if isinstance(other, _NUMBERS):
                self._mismatch("!=", other)
            return NotImplemented

        def __hash__(self):
            return hash((self.unit, self._value))

        def __index__(self):
            raise UnitTypeError(
                f"{self} cannot be used as a plain index or int; read "
                f"numerical_value_in({type(self).__name__}) where a plain int of {self.unit} "
                f"is really meant (a block table index, a loop bound)",
                expected="int",
                got=str(self),
            )

        def __floordiv__(self, other):
            # Division changes the unit (slots to blocks, tokens to pooled blocks) and rounds:
            # it is a named conversion, never an operator.
            raise UnitTypeError(
                f"{self} cannot be divided by {describe(other)}: dividing changes the unit and "
                f"rounds; use the named conversion that says how ({self._divide_hint})",
                expected="a named conversion",
                got=f"{self} // {describe(other)}",
            )

        __truediv__ = __mod__ = __divmod__ = __floordiv__

        def __mul__(self, factor):
            # Only the lengths scale by a plain int (`_Scalable`): a count of heads, layers or
            # one rank's bytes times an int says nothing of what the int counts (stages?
            # layers? ranks?), so its product is a named function with a named result.
            raise UnitTypeError(
                f"{self} cannot be multiplied by {describe(factor)}: the product of a "
                f"{type(self).__name__} and a bare number has no unit; use the named "
                "function that says what it counts (rank_block_bytes(page, StageLayers(n)), "
                "rank_blocks_to_bytes, ...)",
                expected="a named conversion",
                got=f"{self} * {describe(factor)}",
            )

        __rmul__ = __mul__

        @property
        def value(self):
            # A property, not __getattr__: a class with __getattr__ loses CPython's fast
            # attribute loads on every instance (the allocator's hot path reads quantities).
            raise UnitAttributeError(
                f"{type(self).__name__} has no .value: read "
                f"numerical_value_in({type(self).__name__}), which names the unit the "
                f"number counts ({self.unit})",
                field="value",
                expected=f"numerical_value_in({type(self).__name__})",
                got=".value",
            )

    # -- immutability, printing, pickling --------------------------------------------------

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._value,))

    def __str__(self) -> str:
        return f"{self._value} {self.unit}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._value})"

    def __format__(self, spec: str) -> str:
        return f"{format(self._value, spec)} {self.unit}"

    # -- pint boundary ----------------------------------------------------------------------

    def to_pint(self) -> Any:
        """This quantity as a pint ``Quantity`` of the kvunits registry (imports pint)."""
        from ._registry import ureg

        return ureg.Quantity(self._value, self.unit)

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
_set_value = IntQuantity.__dict__["_value"].__set__
#: What `==` refuses to compare with a quantity: another unit, or a bare number (a unit
#: mistake); anything else is simply not equal.
_NUMBERS = (IntQuantity, int, float)
_new = object.__new__


class _Scalable(IntQuantity):
    """A length that a plain int scales (``Tokens(16) * 3``): n lengths laid end to end.

    Counts and one rank's quantities are not scalable: what would the int count?"""

    __slots__ = ()

    def __mul__(self, factor: int) -> Self:
        if type(factor) is not int:
            self._bad_factor(factor)
        return type(self)(self._value * factor)  # a negative factor must still be refused

    def __rmul__(self, factor: int) -> Self:
        return self.__mul__(factor)


@final
class EncoderTokens(_Scalable):
    """Positions of an encoder's sequence: the unit the attention kernel and model configs use."""

    __slots__ = ()
    unit: ClassVar[str] = "encoder_token"


@final
class PooledBlocks(_Scalable):
    """Pooled slots: P consecutive encoder tokens stored as one cache slot (a pooled layer's
    manager unit)."""

    __slots__ = ()
    unit: ClassVar[str] = "pooled_block"


@final
class Tokens(_Scalable):
    """Decoder tokens: kernel unit and manager unit of an unpooled layer."""

    __slots__ = ()
    unit: ClassVar[str] = "token"


@final
class CacheBlocks(_Scalable):
    """Pages of the paged cache, ``block_size`` slots each: the block allocator's unit.

    A count of pages held or available now: what requests hold, what is free or reserved,
    a pool's usable pages. Four other counts of cache blocks mean something else and are
    their own types: a request's admission cap (`AdmissionCap`), a pool's blocks with its null
    block (`PoolBlocks`), the span a window touches (`SpanBlocks`) and the entries of a block
    table (`TableBlocks`).
    """

    __slots__ = ()
    unit: ClassVar[str] = "cache_block"
    meaning: ClassVar[str] = "pages held or available now"

    def covers(self, cap: AdmissionCap) -> bool:
        """Whether these pages (free now, or unreserved) hold a request's cap: ``cap <=
        self``.

        Raises:
            UnitTypeError: ``cap`` is not an `AdmissionCap`.
        """
        if type(cap) is not AdmissionCap:
            raise UnitTypeError(
                f"CacheBlocks.covers takes a request's AdmissionCap, got {describe(cap)}",
                field="cap",
                expected="AdmissionCap",
                got=describe(cap),
            )
        return cap._value <= self._value


@final
class AdmissionCap(IntQuantity):
    """The most cache blocks one request can hold at once in a group: its admission cap
    (`ManagerSpec.max_admission_blocks_per_request`, what admission reserves).

    Not a pool's size, nor the pages free now: a request fits a pool when its cap is at most
    the pool's pages less the null block, ``pool.fits(cap)`` (`PoolBlocks.fits`), and the
    pages on hand now when ``free.covers(cap)`` (`CacheBlocks.covers`); comparing a cap with
    either by an operator is refused, naming both meanings (vLLM #52520: a cap compared with
    every block of the pool, the null block included, admitted a request that never ran).

    Example:
        >>> PoolBlocks(14).fits(AdmissionCap(13)), PoolBlocks(13).fits(AdmissionCap(13))
        (True, False)
    """

    __slots__ = ()
    unit: ClassVar[str] = "cache_block"
    meaning: ClassVar[str] = "a request's admission cap (the most it holds at once)"


@final
class PoolBlocks(IntQuantity):
    """The cache blocks of a pool, its null block included: what a capacity plan buys and a
    coordinator's pool is built with (vLLM's ``num_gpu_blocks``).

    Requests hold ``usable`` of them (the null block stands in every evicted table entry and
    is nobody's); `fits` says whether a request's cap can ever be held.
    """

    __slots__ = ()
    unit: ClassVar[str] = "cache_block"
    meaning: ClassVar[str] = "a pool's blocks (the null block included)"

    @property
    def usable(self) -> CacheBlocks:
        """The pages requests can hold: the pool less its null block."""
        return CacheBlocks._trusted(max(self._value - 1, 0))

    def fits(self, cap: AdmissionCap) -> bool:
        """Whether a request of cap ``cap`` can ever be held by this pool alone: ``cap <=
        pool − 1``, its `usable` pages (the null block is no request's). Past this typed
        entry, admission compares plain ints (`kvunits.runtime.admission`).

        Raises:
            UnitTypeError: ``cap`` is not an `AdmissionCap` (a window's span, a table width, a
                count of pages: each means something else).
        """
        if type(cap) is not AdmissionCap:
            raise UnitTypeError(
                f"PoolBlocks.fits takes a request's AdmissionCap "
                f"(max_admission_blocks_per_request), got {describe(cap)}"
                + (
                    f" ({type(cap).__name__}: {cap.meaning})"
                    if isinstance(cap, IntQuantity)
                    else ""
                ),
                field="cap",
                expected="AdmissionCap",
                got=describe(cap),
            )
        return cap._value <= max(self._value - 1, 0)


@final
class SpanBlocks(IntQuantity):
    """The cache blocks a window (or a run of positions) can touch, uncapped:
    ``cdiv(W − 1, B) + 1`` (`window_blocks`). Not what a request holds at once: a request
    also holds the steps in flight past its window, and never more than its length's blocks
    (the admission cap, a `CacheBlocks`), so a span is refused where a cap goes.
    """

    __slots__ = ()
    unit: ClassVar[str] = "cache_block"
    meaning: ClassVar[str] = "the span a window touches (uncapped, not a request's cap)"


@final
class TableBlocks(IntQuantity):
    """Entries of a request's block table: one per block of its longest sequence, evicted
    entries included (`ManagerSpec.block_table_width`). Not what a request holds: a sliding
    window holds its cap's worth of them."""

    __slots__ = ()
    unit: ClassVar[str] = "cache_block"
    meaning: ClassVar[str] = "the entries of a block table (not what a request holds)"


@final
class Bytes(_Scalable):
    """Memory, for capacity planning."""

    __slots__ = ()
    unit: ClassVar[str] = "byte"

    def __str__(self) -> str:
        return f"{self._value} byte"


#: The named comparison each pair of same-unit meanings has, for the refusal's message.
_SAME_UNIT_HINTS: tuple[tuple[set[str], str], ...] = (
    ({"AdmissionCap", "PoolBlocks"}, "ask pool.fits(cap): the null block is no request's"),
    ({"AdmissionCap", "CacheBlocks"}, "ask pages.covers(cap) (free or unreserved pages)"),
    (
        {"AdmissionCap", "SpanBlocks"},
        "a request holds its cap (max_admission_blocks_per_request), the window and the steps "
        "in flight, not the window's span",
    ),
    ({"SpanBlocks", "CacheBlocks"}, "compare pages with a request's AdmissionCap, not a span"),
)

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
    if type(value) is str:
        resolved = _RESOLVED.get(classes)
        if resolved is None:
            resolved = _RESOLVED.setdefault(classes, {})
        quantity = read_text_quantity(value, classes, resolved)
        if quantity is not None:
            return quantity
    return _coerce_strictly(value, classes)


#: A unit name resolved for one field type: the class it converts to, and its factor.
_Resolved: TypeAlias = "tuple[type[IntQuantity], int]"

#: Per field type (its classes), each unit name's class and factor (see `read_text_quantity`).
_RESOLVED: dict[tuple[type[IntQuantity], ...], dict[str, _Resolved]] = {}


def quantity_from_text(
    quantity: TextQuantity, classes: tuple[type[IntQuantity], ...]
) -> IntQuantity:
    """``quantity`` as the one of ``classes`` of its dimension.

    Raises:
        UnitTypeError: none of ``classes`` counts in ``quantity``'s dimension.
        UnitValueError: more than 2**63 - 1 of the class's unit.
    """
    for cls in classes:
        if _single(cls) and quantity.unit.dimension == dimension_of(cls.unit):
            return cls(text_to_int(quantity, cls.unit))
    units = " or ".join(c.unit for c in classes)
    raise UnitTypeError(
        f"expected {units}, got {quantity:~}"
        + (
            "; a manager-side unit cannot be written here, write the model's unit"
            if "pooled_block" in quantity.unit.name
            else ""
        ),
        expected=units,
        got=f"{quantity}",
    )


def read_text_quantity(
    text: str, classes: tuple[type[IntQuantity], ...], resolved: dict[str, _Resolved]
) -> IntQuantity | None:
    """The fast path of a text quantity field: ``text`` as one of ``classes``, or ``None``
    where `parse_quantity_text` and `quantity_from_text` must say what is wrong.

    ``resolved`` caches, per unit name, the class of ``classes`` it converts to and its
    factor (the caller keeps one per field type): after a name's first use, a field costs
    one strip, one match, one ``int`` and one dict look-up.
    """
    split = split_text(text)
    if split is None:
        return None
    digits, name = split
    target = resolved.get(name)
    if target is None:
        target = _resolve(name, classes)
        if target is None:
            return None
        resolved[name] = target
    cls, factor = target
    if not digits.isdigit():
        digits = digits.replace("_", "").replace(",", "")
    magnitude = int(digits)
    if magnitude > MAX_MAGNITUDE:
        return None
    if factor != 1:
        magnitude *= factor
        if magnitude > MAX_MAGNITUDE:
            return None
    return cls._trusted(magnitude)


def _resolve(name: str, classes: tuple[type[IntQuantity], ...]) -> _Resolved | None:
    unit = unit_named(name)
    if unit is None:
        return None
    for cls in classes:
        if _single(cls) and unit.dimension == dimension_of(cls.unit):
            return cls, unit.factor
    return None


def _single(cls: type[IntQuantity]) -> bool:
    """Whether the class's unit is one unit of the table (``"kv_head"``), not a per-rank or
    per-stage one (``"kv_head/rank"``), whose text form is matched whole (`_per_text`)."""
    return "/" not in cls.unit


_PER_TEXT = re.compile(r"\s*([0-9][0-9_,]*)\s*([a-z_]+)\s*/\s*([a-z_]+)\s*")


def _per_text(text: str, classes: tuple[type[IntQuantity], ...]) -> IntQuantity | None:
    """``"4 cache_block/rank"`` as the class of ``classes`` whose unit it names exactly."""
    match = _PER_TEXT.fullmatch(text)
    if match is None:
        return None
    unit = f"{match[2]}/{match[3]}"
    for cls in classes:
        if cls.unit == unit:
            digits = match[1].replace("_", "").replace(",", "")
            if len(digits) > 19 or int(digits) > MAX_MAGNITUDE:
                return None
            return cls(int(digits))
    raise UnitTypeError(
        f"expected {' or '.join(c.unit for c in classes)}, got {text.strip()}",
        expected=" or ".join(c.unit for c in classes),
        got=text.strip(),
    )


def _coerce_strictly(value: object, classes: tuple[type[IntQuantity], ...]) -> IntQuantity:
    """`coerce_quantity` past its fast path: every check, and the message of each refusal."""
    units = " or ".join(c.unit for c in classes)
    example = f"{_example(value)} {classes[0].unit}"
    if isinstance(value, IntQuantity):
        raise UnitTypeError(
            f"expected {units}, got {value}; convert it with the named function in contracts",
            expected=units,
            got=str(value),
        )
    if _is_kind(value):
        raise UnitTypeError(
            f"expected a length in {units}, got {value!r}: a window, a position or a chunk "
            "is not a length; use the named function that says what it means",
            expected=units,
            got=repr(value),
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
    per = _per_text(value, classes)
    if per is not None:
        return per
    if not any(_single(c) for c in classes):
        raise UnitTypeError(
            f"expected {units} such as {example!r}, got {value.strip()[:60]!r}",
            expected=units,
            got=repr(value),
        )
    # The first class's unit names the fix in the hint for a bare number ("40" -> "40 byte").
    return quantity_from_text(parse_quantity_text(value, expected_unit=classes[0].unit), classes)


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


def _is_sum_start(value: object) -> bool:
    # sum() without a start adds the int 0 first.
    return type(value) is int and value == 0


def _is_kind(value: object) -> bool:
    # A window, position or chunk (kvunits.contracts._kinds), told apart without importing it.
    return isinstance(getattr(type(value), "kind", None), str) and hasattr(value, "unit")


def _is_pint_quantity(value: object) -> bool:
    return type(value).__module__.startswith("pint")


def _example(value: object) -> str:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else "750"


def quantity_core_schema(classes: tuple[type[IntQuantity], ...]) -> core_schema.CoreSchema:
    """A pydantic core schema for a field holding one of ``classes``."""

    def validate(value: object, info: ValidationInfo) -> IntQuantity:
        if type(value) in classes:
            return value  # type: ignore[return-value]  # exact-type membership checked above
        if in_python(info):
            names = " or ".join(c.__name__ for c in classes)
            raise written_in_python(info, value, typed_fix(value, classes), names)
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

    return core_schema.with_info_plain_validator_function(
        validate,
        serialization=core_schema.plain_serializer_function_ser_schema(str, when_used="always"),
    )


def typed_fix(value: object, classes: tuple[type[IntQuantity], ...]) -> str:
    """What Python code writes for ``value`` in a field of ``classes``: the quantity a config
    reads it as (``Tokens(4096)`` for ``"4096 token"``), or each class's constructor for a
    bare number, whose unit only the writer knows."""
    if type(value) is int and value >= 0:
        return " or ".join(f"{c.__name__}({value})" for c in classes)
    try:
        return repr(coerce_quantity(value, classes))
    except UnitError:
        return " or ".join(f"{c.__name__}(n)" for c in classes)


def unit_pattern(classes: tuple[type[IntQuantity], ...]) -> str:
    """The JSON-schema pattern of text in one of ``classes``' units: an integer and one of
    the spellings the reader accepts for them (``"750 encoder_token"``, ``"40 GiB"``), so
    the schema itself refuses another unit (``"750 pooled_block"`` for an encoder_token
    field)."""
    from ._units import unit_table

    spellings: set[str] = set()
    for cls in classes:
        if _single(cls):
            dimension = dimension_of(cls.unit)
            spellings.update(n for n, u in unit_table().items() if u.dimension == dimension)
        else:
            first, _, per = cls.unit.partition("/")
            spellings.add(f"{re.escape(first)}\\s*/\\s*{re.escape(per)}")
    names = "|".join(sorted(spellings, key=lambda n: (-len(n), n)))
    return rf"^\s*[0-9][0-9_,]*\s*(?:{names})\s*$"


def quantity_json_schema(classes: tuple[type[IntQuantity], ...]) -> JsonSchemaValue:
    """The JSON schema of a quantity field: a string with its unit in ``x-unit``, and a
    pattern that admits that unit's spellings only."""
    units = [c.unit for c in classes]
    return {
        "type": "string",
        "pattern": unit_pattern(classes),
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
