"""Quantity kinds over a sequence unit: a window, a position and a chunk are not lengths.

A unit says *what* is counted (encoder tokens, pooled blocks, tokens); a kind says *what the
count means*. The quantity classes (`EncoderTokens`, `PooledBlocks`, `Tokens`, …) are
**lengths**: how many positions, slots or blocks. Three other kinds, generic over their
unit, carry the same units with another meaning, as C++ mp-units separates quantity kinds and
points:

* `Window[U]`: a sliding window of W positions, the current one included. Converting it
  rounds differently from a length (`pool_window`: ``cdiv(W − 1, P) + 1``, not
  ``cdiv(W, P)``), and the cache blocks it touches are ``cdiv(W − 1, B) + 1`` (`window_blocks`),
  not ``cdiv(W, B)``, because it may start in the middle of a block. It has no arithmetic:
  ``window − 1`` is `Window.lookback`, a length that says what it means.
* `Position[U]`: an index into the sequence (a point, not a count). ``position − position`` is
  a length, ``position ± length`` a position; ``position + position`` means nothing. A position
  converts by rounding down (`pool_position`); ``Position[CacheBlocks]`` is a block-table column.
* `Chunk[U]`: the chunk of chunked local attention; it converts exactly (`pool_chunk`).

mypy keeps the kinds apart (``Window[EncoderTokens]`` is not ``EncoderTokens``, nor
``Window[PooledBlocks]``), and the run time does too: every operation between kinds or units
that mypy rejects raises `UnitTypeError`. Numbers leave a kind as they leave a length, through
``numerical_value_in(unit)``.

Example:
    >>> w = Window(750, EncoderTokens)
    >>> w, str(w), w.lookback
    (Window(750, EncoderTokens), '750 encoder_token', EncoderTokens(749))
    >>> q = Position(812, EncoderTokens)
    >>> w.first_position(q), q - Position(800, EncoderTokens), q + EncoderTokens(4)
    (Position(63, EncoderTokens), EncoderTokens(12), Position(816, EncoderTokens))
"""

from __future__ import annotations

from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Generic,
    NoReturn,
    Self,
    TypeVar,
    final,
    get_args,
    get_origin,
    overload,
)

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler, ValidationInfo
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from ._describe import describe
from ._group_marker import GroupT
from ._origin import in_python, written_in_python
from ._quantity import (
    CacheBlocks,
    EncoderTokens,
    IntQuantity,
    PooledBlocks,
    SeqUnit,
    Tokens,
    coerce_quantity,
    unit_pattern,
)
from .errors import UnitAttributeError, UnitError, UnitTypeError, UnitValueError

#: A unit a position can count: a sequence unit, or cache blocks (a block-table column).
PosUnit = TypeVar("PosUnit", EncoderTokens, PooledBlocks, Tokens, CacheBlocks)

_SEQ_UNITS: tuple[type[IntQuantity], ...] = (EncoderTokens, PooledBlocks, Tokens)
_POS_UNITS: tuple[type[IntQuantity], ...] = (*_SEQ_UNITS, CacheBlocks)


