"""Shared helpers of the runtime tests: building small coordinators, snapshots of the whole
allocator state, and an independent residency oracle that works in the kernel's units."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final, TypeVar

from kvunits.contracts import (
    AnyLayerGroup,
    Elements,
    EncoderTokens,
    EngineSpec,
    FullAttentionLayer,
    IntQuantity,
    KernelSpec,
    KVHeads,
    LayerGroup,
    Layers,
    LayerSpec,
    ManagerSpec,
    ModelSpec,
    PoolBlocks,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    Tokens,
    Window,
    kernel_view,
    manager_view,
)
from kvunits.contracts._groups import GroupLimits
from kvunits.contracts.internal import admission_cap, manager_ints
from kvunits.runtime import (
    NULL_BLOCK,
    AdmissionPolicy,
    GroupHandle,
    KVCacheCoordinator,
    Stepper,
    _table,
)
from kvunits.runtime._core import RestingExtras
from kvunits.runtime._table import ANCHOR, BASE, LENGTH, SKIPPED, SLACK
from kvunits.runtime.block_pool import BlockPool, PoolPlan
from kvunits.runtime.block_pool import holders as filed_blocks
from kvunits.runtime.prefix_cache import PrefixPart

_U = TypeVar("_U", PooledBlocks, Tokens)

#: A request's content at rest: the compact tuple, or (one group, the prompt's content as
#: given) the caller's own part.
RESTING: Final = (RestingExtras, PrefixPart)


def compacting_only_past(monkeypatch: Any) -> None:
    """Slabs compacted only once their garbage is 1,024 entries (and a quarter of them), as
    they are at a request's end (`_table._RETURN_MIN`), not from `_table._COMPACT_MIN` on:
    for tests of which path a step takes, written for tables too small to compact. Their
    steps then take the paths they name; a compaction sends a step elsewhere (the general
    path compacts first), which the fuzzed differential tests cover at the real floor."""
    monkeypatch.setattr(_table, "_COMPACT_MIN", 1024)


def group_of(
    name: str,
    layer: LayerSpec,
    *,
    block_size: int,
    max_len: int,
    max_in_flight: int,
) -> AnyLayerGroup:
    """A one-layer group with limits given as plain ints of the layer's manager unit."""
    manager = manager_view(layer, block_size_slots=block_size)
    kernels: dict[str, KernelSpec[Any]] = {}
    if manager.kind != "state":
        kernels[f"{name}.0"] = kernel_view(layer, block_size_slots=block_size)

    def typed(spec: ManagerSpec[_U]) -> LayerGroup[_U]:
        unit = spec.slot_unit
        limits = GroupLimits(unit(max_len), unit(max_in_flight))
        return LayerGroup(name, spec, (f"{name}.0",), kernels, limits)

    if manager.slot_unit is PooledBlocks:
        return typed(manager.expect(PooledBlocks))
    return typed(manager.expect(Tokens))


def drawn_blocks(
    draw: Callable[..., Any],
    specs: Mapping[str, LayerSpec],
    counts: Callable[[int], Any],
    *,
    block_size: int,
    max_len: int,
    max_in_flight: int,
) -> dict[str, int]:
    """Per group of ``specs`` (built by `group_of` with these limits), its pool's blocks: the
    null block and a count drawn (``draw``: hypothesis' ``data.draw``) from ``counts(cap)``,
    ``cap`` being the group's admission cap (at its fixed slots for a cross or state group),
    so that a test sizes its pools in requests' worth."""
    blocks = {}
    for name, layer in specs.items():
        group = group_of(
            name, layer, block_size=block_size, max_len=max_len, max_in_flight=max_in_flight
        )
        fixed = manager_ints(group.manager).fixed_slots
        cap = admission_cap(
            group.manager,
            max_in_flight if fixed is None else fixed,
            max_len if fixed is None else fixed,
        )
        blocks[name] = 1 + draw(counts(cap), label=f"blocks {name}")
    return blocks


def coordinator(
    layers: Mapping[str, LayerSpec],
    *,
    block_size: int,
    num_blocks: int | Mapping[str, int],
    max_len: int = 1_000,
    max_in_flight: int = 1_000,
    reserve: bool = True,
    shared: bool = False,
    admission: AdmissionPolicy | None = None,
) -> KVCacheCoordinator:
    """A coordinator over one-layer groups (``num_blocks`` includes the null block); with
    ``shared``, one pool of ``num_blocks`` (an int) for all groups. ``admission`` (when given)
    stands for ``reserve``."""
    if admission is None:
        admission = AdmissionPolicy(kind="reserve" if reserve else "on_demand")
    groups = [
        group_of(n, layer, block_size=block_size, max_len=max_len, max_in_flight=max_in_flight)
        for n, layer in layers.items()
    ]
    if shared:
        assert isinstance(num_blocks, int)
        return KVCacheCoordinator(groups, PoolBlocks(num_blocks), admission=admission)
    counts = (
        [num_blocks] * len(groups)
        if isinstance(num_blocks, int)
        else [num_blocks[g.name] for g in groups]
    )
    return KVCacheCoordinator(groups, [PoolBlocks(n) for n in counts], admission=admission)


