"""The typed quantities: construction, same-unit arithmetic, mixed-unit rejection, printing,
pickling, the pint boundary and the strict text parser."""

from __future__ import annotations

import copy
import operator
import pickle
import re
import time
import unittest.mock
from collections.abc import Callable
from typing import Any

import pint
import pytest

import kvunits.contracts
import kvunits.contracts.internal
from kvunits.contracts import (
    Bytes,
    CacheBlocks,
    EncoderTokens,
    IntQuantity,
    KvUnitsError,
    PooledBlocks,
    SpecError,
    Tokens,
    UnitAttributeError,
    UnitError,
    UnitTypeError,
    UnitValueError,
    parse_quantity,
)
from kvunits.contracts._quantity import quantity_class_for_unit
from kvunits.contracts.internal import QUANTITY_CLASSES

UNITS: dict[type[IntQuantity], str] = {
    EncoderTokens: "encoder_token",
    PooledBlocks: "pooled_block",
    Tokens: "token",
    CacheBlocks: "cache_block",
    Bytes: "byte",
}

#: Every ordered pair of two different quantity classes.
MIXED_PAIRS = [(a, b) for a in QUANTITY_CLASSES for b in QUANTITY_CLASSES if a is not b]


def _raises(
    exc: type[BaseException], pattern: str, call: Callable[[], object]
) -> pytest.ExceptionInfo[BaseException]:
    """Run ``call``, which must raise ``exc`` with a message matching ``pattern`` exactly."""
    with pytest.raises(exc, match=f"^{pattern}$") as info:
        call()
    return info


# -- construction -----------------------------------------------------------------------------


def test_every_unit_has_one_class() -> None:
    assert {cls: cls.unit for cls in QUANTITY_CLASSES} == UNITS
    for cls in QUANTITY_CLASSES:
        assert quantity_class_for_unit(cls.unit) is cls


@pytest.mark.parametrize("cls", QUANTITY_CLASSES)
@pytest.mark.parametrize("value", [0, 1, 750, 2**63 - 1])
def test_construct_from_int(cls: type[IntQuantity], value: int) -> None:
    q = cls(value)
    assert q.numerical_value_in(cls) == value
    assert type(q.numerical_value_in(cls)) is int
    assert q.unit == UNITS[cls]


@pytest.mark.parametrize(
    ("value", "exc", "message"),
    [
        (
            True,
            UnitTypeError,
            r"EncoderTokens takes an int number of encoder_token, got True \(a bool\)",
        ),
        (
            False,
            UnitTypeError,
            r"EncoderTokens takes an int number of encoder_token, got False \(a bool\)",
        ),
        (
            1.5,
            UnitTypeError,
            r"EncoderTokens takes an int number of encoder_token, got 1.5 \(a float\)",
        ),
        (
            750.0,
            UnitTypeError,
            r"EncoderTokens takes an int number of encoder_token, got 750.0 \(a float\); "
            r"write EncoderTokens\(750\) if the value is exact",
        ),
        (
            "750",
            UnitTypeError,
            r"EncoderTokens takes an int number of encoder_token, got '750' \(a str\)",
        ),
        (
            None,
            UnitTypeError,
            r"EncoderTokens takes an int number of encoder_token, got a NoneType",
        ),
        (-1, UnitValueError, r"EncoderTokens must be >= 0, got -1 encoder_token"),
        (
            PooledBlocks(188),
            UnitTypeError,
            r"EncoderTokens expects an int of encoder_token, got 188 pooled_block: convert it "
            r"with the named function in contracts instead of re-wrapping it",
        ),
        (
            EncoderTokens(3),
            UnitTypeError,
            r"EncoderTokens expects an int of encoder_token, got 3 encoder_token: convert it "
            r"with the named function in contracts instead of re-wrapping it",
        ),
    ],
)
def test_construct_rejects(value: Any, exc: type[UnitError], message: str) -> None:
    info = _raises(exc, message, lambda: EncoderTokens(value))
    err = info.value
    assert isinstance(err, UnitError)
    assert err.expected is not None and "encoder_token" in err.expected
    assert err.got is not None


def test_error_tree() -> None:
    # Callers that only know the builtins keep working.
    assert issubclass(UnitTypeError, TypeError)
    assert issubclass(UnitValueError, ValueError)
    assert issubclass(SpecError, ValueError)
    for cls in (UnitError, UnitTypeError, UnitValueError, SpecError):
        assert issubclass(cls, KvUnitsError)
    assert issubclass(UnitTypeError, UnitError) and issubclass(UnitValueError, UnitError)


