"""The steps most calls are, written out for a coordinator's groups when it is built.

A decode step of a running request adds a position or a few per group, inside the block that
holds the previous step's last slot, and evicts nothing: every ``block_size`` slots a group
takes a block, and a sliding window drops one as often. Such a step needs neither the pools
nor another block: each group's ``SLACK`` (`kvunits.runtime._table`) says how many positions
it may add so, and the step is ``SLACK −= q`` (its slot mapping, when asked for, is ``BASE ×
block_size + first slot``).

This module writes those steps out once per coordinator, for any number of groups: the source
of each function is generated from the groups' constants (P, block size, whether slots have
rows, ``max_in_flight`` when it is under a block) with every group unrolled, and compiled.
So one generator serves every layout, each function reads as a hand-written step of that
layout would, and the per-group loop, its indexing and its branches on constants cost nothing.
Each function:

* claims the token (`kvunits.runtime._guard`), looks the request up, and checks every group;
* if every group's step fits its slack, writes the new fields on one line with the token's
  release (stores only: nothing can interrupt them halfway) and returns;
* otherwise hands the whole call, before changing anything, to the general path of
  `kvunits.runtime._core.CoordinatorCore`, which decides everything the fast function does
  not (blocks to take or evict, content to register, a caller's mistake to report).

The functions: ``step`` (slot mappings returned), ``advance`` (none), ``speculative`` (the last
positions marked as lookahead), ``rollback`` (rejected lookahead taken back when no block is
freed and the next step's block is the same), ``advance_all`` (one engine step's batch: the
requests within their slack in C, the others through the general path, all in one commit),
``content`` (a step and what its positions hold, `CoordinatorCore.advance_content`).
A step past some group's slack goes to ``cross`` and a rollback past it to ``uncross``, also
written out per layout: a block boundary crossed (one block taken per group, one evicted by a
window), or a block a rejected draft had taken given back, planned in a few lines per group
and committed at once (a speculative step crosses a block about one time in three; a table
segment without room moves to its slab's end); what they do not plan (a slab whose garbage
is due, a cached or shared block, content to register) goes to the core's boundary path,
then its general path.
Each comes twice: as the core's plain-int entry, which checks that its counts are ints in a
list or tuple of one per group, and for the typed layer (``*_typed``), whose entries pass a
tuple of ints they read from checked quantities. The tests compare them with the general path
call by call (`tests/runtime/test_fast_step.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from itertools import repeat
from operator import add, getitem, setitem, sub
from types import CodeType
from typing import Any, Final

from ._core import CoordinatorCore, FastFunctions
from ._guard import commit, ops_of
from ._table import (
    ANCHOR,
    BASE,
    CAPACITY,
    COLD,
    EVICT,
    HOT,
    LENGTH,
    MAXLEN,
    SKIPPED,
    SLACK,
    START,
    STEP,
)


def make_functions(core: CoordinatorCore) -> FastFunctions:
    """Generate and compile ``core``'s fast functions."""
    source = _source(core)
    namespace: dict[str, Any] = {}
    exec(compiled(source, f"<kvunits fast steps: {len(core.names)} groups>"), namespace)
    made = namespace["make"](
        core.guard,
        core.table.offsets,
        core.table.hot,
        core.table.st,
        core.specs,
        core,
    )
    return FastFunctions._make((*made, source))


@lru_cache(maxsize=256)
def compiled(source: str, filename: str) -> CodeType:
    """The code of a generated source (layouts repeat: each is compiled once)."""
    return compile(source, filename, "exec")


#: The kinds whose boundary steps and rollbacks are written out (`_cross`, `_uncross`): a table
#: of ``cdiv(slots, block_size)`` entries, ``reach`` a block's slots each; others go to the core.
_PLANNED: Final = ("full_attention", "sliding_window", "chunked_local")


def _pools(core: CoordinatorCore) -> tuple[dict[int, int], list[int]]:
    """The core's distinct pools: each pool's index by its id, and each index's first group."""
    pool_of: dict[int, int] = {}
    first_of: list[int] = []
    for g, pool in enumerate(core.pools):
        if id(pool) not in pool_of:
            pool_of[id(pool)] = len(first_of)
            first_of.append(g)
    return pool_of, first_of


def _cold(name: int, g: int) -> int:
    """The position of a cold field of group ``g`` after a request's cold offset."""
    return g * COLD + name - HOT


