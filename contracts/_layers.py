"""Layer and model specs as the model declares them (frozen Pydantic models).

Every size carries its unit and its kind. A layer's sequence unit follows its pooling: a layer
with a ``pool`` (a `PoolFactor`, P >= 1) lives on the encoder side, where the kernel counts
`EncoderTokens` and the cache manager counts `PooledBlocks` (P tokens per cache slot); a
layer without one counts `Tokens` on both sides. Windows (`Window`) and chunks (`Chunk`) are
written in the *kernel's* unit, the one the model's config uses (``"750 encoder_token"`` in a
file, ``Window(750, EncoderTokens)`` in Python); the manager's view is derived from them by
the named conversions of `contracts` (see `manager_view`), never written by hand.

Every model here raises `SpecValidationError` for bad input: pydantic's ``ValidationError``
(field paths included) that is also a `KvUnitsError`.
"""

from __future__ import annotations

import re
from typing import Annotated, Final, Literal, Self, TypeAlias, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from ._counts import Elements, KVHeads, Layers
from ._describe import describe
from ._dtype import CacheDType, parse_dtype_field
from ._factors import PoolFactor
from ._kinds import Chunk, KindOf, Window, _Kind
from ._model import SpecModel
from ._origin import in_python, written_in_python
from ._quantity import Bytes, EncoderTokens, PooledBlocks, Tokens
from .errors import UnitTypeError
from .state import GatedDeltaNetLayer, Mamba1Layer, Mamba2Layer, ShortConvLayer, StateMixerLayer

#: A window in the layer's kernel unit (encoder_token for pooled layers, else token).
SeqWindow = Annotated[Window[EncoderTokens] | Window[Tokens], KindOf(Window, EncoderTokens, Tokens)]
#: A chunk in the layer's kernel unit.
SeqChunk = Annotated[Chunk[EncoderTokens] | Chunk[Tokens], KindOf(Chunk, EncoderTokens, Tokens)]


class _Layer(SpecModel):
    # Written inline, not through a shared variable: the pydantic mypy plugin reads frozen=True
    # only from a literal ConfigDict(...) call, and otherwise lets assignments such as
    # `layer.sliding_window = ...` pass.
    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)


class _AttentionLayer(_Layer):
    """Fields every attention layer with a KV cache has (``pool`` first: later checks read it)."""

    pool: PoolFactor | None = Field(
        default=None,
        description="P, encoder tokens per pooled block; set it for encoder-side (pooled) "
        "layers, whose windows are then written in encoder_token",
    )
    kv_heads: KVHeads = Field(description="KV heads of one layer (not widened by P)")
    head_size: Elements = Field(description="elements per head of K")
    head_size_v: Elements | None = Field(
        default=None, description="elements per head of V; defaults to head_size"
    )
    dtype: CacheDType = Field(default=CacheDType.bfloat16, description="cache element type")

    @field_validator("dtype", mode="before")
    @classmethod
    def _parse_dtype(cls, value: object, info: ValidationInfo) -> object:
        return parse_dtype_field(value, info)

    @property
    def head_size_k(self) -> Elements:
        """Elements per head of K."""
        return self.head_size

    @property
    def head_size_v_or_k(self) -> Elements:
        """Elements per head of V (``head_size_v``, else the same as K)."""
        return self.head_size if self.head_size_v is None else self.head_size_v

    @property
    def pooled(self) -> bool:
        """Whether the layer lives on the encoder side (kernel: encoder_token, manager:
        pooled_block)."""
        return self.pool is not None


