"""The block pool of one layer group: a fixed set of cache blocks, a free queue, ref counts.

This is inner core: it works on plain ints (block ids, block counts in cache blocks) and is
driven by the coordinator, which checks units once at its typed entry. Block 0 is the null
block: it is never handed out, never freed, and stands in block tables for entries a manager
evicted (a sliding window's tail, a finished chunk), so a table keeps its positions.

Not thread-safe: the coordinator that owns the pool is driven by one scheduler thread.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Final

from contracts import CacheBlocks

from ._errors import AllocationError

#: The id of the null block in every pool.
NULL_BLOCK: Final = 0


class BlockPool:
    """A fixed number of cache blocks with a FIFO free queue and reference counts.

    A block is free exactly when its reference count is 0; the null block keeps a count of 1
    for ever. Freed blocks go to the back of the queue, so the longest-free block is reused
    first.

    Args:
        num_blocks: cache blocks in the pool, the null block included (so ``>= 1``).
        name: the group's name, for error messages.

    Example:
        >>> pool = BlockPool(4, name="audio")
        >>> pool.allocate_n(2), pool.num_free
        ([1, 2], 1)
        >>> pool.free([2]); pool.num_free
        2
    """

    __slots__ = ("_free", "_refs", "name", "num_blocks")

    def __init__(self, num_blocks: int, *, name: str = "pool") -> None:
        if type(num_blocks) is not int or num_blocks < 1:
            raise ValueError(f"a pool needs >= 1 block (the null block), got {num_blocks!r}")
        self.name = name
        self.num_blocks = num_blocks
        self._free: deque[int] = deque(range(1, num_blocks))
        self._refs = [0] * num_blocks
        self._refs[NULL_BLOCK] = 1

    @property
    def num_free(self) -> int:
        """Blocks in the free queue."""
        return len(self._free)

    @property
    def num_used(self) -> int:
        """Blocks held by requests (the null block not counted)."""
        return self.num_blocks - 1 - len(self._free)

    def allocate_n(self, n: int) -> list[int]:
        """Take ``n`` blocks from the front of the free queue, each with reference count 1.

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

    def share(self, blocks: Iterable[int]) -> None:
        """Add one reference to each held block (a second table now points at it)."""
        refs = self._refs
        for block in blocks:
            # Sharing a free block would resurrect it while it sits in the free queue.
            assert refs[block] > 0, f"block {block} of pool {self.name!r} is free"
            refs[block] += 1

    def free(self, blocks: Iterable[int]) -> None:
        """Drop one reference to each block; a block whose count reaches 0 joins the queue.

        Freeing the null block or a free block is a bug in the caller (AssertionError).
        """
        refs = self._refs
        free = self._free
        for block in blocks:
            count = refs[block] - 1
            if count < 1:
                if count < 0 or block == NULL_BLOCK:
                    raise AssertionError(f"block {block} of pool {self.name!r} freed twice")
                free.append(block)
            refs[block] = count

    def ref_count(self, block: int) -> int:
        """The reference count of one block (0: free)."""
        return self._refs[block]

    def check(self) -> None:
        """Assert the pool's invariants (for tests): every block is either free exactly once
        with count 0, or held with count >= 1; the null block is never free."""
        free = self._free
        assert len(set(free)) == len(free), f"pool {self.name!r}: a block is queued twice"
        assert NULL_BLOCK not in free, f"pool {self.name!r}: the null block is in the queue"
        assert self._refs[NULL_BLOCK] == 1
        queued = set(free)
        for block in range(1, self.num_blocks):
            count = self._refs[block]
            assert (count == 0) == (block in queued), (self.name, block, count)
            assert count >= 0
