"""The unit table (``kvunits.contracts._units``) against pint: text is read without pint, so the
table must accept exactly the spellings pint's registry accepts from ``units.txt``, resolve each to
the same unit, dimension and factor, and print a quantity as pint prints it; and the text path
of a quantity field must end where the pint path ends (the same value, or the same error)."""

from __future__ import annotations

import itertools
import re
import string
from typing import Any

import pint
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvunits.contracts
from kvunits.contracts import Bytes, EncoderTokens, IntQuantity, PooledBlocks, Tokens, UnitError
from kvunits.contracts._quantity import (
    _coerce_strictly,
    _from_pint,
    coerce_quantity,
    read_text_quantity,
)
from kvunits.contracts._text import parse_quantity_text
from kvunits.contracts._units import read_definitions, unit_named, unit_table
from kvunits.contracts.internal import QUANTITY_CLASSES

from ..examples import examples

ureg = kvunits.contracts.ureg


def _pint_unit(spelling: str) -> Any:
    """The unit pint resolves ``spelling`` to, or None where it refuses it (kvunits refuses a
    dimensionless unit too: pint knows "dimensionless" in every registry)."""
    try:
        unit = ureg.Unit(spelling)
    except (pint.UndefinedUnitError, pint.DefinitionSyntaxError, AttributeError, ValueError):
        return None
    return None if unit.dimensionless else unit


def _variants(name: str) -> set[str]:
    """Spellings near a unit name: plurals, cases, prefixes pint could know, truncations."""
    return {
        name,
        f"{name}s",
        f"{name}es",
        f"{name}ss",
        f"{name}_",
        f"_{name}",
        name.lower(),
        name.upper(),
        name.capitalize(),
        name[:-1],
        name[1:],
        f"k{name}",
        f"Ki{name}",
        f"kilo{name}",
        f"{name}{name}",
    }


#: Every spelling of the table and of pint's registry, and the spellings near each, and the
#: words pint's parser treats specially.
CANDIDATES = sorted(
    set(itertools.chain.from_iterable(_variants(n) for n in {*ureg._units, *unit_table()}))
    | {"dimensionless", "dimensionlesss", "squared", "cubed", "per", "pi", "inf", "nan", "e"}
    | {"s", "_", "Bs", "percent", "meter", "delta_byte", "kiloencoder_token", "None", "E"}
)


def _base(unit: Any) -> str:
    """The base unit of a pint unit's dimension, as the table names it."""
    (dimension,) = dict(unit.dimensionality)
    return next(i.name for i in unit_table().values() if i.dimension == dimension and i.factor == 1)


@pytest.mark.parametrize("spelling", CANDIDATES)
def test_the_table_accepts_what_pint_accepts(spelling: str) -> None:
    pint_unit, info = _pint_unit(spelling), unit_named(spelling)
    assert (info is not None) == (pint_unit is not None), (spelling, info, pint_unit)
    if info is None:
        return
    assert info.name == str(pint_unit)
    assert info.dimension == str(pint_unit.dimensionality)
    assert ureg.Quantity(1, pint_unit).to(_base(pint_unit)).magnitude == info.factor
    for magnitude in (0, 1, 750, 2**63 - 1, 2**70):
        quantity = ureg.Quantity(magnitude, pint_unit)
        assert info.long(magnitude) == str(quantity)
        assert info.short(magnitude) == f"{quantity:~}"


def test_every_spelling_pint_knows_is_in_the_table() -> None:
    # pint's own table of names, symbols and aliases, and the plurals its rule forms.
    known = {n for n in ureg._units}
    plurals = {f"{n}s" for n in known if len(n) > 1}
    assert set(unit_table()) == known | plurals
    # Each quantity class counts in a base unit of the table (the text path converts to it).
    for cls in QUANTITY_CLASSES:
        info = unit_named(cls.unit)
        assert info is not None and info.name == cls.unit and info.factor == 1


@settings(max_examples=examples(300), deadline=None)
@given(st.text(alphabet=sorted(set("".join(unit_table())) | {"s", "_", "x"}), max_size=16))
def test_any_spelling(spelling: str) -> None:
    pint_unit, info = _pint_unit(spelling) if spelling else None, unit_named(spelling)
    assert (info is not None) == (pint_unit is not None), spelling
    if info is not None:
        assert info.name == str(pint_unit)