# -- same-unit arithmetic ---------------------------------------------------------------------


@pytest.mark.parametrize("cls", QUANTITY_CLASSES)
def test_same_unit_add_sub(cls: type[IntQuantity]) -> None:
    a, b = cls(750), cls(4)
    assert type(a + b) is cls and a + b == cls(754)
    assert type(a - b) is cls and a - b == cls(746)
    assert a - a == cls(0)


@pytest.mark.parametrize("cls", QUANTITY_CLASSES)
def test_sums_start_in_the_unit(cls: type[IntQuantity]) -> None:
    items = [cls(1), cls(2), cls(3)]
    assert cls.total(items) == cls(6) and type(cls.total(items)) is cls
    assert cls.total([]) == cls(0)
    assert sum(items, cls(0)) == cls(6)
    # sum() without a start adds the unitless 0 first: refused, naming both typed ways.
    _raises(
        UnitTypeError,
        rf"sum\(\) of {cls.unit} quantities needs a start in their unit: write "
        rf"{cls.__name__}\.total\(items\) or sum\(items, {cls.__name__}\(0\)\)",
        lambda: sum(items),  # type: ignore[arg-type]
    )
    other = Tokens if cls is not Tokens else EncoderTokens
    _raises(
        UnitTypeError,
        rf"{cls.__name__}\.total takes {cls.unit} only, got 1 {other.unit}",
        lambda: cls.total([cls(1), other(1)]),
    )


@pytest.mark.parametrize("cls", QUANTITY_CLASSES)
def test_the_number_leaves_naming_its_unit(cls: type[IntQuantity]) -> None:
    q = cls(750)
    assert q.numerical_value_in(cls) == 750
    other = Tokens if cls is not Tokens else EncoderTokens
    _raises(
        UnitTypeError,
        rf"750 {cls.unit} counts {cls.unit}, not {other.unit}: a number leaves a quantity in "
        "its own unit; convert the quantity with the named function from kvunits.contracts first",
        lambda: q.numerical_value_in(other),
    )
    # No anonymous .value: an AttributeError (hasattr works) that is a UnitError, with the fix.
    with pytest.raises(UnitAttributeError, match=rf"read numerical_value_in\({cls.__name__}\)"):
        q.value  # type: ignore[attr-defined]  # noqa: B018
    assert not hasattr(q, "value") and getattr(q, "value", None) is None
    with pytest.raises(AttributeError, match="has no attribute 'unknown'"):
        q.unknown  # type: ignore[attr-defined]  # noqa: B018


def test_subtraction_below_zero() -> None:
    _raises(
        UnitValueError,
        r"1 encoder_token - 2 encoder_token is negative; a EncoderTokens cannot be below 0",
        lambda: EncoderTokens(1) - EncoderTokens(2),
    )


@pytest.mark.parametrize("cls", QUANTITY_CLASSES)
def test_scale_by_int(cls: type[Any]) -> None:
    q = cls(5)
    assert type(q * 3) is cls and q * 3 == cls(15)
    assert type(3 * q) is cls and 3 * q == cls(15)
    assert q * 0 == cls(0)


@pytest.mark.parametrize(
    ("factor", "shown"),
    [(True, r"True \(a bool\)"), (2.0, r"2.0 \(a float\)"), ("2", r"'2' \(a str\)")],
)
def test_scale_rejects_non_int(factor: Any, shown: str) -> None:
    message = rf"5 pooled_block can be scaled only by a plain int, got {shown}"
    _raises(UnitTypeError, message, lambda: PooledBlocks(5) * factor)
    _raises(UnitTypeError, message, lambda: factor * PooledBlocks(5))


def test_scale_by_negative() -> None:
    _raises(
        UnitValueError,
        r"PooledBlocks must be >= 0, got -5 pooled_block",
        lambda: PooledBlocks(5) * -1,
    )


@pytest.mark.parametrize("cls", QUANTITY_CLASSES)
def test_comparisons(cls: type[IntQuantity]) -> None:
    small, big = cls(188), cls(189)
    assert small < big and small <= big and not small > big and not small >= big
    assert big > small and big >= small
    assert small <= cls(188) and small >= cls(188)
    assert small == cls(188) and small != big
    assert (small != cls(188)) is False and (small == big) is False
    assert sorted([big, small, cls(0)]) == [cls(0), small, big]
    assert max(small, big) is big and min(small, big) is small


