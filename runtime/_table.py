"""Every admitted request's bookkeeping in flat arrays: no Python object per request.

A request is one run of ``FIELDS × groups`` ints of one array, ``st`` (its *offset* ``o`` is
where the run starts; group ``g``'s fields start at ``o + g × FIELDS``), and its block table in
each group is one segment of that group's *slab*, an ``array('i')`` holding the live entries of
every request's table (a sliding window's evicted entries are counted, ``SKIPPED``, not
stored). So a request costs ``4 × FIELDS`` bytes a group and a held block 4 bytes, and nothing
is left behind when it ends: its run is reused by the next request, its segments are reclaimed
when the slab is compacted, and when the last request ends every array is emptied.

A segment grows at its end into its spare capacity, or moves to the slab's end with room to
grow (a quarter more); it shrinks at its front when a window evicts. The space it leaves is
garbage, counted per group; `RequestTable.compact_ops` rewrites a slab without it once it is
half the slab.

The fields of a group (plain ints: positions in the group's kernel unit, slots in its manager
unit, table entries in cache blocks):

* ``ROWS``: positions so far; ``STEP``: positions the latest step added.
* ``BOUND``: a step whose slots end (exclusive) at or below it needs neither the pools nor
  another block; ``EVICT``: the first slot a step may start at that evicts; ``BASE``: the
  block base of the block holding the next step's first slot, ``table[b] − b``, so that slot
  ``s`` below ``BOUND`` is at cache slot ``BASE × block_size + s``. These only let a step skip
  the managers and pools: anything may set ``BOUND`` and ``EVICT`` lower (-1 and 0 make the
  next step take the general path), never higher.
* ``SKIPPED``: leading table entries evicted (they read as the null block).
* ``START``, ``LENGTH``, ``CAPACITY``: the segment of live entries in the group's slab.
* ``MAXLEN``: the declared longest sequence, in slots; ``CAP``: the admission cap reserved,
  in cache blocks.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from operator import setitem
from typing import Final

from ._guard import Ops

ROWS, STEP, BOUND, EVICT, BASE, SKIPPED, START, LENGTH, CAPACITY, MAXLEN, CAP = range(11)

#: Fields per group.
FIELDS: Final = 11

#: Garbage (entries) a slab holds before a compaction is considered.
_COMPACT_MIN: Final = 1024


def grown(length: int) -> int:
    """The capacity a segment of ``length`` entries moves to: a quarter more, at least 4."""
    return length + max(4, length >> 2)


class RequestTable:
    """The admitted requests' fields and block tables.

    Args:
        num_groups: the coordinator's groups.
        wide: fields need 64 bits (a group's positions may pass 2**31 − 1).

    Attributes:
        st: every request's fields (see the module docstring).
        offsets: request id -> its offset in ``st``.
        spare: offsets of ended requests, reused first.
        slabs: per group, the live table entries of every request.
        garbage: per group, entries of the slab no request owns.
        never: the largest value a field holds ("never" for ``BOUND`` and ``EVICT``).
    """

    __slots__ = ("garbage", "never", "num_groups", "offsets", "slabs", "spare", "st", "width")

    def __init__(self, num_groups: int, *, wide: bool) -> None:
        self.num_groups = num_groups
        self.width = FIELDS * num_groups
        code = "q" if wide else "i"
        self.never = 2**63 - 1 if wide else 2**31 - 1
        self.st = array(code)
        self.offsets: dict[str, int] = {}
        self.spare = array("q")
        self.slabs = [array("i") for _ in range(num_groups)]
        self.garbage = [0] * num_groups

    def __len__(self) -> int:
        return len(self.offsets)

    def __iter__(self) -> Iterator[str]:
        return iter(self.offsets)

    # -- reading ------------------------------------------------------------------------------

    def live(self, o: int, g: int) -> array[int]:
        """The live entries of a request's table in group ``g`` (a copy)."""
        b = o + g * FIELDS
        start = self.st[b + START]
        return self.slabs[g][start : start + self.st[b + LENGTH]]

    def entry(self, o: int, g: int, index: int) -> int:
        """Entry ``index`` of a request's table in group ``g`` (the null block if evicted)."""
        b = o + g * FIELDS
        live = index - self.st[b + SKIPPED]
        return self.slabs[g][self.st[b + START] + live] if live >= 0 else 0

    def table(self, o: int, g: int) -> list[int]:
        """A request's whole table in group ``g``: the null block where evicted (a copy)."""
        return [0] * self.st[o + g * FIELDS + SKIPPED] + self.live(o, g).tolist()

    def field(self, o: int, g: int, name: int) -> int:
        """One field of a request in group ``g``."""
        return self.st[o + g * FIELDS + name]

    # -- planning -------------------------------------------------------------------------------

    def claim_ops(self, ops: Ops) -> int:
        """Add to ``ops`` what gives a new request a run of fields; return its offset."""
        if self.spare:
            ops.append((self.spare.pop,))
            return int(self.spare[-1])
        # Grow by doubling (at least one run): the new runs but the first wait in ``spare``.
        st, width = self.st, self.width
        runs = max(1, len(st) // width)
        ops.append((st.extend, array(st.typecode, bytes(st.itemsize * width * runs))))
        first = len(st)
        if runs > 1:
            rest = range(first + (runs - 1) * width, first, -width)
            ops.append((self.spare.extend, rest))
        return first

    def segment_ops(
        self,
        plan: SlabPlan,
        o: int,
        g: int,
        dropped: int,
        added: list[int],
        fields: list[int],
    ) -> None:
        """Plan a request's table in group ``g``: its first ``dropped`` live entries evicted,
        ``added`` appended; the segment's new ``START``, ``LENGTH``, ``CAPACITY`` are written
        into ``fields`` (the group's planned fields, at ``START`` .. ``CAPACITY``)."""
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
                new = grown(end)
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

    def release_ops(self, plan: SlabPlan, o: int, rid: str) -> None:
        """Plan the end of a request: its run spare, its segments garbage; every array emptied
        when it is the last request."""
        ops = plan.ops
        ops.append((self.offsets.pop, rid))
        if len(self.offsets) == 1:
            ops.append((self.st.__delitem__, slice(None)))
            ops.append((self.spare.__delitem__, slice(None)))
            for g, slab in enumerate(self.slabs):
                ops.append((slab.__delitem__, slice(None)))
                plan.garbage[g] = 0
            return
        ops.append((self.spare.append, o))
        for g in range(self.num_groups):
            capacity = self.st[o + g * FIELDS + CAPACITY]
            if capacity:
                plan.garbage[g] = plan.garbage.get(g, self.garbage[g]) + capacity

    def compact_ops(self, ops: Ops) -> None:
        """Add to ``ops`` what rewrites every slab whose garbage is half of it without the
        garbage (each segment keeps a quarter of spare room): no observable change."""
        st = self.st
        for g, slab in enumerate(self.slabs):
            if self.garbage[g] < max(_COMPACT_MIN, len(slab) >> 1):
                continue
            kept = array("i")
            offsets, starts, capacities = [], [], []
            for o in self.offsets.values():
                b = o + g * FIELDS
                start, length = st[b + START], st[b + LENGTH]
                offsets.append(b)
                starts.append(len(kept))
                if length:
                    kept.extend(slab[start : start + length])
                    room = max(4, length >> 2)
                    kept.extend(array("i", bytes(4 * room)))
                    capacities.append(length + room)
                else:
                    capacities.append(0)
            ops.append((setitem, slab, slice(None), kept))
            for b, start, capacity in zip(offsets, starts, capacities, strict=True):
                ops.append((setitem, st, b + START, start))
                ops.append((setitem, st, b + CAPACITY, capacity))
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
