"""The steps most calls are, written out for a coordinator's groups when it is built.

A decode step of a running request touches one slot per group (a speculative one, a few),
inside the block that holds the previous step's last slot, and evicts nothing: every
``block_size`` slots a group takes a block, and a sliding window drops one as often. Below
each group's ``BOUND`` (and, for a group that waits, below ``EVICT``; see
`kvunits.runtime._table`) such a step is integer arithmetic: the slot mapping is ``BASE ×
block_size + first slot``, and the step writes the request's rows and its step's positions.

This module writes those steps out once per coordinator, for any number of groups: the source
of each function is generated from the groups' constants (P, block size, whether slots have
rows, ``max_in_flight`` when it is under a block) with every group unrolled, and compiled.
So one generator serves every layout, each function reads as a hand-written step of that
layout would, and the per-group loop, its indexing and its branches on constants cost nothing.
Each function:

* claims the token (`kvunits.runtime._guard`), looks the request up, and checks every group;
* if all of them are below their bounds, writes the new fields on one line with the token's
  release (stores only: nothing can interrupt them halfway) and returns;
* otherwise hands the whole call, before changing anything, to the general path of
  `kvunits.runtime._core.CoordinatorCore`, which decides everything the fast function does
  not (blocks to take or evict, content to register, a caller's mistake to report).

The functions: ``step`` (slot mappings returned), ``advance`` (none), ``speculative`` (the last
positions marked as lookahead), ``rollback`` (rejected lookahead taken back when no block is
freed and the next step's block is the same), ``advance_all`` (one engine step's batch: the
requests below their bounds in C, the others through the general path, all in one commit).
The tests compare them with the general path call by call (`tests/runtime/test_fast_step.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import repeat
from operator import add, getitem, setitem
from types import CodeType
from typing import TYPE_CHECKING, Any, NamedTuple

from ._guard import commit, ops_of
from ._table import BASE, BOUND, EVICT, FIELDS, LENGTH, ROWS, SKIPPED, STEP

if TYPE_CHECKING:
    from ._core import CoordinatorCore


class FastFunctions(NamedTuple):
    """A core's generated functions (see the module docstring)."""

    step: Callable[[str, Sequence[int]], list[list[int]]]
    advance: Callable[[str, Sequence[int]], None]
    speculative: Callable[[str, Sequence[int], Sequence[int]], list[list[int]]]
    rollback: Callable[[str, Sequence[int]], None]
    advance_all: Callable[[Sequence[str], Sequence[int]], None]
    source: str


def make_functions(core: CoordinatorCore) -> FastFunctions:
    """Generate and compile ``core``'s fast functions."""
    source = _source(core)
    namespace: dict[str, Any] = {}
    exec(compiled(source, f"<kvunits fast steps: {len(core.names)} groups>"), namespace)
    made = namespace["make"](
        core.guard,
        core.table.offsets,
        core.table.st,
        core.specs,
        core.busy,
        core,
    )
    step, advance, speculative, rollback, advance_all = made
    return FastFunctions(step, advance, speculative, rollback, advance_all, source)


@lru_cache(maxsize=256)
def compiled(source: str, filename: str) -> CodeType:
    """The code of a generated source (layouts repeat: each is compiled once)."""
    return compile(source, filename, "exec")


