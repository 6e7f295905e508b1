"""vLLM 0.33's per-layer KV-cache specs, read with their units, and written back.

vLLM states a layer's cache in plain ints (``vllm/v1/kv_cache_interface.py``): a spec's
``block_size``, ``sliding_window`` and ``attention_chunk_size`` count *slots*, and what a slot
holds is ``tokens_per_state``: 1 for an ordinary layer (a slot is a token), ``Fraction(1, P)``
for a block-pooled one (Voxtral Realtime's causal Whisper encoder, ``whisper_causal.py``: a slot
is a pooled block of P encoder tokens, so the window and the block size count pooled blocks).
`VllmSpec` is that spec with each number's unit attached at the crossing:

============================ ======================================================
vLLM field                   here
============================ ======================================================
``tokens_per_state`` = 1/P   ``pool`` = `PoolFactor` (P), ``slot_unit`` = `PooledBlocks`
``block_size``               `BlockSize` of the slot unit (slots per cache block)
``sliding_window``           `Window` of the slot unit (the *manager's* window)
``attention_chunk_size``     `Chunk` of the slot unit
``num_kv_heads``             `RankKVHeads` (one tensor-parallel rank's share)
``page_size_bytes``          `RankBytes` (a page of one rank)
============================ ======================================================

The kernel's side follows by the named conversions: a cache block holds ``block_size × P``
encoder tokens (`VllmSpec.kernel_block_size`), and a manager window of S slots serves a kernel
window of at most ``(S − 1)·P + 1`` encoder tokens (`VllmSpec.widest_kernel_window`,
`kvunits.contracts.unpool_window`). `VllmSpec.manager_view` gives kvunits' own `ManagerSpec` of
the same numbers, whose admission cap and page are kvunits' formulas.

The same spec travels three ways, none of which imports vLLM here: a live vLLM object
(`from_vllm`, duck-typed on its fields), its JSON form (`spec_to_dict` writes it from a live
object, `from_vllm_dict` reads it, with vLLM or without), and back from a kvunits layer
(`to_vllm_dict`; `to_vllm` builds vLLM's own class, importing vLLM then).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final, Literal, TypeAlias, final

from kvunits.contracts import (
    AdmissionCap,
    BlockSize,
    CacheDType,
    Chunk,
    ChunkedLocalLayer,
    CrossAttentionLayer,
    Elements,
    EncoderTokens,
    FullAttentionLayer,
    KernelSpec,
    KVHeads,
    LayerSpec,
    ManagerSpec,
    MLALayer,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    SpecError,
    Tokens,
    Window,
    expand_block_size,
    manager_view,
    pool_window,
    unpool_window,
)
from kvunits.contracts.deploy import (
    Parallelism,
    RankBytes,
    RankKVHeads,
    kv_heads_of,
    kv_heads_per_rank,
    page_size_per_rank,
)
from kvunits.contracts.internal import cdiv

#: What a vLLM spec class manages, as kvunits names layer kinds (``mla`` and ``state``
#: included); a class outside this table (or a subclass of none of them) is ``unknown``.
VllmKind: TypeAlias = Literal[
    "full_attention",
    "sliding_window",
    "chunked_local",
    "cross_attention",
    "mla",
    "sliding_window_mla",
    "state",
    "encoder_only",
    "unknown",
]

#: vLLM 0.33's spec classes by name, most derived first (a subclass keeps its base's kind:
#: ``HiddenStateCacheSpec`` is an ``MLAAttentionSpec``). ``vllm/v1/kv_cache_interface.py``.
SPEC_KINDS: Final[dict[str, VllmKind]] = {
    "SlidingWindowMLASpec": "sliding_window_mla",
    "MLAAttentionSpec": "mla",
    "SinkFullAttentionSpec": "full_attention",
    "RSWASpec": "full_attention",
    "FullAttentionSpec": "full_attention",
    "ChunkedLocalAttentionSpec": "chunked_local",
    "SlidingWindowSpec": "sliding_window",
    "CrossAttentionSpec": "cross_attention",
    "EncoderOnlyAttentionSpec": "encoder_only",
    "MambaSpec": "state",
}

#: torch dtype names of vLLM's ``dtype`` field, as kvunits' cache dtypes.
_TORCH_DTYPES: Final[dict[str, CacheDType]] = {
    "bfloat16": CacheDType.bfloat16,
    "float16": CacheDType.float16,
    "half": CacheDType.float16,
    "float32": CacheDType.float32,
    "float": CacheDType.float32,
    "float8_e4m3fn": CacheDType.fp8_e4m3,
    "float8_e5m2": CacheDType.fp8_e5m2,
    # vLLM stores an fp8 cache as uint8 bytes (``STR_DTYPE_TO_TORCH_DTYPE["fp8"]``).
    "uint8": CacheDType.fp8_e4m3,
}

#: Bytes per element of the torch dtypes a vLLM spec may state (its page formula's factor).
_ITEMSIZE: Final[dict[str, int]] = {
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "float32": 4,
    "float": 4,
    "float64": 8,
    "float8_e4m3fn": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2": 1,
    "float8_e5m2fnuz": 1,
    "uint8": 1,
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
}

SlotBlockSize: TypeAlias = BlockSize[PooledBlocks] | BlockSize[Tokens]
SlotWindow: TypeAlias = Window[PooledBlocks] | Window[Tokens]
SlotChunk: TypeAlias = Chunk[PooledBlocks] | Chunk[Tokens]


@final
@dataclass(frozen=True, slots=True)
class VllmSpec:
    """One layer's vLLM KV-cache spec with every number's unit made explicit.

    Attributes:
        spec_type: vLLM's class name (``"SlidingWindowSpec"``).
        kind: what vLLM's manager does with the layer (`SPEC_KINDS`).
        slot_unit: what one slot of the spec counts: `PooledBlocks` when
            ``tokens_per_state = 1/P`` with P > 1, else `Tokens`.
        pool: P, encoder tokens per slot (1 for an ordinary layer).
        block_size: slots per cache block, in ``slot_unit``.
        kv_heads: KV heads one rank stores (None: a state spec).
        head_size_k: elements per head of K (None: a state spec).
        head_size_v: elements per head of V (0 for MLA's latent).
        dtype: the torch dtype name vLLM stores (``"bfloat16"``), None for a state.
        sliding_window: the manager's window, in ``slot_unit`` (a ``SlidingWindowSpec``, or a
            ``FullAttentionSpec`` that records the window its kernel applies).
        chunk: the chunk of chunked local attention, in ``slot_unit``.
        page_size: one cache block of one layer on one rank, as vLLM computes it (padding
            included).
        unpadded_page_size: the same without vLLM's padding (``page_size_padded``).
        fields: vLLM's fields as JSON values (`spec_to_dict`'s ``"fields"``), for writing back.
    """

    spec_type: str
    kind: VllmKind
    slot_unit: type[PooledBlocks] | type[Tokens]
    pool: PoolFactor
    block_size: SlotBlockSize
    kv_heads: RankKVHeads | None
    head_size_k: Elements | None
    head_size_v: Elements | None
    dtype: str | None
    sliding_window: SlotWindow | None
    chunk: SlotChunk | None
    page_size: RankBytes
    unpadded_page_size: RankBytes
    fields: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def block_size_slots(self) -> int:
        """``block_size`` as vLLM's plain int: slots of ``slot_unit`` per cache block."""
        return _count(self.block_size)

    @property
    def window_slots(self) -> int | None:
        """``sliding_window`` as vLLM's plain int (slots of ``slot_unit``)."""
        return None if self.sliding_window is None else _count(self.sliding_window)

    @property
    def chunk_slots(self) -> int | None:
        """``chunk`` as vLLM's plain int (slots of ``slot_unit``)."""
        return None if self.chunk is None else _count(self.chunk)

    @property
    def cache_dtype(self) -> CacheDType | None:
        """The dtype as kvunits names it (None: a state spec, or a dtype kvunits lacks)."""
        return None if self.dtype is None else _TORCH_DTYPES.get(self.dtype)

    @property
    def dtype_bytes(self) -> int | None:
        """Bytes per element of ``dtype`` (None when unknown)."""
        return None if self.dtype is None else _ITEMSIZE.get(self.dtype)

    def kernel_block_size(self) -> BlockSize[EncoderTokens] | BlockSize[Tokens]:
        """What one cache block holds on the kernel's side: ``block_size × P`` encoder tokens
        for a pooled spec (`expand_block_size`, exact), else ``block_size`` tokens."""
        if self.slot_unit is PooledBlocks:
            return expand_block_size(BlockSize(self.block_size_slots, PooledBlocks), self.pool)
        return BlockSize(self.block_size_slots, Tokens)

    def widest_kernel_window(self) -> Window[EncoderTokens] | Window[Tokens] | None:
        """The widest kernel window this spec's manager window keeps resident: ``(S − 1)·P + 1``
        encoder tokens for a pooled spec (`unpool_window`), the window itself otherwise."""
        window = self.sliding_window
        if window is None:
            return None
        if self.slot_unit is PooledBlocks:
            return unpool_window(Window(_count(window), PooledBlocks), self.pool)
        return Window(_count(window), Tokens)

    def manager_view(self) -> ManagerSpec[PooledBlocks] | ManagerSpec[Tokens]:
        """kvunits' manager view of the same numbers (heads are one rank's): the block size,
        the window in slots and the chunk in slots are vLLM's, so its admission cap and page
        are kvunits' formulas applied to what vLLM states.

        Raises:
            SpecError: a spec kvunits has no manager view for (state, encoder-only, unknown),
                or one whose sizes are not whole (a fraction of heads).
        """
        layer = self.as_layer()
        return manager_view(layer, self.block_size_slots)

    def kernel_view(self) -> KernelSpec[EncoderTokens] | KernelSpec[Tokens]:
        """kvunits' kernel view of the same numbers: ``block_size × P`` positions a block; the
        window is `widest_kernel_window` (the spec records the manager's window only).

        Raises:
            SpecError: as `manager_view`.
        """
        from kvunits.contracts import kernel_view

        layer = self.as_layer()
        return kernel_view(layer, self.block_size_slots)

    def as_layer(self) -> LayerSpec:
        """A kvunits layer whose views have this spec's numbers (the heads one rank's; a
        window the widest that the manager's window serves).

        Raises:
            SpecError: a spec without a kvunits layer kind (state, encoder-only, unknown).
        """
        dtype = self.cache_dtype or CacheDType.bfloat16
        pool = self.pool if self.slot_unit is PooledBlocks else None
        if self.kind == "mla":
            # One latent head of K only: any split of its elements between the latent and the
            # RoPE key has the same page (kvunits' MLALayer adds them).
            latent = self.head_size_k.numerical_value_in(Elements) if self.head_size_k else 2
            return MLALayer(
                kv_lora_rank=Elements(max(1, latent - 1)),
                qk_rope_head_dim=Elements(1),
                dtype=dtype,
            )
        if self.kv_heads is None or self.head_size_k is None:
            raise SpecError(f"a vLLM {self.spec_type} has no attention layer view in kvunits")
        common: dict[str, Any] = {
            "pool": pool,
            # One rank's heads as the layer's (the view is one rank's).
            "kv_heads": KVHeads(self.kv_heads.numerical_value_in(RankKVHeads)),
            "head_size": self.head_size_k,
            "head_size_v": self.head_size_v or None,
            "dtype": dtype,
        }
        if self.kind == "sliding_window":
            widest = self.widest_kernel_window()
            assert widest is not None
            return SlidingWindowLayer(sliding_window=widest, **common)
        if self.kind == "chunked_local" and self.chunk is not None:
            tokens = _count(self.chunk) * self.pool.tokens_per_block
            chunk: Chunk[EncoderTokens] | Chunk[Tokens] = (
                Chunk(tokens, EncoderTokens) if pool else Chunk(tokens, Tokens)
            )
            return ChunkedLocalLayer(chunk=chunk, **common)
        if self.kind == "cross_attention":
            return CrossAttentionLayer(encoder_length=EncoderTokens(1), **common)
        if self.kind == "full_attention":
            return FullAttentionLayer(**common)
        raise SpecError(f"a vLLM {self.spec_type} ({self.kind}) has no layer view in kvunits")

    def vllm_admission_cap(self, max_in_flight: int, max_len: int) -> AdmissionCap:
        """The blocks vLLM 0.33 lets one request hold in this layer, by vLLM's own formulas
        (``max_admission_blocks_per_request`` of ``SlidingWindowSpec`` and
        ``ChunkedLocalAttentionSpec``; ``cdiv(max_len, block_size)`` otherwise, one page for a
        state). Both arguments count this spec's slots (vLLM schedules every group in the
        request's positions: a pooled layer's slot is one position).

        vLLM's sliding cap is ``cdiv(min(S − 1 + extra + in_flight, max_len), B) + 1`` with no
        ceiling at the request's own blocks, where kvunits' never exceeds
        ``cdiv(max_len, B)``: one block more when the window covers the whole request.
        """
        block = self.block_size_slots
        if self.kind in ("sliding_window", "sliding_window_mla") and self.sliding_window:
            extra = int(self.fields.get("extra_retained_tokens") or 0)
            window = _count(self.sliding_window)
            return AdmissionCap(cdiv(min(window - 1 + extra + max_in_flight, max_len), block) + 1)
        if self.kind == "chunked_local" and self.chunk is not None:
            chunk = _count(self.chunk)
            return AdmissionCap(cdiv(min(chunk + max_in_flight, max_len), block))
        if self.kind == "state":
            return AdmissionCap(1)
        return AdmissionCap(cdiv(max_len, block))

    def __str__(self) -> str:
        extra = ""
        if self.sliding_window is not None:
            extra = f", sliding_window {self.sliding_window}"
        if self.chunk is not None:
            extra = f", chunk {self.chunk}"
        heads = "" if self.kv_heads is None else f", {self.kv_heads}"
        return f"vLLM {self.spec_type}: {self.block_size}{extra}{heads}, page {self.page_size}"