class _Kind:
    """The shared body of the kinds: an int ``>= minimum`` and its unit class, immutable.

    Not used directly; each kind is a final generic subclass. Equality, hashing and ordering
    are within one kind and one unit; across them they raise `UnitTypeError` (as mypy's
    strict equality reports them), except against a value that is no number at all.
    """

    __slots__ = ("_n", "unit")
    kind: ClassVar[str]
    #: The smallest magnitude the kind admits.
    minimum: ClassVar[int]
    units: ClassVar[tuple[type[IntQuantity], ...]]
    _n: int
    unit: type[Any]

    def __init__(self, n: int, unit: type[Any]) -> None:
        cls = type(self)
        if unit not in cls.units:
            raise UnitTypeError(
                f"{cls.__name__} counts {' | '.join(u.__name__ for u in cls.units)}, got "
                f"{describe(unit)}; pass the unit class, e.g. {cls.__name__}({n!r}, "
                f"{cls.units[0].__name__})",
                field=cls.kind,
                expected=" | ".join(u.unit for u in cls.units),
                got=describe(unit),
            )
        if type(n) is not int:
            given: object = n
            how = (
                f"; a quantity is a length, not a {cls.kind}: name the conversion"
                if isinstance(given, (IntQuantity, _Kind))
                else ""
            )
            raise UnitTypeError(
                f"{cls.__name__} takes an int number of {unit.unit}, got {describe(n)}{how}",
                field=cls.kind,
                expected=f"int {unit.unit}",
                got=describe(n),
            )
        if n < cls.minimum:
            raise UnitValueError(
                f"a {cls.kind} must be >= {cls.minimum} {unit.unit}{cls._why_minimum()}, got {n}",
                field=cls.kind,
                expected=f"an int >= {cls.minimum} of {unit.unit}",
                got=f"{n} {unit.unit}",
            )
        _set_n(self, n)
        _set_unit(self, unit)

    @classmethod
    def _why_minimum(cls) -> str:
        return ""

    @classmethod
    def _trusted(cls, n: int, unit: type[Any]) -> Self:
        # Results of checked arithmetic: skip __init__'s checks.
        new = object.__new__(cls)
        _set_n(new, n)
        _set_unit(new, unit)
        return new

    def _numerical_value_in(self, unit: object) -> int:
        if unit is not self.unit:
            raise UnitTypeError(
                f"{self!r} counts {self.unit.unit}, not {getattr(unit, 'unit', describe(unit))}: "
                f"a number leaves a {self.kind} in its own unit; convert the {self.kind} with "
                "the named function from kvunits.contracts first",
                field="unit",
                expected=self.unit.unit,
                got=describe(unit),
            )
        return self._n

    def _same(self, other: object, op: str) -> int:
        if type(other) is type(self) and other.unit is self.unit:
            return other._n
        self._mismatch(op, other)

    def _position(self, query: object, op: str) -> int:
        # The index of a position of this kind's unit, else the mismatch error.
        if type(query) is Position and query.unit is self.unit:
            return query._n
        self._mismatch(op, query)

    def _mismatch(self, op: str, other: object) -> NoReturn:
        what = f"{self.kind}s of {self.unit.unit}"
        raise UnitTypeError(
            f"cannot apply {op!r} to {self!r} and {describe(other)}: it takes {what}"
            f"{self._hint(op, other)}",
            expected=what,
            got=describe(other),
        )

    def _hint(self, op: str, other: object) -> str:
        return "; convert one side with a named function from kvunits.contracts"

    # -- immutability, printing, pickling ---------------------------------------------------

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._n, self.unit))

    def __str__(self) -> str:
        # The config form: a window field is written "750 encoder_token".
        return f"{self._n} {self.unit.unit}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._n}, {self.unit.__name__})"

    def __format__(self, spec: str) -> str:
        return f"{format(self._n, spec)} {self.unit.unit}"

    # Hidden from mypy, as for the lengths: a visible __eq__ would switch its strict
    # equality off, which reports a window compared with a length as comparison-overlap.
    if not TYPE_CHECKING:

        def __eq__(self, other):
            if type(other) is type(self) and other.unit is self.unit:
                return self._n == other._n
            if isinstance(other, (_Kind, IntQuantity, int, float)):
                self._mismatch("==", other)
            return NotImplemented

        def __ne__(self, other):
            if type(other) is type(self) and other.unit is self.unit:
                return self._n != other._n
            if isinstance(other, (_Kind, IntQuantity, int, float)):
                self._mismatch("!=", other)
            return NotImplemented

        def __hash__(self):
            return hash((self.kind, self.unit.unit, self._n))

        def __index__(self):
            raise UnitTypeError(
                f"{self!r} cannot be used as a plain index or int; read "
                f"numerical_value_in({self.unit.__name__}) where a plain int is really meant",
                expected="int",
                got=repr(self),
            )

        def __mul__(self, other):
            self._mismatch("*", other)

        def __floordiv__(self, other):
            self._mismatch("//", other)

        def __truediv__(self, other):
            self._mismatch("/", other)

        def __mod__(self, other):
            self._mismatch("%", other)

        __rmul__ = __mul__

        @property
        def value(self):
            raise UnitAttributeError(
                f"{type(self).__name__} has no .value: read numerical_value_in("
                f"{self.unit.__name__}), which names the unit the number counts",
                field="value",
                expected=f"numerical_value_in({self.unit.__name__})",
                got=".value",
            )


