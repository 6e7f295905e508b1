"""The two views of a layer: what the cache manager reads and what the kernel reads.

A `ManagerSpec` counts the sequence in cache slots (`PooledBlocks` for a pooled layer,
`Tokens` otherwise); a `KernelSpec` counts it in the kernel's unit (`EncoderTokens` or
`Tokens`). They are different generic types, so mypy rejects one where the other is
expected, and neither can be built directly: `manager_view` and `kernel_view` derive them
from a layer spec through the named conversions, which is the only place P is applied.

A view owns its layer's geometry: what needs the block size, P or the page size is a method
of the view (`ManagerSpec.block_of`, `ManagerSpec.window_blocks`, `ManagerSpec.bytes_for`,
`KernelSpec.block_of`, …), so that another layer group's block size or dtype is never passed
in by hand (vLLM #53142, TRT-LLM #16225). The admission cap, the one formula planning and
run-time admission share, is `ManagerSpec.max_admission_blocks_per_request`.

The views hold no plain-int copies of their sizes in public: runtime and kernels, past their
typed entry, read them through `kvunits.contracts.internal.manager_ints` and `kernel_ints`.

Example:
    >>> layer = SlidingWindowLayer(sliding_window=Window(750, EncoderTokens), pool=PoolFactor(4),
    ...                            kv_heads=KVHeads(32), head_size=Elements(64))
    >>> m = manager_view(layer, block_size_slots=16).expect(PooledBlocks)
    >>> str(m.sliding_window), str(m.page_size), str(m.window_blocks())
    ('189 pooled_block', '524288 byte', '13 cache_block')
    >>> str(m.max_admission_blocks_per_request(PooledBlocks(1), PooledBlocks(8192)))
    '13 cache_block'
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, NoReturn, TypeAlias, TypeVar, final

from ._convert import (
    block_of,
    cdiv,
    expand_block_size,
    pool_chunk,
    pool_length,
    pool_window,
    window_blocks,
)
from ._counts import Elements, KVHeads
from ._describe import describe
from ._dtype import CacheDType
from ._factors import BlockSize, PoolFactor
from ._group_marker import GroupT
from ._kinds import Chunk, Position, Window, check_kind
from ._layers import (
    ChunkedLocalLayer,
    CrossAttentionLayer,
    EncoderOnlyLayer,
    FullAttentionLayer,
    IndexerLayer,
    KVSharedLayer,
    LayerSpec,
    MLALayer,
    SlidingWindowLayer,
    StateLayer,
)
from ._quantity import (
    AdmissionCap,
    Bytes,
    CacheBlocks,
    EncoderTokens,
    PoolBlocks,
    PooledBlocks,
    SlotUnit,
    SpanBlocks,
    TableBlocks,
    Tokens,
    check_quantity,
)
from .errors import SpecError, UnitAttributeError, UnitTypeError, UnitValueError
from .state import StateMixerLayer

ManagedKind: TypeAlias = Literal[
    "full_attention", "sliding_window", "chunked_local", "cross_attention", "state"
]

#: The kernel's sequence unit: encoder tokens (pooled layer) or tokens.
KernelUnit = TypeVar("KernelUnit", EncoderTokens, Tokens)
_U = TypeVar("_U", PooledBlocks, Tokens)
_K = TypeVar("_K", EncoderTokens, Tokens)

_DERIVING: ContextVar[bool] = ContextVar("kvunits_deriving_view", default=False)


@contextmanager
def _deriving() -> Iterator[None]:
    token = _DERIVING.set(True)
    try:
        yield
    finally:
        _DERIVING.reset(token)


def _only_derived(cls_name: str, builder: str) -> None:
    if not _DERIVING.get():
        raise SpecError(
            f"{cls_name} is derived, never built by hand (nor with dataclasses.replace): "
            f"use {builder}(layer, block_size_slots=...) so that the window and the block "
            "size go through the named conversions"
        )


def _admission_blocks(
    kind: ManagedKind,
    block_size_slots: int,
    sliding_window_slots: int | None,
    chunk_slots: int | None,
    fixed_slots: int | None,
    max_in_flight_slots: int,
    max_len_slots: int,
) -> int:
    """The admission cap in cache blocks, on plain ints (all slot counts in one unit).

    The one formula per kind: `ManagerSpec.max_admission_blocks_per_request` (capacity
    planning) and the runtime's admission ledger (through
    `kvunits.contracts.internal.admission_cap`) both come here.
    """
    if kind == "full_attention":
        return cdiv(max_len_slots, block_size_slots)
    if kind == "sliding_window":
        assert sliding_window_slots is not None
        held = min(sliding_window_slots - 1 + max_in_flight_slots, max_len_slots)
        # +1: the window may start in the middle of a block, so one more block is touched;
        # but never more than the whole request: when the window covers it all, no window
        # starts mid-block (vLLM's test_get_num_blocks_to_allocate admits that exact fit).
        return min(cdiv(held, block_size_slots) + 1, cdiv(max_len_slots, block_size_slots))
    if kind == "chunked_local":
        assert chunk_slots is not None
        return cdiv(min(chunk_slots + max_in_flight_slots, max_len_slots), block_size_slots)
    if kind == "cross_attention":
        assert fixed_slots is not None
        return cdiv(fixed_slots, block_size_slots)
    return 1  # state: one page per request, whatever the length


@final
@dataclass(frozen=True, slots=True)
class ManagerInts:
    """A `ManagerSpec`'s sizes as plain ints of its slot unit, for hot paths past a typed
    entry (`kvunits.contracts.internal.manager_ints`; not public API). The suffix names the unit."""

    block_size_slots: int
    sliding_window_slots: int | None
    chunk_slots: int | None
    fixed_slots: int | None
    page_size_bytes: int


@final
@dataclass(frozen=True, slots=True)
class KernelInts:
    """A `KernelSpec`'s sizes as plain ints, for the launchers past their typed entry
    (`kvunits.contracts.internal.kernel_ints`; not public API). ``_tok`` counts the kernel's
    unit."""

    tokens_per_block: int
    block_size_slots: int
    pool: int
    sliding_window_tok: int | None
    chunk_tok: int | None
    kv_heads: int = 0
    head_size_k: int = 0
    head_size_v: int = 0


_NO_MANAGER_INTS: Final = ManagerInts(0, None, None, None, 0)
_NO_KERNEL_INTS: Final = KernelInts(0, 0, 0, None, None)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ManagerSpec(Generic[SlotUnit, GroupT]):
    """What the cache manager and the allocator of one layer read (derived; see module doc).

    Attributes:
        kind: the layer kind the manager implements.
        slot_unit: `PooledBlocks` (pooled layer) or `Tokens`.
        block_size: slots per cache block.
        pool: encoder tokens per slot (1 for a token layer).
        sliding_window: the manager window in slots (sliding window only), via `pool_window`.
        chunk: the chunk in slots (chunked local only), via `pool_chunk`.
        fixed_length: slots a request holds whatever its length (cross attention).
        state_size: bytes of one request's state (state layers).
        slot_size: bytes of one slot of one head where the layer packs it (an MLA latent,
            an indexer's fp8 key and its scales); None: ``(K + V) × dtype``.
        kv_heads: the layer's KV heads (1 for MLA's latent, an indexer and states).
        head_size_k, head_size_v: elements per head of K and V (0 where there is none).
        group: the layer group this view belongs to, once `group_layers` has grouped it
            (None for a view derived by hand); what the view computes for one group's table
            (a column) is refused by another group's. Statically, the second type parameter
            (a `kvunits.contracts.GroupMarker`, through ``LayerGroup.expect(unit, Marker)``).
    """

    kind: ManagedKind
    slot_unit: type[SlotUnit]
    block_size: BlockSize[SlotUnit]
    pool: PoolFactor
    kv_heads: KVHeads
    head_size_k: Elements
    head_size_v: Elements
    dtype: CacheDType
    sliding_window: Window[SlotUnit] | None = None
    chunk: Chunk[SlotUnit] | None = None
    fixed_length: SlotUnit | None = None
    state_size: Bytes | None = None
    slot_size: Bytes | None = None
    group: str | None = field(default=None, compare=False)
    # Plain ints for hot paths (kvunits.contracts.internal.manager_ints), computed by manager_view
    # (the default only lets a hand-built spec reach __post_init__'s clear refusal).
    _ints: ManagerInts = field(default=_NO_MANAGER_INTS, repr=False, compare=False)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # @final for mypy; at run time a subclass could override __post_init__ and skip the
        # derivation check, so subclassing is refused here too.
        raise SpecError("ManagerSpec is final: derive one with manager_view, do not subclass it")

    def __post_init__(self) -> None:
        _only_derived("ManagerSpec", "manager_view")
        assert self._ints is not _NO_MANAGER_INTS, "build a ManagerSpec with _manager(...)"
        if self.sliding_window is not None:
            check_kind(self.sliding_window, Window, self.slot_unit, "sliding_window")
        if self.chunk is not None:
            check_kind(self.chunk, Chunk, self.slot_unit, "chunk")
        if self.fixed_length is not None:
            check_quantity(self.fixed_length, self.slot_unit, "fixed_length")
        self.block_size.check(self.slot_unit)
        # The kind and its size travel together: a sliding spec read as a full one would be
        # charged at max_model_len (vLLM #39254), a full one given a window would free keys.
        assert (self.sliding_window is not None) == (self.kind == "sliding_window"), self.kind
        assert (self.chunk is not None) == (self.kind == "chunked_local"), self.kind

    if not TYPE_CHECKING:
        # The plain-int copies a view used to carry, gone from its public face: a clear error
        # naming the typed way (mypy reports them as [attr-defined]).
        block_size_slots = sliding_window_slots = chunk_slots = fixed_slots = page_size_bytes = (
            property(lambda self: _no_plain_ints(self, "manager_ints"))
        )

    def expect(self, unit: type[_U]) -> ManagerSpec[_U, GroupT]:
        """Narrow to the slot unit the caller works in; `UnitTypeError` if it is another."""
        if self.slot_unit is not unit:
            raise UnitTypeError(
                f"this {self.kind} manager counts {self.slot_unit.unit}, not {unit.unit}",
                expected=self.slot_unit.unit,
                got=unit.unit,
            )
        # mypy checks this body once per pair of constraints; the check above makes it exact.
        return self  # type: ignore[return-value,unused-ignore]

    @property
    def page_size(self) -> Bytes:
        """Bytes of one cache block of this layer: ``block_size × P × kv_heads × (K + V) ×
        dtype`` (or the state size)."""
        return Bytes(self._ints.page_size_bytes)

    @property
    def widened_kv_heads(self) -> KVHeads:
        """KV heads per slot the old vLLM way (heads × P); the page size is the same."""
        return KVHeads(self.kv_heads._value * self.pool.tokens_per_block)

    def max_admission_blocks_per_request(
        self, max_in_flight: SlotUnit, max_len: SlotUnit
    ) -> AdmissionCap:
        """The most cache blocks one request can hold at once in this layer.

        The one admission formula per kind (capacity planning and run-time admission both
        call it, so the two cannot drift: vLLM #40946): a sliding window holds its look-back
        plus a step, ``cdiv(min(W − 1 + max_in_flight, max_len), block_size) + 1``, never
        ``max_len``'s blocks (vLLM #39254); a chunk ``cdiv(min(C + max_in_flight, max_len),
        block_size)``; full attention ``cdiv(max_len, block_size)``.

        Args:
            max_in_flight: slots one step can touch (e.g. ``max_num_batched_tokens``).
            max_len: the longest sequence of one request, in slots.
        """
        unit, ints = self.slot_unit, self._ints
        in_flight = check_quantity(max_in_flight, unit, "max_in_flight")._value
        length = check_quantity(max_len, unit, "max_len")._value
        return AdmissionCap(
            _admission_blocks(
                self.kind,
                ints.block_size_slots,
                ints.sliding_window_slots,
                ints.chunk_slots,
                ints.fixed_slots,
                in_flight,
                length,
            )
        )

    def max_memory_per_request(self, max_in_flight: SlotUnit, max_len: SlotUnit) -> Bytes:
        """Bytes of cache one request can hold at once in this layer: its admission cap in
        pages of this layer's own page size."""
        return self.bytes_for(self.max_admission_blocks_per_request(max_in_flight, max_len))

    def block_table_width(self, max_len: SlotUnit) -> TableBlocks:
        """Entries of a request's block table: one per block of its longest sequence (evicted
        entries hold the null block), or the fixed count for cross attention and state.

        A table's width, not what a request holds: a sliding window holds
        `max_admission_blocks_per_request` of them at most.
        """
        length = check_quantity(max_len, self.slot_unit, "max_len")._value
        ints = self._ints
        if self.kind == "state":
            return TableBlocks(1)
        if ints.fixed_slots is not None:
            return TableBlocks(cdiv(ints.fixed_slots, ints.block_size_slots))
        return TableBlocks(cdiv(length, ints.block_size_slots))

    def window_blocks(self) -> SpanBlocks:
        """The most cache blocks this layer's window touches: ``cdiv(W − 1, block_size) + 1``
        (`kvunits.contracts.window_blocks`; a window may start mid-block).

        Raises:
            SpecError: not a sliding-window layer.
        """
        if self.sliding_window is None:
            raise SpecError(f"a {self.kind} manager has no sliding window ({self})")
        return window_blocks(self.sliding_window, self.block_size)  # type: ignore[arg-type,call-overload,unused-ignore]

    def block_of(self, position: Position[SlotUnit]) -> Position[CacheBlocks, GroupT]:
        """The block-table column holding slot ``position``: ``i // block_size`` (floor).

        The column keeps the view's group (`group`, and its marker's type): another group's
        block table refuses it.
        """
        column = block_of(position, self.block_size)  # type: ignore[arg-type,call-overload,unused-ignore]
        return column if self.group is None else Position._column(column._n, self.group)

    def bytes_for(self, blocks: CacheBlocks | AdmissionCap | PoolBlocks) -> Bytes:
        """Memory of ``blocks`` cache blocks of this layer (pages held, a request's cap, a
        pool): ``blocks × page_size``, exact."""
        if type(blocks) not in (CacheBlocks, AdmissionCap, PoolBlocks):
            check_quantity(blocks, CacheBlocks, "blocks")
        return Bytes(blocks._value * self._ints.page_size_bytes)

    def __str__(self) -> str:
        extra = ""
        if self.sliding_window is not None:
            extra = f", sliding_window {self.sliding_window}"
        elif self.chunk is not None:
            extra = f", chunk {self.chunk}"
        elif self.fixed_length is not None:
            extra = f", length {self.fixed_length}"
        return f"{self.kind} manager: {self.block_size}{extra}, page {self.page_size}"


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class KernelSpec(Generic[KernelUnit, GroupT]):
    """What the attention kernel of one layer reads (derived; see module doc).

    Attributes:
        seq_unit: `EncoderTokens` (pooled layer) or `Tokens`.
        tokens_per_block: positions per cache block: ``block_size × P`` for a pooled layer.
        pool: P; the kernel row of encoder token ``i`` of pooled slot ``s`` is ``s × P + i``.
        sliding_window: the model's own window (sliding window only), in ``seq_unit``.
        chunk: the model's chunk (chunked local only), in ``seq_unit``.
        kv_heads: the real KV heads (not widened by P).
        group: the layer group of the view once grouped (see `ManagerSpec.group`).
    """

    kind: ManagedKind
    seq_unit: type[KernelUnit]
    tokens_per_block: BlockSize[KernelUnit]
    pool: PoolFactor
    kv_heads: KVHeads
    head_size_k: Elements
    head_size_v: Elements
    dtype: CacheDType
    sliding_window: Window[KernelUnit] | None = None
    chunk: Chunk[KernelUnit] | None = None
    group: str | None = field(default=None, compare=False)
    # Plain ints for the launchers (kvunits.contracts.internal.kernel_ints), computed by
    # kernel_view.
    _ints: KernelInts = field(default=_NO_KERNEL_INTS, repr=False, compare=False)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise SpecError("KernelSpec is final: derive one with kernel_view, do not subclass it")

    def __post_init__(self) -> None:
        _only_derived("KernelSpec", "kernel_view")
        assert self._ints is not _NO_KERNEL_INTS, "build a KernelSpec with _kernel(...)"
        self.tokens_per_block.check(self.seq_unit, "tokens_per_block")
        if self.sliding_window is not None:
            check_kind(self.sliding_window, Window, self.seq_unit, "sliding_window")
        if self.chunk is not None:
            check_kind(self.chunk, Chunk, self.seq_unit, "chunk")

    if not TYPE_CHECKING:
        block_size_slots = sliding_window_tok = chunk_tok = property(
            lambda self: _no_plain_ints(self, "kernel_ints")
        )

    def expect(self, unit: type[_K]) -> KernelSpec[_K, GroupT]:
        """Narrow to the kernel unit the caller works in; `UnitTypeError` if it is another."""
        if self.seq_unit is not unit:
            raise UnitTypeError(
                f"this {self.kind} kernel counts {self.seq_unit.unit}, not {unit.unit}",
                expected=self.seq_unit.unit,
                got=unit.unit,
            )
        # mypy checks this body once per pair of constraints; the check above makes it exact.
        return self  # type: ignore[return-value,unused-ignore]

    def block_of(self, position: Position[KernelUnit]) -> Position[CacheBlocks, GroupT]:
        """The block-table column holding kernel position ``position``:
        ``i // tokens_per_block`` (floor; ``block_size × P`` positions per block); it keeps
        the view's group."""
        column = block_of(position, self.tokens_per_block)  # type: ignore[arg-type,call-overload,unused-ignore]
        return column if self.group is None else Position._column(column._n, self.group)

    def window_blocks(self) -> SpanBlocks:
        """The most cache blocks a query's window reads: ``cdiv(W − 1, tokens_per_block) + 1``.

        Raises:
            SpecError: not a sliding-window layer.
        """
        if self.sliding_window is None:
            raise SpecError(f"a {self.kind} kernel has no sliding window ({self})")
        return window_blocks(self.sliding_window, self.tokens_per_block)  # type: ignore[arg-type,call-overload,unused-ignore]

    def __str__(self) -> str:
        window = self.sliding_window
        extra = f", sliding_window {window}" if window is not None else ""
        extra += f", chunk {self.chunk}" if self.chunk is not None else ""
        heads = self.kv_heads._value
        return f"{self.kind} kernel: {self.tokens_per_block}{extra}, {heads} kv heads"