def _bare_int_in_layer_unit(name: str, value: object, info: ValidationInfo) -> object:
    """Before-check: a bare int window or chunk gets a hint naming the layer's own unit.

    The generic quantity parser would suggest its first unit (encoder_token), which is wrong
    for a token layer and would only lead to a second error.
    """
    if type(value) is int:
        if "pool" not in info.data:
            unit = "encoder_token (pooled layer) or token"
            typed = "EncoderTokens (pooled layer) or Tokens"
        else:
            pooled = info.data["pool"] is not None
            unit = "encoder_token" if pooled else "token"
            typed = "EncoderTokens" if pooled else "Tokens"
        if in_python(info):
            kind = "Chunk" if name == "chunk" else "Window"
            raise written_in_python(info, value, f"{kind}({value}, {typed})", kind)
        raise PydanticCustomError(
            "unit_error",
            "{message}",
            {"message": f"{name} {value} has no unit: write it as '{value} {unit}'"},
        )
    return value


def _written_name(cls: type[BaseModel], field: str) -> str:
    """``field`` as the input writes it: its alias, where a subclass gives one (the config
    format's groups may rename a field)."""
    return cls.model_fields[field].alias or field


_K = TypeVar("_K", bound=_Kind)


def _seq_in_layer_unit(name: str, value: _K, info: ValidationInfo) -> _K:
    """Field check: a window or chunk is written in the layer's kernel unit (the kinds are
    >= 1 by construction)."""
    if "pool" not in info.data:
        # pool itself failed validation (and is reported): the layer's unit is unknown.
        return value
    pool = info.data["pool"]
    n = value._n
    if pool is not None and value.unit is not EncoderTokens:
        raise ValueError(
            f"{name} is {value} but the layer pools (pool = {pool.tokens_per_block}), so it "
            f'counts encoder_token; write "{n} encoder_token"'
        )
    if pool is None and value.unit is not Tokens:
        raise ValueError(
            f"{name} is {value} but the layer has no pool, so it counts token; write "
            f'"{n} token", or set pool (e.g. pool = 1) for an encoder layer'
        )
    return value


class FullAttentionLayer(_AttentionLayer):
    """Full (causal) attention: the cache holds every position of the request."""

    kind: Literal["full_attention"] = "full_attention"


class SlidingWindowLayer(_AttentionLayer):
    """Sliding-window attention: a query sees itself and the ``window − 1`` positions before.

    Example:
        >>> layer = SlidingWindowLayer(sliding_window=Window(750, EncoderTokens),
        ...                            pool=PoolFactor(4), kv_heads=KVHeads(32),
        ...                            head_size=Elements(64))
        >>> layer.sliding_window, str(layer.sliding_window)
        (Window(750, EncoderTokens), '750 encoder_token')
    """

    kind: Literal["sliding_window"] = "sliding_window"
    sliding_window: SeqWindow = Field(
        description="the window in the kernel's unit (encoder_token or token), the current "
        "position included"
    )

    @field_validator("sliding_window", mode="before")
    @classmethod
    def _window_bare_int(cls, value: object, info: ValidationInfo) -> object:
        return _bare_int_in_layer_unit(_written_name(cls, "sliding_window"), value, info)

    @field_validator("sliding_window")
    @classmethod
    def _window_unit(
        cls, value: Window[EncoderTokens] | Window[Tokens], info: ValidationInfo
    ) -> Window[EncoderTokens] | Window[Tokens]:
        return _seq_in_layer_unit(_written_name(cls, "sliding_window"), value, info)


class ChunkedLocalLayer(_AttentionLayer):
    """Chunked local attention: a query sees the positions of its own chunk up to itself."""

    kind: Literal["chunked_local"] = "chunked_local"
    chunk: SeqChunk = Field(
        description="the chunk in the kernel's unit: encoder_token if the layer pools, else token"
    )

    @field_validator("chunk", mode="before")
    @classmethod
    def _chunk_bare_int(cls, value: object, info: ValidationInfo) -> object:
        return _bare_int_in_layer_unit("chunk", value, info)

    @field_validator("chunk")
    @classmethod
    def _chunk_unit(
        cls, value: Chunk[EncoderTokens] | Chunk[Tokens], info: ValidationInfo
    ) -> Chunk[EncoderTokens] | Chunk[Tokens]:
        value = _seq_in_layer_unit("chunk", value, info)
        pool = info.data.get("pool")
        n = value._n
        if pool is not None and n % pool.tokens_per_block:
            # The manager starts a chunk every cdiv(chunk, P) slots; unless P divides the
            # chunk, those starts drift from the kernel's (every `chunk` tokens) and the
            # manager frees the slot holding the first keys of the kernel's current chunk.
            p = pool.tokens_per_block
            raise ValueError(
                f"chunk is {value} but the layer pools by {p}: a chunk must be a whole number "
                f"of pooled blocks; write a multiple of {p} encoder_token, e.g. "
                f'"{(n // p + 1) * p} encoder_token"'
            )
        return value