def test_truthiness() -> None:
    assert not EncoderTokens(0)
    assert EncoderTokens(1)


@pytest.mark.parametrize("cls", QUANTITY_CLASSES)
def test_hash_and_equality(cls: type[IntQuantity]) -> None:
    assert hash(cls(750)) == hash(cls(750))
    assert len({cls(750), cls(750), cls(4)}) == 2
    table = {cls(750): "window"}
    assert table[cls(750)] == "window"


# -- mixed units ------------------------------------------------------------------------------

BINARY_OPS: dict[str, Callable[[Any, Any], object]] = {
    "+": operator.add,
    "-": operator.sub,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


@pytest.mark.parametrize("op", BINARY_OPS)
def test_mixed_units_name_both(op: str) -> None:
    apply = BINARY_OPS[op]
    for left_cls, right_cls in MIXED_PAIRS:
        left, right = left_cls(1), right_cls(2)
        message = (
            rf"cannot apply {re.escape(repr(op))} to {left} and {right}: both sides must be in "
            rf"{left.unit}; convert one with a named function from kvunits.contracts"
        )
        info = _raises(UnitTypeError, message, lambda: apply(left, right))  # noqa: B023
        err = info.value
        assert isinstance(err, UnitTypeError)
        assert (err.expected, err.got) == (left.unit, str(right))


@pytest.mark.parametrize("op", BINARY_OPS)
def test_bare_int_rejected(op: str) -> None:
    apply = BINARY_OPS[op]
    message = (
        rf"cannot apply {re.escape(repr(op))} to 7 token and 7 \(a bare int, no unit\): both "
        rf"sides must be in token; convert one with a named function from kvunits.contracts"
    )
    _raises(UnitTypeError, message, lambda: apply(Tokens(7), 7))


@pytest.mark.parametrize(("op", "apply"), [("+", operator.add), ("-", operator.sub)])
def test_int_on_the_left(op: str, apply: Callable[[Any, Any], object]) -> None:
    # int.__add__ gives up (NotImplemented), so the quantity's reflected method decides.
    _raises(
        UnitTypeError,
        rf"cannot apply {re.escape(repr(op))} to 7 token and 1 \(a bare int, no unit\): both "
        r"sides must be in token; convert one with a named function from kvunits.contracts",
        lambda: apply(1, Tokens(7)),
    )


def test_equality_with_what_is_not_a_number_is_false() -> None:
    # Another unit or a bare number is a unit mistake (see the tests around); anything that
    # is not a number at all is simply not equal, so containers, defaults and sentinels work.
    q = Tokens(1)
    assert operator.eq(q, None) is False and operator.ne(q, None) is True
    assert None not in [q] and q in [None, q]
    assert operator.ne(q, "1 token")
    assert q == unittest.mock.ANY
    table: dict[object, int] = {q: 1}
    assert table.get(None) is None
    _raises(
        UnitTypeError,
        r"cannot apply '==' to 1 token and 1 \(a bare int.*",
        lambda: operator.eq(q, 1),
    )


def test_mixed_container_check() -> None:
    _raises(
        UnitTypeError,
        r"cannot apply '==' to 1 pooled_block and 1 encoder_token: .*",
        lambda: EncoderTokens(1) in [PooledBlocks(1)],  # type: ignore[comparison-overlap]
    )


@pytest.mark.parametrize(
    "use",
    [
        lambda q: [10, 20][q],
        lambda q: range(q),
        lambda q: operator.index(q),
        lambda q: "abc"[q:],
        lambda q: hex(q),
    ],
    ids=["list-index", "range", "operator.index", "slice", "hex"],
)
def test_not_an_index(use: Callable[[Any], object]) -> None:
    _raises(
        UnitTypeError,
        r"1 encoder_token cannot be used as a plain index or int; read "
        r"numerical_value_in\(EncoderTokens\) where a plain int of encoder_token is really "
        r"meant \(a block table index, a loop bound\)",
        lambda: use(EncoderTokens(1)),
    )


# -- printing, immutability, pickling ---------------------------------------------------------


@pytest.mark.parametrize("cls", QUANTITY_CLASSES)
def test_str_repr_format(cls: type[IntQuantity]) -> None:
    q = cls(750)
    unit = UNITS[cls]
    assert str(q) == f"750 {unit}"
    assert repr(q) == f"{cls.__name__}(750)"
    assert f"{q}" == f"750 {unit}"
    assert f"{q:>5}" == f"  750 {unit}"
    assert f"{cls(42949672960):,}" == f"42,949,672,960 {unit}"


def test_encoder_tokens_text() -> None:
    assert str(EncoderTokens(750)) == "750 encoder_token"
    assert f"window {EncoderTokens(750)}" == "window 750 encoder_token"


def test_immutable() -> None:
    q = EncoderTokens(750)
    with pytest.raises(AttributeError, match=r"^EncoderTokens is immutable$"):
        q._value = 188
    with pytest.raises(AttributeError, match=r"^EncoderTokens is immutable$"):
        del q._value
    with pytest.raises(AttributeError, match=r"^EncoderTokens is immutable$"):
        q.pool = 4
    assert q.numerical_value_in(EncoderTokens) == 750
    assert not hasattr(q, "__dict__")


@pytest.mark.parametrize("cls", QUANTITY_CLASSES)
def test_pickle_and_copy(cls: type[IntQuantity]) -> None:
    q = cls(750)
    for clone in (pickle.loads(pickle.dumps(q)), copy.copy(q), copy.deepcopy(q)):
        assert type(clone) is cls
        assert clone == q


def test_raised_error_pickles() -> None:
    with pytest.raises(UnitTypeError) as info:
        kvunits.contracts.internal.check_quantity(
            EncoderTokens(750), PooledBlocks, "sliding_window"
        )
    clone = pickle.loads(pickle.dumps(info.value))
    assert str(clone) == "sliding_window must be PooledBlocks (pooled_block), got 750 encoder_token"
    assert (clone.field, clone.expected, clone.got) == (
        "sliding_window",
        "pooled_block",
        "750 encoder_token",
    )


# -- check_quantity ---------------------------------------------------------------------------


def test_check_quantity() -> None:
    q = PooledBlocks(189)
    assert kvunits.contracts.internal.check_quantity(q, PooledBlocks, "window") is q
    _raises(
        UnitTypeError,
        r"window must be PooledBlocks \(pooled_block\), got 189 \(a bare int, no unit\)",
        lambda: kvunits.contracts.internal.check_quantity(189, PooledBlocks, "window"),
    )


# -- the pint boundary ------------------------------------------------------------------------


def test_registry_is_one_object() -> None:
    from kvunits.contracts import _registry

    ureg = kvunits.contracts.ureg
    assert kvunits.contracts.ureg is ureg
    assert _registry.ureg is ureg
    assert isinstance(ureg, pint.UnitRegistry)


def test_registry_units() -> None:
    ureg = kvunits.contracts.ureg
    byte = ureg.Unit("byte")
    assert not byte.dimensionless
    assert dict(byte.dimensionality) == {"[memory]": 1}
    # Each unit is its own dimension, so pint itself refuses encoder_token -> pooled_block.
    dims = {str(ureg.Unit(cls.unit).dimensionality) for cls in QUANTITY_CLASSES}
    assert len(dims) == len(QUANTITY_CLASSES)
    with pytest.raises(pint.DimensionalityError):
        ureg.Quantity(750, "encoder_token").to("pooled_block")
    with pytest.raises(pint.UndefinedUnitError):
        ureg.Unit("kiloencoder_token")


@pytest.mark.parametrize("cls", QUANTITY_CLASSES)
def test_pint_round_trip(cls: type[IntQuantity]) -> None:
    q = cls(750)
    pq = q.to_pint()
    assert pq._REGISTRY is kvunits.contracts.ureg
    assert pq.magnitude == 750 and str(pq.units) == UNITS[cls]
    back = cls.from_pint(pq)
    assert type(back) is cls and back == q


def test_from_pint_converts_exactly() -> None:
    ureg = kvunits.contracts.ureg
    assert Bytes.from_pint(ureg.Quantity(40, "GiB")) == Bytes(42949672960)
    assert Bytes.from_pint(ureg.Quantity(0.5, "KiB")) == Bytes(512)


def test_from_pint_rejects_other_registry() -> None:
    foreign = pint.UnitRegistry().Quantity(3, "byte")
    _raises(
        UnitTypeError,
        r"3 byte comes from another pint registry; build it with kvunits\.contracts\.ureg "
        r"\(one registry per process\)",
        lambda: Bytes.from_pint(foreign),
    )


@pytest.mark.parametrize(
    ("cls", "magnitude", "unit", "exc", "message"),
    [
        (
            Tokens,
            3,
            "byte",
            UnitTypeError,
            r"cfg\.max_len: 3 B is not in token \(a different dimension\); convert with a named "
            r"function from kvunits.contracts",
        ),
        (
            PooledBlocks,
            750,
            "encoder_token",
            UnitTypeError,
            r"cfg\.max_len: 750 encoder_token is not in pooled_block \(a different dimension\); "
            r"convert with a named function from kvunits.contracts",
        ),
        (
            Bytes,
            1.5,
            "byte",
            UnitValueError,
            r"cfg\.max_len: 1\.5 byte is not a whole number of byte",
        ),
        (Bytes, -1, "byte", UnitValueError, r"cfg\.max_len: -1 byte is negative"),
        (
            Bytes,
            2**63,
            "byte",
            UnitValueError,
            r"cfg\.max_len: 9223372036854775808 byte is 9223372036854775808 byte, larger than "
            r"2\*\*63 - 1",
        ),
    ],
)
def test_from_pint_rejects(
    cls: type[IntQuantity], magnitude: float, unit: str, exc: type[UnitError], message: str
) -> None:
    quantity = kvunits.contracts.ureg.Quantity(magnitude, unit)
    info = _raises(exc, message, lambda: cls.from_pint(quantity, field="cfg.max_len"))
    assert isinstance(info.value, UnitError) and info.value.field == "cfg.max_len"


def test_from_pint_rejects_non_quantity() -> None:
    _raises(
        UnitTypeError,
        r"expected a pint quantity in byte, got 3 \(a bare int, no unit\)",
        lambda: Bytes.from_pint(3),
    )


# -- parse_quantity ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("750 encoder_token", EncoderTokens(750)),
        ("750 encoder_tokens", EncoderTokens(750)),
        ("  750   encoder_token ", EncoderTokens(750)),
        ("750encoder_token", EncoderTokens(750)),
        ("750 encoder_tok", EncoderTokens(750)),
        ("189 pooled_blocks", PooledBlocks(189)),
        ("189 pooled_slot", PooledBlocks(189)),
        ("1 token", Tokens(1)),
        ("2 tokens", Tokens(2)),
        ("2 tok", Tokens(2)),
        ("1_000 tokens", Tokens(1000)),
        ("13 cache_blocks", CacheBlocks(13)),
        ("13 pages", CacheBlocks(13)),
        ("0 byte", Bytes(0)),
        ("5 bytes", Bytes(5)),
        ("1 B", Bytes(1)),
        ("1 KiB", Bytes(1024)),
        ("3 MiB", Bytes(3 * 2**20)),
        ("40 GiB", Bytes(42949672960)),
        ("2 TiB", Bytes(2 * 2**40)),
        ("1 kB", Bytes(1000)),
        ("7 MB", Bytes(7_000_000)),
        ("80 GB", Bytes(80_000_000_000)),
        ("1 TB", Bytes(10**12)),
        ("1 kilobyte", Bytes(1000)),
        ("9223372036854775807 byte", Bytes(2**63 - 1)),
        ("8388607 TiB", Bytes(8388607 * 2**40)),
    ],
)
def test_parse_accepts(text: str, expected: Any) -> None:
    got = parse_quantity(text, type(expected))
    assert type(got) is type(expected) and got == expected