def _cross(core: CoordinatorCore) -> list[str]:
    """The source of ``cross(me, request_id, o, num_new, mapping, lookahead=None)``: a step
    past some group's slack, with the token held, planned in a few lines per group with the
    group's constants written in (`CoordinatorCore._plan_boundary`'s common case): each group
    within its slack, or at most one block taken at its table's end (into its segment's spare
    room, or the segment moved to its slab's end with room, as `RequestTable.segment_ops`
    does, unless the slab's garbage is `due`; not a stale queue entry; a cached one is evicted
    from the prefix cache, in a pool of one group, outside a batch) and one evicted at its
    front (not shared; a cached one stays cached, free); no content to register. Any other
    step goes, before anything changed, to `CoordinatorCore._boundary_step`, which decides it
    (or the general path)."""
    n = len(core.names)
    hw, cw = core.table.hot_width, core.table.cold_width
    comma = "," if n == 1 else ""
    back = "return boundary(me, request_id, o, num_new, mapping, lookahead)"
    pool_of, first_of = _pools(core)
    lines = [
        "    def cross(me, request_id, o, num_new, mapping, lookahead=None):",
        f"        if not (type(num_new) is tuple or type(num_new) is list) or len(num_new) != {n}:",
        f"            {back}",
        "        " + ", ".join(f"q{g}" for g in range(n)) + f"{comma} = num_new",
        "        if " + " or ".join(f"type(q{g}) is not int" for g in range(n)) + ":",
        f"            {back}",
        "        if extras:",
        "            extra = extras.get(o)",
        "            if extra is not None and extra.pending():",
        f"                {back}",
        f"        cb = o // {hw} * {cw}",
        "        ops = []",
        "        out = [] if mapping else None",
    ]
    for i in range(len(pool_of)):
        lines += [f"        f{i} = h{i} = -1", f"        ev{i} = []", f"        tk{i} = 0"]
    for g in range(n):
        p, size = core._pool[g], core._block_size[g]
        rows_of, in_flight = core._has_rows[g], core._in_flight[g]
        manager = core._managers[g]
        kind = manager.kind
        h = g * HOT
        c = f"cb + {_cold(ANCHOR, g) - ANCHOR}"  # group g's cold fields start (as st[c + NAME])
        i = pool_of[id(core.pools[g])]
        first = "rows" if p == 1 else f"rows // {p}"
        end = "rows + q" if p == 1 else f"(rows + q + {p - 1}) // {p}"
        out = [
            f"q = q{g}",
            f"anchor0, s = st[{c} + {ANCHOR}], hot[o + {h + SLACK}]",
            f"base0, length0 = st[{c} + {BASE}], st[{c} + {LENGTH}]",
            "rows = anchor0 - s",
            f"first, end = {first}, {end}",
            "touched = end - first if q else 0",
            f"if 0 <= q <= s and (s or q) and touched <= {in_flight}:",
            f"    ops.append((setitem, hot, slice(o + {h}, o + {h + HOT}), [s - q, q]))",
            "    if mapping:",
        ]
        if rows_of:
            out += [
                f"        base = base0 * {size}",
                "        out.append([*range(base + first, base + end)] if q else [])",
            ]
        else:
            out.append("        out.append([])")
        if not rows_of or kind not in _PLANNED:
            out += ["else:", f"    {back}"]
            lines += ["        " + line for line in out]
            continue
        out += [
            f"elif q < 0 or touched > {in_flight} or end > st[{c} + {MAXLEN}]:",
            f"    {back}",
            "else:",
            f"    skipped, length = st[{c} + {SKIPPED}], length0",
            f"    evict, start = st[{c} + {EVICT}], st[{c} + {START}]",
            f"    capacity, slab = st[{c} + {CAPACITY}], slabs[{g}]",
            "    skip, moved = skipped, None",
        ]
        if kind == "sliding_window":
            window = manager.sliding_window_slots  # type: ignore[attr-defined]
            out += [
                f"    if first >= evict and first > {window - 1}:",
                f"        skip = max((first - {window - 1}) // {size}, skipped)",
            ]
            evicting = f"min((skip + 1) * {size} + {window - 1}, never)"
        elif kind == "chunked_local":
            chunk = manager.chunk_slots  # type: ignore[attr-defined]
            out += [
                "    if first >= evict:",
                f"        skip = max(first // {chunk} * {chunk} // {size}, skipped)",
            ]
            evicting = f"min(((skip + 1) * {size} + {chunk - 1}) // {chunk} * {chunk}, never)"
        else:
            evicting = "never"
        out += [
            f"    want = (end + {size - 1}) // {size} - skipped - length",
            "    dropped = skip - skipped",
            "    if want > 1 or dropped > 1:",
            f"        {back}",
            f"    pool = pools[{g}]",
            "    if dropped:",
            "        block = slab[start]",
            "        if block in pool._shared:",
            f"            {back}",
            "        if block in pool._cached:  # its content stays in the queue",
            "            ops.append((pool._cached_free.add, block))",
            f"        ev{i}.append(block)",
            "    taken = 0",
            "    if want > 0:",
            f"        if f{i} < 0:",
            f"            f{i}, h{i} = pool._fresh, pool._head",
            f"        if f{i} < pool.num_blocks:",
            f"            taken = f{i}",
            f"            f{i} += 1",
            f"        elif h{i} < len(pool._queue):",
            f"            taken = pool._queue[h{i}]",
            *(
                [
                    "            if taken in pool._stale or taken in pool._cached:",
                    f"                {back}",
                ]
                # A pool of several groups (two takes may evict one key's blocks): the core's
                # plan keeps their lists.
                if sum(1 for other in core.pools if other is core.pools[g]) > 1
                else [
                    "            if taken in pool._stale:",
                    f"                {back}",
                    "            entry = pool._cached.get(taken)",
                    "            if entry is not None:  # evicted from the prefix cache",
                    "                cache_map, key = entry",
                    "                kept = [b for b in cache_map[key] if b != taken]",
                    "                ops.append((pool._cached.pop, taken))",
                    "                ops.append((pool._cached_free.discard, taken))",
                    "                ops.append((setitem, cache_map, key, kept) if kept "
                    "else (cache_map.pop, key))",
                ]
            ),
            f"            h{i} += 1",
            "        else:",
            f"            {back}",
            f"        tk{i} += 1",
            "        if length < capacity:",
            "            ops.append((setitem, slab, start + length, taken))",
            "        else:  # moved to the slab's end with room (garbage due: the core compacts)",
            "            tail = len(slab)",
            f"            if due(garbage[{g}] + capacity, tail):",
            f"                {back}",
            "            moved = slab[start + dropped : start + length]",
            "            moved.append(taken)",
            "            room = grown(len(moved), capacity, skip) - len(moved)",
            "            moved.extend(array('i', bytes(4 * room)))",
            "            ops.append((slab.extend, moved))",
            f"            ops.append((setitem, garbage, {g}, garbage[{g}] + capacity))",
            "    else:",
            "        want = 0",
            "    if mapping:",
            "        out.append(slots_across(slab, start, skipped, length, "
            f"{size}, first, end, taken) if q else [])",
            "    if dropped and moved is None:",
            f"        ops.append((setitem, garbage, {g}, garbage[{g}] + dropped))",
            "    if moved is None:",
            "        start, capacity = start + dropped, capacity - dropped",
            "    else:",
            "        start, capacity = tail, len(moved)",
            "    length += want - dropped",
            "    rows += q",
            "    if first >= evict:",
            f"        evict = {evicting}",
            f"    index = rows // {p * size}",
            "    base, anchor = base0, rows",
            "    if skip <= index < skip + length:",
            "        at = index - skip",
            "        block = slab[start + at] if moved is None else moved[at]",
            "        base = (taken if want and at == length - 1 else block) - index",
            f"        room = min((skip + length) * {size}, st[{c} + {MAXLEN}])",
            f"        anchor = max(min(room, evict, (index + 1) * {size}) * {p}, rows)",
            f"    ops.append((setitem, hot, slice(o + {h}, o + {h + HOT}), [anchor - rows, q]))",
            f"    ops.append((setitem, st, slice({c} + {ANCHOR}, {c} + {CAPACITY + 1}), "
            "array(typecode, (anchor, base, evict, skip, start, length, capacity))))",
        ]
        lines += ["        " + line for line in out]
    for i in range(len(pool_of)):
        g = first_of[i]
        lines += [
            f"        if f{i} >= 0 or ev{i}:",
            f"            pool = pools[{g}]",
            f"            if f{i} > pool._fresh:",
            f'                ops.append((setattr, pool, "_fresh", f{i}))',
            f"            if h{i} > pool._head:",
            f'                ops.append((setattr, pool, "_head", h{i}))',
            f"            if ev{i}:",
            f"                ops.append((pool._queue.extend, ev{i}))",
            f"            if tk{i} != len(ev{i}):",
            f"                used = pool._used + tk{i} - len(ev{i})",
            '                ops.append((setattr, pool, "_used", used))',
        ]
    lines += [
        "        if lookahead is not None:",
        "            ops.append((setitem, specs, o, tuple(lookahead)))",
        "        elif o in specs:",
        "            ops.append((specs.pop, o, None))",
        "        commit(ops_of(ops)); del owner[0]; return out  # the commit",
        "",
    ]
    return lines


def _uncross(core: CoordinatorCore) -> list[str]:
    """The source of ``uncross(me, request_id, o, rejected)``: a rollback past the fast
    function's reach, with the token held, planned in a few lines per group with its constants
    written in (`CoordinatorCore._boundary_rollback`'s common case): at most one block freed per
    group, into a pool without cached, stale or shared blocks, and the bound set again. Any
    other goes, before anything changed, to `CoordinatorCore._boundary_rollback`."""
    n = len(core.names)
    hw, cw = core.table.hot_width, core.table.cold_width
    back = "return boundary_rollback(me, request_id, o, rejected)"
    pool_of, first_of = _pools(core)
    lines = [
        "    def uncross(me, request_id, o, rejected):",
        "        spec = specs.get(o)",
        f"        if spec is None or not (type(rejected) is tuple or type(rejected) is list) "
        f"or len(rejected) != {n}:",
        f"            {back}",
        f"        cb = o // {hw} * {cw}",
        "        ops = []",
    ]
    for i in range(len(pool_of)):
        lines.append(f"        fr{i} = []")
    for g in range(n):
        p, size = core._pool[g], core._block_size[g]
        kind = core._managers[g].kind
        h = g * HOT
        c = f"cb + {_cold(ANCHOR, g) - ANCHOR}"
        i = pool_of[id(core.pools[g])]
        out = [
            f"r = rejected[{g}]",
            f"if type(r) is not int or not 0 <= r <= spec[{g}]:",
            f"    {back}",
            "if r:",
        ]
        if not core._has_rows[g] or kind not in _PLANNED:
            lines += ["        " + line for line in [*out, f"    {back}"]]
            continue
        slots = "rows" if p == 1 else f"(rows + {p - 1}) // {p}"
        out += [
            f"    pool = pools[{g}]",
            "    if pool._cached or pool._num_stale or pool._shared:",
            f"        {back}",
            f"    rows = st[{c} + {ANCHOR}] - hot[o + {h + SLACK}] - r",
            f"    skipped, length = st[{c} + {SKIPPED}], st[{c} + {LENGTH}]",
            f"    start, slab = st[{c} + {START}], slabs[{g}]",
            f"    cut = ({slots} + {size - 1}) // {size} - skipped",
            "    if cut < 0 or length - cut > 1:",
            f"        {back}",
            "    if cut < length:",
            f"        fr{i}.append(slab[start + cut])",
            f"        ops.append((setitem, st, {c} + {LENGTH}, cut))",
            f"    index = rows // {p * size}",
            f"    base, anchor = st[{c} + {BASE}], rows",
            "    if skipped <= index < skipped + cut:",
            "        base = slab[start + index - skipped] - index",
            f"        room = min((skipped + cut) * {size}, st[{c} + {MAXLEN}])",
            f"        anchor = max(min(room, st[{c} + {EVICT}], (index + 1) * {size}) * {p}, rows)",
            f"    ops.append((setitem, hot, slice(o + {h}, o + {h + HOT}), "
            f"[anchor - rows, hot[o + {h + STEP}] - r]))",
            f"    ops.append((setitem, st, slice({c} + {ANCHOR}, {c} + {BASE + 1}), "
            "array(typecode, (anchor, base))))",
        ]
        lines += ["        " + line for line in out]
    for i in range(len(pool_of)):
        g = first_of[i]
        lines += [
            f"        if fr{i}:",
            f"            pool = pools[{g}]",
            f"            ops.append((pool._queue.extend, fr{i}))",
            f'            ops.append((setattr, pool, "_used", pool._used - len(fr{i})))',
        ]
    comma = "," if n == 1 else ""
    left = "(" + ", ".join(f"spec[{g}] - rejected[{g}]" for g in range(n)) + comma + ")"
    lines += [
        f"        ops.append((setitem, specs, o, {left}))",
        "        commit(ops_of(ops)); del owner[0]; return  # the commit",
        "",
    ]
    return lines


