"""Counts a layer spec declares: heads, KV heads, elements per head, layers.

The sizes of a layer that are not lengths of a sequence are counts of something else, and a
plain int of them is the same mistake a plain int of tokens is: ``layer.kv_heads // tp`` looks
like one rank's heads and bypasses `kvunits.contracts.deploy.kv_heads_per_rank` (which rounds
up to one replicated head when tp exceeds the heads); ``head_size`` passed where the heads go
type-checks. Each count is its own final quantity class, so mypy and the run time keep them
apart as they keep tokens from pooled blocks:

============== ============== ==================================================
class          unit           one of it is
============== ============== ==================================================
`Heads`        ``head``       an attention (query) head of a layer, or an SSM head
`KVHeads`      ``kv_head``    a KV head of a layer, as the model declares it
`Elements`     ``element``    an element of one head (a head size), or of a latent
`Layers`       ``layer``      a layer of the model
`StageLayers`  ``layer/stage`` a layer one pipeline stage holds
============== ============== ==================================================

A count does not scale by a plain int, nor divide: what would the int count? The products
and quotients that mean something are named functions (`kv_heads_per_rank`,
`rank_block_bytes`, `layers_of_stage`). In a config file a count is a plain integer (its
field names it: ``kv_heads = 32``) or text with its unit (``"32 kv_head"``); in Python it is
the class: ``FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))``, which is what
mypy checks, and what the constructor takes (``kv_heads=32`` in Python is refused at run time
too: ``kv_heads=32 has no unit: write KVHeads(32)``; the loaders read a config's numbers).

Example:
    >>> KVHeads(8) + KVHeads(8), str(Elements(128))
    (KVHeads(16), '128 element')
    >>> KVHeads(8) // 2
    Traceback (most recent call last):
    ...
    kvunits.contracts.errors.UnitTypeError: 8 kv_head cannot be divided by 2 ...kv_heads_per_rank...
"""

from __future__ import annotations

import contextlib
from typing import Any, ClassVar, Self, final

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler, ValidationInfo
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from ._origin import in_python, written_in_python
from ._quantity import IntQuantity, coerce_quantity
from .errors import UnitError


class _Count(IntQuantity):
    """A count a spec field declares (see the module doc); not used directly.

    As a pydantic field it takes an instance of its class, a plain int (a config file's
    ``kv_heads = 32``: the field names the unit) or text in its unit (``"32 kv_head"``), within
    ``1 .. maximum``; another count (a rank's heads, elements where heads go) is refused,
    naming both units. A spec's constructor (Python code) takes the instance only.
    """

    __slots__ = ("_owner",)
    #: The largest count a spec field admits (a bound on untrusted config input).
    maximum: ClassVar[int] = 1 << 20

    @property
    def owner(self) -> str | None:
        """The model the count was read from (`ModelSpec.num_layers` sets it), or None: a
        model's layer count is refused where another model's belongs (a draft model built
        with its target's layers: SGLang #8482)."""
        return getattr(self, "_owner", None)

    @classmethod
    def _owned(cls, n: int, owner: str) -> Self:
        new = cls._trusted(n)
        _set_owner(new, owner)
        return new

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return count_core_schema(cls)

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {
            "type": "integer",
            "minimum": 1,
            "maximum": cls.maximum,
            "description": f"a count of {cls.unit}: an integer >= 1",
            "x-unit": cls.unit,
        }


@final
class Heads(_Count):
    """Attention (query) heads of one layer, or a mixer's SSM heads, as the model declares
    them."""

    __slots__ = ()
    unit: ClassVar[str] = "head"
    maximum: ClassVar[int] = 1 << 16


@final
class KVHeads(_Count):
    """KV heads of one attention layer as the model declares them (all ranks together).

    An MLA layer has one: its latent, which every rank keeps whole. One rank's share is
    `kvunits.contracts.deploy.RankKVHeads` (`kv_heads_per_rank`).
    """

    __slots__ = ()
    unit: ClassVar[str] = "kv_head"
    maximum: ClassVar[int] = 1 << 16
    _divide_hint: ClassVar[str] = (
        "kvunits.contracts.deploy.kv_heads_per_rank(heads, parallelism): max(1, H // tp), a "
        "head replicated when tp exceeds the heads"
    )


@final
class Elements(_Count):
    """Elements of one head (a head size: K's, V's), of an MLA latent, of a mixer's state
    axis."""

    __slots__ = ()
    unit: ClassVar[str] = "element"


@final
class Layers(_Count):
    """Layers of the model (a stack's, a group's): every stage's together."""

    __slots__ = ()
    unit: ClassVar[str] = "layer"
    maximum: ClassVar[int] = 4096
    _divide_hint: ClassVar[str] = (
        "kvunits.contracts.deploy.layers_per_stage(layers, parallelism), then layers_of_stage"
    )


@final
class StageLayers(_Count):
    """Layers one pipeline stage holds (`kvunits.contracts.deploy.layers_of_stage`): a rank
    holds a page of each per block, not of every layer of the model."""

    __slots__ = ()
    unit: ClassVar[str] = "layer/stage"
    maximum: ClassVar[int] = 4096


COUNT_CLASSES: tuple[type[_Count], ...] = (Heads, KVHeads, Elements, Layers, StageLayers)
_set_owner = _Count.__dict__["_owner"].__set__


def count_core_schema(cls: type[_Count]) -> CoreSchema:
    """A pydantic core schema for a spec field holding a count of ``cls``.

    An instance of ``cls`` or text in its unit becomes its int; another quantity (a rank's
    heads, elements where heads go) is refused naming both units; then pydantic's strict int
    checks the rest (no bool, float or numeric string; ``1 .. maximum``), with the errors a
    config file's messages already put in words.
    """

    def before(value: object, info: ValidationInfo) -> object:
        if type(value) is cls:
            return value._value
        if in_python(info):
            raise written_in_python(info, value, _fix(cls, value), f"{cls.__name__} ({cls.unit})")
        if isinstance(value, IntQuantity):
            raise _refuse(
                f"expected {cls.unit} ({cls.__name__}), got {value} ({type(value).__name__}): "
                f"a count of {value.unit} is not a count of {cls.unit}",
                cls,
                str(value),
            )
        if type(value) is str and not value.strip().replace("_", "").isdigit():
            try:
                return coerce_quantity(value, (cls,))._value
            except UnitError as exc:
                raise _refuse(exc.message, cls, exc.got or repr(value)) from None
        return value

    def after(n: int) -> _Count:
        return cls._trusted(n)

    return core_schema.with_info_before_validator_function(
        before,
        core_schema.no_info_after_validator_function(
            after, core_schema.int_schema(strict=True, ge=1, le=cls.maximum)
        ),
        serialization=core_schema.plain_serializer_function_ser_schema(
            lambda q: q._value, when_used="always"
        ),
    )


def _fix(cls: type[_Count], value: object) -> str:
    """The typed count a config would read ``value`` as, written in Python (``KVHeads(32)``);
    ``Cls(n)`` where a config refuses it too."""
    n: object = value
    if type(value) is str:
        with contextlib.suppress(UnitError):
            n = coerce_quantity(value, (cls,))._value
    if type(n) is int and 1 <= n <= cls.maximum:
        return f"{cls.__name__}({n})"
    return f"{cls.__name__}(n), n an int in 1 .. {cls.maximum}"


def _refuse(message: str, cls: type[_Count], got: str) -> PydanticCustomError:
    return PydanticCustomError(
        "unit_error", "{message}", {"message": message, "expected": cls.unit, "got": got}
    )
