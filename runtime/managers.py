"""Per-kind cache managers: which table entries a request still needs, on plain ints.

Each manager reads one `kvunits.contracts.ManagerSpec` once, at construction, through
`kvunits.contracts.internal.manager_ints`, and keeps plain ints (``block_size_slots``,
``sliding_window_slots``, ``chunk_slots``, ``fixed_blocks``). Positions are
slots of the manager's unit (pooled blocks for a pooled group, tokens otherwise); table entries
are cache blocks. A manager answers two questions; the coordinator does the bookkeeping:

* `~SingleTypeManager.skipped_blocks`: how many leading entries of the block table no query of
  a step starting at ``num_computed`` reads. They are freed and hold the null block. The count
  never decreases as ``num_computed`` grows, so the coordinator frees only the entries past the
  ones it already freed, and never frees an entry twice.
* `~SingleTypeManager.table_length`: how many table entries a request of ``num_slots`` slots
  has (evicted ones included).

Two more answers, derived from those two, let the coordinator's step skip both calls while a
request stays within the blocks it holds (most decode steps: one new block every
``block_size`` slots): `~SingleTypeManager.reach`, the most slots a table of a given length
covers, and `~SingleTypeManager.first_evicting`, the first ``num_computed`` that evicts past a
given count. Each is exact, and a test checks it against the two rules it stands for.

The step's queries are the new slots ``num_computed .. num_computed + num_new − 1``; eviction
uses ``num_computed`` from *before* the step, as vLLM's ``remove_skipped_blocks`` does, because
the step's first query still reads back from there.

`MANAGER_BY_KIND` maps a `ManagedKind` to its class, as vLLM's ``spec_manager_map`` does.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

from kvunits.contracts import ManagerSpec, SpecError
from kvunits.contracts.internal import ManagedKind, cdiv, manager_ints

#: "Never": the `SingleTypeManager.first_evicting` of a kind that evicts nothing, and the
#: `SingleTypeManager.reach` of a table that covers any length (above every slot count).
NEVER: Final = 2**63 - 1


class SingleTypeManager:
    """Full attention, and the base of the other kinds: every block is kept until the request
    ends.

    Example:
        Block size 2: a request of 5 slots has 3 table entries, none skipped.

        >>> from kvunits.contracts import Elements, FullAttentionLayer, KVHeads, manager_view
        >>> layer = FullAttentionLayer(kv_heads=KVHeads(1), head_size=Elements(8))
        >>> m = FullAttentionManager(manager_view(layer, block_size_slots=2))
        >>> m.table_length(5), m.skipped_blocks(5)
        (3, 0)
        >>> m.reach(3), m.first_evicting(0) == NEVER
        (6, True)
    """

    kind: ClassVar[ManagedKind] = "full_attention"
    #: Whether each slot has a row of its own in the cache (a state group has one state).
    has_slot_rows: ClassVar[bool] = True

    __slots__ = ("block_size_slots", "spec")

    def __init__(self, spec: ManagerSpec[Any]) -> None:
        if spec.kind != self.kind:
            raise SpecError(f"{type(self).__name__} manages {self.kind}, got a {spec.kind} spec")
        self.spec = spec
        self.block_size_slots = manager_ints(spec).block_size_slots

    def skipped_blocks(self, num_computed: int) -> int:
        """Leading table entries (cache blocks) that no query of a step starting at slot
        ``num_computed`` reads: the slots computed before the step, in the manager's unit."""
        return 0

    def table_length(self, num_slots: int) -> int:
        """Table entries (cache blocks) of a request that holds ``num_slots`` slots, evicted
        ones included."""
        return -(-num_slots // self.block_size_slots)  # cdiv, inline: once per new block

    def reach(self, num_blocks: int) -> int:
        """The most slots a request holding ``num_blocks`` table entries can have without a new
        block: the largest ``s`` with ``table_length(s) <= num_blocks`` (-1 if none)."""
        return num_blocks * self.block_size_slots

    def first_evicting(self, skipped: int) -> int:
        """The smallest ``num_computed`` whose `skipped_blocks` exceeds ``skipped``: a step
        starting before it evicts nothing beyond the ``skipped`` entries (`NEVER` if none)."""
        return NEVER


class FullAttentionManager(SingleTypeManager):
    """Full (causal) attention: holds every block until the request ends."""

    __slots__ = ()


class SlidingWindowManager(SingleTypeManager):
    """Sliding window of ``sliding_window_slots``: the query at slot q reads slots
    ``q − (sliding_window_slots − 1) .. q``.

    Before a step starting at ``num_computed``, the blocks lying wholly below
    ``num_computed − sliding_window_slots + 1`` are freed (vLLM's rule). For a pooled group the
    window came through `kvunits.contracts.pool_window`, which is what makes this rule keep every
    key of the kernel's real window (in encoder tokens) resident.

    Example:
        Block size 2, window 4. Slots 0-5 are computed; the next query, slot 6, reads slots
        3-6, so block 0 (slots 0-1) goes, and block 1 (slots 2-3) stays for slot 3.

        >>> from kvunits.contracts import (Elements, KVHeads, SlidingWindowLayer, Tokens, Window,
        ...                                manager_view)
        >>> layer = SlidingWindowLayer(sliding_window=Window(4, Tokens), kv_heads=KVHeads(1),
        ...                            head_size=Elements(8))
        >>> m = SlidingWindowManager(manager_view(layer, block_size_slots=2))
        >>> m.skipped_blocks(6), m.skipped_blocks(7)
        (1, 2)

        Two entries freed: block 2 (slots 4-5) goes once slot 5 is out of the window, from
        the query at slot 9 on (it reads slots 6-9).

        >>> m.first_evicting(2)
        9
    """

    __slots__ = ("sliding_window_slots",)
    kind: ClassVar[ManagedKind] = "sliding_window"

    def __init__(self, spec: ManagerSpec[Any]) -> None:
        super().__init__(spec)
        window = manager_ints(spec).sliding_window_slots
        assert window is not None  # set for every sliding layer
        self.sliding_window_slots = window

    def skipped_blocks(self, num_computed: int) -> int:
        first_needed = num_computed - self.sliding_window_slots + 1
        return first_needed // self.block_size_slots if first_needed > 0 else 0

    def first_evicting(self, skipped: int) -> int:
        # Entry ``skipped`` goes once the first needed slot passes its end, (skipped + 1) × bs.
        return (skipped + 1) * self.block_size_slots + self.sliding_window_slots - 1


class ChunkedLocalManager(SingleTypeManager):
    """Chunked local attention: the query at slot q reads its own chunk up to itself,
    ``q // chunk_slots × chunk_slots .. q``.

    Before a step starting at ``num_computed``, the blocks lying wholly left of that slot's
    chunk are freed.

    Example:
        Block size 2, chunk 4. Slot 9 is in chunk 2 (slots 8-11), so blocks 0-3 go.

        >>> from kvunits.contracts import (ChunkedLocalLayer, Chunk, Elements, KVHeads, Tokens,
        ...                                manager_view)
        >>> layer = ChunkedLocalLayer(chunk=Chunk(4, Tokens), kv_heads=KVHeads(1),
        ...                           head_size=Elements(8))
        >>> m = ChunkedLocalManager(manager_view(layer, block_size_slots=2))
        >>> m.skipped_blocks(7), m.skipped_blocks(9)
        (2, 4)

        With 2 entries freed, the next go when a step starts in chunk 2, at slot 8.

        >>> m.first_evicting(2)
        8
    """

    __slots__ = ("chunk_slots",)
    kind: ClassVar[ManagedKind] = "chunked_local"

    def __init__(self, spec: ManagerSpec[Any]) -> None:
        super().__init__(spec)
        chunk = manager_ints(spec).chunk_slots
        assert chunk is not None  # manager_view sets it for every chunked layer
        self.chunk_slots = chunk

    def skipped_blocks(self, num_computed: int) -> int:
        chunk_start = num_computed // self.chunk_slots * self.chunk_slots
        return chunk_start // self.block_size_slots

    def first_evicting(self, skipped: int) -> int:
        # The first chunk starting at or past the end of entry ``skipped``.
        return cdiv((skipped + 1) * self.block_size_slots, self.chunk_slots) * self.chunk_slots


class CrossAttentionManager(SingleTypeManager):
    """Cross attention: the declared encoder length, allocated whole on the request's first
    step and kept until it ends.

    Example:
        Block size 2, encoder length 5 slots: 3 blocks from the first step on.

        >>> from kvunits.contracts import (CrossAttentionLayer, Elements, EncoderTokens, KVHeads,
        ...                                manager_view)
        >>> layer = CrossAttentionLayer(encoder_length=EncoderTokens(5), kv_heads=KVHeads(1),
        ...                             head_size=Elements(8))
        >>> m = CrossAttentionManager(manager_view(layer, block_size_slots=2))
        >>> m.table_length(0), m.table_length(5)
        (3, 3)
    """

    __slots__ = ("fixed_blocks",)
    kind: ClassVar[ManagedKind] = "cross_attention"

    def __init__(self, spec: ManagerSpec[Any]) -> None:
        super().__init__(spec)
        fixed = manager_ints(spec).fixed_slots
        assert fixed is not None  # manager_view sets it for cross attention
        self.fixed_blocks = cdiv(fixed, self.block_size_slots)

    def table_length(self, num_slots: int) -> int:
        return self.fixed_blocks

    def reach(self, num_blocks: int) -> int:
        return NEVER if num_blocks >= self.fixed_blocks else -1


class StateManager(SingleTypeManager):
    """A fixed per-request state (Mamba-like): one block, whatever the length.

    Its slots (tokens processed) have no rows of their own: a step's slot mapping is empty and
    the kernel reads the one block of the table.

    Example:
        >>> from kvunits.contracts import Bytes, StateLayer, manager_view
        >>> m = StateManager(manager_view(StateLayer(state_size=Bytes(1024)), block_size_slots=2))
        >>> m.table_length(0), m.table_length(10_000)
        (1, 1)
    """

    __slots__ = ()
    kind: ClassVar[ManagedKind] = "state"
    has_slot_rows: ClassVar[bool] = False

    def table_length(self, num_slots: int) -> int:
        return 1

    def reach(self, num_blocks: int) -> int:
        return NEVER if num_blocks >= 1 else -1


#: The manager class of each layer kind.
MANAGER_BY_KIND: Final[dict[ManagedKind, type[SingleTypeManager]]] = {
    "full_attention": FullAttentionManager,
    "sliding_window": SlidingWindowManager,
    "chunked_local": ChunkedLocalManager,
    "cross_attention": CrossAttentionManager,
    "state": StateManager,
}


def make_manager(spec: ManagerSpec[Any]) -> SingleTypeManager:
    """The manager for a group's spec, chosen by its kind."""
    return MANAGER_BY_KIND[spec.kind](spec)