def _unrolled(core: CoordinatorCore, back: str, indent: str, typed: bool = False) -> list[str]:
    """The rollback of ``r{g}`` positions per group (what the latest step left speculative:
    ``j{g}``) before a step of ``q{g}`` when it frees no block (it keeps those the step takes
    again, `CoordinatorCore._kept`) and the step ends in the block of the bound it had: then
    it only gives the slack back (``s{g}``, read here, is raised by it). Any other goes to
    ``back``. With ``typed``, the ``r{g}`` are ints (the typed layer's) and ``c`` is the
    request's cold offset."""
    hw, cw = core.table.hot_width, core.table.cold_width
    cold = "c" if typed else f"o // {hw} * {cw}"
    integer = "" if typed else "type(r{g}) is not int or "
    out = []
    for g in range(len(core.names)):
        h = g * HOT
        p, size = core._pool[g], core._block_size[g]
        kind = core._managers[g].kind
        slots = f"(n{g} + q{g} + {p - 1}) // {p}" if p > 1 else f"n{g} + q{g}"
        if kind == "state":
            keep = "1"
        elif kind == "cross_attention":
            keep = str(core._managers[g].table_length(0))
        else:
            keep = f"({slots} + {size - 1}) // {size}"
        entries = f"st[{cold} + {_cold(SKIPPED, g)}] + st[{cold} + {_cold(LENGTH, g)}]"
        out += [
            f"if {integer.format(g=g)}not 0 <= r{g} <= j{g}:",
            f"    {back}",
            f"s{g} = hot[o + {h + SLACK}]",
            f"if r{g}:",
            f"    if not s{g}:",
            f"        {back}",
            f"    n{g} = st[{cold} + {_cold(ANCHOR, g)}] - s{g} - r{g}",
            f"    if {keep} < {entries}:",
            f"        {back}",
        ]
        if core._has_rows[g]:
            # The step's end (the next step's first slot) in the block of the bound: BASE
            # and ANCHOR stay (a rollback back across a block whose block the step refills).
            out += [
                f"    if (n{g} + q{g}) // {p * size} < (n{g} + r{g}) // {p * size}:",
                f"        {back}",
            ]
        out.append(f"    s{g} += r{g}")
    return [indent + line for line in out]


def _crossing(core: CoordinatorCore, fail: str, indent: str) -> list[str]:
    """A rollback of ``r{g}`` (of ``j{g}`` left speculative) and a step of ``q{g}`` per group
    past the stores' reach, planned in plain locals for the request at offset ``o`` (cold
    fields at ``c``): per group its fields recomputed after the step as the general path
    does (`CoordinatorCore._plan_rollback` then `_plan_step`) when the common case holds: the
    blocks the rolled-back positions used kept for the step (`CoordinatorCore._kept`), at
    most one block taken at the table's end into the segment's spare room (the pool's next
    fresh id, or the queue's head when it is neither stale nor cached) and one evicted by a
    window at its front (neither shared nor cached); content to register goes elsewhere. The
    pools are read through ``f{i}``/``h{i}`` (fresh, head: the request's copies of the
    batch's). Any other runs ``fail`` (nothing written). Leaves per group ``v{g}`` (the new
    slack), ``w{g}`` (the cold fields from ``ANCHOR`` to ``CAPACITY``, None: unchanged),
    ``dr{g}`` (whether a block is evicted: ``d{g}``) and ``t{g}`` (the block taken, 0: none)
    at ``x{g}`` (its slab index)."""
    n = len(core.names)
    pool_of, _ = _pools(core)
    out = [
        "if extras:",
        "    extra = extras.get(o)",
        "    if extra is not None and extra.pending():",
        f"        {fail}",
    ]
    for g in range(n):
        p, size = core._pool[g], core._block_size[g]
        in_flight, manager = core._in_flight[g], core._managers[g]
        kind, h, i = manager.kind, g * HOT, pool_of[id(core.pools[g])]
        c = f"c + {_cold(ANCHOR, g) - ANCHOR}"
        first = "rows // 1" if p == 1 else f"rows // {p}"
        end = "rows + q" if p == 1 else f"(rows + q + {p - 1}) // {p}"
        out += [
            f"r, q = r{g}, q{g}",
            f"if type(r) is not int or not 0 <= r <= j{g}:",
            f"    {fail}",
            f"anchor, s = st[{c} + {ANCHOR}], hot[o + {h + SLACK}]",
            "rows = anchor - s - r",
            f"first, end = {first}, {end}",
            "touched = end - first if q else 0",
            f"dr{g} = t{g} = 0",
        ]
        if not core._has_rows[g] or kind not in _PLANNED:
            out += [
                f"if r or not (0 <= q <= s and (s or q) and touched <= {in_flight}):",
                f"    {fail}",
                f"v{g}, w{g} = s - q, None",
            ]
            continue
        # Within the slack the rollback leaves, and no block to give back (`_unrolled`):
        # only the slack changes.
        pb = p * size
        keep = f"(end + {size - 1}) // {size}"
        entries = f"st[{c} + {SKIPPED}] + st[{c} + {LENGTH}]"
        out += [
            "sr = s + r",
            f"if 0 <= q <= sr and (sr or q) and touched <= {in_flight} and (not r or s and "
            f"{keep} >= {entries} and (rows + q) // {pb} >= (rows + r) // {pb}):",
            f"    v{g}, w{g} = sr - q, None",
            "else:",
        ]
        at = len(out)
        out += [
            f"if touched > {in_flight} or end > st[{c} + {MAXLEN}]:",
            f"    {fail}",
            f"skipped, evict, start = st[{c} + {SKIPPED}], st[{c} + {EVICT}], st[{c} + {START}]",
            f"length, capacity, base = st[{c} + {LENGTH}], st[{c} + {CAPACITY}], st[{c} + {BASE}]",
            "skip = skipped",
        ]
        if kind == "sliding_window":
            window = manager.sliding_window_slots  # type: ignore[attr-defined]
            out += [
                f"if first >= evict and first > {window - 1}:",
                f"    skip = max((first - {window - 1}) // {size}, skipped)",
            ]
            evicting = f"min((skip + 1) * {size} + {window - 1}, never)"
        elif kind == "chunked_local":
            chunk = manager.chunk_slots  # type: ignore[attr-defined]
            out += [
                "if first >= evict:",
                f"    skip = max(first // {chunk} * {chunk} // {size}, skipped)",
            ]
            evicting = f"min(((skip + 1) * {size} + {chunk - 1}) // {chunk} * {chunk}, never)"
        else:
            evicting = "never"
        out += [
            "dropped = skip - skipped",
            f"want = (end + {size - 1}) // {size} - skipped - length",
            # Fewer blocks than held (a rollback past the step's end) or a segment to move:
            # the core's boundary path.
            "if want < 0 or want > 1 or dropped > 1 or want and length + want > capacity:",
            f"    {fail}",
            f"pool, slab = pools[{g}], slabs[{g}]",
            f"dr{g} = dropped",
            "if dropped:",
            f"    d{g} = slab[start]",
            f"    if d{g} in pool._shared or d{g} in pool._cached:",
            f"        {fail}",
            "if want:",
            f"    x{g} = start + length",
            f"    if f{i} < pool.num_blocks:",
            f"        t{g} = f{i}",
            f"        f{i} += 1",
            f"    elif h{i} < len(pool._queue):",
            f"        t{g} = pool._queue[h{i}]",
            f"        if t{g} in pool._stale or t{g} in pool._cached:",
            f"            {fail}",
            f"        h{i} += 1",
            "    else:",
            f"        {fail}",
            "start, capacity = start + dropped, capacity - dropped",
            "length += want - dropped",
            "rows += q",
            "if first >= evict:",
            f"    evict = {evicting}",
            f"index = rows // {p * size}",
            "anchor = rows",
            # BASE is read only within the slack: where the step's end has no block yet
            # (no slack), it stays.
            "if skip <= index < skip + length:",
            "    at = index - skip",
            f"    base = (t{g} if want and at == length - 1 else slab[start + at]) - index",
            f"    room = min((skip + length) * {size}, st[{c} + {MAXLEN}])",
            f"    anchor = max(min(room, evict, (index + 1) * {size}) * {p}, rows)",
            f"v{g} = anchor - rows",
            f"w{g} = (anchor, base, evict, skip, start, length, capacity)",
        ]
        out[at:] = ["    " + line for line in out[at:]]
    return [indent + line for line in out]