def test_parse_bare_number_names_the_unit() -> None:
    _raises(
        UnitTypeError,
        r"model\.sliding_window: '750' has no unit; write it with one, e\.g\. '750 encoder_token'",
        lambda: parse_quantity("750", EncoderTokens, field="model.sliding_window"),
    )
    info = _raises(
        UnitTypeError,
        r"model\.sliding_window: 750 has no unit; write it as \"750 encoder_token\"",
        lambda: parse_quantity(750, EncoderTokens, field="model.sliding_window"),  # type: ignore[arg-type]
    )
    assert isinstance(info.value, UnitTypeError)
    assert (info.value.field, info.value.expected) == ("model.sliding_window", "encoder_token")
    _raises(
        UnitTypeError,
        r"'16' has no unit; write it with one, e\.g\. '16 pooled_block'",
        lambda: parse_quantity("16", PooledBlocks),
    )


@pytest.mark.parametrize(
    ("text", "kind", "message"),
    [
        (
            "5 kiloencoder_token",
            EncoderTokens,
            r"unknown unit 'kiloencoder_token'; kvunits knows encoder_token, pooled_block, token, "
            r"cache_block and byte \(B, KiB, MiB, GiB, TiB, kB, MB, GB, TB\)",
        ),
        ("1 kiB", Bytes, r"unknown unit 'kiB'; .*"),
        ("1 meter", Bytes, r"unknown unit 'meter'; .*"),
        (
            "750 encoder_token",
            PooledBlocks,
            r"750 encoder_token is not in pooled_block \(a different dimension\); convert with a "
            r"named function from kvunits.contracts",
        ),
        ("40 GiB", Tokens, r"40 GiB is not in token \(a different dimension\); .*"),
    ],
)
def test_parse_rejects_units(text: str, kind: type[Any], message: str) -> None:
    _raises(UnitTypeError, message, lambda: parse_quantity(text, kind))