def count_in_own_unit(value: Any) -> int:
    """A block size, window or chunk counted in its own unit: the plain int an engine's field
    holds (the unit stays known: the caller reads ``value.unit`` beside it)."""
    return int(value.numerical_value_in(value.unit))


_count = count_in_own_unit


# -- reading: a live vLLM object, or its JSON form ---------------------------------------------


def spec_type_of(spec: object) -> str:
    """The vLLM class a spec object is, by name: the first of its classes (most derived
    first) that `SPEC_KINDS` knows, else its own class name."""
    for cls in type(spec).__mro__:
        if cls.__name__ in SPEC_KINDS:
            return cls.__name__
    return type(spec).__name__


def spec_to_dict(spec: object) -> dict[str, Any]:
    """A live vLLM spec as JSON: its class (and the known class it derives from), every
    dataclass field as a JSON value, and the page vLLM computes.

    Torch dtypes become their names (``"bfloat16"``), ``tokens_per_state`` a fraction's text
    (``"1/4"``), enums their names, tuples lists. Nothing of vLLM is imported.
    """
    if not dataclasses.is_dataclass(spec) or isinstance(spec, type):
        raise SpecError(f"not a vLLM KV-cache spec (a dataclass): {type(spec).__name__}")
    values = {f.name: _json_value(getattr(spec, f.name)) for f in dataclasses.fields(spec)}
    out: dict[str, Any] = {
        "class": type(spec).__name__,
        "spec_type": spec_type_of(spec),
        "fields": values,
    }
    for name in ("page_size_bytes", "tokens_per_state"):
        try:
            out[name] = _json_value(getattr(spec, name))
        except Exception:  # a spec that cannot compute it (vLLM raises NotImplementedError)
            out[name] = None
    return out