def _crossed(core: CoordinatorCore, indent: str, flat: bool = False) -> list[str]:
    """What `_crossing` planned, added to ``ops`` (the pools' part to ``ev{i}``/``tl{i}``,
    evicted and taken blocks, and ``gb{g}``, the slabs' garbage); with ``flat``, the hot
    fields to the batch's stores (``push``, ``push{g}``) instead."""
    n = len(core.names)
    pool_of, _ = _pools(core)
    out = []
    for g in range(n):
        i = pool_of[id(core.pools[g])]
        c = _cold(ANCHOR, g)
        out += [
            f"if w{g} is not None:",
            f"    ops.append((setitem, st, slice(c + {c}, c + {c + CAPACITY - ANCHOR + 1}), "
            f"array(typecode, w{g})))",
            f"    if dr{g}:",
            f"        ev{i}.append(d{g})",
            f"        gb{g} += 1",
            f"    if t{g}:",
            f"        tl{i}.append(t{g})",
            f"        ops.append((setitem, slabs[{g}], x{g}, t{g}))",
        ]
    if flat:
        out.append("push(o); " + "; ".join(f"push{g}(v{g})" for g in range(n)))
    else:
        values = ", ".join(f"v{g}, q{g}" for g in range(n))
        out.append(f"ops.append((setitem, hot, slice(o, o + {n * HOT}), [{values}]))")
    return [indent + line for line in out]


def _pooled(core: CoordinatorCore, indent: str) -> list[str]:
    """The pools' and slabs' part of what `_crossed` added (as `cross` writes it)."""
    _, first_of = _pools(core)
    out = []
    for i, g in enumerate(first_of):
        out += [
            f"pool = pools[{g}]",
            f"if f{i} > pool._fresh:",
            f'    ops.append((setattr, pool, "_fresh", f{i}))',
            f"if h{i} > pool._head:",
            f'    ops.append((setattr, pool, "_head", h{i}))',
            f"if ev{i}:",
            f"    ops.append((pool._queue.extend, ev{i}))",
            f"if len(tl{i}) != len(ev{i}):",
            f'    ops.append((setattr, pool, "_used", pool._used + len(tl{i}) - len(ev{i})))',
        ]
    for g in range(len(core.names)):
        out += [f"if gb{g}:", f"    ops.append((setitem, garbage, {g}, garbage[{g}] + gb{g}))"]
    return [indent + line for line in out]


def _respec(
    core: CoordinatorCore,
    typed: bool,
    head: Any,
    tail: list[str],
    shape: Any,
    group: Any,
) -> list[str]:
    """The source of ``respec`` and ``respec_all`` (``*_typed`` with ``typed``): the rollback
    of the latest step's rejected drafts and the next speculative step in one call, for one
    request or for an engine step's batch: stores only when the rollback frees no block and
    the step ends in the block of the bound (`_unrolled`) within the slack it leaves; a
    step past it planned in plain locals (`_crossing`) and committed with the stores; anything
    else to the core's boundary path, then its general path
    (`CoordinatorCore._general_respec`: the rollback and the step planned on one plan)."""
    n = len(core.names)
    hw, cw = core.table.hot_width, core.table.cold_width
    _, first_of = _pools(core)
    suffix = "_typed" if typed else ""
    comma = "," if n == 1 else ""
    qs = ", ".join(f"q{g}" for g in range(n)) + comma
    ks = ", ".join(f"k{g}" for g in range(n)) + comma
    rs = ", ".join(f"r{g}" for g in range(n)) + comma
    js = ", ".join(f"j{g}" for g in range(n)) + comma
    ints = " or ".join(f"type(q{g}) is not int" for g in range(n))
    kints = " or ".join(f"type(k{g}) is not int or not 0 <= k{g} <= q{g}" for g in range(n))
    spec = "(" + ks + ")"
    zeros = " = ".join(f"j{g}" for g in range(n)) + " = 0"
    back = "return general_respec(me, request_id, o, num_new, lookahead, rejected)"
    past = "return respec_cross(me, request_id, o, num_new, lookahead, rejected)"
    args = "request_id, num_new, lookahead, rejected"
    fresh = "; ".join(
        f"f{i}, h{i}, ev{i}, tl{i} = pools[{g}]._fresh, pools[{g}]._head, [], []"
        for i, g in enumerate(first_of)
    )
    zero_gb = " = ".join(f"gb{g}" for g in range(n)) + " = 0"
    # One request past the stores' reach (``respec``'s and ``respec_typed``'s, written once):
    # planned in plain locals, else the core's boundary path (`CoordinatorCore._boundary_step`
    # with the rollback), else general.
    lines: list[str] = [] if typed else [
        "    def respec_cross(me, request_id, o, num_new, lookahead, rejected):",
        f"        if not (type(num_new) is tuple or type(num_new) is list) or len(num_new) != {n}:",
        f"            {back}",
        "        if not (type(rejected) is tuple or type(rejected) is list) "
        f"or len(rejected) != {n}:",
        f"            {back}",
        f"        {qs} = num_new",
        f"        {rs} = rejected",
        "        held = specs.get(o)",
        "        if held is None:",
        f"            {zeros}",
        "        else:",
        f"            {js} = held",
        f"        if {ints} or {' or '.join(f'q{g} < 0' for g in range(n))}:",
        f"            {back}",
        f"        c = o // {hw} * {cw}",
        f"        {fresh}",
        f"        {zero_gb}",
        "        ops = []",
    ]
    if not typed:
        fail = "return boundary(me, request_id, o, num_new, False, lookahead, rejected)"
        lines += _crossing(core, fail, "        ")
        lines += _crossed(core, "        ")
        lines += _pooled(core, "        ")
        lines += [
            "        ops.append((setitem, specs, o, tuple(lookahead)))",
            "        commit(ops_of(ops)); del owner[0]; return  # the commit",
            "",
        ]
    lines += head("respec" + suffix, args, "allocate")
    if not typed:
        lines += shape(["num_new", "lookahead", "rejected"], back)
    lines += [
        f"            {qs} = num_new",
        f"            {ks} = lookahead",
        f"            {rs} = rejected",
    ]
    if not typed:
        lines += [f"            if {ints}:", f"                {back}"]
    lines += [
        f"            if {kints}:",
        f"                {back}",
        "            spec = specs.get(o)",
        "            if spec is None:",
        f"                {zeros}",
        "            else:",
        f"                {js} = spec",
    ]
    if typed:
        lines.append(f"            c = o // {hw} * {cw}")
    lines += _unrolled(core, past, "            ", typed)
    for g in range(n):
        lines += group(g, False, past, "            ", read=False)
    stores = "; ".join(
        f"hot[o + {g * HOT + SLACK}] = s{g} - q{g}; hot[o + {g * HOT + STEP}] = q{g}"
        for g in range(n)
    )
    lines.append(f"            {stores}; specs[o] = {spec}; del owner[0]; return  # the commit")
    lines += tail
    for units in (False, True) if typed else (False,):
        lines += _respec_all(core, typed, units, shape, group)
        lines += tail
    return lines


