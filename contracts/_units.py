"""The unit table: every spelling of a kvunits unit, its dimension and factor, without pint.

Reading text (``"750 encoder_token"``, ``"40 GiB"``) needs only the unit names and their
factors, so the table serves them from the registry's own definitions file, ``units.txt``,
and `kvunits.contracts.ureg` (pint) is built only for pint quantities a caller hands in. The table
reads the subset of pint's definition syntax the file uses:

* ``name = [dimension] = symbol = alias …``: the base unit of a dimension;
* ``name = <integer> * other = symbol = alias …``: a multiple of a unit already defined;

with ``_`` for "no symbol" (a quantity then prints with its name, as pint prints it).
Spellings are resolved as pint's registry resolves them (case-sensitive, no prefixes): a
name, symbol or alias as written, or, if it is none, one of at least two characters followed
by ``s`` (pint's plural rule: ``encoder_tokens``, ``KiBs``; not ``Bs``). Any other line is
refused when the table is built, so the file cannot gain a definition this table would read
otherwise than pint does. ``tests/contracts/test_unit_table.py`` checks that the table and
pint accept the same spellings, resolve each to the same unit and factor, and print a
quantity alike.

Example:
    >>> gib = unit_named("GiB")
    >>> gib.name, gib.dimension, gib.factor, gib.short(40), gib.long(40)
    ('gibibyte', '[memory]', 1073741824, '40 GiB', '40 gibibyte')
"""

from __future__ import annotations

import os
import re
from typing import Final, final

_NAME: Final = re.compile(r"[A-Za-z_]+")
#: The reference of a definition: a dimension (a base unit), or a multiple of a unit above.
_REFERENCE: Final = re.compile(
    r"\[(?P<dimension>[a-z_]+)\]|(?P<factor>[1-9][0-9]*) *\* *(?P<of>[A-Za-z_]+)"
)


@final
class UnitInfo:
    """One unit of the table.

    Attributes:
        name: its canonical name, as pint names it (``"gibibyte"``).
        symbol: how pint's short form (``f"{q:~}"``) writes it: the symbol, else the name.
        dimension: its dimension (``"[memory]"``); each base unit is its own dimension.
        factor: how many of the dimension's base unit one of it is (1 for a base unit).
    """

    __slots__ = ("dimension", "factor", "name", "symbol")

    def __init__(self, name: str, symbol: str, dimension: str, factor: int) -> None:
        self.name = name
        self.symbol = symbol
        self.dimension = dimension
        self.factor = factor

    def long(self, magnitude: int) -> str:
        """A quantity of this unit as ``str()`` of a pint quantity writes it: ``40 gibibyte``."""
        return f"{magnitude} {self.name}"

    def short(self, magnitude: int) -> str:
        """A quantity of this unit as pint's ``~`` format writes it: ``40 GiB``."""
        return f"{magnitude} {self.symbol}"

    def __repr__(self) -> str:
        return f"UnitInfo({self.name!r}, {self.dimension}, factor={self.factor})"


def read_definitions(text: str) -> dict[str, UnitInfo]:
    """The table of a definitions file: every spelling pint accepts, to its unit.

    Raises:
        ValueError: a line the table cannot read as pint does (another form of definition, a
            unit defined twice, a multiple of an unknown unit).
    """
    units: dict[str, UnitInfo] = {}
    spellings: dict[str, UnitInfo] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.partition("#")[0].strip()
        if not line:
            continue
        name, *names = (part.strip() for part in line.split("="))
        match = _REFERENCE.fullmatch(names.pop(0)) if names else None
        if match is None or not all(_NAME.fullmatch(n) for n in (name, *names)):
            raise ValueError(f"units.txt:{number}: {line!r} is not a definition the table reads")
        if match["dimension"] is not None:
            dimension, factor = f"[{match['dimension']}]", 1
        else:
            base = units.get(match["of"])
            if base is None:
                raise ValueError(f"units.txt:{number}: {match['of']!r} is not defined above")
            dimension, factor = base.dimension, int(match["factor"]) * base.factor
        symbol, *aliases = names or ["_"]
        unit = UnitInfo(name, name if symbol == "_" else symbol, dimension, factor)
        units[name] = unit
        for spelling in (name, *([] if symbol == "_" else [symbol]), *aliases):
            if spelling in spellings:
                raise ValueError(f"units.txt:{number}: {spelling!r} is defined twice")
            spellings[spelling] = unit
    plurals = {
        f"{spelling}s": unit
        for spelling, unit in spellings.items()
        if len(spelling) > 1 and f"{spelling}s" not in spellings
    }
    return {**spellings, **plurals}


def _read_table() -> dict[str, UnitInfo]:
    try:  # beside this module (importlib.resources, and the tempfile it imports, cost more)
        with open(os.path.join(os.path.dirname(__file__), "units.txt"), encoding="utf-8") as f:
            text = f.read()
    except OSError:  # an install that is not a directory (a zip): read it as package data
        from importlib import resources

        text = resources.files(__package__).joinpath("units.txt").read_text(encoding="utf-8")
    return read_definitions(text)


_TABLE: dict[str, UnitInfo] | None = None


def unit_table() -> dict[str, UnitInfo]:
    """Every spelling of the kvunits units (names, symbols, aliases, plurals), to its unit."""
    global _TABLE
    if _TABLE is None:
        _TABLE = _read_table()
    return _TABLE


def unit_named(spelling: str) -> UnitInfo | None:
    """The unit a spelling names (``"GiB"``, ``"encoder_tokens"``), or ``None``."""
    return (_TABLE if _TABLE is not None else unit_table()).get(spelling)