class CrossAttentionLayer(_AttentionLayer):
    """Decoder cross-attention over encoder outputs: sized by the declared encoder length.

    Its cache lives on the encoder side: slots are pooled blocks of P encoder tokens (P = 1
    unless ``pool`` says otherwise), whatever the decoder's length is.
    """

    kind: Literal["cross_attention"] = "cross_attention"
    encoder_length: EncoderTokens = Field(description="encoder outputs the layer attends to")

    @field_validator("encoder_length")
    @classmethod
    def _encoder_length_positive(cls, value: EncoderTokens) -> EncoderTokens:
        # 0 would make the layer's admission cap 0 cache blocks (and capacity planning divide
        # by it); a cross-attention layer attends to at least one encoder output.
        if not value:
            raise ValueError(f"encoder_length must be >= 1 encoder_token, got {value}")
        return value

    @property
    def pool_factor(self) -> PoolFactor:
        """P of the encoder outputs' cache slots (1 unless ``pool`` says otherwise)."""
        return self.pool if self.pool is not None else PoolFactor(1)

    @property
    def pooled(self) -> bool:
        """Always: a cross-attention cache holds encoder outputs, counted in pooled blocks."""
        return True


class EncoderOnlyLayer(_Layer):
    """A bidirectional encoder layer that keeps no KV cache between steps."""

    kind: Literal["encoder_only"] = "encoder_only"


#: Elements of an ``fp8_ds_mla`` latent that share one float32 scale (FlashMLA's sparse layout).
_DS_MLA_SCALE_GROUP: Final = 128