CachedLayer: TypeAlias = (
    FullAttentionLayer | SlidingWindowLayer | ChunkedLocalLayer | CrossAttentionLayer
)


def _no_plain_ints(view: object, internal: str) -> NoReturn:
    raise UnitAttributeError(
        f"{type(view).__name__} keeps no plain-int copies of its sizes: ask the view (its "
        "typed fields, page_size, window_blocks(), block_of(), "
        "max_admission_blocks_per_request()), or, past a typed entry, read "
        f"kvunits.contracts.internal.{internal}(spec)",
        expected="a typed field or method of the view",
        got="a plain-int attribute",
    )


def _manager(**fields: Any) -> ManagerSpec[Any]:
    """Build a `ManagerSpec` with its plain ints (inside `_deriving`)."""
    bs = fields["block_size"]._n
    window, chunk, fixed = (
        fields.get("sliding_window"),
        fields.get("chunk"),
        fields.get("fixed_length"),
    )
    state, slot = fields.get("state_size"), fields.get("slot_size")
    if state is not None:
        page = state._value
    elif slot is not None:
        page = bs * fields["pool"].tokens_per_block * fields["kv_heads"]._value * slot._value
    else:
        page = (
            bs
            * fields["pool"].tokens_per_block
            * fields["kv_heads"]._value
            * (fields["head_size_k"]._value + fields["head_size_v"]._value)
            * fields["dtype"].itemsize_bytes
        )
    ints = ManagerInts(
        block_size_slots=bs,
        sliding_window_slots=None if window is None else window._n,
        chunk_slots=None if chunk is None else chunk._n,
        fixed_slots=None if fixed is None else fixed._value,
        page_size_bytes=page,
    )
    return ManagerSpec(_ints=ints, **fields)


