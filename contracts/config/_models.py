"""The kvunits config format (TOML, YAML or JSON, one schema) and its resolved form.

A config file has a ``model`` section and an ``engine`` section; every size is written with
its unit, as ``"<integer> <unit>"``::

    [model]
    name = "voxtral-realtime"

    [model.groups.audio]            # 32 identical layers, named audio.0 … audio.31
    kind = "sliding_window"
    count = 32
    sliding_window = "750 encoder_token"
    pool = 4                        # encoder tokens per pooled block (P)
    kv_heads = 32
    head_size = 64

    [model.layers.proj]             # one layer, named proj
    kind = "encoder_only"

    [engine]
    block_size_slots = 16
    max_model_len = "131072 token"
    memory_budget = "40 GiB"        # each GPU's KV cache (or gpu_memory, weights_memory, …)
    tensor_parallel_size = 2        # vLLM's names: pipeline_parallel_size, async_scheduling, …

`ConfigFile` is the file's schema (``kvunits schema`` prints it, with the unit of every field
in ``x-unit``); `KvUnitsConfig` is what loading resolves it to: the frozen `ModelSpec` and
`EngineSpec` of the spec layer, plus where each engine setting came from. The loader
(`load_config`) lives in ``_load.py``; the Hugging Face adapter in ``_hf.py``.

The window field is ``sliding_window`` here as in `SlidingWindowLayer` (and in Hugging Face
configs). Windows and chunks are written in the layer's kernel unit:
``encoder_token`` when the group pools (``pool`` set), ``token`` otherwise.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Annotated, Final, Literal, TypeAlias

from pydantic import (
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .._dtype import CacheDType
from .._engine import GPU_MEMORY_UTILIZATION, EngineSpec
from .._layers import (
    ChunkedLocalLayer,
    CrossAttentionLayer,
    EncoderOnlyLayer,
    FullAttentionLayer,
    IndexerLayer,
    KVSharedLayer,
    LayerSpec,
    MLALayer,
    ModelSpec,
    SeqWindow,
    SlidingWindowLayer,
    StateLayer,
)
from .._model import SpecModel
from .._quantity import EncoderTokens, Tokens
from ..deploy import RankBytes
from ..state import GatedDeltaNetLayer, Mamba1Layer, Mamba2Layer, ShortConvLayer

#: The most layers a config may declare (`ModelSpec` holds at most this many).
MAX_LAYERS: Final = 4096

# -- the model section ----------------------------------------------------------------------

_FROZEN = ConfigDict(frozen=True, extra="forbid")

_GroupName = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}$", max_length=64)
]
_LayerName = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$", max_length=128)
]

_BARE_NUMBER: Final = re.compile(r"\s*[0-9][0-9_,]*\s*")


def _bare_number_hint(value: object, info: ValidationInfo) -> object:
    """Before-check of a window or chunk: a number without a unit gets a hint naming the
    group's own unit (encoder_token if it pools, token otherwise)."""
    bare = type(value) is int or (isinstance(value, str) and _BARE_NUMBER.fullmatch(value))
    if not bare:
        return value
    number = str(value).strip()
    if "pool" not in info.data:
        unit, why = "encoder_token", " (or token if the group does not pool)"
    elif info.data["pool"] is not None:
        p = info.data["pool"].tokens_per_block
        unit, why = "encoder_token", f" (the group pools: pool = {p})"
    else:
        unit, why = "token", " (the group has no pool)"
    raise PydanticCustomError(
        "unit_error",
        "{message}",
        {"message": f'{number} has no unit: write it as "{number} {unit}"{why}'},
    )