def from_vllm(spec: object) -> VllmSpec:
    """A live vLLM spec object, read with its units (vLLM is not imported here).

    Raises:
        SpecError: not a vLLM spec, or a field out of its range (a window of 0, a pool that
            is not 1/P).
    """
    return from_vllm_dict(spec_to_dict(spec))


def from_vllm_dict(data: Mapping[str, Any]) -> VllmSpec:
    """A vLLM spec in its JSON form (`spec_to_dict`), read with its units.

    Raises:
        SpecError: a missing or malformed field, naming it.
    """
    raw = data.get("fields")
    if not isinstance(raw, Mapping):
        raise SpecError("a vLLM spec's JSON needs its 'fields' (write it with spec_to_dict)")
    spec_type = str(data.get("spec_type") or data.get("class") or "")
    kind: VllmKind = SPEC_KINDS.get(spec_type, "unknown")
    tps = _tokens_per_state(data.get("tokens_per_state", raw.get("tokens_per_state")), kind)
    pool = PoolFactor(1)
    slot_unit: type[PooledBlocks] | type[Tokens] = Tokens
    if tps < 1:
        if tps.numerator != 1:
            raise SpecError(f"tokens_per_state {tps} is not 1/P: kvunits reads whole pools only")
        pool, slot_unit = PoolFactor(tps.denominator), PooledBlocks
    block = _int(raw, "block_size", minimum=1)
    heads = raw.get("num_kv_heads")
    window = raw.get("sliding_window")
    chunk = raw.get("attention_chunk_size")
    page = data.get("page_size_bytes")
    # vLLM's own page where it states one unpadded (so a wrong page property is seen, not
    # recomputed away); its formula on the fields where the page is padded or not stated.
    unpadded = (
        page
        if isinstance(page, int) and raw.get("page_size_padded") is None
        else _unpadded_page(raw, kind, tps, block)
    )
    if page is None:
        page = raw.get("page_size_padded") or unpadded
    if page is None:
        raise SpecError(f"vLLM {spec_type}: no page_size_bytes and none can be computed")
    return VllmSpec(
        spec_type=spec_type,
        kind=kind,
        slot_unit=slot_unit,
        pool=pool,
        block_size=_slots(BlockSize, block, slot_unit),
        # 0 heads is read (a rank that stores none: the audit reports it), not refused.
        kv_heads=None if heads is None else RankKVHeads(_int(raw, "num_kv_heads")),
        head_size_k=(
            None if raw.get("head_size") is None else Elements(_int(raw, "head_size", minimum=1))
        ),
        head_size_v=(
            None if raw.get("head_size_v") is None else Elements(_int(raw, "head_size_v"))
        ),
        dtype=raw.get("dtype") if isinstance(raw.get("dtype"), str) else None,
        sliding_window=(
            None
            if window is None
            else _slots(Window, _int(raw, "sliding_window", minimum=1), slot_unit)
        ),
        chunk=(
            None
            if chunk is None
            else _slots(Chunk, _int(raw, "attention_chunk_size", minimum=1), slot_unit)
        ),
        page_size=RankBytes(int(page)),
        unpadded_page_size=RankBytes(int(unpadded if unpadded is not None else page)),
        fields=dict(raw),
    )


