"""The block pool: a fixed set of cache blocks, their reference counts and their free queue.

This is inner core: it works on plain ints (block ids; counts in cache blocks) and is driven by
the coordinator, which checks units once at its typed entry. Block 0 is the null block: it is
never handed out, never freed, and stands in block tables for entries a manager evicted (a
sliding window's tail, a finished chunk, the blocks a prefix hit skips), so that a table keeps
its positions. A pool serves one layer group, or every group of a coordinator whose groups
share one pool (their pages are of one size, see `kvunits.runtime.shared_pool`).

Changes are planned, then committed (`kvunits.runtime._guard`): a `PoolPlan` reads the pool
through what the call has planned so far (blocks it took, freed, touched, registered) and, at
the end, writes the operations that make its changes, which the caller commits with the rest
of the call's. The pool's own mutators (`BlockPool.allocate_n`, `BlockPool.free`, ...) plan and
commit one change each, so each is atomic too.

Not thread-safe: the coordinator that owns the pool is driven by one scheduler thread.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Collection, Iterable, Iterator, Sequence
from itertools import compress, filterfalse, repeat
from operator import eq, itemgetter, setitem, sub
from typing import Any, Final, TypeAlias

from kvunits.contracts import CacheBlocks, SpecError
from kvunits.contracts.errors import AllocationError

from ._guard import Ops, commit, ops_of

#: The id of the null block in every pool.
NULL_BLOCK: Final = 0

#: The most cache blocks a pool may have: block ids must fit the int32 block tables the kernels
#: may be given (ids 0 .. 2**31 - 1).
MAX_POOL_BLOCKS: Final = 2**31

#: Stale queue entries (of cached blocks a prefix hit took back) tolerated before `compact`
#: rebuilds the queue without them: at least this many, and half the queue.
_COMPACT_AFTER: Final = 64

#: The fewest queue entries (the live part, stale ones included, and the blocks the call frees)
#: at which the end of the last request forgets the order of the blocks without content in a
#: pool that keeps cached ones (`BlockPool.idle_due`: also twice what the last such rewrite
#: left, so that its cost, a pass over the queue, is paid once per doubling, never per end).
_IDLE_MIN: Final = 256

#: Fresh ids taken at once from which `BlockPool.ids` slices a table of ids (fewer: a range).
_IOTA_FROM: Final = 16

#: The most blocks of a table whose end `BlockPool.ended` splits in a loop, not in passes in C
#: (each of which costs a set or an array). Measured (`BlockPool._ended_sets` taking front and
#: back as slices): at 8 blocks the loop 1.8 us, the passes 1.5-2.9; at 16 about equal (2.9-3.3
#: against 1.6-3.7, the passes faster the more blocks are cached); at 34 the passes twice as
#: fast (2.7-5.5 against 5.6-6.1 us).
_ENDED_LOOP: Final = 16

#: What `BlockPool.ended` gives: the blocks to the queue's front, those to its back, the
#: operations of the end, and how many of the blocks another table also holds.
Ended: TypeAlias = "tuple[array[int], array[int], Ops, int]"

#: The largest pool whose block ids a prefix cache keeps as one int object each, made at build
#: (`BlockPool.add_map`): 40 byte a block (the int and its tuple entry), 160 MiB at this
#: size, where vLLM builds a block object of about 140. A larger pool's entries hold ints of
#: their own (a range, not a tuple: the same values, no memory up front).
_INTERNED_MAX: Final = 2**22

#: The bytes 0 .. 255: the low byte of 256 consecutive ids.
_LOW: Final = bytes(range(256))

#: A group's map of cached content: block hash -> the block holding that content, or the
#: blocks (two or more, oldest first) when several do. One block per hash is the common case
#: (an int: no list per hash); duplicates happen when requests compute one block before any
#: registered it, or recompute a prompt's last block (a prompt given again: vLLM keeps them
#: too, in a dict per hash). A key's list is changed in place, a block filed (appended) or
#: evicted (removed: usually the oldest, the queue reusing the blocks freed first) at a time
#: (`filed_op`, `unfiled_op`; a plan's several changes of one key: `key_ops`), not copied
#: (but where a batch's takes evict several blocks of one key): a copy per change cost 63 us
#: a request against vLLM's 22 once 10,000 requests had given one prompt (docs/benchmarks.md,
#: session 42; `vs_vllm.py`'s held-out *one prompt again* keeps the case). A list, not a
#: dict, since a holder costs 8 byte in it against some 36 in a dict (a prompt cached by 256
#: requests: 442 byte a request against vLLM's 412 with a dict, 383 with a list).
CacheMap = dict[bytes, "int | list[int]"]


def holders(held: int | Iterable[int] | None) -> list[int]:
    """The blocks a `CacheMap` entry (or a planned list of them) names, oldest first, as a
    new list (none: empty)."""
    if held is None:
        return []
    return [held] if isinstance(held, int) else list(held)


def without(held: int | Iterable[int], block: int) -> list[int]:
    """The blocks of a `CacheMap` entry (or a planned list of them) less ``block`` (one of
    them), a new list, copied and cut in C: for plans that compose several changes of one
    key before writing it back once (`filed`)."""
    if isinstance(held, int):
        return []
    kept = list(held)
    kept.remove(block)
    return kept


def filed(blocks: list[int]) -> int | list[int]:
    """What a `CacheMap` stores for ``blocks`` (one or more): the block itself when one."""
    return blocks[0] if len(blocks) == 1 else blocks


def filed_op(
    cache_map: CacheMap, key: bytes, held: int | list[int] | None, block: int
) -> tuple[Any, ...]:
    """The op that files ``block`` (not filed under ``key``) under ``key``, whose entry is
    ``held`` now (None: none): the block itself, a list of the two, or the block appended to
    the key's list in place (its newest)."""
    if held is None:
        return (setitem, cache_map, key, block)
    if isinstance(held, int):
        return (setitem, cache_map, key, [held, block])
    return (held.append, block)


def flag_op(flags: bytearray, blocks: Iterable[int], value: int) -> tuple[Any, ...]:
    """The op that sets ``blocks``' flags (a pool's free cached blocks: 1 free and cached, 0
    not) to ``value``, in C at the commit (``blocks`` is read then: a copy, or a set the plan
    made)."""
    return (commit, map(flags.__setitem__, blocks, repeat(value)))


def unfiled_op(
    cache_map: CacheMap, key: bytes, held: int | list[int], block: int
) -> tuple[Any, ...]:
    """The op that evicts ``block``, filed under ``key`` (whose entry is ``held`` now), from
    ``cache_map``: the key dropped where it is its one block, the other block filed alone
    where they are two, else the block removed from the key's list in place."""
    if isinstance(held, int):
        return (cache_map.pop, key)
    if len(held) == 2:
        one, two = held
        return (setitem, cache_map, key, two if one == block else one)
    return (held.remove, block)


