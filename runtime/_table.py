"""Every admitted request's bookkeeping in flat arrays: no Python object per request.

A request has, per group, two *hot* fields in one Python list (``hot``, read and written by
every step, small ints: a list holds them without allocating) and eight *cold* fields in one
int array (``st``: written when a step needs the pools or another block), and its block table
in each group is one segment of that group's *slab*, an ``array('i')`` holding the live
entries of every request's table (a sliding window's evicted entries are counted,
``SKIPPED``, not stored). A request's *offset* ``o`` is where its hot fields start (group
``g``'s at ``o + g × HOT``); its cold fields start at `RequestTable.cold`. So a request costs
a few dozen bytes a group and a held block 4 bytes, and nothing is left behind when it ends:
its fields are reused by the next request, its segments are reclaimed when the slab is
compacted, and when the last request ends every array is emptied.

A segment is placed first without spare room (a long one, a prompt's first chunk, with what a
move would give it, up to its request's ``max_len``); it grows at its end into its spare
capacity, or moves to the slab's end with room to grow (`grown`: a quarter of its entries, at
least 8, or half those a window evicted); it shrinks at its front when a window evicts.
The space it leaves is garbage, counted per group; `RequestTable.compact_ops` rewrites a slab
without it once it is a quarter of the slab and 64 entries (`due`; 1,024 at a request's end,
which only returns memory and gives no segment room); a step that would move a segment of a
slab that is due takes the general path, which compacts first.

The fields of a group, as the general path reads them (`RequestTable.read`: a list in this
order; plain ints: positions in the group's kernel unit, slots in its manager unit, table
entries in cache blocks):

* ``SLACK`` (hot): positions a step may add without the pools or another block; ``ANCHOR``
  (cold): the positions so far plus ``SLACK``. So the positions so far are ``ANCHOR − SLACK``,
  and a step of q positions, 0 < q <= ``SLACK``, is integer arithmetic: ``SLACK −= q``. A step
  that needs a block, or an eviction, or the general path for another reason (content to
  register) finds ``SLACK`` 0.
* ``STEP`` (hot): positions the latest step added.
* ``BASE``: the block base of the block holding the next step's first slot, ``table[b] − b``:
  a slot ``s`` a fast step touches is at cache slot ``BASE × block_size + s``.
* ``EVICT``: the first slot a step may start at that evicts (an empty step with ``SLACK`` 0
  needs nothing below it). ``SLACK`` and ``EVICT`` only let a step skip the managers and
  pools: anything may set them lower (0 sends the next step to the general path).
* ``SKIPPED``: leading table entries evicted (they read as the null block).
* ``START``, ``LENGTH``, ``CAPACITY``: the segment of live entries in the group's slab.
* ``MAXLEN``: the declared longest sequence, in slots (the admission cap it reserved is derived
  from it: `AdmissionLedger.caps_of`).
"""

from __future__ import annotations

from array import array
from collections.abc import Collection, Iterator, Sequence
from itertools import accumulate, compress, repeat
from operator import add, mul, setitem
from typing import Final

from ._guard import Ops

SLACK, STEP, ANCHOR, BASE, EVICT, SKIPPED, START, LENGTH, CAPACITY, MAXLEN = range(10)

#: Hot fields per group (the first of the list above), and cold ones (the rest).
HOT: Final = 2
COLD: Final = 8

#: One zero entry: ``_ZERO * n`` is n of them, filled in C.
_ZERO: Final = array("i", [0])

#: Garbage (entries) a slab holds before it is compacted ahead of growing (a segment placed or
#: moved at its end): 256 byte.
_COMPACT_MIN: Final = 64

#: Garbage (entries) a slab holds before the end of a request compacts it (4 KiB), where
#: nothing grows: the end returns memory only, so it waits for more (a long prompt's end
#: leaves hundreds of entries, each end of a wave of them would otherwise copy the rest).
_RETURN_MIN: Final = 1024

#: The entries from which a segment placed first gets room to grow (`grown`): 64, a prompt
#: of 1,024 tokens in blocks of 16.
_FIRST_ROOM: Final = 64