class MLALayer(_Layer):
    """Multi-head latent attention: one latent "head" of ``kv_lora_rank + rope`` elements,
    K only (V is recovered from the latent).

    ``sparse`` marks the MLA of DeepSeek sparse attention (DSA: DeepSeek V3.2, GLM-5), read
    by FlashMLA's sparse kernels, which store an fp8 cache in their own ``fp8_ds_mla`` layout
    (`slot_size`): the latent in fp8 with a float32 scale per 128 of its elements, the RoPE
    key in bfloat16: 656 bytes a token for DeepSeek's 512 + 64, where a dense fp8 MLA stores
    576 (vLLM ``MLAAttention.get_kv_cache_spec``, ``state_content_bytes``).
    """

    kind: Literal["mla"] = "mla"
    kv_lora_rank: Elements = Field(description="elements of the latent KV vector")
    qk_rope_head_dim: Elements = Field(description="elements of the decoupled RoPE key")
    dtype: CacheDType = Field(default=CacheDType.bfloat16, description="cache element type")
    sparse: bool = Field(
        default=False,
        description="DeepSeek sparse attention's MLA (an indexer picks the keys it reads); an "
        "fp8 cache is then stored in FlashMLA's fp8_ds_mla layout",
    )

    @field_validator("dtype", mode="before")
    @classmethod
    def _parse_dtype(cls, value: object, info: ValidationInfo) -> object:
        return parse_dtype_field(value, info)

    def slot_size(self, dtype: CacheDType | None = None) -> Bytes:
        """Bytes one token's latent takes in the cache, in ``dtype`` (default the layer's).

        ``(kv_lora_rank + qk_rope_head_dim) × dtype``, except a sparse layer's fp8 cache
        (``fp8_ds_mla``): ``kv_lora_rank`` fp8 bytes, ``cdiv(kv_lora_rank, 128)`` float32
        scales and the RoPE key in bfloat16.

        Example:
            >>> layer = MLALayer(kv_lora_rank=Elements(512), qk_rope_head_dim=Elements(64),
            ...                  sparse=True)
            >>> str(layer.slot_size()), str(layer.slot_size(CacheDType.fp8_e4m3))
            ('1152 byte', '656 byte')
        """
        dtype = self.dtype if dtype is None else dtype
        rank, rope = self.kv_lora_rank._value, self.qk_rope_head_dim._value
        if self.sparse and dtype.itemsize_bytes == 1:
            scales = -(-rank // _DS_MLA_SCALE_GROUP)
            return Bytes(
                rank * dtype.itemsize_bytes
                + scales * CacheDType.float32.itemsize_bytes
                + rope * CacheDType.bfloat16.itemsize_bytes
            )
        return Bytes((rank + rope) * dtype.itemsize_bytes)


class IndexerLayer(_Layer):
    """The key cache of DeepSeek sparse attention's lightning indexer (DeepSeek V3.2,
    GLM-5): per token one key of ``head_size`` fp8 elements and a float32 scale for each
    ``scale_block`` of them, whole on every tensor-parallel rank.

    Its own cache beside the layer's MLA cache, sized as full attention (every token of the
    request), in bytes that no ``--kv-cache-dtype`` changes: vLLM's
    ``DeepseekV32IndexerCache`` is an ``MLAAttentionSpec`` of one head of
    ``head_dim + head_dim // 128 × 4`` uint8 (``vllm/model_executor/models/deepseek_v2.py``,
    ``Indexer.__init__``), 132 bytes a token for ``index_head_dim = 128``.

    Example:
        >>> str(IndexerLayer(head_size=Elements(128)).slot_size)
        '132 byte'
    """

    kind: Literal["indexer"] = "indexer"
    head_size: Elements = Field(description="elements of the indexer's key (index_head_dim)")
    scale_block: Elements = Field(
        default=Elements(128), description="key elements that share one float32 scale"
    )

    @model_validator(mode="after")
    def _scale_block_divides(self) -> Self:
        head, block = self.head_size._value, self.scale_block._value
        if not block or head % block:
            raise ValueError(
                f"scale_block is {self.scale_block} but must divide head_size "
                f"({self.head_size}): each float32 scale covers a whole block of the key"
            )
        return self

    @property
    def dtype(self) -> CacheDType:
        """The key's element type: fp8 (e4m3), whatever the engine's cache dtype."""
        return CacheDType.fp8_e4m3

    @property
    def slot_size(self) -> Bytes:
        """Bytes of one token's entry: ``head_size`` fp8 bytes and ``head_size / scale_block``
        float32 scales."""
        head = self.head_size._value
        scales = head // self.scale_block._value
        return Bytes(head * self.dtype.itemsize_bytes + scales * CacheDType.float32.itemsize_bytes)


class StateLayer(_Layer):
    """A fixed per-request state (Mamba-like): ``state_size`` bytes whatever the length."""

    kind: Literal["state"] = "state"
    state_size: Bytes = Field(description="bytes of state one request holds in one layer")

    @field_validator("state_size")
    @classmethod
    def _nonzero(cls, value: Bytes) -> Bytes:
        if not value:
            raise ValueError("state_size must be > 0 byte")
        return value


class KVSharedLayer(_Layer):
    """An attention layer that reads another layer's KV cache and keeps none of its own
    (Gemma 4's last ``num_kv_shared_layers`` layers; vLLM's ``kv_sharing_target_layer_name``
    gives such a layer no cache spec)."""

    kind: Literal["kv_shared"] = "kv_shared"
    target: str = Field(
        min_length=1, max_length=128, description="the layer whose KV cache this one reads"
    )


LayerSpec: TypeAlias = Annotated[
    FullAttentionLayer
    | SlidingWindowLayer
    | ChunkedLocalLayer
    | CrossAttentionLayer
    | EncoderOnlyLayer
    | MLALayer
    | IndexerLayer
    | StateLayer
    | Mamba1Layer
    | Mamba2Layer
    | GatedDeltaNetLayer
    | ShortConvLayer
    | KVSharedLayer,
    Field(discriminator="kind"),
]

#: Layers that keep no cache of their own (nothing to plan).
UNCACHED_LAYERS: tuple[type[BaseModel], ...] = (EncoderOnlyLayer, KVSharedLayer)
#: Layers that hold a fixed per-request state, not a paged KV cache.
STATE_LAYERS: tuple[type[BaseModel], ...] = (StateLayer, StateMixerLayer)

_LAYER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}")