def _slots(kind: Any, n: int, unit: type[PooledBlocks] | type[Tokens]) -> Any:
    """A block size, window or chunk of ``n`` slots in the spec's slot unit."""
    return kind(n, PooledBlocks) if unit is PooledBlocks else kind(n, Tokens)


def _tokens_per_state(value: object, kind: VllmKind) -> Fraction:
    if value is None or kind == "state":
        return Fraction(1)
    try:
        tps = Fraction(str(value))
    except (ValueError, ZeroDivisionError):
        raise SpecError(f"tokens_per_state {value!r} is not a number or a fraction") from None
    if tps <= 0:
        raise SpecError(f"tokens_per_state {value!r} must be > 0")
    if tps > 1:
        # DeepSeek V4's compressed caches (one state per several tokens): the slot unit is not
        # one kvunits has; kept as tokens, and the audit says it does not audit the layer.
        return Fraction(1)
    return tps


def _int(raw: Mapping[str, Any], name: str, minimum: int = 0) -> int:
    value = raw.get(name)
    if type(value) is not int or value < minimum:
        raise SpecError(f"vLLM spec field {name} must be an int >= {minimum}, got {value!r}")
    return value


def _unpadded_page(raw: Mapping[str, Any], kind: VllmKind, tps: Fraction, block: int) -> int | None:
    """vLLM's page formula: ``heads × block_size / tokens_per_state × (K + V) × dtype``
    (``AttentionSpec.unpadded_page_size_bytes``), or a state's tensors (``MambaSpec``)."""
    if kind == "state":
        shapes, dtypes = raw.get("shapes"), raw.get("dtypes")
        if not isinstance(shapes, list) or not isinstance(dtypes, list):
            return None
        total = 0
        for shape, dtype in zip(shapes, dtypes, strict=False):
            n = 1
            for dim in shape:
                n *= int(dim)
            total += n * _ITEMSIZE.get(str(dtype), 0)
        return total
    heads = raw.get("num_head_slots") or raw.get("num_kv_heads")
    k, v, dtype = raw.get("head_size"), raw.get("head_size_v"), raw.get("dtype")
    if not isinstance(heads, int) or not isinstance(k, int) or not isinstance(dtype, str):
        return None
    states = int(block / tps)
    content = raw.get("state_content_bytes")
    if not isinstance(content, int):
        size = _ITEMSIZE.get(dtype)
        if size is None:
            return None
        content = (k + (v if isinstance(v, int) else k)) * size
    return heads * states * content


