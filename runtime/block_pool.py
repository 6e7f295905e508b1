"""The block pool: a fixed set of cache blocks, their reference counts and their free queue.

This is inner core: it works on plain ints (block ids; counts in cache blocks) and is driven by
the coordinator, which checks units once at its typed entry. Block 0 is the null block: it is
never handed out, never freed, and stands in block tables for entries a manager evicted (a
sliding window's tail, a finished chunk, the blocks a prefix hit skips), so that a table keeps
its positions. A pool serves one layer group, or every group of a coordinator whose groups
share one pool (their pages are of one size, see `kvunits.runtime.shared_pool`).

Not thread-safe: the coordinator that owns the pool is driven by one scheduler thread.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Final

from kvunits.contracts import CacheBlocks, SpecError
from kvunits.contracts.errors import AllocationError

#: The id of the null block in every pool.
NULL_BLOCK: Final = 0

#: The most cache blocks a pool may have: block ids must fit the int32 block tables the kernels
#: may be given (ids 0 .. 2**31 - 1).
MAX_POOL_BLOCKS: Final = 2**31

#: Stale queue entries (of cached blocks a prefix hit took back) tolerated before `compact`
#: rebuilds the queue without them: at least this many, and half the queue.
_COMPACT_AFTER: Final = 64


class BlockPool:
    """A fixed number of cache blocks with reference counts and a first-in first-out free queue.

    A block is free (in the queue, reference count 0) or held by one or more block tables; the
    null block is held for ever. A block is held by more than one table only when the prefix
    cache shares it (`touch`): the reference count is the number of tables holding it. Freeing
    a block that is not held, which would hand one block to two requests, is an
    `AssertionError` at the free.

    Why the queue order is kept: a freed block's contents are dead unless the prefix cache
    registered them (`register`), so any order is correct; the order still decides *which*
    ids the next allocation gets, and FIFO makes them a function of the calls alone: replays
    and tests see the same ids. So a call that fails leaves the order exactly as it was, like
    every other piece of state. For the prefix cache the same order is least-recently-used
    eviction: a freed cached block keeps its content and its hash while it waits in the queue,
    is evicted (its hash forgotten) only when an allocation takes it from the front, and is
    taken back out of the queue if a prefix hit needs it first (`touch`). This is vLLM's order
    before 2026 (``FreeKVCacheBlockQueue``: append on free, pop from the front); vLLM 2026
    puts never-cached blocks at the front instead, kvunits keeps one FIFO order for all.

    Memory does not grow with the pool's size: the queue is the ids never handed out (a
    range, ``_fresh .. num_blocks - 1``, always at its front, since every freed block goes to
    the back) followed by the freed ones, and only held and cached ids are recorded. A pool of
    2**31 blocks costs what a pool of 4 does until its blocks are used. A block a prefix hit
    takes back out of the queue leaves a stale entry there (removing it would cost a scan of
    the queue): it is skipped when it reaches the front, and `compact` drops stale entries
    once they are half the queue.

    Requests that share nothing pay nothing for sharing: with no shared block and no cached
    block, `allocate_n` and `free` take their fast paths (the first lines of each).

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
        >>> pool.free([2]); pool.allocate_n(2)
        [3, 2]
    """

    __slots__ = (
        "_cached",
        "_extra",
        "_fresh",
        "_held",
        "_log",
        "_num_stale",
        "_recycled",
        "_stale",
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
        self._recycled: deque[int] = deque()  # freed ids, behind the fresh ones, in order
        self._held: set[int] = set()
        # Reference counts above 1: block -> count - 1 (blocks a prefix hit shares).
        self._extra: dict[int, int] = {}
        # Blocks whose content the prefix cache registered: block -> (its map, its key).
        self._cached: dict[int, tuple[dict[bytes, list[int]], bytes]] = {}
        # Stale queue entries per block (taken back by `touch`), and their total.
        self._stale: dict[int, int] = {}
        self._num_stale = 0
        # What allocations since the last `settle` popped from the queue, for their undo.
        self._log: list[tuple[int, bool, tuple[dict[bytes, list[int]], bytes] | None, int]] = []

    @property
    def num_free(self) -> int:
        """Cache blocks in the free queue (cached ones included: they are evictable)."""
        return self.num_blocks - self._fresh + len(self._recycled) - self._num_stale

    @property
    def num_used(self) -> int:
        """Cache blocks held by requests (the null block not counted; a shared one once)."""
        return len(self._held)

    @property
    def num_cached_free(self) -> int:
        """Free blocks that still hold a registered prefix (a hit may take them back)."""
        return sum(1 for b in self._cached if b not in self._held)

    def allocate_n(self, n: int) -> list[int]:
        """Take ``n`` cache blocks from the front of the free queue.

        A cached block taken this way is evicted: its hash leaves the prefix cache.

        Raises:
            AllocationError: fewer than ``n`` blocks are free; the pool is unchanged.
        """
        if self._num_stale or self._cached:
            return self._allocate_evicting(n)
        start = self._fresh
        fresh = self.num_blocks - start
        recycled = self._recycled
        if n == 1 and (fresh or recycled):  # a decode step's new block: the common case
            if fresh:
                block = start
                self._fresh = start + 1
            else:
                block = recycled.popleft()
            self._held.add(block)
            return [block]
        if n > fresh + len(recycled):
            raise self._short(n, fresh + len(recycled))
        if n <= fresh:
            taken = list(range(start, start + n))
            self._fresh = start + n
        else:
            taken = list(range(start, self.num_blocks))
            popleft = recycled.popleft
            for _ in range(n - fresh):
                taken.append(popleft())
            self._fresh = self.num_blocks
        self._held.update(taken)
        return taken

    def _allocate_evicting(self, n: int) -> list[int]:
        """`allocate_n` when the queue may hold stale entries or cached blocks: each entry
        popped is logged (for `undo_allocate`), stale ones skipped, cached ones evicted."""
        free = self.num_free
        if n > free:
            raise self._short(n, free)
        start = self._fresh
        fresh = min(n, self.num_blocks - start)
        taken = list(range(start, start + fresh))
        self._fresh = start + fresh
        recycled, stale, cached, log = self._recycled, self._stale, self._cached, self._log
        while len(taken) < n:
            block = recycled.popleft()
            left = stale.get(block)
            if left:
                if left == 1:
                    del stale[block]
                else:
                    stale[block] = left - 1
                self._num_stale -= 1
                log.append((block, True, None, 0))
                continue
            entry = cached.pop(block, None)
            index = _unlist(entry, block) if entry is not None else 0
            log.append((block, False, entry, index))
            taken.append(block)
        self._held.update(taken)
        return taken

    def free(self, blocks: Sequence[int]) -> None:
        """Drop one reference to each block, in the order given; a block whose count reaches
        0 goes to the back of the free queue (a cached one keeps its hash there).

        Freeing the null block or a block that is not held is a bug in the caller
        (`AssertionError`); the pool is then unchanged.
        """
        if self._extra:
            self._free_shared(blocks)
            return
        held = self._held
        for i, block in enumerate(blocks):
            if block in held:
                held.remove(block)
                continue
            held.update(blocks[:i])
            raise self._not_held(block)
        self._recycled.extend(blocks)

    def _free_shared(self, blocks: Sequence[int]) -> None:
        held, extra, recycled = self._held, self._extra, self._recycled
        done: list[int] = []
        for block in blocks:
            if block not in held:
                self._undo_free(done)
                raise self._not_held(block)
            count = extra.get(block)
            if count is None:
                held.remove(block)
                recycled.append(block)
            elif count == 1:
                del extra[block]
            else:
                extra[block] = count - 1
            done.append(block)

    def mark(self) -> tuple[int, int]:
        """A mark for `undo_allocate`: where the never-used ids start, and the log's length."""
        return self._fresh, len(self._log)

    def undo_allocate(self, taken: Sequence[int], mark: tuple[int, int]) -> None:
        """Put back at the front of the queue, in order, what ``allocate_n`` returned after
        `mark` (the last change to the pool); the queue, the stale entries and the cached
        blocks it evicted are then exactly as they were."""
        fresh_mark, logged = mark
        self._held.difference_update(taken)
        log = self._log
        if len(log) > logged:
            recycled, stale, cached = self._recycled, self._stale, self._cached
            for block, was_stale, entry, index in reversed(log[logged:]):
                recycled.appendleft(block)
                if was_stale:
                    stale[block] = stale.get(block, 0) + 1
                    self._num_stale += 1
                elif entry is not None:
                    cached[block] = entry
                    entry[0].setdefault(entry[1], []).insert(index, block)
            del log[logged:]
        else:
            fresh = self._fresh - fresh_mark
            self._recycled.extendleft(reversed(taken[fresh:]))
        self._fresh = fresh_mark

    def undo_free(self, blocks: Sequence[int]) -> None:
        """Take back what the last ``free(blocks)`` did (the last change to the pool)."""
        self._undo_free(blocks)

    def _undo_free(self, blocks: Sequence[int]) -> None:
        held, extra, recycled = self._held, self._extra, self._recycled
        for block in reversed(blocks):
            if block in held:  # it was shared: its count went down, it stayed held
                extra[block] = extra.get(block, 0) + 1
            else:
                popped = recycled.pop()
                assert popped == block, (popped, block)
                held.add(block)

    def settle(self) -> None:
        """Forget the undo log of the allocations so far (their call succeeded)."""
        self._log.clear()

    @property
    def has_shared(self) -> bool:
        """Whether any block is held by more than one table."""
        return bool(self._extra)

    def count_shared(self, blocks: Sequence[int]) -> int:
        """How many of ``blocks`` more than one table holds (freeing them frees nothing)."""
        extra = self._extra
        return sum(1 for b in blocks if b in extra) if extra else 0

    def ref_count(self, block: int) -> int:
        """The reference count of one block: the tables holding it (0: free; the null block:
        1)."""
        if block == NULL_BLOCK:
            return 1
        return 1 + self._extra.get(block, 0) if block in self._held else 0

    # -- the prefix cache's part ---------------------------------------------------------------

    def touch(self, block: int) -> bool:
        """Add a reference to a block a prefix hit found: a held one becomes shared, a free
        cached one is taken back out of the queue (its entry there turns stale).

        Returns:
            Whether the block was held before (then the hit shares it).
        """
        if block in self._held:
            self._extra[block] = self._extra.get(block, 0) + 1
            return True
        assert block in self._cached, f"block {block} of pool {self.name!r}: not cached"
        self._stale[block] = self._stale.get(block, 0) + 1
        self._num_stale += 1
        self._held.add(block)
        return False

    def untouch(self, block: int) -> None:
        """Undo the last `touch` of ``block`` (nothing else changed the pool since)."""
        count = self._extra.get(block)
        if count is not None:
            if count == 1:
                del self._extra[block]
            else:
                self._extra[block] = count - 1
            return
        self._held.remove(block)
        left = self._stale[block]
        if left == 1:
            del self._stale[block]
        else:
            self._stale[block] = left - 1
        self._num_stale -= 1

    def register(self, block: int, cache: dict[bytes, list[int]], key: bytes) -> None:
        """Record that a held block holds the content ``key`` fingerprints, in ``cache`` (one
        group's map: key -> the blocks holding it, oldest first)."""
        assert block in self._held and block not in self._cached, block
        self._cached[block] = (cache, key)
        cache.setdefault(key, []).append(block)

    def unregister(self, block: int) -> None:
        """Undo the last `register` of ``block``."""
        entry = self._cached.pop(block)
        _unlist(entry, block)

    def is_cached(self, block: int) -> bool:
        """Whether the prefix cache registered the block's content (held or free)."""
        return block in self._cached

    def compact(self) -> None:
        """Drop the queue's stale entries once they are half of it (order kept). Changes no
        observable state; called before a change begins, never inside an undoable one."""
        if self._num_stale < _COMPACT_AFTER or 2 * self._num_stale < len(self._recycled):
            return
        stale, kept = self._stale, deque[int]()
        for block in self._recycled:
            left = stale.get(block)
            if left:
                if left == 1:
                    del stale[block]
                else:
                    stale[block] = left - 1
                continue
            kept.append(block)
        self._recycled = kept
        self._num_stale = 0

    def reset_cache(self) -> bool:
        """Forget every registered prefix, if no block is held (vLLM's
        ``reset_prefix_cache``); the queue's order is unchanged.

        Returns:
            Whether the cache was reset (``False``: some block is held; nothing changed).
        """
        if self._held:
            return False
        for block, entry in self._cached.items():
            _unlist(entry, block)
        self._cached.clear()
        return True

    def free_queue(self) -> list[int]:
        """The whole free queue, front (taken first) to back: the ids never handed out, then
        the freed ones without the stale entries. For inspection: it costs a copy of it."""
        stale = dict(self._stale)
        out = list(range(self._fresh, self.num_blocks))
        for block in self._recycled:
            left = stale.get(block)
            if left:
                stale[block] = left - 1
                continue
            out.append(block)
        return out

    # -- errors --------------------------------------------------------------------------------

    def _short(self, n: int, free: int) -> AllocationError:
        return AllocationError(
            f"cannot take {n} cache_block from pool {self.name!r}: {free} free",
            group=self.name,
            needed=CacheBlocks(n),
            free=CacheBlocks(free),
        )

    def _not_held(self, block: int) -> AssertionError:
        what = "the null block is never freed" if block == NULL_BLOCK else "not held"
        return AssertionError(f"block {block} of pool {self.name!r} freed: {what}")


def _unlist(entry: tuple[dict[bytes, list[int]], bytes], block: int) -> int:
    """Remove ``block`` from its map entry (the key goes when no block holds it any more);
    return where it stood there."""
    cache, key = entry
    blocks = cache[key]
    index = blocks.index(block)
    del blocks[index]
    if not blocks:
        del cache[key]
    return index