def due(garbage: int, length: int, ending: bool = False) -> bool:
    """Whether a slab of ``length`` entries with ``garbage`` of them owned by no request is
    compacted: once the garbage is a quarter of it and at least `_COMPACT_MIN` (`_RETURN_MIN`
    at a request's end, ``ending``), so that a slab never grows while a held block costs its
    entry plus more than a third, however long requests run, nor at a handful of requests
    (where a fixed floor of garbage would be most of the slab)."""
    return garbage >= max(_RETURN_MIN if ending else _COMPACT_MIN, length >> 2)


def overdue(garbage: int, length: int) -> bool:
    """Whether a slab of ``length`` entries with ``garbage`` of them owned by no request is
    past `due` so far that a batch compacts it at its start: half of it garbage, and at least
    `_RETURN_MIN`. A batch's moves past its first requests do not compact first (planning
    the batch again would cost more than the move), so their garbage can pass `due`; this
    bounds it (a slab at most twice its live entries) without compacting where a move or a
    request's end would compact it soon anyway."""
    return garbage >= max(_RETURN_MIN, length >> 1)


def grown(
    length: int, capacity: int, skipped: int, step: int = 1, most: int | None = None
) -> int:
    """The capacity a segment of ``length`` live entries, after ``skipped`` evicted ones,
    moves to from one of ``capacity`` (and is given when a slab is compacted, but at a
    request's end): a quarter more, at least 8, or half the evicted ones when that is more,
    or room for one more ``step`` (the entries of the step that moves it) when that is more;
    exactly ``length`` when placed first (``capacity`` 0), so that a table that never grows
    (a prompt, a short answer) costs its entries only.

    But a first placement of `_FIRST_ROOM` entries or more (a long prompt's first chunk) whose
    request can hold more (``most``: the entries its ``max_len`` reaches, past ``skipped``) gets
    the room its first move would give, up to ``most``: its next block would otherwise move
    it, copying every entry and leaving them all as garbage (an 8k prompt's 512 entries, then
    a compaction every other prompt), where the room costs at most what that move would have
    given it. A shorter one costs a few entries' copy to move.

    The ``step`` room is for chunked prefills: a segment grown a chunk of blocks at a time
    (vLLM schedules a long prompt in chunks of ``max_num_batched_tokens``) would otherwise move
    on every chunk while it is shorter than four of them, and its slab, left a moved segment's
    garbage each time, would be compacted about as often. With it such a segment moves on
    every other chunk at most, and its room never exceeds one chunk, or a quarter of its
    entries where that is more.

    A table grows at its end only (a window's evictions shrink it at its front, room it
    cannot reuse), so the room follows what the table has grown by in all, not what it
    holds: a window's segment (a bounded number of entries) moves a logarithmic number of
    times, each move after half again as many blocks, not once every few blocks. An evicted
    entry's share of room (2 byte) is a quarter of what vLLM keeps for it (a null block's
    reference in the request's list); a table's first moves, at least 8 entries apart, cost
    32 byte of room at most."""
    room = max(8, length >> 2, skipped >> 1, step)
    if capacity:
        return length + room
    if most is None or length < _FIRST_ROOM:
        return length
    return max(min(length + room, most), length)


