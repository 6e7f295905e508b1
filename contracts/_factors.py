"""Per-layer factors: the pooling factor P and the block size (slots per cache block)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, NoReturn, final

from pydantic import ValidationInfo

from ._describe import describe
from ._quantity import EncoderTokens, PooledBlocks, SeqUnit, Tokens
from .errors import UnitAttributeError, UnitError, UnitTypeError, UnitValueError

_SEQ_UNITS = (EncoderTokens, PooledBlocks, Tokens)

#: The largest P: 2**16, the bound of an engine's block size too, so that a kernel block of
#: ``block_size × P`` encoder tokens stays far inside int64 (vLLM's pooled encoders use 4).
MAX_POOL = 1 << 16


@final
@dataclass(frozen=True, slots=True)
class PoolFactor:
    """P: encoder tokens per pooled block, a property of one layer (1 for ordinary layers).

    Example:
        >>> str(PoolFactor(4))
        '4 encoder_token/pooled_block'
    """

    tokens_per_block: int

    def __post_init__(self) -> None:
        p = self.tokens_per_block
        if type(p) is not int:
            raise UnitTypeError(
                f"PoolFactor takes an int number of encoder_token per pooled_block, "
                f"got {describe(p)}",
                field="pool",
                expected="int >= 1",
                got=describe(p),
            )
        if p < 1:
            raise UnitValueError(
                f"PoolFactor must be >= 1 (1 means the layer does not pool), got {p}",
                field="pool",
                expected="int >= 1",
                got=str(p),
            )
        if p > MAX_POOL:
            raise UnitValueError(
                f"PoolFactor must be <= {MAX_POOL} encoder_token per pooled_block, got {p}",
                field="pool",
                expected=f"int <= {MAX_POOL}",
                got=str(p),
            )

    def __str__(self) -> str:
        return f"{self.tokens_per_block} encoder_token/pooled_block"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        # Config files write the factor as a plain int >= 1: it is a ratio, its unit is fixed.
        return _pool_core_schema(cls, source, handler)

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> Any:
        return {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_POOL,
            "description": "pooling factor P: encoder tokens per pooled block (cache slot)",
            "x-unit": "encoder_token/pooled_block",
        }


def check_pool(pool: object, field: str = "pool") -> PoolFactor:
    """Runtime entry check: ``pool`` must be a `PoolFactor`; return it typed.

    Raises:
        UnitTypeError: naming ``field`` and what was given (a bare int, another factor).
    """
    if type(pool) is not PoolFactor:
        raise UnitTypeError(
            f"{field} must be a PoolFactor (encoder_token per pooled_block), got {describe(pool)}",
            field=field,
            expected="PoolFactor",
            got=describe(pool),
        )
    return pool


@final
class BlockSize(Generic[SeqUnit]):
    """Slots per cache block, tagged with the unit a slot counts.

    A pooled layer's manager block size is ``BlockSize[PooledBlocks]``, its kernel view
    ``BlockSize[EncoderTokens]`` (``block_size × P``, `expand_block_size`), an ordinary layer's
    ``BlockSize[Tokens]``: mypy keeps them apart, and `check` does at run time. The number
    leaves it with `numerical_value_in`, naming the unit (there is no ``.slots``), so
    ``BlockSize(bs.numerical_value_in(PooledBlocks), EncoderTokens)`` reads as the
    relabelling it is; the expansion is `expand_block_size`.

    Example:
        >>> bs = BlockSize(16, PooledBlocks)
        >>> str(bs), bs.numerical_value_in(PooledBlocks), bs.per_block
        ('16 pooled_block/cache_block', 16, PooledBlocks(16))
    """

    __slots__ = ("_n", "unit")
    _n: int
    unit: type[SeqUnit]

    def __init__(self, slots: int, unit: type[SeqUnit]) -> None:
        if unit not in _SEQ_UNITS:
            raise UnitTypeError(
                f"BlockSize counts encoder_token, pooled_block or token slots, got "
                f"{describe(unit)}",
                field="block_size",
                expected="EncoderTokens | PooledBlocks | Tokens",
                got=describe(unit),
            )
        if type(slots) is not int:
            raise UnitTypeError(
                f"BlockSize takes an int number of {unit.unit} per cache_block, got "
                f"{describe(slots)}",
                field="block_size",
                expected=f"int {unit.unit}/cache_block",
                got=describe(slots),
            )
        if slots < 1:
            raise UnitValueError(
                f"BlockSize must be >= 1 {unit.unit} per cache_block, got {slots}",
                field="block_size",
                expected=f"int >= 1 {unit.unit}/cache_block",
                got=str(slots),
            )
        _set_n(self, slots)
        _set_unit(self, unit)

    def check(self, unit: type[SeqUnit], field: str = "block_size") -> BlockSize[SeqUnit]:
        """Return self if its slots count ``unit``; raise `UnitTypeError` otherwise."""
        if self.unit is not unit:
            raise UnitTypeError(
                f"{field} is {self} but {unit.unit} slots were expected",
                field=field,
                expected=f"{unit.unit}/cache_block",
                got=str(self),
            )
        return self

    def numerical_value_in(self, unit: type[SeqUnit]) -> int:
        """Slots per cache block as a plain int, ``unit`` being the slots' own unit.

        Raises:
            UnitTypeError: ``unit`` is another unit than the block size's.
        """
        return self.check(unit, "unit")._n

    @property
    def per_block(self) -> SeqUnit:
        """The block size as a quantity of its slot unit (a length)."""
        return self.unit(self._n)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("BlockSize is immutable")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError("BlockSize is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (BlockSize, (self._n, self.unit))

    def __str__(self) -> str:
        return f"{self._n} {self.unit.unit}/cache_block"

    def __repr__(self) -> str:
        return f"BlockSize({self._n}, {self.unit.__name__})"

    if not TYPE_CHECKING:
        # Hidden from mypy, as for the quantities: strict equality then reports a pooled
        # block size compared with a token one.

        def __eq__(self, other):
            if type(other) is BlockSize:
                return self._n == other._n and self.unit is other.unit
            return NotImplemented

        def __hash__(self):
            return hash((self._n, self.unit.unit))

        @property
        def slots(self):
            raise UnitAttributeError(
                f"BlockSize has no .slots: read numerical_value_in({self.unit.__name__}), "
                "which names the unit a slot counts",
                field="slots",
                expected=f"numerical_value_in({self.unit.__name__})",
                got=".slots",
            )


_set_n = BlockSize.__dict__["_n"].__set__
_set_unit = BlockSize.__dict__["unit"].__set__


def _pool_core_schema(cls: type[PoolFactor], source: Any, handler: Any) -> Any:
    from pydantic_core import PydanticCustomError, core_schema

    from ._origin import in_python, written_in_python

    def validate(value: object, info: ValidationInfo) -> PoolFactor:
        if type(value) is PoolFactor:
            return value
        if in_python(info):
            good = type(value) is int and 1 <= value <= MAX_POOL
            fix = f"PoolFactor({value})" if good else f"PoolFactor(p), p an int in 1 .. {MAX_POOL}"
            raise written_in_python(info, value, fix, "PoolFactor")
        try:
            return PoolFactor(value)  # type: ignore[arg-type]  # PoolFactor checks the type itself
        except UnitError as exc:
            raise PydanticCustomError("unit_error", "{message}", {"message": exc.message}) from None

    return core_schema.with_info_plain_validator_function(
        validate,
        serialization=core_schema.plain_serializer_function_ser_schema(
            lambda p: p.tokens_per_block, when_used="always"
        ),
        json_schema_input_schema=core_schema.int_schema(ge=1, le=MAX_POOL),
    )