def _kernel(**fields: Any) -> KernelSpec[Any]:
    """Build a `KernelSpec` with its plain ints (inside `_deriving`)."""
    rows, p = fields["tokens_per_block"]._n, fields["pool"].tokens_per_block
    window, chunk = fields.get("sliding_window"), fields.get("chunk")
    ints = KernelInts(
        tokens_per_block=rows,
        block_size_slots=rows // p,
        pool=p,
        sliding_window_tok=None if window is None else window._n,
        chunk_tok=None if chunk is None else chunk._n,
        kv_heads=fields["kv_heads"]._value,
        head_size_k=fields["head_size_k"]._value,
        head_size_v=fields["head_size_v"]._value,
    )
    return KernelSpec(_ints=ints, **fields)


def _check_block_size(block_size_slots: int) -> int:
    if type(block_size_slots) is not int:
        raise UnitTypeError(
            f"block_size_slots must be an int >= 1 (slots per cache block), got "
            f"{describe(block_size_slots)}",
            field="block_size_slots",
            expected="int >= 1",
            got=describe(block_size_slots),
        )
    if block_size_slots < 1:
        raise UnitValueError(
            f"block_size_slots must be >= 1 (slots per cache block), got {block_size_slots}",
            field="block_size_slots",
            expected="int >= 1",
            got=str(block_size_slots),
        )
    return block_size_slots


