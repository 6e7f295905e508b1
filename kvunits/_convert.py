"""``kvunits convert``: a unit calculator over the named conversions of `contracts`.

Each step is one conversion of `kvunits.contracts.CONVERSIONS` (or an exact change of byte
multiple), and the result names every step with its formula and rounding, so that nobody has to
guess whether 750 encoder tokens became 188 or 189 pooled blocks, and why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final, final

from kvunits.contracts import (
    CONVERSIONS,
    BlockSize,
    Bytes,
    CacheBlocks,
    EncoderTokens,
    IntQuantity,
    PooledBlocks,
    PoolFactor,
    Position,
    Tokens,
    UnitTypeError,
    UnitValueError,
    Window,
    bytes_to_cache_blocks_floor,
    cache_blocks_to_bytes,
    parse_quantity,
    pool_length,
    pool_position,
    pool_window,
    slots_to_cache_blocks_ceil,
    unpool_length,
)
from kvunits.contracts.internal import parse_any_quantity

#: The largest value an input may have (`contracts` holds every parsed quantity to int64);
#: a result past it is refused too.
MAX_MAGNITUDE: Final = 2**63 - 1

_ROUNDING: Final = {
    "ceil": "rounds up",
    "floor": "rounds down",
    "exact": "exact",
    "window": "window residency bound: the look-back rounds up, plus the current slot",
}

#: Why a window or a position stops at pooled_block: cache blocks count lengths.
_NOT_A_LENGTH: Final = {
    "window": "--as window converts to pooled_block only: a window is not a length; it can "
    "start in the middle of a cache block and span one block more than cdiv(W, block_size) "
    "(kvunits plan prints each group's admission cap in cache_block)",
    "position": "--as position converts to pooled_block only: a position is not a length; "
    "its cache block is its slot // block_size, rounded down",
}


@final
@dataclass(frozen=True, slots=True)
class Step:
    """One conversion applied: its name, formula, rounding and the value it produced."""

    name: str
    formula: str
    rounding: str
    result: str
    value: int
    unit: str


@final
@dataclass(frozen=True, slots=True)
class ConversionResult:
    """A quantity, what it became, and every step on the way."""

    source: str
    target: str
    steps: tuple[Step, ...]
    parameters: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    #: The same, for programs: the input in its unit's class, the output in the unit asked,
    #: the parameters, each a number with its unit.
    source_value: tuple[int, str] = (0, "")
    target_value: tuple[int, str] = (0, "")
    parameter_values: dict[str, tuple[int, str]] = field(default_factory=dict)

    def line(self) -> str:
        """``750 encoder_token → 189 pooled_block  (pool_window: cdiv(W - 1, P) + 1, …)``."""
        chain = " → ".join([self.source, *(step.result for step in self.steps)])
        if not self.steps:
            chain = f"{self.source} → {self.target}"
        described = (
            "; ".join(
                f"{s.name}: {s.formula}, {_ROUNDING.get(s.rounding, s.rounding)}"
                for s in self.steps
            )
            or "identity, exact"
        )
        given = ", ".join(f"{k} = {v}" for k, v in self.parameters.items())
        return f"{chain}  ({described}{'; ' + given if given else ''})"

    def to_dict(self) -> dict[str, Any]:
        """``--format json``: numbers with their units beside them, and the text as written."""
        from ._render import SCHEMA_VERSION

        def q(pair: tuple[int, str]) -> dict[str, Any]:
            return {"value": pair[0], "unit": pair[1]}

        return {
            "schema_version": SCHEMA_VERSION,
            "written": self.source,
            "input": q(self.source_value),
            "output": q(self.target_value),
            "steps": [
                {
                    "conversion": s.name,
                    "formula": s.formula,
                    "rounding": s.rounding,
                    "result": q((s.value, s.unit)),
                }
                for s in self.steps
            ],
            "parameters": {k: q(v) for k, v in self.parameter_values.items()},
            "notes": list(self.notes),
        }


#: The largest block size (slots per cache block), an engine's ``block_size_slots`` bound.
_MAX_BLOCK_SIZE: Final = 1 << 16


def convert(
    text: str,
    to: str,
    *,
    pool: int | None = None,
    as_: str | None = None,
    block_size: int | None = None,
    page_size: str | None = None,
) -> ConversionResult:
    """Convert ``text`` (``"750 encoder_token"``) to the unit ``to``.

    Args:
        pool: P, for encoder_token ↔ pooled_block.
        as_: ``"length"`` (default), ``"window"`` or ``"position"``: what an encoder_token
            quantity is, which picks ``pool_length``, ``pool_window`` or ``pool_position``.
        block_size: slots per cache block, for slots → cache_block.
        page_size: bytes of one cache block (``"524288 byte"``), for cache_block ↔ byte.

    Raises:
        UnitTypeError: bad text, an unknown unit, or no conversion between the two units.
        UnitValueError: a missing parameter, or a result that is not whole in ``to``.
    """
    value = parse_any_quantity(text, field="QUANTITY")
    target_cls, per_unit = _target(to)
    params: dict[str, str] = {}
    values: dict[str, tuple[int, str]] = {}
    notes: list[str] = []
    steps: list[Step] = []
    current: IntQuantity = value

    if isinstance(current, EncoderTokens) and target_cls in (PooledBlocks, CacheBlocks, Bytes):
        p = _pool(pool, "encoder_token → pooled_block")
        params["P"] = str(p.tokens_per_block)
        values["P"] = (p.tokens_per_block, "encoder_token/pooled_block")
        kind = as_ or "length"
        if kind != "length" and target_cls is not PooledBlocks:
            raise UnitValueError(_NOT_A_LENGTH[kind], field="--as", got=f"--as {kind} --to {to}")
        n = current.numerical_value_in(EncoderTokens)
        if as_ is None:
            window = pool_window(Window(n, EncoderTokens), p)
            notes.append(
                f"read as a length (the default); a window of {current} keeps {window} "
                "resident: use --as window"
            )
        if kind != "length":
            # A window or a position stays one: shown in pooled_block, converted no further.
            result: Window[PooledBlocks] | Position[PooledBlocks]
            if kind == "window":
                result = pool_window(Window(n, EncoderTokens), p)
            else:
                result = pool_position(Position(n, EncoderTokens), p)
            steps.append(_step(f"pool_{kind}", result))
            return ConversionResult(
                _source(text, value),
                str(result),
                tuple(steps),
                params,
                tuple(notes),
                source_value=_number_and_unit(value),
                target_value=_number_and_unit(result),
                parameter_values=values,
            )
        current = pool_length(current, p)
        steps.append(_step("pool_length", current))
    elif as_ is not None:
        notes.append(f"--as {as_} applies to encoder_token → pooled_block only; ignored")

    if isinstance(current, PooledBlocks) and target_cls is EncoderTokens:
        p = _pool(pool, "pooled_block → encoder_token")
        params["P"] = str(p.tokens_per_block)
        values["P"] = (p.tokens_per_block, "encoder_token/pooled_block")
        current = unpool_length(current, p)
        steps.append(_step("unpool_length", current))

    if isinstance(current, (PooledBlocks, Tokens)) and target_cls in (CacheBlocks, Bytes):
        if block_size is None:
            raise UnitValueError(
                f"{current} → cache_block needs --block-size (slots per cache block)",
                field="--block-size",
                expected=f"an int of {current.unit} per cache_block",
            )
        if not 1 <= block_size <= _MAX_BLOCK_SIZE:  # the engine's block_size_slots range
            raise UnitValueError(
                f"--block-size must be from 1 to {_MAX_BLOCK_SIZE} slots per cache_block, got "
                f"{block_size}",
                field="--block-size",
                expected=f"1 to {_MAX_BLOCK_SIZE}",
                got=str(block_size),
            )
        params["block_size"] = f"{block_size} {current.unit}/cache_block"
        values["block_size"] = (block_size, f"{current.unit}/cache_block")
        if isinstance(current, PooledBlocks):
            current = slots_to_cache_blocks_ceil(current, BlockSize(block_size, PooledBlocks))
        else:
            current = slots_to_cache_blocks_ceil(current, BlockSize(block_size, Tokens))
        steps.append(_step("slots_to_cache_blocks_ceil", current))

    if isinstance(current, CacheBlocks) and target_cls is Bytes:
        page = _page(page_size, "cache_block → byte")
        params["page_size"] = str(page)
        values["page_size"] = (page.numerical_value_in(Bytes), page.unit)
        current = cache_blocks_to_bytes(current, page)
        steps.append(_step("cache_blocks_to_bytes", current))
    elif isinstance(current, Bytes) and target_cls is CacheBlocks:
        page = _page(page_size, "byte → cache_block")
        params["page_size"] = str(page)
        values["page_size"] = (page.numerical_value_in(Bytes), page.unit)
        current = bytes_to_cache_blocks_floor(current, page)
        steps.append(_step("bytes_to_cache_blocks_floor", current))

    if type(current) is not target_cls:
        raise UnitTypeError(_no_conversion(value, current, target_cls), field="--to", got=text)
    number = current.numerical_value_in(type(current))
    if per_unit == 1:
        target = str(current)
        output = (number, current.unit)
    else:
        whole, rest = divmod(number, per_unit)
        if rest:
            raise UnitValueError(
                f"{current} is not a whole number of {to} ({number / per_unit:g}); "
                "kvunits does not round without saying so: use --to byte",
                field="--to",
                got=str(current),
            )
        target = f"{whole} {to}"
        output = (whole, to)
        step = Step("exact unit change", f"1 {to} = {per_unit} byte", "exact", target, whole, to)
        steps.append(step)
    return ConversionResult(
        _source(text, value),
        target,
        tuple(steps),
        params,
        tuple(notes),
        source_value=_number_and_unit(value),
        target_value=output,
        parameter_values=values,
    )


def _target(to: str) -> tuple[type[IntQuantity], int]:
    """The class a unit name belongs to, and how many of the class's unit one of it is."""
    if not re.fullmatch(r"[A-Za-z][A-Za-z_]{0,31}", to):
        raise UnitTypeError(f"--to {to!r} is not a unit name", field="--to", got=repr(to))
    one = parse_any_quantity(f"1 {to}", field="--to")
    return type(one), one.numerical_value_in(type(one))


