"""Whose count it is: the model's, or one rank's.

A model served on several GPUs is planned per GPU (per *rank*), as vLLM plans it: tensor
parallelism (TP) splits each layer's KV heads over ``tp`` ranks, pipeline parallelism (PP)
splits the layers over ``pp`` stages, and decode context parallelism (DCP) splits a sequence's
positions over ``dcp`` of the TP ranks. The same count then exists twice: 8 KV heads of the
model are 1 KV head on each of 8 ranks; a 65536-byte page of the model is an 8192-byte page
on each rank. Mixing the two is the bug of SGLang #19086 and transformers #48566 (a pool sized
with the model's heads while each rank holds its share), so a rank's count is its own type:

================ ================== ===================================================
class            unit               one of it is
================ ================== ===================================================
`KVHeads`        ``kv_head``        a KV head of one layer, as the model declares it
`RankKVHeads`    ``kv_head/rank``   a KV head one tensor-parallel rank holds
`RankBytes`      ``byte/rank``      a byte of one rank's memory (its KV budget, a page)
`RankBlocks`     ``cache_block/rank`` a page one rank holds (per layer of a group)
`RankTokens`     ``token/rank``     a position of a sequence one DCP rank stores
================ ================== ===================================================

The model's bytes and blocks stay `kvunits.contracts.Bytes` and `kvunits.contracts.CacheBlocks`.
Like every quantity, ``KVHeads(8) + RankKVHeads(1)`` is a mypy ``[operator]`` error and a
`UnitTypeError` at run time, and a function that takes one rejects the other. The conversions
between them are the named functions below, each stating its rounding (`DEPLOY_CONVERSIONS`).

Example:
    >>> tp16 = Parallelism(tensor_parallel_size=16)
    >>> kv_heads_per_rank(KVHeads(8), tp16), head_replicas(KVHeads(8), tp16)
    (RankKVHeads(1), 2)
    >>> pp3 = Parallelism(pipeline_parallel_size=3)
    >>> [layers_of_stage(stage) for stage in layers_per_stage(Layers(32), pp3)]
    [StageLayers(11), StageLayers(11), StageLayers(10)]
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, TypeVar, final

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler, ValidationInfo
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from ._convert import Conversion, cdiv
from ._counts import KVHeads, Layers, StageLayers
from ._describe import describe
from ._factors import BlockSize
from ._layers import (
    EncoderOnlyLayer,
    IndexerLayer,
    KVSharedLayer,
    LayerSpec,
    MLALayer,
    StateLayer,
)
from ._origin import in_python, written_in_python
from ._quantity import (
    AdmissionCap,
    Bytes,
    CacheBlocks,
    IntQuantity,
    PoolBlocks,
    Tokens,
    coerce_quantity,
)
from ._views import ManagerSpec
from .errors import SpecError, UnitError, UnitTypeError, UnitValueError
from .state import StateMixerLayer

# -- the counts -------------------------------------------------------------------------------


@final
class RankKVHeads(IntQuantity):
    """KV heads of one attention layer that one tensor-parallel rank holds (`kv_heads_per_rank`)."""

    __slots__ = ()
    unit: ClassVar[str] = "kv_head/rank"


@final
class RankBytes(IntQuantity):
    """Memory of one rank (one GPU): its KV cache budget, a page of its share of the heads,
    what one request holds there.

    A config writes a per-rank memory setting in bytes (``memory_budget = "40 GiB"``: each
    device's budget); it reads back as ``byte/rank``.
    """

    __slots__ = ()
    unit: ClassVar[str] = "byte/rank"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.with_info_plain_validator_function(
            _validate_rank_bytes,
            serialization=core_schema.plain_serializer_function_ser_schema(
                _rank_bytes_text, when_used="always"
            ),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {
            "type": "string",
            "pattern": r"^\s*[0-9][0-9_,]*\s*[A-Za-z][A-Za-z_]*\s*$",
            "description": "an integer and a byte unit (B, KiB … TiB, kB … TB): one rank's "
            "(one device's) memory",
            "x-unit": "byte",
            "x-per": "rank",
            "examples": ["40 GiB"],
        }


@final
class RankBlocks(IntQuantity):
    """Pages one rank holds, each ``block_size`` slots of its share of the heads (per layer of
    a group): blocks bought per rank, a request's blocks on one rank."""

    __slots__ = ()
    unit: ClassVar[str] = "cache_block/rank"


@final
class RankTokens(IntQuantity):
    """Positions of one sequence that one decode-context-parallel rank stores."""

    __slots__ = ()
    unit: ClassVar[str] = "token/rank"


def _validate_rank_bytes(value: object, info: ValidationInfo) -> RankBytes:
    """Config input of a per-rank memory setting: text or a pint quantity in bytes, or a
    `RankBytes`; the model's `Bytes` is refused (whose bytes would it be?). Python
    construction takes a `RankBytes` only (`kvunits.contracts._origin`)."""
    if type(value) is RankBytes:
        return value
    if in_python(info) and not isinstance(value, IntQuantity):
        try:
            fix = f"RankBytes({coerce_quantity(value, (Bytes,))._value})"
        except UnitError:
            fix = "RankBytes(n), n bytes of one rank"
        raise written_in_python(info, value, fix, "RankBytes (byte/rank)")
    try:
        if isinstance(value, IntQuantity):
            raise UnitTypeError(
                f"expected byte/rank (one rank's memory), got {value}; a per-rank setting is "
                "written as text, '40 GiB', or RankBytes(...) in Python",
                expected="byte/rank",
                got=str(value),
            )
        parsed = coerce_quantity(value, (Bytes,))
    except UnitError as exc:
        raise PydanticCustomError(
            "unit_error",
            "{message}",
            {"message": exc.message, "expected": exc.expected or "byte", "got": exc.got},
        ) from None
    # A config's memory setting is one device's by definition (the field says so).
    return RankBytes(parsed._value)


def _rank_bytes_text(value: RankBytes) -> str:
    return f"{value._value} byte"  # text a config reads back (the field is per rank)


_C = TypeVar("_C", bound=IntQuantity)


def _check(value: object, cls: type[_C], field: str) -> _C:
    if type(value) is cls:
        return value
    raise UnitTypeError(
        f"{field} must be {cls.__name__} ({cls.unit}), got {describe(value)}",
        field=field,
        expected=cls.unit,
        got=describe(value),
    )


# -- the deployment's shape ---------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Parallelism:
    """How many ranks share the model: vLLM's ``ParallelConfig`` sizes, by vLLM's names.

    Attributes:
        tensor_parallel_size: ranks that split every layer's heads (TP).
        pipeline_parallel_size: stages that split the layers (PP); a rank is in one stage.
        decode_context_parallel_size: TP ranks that split a sequence's positions (DCP). DCP
            reuses TP ranks, so it divides ``tensor_parallel_size``
            (vLLM ``ParallelConfig``: "tp_size must be divisible by dcp_size").

    Example:
        >>> p = Parallelism(tensor_parallel_size=8, pipeline_parallel_size=2)
        >>> p.world_size, str(p)
        (16, 'TP 8 × PP 2 (DCP 1): 16 ranks')
    """

    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    decode_context_parallel_size: int = 1

    def __post_init__(self) -> None:
        for name in (
            "tensor_parallel_size",
            "pipeline_parallel_size",
            "decode_context_parallel_size",
        ):
            size = getattr(self, name)
            if type(size) is not int:
                raise UnitTypeError(
                    f"{name} takes an int number of ranks, got {describe(size)}",
                    field=name,
                    expected="int >= 1",
                    got=describe(size),
                )
            if size < 1:
                raise UnitValueError(
                    f"{name} must be >= 1, got {size}",
                    field=name,
                    expected="int >= 1",
                    got=str(size),
                )
        tp, dcp = self.tensor_parallel_size, self.decode_context_parallel_size
        if tp % dcp:
            raise SpecError(
                f"decode_context_parallel_size {dcp} must divide tensor_parallel_size {tp}: "
                "DCP splits a sequence over TP ranks (vLLM ParallelConfig)"
            )

    @property
    def world_size(self) -> int:
        """Ranks of one engine: ``tp × pp`` (DCP reuses the TP ranks)."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    def __str__(self) -> str:
        ranks = self.world_size
        return (
            f"TP {self.tensor_parallel_size} × PP {self.pipeline_parallel_size} "
            f"(DCP {self.decode_context_parallel_size}): {ranks} rank{'s' if ranks > 1 else ''}"
        )


def _parallelism(value: object) -> Parallelism:
    if type(value) is not Parallelism:
        raise UnitTypeError(
            f"parallelism must be a Parallelism, got {describe(value)}",
            field="parallelism",
            expected="Parallelism",
            got=describe(value),
        )
    return value


# -- the named conversions ----------------------------------------------------------------------


def kv_heads_per_rank(heads: KVHeads, parallelism: Parallelism) -> RankKVHeads:
    """KV heads one TP rank holds: ``max(1, H // tp)``, rounding down but never below one
    head (a head is replicated when ``tp > H``).

    vLLM: ``ModelConfig.get_num_kv_heads`` (``max(1, total_num_kv_heads // tp)``); each
    model's attention asserts that tp divides the heads (partition) or the heads divide tp
    (replication): ``LlamaAttention.__init__``.

    Raises:
        UnitTypeError: ``heads`` is not `KVHeads` (a rank's heads, a bare int).
        UnitValueError: 0 heads.
        SpecError: neither divides the other (8 heads over 3 ranks).

    Example:
        >>> [str(kv_heads_per_rank(KVHeads(8), Parallelism(tensor_parallel_size=t)))
        ...  for t in (1, 2, 8, 16)]
        ['8 kv_head/rank', '4 kv_head/rank', '1 kv_head/rank', '1 kv_head/rank']
    """
    h = _check(heads, KVHeads, "heads")._value
    tp = _parallelism(parallelism).tensor_parallel_size
    if h < 1:
        raise UnitValueError(
            "a layer with a KV cache has at least 1 kv_head, got 0",
            field="heads",
            expected="an int >= 1 of kv_head",
            got=str(heads),
        )
    if (h >= tp and h % tp) or (h < tp and tp % h):
        raise SpecError(
            f"{heads} cannot be split over tensor_parallel_size {tp}: vLLM partitions the "
            "heads when tp divides them and replicates them when they divide tp"
        )
    return RankKVHeads(max(1, h // tp))


def head_replicas(heads: KVHeads, parallelism: Parallelism) -> int:
    """Ranks that hold each KV head: ``tp // H`` when ``tp > H`` (replicated), else 1."""
    h = _check(heads, KVHeads, "heads")._value
    tp = _parallelism(parallelism).tensor_parallel_size
    return tp // h if h and tp > h else 1


def layers_per_stage(num_layers: Layers, parallelism: Parallelism) -> tuple[range, ...]:
    """Which of ``n`` stacked layers each pipeline stage holds: ``n // pp`` each, the
    remainder ``n % pp`` one more each to stages −2, −3, … (never the last: it holds the final
    norm), as vLLM's ``get_pp_indices`` (``vllm/distributed/utils.py``) splits every layer
    list it builds (``make_layers``). ``VLLM_PP_LAYER_PARTITION`` is not modelled. A stage's
    count is `layers_of_stage` of its range.

    Raises:
        UnitTypeError: ``num_layers`` is not `Layers` (a bare int, a stage's layers).

    Example:
        >>> layers_per_stage(Layers(61), Parallelism(pipeline_parallel_size=4))
        (range(0, 15), range(15, 30), range(30, 46), range(46, 61))
    """
    n = _check(num_layers, Layers, "num_layers")._value
    pp = _parallelism(parallelism).pipeline_parallel_size
    per_stage, remainder = divmod(n, pp)
    sizes = [per_stage] * pp
    for i in range(2, remainder + 2):
        sizes[-i] += 1
    # Each stage starts where the stages before it end: a running sum, linear in pp.
    starts = itertools.accumulate(sizes[:-1], initial=0)
    return tuple(range(start, start + size) for start, size in zip(starts, sizes, strict=True))


def layers_of_stage(stage: range | Sequence[str]) -> StageLayers:
    """The layers one stage holds, counted: ``len(stage)`` of a range `layers_per_stage`
    gives (or of the stage's layer names), as `StageLayers`, not the model's `Layers`.

    Example:
        >>> layers_of_stage(layers_per_stage(Layers(61), Parallelism(pipeline_parallel_size=4))[2])
        StageLayers(16)
    """
    if isinstance(stage, str) or not isinstance(stage, (range, Sequence)):
        raise UnitTypeError(
            f"stage must be the range layers_per_stage gives (or the stage's layer names), "
            f"got {describe(stage)}",
            field="stage",
            expected="range | Sequence[str]",
            got=describe(stage),
        )
    return StageLayers(len(stage))


def rank_block_bytes(page_size: RankBytes, layers: StageLayers) -> RankBytes:
    """Memory one block id holds on one rank: a page of the rank's share in each layer of its
    stage, ``page_size × layers``, exact.

    A rank holds its stage's layers, not the model's: the model's `Layers` are refused
    (mypy and the run time), as is a bare int.

    Example:
        >>> rank_block_bytes(RankBytes(8192), StageLayers(16))
        RankBytes(131072)
    """
    page = _check(page_size, RankBytes, "page_size")._value
    return RankBytes(page * _check(layers, StageLayers, "layers")._value)


def kv_heads_of(layer: LayerSpec) -> KVHeads | None:
    """The model's KV heads of a layer: an attention layer's ``kv_heads``, an MLA layer's one
    latent, an indexer's one key (both whole on every rank); ``None`` for a layer without
    heads (a state, or no cache of its own).

    Example:
        >>> from kvunits.contracts import FullAttentionLayer
        >>> from kvunits.contracts import Elements
        >>> kv_heads_of(FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128)))
        KVHeads(8)
    """
    if isinstance(layer, (MLALayer, IndexerLayer)):
        return KVHeads(1)
    if isinstance(layer, (StateMixerLayer, StateLayer, EncoderOnlyLayer, KVSharedLayer)):
        return None
    return layer.kv_heads


def page_size_per_rank(
    layer: LayerSpec, manager: ManagerSpec[Any], parallelism: Parallelism
) -> RankBytes:
    """One layer's page on one TP rank (its share of the heads or of the state), exact.

    * attention: ``block_size × P × heads_per_rank × (K + V) × dtype``, the manager's page
      with the model's heads replaced by `kv_heads_per_rank` (vLLM's
      ``AttentionSpec.page_size_bytes`` is computed from the per-rank ``num_kv_heads``);
    * MLA and an indexer: the one head is whole on every rank, so the page is the model's;
    * a recurrent mixer: its conv and SSM tensors split over the ranks exactly as vLLM's
      ``MambaStateShapeCalculator`` (`StateMixerLayer.state_tensors`);
    * a ``state`` layer given only in bytes: whole on every rank (its shape is unknown, so
      kvunits cannot split it; this over-counts a sharded state, never under-counts).

    Raises:
        SpecError: the layer keeps no cache, the heads cannot be split over tp
            (`kv_heads_per_rank`), or tp does not divide a mixer's sizes.

    Example:
        >>> from kvunits.contracts import FullAttentionLayer, manager_view
        >>> from kvunits.contracts import Elements
        >>> layer = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))
        >>> page_size_per_rank(layer, manager_view(layer, 16), Parallelism(tensor_parallel_size=2))
        RankBytes(32768)
    """
    p = _parallelism(parallelism)
    if isinstance(layer, StateMixerLayer):
        return RankBytes(sum(t.size._value for t in layer.state_tensors(p.tensor_parallel_size)))
    if isinstance(layer, StateLayer):
        return RankBytes(layer.state_size._value)
    if isinstance(layer, (EncoderOnlyLayer, KVSharedLayer)):
        raise SpecError(f"a {layer.kind} layer keeps no KV cache of its own: it has no page")
    heads = kv_heads_of(layer)
    assert heads is not None  # every other layer has heads
    per_rank = kv_heads_per_rank(heads, p)
    page = manager.page_size._value
    # The page is proportional to the heads: block_size × P × heads × (K + V) × dtype.
    return RankBytes(page // manager.kv_heads._value * per_rank._value)


def tokens_per_dcp_rank(length: Tokens, parallelism: Parallelism) -> RankTokens:
    """Positions of a sequence of n tokens that the fullest DCP rank stores: ``cdiv(n, dcp)``,
    rounds up (token i lives on rank ``i % dcp`` at vLLM's default interleave of 1, so rank 0
    holds the extra ones).

    vLLM: ``FullAttentionSpec.max_memory_usage_bytes`` (``cdiv(max_model_len, dcp)``).

    Example:
        >>> tokens_per_dcp_rank(Tokens(131073), Parallelism(tensor_parallel_size=16,
        ...                                                  decode_context_parallel_size=2))
        RankTokens(65537)
    """
    n = _check(length, Tokens, "length")._value
    return RankTokens(cdiv(n, _parallelism(parallelism).decode_context_parallel_size))


def rank_tokens_to_blocks_ceil(tokens: RankTokens, block_size: BlockSize[Tokens]) -> RankBlocks:
    """Pages one rank needs for the positions it stores: ``cdiv(n, block_size)``, rounds up.

    Example:
        >>> rank_tokens_to_blocks_ceil(RankTokens(65536), BlockSize(16, Tokens))
        RankBlocks(4096)
    """
    n = _check(tokens, RankTokens, "tokens")._value
    return RankBlocks(cdiv(n, block_size.numerical_value_in(Tokens)))


def blocks_per_rank(blocks: CacheBlocks | AdmissionCap | PoolBlocks) -> RankBlocks:
    """The pages each rank holds for ``blocks`` block ids of the scheduler (pages held, a
    request's cap, a pool): the same number, exact. A block id names one page on every rank
    of every stage holding the group (vLLM keeps one block table per engine and gives every
    worker the same ``num_blocks``)."""
    if type(blocks) not in (CacheBlocks, AdmissionCap, PoolBlocks):
        _check(blocks, CacheBlocks, "blocks")
    return RankBlocks(blocks._value)


def engine_blocks(per_rank: Sequence[RankBlocks]) -> PoolBlocks:
    """The block ids the scheduler can hand out, given the pages *every* rank holds: the
    fewest, ``min(per_rank)`` (a block id names a page on every rank, so the smallest pool
    bounds them all: vLLM's ``get_kv_cache_configs`` "Change the num_blocks of each rank to
    the smallest among all ranks"; nano-vllm #187 is the bug of one rank's count taken for
    the engine's). The inverse of `blocks_per_rank`.

    Raises:
        UnitTypeError: one rank's count (not a sequence of every rank's), or an item that is
            not `RankBlocks`.
        UnitValueError: no rank at all.

    Example:
        >>> engine_blocks([RankBlocks(2111), RankBlocks(2055)])
        PoolBlocks(2055)
    """
    if isinstance(per_rank, IntQuantity) or not isinstance(per_rank, Sequence):
        raise UnitTypeError(
            f"engine_blocks takes every rank's pages (a sequence of RankBlocks), got "
            f"{describe(per_rank)}: one rank's count is not the engine's, which is the fewest "
            "any rank holds; gather every rank's and pass them all",
            field="per_rank",
            expected="Sequence[RankBlocks] (every rank's)",
            got=describe(per_rank),
        )
    if not per_rank:
        raise UnitValueError(
            "engine_blocks needs at least one rank's pages", field="per_rank", got="[]"
        )
    return PoolBlocks(min(_check(b, RankBlocks, "per_rank[]")._value for b in per_rank))


def rank_blocks_to_bytes(blocks: RankBlocks, page_size: RankBytes) -> RankBytes:
    """Memory of ``n`` pages of one rank: ``n × page_size``, exact."""
    n = _check(blocks, RankBlocks, "blocks")._value
    return RankBytes(n * _check(page_size, RankBytes, "page_size")._value)


def rank_bytes_to_blocks_floor(budget: RankBytes, page_size: RankBytes) -> RankBlocks:
    """Whole pages of ``page_size`` that fit in one rank's ``budget``: ``budget // page``,
    rounds down.

    Raises:
        UnitValueError: ``page_size`` is 0.
    """
    page = _check(page_size, RankBytes, "page_size")._value
    if page == 0:
        raise UnitValueError(
            "page_size must be > 0 byte/rank to count pages", field="page_size", got="0"
        )
    return RankBlocks(_check(budget, RankBytes, "budget")._value // page)


def requested_memory(gpu_memory: RankBytes, utilization: float) -> RankBytes:
    """The memory one rank lets vLLM use: ``ceil(gpu_memory × utilization)``, rounds up, the
    product in floating point as vLLM's ``request_memory`` (``vllm/v1/worker/utils.py``)
    computes it from the device's *total* memory.

    Raises:
        UnitValueError: ``utilization`` is not in (0, 1].

    Example:
        >>> requested_memory(RankBytes(80 << 30), 0.9)
        RankBytes(77309411328)
    """
    total = _check(gpu_memory, RankBytes, "gpu_memory")._value
    if isinstance(utilization, bool) or not isinstance(utilization, (int, float)):
        raise UnitTypeError(
            f"gpu_memory_utilization must be a number in (0, 1], got {describe(utilization)}",
            field="gpu_memory_utilization",
            expected="a fraction in (0, 1]",
            got=describe(utilization),
        )
    if not 0 < utilization <= 1:
        raise UnitValueError(
            f"gpu_memory_utilization must be in (0, 1], got {utilization!r}",
            field="gpu_memory_utilization",
            expected="a fraction in (0, 1]",
            got=repr(utilization),
        )
    return RankBytes(math.ceil(total * utilization))


#: The deployment's conversions, as `kvunits.contracts.CONVERSIONS` lists every conversion.
DEPLOY_CONVERSIONS: Final[tuple[Conversion, ...]] = (
    Conversion("kv_heads_per_rank", "kv_head", "kv_head/rank", "floor", "max(1, H // tp)"),
    Conversion(
        "layers_per_stage",
        "layer",
        "layer/stage",
        "floor",
        "n // pp, the remainder n % pp one each to stages -2, -3, ...",
    ),
    Conversion(
        "page_size_per_rank",
        "kv_head/rank",
        "byte/rank",
        "exact",
        "block_size * P * heads_per_rank * (K + V) * dtype",
    ),
    Conversion("tokens_per_dcp_rank", "token", "token/rank", "ceil", "cdiv(n, dcp)"),
    Conversion(
        "rank_tokens_to_blocks_ceil",
        "token/rank",
        "cache_block/rank",
        "ceil",
        "cdiv(n, block_size)",
    ),
    Conversion("blocks_per_rank", "cache_block", "cache_block/rank", "exact", "n"),
    Conversion("engine_blocks", "cache_block/rank", "cache_block", "exact", "min over ranks"),
    Conversion("layers_of_stage", "layer", "layer/stage", "exact", "len(stage)"),
    Conversion("rank_block_bytes", "byte/rank", "byte/rank", "exact", "page_size * stage layers"),
    Conversion("rank_blocks_to_bytes", "cache_block/rank", "byte/rank", "exact", "n * page_size"),
    Conversion(
        "rank_bytes_to_blocks_floor",
        "byte/rank",
        "cache_block/rank",
        "floor",
        "budget // page_size",
    ),
    Conversion(
        "requested_memory",
        "byte/rank",
        "byte/rank",
        "ceil",
        "ceil(gpu_memory * gpu_memory_utilization)",
    ),
)


__all__ = [
    "DEPLOY_CONVERSIONS",
    "KVHeads",
    "Parallelism",
    "RankBlocks",
    "RankBytes",
    "RankKVHeads",
    "RankTokens",
    "blocks_per_rank",
    "engine_blocks",
    "head_replicas",
    "kv_heads_of",
    "kv_heads_per_rank",
    "layers_of_stage",
    "layers_per_stage",
    "page_size_per_rank",
    "rank_block_bytes",
    "rank_blocks_to_bytes",
    "rank_bytes_to_blocks_floor",
    "rank_tokens_to_blocks_ceil",
    "requested_memory",
    "tokens_per_dcp_rank",
]