def manager_view(
    layer: LayerSpec, block_size_slots: int, *, cache_dtype: CacheDType | None = None
) -> ManagerSpec[PooledBlocks] | ManagerSpec[Tokens]:
    """Derive the manager's view of a layer: the only way to build a `ManagerSpec`.

    A pooled layer's window goes through `pool_window` (tight residency bound), its chunk
    through `pool_chunk` (exact), its cross-attention length through `pool_length`; a token
    layer's pass through unchanged.

    Args:
        layer: the layer as the model declares it.
        block_size_slots: slots per cache block (the engine's block size).
        cache_dtype: overrides an attention layer's dtype (the engine's ``cache_dtype``);
            a mixer's state keeps its own dtypes, as vLLM's attention ``cache_dtype`` never
            applies to Mamba states (they have ``mamba_cache_dtype`` of their own), and so
            does an indexer's fp8 key cache.

    Raises:
        SpecError: the layer keeps no cache of its own (``encoder_only``, ``kv_shared``).
    """
    bs = _check_block_size(block_size_slots)
    with _deriving():
        if isinstance(layer, (EncoderOnlyLayer, KVSharedLayer)):
            article = "an" if layer.kind == "encoder_only" else "a"
            raise SpecError(
                f"{article} {layer.kind} layer keeps no KV cache of its own; it has no manager view"
            )
        if isinstance(layer, StateMixerLayer):
            # One page per request holds the whole state: its tensors, back to back.
            return _manager(
                kind="state",
                slot_unit=Tokens,
                block_size=BlockSize(bs, Tokens),
                pool=PoolFactor(1),
                kv_heads=KVHeads(1),
                head_size_k=Elements(0),
                head_size_v=Elements(0),
                dtype=layer.ssm_dtype,
                state_size=layer.state_size,
            )
        if isinstance(layer, StateLayer):
            return _manager(
                kind="state",
                slot_unit=Tokens,
                block_size=BlockSize(bs, Tokens),
                pool=PoolFactor(1),
                kv_heads=KVHeads(1),
                head_size_k=Elements(0),
                head_size_v=Elements(0),
                dtype=CacheDType.float32 if cache_dtype is None else cache_dtype,
                state_size=layer.state_size,
            )
        if isinstance(layer, MLALayer):
            dtype = layer.dtype if cache_dtype is None else cache_dtype
            return _manager(
                kind="full_attention",
                slot_unit=Tokens,
                block_size=BlockSize(bs, Tokens),
                pool=PoolFactor(1),
                kv_heads=KVHeads(1),
                head_size_k=layer.kv_lora_rank + layer.qk_rope_head_dim,
                head_size_v=Elements(0),
                dtype=dtype,
                slot_size=layer.slot_size(dtype),
            )
        if isinstance(layer, IndexerLayer):
            # Every token of the request, one head whole on every rank; the engine's cache
            # dtype does not apply (the indexer always stores fp8 keys and float32 scales).
            return _manager(
                kind="full_attention",
                slot_unit=Tokens,
                block_size=BlockSize(bs, Tokens),
                pool=PoolFactor(1),
                kv_heads=KVHeads(1),
                head_size_k=layer.head_size,
                head_size_v=Elements(0),
                dtype=layer.dtype,
                slot_size=layer.slot_size,
            )
        dtype = layer.dtype if cache_dtype is None else cache_dtype
        common: dict[str, Any] = {
            "kind": layer.kind,
            "kv_heads": layer.kv_heads,
            "head_size_k": layer.head_size_k,
            "head_size_v": layer.head_size_v_or_k,
            "dtype": dtype,
        }
        if isinstance(layer, CrossAttentionLayer):
            pool = layer.pool_factor
            return _manager(
                slot_unit=PooledBlocks,
                block_size=BlockSize(bs, PooledBlocks),
                pool=pool,
                fixed_length=pool_length(layer.encoder_length, pool),
                **common,
            )
        if layer.pool is not None:
            pool = layer.pool
            window: Window[PooledBlocks] | None = None
            chunk: Chunk[PooledBlocks] | None = None
            if isinstance(layer, SlidingWindowLayer):
                window = pool_window(_in(layer.sliding_window, Window, EncoderTokens), pool)
            if isinstance(layer, ChunkedLocalLayer):
                # P divides the chunk (the layer checks it): pool_chunk is exact.
                chunk = _whole_blocks(pool_chunk(_in(layer.chunk, Chunk, EncoderTokens), pool), bs)
            return _manager(
                slot_unit=PooledBlocks,
                block_size=BlockSize(bs, PooledBlocks),
                pool=pool,
                sliding_window=window,
                chunk=chunk,
                **common,
            )
        return _manager(
            slot_unit=Tokens,
            block_size=BlockSize(bs, Tokens),
            pool=PoolFactor(1),
            sliding_window=(
                _in(layer.sliding_window, Window, Tokens)
                if isinstance(layer, SlidingWindowLayer)
                else None
            ),
            chunk=(
                _whole_blocks(_in(layer.chunk, Chunk, Tokens), bs)
                if isinstance(layer, ChunkedLocalLayer)
                else None
            ),
            **common,
        )


