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
``advance_each`` and ``respec_each`` (an engine step's batch whose requests' counts differ:
prefill chunks beside decodes, `CoordinatorCore.advance_each`, and beside drafting steps,
`CoordinatorCore.advance_speculative_each`),
``content`` (a step and what its positions hold, `CoordinatorCore.advance_content`) and
``content_all`` (its batch), whose block boundaries and filled blocks (every generated token
cached, as vLLM caches them) are planned by ``plan_cross`` and ``plan_fill``, also written out
per layout: a block taken (a cached one evicted from the prefix cache) or evicted by a window
(a cached one staying cached), the new full blocks hashed once per sequence and granularity
and registered by the step that commits them. ``admit`` and ``free`` are a plain request's
admission and end (its fields, reservation and blocks; no content, no policy bookkeeping), as
stores on one line where they can be.
A step past some group's slack goes to ``cross`` and a rollback past it to ``uncross``, also
written out per layout: a block boundary crossed (one block taken per group, or a prefill
chunk's run of them, and one evicted by a window), or a block a rejected draft had taken
given back, planned in a few lines per group and committed at once (a speculative step
crosses a block about one time in three; a table segment without room moves to its slab's
end); what they do not plan (a slab whose garbage is due, a cached or shared block, content
to register) goes to the core's boundary path, then its general path.
Each comes twice: as the core's plain-int entry, which checks that its counts are ints in a
list or tuple of one per group, and for the typed layer (``*_typed``), whose entries pass a
tuple of ints they read from checked quantities. A stepper binding every group in order runs
the lines of ``advance``, ``speculative``, ``rollback`` and ``respec`` in its typed entries'
own frames instead (`advance_lines`, `speculative_lines`, `rollback_lines`, `respec_lines`,
written from the same generators): a decode or drafting step is one call, not two, and its
counts are never packed into a tuple to be unpacked again. The tests compare them with the
general path call by call (`tests/runtime/test_fast_step.py`).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import repeat
from operator import add, getitem, setitem, sub
from types import CodeType
from typing import Any, Final

from . import _table
from ._core import (
    DECLINED,
    MAX_REQUEST_ID_CHARS,
    CoordinatorCore,
    FastFunctions,
    RequestExtras,
    RestingExtras,
    awake,
)
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
from .block_pool import _COMPACT_AFTER


def make_functions(core: CoordinatorCore, source: str | None = None) -> FastFunctions:
    """Generate and compile ``core``'s fast functions; ``source``: its generated source where
    known already (a deep copy's is its original's: the layout is the same)."""
    if source is None:
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


def _eviction(manager: Any, size: int) -> tuple[list[str], str]:
    """A planned kind's eviction rule as source (its manager's ``skipped_blocks`` and
    ``first_evicting``, `kvunits.runtime.managers`, with the window or chunk written in): the
    lines that raise ``skip`` (from ``skipped``) when a step starting at slot ``first``
    reaches ``evict``, and the expression of the next ``EVICT`` after it (``never`` for a kind
    that evicts nothing). `_cross` and `_crossing` both write it."""
    if manager.kind == "sliding_window":
        window = manager.sliding_window_slots
        return [
            f"if first >= evict and first > {window - 1}:",
            f"    skip = max((first - {window - 1}) // {size}, skipped)",
        ], f"min((skip + 1) * {size} + {window - 1}, never)"
    if manager.kind == "chunked_local":
        chunk = manager.chunk_slots
        return [
            "if first >= evict:",
            f"    skip = max(first // {chunk} * {chunk} // {size}, skipped)",
        ], f"min(((skip + 1) * {size} + {chunk - 1}) // {chunk} * {chunk}, never)"
    return [], "never"


def _unread(core: CoordinatorCore, g: int) -> str:
    """The condition, on a block's index ``i``, that group ``g``'s window mask leaves the
    block out of the prefix cache (`CoordinatorCore._window_mask`: of each aligned run of
    blocks, those no aligned hit can use), as source; empty for a group without a mask."""
    cache = core.caches[g]
    if core._swa_mask[g] is None or cache is None:
        return ""
    per = core._align[g] // cache.rows_per_block
    need = -(-(cache.window - 1) // cache.block_size)  # type: ignore[operator]
    return f"i % {per} < {per - need}"


def _cross(core: CoordinatorCore) -> list[str]:
    """The source of ``cross_ops(me, request_id, o, num_new, mapping, lookahead=None,
    compacted=0)``, what ``cross`` (`_lean_cross`) declines, its changes collected in an ops
    list: a step past some group's slack, with the token held, planned in a few
    lines per group with the group's constants written in (`CoordinatorCore._plan_boundary`'s
    common case): each group within its slack, or one block taken at its table's end (not a
    stale queue entry; a cached one is evicted from the prefix cache, in a pool of one group,
    outside a batch) or a run of them (a prefill chunk's: `BlockPool.front`, in a pool without
    cached blocks, no slot mapping asked for), into its segment's spare room or the segment
    moved to its slab's end with room, as `RequestTable.segment_ops` does (a move that would
    make the slab's garbage `due` compacts the slab first, then plans the step again with the
    move allowed in the groups of the bit mask ``compacted``, as `_boundary_step` does); and
    those a window evicts at its front, one or a run of them (a prefill chunk past the
    window), none shared (a cached one stays cached, free). A request with
    content to register (full blocks waiting for the positions the step commits) goes to
    ``registering`` (`plan_cross`, where the step asks for no slot mapping and no lookahead).
    Any other step goes, before anything changed, to `CoordinatorCore._boundary_step`, which
    decides it (or the general path)."""
    n = len(core.names)
    hw, cw = core.table.hot_width, core.table.cold_width
    comma = "," if n == 1 else ""
    back = "return boundary(me, request_id, o, num_new, mapping, lookahead)"
    pool_of, first_of = _pools(core)
    lines = [
        "    def cross_ops(me, request_id, o, num_new, mapping, lookahead=None, compacted=0):",
        f"        if not (type(num_new) is tuple or type(num_new) is list) or len(num_new) != {n}:",
        f"            {back}",
        "        " + ", ".join(f"q{g}" for g in range(n)) + f"{comma} = num_new",
        "        if " + " or ".join(f"type(q{g}) is not int" for g in range(n)) + ":",
        f"            {back}",
        "        if extras:",
        "            extra = extras.get(o)",
        "            if type(extra) is Active and extra.pending():",
        "                return registering(me, request_id, o, num_new, mapping, lookahead, extra)",
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
        # Where field NAME of group g is in ``st``: ``cb + k``, the constant k folded in.
        c = {k: f"cb + {_cold(k, g)}" if _cold(k, g) else "cb" for k in range(HOT, HOT + COLD + 1)}
        i = pool_of[id(core.pools[g])]
        first = "rows" if p == 1 else f"rows // {p}"
        end = "rows + q" if p == 1 else f"(rows + q + {p - 1}) // {p}"
        # A move that would make its slab due: the slab compacted first (nothing observable),
        # then the step planned again, the move allowed there (`_boundary_step`'s rule).
        compact_first = [
            "                pre = []",
            f"                compact(pre, ({g},))",
            "                commit(ops_of(pre))",
            "                return cross_ops(me, request_id, o, num_new, mapping, lookahead, "
            f"compacted | {1 << g})",
        ]
        out = [
            f"q = q{g}",
            f"anchor0, s = st[{c[ANCHOR]}], hot[o + {h + SLACK}]",
            f"base0, length0 = st[{c[BASE]}], st[{c[LENGTH]}]",
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
            f"elif q < 0 or touched > {in_flight} or end > st[{c[MAXLEN]}]:",
            f"    {back}",
            "else:",
            f"    skipped, length = st[{c[SKIPPED]}], length0",
            f"    evict, start = st[{c[EVICT]}], st[{c[START]}]",
            f"    capacity, slab = st[{c[CAPACITY]}], slabs[{g}]",
            "    skip, moved = skipped, None",
        ]
        evicts, evicting = _eviction(manager, size)
        out += ["    " + line for line in evicts]
        out += [
            f"    want = (end + {size - 1}) // {size} - skipped - length",
            "    dropped = skip - skipped",
            f"    pool = pools[{g}]",
            # A long step's blocks (a prefill chunk's) are a run of the queue's front, as the
            # core takes them (`BlockPool.front`); its slot mapping, or cached blocks that it
            # may evict, are the core's.
            "    if want > 1 and (mapping or pool._cached):",
            f"        {back}",
            "    if dropped == 1:",
            "        block = slab[start]",
            "        if block in pool._shared:",
            f"            {back}",
            "        if block in pool._cached:  # its content stays in the queue",
            "            ops.append((setitem, pool._free_cached, block, 1))",
            f"        ev{i}.append(block)",
            # A window passed over by a long step (a prefill chunk of several blocks) evicts
            # them as a run, the last first, as the core's plan does: a shared one is the core's.
            "    elif dropped:",
            "        gone = slab[start : start + dropped]",
            "        if pool._shared and not pool._shared.keys().isdisjoint(gone):",
            f"            {back}",
            "        if pool._cached:  # their content stays in the queue",
            "            ops.append(flag_op(pool._free_cached, pool._cached.keys() & gone, 1))",
            f"        ev{i} += gone[::-1]",
            "    taken, run = 0, None",
            "    if want > 1:",
            f"        if f{i} < 0:",
            f"            f{i}, h{i} = pool._fresh, pool._head",
            # (past the queue's entries, the blocks this step's windows evicted: the pool's
            # last ones taken back, as the core's plan takes them)
            f"        run = pool.front(f{i}, h{i}, want, ev{i})",
            "        if run is None:  # a stale entry among them, or short",
            f"            {back}",
            f"        fresh = min(want, pool.num_blocks - f{i})",
            f"        f{i}, h{i}, tk{i} = f{i} + fresh, h{i} + want - fresh, tk{i} + want",
            "        if length + want <= capacity:",
            "            ops.append((setitem, slab, slice(start + length, start + length + want), "
            "run))",
            # The slab's last segment grows there to the room a move would give
            # (`RequestTable.segment_ops`' rule): nothing copied, no garbage.
            "        elif capacity > dropped and start + capacity == len(slab):",
            f"            most = (st[{c[MAXLEN]}] + {size - 1}) // {size} - skip",
            "            room = grown(length - dropped + want, capacity, skip, want, most)",
            "            ops.append((slab.extend, zero1 * (room - capacity + dropped)))",
            "            ops.append((setitem, slab, slice(start + length, start + length + want), "
            "run))",
            "            capacity = room + dropped  # the dropped entries leave it below",
            "        else:  # moved, made whole at once (as a single block's move)",
            "            tail = len(slab)",
            f"            if not compacted >> {g} & 1 and due(garbage[{g}] + capacity, tail):",
            *compact_first,
            "            staying = length - dropped",
            # The entries its max_len reaches (`grown`: a long first chunk's room).
            f"            most = (st[{c[MAXLEN]}] + {size - 1}) // {size} - skip",
            "            room = grown(staying + want, capacity, skip, want, most)",
            "            moved = array('i', bytes(4 * room))",
            "            moved[:staying] = slab[start + dropped : start + length]",
            "            moved[staying : staying + want] = run",
            "            ops.append((slab.extend, moved))",
            f"            ops.append((setitem, garbage, {g}, garbage[{g}] + capacity))",
            "    elif want > 0:",
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
                    # Stale entries at the head (blocks a prefix hit took back) skipped, as
                    # the general path's take skips them.
                    "            if taken in pool._stale:",
                    f"                got = pool.past_stale(h{i}, ops)",
                    "                if got is None:",
                    f"                    {back}",
                    f"                taken, h{i} = got",
                    "            key = pool._cached.get(taken)",
                    "            if key is not None:  # evicted from the prefix cache",
                    # (a pool of this group alone files its blocks in the group's map)
                    f"                cache_map = cache_maps[{g}]",
                    "                ops.append((pool._cached.pop, taken))",
                    "                ops.append((setitem, pool._free_cached, taken, 0))",
                    "                ops.append(unfiled_op(cache_map, key, cache_map[key], taken))",
                ]
            ),
            f"            h{i} += 1",
            # Past the queue's entries, the blocks this step's windows evicted (a full pool:
            # a window's block given back and taken again), as the core's plan takes them.
            f"        elif not pool._cached and h{i} - len(pool._queue) < len(ev{i}):",
            f"            taken = ev{i}[h{i} - len(pool._queue)]",
            f"            h{i} += 1",
            "        else:",
            f"            {back}",
            f"        tk{i} += 1",
            "        if length < capacity:",
            "            ops.append((setitem, slab, start + length, taken))",
            "        else:  # moved to the slab's end with room (a due slab compacted first)",
            "            tail = len(slab)",
            f"            if not compacted >> {g} & 1 and due(garbage[{g}] + capacity, tail):",
            *compact_first,
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
            "        if moved is not None:",
            "            block = moved[at]",
            "        elif at < length - want:",
            "            block = slab[start + at]",
            "        else:  # taken by this step",
            "            block = taken if run is None else run[at - length + want]",
            "        base = block - index",
            f"        room = min((skip + length) * {size}, st[{c[MAXLEN]}])",
            f"        anchor = max(min(room, evict, (index + 1) * {size}) * {p}, rows)",
            f"    ops.append((setitem, hot, slice(o + {h}, o + {h + HOT}), [anchor - rows, q]))",
            f"    ops.append((setitem, st, slice({c[ANCHOR]}, {c[CAPACITY + 1]}), "
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


def _lean_cross(core: CoordinatorCore) -> list[str]:
    """The source of ``cross(me, request_id, o, num_new, mapping, lookahead=None,
    compacted=0)``: a step past some group's slack planned as `_crossing` plans a drafting
    step with nothing rolled back (one block taken or a run of them, `_run`, and one evicted
    per group, a segment moved where it has no room, a due slab compacted first; the full
    blocks it computes registered, hashes left ahead held: ``ahead``) and committed as one
    line of stores (`_stored`; the prefix cache's part, where a cached block is taken, freed
    or registered, as ops with them: `_committed`), its slot mapping built per block;
    anything else, before anything changed, to ``cross_ops`` (`_cross`), which plans with an
    ops list (a run too short before the queue's end or with a cached block whose key names
    more, a cached block taken from a pool of several groups, content registered under a
    key already filed or behind a window's mask, a speculative tail the step accepts)."""
    n = len(core.names)
    ops = "return cross_ops(me, request_id, o, num_new, mapping, lookahead, compacted)"
    prep, stores = _stored(core)
    out = "[" + ", ".join(f"mp{g}" for g in range(n)) + "] if mapping else None"
    # (`_crossing` plans hashes ahead where it plans every group: the hold writes each)
    ahead = any(core.caches) and _firsts(core)
    held = [
        f"                v{g} = 0; w{g}[{ANCHOR - ANCHOR}] = ps{g}; w{g}[{EVICT - ANCHOR}] = 0"
        for g in range(n)
    ]
    pad = "    " if ahead else ""
    # A move that would make its slab due: the slab compacted first (nothing observable),
    # then the call planned again, the move allowed (as ``cross_ops`` does).
    compacting = (
        "pre = []; compact(pre, ({g},)); commit(ops_of(pre)); return cross(me, request_id, o, "
        "num_new, mapping, lookahead, compacted | (1 << {g}))"
    )
    return [
        "    def cross(me, request_id, o, num_new, mapping, lookahead=None, compacted=0):",
        f"        if not (type(num_new) is tuple or type(num_new) is list) or "
        f"len(num_new) != {n} or lookahead is None and o in specs:",
        f"            {ops}",
        *_lean_counts(core, ops, fresh=True),
        *_crossing(
            core, ops, "        ", compacting, typed=True, lean=True, mapped=True,
            register=True, ahead=True,
        ),
        # Content registered: a plain step's (`registering`'s), the request resting after it,
        # or, with hashes left ahead of the positions (a prompt's chunk before its last),
        # every group's fields held (its next steps register them: no slack, the anchor at
        # the positions, no eviction point), as `CoordinatorCore._register_boundary` holds
        # them.
        # (a slot mapping is the table's: the registration does not change it; a lookahead
        # would, the positions it commits being fewer: ``cross_ops``')
        "        if pend is not None:",
        "            if lookahead is not None:",
        f"                {ops}",
        *(["            if ah:", *held, "            else:"] if ahead else []),
        f"            {pad}known = pend.streams",
        f"            {pad}xo.append((setitem, extras, o, pend.resting([r if s < 0 or r >= "
        "len(known[s].hashes) else len(known[s].hashes) for s, r in zip(pend.stream_of, "
        "pend.registered)])))",
        *("        " + line for line in prep),
        f"        out = {out}",
        "        if lookahead is None:",
        *_committed(stores, "del owner[0]; return out  # the commit", "            ", "xo"),
        "        spec = tuple(lookahead)",
        *_committed(
            [*stores, ("specs", "o", "spec")], "del owner[0]; return out  # the commit",
            "        ", "xo",
        ),
        "",
    ]


def _lean_counts(core: CoordinatorCore, ops: str, fresh: bool = False) -> list[str]:
    """A lean crossing's counts ``q{g}`` read from ``num_new`` (ints, none negative, else
    ``ops``: its ops-list form), nothing rolled back (``r{g}``, ``j{g}``), and the locals
    `_crossing` reads. ``fresh``: a request whose first group holds nothing yet (no
    positions, no table: its first step) goes to ``first_step`` (`_first`) first."""
    n = len(core.names)
    hw, cw = core.table.hot_width, core.table.cold_width
    lines = [
        f"        {_tuple('q', n)[1:-1]} = num_new",
        "        if " + " or ".join(f"type(q{g}) is not int or q{g} < 0" for g in range(n)) + ":",
        f"            {ops}",
        "        " + " = ".join([*(f"r{g}" for g in range(n)), *(f"j{g}" for g in range(n)), "0"]),
        f"        c = o * {cw // hw}",
    ]
    if fresh and _firsts(core):
        lines += [
            f"        if not st[c + {_cold(ANCHOR, 0)}] and not st[c + {_cold(LENGTH, 0)}]:",
            "            return first_step(me, request_id, o, num_new, mapping, lookahead, "
            "compacted)",
        ]
    return [*lines, f"        {_pool_locals(core)}"]


def _firsts(core: CoordinatorCore) -> bool:
    """Whether ``first_step`` is written for ``core``: every group a planned kind with rows."""
    return all(_planned(core, g) for g in range(len(core.names)))


def _first(core: CoordinatorCore) -> list[str]:
    """The source of ``first_step(me, request_id, o, num_new, mapping, lookahead,
    compacted)``: a request's first step when every group's table is empty (a plain
    admission's; a prompt's first chunk): in each group a run of its pool's front
    (`BlockPool.front`) becomes its segment, placed at its slab's end (no room under
    `_table._FIRST_ROOM` entries, as `_table.grown` places a first segment), its fields as
    ``cross_ops`` writes them, then one line of stores. Anything else (a group with
    positions or blocks or no step, a slot mapping or a lookahead asked for, a stale or
    short front, a slab due, a step past the request's ``max_len``) goes to ``cross_ops``
    before anything changed.

    With prefix caching on (vLLM's default), as the core's boundary path plans it
    (`CoordinatorCore._register_boundary`): the cached free blocks among the runs taken
    (each its key's one block in its pool's one map: a block of an ended request) are
    evicted (`BlockPool.evicted_ops`, as `PoolPlan.take` evicts them); a request admitted
    with content and no hit registers the full blocks its step computes whose hashes it
    knows (a prompt not seen before: keys new to their maps, registered in passes in C),
    then rests (`RequestExtras.resting`) or, hashes left (a prompt's chunk before its last),
    holds its fields (slack 0: its next step registers them); content at rest stays as it
    is. Anything else so cached (a key already filed, a window's mask, a registered count)
    goes to ``cross_ops``."""
    n = len(core.names)
    hw, cw = core.table.hot_width, core.table.cold_width
    back = "return cross_ops(me, request_id, o, num_new, mapping, lookahead, compacted)"
    pool_of, first_of = _pools(core)
    lines = [
        "    def first_step(me, request_id, o, num_new, mapping, lookahead, compacted):",
        "        if mapping or lookahead is not None:",
        f"            {back}",
        "        x = extras.get(o) if extras else None",
        "        if x is not None and type(x) is not Resting and type(x) is not Part:",
        "            if type(x) is not Active:",
        f"                {back}",
        "            of, reg = x.stream_of, x.registered",
        f"        {_tuple('q', n)[1:-1]} = num_new  # ints, none negative (``cross``'s check)",
        f"        cb = o // {hw} * {cw}",
    ]
    for i, g in enumerate(first_of):
        lines.append(f"        pool{i} = pools[{g}]; f{i}, h{i} = pool{i}._fresh, pool{i}._head")
    stores = []
    for g in range(n):
        p, size, in_flight = core._pool[g], core._block_size[g], core._in_flight[g]
        i = pool_of[id(core.pools[g])]
        c = {k: f"cb + {_cold(k, g)}" if _cold(k, g) else "cb" for k in range(HOT, HOT + COLD + 1)}
        _, evicting = _eviction(core._managers[g], size)
        end = f"q{g}" if p == 1 else f"(q{g} + {p - 1}) // {p}"
        lines += [
            f"        end = {end}",
            f"        if not q{g} or st[{c[ANCHOR]}] or st[{c[LENGTH]}] or end > {in_flight} "
            f"or end > st[{c[MAXLEN]}] or due(garbage[{g}], len(slabs[{g}])):",
            f"            {back}",
            f"        want = (end + {size - 1}) // {size}",
            f"        run{g} = pool{i}.front(f{i}, h{i}, want)",
            f"        if run{g} is None:  # a stale entry among them, or short",
            f"            {back}",
            f"        fresh = min(want, pool{i}.num_blocks - f{i})",
            f"        f{i}, h{i} = f{i} + fresh, h{i} + want - fresh",
            f"        capacity = want if want < {_table._FIRST_ROOM} else "
            f"grown(want, 0, 0, want, (st[{c[MAXLEN]}] + {size - 1}) // {size})",
            "        if capacity > want:",
            f"            run{g} += zero1 * (capacity - want)",
            f"        skip, evict = 0, st[{c[EVICT]}]",
            "        if evict <= 0:",
            f"            evict = {evicting}",
            f"        index = q{g} // {p * size}",
            "        if index < want:",
            f"            base = run{g}[index] - index",
            f"            room = min(want * {size}, st[{c[MAXLEN]}])",
            f"            anchor = max(min(room, evict, (index + 1) * {size}) * {p}, q{g})",
            "        else:",
            f"            base, anchor = st[{c[BASE]}], q{g}",
            f"        t{g} = len(slabs[{g}])",
            f"        w{g} = array(typecode, (anchor, base, evict, 0, t{g}, want, capacity))",
            f"        s{g} = anchor - q{g}",
        ]
        stores += [
            f"slabs[{g}][t{g}:] = run{g}",
            f"hot[o + {g * HOT}:o + {g * HOT + HOT}] = [s{g}, q{g}]",
            f"st[{c[ANCHOR]}:{c[CAPACITY + 1]}] = w{g}",
        ]
    # Content (an active request's): per cacheable group, the full blocks the step computes
    # whose hashes its stream knows (``full{g}``), registered where none was (no hit) and
    # their keys are new to the group's map (a window's mask: the boundary path's); hashes
    # left hold every group's fields, else the request rests.
    caches = core.caches
    cacheable = [g for g, cache in enumerate(caches) if cache is not None]
    lines += [
        "        held, rest = False, None",
        *(f"        full{g} = 0" for g in cacheable),
        "        if x is not None and type(x) is Active:",
        "            streams = x.streams",
    ]
    for g, cache in enumerate(caches):
        if cache is None:
            continue
        rpb = cache.rows_per_block
        lines += [
            f"            if of[{g}] >= 0:",
            f"                hs = streams[of[{g}]].hashes",
            f"                if reg[{g}]:",
            f"                    {back}",
            f"                full{g} = min(q{g} // {rpb}, len(hs))",
            f"                if len(hs) > full{g}:",
            "                    held = True",
            f"                if full{g}:",
        ]
        if core._swa_mask[g] is not None:
            lines.append(f"                    {back}")
        else:
            lines += [
                f"                    keys{g} = hs[:full{g}]",
                f"                    if not cache_maps[{g}].keys().isdisjoint(keys{g}) "
                f"or len(set(keys{g})) != full{g}:",
                f"                        {back}",
            ]
    lines += [
        "            if held:  # hashes ahead: the next step registers them",
        *(
            f"                s{g} = 0; w{g}[{ANCHOR - ANCHOR}] = q{g}; w{g}[{EVICT - ANCHOR}] = 0"
            for g in range(n)
        ),
        "            else:",
        "                rest = x.resting(["
        + ", ".join(f"full{g}" if g in cacheable else f"reg[{g}]" for g in range(n))
        + "])",
    ]
    changes = []
    for i in range(len(first_of)):
        # The cached free blocks among the pool's runs (its groups'), evicted in the commit.
        runs = [f"run{g}" for g in range(n) if pool_of[id(core.pools[g])] == i]
        taken = runs[0] if len(runs) == 1 else "{" + ", ".join(f"*{r}" for r in runs) + "}"
        lines += [
            f"        gone{i} = pool{i}._cached.keys() & {taken} if pool{i}._cached else None",
            f"        if gone{i}:",
            f"            evicted{i} = pool{i}.sole_keys(gone{i})",
            f"            if evicted{i} is None:",
            f"                {back}",
            f"        u{i} = pool{i}._used + f{i} - pool{i}._fresh + h{i} - pool{i}._head",
        ]
        stores += [f"pool{i}._fresh = f{i}", f"pool{i}._head = h{i}", f"pool{i}._used = u{i}"]
        changes += [
            f"        if gone{i}:",
            f"            fx += pool{i}.evicted_ops(gone{i}, evicted{i})",
        ]
    # Then the registrations (after the evictions: a block taken may be filed again), the
    # registered counts of a request held, or its content at rest.
    for g in cacheable:
        changes += [
            f"        if full{g}:",
            f"            fx += pools[{g}].filed_ops(cache_maps[{g}], run{g}[:full{g}], "
            f"keys{g})",
            "            if held:",
            f"                fx.append((setitem, reg, {g}, full{g}))",
        ]
    changes += ["        if rest is not None:", "            fx.append((setitem, extras, o, rest))"]
    lines += [
        # Stores, then the dict and set operations on blocks and keys checked to be there,
        # or new, as ops: their one commit, a C call ending the line (nothing interrupts them
        # halfway: a method of the pool, Python, could be interrupted after the stores).
        "        fx = []",
        *changes,
        "        if fx:",
        "            fxi = ops_of(fx)",
        f"            {'; '.join(stores)}; commit(fxi); del owner[0]; return None  # the commit",
        "        " + "; ".join(stores) + "; del owner[0]; return None  # the commit",
        "",
    ]
    return lines


def _lean_content_cross(core: CoordinatorCore) -> list[str]:
    """The source of ``content_cross(me, request_id, o, num_new, contents, tails, adds,
    active)``: a step with content (``advance_with_content``'s) past some group's slack, the
    content filling no block (the ``tails`` of ``active``, the request's content in its
    active form, extended by ``adds``), planned as `_crossing` plans a step (`_lean_cross`'s
    way) and committed with the appends: the stores (``active`` among them: a resting
    form's was made by the caller), then the appends' one call, on one line (`_committed`);
    anything `_crossing` declines (content to register, a run `_run` does not take, a move
    that makes its slab due, ...) to ``content_cross_ops`` (`plan_cross`). (`_crossing`
    reads the request's stored form as ``extra``: what it has left to register.)"""
    n = len(core.names)
    ops = "return content_cross_ops(me, request_id, o, num_new, contents, tails, adds, active)"
    prep, stores = _stored(core)
    return [
        "    def content_cross(me, request_id, o, num_new, contents, tails, adds, active):",
        f"        if not (type(num_new) is tuple or type(num_new) is list) or "
        f"len(num_new) != {n} or o in specs:",
        f"            {ops}",
        *_lean_counts(core, ops),
        *_crossing(core, ops, "        ", typed=True, lean=True, register=True),
        *("        " + line for line in prep),
        # (the appends' iterator made first: the line's one call consumes it, in C)
        "        ext = map(extend, tails, adds)",
        *_committed(
            [*stores, ("extras", "o", "active")], "del owner[0]; return  # the commit",
            "        ", "xo", ("commit", "ext"),
        ),
        "",
    ]


def _extend(core: CoordinatorCore) -> list[str]:
    """The source of ``extend_keys(request_id, g, keys)`` (`FastFunctions.extend`): the
    typed layer's `extend_content` (a handle's group ``g`` of this core, ``keys`` a
    `ContentKeys`' int64 array, both checked) for its request's one stream of that sequence
    (`CoordinatorCore._axis_peers`), its content active or resting (made active, stored with
    the call's changes): where it appends to a tail that fills no block (a generated token),
    one C append with the release on its line (`_guard`); where it fills one,
    ``extend_fill``'s plan, committed on one line. Anything else, nothing changed and
    the token released, to `CoordinatorCore._extend_general`, which decides.
    `CoordinatorCore.extend_content` calls it too, once it has checked a caller's raw ``g``
    and keys (a generating stream makes this call once per sequence a step)."""
    return [
        *_extend_fill(core),
        "    peers, general_extend = core._axis_peers, core._extend_general",
        # Content resting (its blocks all registered, a compact tuple): its active form made
        # (`CoordinatorCore._active`) and stored with the call's changes (`_keep_active`);
        # the ops, or False where the general path decides.
        "    def extend_resting(o, g, keys, resting):",
        "        extra = active_of(resting, axis, rows_per_block)",
        "        of = extra.stream_of",
        "        s = of[g]",
        "        if s < 0:",
        "            return False",
        "        for h in peers[g]:",
        "            if of[h] >= 0 and of[h] != s:",
        "                return False",
        "        stream = extra.streams[s]",
        "        if len(stream.tail) + len(keys) < stream.rows_per_block:",
        "            stream.tail.extend(keys)  # (the new form's: read by nothing yet)",
        "            return [(setitem, extras, o, extra)]",
        "        ops = extend_fill(o, extra, (stream,), (keys,))",
        "        if ops is not False:",
        "            ops.append((setitem, extras, o, extra))",
        "        return ops",
        "",
        "    def extend_keys(request_id, g, keys):",
        "        me = []",
        "        try:",
        "            if claim(0, me) is not me:",
        '                contend(me, concurrent, "extend_content")',
        "            o = get(request_id) if type(request_id) is str else None",
        "            extra = extras_get(o)",
        "            if type(extra) is Active:",
        "                of = extra.stream_of",
        "                s = of[g]",
        "                if s >= 0:",
        "                    for h in peers[g]:",
        "                        if of[h] >= 0 and of[h] != s:",
        "                            break",
        "                    else:",
        "                        stream = extra.streams[s]",
        "                        tail = stream.tail",
        "                        if len(tail) + len(keys) < stream.rows_per_block:",
        "                            tail.extend(keys); del owner[0]; return  # the commit",
        "                        ops = extend_fill(o, extra, (stream,), (keys,))",
        "                        if ops is not False:",
        "                            commit(ops_of(ops)); del owner[0]; return  # the commit",
        "            elif extra is not None:  # at rest (`RestingExtras`, or a `PrefixPart`)",
        "                ops = extend_resting(o, g, keys, extra)",
        "                if ops is not False:",
        "                    commit(ops_of(ops)); del owner[0]; return  # the commit",
        "            del owner[0]",
        "        except BaseException:",
        "            drop(me)",
        "            raise",
        "        general_extend(request_id, g, keys)",
        "",
    ]


def _extend_fill(core: CoordinatorCore) -> list[str]:
    """The source of ``extend_fill(o, extra, picked, adds)``: `extend_content`'s plan where
    the keys ``adds[0]`` fill a block of the stream ``picked[0]`` of request ``o`` (its
    `RequestExtras`: ``extra``), as `CoordinatorCore._extend_general` plans it: the stream's
    new full blocks hashed and its tail cut (`_hashing`), every group's blocks of committed
    positions (less its speculative tail) whose hashes are known registered
    (`_registration`: `CoordinatorCore._register_plan`'s rule), and, where hashes stay
    ahead of the committed positions, the request's fields held (`CoordinatorCore._hold`'s
    stores: the steps that commit them register). Returns the ops, or False, nothing
    planned being kept, where a block to register is cached already or outside the table
    (the general path decides)."""
    n = len(core.names)
    hw, cw = core.table.hot_width, core.table.cold_width
    js = ", ".join(f"j{g}" for g in range(n)) + ("," if n == 1 else "")
    lines = [
        "    def extend_fill(o, extra, picked, adds):",
        "        ops = []",
        *_hashing("        "),
        "        of, streams, reg = extra.stream_of, extra.streams, extra.registered",
        "        ahead, lists = False, {}",
        f"        cb = o // {hw} * {cw}",
        f"        {js} = specs.get(o, nospec)",
        *(
            f"        r{g} = st[cb + {_cold(ANCHOR, g)}] - hot[o + {g * HOT + SLACK}]"
            for g in range(n)
        ),
    ]
    lines += _streams_registered(core, "j")
    held = ", ".join(
        f"(setitem, hot, o + {g * HOT + SLACK}, 0), (setitem, st, cb + {_cold(ANCHOR, g)}, "
        f"r{g}), (setitem, st, cb + {_cold(EVICT, g)}, 0)"
        for g in range(n)
    )
    lines += [
        "        if ahead:",
        f"            ops += ({held})",
        "        if lists:",
        "            lists_ops(ops, lists)",
        "        return ops",
        "",
    ]
    return lines


def _uncross(core: CoordinatorCore) -> list[str]:
    """The source of ``uncross(me, request_id, o, rejected)``: a rollback past the fast
    function's reach, with the token held, planned in a few lines per group with its constants
    written in (`CoordinatorCore._boundary_rollback`'s common case): at most one block freed per
    group, neither shared nor cached (no rolled-back position is), and the bound set again; its
    fields planned in the slice read (one per group) and written back on one line of stores
    (`_stored`'s way: every field, changed or not). Any other goes, before anything changed,
    to `CoordinatorCore._boundary_rollback`."""
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
        f"        c = o * {cw // hw}",
    ]
    lines += [f"        fr{i} = []" for i in range(len(first_of))]
    stores: list[_Store] = []
    freeing = set()
    for g in range(n):
        p, size = core._pool[g], core._block_size[g]
        kind = core._managers[g].kind
        h, a, i = g * HOT, _cold(ANCHOR, g), pool_of[id(core.pools[g])]
        out = [
            f"r = rejected[{g}]",
            f"if type(r) is not int or not 0 <= r <= spec[{g}]:",
            f"    {back}",
        ]
        if not core._has_rows[g] or kind not in _PLANNED:
            # Nothing planned for it: a rollback of it goes to the core; none changes nothing.
            lines += ["        " + line for line in [*out, "if r:", f"    {back}"]]
            continue
        freeing.add(i)
        slots = "rows" if p == 1 else f"(rows + {p - 1}) // {p}"
        out += [
            f"w{g} = st[{_plus('c', a)} : c + {a + COLD}]",
            f"hv{g}, hs{g} = hot[{_plus('o', h + SLACK)}], hot[o + {h + STEP}]",
            "if r:",
            f"    rows = w{g}[{ANCHOR - ANCHOR}] - hv{g} - r",
            f"    skipped, start, length = w{g}[{SKIPPED - ANCHOR} : {LENGTH - ANCHOR + 1}]",
            f"    cut = ({slots} + {size - 1}) // {size} - skipped",
            "    if cut < 0 or length - cut > 1:",
            f"        {back}",
            "    if cut < length:",
            # A block freed to the queue's front (`PoolPlan.release_front`'s common case):
            # neither held by another table nor cached (as no rolled-back position is).
            f"        block = slabs[{g}][start + cut]",
            f"        if block in pools[{g}]._shared or block in pools[{g}]._cached or "
            f"block in pools[{g}]._stale:",
            f"            {back}",
            f"        fr{i}.append(block)",
            f"        w{g}[{LENGTH - ANCHOR}] = cut",
            f"    index = rows // {p * size}",
            "    anchor = rows",
            "    if skipped <= index < skipped + cut:",
            f"        w{g}[{BASE - ANCHOR}] = slabs[{g}][start + index - skipped] - index",
            f"        room = min((skipped + cut) * {size}, w{g}[{MAXLEN - ANCHOR}])",
            f"        anchor = max(min(room, w{g}[{EVICT - ANCHOR}], (index + 1) * {size}) * {p}, "
            "rows)",
            f"    w{g}[{ANCHOR - ANCHOR}], hv{g}, hs{g} = anchor, anchor - rows, hs{g} - r",
        ]
        lines += ["        " + line for line in out]
        stores += [
            ("st", f"{_plus('c', a)} : c + {a + COLD}", f"w{g}"),
            ("hot", _plus("o", h + SLACK), f"hv{g}"),
            ("hot", f"o + {h + STEP}", f"hs{g}"),
        ]
    for i, g in enumerate(first_of):
        if i in freeing:
            more, queued = _fronted(i, g, f"fr{i}", f"pools[{g}]._used - len(fr{i})")
            lines += ["        " + line for line in more]
            stores += queued
    comma = "," if n == 1 else ""
    left = "(" + ", ".join(f"spec[{g}] - rejected[{g}]" for g in range(n)) + comma + ")"
    lines += [
        f"        left = {left}",
        *_committed([*stores, ("specs", "o", "left")], "del owner[0]; return  # the commit",
                    "        "),
        "",
    ]
    return lines


def _admit(core: CoordinatorCore) -> list[str]:
    """The source of ``admit(request_id, lengths) -> bool``: `CoordinatorCore.admit` of a
    request that needs nothing but its fields and its reservation (a plain id not admitted,
    its lengths per group ints or None within the limits, its caps known to fit:
    `AdmissionLedger.caps`, memoized per lengths; no policy bookkeeping: the caller knows):
    into a spare offset, else a new row at the table's end (`RequestTable.claim_ops`: the
    slice stores past the end append), stores on one line. Anything else returns False
    before anything changed (the token free): the caller takes the general path, which
    decides it."""
    n = len(core.names)
    hw, cw = core.table.hot_width, core.table.cold_width
    no = "del owner[0]; return False"
    lines = [
        "    ledger, spare, offset_ints = core.ledger, core.table.spare, core.table.offset_ints",
        "    reserved, ledger_shared, caps_of = ledger.reserved, ledger.shared, ledger.caps_of",
        "    limits, usable, default = ledger._limit, ledger._usable, core._limit",
        f"    blank_hot, blank_st = [0] * {hw}, array(typecode, bytes({cw}) * st.itemsize)",
        "    caps_known = core._caps_by_lengths  # lengths -> caps (`AdmissionLedger.caps`)",
        "",
        "    def admit(request_id, lengths):",
        "        me = []",
        "        try:",
        "            if claim(0, me) is not me:",
        '                contend(me, concurrent, "admit")',
        "            if (type(request_id) is not str or not 0 < len(request_id) <= "
        f"{MAX_REQUEST_ID_CHARS}",
        f"                    or request_id in offsets or len(lengths) != {n}):",
        f"                {no}",
    ]
    lines += _lengths_read(core, no)
    lines += _caps_read(core, no)
    # The changes as (target, index, value): the fields as `_new_request` writes them (zeros,
    # but each group's MAXLEN), the reservation, the id.
    writes = [("hot", f"o:o + {hw}", "blank_hot"), ("st", f"c:c + {cw}", "blank_st")]
    writes += [("st", f"c + {_cold(MAXLEN, g)}", f"l{g}") for g in range(n)]
    more, reserving = _reserved(core, no, "ledger_shared[{g}]")
    lines += more
    writes += reserving
    writes.append(("offsets", "request_id", "o"))
    stores = [f"{t}[{i}] = {v}" for t, i, v in writes]
    lines += [
        "            if spare:",
        "                o = spare[-1]",
        f"                c = o // {hw} * {cw}",
        # Stores and deletions only (no call): nothing interrupts them halfway.
        "                " + "; ".join(stores) + "; del spare[-1]; del owner[0]; return True"
        "  # the commit",
        # A new row: the first two stores, at the lists' ends, append it (its offset the
        # table's int object where it has one: `RequestTable.offset_ints`).
        "            o = len(hot)",
        "            if o < len(offset_ints): o = offset_ints[o]",
        f"            c = o // {hw} * {cw}",
        "            " + "; ".join(stores) + "; del owner[0]; return True  # the commit",
        "        except BaseException:",
        "            drop(me)",
        "            raise",
        "",
    ]
    return lines


def _lengths_read(core: CoordinatorCore, no: str) -> list[str]:
    """The lines (in ``admit`` and ``admit_prefix``) that read ``lengths`` into ``l{g}``, one
    per group: None its limit, else an int within it (``no`` otherwise)."""
    n = len(core.names)
    lines = ["            " + ", ".join(f"l{g}" for g in range(n)) + ("," if n == 1 else "")
             + " = lengths"]
    for g in range(n):
        lines += [
            f"            if l{g} is None:",
            f"                l{g} = default[{g}]",
            f"            elif type(l{g}) is not int or not 0 <= l{g} <= limits[{g}]:",
            f"                {no}",
        ]
    return lines


def _caps_read(core: CoordinatorCore, no: str) -> list[str]:
    """The lines that read the request's caps into ``c{g}`` (`AdmissionLedger.caps`,
    memoized per lengths), ``no`` where they can never fit."""
    n = len(core.names)
    ls = ", ".join(f"l{g}" for g in range(n)) + ("," if n == 1 else "")
    cs = ", ".join(f"c{g}" for g in range(n)) + ("," if n == 1 else "")
    lines = [
        f"            key = ({ls})",
        "            caps = caps_known.get(key)",
        "            if caps is None:",
        "                caps = tuple(caps_of(key))",
    ]
    for g in range(n):
        lines += [f"                if caps[{g}] > usable[{g}]:", f"                    {no}"]
    for group in core.ledger._members().values():
        if len(group) > 1:
            total = " + ".join(f"caps[{g}]" for g in group)
            lines += [f"                if {total} > usable[{group[0]}]:"]
            lines += [f"                    {no}"]
    return [
        *lines,
        "                if len(caps_known) < 256:",
        "                    caps_known[key] = caps",
        f"            {cs} = caps",
    ]


def _reserved(
    core: CoordinatorCore, no: str, shared: str
) -> tuple[list[str], list[tuple[str, str, str]]]:
    """Where the policy reserves: the lines that check the caps ``c{g}`` fit what is left of
    each pool (``shared``: the ledger's shares of group ``{g}``, as an expression), ``no``
    otherwise, and set ``r{g}``, the reservations after; and their stores."""
    n, ledger = len(core.names), core.ledger
    if not ledger._reserve:
        return [], []
    members = ledger._members()
    lines = []
    if len(members) == n:
        for g in range(n):
            lines += [
                f"            if c{g} > usable[{g}] - reserved[{g}] + {shared.format(g=g)}:",
                f"                {no}",
            ]
    else:
        for group in members.values():
            held = " + ".join(f"reserved[{g}] - {shared.format(g=g)}" for g in group)
            total = " + ".join(f"c{g}" for g in group)
            lines += [
                f"            if {total} > usable[{group[0]}] - ({held}):",
                f"                {no}",
            ]
    lines += [f"            r{g} = reserved[{g}] + c{g}" for g in range(n)]
    return lines, [("reserved", str(g), f"r{g}") for g in range(n)]


def _admit_prefix(core: CoordinatorCore) -> list[str]:
    """The source of ``admit_prefix(request_id, lengths, prefix, also, check) -> hits | None``:
    `CoordinatorCore.admit_with_prefix` of a request giving content to every group, each
    cacheable (no ``check``): `CoordinatorCore._lean_prefix` written out for the layout. Each
    sequence's hit looked up (a lone full-attention group's in C: its hashes' blocks mapped
    in one pass, cut at the first missing; a lone window group's where every block it reads
    is cached, `_window_hit`; else `longest_common_hit`), each pool's hit blocks touched as
    `PoolPlan.touch` touches them (another reference where held, a free cached one taken back
    out of the queue, its entry stale; a pool with every block free forgets the ids it handed
    out), the reservation less the hit blocks another request holds in groups that keep
    theirs, the fields and segments as `_lean_fields` writes them, the extras as `_extras_of`
    makes them, the caches' counts, as stores on one line and the few operations no store
    makes committed at its end. None, having changed nothing (the token free), where
    `_lean_prefix` declines or the general path would raise (a bad id or length, caps that
    never or not now fit): the caller's general path decides. None in place of the function
    where some group caches nothing."""
    if None in core.caches:
        return ["    admit_prefix = None", ""]
    n = len(core.names)
    hw, cw = core.table.hot_width, core.table.cold_width
    caches = [c for c in core.caches if c is not None]
    no = "del owner[0]; return None"
    pools = core._lean_pools
    lines = [
        "    cache_of = core.caches",
        "    cget = tuple(c.blocks.get for c in core.caches)",
        "    shapes = core._shapes",
        "",
        "    def admit_prefix(request_id, lengths, prefix, also, check):",
        "        me = []",
        "        try:",
        "            if claim(0, me) is not me:",
        '                contend(me, concurrent, "admit")',
        "            if (type(request_id) is not str or not 0 < len(request_id) <= "
        f"{MAX_REQUEST_ID_CHARS}",
        f"                    or request_id in offsets or len(lengths) != {n}",
        f"                    or len(prefix) != {n} or check is not None):",
        f"                {no}",
    ]
    # A pool whose queue is due a compaction: the general path compacts it first.
    for groups in pools:
        q = groups[0]
        lines += [
            f"            pool{q} = pools[{q}]",
            f"            if pool{q}._num_stale >= {_COMPACT_AFTER} and 2 * pool{q}._num_stale >= "
            f"len(pool{q}._queue) - pool{q}._head:",
            f"                {no}",
        ]
    lines += _lengths_read(core, no)
    lines += [
        "            " + ", ".join(f"p{g}" for g in range(n)) + " = "
        + ", ".join(f"prefix.get({g})" for g in range(n)),
        "            if " + " or ".join(f"p{g} is None" for g in range(n)) + ":",
        f"                {no}",
    ]
    # Each sequence's hit: its content's rows one length across its groups, within each
    # group's length; the last position is always computed (its output).
    for a, readers in enumerate(core._lean_axes):
        m0 = readers[0]
        lines.append(f"            rows{a} = p{m0}.rows")
        for g in readers:
            same = f"p{g}.rows != rows{a} or " if g != m0 else ""
            lines += [
                f"            if {same}rows{a} > l{g} * {core._pool[g]}:",
                f"                {no}",
            ]
        kind = caches[m0].kind if len(readers) == 1 else None
        if kind == "full_attention":
            g = m0
            rpb = caches[g].rows_per_block
            lines += [
                # (its blocks to the first miss: a prompt not seen before misses at its first)
                f"            nb = (rows{a} - 1) // {rpb} if rows{a} else 0",
                f"            t{g} = list(map(cget[{g}], p{g}.hashes[:nb])) if nb and p{g}.hashes "
                f"and cget[{g}](p{g}.hashes[0]) is not None else []",
                f"            if None in t{g}:",
                f"                del t{g}[t{g}.index(None):]",
                f"            if countOf(map(type, t{g}), int) != len(t{g}):  # a key of several",
                f"                t{g} = [b if type(b) is int else b[0] for b in t{g}]",
                f"            h{g} = len(t{g}) * {rpb}",
            ]
        else:
            ts = ", ".join(f"t{g}" for g in readers) + ("," if len(readers) == 1 else "")
            given = ", ".join(f"cache_of[{g}]" for g in readers)
            hashes = ", ".join(f"p{g}.hashes" for g in readers)
            general = [
                f"hit, ({ts}) = longest_common_hit(({given},), ({hashes},), max(rows{a} - 1, 0))",
                *(f"h{g} = hit" for g in readers),
            ]
            if kind in ("sliding_window", "chunked_local"):
                lines += _window_hit(caches[m0], m0, a, general)
            else:
                lines += ["            " + line for line in general]
    lines += _caps_read(core, no)
    lines.append("            xo = []")
    # Each pool's hit blocks touched: a block another table holds one reference more, a free
    # cached one taken back out of the queue (its entry stale); the queue's taken entries
    # dropped as the plan's emit drops them.
    for groups in pools:
        q = groups[0]
        lines.append(f"            tk{q} = []")
        for g in groups:
            lines += [f"            lv{g} = t{g}", f"            d{g} = 0", f"            if t{g}:"]
            if caches[g].kind != "full_attention":  # a window's evicted entries lead
                lines += [
                    f"                if not t{g}[0]:",
                    f"                    lv{g} = [b for b in t{g} if b]",
                ]
            lines += [
                f"                if len(set(lv{g})) != len(lv{g}):",
                f"                    {no}",
                f"                fl = pool{q}._free_cached",
                f"                back = set(compress(lv{g}, map(fl.__getitem__, lv{g})))",
                f"                kept = lv{g}",
                "                if back:",
                f"                    tk{q} += [b for b in lv{g} if b in back]",
                f"                    kept = [b for b in lv{g} if b not in back]",
                "                if kept:",
                f"                    sh = pool{q}._shared",
                "                    xo.append((sh.update, {b: sh.get(b, 1) + 1 for b in kept}))",
            ]
            if core._keeps[g]:
                lines.append(f"                d{g} = len(kept)")
        lines += [
            f"            used = pool{q}._used + len(tk{q})",
            f"            head, queue = pool{q}._head, pool{q}._queue",
            "            if head and (head >= len(queue) or 2 * head >= len(queue) or not used):",
            f"                xo += [(queue.__delitem__, slice(0, head)), (setattr, pool{q}, "
            "'_head', 0)]",
            # Every block free: the ids handed out are not kept (as the plan's emit).
            f"            if not used and len(pool{q}._iota):",
            f"                xo.append((pool{q}._iota.__delitem__, slice(None)))",
            f"            if tk{q}:",
            f"                sa = pool{q}._stale",
            f"                xo += [(sa.update, {{b: sa.get(b, 0) + 1 for b in tk{q}}}), "
            f"(setattr, pool{q}, '_num_stale', pool{q}._num_stale + len(tk{q})), "
            f"(setattr, pool{q}, '_used', used), flag_op(pool{q}._free_cached, tk{q}, 0)]",
        ]
    # The reservation, less the hit blocks another request holds (as `AdmissionLedger.take`).
    writes = []
    lines += [f"            sh{g} = ledger_shared[{g}] + d{g}" for g in range(n)]
    writes += [("ledger_shared", str(g), f"sh{g}") for g in range(n)]
    more, reserving = _reserved(core, no, "sh{g}")
    lines += more
    writes += reserving
    # The fields (as `_lean_fields`): each hit a segment at its slab's end with room for its
    # content's entries.
    cold = []
    sequence = {g: a for a, readers in enumerate(core._lean_axes) for g in readers}
    for g in range(n):
        rows = f"rows{sequence[g]}"
        lines += [
            f"            sk{g} = n{g} = rm{g} = 0",
            f"            if lv{g}:",
            f"                sk{g}, sb = len(t{g}) - len(lv{g}), slabs[{g}]",
            f"                n{g}, slots = len(sb), min(-(-{rows} // {core._pool[g]}), l{g})",
            f"                rm{g} = max(-(-slots // {core._block_size[g]}) - sk{g}, len(lv{g}))",
            f"                seg = array('i', lv{g})",
            f"                if rm{g} > len(lv{g}):",
            f"                    seg += zero1 * (rm{g} - len(lv{g}))",
            "                xo.append((sb.extend, seg))",
        ]
        if caches[g].kind != "full_attention":
            # A hit of evicted entries only (a chunked group's positions before its current
            # chunk, its blocks there missing): no segment, as `_new_request` places none.
            lines += [f"            elif t{g}:", f"                sk{g} = len(t{g})"]
        cold += [f"h{g}", "0", "0", f"sk{g}", f"n{g}", f"len(lv{g})", f"rm{g}", f"l{g}"]
    # The extras (as `_extras_of`): one stream per sequence and granularity, in group order.
    streams: dict[tuple[int, int], int] = {}
    first: list[int] = []
    for g in range(n):
        key = (core._axis[g], caches[g].rows_per_block)
        if key not in streams:
            streams[key] = len(first)
            first.append(g)
    shape = tuple(streams[(core._axis[g], caches[g].rows_per_block)] for g in range(n))
    made = ", ".join(
        f"Stream({core._axis[g]}, {caches[g].rows_per_block}, p{g}.hashes, p{g}.tail, "
        f"p{g}.parent, p{g})"
        for g in first
    )
    flat = ", ".join(f"p{g}.hashes, p{g}.tail, p{g}.parent" for g in first)
    registered = "[" + ", ".join(f"len(t{g})" for g in range(n)) + "]"
    pending = " or ".join(f"len(p{g}.hashes) > len(t{g})" for g in range(n))
    lines += [
        f"            shape = shapes.setdefault({shape!r}, {shape!r})",
        f"            if {pending}:",
        f"                ex = Active(({made},), shape, {registered})",
        "            else:",
        # One group: the caller's part itself, as `RequestExtras.resting` keeps it.
        *(["                ex = p0 if type(p0) is Part else Resting([shape, *"
            f"{registered}, {flat}])"] if n == 1 else
          [f"                ex = Resting([shape, *{registered}, {flat}])"]),
        f"            fields = array(typecode, ({', '.join(cold)}))",
        "            if also:",
        "                xo += also",
        "            xops = ops_of(xo)",
    ]
    writes += [("hot", f"o:o + {hw}", "blank_hot"), ("st", f"c:c + {cw}", "fields")]
    writes += [("extras", "o", "ex"), ("offsets", "request_id", "o")]
    stores = [f"{t}[{i}] = {v}" for t, i, v in writes]
    for g in range(n):
        stores += [
            f"cache_of[{g}].requests += 1",
            f"cache_of[{g}].queried += p{g}.rows",
            f"cache_of[{g}].hits += h{g}",
        ]
    hits = "[" + ", ".join(f"h{g}" for g in range(n)) + "]"
    lines += [
        "            if spare:",
        "                o = spare[-1]",
        f"                c = o // {hw} * {cw}",
        "                " + "; ".join(stores) + "; del spare[-1]; commit(xops); del owner[0]; "
        f"return {hits}  # the commit",
        "            o = len(hot)",
        "            if o < len(offset_ints): o = offset_ints[o]",
        f"            c = o // {hw} * {cw}",
        "            " + "; ".join(stores) + f"; commit(xops); del owner[0]; return {hits}"
        "  # the commit",
        "        except BaseException:",
        "            drop(me)",
        "            raise",
        "",
    ]
    return lines


def _window_hit(cache: Any, g: int, a: int, general: list[str]) -> list[str]:
    """The hit of a lone window group ``g`` (of sequence ``a``) where every block it reads is
    cached, in C: a sliding window's last ``cdiv(window - 1, block_size)`` blocks of the
    longest hit (vLLM's right-to-left scan finds them first), a chunked-local group's blocks
    of the hit's last chunk (those before it stand as the null block); else ``general``
    (`longest_common_hit`). A lone group's hit is a multiple of its block, so these are the
    scans' answers when nothing they read is missing."""
    rpb = cache.rows_per_block
    if cache.kind == "sliding_window":
        need = max(-(-(cache.window - 1) // cache.block_size), 1)  # (the scan keeps one)
        first = f"max(mb - {need}, 0)"
    else:
        first = f"mb * {cache.block_size} // {cache.chunk} * {cache.chunk} // {cache.block_size}"
    return [
        f"            hs = p{g}.hashes",
        f"            mb = min((rows{a} - 1) // {rpb} if rows{a} else 0, len(hs))",
        f"            lo = {first}",
        f"            read = list(map(cget[{g}], hs[lo:mb]))",
        "            if None not in read and countOf(map(type, read), int) == len(read):",
        f"                t{g} = [0] * lo + read if lo else read",
        f"                h{g} = mb * {rpb}",
        "            else:",
        *("                " + line for line in general),
    ]


def _free(core: CoordinatorCore) -> list[str]:
    """The source of ``free(request_id, *policy) -> bool``: `CoordinatorCore.free` of a request
    in none of the three dicts ``policy``, the bookkeeping its end pops
    (`PolicyState.freed_ops`). Not the last request: its blocks to the back of their pools'
    queues (a pool's taken entries dropped as `PoolPlan.emit` drops them; tail first where it
    cached content, as `CoordinatorCore._release_plan` frees them), its reservation given
    back, its offset spare, its segments garbage, as stores on one line; in a pool with
    shared or cached blocks, those another table holds one reference less and the cached
    ones free with their content (`BlockPool.ended`), the ledger's shares counted as
    `CoordinatorCore._unshared` counts them, its content and speculative tail forgotten: the
    few operations no store makes, committed at the end of that line; with a slab it leaves
    `due` compacted, in one commit (a pool left with no block held goes to the general
    path). The last: the table, the pools and the policy's dicts emptied
    (`RequestTable.release_ops`, `PoolPlan.emit`'s pool as built: every pool left with no
    block held and ids handed out, none shared or cached), in one commit; where a pool keeps
    cached blocks, its end as the others' (its queue's taken entries and ids' run dropped,
    every block being free) with the table and the policy's dicts emptied and each pool that
    caches nothing as built, unless such a pool's queue is due to forget the order of its
    blocks without content (`BlockPool.idle_due`: the general path). Anything else returns
    False before anything changed (the token free): the caller takes the general path."""
    n = len(core.names)
    ledger = core.ledger
    hw, cw = core.table.hot_width, core.table.cold_width
    no = "del owner[0]; return False"
    pool_of, first_of = _pools(core)
    pools = range(len(first_of))
    cached = " or ".join(f"pool{i}._cached" for i in pools)
    shared = " or ".join(f"pool{i}._shared" for i in pools)
    lines = [
        "    table_spare, table_hot = core.table.spare, core.table.hot",
        *(
            f"    pool{i}, queue{i} = pools[{g}], pools[{g}]._queue"
            for i, g in enumerate(first_of)
        ),
        # The end of the last request, less the reservation and the policy's dicts: what
        # `_release_plan` and `release_ops` add (``table_emptied``), and per pool what
        # `PoolPlan._emit_built` adds (``built{i}``: a pool that caches nothing).
        "    table_emptied = [(extras.clear,), (specs.clear,), (offsets.clear,),",
        "                     (table_hot.__delitem__, slice(None)),",
        "                     (st.__delitem__, slice(None)),",
        "                     (table_spare.__delitem__, slice(None))]",
        "    table_emptied += [(slab.__delitem__, slice(None)) for slab in slabs]",
        f"    table_emptied += [(setitem, table_garbage, g, 0) for g in range({n})]",
        "    table_emptied += core._batch_caches_emptied()",
        "    def built(pool):",
        '        ops = [(setattr, pool, "_fresh", 1), (pool._queue.__delitem__, slice(None)),',
        "               (pool._iota.__delitem__, slice(None)), (pool._shared.clear,),",
        "               (pool._stale.clear,), (pool._cached.clear,)]  # (none cached: no flag)",
        '        return ops + [(setattr, pool, x, 0) for x in ("_head", "_num_stale", "_used")]',
        *(f"    built{i} = built(pool{i})" for i in pools),
        "    emptied = table_emptied + " + " + ".join(f"built{i}" for i in pools),
        "",
        "    def free(request_id, arrival, priority, waiting):",
        "        me = []",
        "        try:",
        "            if claim(0, me) is not me:",
        '                contend(me, concurrent, "free")',
        "            o = get(request_id) if type(request_id) is str else None",
        "            if (o is None or request_id in arrival or request_id in priority"
        " or request_id in waiting):",
        f"                {no}",
        f"            c = o // {hw} * {cw}",
        *(f"            n{g} = st[c + {_cold(LENGTH, g)}]" for g in range(n)),
    ]
    if ledger._reserve:
        lines += [
            f"            key = ({', '.join(f'st[c + {_cold(MAXLEN, g)}]' for g in range(n))},)",
            "            caps = caps_known.get(key) or caps_of(key)",
            *(f"            r{g} = reserved[{g}] - caps[{g}]" for g in range(n)),
        ]
    given = [(g, f"r{g}") for g in range(n)] if ledger._reserve else []
    # The last request: its pools as built (`PoolPlan.emit`), unless one keeps cached blocks
    # (then ``last``: its end below, the table emptied and each pool that caches nothing as
    # built, or the general path where such a pool's queue is due to forget the order of its
    # blocks without content: `BlockPool.idle_due`, `PoolPlan._emit_idle`).
    due_idle = " or ".join(f"pool{i}._cached and pool{i}.idle_due()" for i in pools)
    lines += [
        "            last = len(offsets) == 1",
        f"            if last and not ({cached}):",
        f"                if {shared}:",
        f"                    {no}",
    ]
    for i in range(len(first_of)):
        held = " + ".join(f"n{g}" for g in range(n) if pool_of[id(core.pools[g])] == i)
        lines += [
            f"                if pool{i}._used != {held} or pool{i}._fresh < 2:",
            f"                    {no}",
        ]
    lines += [
        "                ops = emptied + [(arrival.clear,), (priority.clear,), (caps_known.clear,)"
        + "".join(f", (setitem, reserved, {g}, {r})" for g, r in given)
        + "]",
        "                commit(ops_of(ops)); del owner[0]; return True  # the commit",
        f"            if last and ({due_idle}):",
        f"                {no}",
    ]
    lines += [
        # What no store makes (`_release_plan`): its content and speculative tail forgotten;
        # its blocks freed tail first where it cached content.
        "            x = extras_get(o) if extras else None",
        "            more = [] if x is None else [(extras.pop, o)]",
        "            if specs and o in specs:",
        "                more.append((specs.pop, o))",
        "            rev = x is not None and (type(x) is Part or x.has_streams())",
        "            if last:  # the table and the policy's dicts emptied (`_release_plan`)",
        "                more += table_emptied",
        "                more += [(arrival.clear,), (priority.clear,), (caps_known.clear,)]",
    ]
    stores, ops = [], []
    for g in range(n):
        lines += [
            f"            s{g} = st[c + {_cold(START, g)}]",
            f"            g{g} = table_garbage[{g}] + st[c + {_cold(CAPACITY, g)}]",
        ]
        stores.append(f"table_garbage[{g}] = g{g}")
        ops.append(f"(setitem, table_garbage, {g}, g{g})")
    due = " or ".join(
        f"g{g} >= {_table._RETURN_MIN} and g{g} >= len(slabs[{g}]) >> 2" for g in range(n)
    )
    for i in range(len(first_of)):
        groups = [g for g in range(n) if pool_of[id(core.pools[g])] == i]
        lives = [f"slabs[{g}][s{g}:s{g} + n{g}]" for g in groups]
        if len(groups) == 1:
            lines += [f"            back{i} = {lives[0]}", f"            if rev: back{i}.reverse()"]
        else:
            lines += [
                f"            back{i} = ({' + '.join(f'{x}[::-1]' for x in lives)}) if rev "
                f"else {' + '.join(lives)}"
            ]
        # The ledger's shares its blocks leave (`CoordinatorCore._unshared`), then the pool's
        # end of them where it shares or caches blocks (`BlockPool.ended`). A pool of one
        # group's blocks takes the shares from its end, which counts the blocks another table
        # holds as it lowers their counts; a pool of several groups' counts each group's here.
        for g, live in zip(groups, lives, strict=True):
            if core._keeps[g] and len(groups) > 1:
                lines += [
                    f"            if ledger_shared[{g}] and pool{i}._shared:",
                    f"                u = len(pool{i}._shared.keys() & {live})",
                    "                if u:",
                    f"                    more.append((setitem, ledger_shared, {g}, "
                    f"ledger_shared[{g}] - u))",
                ]
        # Those without content to the queue's front, the cached ones to its back
        # (`PoolPlan.release_front`).
        lines += [
            f"            if pool{i}._shared or pool{i}._cached or pool{i}._stale:",
            f"                got = pool{i}.ended(back{i})",
            "                if got is None:",
            f"                    {no}",
            f"                front{i}, back{i} = got[0], got[1]; more += got[2]",
            *(
                [
                    f"                if got[3] and ledger_shared[{groups[0]}]:",
                    f"                    more.append((setitem, ledger_shared, {groups[0]}, "
                    f"ledger_shared[{groups[0]}] - got[3]))",
                ]
                if len(groups) == 1 and core._keeps[groups[0]]
                else []
            ),
            "            else:",
            f"                front{i}, back{i} = back{i}, noblock",
            f"            used{i}, head{i}, at{i} = pool{i}._used - len(front{i}) - len(back{i}), "
            f"pool{i}._head, len(queue{i})",
            # Every block free only at the end of the last request (then `PoolPlan.emit`
            # drops the taken entries and the ids' run, and a pool that caches nothing is as
            # built).
            f"            if used{i} if last else not used{i}:",
            f"                {no}",
            f"            if last and len(pool{i}._iota):",
            f"                more.append((pool{i}._iota.__delitem__, slice(None)))",
            # `PoolPlan.emit`: the entries taken dropped once they are half the queue (or
            # every block is free), then the front over those left, or after room made
            # (`BlockPool.front_ops`).
            f"            cut{i} = head{i} if last or head{i} >= at{i} or 2 * head{i} >= at{i} + "
            f"len(back{i}) else 0",
            f"            hd{i} = head{i} - cut{i}",
            *(
                "            " + line
                for line in _front_room(i, f"front{i}", f"at{i} + len(back{i}) - cut{i}")
            ),
        ]
        stores += [
            f"queue{i}[at{i}:] = back{i}",
            f"del queue{i}[:cut{i}]",
            f"queue{i}[a{i}:hd{i}] = put{i}",
            f"pool{i}._head = lo{i}",
            f"pool{i}._used = used{i}",
        ]
        ops += [
            f"(queue{i}.extend, back{i})",
            f"(queue{i}.__delitem__, slice(0, cut{i}))",
            f"(setitem, queue{i}, slice(a{i}, hd{i}), put{i})",
            f'(setattr, pool{i}, "_head", lo{i})',
            f'(setattr, pool{i}, "_used", used{i})',
        ]
    stores += [f"reserved[{g}] = {r}" for g, r in given]
    stores += ["del offsets[request_id]", "table_spare[at:] = (o,)"]
    ops += [f"(setitem, reserved, {g}, {r})" for g, r in given]
    ops += ["(offsets.pop, request_id)", "(table_spare.append, o)"]
    stored = "            " + "; ".join(stores)
    lines += [
        "            if last:",
        *(
            f"                if not pool{i}._cached and pool{i}._fresh > 1:\n"
            f"                    more += built{i}"
            for i in pools
        ),
        # A slab the end leaves due is compacted with it, as `CoordinatorCore.free` does:
        # after the end's garbage counts, before the rest (which no compaction reads); the
        # last request's end empties the slabs.
        f"            if not last and ({due}):",
        "                plan = SlabPlan([])",
        "                plan.garbage.update({" + ", ".join(f"{g}: g{g}" for g in range(n))
        + "})",
        f"                ops = [{', '.join(ops[:n])}]",
        "                compact_ops(ops, (), plan, o)",
        f"                ops += [{', '.join(ops[n:])}]",
        "                ops += more",
        "                commit(ops_of(ops)); del owner[0]; return True  # the commit",
        "            at = len(table_spare)",
        # Stores and deletions only (no call), then what they leave: nothing interrupts them
        # halfway (`kvunits.runtime._guard`).
        "            if more:",
        "                it = ops_of(more)",
        "    " + stored + "; commit(it); del owner[0]; return True  # the commit",
        stored + "; del owner[0]; return True  # the commit",
        "        except BaseException:",
        "            drop(me)",
        "            raise",
        "",
    ]
    return lines


def _plus(name: str, k: int) -> str:
    """``name + k`` as source, ``name`` for 0 (an int past 256 added to 0 is a new object)."""
    return f"{name} + {k}" if k else name


def _at(field: int) -> str:
    """The source that reads a request's cold field (its position after ``c``)."""
    return f"st[c + {field}]" if field else "st[c]"


def _fits(
    core: CoordinatorCore, g: int, typed: bool, lazy: bool = False, net: bool = False
) -> str:
    """The condition (source) that the rollback of ``r{g}`` positions of group ``g`` (what
    the latest step left speculative: ``j{g}``) and a step of ``q{g}`` after it only change
    its slack (``s{g}``), by ``q{g} − r{g}``: the step ends past the rolled-back end
    (``q{g} > r{g}``) within the slack. Then the step ends in the block of the bound, and
    the rollback frees no block (the step takes them again, `CoordinatorCore._kept`): a
    table whose length follows its positions holds exactly what their end needs (a rollback
    gives back what only its positions used, a step takes what its end needs; the tests'
    ``check_ends``) and the step ends past that end, so nothing is read for it; a fixed
    table (state, cross attention) is compared with its length. The new slack is ``s{g} +
    r{g} − q{g}``. `_crossing` plans every other (this case too). With ``typed``, the
    ``r{g}`` are the typed layer's (ints, none negative: read from quantities). ``c`` is the
    request's cold offset. With ``lazy``, ``j{g}`` is read only where ``r{g}`` is not 0 (a
    step without rollback needs no speculative tail). With ``net``, ``n{g}`` is ``q{g} −
    r{g}`` where that is positive, else past any slack (``never + 1``): its one test
    replaces two."""
    p, size = core._pool[g], core._block_size[g]
    manager = core._managers[g]
    rows = f"{_at(_cold(ANCHOR, g))} - s{g} - r{g}"  # after the rollback
    step = f"n{g}" if net else f"q{g} - r{g}"
    # A fixed table (state, cross attention): its rollback frees no block where it holds
    # no more than that.
    fixed = manager.kind in ("state", "cross_attention")
    held = f"{manager.table_length(0)} >= {_at(_cold(SKIPPED, g))} + {_at(_cold(LENGTH, g))}"
    # The typed layer's counts are read from quantities: ints, never negative.
    integer = "" if typed else f"type(r{g}) is int and 0 <= "
    within = f"{step} <= s{g}" if net else f"0 < {step} <= s{g}"
    fits = f"{integer}r{g} <= j{g} and {within}" + (f" and (not r{g} or {held})" if fixed else "")
    if lazy:
        integer = "" if typed else f"type(r{g}) is int and 0 <= r{g} and "
        tail = f"r{g} <= specs.get(o, nospec)[{g}]" + (f" and {held}" if fixed else "")
        fits = f"{integer}{within} and (not r{g} or {tail})"
    first = f"({rows}) // {p}" if p > 1 else rows
    end = f"({rows} + q{g} + {p - 1}) // {p}" if p > 1 else f"{rows} + q{g}"
    touched = f"{end} - ({first})" if p > 1 else f"q{g}"
    if core._in_flight[g] < size or not core._has_rows[g]:
        # A step within a block is within max_in_flight when that is a block or more (as
        # the plain steps check it).
        fits += f" and {end} - ({first}) <= {core._in_flight[g]}"
    else:
        # But a step after a rollback starts where the rollback ends, a block back or more:
        # within the slack it may still touch more than max_in_flight (the general path
        # refuses it).
        fits += f" and (not r{g} or {touched} <= {core._in_flight[g]})"
    return fits


def _past_eviction(core: CoordinatorCore, g: int, typed: bool) -> str | None:
    """For a window's group ``g`` (sliding or chunked, planned by `_crossing`), where its
    rollback of ``r{g}`` and step of ``q{g}`` pass its slack: the condition (source, reading
    its cold fields at ``c`` and setting ``e{g}``, the step's end in positions) under which
    the step takes no block and evicts none. Then it is stores: its ``ANCHOR`` moved to
    ``e{g}``, its slack 0. None for any other group.

    A window's slack stops at ``EVICT``, the first slot a step may start at that evicts (a
    block leaves the window), because the slack bounds a step's end. A step that starts
    before it and ends past it (a drafting step of several positions does, two or three
    times a block) evicts nothing, and after it the slack is 0, so each step after it until
    one starts past ``EVICT`` went to the crossing too: a fifth of a drafting step's calls
    beside the pooled audio window took and dropped no block there (*spec audio + text*).
    Where the table holds the step's end (no take), no content waits (`RequestExtras.pending`:
    the crossing's registration), the rollback is within the drafts, the step ends past the
    rolled-back end and within max_in_flight and max_len (the crossing's checks), such a step
    changes the positions alone. Its slack is left 0 (`_table`: anything may set it lower).
    The crossing gives it up to the next bound, ``BASE`` with it; past ``EVICT``, the case
    this is for, that bound is behind the step's end, so no slack either. With slack 0 no
    fast step reads ``BASE``, and the next step's crossing sets it."""
    manager = core._managers[g]
    kind = manager.kind
    if kind not in ("sliding_window", "chunked_local") or not core._has_rows[g]:
        return None
    p, size = core._pool[g], core._block_size[g]

    def field(name: int) -> str:
        return f"st[{_plus('c', _cold(name, g))}]"

    rows = f"(rows := {field(ANCHOR)} - s{g} - r{g})"  # the step's start (positions)
    first = rows if p == 1 else f"{rows} // {p}"
    end = f"e{g}" if p == 1 else f"(e{g} + {p - 1}) // {p}"
    touched = f"q{g}" if p == 1 else f"{end} - rows // {p}"
    integer = "" if typed else f"type(r{g}) is int and 0 <= r{g} and "
    pending = (
        " and not (extras and type(dx := extras.get(o)) is Active and dx.pending())"
        if _caching(core)
        else ""
    )
    # Its fields read as the checks need them, after the counts' (a crossing that evicts, a
    # window's common other one, fails at the second read). ``e{g}``: the step's end.
    condition = (
        f"{integer}r{g} <= j{g} and q{g} > r{g} and {first} < {field(EVICT)} and "
        f"({'' if p == 1 else '('}(e{g} := rows + q{g}){'' if p == 1 else f' + {p - 1}) // {p}'}"
        f" + {size - 1}) // {size} == {field(SKIPPED)} + {field(LENGTH)} and "
        f"{touched} <= {core._in_flight[g]} and {end} <= {field(MAXLEN)}{pending}"
    )
    return condition


def _moved_row(
    core: CoordinatorCore,
    g: int,
    typed: bool,
    indent: str,
    first: str,
    fits: list[str],
    cold: list[str],
    spec: list[str],
    row: str,
) -> list[str]:
    """A batch's pass, where group ``g`` is past its slack (the groups before it within
    theirs): for a window's group, the lines that make its step stores where it takes no
    block and evicts none (`_past_eviction`) and every later group is within its slack
    (``fits``), while ``first`` holds (no request slow before it): its anchor stored (an
    op), then ``row`` (lines: its row with slack 0 for ``g``, marked crossed); else nothing
    (the crossing plans it). ``cold`` and ``spec`` compute its cold offset and speculative
    tail where the pass has not yet.

    Only for a pooled window (P positions a slot): in a batch the check runs first for each
    of the window's crossings that evict, and beside a window of one position a slot such
    steps were too few to repay it (instructions a stream-step, one call an engine step:
    *spec 2 groups* 14,146 -> 14,285, *spec 3 groups* 19,110 -> 19,317; beside the pooled
    audio, *spec audio + text*, 17,795 -> 16,308)."""
    condition = _past_eviction(core, g, typed)
    if condition is None or core._pool[g] == 1:
        return []
    out = [*(line.strip() for line in cold), *(line.strip() for line in spec)]
    out.append(f"if {first} and {condition}:")
    inner = "    "
    for h in range(g + 1, len(core.names)):
        out += [f"{inner}s{h} = hot[{_plus('o', h * HOT + SLACK)}]", f"{inner}if {fits[h]}:"]
        inner += "    "
    out.append(f"{inner}ops.append((setitem, st, {_plus('c', _cold(ANCHOR, g))}, e{g}))")
    out += [f"{inner}{line}" for line in row.split("\n")]
    return [indent + line for line in out]


def _unrolled(core: CoordinatorCore, back: str, indent: str, typed: bool = False) -> list[str]:
    """Per group, its slack ``s{g}`` read and `_fits` checked (else ``back``)."""
    out = []
    for g in range(len(core.names)):
        out += [
            f"s{g} = hot[{_plus('o', g * HOT + SLACK)}]",
            f"if not ({_fits(core, g, typed)}):",
            f"    {back}",
        ]
    return [indent + line for line in out]


def _crossing(
    core: CoordinatorCore,
    fail: str,
    indent: str,
    compacting: str | None = None,
    typed: bool = False,
    fit: bool = False,
    lean: bool = False,
    mapped: bool = False,
    register: bool = False,
    drafted: bool = False,
    cache_ops: str | None = None,
    batched: bool = False,
    ahead: bool = False,
    runs: bool = False,
    compact_while: str = "",
) -> list[str]:
    """A rollback of ``r{g}`` (of ``j{g}`` left speculative) and a step of ``q{g}`` (not
    negative) per group past the stores' reach, planned in plain locals for the request at
    offset ``o`` (cold fields at ``c``): per group its fields recomputed after the step as the
    general path does (`CoordinatorCore._plan_rollback` then `_plan_step`) when the common
    case holds: the blocks the rolled-back positions used kept for the step
    (`CoordinatorCore._kept`), at most one block taken at the table's end into the segment's
    spare room (the pool's next fresh id, or the queue's head when it is neither stale nor
    cached), with ``lean`` a run of them too (`_run`: ``rn{g}``, its cached ones evicted),
    and those a window evicts at its front, one or a run (the first step after a
    prefill chunk past the window), none shared nor cached but with ``lean`` or
    ``cache_ops`` (a cached one taken is evicted from the prefix cache, one a window evicts
    stays cached, free; one another table shares loses a reference and stays held) or
    ``batched`` (a cached one taken, below); content to register
    goes elsewhere. Written per group kind (a kind that evicts nothing plans no
    eviction) with the group's constants in, its cold fields read at once. The pools are
    read through ``f{i}``/``h{i}`` (fresh, head: the request's copies of the batch's) and the
    batch's locals of each pool (``nb{i}``: its blocks, ``qu{i}``, ``sa{i}``, ``ca{i}``,
    ``sh{i}``: its queue, stale, cached and shared blocks) and slab (``sb{g}``); a segment
    without room moves to the slab's end (``te{g}``, its planned end) with room, unless that
    makes the slab's garbage (with ``gb{g}``, planned) due: then ``compacting`` runs, ``{g}``
    its group (else ``fail``), unless the bit ``g`` of ``compacted`` says the call compacted
    that slab: then the move is made (as `CoordinatorCore._boundary_step` makes it). Any
    other runs ``fail`` (nothing written). With ``typed``, the ``r{g}`` are ints, none
    negative. Leaves per group ``s{g}`` (its slack, read) and ``v{g}`` (the new slack),
    ``w{g}`` (the op that writes its cold fields, ``ANCHOR`` to ``MAXLEN``, None: unchanged) and
    then ``t{g}`` (the block taken, 0: none) at ``x{g}`` (its slab index), or ``m{g}`` (the
    moved segment, None: none), ``gm{g}`` (the garbage left; of a kind that evicts nothing,
    set by a move only) and, of a kind that evicts, ``dr{g}`` (the blocks evicted: ``d{g}``,
    the block where one is, their array where more are). With ``fit``, the groups before
    ``fit`` are within their slack (`_fits`, their ``s{g}`` read, as group 0's is): only
    their slack is planned. With ``lean`` (a plan
    `_stored` commits as stores), a segment without room moves to ``x{g}``, the slab's end
    now (one request's plan), unless that makes the slab due (``fail``: the ops path compacts
    it first), ``w{g}`` is always the array of cold fields read (changed where the fields
    change: the line of stores writes it back),
    ``gm{g}`` always set, ``t{g}`` is 0 and ``m{g}`` None within the slack (``dr{g}`` and
    ``gm{g}`` 0 too), and the prefix cache's part (a cached
    block taken, evicted from it; one evicted by a window, cached and free) is ops in ``xo``;
    with ``mapped`` too, where ``mapping`` (a name of the function) is true, ``mp{g}`` is the
    slot mapping of the step's positions. With ``register`` too, content waiting for the
    positions the step commits (``pend``: the request's `RequestExtras`, else None) is
    registered as `plan_cross` registers it, its prefix cache's part ops in ``xo`` and its
    registered counts set in place, where the step commits every hash a group knows and that
    is one block of the step's table, in a pool of its own, under a key other than that of
    the cached block the group took, if any; else ``fail``. With ``drafted`` too (a drafting
    step: its lookahead ``lk{g}``), the positions it commits are those before its
    lookahead. With ``cache_ops`` (the name of the ops list of a function that plans one
    request), the prefix cache's part is planned as with ``lean``, its ops appended there.
    With ``batched`` (one request of a batch, neither of those), a cached block taken is
    evicted from the prefix cache, its ops in ``xe`` and its key's blocks left in ``xk``
    (which `_crossed` adds to the batch's ``ops`` and ``xl``, its keys' blocks as its takes
    leave them, where the plan holds): a later take of the batch under the same key plans
    from what the earlier left. In a pool of several groups only a key's one block (its map
    found by the block). A block a window evicts that is shared or cached declines (two
    requests of a batch could plan one block's reference count twice). With ``ahead`` too
    (``lean`` and ``register``, every group planned: `_firsts`), the registration takes every
    full block the step commits, several in passes in C where their keys are new, and sets
    ``ah`` where a group's hashes are left ahead of its positions (``ps{g}``: each group's
    after the step), for the caller to hold the fields as `CoordinatorCore._register_boundary`
    holds them. With ``runs`` too (``batched``), a run of blocks (a prefill chunk's) is taken
    as ``lean`` takes it (`_batched_run`: ``rn{g}``, its room ``gw{g}``, its cached blocks
    ``gn{g}`` evicted where each is its key's one block), a cached block a window evicts
    stays cached, free (one table holds it: no other request of the batch drops it), and,
    where `_batch_registers`, content waiting is registered as with ``ahead`` (a single
    block as a run of one; keys new to the map and to the batch's earlier registrations,
    ``xw``; the keys registered and evicted kept in the batch's ``xr`` for the core's plan,
    tagged by the request's offset), the request then resting, or held where hashes are left
    ahead."""
    n = len(core.names)
    pool_of, _ = _pools(core)
    # (the hold of hashes ahead writes every group's fields: each group planned here)
    ahead = ahead and lean and register and _firsts(core)
    # Where the prefix cache's part goes (None: a cached block declines).
    xo = "xo" if lean else cache_ops
    batched = batched and xo is None
    runs = runs and batched
    # (with ``runs``: a prefill chunk's content registered in the pass too, as ``ahead``
    # registers it, where every group is planned and each that caches has a pool of its
    # own and no window mask: `_batch_registers`)
    if runs and _batch_registers(core):
        register = ahead = True
    # (with ``runs`` and a prefix cache: the keys a request's runs evict and register)
    keyed = runs and _caching(core)
    # Where the registration's ops go.
    regs = xo if xo else "xe"
    out = [
        *(["xo = []"] if lean else []),
        *(["xe, xk = [], []"] if batched else []),
        *((["pend, ah = None, False"] if ahead and lean else ["pend = None"]) if register else []),
        "if extras:",
        "    extra = extras.get(o)",
        "    if type(extra) is Active and extra.pending():",
        ("        pend, ah = extra, False" if ahead and not lean else "        pend = extra")
        if register
        else f"        {fail}",
    ]
    for g in range(n):
        p, size = core._pool[g], core._block_size[g]
        in_flight, manager = core._in_flight[g], core._managers[g]
        kind, h, i = manager.kind, g * HOT, pool_of[id(core.pools[g])]
        c = _cold(ANCHOR, g)
        shared = sum(1 for other in core.pools if other is core.pools[g]) > 1
        windowed: Any = manager  # a window's or chunk's manager (by ``kind``)
        r, q, s = f"r{g}", f"q{g}", f"s{g}"
        # Slots (the manager's unit) of positions: the first the step touches, and its end.
        first = "rows" if p == 1 else f"rows // {p}"
        end = f"rows + {q}" if p == 1 else f"(rows + {q} + {p - 1}) // {p}"
        touched = q if p == 1 else f"(end - first if {q} else 0)"
        checked = f"{r} > j{g}" if typed else f"type({r}) is not int or not 0 <= {r} <= j{g}"
        begin = len(out)
        out += [f"if {checked}:", f"    {fail}"]
        if not (fit and g == 0):  # (with ``fit``, `_fits` read group 0's slack first)
            out.append(f"{s} = hot[{_plus('o', h + SLACK)}]")
        if not core._has_rows[g] or kind not in _PLANNED:
            if register and core.caches[g] is not None:  # (its registration: `plan_cross`'s)
                out += ["if pend is not None:", f"    {fail}"]
            out += [
                f"rows = st[{_plus('c', c)}] - {s} - {r}",
                f"first, end = {first}, {end}",
                f"if {r} or not ({q} <= {s} and ({s} or {q}) and {touched} <= {in_flight}):",
                f"    {fail}",
                f"v{g}, w{g} = {s} - {q}, None",
            ]
            if mapped and core._has_rows[g]:
                based = f"st[{_plus('c', _cold(BASE, g))}] * {size}"
                out += [
                    "if mapping:",
                    f"    mp{g} = [*range({based} + first, {based} + end)] if {q} else []",
                ]
            elif mapped:
                out += ["if mapping:", f"    mp{g} = []"]
            _fitted(out, begin, g, fit and g < n - 1)
            continue
        evicts = kind != "full_attention"
        # With ``lean`` or ``runs``, a run of blocks too (`_run`, `_batched_run`); else one at
        # most.
        bad_want = "want < 0" if lean or runs else "want < 0 or want > 1"
        # (with ``register``: a group whose content the prefix cache keeps)
        cached = register and core.caches[g] is not None
        # Within the slack the rollback leaves, and no block to give back (`_fits`, and more):
        # only the slack changes.
        pb = p * size
        fields = "anchor, base, evict, skipped, start, length, capacity, maxlen"
        # Read at once. With ``lean``, in one slice: the array ``w{g}`` is also what the line
        # of stores writes back (its changed fields set in place: no array built from a
        # tuple, which costs more). Else by one `struct` pass (a tuple, not an array and an
        # int object per field) and written back by another, an op (``w{g}``), from the
        # fields in plain locals.
        itemsize = core.table.st.itemsize
        at_bytes = _plus(f"{itemsize} * c", c * itemsize)  # (the struct passes' offset)
        read = f"st[{_plus('c', c)} : c + {c + COLD}]" if lean else f"cold_of(st, {at_bytes})"
        out += [
            *([f"ek{g} = None"] if cached and lean else []),
            f"{fields} = w{g} = {read}",
            # (with ``lean``: the run of blocks the step takes, where it takes more than one,
            # and the cached ones among it, evicted; with ``runs``, the run and its room)
            *([f"rn{g} = gn{g} = None", f"gw{g} = 0"] if lean else []),
            *([f"rn{g} = gn{g} = None", f"gw{g} = 0"] if keyed else []),
            *([f"rn{g}, gw{g} = None, 0"] if runs and not keyed else []),
            # The small counts summed first (an int past 256 is a new object).
            f"sr = {s} + {r}",
            "rows = anchor - sr",
            # (with ``ahead``: the positions after the step, what a hold anchors at)
            *([f"ps{g} = rows + {q}"] if ahead and lean else []),
            f"first, end = {first}, {end}",
            f"blocks = (end + {size - 1}) // {size}",
            f"if {q} <= sr and (sr or {q}) and {touched} <= {in_flight} and (not {r} or {s} and "
            f"blocks >= skipped + length and "
            f"{'end' if p == 1 else f'(rows + {q})'} // {pb} >= (anchor - {s}) // {pb}):",
            *(
                [
                    *(["    if pend is not None:", f"        {fail}"] if cached else []),
                    f"    v{g}, t{g}, m{g} = sr - {q}, 0, None",
                    f"    dr{g} = gm{g} = 0" if evicts else f"    gm{g} = 0",
                    *(
                        [
                            "    if mapping:",
                            f"        mp{g} = [*range(base * {size} + first, base * {size} + "
                            f"end)] if {q} else []",
                        ]
                        if mapped
                        else []
                    ),
                ]
                if lean
                else [
                    *(["    if pend is not None:", f"        {fail}"] if cached else []),
                    f"    v{g}, w{g} = sr - {q}, None",
                ]
            ),
            "else:",
        ]
        at = len(out)
        out += [
            f"if {touched} > {in_flight} or end > maxlen:",
            f"    {fail}",
            "want = blocks - skipped - length",
        ]
        if kind == "sliding_window":
            window = windowed.sliding_window_slots
            out += [
                "skip = skipped",
                f"if first >= evict and first > {window - 1}:",
                f"    skip = (first - {window - 1}) // {size}",
                "    if skip < skipped:",
                "        skip = skipped",
            ]
        elif kind == "chunked_local":
            chunk = windowed.chunk_slots
            out += [
                "skip = skipped",
                "if first >= evict:",
                f"    skip = first // {chunk} * {chunk} // {size}",
                "    if skip < skipped:",
                "        skip = skipped",
            ]
        if evicts:
            out += [
                f"dr{g} = dropped = skip - skipped",
                # Fewer blocks than held (a rollback past the step's end): the core's path.
                f"if {bad_want}:",
                f"    {fail}",
                "if dropped == 1:",
                f"    d{g} = sb{g}[start]",
                *(
                    [
                        # Held by another table too (a prefix hit's): one reference less, not
                        # freed (as `PoolPlan.release`).
                        f"    if d{g} in sh{i}:",
                        f"        held = sh{i}[d{g}]",
                        f"        {xo}.append((setitem, sh{i}, d{g}, held - 1) if held > 2 else "
                        f"(sh{i}.pop, d{g}))",
                        f"        dr{g} = 0",
                        f"    elif d{g} in ca{i}:  # its content stays in the queue",
                        f"        {xo}.append((setitem, pools[{g}]._free_cached, d{g}, 1))",
                    ]
                    if xo
                    else [
                        # (a cached block one table holds: no other request of a batch
                        # drops it; its flag set at the commit)
                        f"    if d{g} in sh{i}:",
                        f"        {fail}",
                        f"    if d{g} in ca{i}:  # its content stays in the queue",
                        f"        xe.append((setitem, pools[{g}]._free_cached, d{g}, 1))",
                    ]
                    if batched
                    else [f"    if d{g} in sh{i} or d{g} in ca{i}:", f"        {fail}"]
                ),
                # Several (the first step after a prefill chunk longer than the window): a
                # run, evicted as the core's plan evicts it (``d{g}`` its array; queued the
                # last first).
                "elif dropped:",
                f"    d{g} = sb{g}[start : start + dropped]",
                *(
                    [
                        f"    if sh{i} and not sh{i}.keys().isdisjoint(d{g}):",
                        f"        both = sh{i}.keys() & d{g}",
                        f"        {xo} += [(setitem, sh{i}, b, sh{i}[b] - 1) if sh{i}[b] > 2 else "
                        f"(sh{i}.pop, b) for b in both]",
                        f"        d{g} = array('i', [b for b in d{g} if b not in both])",
                        f"        if not d{g}:",
                        f"            dr{g} = 0",
                        f"    if ca{i}:  # their content stays in the queue",
                        f"        {xo}.append(flag_op(pools[{g}]._free_cached, "
                        f"ca{i}.keys() & d{g}, 1))",
                    ]
                    if xo
                    else [
                        f"    if sh{i} and not sh{i}.keys().isdisjoint(d{g}):",
                        f"        {fail}",
                        *(
                            [
                                f"    if ca{i}:  # their content stays in the queue",
                                f"        xe.append(flag_op(pools[{g}]._free_cached, "
                                f"ca{i}.keys() & d{g}, 1))",
                            ]
                            if batched
                            else [
                                f"    if ca{i} and not ca{i}.keys().isdisjoint(d{g}):",
                                f"        {fail}",
                            ]
                        ),
                    ]
                ),
            ]
        else:
            out += [
                f"if {bad_want}:",
                f"    {fail}",
            ]
        # A segment without room moves to its slab's end with room (`RequestTable`), unless
        # that makes the slab's garbage due (the core compacts first): its old entries become
        # garbage (``gm{g}``); ``te{g}`` is the slab's planned end. A segment that stays drops
        # the evicted block at its front (its garbage).
        # With ``lean`` (one request: the slab's end is its length now, ``x{g}`` where the
        # moved segment goes), a slab made due declines: the ops path compacts it first.
        end_now = f"x{g}" if lean else f"te{g}"
        due_now = f"due(garbage[{g}] + {'' if lean else f'gb{g} + '}capacity, {end_now})"
        if compacting is not None:
            due_now = f"not compacted >> {g} & 1 and {compact_while}{due_now}"
        made_due = fail if compacting is None else compacting.format(g=g)
        kept = "start + dropped : start + length" if evicts else "start : start + length"
        stays = (
            [f"gm{g}, start, capacity = dropped, start + dropped, capacity - dropped"]
            if evicts
            else [f"gm{g} = 0"] if lean else []
        )
        out += [
            *(
                _run(g, i, size, evicts, kept, stays, due_now, fail, made_due, not shared)
                if lean
                else _batched_run(
                    g, i, size, evicts, kept, stays, due_now, fail, made_due, keyed, not shared
                )
                if runs
                else []
            ),
            "elif want:" if lean or runs else "if want:",
            f"    if f{i} < nb{i}:",
            f"        t{g} = f{i}",
            f"        f{i} += 1",
            f"    elif h{i} < len(qu{i}):",
            f"        t{g} = qu{i}[h{i}]",
            *(
                # A cached block evicted from the prefix cache as `_cross` evicts it; in a pool
                # of several groups, only the one block of its key (two takes of one call
                # could evict two blocks of one key, its list then planned twice: the ops
                # path's).
                [
                    f"        if t{g} in sa{i}:",
                    f"            {fail}",
                    f"        key = ca{i}.get(t{g})",
                    "        if key is not None:",
                    # (content registered beside it: of another key, `_crossing`'s rule)
                    *([f"            ek{g} = key"] if cached else []),
                    # (a pool of this group alone files its blocks in the group's map)
                    f"            cache_map = pools[{g}].map_of(t{g}, key)"
                    if shared
                    else f"            cache_map = cache_maps[{g}]",
                    "            held = cache_map[key]",
                    *(
                        ["            if type(held) is not int:", f"                {fail}"]
                        if shared
                        else []
                    ),
                    *(
                        [f"            ex{g}, em{g}, eheld{g} = len(xo), cache_map, held"]
                        if cached
                        else []
                    ),
                    f"            {xo} += [(ca{i}.pop, t{g}), "
                    f"(setitem, pools[{g}]._free_cached, t{g}, 0), "
                    f"unfiled_op(cache_map, key, held, t{g})]",
                ]
                if xo
                else [
                    f"        if t{g} in sa{i}:",
                    f"            {fail}",
                    f"        key = ca{i}.get(t{g})",
                    "        if key is not None:",
                    # (content registered beside it: under other keys, as a run's evictions)
                    *([f"            gn{g} = {{t{g}}}"] if cached else []),
                    f"            cache_map = pools[{g}].map_of(t{g}, key)",
                    "            lk = id(cache_map), key",
                    # (the key's blocks as the batch's earlier takes left them)
                    "            held = xl[lk][2] if lk in xl else cache_map[key]",
                    *(
                        ["            if type(held) is not int:", f"                {fail}"]
                        if shared
                        else []
                    ),
                    f"            kept = without(held, t{g})",
                    f"            xe += [(ca{i}.pop, t{g}), "
                    f"(setitem, pools[{g}]._free_cached, t{g}, 0), "
                    "(setitem, cache_map, key, filed(kept)) if kept else (cache_map.pop, key)]",
                    "            xk.append((lk, cache_map, key, kept))",
                ]
                if batched
                else [f"        if t{g} in sa{i} or t{g} in ca{i}:", f"            {fail}"]
            ),
            f"        h{i} += 1",
            *(
                # Past the queue's entries (a full pool): the blocks evicted before this take
                # go to the queue's back first, as the core's plan releases them (earlier
                # requests' of a batch, ``ev{i}``, then this group's own, the last first); a
                # stale or cached one is the core's.
                [
                    f"    elif h{i} - len(qu{i}) < len(ev{i}) + (1 if dr{g} == 1 else "
                    f"len(d{g}) if dr{g} else 0):",
                    f"        k = h{i} - len(qu{i}) - len(ev{i})",
                    f"        t{g} = ev{i}[h{i} - len(qu{i})] if k < 0 else d{g} if dr{g} == 1 "
                    f"else d{g}[len(d{g}) - 1 - k]",
                    f"        if t{g} in sa{i} or t{g} in ca{i}:",
                    f"            {fail}",
                    f"        h{i} += 1",
                ]
                if evicts and sum(1 for other in core.pools if other is core.pools[g]) == 1
                else []
            ),
            "    else:",
            f"        {fail}",
            "    if length < capacity:",
            f"        x{g}, m{g} = start + length, None",
            *("        " + line for line in stays),
            "    else:",
            *([f"        x{g} = len(sb{g})"] if lean else []),
            *([f"        if {due_now}:", f"            {made_due}"] if made_due else []),
            f"        m{g} = sb{g}[{kept}]",
            f"        m{g}.append(t{g})",
            f"        room = grown(len(m{g}), capacity, {'skip' if evicts else 'skipped'})"
            f" - len(m{g})",
            f"        m{g}.extend(array('i', bytes(4 * room)))",
            f"        gm{g}, start, capacity = capacity, {end_now}, len(m{g})",
            "else:",
            f"    t{g}, m{g} = 0, None",
            *("    " + line for line in stays),
            "length += want - dropped" if evicts else "length += want",
        ]
        skip = "skip" if evicts else "skipped"
        # The block at table index ``at`` among those the step took (the last one, or of a run)
        with_runs = lean or runs
        taken_at = (
            f"(t{g} if rn{g} is None else rn{g}[at - length + want])" if with_runs else f"t{g}"
        )
        cap = "" if p == 1 else f" * {p}"
        now = "end" if p == 1 else "rows"  # the step's end, in positions
        if p > 1:
            out.append(f"rows += {q}")
        out += [
            "if first >= evict:",
            f"    evict = {f'w{g}[{EVICT - ANCHOR}] = ' if lean else ''}"
            f"{_eviction(manager, size)[1]}",
            f"index = {now} // {pb}",
            f"anchor = {now}",
            # BASE is read only within the slack: where the step's end has no block yet
            # (no slack), it stays.
            f"if {skip} <= index < {skip} + length:",
            f"    at = index - {skip}",
            f"    base = {f'w{g}[{BASE - ANCHOR}] = ' if lean else ''}({taken_at} if want and "
            f"at {'>= length - want' if with_runs else '== length - 1'} else "
            f"sb{g}[start + at] if m{g} is None else m{g}[at]) - index",
            # min(room, maxlen, evict, (index + 1) × size) × P, at least the end: the block
            # ``index`` is in the table, so its end is within the room.
            f"    bound = (index + 1) * {size}",
            "    if bound > maxlen:",
            "        bound = maxlen",
            "    if bound > evict:",
            "        bound = evict",
            f"    if bound{cap} > {now}:",
            f"        anchor = bound{cap}",
            f"v{g} = anchor - {now}",
        ]
        if not lean:
            out.append(
                f"w{g} = (cold_to, st, {at_bytes}, anchor, base, evict, {skip}, start, length, "
                "capacity, maxlen)"
            )
        elif evicts:
            out += [
                f"w{g}[{ANCHOR - ANCHOR}], w{g}[{LENGTH - ANCHOR}] = anchor, length",
                f"if dropped or m{g} is not None or gw{g}:",
                f"    w{g}[{SKIPPED - ANCHOR}], w{g}[{START - ANCHOR}], "
                f"w{g}[{CAPACITY - ANCHOR}] = skip, start, capacity",
            ]
        else:
            out += [
                f"w{g}[{ANCHOR - ANCHOR}], w{g}[{LENGTH - ANCHOR}] = anchor, length",
                f"if m{g} is not None or gw{g}:",
                f"    w{g}[{START - ANCHOR}], w{g}[{CAPACITY - ANCHOR}] = start, capacity",
            ]
        committed = f"({now} - lk{g})" if drafted else now
        # (the content waiting in the group's stream: its hashes and what it registered)
        pending = [
            "if pend is not None:",
            f"    ks = pend.stream_of[{g}]",
            "    if ks >= 0:",
            "        hashes = pend.streams[ks].hashes",
            f"        r = pend.registered[{g}]",
        ]
        if cached and (shared or _unread(core, g)):
            # (two groups' plans of one pool's keys; blocks the window mask leaves out:
            # `plan_cross`'s)
            out += ["if pend is not None:", f"    {fail}"]
        elif cached and ahead:
            # `_register_boundary`'s registration: the full blocks the step commits whose hash
            # the group knows; one (its index ``r``) as below, several (a prompt's chunk) in
            # passes in C where their keys are new (`BlockPool.filed_ops`). Hashes left ahead
            # (a prompt's chunk before its last) set ``ah``: the caller holds the fields.
            out += [
                *pending,
                f"        full = {committed} // {pb}",
                "        if full >= len(hashes):",
                "            full = len(hashes)",
                "        else:",
                "            ah = True",
                *(
                    [
                        "        if full == r + 1:",
                        f"            at = r - {skip}",
                        f"            if not 0 <= at < length or gn{g} is not None:",
                        f"                {fail}",
                        *_registered_one(g, i, taken_at, fail),
                        "        elif full > r:",
                    ]
                    if lean
                    # (a batch's: one block as several, the key a take evicted declining)
                    else ["        if full > r:"]
                ),
                f"            lo, hi, kn = r - {skip}, full - {skip}, length - want",
                "            if lo < 0 or hi > length"
                + (f" or ek{g} is not None:" if lean else ":"),
                f"                {fail}",
                f"            tk = rn{g} if rn{g} is not None else array('i', (t{g},)) if want "
                "else noblock",
                f"            if m{g} is not None:",
                f"                blocks = m{g}[lo:hi]",
                "            elif lo >= kn:",
                "                blocks = tk[lo - kn : hi - kn]",
                "            else:",
                f"                blocks = sb{g}[start + lo : start + min(hi, kn)] + "
                "tk[: max(hi - kn, 0)]",
                "            keys = hashes[r:full]",
                # (none cached but those the run's take evicts; every key new to the map,
                # and in a batch to what its earlier requests registered, ``xw``)
                f"            if not ca{i}.keys().isdisjoint(blocks) and not (gn{g} is not None "
                f"and ca{i}.keys() & blocks <= gn{g}) or not "
                f"cache_maps[{g}].keys().isdisjoint(keys) or len(set(keys)) != len(keys)"
                + ("" if lean else " or xw and not xw.isdisjoint(keys)")
                + ":",
                f"                {fail}",
                *(
                    [f"            xo += pools[{g}].filed_ops(cache_maps[{g}], blocks, keys)"]
                    if lean
                    # (the ids kept for the core's plan too: ``xr``, as `_batched_run`'s)
                    else [
                        f"            ids = list(map(pools[{g}]._ids.__getitem__, blocks))",
                        f"            xe += [(ca{i}.update, zip(ids, keys)), "
                        f"(cache_maps[{g}].update, zip(keys, ids))]",
                        f"            xr.append((o, cache_maps[{g}], keys, ids))",
                        "            if xw:",
                        "                xw.update(keys)",
                        "            else:",
                        "                xw = set(keys)",
                    ]
                ),
                f"            {regs}.append((setitem, pend.registered, {g}, full))",
            ]
        elif cached:
            # `plan_cross`'s registration where the step commits every hash the group knows,
            # one block (its index ``r``) of the step's table, not cached yet.
            out += [
                *pending,
                "        if len(hashes) > r:",
                f"            at = r - {skip}",
                f"            if len(hashes) != r + 1 or {committed} // {pb} < r + 1 or not "
                "0 <= at < length" + (f" or gn{g} is not None" if lean else "") + ":",
                f"                {fail}",
                *_registered_one(g, i, taken_at, fail),
            ]
        if mapped:
            # (a run's: across the entries kept and the run, or the moved segment holding both)
            out += [
                "if mapping:",
                f"    mp{g} = (slots_across(sb{g}, start, {skip}, length - want, {size}, first, "
                f"end, t{g}) if m{g} is None else slots_across(m{g}, 0, {skip}, length - want, "
                f"{size}, first, end, t{g})) if {q} and rn{g} is None else slots_across(m{g} if "
                f"m{g} is not None else sb{g}[start : start + length - want] + rn{g}, 0, {skip}, "
                f"length, {size}, first, end, 0) if {q} else []",
            ]
        out[at:] = ["    " + line for line in out[at:]]
        _fitted(out, begin, g, fit and g < n - 1)
    if runs and register:
        # Content registered in a batch's pass (`_batch_registers`): the request rests after
        # it or, hashes left ahead (a prompt's chunk before its last), every group's fields
        # held (as ``cross``, `_lean_cross`), which a group within its slack declines (its
        # fields not read: ``w{g}`` None).
        within = " or ".join(
            [*(["fit"] if fit and n > 1 else []), *(f"w{g} is None" for g in range(n))]
        )
        out += [
            "if pend is not None:",
            "    if ah:",
            f"        if {within}:",
            f"            {fail}",
            # (the op ``(cold_to, st, at, anchor, base, evict, ...)``: the anchor set to the
            # positions after the step, the anchor less the slack, and no eviction point)
            *(
                f"        w{g} = w{g}[:3] + (w{g}[3] - v{g}, w{g}[4], 0) + w{g}[6:]; v{g} = 0"
                for g in range(n)
            ),
            "    else:",
            "        known = pend.streams",
            "        xe.append((setitem, extras, o, pend.resting([r if s < 0 or r >= "
            "len(known[s].hashes) else len(known[s].hashes) for s, r in zip(pend.stream_of, "
            "pend.registered)])))",
        ]
    return [indent + line for line in out]


def _caching(core: CoordinatorCore) -> bool:
    """Whether ``core`` keeps a prefix cache (some group's content is cached)."""
    return any(cache is not None for cache in core.caches)


def _batch_registers(core: CoordinatorCore) -> bool:
    """Whether a batch's pass (`_advance_all`) registers a prefill chunk's content as one
    request's ``cross`` does: every group planned (`_firsts`) and each group that caches in
    a pool of its own, without a window mask (else the core's plan registers it)."""
    return _firsts(core) and all(
        core.caches[g] is None
        or (sum(1 for p in core.pools if p is core.pools[g]) == 1 and not _unread(core, g))
        for g in range(len(core.names))
    )


def _planned(core: CoordinatorCore, g: int) -> bool:
    """Whether `_crossing` plans group ``g``'s table (a kind of `_PLANNED` with rows)."""
    return bool(core._has_rows[g]) and core._managers[g].kind in _PLANNED


def _registered_one(g: int, i: int, taken_at: str, fail: str) -> list[str]:
    """`_crossing`'s registration of one block, the table's entry ``at`` (``r``, its hash's
    index; its block in the plan's locals), unless it is cached (but for the block the step
    took, whose key was evicted above). Its ops in ``xo``."""
    return [
        f"            rb = {taken_at} if want and at >= length - want else "
        f"sb{g}[start + at] if m{g} is None else m{g}[at]",
        # (the block this step takes is registered anew: the key it held, if any,
        # evicted above, unless it is the same key)
        f"            if rb in ca{i} and rb != t{g}:",
        f"                {fail}",
        # (the id's own object, which the pool's entry and the map's hold: `add_map`)
        f"            rk, rb = hashes[r], pools[{g}]._ids[rb]",
        f"            if rk != ek{g}:",
        f"                held = cache_maps[{g}].get(rk)",
        f"                xo += [(setitem, ca{i}, rb, rk), "
        f"filed_op(cache_maps[{g}], rk, held, rb), (setitem, pend.registered, {g}, r + 1)]",
        # The key of the cached block the step took (a prompt like one that ended): its
        # entry written once, less that block and with this one at its end, as the ops path
        # plans it (the eviction's write replaced; the pool is the group's own, its one map
        # this group's).
        "            else:",
        f"                if type(eheld{g}) is int or len(eheld{g}) == 2:",
        f"                    xo[ex{g} + 2] = (setitem, em{g}, rk, "
        f"filed([*without(eheld{g}, t{g}), rb]))",
        "                else:  # (removed from the key's list in place, appended: its newest)",
        f"                    xo.append((eheld{g}.append, rb))",
        f"                xo += [(setitem, ca{i}, rb, rk), (setitem, pend.registered, {g}, "
        "r + 1)]",
    ]


def _run(
    g: int,
    i: int,
    size: int,
    evicts: bool,
    kept: str,
    stays: list[str],
    due_now: str,
    fail: str,
    made_due: str,
    own: bool,
) -> list[str]:
    """A lean crossing's take of a run of blocks (``want`` > 1: a prefill chunk's), as
    ``cross_ops`` (`_cross`) takes and places it: the fresh ids, then the queue's live front
    (`BlockPool.front`; in a pool of its own, ``own``, past stale entries too:
    `BlockPool.front_past_stale`), placed as `_placed` places it (the slab's end: its length
    now, ``x{g}``). ``rn{g}`` is the
    run (``t{g}`` 0), ``gn{g}`` the cached blocks among it (None: none), evicted from the
    prefix cache by ops in ``xo``. ``made_due`` where a move would make the slab due (the
    caller's compaction first, else ``fail``), before the pool is read; ``fail`` where the
    run is not that (too few before the queue's end, a stale entry among them in a pool of
    several groups, a cached one whose key names more blocks or a pool of several maps)."""
    dropped = "dropped" if evicts else "0"
    return [
        "if want > 1:",
        "    if length + want > capacity:",
        f"        x{g} = len(sb{g})",
        f"        if (start + capacity != x{g} or capacity <= {dropped}) and {due_now}:",
        f"            {made_due}",
        f"    rn{g} = pools[{g}].front(f{i}, h{i}, want)",
        *(_run_released(g, i) if evicts and own else []),
        f"    fr = nb{i} - f{i}",
        "    if fr > want:",
        "        fr = want",
        f"    if rn{g} is not None:",
        f"        f{i}, h{i}, t{g} = f{i} + fr, h{i} + want - fr, 0",
        *(
            # Stale entries among the queue's front (a prefix hit took their blocks back),
            # skipped as the general path's take skips them (a pool of one group: one take).
            [
                "    else:",
                f"        got = pools[{g}].front_past_stale(f{i}, h{i}, want, xo)",
                "        if got is None:",
                f"            {fail}",
                f"        rn{g}, h{i} = got",
                f"        f{i}, t{g} = f{i} + fr, 0",
            ]
            if own
            else ["    else:", f"        {fail}"]
        ),
        # Cached blocks among it (free, their content in the queue) leave the prefix cache, in
        # passes in C where each is its key's one block in the pool's one map (as
        # `_Boundary.evict_run`), at the commit, before anything this step registers.
        *_run_evicted(g, i, fail, "xo"),
        *_placed(g, size, evicts, kept, stays, f"x{g}", []),
    ]


def _run_released(g: int, i: int) -> list[str]:
    """The lines that retry a run's take ``rn{g}`` (None: the queue's live entries and the
    fresh ids are too few) past the queue's entries, as a take of one block goes there: the
    blocks released before the take go to the queue's back first, as the core's plan and
    vLLM's ``remove_skipped_blocks`` before its allocation release them (a batch's earlier
    requests' evictions, ``ev{i}``, then this group's own, ``d{g}``, the last first:
    `BlockPool.front_released`, which leaves ``rn{g}`` None where one taken is stale or
    cached, the core's). For a window's group in a pool of its own."""
    return [
        f"    if rn{g} is None and (ev{i} or dr{g}):",
        f"        rn{g} = pools[{g}].front_released(f{i}, h{i}, want, ev{i}, "
        f"(d{g},) if dr{g} == 1 else d{g}[::-1] if dr{g} else ())",
    ]


def _run_evicted(g: int, i: int, fail: str, ops: str) -> list[str]:
    """The lines that evict the cached blocks among a run ``rn{g}`` (``gn{g}``: none where
    it holds none) by ops added to the list ``ops``, in passes in C where each is its key's
    one block in its pool's one map (`BlockPool.sole_keys`, `evicted_ops`; else ``fail``).
    Leaves ``gk``, their keys, where there are some."""
    return [
        f"    if ca{i} and not ca{i}.keys().isdisjoint(rn{g}):",
        f"        gn{g} = ca{i}.keys() & rn{g}",
        f"        gk = pools[{g}].sole_keys(gn{g})",
        "        if gk is None:",
        f"            {fail}",
        f"        {ops} += pools[{g}].evicted_ops(gn{g}, gk)",
    ]


def _placed(
    g: int, size: int, evicts: bool, kept: str, stays: list[str], end: str, due: list[str]
) -> list[str]:
    """Where a run ``rn{g}`` goes (`_run`, `_batched_run`): into the segment's spare room;
    else, where the segment ends the slab (at ``end``), grown there by the room a run's move
    would give it (``gw{g}`` entries appended after the run: `_table.grown` with the run as
    its step and the request's ``max_len`` as its most); else moved to ``end`` with that
    room, after ``due`` (the lines that check the move leaves the slab's garbage short of
    due)."""
    skip = "skip" if evicts else "skipped"
    dropped = "dropped" if evicts else "0"
    most = f"(maxlen + {size - 1}) // {size} - {skip}"
    return [
        "    if length + want <= capacity:",
        f"        x{g}, m{g} = start + length, None",
        *("        " + line for line in stays),
        f"    elif start + capacity == {end} and capacity > {dropped}:  # grown where it ends",
        f"        room = grown(length - {dropped} + want, capacity, {skip}, want, {most})",
        f"        x{g}, m{g}, gw{g} = start + length, None, room + {dropped} - length - want",
        f"        capacity = room + {dropped}",
        *("        " + line for line in stays),
        "    else:",
        *("        " + line for line in due),
        f"        m{g} = sb{g}[{kept}]",
        f"        m{g} += rn{g}",
        f"        room = grown(len(m{g}), capacity, {skip}, want, {most}) - len(m{g})",
        f"        m{g}.extend(array('i', bytes(4 * room)))",
        f"        gm{g}, start, capacity = capacity, {end}, len(m{g})",
    ]


def _batched_run(
    g: int,
    i: int,
    size: int,
    evicts: bool,
    kept: str,
    stays: list[str],
    due_now: str,
    fail: str,
    made_due: str,
    keyed: bool,
    own: bool,
) -> list[str]:
    """A batch's crossing's take of a run of blocks (``want`` > 1: a prefill chunk's beside
    the batch's decodes) in its locals, as `_run` takes it for one request: the fresh ids,
    then the queue's live front (`BlockPool.front` from the batch's ``f{i}``/``h{i}``),
    placed as `_placed` places it (the slab's end as the batch planned it, ``te{g}``;
    ``made_due`` where a move makes the slab due). ``rn{g}`` is the run (``t{g}`` 0).
    Cached blocks among it (free, their content in the queue) leave the prefix cache as
    `_run` evicts them (``gn{g}``, in passes in C where each is its key's one block in the
    pool's one map: no earlier take of the batch can have changed such a key's entry, one
    block being its only one), their keys kept for the core's plan (the batch's ``xr``, each
    record tagged by the request's offset: `_seeded_plan` hands them over). ``fail`` where
    the run is not that: a stale entry among the queue's front, too few before the queue's
    end (the blocks the batch evicts go to its back at the commit), a cached block whose
    key names more blocks or a pool of several maps. ``keyed``: the core has a prefix cache (else no
    block is ever cached). Past the queue's entries, a window's group in a pool of its own
    (``evicts``, ``own``) takes the blocks released before the take (`_run_released`)."""
    return [
        "if want > 1:",
        f"    rn{g} = pools[{g}].front(f{i}, h{i}, want)",
        *(_run_released(g, i) if evicts and own else []),
        f"    if rn{g} is None:",
        f"        {fail}",
        *(
            [
                *_run_evicted(g, i, fail, "xe"),
                f"        xr.append((o, pools[{g}]._maps[0], gk, None))",
            ]
            if keyed
            else []
        ),
        f"    fr = nb{i} - f{i}",
        "    if fr > want:",
        "        fr = want",
        f"    f{i}, h{i}, t{g} = f{i} + fr, h{i} + want - fr, 0",
        *_placed(
            g, size, evicts, kept, stays, f"te{g}",
            [f"if {due_now}:", f"    {made_due}"] if made_due else [],
        ),
    ]


#: A store a commit makes: (object, key, value), ``key`` an item's (``a : b`` a slice's) or
#: ``.name`` an attribute's (`_committed` writes it as a statement or as an op).
_Store = tuple[str, str, str]


def _stored(core: CoordinatorCore) -> tuple[list[str], list[_Store]]:
    """What `_crossing` planned with ``lean``, as stores: the lines that prepare them (the
    block taken into a one-entry array, ``a{g}`` for the slice ``x{g}:y{g}`` of the slab,
    empty where none is; a moved segment, the block taken in it, for the empty slice at the
    slab's end; an evicted block to its pool's ``ev{i}``; each pool's new count of used
    blocks) and the stores themselves (`_committed`), every field written whether changed or
    not (the slab's garbage too), so that their line needs no branch. The ops list and its
    commit cost as much again as a crossing's plan, and a move to them (about one a block
    in the first hundred, a segment growing by a quarter: `_table.grown`) cost a drafting
    stream a few percent of its steps' time."""
    n = len(core.names)
    pool_of, first_of = _pools(core)
    prep = [f"k{i} = 0" for i in range(len(first_of))]
    stores: list[_Store] = []
    for g in range(n):
        h = g * HOT
        stores += [("hot", _plus("o", h + SLACK), f"v{g}"), ("hot", f"o + {h + STEP}", f"q{g}")]
    kept = set()
    for g in range(n):
        if not core._has_rows[g] or core._managers[g].kind not in _PLANNED:
            continue
        i, c = pool_of[id(core.pools[g])], _cold(ANCHOR, g)
        kept.add(i)
        prep += [
            # A moved segment (the block taken in it) at the slab's end: an empty slice there.
            f"if m{g} is not None:",
            f"    y{g}, a{g}, k{i} = x{g}, m{g}, k{i} + (1 if rn{g} is None else len(rn{g}))",
            # A run (and the room a segment that ends its slab grows by, after it).
            f"elif rn{g} is not None:",
            f"    y{g}, a{g}, k{i} = x{g} + len(rn{g}), rn{g} + zero1 * gw{g} if gw{g} else "
            f"rn{g}, k{i} + len(rn{g})",
            f"elif t{g}:",
            f"    one{g}[0] = t{g}",
            f"    y{g}, a{g}, k{i} = x{g} + 1, one{g}, k{i} + 1",
            "else:",
            f"    x{g} = y{g} = 0",
            f"    a{g} = noblock",
        ]
        stores += [
            ("st", f"{_plus('c', c)} : c + {c + COLD}", f"w{g}"),
            (f"sb{g}", f"x{g} : y{g}", f"a{g}"),
            # A move's old entries, a window's evicted one: the slab's garbage.
            ("garbage", str(g), f"garbage[{g}] + gm{g}"),
        ]
        if core._managers[g].kind != "full_attention":  # (a window's eviction)
            prep += [
                f"if dr{g} == 1:",
                f"    ev{i}.append(d{g})",
                f"elif dr{g}:",
                f"    ev{i} += d{g}[::-1]",
            ]
    for i, g in enumerate(first_of):
        if i in kept:
            more, queued = _queued(i, g, f"ev{i}", f"pools[{g}]._used + k{i} - len(ev{i})")
            prep += more
            stores += [(f"pools[{g}]", "._fresh", f"f{i}"), (f"pools[{g}]", "._head", f"h{i}")]
            stores += queued
    return prep, stores


def _queued(i: int, g: int, freed: str, used: str) -> tuple[list[str], list[_Store]]:
    """Pool ``i``'s (``pools[g]``'s) part of a line of stores: the blocks of the list
    ``freed`` to the back of its queue (one slice store: an array of the queue's typecode,
    empty where none is), and its count of used blocks ``used`` (source)."""
    prep = [
        f"nq{i}, u{i} = len(pools[{g}]._queue), {used}",
        f"{freed} = array('i', {freed}) if {freed} else noblock",
    ]
    queue = (f"pools[{g}]._queue", f"nq{i} : nq{i}", freed)
    return prep, [(f"pools[{g}]", "._used", f"u{i}"), queue]


def _fronted(i: int, g: int, freed: str, used: str) -> tuple[list[str], list[_Store]]:
    """`_queued` for the blocks a rollback gives back: to the queue's front as `BlockPool.
    front_ops` puts them (`_front_room`; an empty slice where none is)."""
    prep = [
        f"hd{i}, u{i} = pools[{g}]._head, {used}",
        f"{freed} = array('i', {freed}) if {freed} else noblock",
        *_front_room(i, freed, f"len(pools[{g}]._queue)"),
    ]
    queue = (f"pools[{g}]._queue", f"a{i} : hd{i}", f"put{i}")
    return prep, [(f"pools[{g}]", "._used", f"u{i}"), queue, (f"pools[{g}]", "._head", f"lo{i}")]


def _front_room(i: int, blocks: str, size: str) -> list[str]:
    """The lines that place the array ``blocks`` at the front of pool ``i``'s queue, its live
    part starting at ``hd{i}`` and the queue ``size`` long when the store runs, as
    `BlockPool.front_ops` places them: the slice ``a{i} : hd{i}`` replaced by ``put{i}``,
    the new head ``lo{i}`` (over the entries already taken, else after `front_room` dead
    entries)."""
    return [
        f"if hd{i} >= len({blocks}):",
        f"    a{i} = lo{i} = hd{i} - len({blocks}); put{i} = {blocks}",
        "else:",
        f"    a{i}, lo{i} = 0, ({size} - hd{i}) >> 3",
        f"    put{i} = zero1 * lo{i} + {blocks}",
    ]


def _committed(
    stores: list[_Store],
    end: str,
    indent: str,
    extra: str | None = None,
    last: tuple[str, str] | None = None,
) -> list[str]:
    """The commit of ``stores``, then ``end`` (the token's release and the return): one line of
    stores (`_guard`: they run no Python code and check for no interrupt). ``last``: a call
    (source: its function and its arguments) that completes them, made after the stores on
    that line (its C
    function runs no Python code; the interrupt check after a call comes when all is done).
    Where the list of ops ``extra`` (a name) is not empty (the prefix cache's part of a
    crossing: dict and set changes that no store makes), ``last`` joins it as its last op and
    its commit is that call, over an iterator made before the line (making it is a call
    too)."""

    def statement(obj: str, key: str, value: str) -> str:
        return f"{obj}{key} = {value}" if key.startswith(".") else f"{obj}[{key}] = {value}"

    line = "; ".join(statement(*store) for store in stores)
    called = "" if last is None else f"{last[0]}({last[1]}); "
    if extra is None:
        return [f"{indent}{line}; {called}{end}"]
    return [
        f"{indent}if {extra}:",
        *([] if last is None else [f"{indent}    {extra}.append(({last[0]}, {last[1]}))"]),
        f"{indent}    xops = ops_of({extra})",
        f"{indent}    {line}; commit(xops); {end}",
        f"{indent}{line}; {called}{end}",
    ]


def _fitted(out: list[str], begin: int, g: int, fit: bool) -> None:
    """With ``fit``, group ``g``'s plan (``out`` from ``begin``) only where ``fit`` says the
    group is past its slack (`_crossing`); within it, its new slack alone."""
    if fit:
        out[begin:] = [
            f"if fit > {g}:",
            f"    v{g}, w{g} = s{g} + r{g} - q{g}, None",
            "else:",
            *("    " + line for line in out[begin:]),
        ]


def _crossed(
    core: CoordinatorCore,
    indent: str,
    flat: bool = False,
    batched: bool = False,
    full: bool = False,
    runs: bool = False,
) -> list[str]:
    """What `_crossing` planned, added to ``ops`` (the pools' part to ``ev{i}``, the evicted
    blocks, and ``gb{g}``, the slabs' garbage; its takes are in the pools' counters); with
    ``flat``, the hot fields to the batch's stores (``push``, ``push{g}``) instead (``full``:
    as `_row`'s); with ``batched``, the prefix cache's part (``xe``) too, and its keys'
    blocks left to the batch's ``xl``; with ``runs``, a run taken (``rn{g}``): one slice
    store, which grows the slab where the segment ends it (``te{g}`` then its new end)."""
    n = len(core.names)
    pool_of, _ = _pools(core)
    out = []
    for g in range(n):
        i = pool_of[id(core.pools[g])]
        # (`_crossing` plans an eviction, and garbage without a move, for a window only)
        evicts = core._managers[g].kind != "full_attention"
        out += [
            f"if w{g} is not None:",
            f"    ops.append(w{g})",
            *(
                [
                    f"    if dr{g} == 1:",
                    f"        ev{i}.append(d{g})",
                    f"    elif dr{g}:",
                    f"        ev{i} += d{g}[::-1]",
                    f"    gb{g} += gm{g}",
                ]
                if evicts
                else []
            ),
            f"    if m{g} is not None:",
            *([] if evicts else [f"        gb{g} += gm{g}"]),
            f"        ops.append((sb{g}.extend, m{g}))",
            f"        te{g} += len(m{g})",
            f"    elif t{g}:",
            f"        ops.append((setitem, sb{g}, x{g}, t{g}))",
        ]
        if runs:
            # (a slice store past the slab's end grows it: a segment that ends the slab)
            out += [
                f"    elif rn{g} is not None:",
                f"        y{g} = x{g} + len(rn{g})",
                f"        ops.append((setitem, sb{g}, slice(x{g}, y{g}), rn{g} + zero1 * gw{g} "
                f"if gw{g} else rn{g}))",
                f"        if y{g} + gw{g} > te{g}:",
                f"            te{g} = y{g} + gw{g}",
            ]
    if batched:
        out += [
            "if xe:",
            "    ops += xe; xl.update({lk: (m, k, kept) for lk, m, k, kept in xk})",
        ]
    if flat:
        out.append("push(o); " + _row(n, [f"v{g}" for g in range(n)], full=full))
    else:
        values = ", ".join(f"v{g}, q{g}" for g in range(n))
        out.append(f"ops.append((setitem, hot, slice(o, o + {n * HOT}), [{values}]))")
    return [indent + line for line in out]


def _row(n: int, slacks: list[str], row: str = "row", full: bool = False) -> str:
    """The source that adds a request's hot fields (``slacks`` and the steps ``q{g}``) to a
    batch's ``hots`` (by ``row``), in the table's order; of one group, its slack alone
    (stored field by field: two C passes cost less than one of slices, `_respec_all`),
    unless ``full`` (each request's own step: `_advance_all`'s ``each``)."""
    if n == 1 and not full:
        return f"{row}({slacks[0]})"
    fields = [""] * (n * HOT)
    for g in range(n):
        fields[g * HOT + SLACK], fields[g * HOT + STEP] = slacks[g], f"q{g}"
    return f"{row}(({', '.join(fields)}))"


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
            # (every block taken moved the fresh or the head counter by one)
            f"tk = f{i} - pool._fresh + h{i} - pool._head - len(ev{i})",
            "if tk:",
            '    ops.append((setattr, pool, "_used", pool._used + tk))',
        ]
    for g in range(len(core.names)):
        out += [f"if gb{g}:", f"    ops.append((setitem, garbage, {g}, garbage[{g}] + gb{g}))"]
    return [indent + line for line in out]


def _pool_locals(core: CoordinatorCore, batch: bool = False) -> str:
    """The locals of the pools and slabs, as `_crossing` reads them (one line). A ``batch``'s
    evicted blocks (``ev{i}``) are an array where a window evicts: its requests' windows
    evict runs, each added in C, and a later take past the queue reads a slice of them
    (`BlockPool.front_released`); else, and one request's, a list (an array costs more to
    make than its few evictions save)."""
    _, first_of = _pools(core)
    evicts = any(_eviction(m, 1)[1] != "never" for m in core._managers)
    evicted = "array('i')" if batch and evicts else "[]"
    return "; ".join(
        [
            f"pool = pools[{g}]; ev{i} = {evicted}; f{i}, h{i}, nb{i}, qu{i}, sa{i}, ca{i}, "
            f"sh{i} = pool._fresh, pool._head, pool.num_blocks, pool._queue, pool._stale, "
            "pool._cached, pool._shared"
            for i, g in enumerate(first_of)
        ]
        + [f"sb{g} = slabs[{g}]" for g in range(len(core.names))]
    )


def _respec(
    core: CoordinatorCore,
    typed: bool,
    head: Any,
    tail: list[str],
    shape: Any,
) -> list[str]:
    """The source of ``respec`` and ``respec_all`` (``*_typed`` with ``typed``): the rollback
    of the latest step's rejected drafts and the next speculative step in one call, for one
    request or for an engine step's batch: stores only when the rollback frees no block and
    the step ends in the block of the bound (`_fits`) within the slack it leaves; a
    step past it planned in plain locals (`_crossing`) and committed with the stores; anything
    else to the core's boundary path, then its general path
    (`CoordinatorCore._general_respec`: the rollback and the step planned on one plan)."""
    n = len(core.names)
    hw, cw = core.table.hot_width, core.table.cold_width
    suffix = "_typed" if typed else ""
    qs = _tuple("q", n)[1:-1]
    ks = _tuple("k", n)[1:-1]
    rs = _tuple("r", n)[1:-1]
    js = _tuple("j", n)[1:-1]
    ints = " or ".join(f"type(q{g}) is not int" for g in range(n))
    kints = " or ".join(f"type(k{g}) is not int or not 0 <= k{g} <= q{g}" for g in range(n))
    back = "return general_respec(me, request_id, o, num_new, lookahead, rejected)"
    past = "return respec_cross(me, request_id, o, num_new, lookahead, rejected)"
    args = "request_id, num_new, lookahead, rejected"
    fresh = _pool_locals(core)
    zero_gb = " = ".join(f"gb{g}" for g in range(n)) + " = 0"
    ends = "; ".join(f"te{g} = len(slabs[{g}])" for g in range(n))
    # One request past the stores' reach (``respec``'s and ``respec_typed``'s, written once):
    # planned in plain locals, else the core's boundary path (`CoordinatorCore._boundary_step`
    # with the rollback), else general. With ``more`` (the ops of content appended with the
    # step: `CoordinatorCore.advance_speculative_content`), committed with its plan, or
    # `DECLINED` where that plan is not made here (the caller plans the call).
    back_more = f"{back} if more is None else DECLINED"
    lines: list[str] = [] if typed else [
        "    def respec_cross(me, request_id, o, num_new, lookahead, rejected, more=None):",
        f"        if not (type(num_new) is tuple or type(num_new) is list) or len(num_new) != {n}:",
        f"            {back_more}",
        "        if not (type(rejected) is tuple or type(rejected) is list) "
        f"or len(rejected) != {n}:",
        f"            {back_more}",
        f"        {qs} = num_new",
        f"        {rs} = rejected",
        f"        {js} = specs.get(o, nospec)",
        f"        if {ints} or {' or '.join(f'q{g} < 0' for g in range(n))}:",
        f"            {back_more}",
        f"        c = o * {cw // hw}",
        f"        {fresh}",
    ]
    if not typed:
        # Its common case planned and stored in one line (`_stored`, a segment's move too);
        # anything `_crossing` declines planned again with an ops list (``respec_ops``).
        prep, stores = _stored(core)
        ops = "return respec_ops(me, request_id, o, num_new, lookahead, rejected, more)"
        lines += ["        " + ", ".join(f"lk{g}" for g in range(n)) + ("," if n == 1 else "")
                  + " = lookahead"]
        lines += _crossing(core, ops, "        ", lean=True, register=True, drafted=True)
        lines += [
            # Content registered (a block its content filled ahead of the positions, `_hold`)
            # by a drafting step without content of its own: the request rests after it, as
            # on the core's boundary path (`CoordinatorCore._register_boundary`).
            "        if pend is not None:",
            "            if more is not None:",
            f"                {ops}",
            "            known = pend.streams",
            "            xo.append((setitem, extras, o, pend.resting([r if s < 0 or r >= "
            "len(known[s].hashes) else len(known[s].hashes) for s, r in zip(pend.stream_of, "
            "pend.registered)])))",
        ]
        lines += ["        " + line for line in prep]
        lines += [
            "        spec = tuple(lookahead)",
            "        if more:",
            "            xo += more",
            *_committed(
                [*stores, ("specs", "o", "spec")], "del owner[0]; return  # the commit",
                "        ", "xo",
            ),
            "",
            "    def respec_ops(me, request_id, o, num_new, lookahead, rejected, more=None, "
            "compacted=0):",
            f"        {qs} = num_new",
            f"        {rs} = rejected",
            # Content waiting for the positions the step commits (a generated token's
            # block, filled by `extend_content` after the latest step), in a layout the
            # lean crossing does not register (a pool of several groups, a window's mask):
            # `plan_cross` registers it with the rollback and the lookahead.
            "        if extras and more is None:",
            "            extra = extras.get(o)",
            "            if type(extra) is Active and extra.pending() and not ("
            + " or ".join(f"type(r{g}) is not int or r{g} < 0" for g in range(n))
            + "):",
            "                return respec_registering(me, request_id, o, num_new, lookahead, "
            "rejected, extra)",
            f"        {js} = specs.get(o, nospec)",
            f"        c = o * {cw // hw}",
            f"        {fresh}",
            f"        {zero_gb}",
            f"        {ends}",
            "        ops = []",
        ]
        fail = (
            "return boundary(me, request_id, o, num_new, False, lookahead, rejected) "
            "if more is None else DECLINED"
        )
        # A move that would make its slab due: the slab compacted first (nothing observable),
        # then the call planned again, the move allowed there (as ``cross_ops`` does, and
        # `CoordinatorCore._boundary_step`, which cost a short request's drafting step some
        # 50 µs more than the compaction itself).
        compacting = (
            "pre = []; compact(pre, ({g},)); commit(ops_of(pre)); return respec_ops(me, "
            "request_id, o, num_new, lookahead, rejected, more, compacted | (1 << {g}))"
        )
        # (one request: a cached block taken or evicted is planned, its ops in ``ops``)
        lines += _crossing(core, fail, "        ", compacting, cache_ops="ops")
        lines += _crossed(core, "        ")
        lines += _pooled(core, "        ")
        lines += [
            "        if more:",
            "            ops += more",
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
    ]
    lines += _redrafted(core, past, "            ", typed)
    lines += tail
    for units in (False, True) if typed else (False,):
        lines += _respec_all(core, typed, units, shape)
        lines += tail
    return lines


def _hot_stores(n: int, full: bool = False) -> list[str]:
    """A batch's commit of its requests' hot fields (``offs``, ``hots``: each request's new
    slack, or with several groups or ``full`` its whole row): in one slice a request (one
    store, not one per field), or with one group field by field (a slice's object costs more
    than a second pass)."""
    if n == 1 and not full:
        slack = "offs" if SLACK == 0 else f"map(add, offs, repeat({SLACK}))"
        return [
            f"            ops.append((commit, map(setitem, repeat(hot), {slack}, hots)))",
            "            ops.append((commit, map(setitem, repeat(hot), "
            f"map(add, offs, repeat({STEP})), repeat(q0))))",
        ]
    return [
        "            ops.append((commit, map(setitem, repeat(hot), "
        f"map(slice, offs, map(add, offs, repeat({n * HOT}))), hots)))"
    ]


def _respec_all(core: CoordinatorCore, typed: bool, units: bool, shape: Any) -> list[str]:
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
    qs = _tuple("q", n)[1:-1]
    ks = _tuple("k", n)[1:-1]
    rs = _tuple("r", n)[1:-1]
    js = _tuple("j", n)[1:-1]
    us = ", ".join(f"U{g}" for g in range(n)) + comma
    ints = " or ".join(f"type(q{g}) is not int" for g in range(n))
    kints = " or ".join(f"type(k{g}) is not int or not 0 <= k{g} <= q{g}" for g in range(n))
    spec = "(" + ks + ")"
    fresh = _pool_locals(core, batch=True)
    zero_gb = " = ".join(f"gb{g}" for g in range(n)) + " = 0"
    ends = "; ".join(f"te{g} = len(slabs[{g}])" for g in range(n))
    raw = (
        "[(" + ", ".join(f"x{g}._value" for g in range(n)) + ",) for "
        + ", ".join(f"x{g}" for g in range(n)) + comma + " in rejected]"
        if units
        else "rejected"
    )
    refuse = "del owner[0]; return checked(request_ids, num_new, lookahead, rejected)"
    # The batch in one pass, in order: a request within its slack is its offset and new
    # slacks (written in C at the commit); one past it is planned in plain locals
    # (`_crossing`) and pushed so too, until one is not (then it and every later one past its
    # slack wait in ``xs``, so that blocks are taken in the batch's order: planned after the
    # pass in locals, else on the core's boundary plan seeded with what the locals planned,
    # else the general path).
    back = (
        refuse
        if units
        else "return general_respec_all(me, request_ids, num_new, lookahead, rejected, [], [])"
    )
    checked = f"return general_respec_all(me, request_ids, num_new, lookahead, {raw}, [], [])"
    item = f"(request_id, o, ({rs}))" if units else "(request_id, o, rejected_i)"
    lines = [
        f"    def respec_all{suffix}(request_ids, num_new, lookahead, rejected"
        + (", units, checked" if units else "")
        + ", compacted=0):",
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
        *_compacted_first(n),
        f"            spec = {spec}",
        "            offs, xs, cx, ops = [], [], [], []",
        "            hots = []; push, row = offs.append, hots.append; xl = {}",
        f"            {fresh}",
        f"            {zero_gb}",
        f"            {ends}",
        # (the keys the pass's runs evicted and registered, for the core's plan:
        # `_seeded_plan`; those registered, for later requests' registrations; and the
        # lookahead, which the positions a step commits end before)
        *(["            xr, xw = [], None"] if _caching(core) else []),
        f"            {_tuple('lk', n)[1:-1]} = {ks}",
        "            for request_id, rejected_i in zip(request_ids, rejected):",
        "                o = get(request_id) if type(request_id) is str else None",
        "                if o is None:",
        "                    " + (refuse if units else "raise unknown(request_id)"),
    ]
    if units:
        # Each request's tuple read where it is met: its counts ``r{g}``, their net step
        # ``n{g} = q{g} − r{g}`` (`_fits`; past any slack where the step ends at or before the
        # rolled-back end: it never fits) and, with several groups, ``rb``, whether any is
        # rolled back. (A cache of the tuples by identity cost less only where a scheduler
        # passes the same few tuple objects again, and twice this where it makes each
        # request's tuple, as one that counts each request's rejected drafts does.)
        nets = "; ".join(f"n{g} = q{g} - r{g} if q{g} > r{g} else never + 1" for g in range(n))
        if n > 1:
            nets += "; rb = " + " or ".join(f"r{g}" for g in range(n))
        lines += [
            "                if type(rejected_i) is not tuple:",
            f"                    {refuse}",
            # (a tuple's unpacking checks its length, and runs no code of the caller's)
            "                try:",
            f"                    {rs} = rejected_i",
            "                except ValueError:",
            f"                    {refuse}",
            "                if " + " or ".join(f"type(r{g}) is not U{g}" for g in range(n)) + ":",
            f"                    {refuse}",
            "                " + "; ".join(f"r{g} = r{g}._value" for g in range(n)),
            f"                {nets}",
        ]
    if not typed:
        lines += [
            "                if not (type(rejected_i) is tuple or type(rejected_i) is list)"
            f" or len(rejected_i) != {n}:",
            f"                    xs.append({item}); continue",
        ]
    if not units:
        lines.append(f"                {rs} = rejected_i")
    if n > 1:
        # (with ``units``, ``rb``: whether the request rolls any back; where not, its
        # speculative tail is not read: every ``r{g} <= j{g}`` holds)
        tail = "specs.get(o, nospec) if rb else nospec" if units else "specs.get(o, nospec)"
        lines.append(f"                {js} = {tail}")
    # The cold offset, computed before the slacks' checks only where one reads a cold field.
    fits = [_fits(core, g, typed, lazy=n == 1, net=units) for g in range(n)]
    cold = [f"                c = o * {cw // hw}"]
    early = any("st[c" in fit for fit in fits)
    if early:
        lines += cold
    # Within every slack (`_fits`): nested, the stores at the innermost; else ``fit``, the
    # groups before the first one past its slack (`_crossing` plans only the slack for them).
    indent = "                "
    for g in range(n):
        lines += [
            f"{indent}s{g} = hot[{_plus('o', g * HOT + SLACK)}]",
            f"{indent}if {fits[g]}:",
        ]
        indent += "    "
    # (``offs.append`` written out: the interpreter appends in place, with no call)
    slacks = [f"s{g} - n{g}" if units else f"s{g} + r{g} - q{g}" for g in range(n)]
    lines.append(f"{indent}offs.append(o); {_row(n, slacks, 'hots.append')}; continue")
    for g in reversed(range(n)):
        indent = indent[4:]
        # A window's step past its slack that takes no block (the later groups within
        # theirs): its row, its anchor stored, marked crossed (`_moved_row`).
        stopped = _row(n, ["0" if h == g else x for h, x in enumerate(slacks)], "hots.append")
        moved = _moved_row(
            core, g, typed, indent + "    ", "not xs", fits,
            [] if early else cold, [f"{js} = specs.get(o, nospec)"] if n == 1 else [],
            f"offs.append(o); {stopped}; cx.append(o); continue",
        )
        if n > 1 or moved:
            lines += [f"{indent}else:", *moved, *([f"{indent}    fit = {g}"] if n > 1 else [])]
    keep = "; ".join(f"F{i}, H{i} = f{i}, h{i}" for i in range(len(pool_of))) + "; compact = -1"
    restore = "; ".join(f"f{i}, h{i} = F{i}, H{i}" for i in range(len(pool_of)))
    # A move that would make its slab's garbage due, in the batch's first requests: the slab
    # compacted first (nothing observable; nothing else was written), then the call again, its
    # room given by the compaction; past them, and on the core's plan (`_seeded_plan`), the
    # move is made, the slab compacted at a later batch's start (`_compacted_first`).
    again = (
        "                if compact >= 0:\n"
        "                    pre = []\n"
        "                    if garbage[compact]:\n"
        "                        compact_ops(pre, (compact,))\n"
        f"                    commit(ops_of(pre)); del owner[0]; return respec_all{suffix}("
        "request_ids, num_new, lookahead, rejected"
        + (", units, checked" if units else "")
        + ", compacted | 1 << compact)"
    )
    # Past some slack: planned here unless an earlier one could not be.
    lines += [
        "                if xs:",
        f"                    xs.append({item}); continue",
        f"                {keep}",
        *([f"                {js} = specs.get(o, nospec)"] if n == 1 else []),
        *([] if early else cold),
        "                for _ in once:",
    ]
    # (a prefill chunk's run of blocks too, as `_advance_all` takes it: a batch of prompts
    # at a drafting scheduler's start)
    lines += _crossing(
        core, "break", "                    ", "compact = {g}; break", typed, fit=True,
        batched=True, runs=True, drafted=True,
        compact_while=f"len(offs) < {_REPLAN_BELOW} and ",
    )
    lines += _crossed(core, "                    ", flat=True, batched=True, runs=True)
    lines += [
        "                else:",
        # (a crossing's offset only: its item is made again where the core needs it)
        "                    cx.append(o); continue",
        f"                {restore}",
        *again.split("\n"),
        # (the keys a declined request's runs evicted or registered: the core plans them)
        *(["                while xr and xr[-1][0] == o:", "                    del xr[-1]"]
          if _caching(core) else []),
        f"                xs.append({item})",
        "            if len(set(request_ids)) != len(request_ids):",
        f"                {checked}",
        "            ops.append((specs.update, zip(offs, repeat(spec))))",
    ]
    lines += _hot_stores(n)
    # The requests only stored (not planned in locals), with their slack after the rollback.
    slacks = ["v + q0"] if n == 1 else [f"v[{g * HOT + SLACK}] + q{g}" for g in range(n)]
    fast = (
        f"[(o, [{', '.join(slacks)}]) for o, v in "
        "zip(offs[:within], hots[:within]) if o not in crossed]"
    )
    # The core's plan shares the locals' lists of evicted blocks; its pools'
    # fresh and head counters, its garbage and its slabs' ends are synced with the locals
    # around each use.
    into = _into_plan(core, "                    ")
    # Blocks a rollback the core planned gave back, not yet taken again (`plan_unroll`): the
    # requests after it take the core's path too, whose takes reach them first (``fq``).
    given = " or ".join(f"plan.pools[pids[{g}]][5]" for g in first_of)
    out_of = [
        f"                    f{i}, h{i} = plan.pools[pids[{g}]][1:3]"
        for i, g in enumerate(first_of)
    ] + [f"                    fq = bool({given})"] + [
        f"                    te{g}, gb{g} = plan.slab_end[{g}], "
        f"plan.garbage.get({g}, garbage[{g}]) - garbage[{g}]"
        for g in range(n)
    ]
    lines += [
        "            plan, fq = None, False",
        "            if xs:",
        "                within, crossed = len(offs), set(cx)",
        "                for request_id, o, rejected_i in xs:",
        f"                    {keep}",
        "                    for _ in once:",
        "                        if fq:",
        "                            break",
    ]
    if not typed:
        lines += [
            "                        if not (type(rejected_i) is tuple or "
            f"type(rejected_i) is list) or len(rejected_i) != {n}:",
            "                            break",
        ]
    lines += [
        f"                        {rs} = rejected_i",
        f"                        {js} = specs.get(o, nospec)",
        f"                        c = o * {cw // hw}",
    ]
    lines += _crossing(core, "break", "                        ", "", typed)
    lines += _crossed(core, "                        ", flat=True)
    lines += [
        "                    else:",
        "                        continue",
        f"                    {restore}",
        "                    # The core's boundary path (a slab due, ...), on one plan, which",
        "                    # starts from the keys' blocks the locals' evictions left (as its",
        "                    # own would: a key it registers again, or evicts more of).",
        "                    if plan is None:",
        *_seeded_plan(core, "                        ", runs=_caching(core)),
        *into,
        "                    back = plan_unroll(o, rejected_i, plan, num_new)",
        "                    if back is None or not plan_boundary(ops, plan, o, num_new, None, "
        "lookahead, back):",
        # Whatever the boundary plan declines (its moves allowed): the general path.
        f"                        return general_respec_all(me, request_ids, num_new, lookahead, "
        f"{raw}, {fast}, [(x, o, r) for x, r in zip(request_ids, {raw}) "
        "if (o := get(x)) in crossed] + xs)",
        *out_of,
        "            if plan is None:",
    ]
    lines += _pooled(core, "                ")
    lines += [
        "            else:",
        *(line[4:] for line in into),
        "                emit_boundary(ops, plan)",
        "            commit(ops_of(ops)); del owner[0]; return  # the commit",
    ]
    return lines


def _into_plan(core: CoordinatorCore, indent: str) -> list[str]:
    """The lines that bring a batch's locals (`_pool_locals`: its pools' fresh and head
    counters, its lists of evicted blocks, its slabs' ends and garbage) into the
    core's boundary ``plan``, which then plans on from them."""
    _, first_of = _pools(core)
    into = []
    for i, g in enumerate(first_of):
        into += [
            f"pool = plan.pools.get(pids[{g}])",
            "if pool is None:",
            f"    plan.pools[pids[{g}]] = [pools[{g}], f{i}, h{i}, [], ev{i}, []]",
            "else:",
            f"    pool[1], pool[2] = f{i}, h{i}",
        ]
    for g in range(len(core.names)):
        into += [
            f"plan.slab_end[{g}] = te{g}",
            f"if gb{g}:",
            f"    plan.garbage[{g}] = garbage[{g}] + gb{g}",
        ]
    return [indent + line for line in into]


def _seeded_plan(core: CoordinatorCore, indent: str, runs: bool = False) -> list[str]:
    """The lines that make a batch's boundary ``plan`` (its moves allowed in every slab,
    whatever garbage they leave: `_compacted_first`), started from the keys'
    blocks the locals' evictions left (``xl``: as its own would, a key it registers again or
    evicts more of); with ``runs``, those its runs evicted (none left) and registered (one
    each: ``xr``, `_batched_run`); the caller brings the locals in (`_into_plan`)."""
    return [
        f"{indent}plan = Boundary(anywhere)",
        f"{indent}if xl:",
        f"{indent}    plan.lists.update({{lk: (m, k, list(kept)) for lk, (m, k, kept) in "
        "xl.items()})",
        *(
            [
                f"{indent}for _, cache_map, keys, ids in xr:",
                f"{indent}    plan.lists.update(zip(zip(repeat(id(cache_map)), keys), "
                "zip(repeat(cache_map), keys, map(list, repeat((), len(keys))) if ids is None "
                "else map(list, zip(ids)))))",
            ]
            if runs
            else []
        ),
    ]


def _plan_cross(core: CoordinatorCore) -> list[str]:
    """The source of ``plan_cross(ops, plan, o, num_new, extra, ha, hv, sa, sv, rejected=None,
    lookahead=None, hashed=None)``:
    `CoordinatorCore._plan_boundary` of a plain step (no lookahead, no rollback before it, no
    slot mappings) of the request at ``o`` (its content kept in ``extra``) written out per
    group with the group's constants in, on the same boundary ``plan`` (so that requests
    planned by either share the pools' fronts, the slabs' ends and the prefix cache's lists),
    its stores to the hot fields appended to ``ha``, ``hv`` (positions, values) and to the
    cold ones (a crossing group's: only those that move) to ``sa``, ``sv``, which the caller
    commits as one map each, the rest to ``ops``:
    each group within its slack, or one block taken at its table's end (a cached one evicted
    from the prefix cache) and those evicted at its front by a window, one or a run (a
    shared one loses a reference, a cached one stays cached, free); then the full blocks of
    committed positions whose hashes the request's streams know registered
    (`_register_boundary`'s rule, once per group of each sequence and granularity). Returns
    False for any other step, as the core's does (the caller takes the general path, or
    compacts the slab of ``plan.compact`` first); with a kind the generator does not write
    out, it is the core's.

    With ``rejected`` and ``lookahead`` (per group), a drafting step's
    (`CoordinatorCore.advance_speculative_content`): the latest step's ``rejected`` drafts
    rolled back first (at most what it left speculative), then a step that ends past the
    rolled-back end in every group that rolls back (so the rollback gives back no block: the
    step takes them again, `_fits`), whose last ``lookahead`` positions are neither committed
    nor registered (the caller stores the lookahead); any other such call returns False,
    never the core's plan (which would not roll back). ``hashed``: the hashes this call's
    content adds per stream (`_hashing`), not yet in the streams, registered as theirs.
    A plain step whose run the core's plan takes returns 2 (truthy): with ``rests``, that
    plan stored the request resting, or held it where its prompt has hashes left."""
    n = len(core.names)
    hw, cw = core.table.hot_width, core.table.cold_width
    if any(
        not core._has_rows[g] or core._managers[g].kind not in _PLANNED for g in range(n)
    ):
        return [
            "    def plan_cross(ops, plan, o, num_new, extra, ha, hv, sa, sv, rejected=None, "
            "lookahead=None, hashed=None, rests=False):",
            "        if rejected is not None:",
            "            return False",
            "        return plan_boundary(ops, plan, o, num_new, None, rests=rests) and 2",
            "",
        ]
    comma = "," if n == 1 else ""
    # The cold fields' order, which the slices read and write.
    assert tuple(range(ANCHOR, MAXLEN + 1)) == (ANCHOR, BASE, EVICT, SKIPPED, START, LENGTH,
                                                CAPACITY, MAXLEN)
    qs = ", ".join(f"q{g}" for g in range(n)) + comma
    rjs = ", ".join(f"rj{g}" for g in range(n)) + comma
    lks = ", ".join(f"lk{g}" for g in range(n)) + comma
    js = ", ".join(f"j{g}" for g in range(n)) + comma
    # A rollback's group ends past its rolled-back end (or neither rolls back nor steps).
    unfit = " or ".join(
        f"rj{g} > j{g} or q{g} <= rj{g} and (q{g} or rj{g})" for g in range(n)
    )
    lines = [
        "    def plan_cross(ops, plan, o, num_new, extra, ha, hv, sa, sv, rejected=None, "
        "lookahead=None, hashed=None, rests=False):",
        f"        {qs} = num_new",
        f"        {rjs} = rejected or nospec",
        f"        {lks} = lookahead or nospec",
        "        if rejected is not None:",
        f"            {js} = specs.get(o, nospec)",
        f"            if {unfit}:",
        "                return False",
        f"        cb = o // {hw} * {cw}",
        "        pstates, lists, crossed = plan.pools, plan.lists, False",
    ]
    for g in range(n):
        p, size = core._pool[g], core._block_size[g]
        in_flight = core._in_flight[g]
        manager = core._managers[g]
        h = g * HOT
        c = f"cb + {_cold(ANCHOR, g) - ANCHOR}"
        first = "rows" if p == 1 else f"rows // {p}"
        end = "rows + q" if p == 1 else f"(rows + q + {p - 1}) // {p}"
        # A crossing group's cold fields are read in one slice and written in one (an
        # array's slice assignment at the commit).
        out = [
            f"q, k = q{g}, {c} + {ANCHOR}",
            # (``s``: the slack after the rollback)
            f"anchor0, s = st[k], hot[o + {h + SLACK}] + rj{g}",
            "rows = anchor0 - s",
            f"first, end = {first}, {end}",
            "touched = end - first if q else 0",
            f"if 0 <= q <= s and (s or q) and touched <= {in_flight}:",
            f"    ha += (o + {h + SLACK}, o + {h + STEP}); hv += (s - q, q)",
            f"    a{g} = (st[k + {SKIPPED - ANCHOR}], rows + q - lk{g}, 0)",
            "else:",
            "    _, base0, evict, skipped, start, length, capacity, maxlen = "
            f"st[k : k + {MAXLEN - ANCHOR + 1}]",
            f"    if q < 0 or touched > {in_flight} or end > maxlen:",
            "        return False",
            f"    slab, skip = slabs[{g}], skipped",
        ]
        evicts, evicting = _eviction(manager, size)
        out += ["    " + line for line in evicts]
        out += [
            f"    want = (end + {size - 1}) // {size} - skipped - length",
            "    if want < 0:",
            "        want = 0",
            "    dropped = skip - skipped",
            "    if want > 1:  # a run taken: the core's plan, if nothing is planned yet",
            "        if crossed or rejected is not None:",
            "            return False",
            # Nothing planned yet but the groups before within their slack: 2 stores each.
            *([f"        del ha[-{2 * g}:], hv[-{2 * g}:]"] if g else []),
            "        return plan_boundary(ops, plan, o, num_new, None, rests=rests) and 2",
            "    crossed = True",
            "    moved, taken = None, 0",
            "    if want or dropped:  # else only the fields move (a held step's registration)",
            f"        pool = pools[{g}]",
            f"        state = pstates.get(pids[{g}])",
            "        if state is None:",
            f"            state = pstates[pids[{g}]] = [pool, pool._fresh, pool._head, [], [], []]",
            # Those a window evicts (a run past it: the first step after a prefill chunk
            # longer than the window, a chunked-local group's chunk boundary), the last first.
            "        for block in slab[start : start + dropped][::-1]:",
            f"            held = plan.shared.get((pids[{g}], block)) if plan.shared else None",
            "            count = pool._shared.get(block, 1) if held is None else held[2]",
            "            if count > 1:  # a prefix hit's block loses a reference",
            f"                plan.shared[pids[{g}], block] = (pool, block, count - 1)",
            "            else:",
            "                if block in pool._cached:  # its content stays in the queue",
            "                    ops.append((setitem, pool._free_cached, block, 1))",
            "                state[4].append(block)",
            "        if want:",
            "            if state[1] < pool.num_blocks:",
            "                taken = state[1]",
            "                state[1] += 1",
            "            elif state[5]:  # a block a rollback gave back (`plan_unroll`)",
            "                taken = state[5].pop(0)",
            # (the queue's first live entry: stale ones skipped, `_Boundary.live_head`; past
            # the queue, a block the plan evicted: `_Boundary.released_head`)
            "            elif (taken := plan.live_head(state)) is not None or "
            "(taken := plan.released_head(state)) is not None:",
            "                key = pool._cached.get(taken)",
            "                if key is not None:  # evicted from the prefix cache",
            "                    maps = pool._maps  # `BlockPool.map_of`",
            "                    cache_map = maps[0] if len(maps) == 1 else "
            "pool.map_of(taken, key)",
            "                    lk = id(cache_map), key",
            "                    planned = lists.get(lk)",
            "                    if planned is not None:",
            "                        planned[2].remove(taken)",
            "                    elif cache_map.get(key) == taken:  # its one block: none left",
            "                        lists[lk] = (cache_map, key, [])",
            "                    else:",
            "                        planned = lists[lk] = (cache_map, key, "
            "HeldBlocks(cache_map.get(key)))",
            "                        planned[2].remove(taken)",
            "                    ops += ((pool._cached.pop, taken, None), "
            "(setitem, pool._free_cached, taken, 0))",
            "                state[2] += 1",
            "            else:",
            "                return False",
            "        if want and length + want > capacity:",
            f"            garbage = plan.garbage.get({g}, table_garbage[{g}]) + dropped",
            f"            tail = plan.slab_end.get({g}, len(slab))",
            f"            if {g} not in plan.compacted and "
            "due(garbage + capacity - dropped, tail):",
            f"                plan.compact = {g}",
            "                return False",
            "            moved = slab[start + dropped : start + length]",
            "            moved.append(taken)",
            "            room = grown(len(moved), capacity, skip)",
            "            moved.extend(array('i', bytes(4 * (room - len(moved)))))",
            f"            plan.slab_end[{g}] = tail + room",
            "            ops.append((slab.extend, moved))",
            "            garbage += capacity - dropped",
            f"            if garbage != table_garbage[{g}]:",
            f"                plan.garbage[{g}] = garbage",
            "            start, capacity = tail, room",
            "        else:",
            "            if want:",
            "                ops.append((setitem, slab, start + length, taken))",
            "            if dropped:",
            f"                plan.garbage[{g}] = plan.garbage.get({g}, table_garbage[{g}]) "
            "+ dropped",
            "            start, capacity = start + dropped, capacity - dropped",
            "        length += want - dropped",
            "    rows += q",
            "    if first >= evict:",
            f"        evict = {evicting}",
            f"    index = rows // {p * size}",
            "    base, anchor = base0, rows",
            "    if skip <= index < skip + length:",
            "        at = index - skip",
            "        if moved is not None:",
            "            block = moved[at]",
            "        elif want and at >= length - want:",
            "            block = taken",
            "        else:",
            "            block = slab[start + at]",
            "        base = block - index",
            # min(room, evict, the block's end) in the group's slots, then in rows, at
            # least ``rows``.
            f"        anchor = (index + 1) * {size}",
            f"        room = (skip + length) * {size}",
            "        if room > maxlen:",
            "            room = maxlen",
            "        if room < anchor:",
            "            anchor = room",
            "        if evict < anchor:",
            "            anchor = evict",
            *([f"        anchor *= {p}"] if p != 1 else []),
            "        if anchor < rows:",
            "            anchor = rows",
            f"    ha += (o + {h + SLACK}, o + {h + STEP}); hv += (anchor - rows, q)",
            # The cold fields, on the batch's one map of cold stores: the anchor, base and
            # evict bound, and the length where a block is taken in place; all where one is
            # dropped or the entries move.
            "    if dropped or moved is not None:",
            "        sa += (k, k + 1, k + 2, k + 3, k + 4, k + 5, k + 6)",
            "        sv += (anchor, base, evict, skip, start, length, capacity)",
            "    elif want:",
            f"        sa += (k, k + 1, k + 2, k + {LENGTH - ANCHOR})",
            "        sv += (anchor, base, evict, length)",
            "    else:",
            "        sa += (k, k + 1, k + 2); sv += (anchor, base, evict)",
            f"    a{g} = (skip, rows - lk{g}, taken)",
        ]
        lines += ["        " + line for line in out]
    # The registration (`_register_boundary`): per group with content, the blocks its
    # committed positions fill, from the table before the step (and the block it takes).
    # A group registers nothing where its stream has no hash past those it registered (the
    # call's own, ``hashed``, after the stream's).
    lines += ["        of, known, reg = extra.stream_of, extra.streams, extra.registered"]
    for g in range(n):
        if core.caches[g] is None:
            continue
        out = [
            f"s = of[{g}]",
            "hashes = known[s].hashes if s >= 0 else ()",
            "more = hashed.get(known[s], ()) if hashed and s >= 0 else ()",
            f"if len(hashes) + len(more) > reg[{g}]:",
            f"    (skip, rows, taken), nh = a{g}, len(hashes) + len(more)",
        ]
        out += _registration(
            core, g, "    ", rows="rows", skip="skip", taken="taken", known="nh",
            key="hashes[i] if i < len(hashes) else more[i - len(hashes)]", ahead="return False",
        )
        lines += ["        " + line for line in out]
    lines += [
        "        if rejected is None and o in specs:",
        "            ops.append((specs.pop, o, None))",
        "        return True",
        "",
    ]
    return lines


def _slack_stores(n: int, pick: Callable[[str], str]) -> list[str]:
    """The lines (in ``content_all``) that store, in C, each group's slack less its count and
    its step for the requests of the batch that ``pick`` keeps (``pick`` wraps a per-request
    sequence: all of them, or those a selector keeps; ``a{g}``, ``b{g}``: the fields'
    offsets, ``step{g}`` the steps' getter). For the whole batch, a group's steps are stored
    only where one differs from its count (a read costs less than a store: steps of one token
    repeat), and each field as one slice assignment where the requests' offsets are evenly
    spaced (``w{g}``, ``v{g}``: the fields' slices, else None)."""
    lines = []
    for g in range(n):
        slack = (
            f"map(setitem, repeat(hot), {pick(f'a{g}')}, map(sub, {pick(f's{g}')}, repeat(q{g})))"
        )
        step = f"map(setitem, repeat(hot), {pick(f'b{g}')}, repeat(q{g}))"
        if pick is str:
            lines += [
                f"                    ops.append((setitem, hot, w{g}, [*map(sub, s{g}, "
                f"repeat(q{g}))]) if w{g} else (commit, {slack}))",
                f"                    if step{g}(hot).count(q{g}) != count:",
                f"                        ops.append((setitem, hot, v{g}, [q{g}] * count) if v{g} "
                f"else (commit, {step}))",
            ]
        else:
            lines += [
                f"                    ops.append((commit, {slack}))",
                f"                    ops.append((commit, {step}))",
            ]
    return lines


def _registration(
    core: CoordinatorCore,
    g: int,
    indent: str,
    *,
    rows: str,
    skip: str,
    taken: str,
    known: str,
    key: str,
    ahead: str,
) -> list[str]:
    """The lines (in ``plan_cross`` and ``plan_fill``, one source for both) that register
    group ``g``'s blocks whose positions are committed (``rows``, after the step) and whose
    hashes are known (``known`` of them, the ``i``-th ``key``), from ``reg[g]`` on, on the
    plan's lists: `CoordinatorCore._register_plan`'s rule. A block below ``skip`` or left out
    by the window mask is not registered; past the table's entries only ``taken`` is (the
    block the step takes; none where empty); a block cached already returns False (the
    caller takes the general path, which decides). ``ahead`` runs where hashes stay ahead of
    the positions. Of the two planners, only these lines and `_plan_cross`'s block taken
    (a cached one evicted) read or write the prefix cache's map (``cached``: the pool's
    blocks to their keys; ``lists``: the planned blocks of a key)."""
    cache = core.caches[g]
    assert cache is not None
    c = f"cb + {_cold(ANCHOR, g) - ANCHOR}"
    keep = _unread(core, g)
    out = [
        f"full, r = {rows} // {cache.rows_per_block}, reg[{g}]",
        f"if full > {known}:",
        f"    full = {known}",
        "if full > r:",
        f"    skipped, start, length = st[{c} + {SKIPPED} : {c} + {LENGTH + 1}]",
        f"    slab, cached, blocks_of = slabs[{g}], pools[{g}]._cached, cache_maps[{g}]",
        "    for i in range(r, full):",
        f"        if i < {skip}{' or ' + keep if keep else ''}:",
        "            continue",
        "        if i < skipped + length:",
        "            block = slab[start + i - skipped]",
        "            if block in cached:",
        "                return False",
    ]
    if taken:
        out += [f"        elif i == skipped + length and {taken}:", f"            block = {taken}"]
    out += [
        "        else:",
        "            return False",
        f"        key, block = {key}, pools[{g}]._ids[block]  # (the id's own object: `add_map`)",
        "        ops.append((setitem, cached, block, key))",
        f"        lk = ids_of[{g}], key",
        "        planned = lists.get(lk)",
        "        if planned is not None:",
        "            planned[2].append(block)",
        "        else:",
        "            held = blocks_of.get(key)",
        "            if held is None:",
        "                lists[lk] = (blocks_of, key, [block])",
        "            else:  # (a key of several blocks: `HeldBlocks`, its changes)",
        "                planned = lists[lk] = (blocks_of, key, HeldBlocks(held))",
        "                planned[2].append(block)",
        f"    ops.append((setitem, reg, {g}, full))",
        f"if {known} > full and {known} > r:",
        f"    {ahead}",
    ]
    return [indent + line for line in out]


def _streams_registered(core: CoordinatorCore, tail: str) -> list[str]:
    """The lines (in ``plan_fill`` and ``extend_fill``) that register, in every group with
    content, the blocks of its positions ``r{g}`` less its speculative ones (``{tail}{g}``)
    whose hashes its stream knows, the stream's own and those the call adds (``hashed``):
    `_registration` per group, ``ahead`` set where hashes stay ahead of the positions."""
    lines = []
    for g in range(len(core.names)):
        if core.caches[g] is None:
            continue
        out = [
            f"s = of[{g}]",
            "if s >= 0:",
            "    stream = streams[s]",
            "    old, more = stream.hashes, hashed.get(stream, ())",
            "    known = len(old) + len(more)",
        ]
        out += _registration(
            core, g, "    ", rows=f"(r{g} - {tail}{g})", skip="skipped", taken="",
            known="known", key="old[i] if i < len(old) else more[i - len(old)]",
            ahead="ahead = True",
        )
        lines += ["        " + line for line in out]
    return lines


def _hashing(indent: str, appended: bool = False) -> list[str]:
    """The lines (in ``plan_fill``, ``respec_fill_cross``, ``respec_content_all``) that plan a
    step's content on ``ops``: ``adds[j]`` appended to the stream ``picked[j]`` (one stream per
    sequence); a stream it fills hashed once (its new full blocks, for every group of its
    sequence and granularity) and its tail cut (`CoordinatorCore._plan_content`). Leaves
    ``hashed``: per stream filled, its new hashes. With ``appended`` (``plan_fill``'s
    argument), a tail the content does not fill is left to the caller, whose ops append it
    before these (a filled tail is cut to what it keeps either way)."""
    out = [
        "hashed = {}",
        "for stream, added in zip(picked, adds):",
        "    tail, rpb = stream.tail, stream.rows_per_block",
        "    if len(tail) + len(added) < rpb:",
        *(
            ["        if not appended:", "            ops.append((tail.extend, added))"]
            if appended
            else ["        ops.append((tail.extend, added))"]
        ),
        "        continue",
        "    joined = tail + added",
        "    if len(joined) == rpb:  # one block, all of it: `chain_hashes`, inlined",
        "        full, new = rpb, [sha256(stream.parent + joined.tobytes()).digest()]",
        "    elif len(joined) < 2 * rpb:",
        "        full, new = rpb, [sha256(stream.parent + joined[:rpb].tobytes()).digest()]",
        "    else:",
        "        full = len(joined) // rpb * rpb",
        "        new = chain_hashes(stream.parent, joined, rpb)",
        # `more_hashes`, inlined.
        "    old = stream.hashes",
        "    ops.append((old.extend, new) if type(old) is list else "
        "(setattr, stream, 'hashes', [*old, *new]))",
        "    ops.append((setitem, tail, slice(None), joined[full:]))",
        "    ops.append((setattr, stream, 'parent', new[-1]))",
        "    hashed[stream] = new  # (streams hash by identity)",
    ]
    return [indent + line for line in out]


def _plan_fill(core: CoordinatorCore) -> list[str]:
    """The source of ``plan_fill(ops, lists, o, num_new, extra, picked, adds, ha, hv, sa, sv,
    rejected=None, lookahead=None, appended=False)``: a step within every group's slack whose
    content (``adds[j]`` to the stream ``picked[j]``, one stream per sequence) fills a block,
    planned on ``ops`` (stores to the hot fields on ``ha``, ``hv``, to the cold ones on ``sa``,
    ``sv``) and the planned keys ``lists`` (a boundary plan's: the only part of one a fill
    plans) as the general path plans it
    (`CoordinatorCore._general_content`), written out per group: the step's stores; each filled
    stream's new full blocks hashed once (for every group of its sequence and granularity) and
    its tail cut (`CoordinatorCore._plan_content`); the blocks of committed positions whose
    hashes are now known registered (`CoordinatorCore._register_plan`'s rule, on
    ``lists``); the fields held when hashes stay ahead of the positions (`_hold`: the steps that
    commit them register). With ``rejected`` and ``lookahead`` (per group), a drafting step's
    (`CoordinatorCore.advance_speculative_content`, within every slack: `_fits`): the latest
    step's rejected drafts rolled back first, and the step's last ``lookahead`` positions not
    committed (nor registered); its lookahead is the caller's to store. With ``appended``, the
    caller's ops append every tail this content does not fill, ahead of these (``content_all``'s
    batch out of phase). False when a block to register is cached already (the caller takes the
    general path, which decides)."""
    n = len(core.names)
    hw, cw = core.table.hot_width, core.table.cold_width
    rjs = ", ".join(f"rj{g}" for g in range(n)) + ("," if n == 1 else "")
    lks = ", ".join(f"lk{g}" for g in range(n)) + ("," if n == 1 else "")
    lines = [
        "    def plan_fill(ops, lists, o, num_new, extra, picked, adds, ha, hv, sa, sv, "
        "rejected=None, lookahead=None, appended=False):",
        "        " + ", ".join(f"q{g}" for g in range(n)) + ("," if n == 1 else "") + " = num_new",
        f"        {rjs} = rejected or nospec",
        f"        {lks} = lookahead or nospec",
        f"        cb = o // {hw} * {cw}",
    ]
    for g in range(n):
        h = g * HOT
        c = f"cb + {_cold(ANCHOR, g) - ANCHOR}"
        lines += [
            f"        s{g} = hot[o + {h + SLACK}] + rj{g}",
            f"        r{g} = st[{c} + {ANCHOR}] - s{g} + q{g}",
        ]
    lines += _hashing("        ", appended=True)
    lines += [
        "        of, streams, reg = extra.stream_of, extra.streams, extra.registered",
        "        ahead = False",
    ]
    lines += _streams_registered(core, "lk")
    # Held as `_hold` holds them (empty steps too): the step that commits them registers;
    # else each group's slack less its count.
    slots = ", ".join(f"o + {g * HOT + SLACK}, o + {g * HOT + STEP}" for g in range(n))
    colds = ", ".join(f"cb + {_cold(ANCHOR, g)}" for g in range(n))
    rs = ", ".join(f"r{g}" for g in range(n))
    lines += [
        f"        ha += ({slots})",
        "        if ahead:",
        "            hv += (" + ", ".join(f"0, q{g}" for g in range(n)) + ")",
        f"            sa += ({colds},); sv += ({rs},)",
        "        else:",
        "            hv += (" + ", ".join(f"s{g} - q{g}, q{g}" for g in range(n)) + ")",
        "        return True",
        "",
    ]
    return lines


def _spaced(core: CoordinatorCore) -> list[str]:
    """The lines (in the batch planners) that, where the batch's requests are evenly spaced
    (``span``: their offsets as a slice, else None), set the first hot and cold offsets of
    the batch and their strides: each field of the batch is then one slice, read and stored
    at once (an array's item store parses its argument: several times a slice's cost)."""
    hw, cw = core.table.hot_width, core.table.cold_width
    assert SLACK == 0  # the span is ``content_all``'s ``w0``: group 0's slacks, at the offsets
    return [
        "        m = len(offs)",
        "        if span:  # evenly spaced: a field of every request one slice",
        "            ho, hd = span.start, span.step",
        f"            co, cd = ho // {hw} * {cw}, hd // {hw} * {cw}",
    ]


def _planned_slack(g: int, slacks: tuple[str, str], indent: str, out: str = "ops") -> str:
    """The line (in the batch planners) that stores group ``g``'s slacks (``slacks``: the
    batch's values as a list, then as an iterator), one slice where the batch is evenly
    spaced (`_spaced`)."""
    return (
        f"{indent}{out}.append((setitem, hot, spaced({_plus('ho', g * HOT + SLACK)}, hd, m), "
        f"{slacks[0]}) if span else (commit, map(setitem, repeat(hot), a{g}, {slacks[1]})))"
    )


def _planned_step(g: int, indent: str, out: str = "ops") -> list[str]:
    """The lines (in the batch planners) that store group ``g``'s steps (its count; none
    where ``b{g}`` is empty: the steps equal it already), one slice where the batch is evenly
    spaced (`_spaced`)."""
    return [
        f"{indent}if b{g}:",
        f"{indent}    {out}.append((setitem, hot, spaced({_plus('ho', g * HOT + STEP)}, hd, m), "
        f"[q{g}] * m) if span else (commit, map(setitem, repeat(hot), b{g}, repeat(q{g}))))",
    ]


def _planned_cold(g: int, field: str, values: str, c: str, indent: str, out: str) -> str:
    """The line (in the batch planners) that stores ``values`` (a list per request) to group
    ``g``'s cold field ``field`` (an expression: its place after ``ANCHOR``; the offsets of
    the batch's ``ANCHOR`` are ``c``), a slice where the batch is evenly spaced (`_spaced`)."""
    first = _plus("co", _cold(ANCHOR, g)) + (f" + {field}" if field != "0" else "")
    at = c if field == "0" else f"map(add, {c}, repeat({field}))"
    return (
        f"{indent}{out}.append((setitem, st, spaced({first}, cd, m), packed(typecode, {values})) "
        f"if span "
        f"else (commit, map(setitem, repeat(st), {at}, {values})))"
    )


def _held_all(n: int) -> list[str]:
    """The end of `fill_all` and `register_all`: each request held at its positions
    (the slack 0, the step ``q``, the anchor ``r`` after the step), one pass per field."""
    lines = []
    for g in range(n):
        lines += [_planned_slack(g, ("[0] * m", "repeat(0)"), "        "),
                  *_planned_step(g, "        ")]
        lines.append(_planned_cold(g, "0", f"r{g}", f"c{g}", "        ", "ops"))
    return [*lines, "        return True", ""]


def _fill_all(core: CoordinatorCore) -> list[str]:
    """The source of ``fill_all(ops, offs, exs, cols, tls, gts, gs, num_new, span, s0, a0,
    b0, ...)`` (in ``content_all``'s pass in C; the columns of the batch's requests marked 1;
    ``span``: their offsets as a slice where evenly spaced, `_spaced`),
    each within every slack and its content filling exactly one block of each of its streams,
    planned in C, one pass per field, as `plan_fill` plans each: the streams' blocks hashed
    (``sha256(parent + keys)``, appended to list hashes), their tails emptied, and, none of
    the blocks of committed positions being due to register, the fields held (`_hold`: the
    slack 0, the anchor at the positions after the step; the next step registers). Streams in
    phase fill their blocks at the same engine step: one pass per field instead of a
    `plan_fill` call each. False, having added nothing, for any other batch (the caller plans
    each request)."""
    n = len(core.names)
    hw, cw = core.table.hot_width, core.table.cold_width
    fields = ", ".join(f"s{g}, a{g}, b{g}" for g in range(n))
    lines = [
        f"    def fill_all(ops, offs, exs, cols, tls, gts, gs, num_new, span, {fields}):",
        "        " + ", ".join(f"q{g}" for g in range(n)) + ("," if n == 1 else "") + " = num_new",
        "        of = exs[0].stream_of  # one shape: the batch's",
        "        at = [of[g] for g in gs]  # each share's stream",
        "        hls, news = [], []",
        "        for col, tl, cut, g in zip(cols, tls, gts, gs):",
        "            joined = list(map(add, tl, cut))",
        "            if set(map(len, joined)) != {rows_per_block[g]}:",
        "                return False",
        "            hl = list(map(hashes_of, col))",
        "            if set(map(type, hl)) != {list}:",
        "                return False",
        "            hls.append(hl)",
        "            news.append(list(map(digest, map(sha256, map(add, map(parent_of, col), "
        "map(array.tobytes, joined))))))",
        *_spaced(core),
        f"        cbs = [] if span else list(map(mul, map(floordiv, offs, repeat({hw})), "
        f"repeat({cw})))",
        "        regs = list(map(registered_of, exs))",
        "        ahead = False",
    ]
    for g in range(n):
        anchor = _cold(ANCHOR, g)
        lines += [
            f"        c{g} = list(map(add, cbs, repeat({anchor})))"
            if anchor
            else "        c0 = cbs",
            f"        r{g} = list(map(add, map(sub, {_cold_read(g, ANCHOR, f'c{g}')}, s{g}), "
            f"repeat(q{g})))",
        ]
        cache = core.caches[g]
        if cache is None:
            continue
        # `_registration`'s rule: nothing of group g to register (its committed full blocks
        # all registered), its new hash ahead of the positions.
        lines += [
            f"        if of[{g}] >= 0:",
            f"            hl, rg = hls[at.index(of[{g}])], list(map(itemgetter({g}), regs))",
            f"            if any(map(gt, map(floordiv, r{g}, repeat({cache.rows_per_block})), "
            "rg)) or any(map(gt, rg, map(len, hl))):",
            "                return False",
            "            ahead = True",
        ]
    lines += [
        "        if not ahead:",
        "            return False",
        "        for hl, new, col, tl in zip(hls, news, cols, tls):",
        "            ops.append((commit, map(list.append, hl, new)))",
        "            ops.append((commit, map(delitem, tl, repeat(slice(None)))))",
        "            ops.append((commit, map(setattr, col, repeat('parent'), new)))",
    ]
    return lines + _held_all(n)


def _cold_read(g: int, name: int, c: str) -> str:
    """The expression (in the batch planners) of group ``g``'s cold field ``name`` of the
    batch's requests (the offsets of their ``ANCHOR`` being ``c``), a slice where the batch
    is evenly spaced (`_spaced`)."""
    first = _plus("co", _cold(name, g))
    at = c if name == ANCHOR else f"map(add, {c}, repeat({name - ANCHOR}))"
    return f"(st[spaced({first}, cd, m)] if span else map(getitem, repeat(st), {at}))"


def _planner_head(core: CoordinatorCore, name: str, more: str = "") -> tuple[str, bool]:
    """The first line of the batch planner ``name`` (``register_all``, ``cross_all``; ``more``:
    its arguments after the batch's fields) and whether its layout can be planned in C: every
    group of a planned kind with rows, and its own cache map and pool (so that their order is
    the per-request path's)."""
    n = len(core.names)
    fields = ", ".join(f"s{g}, a{g}, b{g}" for g in range(n))
    caches = [c for c in core.caches if c is not None]
    planned = (
        all(core._has_rows[g] and core._managers[g].kind in _PLANNED for g in range(n))
        and len({id(c.blocks) for c in caches}) == len(caches)
        and len({id(pool) for pool in core.pools}) == n
    )
    head = f"    def {name}(ops, offs, exs, cols, tls, gts, gs, num_new, span, {fields}{more}):"
    return head, planned


def _register_all(core: CoordinatorCore) -> list[str]:
    """The source of ``register_all(ops, offs, exs, cols, tls, gts, gs, num_new, span, s0, a0,
    b0, ...)`` (in ``content_all``'s pass in C; the columns of the batch's requests marked 2;
    ``span``: their offsets as a slice where evenly spaced, `_spaced`),
    each past every group's slack to the end of its table's last block exactly (a
    held step: nothing taken, nothing evicted), with one block to register per group whose
    stream knows its hash (and none ahead), planned in C, one pass per field, as `plan_cross`
    plans each: the slack 0, the anchor at the positions after the step, the block
    registered (`_registration`; none cached, each key new to its map and once in the batch),
    the keys appended to the tails. Streams in phase register their blocks at the same engine
    step: one pass per field instead of a `plan_cross` call each. False, having added
    nothing, for any other batch (the caller plans each request)."""
    n = len(core.names)
    hw, cw = core.table.hot_width, core.table.cold_width
    head, planned = _planner_head(core, "register_all")
    if not planned or any(_unread(core, g) for g in range(n)):
        return [head, "        return False", ""]
    lines = [
        head,
        "        " + ", ".join(f"q{g}" for g in range(n)) + ("," if n == 1 else "") + " = num_new",
    ]
    for g in range(n):
        p, in_flight = core._pool[g], core._in_flight[g]
        touched = f"q{g}" if p == 1 else f"q{g} // {p} + 2"
        lines += [
            f"        if max(s{g}) >= q{g} or {touched} > {in_flight}:",
            "            return False",
        ]
    lines += [
        "        of = exs[0].stream_of  # one shape: the batch's",
        "        at = [of[g] for g in gs]  # each share's stream",
        *_spaced(core),
        f"        cbs = [] if span else list(map(mul, map(floordiv, offs, repeat({hw})), "
        f"repeat({cw})))",
        "        regs = list(map(registered_of, exs))",
        "        later = []",
    ]

    for g in range(n):
        p, size = core._pool[g], core._block_size[g]
        lines += [
            f"        c{g} = list(map(add, cbs, repeat({_cold(ANCHOR, g)})))"
            if _cold(ANCHOR, g)
            else "        c0 = cbs",
            f"        A, _, E, skipped, start, L, _, M = {_cold_fields(g, f'c{g}')}",
            f"        rows = list(map(sub, A, s{g}))",
            f"        r{g} = list(map(add, rows, repeat(q{g})))",
            "        ends = list(map(add, skipped, L))",
            # The step ends its table's last block: nothing to take (nor a block in the table
            # for the anchor: the slack is 0); it starts before the evict bound (nothing
            # dropped) and ends within the request's length (its slots: the rows where P is 1).
            f"        if r{g} != list(map(mul, ends, repeat({size * p}))) or not all(map(lt, "
            f"{'rows' if p == 1 else f'map(floordiv, rows, repeat({p}))'}, E)) "
            f"or not all(map(le, {f'r{g}' if p == 1 else f'map(mul, ends, repeat({size}))'}, M)):",
            "            return False",
        ]
        cache = core.caches[g]
        if cache is None:
            continue
        # The registered blocks then the table's: a cache block of a table block's rows
        # (their count is the table's end, past the block registered).
        ended = (
            "ends != full"
            if cache.rows_per_block == size * p
            else f"list(map(floordiv, r{g}, repeat({cache.rows_per_block}))) != full or not "
            "all(map(lt, rg, ends))"
        )
        lines += [
            f"        if of[{g}] >= 0:",
            f"            hl = list(map(hashes_of, cols[at.index(of[{g}])]))",
            f"            rg = list(map(itemgetter({g}), regs))",
            "            full = list(map(add, rg, repeat(1)))",
            f"            if {ended} or list(map(len, hl)) != full or not all(map(ge, rg, "
            "skipped)):",
            "                return False",
            f"            blocks = list(map(getitem, repeat(slabs[{g}]), map(add, start, map(sub, "
            "rg, skipped))))",
            "            keys = list(map(itemgetter(-1), hl))",
            f"            cached, blocks_of = pools[{g}]._cached, cache_maps[{g}]",
            "            if not (cached.keys().isdisjoint(blocks) and blocks_of.keys().isdisjoint("
            "keys)) or len(set(keys)) != len(keys):",
            "                return False",
            "            later += ((commit, map(setitem, repeat(cached), blocks, keys)), (commit, "
            "map(setitem, repeat(blocks_of), keys, blocks)), (commit, map(setitem, regs, "
            f"repeat({g}), full)))",
        ]
    lines += [
        "        ops += later",
        "        for tl, cut in zip(tls, gts):",
        "            ops.append((commit, map(extend, tl, cut)))",
    ]
    return lines + _held_all(n)


def _cold_fields(g: int, c: str) -> str:
    """The expression (in ``register_all`` and ``cross_all``) of the batch's cold fields of
    group ``g``, ``ANCHOR`` to ``MAXLEN``, each a sequence over the requests whose ``ANCHOR``
    is at the offsets ``c``: a slice of ``st`` per field where the batch is evenly spaced
    (`_spaced`), else a slice per request, transposed (a pass per request instead of a pass
    per field)."""
    assert tuple(range(ANCHOR, MAXLEN + 1)) == (ANCHOR, BASE, EVICT, SKIPPED, START, LENGTH,
                                                CAPACITY, MAXLEN)
    width, first = MAXLEN - ANCHOR + 1, _plus("co", _cold(ANCHOR, g))
    return (
        f"[st[spaced(f, cd, m)] for f in range({first}, {first} + {width})] if span else "
        f"zip(*map(getitem, repeat(st), map(slice, {c}, map(add, {c}, repeat({width})))))"
    )


def _cross_all(core: CoordinatorCore) -> list[str]:
    """The source of ``cross_all(ops, offs, exs, cols, tls, gts, gs, num_new, span, s0, a0,
    b0, ...)`` (in ``content_all``'s pass in C; the columns of the batch's requests marked 2;
    ``span``: their offsets as a slice where evenly spaced, `_spaced`),
    planned in C, one pass per field, as `plan_cross` plans each, where in each group
    every one of them is within its slack, or every one takes one block (at its table's end,
    in place, the step's last position in it, or every segment full: each moved to its
    slab's end, `RequestTable.moved_ops`; all fresh, or all from the free queue: a cached
    one evicted from the prefix cache where its key names it alone), or every one has its
    window drop one block (neither shared nor taken back; a cached one stays cached, free);
    no block to register (`register_all` registers). The keys are appended to the tails.
    Streams in phase take and drop their blocks, and fill their segments, at the same
    engine steps: one pass per field instead of a `plan_cross` call each. A move that finds
    its slab due compacts it first (``compacted``: the slabs compacted so far), then plans
    the batch again, as the per-request path does. False, having added nothing, for any
    other batch (the caller plans each request)."""
    n = len(core.names)
    hw, cw = core.table.hot_width, core.table.cold_width
    head, planned = _planner_head(core, "cross_all", ", compacted=frozenset()")
    if not planned:
        return [head, "        return False", ""]
    lines = [
        head,
        "        " + ", ".join(f"q{g}" for g in range(n)) + ("," if n == 1 else "") + " = num_new",
        "        of = exs[0].stream_of  # one shape: the batch's",
        "        at = [of[g] for g in gs]  # each share's stream",
        *_spaced(core),
        f"        cbs = [] if span else list(map(mul, map(floordiv, offs, repeat({hw})), "
        f"repeat({cw})))",
        "        regs = list(map(registered_of, exs))",
        "        later, dues = [], []",
    ]
    for g in range(n):
        if core.caches[g] is None:
            continue
        # `_registration`: nothing to register where a stream knows no hash past those
        # registered.
        lines += [
            f"        if of[{g}] >= 0 and any(map(gt, map(len, map(hashes_of, "
            f"cols[at.index(of[{g}])])), map(itemgetter({g}), regs))):",
            "            return False",
        ]
    for g in range(n):
        lines += _cross_group(core, g)
    lines += [
        # A move that finds its slab due: the slab compacted first and the batch planned
        # again, as the per-request path does (its first such move's group, in its order).
        "        if dues:",
        "            compacted |= {min(dues)[1]}",
        "            pre = []",
        "            compact_ops(pre, compacted)",
        "            commit(ops_of(pre))  # moves segments only: nothing observable",
        "            return cross_all(ops, offs, exs, cols, tls, gts, gs, num_new, span, "
        + ", ".join(f"s{g}, a{g}, b{g}" for g in range(n))
        + ", compacted)",
        "        ops += later",
        "        for tl, cut in zip(tls, gts):",
        "            ops.append((commit, map(extend, tl, cut)))",
        "        return True",
        "",
    ]
    return lines


def _cross_group(core: CoordinatorCore, g: int) -> list[str]:
    """`_cross_all`'s lines for group ``g``: its slacks stored where every request is within
    its slack; else, every request past it, the blocks taken or dropped and the fields each
    request's crossing changes. A batch in phase (every request at the same positions, with
    the same fields but its blocks: streams admitted together) is planned once, for all,
    in plain locals; another one field by field, one pass per field over the batch."""
    p, size, in_flight = core._pool[g], core._block_size[g], core._in_flight[g]
    manager: Any = core._managers[g]
    # A window drops blocks; without one, nothing is dropped (nor the evict bound moved).
    windowed = manager.kind == "sliding_window"
    window = manager.sliding_window_slots if windowed else 0
    touched = f"q{g}" if p == 1 else f"q{g} // {p} + 2"
    # The blocks a crossing of every request takes (the pool's fresh ids, else its queue's
    # front), their pool's counters planned; ``L`` the segments' lengths before.
    take = [
        "fresh = pool._fresh",
        "if fresh + m <= pool.num_blocks:",
        "    block = list(range(fresh, fresh + m))",
        "    later.append((setattr, pool, '_fresh', fresh + m))",
        "elif fresh < pool.num_blocks or pool._head + m > len(pool._queue):",
        "    return False",
        "else:",
        "    block = pool._queue[pool._head : pool._head + m].tolist()",
        "    cached = pool._cached",
        "    keys = list(map(cached.get, block))",
        "    gone = list(compress(block, keys))",
        "    if gone:  # evicted from the prefix cache",
        "        keys, maps = list(compress(keys, keys)), pool._maps",
        "        if len(maps) != 1:",
        "            return False",
        "        later += ((commit, map(cached.pop, gone, repeat(None))), "
        "flag_op(pool._free_cached, gone, 0))",
        "        if len(set(keys)) == len(keys) and list(map(maps[0].get, "
        "keys)) == gone:  # each key's one block",
        "            later.append((commit, map(maps[0].pop, keys, repeat(None))))",
        # Else each key's blocks planned as `plan_cross` plans them (its lists).
        "        else:",
        "            left = {}",
        "            for key, taken in zip(keys, gone):",
        "                held = left.get(key)",
        "                if held is None:",
        "                    held = left[key] = holders(maps[0].get(key))",
        "                held.remove(taken)",
        "            later += [(maps[0].pop, key, None) if not held else "
        "(setitem, maps[0], key, filed(held)) for key, held in left.items()]",
        "    if not pool._stale.keys().isdisjoint(block):",
        "        return False",
        "    later.append((setattr, pool, '_head', pool._head + m))",
        "later.append((setattr, pool, '_used', pool._used + m))",
    ]

    def moving(lengths: str, skips: str) -> list[str]:
        # Every segment full: each moves to the slab's end (its length and evicted count
        # per request: ``lengths``, ``skips``).
        return [
            "if grew:",
            f"    moving, T, C, late = moved_ops({g}, T, {lengths}, C, {skips}, block)",
            f"    if late < m and {g} not in compacted:  # the slab due first",
            f"        dues.append((late, {g}))",
            "    later += moving",
        ]
    # The blocks a window drops (one a request: neither shared nor taken back; a cached one
    # stays cached, free) go back to the queue (``block``).
    dropping = [
        "cached = pool._cached",
        "later += (flag_op(pool._free_cached, [*compress(block, map(cached.__contains__, "
        "block))], 1), (pool._queue.extend, block), (setattr, pool, "
        f"'_used', pool._used - m), (setitem, table_garbage, {g}, table_garbage[{g}] + m))",
    ]

    def under(indent: str, body: list[str]) -> list[str]:
        return [indent + line for line in body]

    # The fields that move: the anchor, base and length where a block is taken (the evict
    # bound where the window moved it); all of them where one is dropped.
    taken = (0, 1, LENGTH - ANCHOR)
    lines = [
        f"        sl = s{g}",
        f"        if {touched} > {in_flight}:",
        "            return False",
        f"        if min(sl) >= q{g}:  # within the slack",
        _planned_slack(g, (f"[*map(sub, sl, repeat(q{g}))]", f"map(sub, sl, repeat(q{g}))"),
                       "            ", "later"),
        f"        elif max(sl) < q{g}:",
        f"            c = list(map(add, cbs, repeat({_cold(ANCHOR, g)})))"
        if _cold(ANCHOR, g)
        else "            c = cbs",
        # The cold fields it reads (its base is recomputed).
        f"            A, _, E, S, T, L, C, M = {_cold_fields(g, 'c')}",
        f"            pool, slab = pools[{g}], slabs[{g}]",
    ]
    # In phase: one request's fields plan every request's (a count in C per field).
    lines += [
        "            if m == A.count(A[0]) == sl.count(sl[0]) == S.count(S[0]) == "
        "L.count(L[0]) == E.count(E[0]) == M.count(M[0]):",
        "                rows, S0, L0, E0, M0 = A[0] - sl[0], S[0], L[0], E[0], M[0]",
        f"                ra = rows + q{g}",
        "                first, end = "
        + ("rows, ra" if p == 1 else f"rows // {p}, (ra + {p - 1}) // {p}"),
        "                if end > M0:",
        "                    return False",
        f"                want = (end + {size - 1}) // {size} - S0 - L0",
    ]
    if windowed:
        lines += [
            "                due = first >= E0",
            f"                if due and first <= {window - 1}:",
            "                    return False",
            f"                skip = max((first - {window - 1}) // {size}, S0) if due else S0",
            f"                E0 = min((skip + 1) * {size} + {window - 1}, never) if due else E0",
        ]
    else:
        lines += [
            "                if first >= E0:",
            "                    return False",
            "                skip, due = S0, False",
        ]
    lines += [
        f"                index = ra // {size * p}",
        f"                if {'skip == S0 and ' if windowed else ''}want == 1:  # one block taken",
        "                    if index != S0 + L0:",
        "                        return False",
        "                    grew = C.count(L0) == m",
        "                    if not grew and min(C) <= L0:",
        "                        return False",
        *under("                    ", take),
        *under("                    ", moving("[L0] * m", "[skip] * m")),
        "                    else:",
        "                        later.append(scattered(slab, list(map(add, T, repeat(L0))), "
        "block))",
        "                    L0 += 1",
    ]
    if windowed:
        lines += [
            "                elif skip == S0 + 1 and want <= 0:  # one block dropped",
            "                    block = list(map(getitem, repeat(slab), T))",
            "                    T, L0, C = list(map(add, T, repeat(1))), L0 - 1, "
            "list(map(sub, C, repeat(1)))",
            "                    if not (pool._shared.keys().isdisjoint(block) and "
            "skip <= index < skip + L0):",
            "                        return False",
            *under("                    ", dropping),
            "                    block = list(map(getitem, repeat(slab), map(add, T, "
            "repeat(index - skip))))",
        ]
    fields_one = (
        f"range(7) if skip != S0 or grew else {(0, 1, 2, LENGTH - ANCHOR)} if due else {taken}"
        if windowed
        else f"range(7) if grew else {taken}"
    )
    anchor = f"min((index + 1) * {size}, (skip + L0) * {size}, M0, E0)"
    lines += [
        "                else:",
        "                    return False",
        # The anchor (`plan_cross`): the end of the step's block, of the table, of the
        # request, or the evict bound, whichever comes first, never before the positions.
        f"                anchor = max({anchor}{f' * {p}' if p != 1 else ''}, ra)",
        "                new = [anchor - ra] * m",
        "                moved = ([anchor] * m, list(map(sub, block, repeat(index))), [E0] * m, "
        "[skip] * m, T, [L0] * m, C)",
        f"                fields = {fields_one}",
    ]
    # Else one pass per field over the batch.
    first = "rows" if p == 1 else f"list(map(floordiv, rows, repeat({p})))"
    end = "ra" if p == 1 else f"list(map(floordiv, map(add, ra, repeat({p - 1})), repeat({p})))"
    lines += [
        "            else:",
        "                rows = list(map(sub, A, sl))",
        f"                ra = list(map(add, rows, repeat(q{g})))",
        f"                first, end = {first}, {end}",
        "                if not all(map(le, end, M)):",
        "                    return False",
        f"                want = set(map(sub, map(floordiv, map(add, end, repeat({size - 1})), "
        f"repeat({size})), map(add, S, L)))",
    ]
    if windowed:
        lines += [
            "                due = list(map(ge, first, E))",
            f"                if any(due) and (not all(due) or min(first) <= {window - 1}):",
            "                    return False",
            "                skip = list(map(max, map(floordiv, map(sub, first, "
            f"repeat({window - 1})), repeat({size})), S)) if due[0] else S",
            f"                E = list(map(min, map(add, map(mul, map(add, skip, repeat(1)), "
            f"repeat({size})), repeat({window - 1})), repeat(never))) if due[0] else E",
            "                dropped = set(map(sub, skip, S))",
        ]
    else:
        lines += [
            "                if any(map(ge, first, E)):",
            "                    return False",
            "                skip = S",
        ]
    lines += [
        f"                index = list(map(floordiv, ra, repeat({size * p})))",
        f"                if {'dropped == {0} and ' if windowed else ''}max(want) == 1 == "
        "min(want):  # one block taken",
        "                    if index != list(map(add, S, L)):",
        "                        return False",
        "                    grew = L == C  # every segment full: each moves to the slab's end",
        "                    if not grew and not all(map(lt, L, C)):",
        "                        return False",
        *under("                    ", take),
        *under("                    ", moving("L", "skip")),
        "                    else:",
        "                        later.append(scattered(slab, list(map(add, T, L)), block))",
        "                    L = list(map(add, L, repeat(1)))",
    ]
    if windowed:
        lines += [
            "                elif dropped == {1} and max(want) <= 0:  # one block dropped",
            "                    block = list(map(getitem, repeat(slab), T))",
            "                    T, L, C = [list(map(sub, x, repeat(y))) for x, y in ((T, -1), "
            "(L, 1), (C, 1))]",
            "                    if not (pool._shared.keys().isdisjoint(block) and all(map(ge, "
            "index, skip)) and all(map(lt, index, map(add, skip, L)))):",
            "                        return False",
            *under("                    ", dropping),
            "                    block = list(map(getitem, repeat(slab), map(add, T, map(sub, "
            "index, skip))))",
        ]
    fields = (
        f"range(7) if dropped == {{1}} or grew else {(0, 1, 2, LENGTH - ANCHOR)} if due[0] "
        f"else {taken}"
        if windowed
        else f"range(7) if grew else {taken}"
    )
    lines += [
        "                else:",
        "                    return False",
        f"                anchor = list(map(min, map(mul, map(add, index, repeat(1)), "
        f"repeat({size})), map(mul, map(add, skip, L), repeat({size})), M, E))",
    ]
    if p != 1:
        lines.append(f"                anchor = list(map(mul, anchor, repeat({p})))")
    lines += [
        "                anchor = list(map(max, anchor, ra))",
        "                new = [*map(sub, anchor, ra)]",
        "                moved = (anchor, list(map(sub, block, index)), E, skip, T, L, C)",
        f"                fields = {fields}",
        _planned_slack(g, ("new", "new"), "            ", "later"),
        "            for f in fields:",
        _planned_cold(g, "f", "moved[f]", "c", "                ", "later"),
        "        else:",
        "            return False",
        *_planned_step(g, "        ", "later"),
    ]
    return lines


def _tail_appends(indent: str) -> list[str]:
    """The lines (in ``content_all``) that add to ``ops`` the appends of every request's keys
    to its tail, a pass in C per share (``tls``: its tails in batch order): a key each
    appended, no slices; else each request's ``k`` keys as bytes (less than an array's slice
    costs)."""
    out = [
        "for (g, keys, k), tl in zip(shares, tls):",
        "    if k == 1:",
        "        ops.append((commit, map(array.append, tl, keys)))",
        "    elif k:",
        "        split = chunks.get((count, k)) or (chunks.setdefault((count, k), "
        "Struct(f'{k * 8}s' * count)) if len(chunks) < 64 else Struct(f'{k * 8}s' * count))",
        "        ops.append((commit, map(array.frombytes, tl, split.unpack(keys))))",
    ]
    return [indent + line for line in out]


def _cut(indent: str) -> list[str]:
    """The line (in ``content_all``) that sets ``cut``: the slices of a batch's ``keys``, ``k``
    per request of ``count`` (none where ``k`` is 0), kept in ``cuts`` (up to 64 shapes). One
    line, made or kept: an engine step runs the same lines either way."""
    made = "[*map(slice, range(0, count * k, k), range(k, count * k + k, k))]"
    return [
        f"{indent}cut = (cuts.get((count, k)) or (cuts.setdefault((count, k), {made}) "
        f"if len(cuts) < 64 else {made})) if k else ()"
    ]


def _content_all(core: CoordinatorCore, typed: bool, shape: Any, group: Any) -> list[str]:
    """The source of ``content_all`` (``content_all_typed`` with ``typed``, the handler after it
    from the caller): `CoordinatorCore.advance_content_all`, one engine step's batch with the
    content of its positions. Each request within its slack whose content fills no block (each
    pair to a sequence of its own with one stream) is a set of stores and appends, all in C on
    the commit line; the batch is classified so a pass in C per field where it can be (streams
    in phase cross and fill blocks at the same engine steps: the per-request loop would run for
    all of them), and what it read that no step changes (offsets, streams, tails) kept for the
    next engine step of the same requests (`kept`); the others are planned on the same ops and
    boundary plan by the generated planners: a block filled within the slack by `plan_fill`
    (hashed once per sequence, registered where committed), a boundary crossed with no block
    filled by `plan_cross` (with every generated token cached, the blocks a step takes or a
    window evicts are mostly cached ones, and the step registers the block it completes); a move
    that would make a slab due compacts it first and plans again. Out of phase (a server's
    requests, each answer its own length: some fill a block while others cross one at most
    engine steps), every request's appends and stores are made in C as the common step's, the
    planners' own after them. Any other request (both at once, a speculative tail, content that
    is not one stream per sequence) sends the whole batch to the core's general path
    (`_general_content_all`)."""
    n = len(core.names)
    qs = _tuple("q", n)[1:-1]
    suffix = "_typed" if typed else ""
    back = "return general_content_all(me, request_ids, num_new, contents)"
    ints = " or ".join(f"type(q{g}) is not int" for g in range(n))
    negative = " or ".join(f"q{g} < 0" for g in range(n))
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
        "            shares, gs = [], []",
        "            for pair in contents:",
        "                if type(pair) is not tuple or len(pair) != 2:",
        f"                    {back}",
        "                g, keys = pair",
        f"                if type(g) is not int or not 0 <= g < {n}:",
        f"                    {back}",
        # The typed layer's keys are `ContentKeys`' int64 arrays: copied in one pass.
        "                keys = array('q', keys)",
        "                k = len(keys) // count",
        "                if k * count != len(keys):",
        f"                    {back}",
        "                shares.append((g, keys, k)); gs.append(g)",
        "            slow, appended = None, False",
    ]
    # Where no group's step needs its in-flight bound checked (a block or more), a batch of
    # known requests of one shape, once each, with content, no speculative tail, is classified
    # a pass in C per field: each request within its slack filling no block (kind 0) stored
    # and appended in C; the others (a block filled: 1, a slack passed: 2, both: the general
    # path) listed for the planners below, with no per-request loop.
    if not any(
        core._in_flight[g] < core._block_size[g] or not core._has_rows[g] for g in range(n)
    ):
        alls = ", ".join(f"a{g}, b{g}" for g in range(n))
        gets = ", ".join(f"slack{g}, step{g}" for g in range(n))
        spans = ", ".join(f"w{g}, v{g}" for g in range(n))
        at = ", ".join(f"{g * HOT + SLACK}, {g * HOT + STEP}" for g in range(n))
        lines += [
            "            if strs.issuperset(map(type, request_ids)):",
            "                offs = list(map(get, request_ids))",
            "                exs = list(map(extras_get, offs))",
            # The previous batch's classification, kept while its requests, at the same
            # offsets, hold the same extras (by identity: `streams`, `stream_of` and each
            # stream's `tail` are set once, at their making; the tails change in place) and
            # the content names the same groups: all it read is unchanged then.
            "                vec = offs == kept[0] and exs == kept[1] and gs == kept[2] and not "
            "(specs and not specs.keys().isdisjoint(offs))",
            "                if vec:",
            f"                    cols, tls, {alls}, {gets}, {spans} = kept[3:]",
            "                else:",
            "                    vec = (actives.issuperset(map(type, exs)) and "
            "len(set(offs)) == count and not (specs and "
            "not specs.keys().isdisjoint(offs)) and len({axis[g] for g, _, _ in shares}) == "
            "len(shares))",
            "                    if vec:",
            "                        lists = list(map(streams_of, exs))",
            "                        vec = set(map(len, lists)) == {len(shares)}",
            # Requests of one shape share their `stream_of` (a tuple): one stream index per
            # group for the batch (else the loop below classifies each request).
            "                        shapes = set(map(stream_of, exs)) if vec else ()",
            "                        vec = len(shapes) == 1",
            "                        one = shapes.pop() if vec else ()",
            "                    cols, tls = [], []",
            "                    for g, keys, k in shares if vec else ():",
            "                        if one[g] < 0:",
            "                            vec = False; break",
            "                        col = list(map(itemgetter(one[g]), lists))",
            "                        cols.append(col); tls.append(list(map(tail_of, col)))",
        ]
        for g in range(n):
            h = g * HOT
            lines.append(
                f"                    a{g} = list(map(add, offs, repeat({h + SLACK}))) "
                "if vec else ()"
                if h + SLACK
                else f"                    a{g} = offs"
            )
            lines.append(
                f"                    b{g} = list(map(add, offs, repeat({h + STEP}))) "
                "if vec else ()"
            )
        lines += [
            "                    if vec:",
            # Requests at evenly spaced offsets (admitted together): each field's slice (a
            # stride of whole requests, one of a batch of one: the planners' cold fields are
            # ``d // hot_width`` requests apart), also its getter (a list slice reads in one
            # pass what an itemgetter of every offset reads item by item; a batch of one is
            # evenly spaced, so the other getter reads two offsets or more: a tuple).
            "                        d = offs[1] - offs[0] if count > 1 else "
            f"{core.table.hot_width}",
            "                        even = d > 0 and offs == [*range(offs[0], offs[0] + d * "
            "count, d)]",
            f"                        {spans} = [slice(offs[0] + f, offs[0] + f + d * count, d) if "
            f"even else None for f in ({at})]",
            f"                        {gets} = map(itemgetter, ({spans})) if even else "
            f"(itemgetter(*at) for at in ({alls}))",
            f"                        kept[:] = offs, exs, gs, cols, tls, {alls}, {gets}, {spans}",
            "                every = vec",
            "                for (g, keys, k), tl in zip(shares, tls) if vec else ():",
            "                    if max(map(len, tl)) + k >= rows_per_block[g]:",
            "                        every = False; break",
        ]
        for g in range(n):
            lines += [
                "                if vec:",
                f"                    s{g} = slack{g}(hot)",
                f"                    if every and not (min(s{g}) >= q{g} and (q{g} > 0 or "
                f"min(s{g}) > 0)):",
                "                        every = False",
            ]
        # The common engine step: every request within its slack, none filling a block.
        lines += [
            "                if vec and every:",
            "                    ops = []",
            *_tail_appends("                    "),
        ]
        lines += _slack_stores(n, str)
        lines.append("                    commit(ops_of(ops)); del owner[0]; return  # the commit")
        # Else, where every count is positive (past the slack is then s < q), the requests
        # that fill a block (kind 1) or pass a slack (2; both: the general path) found by
        # passes in C, the others being most; with a count of 0, the per-request loop below.
        positive = " and ".join(f"q{g} > 0" for g in range(n))
        fills = ", ".join(f"s{g}, a{g}, b{g}" for g in range(n))
        lines += [
            f"                if vec and {positive}:",
            # A group whose steps all equal its count already has none stored (`b{g}` empty:
            # the planners and the stores below store a step per entry).
            *(
                f"                    b{g} = b{g} if step{g}(hot).count(q{g}) != count else ()"
                for g in range(n)
            ),
            "                    marks = {}",
            "                    for (g, keys, k), tl in zip(shares, tls):",
            "                        if max(map(len, tl)) + k >= rows_per_block[g]:",
            "                            marks.update(zip(compress(range(count), map(ge, map(len, "
            "tl), repeat(rows_per_block[g] - k))), repeat(1)))",
        ]
        for g in range(n):
            lines += [
                f"                    if min(s{g}) < q{g}:",
                f"                        for i in compress(range(count), map(lt, s{g}, "
                f"repeat(q{g}))):",
                "                            marks[i] = marks.get(i, 0) | 2",
            ]
        lines += [
            "                    if 3 in marks.values():",
            f"                        {back}",
            # Every marked request of one kind (streams in phase cross and fill blocks at the
            # same engine steps): the others' stores here, and the marked ones in C where every
            # one of them fills (`fill_all`), or every one crosses (`cross_all`,
            # `register_all`); else each planned below.
            "                    if len(set(marks.values())) == 1:",
            "                        kinds = list(map(marks.get, range(count), repeat(0)))",
            "                        gts = []",
            "                        for (g, keys, k), tl in zip(shares, tls):",
            *_cut("                            "),
            "                            gts.append(list(map(getitem, repeat(keys), cut)) if k "
            "else [keys] * count)",
            "                        at, to = [], []",
            "                        ops = [(commit, map(setitem, repeat(hot), at, to))]",
            # The batch's offsets as a slice where evenly spaced (``w0``: group 0's slack
            # is at the offset) for the planners' slice stores (`_spaced`).
            "                        marked = [ops, offs, exs, cols, tls, gts, gs, num_new, w0, "
            f"{fills}]",
            "                        if 0 in kinds:",
            "                            fm = list(map(not_, kinds))",
            "                            for tl, gt in zip(tls, gts):",
            "                                ops.append((commit, map(extend, compress(tl, fm), "
            "compress(gt, fm))))",
            *("        " + line for line in _slack_stores(n, "compress({}, fm)".format)),
            "                            marked = [ops, *[list(compress(x, kinds)) for x in "
            "(offs, exs)], *[[list(compress(x, kinds)) for x in xs] for xs in (cols, tls, gts)], "
            f"gs, num_new, None, *[list(compress(x, kinds)) for x in ({fills})]]",
            "                        if 2 not in kinds and fill_all(*marked) or 1 not in kinds "
            "and (cross_all(*marked) or register_all(*marked)):",
            "                            slow = ()",
            "                        else:",
            "                            columns = (zip(*tls), zip(*gts), zip(*cols)) if tls else "
            "(repeat(()),) * 3",
            "                            slow = list(compress(zip(offs, kinds, columns[0], "
            "columns[1], exs, columns[2]), kinds))",
            # Out of phase (a server's requests: some fill or cross at every engine step),
            # every request's appends and stores in C as the common step's, the planners' own
            # stores after them (a filled tail cut to what it keeps, `plan_fill` given
            # ``appended``), and only the marked requests' columns read.
            "                    else:",
            "                        ops = []",
            *_tail_appends("                        "),
            *("    " + line for line in _slack_stores(n, str)),
            "                        at, to = [], []",
            "                        ops.append((commit, map(setitem, repeat(hot), at, to)))",
            # (A crossing request's tails and keys are the appends': `plan_cross` reads
            # neither; a filling one's `plan_fill` hashes.)
            "                        appended = True",
            "                        slow = [(offs[i], 2, (), (), exs[i], ()) if kind == 2 else "
            "(offs[i], 1, (), [keys[i * k : i * k + k] for _, keys, k in shares], exs[i], "
            "[col[i] for col in cols]) for i, kind in sorted(marks.items())]",
        ]
    # Else (or where the vector pass declines) each request is classified here.
    lines += [
        "            todo = request_ids if slow is None else ()",
        "            if todo:",
        "                slow, at, to, tails, adds, woke, awake = [], [], [], [], [], [], []",
        "            i = -1",
        "            for request_id in todo:",
        "                i += 1",
        "                o = get(request_id) if type(request_id) is str else None",
        "                if o is None:",
        "                    raise unknown(request_id)",
        "                extra = extras.get(o)",
        "                if extra is None or specs and o in specs:",
        f"                    {back}",
        # Resting content (nothing to register: a request's first step with content after
        # its admission) woken, as the per-request call wakes it, and stored at the commit.
        "                if type(extra) is not Active:",
        "                    woke.append(o); extra = active_of(extra, axis, rows_per_block); "
        "awake.append(extra)",
        "                streams, of = extra.streams, extra.stream_of",
        "                if len(streams) != len(shares):",
        f"                    {back}",
        "                kind, axes, mine, gets, picked = 0, [], [], [], []",
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
        "                    picked.append(stream)",
        "                    gets.append(keys[i * k : i * k + k])",
        "                if kind == 3:",
        f"                    {back}",
    ]
    for g in range(n):
        lines += group(g, False, "kind |= 2", "                ")
    slots = ", ".join(f"o + {g * HOT + SLACK}, o + {g * HOT + STEP}" for g in range(n))
    values = ", ".join(f"s{g} - q{g}, q{g}" for g in range(n))
    lines += [
        "                if kind == 3:",
        f"                    {back}",
        "                if kind:",
        "                    slow.append((o, kind, mine, gets, extra, picked)); continue",
        f"                at += ({slots}); to += ({values}); tails += mine; adds += gets",
        "            if todo:",
        "                if len(set(request_ids)) != count:",
        f"                    {back}",
        "                ops = [(commit, map(setitem, repeat(hot), at, to)), "
        "(commit, map(extend, tails, adds)), (commit, map(setitem, repeat(extras), woke, "
        "awake))]",
        "            if slow:",
        # The planners' stores to the fields join the fast requests' (`at`, `to`) and one
        # map of the cold ones (`sa`, `sv`): a pass in C each, at the commit.
        "                sa, sv = [], []",
        "                ops.append((commit, map(setitem, repeat(st), sa, sv)))",
        # The crossing requests' tails and their keys (`plan_cross` adds no hash): one
        # pass in C.
        "                xt, xk = [], []",
        "                ops.append((commit, map(extend, xt, xk)))",
        # A move that would make a slab due: the slab compacted (nothing observable), the
        # others planned again with the move allowed there (as `_boundary_step` does).
        "                mark, hm, compacted = len(ops), len(at), frozenset()",
        "                while True:",
        "                    plan = Boundary(compacted)",
        "                    for o, kind, mine, gets, extra, picked in slow:",
        "                        if kind == 2:",
        "                            if not plan_cross(ops, plan, o, num_new, extra, at, to, sa, "
        "sv):",
        "                                break",
        "                            if not appended:",
        "                                xt += mine; xk += gets",
        "                        elif not plan_fill(ops, plan.lists, o, num_new, extra, picked, "
        "gets, at, to, sa, sv, appended=appended):",
        "                            break",
        "                    else:",
        "                        break",
        "                    if plan.compact < 0 or plan.compact in compacted:",
        f"                        {back}",
        "                    compacted |= {plan.compact}",
        "                    pre = []",
        "                    compact_ops(pre, compacted)",
        "                    commit(ops_of(pre))  # moves segments only: nothing observable",
        "                    del ops[mark:], at[hm:], to[hm:], sa[:], sv[:], xt[:], xk[:]",
        "                emit_boundary(ops, plan)",
        "            commit(ops_of(ops)); del owner[0]; return  # the commit",
    ]
    return lines


def _respec_content_all(core: CoordinatorCore) -> list[str]:
    """The source of ``respec_content_all(request_ids, num_new, lookahead, rejected,
    contents)``: `CoordinatorCore.advance_speculative_content_all`, one engine step of a
    drafting batch with what each request's latest step produced. A pass over the requests
    in order: one within every slack (`_fits`) whose content fills no block is its stores and
    appends (each a pass in C at the commit); one whose content fills a block within the
    slacks is `plan_fill`'s, with the rollback and the lookahead; one past a slack is
    `plan_cross`'s, with the rollback, the lookahead and (a block filled) its content hashed
    first (`_hashing`); one whose content rests is woken (`RestingExtras.active`, stored at
    the commit) and planned so; one with blocks to register, or resting with a step that
    rolls back to its start, is the core's boundary path's
    (`CoordinatorCore._respec_content_planned`); one admitted without
    content (given none) as one whose content has nothing to register. All on one plan, so
    each sees the blocks the ones before it took, and one commit. A move is made whatever
    garbage it leaves (the plan allows it in every slab), never by planning the batch again:
    a slab half garbage is compacted at a batch's start (`_compacted_first`), others by the
    moves and ends that make them due. Whatever a planner declines, and anything irregular,
    sends the batch to the core's general path
    (`CoordinatorCore._general_respec_content_all`), which reports."""
    n = len(core.names)
    hw, cw = core.table.hot_width, core.table.cold_width
    comma = "," if n == 1 else ""
    qs, ks, rs, js = (", ".join(f"{x}{g}" for g in range(n)) + comma for x in "qkrj")
    back = (
        "return general_respec_content_all(me, request_ids, num_new, lookahead, rejected, "
        "contents)"
    )
    counts = " or ".join(
        f"type(q{g}) is not int or type(k{g}) is not int or not 0 <= k{g} <= q{g}"
        for g in range(n)
    )
    unfit = " or ".join(f"type(r{g}) is not int or r{g} < 0" for g in range(n))
    fits = " and ".join(f"({_fits(core, g, True)})" for g in range(n))
    # (`plan_cross`'s refusal of a rollback to the step's start or past it, per group)
    unroll = " or ".join(f"r{g} > j{g} or q{g} <= r{g} and (q{g} or r{g})" for g in range(n))
    slots = ", ".join(f"o + {g * HOT + SLACK}, o + {g * HOT + STEP}" for g in range(n))
    values = ", ".join(f"s{g} + r{g} - q{g}, q{g}" for g in range(n))
    lines = [
        "    general_respec_content_all = core._general_respec_content_all",
        "    respec_content_planned = core._respec_content_planned",
        f"    nowhere = (-1,) * {n}  # no group's content",
        "    typecode_of = attrgetter('typecode')",
        # A request admitted without content, as the planners read it: no stream, nothing
        # registered (never written: with no stream no group registers).
        f"    bare = Active((), nowhere, [0] * {n})",
        "",
        "    def respec_content_all(request_ids, num_new, lookahead, rejected, contents):",
        "        me = []",
        "        try:",
        "            if claim(0, me) is not me:",
        '                contend(me, concurrent, "allocate")',
    ]
    for name in ("num_new", "lookahead"):
        lines += [
            f"            if not (type({name}) is tuple or type({name}) is list) or len({name}) "
            f"!= {n}:",
            f"                {back}",
        ]
    lines += [
        f"            {qs} = num_new",
        f"            {ks} = lookahead",
        f"            if {counts}:",
        f"                {back}",
        *_compacted_first(n),
        "            count = len(request_ids)",
        "            if not count or not (type(rejected) is tuple or type(rejected) is list) or "
        "len(rejected) != count or not (type(contents) is tuple or type(contents) is list):",
        f"                {back}",
        "            seqs = []",
        "            for pair in contents:",
        "                if type(pair) is not tuple or len(pair) != 2:",
        f"                    {back}",
        "                g, per = pair",
        f"                if type(g) is not int or not 0 <= g < {n} or not (type(per) is tuple "
        "or type(per) is list) or len(per) != count:",
        f"                    {back}",
        # Checked once for the batch: each request's keys an int64 array (`ContentBatch`'s
        # are), one pair per sequence.
        "                if countOf(map(type, per), array) != count or "
        "set(map(typecode_of, per)) != {'q'}:",
        f"                    {back}",
        "                seqs.append((g, per, axis[g]))",
        "            if len({ax for _, _, ax in seqs}) != len(seqs) or len(set(request_ids)) != "
        "count:",
        f"                {back}",
        f"            spec, plan = ({ks}), None",
        # Stores to the hot and cold fields, and the appends of the requests that fill no
        # block: a pass in C each, at the commit (the planners add theirs to the same lists).
        # Resting content woken (`RestingExtras.active`, as the per-request call wakes it) is
        # stored at the commit too: its offsets and active forms (`woke`, `awake`).
        "            at, to, sa, sv, tl, ky, offs = [], [], [], [], [], [], []",
        "            woke, awake = [], []",
        "            ops = [(commit, map(setitem, repeat(hot), at, to)), "
        "(commit, map(setitem, repeat(st), sa, sv)), (commit, map(extend, tl, ky)), "
        "(commit, map(setitem, repeat(extras), woke, awake))]",
        "            i = -1",
        "            for request_id, given in zip(request_ids, rejected):",
        "                i += 1",
        "                o = get(request_id) if type(request_id) is str else None",
        "                if o is None or not (type(given) is tuple or type(given) is list) or "
        f"len(given) != {n}:",
        f"                    {back}",
        f"                {rs} = given",
        f"                if {unfit}:",
        f"                    {back}",
        "                extra = extras_get(o)",
        "                if extra is None:",
        "                    extra, of, rest = bare, nowhere, False",
        "                elif type(extra) is Active:",
        "                    streams, of, reg = extra.streams, extra.stream_of, extra.registered",
        "                    rest = " + " or ".join(
            f"of[{g}] >= 0 and len(streams[of[{g}]].hashes) > reg[{g}]" for g in range(n)
        ),
        "                else:",
        # Resting content (a prompt registered, nothing added since: a request's first step
        # with content after its admission): woken here, as the per-request call wakes it,
        # its active form stored at the commit (``rest`` 2: planned as any other request's,
        # but a step that rolls back to its start, which is the core's boundary path's).
        "                    extra = active_of(extra, axis, rows_per_block)",
        "                    streams, of, reg, rest = extra.streams, extra.stream_of, "
        "extra.registered, 2",
        "                picked, adds, fill = [], [], False",
        "                for g, per, ax in seqs:",
        "                    if of[g] < 0:",
        f"                        {back}",
        "                    if rest is True:",
        "                        continue",
        "                    added = per[i]",
        "                    for stream in streams:",
        "                        if stream.axis == ax:",
        "                            if len(stream.tail) + len(added) >= stream.rows_per_block:",
        "                                fill = True",
        "                            picked.append(stream); adds.append(added)",
        f"                {js} = specs.get(o, nospec)",
        f"                c = o * {cw // hw}",
        *(f"                s{g} = hot[{_plus('o', g * HOT + SLACK)}]" for g in range(n)),
        f"                if {fits} and not fill and rest is not True:",
        "                    if rest:",
        "                        woke.append(o); awake.append(extra)",
        f"                    at += ({slots}); to += ({values}); tl += map(tail_of, picked); "
        "ky += adds; offs.append(o); continue",
        # Blocks waiting to be registered, or a resting request's step that rolls back to
        # its start or past it (`plan_cross` declines that, and with it the batch): the
        # core's boundary path on the batch's plan, which wakes it. Another resting
        # request's step is planned on its woken form (stored at the commit).
        f"                if rest is True or rest and ({unroll}):",
        "                    if plan is None:",
        "                        plan = Boundary(anywhere)",
        "                    if respec_content_planned(ops, plan, request_id, o, num_new, "
        "lookahead, given, [(g, per[i]) for g, per, _ in seqs]):",
        "                        offs.append(o); continue",
        "                    break",
        "                if rest:",
        "                    woke.append(o); awake.append(extra)",
        f"                if {fits}:",
        "                    if plan is None:",
        "                        plan = Boundary(anywhere)",
        "                    if not plan_fill(ops, plan.lists, o, num_new, extra, picked, adds, "
        "at, to, sa, sv, given, lookahead):",
        f"                        {back}",
        "                    offs.append(o); continue",
        "                if plan is None:",
        "                    plan = Boundary(anywhere)",
        "                if fill:",
        *_hashing("                    "),
        "                else:",
        "                    hashed = None; tl += map(tail_of, picked); ky += adds",
        "                if not plan_cross(ops, plan, o, num_new, extra, at, to, sa, sv, given, "
        "lookahead, hashed):",
        "                    break",
        "                offs.append(o)",
        "            else:",
        "                ops.append((specs.update, zip(offs, repeat(spec))))",
        "                if plan is not None:",
        "                    emit_boundary(ops, plan)",
        "                commit(ops_of(ops)); del owner[0]; return  # the commit",
        # A planner declined (its plan is left half made): the general path.
        f"            {back}",
        "        except BaseException:",
        "            drop(me)",
        "            raise",
        "",
    ]
    return lines


def _group(
    core: CoordinatorCore, g: int, mapping: bool, back: str, indent: str, read: bool = True
) -> list[str]:
    """Group ``g``'s check of its count ``q{g}`` against its slack ``s{g}`` (read here, or
    already computed), and its mapping ``m{g}``: lines of a function holding the token with
    the request's offset ``o``, ``back`` where the step is past the slack."""
    cold = f"o // {core.table.hot_width} * {core.table.cold_width}"
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


def _within(core: CoordinatorCore, g: int) -> str:
    """The condition (source) that a plain step of ``q{g}`` positions (an int, not negative)
    of group ``g`` only changes its slack ``s{g}`` (`_group`'s check): within the slack, not
    an empty step at a boundary that evicts, and within ``max_in_flight`` where that is under
    a block. ``o`` is the request's offset."""
    p, size, in_flight = core._pool[g], core._block_size[g], core._in_flight[g]
    k = core.table.cold_width // core.table.hot_width
    anchor = f"st[{_plus(f'o * {k}', _cold(ANCHOR, g))}]"
    evict = f"st[{_plus(f'o * {k}', _cold(EVICT, g))}]"
    empty = f"{anchor} // {p} < {evict}" if p > 1 else f"{anchor} < {evict}"
    out = f"q{g} <= s{g} and (s{g} or q{g} or {empty})"
    if in_flight < size or not core._has_rows[g]:
        rows = f"({anchor} - s{g})"
        first = f"{rows} // {p}" if p > 1 else rows
        end = f"({rows} + q{g} + {p - 1}) // {p}" if p > 1 else f"{rows} + q{g}"
        out += f" and (not q{g} or {end} - {first} <= {in_flight})"
    return out


def _advance_all(
    core: CoordinatorCore, typed: bool, shape: Any, each: str = "", spec: bool = False
) -> list[str]:
    """The source of ``advance_all`` (``advance_all_typed`` with ``typed``): one engine step's
    plain steps. In one pass, in order: a request within every slack (`_within`) is its offset
    and new hot fields; one past some slack (at a block boundary) is planned in plain locals
    as a speculative step with nothing rolled back and no lookahead (`_crossing`, a prefill
    chunk's run of blocks too: `_batched_run`) and stored so too (a cached block taken
    evicted from the prefix cache; a prompt's content registered: `_batch_registers`), until
    one is not (a run with a stale block or a cached one whose key holds more, content under
    a key filed already, a speculative tail to accept, ...): it and every later request past
    its slack are planned after the pass, in order, on the core's boundary plan started from
    the locals (`_slow_planned`), and what that plan declines goes to the core's general
    path (`CoordinatorCore._general_all`). A move that would make a slab due compacts it and
    plans the call again. The hot fields are stored in C at the commit (as `_respec_all`
    stores; of one group, only the slacks where each request's step count is the one stored
    already), in one commit of their own where no request crossed a block.

    With ``each``, the source of ``advance_each`` (``"raw"``: ``num_new[i]`` is request i's
    counts, ints) or ``advance_each_units(request_ids, num_new, units, checked)``
    (``"units"``: request i's quantities, one per group in group order, each of its class in
    ``units`` and one kernel position per unit): the same pass, each request's counts read
    where it is met (an engine step's prefill chunks beside its decodes), its whole row
    stored; the general path is `CoordinatorCore._general_each`, given the rows of the
    requests within their slacks. Anything irregular in ``"units"``, before anything changed,
    returns ``checked(request_ids, num_new)`` (the typed layer's checks and conversion).

    With ``spec`` too, the source of ``respec_each(request_ids, num_new, lookahead, rejected)``
    (`CoordinatorCore.advance_speculative_each`; ``"units"``: ``respec_each_units(...,
    units, checked)``, request i's quantities in ``num_new[i]`` without its drafts,
    ``lookahead[i]`` and ``rejected[i]``): an engine step of a drafting scheduler whose
    prefill chunks run beside its drafting decodes, each request's rollback of
    ``rejected[i]`` and step of ``num_new[i]`` positions whose last ``lookahead[i]`` are
    drafts read where it is met. A request within every slack after its rollback (`_fits`)
    is its row; one past some is `_crossing`'s with its rollback, its lookahead (the
    positions it commits, and registers, are those before it) and a prefill chunk's run;
    the slow ones go to the core's boundary plan with their rollback (`_plan_unroll`), then
    to `CoordinatorCore._general_respec_each`. Each request's lookahead is kept (zeros
    too), as `advance_speculative` keeps it."""
    n = len(core.names)
    hw, cw = core.table.hot_width, core.table.cold_width
    assert each or not spec
    suffix = "_typed" if typed and not each else "_units" if each == "units" else ""
    qs = _tuple("q", n)[1:-1]
    ks = _tuple("k", n)[1:-1]
    rs = _tuple("r", n)[1:-1]
    js = _tuple("j", n)[1:-1]
    ints = " or ".join(f"type(q{g}) is not int" for g in range(n))
    negative = " or ".join(f"q{g} < 0" for g in range(n))
    zeros = " = ".join([f"r{g}" for g in range(n)] + [f"j{g}" for g in range(n)])
    name = f"{'respec' if spec else 'advance'}_each{suffix}" if each else f"advance_all{suffix}"
    pool_of, _ = _pools(core)
    keep = "; ".join(f"F{i}, H{i} = f{i}, h{i}" for i in range(len(pool_of))) + "; compact = -1"
    restore = "; ".join(f"f{i}, h{i} = F{i}, H{i}" for i in range(len(pool_of)))
    given = "num_new, lookahead, rejected" if spec else "num_new"
    refuse = f"del owner[0]; return checked(request_ids, {given})"
    general_name = "general_respec_each" if spec else "general_each"
    if each == "units":
        back = refuse
        # (every request's counts checked by then: the pass reads each before anything else)
        xs = _tuple("x", n)[1:-1]
        if spec:
            ls = _tuple("l", n)[1:-1]
            values = (
                "[(" + ", ".join(f"x{g}._value + l{g}._value" for g in range(n))
                + f",) for ({xs}), ({ls}) in zip(num_new, lookahead)], "
                "[(" + ", ".join(f"l{g}._value" for g in range(n)) + f",) for {ls} in lookahead]"
                ", [(" + ", ".join(f"x{g}._value" for g in range(n)) + f",) for {xs} in rejected]"
            )
        else:
            values = (
                "[(" + ", ".join(f"x{g}._value" for g in range(n)) + f",) for {xs} in num_new]"
            )
    else:
        back = f"return {general_name}(me, request_ids, {given}, [], [], [])"
        values = given
    if not each:
        back = "return general_all(me, request_ids, num_new, [], [])"
    lines = [
        f"    def {name}(request_ids, {given}"
        + (", units, checked" if each == "units" else "")
        + ", compacted=0):",
        "        me = []",
        "        try:",
        "            if claim(0, me) is not me:",
        '                contend(me, concurrent, "allocate")',
    ]
    if each:
        for arg in given.split(", "):
            lines += [
                f"            if not (type({arg}) is list or type({arg}) is tuple) or len({arg}) "
                "!= len(request_ids):",
                f"                {back}",
            ]
        if each == "units":
            lines.append(f"            {_tuple('U', n)[1:-1]} = units")
    else:
        if not typed:
            lines += shape(["num_new"], back)
        lines += [
            f"            {qs} = num_new",
            f"            if {(ints + ' or ') if not typed else ''}{negative}:",
            f"                {back}",
        ]
    # The locals `_crossing` reads (a plain step rolls nothing back and has no speculative
    # tail, else it is slow): made at the batch's first crossing, or after the pass where its
    # first slow request's plan starts from them.
    made = [
        *([] if spec else [f"{zeros} = 0"]),
        _pool_locals(core, batch=True),
        " = ".join(f"gb{g}" for g in range(n)) + " = 0",
        "; ".join(f"te{g} = len(slabs[{g}])" for g in range(n)),
        # (the keys its runs evicted and registered, for the core's plan: `_seeded_plan`;
        # those registered, for later requests' registrations)
        *(["xr, xw = [], None"] if _caching(core) else []),
    ]
    lines += _compacted_first(n)
    lines += [
        "            offs, hots, cx, slow, ops, xl = [], [], [], [], [], {}",
        "            push, row = offs.append, hots.append",
        # (a drafting batch's lookahead per request stored, in the order of ``offs``; with
        # ``units``, the lookahead tuple last read)
        *(["            sps = []; keep_spec = sps.append"] if spec else []),
        *(
            ["            seen = me  # (fresh: no caller's lookahead is it)"]
            if spec and each == "units"
            else []
        ),
        *(["            same = 0"] if n == 1 and not each else []),
        "            for request_id"
        + (
            ", counts, looks, given in zip(request_ids, num_new, lookahead, rejected):"
            if spec
            else ", counts in zip(request_ids, num_new):" if each else " in request_ids:"
        ),
        "                o = get(request_id) if type(request_id) is str else None",
        "                if o is None:",
        "                    " + (refuse if each == "units" else "raise unknown(request_id)"),
    ]
    # Each request's counts (with ``spec``: and lookahead, and rejected drafts) read.
    read = [("counts", "q")] + ([("looks", "k"), ("given", "r")] if spec else [])
    if each == "units":
        # (a tuple's unpacking checks its length, and runs no code of the caller's)
        for arg, x in read:
            check = [
                "if type({arg}) is not tuple:",
                f"    {refuse}",
                "try:",
                f"    {_tuple(x, n)[1:-1]} = {arg}",
                "except ValueError:",
                f"    {refuse}",
                "if " + " or ".join(f"type({x}{g}) is not U{g}" for g in range(n)) + ":",
                f"    {refuse}",
            ]
            if arg == "looks":
                # The lookahead read once per tuple object: a scheduler gives its drafting
                # requests one (a tuple and its quantities are immutable; a chunk's zeros
                # another), so most requests' reads are one comparison.
                check = [
                    "if looks is not seen:",
                    *("    " + line for line in check),
                    "    seen = looks; "
                    + "; ".join(f"kv{g} = k{g}._value" for g in range(n)),
                ]
            lines += ["                " + line.format(arg=arg) for line in check]
        lines.append(
            "                "
            + "; ".join(
                f"k{g} = kv{g}; q{g} = q{g}._value + k{g}; r{g} = r{g}._value"
                if spec
                else f"q{g} = q{g}._value"
                for g in range(n)
            )
        )
    elif each:
        for arg, x in read:
            lines += [
                f"                if not (type({arg}) is tuple or type({arg}) is list) or "
                f"len({arg}) != {n}:",
                f"                    {back}",
                f"                {_tuple(x, n)[1:-1]} = {arg}",
            ]
        checks = [ints, negative]
        if spec:
            checks += [
                " or ".join(f"type(k{g}) is not int or not 0 <= k{g} <= q{g}" for g in range(n)),
                " or ".join(f"type(r{g}) is not int or r{g} < 0" for g in range(n)),
            ]
        lines += [f"                if {' or '.join(checks)}:", f"                    {back}"]
    # (a slow request's item carries its counts, for the core's plan)
    item = (
        f"(request_id, o, ({qs}), ({ks}), ({rs}))"
        if spec
        else f"(request_id, o, ({qs}))"
        if each
        else "(request_id, o, num_new)"
    )
    if spec:
        # Its speculative tail (a rollback past it is a caller's mistake, reported in batch
        # order with the others, before any shortfall: the general path's), and the cold
        # offset the slacks' checks read.
        lines += [
            f"                {js} = specs.get(o, nospec)",
            "                if " + " or ".join(f"r{g} > j{g}" for g in range(n)) + ":",
            f"                    {back}",
            f"                c = o * {cw // hw}",
        ]
    else:
        lines += [
            "                if specs and o in specs:",  # a speculative tail: the core accepts it
            f"                    slow.append({item}); continue",
        ]
    # Within every slack: nested, the stores at the innermost; else ``fit``, the groups
    # before the first one past its slack (`_crossing` plans only the slack for them).
    indent = "                "
    for g in range(n):
        lines += [
            f"{indent}s{g} = hot[{_plus('o', g * HOT + SLACK)}]",
            f"{indent}if {_fits(core, g, True) if spec else _within(core, g)}:",
        ]
        indent += "    "
    # (one group: whether its step's count is the one stored, counted in ``same``)
    same = f"; same += hot[{_plus('o', STEP)}] == q0" if n == 1 and not each else ""
    full = bool(each)
    slacks = [f"s{g} + r{g} - q{g}" if spec else f"s{g} - q{g}" for g in range(n)]
    kept_spec = f"; keep_spec(({ks}))" if spec else ""
    lines.append(f"{indent}push(o); {_row(n, slacks, full=full)}{same}{kept_spec}; continue")
    for g in reversed(range(n)):
        indent = indent[4:]
        # A window's drafting step past its slack that takes no block (the later groups
        # within theirs): its row, its anchor stored, marked crossed (the pass's locals made
        # at its first: `_moved_row`).
        stopped = _row(n, ["0" if h == g else x for h, x in enumerate(slacks)], full=full)
        moved = (
            _moved_row(
                core, g, True, indent + "    ", "not slow",
                [_fits(core, h, True) for h in range(n)], [], [],
                f"push(o); {stopped}{kept_spec}\n"
                "if not cx:\n" + "".join(f"    {line}\n" for line in made)
                + "cx.append((request_id, o)); continue",
            )
            if spec
            else []
        )
        if n > 1 or moved:
            lines += [f"{indent}else:", *moved, *([f"{indent}    fit = {g}"] if n > 1 else [])]
    lines += [
        "                if slow:",
        f"                    slow.append({item}); continue",
        "                if not cx:",
        *(f"                    {line}" for line in made),
        *([] if spec else [f"                c = o * {cw // hw}"]),
        # (the locals outlive a crossing they decline: its takes undone after it)
        f"                {keep}",
        # (a drafting step's lookahead, which the positions it commits end before)
        *([f"                {_tuple('lk', n)[1:-1]} = {ks}"] if spec else []),
        "                for _ in once:",
    ]
    # A move that would make its slab's garbage due, in the batch's first requests: the slab
    # compacted first (nothing observable; nothing else was written), then the call again, its
    # room given by the compaction; past them the move is made, the slab compacted at a later
    # batch's start (`_compacted_first`).
    again = (
        f"return {name}(request_ids, {given}, units, checked, compacted | 1 << compact)"
        if each == "units"
        else f"return {name}(request_ids, {given}, compacted | 1 << compact)"
    )
    lines += _crossing(
        core,
        "break",
        "                    ",
        "compact = {g}; break",
        typed=True,
        fit=True,
        batched=True,
        runs=True,
        drafted=spec,
        compact_while=f"len(offs) < {_REPLAN_BELOW} and ",
    )
    lines += _crossed(core, "                    ", flat=True, batched=True, full=full, runs=True)
    if spec:
        lines.append(f"                    keep_spec(({ks}))")
    lines += [
        "                else:",
        "                    cx.append((request_id, o)); continue",
        f"                {restore}",
        "                if compact >= 0:",
        "                    pre = []",
        "                    if garbage[compact]:",
        "                        compact_ops(pre, (compact,))",
        f"                    commit(ops_of(pre)); del owner[0]; {again}",
        # (the keys a declined request's runs evicted or registered: the core plans them)
        *(["                while xr and xr[-1][0] == o:", "                    del xr[-1]"]
          if _caching(core) else []),
        f"                slow.append({item})",
    ]
    if spec:
        # The rows and lookaheads of the requests within their slacks go to the core (those
        # of the crossings, which it plans again, left out).
        general = (
            f"return general_respec_each(me, request_ids, {values}, [offs[i] for i in kept], "
            "[(hots[i], sps[i]) for i in kept], cx + [(x, o) for x, o, *_ in slow])"
        )
        twice = f"return general_respec_each(me, request_ids, {values}, [], [], [])"
    elif each:
        # The rows of the requests within their slacks go to the core (those of the
        # crossings, which it plans again, left out).
        general = (
            f"return general_each(me, request_ids, {values}, [offs[i] for i in kept], "
            "[hots[i] for i in kept], cx + [(x, o) for x, o, _ in slow])"
        )
        twice = f"return general_each(me, request_ids, {values}, [], [], [])"
    else:
        general = (
            "return general_all(me, request_ids, num_new, [offs[i] for i in kept], "
            "cx + [(x, o) for x, o, _ in slow])"
        )
        twice = "return general_all(me, request_ids, num_new, [], [])"
    lines += [
        "            if len(set(request_ids)) != len(request_ids):",
        f"                {twice}",
    ]
    lines += _slow_planned(core, made, general, spec)
    if n == 1 and not each:
        # Every request within its slack and its step's count the one stored (a decode
        # batch's steady state): its slacks, one C pass, are all that changes.
        slack = "offs" if SLACK == 0 else f"map(add, offs, repeat({SLACK}))"
        lines += [
            "            if not cx and not slow and same == len(offs):",
            f"                commit(map(setitem, repeat(hot), {slack}, hots)); del owner[0]; "
            "return  # the commit",
        ]
    # Every request within its slacks (no crossing, none slow): the hot fields' stores, their
    # passes chained into one commit, are all that changes.
    stores = [line.strip()[len("ops.append((commit, ") : -2] for line in _hot_stores(n, full)]
    # (a drafting batch's: each request's lookahead kept, a pass in C)
    kept = ["map(setitem, repeat(specs), offs, sps)"] if spec else []
    chained = stores[0] if len(stores + kept) == 1 else "chain(" + ", ".join(stores + kept) + ")"
    lines += [
        "            if not cx and not slow:",
        f"                commit({chained}); del owner[0]; return  # the commit",
    ]
    lines += _hot_stores(n, full=full)
    if spec:
        lines.append(f"            ops.append((commit, {kept[0]}))")
    lines += ["            if plan is None and cx:"]
    lines += _pooled(core, "                ")
    lines += [
        "            elif plan is not None:",  # (it started from the locals: none planned since)
        "                emit_boundary(ops, plan)",
        "            commit(ops_of(ops)); del owner[0]; return  # the commit",
    ]
    return lines


#: A batch's pass compacts a slab before a move that would make it due, and plans itself
#: again, only while it has planned fewer requests than this (`_compacted_first`).
_REPLAN_BELOW: Final = 16


def _compacted_first(n: int) -> list[str]:
    """A batch's first lines after its arguments are read: the slabs whose garbage is
    `_table.overdue` compacted, with any other due one (`_table.compact_ops`), in a commit
    of its own (it moves segments only, nothing a view reads: a call interrupted after it
    has changed nothing observable). A batch's pass compacts before a move that would make
    its slab due only in its first `_REPLAN_BELOW` requests (then plans itself again, the
    compaction giving the mover room); past them the move is made whatever garbage it
    leaves: planning 600 prefill chunks again from the first, as a batch did at most engine
    steps, costs more than the move. This bounds that garbage without compacting where a
    move or a request's end would soon (at `due`'s threshold a batch's start compacted a
    long prompt's slab half as often again: *held prefill 16k chunk 2k*, 6 % more
    instructions a stream-step)."""
    # (`_table.overdue` written out, its floor read when the source is made: a call of it a
    # batch cost a batch of four requests 3 % of its instructions)
    floor = _table._RETURN_MIN
    over = [f"garbage[{g}] >= {floor} and 2 * garbage[{g}] >= len(slabs[{g}])" for g in range(n)]
    due = " or ".join(f"({x})" for x in over) if n > 1 else over[0]
    groups = "[" + ", ".join(f"*(({g},) if {x} else ())" for g, x in enumerate(over)) + "]"
    return [
        f"            if {due}:",
        "                pre = []",
        f"                compact_ops(pre, {groups if n > 1 else '(0,)'})",
        "                commit(ops_of(pre))",
    ]


def _slow_planned(
    core: CoordinatorCore, made: list[str], general: str, spec: bool = False
) -> list[str]:
    """A batch's requests that its pass did not plan in locals (``slow``: a prefill chunk's
    content under a key filed already, a run with a stale block, a speculative tail, every
    crossing after one of those), planned in batch
    order on the core's boundary plan (`CoordinatorCore._plan_boundary`), which starts from
    what the locals planned (``made``: the lines that make the locals where no crossing made
    them): a prefill chunk beside decodes costs its blocks, and the decodes stay stores. Its
    moves are made whatever garbage they leave (`_seeded_plan`); anything the plan declines
    goes to the core's general path (``general``, with ``kept``: the requests within their
    slacks, the crossings left out). With ``spec``, each request's item also carries its
    lookahead and rejected drafts: its rollback planned first on the same plan
    (`CoordinatorCore._plan_unroll`), its lookahead kept by the plan."""
    planned = (
        [
            "                back = plan_unroll(o, given, plan, counts)",
            "                if back is None or not plan_boundary(ops, plan, o, counts, None, "
            "looks, back, rests=True):",
        ]
        if spec
        else ["                if not plan_boundary(ops, plan, o, counts, None, rests=True):"]
    )
    return [
        "            plan = None",
        "            for request_id, o, counts"
        + (", looks, given" if spec else "")
        + " in slow:",
        "                if plan is None:",
        *(["                    if not cx:"] if made else []),
        *(f"                        {line}" for line in made),
        *_seeded_plan(core, "                    ", runs=_caching(core)),
        *_into_plan(core, "                    "),
        *planned,
        "                    crossed = {o for _, o in cx}",
        "                    kept = [i for i, o in enumerate(offs) if o not in crossed]",
        f"                    {general}",
    ]


def _drafted(core: CoordinatorCore, past: str, indent: str) -> list[str]:
    """A speculative step's lines after its counts ``q{g}`` and lookahead ``k{g}`` are read
    (ints, ``0 <= k{g} <= q{g}``): each group within its slack (`_group`, its mapping
    ``m{g}``), else ``past``; ``past`` too for an empty step at slack 0 of a request whose
    content waits to be registered (the tail it accepts may complete a block); the stores,
    the lookahead kept, the mappings returned."""
    n = len(core.names)
    lines: list[str] = []
    for g in range(n):
        lines += _group(core, g, True, past, indent)
    # An empty step where the slack is 0 (content waiting to be registered sets it so) still
    # accepts the latest step's speculative tail: the positions it commits may complete a
    # block whose content is known, which the crossing registers (as the general path).
    empty = " or ".join(f"not (s{g} or q{g})" for g in range(n))
    lines += [
        f"{indent}if extras and ({empty}) and type(x := extras.get(o)) is Active and x.pending():",
        f"{indent}    {past}",
    ]
    stores = "; ".join(
        f"hot[o + {g * HOT + SLACK}] = s{g} - q{g}; hot[o + {g * HOT + STEP}] = q{g}"
        for g in range(n)
    )
    maps = ", ".join(f"m{g}" for g in range(n))
    lines.append(
        f"{indent}{stores}; specs[o] = {_tuple('k', n)}; del owner[0]; return [{maps}]"
        "  # the commit"
    )
    return lines


def _rolled_back(core: CoordinatorCore, back: str, past: str, indent: str) -> list[str]:
    """A rollback's lines after its counts ``r{g}`` and the request's speculative tail
    ``spec`` are read: each count an int within the tail (else ``back``); where it frees
    no block and the next step's first slot stays in the block of the bound, the stores,
    else ``past``."""
    n = len(core.names)
    cold = f"o // {core.table.hot_width} * {core.table.cold_width}"
    lines = [f"{indent}{_tuple('k', n)[1:-1]} = spec"]
    commit_parts = []
    for g in range(n):
        h = g * HOT
        p, size = core._pool[g], core._block_size[g]
        kind = core._managers[g].kind
        out = [
            f"if type(r{g}) is not int or not 0 <= r{g} <= k{g}:",
            f"    {back}",
            f"s{g} = hot[o + {h + SLACK}]",
            f"if r{g}:",
            # No slack: the rolled-back step ended where a block is to be taken.
            f"    if not s{g}:",
            f"        {past}",
            f"    c{g} = st[{cold} + {_cold(ANCHOR, g)}] - s{g}",
            f"    n{g} = c{g} - r{g}",
        ]
        slots = f"(n{g} + {p - 1}) // {p}" if p > 1 else f"n{g}"
        if kind == "state":
            keep = "1"
        elif kind == "cross_attention":
            keep = str(core._managers[g].table_length(0))
        else:
            keep = f"({slots} + {size - 1}) // {size}"
        entries = f"st[{cold} + {_cold(SKIPPED, g)}] + st[{cold} + {_cold(LENGTH, g)}]"
        out += [f"    if {keep} < {entries}:", f"        {past}"]
        if core._has_rows[g]:
            # The next step's first slot in another block: its bound is another.
            out += [f"    if n{g} // {p * size} != c{g} // {p * size}:", f"        {past}"]
        out.append(f"t{g} = hot[o + {h + STEP}] - r{g}")
        lines += [indent + line for line in out]
        commit_parts += [f"hot[o + {h + SLACK}] = s{g} + r{g}", f"hot[o + {h + STEP}] = t{g}"]
    left = "(" + ", ".join(f"k{g} - r{g}" for g in range(n)) + ("," if n == 1 else "") + ")"
    stores = "; ".join(commit_parts)
    lines.append(f"{indent}{stores}; specs[o] = {left}; del owner[0]; return  # the commit")
    return lines


def _redrafted(core: CoordinatorCore, past: str, indent: str, typed: bool) -> list[str]:
    """A rollback and a speculative step in one (``respec``)'s lines after its counts
    ``q{g}``, ``k{g}`` (checked) and ``r{g}`` are read: where each group's rollback and step
    only change its slack (`_fits`), or one window's step past its slack takes no block and
    evicts none (`_past_eviction`: its anchor stored too), the stores and the lookahead
    kept, else ``past``."""
    n = len(core.names)
    hw, cw = core.table.hot_width, core.table.cold_width

    def stores(moved: int = -1) -> str:
        return "; ".join(
            f"hot[{_plus('o', g * HOT + SLACK)}] = "
            f"{'0' if g == moved else f's{g} + r{g} - q{g}'}; hot[o + {g * HOT + STEP}] = q{g}"
            for g in range(n)
        )

    commit = f"specs[o] = {_tuple('k', n)}; del owner[0]; return  # the commit"
    lines = [
        f"{indent}{_tuple('j', n)[1:-1]} = specs.get(o, nospec)",
        f"{indent}c = o * {cw // hw}",
    ]
    for g in range(n):
        lines += [
            f"{indent}s{g} = hot[{_plus('o', g * HOT + SLACK)}]",
            f"{indent}if not ({_fits(core, g, typed)}):",
        ]
        condition = _past_eviction(core, g, typed)
        if condition is None:
            lines.append(f"{indent}    {past}")
            continue
        # A window's step past its slack that takes no block and evicts none (the others
        # within theirs): its anchor stored with the slacks (`_past_eviction`).
        inner = indent + "    "
        lines += [f"{inner}if not ({condition}):", f"{inner}    {past}"]
        for h in range(g + 1, n):
            lines += [
                f"{inner}s{h} = hot[{_plus('o', h * HOT + SLACK)}]",
                f"{inner}if not ({_fits(core, h, typed)}):",
                f"{inner}    {past}",
            ]
        lines.append(f"{inner}{stores(g)}; st[{_plus('c', _cold(ANCHOR, g))}] = e{g}; {commit}")
    return [*lines, f"{indent}{stores()}; {commit}"]


def _entry(core: CoordinatorCore, given: dict[str, Sequence[str]], operation: str) -> list[str]:
    """The head of a typed entry's body that runs the core's lines in its own frame: each
    name of ``given`` (``q``, ``k``, ``r``) set per group from its expression, then the token
    claimed and the request's offset ``o`` looked up."""
    n = len(core.names)
    comma = "," if n == 1 else ""
    lines = [
        f"{_tuple(name, n)[1:-1]} = {', '.join(values)}{comma}" for name, values in given.items()
    ]
    return [
        *lines,
        "me = []",
        "try:",
        "    if claim(0, me) is not me:",
        f'        contend(me, concurrent, "{operation}")',
        "    o = get(request_id) if type(request_id) is str else None",
        "    if o is None:",
        "        raise unknown(request_id)",
    ]


#: The end of a typed entry's body (`_entry`): the token dropped on any exception.
_ENTRY_END: Final = ["except BaseException:", "    drop(me)", "    raise"]


def _contents(
    core: CoordinatorCore,
    back: str,
    given: str,
    contents: str,
    num_new: str,
    read: list[str],
    indent: str,
) -> list[str]:
    """A step with content's lines after its counts ``q{g}`` are read (``content``'s):
    each pair of ``given`` (a list or tuple of pairs, else ``back``) read by ``read``
    (lines that set its group ``g``, checked, and its int64 keys ``added``, else ``back``)
    into the tails it extends, one stream per sequence, each sequence once; each group's
    count within its slack (`_group`), else `content_cross`, or ``back`` where the content
    fills a block too; a block filled within every slack `content_fill`; else the stores
    and the appends. ``num_new`` and ``contents`` are what those calls are given."""
    n = len(core.names)
    stores = "; ".join(
        f"hot[o + {g * HOT + SLACK}] = s{g} - q{g}; hot[o + {g * HOT + STEP}] = q{g}"
        for g in range(n)
    )
    past = (
        f"return general_content(me, request_id, o, {num_new}, {contents}) if fill else "
        f"content_cross(me, request_id, o, {num_new}, {contents}, tails, adds, extra)"
    )
    lines = [
        "extra = extras.get(o)",
        f"if extra is None or type({given}) is not list and type({given}) is not tuple:",
        f"    {back}",
        # Content at rest: its active form made (`CoordinatorCore._active`), which the
        # appends below, the crossing's and the fill's extend; every commit stores it.
        "if type(extra) is not Active:",
        "    extra = active_of(extra, axes_of, rows_per_block)",
        "streams, of = extra.streams, extra.stream_of",
        # One sequence of one granularity (a text model's): its one pair read as the loop
        # below reads it, without the loop.
        f"if len(streams) == 1 and len({given}) == 1:",
        f"    pair = {given}[0]",
        "    if type(pair) is not tuple or len(pair) != 2:",
        f"        {back}",
        *("    " + line for line in read),
        "    tail = stream.tail",
        "    fill = len(tail) + len(added) >= stream.rows_per_block",
        "    tails, adds, picked = [tail], [added], [stream]",
        "else:",
        "    tails, adds, axes, picked, fill = [], [], [], [], False",
        f"    if len(streams) != len({given}):",
        f"        {back}",
        f"    for pair in {given}:",
        "        if type(pair) is not tuple or len(pair) != 2:",
        f"            {back}",
        *("        " + line for line in read),
        "        tail, axis = stream.tail, stream.axis",
        "        if axis in axes:",
        f"            {back}",
        "        if len(tail) + len(added) >= stream.rows_per_block:",
        "            fill = True",
        "        tails.append(tail)",
        "        picked.append(stream)",
        "        adds.append(added)",
        "        axes.append(axis)",
    ]
    lines = [indent + line for line in lines]
    for g in range(n):
        lines += _group(core, g, False, past, indent)
    return [
        *lines,
        f"{indent}if fill:",
        f"{indent}    return content_fill(me, request_id, o, {num_new}, {contents}, extra, "
        "picked, adds)",
        # (the appends' iterator made first: the line's one call consumes it, in C)
        f"{indent}ext = map(extend, tails, adds)",
        f"{indent}{stores}; extras[o] = extra; commit(ext); del owner[0]; return  # the commit",
    ]


def _tuple(name: str, n: int) -> str:
    """The source of the tuple of ``name{g}`` for the n groups."""
    return "(" + ", ".join(f"{name}{g}" for g in range(n)) + ("," if n == 1 else "") + ")"


def speculative_lines(
    core: CoordinatorCore, counts: Sequence[str], looks: Sequence[str]
) -> list[str]:
    """The lines that end a typed entry's ``allocate_speculative`` (its arguments checked):
    the core's ``speculative_typed`` in the same frame, ``counts[g]`` and ``looks[g]`` group
    g's count and lookahead (quantities' ints: ``0 <= look <= count``). They read
    `advance_names`."""
    n = len(core.names)
    past = f"return cross(me, request_id, o, {_tuple('q', n)}, True, {_tuple('k', n)})"
    body = _entry(core, {"q": counts, "k": looks}, "allocate")
    return [*body, *_drafted(core, past, "    "), *_ENTRY_END]


def rollback_lines(core: CoordinatorCore, counts: Sequence[str]) -> list[str]:
    """The lines that end a typed entry's ``rollback`` (its arguments checked): the core's
    ``rollback_typed`` in the same frame, ``counts[g]`` group g's rejected positions. They
    read `advance_names`."""
    rejected = _tuple("r", len(core.names))
    back = f"return general_rollback(me, request_id, o, {rejected})"
    past = f"return uncross(me, request_id, o, {rejected})"
    body = _entry(core, {"r": counts}, "rollback")
    body += ["    spec = specs.get(o)", "    if spec is None:", f"        {back}"]
    return [*body, *_rolled_back(core, back, past, "    "), *_ENTRY_END]


def respec_lines(
    core: CoordinatorCore, counts: Sequence[str], looks: Sequence[str], rejected: Sequence[str]
) -> list[str]:
    """The lines that end a typed entry's ``advance_speculative`` (its arguments checked):
    the core's ``respec_typed`` in the same frame. They read `advance_names`."""
    n = len(core.names)
    qs, ks, rs = (_tuple(name, n) for name in "qkr")
    past = f"return respec_cross(me, request_id, o, {qs}, {ks}, {rs})"
    body = _entry(core, {"q": counts, "k": looks, "r": rejected}, "allocate")
    return [*body, *_redrafted(core, past, "    ", True), *_ENTRY_END]


def respec_content_lines(
    core: CoordinatorCore, counts: Sequence[str], looks: Sequence[str], rejected: Sequence[str]
) -> list[str]:
    """The lines that end a typed entry's ``advance_speculative_with_content`` (its counts
    checked): `CoordinatorCore.advance_speculative_content` in the same frame where it is
    stores, or the generated crossing with the appends (``respec_cross``'s ``more``). Its
    pairs read as `content_lines` reads them, into the tails they extend, one stream per
    sequence; an active request with nothing left to register and every group's rollback
    and step within its slack (`_fits`) make the stores and the appends, or, where the
    content fills a block, ``respec_fill`` (`plan_fill` with the rollback and the
    lookahead); a step past a slack whose content fills no block the crossing; one whose
    content fills a block ``respec_fill_cross`` (`plan_cross` with the rollback, the
    lookahead and the content's hashes); anything else, and whatever those decline, the
    core's plan (`CoordinatorCore._planned_respec_content`), given the pairs as
    `KVCacheCoordinator._content_pairs` checks them. They read `advance_names`."""
    n = len(core.names)
    qs, ks, rs = (_tuple(name, n) for name in "qkr")
    pairs = "content_pairs(content)"
    back = f"return planned_respec_content(me, request_id, o, {qs}, {ks}, {rs}, {pairs})"
    # The crossing's appends, after the content's active form stored (a resting one's made
    # here: the same object otherwise).
    more = "[(setitem, extras, o, extra), *zip(repeat(extend), tails, adds)]"
    planned = back[len("return ") :]
    past = (
        f"return {planned} if (respec_fill_cross(me, request_id, o, {qs}, {ks}, {rs}, extra, "
        f"picked, adds) if fill else respec_cross(me, request_id, o, {qs}, {ks}, {rs}, "
        f"{more})) is DECLINED else None"
    )
    filled = (
        f"return {planned} if respec_fill(me, request_id, o, {qs}, {ks}, {rs}, extra, "
        "picked, adds) is DECLINED else None"
    )
    body = _entry(core, {"q": counts, "k": looks, "r": rejected}, "allocate")
    # A request unknown and content wrong: the content's error first (as `content_lines`).
    at = body.index("    if o is None:") + 1
    body[at:at] = [f"        {pairs}"]
    lines = [
        "extra = extras.get(o)",
        "if extra is None or type(content) is not list and type(content) is not tuple:",
        f"    {back}",
        # Content at rest (nothing to register): its active form, stored by every commit.
        "if type(extra) is not Active:",
        "    extra = active_of(extra, axes_of, rows_per_block)",
        "streams, of, reg = extra.streams, extra.stream_of, extra.registered",
        *(
            line
            for g in range(n)
            for line in (
                f"if of[{g}] >= 0 and len(streams[of[{g}]].hashes) > reg[{g}]:",
                f"    {back}",
            )
        ),
        # One sequence of one granularity (a text model's): its one pair read as the loop
        # below reads it (the group's stream is the one), without the loop.
        "if len(streams) == 1 and len(content) == 1:",
        "    pair = content[0]",
        "    if type(pair) is not tuple or len(pair) != 2:",
        f"        {back}",
        "    h, c = pair",
        "    if (type(h) is not Handle or h._owner is not core or type(c) is not Keys",
        "            or c.unit is not units[h.index] or c.salt is not None or of[h.index] < 0):",
        f"        {back}",
        "    stream, added = streams[0], c._int64s",
        "    tail = stream.tail",
        "    fill = len(tail) + len(added) >= stream.rows_per_block",
        "    tails, adds, picked = [tail], [added], [stream]",
        "else:",
        "    tails, adds, picked, axes, fill = [], [], [], [], False",
        "    for pair in content:",
        "        if type(pair) is not tuple or len(pair) != 2:",
        f"            {back}",
        "        h, c = pair",
        "        if (type(h) is not Handle or h._owner is not core or type(c) is not Keys",
        "                or c.unit is not units[h.index] or c.salt is not None):",
        f"            {back}",
        "        g = h.index",
        "        if of[g] < 0:",
        f"            {back}",
        "        added, axis = c._int64s, axes_of[g]",
        "        if axis in axes:",
        f"            {back}",
        "        axes.append(axis)",
        "        for stream in streams:",
        "            if stream.axis == axis:",
        "                if len(stream.tail) + len(added) >= stream.rows_per_block:",
        "                    fill = True",
        "                tails.append(stream.tail)",
        "                adds.append(added)",
        "                picked.append(stream)",
    ]
    stores = "; ".join(
        f"hot[{_plus('o', g * HOT + SLACK)}] = s{g} + r{g} - q{g}; hot[o + {g * HOT + STEP}] = q{g}"
        for g in range(n)
    )
    return [
        *body,
        *("    " + line for line in lines),
        f"    {_tuple('j', n)[1:-1]} = specs.get(o, nospec)",
        f"    c = o * {core.table.cold_width // core.table.hot_width}",
        *_unrolled(core, past, "    ", True),
        "    if fill:",
        f"        {filled}",
        "    ext = map(extend, tails, adds)",
        f"    {stores}; specs[o] = {ks}; extras[o] = extra; commit(ext); "
        "del owner[0]; return  # the commit",
        *_ENTRY_END,
    ]


def content_lines(core: CoordinatorCore, counts: Sequence[str]) -> list[str]:
    """The lines that end a typed entry's ``advance_with_content`` (its counts checked): the
    core's ``content_typed`` in the same frame, its pairs read as given, ``(handle,
    ContentKeys)`` (a handle of this core, keys of its group's content unit, no salt: the
    keys' int64 array appended as it is, immutable), so that the step is one call and one
    pass over its pairs. A pair it does not read so goes to the general path with the pairs
    as `KVCacheCoordinator._content_pairs` checks them (which raises what a wrong pair is);
    the crossing and the fill, past the pass, get the pairs it read, ``got`` (the same:
    each handle's group and its keys' array). They read `advance_names`."""
    n = len(core.names)
    pairs = "content_pairs(content)"
    num_new = _tuple("q", n)
    back = f"return general_content(me, request_id, o, {num_new}, {pairs})"
    read = [
        "h, c = pair",
        "if (type(h) is not Handle or h._owner is not core or type(c) is not Keys",
        "        or c.unit is not units[h.index] or c.salt is not None):",
        f"    {back}",
        "g = h.index",
        "if of[g] < 0:",
        f"    {back}",
        "stream, added = streams[of[g]], c._int64s",
        "got.append((g, added))",
    ]
    body = _entry(core, {"q": counts}, "allocate")
    # A request unknown and content wrong: the content's error first, as before the token.
    body[body.index("    if o is None:") + 1 : body.index("    if o is None:") + 1] = [
        f"        {pairs}"
    ]
    return [
        *body,
        "    if specs and o in specs:",
        f"        {back}",
        "    got = []",
        *_contents(core, back, "content", "got", num_new, read, "    "),
        *_ENTRY_END,
    ]


def advance_lines(core: CoordinatorCore, counts: Sequence[str]) -> list[str]:
    """The lines (in a function's body) that end a typed entry's ``advance`` whose arguments
    are checked, ``counts[g]`` being group g's count (an expression of them): the core's
    ``advance_typed`` in the same frame (a decode step is one call), the same lines (`_group`),
    past the slack to ``cross``. They read `advance_names`."""
    n = len(core.names)
    qs = ", ".join(f"q{g}" for g in range(n))
    past = f"return cross(me, request_id, o, ({qs}{',' if n == 1 else ''}), False)"
    lines = [
        f"{qs} = {', '.join(counts)}",
        "me = []",
        "try:",
        "    if claim(0, me) is not me:",
        '        contend(me, concurrent, "allocate")',
        "    o = get(request_id) if type(request_id) is str else None",
        "    if o is None:",
        "        raise unknown(request_id)",
        "    if specs and o in specs:",  # a speculative tail: the step accepts it
        f"        {past}",
    ]
    for g in range(n):
        lines += _group(core, g, False, past, "    ")
    stores = "; ".join(
        f"hot[o + {g * HOT + SLACK}] = s{g} - q{g}; hot[o + {g * HOT + STEP}] = q{g}"
        for g in range(n)
    )
    lines += [
        f"    {stores}; del owner[0]; return  # the commit",
        "except BaseException:",
        "    drop(me)",
        "    raise",
    ]
    return lines


def advance_names(core: CoordinatorCore) -> dict[str, Any]:
    """The names `advance_lines` (and `speculative_lines`, `rollback_lines`, `respec_lines`,
    `content_lines`) read, bound to ``core``."""
    guard, table = core.guard, core.table
    return {
        "owner": guard.owner,
        "claim": guard.claim,
        "contend": guard.contend,
        "drop": guard.drop,
        "concurrent": core._concurrent,
        "unknown": core._unknown,
        "get": table.offsets.get,
        "specs": core.specs,
        "hot": table.hot,
        "st": table.st,
        "cross": core.fast.cross,
        # The rest for the typed entries' speculative steps, rollbacks and steps with content
        # (`speculative_lines`, `rollback_lines`, `respec_lines`, `content_lines`).
        "uncross": core.fast.uncross,
        "respec_cross": core.fast.respec_cross,
        "content_cross": core.fast.content_cross,
        "content_fill": core.fast.content_fill,
        "respec_fill": core.fast.respec_fill,
        "respec_fill_cross": core.fast.respec_fill_cross,
        "general_content": core._general_content,
        "extras": core.extras,
        "Resting": RestingExtras,
        "active_of": awake,
        "extend": array.extend,
        "commit": commit,
        "general": core._general_step,
        "general_rollback": core._general_rollback,
        "general_respec": core._general_respec,
        "nospec": (0,) * len(core.names),
        # `respec_content_lines`'
        "planned_respec_content": core._planned_respec_content,
        "Active": RequestExtras,
        "axes_of": core._axis,
        "rows_per_block": tuple(0 if c is None else c.rows_per_block for c in core.caches),
        "repeat": repeat,
        "setitem": setitem,
        "DECLINED": DECLINED,
    }


def _source(core: CoordinatorCore) -> str:
    """The source of ``make(...)``, which returns the functions of ``core``'s layout."""
    n = len(core.names)
    qs = _tuple("q", n)[1:-1]
    ks = _tuple("k", n)[1:-1]
    rs = _tuple("r", n)[1:-1]
    lines = [
        "def make(guard, offsets, hot, st, specs, core):",
        "    owner, claim, drop, get = guard.owner, guard.claim, guard.drop, offsets.get",
        "    contend = guard.contend",
        "    concurrent, unknown = core._concurrent, core._unknown",
        "    general, general_rollback = core._general_step, core._general_rollback",
        "    boundary, boundary_rollback = core._boundary_step, core._boundary_rollback",
        "    general_all, general_content = core._general_all, core._general_content",
        "    general_each, general_respec_each = core._general_each, core._general_respec_each",
        "    general_respec, general_respec_all = core._general_respec, core._general_respec_all",
        "    plan_unroll, plan_boundary = core._plan_unroll, core._plan_boundary",
        "    emit_boundary, pids = core._emit_boundary, [id(pool) for pool in core.pools]",
        "    pools, slabs, garbage, extras = core.pools, core.table.slabs, core.table.garbage, "
        "core.extras",
        "    typecode, never = st.typecode, core.table.never",
        # A request's cold fields of one group read, and written (an op), in one pass.
        f"    cold_of = Struct(f'{COLD}{{typecode}}').unpack_from",
        f"    cold_to = Struct(f'{COLD}{{typecode}}').pack_into",
        "    extend, general_content_all = array.extend, core._general_content_all",
        "    compact = compact_ops = core.table.compact_ops",
        "    moved_ops = core.table.moved_ops",
        "    strs, extras_get, axis = frozenset({str}), core.extras.get, core._axis",
        "    axes_of = axis  # (the name `_contents` reads, as the typed entries')",
        "    streams_of, stream_of = attrgetter('streams'), attrgetter('stream_of')",
        "    tail_of = attrgetter('tail')",
        "    hashes_of, parent_of, registered_of = attrgetter('hashes'), attrgetter('parent'), "
        "attrgetter('registered')",
        "    digest = methodcaller('digest')",
        "    once = (None,)  # a loop of one pass: its break skips its else",
        # `content_all`'s caches, the core's (`CoordinatorCore._batch_caches`), which the end
        # of the last request empties (`free`'s ``emptied``, `CoordinatorCore._release_plan`):
        # ``kept``, its last classified batch: offsets, extras (their requests' hashes and
        # tails), groups, then per group its streams and their tails, then the offsets of the
        # slack and step fields, then their getters, then their slices (`_slack_stores`);
        # per (count, k), ``cuts``, the slices that cut a batch's keys into each request's k,
        # and ``chunks``, the `struct` that unpacks them as bytes in one C call (where slices
        # of the keys' bytes cost a call each): kept for the next engine steps of that shape,
        # a few shapes at a time (a slice a request each).
        "    kept, cuts, chunks = core._batch_caches",
        f"    kept[:] = [None] * {5 + 6 * n}",
        "    cuts.clear(); chunks.clear()",
        # Ints as an array of typecode ``code`` for a slice store: one `struct` pass (an
        # array's item by item argument parsing costs several times more); the formats of a
        # few lengths kept.
        "    packs = {}",
        "    def packed(code, values):",
        "        packer = packs.get((code, len(values)))",
        "        if packer is None:",
        "            packer = Struct(f'{len(values)}{code}')",
        "            if len(packs) < 64:",
        "                packs[code, len(values)] = packer",
        "        return array(code, packer.pack(*values))",
        # The op that stores ``values`` at the positions ``at`` of the array ``into``: one
        # slice where they are evenly spaced, else an item store each.
        "    def scattered(into, at, values):",
        "        d = at[1] - at[0] if len(at) > 1 else 1",
        "        if d > 0 and at == [*range(at[0], at[0] + d * len(at), d)]:",
        "            return (setitem, into, spaced(at[0], d, len(at)), packed(into.typecode, "
        "values))",
        "        return (commit, map(setitem, repeat(into), at, values))",
        # The fields of ``count`` requests evenly spaced by ``step``, the first at ``first``.
        "    def spaced(first, step, count):",
        "        return slice(first, first + step * count, step)",
        f"    nospec = (0,) * {n}  # no speculative tail",
        # (a batch's boundary plan: its moves allowed in every slab, `_compacted_first`)
        f"    anywhere = frozenset(range({n}))",
        # A block taken, as the one-entry slice a line of stores writes (`_stored`): scratch.
        "    noblock = array('i')",
        "    zero1 = array('i', (0,))  # `zero1 * n`: n zeros, made in C",
        *(f"    one{g} = array('i', (0,))" for g in range(n)),
        "    rows_per_block = tuple(0 if c is None else c.rows_per_block for c in core.caches)",
        "    table_garbage = core.table.garbage",
        "    cache_maps = tuple(None if c is None else c.blocks for c in core.caches)",
        "    ids_of = tuple(id(c) for c in cache_maps)",
        "",
    ]
    lines += _lean_cross(core) + _cross(core) + (_first(core) if _firsts(core) else [])
    lines += _plan_cross(core)
    lines += _plan_fill(core)
    lines += _fill_all(core)
    lines += _register_all(core)
    lines += _cross_all(core)
    lines += [
        *_lean_content_cross(core),
        # `advance_content` past some group's slack, its content filling no block, where
        # `_crossing` declines: `plan_cross`, then the appends, in one commit (else the core's,
        # which decides).
        "    def content_cross_ops(me, request_id, o, num_new, contents, tails, adds, extra):",
        "        plan, at, to, sa, sv = Boundary(), [], [], [], []",
        "        ops = [(setitem, extras, o, extra), (commit, map(setitem, repeat(hot), at, to)), "
        "(commit, map(setitem, repeat(st), sa, sv))]",
        "        if not plan_cross(ops, plan, o, num_new, extra, at, to, sa, sv):",
        "            return general_content(me, request_id, o, num_new, contents)",
        "        emit_boundary(ops, plan)",
        "        ops.append((list, map(extend, tails, adds)))",
        "        commit(ops_of(ops)); del owner[0]; return  # the commit",
        "",
        # A plain step (no slot mapping, no lookahead; a speculative tail it accepts) of a
        # request whose content has full blocks that wait for the positions the step commits
        # (a prompt's last block, a generated token's, its content given by `extend_content`):
        # `plan_cross`, which registers them, as `content_cross` without content (else the
        # core's boundary path).
        "    def registering(me, request_id, o, num_new, mapping, lookahead, extra):",
        "        if mapping or lookahead is not None:",
        "            return boundary(me, request_id, o, num_new, mapping, lookahead)",
        "        plan, at, to, sa, sv = Boundary(), [], [], [], []",
        "        ops = [(commit, map(setitem, repeat(hot), at, to)), "
        "(commit, map(setitem, repeat(st), sa, sv))]",
        "        done = plan_cross(ops, plan, o, num_new, extra, at, to, sa, sv, rests=True)",
        "        if not done:",
        "            return boundary(me, request_id, o, num_new, mapping, lookahead)",
        "        emit_boundary(ops, plan)",
        # Nothing left to register (`plan_cross` declines otherwise): the request rests, in
        # the compact form (`RestingExtras`), as the core's boundary path leaves it. (Where
        # it left a run to the core's plan, 2, that plan stored it resting or held it.)
        "        if done != 2:",
        "            known = extra.streams",
        "            registered = [r if s < 0 or r >= len(known[s].hashes) else "
        "len(known[s].hashes) for s, r in zip(extra.stream_of, extra.registered)]",
        "            ops.append((setitem, extras, o, extra.resting(registered)))",
        "        commit(ops_of(ops)); del owner[0]; return  # the commit",
        "",
        # The same for a drafting step (``respec_ops``'), its latest step's rejected drafts
        # rolled back first and its lookahead stored (`plan_cross` commits and registers none
        # of its lookahead positions).
        "    def respec_registering(me, request_id, o, num_new, lookahead, rejected, extra):",
        "        plan, at, to, sa, sv = Boundary(), [], [], [], []",
        "        ops = [(commit, map(setitem, repeat(hot), at, to)), "
        "(commit, map(setitem, repeat(st), sa, sv))]",
        "        if not plan_cross(ops, plan, o, num_new, extra, at, to, sa, sv, rejected, "
        "lookahead):",
        "            return boundary(me, request_id, o, num_new, False, lookahead, rejected)",
        "        ops.append((setitem, specs, o, tuple(lookahead)))",
        "        emit_boundary(ops, plan)",
        "        known = extra.streams",
        "        registered = [r if s < 0 or r >= len(known[s].hashes) else len(known[s].hashes) "
        "for s, r in zip(extra.stream_of, extra.registered)]",
        "        ops.append((setitem, extras, o, extra.resting(registered)))",
        "        commit(ops_of(ops)); del owner[0]; return  # the commit",
        "",
        # `advance_content` within every slack, its content filling a block: `plan_fill`.
        "    def content_fill(me, request_id, o, num_new, contents, extra, picked, adds):",
        "        lists, at, to, sa, sv = {}, [], [], [], []",
        "        ops = [(setitem, extras, o, extra), (commit, map(setitem, repeat(hot), at, to)), "
        "(commit, map(setitem, repeat(st), sa, sv))]",
        "        if not plan_fill(ops, lists, o, num_new, extra, picked, adds, at, to, sa, sv):",
        "            return general_content(me, request_id, o, num_new, contents)",
        "        if lists:",
        "            lists_ops(ops, lists)",
        "        commit(ops_of(ops)); del owner[0]; return  # the commit",
        "",
        # `advance_speculative_content`'s rollback and step within every slack, its content
        # filling a block: `plan_fill` with the rollback and the lookahead (`DECLINED` where it
        # declines: the caller plans the call).
        "    def respec_fill(me, request_id, o, num_new, lookahead, rejected, extra, picked, "
        "adds):",
        "        lists, at, to, sa, sv = {}, [], [], [], []",
        # The content's active form stored first (a resting one's made by the caller).
        "        ops = [(setitem, extras, o, extra), (commit, map(setitem, repeat(hot), at, to)), "
        "(commit, map(setitem, repeat(st), sa, sv))]",
        "        if not plan_fill(ops, lists, o, num_new, extra, picked, adds, at, to, sa, sv, "
        "rejected, lookahead):",
        "            return DECLINED",
        "        ops.append((setitem, specs, o, tuple(lookahead)))",
        "        if lists:",
        "            lists_ops(ops, lists)",
        "        commit(ops_of(ops)); del owner[0]; return  # the commit",
        "",
        # The same past some group's slack: the content hashed (`_hashing`), then the
        # rollback and the crossing step registering the blocks its committed positions
        # fill, with those hashes (`plan_cross` with the rollback, the lookahead, the hashes).
        "    def respec_fill_cross(me, request_id, o, num_new, lookahead, rejected, extra, "
        "picked, adds):",
        "        plan, at, to, sa, sv = Boundary(), [], [], [], []",
        "        ops = [(setitem, extras, o, extra), (commit, map(setitem, repeat(hot), at, to)), "
        "(commit, map(setitem, repeat(st), sa, sv))]",
        *_hashing("        "),
        "        if not plan_cross(ops, plan, o, num_new, extra, at, to, sa, sv, rejected, "
        "lookahead, hashed):",
        "            return DECLINED",
        "        ops.append((setitem, specs, o, tuple(lookahead)))",
        "        emit_boundary(ops, plan)",
        "        commit(ops_of(ops)); del owner[0]; return  # the commit",
        "",
    ]
    lines += _uncross(core)
    lines += _respec_content_all(core)
    lines += _admit(core) + _admit_prefix(core) + _free(core)

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
        return _group(core, g, mapping, back, indent, read)

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
        lines += _drafted(core, past, "            ")
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
        lines += [f"            {rs} = rejected"]
        lines += _rolled_back(core, back, past, "            ")
        lines += tail
        lines += _advance_all(core, typed, shape)
        lines += tail
        # Each request's own counts (`CoordinatorCore.advance_each`), ints or, for the
        # typed layer, quantities.
        lines += _advance_all(core, typed, shape, each="units" if typed else "raw")
        lines += tail
        # The same with each request's rollback and lookahead
        # (`CoordinatorCore.advance_speculative_each`).
        lines += _advance_all(core, typed, shape, each="units" if typed else "raw", spec=True)
        lines += tail
        lines += _respec(core, typed, head, tail, shape)
        # A step and the content its positions hold (`CoordinatorCore.advance_content`):
        # stores and the tails' appends when each pair goes to a sequence of its own with one
        # stream (one granularity), whose block it does not fill; past a group's slack,
        # `plan_cross` and the appends in one commit (`content_cross`); a block filled by the
        # content (the step within every slack) `plan_fill` (`content_fill`).
        back = "return general_content(me, request_id, o, num_new, contents)"
        lines += head("content" + suffix, "request_id, num_new, contents", "allocate")
        lines += ["            if specs and o in specs:", f"                {back}"]
        if not typed:
            lines += shape(["num_new"], back)
        lines.append(f"            {qs} = num_new")
        if not typed:
            lines += [f"            if {ints}:", f"                {back}"]
        read = [
            "g, keys = pair",
            f"if type(g) is not int or not 0 <= g < {n} or of[g] < 0:",
            f"    {back}",
            "stream, added = streams[of[g]], array('q', keys)",
        ]
        lines += _contents(core, back, "contents", "contents", "num_new", read, "            ")
        lines += tail
        lines += _content_all(core, typed, shape, group)
        lines += tail
    names = (
        "step", "advance", "speculative", "rollback", "advance_all", "respec", "respec_all",
        "content", "content_all",
    )
    typed_names = ", ".join(f"{x}_typed" for x in names)
    lines += _extend(core)
    lines.append(
        "    return (" + ", ".join(names) + ", " + typed_names + ", respec_all_units, "
        "advance_each, advance_each_units, respec_each, respec_each_units, cross, "
        "uncross, respec_cross, content_cross, content_fill, respec_fill, respec_fill_cross, "
        "respec_content_all, admit, admit_prefix, free, extend_keys)"
    )
    header = (
        "from array import array\n"
        "from hashlib import sha256\n"
        "from struct import Struct\n"
        "from itertools import chain, compress, repeat\n"
        "from operator import add, attrgetter, countOf, delitem, floordiv, ge, getitem, gt, "
        "itemgetter, le, lt, methodcaller, mul, not_, or_, setitem, sub\n"
        "from kvunits.runtime._guard import commit, ops_of\n"
        "from kvunits.runtime._core import _Boundary as Boundary\n"
        "from kvunits.runtime._core import _slots_across as slots_across\n"
        "from kvunits.runtime._core import RestingExtras as Resting\n"
        "from kvunits.runtime._core import awake as active_of\n"
        "from kvunits.runtime.prefix_cache import PrefixPart as Part\n"
        "from kvunits.runtime._core import RequestExtras as Active\n"
        "from kvunits.runtime._core import DECLINED\n"
        "from kvunits.runtime.block_pool import filed, filed_op, flag_op, holders\n"
        "from kvunits.runtime.block_pool import HeldBlocks, lists_ops, unfiled_op, without\n"
        "from kvunits.runtime._table import SlabPlan, due, grown\n"
        "from kvunits.runtime._core import HashStream as Stream\n"
        "from kvunits.runtime.prefix_cache import chain_hashes, longest_common_hit\n"
        "actives = frozenset((Active,))  # a batch's extras all active\n\n"
    )
    return header + "\n".join(lines) + "\n"


# The names the generated source imports (kept referenced for linters).
_USED = (repeat, add, getitem, setitem, sub, commit, ops_of)