class _Group(SpecModel):
    """What a group adds to its layer spec: ``count``.

    A group model derives from its layer spec, so it has the spec's fields, units and checks,
    and then from `_Group`: pydantic collects fields along the reversed MRO, so ``count``
    comes first, as the file's schema has always listed it. ``kind``, which the spec
    defaults, is redeclared by each group: a file must say it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    count: int = Field(
        default=1,
        strict=True,
        ge=1,
        le=MAX_LAYERS,
        description="identical layers in the group, named <group>.0 … <group>.<count-1>; "
        "a [model.layers.<name>] entry is one layer and takes no count",
        json_schema_extra={"x-unit": "layer"},
    )

    def layer(self) -> LayerSpec:
        """The spec of each of the group's layers: the group without its count.

        The group was validated as its layer spec already (its model derives from the spec's:
        the same fields, units and checks, its own hints for a bare number), so the spec is
        built from its fields without validating them a second time.
        """
        spec: type[LayerSpec] = type(self).__bases__[0]
        fields = dict(self)
        del fields["count"]
        return spec.model_construct(_fields_set=set(fields), **fields)


class FullAttentionGroup(FullAttentionLayer, _Group):
    """Full (causal) attention layers."""

    kind: Literal["full_attention"]


class SlidingWindowGroup(SlidingWindowLayer, _Group):
    """Sliding-window attention layers; ``sliding_window`` counts the current position too."""

    kind: Literal["sliding_window"]
    sliding_window: SeqWindow = Field(
        description="the window in the kernel's unit: encoder_token if the group pools, else token",
    )

    @field_validator("sliding_window", mode="before")
    @classmethod
    def _window_bare_int(cls, value: object, info: ValidationInfo) -> object:
        # Named as the spec's validator, so it replaces it: a file's hint also catches "750",
        # and says which unit the group counts and why.
        return _bare_number_hint(value, info)


class ChunkedLocalGroup(ChunkedLocalLayer, _Group):
    """Chunked local attention layers."""

    kind: Literal["chunked_local"]

    @field_validator("chunk", mode="before")
    @classmethod
    def _chunk_bare_int(cls, value: object, info: ValidationInfo) -> object:
        # Replaces the spec's hint of the same name, as in `SlidingWindowGroup`.
        return _bare_number_hint(value, info)


class CrossAttentionGroup(CrossAttentionLayer, _Group):
    """Decoder cross-attention layers over ``encoder_length`` encoder outputs."""

    kind: Literal["cross_attention"]


class EncoderOnlyGroup(EncoderOnlyLayer, _Group):
    """Bidirectional encoder layers that keep no KV cache."""

    kind: Literal["encoder_only"]


class MLAGroup(MLALayer, _Group):
    """Multi-head latent attention layers."""

    kind: Literal["mla"]


class IndexerGroup(IndexerLayer, _Group):
    """DeepSeek sparse attention's indexer key caches (one beside each sparse MLA layer)."""

    kind: Literal["indexer"]


class StateGroup(StateLayer, _Group):
    """Layers with a fixed per-request state (Mamba-like)."""

    kind: Literal["state"]


class Mamba1Group(Mamba1Layer, _Group):
    """Mamba-1 mixer layers (their state sized from the mixer's dimensions)."""

    kind: Literal["mamba1"]


class Mamba2Group(Mamba2Layer, _Group):
    """Mamba-2 mixer layers."""

    kind: Literal["mamba2"]


class GatedDeltaNetGroup(GatedDeltaNetLayer, _Group):
    """Gated delta net (linear attention) layers."""

    kind: Literal["gated_delta_net"]


class ShortConvGroup(ShortConvLayer, _Group):
    """Short-convolution layers (LFM2's ``conv``)."""

    kind: Literal["short_conv"]


class KVSharedGroup(KVSharedLayer, _Group):
    """Layers that read another layer's KV cache and keep none of their own."""

    kind: Literal["kv_shared"]


GroupConfig: TypeAlias = Annotated[
    FullAttentionGroup
    | SlidingWindowGroup
    | ChunkedLocalGroup
    | CrossAttentionGroup
    | EncoderOnlyGroup
    | MLAGroup
    | IndexerGroup
    | StateGroup
    | Mamba1Group
    | Mamba2Group
    | GatedDeltaNetGroup
    | ShortConvGroup
    | KVSharedGroup,
    Field(discriminator="kind"),
]

#: The ``kind`` names of the config format (the same as the spec layers').
KINDS: Final = (
    "full_attention",
    "sliding_window",
    "chunked_local",
    "cross_attention",
    "encoder_only",
    "mla",
    "indexer",
    "state",
    "mamba1",
    "mamba2",
    "gated_delta_net",
    "short_conv",
    "kv_shared",
)