def _json_value(value: object) -> Any:
    """A vLLM field as JSON: torch dtypes by name, fractions as text, enums by name."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    name = type(value).__name__
    if name == "dtype" and type(value).__module__ == "torch":
        return str(value).removeprefix("torch.")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return spec_to_dict(value)
    return repr(value)


# -- writing back: a kvunits layer as vLLM states it -------------------------------------------

#: kvunits' cache dtypes as torch names (the name vLLM's spec stores).
_TORCH_NAMES: Final[dict[CacheDType, str]] = {
    CacheDType.bfloat16: "bfloat16",
    CacheDType.float16: "float16",
    CacheDType.float32: "float32",
    CacheDType.fp8_e4m3: "float8_e4m3fn",
    CacheDType.fp8_e5m2: "float8_e5m2",
}

WindowRule: TypeAlias = Literal["tight", "vllm"]


def to_vllm_dict(
    layer: LayerSpec,
    block_size_slots: int,
    *,
    parallelism: Parallelism | None = None,
    cache_dtype: CacheDType | None = None,
    window_rule: WindowRule = "tight",
) -> dict[str, Any]:
    """A kvunits layer as vLLM 0.33 states it on one rank, in `spec_to_dict`'s JSON form.

    The units cross back explicitly: a pooled layer's ``tokens_per_state`` is ``1/P`` and its
    window and chunk are counted in pooled slots (`pool_window`: the tight bound, or with
    ``window_rule="vllm"`` vLLM's ``cdiv(W, P) + 1``, ``whisper_causal.py``'s choice, one slot
    more when ``(W − 1) % P == 0``); the heads are one rank's (`kv_heads_per_rank`); the page
    is kvunits' (`page_size_per_rank`).

    Raises:
        SpecError: a layer vLLM keeps no spec for (``encoder_only``, ``kv_shared``), or a
            recurrent mixer (vLLM's ``MambaSpec`` states tensor shapes kvunits writes only
            from the model's own dimensions: not written back here).
    """
    p = parallelism if parallelism is not None else Parallelism()
    manager = manager_view(layer, block_size_slots, cache_dtype=cache_dtype)
    if manager.kind == "state":
        raise SpecError("a state layer is not written back as a vLLM MambaSpec")
    heads = kv_heads_of(layer)
    assert heads is not None
    per_rank = kv_heads_per_rank(heads, p).numerical_value_in(RankKVHeads)
    fields: dict[str, Any] = {
        "block_size": block_size_slots,
        "num_kv_heads": per_rank,
        "head_size": manager.head_size_k.numerical_value_in(Elements),
        "head_size_v": manager.head_size_v.numerical_value_in(Elements),
        "dtype": _TORCH_NAMES[manager.dtype],
    }
    pool = manager.pool.tokens_per_block
    tps = "1" if pool == 1 else f"1/{pool}"
    if pool != 1:
        fields["tokens_per_state"] = tps
    spec_type = {
        "full_attention": "FullAttentionSpec",
        "sliding_window": "SlidingWindowSpec",
        "chunked_local": "ChunkedLocalAttentionSpec",
        "cross_attention": "CrossAttentionSpec",
    }[manager.kind]
    if isinstance(layer, MLALayer):
        spec_type = "MLAAttentionSpec"
    if isinstance(layer, SlidingWindowLayer):
        fields["sliding_window"] = _window_slots(layer, window_rule)
    if manager.chunk is not None:
        fields["attention_chunk_size"] = _count(manager.chunk)
    page = page_size_per_rank(layer, manager, p).numerical_value_in(RankBytes)
    return {
        "class": spec_type,
        "spec_type": spec_type,
        "fields": fields,
        "page_size_bytes": page,
        "tokens_per_state": tps,
    }


def _window_slots(layer: SlidingWindowLayer, rule: WindowRule) -> int:
    w = _count(layer.sliding_window)
    if layer.pool is None:
        return w
    if rule == "vllm":
        return cdiv(w, layer.pool.tokens_per_block) + 1
    return pool_window(Window(w, EncoderTokens), layer.pool).numerical_value_in(PooledBlocks)


def to_vllm(
    layer: LayerSpec,
    block_size_slots: int,
    *,
    parallelism: Parallelism | None = None,
    cache_dtype: CacheDType | None = None,
    window_rule: WindowRule = "tight",
) -> Any:
    """`to_vllm_dict` built as vLLM's own spec class (imports vLLM and torch: the one function
    here that does).

    Raises:
        SpecError: as `to_vllm_dict`; vLLM is not installed (``pip install 'kvunits[vllm]'``).
    """
    data = to_vllm_dict(
        layer,
        block_size_slots,
        parallelism=parallelism,
        cache_dtype=cache_dtype,
        window_rule=window_rule,
    )
    return build_vllm_spec(data)


def build_vllm_spec(data: Mapping[str, Any]) -> Any:
    """A vLLM spec object from its JSON form (vLLM and torch imported here).

    Raises:
        SpecError: vLLM is not installed, or the class is not one of vLLM's.
    """
    try:
        import torch
        from vllm.v1 import kv_cache_interface
    except ImportError as exc:
        raise SpecError(
            f"building vLLM's spec objects needs vLLM ({exc}); the JSON form needs nothing"
        ) from None
    cls = getattr(kv_cache_interface, str(data.get("class")), None)
    if not isinstance(cls, type):
        raise SpecError(f"vLLM has no spec class {data.get('class')!r}")
    kwargs: dict[str, Any] = {}
    for name, value in dict(data["fields"]).items():
        if name in ("dtype",) and isinstance(value, str):
            value = getattr(torch, value)
        elif name == "dtypes" and isinstance(value, list):
            value = tuple(getattr(torch, v) for v in value)
        elif name == "shapes" and isinstance(value, list):
            value = tuple(tuple(s) for s in value)
        elif name == "tokens_per_state" and isinstance(value, str):
            fraction = Fraction(value)
            value = int(fraction) if fraction.denominator == 1 else fraction
        kwargs[name] = value
    known = {f.name: f for f in dataclasses.fields(cls) if f.init}
    for name, value in list(kwargs.items()):
        f = known.get(name)
        if f is None:
            del kwargs[name]
            continue
        default = f.default
        if isinstance(default, enum.Enum) and isinstance(value, str):
            kwargs[name] = type(default)[value]
    return cls(**kwargs)