class RequestTable:
    """The admitted requests' fields and block tables.

    Args:
        num_groups: the coordinator's groups.
        wide: cold fields need 64 bits (a group's positions may pass 2**31 − 1).

    Attributes:
        hot: every request's hot fields.
        st: every request's cold fields.
        offsets: request id -> its offset in ``hot``.
        spare: offsets of ended requests, reused first.
        offset_ints: int objects a new row's offset is taken from where they reach (a pool's
            ids, `kvunits.runtime.block_pool.BlockPool.add_map`; empty: none), so that
            ``offsets`` holds no int of its own per request (an offset past 256 is an object
            of 28 byte: a third of a request's fields).
        slabs: per group, the live table entries of every request.
        garbage: per group, entries of the slab no request owns.
        never: the largest value a cold field holds ("never" for ``EVICT``).
    """

    __slots__ = (
        "cold_width",
        "garbage",
        "hot",
        "hot_width",
        "never",
        "num_groups",
        "offset_ints",
        "offsets",
        "slabs",
        "spare",
        "st",
    )

    def __init__(self, num_groups: int, *, wide: bool) -> None:
        self.num_groups = num_groups
        self.hot_width = HOT * num_groups
        self.cold_width = COLD * num_groups
        code = "q" if wide else "i"
        self.never = 2**63 - 1 if wide else 2**31 - 1
        self.hot: list[int] = []
        self.st = array(code)
        self.offsets: dict[str, int] = {}
        self.spare: list[int] = []
        self.offset_ints: Sequence[int] = ()
        self.slabs = [array("i") for _ in range(num_groups)]
        self.garbage = [0] * num_groups

    def __len__(self) -> int:
        return len(self.offsets)

    def __iter__(self) -> Iterator[str]:
        return iter(self.offsets)

    # -- reading ------------------------------------------------------------------------------

    def cold(self, o: int) -> int:
        """Where the cold fields of the request at offset ``o`` start in ``st``."""
        return o // self.hot_width * self.cold_width

    def read(self, o: int, g: int) -> list[int]:
        """A request's fields in group ``g``, in the order of the module docstring (a copy)."""
        h, c = o + g * HOT, self.cold(o) + g * COLD
        return self.hot[h : h + HOT] + self.st[c : c + COLD].tolist()

    def rows(self, o: int, g: int) -> int:
        """A request's positions so far in group ``g``."""
        return self.st[self.cold(o) + g * COLD + ANCHOR - HOT] - self.hot[o + g * HOT + SLACK]

    def field(self, o: int, g: int, name: int) -> int:
        """One field of a request in group ``g`` (a name of the module docstring)."""
        if name < HOT:
            return self.hot[o + g * HOT + name]
        return self.st[self.cold(o) + g * COLD + name - HOT]

    def live(self, o: int, g: int) -> array[int]:
        """The live entries of a request's table in group ``g`` (a copy)."""
        c = self.cold(o) + g * COLD - HOT
        start = self.st[c + START]
        return self.slabs[g][start : start + self.st[c + LENGTH]]

    def table(self, o: int, g: int) -> list[int]:
        """A request's whole table in group ``g``: the null block where evicted (a copy)."""
        return [0] * self.field(o, g, SKIPPED) + self.live(o, g).tolist()

    # -- planning -------------------------------------------------------------------------------

    def write_ops(self, ops: Ops, o: int, g: int, fields: list[int]) -> None:
        """Add to ``ops`` what writes a request's fields in group ``g`` (as `read` gives)."""
        h, c = o + g * HOT, self.cold(o) + g * COLD
        ops.append((setitem, self.hot, slice(h, h + HOT), fields[:HOT]))
        ops.append((setitem, self.st, slice(c, c + COLD), array(self.st.typecode, fields[HOT:])))

    def claim_ops(self, ops: Ops) -> int:
        """Add to ``ops`` what gives a new request its fields; return its offset: an ended
        request's where one is spare, else a new row at the end.

        The table grows one row at a time (`list` and `array` keep their own spare room, an
        eighth and a sixteenth, so appends stay amortised). It never held spare rows of its
        own: rows are reused, not dropped, until the last request ends, so spare ones cost
        their fields and their offset's int at every count (grown by doubling, 300 requests
        held 512 rows: 149 byte a request with one group, against 87 at 256)."""
        if self.spare:
            ops.append((self.spare.pop,))
            return self.spare[-1]
        hot, st = self.hot, self.st
        ops.append((hot.extend, [0] * self.hot_width))
        ops.append((st.extend, array(st.typecode, bytes(st.itemsize * self.cold_width))))
        return self.offset_of(len(hot))

    def offset_of(self, o: int) -> int:
        """The offset ``o`` of a new row, as ``offset_ints``' object where it reaches."""
        ints = self.offset_ints
        return ints[o] if o < len(ints) else o

    def segment_ops(
        self,
        plan: SlabPlan,
        g: int,
        dropped: int,
        added: Sequence[int],
        fields: list[int],
        room: int = 0,
        most: int | None = None,
    ) -> None:
        """Plan a request's table in group ``g``: its first ``dropped`` live entries evicted,
        ``added`` appended; the segment's new ``START``, ``LENGTH``, ``CAPACITY`` are written
        into ``fields`` (the group's planned fields, as `read` gives them). A segment placed
        or moved gets room for ``room`` live entries at least (a prefix hit's: the entries of
        the content it was admitted with, which its first steps fill in place); ``most``: the
        live entries the request's ``max_len`` reaches after the step (`grown`)."""
        start, length, capacity = fields[START], fields[LENGTH], fields[CAPACITY]
        if dropped:
            start += dropped
            length -= dropped
            capacity -= dropped
            plan.garbage[g] = plan.garbage.get(g, self.garbage[g]) + dropped
        if added:
            slab = self.slabs[g]
            end = length + len(added)
            if end <= capacity:
                plan.ops.append(
                    (setitem, slab, slice(start + length, start + end), array("i", added))
                )
            else:
                new = max(
                    grown(end, fields[CAPACITY], fields[SKIPPED] + dropped, len(added), most), room
                )
                tail = plan.slab_end.get(g, len(slab))
                if len(added) > 1 and capacity > 0 and start + capacity == tail:
                    # A run (a prefill chunk's blocks) into the slab's last segment: it grows
                    # there to the room a move would give; nothing copied, no garbage.
                    plan.ops.append((slab.extend, _ZERO * (new - capacity)))
                    plan.ops.append(
                        (setitem, slab, slice(start + length, start + end), array("i", added))
                    )
                    plan.slab_end[g] = tail + new - capacity
                    fields[START], fields[LENGTH], fields[CAPACITY] = start, end, new
                    return
                moved = slab[start : start + length]
                moved.extend(added)
                moved.extend(array("i", bytes(4 * (new - end))))
                at = plan.slab_end.get(g, len(slab))
                plan.slab_end[g] = at + new
                plan.ops.append((slab.extend, moved))
                plan.garbage[g] = plan.garbage.get(g, self.garbage[g]) + capacity
                start, capacity = at, new
            length = end
        fields[START], fields[LENGTH], fields[CAPACITY] = start, length, capacity

    def moved_ops(
        self,
        g: int,
        starts: Sequence[int],
        lengths: Sequence[int],
        capacities: Sequence[int],
        skipped: Sequence[int],
        added: Sequence[int],
    ) -> tuple[Ops, list[int], list[int], int]:
        """What moves full segments of group ``g`` (a batch of requests in phase), each with
        one entry ``added``, to the slab's end in turn, as `segment_ops` moves each: the
        operations, the segments' new starts and capacities, and how many of them move before
        one that finds the slab `due` (all of them where none does; the per-request path
        compacts the slab there first)."""
        slab = self.slabs[g]
        rooms = list(map(grown, map(add, lengths, repeat(1)), capacities, skipped))
        ends = list(accumulate(rooms, initial=len(slab)))
        garbage = list(accumulate(capacities, initial=self.garbage[g]))
        late = next(compress(range(len(rooms)), map(due, garbage[1:], ends)), len(rooms))
        moved = array("i")
        for start, length, entry, room in zip(starts, lengths, added, rooms, strict=True):
            moved += slab[start : start + length]
            moved.append(entry)
            moved += _ZERO * (room - length - 1)  # its spare room
        ops: Ops = [(slab.extend, moved), (setitem, self.garbage, g, garbage[-1])]
        return ops, ends[:-1], rooms, late

    def release_ops(self, plan: SlabPlan, o: int, rid: str) -> None:
        """Plan the end of a request: its offset spare, its segments garbage; every array
        emptied when it is the last request."""
        ops = plan.ops
        ops.append((self.offsets.pop, rid))
        if len(self.offsets) == 1:
            ops.append((self.offsets.clear,))  # a dict keeps its size after pops: not after this
            ops.append((self.hot.__delitem__, slice(None)))
            ops.append((self.st.__delitem__, slice(None)))
            ops.append((self.spare.__delitem__, slice(None)))
            for g, slab in enumerate(self.slabs):
                ops.append((slab.__delitem__, slice(None)))
                plan.garbage[g] = 0
            return
        ops.append((self.spare.append, o))
        for g in range(self.num_groups):
            capacity = self.field(o, g, CAPACITY)
            if capacity:
                plan.garbage[g] = plan.garbage.get(g, self.garbage[g]) + capacity

    def compact_ops(
        self,
        ops: Ops,
        groups: Collection[int] = (),
        ended: SlabPlan | None = None,
        o: int = -1,
        soon: bool = False,
    ) -> None:
        """Add to ``ops`` what rewrites every slab whose garbage is `due` (with ``soon``: half
        way there, so that a segment's move does not make it due; and those of ``groups``, due
        or not) without the garbage (each segment given the room a move gives, `grown`, or
        kept its own where that is more: a chunked prefill's room for its next chunk): no
        observable change. ``ended``: the plan of the end of the request at offset ``o``
        (`release_ops`), whose garbage counts and whose segments are not kept; such a
        compaction only returns memory, so each segment keeps its capacity (room given there
        would be garbage again at its own request's end: short requests ending one after
        another would compact ever more often)."""
        st = self.st
        ending = ended is not None
        hw, cw = self.hot_width, self.cold_width
        rows = len(st) // cw
        dead: list[int] | None = None  # rows without a live request: spare, and the ending one
        for g, slab in enumerate(self.slabs):
            garbage = self.garbage[g] if ended is None else ended.garbage.get(g, self.garbage[g])
            if g not in groups and not due(garbage * (2 if soon else 1), len(slab), ending):
                continue
            # Every live request's segment in this group, in the order of its rows, given
            # `grown`'s room (``grown(length, 1, skipped)``: a move's, written out) or kept
            # its own where that is more, and placed one after another. Each field of every
            # row is read in one strided slice, and written back in one: passes in C, a slab
            # of a thousand requests is compacted in a few of them and one loop of copies.
            at = g * COLD - HOT
            lengths = st[at + LENGTH :: cw]
            if dead is None:
                dead = [spare // hw for spare in self.spare] + ([o // hw] if o >= 0 else [])
            for row in dead:
                lengths[row] = 0
            held = st[at + CAPACITY :: cw]
            if ending:  # its own capacity, but none for a segment without entries
                capacities = array(st.typecode, map(mul, held, map(bool, lengths)))
            else:
                capacities = array(
                    st.typecode,
                    [
                        # (8 where n >> 2 and k >> 1 are less: one max, not two)
                        max(n + (8 if n < 32 and k < 16 else max(8, n >> 2, k >> 1)), c)
                        if n
                        else 0
                        for n, k, c in zip(lengths, st[at + SKIPPED :: cw], held, strict=True)
                    ],
                )
            starts = array(st.typecode, accumulate(capacities, initial=0))
            # The kept entries copied segment by segment into the new slab, made whole at
            # once (zeros: the spare room), by memory views: a copy each, no temporary.
            kept = _ZERO * starts.pop()
            segments = compress(zip(st[at + START :: cw], starts, lengths, strict=True), lengths)
            with memoryview(kept) as to, memoryview(slab) as source:
                for first, start, length in segments:
                    to[start : start + length] = source[first : first + length]
            ops.append((setitem, slab, slice(None), kept))
            ops.append((setitem, st, slice(at + START, rows * cw, cw), starts))
            if capacities != held:  # (an end's: only where a row has no entries)
                ops.append((setitem, st, slice(at + CAPACITY, rows * cw, cw), capacities))
            ops.append((setitem, self.garbage, g, 0))


class SlabPlan:
    """What one call plans in the table besides fields: its operations, the slabs' planned
    ends (segments it moved) and garbage."""

    __slots__ = ("garbage", "ops", "slab_end")

    def __init__(self, ops: Ops) -> None:
        self.ops = ops
        self.slab_end: dict[int, int] = {}
        self.garbage: dict[int, int] = {}

    def emit(self, table: RequestTable) -> None:
        """Add the planned garbage counts to the operations."""
        for g, count in self.garbage.items():
            self.ops.append((setitem, table.garbage, g, count))
