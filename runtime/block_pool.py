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

from array import array
from collections.abc import Iterable, Sequence
from operator import setitem
from typing import Final

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

#: A reference count stored in the byte map at this value or above lives in the pool's
#: overflow map instead (blocks a prefix shares among 255 requests or more).
_SATURATED: Final = 255

#: A group's map of cached content: block hash -> the blocks holding that content, oldest first.
CacheMap = dict[bytes, list[int]]


class BlockPool:
    """A fixed number of cache blocks with reference counts and a first-in first-out free queue.

    A block is free (in the queue, reference count 0) or held by one or more block tables; the
    null block is held for ever. A block is held by more than one table only when the prefix
    cache shares it (`PoolPlan.touch`): the reference count is the number of tables holding it.
    Freeing a block that is not held, which would hand one block to two requests, is an
    `AssertionError` before anything changes.

    Why the queue order is kept: a freed block's contents are dead unless the prefix cache
    registered them, so any order is correct; the order still decides *which* ids the next
    allocation gets, and FIFO makes them a function of the calls alone: replays and tests see
    the same ids. So a call that fails leaves the order exactly as it was, like every other
    piece of state. For the prefix cache the same order is least-recently-used eviction: a
    freed cached block keeps its content and its hash while it waits in the queue, is evicted
    (its hash forgotten) only when an allocation takes it from the front, and is taken back
    out of the queue if a prefix hit needs it first. This is vLLM's order before 2026
    (``FreeKVCacheBlockQueue``: append on free, pop from the front); vLLM 2026 puts never-cached
    blocks at the front instead, kvunits keeps one FIFO order for all.

    Memory follows the ids handed out, never the pool's size: the queue is the ids never handed
    out (a range, ``_fresh .. num_blocks - 1``, always at its front, since every freed block
    goes to the back) followed by the freed ones, 4 bytes each (``array('i')``); a block's
    reference count is one byte of a map indexed by id, grown as ids are handed out. A pool of
    2**31 blocks costs what a pool of 4 does until its blocks are used. A block a prefix hit
    takes back out of the queue leaves a stale entry there (removing it would cost a scan of
    the queue): it is skipped when it reaches the front, and `compact` drops stale entries
    once they are half the queue.

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
        "_fresh",
        "_head",
        "_num_shared",
        "_num_stale",
        "_over",
        "_queue",
        "_ref",
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
        self._head = 0
        self._ref = bytearray(1)  # reference count per id below _fresh (the null block's unused)
        self._over: dict[int, int] = {}  # counts of _SATURATED or more
        self._used = 0  # blocks held (count >= 1), the null block not counted
        self._num_shared = 0  # blocks held by more than one table
        # Stale queue entries per block (taken back by a touch), and their total.
        self._stale: dict[int, int] = {}
        self._num_stale = 0
        # Blocks whose content the prefix cache registered: block -> (its map, its key).
        self._cached: dict[int, tuple[CacheMap, bytes]] = {}

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
        return sum(1 for b in self._cached if not self.ref_count(b))

    @property
    def has_shared(self) -> bool:
        """Whether any block is held by more than one table."""
        return self._num_shared > 0

    def ref_count(self, block: int) -> int:
        """The reference count of one block: the tables holding it (0: free; the null block:
        1)."""
        if block == NULL_BLOCK:
            return 1
        if not 0 < block < self._fresh:
            return 0
        count = self._ref[block]
        return self._over[block] if count == _SATURATED else count

    def count_shared(self, blocks: Iterable[int]) -> int:
        """How many of ``blocks`` more than one table holds (freeing them frees nothing)."""
        if not self._num_shared:
            return 0
        return sum(1 for b in blocks if self.ref_count(b) > 1)

    def held_blocks(self) -> list[int]:
        """Every held block, in id order (for inspection: it scans the ids handed out)."""
        ref = self._ref
        return [b for b in range(1, self._fresh) if ref[b]]

    def is_cached(self, block: int) -> bool:
        """Whether the prefix cache registered the block's content (held or free)."""
        return block in self._cached

    def cached_key(self, block: int) -> bytes | None:
        """The key a cached block is registered under (None: not cached)."""
        entry = self._cached.get(block)
        return None if entry is None else entry[1]

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
        return taken

    def free(self, blocks: Iterable[int]) -> None:
        """Drop one reference to each block, in the order given (any iterable: it is read
        once, whole, before anything changes); a block whose count reaches 0 goes to the back
        of the free queue (a cached one keeps its hash there).

        Freeing the null block, or a block more times than it is held, is a bug in the caller
        (`AssertionError`); the pool is then unchanged.
        """
        plan = PoolPlan(self)
        plan.release(tuple(blocks))
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

    def compact_ops(self, ops: Ops) -> None:
        """Add to ``ops`` what drops the queue's stale entries, once they are half of it (order
        kept): no observable change, so a call may commit it on its own before planning."""
        live = len(self._queue) - self._head
        if self._num_stale < _COMPACT_AFTER or 2 * self._num_stale < live:
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
        ``reset_prefix_cache``); the queue's order is unchanged.

        Returns:
            Whether it can (``False``: some block is held; nothing added).
        """
        if self._used:
            return False
        emptied = {(id(cache), key): (cache, key) for cache, key in self._cached.values()}
        for cache, key in emptied.values():
            ops.append((cache.pop, key, None))
        ops.append((self._cached.clear,))
        return True

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
    committed.
    """

    __slots__ = (
        "appended",
        "cache_add",
        "evicted",
        "fresh",
        "head",
        "lists",
        "num_shared",
        "num_stale",
        "pool",
        "ref",
        "stale",
        "taken_appended",
        "used",
    )

    def __init__(self, pool: BlockPool) -> None:
        self.pool = pool
        self.fresh = pool._fresh
        self.head = pool._head
        self.num_stale = pool._num_stale
        self.used = pool._used
        self.num_shared = pool._num_shared
        self.ref: dict[int, int] = {}  # planned reference counts
        self.stale: dict[int, int] = {}  # planned stale counts
        self.appended: list[int] = []  # freed by the plan, behind the queue, in order
        self.taken_appended = 0  # of which an allocation of the plan took these first
        self.evicted: dict[int, tuple[CacheMap, bytes]] = {}  # cached blocks taken
        self.cache_add: dict[int, tuple[CacheMap, bytes]] = {}  # registered by the plan
        # Planned block lists of cache maps: (id(map), key) -> (map, key, blocks).
        self.lists: dict[tuple[int, bytes], tuple[CacheMap, bytes, list[int]]] = {}

    @property
    def num_free(self) -> int:
        """Blocks free once the planned changes are made."""
        pool = self.pool
        queued = len(pool._queue) - self.head + len(self.appended) - self.taken_appended
        return pool.num_blocks - self.fresh + queued - self.num_stale

    def count(self, block: int) -> int:
        """The planned reference count of a block."""
        planned = self.ref.get(block)
        if planned is not None:
            return planned
        if self.pool._fresh <= block < self.fresh:
            return 1  # handed out fresh by this plan
        return self.pool.ref_count(block)

    def cached(self, block: int) -> tuple[CacheMap, bytes] | None:
        """The planned cache entry of a block."""
        added = self.cache_add.get(block)
        if added is not None:
            return added
        if block in self.evicted:
            return None
        return self.pool._cached.get(block)

    def _stale_count(self, block: int) -> int:
        planned = self.stale.get(block)
        return self.pool._stale.get(block, 0) if planned is None else planned

    def _blocks_of(self, cache: CacheMap, key: bytes) -> list[int]:
        planned = self.lists.get((id(cache), key))
        if planned is not None:
            return planned[2]
        blocks = list(cache.get(key, ()))
        self.lists[id(cache), key] = (cache, key, blocks)
        return blocks

    def take(self, n: int) -> list[int]:
        """Take ``n`` blocks from the front of the queue: ids never handed out first, then the
        freed ones in order (a stale entry is skipped, a cached block evicted).

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
        taken = list(range(start, start + fresh))
        self.fresh = start + fresh
        queue, appended = pool._queue, self.appended
        ref = self.ref
        while len(taken) < n:
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
            ref[block] = 1
            taken.append(block)
        self.used += n
        return taken

    def release(self, blocks: Sequence[int]) -> None:
        """Drop one reference to each block, in order; a block whose count reaches 0 goes to
        the back of the queue.

        Raises:
            AssertionError: the null block, or a block not held (a caller's bug).
        """
        ref = self.ref
        for block in blocks:
            count = self.count(block) if block != NULL_BLOCK else 0
            if count < 1:
                raise self.pool.not_held(block)
            ref[block] = count - 1
            if count == 1:
                self.appended.append(block)
                self.used -= 1
            elif count == 2:
                self.num_shared -= 1

    def touch(self, block: int) -> bool:
        """Add a reference to a block a prefix hit found: a held one becomes shared, a free
        cached one is taken back out of the queue (its entry there turns stale).

        Returns:
            Whether the block was held before (then the hit shares it).
        """
        count = self.count(block)
        self.ref[block] = count + 1
        if count:
            if count == 1:
                self.num_shared += 1
            return True
        assert self.cached(block) is not None, f"block {block} of pool {self.pool.name!r}"
        self.stale[block] = self._stale_count(block) + 1
        self.num_stale += 1
        self.used += 1
        return False

    def register(self, block: int, cache: CacheMap, key: bytes) -> None:
        """Record that a held block holds the content ``key`` fingerprints, in ``cache`` (one
        group's map: key -> the blocks holding it, oldest first)."""
        assert self.count(block) >= 1 and self.cached(block) is None, block
        self.cache_add[block] = (cache, key)
        self._blocks_of(cache, key).append(block)

    def emit(self, ops: Ops) -> None:
        """Add to ``ops`` the operations that make the planned changes."""
        pool = self.pool
        grown = self.fresh - pool._fresh
        if grown:
            ops.append((pool._ref.extend, b"\x01" * grown))
            ops.append((setattr, pool, "_fresh", self.fresh))
        refmap, over = pool._ref, pool._over
        for block, count in self.ref.items():
            if count >= _SATURATED:
                ops.append((setitem, refmap, block, _SATURATED))
                ops.append((setitem, over, block, count))
            else:
                if block < pool._fresh and refmap[block] == _SATURATED:
                    ops.append((over.pop, block, None))
                ops.append((setitem, refmap, block, count))
        queue = pool._queue
        head = self.head  # the whole old queue when the plan took freed blocks of its own
        back = self.appended[self.taken_appended :]
        if back:
            ops.append((queue.extend, back))
        total = len(queue) + len(back)
        if head and (head >= len(queue) or 2 * head >= total):
            ops.append((queue.__delitem__, slice(0, head)))
            head = 0
        if head != pool._head:
            ops.append((setattr, pool, "_head", head))
        stale = pool._stale
        for block, left in self.stale.items():
            ops.append((setitem, stale, block, left) if left else (stale.pop, block, None))
        for name, value in (
            ("_num_stale", self.num_stale),
            ("_used", self.used),
            ("_num_shared", self.num_shared),
        ):
            if getattr(pool, name) != value:
                ops.append((setattr, pool, name, value))
        cached = pool._cached
        for block in self.evicted:
            ops.append((cached.pop, block, None))
        for block, entry in self.cache_add.items():
            ops.append((setitem, cached, block, entry))
        for cache, key, blocks in self.lists.values():
            ops.append((setitem, cache, key, blocks) if blocks else (cache.pop, key, None))
