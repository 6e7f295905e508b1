"""Capacity planning: what a model's cache needs per request, and what a budget buys.

Per group (see `kvunits.contracts.group_layers`): page size per layer, the admission cap (the same
`ManagerSpec.max_admission_blocks_per_request` that run-time admission calls, so the two
cannot drift), and bytes per request: the model's numbers, all heads on one device. Per rank
(`kvunits.runtime.deployment`): the layers each pipeline stage holds, each rank's share of the heads
and its page, a request's pages on a rank, and what each rank's budget buys, split between the
groups of its stage in proportion to what one request needs in each, one null block per
group. On one device (no TP, PP or DCP) the two are the same numbers.

That is the engine's default ``kv_cache_layout``, ``per_group``. With ``shared``, every group
draws on one pool, pages unified (`kvunits.runtime.shared_pool`, one device). The plan reports what
the other layout would buy too (`CapacityPlan.layouts`), or why it cannot be laid out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, final

from kvunits.contracts import (
    AdmissionCap,
    AnyLayerGroup,
    Bytes,
    EncoderTokens,
    EngineSpec,
    Layers,
    ModelSpec,
    PoolBlocks,
    SpecError,
    Tokens,
    Window,
    group_layers,
)
from kvunits.contracts.deploy import (
    Parallelism,
    RankBlocks,
    RankBytes,
    engine_blocks,
    head_replicas,
    kv_heads_of,
    kv_heads_per_rank,
)

from .block_pool import MAX_POOL_BLOCKS
from .deployment import Layout, RankGroupPlan, Shortfall, StagePlan, stage_layers

#: A plan's pool layout: a pool per group, or one pool for all (the engine's
#: ``kv_cache_layout``).
PoolLayout = Literal["per_group", "shared"]


@final
@dataclass(frozen=True, slots=True)
class LayoutPlan:
    """What one pool layout buys: the summary the plan gives of both layouts.

    Attributes:
        layout: ``"per_group"`` or ``"shared"``.
        concurrent_requests: requests admitted at once, each at full length (None: refused).
        num_blocks: cache blocks of each pool, null blocks included (one entry when shared).
        bytes_per_request: a full-length request's cache.
        page_size: the one page of the shared layout (None per group).
        refused: why the layout cannot be planned (None when it can).
    """

    layout: PoolLayout
    concurrent_requests: int | None
    num_blocks: tuple[PoolBlocks, ...]
    bytes_per_request: Bytes | None
    page_size: Bytes | None = None
    refused: str | None = None


@final
@dataclass(frozen=True, slots=True)
class GroupPlan:
    """The plan of one layer group: the model's numbers (all its heads, on one device), and
    the pool every rank holds.

    Attributes:
        group: the group (manager view, kernel views, limits in slot units).
        sliding_window: the window as the model writes it (kernel unit), if the group's
            layers share one; the manager's (slot unit) is ``group.manager.sliding_window``.
        page_size: bytes of one cache block of one layer, every KV head of the model.
        block_bytes: bytes of one cache block of the group (one page per layer).
        admission_cap: cache blocks one request can hold at once (the manager's, which
            run-time admission reserves; DCP's shards are in the stages' plans).
        bytes_per_request: ``admission_cap × block_bytes``.
        num_blocks: the block ids of the group's pool, the null block included: each is one
            page on every rank holding the group (`kvunits.runtime.deployment`).
    """

    group: AnyLayerGroup
    sliding_window: Window[EncoderTokens] | Window[Tokens] | None
    page_size: Bytes
    block_bytes: Bytes
    admission_cap: AdmissionCap
    bytes_per_request: Bytes
    num_blocks: PoolBlocks


@final
@dataclass(frozen=True, slots=True)
class CapacityPlan:
    """The capacity plan of a model on an engine's deployment.

    Attributes:
        groups: one plan per layer group (the model's numbers and the pool).
        stages: per pipeline stage, what each of its ranks holds (one stage without PP).
        uncached_layers: layers that keep no cache (``encoder_only``, ``kv_shared``).
        bytes_per_request: a full-length request's cache over all groups, the model's.
        parallelism: the tensor, pipeline and decode-context parallel sizes.
        kv_cache_memory: each rank's KV cache budget (`EngineSpec.kv_cache_memory`).
        concurrent_requests: requests admitted at once, each at full length.
        layout: the engine's ``kv_cache_layout``, which ``groups`` follow (with ``shared``:
            the groups split to equal layer counts, block sizes unified, each ``num_blocks``
            the one pool's).
        layouts: both layouts' summaries (this one first), to compare.
    """

    model: ModelSpec
    engine: EngineSpec
    groups: tuple[GroupPlan, ...]
    stages: tuple[StagePlan, ...]
    uncached_layers: tuple[str, ...]
    bytes_per_request: Bytes
    parallelism: Parallelism
    kv_cache_memory: RankBytes
    concurrent_requests: int
    layout: PoolLayout = "per_group"
    layouts: tuple[LayoutPlan, ...] = ()

    def group(self, name: str) -> GroupPlan:
        """The plan of the group called ``name``."""
        for plan in self.groups:
            if plan.group.name == name:
                return plan
        known = ", ".join(p.group.name for p in self.groups)
        raise SpecError(f"no group {name!r}; groups: {known}")


def plan(model: ModelSpec, engine: EngineSpec) -> CapacityPlan:
    """Plan the cache of ``model`` on ``engine``, per rank, in the engine's
    ``kv_cache_layout``, and summarise the other layout too.

    Raises:
        SpecError: as `plan_per_group`, or the shared layout is asked for and cannot be laid
            out (`kvunits.runtime.shared_pool`: pages that do not unify, a deployment on several
            ranks).
    """
    mine: CapacityPlan | None = None
    summaries: dict[PoolLayout, LayoutPlan] = {}
    order: tuple[PoolLayout, PoolLayout] = ("per_group", "shared")
    if engine.kv_cache_layout == "shared":
        order = ("shared", "per_group")
    for layout in order:
        try:
            planned = (
                plan_per_group(model, engine)
                if layout == "per_group"
                else plan_shared(model, engine)
            )
        except SpecError as err:
            if layout == engine.kv_cache_layout:
                raise
            summaries[layout] = LayoutPlan(layout, None, (), None, refused=err.message)
            continue
        if layout == engine.kv_cache_layout:
            mine = planned
        summaries[layout] = planned.layouts[0]
    assert mine is not None
    return CapacityPlan(
        model=mine.model,
        engine=mine.engine,
        groups=mine.groups,
        stages=mine.stages,
        uncached_layers=mine.uncached_layers,
        bytes_per_request=mine.bytes_per_request,
        parallelism=mine.parallelism,
        kv_cache_memory=mine.kv_cache_memory,
        concurrent_requests=mine.concurrent_requests,
        layout=engine.kv_cache_layout,
        layouts=tuple(summaries[layout] for layout in order),
    )


def plan_per_group(model: ModelSpec, engine: EngineSpec) -> CapacityPlan:
    """The plan with a pool per group, per rank.

    Raises:
        SpecError: the model keeps no cache, a chunked-local layer's chunk is not a whole
            number of cache blocks (from `kvunits.contracts.manager_view`), the deployment does not
            suit the model (heads that tp cannot split, DCP where vLLM refuses it), or a
            stage's budget cannot hold its null blocks plus one full-length request (the
            message gives the longest ``max_model_len`` that fits), or it buys a group more
            cache blocks than int32 block tables can address (`MAX_POOL_BLOCKS`).
    """
    layout = Layout(model, engine)
    caps = layout.rank_caps(engine.max_model_len)
    blocks = layout.split(caps)
    if isinstance(blocks, Shortfall):
        raise _too_small(layout, blocks)
    plans = []
    per_request = 0
    for shape, n in zip(layout.shapes, blocks, strict=True):
        group = shape.group
        cap = group.admission_cap()
        # One page of each layer of the group per cache block, in the group's own page size.
        layers = group.num_layers.numerical_value_in(Layers)
        block_bytes = group.manager.page_size.numerical_value_in(Bytes) * layers
        per_request += cap.numerical_value_in(AdmissionCap) * block_bytes
        plans.append(
            GroupPlan(
                group=group,
                sliding_window=_sliding_window(group),
                page_size=group.manager.page_size,
                block_bytes=Bytes(block_bytes),
                admission_cap=cap,
                bytes_per_request=Bytes(cap.numerical_value_in(AdmissionCap) * block_bytes),
                # Every rank of every stage holds the split's n pages (its fewest).
                num_blocks=engine_blocks((n,)),
            )
        )
    too_many = [p for p in plans if p.num_blocks.numerical_value_in(PoolBlocks) > MAX_POOL_BLOCKS]
    if too_many:
        # Block tables may be int32 (the kernels take int32 or int64): ids 0 .. 2**31 - 1.
        worst = too_many[0]
        fits = layout.largest_budget(caps, MAX_POOL_BLOCKS)
        raise SpecError(
            f"{_budget(engine)} buys {worst.num_blocks} in group {worst.group.name!r}, but "
            f"block ids must fit int32 block tables: at most {MAX_POOL_BLOCKS} cache_block "
            f"per group (ids 0 .. {MAX_POOL_BLOCKS - 1}); lower the budget to at most {fits}, "
            "or use larger cache blocks (block_size_slots)"
        )
    concurrent = layout.concurrency(caps, blocks)
    summary = LayoutPlan(
        "per_group", concurrent, tuple(p.num_blocks for p in plans), Bytes(per_request)
    )
    return CapacityPlan(
        model=model,
        engine=engine,
        groups=tuple(plans),
        stages=layout.stage_plans(caps, blocks),
        uncached_layers=layout.uncached,
        bytes_per_request=Bytes(per_request),
        parallelism=layout.parallelism,
        kv_cache_memory=engine.kv_cache_memory,
        concurrent_requests=concurrent,
        layouts=(summary,),
    )


def plan_shared(model: ModelSpec, engine: EngineSpec) -> CapacityPlan:
    """The plan with one pool for all groups (`kvunits.runtime.shared_pool`), on one device.

    Raises:
        SpecError: a deployment on several ranks (each rank would unify its own pages: not
            planned here), pages that do not unify, a budget that cannot hold the null block
            and one full-length request, or more blocks than int32 block tables address.
    """
    from .shared_pool import shared_layout

    parallelism = engine.parallelism
    if parallelism.world_size > 1 or parallelism.decode_context_parallel_size > 1:
        raise SpecError(
            f"kv_cache_layout = 'shared' is planned for one device; with {parallelism} each "
            "rank would unify the pages of its own share of the heads and layers, which "
            "kvunits does not plan: use kv_cache_layout = 'per_group'"
        )
    shared = shared_layout(model, engine)
    page = shared.page_size.numerical_value_in(Bytes)
    per_block = shared.layers_per_block
    block_bytes = page * per_block
    caps = [g.admission_cap().numerical_value_in(AdmissionCap) for g in shared.groups]
    per_request = sum(caps)
    pool = shared.num_blocks.numerical_value_in(PoolBlocks)
    if pool - 1 < per_request:
        raise SpecError(
            f"{_budget(engine)} cannot hold one full-length request in one shared pool: "
            f"{pool} cache_block of {block_bytes} byte ({per_block} layers of {page} byte), "
            f"the null block and {per_request} cache_block for the request"
        )
    if pool > MAX_POOL_BLOCKS:
        # pool = budget // block_bytes <= MAX  <=>  budget < (MAX + 1) × block_bytes.
        fits = (MAX_POOL_BLOCKS + 1) * block_bytes - 1
        raise SpecError(
            f"{_budget(engine)} buys {pool} cache_block in the shared pool, but block ids must "
            f"fit int32 block tables: at most {MAX_POOL_BLOCKS} cache_block (ids 0 .. "
            f"{MAX_POOL_BLOCKS - 1}); lower the budget to at most {fits} byte, or use larger "
            "cache blocks (block_size_slots)"
        )
    plans = tuple(
        GroupPlan(
            group=group,
            sliding_window=_sliding_window(group),
            page_size=group.manager.page_size,
            block_bytes=Bytes(block_bytes),
            admission_cap=AdmissionCap(cap),
            bytes_per_request=Bytes(cap * block_bytes),
            num_blocks=shared.num_blocks,
        )
        for group, cap in zip(shared.groups, caps, strict=True)
    )
    ranks = tuple(
        _rank_plan(g, model, parallelism, block_bytes, cap, pool)
        for g, cap in zip(shared.groups, caps, strict=True)
    )
    (layer_names,) = stage_layers(model, parallelism)
    stage = StagePlan(
        index=0,
        layer_names=layer_names,
        groups=ranks,
        null_bytes=RankBytes(block_bytes),
        bytes_per_request=RankBytes(per_request * block_bytes),
        memory_used=RankBytes(pool * block_bytes),
    )
    concurrent = (pool - 1) // per_request
    summary = LayoutPlan(
        "shared",
        concurrent,
        (shared.num_blocks,),
        Bytes(per_request * block_bytes),
        page_size=shared.page_size,
    )
    _, uncached = group_layers(model, engine)
    return CapacityPlan(
        model=model,
        engine=engine,
        groups=plans,
        stages=(stage,),
        uncached_layers=uncached,
        bytes_per_request=Bytes(per_request * block_bytes),
        parallelism=parallelism,
        kv_cache_memory=engine.kv_cache_memory,
        concurrent_requests=concurrent,
        layout="shared",
        layouts=(summary,),
    )


def _rank_plan(
    group: AnyLayerGroup,
    model: ModelSpec,
    parallelism: Parallelism,
    block_bytes: int,
    cap: int,
    pool: int,
) -> RankGroupPlan:
    """A shared-pool group on the one device: a block spans the pool's pages of every layer."""
    heads = kv_heads_of(model.layers[group.layer_names[0]])
    return RankGroupPlan(
        name=group.name,
        kind=group.manager.kind,
        layer_names=group.layer_names,
        kv_heads=heads,
        kv_heads_per_rank=None if heads is None else kv_heads_per_rank(heads, parallelism),
        head_replicas=1 if heads is None else head_replicas(heads, parallelism),
        dcp_sharded=False,
        page_size=RankBytes(group.manager.page_size.numerical_value_in(Bytes)),
        block_bytes=RankBytes(block_bytes),
        admission_cap=RankBlocks(cap),
        bytes_per_request=RankBytes(cap * block_bytes),
        num_blocks=RankBlocks(pool),
    )