def _respec_all(
    core: CoordinatorCore, typed: bool, units: bool, shape: Any, group: Any
) -> list[str]:
    """The source of ``respec_all`` (``respec_all_typed`` with ``typed``; with ``units``,
    ``respec_all_units(request_ids, num_new, lookahead, rejected, units, checked)``, whose
    ``rejected`` are the typed layer's quantities, one per group in group order, each of
    its class in ``units`` and one kernel position per unit: read here, so that the typed
    layer needs no loop of its own; anything irregular, before anything changed, returns
    ``checked(request_ids, num_new, lookahead, rejected)``: the typed layer's own checks and
    conversion, then ``respec_all_typed``)."""
    n = len(core.names)
    hw, cw = core.table.hot_width, core.table.cold_width
    pool_of, first_of = _pools(core)
    suffix = "_units" if units else "_typed" if typed else ""
    comma = "," if n == 1 else ""
    qs = ", ".join(f"q{g}" for g in range(n)) + comma
    ks = ", ".join(f"k{g}" for g in range(n)) + comma
    rs = ", ".join(f"r{g}" for g in range(n)) + comma
    js = ", ".join(f"j{g}" for g in range(n)) + comma
    us = ", ".join(f"U{g}" for g in range(n)) + comma
    ints = " or ".join(f"type(q{g}) is not int" for g in range(n))
    kints = " or ".join(f"type(k{g}) is not int or not 0 <= k{g} <= q{g}" for g in range(n))
    spec = "(" + ks + ")"
    zeros = " = ".join(f"j{g}" for g in range(n)) + " = 0"
    fresh = "; ".join(
        f"f{i}, h{i}, ev{i}, tl{i} = pools[{g}]._fresh, pools[{g}]._head, [], []"
        for i, g in enumerate(first_of)
    )
    zero_gb = " = ".join(f"gb{g}" for g in range(n)) + " = 0"
    raw = (
        "[(" + ", ".join(f"x{g}._value" for g in range(n)) + ",) for "
        + ", ".join(f"x{g}" for g in range(n)) + comma + " in rejected]"
        if units
        else "rejected"
    )
    refuse = "del owner[0]; return checked(request_ids, num_new, lookahead, rejected)"
    # The batch: the requests within their slack in one pass (their offsets and new slacks,
    # written in C at the commit), then those past it in order, planned in plain locals
    # (`_crossing`) until one is not (then it and those after it on the core's boundary plan,
    # seeded with what the locals planned), else the general path.
    back = (
        refuse
        if units
        else "return general_respec_all(me, request_ids, num_new, lookahead, rejected, [], [])"
    )
    checked = f"return general_respec_all(me, request_ids, num_new, lookahead, {raw}, [], [])"
    defer = (
        f"xs.append((request_id, o, ({rs}))); continue"
        if units
        else "xs.append((request_id, o, rejected_i)); continue"
    )
    sls = ", ".join(f"sl{g}" for g in range(n))
    pushes = ", ".join(f"sl{g}.append" for g in range(n))
    lines = [
        f"    def respec_all{suffix}(request_ids, num_new, lookahead, rejected"
        + (", units, checked):" if units else "):"),
        "        me = []",
        "        try:",
        "            if claim(0, me) is not me:",
        '                contend(me, concurrent, "allocate")',
    ]
    if not typed:
        lines += shape(["num_new", "lookahead"], back)
    lines += [f"            {qs} = num_new", f"            {ks} = lookahead"]
    if units:
        lines.append(f"            {us} = units")
    negative = " or ".join(f"q{g} < 0" for g in range(n))
    lines += [
        f"            if {(ints + ' or ') if not typed else ''}{negative} or {kints}:",
        f"                {back}",
        "            if len(rejected) != len(request_ids):",
        f"                {back}",
        f"            spec = {spec}",
        "            offs, xs = [], []",
        f"            {sls}{comma} = " + ", ".join("[]" for _ in range(n)) + comma,
        f"            push, {', '.join(f'push{g}' for g in range(n))}{comma} = offs.append, "
        f"{pushes}",
        "            for request_id, rejected_i in zip(request_ids, rejected):",
        "                o = get(request_id) if type(request_id) is str else None",
        "                if o is None:",
        "                    " + (refuse if units else "raise unknown(request_id)"),
    ]
    if units:
        lines += [
            f"                if type(rejected_i) is not tuple or len(rejected_i) != {n}:",
            f"                    {refuse}",
            f"                {rs} = rejected_i",
            "                if " + " or ".join(f"type(r{g}) is not U{g}" for g in range(n)) + ":",
            f"                    {refuse}",
            f"                {rs} = " + ", ".join(f"r{g}._value" for g in range(n)) + comma,
        ]
    if not typed:
        lines += [
            "                if not (type(rejected_i) is tuple or type(rejected_i) is list)"
            f" or len(rejected_i) != {n}:",
            f"                    {defer}",
        ]
    lines += [
        *([] if units else [f"                {rs} = rejected_i"]),
        "                held = specs.get(o)",
        "                if held is None:",
        f"                    {zeros}",
        "                else:",
        f"                    {js} = held",
    ]
    if typed:
        lines.append(f"                c = o // {hw} * {cw}")
    lines += _unrolled(core, defer, "                ", typed)
    for g in range(n):
        lines += group(g, False, defer, "                ", read=False)
    lines.append(
        "                push(o); " + "; ".join(f"push{g}(s{g} - q{g})" for g in range(n))
    )
    lines += [
        "            if len(set(request_ids)) != len(request_ids):",
        f"                {checked}",
        "            ops = [(specs.update, zip(offs, repeat(spec)))]",
    ]
    for g in range(n):
        h = g * HOT
        at = "offs" if h + SLACK == 0 else f"map(add, offs, repeat({h + SLACK}))"
        lines += [
            f"            ops.append((commit, map(setitem, repeat(hot), {at}, sl{g})))",
            "            ops.append((commit, map(setitem, repeat(hot), "
            f"map(add, offs, repeat({h + STEP})), repeat(q{g}))))",
        ]
    fast = (
        f"[(o, [{', '.join(f'a{g} + q{g}' for g in range(n))}]) for o, "
        f"{', '.join(f'a{g}' for g in range(n))} in zip(offs[:within], "
        f"{', '.join(f'sl{g}[:within]' for g in range(n))})]"
    )
    # The core's plan shares the locals' lists of taken and evicted blocks; its pools'
    # fresh and head counters and its garbage are synced with the locals around each use.
    into = []
    for i, g in enumerate(first_of):
        into += [
            f"                    pool = plan.pools.get(pids[{g}])",
            "                    if pool is None:",
            f"                        plan.pools[pids[{g}]] = "
            f"[pools[{g}], f{i}, h{i}, tl{i}, ev{i}]",
            "                    else:",
            f"                        pool[1], pool[2] = f{i}, h{i}",
        ]
    for g in range(n):
        into += [
            f"                    if gb{g}:",
            f"                        plan.garbage[{g}] = "
            f"plan.garbage.get({g}, garbage[{g}]) + gb{g}",
            f"                        gb{g} = 0",
        ]
    out_of = [
        f"                    f{i}, h{i} = plan.pools[pids[{g}]][1:3]"
        for i, g in enumerate(first_of)
    ]
    keep = "; ".join(f"F{i}, H{i} = f{i}, h{i}" for i in range(len(pool_of)))
    restore = "; ".join(f"f{i}, h{i} = F{i}, H{i}" for i in range(len(pool_of)))
    lines += [
        "            if xs:",
        f"                {fresh}",
        f"                {zero_gb}",
        "                plan, within = None, len(offs)",
        "                for request_id, o, rejected_i in xs:",
        "                    done = False",
        f"                    {keep}",
        "                    while True:",
    ]
    if not typed:
        lines += [
            "                        if not (type(rejected_i) is tuple or "
            f"type(rejected_i) is list) or len(rejected_i) != {n}:",
            "                            break",
        ]
    lines += [
        f"                        {rs} = rejected_i",
        "                        held = specs.get(o)",
        "                        if held is None:",
        f"                            {zeros}",
        "                        else:",
        f"                            {js} = held",
        f"                        c = o // {hw} * {cw}",
    ]
    lines += _crossing(core, "break", "                        ")
    lines += _crossed(core, "                        ", flat=True)
    lines += [
        "                        done = True",
        "                        break",
        "                    if done:",
        "                        continue",
        f"                    {restore}",
        "                    # The core's boundary path (a segment to move, ...), on one plan.",
        "                    if plan is None:",
        "                        plan = Boundary()",
        *into,
        "                    back = plan_unroll(o, rejected_i, plan, num_new)",
        "                    if back is None or not plan_boundary(ops, plan, o, num_new, None, "
        "lookahead, back):",
        f"                        return general_respec_all(me, request_ids, num_new, lookahead, "
        f"{raw}, {fast}, xs)",
        *out_of,
        "                if plan is None:",
    ]
    lines += _pooled(core, "                    ")
    lines += [
        "                else:",
        *into,
        "                    emit_boundary(ops, plan)",
        "            commit(ops_of(ops)); del owner[0]; return  # the commit",
    ]
    return lines