class ModelSpec(SpecModel):
    """A model: a set of named layers.

    Example:
        >>> enc = SlidingWindowLayer.model_validate(
        ...     {"sliding_window": "750 encoder_token", "pool": 4, "kv_heads": 32,
        ...      "head_size": 64})
        >>> model = ModelSpec.stacked("voxtral", {"audio": (enc, Layers(32))})
        >>> len(model.layers), next(iter(model.layers))
        (32, 'audio.0')
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)

    name: str = Field(min_length=1, max_length=128)
    layers: dict[str, LayerSpec] = Field(min_length=1, max_length=4096)

    @field_validator("layers")
    @classmethod
    def _names(cls, layers: dict[str, LayerSpec]) -> dict[str, LayerSpec]:
        for name in layers:
            if not _LAYER_NAME.fullmatch(name):
                raise ValueError(
                    f"layer name {name[:40]!r} must match {_LAYER_NAME.pattern} "
                    "(letters, digits, '_', '.', '-')"
                )
        for name, layer in layers.items():
            if isinstance(layer, KVSharedLayer):
                target = layers.get(layer.target)
                if target is None or isinstance(target, (*UNCACHED_LAYERS, *STATE_LAYERS)):
                    raise ValueError(
                        f"layer {name[:40]!r} shares the KV cache of {layer.target[:40]!r}, "
                        "which is not a layer of the model with a KV cache of its own"
                    )
        return layers

    @property
    def num_layers(self) -> Layers:
        """The model's layers, all of them (those without a cache of their own too): a count
        that says whose it is (another model's `stacked` refuses it)."""
        return Layers._owned(len(self.layers), self.name)

    @classmethod
    def stacked(cls, name: str, stacks: dict[str, tuple[LayerSpec, Layers]]) -> ModelSpec:
        """Build a model from stacks of identical layers, named ``"<stack>.<index>"``.

        Raises:
            UnitTypeError: a stack's count is not `Layers` (a bare int, a stage's layers).
        """
        layers: dict[str, LayerSpec] = {}
        for stack, (layer, count) in stacks.items():
            given: object = count
            if type(given) is not Layers:
                raise UnitTypeError(
                    f"stack {stack!r} counts its layers in Layers, got {describe(given)}: "
                    f"write ({type(layer).__name__}(...), Layers(n))",
                    field=f"stacks[{stack!r}]",
                    expected="layer",
                    got=describe(given),
                )
            if count.owner is not None and count.owner != name:
                raise UnitTypeError(
                    f"stack {stack!r} of model {name!r} counts {count} of model "
                    f"{count.owner!r}: a count of one model's layers is not another's (a "
                    "draft's cache built for its target's layers, SGLang #8482); count the "
                    f"layers model {name!r} has",
                    field=f"stacks[{stack!r}]",
                    expected=f"layers of model {name!r}",
                    got=f"layers of model {count.owner!r}",
                )
            n = count.numerical_value_in(Layers)
            for index in range(n):
                layers[f"{stack}.{index}"] = layer
        return cls(name=name, layers=layers)


def slot_unit_of(layer: LayerSpec) -> type[PooledBlocks] | type[Tokens]:
    """The manager's slot unit for a layer: pooled_block on the encoder side, else token."""
    if isinstance(layer, CrossAttentionLayer):
        return PooledBlocks
    if isinstance(layer, _AttentionLayer) and layer.pooled:
        return PooledBlocks
    return Tokens