_set_n = _Kind.__dict__["_n"].__set__
_set_unit = _Kind.__dict__["unit"].__set__


@final
class Window(_Kind, Generic[SeqUnit]):
    """A sliding window: the current position and the ``W − 1`` before it, in ``unit``.

    Not a length: `pool_window` converts it (``cdiv(W − 1, P) + 1`` slots keep every key
    resident, 189 for 750 encoder tokens at P = 4, where a length would give 188), and
    `window_blocks` counts the cache blocks it touches (``cdiv(W − 1, B) + 1``). Windows
    compare with windows of their unit; nothing adds to or subtracts from one: `lookback` and
    `first_position` name what ``window − 1`` and ``query − window + 1`` mean.

    Args:
        size: W, >= 1 (a window holds at least the current position).
        unit: `EncoderTokens`, `PooledBlocks` or `Tokens`.

    Raises:
        UnitTypeError: ``size`` is not an int (a length, a float), or ``unit`` not a sequence
            unit.
        UnitValueError: ``size`` is below 1.

    Example:
        >>> Window(750, EncoderTokens).numerical_value_in(EncoderTokens)
        750
    """

    __slots__ = ()
    kind: ClassVar[str] = "window"
    minimum: ClassVar[int] = 1
    units: ClassVar[tuple[type[IntQuantity], ...]] = _SEQ_UNITS
    unit: type[SeqUnit]

    def __init__(self, size: int, unit: type[SeqUnit]) -> None:
        super().__init__(size, unit)

    @classmethod
    def _why_minimum(cls) -> str:
        return " (it holds the current position)"

    def numerical_value_in(self, unit: type[SeqUnit]) -> int:
        """W as a plain int of ``unit``, the window's own unit (else `UnitTypeError`)."""
        return self._numerical_value_in(unit)

    @property
    def keys(self) -> SeqUnit:
        """The keys a query reads: ``W``, its own position and the ``W − 1`` before it (a
        length). What a backend that counts the window whole takes (`exclusive_window_bound`);
        `lookback` is what an inclusive left bound takes (`flash_attn_window_size`)."""
        return self.unit._trusted(self._n)

    @property
    def lookback(self) -> SeqUnit:
        """The positions before the current one that a query reads: ``W − 1``, a length.

        What ``window − 1`` means, named: the manager keeps this many slots behind the current
        one, the admission cap counts them, `pool_window` rounds *this* up.
        """
        return self.unit._trusted(self._n - 1)

    def first_position(self, query: Position[SeqUnit]) -> Position[SeqUnit]:
        """The first position a query at ``query`` reads: ``max(0, q − (W − 1))``.

        Raises:
            UnitTypeError: ``query`` is not a position of the window's unit.
        """
        q = self._position(query, "first_position")
        return Position._trusted(max(0, q - self._n + 1), self.unit)

    def _hint(self, op: str, other: object) -> str:
        if op in ("+", "-", "*", "//", "/", "%") or isinstance(other, IntQuantity):
            return (
                "; a window is not a length: window.lookback is W − 1, "
                "window.first_position(q) the first key of query q, and pool_window / "
                "window_blocks convert it"
            )
        return super()._hint(op, other)

    def __lt__(self, other: Window[SeqUnit]) -> bool:
        return self._n < self._same(other, "<")

    def __le__(self, other: Window[SeqUnit]) -> bool:
        return self._n <= self._same(other, "<=")

    def __gt__(self, other: Window[SeqUnit]) -> bool:
        return self._n > self._same(other, ">")

    def __ge__(self, other: Window[SeqUnit]) -> bool:
        return self._n >= self._same(other, ">=")

    if not TYPE_CHECKING:
        # No arithmetic at all: say what to use instead (mypy reports [operator] on its own).

        def __add__(self, other):
            self._mismatch("+", other)

        def __sub__(self, other):
            self._mismatch("-", other)

        __radd__ = __add__

        def __rsub__(self, other):
            self._mismatch("-", other)

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return kind_core_schema(cls, units_of(source, _SEQ_UNITS))

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return kind_json_schema(cls, _field_units(schema, _SEQ_UNITS))


