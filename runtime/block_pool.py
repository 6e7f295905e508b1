"""The block pool of one layer group: a fixed set of cache blocks and their free queue.

This is inner core: it works on plain ints (block ids; counts in cache blocks) and is driven by
the coordinator, which checks units once at its typed entry. Block 0 is the null block: it is
never handed out, never freed, and stands in block tables for entries a manager evicted (a
sliding window's tail, a finished chunk), so that a table keeps its positions.

Not thread-safe: the coordinator that owns the pool is driven by one scheduler thread.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Final

from contracts import CacheBlocks, SpecError
from contracts.errors import AllocationError

#: The id of the null block in every pool.
NULL_BLOCK: Final = 0

#: The most cache blocks a pool may have: block ids must fit the int32 block tables the kernels
#: may be given (ids 0 .. 2**31 - 1).
MAX_POOL_BLOCKS: Final = 2**31


class BlockPool:
    """A fixed number of cache blocks with a first-in first-out free queue.

    Nothing shares blocks (there is no prefix caching), so a block is either free (in the
    queue exactly once) or held by one block table; the null block is held for ever. Freeing
    a block that is not held, which would hand one block to two requests, is an
    `AssertionError` at the free.

    Why the queue order is kept: a freed block's contents are dead, so any order is correct;
    vLLM orders its queue for prefix-cache hits (it frees a request's blocks tail first, so
    the blocks least likely to be a shared prefix are reused first), which does not apply
    here. The order still decides *which* ids the next allocation gets, and FIFO makes them a
    function of the calls alone: replays and tests see the same ids. So a call that fails
    leaves the order exactly as it was, like every other piece of state.

    Memory does not grow with the pool's size: the queue is the ids never handed out (a
    range, ``_fresh .. num_blocks - 1``, always at its front, since every freed block goes to
    the back) followed by the freed ones, and only held ids are recorded. A pool of 2**31
    blocks costs what a pool of 4 does until its blocks are used.

    Args:
        num_blocks: cache blocks in the pool, the null block included (``1 ..``
            `MAX_POOL_BLOCKS`).
        name: the group's name, for error messages.

    Raises:
        SpecError: ``num_blocks`` is not an int in that range.

    Example:
        >>> pool = BlockPool(4, name="audio")
        >>> pool.allocate_n(2), pool.num_free
        ([1, 2], 1)
        >>> pool.free([2]); pool.allocate_n(2)
        [3, 2]
    """

    __slots__ = ("_fresh", "_held", "_recycled", "name", "num_blocks")

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

    @property
    def num_free(self) -> int:
        """Cache blocks in the free queue."""
        return self.num_blocks - self._fresh + len(self._recycled)

    @property
    def num_used(self) -> int:
        """Cache blocks held by requests (the null block not counted)."""
        return len(self._held)

    def allocate_n(self, n: int) -> list[int]:
        """Take ``n`` cache blocks from the front of the free queue.

        Raises:
            AllocationError: fewer than ``n`` blocks are free; the pool is unchanged.
        """
        start = self._fresh
        fresh = self.num_blocks - start
        recycled = self._recycled
        if n > fresh + len(recycled):
            free = fresh + len(recycled)
            raise AllocationError(
                f"cannot take {n} cache_block from pool {self.name!r}: {free} free",
                group=self.name,
                needed=CacheBlocks(n),
                free=CacheBlocks(free),
            )
        if n <= fresh:
            taken = list(range(start, start + n))
            self._fresh = start + n
        else:
            taken = list(range(start, self.num_blocks))
            taken.extend(recycled.popleft() for _ in range(n - fresh))
            self._fresh = self.num_blocks
        self._held.update(taken)
        return taken

    def free(self, blocks: Sequence[int]) -> None:
        """Put held blocks at the back of the free queue, in the order given.

        Freeing the null block or a block that is not held is a bug in the caller
        (`AssertionError`); the pool is then unchanged.
        """
        held = self._held
        for i, block in enumerate(blocks):
            if block in held:
                held.remove(block)
                continue
            held.update(blocks[:i])
            what = "the null block is never freed" if block == NULL_BLOCK else "not held"
            raise AssertionError(f"block {block} of pool {self.name!r} freed: {what}")
        self._recycled.extend(blocks)

    def mark(self) -> int:
        """A mark for `undo_allocate`: where the never-used ids start now."""
        return self._fresh

    def undo_allocate(self, taken: Sequence[int], mark: int) -> None:
        """Put back at the front of the queue, in order, what ``allocate_n`` returned after
        `mark` (the last change to the pool); the queue is then exactly as it was."""
        fresh = self._fresh - mark
        self._held.difference_update(taken)
        self._recycled.extendleft(reversed(taken[fresh:]))
        self._fresh = mark

    def undo_free(self, blocks: Sequence[int]) -> None:
        """Hold again what the last ``free(blocks)`` queued at the back (the last change)."""
        recycled = self._recycled
        for _ in blocks:
            recycled.pop()
        self._held.update(blocks)

    def ref_count(self, block: int) -> int:
        """The reference count of one block: 0 free, 1 held (the null block: 1)."""
        return 1 if block == NULL_BLOCK or block in self._held else 0
