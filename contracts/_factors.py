"""Per-layer factors: the pooling factor P and the block size (slots per cache block)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, final

from ._describe import describe
from ._quantity import EncoderTokens, PooledBlocks, SeqUnit, Tokens
from .errors import UnitError, UnitTypeError, UnitValueError

_SEQ_UNITS = (EncoderTokens, PooledBlocks, Tokens)


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
@dataclass(frozen=True, slots=True)
class BlockSize(Generic[SeqUnit]):
    """Slots per cache block, tagged with the unit a slot counts.

    A pooled layer's manager block size is ``BlockSize[PooledBlocks]``, its kernel view
    ``BlockSize[EncoderTokens]`` (``block_size × P``), an ordinary layer's ``BlockSize[Tokens]``:
    mypy keeps them apart, and `check` does at run time.

    Example:
        >>> bs = BlockSize(16, PooledBlocks)
        >>> str(bs), bs.slots
        ('16 pooled_block/cache_block', 16)
    """

    slots: int
    unit: type[SeqUnit]

    def __post_init__(self) -> None:
        if self.unit not in _SEQ_UNITS:
            raise UnitTypeError(
                f"BlockSize counts encoder_token, pooled_block or token slots, got "
                f"{describe(self.unit)}",
                field="block_size",
                expected="EncoderTokens | PooledBlocks | Tokens",
                got=describe(self.unit),
            )
        if type(self.slots) is not int:
            raise UnitTypeError(
                f"BlockSize takes an int number of {self.unit.unit} per cache_block, got "
                f"{describe(self.slots)}",
                field="block_size",
                expected=f"int {self.unit.unit}/cache_block",
                got=describe(self.slots),
            )
        if self.slots < 1:
            raise UnitValueError(
                f"BlockSize must be >= 1 {self.unit.unit} per cache_block, got {self.slots}",
                field="block_size",
                expected=f"int >= 1 {self.unit.unit}/cache_block",
                got=str(self.slots),
            )

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

    @property
    def per_block(self) -> SeqUnit:
        """The block size as a quantity of its slot unit."""
        return self.unit(self.slots)

    def __str__(self) -> str:
        return f"{self.slots} {self.unit.unit}/cache_block"


def _pool_core_schema(cls: type[PoolFactor], source: Any, handler: Any) -> Any:
    from pydantic_core import PydanticCustomError, core_schema

    def validate(value: object) -> PoolFactor:
        if type(value) is PoolFactor:
            return value
        try:
            return PoolFactor(value)  # type: ignore[arg-type]  # PoolFactor checks the type itself
        except UnitError as exc:
            raise PydanticCustomError("unit_error", "{message}", {"message": exc.message}) from None

    return core_schema.no_info_plain_validator_function(
        validate,
        serialization=core_schema.plain_serializer_function_ser_schema(
            lambda p: p.tokens_per_block, when_used="always"
        ),
        json_schema_input_schema=core_schema.int_schema(ge=1),
    )
