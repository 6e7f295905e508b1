"""Layer groups: layers whose manager views are identical share one block table and pool.

As vLLM's hybrid allocator does, a group is keyed by its `ManagerSpec`; its layers may still
differ on the kernel side (two windows 750 and 751 encoder tokens at P = 4 both manage 189
pooled blocks), so each layer keeps its own `KernelSpec`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, final

from ._convert import pool_length
from ._dtype import CacheDType
from ._engine import EngineSpec
from ._errors import SpecError
from ._layers import EncoderOnlyLayer, ModelSpec, StateLayer
from ._quantity import IntQuantity, Tokens
from ._views import KernelSpec, ManagerSpec, kernel_view, manager_view


@final
@dataclass(frozen=True, slots=True)
class GroupLimits:
    """A group's sequence limits in its own slot unit (derived from the engine spec)."""

    max_len: IntQuantity
    max_in_flight: IntQuantity


@final
@dataclass(frozen=True, slots=True)
class LayerGroup:
    """Layers that share one manager spec.

    Attributes:
        name: a readable name: the layers' common stack prefix (``"audio"``), with the kind
            appended when a stack splits into several groups (``"text/sliding_window"``).
        manager: the shared manager view.
        layer_names: the member layers, in model order.
        kernels: each member layer's kernel view (absent for state layers).
        limits: ``max_len`` and ``max_in_flight`` in the manager's slot unit.
    """

    name: str
    manager: ManagerSpec[Any]
    layer_names: tuple[str, ...]
    kernels: Mapping[str, KernelSpec[Any]]
    limits: GroupLimits

    @property
    def num_layers(self) -> int:
        return len(self.layer_names)


def group_limits(manager: ManagerSpec[Any], engine: EngineSpec) -> GroupLimits:
    """The engine's limits in a group's slot unit: token groups take them as they are,
    pooled groups convert encoder tokens with `pool_length` (a length rounds up), and a
    cross-attention group is sized by its layers' declared encoder length alone (written
    whole, once per request), so it needs no encoder limits from the engine."""
    if manager.slot_unit is Tokens:
        return GroupLimits(engine.max_model_len, engine.max_num_batched_tokens)
    if manager.kind == "cross_attention" and manager.fixed_length is not None:
        return GroupLimits(manager.fixed_length, manager.fixed_length)
    if engine.max_encoder_len is None or engine.max_encoder_tokens_per_step is None:
        raise SpecError(
            "the model has encoder-side (pooled) layers: set engine.max_encoder_len and "
            "engine.max_encoder_tokens_per_step (both in encoder_token)"
        )
    return GroupLimits(
        pool_length(engine.max_encoder_len, manager.pool),
        pool_length(engine.max_encoder_tokens_per_step, manager.pool),
    )


def group_layers(
    model: ModelSpec, engine: EngineSpec
) -> tuple[tuple[LayerGroup, ...], tuple[str, ...]]:
    """Group a model's cached layers by manager spec.

    Returns:
        The groups in order of first appearance, and the names of layers without a cache.
    """
    by_spec: dict[ManagerSpec[Any], list[str]] = {}
    kernels: dict[str, KernelSpec[Any]] = {}
    uncached: list[str] = []
    dtype: CacheDType | None = engine.cache_dtype
    for name, layer in model.layers.items():
        if isinstance(layer, EncoderOnlyLayer):
            uncached.append(name)
            continue
        spec = manager_view(layer, engine.block_size_slots, cache_dtype=dtype)
        by_spec.setdefault(spec, []).append(name)
        if not isinstance(layer, StateLayer):
            kernels[name] = kernel_view(layer, engine.block_size_slots, cache_dtype=dtype)
    prefixes = {spec: _common_prefix(names) for spec, names in by_spec.items()}
    counts: dict[str, int] = {}
    for prefix in prefixes.values():
        counts[prefix] = counts.get(prefix, 0) + 1
    groups = []
    seen: set[str] = set()
    for spec, names in by_spec.items():
        name = prefixes[spec] or spec.kind
        if counts[prefixes[spec]] > 1 or not prefixes[spec]:
            name = f"{prefixes[spec]}/{spec.kind}" if prefixes[spec] else spec.kind
        base, n = name, 2
        while name in seen:
            name, n = f"{base}#{n}", n + 1
        seen.add(name)
        groups.append(
            LayerGroup(
                name=name,
                manager=spec,
                layer_names=tuple(names),
                kernels={n: kernels[n] for n in names if n in kernels},
                limits=group_limits(spec, engine),
            )
        )
    return tuple(groups), tuple(uncached)


def _common_prefix(names: list[str]) -> str:
    parts = [n.split(".") for n in names]
    prefix: list[str] = []
    for column in zip(*parts, strict=False):
        if len(set(column)) != 1:
            break
        prefix.append(column[0])
    if len(prefix) == len(parts[0]) and len(names) == 1 and len(prefix) > 1:
        prefix = prefix[:-1]
    return ".".join(prefix)