@pytest.mark.parametrize(
    "line",
    [
        "kilo- = 1000 = k-",  # a prefix: the table knows none, and pint would apply it
        "@defaults",
        "half_byte = 0.5 * byte",  # not an integer factor
        "word = 2 * bit",  # a unit not defined above
        "byte = [memory]",  # defined twice
        "token_pair = 2 * token = tok",  # a spelling defined twice
        "offset_byte = [memory]; offset: 1",
    ],
)
def test_the_table_refuses_what_it_would_not_read_as_pint(line: str) -> None:
    text = "byte = [memory] = B\ntoken = [token] = _ = tok\n" + line
    with pytest.raises(ValueError, match=r"units\.txt:3: "):
        read_definitions(text)


# -- the text path against the pint path -------------------------------------------------------

#: Field types as the specs declare them: a length, a window's units, a memory setting.
FIELD_CLASSES: list[tuple[type[IntQuantity], ...]] = [
    (EncoderTokens,),
    (PooledBlocks,),
    (Tokens,),
    (Bytes,),
    (EncoderTokens, Tokens),
]

_NUMBERS = st.one_of(
    st.integers(min_value=0, max_value=2**64),
    st.sampled_from([0, 1, 750, 2**63 - 1, 2**63, 8388607, 8388608, 9223372036854775]),
).map(str)
_NAMES = st.one_of(st.sampled_from(sorted(unit_table())), st.sampled_from(CANDIDATES))


def _outcome(call: Any) -> tuple[str, object, object]:
    try:
        value = call()
    except UnitError as exc:
        return (type(exc).__name__, exc.message, (exc.field, exc.expected, exc.got))
    return ("ok", type(value), repr(value))


@settings(max_examples=examples(300), deadline=None)
@given(
    number=_NUMBERS,
    # A name the grammar reads whole after the number (a leading "_" would join the number).
    name=_NAMES.filter(lambda n: re.fullmatch(r"[A-Za-z][A-Za-z_]{0,31}", n) is not None),
    gap=st.sampled_from(["", " ", "\t", "  "]),
    classes=st.sampled_from(FIELD_CLASSES),
)
def test_text_and_pint_quantities_end_alike(
    number: str, name: str, gap: str, classes: tuple[type[IntQuantity], ...]
) -> None:
    """A text quantity and the pint quantity of the same number and unit give the same value,
    or the same error (message, field, expected, got)."""
    text = f"{number}{gap}{name}"
    by_text = _outcome(lambda: coerce_quantity(text, classes))
    if _pint_unit(name) is None or int(number) > 2**63 - 1:
        assert by_text[0] == "UnitTypeError" or "larger than 2**63 - 1" in str(by_text[1])
        return
    by_pint = _outcome(lambda: _from_pint(ureg.Quantity(int(number), name), classes))
    assert by_text == by_pint


_TEXTS = st.one_of(
    st.builds(
        lambda lead, num, gap, name, trail: f"{lead}{num}{gap}{name}{trail}",
        st.sampled_from(["", " ", "\n", "\u00a0"]),
        st.one_of(
            _NUMBERS, st.sampled_from(["1_000", "1,024", "1__0", "0x10", "-4", "1.5", "9" * 26])
        ),
        st.sampled_from(["", " ", "\t", " " * 70]),
        _NAMES,
        st.sampled_from(["", " ", "\t\n", "\u00a0"]),
    ),
    st.text(alphabet=string.printable, max_size=40),
)


@settings(max_examples=examples(400), deadline=None)
@given(text=_TEXTS, classes=st.sampled_from(FIELD_CLASSES))
def test_the_fast_path_reads_what_the_strict_path_reads(
    text: str, classes: tuple[type[IntQuantity], ...]
) -> None:
    """The validators' fast path (a cached unit look-up) gives the strict path's value for
    every text the strict path accepts, and leaves every other text to it (``None``)."""
    resolved: dict[str, Any] = {}
    fast = [read_text_quantity(text, classes, resolved) for _ in range(2)]  # cold, then cached
    strict = _outcome(lambda: _coerce_strictly(text, classes))
    if strict[0] == "ok":
        assert all(q is not None and _outcome(lambda q=q: q) == strict for q in fast)
    else:
        assert fast == [None, None]
        assert _outcome(lambda: coerce_quantity(text, classes)) == strict


def test_the_strict_path_names_the_problem() -> None:
    with pytest.raises(UnitError, match=r"^unknown unit 'dimensionless'; kvunits knows"):
        parse_quantity_text("3 dimensionless")