def _content_all(core: CoordinatorCore, typed: bool, shape: Any, group: Any) -> list[str]:
    """The source of ``content_all`` (``content_all_typed`` with ``typed``, the handler after
    it from the caller): `CoordinatorCore.advance_content_all`, one engine step's batch with
    the content of its positions. Each request within its slack whose content fills no block
    (each pair to a sequence of its own with one stream) is a set of stores and appends, all in
    C on the commit line; the others are planned on the same ops by the core's `_content_plan`
    (a block filled within the slack, a boundary crossed with no block filled: with every
    generated token cached, the blocks a step takes or evicts are mostly cached ones, which
    the core's boundary plan handles); any other request sends the whole batch to the core's
    general path (`_general_content_all`)."""
    n = len(core.names)
    comma = "," if n == 1 else ""
    qs = ", ".join(f"q{g}" for g in range(n)) + comma
    suffix = "_typed" if typed else ""
    back = "return general_content_all(me, request_ids, num_new, contents)"
    ints = " or ".join(f"type(q{g}) is not int" for g in range(n))
    negative = " or ".join(f"q{g} < 0" for g in range(n))
    slow = "slow.append((request_id, o, i, 3, None, None)); continue"
    lines = [
        f"    def content_all{suffix}(request_ids, num_new, contents):",
        "        me = []",
        "        try:",
        "            if claim(0, me) is not me:",
        '                contend(me, concurrent, "allocate")',
    ]
    if not typed:
        lines += shape(["num_new"], back)
    lines.append(f"            {qs} = num_new")
    lines += [
        f"            if {(ints + ' or ') if not typed else ''}{negative}:",
        f"                {back}",
        "            count = len(request_ids)",
        "            if not count or type(contents) is not list and type(contents) is not tuple:",
        f"                {back}",
        "            shares = []",
        "            for pair in contents:",
        "                if type(pair) is not tuple or len(pair) != 2:",
        f"                    {back}",
        "                g, keys = pair",
        f"                if type(g) is not int or not 0 <= g < {n}:",
        f"                    {back}",
        "                keys = array('q', keys)",
        "                k = len(keys) // count",
        "                if k * count != len(keys):",
        f"                    {back}",
        "                shares.append((g, keys, k))",
    ]
    # Where no group's step needs its in-flight bound checked (a block or more), the common
    # engine step (every request known, once, with content, no speculative tail, within its
    # slack, no block filled) is checked and stored a pass in C per field, over the batch.
    if not any(
        core._in_flight[g] < core._block_size[g] or not core._has_rows[g] for g in range(n)
    ):
        lines += [
            "            if strs.issuperset(map(type, request_ids)):",
            "                offs = list(map(get, request_ids))",
            "                exs = list(map(extras_get, offs))",
            "                vec = (None not in exs and len(set(offs)) == count and not (specs and "
            "not specs.keys().isdisjoint(offs)) and len({axis[g] for g, _, _ in shares}) == "
            "len(shares))",
            "                if vec:",
            "                    lists = list(map(streams_of, exs))",
            "                    vec = set(map(len, lists)) == {len(shares)}",
            "                ops = []",
            "                for g, keys, k in shares if vec else ():",
            "                    at = list(map(itemgetter(g), map(stream_of, exs)))",
            "                    if min(at) < 0:",
            "                        vec = False; break",
            "                    tl = list(map(tail_of, map(getitem, lists, at)))",
            "                    if max(map(len, tl)) + k >= rows_per_block[g]:",
            "                        vec = False; break",
            "                    if k:",
            "                        ops.append((list, map(extend, tl, map(getitem, repeat(keys), "
            "map(slice, range(0, count * k, k), range(k, count * k + k, k))))))",
        ]
        for g in range(n):
            h = g * HOT
            lines += [
                "                if vec:",
                f"                    a{g} = list(map(add, offs, repeat({h + SLACK})))",
                f"                    s{g} = list(map(getitem, repeat(hot), a{g}))",
                f"                    vec = min(s{g}) >= q{g} and (q{g} > 0 or min(s{g}) > 0)",
            ]
        lines.append("                if vec:")
        for g in range(n):
            h = g * HOT
            lines += [
                f"                    ops.append((commit, map(setitem, repeat(hot), a{g}, "
                f"map(sub, s{g}, repeat(q{g})))))",
                "                    ops.append((commit, map(setitem, repeat(hot), "
                f"map(add, offs, repeat({h + STEP})), repeat(q{g}))))",
            ]
        lines.append("                    commit(ops_of(ops)); del owner[0]; return  # the commit")
    lines += [
        "            fast, slow, at, to, tails, adds = [], [], [], [], [], []",
        "            i = -1",
        "            for request_id in request_ids:",
        "                i += 1",
        "                o = get(request_id) if type(request_id) is str else None",
        "                if o is None:",
        "                    raise unknown(request_id)",
        "                extra = extras.get(o)",
        "                if extra is None or specs and o in specs:",
        f"                    {slow}",
        "                streams, of = extra.streams, extra.stream_of",
        "                if len(streams) != len(shares):",
        f"                    {slow}",
        "                kind, axes, mine, gets = 0, [], [], []",
        "                for g, keys, k in shares:",
        "                    s = of[g]",
        "                    if s < 0:",
        "                        kind = 3; break",
        "                    stream = streams[s]",
        "                    tail = stream.tail",
        "                    if stream.axis in axes:",
        "                        kind = 3; break",
        "                    axes.append(stream.axis)",
        "                    if len(tail) + k >= stream.rows_per_block:",
        "                        kind = 1",
        "                    mine.append(tail)",
        "                    gets.append(keys[i * k : i * k + k])",
        "                if kind == 3:",
        f"                    {slow}",
    ]
    for g in range(n):
        lines += group(g, False, "kind |= 2", "                ")
    slots = ", ".join(f"o + {g * HOT + SLACK}, o + {g * HOT + STEP}" for g in range(n))
    values = ", ".join(f"s{g} - q{g}, q{g}" for g in range(n))
    lines += [
        "                if kind:",
        "                    slow.append((request_id, o, i, kind, mine, gets)); continue",
        f"                at += ({slots}); to += ({values}); tails += mine; adds += gets",
        "            if len(set(request_ids)) != count:",
        f"                {back}",
        "            ops = [(commit, map(setitem, repeat(hot), at, to)), "
        "(list, map(extend, tails, adds))]",
        "            if slow:",
        "                plan = Boundary()",
        "                for request_id, o, i, kind, mine, gets in slow:",
        "                    if not plan_content(ops, plan, request_id, o, i, kind, mine, gets, "
        "num_new, shares):",
        f"                        {back}",
        "                emit_boundary(ops, plan)",
        "            commit(ops_of(ops)); del owner[0]; return  # the commit",
    ]
    return lines