def kernel_view(
    layer: LayerSpec, block_size_slots: int, *, cache_dtype: CacheDType | None = None
) -> KernelSpec[EncoderTokens] | KernelSpec[Tokens]:
    """Derive the kernel's view of an attention layer: the only way to build a `KernelSpec`.

    A pooled layer's cache block holds ``block_size × P`` encoder tokens (`expand_block_size`);
    the window stays the model's own, in encoder tokens, and ``kv_heads`` stay real.

    Raises:
        SpecError: the layer has no attention cache the kernels read (encoder_only,
            kv_shared, state and the recurrent mixers).
    """
    bs = _check_block_size(block_size_slots)
    with _deriving():
        if isinstance(layer, (EncoderOnlyLayer, KVSharedLayer, StateLayer, StateMixerLayer)):
            raise SpecError(f"a {layer.kind} layer has no paged KV cache for the kernels")
        if isinstance(layer, MLALayer):
            return _kernel(
                kind="full_attention",
                seq_unit=Tokens,
                tokens_per_block=BlockSize(bs, Tokens),
                pool=PoolFactor(1),
                kv_heads=KVHeads(1),
                head_size_k=layer.kv_lora_rank + layer.qk_rope_head_dim,
                head_size_v=Elements(0),
                dtype=layer.dtype if cache_dtype is None else cache_dtype,
            )
        if isinstance(layer, IndexerLayer):
            return _kernel(
                kind="full_attention",
                seq_unit=Tokens,
                tokens_per_block=BlockSize(bs, Tokens),
                pool=PoolFactor(1),
                kv_heads=KVHeads(1),
                head_size_k=layer.head_size,
                head_size_v=Elements(0),
                dtype=layer.dtype,
            )
        common: dict[str, Any] = {
            "kind": layer.kind,
            "kv_heads": layer.kv_heads,
            "head_size_k": layer.head_size_k,
            "head_size_v": layer.head_size_v_or_k,
            "dtype": layer.dtype if cache_dtype is None else cache_dtype,
        }
        pooled = isinstance(layer, CrossAttentionLayer) or layer.pool is not None
        if pooled:
            pool = layer.pool if layer.pool is not None else PoolFactor(1)
            return _kernel(
                seq_unit=EncoderTokens,
                tokens_per_block=expand_block_size(BlockSize(bs, PooledBlocks), pool),
                pool=pool,
                sliding_window=(
                    _in(layer.sliding_window, Window, EncoderTokens)
                    if isinstance(layer, SlidingWindowLayer)
                    else None
                ),
                chunk=(
                    _in(layer.chunk, Chunk, EncoderTokens)
                    if isinstance(layer, ChunkedLocalLayer)
                    else None
                ),
                **common,
            )
        return _kernel(
            seq_unit=Tokens,
            tokens_per_block=BlockSize(bs, Tokens),
            pool=PoolFactor(1),
            sliding_window=(
                _in(layer.sliding_window, Window, Tokens)
                if isinstance(layer, SlidingWindowLayer)
                else None
            ),
            chunk=_in(layer.chunk, Chunk, Tokens) if isinstance(layer, ChunkedLocalLayer) else None,
            **common,
        )


