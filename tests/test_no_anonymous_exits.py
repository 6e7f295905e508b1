"""kvunits' own code takes no anonymous way out of its types, and relabels no unit.

A number leaves a quantity, a kind, a block size or a unit-tagged tensor only through
``numerical_value_in(unit)`` / ``tensor_in(unit)``, which name the unit; putting it into
another unit is then visible on one line: ``PooledBlocks(w.numerical_value_in(EncoderTokens))``.
This test reads the source of the packages and the benchmarks (the tests and the snippets may
show mistakes on purpose) and fails on such a relabelling, and on a read of the private
magnitude (``._value``, ``._n``, ``._ints``, ``._tensor``) outside the module that owns it.
The named conversions are the places where a unit becomes another; they compute the new
number, they never pass one unit's number through unchanged.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kvunits

REPO = Path(__file__).resolve().parents[1]
#: The installed packages (a checkout's links, or a wheel's files) by the directory names the
#: repository gives them, and the benchmarks beside the tests.
INSTALLED = Path(kvunits.__file__).parent
PACKAGES = ("contracts", "runtime", "kernels")

#: Classes that take a number (or tensor) and a unit: the unit is the class itself, or the
#: second argument.
_SELF_UNIT = {"EncoderTokens", "PooledBlocks", "Tokens", "CacheBlocks", "Bytes"}
_UNIT_ARGUMENT = {
    "Window",
    "Position",
    "Chunk",
    "BlockSize",
    "SeqLens",
    "QueryStartLoc",
    "SlotMapping",
}
_EXITS = {"numerical_value_in", "tensor_in"}
#: Private attributes and the modules that own them (where reading them is the implementation).
#: The allocator's stepper closures read a quantity's slot right after checking its class: the
#: hot path's one exception, priced by benchmarks/allocator.py.
_OWNERS = {
    "_value": {"contracts", "runtime/coordinator.py"},
    "_n": {"contracts"},
    "_ints": {"contracts/_views.py"},
    "_tensor": {"kernels/_typed.py"},
}


def _sources() -> list[tuple[str, Path]]:
    """Every module of kvunits and of the benchmarks, by its path in the repository."""
    found = [(f"kvunits/{p.name}", p) for p in INSTALLED.glob("*.py")]
    for package in PACKAGES:
        found += [
            (f"{package}/{p.relative_to(INSTALLED / package).as_posix()}", p)
            for p in (INSTALLED / package).rglob("*.py")
        ]
    found += [(p.relative_to(REPO).as_posix(), p) for p in (REPO / "benchmarks").rglob("*.py")]
    return sorted(found)


def _name(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def relabellings(tree: ast.AST) -> list[tuple[int, str]]:
    """Calls that wrap a number read in one unit into another unit, as (line, source)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        cls = _name(node.func)
        target: str | None
        if cls in _SELF_UNIT:
            target = cls
        elif cls in _UNIT_ARGUMENT and len(node.args) >= 2:
            target = _name(node.args[1])
        else:
            continue
        inner = node.args[0]
        if (
            isinstance(inner, ast.Call)
            and isinstance(inner.func, ast.Attribute)
            and inner.func.attr in _EXITS
            and inner.args
        ):
            source = _name(inner.args[0])
            if source is not None and source != target:
                found.append((node.lineno, f"{cls}(... {inner.func.attr}({source}) ...)"))
    return found


def private_reads(tree: ast.AST, where: str) -> list[tuple[int, str]]:
    """Reads of a private magnitude outside the module (or package) that owns it."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in _OWNERS:
            owners = _OWNERS[node.attr]
            if not any(where == o or where.startswith(o + "/") for o in owners):
                found.append((node.lineno, f".{node.attr}"))
    return found


def test_the_checks_find_what_they_look_for() -> None:
    bad = ast.parse(
        "a = PooledBlocks(w.numerical_value_in(EncoderTokens))\n"
        "b = BlockSize(bs.numerical_value_in(PooledBlocks), EncoderTokens)\n"
        "c = SeqLens(lens.tensor_in(PooledBlocks), EncoderTokens)\n"
        "d = PooledBlocks(w.numerical_value_in(PooledBlocks))\n"  # same unit: fine
        "e = spec._ints.block_size_slots\n"
    )
    assert [line for line, _ in relabellings(bad)] == [1, 2, 3]
    assert private_reads(bad, "runtime/x.py") == [(5, "._ints")]
    assert private_reads(bad, "contracts/_views.py") == []


def test_no_relabelling_and_no_private_reads_in_the_packages() -> None:
    problems = []
    sources = _sources()
    assert len(sources) > 30
    for where, path in sources:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, what in relabellings(tree) + private_reads(tree, where):
            problems.append(f"{where}:{line}: {what}")
    assert not problems, "\n".join(problems)