class HeldBlocks:
    """A key's blocks as one plan changes them, kept as the changes (the blocks it evicts,
    those it files, in order) to the entry the map holds, not as a copy of its blocks: a plan
    that composes several changes of one key (the core's plans, `PoolPlan`, the generated
    planners' ``lists``) reads and writes it as a list (``remove``, ``append``, ``len``,
    iteration), and `key_ops` writes it back in place where the entry is a list that keeps
    two blocks or more. Without it a key of many blocks (a prompt given again and again)
    cost each plan that touched it a copy of them all."""

    __slots__ = ("entry", "gone", "new")

    def __init__(self, entry: int | list[int] | None) -> None:
        self.entry = entry
        self.gone: set[int] = set()  # the entry's blocks the plan evicts
        self.new: list[int] = []  # blocks the plan files, oldest first

    def _count(self) -> int:
        entry = self.entry
        held = 0 if entry is None else 1 if isinstance(entry, int) else len(entry)
        return held - len(self.gone) + len(self.new)

    def __len__(self) -> int:
        return self._count()

    def __bool__(self) -> bool:
        return self._count() > 0

    def __iter__(self) -> Iterator[int]:
        gone = self.gone
        yield from (b for b in holders(self.entry) if b not in gone)
        yield from self.new

    def append(self, block: int) -> None:
        """File ``block`` under the key (its newest)."""
        self.new.append(block)

    def remove(self, block: int) -> None:
        """Evict ``block`` (one of the key's blocks) from the key, as `list.remove`."""
        if block in self.new:
            self.new.remove(block)
            return
        entry = self.entry
        if block in self.gone or not (
            block == entry if isinstance(entry, int) else entry is not None and block in entry
        ):
            raise ValueError(f"block {block} is not filed under this key")
        self.gone.add(block)


def key_ops(cache_map: CacheMap, key: bytes, blocks: list[int] | HeldBlocks) -> Ops:
    """The ops that write a key's planned blocks (a list, or `HeldBlocks`) back into
    ``cache_map``: the key dropped where none is left; the entry's list changed in place
    where it keeps two blocks or more (those evicted removed, then those filed appended: a
    block evicted and filed again is its newest); else the entry written anew (`filed`)."""
    if not blocks:
        return [(cache_map.pop, key, None)]
    if isinstance(blocks, HeldBlocks):
        entry = blocks.entry
        if isinstance(entry, list) and len(blocks) >= 2:
            ops: Ops = []
            if blocks.gone:
                ops.append((commit, map(entry.remove, blocks.gone)))
            if blocks.new:
                ops.append((entry.extend, blocks.new))
            return ops
        blocks = list(blocks)
    return [(setitem, cache_map, key, filed(blocks))]


def lists_ops(
    ops: Ops, lists: dict[Any, tuple[CacheMap, bytes, list[int] | HeldBlocks]]
) -> None:
    """Add to ``ops`` the writes of a plan's planned keys ``lists`` (values: a map, a key,
    its planned blocks), one key at a time (`key_ops`): a new key of one block (a filled
    block's, the common case) one store (`filed`, inlined)."""
    for cache_map, key, blocks in lists.values():
        if type(blocks) is list and len(blocks) == 1:
            ops.append((setitem, cache_map, key, blocks[0]))
        else:
            ops += key_ops(cache_map, key, blocks)