def _source(core: CoordinatorCore) -> str:
    """The source of ``make(...)``, which returns the functions of ``core``'s layout."""
    n = len(core.names)
    hw, cw = core.table.hot_width, core.table.cold_width
    comma = "," if n == 1 else ""
    qs = ", ".join(f"q{g}" for g in range(n)) + comma
    ks = ", ".join(f"k{g}" for g in range(n)) + comma
    rs = ", ".join(f"r{g}" for g in range(n)) + comma
    cold = f"o // {hw} * {cw}"
    lines = [
        "def make(guard, offsets, hot, st, specs, core):",
        "    owner, claim, drop, get = guard.owner, guard.claim, guard.drop, offsets.get",
        "    contend = guard.contend",
        "    concurrent, unknown = core._concurrent, core._unknown",
        "    general, general_rollback = core._general_step, core._general_rollback",
        "    boundary, boundary_rollback = core._boundary_step, core._boundary_rollback",
        "    general_all, general_content = core._general_all, core._general_content",
        "    general_respec, general_respec_all = core._general_respec, core._general_respec_all",
        "    plan_unroll, plan_boundary = core._plan_unroll, core._plan_boundary",
        "    emit_boundary, pids = core._emit_boundary, [id(pool) for pool in core.pools]",
        "    pools, slabs, garbage, extras = core.pools, core.table.slabs, core.table.garbage, "
        "core.extras",
        "    typecode, never = st.typecode, core.table.never",
        "    extend, content_boundary = array.extend, core._content_boundary",
        "    content_fill = core._content_fill",
        "    plan_content, general_content_all = core._content_plan, core._general_content_all",
        "    strs, extras_get, axis = frozenset({str}), core.extras.get, core._axis",
        "    streams_of, stream_of = attrgetter('streams'), attrgetter('stream_of')",
        "    tail_of = attrgetter('tail')",
        "    rows_per_block = tuple(0 if c is None else c.rows_per_block for c in core.caches)",
        "",
    ]
    lines += _cross(core)
    lines += _uncross(core)

    def head(name: str, args: str, operation: str) -> list[str]:
        return [
            f"    def {name}({args}):",
            "        me = []",
            "        try:",
            "            if claim(0, me) is not me:",
            f'                contend(me, concurrent, "{operation}")',
            "            o = get(request_id) if type(request_id) is str else None",
            "            if o is None:",
            "                raise unknown(request_id)",
        ]

    tail = [
        "        except BaseException:",
        "            drop(me)",
        "            raise",
        "",
    ]

    def shape(names: Sequence[str], back: str) -> list[str]:
        # No nested ``try`` in a function that holds the token: in CPython 3.11 the line of a
        # nested ``try:`` is not covered by the outer handler (an interrupt there would lose
        # the token). Anything but a list or tuple of one count per group goes to the general
        # path, which reports.
        out = []
        for name in names:
            out.append(
                f"            if not (type({name}) is tuple or type({name}) is list)"
                f" or len({name}) != {n}:"
            )
            out.append(f"                {back}")
        return out

    def group(g: int, mapping: bool, back: str, indent: str, read: bool = True) -> list[str]:
        """Group ``g``'s check of its count ``q{g}`` against its slack ``s{g}`` (read here, or
        already computed), and its mapping ``m{g}``."""
        p, size = core._pool[g], core._block_size[g]
        rows, in_flight = core._has_rows[g], core._in_flight[g]
        h = g * HOT
        out = [f"s{g} = hot[o + {h + SLACK}]"] if read else []
        # An empty step with no slack evicts nothing below EVICT (its first slot: rows // P).
        empty = f"st[{cold} + {_cold(ANCHOR, g)}] // {p} >= st[{cold} + {_cold(EVICT, g)}]"
        out.append(f"if not 0 <= q{g} <= s{g} or not (s{g} or q{g}) and {empty}:")
        out.append(f"    {back}")
        needs_rows = mapping and rows
        limit = in_flight < size or not rows
        if needs_rows or limit:
            out.append(f"c{g} = st[{cold} + {_cold(ANCHOR, g)}] - s{g}")
            first = f"c{g} // {p}" if p > 1 else f"c{g}"
            end = f"(c{g} + q{g} + {p - 1}) // {p}" if p > 1 else f"c{g} + q{g}"
            out.append(f"t{g} = {end} - {first} if q{g} else 0")
            if limit:
                # A step within a block is within max_in_flight when that is a block or
                # more; a group without rows has no blocks to bound it.
                out.append(f"if t{g} > {in_flight}:")
                out.append(f"    {back}")
        if mapping:
            if rows:
                out.append(f"b{g} = st[{cold} + {_cold(BASE, g)}] * {size} + {first}")
                out.append(f"m{g} = [b{g}] if t{g} == 1 else [*range(b{g}, b{g} + t{g})]")
            else:
                out.append(f"m{g} = []")
        return [indent + line for line in out]

    def stores() -> str:
        parts = []
        for g in range(n):
            h = g * HOT
            parts.append(f"hot[o + {h + SLACK}] = s{g} - q{g}")
            parts.append(f"hot[o + {h + STEP}] = q{g}")
        return "; ".join(parts)

    ints = " or ".join(f"type(q{g}) is not int" for g in range(n))
    for typed in (False, True):
        suffix = "_typed" if typed else ""
        for name, mapping in (("step", True), ("advance", False)):
            back = f"return general(me, request_id, o, num_new, None, {mapping})"
            past = f"return cross(me, request_id, o, num_new, {mapping})"
            lines += head(name + suffix, "request_id, num_new", "allocate")
            lines += [
                # A speculative tail: the step accepts it (`cross` forgets it).
                "            if specs and o in specs:",
                f"                {past}",
            ]
            if not typed:
                lines += shape(["num_new"], back)
            lines.append(f"            {qs} = num_new")
            if not typed:
                lines += [f"            if {ints}:", f"                {back}"]
            for g in range(n):
                lines += group(g, mapping, past, "            ")
            out = "return [" + ", ".join(f"m{g}" for g in range(n)) + "]" if mapping else "return"
            lines.append(f"            {stores()}; del owner[0]; {out}  # the commit")
            lines += tail
        back = "return general(me, request_id, o, num_new, lookahead, True)"
        past = "return cross(me, request_id, o, num_new, True, lookahead)"
        kints = " or ".join(f"type(k{g}) is not int or not 0 <= k{g} <= q{g}" for g in range(n))
        lines += head("speculative" + suffix, "request_id, num_new, lookahead", "allocate")
        if not typed:
            lines += shape(["num_new", "lookahead"], back)
        lines += [f"            {qs} = num_new", f"            {ks} = lookahead"]
        if not typed:
            lines += [f"            if {ints}:", f"                {back}"]
        lines += [f"            if {kints}:", f"                {back}"]
        for g in range(n):
            lines += group(g, True, past, "            ")
        spec = "(" + ", ".join(f"k{g}" for g in range(n)) + comma + ")"
        maps = ", ".join(f"m{g}" for g in range(n))
        lines.append(
            f"            {stores()}; specs[o] = {spec}; del owner[0]; return [{maps}]"
            "  # the commit"
        )
        lines += tail
        back = "return general_rollback(me, request_id, o, rejected)"
        past = "return uncross(me, request_id, o, rejected)"
        lines += head("rollback" + suffix, "request_id, rejected", "rollback")
        lines += [
            "            spec = specs.get(o)",
            "            if spec is None:",
            f"                {back}",
        ]
        if not typed:
            lines += shape(["rejected"], back)
        lines += [f"            {rs} = rejected", f"            {ks} = spec"]
        commit_parts = []
        for g in range(n):
            h = g * HOT
            p, size = core._pool[g], core._block_size[g]
            kind = core._managers[g].kind
            lines += [
                f"            if type(r{g}) is not int or not 0 <= r{g} <= k{g}:",
                f"                {back}",
                f"            s{g} = hot[o + {h + SLACK}]",
                f"            if r{g}:",
                # No slack: the rolled-back step ended where a block is to be taken.
                f"                if not s{g}:",
                f"                    {past}",
                f"                c{g} = st[{cold} + {_cold(ANCHOR, g)}] - s{g}",
                f"                n{g} = c{g} - r{g}",
            ]
            slots = f"(n{g} + {p - 1}) // {p}" if p > 1 else f"n{g}"
            if kind == "state":
                keep = "1"
            elif kind == "cross_attention":
                keep = str(core._managers[g].table_length(0))
            else:
                keep = f"({slots} + {size - 1}) // {size}"
            entries = (
                f"st[{cold} + {_cold(SKIPPED, g)}] + st[{cold} + {_cold(LENGTH, g)}]"
            )
            lines += [f"                if {keep} < {entries}:", f"                    {past}"]
            if core._has_rows[g]:
                # The next step's first slot in another block: its bound is another.
                lines += [
                    f"                if n{g} // {p * size} != c{g} // {p * size}:",
                    f"                    {past}",
                ]
            lines.append(f"            t{g} = hot[o + {h + STEP}] - r{g}")
            commit_parts += [f"hot[o + {h + SLACK}] = s{g} + r{g}", f"hot[o + {h + STEP}] = t{g}"]
        left = "(" + ", ".join(f"k{g} - r{g}" for g in range(n)) + comma + ")"
        lines.append(
            "            "
            + "; ".join(commit_parts)
            + f"; specs[o] = {left}; del owner[0]; return  # the commit"
        )
        lines += tail
        back = "return general_all(me, request_ids, num_new, [], [])"
        lines += [
            f"    def advance_all{suffix}(request_ids, num_new):",
            "        me = []",
            "        try:",
            "            if claim(0, me) is not me:",
            '                contend(me, concurrent, "allocate")',
        ]
        if not typed:
            lines += shape(["num_new"], back)
        lines.append(f"            {qs} = num_new")
        negative = " or ".join(f"q{g} < 0" for g in range(n))
        lines += [
            f"            if {(ints + ' or ') if not typed else ''}{negative}:",
            f"                {back}",
            "            fast, slow = [], []",
            "            for request_id in request_ids:",
            "                o = get(request_id) if type(request_id) is str else None",
            "                if o is None:",
            "                    raise unknown(request_id)",
            "                if specs and o in specs:",
            "                    slow.append((request_id, o))",
            "                    continue",
        ]
        for g in range(n):
            lines += group(g, False, "slow.append((request_id, o)); continue", "                ")
        lines += [
            "                fast.append(o)",
            "            if slow or len(set(request_ids)) != len(request_ids):",
            "                return general_all(me, request_ids, num_new, fast, slow)",
            "            ops = []",
        ]
        for g in range(n):
            h = g * HOT
            lines += [
                f"            at = list(map(add, fast, repeat({h + SLACK})))",
                "            ops.append((commit, map(setitem, repeat(hot), at, "
                f"map(sub, map(getitem, repeat(hot), at), repeat(q{g})))))",
                "            ops.append((commit, map(setitem, repeat(hot), "
                f"map(add, fast, repeat({h + STEP})), repeat(q{g}))))",
            ]
        lines.append("            commit(ops_of(ops)); del owner[0]; return  # the commit")
        lines += tail
        lines += _respec(core, typed, head, tail, shape, group)
        # A step and the content its positions hold (`CoordinatorCore.advance_content`):
        # stores and the tails' appends when each pair goes to a sequence of its own with one
        # stream (one granularity), whose block it does not fill; past a group's slack, the
        # core's boundary plan and the appends in one commit; a block filled by the content
        # (the step within every slack) the core's `_content_fill`.
        back = "return general_content(me, request_id, o, num_new, contents)"
        lines += head("content" + suffix, "request_id, num_new, contents", "allocate")
        lines += ["            if specs and o in specs:", f"                {back}"]
        if not typed:
            lines += shape(["num_new"], back)
        lines.append(f"            {qs} = num_new")
        if not typed:
            lines += [f"            if {ints}:", f"                {back}"]
        lines += [
            "            extra = extras.get(o)",
            "            if extra is None or type(contents) is not list and type(contents) "
            "is not tuple:",
            f"                {back}",
            "            streams, of = extra.streams, extra.stream_of",
            "            tails, adds, axes, fill = [], [], [], False",
            "            if len(streams) != len(contents):",
            f"                {back}",
            "            for pair in contents:",
            "                if type(pair) is not tuple or len(pair) != 2:",
            f"                    {back}",
            "                g, keys = pair",
            f"                if type(g) is not int or not 0 <= g < {n} or of[g] < 0:",
            f"                    {back}",
            "                stream, added = streams[of[g]], array('q', keys)",
            "                tail, axis = stream.tail, stream.axis",
            "                if axis in axes:",
            f"                    {back}",
            "                if len(tail) + len(added) >= stream.rows_per_block:",
            "                    fill = True",
            "                tails.append(tail)",
            "                adds.append(added)",
            "                axes.append(axis)",
        ]
        past = (
            "return general_content(me, request_id, o, num_new, contents) if fill else "
            "content_boundary(me, request_id, o, num_new, contents, tails, adds)"
        )
        for g in range(n):
            lines += group(g, False, past, "            ")
        lines += [
            "            if fill:",
            "                return content_fill(me, request_id, o, num_new, contents)",
        ]
        lines.append(
            f"            {stores()}; list(map(extend, tails, adds)); del owner[0]; return"
            "  # the commit"
        )
        lines += tail
        lines += _content_all(core, typed, shape, group)
        lines += tail
    names = (
        "step", "advance", "speculative", "rollback", "advance_all", "respec", "respec_all",
        "content", "content_all",
    )
    typed_names = ", ".join(f"{x}_typed" for x in names)
    lines.append("    return (" + ", ".join(names) + ", " + typed_names + ", respec_all_units)")
    header = (
        "from array import array\n"
        "from itertools import repeat\n"
        "from operator import add, attrgetter, getitem, itemgetter, setitem, sub\n"
        "from kvunits.runtime._guard import commit, ops_of\n"
        "from kvunits.runtime._core import _Boundary as Boundary\n"
        "from kvunits.runtime._core import _slots_across as slots_across\n"
        "from kvunits.runtime._table import due, grown\n\n"
    )
    return header + "\n".join(lines) + "\n"


# The names the generated source imports (kept referenced for linters).
_USED = (repeat, add, getitem, setitem, sub, commit, ops_of)