def _budget(engine: EngineSpec) -> str:
    budget = engine.kv_cache_memory
    if engine.memory_budget is not None:
        return f"memory_budget {budget}"
    return f"the KV cache budget {budget} (from gpu_memory)"


def _too_small(layout: Layout, short: Shortfall) -> SpecError:
    what = _budget(layout.engine)
    where = f" on the ranks of stage {short.stage}" if len(layout.stages) > 1 else ""
    needs, null = (
        short.bytes_per_request.numerical_value_in(RankBytes),
        short.null_bytes.numerical_value_in(RankBytes),
    )
    longest = layout.longest_max_model_len()
    if longest.numerical_value_in(Tokens):
        hint = f"; the longest max_model_len that fits is {longest} (kvunits fit)"
    else:
        hint = "; not even a request of 1 token fits"
    return SpecError(
        f"{what} cannot hold one full-length request{where}: it needs {needs} byte/rank plus "
        f"{null} byte/rank of null blocks ({needs + null} byte/rank in all){hint}"
    )


def _sliding_window(group: AnyLayerGroup) -> Window[EncoderTokens] | Window[Tokens] | None:
    """The model's window of the group's layers, when they all share one (a group may hold
    windows 750 and 751 encoder tokens: both manage 189 pooled blocks at P = 4)."""
    windows: set[Window[EncoderTokens] | Window[Tokens]] = {
        k.sliding_window for k in group.kernels.values() if k.sliding_window is not None
    }
    return windows.pop() if len(windows) == 1 else None