@final
class Chunk(_Kind, Generic[SeqUnit]):
    """The chunk of chunked local attention: a query reads its own chunk up to itself.

    Converts exactly (`pool_chunk`: P must divide it), and has no arithmetic; `start_of`
    names what ``q // C × C`` means.

    Args:
        size: C, >= 1.
        unit: `EncoderTokens`, `PooledBlocks` or `Tokens`.

    Example:
        >>> Chunk(8192, Tokens).start_of(Position(9000, Tokens))
        Position(8192, Tokens)
    """

    __slots__ = ()
    kind: ClassVar[str] = "chunk"
    minimum: ClassVar[int] = 1
    units: ClassVar[tuple[type[IntQuantity], ...]] = _SEQ_UNITS
    unit: type[SeqUnit]

    def __init__(self, size: int, unit: type[SeqUnit]) -> None:
        super().__init__(size, unit)

    def numerical_value_in(self, unit: type[SeqUnit]) -> int:
        """C as a plain int of ``unit``, the chunk's own unit (else `UnitTypeError`)."""
        return self._numerical_value_in(unit)

    def start_of(self, query: Position[SeqUnit]) -> Position[SeqUnit]:
        """The first position of the chunk that holds ``query``: ``q // C × C``."""
        q = self._position(query, "start_of")
        return Position._trusted(q // self._n * self._n, self.unit)

    if not TYPE_CHECKING:

        def __add__(self, other):
            self._mismatch("+", other)

        def __sub__(self, other):
            self._mismatch("-", other)

        __radd__ = __add__
        __rsub__ = __sub__

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return kind_core_schema(cls, units_of(source, _SEQ_UNITS))

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return kind_json_schema(cls, _field_units(schema, _SEQ_UNITS))


@final
class Position(_Kind, Generic[PosUnit, GroupT]):
    """A position (an index, from 0) in a sequence of ``unit``, or a block-table column.

    A column a group's view or handle computes (``block_of``) keeps its group: by name at run
    time (`owner`), and as the second type parameter where the group was asked for by its
    marker (``Position[CacheBlocks, Full]``, `kvunits.contracts.GroupMarker`); it is ``Any``
    otherwise, and for a position of a sequence.

    A point, not a count: ``position − position`` is a length of the unit,
    ``position + length`` and ``position − length`` are positions, positions compare with
    positions; adding two positions, or a window, is an error. It converts by rounding down
    (`pool_position`, `block_of`).

    Args:
        index: the position, >= 0.
        unit: `EncoderTokens`, `PooledBlocks`, `Tokens`, or `CacheBlocks` (a column of a
            block table).

    Example:
        >>> p = Position(812, EncoderTokens)
        >>> p - EncoderTokens(12), p - Position(12, EncoderTokens)
        (Position(800, EncoderTokens), EncoderTokens(800))
    """

    __slots__ = ("_owner",)
    kind: ClassVar[str] = "position"
    minimum: ClassVar[int] = 0
    units: ClassVar[tuple[type[IntQuantity], ...]] = _POS_UNITS
    unit: type[PosUnit]

    def __init__(self, index: int, unit: type[PosUnit]) -> None:
        super().__init__(index, unit)

    @property
    def owner(self) -> str | None:
        """The layer group whose view computed this block-table column (its block size), or
        None (a position of a sequence, a column built by hand). A group's block table
        refuses another group's column (`kvunits.contracts.BlockIds`)."""
        return getattr(self, "_owner", None)

    @classmethod
    def _column(cls, index: int, owner: str | None) -> Position[CacheBlocks, Any]:
        # A block-table column computed by a group's view (block_of): it keeps the group.
        new: Position[CacheBlocks, Any] = cls._trusted(index, CacheBlocks)  # type: ignore[assignment]
        if owner is not None:
            _set_owner(new, owner)
        return new

    def __reduce__(self) -> tuple[Any, ...]:
        if self.owner is not None:
            return (Position._column, (self._n, self.owner))
        return (Position, (self._n, self.unit))

    def numerical_value_in(self, unit: type[PosUnit]) -> int:
        """The index as a plain int of ``unit``, the position's own unit (a list index)."""
        return self._numerical_value_in(unit)

    def _moved(self, n: int) -> Position[PosUnit, GroupT]:
        # A column moved along its own table stays its group's.
        new: Position[PosUnit, GroupT] = Position._trusted(n, self.unit)
        if self.owner is not None:
            _set_owner(new, self.owner)
        return new

    def __add__(self, other: PosUnit) -> Position[PosUnit, GroupT]:
        if type(other) is not self.unit:
            self._mismatch("+", other)
        return self._moved(self._n + other._value)

    @overload
    def __sub__(self, other: Position[PosUnit, GroupT]) -> PosUnit: ...
    @overload
    def __sub__(self, other: PosUnit) -> Position[PosUnit, GroupT]: ...
    def __sub__(self, other: object) -> object:
        if type(other) is self.unit:
            n = self._n - other._value
            if n < 0:
                raise UnitValueError(
                    f"{self!r} - {other!r} is before the first position",
                    expected=f"a position >= 0 of {self.unit.unit}",
                    got=f"{n} {self.unit.unit}",
                )
            return self._moved(n)
        if type(other) is Position and other.unit is self.unit:
            n = self._n - other._n
            if n < 0:
                raise UnitValueError(
                    f"{self!r} - {other!r} is negative: the length between two positions is "
                    "the later minus the earlier",
                    expected=f"a non-negative length of {self.unit.unit}",
                    got=f"{n} {self.unit.unit}",
                )
            return self.unit._trusted(n)
        self._mismatch("-", other)

    def _hint(self, op: str, other: object) -> str:
        if op == "+" and type(other) is Position:
            return "; adding two positions means nothing: add a length to a position"
        return super()._hint(op, other)

    def __lt__(self, other: Position[PosUnit]) -> bool:
        return self._n < self._same(other, "<")

    def __le__(self, other: Position[PosUnit]) -> bool:
        return self._n <= self._same(other, "<=")

    def __gt__(self, other: Position[PosUnit]) -> bool:
        return self._n > self._same(other, ">")

    def __ge__(self, other: Position[PosUnit]) -> bool:
        return self._n >= self._same(other, ">=")

    if not TYPE_CHECKING:

        def __rsub__(self, other):
            self._mismatch("-", other)

        def __radd__(self, other):
            self._mismatch("+", other)

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return kind_core_schema(cls, units_of(source, _POS_UNITS))

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return kind_json_schema(cls, _field_units(schema, _POS_UNITS))


_set_owner = Position.__dict__["_owner"].__set__


# -- pydantic glue: a window or chunk field parses "750 encoder_token" --------------------------


def units_of(source: Any, default: tuple[type[IntQuantity], ...]) -> tuple[type[IntQuantity], ...]:
    """The units a field annotated ``source`` admits: ``Window[EncoderTokens]`` admits
    encoder tokens only, a bare ``Window`` (or one over a type variable) every unit of
    ``default``."""
    args = get_args(source)
    if get_origin(source) is Position:
        args = args[:1]  # the second is the group a column belongs to, not a unit
    units = tuple(a for a in args if isinstance(a, type) and a in default)
    return units if units and len(units) == len(args) else default


def kind_core_schema(
    cls: type[Window[Any]] | type[Chunk[Any]] | type[Position[Any]],
    units: tuple[type[IntQuantity], ...],
) -> core_schema.CoreSchema:
    """A pydantic core schema for a field holding a ``cls`` of one of ``units``.

    It takes an instance, or text / a pint quantity as a length field does (``"750
    encoder_token"``), which then *is* the kind: the field's name says what it means. A
    length instance (``EncoderTokens(750)``) is refused: in Python, write the kind. A kind or
    text of another unit is refused naming both units (``Window[EncoderTokens]`` given
    ``"750 pooled_block"``: the seed's mistake).
    """
    names = " or ".join(u.unit for u in units)

    def validate(value: object, info: ValidationInfo) -> _Kind:
        if type(value) is cls:
            if value.unit not in units:
                raise _custom(
                    f"expected a {cls.kind} of {names}, got {value!r}, a {cls.kind} of "
                    f"{value.unit.unit}: convert it with the named conversion "
                    f"({_CONVERT_KIND.get(cls.kind, 'see kvunits.contracts.CONVERSIONS')})"
                )
            return value
        if isinstance(value, IntQuantity):
            fix = (
                f": write {cls.__name__}({value._value}, {type(value).__name__})"
                if type(value) in units
                else ""
            )
            raise _custom(
                f"expected a {cls.kind} of {names}, got the length {value!r} ({value.unit}){fix}"
            )
        if isinstance(value, _Kind):
            raise _custom(
                f"expected a {cls.kind} of {names}, got {value!r}, a {value.kind} of "
                f"{value.unit.unit}"
            )
        if in_python(info):
            expected = " or ".join(f"{cls.__name__}[{u.__name__}]" for u in units)
            raise written_in_python(info, value, kind_fix(cls, value, units), expected)
        try:
            quantity = coerce_quantity(value, units)
            return cls(quantity._value, type(quantity))
        except UnitError as exc:
            raise PydanticCustomError(
                "unit_error",
                "{message}",
                {"message": exc.message, "expected": exc.expected, "got": exc.got},
            ) from None

    return core_schema.with_info_plain_validator_function(
        validate,
        serialization=core_schema.plain_serializer_function_ser_schema(str, when_used="always"),
        metadata={_UNITS_KEY: [u.unit for u in units]},
    )


def kind_fix(cls: type[_Kind], value: object, units: tuple[type[IntQuantity], ...]) -> str:
    """What Python code writes for ``value`` in a field of a ``cls`` of ``units``: the kind a
    config reads it as (``Window(750, EncoderTokens)`` for ``"750 encoder_token"``), or one
    per unit for a bare number."""
    n: object = value
    unit_names = [u.__name__ for u in units]
    if type(value) is not int:
        try:
            quantity = coerce_quantity(value, units)
        except UnitError:
            n = "n"
        else:
            n, unit_names = quantity._value, [type(quantity).__name__]
    return " or ".join(f"{cls.__name__}({n}, {u})" for u in unit_names)


_UNITS_KEY = "kvunits_units"
_CONVERT_KIND = {
    "window": "pool_window",
    "chunk": "pool_chunk",
    "position": "pool_position, block_of",
}


def _field_units(
    schema: core_schema.CoreSchema, default: tuple[type[IntQuantity], ...]
) -> tuple[type[IntQuantity], ...]:
    # The units the core schema was built for (kept in its metadata), for its JSON schema.
    names = (schema.get("metadata") or {}).get(_UNITS_KEY)
    if not names:
        return default
    return tuple(u for u in default if u.unit in names)


def kind_json_schema(
    cls: type[Window[Any]] | type[Chunk[Any]] | type[Position[Any]],
    units: tuple[type[IntQuantity], ...],
) -> JsonSchemaValue:
    """The JSON schema of a kind field: a string with its unit in ``x-unit``, its kind in
    ``x-kind``, and a pattern that admits that unit's spellings only."""
    names = [u.unit for u in units]
    return {
        "type": "string",
        "pattern": unit_pattern(units),
        "description": f"a {cls.kind}: an integer and a unit: " + " or ".join(names),
        "x-unit": names[0] if len(names) == 1 else names,
        "x-kind": cls.kind,
        "examples": [f"750 {u}" for u in names],
    }


class KindOf:
    """``Annotated[Window[EncoderTokens] | Window[Tokens], KindOf(Window, EncoderTokens,
    Tokens)]``: a field holding a kind of one of several units, parsed with one clear error."""

    def __init__(self, cls: type[Window[Any]] | type[Chunk[Any]], *units: type[IntQuantity]):
        self.cls = cls
        self.units = units

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return kind_core_schema(self.cls, self.units)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return kind_json_schema(self.cls, self.units)


def _custom(message: str) -> PydanticCustomError:
    return PydanticCustomError("unit_error", "{message}", {"message": message})


def check_kind(value: object, cls: type[Any], unit: type[IntQuantity], field: str) -> Any:
    """Runtime entry check: ``value`` is a ``cls`` (`Window`, `Position`, `Chunk`) of
    ``unit``; return it.

    Raises:
        UnitTypeError: naming ``field``, the kind and unit expected, and what was given.
    """
    if type(value) is cls and getattr(value, "unit", None) is unit:
        return value
    hint = ""
    if isinstance(value, IntQuantity) and type(value) is unit:
        hint = f": a length is not a {cls.kind}; write {cls.__name__}(n, {unit.__name__})"
    raise UnitTypeError(
        f"{field} must be a {cls.__name__}[{unit.__name__}] ({cls.kind} of {unit.unit}), got "
        f"{describe(value)}{hint}",
        field=field,
        expected=f"{cls.kind} of {unit.unit}",
        got=describe(value),
    )