def _source(core: CoordinatorCore) -> str:
    """The source of ``make(...)``, which returns the five functions of ``core``'s layout."""
    n = len(core.names)
    qs = ", ".join(f"q{g}" for g in range(n)) + ("," if n == 1 else "")
    ks = ", ".join(f"k{g}" for g in range(n)) + ("," if n == 1 else "")
    rs = ", ".join(f"r{g}" for g in range(n)) + ("," if n == 1 else "")
    lines = [
        "def make(guard, offsets, st, specs, busy, core):",
        "    owner, claim, drop, get = guard.owner, guard.claim, guard.drop, offsets.get",
        "    contend = guard.contend",
        "    concurrent, unknown = core._concurrent, core._unknown",
        "    general, general_rollback = core._general_step, core._general_rollback",
        "    general_all = core._general_all",
        "",
    ]

    def group_checks(g: int, mapping: bool, fallback: str, indent: str) -> list[str]:
        """Checks of group ``g``'s count ``q{g}`` (already an int), and its mapping ``m{g}``."""
        p, size = core._pool[g], core._block_size[g]
        rows, in_flight = core._has_rows[g], core._in_flight[g]
        k = g * FIELDS
        out = [f"c{g} = st[o + {k + ROWS}]"]
        if p == 1:
            first, end = f"c{g}", f"c{g} + q{g}"
            touched = f"q{g}"
        else:
            out.append(f"f{g} = c{g} // {p}")
            out.append(f"e{g} = (c{g} + q{g} + {p - 1}) // {p}")
            first, end = f"f{g}", f"e{g}"
            touched = f"e{g} - f{g}"
        out.append(f"if q{g}:")
        # A step within a block is within max_in_flight when that is a block or more; a
        # group without rows has no blocks to bound it.
        limit = f" or {touched} > {in_flight}" if in_flight < size or not rows else ""
        out.append(f"    if q{g} < 0 or {end} > st[o + {k + BOUND}]{limit}:")
        out.append(f"        {fallback}")
        if mapping:
            if rows:
                out.append(f"    s{g} = st[o + {k + BASE}] * {size} + {first}")
                out.append(
                    f"    m{g} = [s{g}] if {touched} == 1 else [*range(s{g}, s{g} + {touched})]"
                )
            else:
                out.append(f"    m{g} = []")
        evicted = f"c{g} // {p}" if p > 1 else f"c{g}"
        out.append(f"elif {evicted} >= st[o + {k + EVICT}]:")
        out.append(f"    {fallback}")
        if mapping:
            out.append("else:")
            out.append(f"    m{g} = []")
        return [indent + line for line in out]

    def stores(indent: str) -> str:
        parts = []
        for g in range(n):
            k = g * FIELDS
            parts.append(f"st[o + {k + ROWS}] = c{g} + q{g}")
            parts.append(f"st[o + {k + STEP}] = q{g}")
        return indent + "; ".join(parts)

    ints = " or ".join(f"type(q{g}) is not int" for g in range(n))

    def shape(name: str) -> str:
        # No nested ``try`` in a function that holds the token: in CPython 3.11 the line of a
        # nested ``try:`` is not covered by the outer handler (an interrupt there would lose
        # the token). Anything but a list or tuple of n goes to the general path, which reports.
        return f"len({name}) != {n}"

    for name, mapping in (("step", True), ("advance", False)):
        back = f"return general(me, request_id, o, num_new, None, {mapping})"
        lines += [
            f"    def {name}(request_id, num_new):",
            "        me = []",
            "        try:",
            "            if claim(0, me) is not me:",
            '                contend(me, concurrent, "allocate")',
            "            o = get(request_id) if type(request_id) is str else None",
            "            if o is None:",
            "                raise unknown(request_id)",
            "            if o in busy or (specs and o in specs):",
            f"                {back}",
            f"            if not (type(num_new) is tuple or type(num_new) is list) or {shape('num_new')}:",
            f"                {back}",
            f"            {qs} = num_new",
            f"            if {ints}:",
            f"                {back}",
        ]
        for g in range(n):
            lines += group_checks(g, mapping, back, "            ")
        out = "return [" + ", ".join(f"m{g}" for g in range(n)) + "]" if mapping else "return"
        lines += [
            stores("            ") + f"; del owner[0]; {out}  # the commit",
            "        except BaseException:",
            "            drop(me)",
            "            raise",
            "",
        ]
    back = "return general(me, request_id, o, num_new, lookahead, True)"
    kints = " or ".join(f"type(k{g}) is not int or not 0 <= k{g} <= q{g}" for g in range(n))
    lines += [
        "    def speculative(request_id, num_new, lookahead):",
        "        me = []",
        "        try:",
        "            if claim(0, me) is not me:",
        '                contend(me, concurrent, "allocate")',
        "            o = get(request_id) if type(request_id) is str else None",
        "            if o is None:",
        "                raise unknown(request_id)",
        "            if o in busy:",
        f"                {back}",
        f"            if not (type(num_new) is tuple or type(num_new) is list) or {shape('num_new')}:",
        f"                {back}",
        f"            if not (type(lookahead) is tuple or type(lookahead) is list) or {shape('lookahead')}:",
        f"                {back}",
        f"            {qs} = num_new",
        f"            {ks} = lookahead",
        f"            if {ints} or {kints}:",
        f"                {back}",
    ]
    for g in range(n):
        lines += group_checks(g, True, back, "            ")
    spec = "(" + ", ".join(f"k{g}" for g in range(n)) + ("," if n == 1 else "") + ")"
    lines += [
        stores("            ")
        + f"; specs[o] = {spec}; del owner[0]; return ["
        + ", ".join(f"m{g}" for g in range(n))
        + "]  # the commit",
        "        except BaseException:",
        "            drop(me)",
        "            raise",
        "",
    ]
    back = "return general_rollback(me, request_id, o, rejected)"
    lines += [
        "    def rollback(request_id, rejected):",
        "        me = []",
        "        try:",
        "            if claim(0, me) is not me:",
        '                contend(me, concurrent, "rollback")',
        "            o = get(request_id) if type(request_id) is str else None",
        "            if o is None:",
        "                raise unknown(request_id)",
        "            spec = specs.get(o)",
        "            if spec is None:",
        f"                {back}",
        f"            if not (type(rejected) is tuple or type(rejected) is list) or {shape('rejected')}:",
        f"                {back}",
        f"            {rs} = rejected",
        f"            {ks} = spec",
    ]
    commit_parts = []
    for g in range(n):
        k = g * FIELDS
        p, size = core._pool[g], core._block_size[g]
        kind = core._managers[g].kind
        lines += [
            f"            if type(r{g}) is not int or not 0 <= r{g} <= k{g}:",
            f"                {back}",
            f"            c{g} = st[o + {k + ROWS}]",
            f"            n{g} = c{g} - r{g}",
            f"            if r{g}:",
        ]
        slots = f"(n{g} + {p - 1}) // {p}" if p > 1 else f"n{g}"
        if kind == "state":
            keep = "1"
        elif kind == "cross_attention":
            keep = str(core._managers[g].table_length(0))
        else:
            keep = f"({slots} + {size - 1}) // {size}"
        lines += [
            f"                if {keep} < st[o + {k + SKIPPED}] + st[o + {k + LENGTH}]:",
            f"                    {back}",
        ]
        if core._has_rows[g]:
            lines += [
                f"                if n{g} // {p * size} != c{g} // {p * size}:",
                f"                    {back}",
            ]
        lines.append(f"            t{g} = st[o + {k + STEP}] - r{g}")
        commit_parts += [f"st[o + {k + ROWS}] = n{g}", f"st[o + {k + STEP}] = t{g}"]
    left = "(" + ", ".join(f"k{g} - r{g}" for g in range(n)) + ("," if n == 1 else "") + ")"
    lines += [
        "            "
        + "; ".join(commit_parts)
        + f"; specs[o] = {left}; del owner[0]; return  # the commit",
        "        except BaseException:",
        "            drop(me)",
        "            raise",
        "",
    ]
    lines += [
        "    def advance_all(request_ids, num_new):",
        "        me = []",
        "        try:",
        "            if claim(0, me) is not me:",
        '                contend(me, concurrent, "allocate")',
        f"            if not (type(num_new) is tuple or type(num_new) is list) or {shape('num_new')}:",
        "                return general_all(me, request_ids, num_new, [], [])",
        f"            {qs} = num_new",
        f"            if {ints} or " + " or ".join(f"q{g} < 0" for g in range(n)) + ":",
        "                return general_all(me, request_ids, num_new, [], [])",
        "            fast, slow = [], []",
        "            for request_id in request_ids:",
        "                o = get(request_id) if type(request_id) is str else None",
        "                if o is None:",
        "                    raise unknown(request_id)",
        "                if o in busy or (specs and o in specs):",
        "                    slow.append((request_id, o))",
        "                    continue",
    ]
    for g in range(n):
        lines += group_checks(
            g, False, "slow.append((request_id, o)); continue", "                "
        )
    lines += [
        "                fast.append(o)",
        "            if slow or len(set(request_ids)) != len(request_ids):",
        "                return general_all(me, request_ids, num_new, fast, slow)",
        "            ops = []",
    ]
    for g in range(n):
        k = g * FIELDS
        lines += [
            f"            at = list(map(add, fast, repeat({k + ROWS})))",
            f"            ops.append((commit, map(setitem, repeat(st), at, "
            f"map(add, map(getitem, repeat(st), at), repeat(q{g})))))",
            f"            ops.append((commit, map(setitem, repeat(st), map(add, fast, "
            f"repeat({k + STEP})), repeat(q{g}))))",
        ]
    lines += [
        "            commit(ops_of(ops)); del owner[0]; return  # the commit",
        "        except BaseException:",
        "            drop(me)",
        "            raise",
        "",
        "    return step, advance, speculative, rollback, advance_all",
        "",
    ]
    header = (
        "from itertools import repeat\n"
        "from operator import add, getitem, setitem\n"
        "from kvunits.runtime._guard import commit, ops_of\n\n"
    )
    return header + "\n".join(lines)


# The names the generated source imports (kept referenced for linters).
_USED = (repeat, add, getitem, setitem, commit, ops_of)