def _whole_blocks(chunk: Chunk[_U], block_size_slots: int) -> Chunk[_U]:
    """A chunk must be a whole number of cache blocks for its admission cap to be a bound.

    ``cdiv(min(chunk + max_in_flight, max_len), block_size)`` assumes every chunk starts on a
    block boundary; otherwise a request holds more blocks than its cap (block size 16, chunk
    24, two slots in flight: slots 24-48 span blocks 1-3, the cap says 2), the plan would
    promise more requests than the pool holds, and reservations would not protect them.
    """
    if chunk._n % block_size_slots:
        raise SpecError(
            f"chunk of {chunk} is not a whole number of cache blocks of {block_size_slots} "
            f"{chunk.unit.unit}: the chunked-local admission cap would not bound what a "
            f"request holds; use a block size that divides the chunk"
        )
    return chunk


def _in(value: Any, kind: type[Any], unit: type[Any]) -> Any:
    # The layer checked its kind and unit; re-checked here, as the views' own entry.
    return check_kind(value, kind, unit, kind.kind)


def admission_cap(spec: ManagerSpec[Any], max_in_flight_slots: int, max_len_slots: int) -> int:
    """`ManagerSpec.max_admission_blocks_per_request` on plain ints, for the runtime's
    admission path (slots of the spec's own unit in, cache blocks out). Internal:
    `kvunits.contracts.internal.admission_cap`."""
    ints = spec._ints
    return _admission_blocks(
        spec.kind,
        ints.block_size_slots,
        ints.sliding_window_slots,
        ints.chunk_slots,
        ints.fixed_slots,
        max_in_flight_slots,
        max_len_slots,
    )


_M = TypeVar("_M", ManagerSpec[Any], KernelSpec[Any])


def bind_group(spec: _M, group: str) -> _M:
    """``spec`` as the view of layer group ``group`` (`group_layers` binds every view it
    groups): equal to ``spec``, and what it computes for a block table keeps the group."""
    if spec.group == group:
        return spec
    with _deriving():
        return replace(spec, group=group)


def manager_ints(spec: ManagerSpec[Any]) -> ManagerInts:
    """A manager view's sizes as plain ints of its slot unit (internal: runtime's managers
    and core read them once, past their typed entry)."""
    return spec._ints


def kernel_ints(spec: KernelSpec[Any]) -> KernelInts:
    """A kernel view's sizes as plain ints (internal: the launchers read them once, after
    checking the spec)."""
    return spec._ints
