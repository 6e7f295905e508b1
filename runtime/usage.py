"""A group's block usage (`GroupUsage`): what `KVCacheCoordinator.usage` answers and the metrics
(`kvunits.runtime.metrics`) carry. Its own module so that the metrics and the coordinator both
import it, and neither imports the other at load time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, final

from kvunits.contracts import CacheBlocks

__all__ = ["GroupUsage"]

_NO_BLOCKS: Final = CacheBlocks(0)


@final
@dataclass(frozen=True, slots=True)
class GroupUsage:
    """Cache blocks of one group, now.

    With one pool for all groups, ``capacity`` and ``free`` are the pool's (the same in
    every group), ``used`` the blocks this group's requests hold, ``reserved`` their
    reservation: ``used + free`` is then at most ``capacity``.

    Attributes:
        name: the group.
        capacity: blocks requests can hold (the pool less the null block); ``used + free``.
        used: blocks held by requests (a block requests share counts once).
        free: blocks in the free queue.
        reserved: blocks reserved by admitted requests (0 without reservation), a block
            requests share reserved once where they keep it (see `kvunits.runtime.admission`).
        cached: free blocks that still hold a cached prefix (in ``free``: an allocation may
            evict them, a prefix hit takes them back).
    """

    name: str
    capacity: CacheBlocks
    used: CacheBlocks
    free: CacheBlocks
    reserved: CacheBlocks
    cached: CacheBlocks = _NO_BLOCKS