@pytest.mark.parametrize("value", [None, b"750 token", True, 7.5])
def test_parse_rejects_non_text(value: Any) -> None:
    _raises(
        UnitTypeError,
        r"expected a string such as '750 encoder_token', got .*",
        lambda: parse_quantity(value, Tokens),
    )


HOSTILE = [
    "__import__('os')",
    "__import__('os').system('true') byte",
    "1e9 byte",
    "1E3 token",
    "750 encoder_token * 2",
    "750 * encoder_token",
    "10**100 byte",
    "2**63 byte",
    "1/2 byte",
    "0.5 KiB",
    "-1 token",
    "+1 token",
    "0x10 byte",
    "1 token token",
    "1 encoder_token / pooled_block",
    "(1) token",
    "1 __class__",
    "1 byte\x00",
    "٧٥٠ token",  # Arabic-Indic digits: str.isdigit() says yes, the grammar must say no
    "７５０ token",  # fullwidth digits
    "²  byte",
    "",
    "   ",
    "9" * 10_000 + " byte",
    "1 " + "a" * 1_000_000,
    "(" * 100_000,
    "1" + "_" * 100_000 + " byte",
    "1 " + "token " * 100_000,
]


@pytest.mark.parametrize("text", HOSTILE, ids=lambda t: repr(t[:24]))
def test_parse_rejects_hostile_text_quickly(text: str) -> None:
    kind: type[Any] = Bytes if "byte" in text or "B" in text else Tokens
    parse_quantity("1 byte", Bytes)  # the first call builds the registry; time only the parse
    start = time.perf_counter()
    with pytest.raises(UnitError):
        parse_quantity(text, kind)
    # A strict grammar answers in microseconds; pint's evaluator or a backtracking regex
    # would take far longer on these inputs. The bound is loose so a loaded machine passes.
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("9223372036854775808 byte", r"9223372036854775808 is larger than 2\*\*63 - 1"),
        ("99999999999999999999 token", r"99999999999999999999 is larger than 2\*\*63 - 1"),
        # The number as written fits, the converted one does not.
        (
            "8388608 TiB",
            r"8388608 tebibyte is 9223372036854775808 byte, larger than 2\*\*63 - 1",
        ),
        (
            "9223372036854775807 KiB",
            r"9223372036854775807 kibibyte is 9444732965739290426368 byte, larger than 2\*\*63 - 1",
        ),
    ],
)
def test_parse_rejects_huge_magnitudes(text: str, message: str) -> None:
    kind: type[Any] = Tokens if "token" in text else Bytes
    _raises(UnitValueError, message, lambda: parse_quantity(text, kind))


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("-750 encoder_token", "a quantity is never negative"),
        ("12345678901234567890123456 byte", "the number is longer than any int64"),
        ("7.5 token", "the number must be a whole integer"),
        ("1e9 byte", "the number must be a whole integer"),
    ],
)
def test_a_text_off_the_grammar_says_why(text: str, reason: str) -> None:
    with pytest.raises(UnitTypeError, match=rf"is not '<integer> <unit>' .*: {reason}"):
        parse_quantity(text, Bytes)