class ModelConfig(SpecModel):
    """The ``[model]`` section: a name, and layer groups and/or single layers."""

    model_config = _FROZEN

    name: str = Field(min_length=1, max_length=128, description="the model's name")
    groups: dict[_GroupName, GroupConfig] = Field(
        default_factory=dict,
        max_length=256,
        description="groups of identical layers; group g's layers are named g.0, g.1, …",
    )
    layers: dict[_LayerName, GroupConfig] = Field(
        default_factory=dict, max_length=MAX_LAYERS, description="single layers, by name"
    )

    @field_validator("groups", "layers", mode="before")
    @classmethod
    def _not_too_many(cls, value: object, info: ValidationInfo) -> object:
        # Checked before the entries are validated: 100 000 entries are refused at once.
        limit = 256 if info.field_name == "groups" else MAX_LAYERS
        if isinstance(value, dict) and len(value) > limit:
            raise ValueError(f"{len(value)} {info.field_name}; at most {limit}")
        return value

    @field_validator("layers")
    @classmethod
    def _single(cls, layers: dict[str, GroupConfig]) -> dict[str, GroupConfig]:
        # A field check, not a model check: reported even when a group has errors too.
        for name, layer in layers.items():
            if "count" in layer.model_fields_set:
                raise ValueError(
                    f"layers.{name} is a single layer and takes no count; move it to "
                    f"[model.groups.{name}] to declare several identical layers"
                )
        return layers

    @model_validator(mode="after")
    def _layout(self) -> ModelConfig:
        if not self.groups and not self.layers:
            raise ValueError(
                "declare at least one layer: [model.groups.<name>] or [model.layers.<name>]"
            )
        total = sum(g.count for g in self.groups.values()) + len(self.layers)
        if total > MAX_LAYERS:
            raise ValueError(f"the model declares {total} layers; at most {MAX_LAYERS}")
        names = [f"{g}.{i}" for g, group in self.groups.items() for i in range(group.count)]
        names += self.layers
        dupes = sorted(name for name, times in Counter(names).items() if times > 1)
        if dupes:
            raise ValueError(f"layer names collide: {', '.join(dupes[:5])}")
        return self

    def spec(self) -> ModelSpec:
        """The `ModelSpec`: group ``g`` is layers ``g.0``, ``g.1``, …, then the single layers."""
        layers: dict[str, LayerSpec] = {}
        for name, group in self.groups.items():
            layer = group.layer()
            layers.update((f"{name}.{index}", layer) for index in range(group.count))
        for name, single in self.layers.items():
            layers[name] = single.layer()
        return ModelSpec(name=self.name, layers=layers)


# -- the engine section ---------------------------------------------------------------------

#: Engine settings, in the order they are documented and printed.
ENGINE_FIELDS: Final = (
    "block_size_slots",
    "max_model_len",
    "max_num_batched_tokens",
    "max_encoder_len",
    "max_encoder_tokens_per_step",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "decode_context_parallel_size",
    "async_scheduling",
    "max_concurrent_batches",
    "num_speculative_tokens",
    "memory_budget",
    "gpu_memory",
    "gpu_memory_utilization",
    "weights_memory",
    "activation_memory",
    "cache_dtype",
    "kv_cache_layout",
    "admission",
    "scheduling_policy",
    "watermark",
)

#: The settings of the memory a budget is derived from when ``memory_budget`` is not given.
GPU_MEMORY_FIELDS: Final = (
    "gpu_memory",
    "gpu_memory_utilization",
    "weights_memory",
    "activation_memory",
)

#: The built-in defaults, the lowest precedence (below the file, the environment and flags).
#: ``memory_budget``'s applies only when no ``gpu_memory`` is given.
ENGINE_DEFAULTS: Final[dict[str, object]] = {
    "block_size_slots": 16,
    "max_num_batched_tokens": "2048 token",
    "tensor_parallel_size": 1,
    "pipeline_parallel_size": 1,
    "decode_context_parallel_size": 1,
    "async_scheduling": False,
    "num_speculative_tokens": 0,
    "memory_budget": "40 GiB",
    "gpu_memory_utilization": GPU_MEMORY_UTILIZATION,
    "cache_dtype": "auto",
    "kv_cache_layout": "per_group",
    "admission": "reserve",
    "scheduling_policy": "fcfs",
    "watermark": 0.0,
}


def _describe(name: str) -> str | None:
    return EngineSpec.model_fields[name].description