def id_run(start: int, end: int) -> array[int]:
    """The ids ``start .. end − 1`` (0 <= start <= end <= 2**31) as an ``array('i')``, built
    byte plane by byte plane: the low bytes are 0 .. 255 repeated, each higher byte a run of
    one value per 256, 65,536 or 2**24 ids, written into every fourth byte by slice
    assignment. C-level work of a few bytes per id, where ``array('i', range(...))`` makes
    and converts an int object per id."""
    n = end - start
    if n <= 0:
        return array("i")
    buf = bytearray(4 * n)
    for k in range(4):
        shift = 8 * k
        at = k if sys.byteorder == "little" else 3 - k
        first, last = start >> shift, (end - 1) >> shift
        if k == 0:
            skip = start & 255
            plane = (_LOW * (-(-(skip + n) // 256)))[skip : skip + n]
        elif first == last:  # one value throughout (0: already there)
            if not first & 255:
                continue
            plane = bytes((first & 255,)) * n
        else:
            runs = [bytes((first & 255,)) * (((first + 1) << shift) - start)]
            runs += [bytes((v & 255,)) * (1 << shift) for v in range(first + 1, last)]
            runs.append(bytes((last & 255,)) * (end - (last << shift)))
            plane = b"".join(runs)
        buf[at::4] = plane
    out = array("i")
    out.frombytes(buf)
    return out


def shared_ended_ops(shared: dict[int, int], blocks: list[int]) -> Ops:
    """The ops that end one table's hold on ``blocks``, each held by it and another table at
    least (``shared``: the pool's counts of tables holding a block, two or more): each count
    one less, and a block left to one table no longer counted. Passes in C (the counts read
    now; the new counts and the drops made at the commit), where a loop builds an operation
    per block: a 700-token shared prompt's 43 blocks held by two tables 9.2 -> 2.6 us, by
    three 8.3 -> 4.6 (session 42, docs/benchmarks.md)."""
    counts = list(map(shared.get, blocks))
    ones = counts.count(2)  # (left to one table: dropped)
    if ones == len(counts):
        return [(commit, map(shared.pop, blocks))]
    ops: Ops = [(shared.update, zip(blocks, map(sub, counts, repeat(1)), strict=True))]
    if ones:  # (after the update: those it left at 1)
        ops.append((commit, map(shared.pop, compress(blocks, map(eq, counts, repeat(2))))))
    return ops


def front_room(size: int, head: int) -> int:
    """The dead entries `BlockPool.front_ops` leaves ahead of blocks it puts at the front of
    a queue ``size`` long whose live part starts at ``head``, where fewer than them were
    taken: an eighth of the live part (the generated ends compute it the same way)."""
    return (size - head) >> 3


class BlockPool:
    """A fixed number of cache blocks with reference counts and an ordered free queue.

    A block is free (in the queue) or held by one or more block tables; the null block is held
    for ever. A block is held by more than one table only when the prefix cache shares it
    (`PoolPlan.touch`): its reference count is the number of tables holding it. Freeing a block
    that is not held, which would hand one block to two requests, is an `AssertionError` before
    anything changes.

    Why the queue order is kept: a freed block's contents are dead unless the prefix cache
    registered them, so any order is correct; the order still decides *which* ids the next
    allocation gets, and a fixed rule makes them a function of the calls alone: replays and
    tests see the same ids. So a call that fails leaves the order exactly as it was, like
    every other piece of state. For the prefix cache the order is vLLM 0.33's eviction order
    (``BlockPool.free_blocks``): a block a table gives back (a request's end, a rollback's
    rejected drafts) whose content no prefix can hit goes to the queue's *front*, the latest
    first (`PoolPlan.release_front`), so that allocations take such blocks before they evict
    any cached one; a freed cached block keeps its content and its hash at the back, least
    recently used first, is evicted (its hash forgotten) only when an allocation takes it
    from the front, and is taken back out of the queue if a prefix hit needs it first. Two
    differences from vLLM's queue: the ids never handed out come first (vLLM holds them after
    the blocks it prepends: the ids differ, the cached blocks evicted are the same), and the
    blocks a sliding window drops go to the back (the last first, as vLLM frees them) even
    without content, where vLLM puts those at its front: a step would have to take the blocks
    its own window drops before the queue's (a request whose content is given drops cached
    blocks only).

    When the end of the last request leaves every block free and none cached, the pool is as
    built again (`PoolPlan.last`; so does a prefix-cache reset, `reset_ops`): nothing of the
    ids handed out stays once every request is freed, and the next request takes ids from 1
    again (vLLM's queue keeps the freed order; an id holds no content then, so only the ids
    differ). Where some are cached, the order
    of the others is forgotten the same way (`PoolPlan._emit_idle`, once the queue has
    doubled since it last did, so that its pass over the queue is paid once per doubling):
    the ids above the highest cached block are never handed out again, those below it
    queue in id order ahead of the cached ones, which keep their order; what the next
    allocations evict is unchanged (a shared prompt cached by the first request leaves its
    blocks' entries and little else). Until then memory follows the ids
    freed, never the pool's size, and a block costs nothing to take or free beyond its place
    in the queue: the queue is the ids never handed out (a range, ``_fresh .. num_blocks -
    1``, always at its front, since every freed block goes behind it: to the back, or just
    ahead of the other freed ones) followed by the freed ones, 4 bytes each
    (``array('i')``, taken and extended by slices). Whether a block is held is the queue's
    complement (a block below ``_fresh`` and not queued); only what differs from "held by one
    table" is recorded: blocks held by several tables (``_shared``: their counts) and free
    blocks whose content is cached (``_free_cached``: a flag a block, made when a prefix
    cache adopts the pool). A pool of 2**31 blocks costs what a pool of 4 does until its
    blocks are used (without a prefix cache: with one, its flags and ids, `add_map`). A
    block a prefix hit takes back out of the queue leaves a stale entry there (removing it
    would cost a scan of the queue): it is skipped when it reaches the front, and
    `compact_ops` drops stale entries once they are half the queue.

    Args:
        num_blocks: cache blocks in the pool, the null block included (``1 ..``
            `MAX_POOL_BLOCKS`).
        name: the group's name (or ``"shared"``), for error messages.

    Raises:
        SpecError: ``num_blocks`` is not an int in that range.

    Example:
        >>> pool = BlockPool(4, name="audio")
        >>> pool.allocate_n(2), pool.num_free
        ([1, 2], 1)
        >>> pool.free(iter([2])); pool.allocate_n(2)
        [3, 2]
    """

    __slots__ = (
        "_cached",
        "_free_cached",
        "_fresh",
        "_head",
        "_idle",
        "_ids",
        "_iota",
        "_maps",
        "_num_stale",
        "_queue",
        "_shared",
        "_stale",
        "_used",
        "name",
        "num_blocks",
    )

    def __init__(self, num_blocks: int, *, name: str = "pool") -> None:
        if type(num_blocks) is not int or num_blocks < 1:
            raise SpecError(f"a pool needs >= 1 block (the null block), got {num_blocks!r}")
        if num_blocks > MAX_POOL_BLOCKS:
            raise SpecError(
                f"pool {name!r} of {num_blocks} cache_block: block ids must fit int32 block "
                f"tables, so a pool has at most {MAX_POOL_BLOCKS} cache_block (ids 0 .. "
                f"{MAX_POOL_BLOCKS - 1}); plan with a smaller memory_budget or larger blocks"
            )
        self.name = name
        self.num_blocks = num_blocks
        self._fresh = 1  # the lowest id never handed out (the null block, 0, never is)
        self._queue = array("i")  # freed ids in order; the live part starts at _head
        self._iota = array("i")  # the ids 0 .. k - 1: fresh ids are sliced from it
        self._head = 0
        self._used = 0  # blocks held, the null block not counted
        self._shared: dict[int, int] = {}  # blocks held by 2 tables or more: their counts
        # Stale queue entries per block (taken back by a touch), and their total.
        self._stale: dict[int, int] = {}
        self._num_stale = 0
        # Blocks whose content the prefix cache registered: block -> its key (the map is
        # the one of `_maps` that files it: `map_of`); and those of them that are free.
        self._cached: dict[int, bytes] = {}
        # Per block, 1 where it is free and its content cached (made by `add_map`; a pool no
        # prefix cache uses caches nothing: none).
        self._free_cached = bytearray()
        # The prefix-cache maps whose blocks come from this pool (one per cached group).
        self._maps: list[CacheMap] = []
        # Each id's int object, which every cache entry holds (`add_map`; a range, making
        # ints anew, until a map is added).
        self._ids: Sequence[int] = range(num_blocks)
        # The queue's length the last `PoolPlan._emit_idle` left (`idle_due`).
        self._idle = 0

    def add_map(self, cache_map: CacheMap) -> None:
        """Adopt a prefix cache's map of this pool's blocks (at build, not a call's change):
        make its flags of free cached blocks (a byte a block, where a set of them cost 32 to
        64 byte a member), and each block id's int object once (up to `_INTERNED_MAX`
        blocks), which the cache's entries (block -> key, key -> block) then hold, where
        each would hold an int of its own (28 byte past the 256 ints Python keeps). With
        caching on, the pool fills with cached blocks, each of which holds an id: made up
        front, as vLLM makes its block objects, they cost no more than that steady state and
        no allocation as blocks cycle."""
        commit(ops_of(self.adopt_ops([cache_map])))

    def adopt_ops(self, cache_maps: list[CacheMap]) -> Ops:
        """The ops that adopt ``cache_maps`` (new to the pool), as `add_map` does: C calls
        only, for a plan's commit (`PoolPlan.emit`, a map a registration brings). The flags
        are extended in place (the plan holds them already)."""
        ops: Ops = [(self._maps.extend, cache_maps)]
        if not self._free_cached:
            ops.append((self._free_cached.extend, bytes(self.num_blocks)))
        if type(self._ids) is range and self.num_blocks <= _INTERNED_MAX:
            ops.append((setattr, self, "_ids", tuple(self._ids)))
        return ops

    def idle_due(self) -> bool:
        """Whether the end of the last request, all of whose blocks this pool holds
        (``_used`` of them), rewrites the queue of this pool, which keeps cached blocks
        (`PoolPlan._emit_idle`): once the queue's entries then, stale ones included, are
        `_IDLE_MIN` and twice what the last rewrite left. Read before the call changes
        anything, so that the generated ``free`` and the general path decide alike."""
        size = len(self._queue) - self._head + self._used
        return size >= _IDLE_MIN and size >= 2 * self._idle

    def cached_free_blocks(self) -> list[int]:
        """The free blocks whose content is cached, in id order (for inspection: it scans
        the flags)."""
        return list(compress(range(len(self._free_cached)), self._free_cached))

    # -- reading -------------------------------------------------------------------------------

    @property
    def num_free(self) -> int:
        """Cache blocks in the free queue (cached ones included: they are evictable)."""
        return self.num_blocks - self._fresh + len(self._queue) - self._head - self._num_stale

    @property
    def num_used(self) -> int:
        """Cache blocks held by requests (the null block not counted; a shared one once)."""
        return self._used

    @property
    def num_cached_free(self) -> int:
        """Free blocks that still hold a registered prefix (a hit may take them back)."""
        return self._free_cached.count(1)

    @property
    def has_shared(self) -> bool:
        """Whether any block is held by more than one table."""
        return bool(self._shared)

    def ref_count(self, block: int) -> int:
        """The reference count of one block: the tables holding it (0: free; the null block:
        1). For inspection: a block held by one table is told from a free one by a scan of
        the queue."""
        if block == NULL_BLOCK:
            return 1
        if not 0 < block < self._fresh:
            return 0
        shared = self._shared.get(block)
        if shared is not None:
            return shared
        return 0 if block in set(self.free_queue()) else 1

    def count_shared(self, blocks: Iterable[int]) -> int:
        """How many of ``blocks`` (held ones) more than one table holds."""
        shared = self._shared
        return sum(1 for b in blocks if b in shared) if shared else 0

    def ended(self, blocks: array[int]) -> Ended | None:
        """The end of one table holding ``blocks`` (each once, in the order they go back), as
        `PoolPlan.release_front` and `PoolPlan.emit` make it on a fresh plan: the blocks that
        go to the queue's front (no content registered), those that go to its back (cached
        ones, with their content; those another table also holds stay, one reference less),
        the operations that lower those counts and keep the cached ones' content in the
        queue, and how many stay so (held by another table: the admission ledger's shares
        drop by as many). The caller stores the rest (the queue, ``_used``).

        Returns None, having changed nothing, for blocks that plan would refuse or take one
        at a time (a block twice, the null block, one never handed out or free).

        A table of up to `_ENDED_LOOP` blocks (a short request's) is split by one loop: for
        so few blocks a loop costs less than the passes in C, each of which builds a set or
        an array (3 blocks of a cached pool: 0.9-1.0 µs against 1.0-2.1)."""
        if len(blocks) <= _ENDED_LOOP:
            return self._ended_few(blocks)
        return self._ended_sets(blocks)

    def _ended_sets(self, blocks: array[int]) -> Ended | None:
        """`ended` in passes in C (a set or an array each). The blocks going to the back
        (cached or with a stale entry) and those another table holds are ids the pool
        handed out; only those going to the front are checked against the ids' range. A
        table that cached content ends tail first: its blocks without content (its newest)
        lead, its cached ones follow, its prefix hits (those shared) come last; one without
        content the other way round. Where they lie so, front and back are slices of
        ``blocks`` (a few look-ups tell), not filtered out one by one."""
        ids = blocks.tolist()
        given = set(ids)
        if not given:
            return blocks, blocks, [], 0
        if len(given) != len(ids):
            return None
        if self._cached and not self._stale:
            ended = self._ended_in_order(blocks, ids)
            if ended is not None:
                return ended
        if self._cached and (  # (ids out of range would be front ones: refused below too)
            min(given) <= NULL_BLOCK
            or max(given) >= self._fresh
            or any(map(self._free_cached.__getitem__, given))
        ):
            return None
        ops: Ops = []
        shared = self._shared
        both = shared.keys() & given if shared else set()  # stay held, one reference less
        if both:
            ops += shared_ended_ops(shared, list(both))
            given -= both
        cached = self._cached.keys() & given if self._cached else set()
        if cached:
            ops.append(flag_op(self._free_cached, cached, 1))
        back = cached | (self._stale.keys() & given) if self._stale else cached
        n, s = len(ids), len(both)
        k = n - s - len(back)  # those going to the front
        # Each of the three kinds where its count says, where a few look-ups confirm it.
        if not both and not k:
            return blocks[:0], blocks, ops, 0
        if not both and not back:
            front, back_blocks = blocks, blocks[:0]
        elif (
            back.isdisjoint(ids[:k])
            and both.isdisjoint(ids[:k])
            and both.issuperset(ids[n - s :])
        ):  # front, back, shared
            front, back_blocks = blocks[:k], blocks[k : n - s]
        elif (
            back.isdisjoint(ids[n - k :])
            and both.isdisjoint(ids[n - k :])
            and both.issuperset(ids[:s])
        ):  # shared, back, front
            front, back_blocks = blocks[n - k :], blocks[s : n - k]
        else:
            rest = [b for b in ids if b not in both] if both else ids
            front = array("i", filterfalse(back.__contains__, rest))
            back_blocks = array("i", filter(back.__contains__, rest))
        if k and (min(front) <= NULL_BLOCK or max(front) >= self._fresh):
            return None
        return front, back_blocks, ops, s

    def _ended_in_order(
        self, blocks: array[int], ids: list[int]
    ) -> Ended | None:
        """`_ended_sets` of a table that cached content and lies in its order (its newest
        blocks without content, its cached ones, its prefix hits: those another table holds
        too), each block once, in a pool with no stale entry: the three parts found by their
        ends (a few look-ups) and the cached part checked in two passes in C (each cached,
        none free), not split by sets (a prompt's table of 132 blocks, `ended` 20.6 -> 12.0
        us: session 49, docs/benchmarks.md). None where they lie otherwise, or a block is
        refused (`_ended_sets` decides then)."""
        cached, shared = self._cached, self._shared
        n = len(ids)
        s = 0  # the prefix hits, last
        if shared:
            while s < n and ids[n - 1 - s] in shared:
                s += 1
            if not shared.keys().isdisjoint(ids[: n - s]):
                return None
        k = 0  # the blocks without content, first (all of them: a table without content)
        if cached.keys().isdisjoint(ids):
            k = n - s
        while k < n - s and ids[k] not in cached:
            k += 1
        if k and (min(ids[:k]) <= NULL_BLOCK or max(ids[:k]) >= self._fresh):
            return None
        middle = ids[k : n - s]  # (cached ones are ids handed out; a held one is not free)
        if len(middle) > 1:  # (their flags read in one C call)
            if not all(map(cached.__contains__, middle)) or 1 in itemgetter(*middle)(
                self._free_cached
            ):
                return None
        elif middle and (middle[0] not in cached or self._free_cached[middle[0]]):
            return None
        ops: Ops = shared_ended_ops(shared, ids[n - s :]) if s else []
        if middle:
            ops.append(flag_op(self._free_cached, middle, 1))
        return blocks[:k], blocks[k : n - s], ops, s

    def _ended_few(self, blocks: array[int]) -> Ended | None:
        """`ended` of a few blocks, one at a time (the same split, the same operations)."""
        shared, cached, stale = self._shared, self._cached, self._stale
        fresh, flags = self._fresh, self._free_cached
        front, back = array("i"), array("i")
        ops: Ops = []
        seen: set[int] = set()
        freed: list[int] = []  # cached: free with their content
        held_too = 0  # blocks another table holds
        for b in blocks:
            if b <= NULL_BLOCK or b >= fresh or b in seen or (cached and flags[b]):
                return None
            seen.add(b)
            count = shared.get(b)
            if count is not None:  # another table holds it: one reference less
                ops.append((setitem, shared, b, count - 1) if count > 2 else (shared.pop, b))
                held_too += 1
            elif b in cached:
                back.append(b)
                freed.append(b)
            elif b in stale:
                back.append(b)
            else:
                front.append(b)
        if freed:
            ops.append(flag_op(flags, freed, 1))
        return front, back, ops, held_too

    def held_blocks(self) -> list[int]:
        """Every held block, in id order (for inspection: it scans the queue)."""
        free = set(self.free_queue())
        return [b for b in range(1, self._fresh) if b not in free]

    def is_cached(self, block: int) -> bool:
        """Whether the prefix cache registered the block's content (held or free)."""
        return block in self._cached

    def cached_key(self, block: int) -> bytes | None:
        """The key a cached block is registered under (None: not cached)."""
        return self._cached.get(block)

    def map_of(self, block: int, key: bytes) -> CacheMap:
        """The map that files the cached ``block`` under ``key``: the pool's one map, or, in
        a pool of several cached groups, the one naming the block (its ids are the pool's:
        one map does)."""
        maps = self._maps
        if len(maps) == 1:
            return maps[0]
        for cache_map in maps:
            held = cache_map.get(key)
            if held == block or (isinstance(held, list) and block in held):
                return cache_map
        raise AssertionError(f"block {block} of pool {self.name!r} is filed in no map")

    def sole_keys(self, blocks: Collection[int]) -> list[bytes] | None:
        """The keys of the cached free ``blocks`` (a step's run of the queue's front), in
        their order, where the pool files them in one map, each its key's one block
        (`evicted_ops` then evicts them in passes in C); None otherwise. Changes nothing."""
        maps = self._maps
        keys = list(map(self._cached.__getitem__, blocks))
        if len(maps) != 1 or list(map(maps[0].get, keys)) != list(blocks):
            return None
        return keys

    def evicted_ops(self, blocks: Collection[int], keys: list[bytes]) -> Ops:
        """The ops that evict the cached free ``blocks``, filed under ``keys`` (`sole_keys`'),
        from the prefix cache, as `PoolPlan.take` evicts a cached block it takes: passes in C
        over lazy iterators (each a C call: a commit runs them all without a line of Python
        between, `_guard`), for a commit that takes them from the queue too. Changes
        nothing."""
        return [
            (commit, map(self._cached.pop, blocks)),
            flag_op(self._free_cached, blocks, 0),
            (commit, map(self._maps[0].pop, keys)),
        ]

    def filed_ops(
        self, cache_map: CacheMap, blocks: Sequence[int], keys: Sequence[bytes]
    ) -> Ops:
        """The ops that file ``blocks`` (held, none cached) under ``keys``, new to
        ``cache_map`` and each once: a prompt's blocks registered by its steps, in passes in
        C (`PoolPlan.register_run`'s effect where its keys are new). Changes nothing.

        Both entries hold the id's own int object (`add_map`), not one each (``blocks`` is
        often an array slice: 28 byte an int past the 256 Python keeps)."""
        ids = list(map(self._ids.__getitem__, blocks))
        return [
            (self._cached.update, zip(ids, keys, strict=True)),
            (cache_map.update, zip(keys, ids, strict=True)),
        ]

    def free_queue(self) -> list[int]:
        """The whole free queue, front (taken first) to back: the ids never handed out, then
        the freed ones without the stale entries. For inspection: it costs a copy of it."""
        stale = dict(self._stale)
        out = list(range(self._fresh, self.num_blocks))
        for block in self._queue[self._head :]:
            left = stale.get(block)
            if left:
                stale[block] = left - 1
                continue
            out.append(block)
        return out

    def ids(self, start: int, end: int) -> array[int]:
        """The ids ``start .. end − 1`` as an array. A few (fewer than `_IOTA_FROM`) are made
        from a range; more are sliced from a table of ids grown (by a quarter, to at most the
        pool's size, with `id_run`) as such takes hand fresh ids out: a prefill's blocks cost
        a copy, not an int each (a slice of 512 ids 0.15 µs, `id_run` 5.3, ``array(range)``
        23), and a pool that only ever takes a few blocks at a time keeps no table (nor does
        a take far past the table: its ids are made on their own). A quarter, not double: the
        table costs 4 byte a fresh id handed out, up to a quarter more (doubled, long prompts
        held up to twice their blocks' ids: 70 KB for 200 prompts of 1,000 tokens, more than
        vLLM's lists of their blocks). Growing it changes nothing observable."""
        if end - start < _IOTA_FROM:
            return array("i", range(start, end))
        iota = self._iota
        if end > len(iota):
            if start - len(iota) > 16 * (end - start):
                return id_run(start, end)  # a few ids far past the table: not worth growing it
            grown = max(end, len(iota) + (len(iota) >> 2), 64)
            iota.extend(id_run(len(iota), min(grown, self.num_blocks)))
        return iota[start:end]

    def front(
        self, fresh: int, head: int, n: int, released: Sequence[int] = ()
    ) -> array[int] | None:
        """The ``n`` blocks an allocation would take as a plan sees the pool (``fresh``: its
        lowest id never handed out, ``head``: its queue's first live entry): the fresh ids,
        then the queue's front, as one array made of slices (a prefill chunk's blocks cost a
        copy, not an int each). ``released``: the blocks the plan sends to the queue's back
        before this take (a window's evictions in the same step: vLLM's
        ``remove_skipped_blocks`` before its allocation), taken after the queue's entries
        where those are too few (``head`` may be past the queue, into them: the plan took
        some already). None where a block-by-block take is needed (a stale entry among
        them) or there are fewer: `PoolPlan.take` decides those. Cached blocks among them
        are the caller's to evict."""
        k = min(n, self.num_blocks - fresh)
        more = n - k
        if not more:
            return self.ids(fresh, fresh + k)
        queue = self._queue
        end = head + more
        if end > len(queue):
            if end > len(queue) + len(released):
                return None
            run = queue[head:]  # (empty where the head is past the queue)
            run.extend(released[max(head - len(queue), 0) : end - len(queue)])
        else:
            run = queue[head:end]
        if self._stale and not self._stale.keys().isdisjoint(run):
            return None
        if not k:  # every id handed out (a pool in use): the queue's front alone
            return run
        out = self.ids(fresh, fresh + k)
        out.extend(run)
        return out

    def front_released(
        self, fresh: int, head: int, n: int, released: Sequence[int], own: Sequence[int]
    ) -> array[int] | None:
        """`front` past the queue's entries, where they and the fresh ids are too few: the
        blocks released before the take follow them, ``released`` (a batch's earlier
        requests' evictions, in queue order) then ``own`` (the taking group's own, in queue
        order), as vLLM's ``remove_skipped_blocks`` queues them before its allocation. Only
        the entries taken are read (a batch's ``released`` grows with it: no copy of it per
        take). None where the queue's entries suffice (`front` takes those), where all are
        too few, or where one taken is stale or cached (its queue entry or its content the
        core's to plan). Changes nothing."""
        k = min(n, self.num_blocks - fresh)
        queue = self._queue
        end, size = head + n - k, len(queue)
        lo, hi, cut = max(head - size, 0), end - size, len(released)
        if hi <= 0 or hi > cut + len(own):
            return None
        run = self.ids(fresh, fresh + k) if k else array("i")
        if head < size:
            run.extend(queue[head:])
        rest = len(run)
        run.extend(released[lo:hi] if hi <= cut else released[lo:])
        if hi > cut:
            run.extend(own[max(lo - cut, 0) : hi - cut])
        if self._stale and not self._stale.keys().isdisjoint(run[k:]):
            return None
        if self._cached and not self._cached.keys().isdisjoint(run[rest:]):
            return None
        return run

    def past_stale(self, head: int, ops: Ops) -> tuple[int, int] | None:
        """The queue's first live entry at ``head`` or after, as a plan that takes one block
        sees it (its stale entries there skipped, as `PoolPlan.take` skips them: a prefix
        hit took their blocks back out of the queue): ``(block, index)``, the stale counts
        the skips spend added to ``ops``. None where the queue holds no live entry there
        (``ops`` unchanged). Changes nothing."""
        got = self.front_past_stale(self.num_blocks, head, 1, ops)
        if got is None:
            return None
        run, after = got
        return run[0], after - 1

    def front_past_stale(
        self, fresh: int, head: int, n: int, ops: Ops
    ) -> tuple[array[int], int] | None:
        """`front` where stale entries lie among the queue's front (a prefix hit took their
        blocks back out of it): the fresh ids, then the queue's next live entries from
        ``head``, its stale ones skipped as `past_stale` skips them (the stale counts the
        skips spend added to ``ops``), and the index after the last taken. None where fewer
        are live there (``ops`` unchanged). For a pool of one group (one take a call).
        Changes nothing."""
        k = min(n, self.num_blocks - fresh)
        more = n - k
        run = self.ids(fresh, fresh + k)
        queue, stale = self._queue, self._stale
        left: dict[int, int] = {}
        taken: list[int] = []
        index, end = head, len(queue)
        while len(taken) < more:
            if index == end:
                return None
            block = queue[index]
            index += 1
            count = left.get(block, stale.get(block, 0))
            if count:
                left[block] = count - 1
            else:
                taken.append(block)
        for gone, count in left.items():
            ops.append((setitem, stale, gone, count) if count else (stale.pop, gone, None))
        if left:
            ops.append((setattr, self, "_num_stale", self._num_stale - (index - head - more)))
        run.extend(taken)
        return run, index

    # -- changing, one atomic change at a time ---------------------------------------------

    def allocate_n(self, n: int) -> list[int]:
        """Take ``n`` cache blocks from the front of the free queue (a cached block taken this
        way is evicted: its hash leaves the prefix cache).

        Raises:
            AllocationError: fewer than ``n`` blocks are free; the pool is unchanged.
        """
        plan = PoolPlan(self)
        taken = plan.take(n)
        self._apply(plan)
        return list(taken)

    def free(self, blocks: Iterable[int]) -> None:
        """Drop one reference to each block, in the order given (any iterable: it is read
        once, whole, before anything changes); a block whose count reaches 0 goes to the
        front of the free queue, after the ids never handed out (`PoolPlan.release_front`:
        these blocks as a run, ahead of those freed before), or, if cached, to its back with
        its hash.

        Freeing the null block, a block not held, or a block more times than it is held, is a
        bug in the caller (`AssertionError`); the pool is then unchanged.
        """
        given = tuple(blocks)
        free = set(self.free_queue())
        times: dict[int, int] = {}
        for block in given:
            times[block] = times.get(block, 0) + 1
            held = 0 if block in free or not 0 < block < self._fresh else 1
            if times[block] > self._shared.get(block, held):
                raise self.not_held(block)
        plan = PoolPlan(self)
        plan.release_front(given)
        self._apply(plan)

    def touch(self, block: int) -> bool:
        """Add a reference to a cached block (`PoolPlan.touch`), now."""
        plan = PoolPlan(self)
        shared = plan.touch(block)
        self._apply(plan)
        return shared

    def register(self, block: int, cache: CacheMap, key: bytes) -> None:
        """Record that a held block holds the content ``key`` fingerprints, in ``cache``."""
        plan = PoolPlan(self)
        plan.register(block, cache, key)
        self._apply(plan)

    def _apply(self, plan: PoolPlan) -> None:
        ops: Ops = []
        plan.emit(ops)
        commit(ops_of(ops))

    def front_ops(self, ops: Ops, blocks: Sequence[int], head: int, size: int) -> int:
        """Add to ``ops`` the store that puts ``blocks`` (freed, none cached, none with a
        stale entry) at the queue's front, its live part starting at ``head`` when the store
        runs and the queue then ``size`` long (the first of them taken first, after the ids
        never handed out); return the new head (the caller stores it). Over the entries
        already taken where there are enough (no copy of the queue); else those are replaced
        by ``front_room`` dead entries (zeros) and the blocks, so that the next ones fit
        over them (a copy of the queue every eighth of it, not every end)."""
        n = len(blocks)
        if head >= n:
            ops.append((setitem, self._queue, slice(head - n, head), array("i", blocks)))
            return head - n
        room = front_room(size, head)
        put = array("i", bytes(4 * room))
        put.extend(blocks)
        ops.append((setitem, self._queue, slice(0, head), put))
        return room

    def compaction_due(self) -> bool:
        """Whether the queue's stale entries are half of it (and `_COMPACT_AFTER` at least):
        `compact_ops` drops them."""
        live = len(self._queue) - self._head
        return self._num_stale >= _COMPACT_AFTER and 2 * self._num_stale >= live

    def compact_ops(self, ops: Ops) -> None:
        """Add to ``ops`` what drops the queue's stale entries, once they are half of it (order
        kept): no observable change, so a call may commit it on its own before planning."""
        if not self.compaction_due():
            return
        stale, kept = dict(self._stale), array("i")
        for block in self._queue[self._head :]:
            left = stale.get(block)
            if left:
                stale[block] = left - 1
                continue
            kept.append(block)
        assert not any(stale.values()), "stale entries outside the queue"
        ops.append((setitem, self._queue, slice(None), kept))
        ops.append((setattr, self, "_head", 0))
        ops.append((self._stale.clear,))
        ops.append((setattr, self, "_num_stale", 0))

    def reset_ops(self, ops: Ops) -> bool:
        """Add to ``ops`` what forgets every registered prefix, if no block is held (vLLM's
        ``reset_prefix_cache``): every block is then free and none cached, so the pool is as
        built (`PoolPlan._emit_built`: ids from 1 again, no queue), where vLLM's queue keeps
        its order (no block holds content: only the ids taken next differ).

        Returns:
            Whether it can (``False``: some block is held; nothing added).
        """
        if self._used:
            return False
        for cache_map in self._maps:  # every block it files is this pool's, and cached
            ops.append((cache_map.clear,))
        ops.append(flag_op(self._free_cached, list(self._cached), 0))  # (every one free)
        ops.append((self._cached.clear,))
        self.idle_ops(ops, 1, array("i"))
        return True

    def idle_ops(self, ops: Ops, fresh: int, queue: array[int]) -> None:
        """Add to ``ops`` what leaves this pool idle (no block held, shared or stale; the
        table of fresh ids dropped), ``fresh`` its lowest id never handed out and ``queue``
        its queue (`PoolPlan._emit_built`, `PoolPlan._emit_idle`, `reset_ops`)."""
        ops.append((setattr, self, "_fresh", fresh))
        ops.append((setitem, self._queue, slice(None), queue))
        ops.append((setattr, self, "_idle", len(queue)))
        ops.append((self._iota.__delitem__, slice(None)))
        # Emptied with ``clear``: a dict keeps its table's size after pops.
        ops += [(self._shared.clear,), (self._stale.clear,)]
        for name in ("_head", "_num_stale", "_used"):
            ops.append((setattr, self, name, 0))

    # -- errors --------------------------------------------------------------------------------

    def short(self, n: int, free: int) -> AllocationError:
        """The error of an allocation of ``n`` blocks with ``free`` free."""
        return AllocationError(
            f"cannot take {n} cache_block from pool {self.name!r}: {free} free",
            group=self.name,
            needed=CacheBlocks(n),
            free=CacheBlocks(free),
        )

    def not_held(self, block: int) -> AssertionError:
        """The error of freeing a block not held (a caller's bug)."""
        what = "the null block is never freed" if block == NULL_BLOCK else "not held"
        return AssertionError(f"block {block} of pool {self.name!r} freed: {what}")


class PoolPlan:
    """The changes one call plans in one pool, read through as they accumulate.

    Every question (`count`, `num_free`, what the front of the queue holds) is answered as if
    the planned changes were made; nothing in the pool changes until `emit`'s operations are
    committed. The pool's callers release only blocks they hold (a table's), so a block the
    plan does not know of is taken as held once, unless shared or free and cached.
    """

    __slots__ = (
        "appended",
        "cache_add",
        "cached_free",
        "evicted",
        "fresh",
        "front",
        "head",
        "last",
        "lists",
        "num_stale",
        "pool",
        "ref",
        "stale",
        "taken_appended",
        "taken_front",
        "used",
    )

    def __init__(self, pool: BlockPool) -> None:
        self.pool = pool
        self.fresh = pool._fresh
        self.head = pool._head
        self.num_stale = pool._num_stale
        self.used = pool._used
        self.ref: dict[int, int] = {}  # planned reference counts of blocks the plan changed
        self.stale: dict[int, int] = {}  # planned stale counts
        self.cached_free: dict[int, bool] = {}  # planned: a cached block free (True) or not
        self.appended: list[int] | array[int] = []  # freed by the plan, behind the queue
        self.taken_appended = 0  # of which an allocation of the plan took these first
        # Given back by a rollback (`release_front`), at the queue's front: taken first.
        self.front: list[int] = []
        self.taken_front = 0
        self.evicted: dict[int, tuple[CacheMap, bytes]] = {}  # cached blocks taken
        self.cache_add: dict[int, tuple[CacheMap, bytes]] = {}  # registered by the plan
        # Planned block lists of cache maps: (id(map), key) -> (map, key, blocks).
        self.lists: dict[tuple[int, bytes], tuple[CacheMap, bytes, list[int] | HeldBlocks]] = {}
        # The call ends the last request: the pool, if then idle, is as built (`emit`).
        self.last = False

    @property
    def num_free(self) -> int:
        """Blocks free once the planned changes are made."""
        pool = self.pool
        queued = len(pool._queue) - self.head + len(self.appended) - self.taken_appended
        queued += len(self.front) - self.taken_front
        return pool.num_blocks - self.fresh + queued - self.num_stale

    def count(self, block: int) -> int:
        """The planned reference count of a block (one the plan's caller holds, or knows)."""
        planned = self.ref.get(block)
        if planned is not None:
            return planned
        pool = self.pool
        shared = pool._shared.get(block)
        if shared is not None:
            return shared
        if block >= self.fresh or block == NULL_BLOCK:
            return 0
        if pool._cached and pool._free_cached[block] and self.cached_free.get(block, True):
            return 0
        return 1

    def count_shared(self, blocks: Sequence[int]) -> int:
        """How many of ``blocks`` (a table's: held, each once) have a planned count above 1."""
        if not self.ref:  # as the pool has them: a set intersection, in C
            return len(self.pool._shared.keys() & blocks)
        count = self.count
        return sum(1 for b in blocks if count(b) > 1)

    def cached(self, block: int) -> tuple[CacheMap, bytes] | None:
        """The planned cache entry of a block: its map and key."""
        added = self.cache_add.get(block)
        if added is not None:
            return added
        if block in self.evicted:
            return None
        pool = self.pool
        key = pool._cached.get(block)
        return None if key is None else (pool.map_of(block, key), key)

    def _stale_count(self, block: int) -> int:
        planned = self.stale.get(block)
        return self.pool._stale.get(block, 0) if planned is None else planned

    def _blocks_of(self, cache: CacheMap, key: bytes) -> list[int] | HeldBlocks:
        planned = self.lists.get((id(cache), key))
        if planned is not None:
            return planned[2]
        blocks = HeldBlocks(cache.get(key))
        self.lists[id(cache), key] = (cache, key, blocks)
        return blocks

    def take(self, n: int) -> Sequence[int]:
        """Take ``n`` blocks from the front of the queue: ids never handed out first, then the
        freed ones in order, those a rollback gave back first (`release_front`; a stale entry
        is skipped, a cached block evicted).

        Raises:
            AllocationError: fewer than ``n`` blocks are free (the plan is unchanged).
        """
        assert n >= 0, n
        free = self.num_free
        if n > free:
            raise self.pool.short(n, free)
        pool = self.pool
        start = self.fresh
        fresh = min(n, pool.num_blocks - start)
        taken: array[int] | list[int] = pool.ids(start, start + fresh)
        self.fresh = start + fresh
        queue, appended = pool._queue, self.appended
        more = n - fresh
        self.used += n
        given, at = self.front, self.taken_front
        if more and at < len(given):  # a rollback's blocks (none held, none cached)
            back = given[at : at + more]
            self.taken_front = at + len(back)
            taken = [*taken, *back]
            self.ref.update(dict.fromkeys(back, 1))
            more -= len(back)
            fresh += len(back)
            if not more:
                return taken
        if (
            more
            and not self.num_stale
            and not pool._cached
            and not self.cache_add
            and self.head + more <= len(queue)
        ):
            # No stale entry and no cached block anywhere: the queue's front, as a slice.
            front = queue[self.head : self.head + more]
            self.head += more
            if not fresh:
                return front
            taken.extend(front)
            return taken
        ref = self.ref
        got = fresh
        while got < n:
            if self.head < len(queue):
                block = queue[self.head]
                self.head += 1
            else:
                block = appended[self.taken_appended]
                self.taken_appended += 1
            left = self._stale_count(block)
            if left:
                self.stale[block] = left - 1
                self.num_stale -= 1
                continue
            entry = self.cached(block)
            if entry is not None:
                self._blocks_of(*entry).remove(block)
                if block in self.cache_add:
                    del self.cache_add[block]
                else:
                    self.evicted[block] = entry
                self.cached_free[block] = False
            if block in ref:
                ref[block] = 1
            taken.append(block)
            got += 1
        return taken

    def release(self, blocks: Sequence[int]) -> None:
        """Drop one reference to each block (held: a table's), in order; a block whose count
        reaches 0 goes to the back of the queue (a cached one keeps its content there).

        Raises:
            AssertionError: the null block, or a block this plan knows is not held.
        """
        pool = self.pool
        if not pool._shared and not self.ref and not pool._cached and not self.cache_add:
            # Nothing shared or cached: every block goes back, in order, as one slice.
            if self.appended:
                self.appended = array("i", self.appended)
                self.appended.extend(blocks)
            else:
                self.appended = blocks if isinstance(blocks, array) else array("i", blocks)
            self.used -= len(blocks)
            return
        if self._release_run(blocks):
            return
        self._release_each(blocks)

    def _release_run(self, blocks: Sequence[int], front: bool = False) -> bool:
        """`release` of held blocks none of which the plan knows (a finished request's table:
        blocks the prefix cache registered, a few a prefix hit shares), in a few passes over
        them in C: what the per-block loop (`_release_each`) does, with the same result; with
        ``front``, `release_front`'s (those without content or stale entry to the front).
        Returns False, having changed nothing, for any other blocks (one the plan touched or
        released, a free one, a block twice)."""
        pool, ref = self.pool, self.ref
        given = set(blocks)
        if (
            not given
            or len(given) != len(blocks)
            or not ref.keys().isdisjoint(given)
            or min(given) <= NULL_BLOCK
            or max(given) >= self.fresh
            or (pool._cached and any(map(pool._free_cached.__getitem__, given)))
        ):
            return False
        shared = pool._shared.keys() & given
        if shared:  # held by another table too: one reference less, nothing freed
            counts = pool._shared
            ref.update({b: counts[b] - 1 for b in shared})
            blocks = list(filterfalse(shared.__contains__, blocks))
            given -= shared
        ref.update(dict.fromkeys(blocks, 0))
        self.used -= len(blocks)
        # Registered ones keep their content in the queue, the plan's registrations included
        # (a block the plan evicted was free and cached: refused above).
        cached = pool._cached.keys() & given
        if self.cache_add:
            cached |= self.cache_add.keys() & given
        self.cached_free.update(dict.fromkeys(cached, True))
        if front:  # (a block with a stale entry goes behind it, as `release` sends it)
            back = cached | (pool._stale.keys() & given) if pool._stale else cached
            ahead = list(filterfalse(back.__contains__, blocks)) if back else list(blocks)
            blocks = list(filter(back.__contains__, blocks)) if back else []
            self.front = [*ahead, *self.front[self.taken_front :]]
            self.taken_front = 0
        if isinstance(self.appended, list):
            self.appended.extend(blocks)
        else:  # the plan's own copy: the first release may have kept the caller's array
            self.appended = array("i", self.appended)
            self.appended.extend(blocks)
        return True

    def _release_each(self, blocks: Sequence[int]) -> None:
        """`release`, one block at a time (any blocks: it raises for one not held)."""
        pool, ref = self.pool, self.ref
        for block in blocks:
            count = self.count(block)
            if count < 1:
                raise pool.not_held(block)
            ref[block] = count - 1
            if count == 1:
                if not isinstance(self.appended, list):
                    self.appended = self.appended.tolist()
                self.appended.append(block)
                self.used -= 1
                if self.cached(block) is not None:
                    self.cached_free[block] = True

    def release_front(self, blocks: Sequence[int]) -> None:
        """`release` of the blocks one table gives back (held, in the order they go back: a
        finished request's, a rollback's): each whose count reaches 0 and whose content is not
        registered goes to the queue's *front*, after the ids never handed out and ahead of
        every freed block, the first of them taken first, so that the next takes get blocks
        no prefix can hit before any cached block is evicted (vLLM 0.33's
        ``BlockPool.free_blocks`` puts a block without a hash at its queue's front, and keeps
        the blocks of rejected drafts with the request); a cached one goes to the back with
        its content (least recently used first), one another table holds loses a reference.
        A later call's blocks go ahead of an earlier one's, as when each is committed.

        Raises:
            AssertionError: the null block, or a block this plan knows is not held.
        """
        if self._release_run(blocks, front=True):
            return
        out = []
        for block in blocks:
            if self.count(block) != 1 or self.cached(block) is not None or self._stale_count(
                block
            ):
                self._release_each((block,))
                continue
            self.ref[block] = 0
            out.append(block)
        self.used -= len(out)
        self.front = [*out, *self.front[self.taken_front :]]
        self.taken_front = 0

    def touch(self, block: int) -> bool:
        """Add a reference to a block a prefix hit found: a held one becomes shared, a free
        cached one is taken back out of the queue (its entry there turns stale).

        Returns:
            Whether the block was held before (then the hit shares it).
        """
        count = self.count(block)
        self.ref[block] = count + 1
        if count:
            return True
        assert self.cached(block) is not None, f"block {block} of pool {self.pool.name!r}"
        self.stale[block] = self._stale_count(block) + 1
        self.num_stale += 1
        self.used += 1
        self.cached_free[block] = False
        return False

    def register(self, block: int, cache: CacheMap, key: bytes) -> None:
        """Record that a held block holds the content ``key`` fingerprints, in ``cache`` (one
        group's map, which the pool adopts (`BlockPool.map_of`) if new to it)."""
        assert self.count(block) >= 1 and self.cached(block) is None, block
        block = self.pool._ids[block]  # the id's own object (`BlockPool.add_map`)
        self.cache_add[block] = (cache, key)
        self._blocks_of(cache, key).append(block)

    def register_run(self, blocks: Sequence[int], cache: CacheMap, keys: Sequence[bytes]) -> None:
        """`register` of each of ``blocks`` (held ones) with its key, in order: in passes in
        C where the keys are new (none twice, none in ``cache`` or planned there) and no block
        is cached, or its entry is evicted by the plan (a prompt's blocks registered as its
        chunk fills them: hundreds at a time, each a few microseconds one by one); else one
        by one."""
        cid, lists, cached = id(cache), self.lists, self.pool._cached
        now = cached.keys() & blocks if cached else None
        if (
            len(set(keys)) != len(keys)
            or not cache.keys().isdisjoint(keys)
            or (lists and not lists.keys().isdisjoint([(cid, key) for key in keys]))
            or (now and not self.evicted.keys() >= now)
            or not self.cache_add.keys().isdisjoint(blocks)
        ):
            for block, key in zip(blocks, keys, strict=True):
                self.register(block, cache, key)
            return
        pairs = list(zip(map(self.pool._ids.__getitem__, blocks), keys, strict=True))
        self.cache_add.update({block: (cache, key) for block, key in pairs})
        lists.update({(cid, key): (cache, key, [block]) for block, key in pairs})

    def emit(self, ops: Ops) -> None:
        """Add to ``ops`` the operations that make the planned changes."""
        pool = self.pool
        if self.last and not self.used and self.fresh > 1:
            if not self.cache_add and len(self.evicted) == len(pool._cached):
                self._emit_built(ops)
                return
            if pool._cached and pool.idle_due():
                self._emit_idle(ops)
                return
        if self.fresh != pool._fresh:
            ops.append((setattr, pool, "_fresh", self.fresh))
        shared = pool._shared
        for block, count in self.ref.items():
            if count >= 2:
                ops.append((setitem, shared, block, count))
            elif block in shared:
                ops.append((shared.pop, block, None))
        queue = pool._queue
        head = self.head  # the whole old queue when the plan took freed blocks of its own
        back = self.appended[self.taken_appended :] if self.taken_appended else self.appended
        if len(back):
            ops.append((queue.extend, back))
        total = size = len(queue) + len(back)
        # The entries taken are dropped once they are half the queue, or once every block is
        # free (nothing taken is kept after the last request ends).
        if head and (head >= len(queue) or 2 * head >= total or not self.used):
            ops.append((queue.__delitem__, slice(0, head)))
            size -= head
            head = 0
        front = self.front[self.taken_front :]
        if front:  # blocks without content, ahead of the queue's first live entry
            head = pool.front_ops(ops, front, head, size)
        if head != pool._head:
            ops.append((setattr, pool, "_head", head))
        stale = pool._stale
        for block, left in self.stale.items():
            ops.append((setitem, stale, block, left) if left else (stale.pop, block, None))
        for name, value in (("_num_stale", self.num_stale), ("_used", self.used)):
            if getattr(pool, name) != value:
                ops.append((setattr, pool, name, value))
        if not self.used and len(pool._iota):
            ops.append((pool._iota.__delitem__, slice(None)))  # every block free: not kept
        self._emit_cache(ops)

    def _emit_cache(self, ops: Ops) -> None:
        """Add the planned changes of the prefix cache to ``ops``: entries evicted and added
        (maps new to the pool adopted), free cached blocks' flags, the maps' block lists."""
        pool = self.pool
        cached, flags = pool._cached, pool._free_cached
        for block in self.evicted:
            ops.append((cached.pop, block, None))
        added = self.cache_add
        if added:
            ops.append((cached.update, {block: key for block, (_, key) in added.items()}))
            maps = pool._maps
            new = [
                cache
                for cache in {id(c): c for c, _ in added.values()}.values()
                if not any(m is cache for m in maps)
            ]
            if new:
                ops += pool.adopt_ops(new)
        for block, free in self.cached_free.items():
            ops.append((setitem, flags, block, 1 if free else 0))
        self._emit_lists(ops)

    def _emit_lists(self, ops: Ops) -> None:
        """Add the planned entries of the cache maps to ``ops``."""
        lists_ops(ops, self.lists)

    def _emit_idle(self, ops: Ops) -> None:
        """`emit` of a plan that ends the last request (``last``) and leaves every block free,
        some of them cached: the order of the blocks without content is forgotten, as
        `_emit_built` forgets it where none is cached, so that an idle pool keeps its cache
        and no more. The ids above the highest cached block are never handed out again (the
        queue no longer lists them); those below it without content are queued in id order,
        then the cached blocks in their order (least recently used first: each block's live
        entry is its last, its stale ones, taken back by prefix hits, lie ahead of it). What
        an allocation evicts is unchanged (every block without content is still taken
        before any cached one: a window's dropped blocks that were queued behind cached
        ones now go ahead of them, as vLLM 0.33 queues them); only the ids taken differ."""
        pool = self.pool
        kept = (pool._cached.keys() - self.evicted.keys()) | self.cache_add.keys()
        entries = pool._queue[self.head :]
        entries.extend(self.appended[self.taken_appended :])
        lru = list(dict.fromkeys(reversed(list(filter(kept.__contains__, entries)))))
        assert len(lru) == len(kept), "a cached block outside the queue of an idle pool"
        top = max(kept) + 1
        queue = array("i", filterfalse(kept.__contains__, range(1, top)))
        queue.extend(reversed(lru))
        pool.idle_ops(ops, top, queue)
        self._emit_cache(ops)

    def _emit_built(self, ops: Ops) -> None:
        """`emit` of a plan that ends the last request (``last``) and leaves every block free
        and none cached (none registered: a registered block is held): the pool as built,
        its ids handed out from 1 again, so that nothing of the ids it handed out stays once
        every request is freed. Which free block an allocation takes changes nothing but the
        ids (none holds content), and the order stays a function of the calls alone. Only
        the end of the last request does it (never a step or a rollback that frees a pool's
        last block while requests remain), so every path of a call leaves the same pool."""
        pool = self.pool
        pool.idle_ops(ops, 1, array("i"))
        if pool._cached:  # every one evicted by the plan: none free and cached
            ops.append(flag_op(pool._free_cached, list(pool._cached), 0))
        ops.append((pool._cached.clear,))  # (its table's size, too)
        self._emit_lists(ops)  # the cached blocks this plan took
