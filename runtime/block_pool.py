"""The block pool of one layer group: a fixed set of cache blocks and their free queue.

This is inner core: it works on plain ints (block ids; counts in cache blocks) and is driven by
the coordinator, which checks units once at its typed entry. Block 0 is the null block: it is
never handed out, never freed, and stands in block tables for entries a manager evicted (a
sliding window's tail, a finished chunk), so that a table keeps its positions.

Not thread-safe: the coordinator that owns the pool is driven by one scheduler thread.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Final

from contracts import CacheBlocks, SpecError
from contracts.errors import AllocationError

#: The id of the null block in every pool.
NULL_BLOCK: Final = 0


class BlockPool:
    """A fixed number of cache blocks with a first-in first-out free queue.

    Nothing shares blocks (there is no prefix caching), so a block is either free (reference
    count 0, in the queue exactly once) or held by one block table (count 1); the null block
    keeps a count of 1 for ever. The counts are there to turn a double free, which would hand
    one block to two requests, into an `AssertionError` at the free.

    Why the queue order is kept: a freed block's contents are dead, so any order is correct;
    vLLM orders its queue for prefix-cache hits (it frees a request's blocks tail first, so
    the blocks least likely to be a shared prefix are reused first), which does not apply
    here. The order still decides *which* ids the next allocation gets, and FIFO makes them a
    function of the calls alone: replays and tests see the same ids. So a call that fails
    leaves the order exactly as it was, like every other piece of state.

    Args:
        num_blocks: cache blocks in the pool, the null block included (so ``>= 1``).
        name: the group's name, for error messages.

    Example:
        >>> pool = BlockPool(4, name="audio")
        >>> pool.allocate_n(2), pool.num_free
        ([1, 2], 1)
        >>> pool.free([2]); pool.allocate_n(2)
        [3, 2]
    """

    __slots__ = ("_free", "_refs", "name", "num_blocks")

    def __init__(self, num_blocks: int, *, name: str = "pool") -> None:
        if type(num_blocks) is not int or num_blocks < 1:
            raise SpecError(f"a pool needs >= 1 block (the null block), got {num_blocks!r}")
        self.name = name
        self.num_blocks = num_blocks
        self._free: deque[int] = deque(range(1, num_blocks))
        self._refs = [0] * num_blocks
        self._refs[NULL_BLOCK] = 1

    @property
    def num_free(self) -> int:
        """Cache blocks in the free queue."""
        return len(self._free)

    @property
    def num_used(self) -> int:
        """Cache blocks held by requests (the null block not counted)."""
        return self.num_blocks - 1 - len(self._free)

    def allocate_n(self, n: int) -> list[int]:
        """Take ``n`` cache blocks from the front of the free queue.

        Raises:
            AllocationError: fewer than ``n`` blocks are free; the pool is unchanged.
        """
        free = self._free
        if n > len(free):
            raise AllocationError(
                f"cannot take {n} cache_block from pool {self.name!r}: {len(free)} free",
                group=self.name,
                needed=CacheBlocks(n),
                free=CacheBlocks(len(free)),
            )
        refs = self._refs
        taken = [free.popleft() for _ in range(n)]
        for block in taken:
            refs[block] = 1
        return taken

    def free(self, blocks: Iterable[int]) -> None:
        """Put held blocks at the back of the free queue, in the order given.

        Freeing the null block or a free block is a bug in the caller (`AssertionError`).
        """
        refs = self._refs
        free = self._free
        for block in blocks:
            if block <= NULL_BLOCK or refs[block] != 1:
                what = "the null block is never freed" if block == NULL_BLOCK else "not held"
                raise AssertionError(f"block {block} of pool {self.name!r} freed: {what}")
            refs[block] = 0
            free.append(block)

    def ref_count(self, block: int) -> int:
        """The reference count of one block: 0 free, 1 held (the null block: 1)."""
        return self._refs[block]