def _pool(pool: int | None, what: str) -> PoolFactor:
    if pool is None:
        raise UnitValueError(
            f"{what} needs --pool P (encoder tokens per pooled block of the layer)",
            field="--pool",
            expected="an int >= 1",
        )
    return PoolFactor(pool)


def _page(page_size: str | None, what: str) -> Bytes:
    if page_size is None:
        raise UnitValueError(
            f'{what} needs --page-size (bytes of one cache block, e.g. "524288 byte"; '
            "kvunits plan prints it per group)",
            field="--page-size",
            expected="byte",
        )
    return parse_quantity(page_size, Bytes, field="--page-size")


def _source(text: str, value: IntQuantity) -> str:
    written = " ".join(text.split())
    return str(value) if written == str(value) else f"{written} = {value}"


def _number_and_unit(
    value: IntQuantity | Window[PooledBlocks] | Position[PooledBlocks],
) -> tuple[int, str]:
    """A result's plain number, read in its own unit, and the unit's name."""
    if isinstance(value, (Window, Position)):
        return value.numerical_value_in(PooledBlocks), value.unit.unit
    return value.numerical_value_in(type(value)), value.unit


def _step(name: str, result: IntQuantity | Window[PooledBlocks] | Position[PooledBlocks]) -> Step:
    number, unit = _number_and_unit(result)
    if number > MAX_MAGNITUDE:
        raise UnitValueError(
            f"{name} gives {result}, past 2**63 - 1, the int64 bound every input is held to "
            "(the kernels and block tables index with int64 at most)",
            field="--to",
            expected=f"at most 2**63 - 1 {unit}",
            got=str(result),
        )
    conversion = next(c for c in CONVERSIONS if c.name == name)
    return Step(conversion.name, conversion.formula, conversion.rounding, str(result), number, unit)


def _no_conversion(value: IntQuantity, current: IntQuantity, target: type[IntQuantity]) -> str:
    pair = {type(value).unit, target.unit}
    if "token" in pair and pair & {"encoder_token", "pooled_block"}:
        return (
            f"{value} cannot become {target.unit}: token counts decoder positions, "
            "encoder_token and pooled_block the encoder's; no conversion relates them"
        )
    via = "" if current is value else f" (reached {current})"
    return f"no named conversion takes {value} to {target.unit}{via}"