def toy(
    name: str,
    layer: LayerSpec,
    unit: type[_U],
    *,
    num_blocks: int = 8,
    max_in_flight: int = 5,
    max_len: int = 1_000,
) -> tuple[KVCacheCoordinator, GroupHandle[_U], Stepper[_U]]:
    """The narrated cases' geometry: one group of block size 2 (``num_blocks`` with the null
    block); its coordinator, its handle (slots counted in ``unit``) and a stepper over it."""
    coord = coordinator(
        {name: layer},
        block_size=2,
        num_blocks=num_blocks,
        max_len=max_len,
        max_in_flight=max_in_flight,
    )
    handle = coord.group(name, unit)
    return coord, handle, coord.stepper(handle)


def snapshot(coord: KVCacheCoordinator) -> tuple[Any, ...]:
    """Everything a failed call must leave as it was: pools (free queue order, reference
    counts, cached blocks and their keys, which of them are free), the prefix caches' maps
    and statistics, every request's tables, lengths, evictions, latest step, hashes,
    registered blocks, content not yet a full block (each stream's tail keys and parent hash)
    and speculative tail, the reservations and shares."""
    core = coord._core

    def tails(rid: str) -> tuple[Any, ...] | None:
        # Read from the request's content as a call that adds content makes it (`_active`:
        # a resting request's made anew, the core unchanged).
        extra = core._active(core.offset(rid))
        if extra is None:
            return None
        return tuple((tuple(s.tail), s.parent) for s in extra.streams)

    # Each held block's count as ref_count reads it (a table's, or the shared count), without
    # its scan of the whole queue per block (quadratic: a prefill's 8,000 blocks took
    # seconds a snapshot); check_pools asks ref_count itself.
    pools = tuple(
        (
            tuple(p.free_queue()),
            tuple((b, p._shared.get(b, 1)) for b in p.held_blocks()),
            tuple(sorted(p._cached.items())),
            tuple(p.cached_free_blocks()),  # which cached blocks are free
        )
        for p in unique_pools(coord)
    )
    caches = tuple(
        None
        if c is None
        else (
            tuple(sorted((k, tuple(filed_blocks(v))) for k, v in c.blocks.items())),
            (c.requests, c.queried, c.hits),
        )
        for c in core.caches
    )
    requests = tuple(
        sorted(
            (
                rid,
                tuple(tuple(t) for t in r.tables),
                tuple(r.num_rows),
                tuple(r.num_slots),
                tuple(r.max_len),
                tuple(r.caps),
                tuple(r.skipped),
                tuple(r.step_rows),
                None
                if r.extra is None
                else (
                    tuple(None if h is None else tuple(h) for h in r.extra.hashes),
                    tuple(r.extra.registered),
                    tuple(r.extra.spec),
                    tails(rid),
                ),
            )
            for rid, r in core.requests.items()
        )
    )
    return pools, caches, requests, tuple(core.ledger.reserved), tuple(core.ledger.shared)


def unique_pools(coord: KVCacheCoordinator) -> list[BlockPool]:
    """The coordinator's pools, each once (one for all groups when they share it)."""
    return list({id(p): p for p in coord._core.pools}.values())


def free_queue(pool: BlockPool) -> tuple[int, ...]:
    """A pool's whole free queue, in order: the ids never handed out, then the freed ones."""
    return tuple(pool.free_queue())


