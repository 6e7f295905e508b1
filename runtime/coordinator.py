"""The typed public API of the allocator: `KVCacheCoordinator`, its group handles and steppers.

A coordinator owns one block pool and one manager per layer group (a Voxtral model has a
pooled encoder group counting `PooledBlocks` and a decoder group counting `Tokens`). Units are
checked once, at the entry of each call, then the untyped core (`runtime._core`) works on plain
ints:

* `KVCacheCoordinator.group` gives a `GroupHandle[U]`, typed by the group's slot unit (it
  raises `UnitTypeError` when the group counts another unit);
* `KVCacheCoordinator.stepper` binds handles into a `Stepper`, whose ``allocate`` and ``admit``
  take one quantity per handle, each in its handle's unit: mypy rejects ``EncoderTokens`` where
  the pooled group expects ``PooledBlocks`` (``[arg-type]``), and so does the run time
  (`UnitTypeError`), as it does a bare ``int``.

A step is atomic over all groups: if any group cannot satisfy it, nothing changes anywhere and
`AllocationError` names the group and the shortfall. Admission reserves each request's cap (see
`runtime.admission`), so the steps of admitted requests never run short.

Thread safety: a coordinator is not thread-safe. One scheduler thread drives it, as vLLM's
scheduler drives its KV-cache manager; a service that calls it from several threads must hold
one lock around every call.

Example:
    >>> from contracts import (Bytes, EncoderTokens, EngineSpec, FullAttentionLayer, ModelSpec,
    ...                        PooledBlocks, PoolFactor, SlidingWindowLayer, Tokens)
    >>> from runtime.capacity import plan
    >>> enc = SlidingWindowLayer(window=EncoderTokens(750), pool=PoolFactor(4), kv_heads=32,
    ...                          head_size=64)
    >>> dec = FullAttentionLayer(kv_heads=8, head_size=128)
    >>> model = ModelSpec.stacked("voxtral", {"audio": (enc, 32), "text": (dec, 26)})
    >>> engine = EngineSpec(max_model_len=Tokens(4096), max_num_batched_tokens=Tokens(512),
    ...                     max_encoder_len=EncoderTokens(40_000),
    ...                     max_encoder_tokens_per_step=EncoderTokens(4),
    ...                     memory_budget=Bytes(2 << 30))
    >>> coord = KVCacheCoordinator.from_plan(plan(model, engine))
    >>> audio, text = coord.group("audio", PooledBlocks), coord.group("text", Tokens)
    >>> step = coord.stepper(audio, text)
    >>> step.admit("r1", PooledBlocks(10_000), Tokens(512))
    >>> step.allocate("r1", PooledBlocks(1), Tokens(3))
    [[16], [16, 17, 18]]
    >>> coord.block_table("r1", audio), str(coord.usage(text).used)
    ([1], '1 cache_block')
    >>> coord.free("r1")
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    NoReturn,
    Protocol,
    TypeVar,
    TypeVarTuple,
    cast,
    final,
    overload,
)

from contracts import (
    AnyLayerGroup,
    CacheBlocks,
    EncoderTokens,
    IntQuantity,
    ManagerSpec,
    PooledBlocks,
    SlotUnit,
    SpecError,
    Tokens,
    UnitTypeError,
    UnitValueError,
    check_quantity,
    describe,
)

from ._core import CoordinatorCore
from .admission import AdmissionLedger
from .block_pool import BlockPool
from .kernel_boundary import PooledKernelInputs, pooled_kernel_inputs
from .managers import make_manager

if TYPE_CHECKING:
    from .capacity import CapacityPlan

_Us = TypeVarTuple("_Us")
_A = TypeVar("_A", PooledBlocks, Tokens)
_B = TypeVar("_B", PooledBlocks, Tokens)
_C = TypeVar("_C", PooledBlocks, Tokens)
_D = TypeVar("_D", PooledBlocks, Tokens)


@final
class GroupHandle(Generic[SlotUnit]):
    """A typed reference to one group of one coordinator (from `KVCacheCoordinator.group`).

    Attributes:
        name: the group's name (``"audio"``).
        index: its position in the coordinator (the core's group index).
        unit: its slot unit, `PooledBlocks` or `Tokens`.
        spec: its manager spec.
    """

    __slots__ = ("_owner", "index", "name", "spec", "unit")
    name: str
    index: int
    unit: type[SlotUnit]
    spec: ManagerSpec[Any]

    def __init__(
        self, owner: CoordinatorCore, index: int, unit: type[SlotUnit], spec: ManagerSpec[Any]
    ) -> None:
        self._owner = owner
        self.index = index
        self.name = owner.names[index]
        self.unit = unit
        self.spec = spec

    def __repr__(self) -> str:
        return f"GroupHandle({self.name!r}, {self.unit.__name__})"


@final
@dataclass(frozen=True, slots=True)
class GroupUsage:
    """Cache blocks of one group, now.

    Attributes:
        name: the group.
        capacity: blocks requests can hold (the pool less the null block); ``used + free``.
        used: blocks held by requests.
        free: blocks in the free queue.
        reserved: blocks reserved by admitted requests (0 without reservation).
    """

    name: str
    capacity: CacheBlocks
    used: CacheBlocks
    free: CacheBlocks
    reserved: CacheBlocks


class AllocateFn(Protocol[*_Us]):
    """``allocate(request_id, *num_new)``: one step, one count per bound group (see `Stepper`)."""

    def __call__(self, request_id: str, /, *num_new: *_Us) -> list[list[int]]: ...


@final
class Stepper(Generic[*_Us]):
    """Steps and admissions over a fixed tuple of groups, one quantity per group, in order.

    Built by `KVCacheCoordinator.stepper`. Groups the stepper does not bind get 0 new slots in
    its steps and are admitted at their limit.

    Attributes:
        allocate: ``allocate(request_id, *num_new) -> slot mappings``: allocate one step,
            atomically over every group; ``num_new[i]`` counts slots of ``handles[i]`` (its
            unit). Returns, per bound group, the cache slot of each new slot (manager units).
            Raises `UnitTypeError` (wrong unit, bare int), `RequestError` (not admitted, more
            than ``max_in_flight`` or beyond ``max_len``) and `AllocationError` (a group lacks
            blocks; nothing changed).
        handles: the bound groups, in argument order.
    """

    __slots__ = ("_owner", "allocate", "handles")
    allocate: AllocateFn[*_Us]

    def __init__(self, owner: KVCacheCoordinator, handles: tuple[GroupHandle[Any], ...]) -> None:
        self._owner = owner
        self.handles = handles
        self.allocate = cast(AllocateFn[*_Us], _make_allocate(owner._core, handles))

    def admit(self, request_id: str, *max_len: *_Us) -> None:
        """Admit a request with its longest sequence per bound group (others: their limit).

        Raises:
            UnitTypeError: a length in the wrong unit, or a bare int.
            RequestError: the id is already admitted.
            AdmissionError: the request can never fit; refuse it (nothing changed).
            AllocationError: its caps cannot be reserved now; retry later (nothing changed).
        """
        lengths: list[int | None] = [None] * len(self._owner._core.names)
        given: tuple[object, ...] = max_len
        if len(given) != len(self.handles):
            raise TypeError(f"admit takes {len(self.handles)} lengths, got {len(given)}")
        for i, (quantity, handle) in enumerate(zip(given, self.handles, strict=True)):
            if type(quantity) is not handle.unit:
                _reject(handle, quantity, f"max_len[{i}]")
            lengths[handle.index] = cast(IntQuantity, quantity).value
        self._owner._core.admit(request_id, lengths)

    def num_slots(self, request_id: str) -> tuple[*_Us]:
        """The request's slots so far in each bound group, each in its group's unit."""
        req = self._owner._core.request(request_id)
        return cast(tuple[*_Us], tuple(h.unit(req.num_slots[h.index]) for h in self.handles))


class KVCacheCoordinator:
    """Paged KV-cache allocation for all layer groups of a model (see the module docstring).

    Args:
        groups: the model's layer groups (`contracts.group_layers`), with their limits.
        num_blocks: cache blocks per group, the null block included (the capacity plan's).
        reserve: reserve each admitted request's admission cap, so that admitted requests
            never run short (default); ``False`` admits optimistically, as vLLM does.

    Not thread-safe: drive it from one scheduler thread, or hold one lock around every call.
    """

    __slots__ = ("_core", "_groups", "_handles")

    def __init__(
        self,
        groups: Sequence[AnyLayerGroup],
        num_blocks: Sequence[CacheBlocks],
        *,
        reserve: bool = True,
    ) -> None:
        if len(groups) != len(num_blocks) or not groups:
            raise SpecError(
                f"one num_blocks per group: {len(groups)} groups, {len(num_blocks)} counts"
            )
        names = [g.name for g in groups]
        if len(set(names)) != len(names):
            raise SpecError(f"group names must be distinct, got {names}")
        blocks = []
        for n, g in zip(num_blocks, groups, strict=True):
            count = check_quantity(n, CacheBlocks, f"num_blocks[{g.name}]").value
            if count < 1:
                raise UnitValueError(
                    f"group {g.name!r} needs at least 1 cache_block (the null block), got {n}",
                    field=f"num_blocks[{g.name}]",
                    expected=">= 1 cache_block",
                    got=str(n),
                )
            blocks.append(count)
        managers = [make_manager(g.manager) for g in groups]
        in_flight, limit = [], []
        for group in groups:
            fixed = group.manager.fixed_slots
            # A cross-attention group is written whole, once: its only limit is its length.
            in_flight.append(group.limits.max_in_flight.value if fixed is None else fixed)
            limit.append(group.limits.max_len.value if fixed is None else fixed)
        pools = [BlockPool(n, name=name) for n, name in zip(blocks, names, strict=True)]
        ledger = AdmissionLedger(
            names,
            [g.manager for g in groups],
            [n - 1 for n in blocks],
            in_flight,
            limit,
            reserve=reserve,
        )
        self._groups = tuple(groups)
        self._core = CoordinatorCore(names, managers, pools, ledger, in_flight, limit)
        self._handles: dict[str, GroupHandle[Any]] = {
            g.name: GroupHandle(self._core, i, g.manager.slot_unit, g.manager)
            for i, g in enumerate(groups)
        }

    @classmethod
    def from_plan(cls, plan: CapacityPlan, *, reserve: bool = True) -> KVCacheCoordinator:
        """A coordinator with the groups and pool sizes of a capacity plan."""
        return cls(
            [p.group for p in plan.groups], [p.num_blocks for p in plan.groups], reserve=reserve
        )

    # -- groups -----------------------------------------------------------------------------

    @property
    def group_names(self) -> tuple[str, ...]:
        """The groups' names, in the coordinator's order."""
        return self._core.names

    @property
    def groups(self) -> tuple[AnyLayerGroup, ...]:
        """The layer groups, in the coordinator's order."""
        return self._groups

    def group(self, name: str, unit: type[SlotUnit]) -> GroupHandle[SlotUnit]:
        """The handle of group ``name``, whose slots count ``unit``.

        Raises:
            KeyError: no such group.
            UnitTypeError: the group counts another unit.
        """
        handle = self._handles.get(name)
        if handle is None:
            raise KeyError(f"no group {name!r}; groups: {', '.join(self._core.names)}")
        if handle.unit is not unit:
            raise UnitTypeError(
                f"group {name!r} counts {handle.unit.unit} ({handle.unit.__name__}), not "
                f"{getattr(unit, 'unit', unit)}; ask for coordinator.group({name!r}, "
                f"{handle.unit.__name__})",
                field="unit",
                expected=handle.unit.unit,
                got=getattr(unit, "unit", repr(unit)),
            )
        return cast(GroupHandle[SlotUnit], handle)

    @overload
    def stepper(self, a: GroupHandle[_A], /) -> Stepper[_A]: ...
    @overload
    def stepper(self, a: GroupHandle[_A], b: GroupHandle[_B], /) -> Stepper[_A, _B]: ...
    @overload
    def stepper(
        self, a: GroupHandle[_A], b: GroupHandle[_B], c: GroupHandle[_C], /
    ) -> Stepper[_A, _B, _C]: ...
    @overload
    def stepper(
        self, a: GroupHandle[_A], b: GroupHandle[_B], c: GroupHandle[_C], d: GroupHandle[_D], /
    ) -> Stepper[_A, _B, _C, _D]: ...
    def stepper(self, *handles: GroupHandle[Any]) -> Stepper[*tuple[Any, ...]]:
        """Bind groups, in this order, for `Stepper.allocate` and `Stepper.admit`.

        Raises:
            UnitTypeError: not a handle of this coordinator.
            SpecError: no handle, or a handle twice.
        """
        if not handles:
            raise SpecError("bind at least one group")
        for handle in handles:
            self._own(handle)
        if len({h.index for h in handles}) != len(handles):
            raise SpecError(f"a group is bound twice: {[h.name for h in handles]}")
        return Stepper(self, handles)

    # -- requests -----------------------------------------------------------------------------

    def admit(self, request_id: str) -> None:
        """Admit a request at every group's limit (the engine's ``max_len``); for shorter
        requests, `Stepper.admit` takes lengths per group.

        Raises:
            RequestError: the id is already admitted.
            AdmissionError: the request can never fit; refuse it (nothing changed).
            AllocationError: its caps cannot be reserved now; retry later (nothing changed).
        """
        self._core.admit(request_id)

    def free(self, request_id: str) -> None:
        """Return every block and the reservation of a finished or preempted request.

        Raises:
            RequestError: the request is not admitted.
        """
        self._core.free(request_id)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._core.requests

    @property
    def num_requests(self) -> int:
        """Requests admitted and not yet freed."""
        return len(self._core.requests)

    # -- per request, per group -----------------------------------------------------------------

    def block_table(self, request_id: str, handle: GroupHandle[Any]) -> Sequence[int]:
        """The request's block table in a group: cache-block ids, one per block of its slots,
        the null block (0) where evicted. A live view: read it, do not keep or modify it."""
        self._own(handle)
        return self._core.block_table(request_id, handle.index)

    def slot_mapping(self, request_id: str, handle: GroupHandle[Any]) -> list[int]:
        """The cache slots (manager units) of the new slots of the request's latest step in a
        group: slot p lives at ``table[p // block_size] × block_size + p % block_size``.
        Empty for a state group (one state per request, no rows per slot)."""
        self._own(handle)
        return self._core.slot_mapping(request_id, handle.index)

    def num_slots(self, request_id: str, handle: GroupHandle[SlotUnit]) -> SlotUnit:
        """The request's slots so far in a group, in the group's unit."""
        self._own(handle)
        return handle.unit(self._core.request(request_id).num_slots[handle.index])

    def admission_cap(self, request_id: str, handle: GroupHandle[Any]) -> CacheBlocks:
        """The cache blocks the request may hold at once in a group (what it reserved)."""
        self._own(handle)
        return CacheBlocks(self._core.request(request_id).caps[handle.index])

    def kernel_inputs(
        self,
        request_id: str,
        handle: GroupHandle[PooledBlocks],
        *,
        step_tokens: EncoderTokens | None = None,
        seq_len: EncoderTokens | None = None,
    ) -> PooledKernelInputs:
        """A pooled group's block table, latest slot mapping and length in encoder tokens.

        Only the sequence's last pooled block can be partial; after a step of slots it is the
        step's last, so ``step_tokens`` and ``seq_len`` each give the other (see
        `pooled_kernel_inputs`).

        Args:
            request_id: an admitted request.
            handle: a pooled group.
            step_tokens: the encoder tokens of the latest step (default: all P tokens of each
                new slot).
            seq_len: the request's exact encoder length (default: slots × P).

        Raises:
            UnitTypeError: a token group, or lengths not in `EncoderTokens`.
            UnitValueError: lengths that do not fit the slots, or disagree.
        """
        self._own(handle)
        if handle.unit is not PooledBlocks:
            raise UnitTypeError(
                f"group {handle.name!r} counts {handle.unit.unit}: its kernel reads manager "
                "units as they are; kernel_inputs expands pooled groups only",
                field="handle",
                expected="a pooled_block group",
                got=handle.unit.unit,
            )
        core = self._core
        req = core.request(request_id)
        g = handle.index
        return pooled_kernel_inputs(
            block_table=req.tables[g],
            slot_mapping_slots=core.slot_mapping(request_id, g),
            num_slots=PooledBlocks(req.num_slots[g]),
            block_size=handle.spec.block_size,
            pool=handle.spec.pool,
            step_tokens=step_tokens,
            seq_len=seq_len,
        )

    # -- usage --------------------------------------------------------------------------------

    def usage(self, handle: GroupHandle[Any]) -> GroupUsage:
        """Blocks used, free and reserved in one group."""
        self._own(handle)
        return self._usage(handle.index)

    def usage_by_group(self) -> dict[str, GroupUsage]:
        """`usage` of every group, by name."""
        return {name: self._usage(g) for g, name in enumerate(self._core.names)}

    def _usage(self, g: int) -> GroupUsage:
        pool = self._core.pools[g]
        return GroupUsage(
            name=pool.name,
            capacity=CacheBlocks(pool.num_blocks - 1),
            used=CacheBlocks(pool.num_used),
            free=CacheBlocks(pool.num_free),
            reserved=CacheBlocks(self._core.ledger.reserved[g]),
        )

    def _own(self, handle: object) -> None:
        if type(handle) is not GroupHandle or handle._owner is not self._core:
            raise UnitTypeError(
                f"expected a GroupHandle of this coordinator (coordinator.group(name, unit)), "
                f"got {describe(handle) if type(handle) is not GroupHandle else repr(handle)}",
                field="handle",
                expected="GroupHandle",
                got=describe(handle),
            )


def _reject(handle: GroupHandle[Any], value: object, what: str) -> NoReturn:
    hint = ""
    if type(value) is EncoderTokens and handle.unit is PooledBlocks:
        hint = (
            f"; convert encoder tokens with contracts.pool_length(n, PoolFactor("
            f"{handle.spec.pool.tokens_per_block})) first"
        )
    raise UnitTypeError(
        f"{what} is for group {handle.name!r}, which counts {handle.unit.unit} "
        f"({handle.unit.__name__}); got {describe(value)}{hint}",
        field=what,
        expected=handle.unit.unit,
        got=describe(value),
    )


def _make_allocate(core: CoordinatorCore, handles: tuple[GroupHandle[Any], ...]) -> Any:
    """The stepper's ``allocate``: a closure of fixed arity for the common layouts, so that the
    typed entry costs one type check per argument and one call (the benchmark prices it)."""
    allocate = core.allocate_step
    units = tuple(h.unit for h in handles)
    num_groups = len(core.names)
    in_order = tuple(h.index for h in handles) == tuple(range(num_groups))
    if in_order and num_groups == 1:
        (u0,) = units
        (h0,) = handles

        def allocate_1(request_id: str, a: Any) -> list[list[int]]:
            if type(a) is not u0:
                _reject(h0, a, "num_new[0]")
            return allocate(request_id, (a.value,))

        return allocate_1
    if in_order and num_groups == 2:
        u0, u1 = units
        h0, h1 = handles

        def allocate_2(request_id: str, a: Any, b: Any) -> list[list[int]]:
            if type(a) is not u0:
                _reject(h0, a, "num_new[0]")
            if type(b) is not u1:
                _reject(h1, b, "num_new[1]")
            return allocate(request_id, (a.value, b.value))

        return allocate_2
    if in_order and num_groups == 3:
        u0, u1, u2 = units
        h0, h1, h2 = handles

        def allocate_3(request_id: str, a: Any, b: Any, c: Any) -> list[list[int]]:
            if type(a) is not u0:
                _reject(h0, a, "num_new[0]")
            if type(b) is not u1:
                _reject(h1, b, "num_new[1]")
            if type(c) is not u2:
                _reject(h2, c, "num_new[2]")
            return allocate(request_id, (a.value, b.value, c.value))

        return allocate_3

    def allocate_any(request_id: str, *num_new: Any) -> list[list[int]]:
        if len(num_new) != len(handles):
            raise TypeError(f"allocate takes {len(handles)} counts, got {len(num_new)}")
        dense = [0] * num_groups
        for i, (quantity, handle) in enumerate(zip(num_new, handles, strict=True)):
            if type(quantity) is not handle.unit:
                _reject(handle, quantity, f"num_new[{i}]")
            dense[handle.index] = quantity.value
        out = allocate(request_id, dense)
        return [out[h.index] for h in handles]

    return allocate_any
