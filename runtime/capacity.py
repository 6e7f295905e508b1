"""Capacity planning: what a model's cache needs per request, and what a budget buys.

Per group (see `contracts.group_layers`): page size per layer, the admission cap (the same
`ManagerSpec.max_admission_blocks_per_request` that run-time admission calls, so the two
cannot drift), and bytes per request. For the whole model: the budget is split between the
groups in proportion to what one request needs in each, every group keeps one null block,
and the plan reports the cache blocks per group and the requests admitted at full length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

from contracts import (
    AnyLayerGroup,
    Bytes,
    CacheBlocks,
    EncoderTokens,
    EngineSpec,
    ModelSpec,
    SpecError,
    Tokens,
    group_layers,
)

from .block_pool import MAX_POOL_BLOCKS


@final
@dataclass(frozen=True, slots=True)
class GroupPlan:
    """The plan of one layer group.

    Attributes:
        group: the group (manager view, kernel views, limits in slot units).
        sliding_window: the window as the model writes it (kernel unit), if the group's
            layers share one; the manager's (slot unit) is ``group.manager.sliding_window``.
        page_size: bytes of one cache block of one layer.
        block_bytes: bytes of one cache block of the group (one page per layer).
        admission_cap: cache blocks one request can hold at once.
        bytes_per_request: ``admission_cap × block_bytes``.
        num_blocks: cache blocks of this group the budget buys, null block included.
    """

    group: AnyLayerGroup
    sliding_window: EncoderTokens | Tokens | None
    page_size: Bytes
    block_bytes: Bytes
    admission_cap: CacheBlocks
    bytes_per_request: Bytes
    num_blocks: CacheBlocks


@final
@dataclass(frozen=True, slots=True)
class CapacityPlan:
    """The capacity plan of a model on an engine.

    Attributes:
        groups: one plan per layer group.
        uncached_layers: layers that keep no cache (``encoder_only``).
        bytes_per_request: a full-length request's cache over all groups.
        memory_budget: the engine's budget.
        concurrent_requests: requests admitted at once, each at full length.
    """

    model: ModelSpec
    engine: EngineSpec
    groups: tuple[GroupPlan, ...]
    uncached_layers: tuple[str, ...]
    bytes_per_request: Bytes
    memory_budget: Bytes
    concurrent_requests: int

    def group(self, name: str) -> GroupPlan:
        """The plan of the group called ``name``."""
        for plan in self.groups:
            if plan.group.name == name:
                return plan
        known = ", ".join(p.group.name for p in self.groups)
        raise SpecError(f"no group {name!r}; groups: {known}")


def plan(model: ModelSpec, engine: EngineSpec) -> CapacityPlan:
    """Plan the cache of ``model`` on ``engine``.

    Raises:
        SpecError: the model keeps no cache, a chunked-local layer's chunk is not a whole
            number of cache blocks (from `contracts.manager_view`), the budget cannot hold
            the null blocks plus one full-length request, or it buys a group more cache
            blocks than int32 block tables can address (`MAX_POOL_BLOCKS`).
    """
    groups, uncached = group_layers(model, engine)
    if not groups:
        raise SpecError(f"model {model.name!r} has no layer with a KV cache to plan")
    caps: list[int] = []
    block_bytes: list[int] = []
    for group in groups:
        caps.append(group.admission_cap().value)
        block_bytes.append(group.manager.page_size_bytes * group.num_layers)
    per_request = sum(c * b for c, b in zip(caps, block_bytes, strict=True))
    null_bytes = sum(block_bytes)
    budget = engine.memory_budget.value
    usable = budget - null_bytes
    if usable < per_request:
        raise SpecError(
            f"memory_budget {engine.memory_budget} cannot hold one full-length request: it "
            f"needs {per_request} byte plus {null_bytes} byte of null blocks "
            f"({per_request + null_bytes} byte in all)"
        )
    plans = []
    for group, cap, bbytes in zip(groups, caps, block_bytes, strict=True):
        # Budget share in proportion to one request's need in this group; integer-exact:
        # (usable × cap × bbytes / per_request) / bbytes == usable × cap // per_request.
        num_blocks = 1 + usable * cap // per_request
        plans.append(
            GroupPlan(
                group=group,
                sliding_window=_sliding_window(group),
                page_size=group.manager.page_size,
                block_bytes=Bytes(bbytes),
                admission_cap=CacheBlocks(cap),
                bytes_per_request=Bytes(cap * bbytes),
                num_blocks=CacheBlocks(num_blocks),
            )
        )
    too_many = [p for p in plans if p.num_blocks.value > MAX_POOL_BLOCKS]
    if too_many:
        # Block tables may be int32 (the kernels take int32 or int64): ids 0 .. 2**31 - 1.
        # 1 + usable × cap // per_request <= MAX_POOL_BLOCKS  <=>  usable × cap < MAX × per_request.
        fits = null_bytes + min((MAX_POOL_BLOCKS * per_request - 1) // cap for cap in caps)
        worst = too_many[0]
        raise SpecError(
            f"memory_budget {engine.memory_budget} buys {worst.num_blocks} in group "
            f"{worst.group.name!r}, but block ids must fit int32 block tables: at most "
            f"{MAX_POOL_BLOCKS} cache_block per group (ids 0 .. {MAX_POOL_BLOCKS - 1}); "
            f"lower memory_budget to at most {fits} byte, or use larger cache blocks "
            "(block_size_slots)"
        )
    concurrent = min((p.num_blocks.value - 1) // p.admission_cap.value for p in plans)
    return CapacityPlan(
        model=model,
        engine=engine,
        groups=tuple(plans),
        uncached_layers=uncached,
        bytes_per_request=Bytes(per_request),
        memory_budget=engine.memory_budget,
        concurrent_requests=concurrent,
    )


def _sliding_window(group: AnyLayerGroup) -> EncoderTokens | Tokens | None:
    """The model's window of the group's layers, when they all share one (a group may hold
    windows 750 and 751 encoder tokens: both manage 189 pooled blocks at P = 4)."""
    windows: set[EncoderTokens | Tokens] = {
        k.sliding_window for k in group.kernels.values() if k.sliding_window is not None
    }
    return windows.pop() if len(windows) == 1 else None