def check_pools(coord: KVCacheCoordinator) -> None:
    """Every pool's invariants: each block is either queued once with reference count 0 or
    held with a count equal to the live tables holding it, the null block never queued;
    free + used = capacity; a block in two live tables is one the prefix cache registered
    (shared by hash), no leak (the blocks in live tables are exactly the held ones), every
    cached block is filed under its key in its group's map, and only there, and flagged
    free exactly where it is free."""
    core = coord._core
    for pool in unique_pools(coord):
        groups = [g for g, p in enumerate(core.pools) if p is pool]
        queue = free_queue(pool)
        queued = set(queue)
        assert len(queued) == len(queue) == pool.num_free, f"pool {pool.name!r}: queued twice"
        assert NULL_BLOCK not in queued and pool.ref_count(NULL_BLOCK) == 1
        holders: dict[int, int] = {}
        for g in groups:
            for req in core.requests.values():
                table = req.tables[g]
                skipped = req.skipped[g]
                assert all(b == NULL_BLOCK for b in table[:skipped]), (pool.name, table, skipped)
                assert all(b != NULL_BLOCK for b in table[skipped:]), (pool.name, table, skipped)
                assert len(set(table[skipped:])) == len(table) - skipped, "a block twice"
                for b in table[skipped:]:
                    holders[b] = holders.get(b, 0) + 1
        # ref_count tells a block held by one table from a free one by a scan of the whole
        # queue, so asking it of every block is quadratic (8,000 blocks: seconds a call). The
        # counts are read as it reads them, with the one scan above; ref_count itself is asked
        # of every shared block and of a dozen of the others (each ask scans the queue: a
        # hundred of them were a fifth of the allocator tests' time).
        fresh, shared = pool._fresh, pool._shared
        counts = [
            shared.get(b, 0 if b in queued else 1) if 0 < b < fresh else 0
            for b in range(pool.num_blocks)
        ]
        asked = range(1, pool.num_blocks, max(1, pool.num_blocks // 12))
        for b in sorted({*asked, *shared, pool.num_blocks - 1} - {0}):
            assert pool.ref_count(b) == counts[b], f"pool {pool.name!r}: block {b}"
        for b in range(1, pool.num_blocks):
            count = counts[b]
            assert count == holders.get(b, 0), f"pool {pool.name!r}: block {b} counts {count}"
            assert (count == 0) == (b in queued), f"pool {pool.name!r}: block {b}"
            if count > 1:
                assert pool.is_cached(b), f"block {b} in {count} tables, not shared by hash"
        assert pool.num_used == len(holders), f"pool {pool.name!r}: leaked blocks"
        assert len(holders) + pool.num_free == pool.num_blocks - 1
        # Every cached block is filed under its key, in the map of a group of this pool.
        maps = [core.caches[g] for g in groups]
        filed = {
            (id(c.blocks), key, b)
            for c in maps
            if c is not None
            for key, held in c.blocks.items()
            for b in filed_blocks(held)
        }
        assert filed == {(id(pool.map_of(b, key)), key, b) for b, key in pool._cached.items()}
        # The free cached blocks' flags: exactly the cached blocks that are free.
        flagged = set(pool.cached_free_blocks())
        assert flagged == {b for b in pool._cached if counts[b] == 0}, f"pool {pool.name!r}"
        # One block is filed as itself; two or more as a list, never fewer.
        assert all(
            type(h) is int or (type(h) is list and len(h) >= 2)
            for c in maps
            if c
            for h in c.blocks.values()
        )
    for name, usage in coord.usage_by_group().items():
        assert usage.used + usage.free <= usage.capacity, name
    check_ends(coord)


def check_ends(coord: KVCacheCoordinator) -> None:
    """Every table of a kind whose length follows its positions (full attention, windows,
    chunks) holds exactly the entries (evicted ones included) its positions so far need:
    a rollback gives back what only its positions used, and a step takes no more than its
    end needs. The generated speculative steps rely on it (`_fast._fits`: a rollback then a
    step past the rolled-back end frees no block)."""
    core = coord._core
    table = core.table
    for rid, o in table.offsets.items():
        for g, manager in enumerate(core._managers):
            if manager.kind in ("cross_attention", "state"):
                continue
            entries = table.field(o, g, SKIPPED) + table.field(o, g, LENGTH)
            slots = -(-table.rows(o, g) // core._pool[g])
            assert entries == manager.table_length(slots), (rid, g, entries, slots)


def check_bases(coord: KVCacheCoordinator) -> None:
    """Every request's fields that let a step skip the managers agree with its table: in each
    group with slot rows where its slack is not 0, ``BASE`` is the base (``table[b] − b``) of
    the block ``b`` holding the next step's first slot, the one a fast step's slot mapping
    reads (`_table`'s ``BASE``), and ``ANCHOR`` is within that block."""
    core = coord._core
    table = core.table
    for rid, o in table.offsets.items():
        for g, manager in enumerate(core._managers):
            if not manager.has_slot_rows or table.field(o, g, SLACK) == 0:
                continue
            p, size = core._pool[g], core._block_size[g]
            slot = table.rows(o, g) // p
            b = slot // size
            entry = table.live(o, g)[b - table.field(o, g, SKIPPED)]
            assert table.field(o, g, BASE) == entry - b, (rid, g, slot)
            assert table.field(o, g, ANCHOR) <= (b + 1) * size * p, (rid, g, slot)


def unresident_keys(
    table: list[int],
    *,
    block_size: int,
    pool: int,
    kind: str,
    sliding_window: int | None,
    chunk: int | None,
    first_query: int,
    end_query: int,
) -> list[tuple[int, int]]:
    """The (query, key) pairs of the kernel whose key is not in a live block of ``table``.

    Everything here is in the kernel's unit (encoder tokens for a pooled group): queries
    ``first_query .. end_query − 1``, a cache block of ``block_size × pool`` rows, the window
    or chunk as the model declares it. Written independently of the managers: it knows only
    what each attention kind reads.
    """
    rows = block_size * pool
    bad = []
    for q in range(first_query, end_query):
        if kind == "sliding_window":
            assert sliding_window is not None
            lowest = max(0, q - (sliding_window - 1))
        elif kind == "chunked_local":
            assert chunk is not None
            lowest = q // chunk * chunk
        else:
            lowest = 0
        # The keys lowest..q are contiguous, so checking the blocks they span checks them all;
        # the first missing key is reported.
        for block in range(lowest // rows, q // rows + 1):
            if block >= len(table) or table[block] == NULL_BLOCK:
                bad.append((q, max(lowest, block * rows)))
                break
    return bad


def voxtral_model(window: int = 750) -> ModelSpec:
    """Voxtral Realtime: a pooled sliding-window audio encoder and a full-attention decoder."""
    audio = SlidingWindowLayer(
        sliding_window=Window(window, EncoderTokens),
        pool=PoolFactor(4),
        kv_heads=KVHeads(32),
        head_size=Elements(64),
    )
    text = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))
    return ModelSpec.stacked(
        "voxtral-realtime", {"audio": (audio, Layers(32)), "text": (text, Layers(26))}
    )


def voxtral_engine(
    budget: str = "40 GiB", encoder_len: int = 40_000, encoder_step: int = 4
) -> EngineSpec:
    """Decoder limits in tokens, encoder limits in encoder tokens (4 = one pooled block)."""
    return EngineSpec.model_validate(
        {
            "block_size_slots": 16,
            "max_model_len": "8192 token",
            "max_num_batched_tokens": "2048 token",
            "max_encoder_len": f"{encoder_len} encoder_token",
            "max_encoder_tokens_per_step": f"{encoder_step} encoder_token",
            "memory_budget": budget,
        }
    )


def quantity(unit: type[IntQuantity], value: int) -> Any:
    """A quantity of a unit chosen at run time (the tests draw groups of either unit)."""
    assert unit in (PooledBlocks, Tokens, EncoderTokens)
    return unit(value)


class Injected(Exception):
    """A failure a test injects into the middle of a coordinator's call."""


class Interference:
    """Make one group's pool misbehave while a call plans its changes, then put it back.

    ``mode`` is ``"fail"`` (planning ``operation`` in the pool raises `Injected` before it is
    planned, as if a bug or an interrupt struck mid-call) or ``"reenter"`` (planning
    ``operation`` first calls ``reentry``, a call into the same coordinator, which must be
    refused with `ConcurrentUseError`, then goes on as usual). ``operation`` names what the
    call does to the pool: ``"free"`` (blocks released), ``"allocate_n"`` (blocks taken),
    ``"touch"`` (a prefix hit's blocks adopted). The plan's methods (and for blocks taken,
    `BlockPool.front`, which takes a long step's run on the boundary path) are wrapped for
    the duration, for this pool only.

    Attributes:
        hits: how many times ``operation`` was reached.
        refused: the errors the re-entrant calls raised (one per hit in ``"reenter"`` mode).
    """

    _METHODS: ClassVar[dict[str, str]] = {
        "free": "release",
        "allocate_n": "take",
        "touch": "touch",
    }

    def __init__(
        self,
        pool: BlockPool,
        operation: str,
        mode: str,
        reentry: Callable[[], object] | None = None,
    ) -> None:
        assert operation in self._METHODS and mode in ("fail", "reenter")
        self.pool, self.hits, self.refused = pool, 0, list[BaseException]()
        self.mode, self.reentry = mode, reentry
        self.method = self._METHODS[operation]
        self.operation = operation
        self._original: Any = None
        self._front: Any = None

    def _interfere(self) -> None:
        self.hits += 1
        if self.mode == "fail":
            raise Injected(f"{self.operation} of pool {self.pool.name!r} interrupted")
        assert self.reentry is not None
        try:
            self.reentry()
        except BaseException as exc:
            self.refused.append(exc)

    def __enter__(self) -> Interference:
        original = getattr(PoolPlan, self.method)
        self._original = original
        outer = self

        def wrapped(plan: PoolPlan, *args: Any) -> Any:
            if plan.pool is outer.pool:
                outer._interfere()
            return original(plan, *args)

        setattr(PoolPlan, self.method, wrapped)
        if self.operation == "allocate_n":
            front = self._front = BlockPool.front

            def run(pool: BlockPool, *args: Any) -> Any:
                if pool is outer.pool:
                    outer._interfere()
                return front(pool, *args)

            setattr(BlockPool, "front", run)  # noqa: B010 - a method replaced for the test
        return self

    def __exit__(self, *exc: object) -> None:
        setattr(PoolPlan, self.method, self._original)
        if self.operation == "allocate_n":
            setattr(BlockPool, "front", self._front)  # noqa: B010
