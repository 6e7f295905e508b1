"""Layer groups: layers whose manager views are identical share one block table and pool.

As vLLM's hybrid allocator does, a group is keyed by its `ManagerSpec`; its layers may still
differ on the kernel side (two windows 750 and 751 encoder tokens at P = 4 both manage 189
pooled blocks), so each layer keeps its own `KernelSpec`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeAlias, TypeVar, final, overload

from ._convert import pool_length, pool_span
from ._counts import Layers
from ._dtype import CacheDType
from ._engine import EngineSpec
from ._group_marker import GroupMarker, GroupT, marker_name
from ._layers import STATE_LAYERS, UNCACHED_LAYERS, ModelSpec
from ._quantity import (
    AdmissionCap,
    Bytes,
    CacheBlocks,
    PooledBlocks,
    SlotUnit,
    Tokens,
    check_quantity,
)
from ._views import KernelSpec, ManagerSpec, bind_group, kernel_view, manager_view
from .errors import SpecError, UnitTypeError

_U = TypeVar("_U", PooledBlocks, Tokens)
_G = TypeVar("_G", bound=GroupMarker)


@final
@dataclass(frozen=True, slots=True)
class GroupLimits(Generic[SlotUnit]):
    """A group's sequence limits in its own slot unit (derived from the engine spec).

    Attributes:
        max_len: the longest sequence of one request, in slots.
        max_in_flight: the most slots of one request scheduled and not yet settled: the
            batches in flight (pipeline stages, async scheduling) times one step, plus the
            speculative lookahead (`EngineSpec.max_in_flight`); a step never adds more.
    """

    max_len: SlotUnit
    max_in_flight: SlotUnit

    def __post_init__(self) -> None:
        check_quantity(self.max_in_flight, type(self.max_len), "max_in_flight")


@final
@dataclass(frozen=True, slots=True)
class LayerGroup(Generic[SlotUnit, GroupT]):
    """Layers that share one manager spec, typed by the slot unit the manager counts.

    `group_layers` returns `AnyLayerGroup`; narrow with ``group.expect(PooledBlocks)`` to read
    typed limits (`UnitTypeError` when the group counts the other unit), and with
    ``group.expect(Tokens, Sliding)`` to type it with its `kvunits.contracts.GroupMarker`
    too: its views' columns (``group.manager.block_of``) are then
    ``Position[CacheBlocks, Sliding]``, which mypy refuses in another marked group's table.

    Attributes:
        name: a readable name: the layers' common stack prefix (``"audio"``), with the kind
            appended when a stack splits into several groups (``"text/sliding_window"``).
        manager: the shared manager view.
        layer_names: the member layers, in model order.
        kernels: each member layer's kernel view (absent for state layers).
        limits: ``max_len`` and ``max_in_flight`` in the manager's slot unit.
    """

    name: str
    manager: ManagerSpec[SlotUnit, GroupT]
    layer_names: tuple[str, ...]
    # Not hashed (a dict is not hashable); the kernels follow from the layers anyway.
    kernels: Mapping[str, KernelSpec[Any, GroupT]] = field(hash=False)
    limits: GroupLimits[SlotUnit]

    def __post_init__(self) -> None:
        check_quantity(self.limits.max_len, self.manager.slot_unit, f"{self.name}.max_len")

    @property
    def num_layers(self) -> Layers:
        """Layers of the model in the group: one page each per cache block of the group (a
        pipeline stage holds some of them: `kvunits.contracts.deploy.layers_of_stage`)."""
        return Layers(len(self.layer_names))

    @property
    def block_bytes(self) -> Bytes:
        """Memory of one cache block of the group: a page of its own size in each of its
        layers (not the model's: a hybrid's Mamba layers keep no page here), exact."""
        return self.manager.bytes_for(CacheBlocks(1)) * self.num_layers._value

    @overload
    def expect(self, unit: type[_U]) -> LayerGroup[_U, GroupT]: ...
    @overload
    def expect(self, unit: type[_U], group: type[_G]) -> LayerGroup[_U, _G]: ...
    def expect(self, unit: type[_U], group: type[_G] | None = None) -> LayerGroup[_U, Any]:
        """Narrow to the slot unit the caller works in, and to the group's marker if given.

        Raises:
            UnitTypeError: the group counts another unit, or ``group`` marks another group.
        """
        if self.manager.slot_unit is not unit:
            raise UnitTypeError(
                f"group {self.name!r} counts {self.manager.slot_unit.unit}, not {unit.unit}",
                field=self.name,
                expected=self.manager.slot_unit.unit,
                got=unit.unit,
            )
        if group is not None:
            check_marker(self.name, group)
        # mypy checks this body once per pair of constraints; the check above makes it exact.
        return self  # type: ignore[return-value,unused-ignore]

    def admission_cap(self) -> AdmissionCap:
        """The cache blocks one request can hold at once, at the group's limits: the same
        `ManagerSpec.max_admission_blocks_per_request` that run-time admission calls."""
        return self.manager.max_admission_blocks_per_request(
            self.limits.max_in_flight, self.limits.max_len
        )


def check_marker(name: str, group: object) -> None:
    """Raise unless ``group`` is the `GroupMarker` of the layer group named ``name``.

    Raises:
        UnitTypeError: not a marker, or the marker of another group (both named).
    """
    marked = marker_name(group, "group")
    if marked is None or type(group) is str or marked != name:
        raise UnitTypeError(
            f"group {name!r} was asked for as {getattr(group, '__name__', repr(group))}, "
            f"which marks group {marked!r}: a marker names the group whose values it types; "
            f"declare class ...(GroupMarker, name={name!r})",
            field="group",
            expected=f"the marker of group {name!r}",
            got=f"a marker of group {marked!r}",
        )


#: A group of either slot unit, as `group_layers` returns it.
AnyLayerGroup: TypeAlias = LayerGroup[PooledBlocks] | LayerGroup[Tokens]


def group_limits(manager: ManagerSpec[_U], engine: EngineSpec) -> GroupLimits[_U]:
    """The engine's limits in a group's slot unit: token groups take them as they are
    (``max_in_flight``: `EngineSpec.max_in_flight`, the batches in flight × one step + the
    speculative lookahead), pooled groups convert encoder tokens, the longest sequence with
    `pool_length` (a length rounds up) and what is in flight with `pool_span` (the slots a run
    of consecutive encoder tokens can touch: the steps in flight are one run), and a
    cross-attention group is sized by its layers' declared encoder length alone (written
    whole, once per request), so it needs no encoder limits from the engine.

    Raises:
        SpecError: a pooled group, and the engine sets no encoder limits.
    """
    if manager.kind == "cross_attention" and manager.fixed_length is not None:
        return GroupLimits(manager.fixed_length, manager.fixed_length)
    encoder_in_flight = engine.max_encoder_in_flight
    limits: GroupLimits[Tokens] | GroupLimits[PooledBlocks]
    if manager.slot_unit is Tokens:
        limits = GroupLimits(engine.max_model_len, engine.max_in_flight)
    elif engine.max_encoder_len is None or encoder_in_flight is None:
        raise SpecError(
            "the model has encoder-side (pooled) layers: set engine.max_encoder_len and "
            "engine.max_encoder_tokens_per_step (both in encoder_token)"
        )
    else:
        limits = GroupLimits(
            pool_length(engine.max_encoder_len, manager.pool),
            pool_span(encoder_in_flight, manager.pool),
        )
    # The branch above follows the manager's slot unit, which mypy cannot narrow _U by;
    # checked again here, at run time.
    check_quantity(limits.max_len, manager.slot_unit, "max_len")
    return limits  # type: ignore[return-value,unused-ignore]


def group_layers(
    model: ModelSpec, engine: EngineSpec
) -> tuple[tuple[AnyLayerGroup, ...], tuple[str, ...]]:
    """Group a model's cached layers by manager spec.

    Returns:
        The groups in order of first appearance, and the names of layers without a cache of
        their own (``encoder_only``, ``kv_shared``).
    """
    by_spec: dict[ManagerSpec[Any], list[str]] = {}
    kernels: dict[str, KernelSpec[Any]] = {}
    uncached: list[str] = []
    dtype: CacheDType | None = engine.cache_dtype
    # A config's group is one layer object under many names: its views are computed once.
    views: dict[int, tuple[ManagerSpec[Any], KernelSpec[Any] | None]] = {}
    for name, layer in model.layers.items():
        if isinstance(layer, UNCACHED_LAYERS):
            uncached.append(name)
            continue
        view = views.get(id(layer))
        if view is None:
            view = views[id(layer)] = (
                manager_view(layer, engine.block_size_slots, cache_dtype=dtype),
                None
                if isinstance(layer, STATE_LAYERS)
                else kernel_view(layer, engine.block_size_slots, cache_dtype=dtype),
            )
        spec, kernel = view
        by_spec.setdefault(spec, []).append(name)
        if kernel is not None:
            kernels[name] = kernel
    prefixes = {spec: _common_prefix(names) for spec, names in by_spec.items()}
    counts: dict[str, int] = {}
    for prefix in prefixes.values():
        counts[prefix] = counts.get(prefix, 0) + 1
    groups: list[AnyLayerGroup] = []
    seen: set[str] = set()
    for spec, names in by_spec.items():
        name = prefixes[spec] or spec.kind
        if counts[prefixes[spec]] > 1 or not prefixes[spec]:
            name = f"{prefixes[spec]}/{spec.kind}" if prefixes[spec] else spec.kind
        base, n = name, 2
        while name in seen:
            name, n = f"{base}#{n}", n + 1
        seen.add(name)
        bound: dict[int, KernelSpec[Any]] = {}
        members = {
            n: bound.setdefault(id(kernels[n]), bind_group(kernels[n], name))
            for n in names
            if n in kernels
        }
        spec = bind_group(spec, name)
        if spec.slot_unit is PooledBlocks:
            groups.append(_group(name, spec.expect(PooledBlocks), names, members, engine))
        else:
            groups.append(_group(name, spec.expect(Tokens), names, members, engine))
    return tuple(groups), tuple(uncached)


def _group(
    name: str,
    manager: ManagerSpec[_U],
    names: list[str],
    kernels: Mapping[str, KernelSpec[Any]],
    engine: EngineSpec,
) -> LayerGroup[_U]:
    return LayerGroup(
        name=name,
        manager=manager,
        layer_names=tuple(names),
        kernels=kernels,
        limits=group_limits(manager, engine),
    )


def _common_prefix(names: list[str]) -> str:
    # Caches inside a stack's layers (``text.<i>.indexer``) are named by their part too.
    parts = [n.split(".") for n in names]
    last = {p[-1] for p in parts}
    if len(last) == 1 and all(len(p) > 2 for p in parts) and not parts[0][-1].isdigit():
        inner = _common_prefix([".".join(p[:-1]) for p in parts])
        return f"{inner}.{parts[0][-1]}" if inner else parts[0][-1]
    prefix: list[str] = []
    for column in zip(*parts, strict=False):
        if len(set(column)) != 1:
            break
        prefix.append(column[0])
    if len(prefix) == len(parts[0]) and len(names) == 1 and len(prefix) > 1:
        prefix = prefix[:-1]
    return ".".join(prefix)
