"""The two views of a layer: what the cache manager reads and what the kernel reads.

A `ManagerSpec` counts the sequence in cache slots (`PooledBlocks` for a pooled layer,
`Tokens` otherwise); a `KernelSpec` counts it in the kernel's unit (`EncoderTokens` or
`Tokens`). They are different generic types, so mypy rejects one where the other is
expected, and neither can be built directly: `manager_view` and `kernel_view` derive them
from a layer spec through the named conversions, which is the only place P is applied.

Example:
    >>> layer = SlidingWindowLayer(sliding_window=EncoderTokens(750), pool=PoolFactor(4),
    ...                            kv_heads=32, head_size=64)
    >>> m = manager_view(layer, block_size_slots=16).expect(PooledBlocks)
    >>> str(m.sliding_window), str(m.page_size)
    ('189 pooled_block', '524288 byte')
    >>> str(m.max_admission_blocks_per_request(PooledBlocks(1), PooledBlocks(8192)))
    '13 cache_block'
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeAlias, TypeVar, final

from ._convert import cdiv, expand_block_size, pool_length, pool_window
from ._describe import describe
from ._dtype import CacheDType
from ._factors import BlockSize, PoolFactor
from ._layers import (
    ChunkedLocalLayer,
    CrossAttentionLayer,
    EncoderOnlyLayer,
    FullAttentionLayer,
    KVSharedLayer,
    LayerSpec,
    MLALayer,
    SlidingWindowLayer,
    StateLayer,
)
from ._quantity import (
    Bytes,
    CacheBlocks,
    EncoderTokens,
    PooledBlocks,
    SlotUnit,
    Tokens,
    check_quantity,
)
from ._state import StateMixerLayer
from .errors import SpecError, UnitTypeError, UnitValueError

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
    planning) and the runtime's admission ledger (through `contracts.internal.admission_cap`)
    both come here.
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
@dataclass(frozen=True, slots=True, kw_only=True)
class ManagerSpec(Generic[SlotUnit]):
    """What the cache manager and the allocator of one layer read (derived; see module doc).

    Attributes:
        kind: the layer kind the manager implements.
        slot_unit: `PooledBlocks` (pooled layer) or `Tokens`.
        block_size: slots per cache block.
        pool: encoder tokens per slot (1 for a token layer).
        sliding_window: the manager window in slots (sliding window only), via `pool_window`.
        chunk: the chunk in slots (chunked local only).
        fixed_length: slots a request holds whatever its length (cross attention).
        state_size: bytes of one request's state (state layers).
    """

    kind: ManagedKind
    slot_unit: type[SlotUnit]
    block_size: BlockSize[SlotUnit]
    pool: PoolFactor
    kv_heads: int
    head_size_k: int
    head_size_v: int
    dtype: CacheDType
    sliding_window: SlotUnit | None = None
    chunk: SlotUnit | None = None
    fixed_length: SlotUnit | None = None
    state_size: Bytes | None = None
    # Plain ints for hot paths, computed once here.
    block_size_slots: int = field(init=False)
    sliding_window_slots: int | None = field(init=False)
    chunk_slots: int | None = field(init=False)
    fixed_slots: int | None = field(init=False)
    page_size_bytes: int = field(init=False)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # @final for mypy; at run time a subclass could override __post_init__ and skip the
        # derivation check, so subclassing is refused here too.
        raise SpecError("ManagerSpec is final: derive one with manager_view, do not subclass it")

    def __post_init__(self) -> None:
        _only_derived("ManagerSpec", "manager_view")
        for name in ("sliding_window", "chunk", "fixed_length"):
            value = getattr(self, name)
            if value is not None:
                check_quantity(value, self.slot_unit, name)
        self.block_size.check(self.slot_unit)
        set_ = object.__setattr__
        set_(self, "block_size_slots", self.block_size.slots)
        window = self.sliding_window
        set_(self, "sliding_window_slots", None if window is None else window.value)
        set_(self, "chunk_slots", None if self.chunk is None else self.chunk.value)
        set_(self, "fixed_slots", None if self.fixed_length is None else self.fixed_length.value)
        if self.state_size is not None:
            page = self.state_size.value
        else:
            page = (
                self.block_size.slots
                * self.pool.tokens_per_block
                * self.kv_heads
                * (self.head_size_k + self.head_size_v)
                * self.dtype.itemsize_bytes
            )
        set_(self, "page_size_bytes", page)

    def expect(self, unit: type[_U]) -> ManagerSpec[_U]:
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
        return Bytes(self.page_size_bytes)

    @property
    def widened_kv_heads(self) -> int:
        """KV heads per slot the old vLLM way (heads × P); the page size is the same."""
        return self.kv_heads * self.pool.tokens_per_block

    def max_admission_blocks_per_request(
        self, max_in_flight: SlotUnit, max_len: SlotUnit
    ) -> CacheBlocks:
        """The most cache blocks one request can hold at once in this layer.

        Args:
            max_in_flight: slots scheduled in one step (e.g. ``max_num_batched_tokens``).
            max_len: the longest sequence of one request, in slots.
        """
        unit = self.slot_unit
        in_flight = check_quantity(max_in_flight, unit, "max_in_flight").value
        length = check_quantity(max_len, unit, "max_len").value
        return CacheBlocks(
            _admission_blocks(
                self.kind,
                self.block_size_slots,
                self.sliding_window_slots,
                self.chunk_slots,
                self.fixed_slots,
                in_flight,
                length,
            )
        )

    def max_memory_per_request(self, max_in_flight: SlotUnit, max_len: SlotUnit) -> Bytes:
        """Bytes of cache one request can hold at once in this layer."""
        cap = self.max_admission_blocks_per_request(max_in_flight, max_len)
        return Bytes(cap.value * self.page_size_bytes)

    def block_table_width(self, max_len: SlotUnit) -> CacheBlocks:
        """Entries of a request's block table: one per block of its longest sequence (evicted
        entries hold the null block), or the fixed count for cross attention and state."""
        length = check_quantity(max_len, self.slot_unit, "max_len").value
        if self.kind == "state":
            return CacheBlocks(1)
        if self.fixed_slots is not None:
            return CacheBlocks(cdiv(self.fixed_slots, self.block_size_slots))
        return CacheBlocks(cdiv(length, self.block_size_slots))

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
class KernelSpec(Generic[KernelUnit]):
    """What the attention kernel of one layer reads (derived; see module doc).

    Attributes:
        seq_unit: `EncoderTokens` (pooled layer) or `Tokens`.
        tokens_per_block: positions per cache block: ``block_size × P`` for a pooled layer.
        pool: P; the kernel row of encoder token ``i`` of pooled slot ``s`` is ``s × P + i``.
        sliding_window: the model's own window (sliding window only), in ``seq_unit``.
        chunk: the model's chunk (chunked local only), in ``seq_unit``.
        kv_heads: the real KV heads (not widened by P).
    """

    kind: ManagedKind
    seq_unit: type[KernelUnit]
    tokens_per_block: BlockSize[KernelUnit]
    pool: PoolFactor
    kv_heads: int
    head_size_k: int
    head_size_v: int
    dtype: CacheDType
    sliding_window: KernelUnit | None = None
    chunk: KernelUnit | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise SpecError("KernelSpec is final: derive one with kernel_view, do not subclass it")

    def __post_init__(self) -> None:
        _only_derived("KernelSpec", "kernel_view")
        self.tokens_per_block.check(self.seq_unit, "tokens_per_block")
        for name in ("sliding_window", "chunk"):
            value = getattr(self, name)
            if value is not None:
                check_quantity(value, self.seq_unit, name)

    def expect(self, unit: type[_K]) -> KernelSpec[_K]:
        """Narrow to the kernel unit the caller works in; `UnitTypeError` if it is another."""
        if self.seq_unit is not unit:
            raise UnitTypeError(
                f"this {self.kind} kernel counts {self.seq_unit.unit}, not {unit.unit}",
                expected=self.seq_unit.unit,
                got=unit.unit,
            )
        # mypy checks this body once per pair of constraints; the check above makes it exact.
        return self  # type: ignore[return-value,unused-ignore]

    def __str__(self) -> str:
        window = self.sliding_window
        extra = f", sliding_window {window}" if window is not None else ""
        extra += f", chunk {self.chunk}" if self.chunk is not None else ""
        return f"{self.kind} kernel: {self.tokens_per_block}{extra}, {self.kv_heads} kv heads"


CachedLayer: TypeAlias = (
    FullAttentionLayer | SlidingWindowLayer | ChunkedLocalLayer | CrossAttentionLayer
)


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

    A pooled layer's window goes through `pool_window` (tight residency bound), its
    cross-attention length through `pool_length`; a token layer's pass through unchanged.

    Args:
        layer: the layer as the model declares it.
        block_size_slots: slots per cache block (the engine's block size).
        cache_dtype: overrides an attention layer's dtype (the engine's ``cache_dtype``);
            a mixer's state keeps its own dtypes, as vLLM's attention ``cache_dtype`` never
            applies to Mamba states (they have ``mamba_cache_dtype`` of their own).

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
            return ManagerSpec(
                kind="state",
                slot_unit=Tokens,
                block_size=BlockSize(bs, Tokens),
                pool=PoolFactor(1),
                kv_heads=1,
                head_size_k=0,
                head_size_v=0,
                dtype=layer.ssm_dtype,
                state_size=layer.state_size,
            )
        if isinstance(layer, StateLayer):
            return ManagerSpec(
                kind="state",
                slot_unit=Tokens,
                block_size=BlockSize(bs, Tokens),
                pool=PoolFactor(1),
                kv_heads=1,
                head_size_k=0,
                head_size_v=0,
                dtype=CacheDType.float32 if cache_dtype is None else cache_dtype,
                state_size=layer.state_size,
            )
        if isinstance(layer, MLALayer):
            return ManagerSpec(
                kind="full_attention",
                slot_unit=Tokens,
                block_size=BlockSize(bs, Tokens),
                pool=PoolFactor(1),
                kv_heads=1,
                head_size_k=layer.kv_lora_rank + layer.qk_rope_head_dim,
                head_size_v=0,
                dtype=layer.dtype if cache_dtype is None else cache_dtype,
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
            return ManagerSpec(
                slot_unit=PooledBlocks,
                block_size=BlockSize(bs, PooledBlocks),
                pool=pool,
                fixed_length=pool_length(layer.encoder_length, pool),
                **common,
            )
        if layer.pool is not None:
            pool = layer.pool
            window = chunk = None
            if isinstance(layer, SlidingWindowLayer):
                window = pool_window(_encoder(layer.sliding_window), pool)
            if isinstance(layer, ChunkedLocalLayer):
                # P divides the chunk (the layer checks it), so this length is exact.
                chunk = _whole_blocks(pool_length(_encoder(layer.chunk), pool), bs)
            return ManagerSpec(
                slot_unit=PooledBlocks,
                block_size=BlockSize(bs, PooledBlocks),
                pool=pool,
                sliding_window=window,
                chunk=chunk,
                **common,
            )
        return ManagerSpec(
            slot_unit=Tokens,
            block_size=BlockSize(bs, Tokens),
            pool=PoolFactor(1),
            sliding_window=(
                _token(layer.sliding_window) if isinstance(layer, SlidingWindowLayer) else None
            ),
            chunk=(
                _whole_blocks(_token(layer.chunk), bs)
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
            return KernelSpec(
                kind="full_attention",
                seq_unit=Tokens,
                tokens_per_block=BlockSize(bs, Tokens),
                pool=PoolFactor(1),
                kv_heads=1,
                head_size_k=layer.kv_lora_rank + layer.qk_rope_head_dim,
                head_size_v=0,
                dtype=layer.dtype if cache_dtype is None else cache_dtype,
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
            return KernelSpec(
                seq_unit=EncoderTokens,
                tokens_per_block=expand_block_size(BlockSize(bs, PooledBlocks), pool),
                pool=pool,
                sliding_window=(
                    _encoder(layer.sliding_window)
                    if isinstance(layer, SlidingWindowLayer)
                    else None
                ),
                chunk=_encoder(layer.chunk) if isinstance(layer, ChunkedLocalLayer) else None,
                **common,
            )
        return KernelSpec(
            seq_unit=Tokens,
            tokens_per_block=BlockSize(bs, Tokens),
            pool=PoolFactor(1),
            sliding_window=(
                _token(layer.sliding_window) if isinstance(layer, SlidingWindowLayer) else None
            ),
            chunk=_token(layer.chunk) if isinstance(layer, ChunkedLocalLayer) else None,
            **common,
        )


def _whole_blocks(chunk: _U, block_size_slots: int) -> _U:
    """A chunk must be a whole number of cache blocks for its admission cap to be a bound.

    ``cdiv(min(chunk + max_in_flight, max_len), block_size)`` assumes every chunk starts on a
    block boundary; otherwise a request holds more blocks than its cap (block size 16, chunk
    24, two slots in flight: slots 24-48 span blocks 1-3, the cap says 2), the plan would
    promise more requests than the pool holds, and reservations would not protect them.
    """
    if chunk.value % block_size_slots:
        raise SpecError(
            f"chunk of {chunk} is not a whole number of cache blocks of {block_size_slots} "
            f"{chunk.unit}: the chunked-local admission cap would not bound what a request "
            f"holds; use a block size that divides the chunk"
        )
    return chunk


def _encoder(value: EncoderTokens | Tokens) -> EncoderTokens:
    return check_quantity(value, EncoderTokens, "sliding_window")


def _token(value: EncoderTokens | Tokens) -> Tokens:
    return check_quantity(value, Tokens, "sliding_window")


def admission_cap(spec: ManagerSpec[Any], max_in_flight_slots: int, max_len_slots: int) -> int:
    """`ManagerSpec.max_admission_blocks_per_request` on plain ints, for the runtime's
    admission path (slots of the spec's own unit in, cache blocks out)."""
    return _admission_blocks(
        spec.kind,
        spec.block_size_slots,
        spec.sliding_window_slots,
        spec.chunk_slots,
        spec.fixed_slots,
        max_in_flight_slots,
        max_len_slots,
    )