class EngineConfig(SpecModel):
    """The ``[engine]`` section: every setting optional here; see `ENGINE_DEFAULTS` and the
    precedence (flag > ``KVUNITS_*`` environment variable > file > default)."""

    model_config = _FROZEN

    block_size_slots: int | None = Field(
        default=None,
        strict=True,
        ge=1,
        le=1 << 16,
        description=_describe("block_size_slots"),
        json_schema_extra={"x-unit": "slot/cache_block", "default": 16},
    )
    max_model_len: Tokens | None = Field(default=None, description=_describe("max_model_len"))
    max_num_batched_tokens: Tokens | None = Field(
        default=None, description=_describe("max_num_batched_tokens")
    )
    max_encoder_len: EncoderTokens | None = Field(
        default=None, description=_describe("max_encoder_len")
    )
    max_encoder_tokens_per_step: EncoderTokens | None = Field(
        default=None, description=_describe("max_encoder_tokens_per_step")
    )
    tensor_parallel_size: int | None = Field(
        default=None,
        strict=True,
        ge=1,
        le=1 << 16,
        description=_describe("tensor_parallel_size"),
        json_schema_extra={"x-unit": "rank", "default": 1},
    )
    pipeline_parallel_size: int | None = Field(
        default=None,
        strict=True,
        ge=1,
        le=1 << 16,
        description=_describe("pipeline_parallel_size"),
        json_schema_extra={"x-unit": "stage", "default": 1},
    )
    decode_context_parallel_size: int | None = Field(
        default=None,
        strict=True,
        ge=1,
        le=1 << 16,
        description=_describe("decode_context_parallel_size"),
        json_schema_extra={"x-unit": "rank", "default": 1},
    )
    async_scheduling: bool | None = Field(
        default=None,
        strict=True,
        description=_describe("async_scheduling"),
        json_schema_extra={"default": False},
    )
    max_concurrent_batches: int | None = Field(
        default=None,
        strict=True,
        ge=1,
        le=1 << 16,
        description=_describe("max_concurrent_batches"),
        json_schema_extra={"x-unit": "batch"},
    )
    num_speculative_tokens: int | None = Field(
        default=None,
        strict=True,
        ge=0,
        le=1 << 10,
        description=_describe("num_speculative_tokens"),
        json_schema_extra={"x-unit": "token", "default": 0},
    )
    memory_budget: RankBytes | None = Field(default=None, description=_describe("memory_budget"))
    gpu_memory: RankBytes | None = Field(default=None, description=_describe("gpu_memory"))
    gpu_memory_utilization: float | None = Field(
        default=None,
        strict=True,
        gt=0,
        le=1,
        allow_inf_nan=False,
        description=_describe("gpu_memory_utilization"),
        json_schema_extra={"default": GPU_MEMORY_UTILIZATION},
    )
    weights_memory: RankBytes | None = Field(default=None, description=_describe("weights_memory"))
    activation_memory: RankBytes | None = Field(
        default=None, description=_describe("activation_memory")
    )
    cache_dtype: Literal["auto"] | CacheDType | None = Field(
        default=None,
        description="cache element type for every layer; 'auto' keeps each layer's own",
    )

    kv_cache_layout: Literal["per_group", "shared"] | None = Field(
        default=None,
        description=_describe("kv_cache_layout"),
        json_schema_extra={"default": "per_group"},
    )

    admission: Literal["reserve", "on_demand", "declared"] | None = Field(
        default=None,
        description=_describe("admission"),
        json_schema_extra={"default": "reserve"},
    )
    scheduling_policy: Literal["fcfs", "priority"] | None = Field(
        default=None,
        description=_describe("scheduling_policy"),
        json_schema_extra={"default": "fcfs"},
    )
    watermark: float | None = Field(
        default=None,
        strict=True,
        ge=0,
        lt=1,
        allow_inf_nan=False,
        description=_describe("watermark"),
        json_schema_extra={"default": 0.0},
    )

    @field_validator("cache_dtype", mode="before")
    @classmethod
    def _parse_dtype(cls, value: object) -> object:
        # ASCII whitespace only, as CacheDType.parse and the schema's pattern.
        if isinstance(value, str) and value.strip(" \t\n\r\f\v").lower() != "auto":
            return CacheDType.parse(value)
        return value.strip(" \t\n\r\f\v").lower() if isinstance(value, str) else value

    def given(self) -> dict[str, object]:
        """The settings the file gives, by name."""
        return {
            name: getattr(self, name) for name in ENGINE_FIELDS if name in self.model_fields_set
        }


class ConfigFile(SpecModel):
    """A kvunits config file: the schema of the TOML, YAML and JSON forms."""

    model_config = ConfigDict(frozen=True, extra="forbid", title="kvunits config")

    model: ModelConfig = Field(description="the model: layer groups and single layers")
    engine: EngineConfig = Field(
        default_factory=EngineConfig, description="engine settings that size the cache"
    )


# -- the resolved config --------------------------------------------------------------------


class KvUnitsConfig(SpecModel):
    """A loaded config: the frozen specs, and where each engine setting came from.

    Attributes:
        model: the model spec; group ``g`` of the file is layers ``g.0``, ``g.1``, ….
        engine: the engine spec, after precedence (flag > environment > file > default).
        source: the file the config was read from.
        engine_sources: for each engine setting: ``"file"``, ``"default"``,
            ``"env KVUNITS_…"``, ``"flag --…"``, or ``"hf <field>"`` (a value derived from a
            Hugging Face config).
    """

    model_config = _FROZEN

    model: ModelSpec
    engine: EngineSpec
    source: str
    engine_sources: dict[str, str]
