"""The typed public API of the allocator: `KVCacheCoordinator`, its group handles and steppers.

A coordinator owns one manager per layer group (a Voxtral model has a pooled encoder group
counting `PooledBlocks` and a decoder group counting `Tokens`) and a block pool per group, or
one pool all groups draw from (`kvunits.runtime.shared_pool`). Requests may share cached prefixes
(`Stepper.admit_with_prefix`, `kvunits.runtime.prefix_cache`) and take speculative steps
(`Stepper.allocate_speculative`, `Stepper.rollback`). Units are
checked once, at the entry of each call, then the untyped core (`kvunits.runtime._core`) works on
plain ints:

* `KVCacheCoordinator.group` gives a `GroupHandle[U]`, typed by the unit its steps count: a
  token group steps in `Tokens`; a pooled group in whole `PooledBlocks` (P encoder tokens
  each) or in `EncoderTokens`, as an audio stream arrives, in chunks that need not be
  multiples of P (a step then continues the partial pooled block the last one left; see
  `kvunits.contracts.crossing`). Any other unit raises `UnitTypeError`;
* `KVCacheCoordinator.stepper` binds handles into a `Stepper`, whose ``allocate`` and ``admit``
  take one quantity per handle, each in its handle's unit: mypy rejects ``EncoderTokens`` where
  a ``PooledBlocks`` handle expects slots (``[arg-type]``), and so does the run time
  (`UnitTypeError`), as it does a bare ``int``;
* `KVCacheCoordinator.kernel_inputs` gives what the kernels read for the latest step: the slot
  mapping `kvunits.kernels.write_kv` takes, the cache row of every position, the exact length.

A step is atomic over all groups: if any group cannot satisfy it, nothing changes anywhere and
`AllocationError` names the group and the shortfall. Admission reserves each request's cap (see
`kvunits.runtime.admission`), so the steps of admitted requests never run short.

Thread safety: one scheduler thread drives a coordinator, as vLLM's scheduler drives its
KV-cache manager; a service that calls it from several threads must hold one lock around every
call. Without that lock, a call that enters while another is in progress (on another thread, or
from a callback inside a call) raises `ConcurrentUseError` and changes nothing, and the call in
progress completes as if alone: concurrent use is a clear error, never a silent corruption.
Every call that changes state is atomic, whatever the exception.

Example:
    >>> from kvunits.contracts import (EncoderTokens, EngineSpec, FullAttentionLayer, ModelSpec,
    ...                        Position,
    ...                        PooledBlocks, PoolFactor, SlidingWindowLayer, Tokens, Window,
    ...                        Elements, KVHeads, Layers)
    >>> from kvunits.contracts.deploy import RankBytes
    >>> from kvunits.runtime.capacity import plan
    >>> enc = SlidingWindowLayer(sliding_window=Window(750, EncoderTokens), pool=PoolFactor(4),
    ...                          kv_heads=KVHeads(32), head_size=Elements(64))
    >>> dec = FullAttentionLayer(kv_heads=KVHeads(8), head_size=Elements(128))
    >>> model = ModelSpec.stacked("voxtral", {"audio": (enc, Layers(32)),
    ...                                       "text": (dec, Layers(26))})
    >>> engine = EngineSpec(max_model_len=Tokens(4096), max_num_batched_tokens=Tokens(512),
    ...                     max_encoder_len=EncoderTokens(40_000),
    ...                     max_encoder_tokens_per_step=EncoderTokens(4),
    ...                     memory_budget=RankBytes(2 << 30))
    >>> coord = KVCacheCoordinator.from_plan(plan(model, engine))
    >>> audio, text = coord.group("audio", PooledBlocks), coord.group("text", Tokens)
    >>> step = coord.stepper(audio, text)
    >>> step.admit("r1", PooledBlocks(10_000), Tokens(512))
    >>> step.allocate("r1", PooledBlocks(1), Tokens(3))
    [[16], [16, 17, 18]]
    >>> coord.block_table("r1", audio), str(coord.usage(text).used)
    (BlockIds([1], owner='audio'), '1 cache_block')
    >>> coord.free("r1")

    An audio stream in chunks of 6 encoder tokens: the second chunk continues pooled slot 1
    (r1's end left every pool idle, as built: r2 takes ids from 1 again).

    >>> tokens = coord.group("audio", EncoderTokens)
    >>> stream = coord.stepper(tokens, text)
    >>> stream.admit("r2", EncoderTokens(40_000), Tokens(512))
    >>> stream.allocate("r2", EncoderTokens(6), Tokens(1))
    [[16, 17], [16]]
    >>> stream.allocate("r2", EncoderTokens(6), Tokens(1))
    [[17, 18], [17]]
    >>> coord.kernel_inputs("r2", tokens).row_mapping  # positions 6-11: cache slot × 4 + i
    (70, 71, 72, 73, 74, 75)

    A block table is indexed with its own group's columns (64 encoder tokens a block here):

    >>> column = tokens.block_of(Position(11, EncoderTokens))
    >>> column, coord.block_table("r2", tokens)[column]
    (Position(0, CacheBlocks), 1)
    >>> coord.block_table("r2", text)[column]
    Traceback (most recent call last):
    ...
    kvunits.contracts.errors.UnitTypeError: column 0 was computed by group 'audio' ...
"""

from __future__ import annotations

import copy
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from operator import attrgetter, countOf
from types import MappingProxyType
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    NoReturn,
    Protocol,
    TypeAlias,
    TypeVar,
    TypeVarTuple,
    cast,
    final,
    overload,
)

from kvunits.contracts import (
    AdmissionCap,
    AnyLayerGroup,
    BlockIds,
    BlockSize,
    CacheBlocks,
    EncoderTokens,
    GroupMarker,
    IntQuantity,
    KernelUnit,
    ManagerSpec,
    PoolBlocks,
    PooledBlocks,
    PoolFactor,
    Position,
    SlotIds,
    SpecError,
    Tokens,
    UnitTypeError,
    UnitValueError,
    block_of,
    expand_block_size,
)
from kvunits.contracts.batch import StepBatch
from kvunits.contracts.crossing import slots_holding
from kvunits.contracts.errors import AdmissionError, AllocationError, RequestError
from kvunits.contracts.internal import (
    GroupT,
    describe,
    magnitude,
    manager_ints,
    marker_name,
    owned_column,
)

from ._core import CoordinatorCore, check_request_id
from ._fast import (
    advance_lines,
    advance_names,
    compiled,
    content_lines,
    make_functions,
    respec_content_lines,
    respec_lines,
    rollback_lines,
    speculative_lines,
)
from ._table import STEP
from .admission import AdmissionLedger
from .block_pool import BlockPool
from .managers import make_manager
from .policy import AdmissionPolicy, Answer, Fits, Never, Preemption, Scheduled, Wait
from .preemption import PolicyState, admission_needs, allocate_preempting, step_needs
from .prefix_cache import (
    CACHEABLE_KINDS,
    BlockHashes,
    ContentBatch,
    ContentKeys,
    PrefixCacheStats,
    PrefixPart,
)
from .usage import GroupUsage as GroupUsage

if TYPE_CHECKING:
    from .capacity import CapacityPlan
    from .metrics import CacheMetrics

#: The unit a group handle's steps and lengths count: its slots (`PooledBlocks`, `Tokens`), or
#: a pooled group's encoder tokens.
StepUnit = TypeVar("StepUnit", PooledBlocks, Tokens, EncoderTokens)

#: A `ContentKeys`' unit, salt and keys (read in C over a batch's content).
_unit_of, _salt_of, _int64s_of = attrgetter("unit"), attrgetter("salt"), attrgetter("_int64s")

_Us = TypeVarTuple("_Us")
_A = TypeVar("_A", PooledBlocks, Tokens, EncoderTokens)
_B = TypeVar("_B", PooledBlocks, Tokens, EncoderTokens)
_C = TypeVar("_C", PooledBlocks, Tokens, EncoderTokens)
_D = TypeVar("_D", PooledBlocks, Tokens, EncoderTokens)
#: The group a handle was asked for by (a marker), or Any.
_GR = TypeVar("_GR")
_Marker = TypeVar("_Marker", bound=GroupMarker)


@final
class GroupHandle(Generic[StepUnit, GroupT]):
    """A typed reference to one group of one coordinator (from `KVCacheCoordinator.group`).

    Typed by the unit its steps count and, when the group was asked for by its
    `kvunits.contracts.GroupMarker` (``coord.group(Sliding, Tokens)``), by the group: its
    columns are then ``Position[CacheBlocks, Sliding]`` and its tables ``BlockIds[Sliding]``,
    and mypy refuses one marked group's column in another's table (the run time refuses it by
    name either way).

    Attributes:
        name: the group's name (``"audio"``).
        index: its position in the coordinator (the core's group index).
        unit: the unit its steps and lengths count: the group's slot unit, or
            `EncoderTokens` for a pooled group stepped token by token.
        spec: its manager spec.
        rows_per_unit: kernel positions per ``unit``: P for a pooled group stepped in
            `PooledBlocks`, else 1.
    """

    __slots__ = ("_owner", "_rows_per_slot", "index", "name", "rows_per_unit", "spec", "unit")
    name: str
    index: int
    unit: type[StepUnit]
    spec: ManagerSpec[Any]
    rows_per_unit: int

    def __init__(
        self, owner: CoordinatorCore, index: int, unit: type[StepUnit], spec: ManagerSpec[Any]
    ) -> None:
        self._owner = owner
        self.index = index
        self.name = owner.names[index]
        self.unit = unit
        self.spec = spec
        step_unit: type[IntQuantity] = unit
        p = spec.pool.tokens_per_block
        self.rows_per_unit = p if step_unit is PooledBlocks else 1
        self._rows_per_slot = p if step_unit is EncoderTokens else 1

    def slots_of(self, length: int) -> int:
        """Slots that hold ``length`` of this handle's unit (plain ints, rounds up)."""
        return slots_holding(length, self._rows_per_slot)

    def block_of(self, position: Position[StepUnit]) -> Position[CacheBlocks, GroupT]:
        """The column of this group's block tables that holds ``position`` (of the handle's
        unit): ``i // block_size`` slots, or ``i // (block_size × P)`` encoder tokens. The
        column keeps the group: another group's table (`KVCacheCoordinator.block_table`)
        refuses it, naming both.

        Raises:
            UnitTypeError: a position of another unit than the handle's.

        """
        spec = self.spec
        given: object = position
        if type(given) is not Position or given.unit is not self.unit:
            raise UnitTypeError(
                f"group {self.name!r} is bound as {self!r}: its positions count "
                f"{self.unit.unit}, got {describe(given)}",
                field="position",
                expected=f"Position of {self.unit.unit}",
                got=describe(given),
            )
        if self.unit is EncoderTokens:
            rows = _content_block_size(spec)  # block_size × P encoder tokens a block
            column = block_of(position, rows)
        else:
            column = spec.block_of(position)
        owned: Position[CacheBlocks, GroupT] = owned_column(
            column.numerical_value_in(CacheBlocks), self.name
        )
        return owned

    @overload
    def block_hashes(
        self: GroupHandle[Tokens], content: ContentKeys[Tokens]
    ) -> BlockHashes[Tokens]: ...
    @overload
    def block_hashes(
        self: GroupHandle[EncoderTokens], content: ContentKeys[EncoderTokens]
    ) -> BlockHashes[EncoderTokens]: ...
    @overload
    def block_hashes(
        self: GroupHandle[PooledBlocks], content: ContentKeys[EncoderTokens]
    ) -> BlockHashes[PooledBlocks]: ...
    def block_hashes(self, content: ContentKeys[Any]) -> BlockHashes[Any]:
        """The chained hashes of the full cache blocks of ``content`` at this group's
        granularity: ``block_size`` tokens for a token group, ``block_size × P`` encoder tokens
        (`kvunits.contracts.expand_block_size`) for a pooled one, whichever unit its handle steps
        in.

        Example:
            Block size 16 and P = 4: 130 encoder tokens of audio are two full blocks of 64.

            >>> audio.block_hashes(ContentKeys(range(130), EncoderTokens))  # doctest: +SKIP
            BlockHashes(2 blocks of 64 encoder_token/cache_block, for a EncoderTokens handle)

        Raises:
            UnitTypeError: content of the wrong unit (tokens for a pooled group, encoder tokens
                for a token group), or not `ContentKeys`.
            SpecError: a group no prefix can serve (cross attention, state).
        """
        spec = self.spec
        if spec.kind not in CACHEABLE_KINDS:
            raise SpecError(
                f"group {self.name!r} ({spec.kind}) cannot be served from a prefix cache: it "
                "is written whole from the encoder's output, or holds one state"
            )
        expected: type[IntQuantity] = EncoderTokens if spec.slot_unit is PooledBlocks else Tokens
        given: object = content  # checked at run time too: mypy's view is the annotation's
        if type(given) is not ContentKeys or given.unit is not expected:
            got = (
                f"ContentKeys of {given.unit.unit}"
                if type(given) is ContentKeys
                else describe(given)
            )
            raise UnitTypeError(
                f"group {self.name!r} caches blocks of {expected.unit} (its kernel's unit); "
                f"got {got}: give ContentKeys(keys, {expected.__name__}), one key per "
                f"{expected.unit}",
                field="content",
                expected=f"ContentKeys of {expected.unit}",
                got=got,
            )
        return BlockHashes(content, _content_block_size(spec), self.unit)

    def check_hashes(self, hashes: object, what: str) -> BlockHashes[Any]:
        """``hashes`` if they were made for this handle's unit and this group's block
        boundaries (the bug class of vLLM #53142 otherwise); raise the unit error if not."""
        if type(hashes) is not BlockHashes:
            raise UnitTypeError(
                f"{what} for group {self.name!r} must be BlockHashes "
                f"(handle.block_hashes(content)), got {describe(hashes)}",
                field=what,
                expected="BlockHashes",
                got=describe(hashes),
            )
        if hashes.unit is not self.unit:
            raise UnitTypeError(
                f"{what} was made for a {hashes.unit.__name__} handle, but group {self.name!r} "
                f"is bound as {self!r}; make them with this handle's block_hashes",
                field=what,
                expected=self.unit.unit,
                got=hashes.unit.unit,
            )
        own = _content_block_size(self.spec)
        if hashes.tokens_per_block != own:
            raise UnitValueError(
                f"{what} cut the content into blocks of {hashes.tokens_per_block}, but group "
                f"{self.name!r} holds {own}: another group's block boundaries would file its "
                "blocks under the wrong prefix; make them with this group's block_hashes",
                field=what,
                expected=str(own),
                got=str(hashes.tokens_per_block),
            )
        return hashes

    def __repr__(self) -> str:
        return f"GroupHandle({self.name!r}, {self.unit.__name__})"

    def __copy__(self) -> GroupHandle[StepUnit]:
        return self  # a fixed reference: nothing to copy

    def __deepcopy__(self, memo: dict[int, Any]) -> NoReturn:
        raise TypeError(
            f"{self!r} refers to its coordinator: deep-copy the coordinator, then take the "
            "copy's handle with its group()"
        )

    def __reduce__(self) -> NoReturn:
        raise TypeError(f"{self!r} refers to a live coordinator and is not pickled")


#: Zero cache blocks (a default).
@final
@dataclass(frozen=True, slots=True)
class KernelInputs(Generic[KernelUnit, GroupT]):
    """What the kernels of one group read for one request after its latest step.

    Built by `KVCacheCoordinator.kernel_inputs` with the formulas of `kvunits.contracts.crossing`.

    Attributes:
        block_table: cache-block ids, one per block of the request's slots, the null block (0)
            where evicted; block ``b`` holds rows ``b × tokens_per_block ..`` of the cache. A
            `BlockIds` of the group: indexed by the group's columns only.
        tokens_per_block: positions per cache block in the kernel's unit: ``block_size × P``
            encoder tokens for a pooled group.
        slot_mapping: the cache slot of every slot the latest step touches, a `SlotIds` in
            the manager's unit (`PooledBlocks` for a pooled group, `Tokens`): the
            ``slot_mapping`` `kvunits.kernels.write_kv` takes
            (`kvunits.kernels.SlotMapping.from_ids`). For a pooled group the first may be the
            partial slot the step continues.
        row_mapping: the cache row of every position of the latest step (kernel units):
            ``cache slot × P + i``.
        seq_len: the request's positions so far, the step's included, exact.
        step_len: the positions the latest step added.
        pool: P.
    """

    block_table: BlockIds[GroupT]
    tokens_per_block: BlockSize[KernelUnit]
    slot_mapping: SlotIds[Any, GroupT]
    row_mapping: tuple[int, ...]
    seq_len: KernelUnit
    step_len: KernelUnit
    pool: PoolFactor


class AllocateFn(Protocol[*_Us]):
    """``allocate(request_id, *num_new)``: one step, one count per bound group (see `Stepper`)."""

    def __call__(self, request_id: str, /, *num_new: *_Us) -> list[list[int]]: ...


ContentFor: TypeAlias = (
    tuple[GroupHandle[Tokens], ContentKeys[Tokens]]
    | tuple[GroupHandle[EncoderTokens] | GroupHandle[PooledBlocks], ContentKeys[EncoderTokens]]
)
"""What one sequence of a step holds (`Stepper.advance_with_content`): a group reading it and
its content, in that group's kernel unit."""

ContentsFor: TypeAlias = (
    tuple[GroupHandle[Tokens], ContentBatch[Tokens] | Sequence[ContentKeys[Tokens]]]
    | tuple[
        GroupHandle[EncoderTokens] | GroupHandle[PooledBlocks],
        ContentBatch[EncoderTokens] | Sequence[ContentKeys[EncoderTokens]],
    ]
)
"""What one sequence of a batch's step holds (`Stepper.advance_speculative_all_with_content`):
a group reading it and each request's content, in request order, in that group's kernel unit
(one `ContentBatch`, or a `ContentKeys` per request)."""


class AdvanceFn(Protocol[*_Us]):
    """``advance(request_id, *num_new)``: one step, no slot mapping built (see `Stepper`)."""

    def __call__(self, request_id: str, /, *num_new: *_Us) -> None: ...


class AdvanceAllFn(Protocol[*_Us]):
    """``advance_all(request_ids, *num_new)``: one step of every request (see `Stepper`)."""

    def __call__(self, request_ids: Sequence[str], /, *num_new: *_Us) -> None: ...


@final
class Stepper(Generic[*_Us]):
    """Steps and admissions over a fixed tuple of groups, one quantity per group, in order.

    Built by `KVCacheCoordinator.stepper`. Groups the stepper does not bind get nothing in its
    steps and are admitted at their limit. Each count is checked against its handle's unit
    once, at the entry, then the core works on plain ints.

    Attributes:
        allocate: ``allocate(request_id, *num_new) -> slot mappings``: allocate one step,
            atomically over every group; ``num_new[i]`` counts ``handles[i]``'s unit (whole
            pooled blocks, encoder tokens or tokens). Returns, per bound group, the step's slot
            mapping: the cache slot of every slot it touches (manager units). Raises
            `UnitTypeError` (wrong unit, bare int), `RequestError` (not admitted, more than
            ``max_in_flight`` or beyond ``max_len``) and `AllocationError` (a group lacks
            blocks; nothing changed).
        advance: ``advance(request_id, *num_new)``: ``allocate`` without building the slot
            mappings (a long prefill then costs per block, not per position): for a scheduler
            that leaves slots to its model runner, or reads them with
            `KVCacheCoordinator.kernel_inputs` when it needs them.
        advance_all: ``advance_all(request_ids, *num_new)``: the same step of every request of
            ``request_ids`` (an engine step's decodes, each request once), in one call and
            atomically over the batch: if any request's step fails, none is taken. Raises as
            ``allocate`` does, for the first request that fails.
        advance_each: ``advance_each(request_ids, [(...), ...])``: each request's own step in
            one call (``num_new[i]``, a tuple of one count per bound group, is request i's:
            an engine step whose prefill chunks run beside its decodes), atomically over the
            batch as ``advance_all``. Requests within their blocks are stores in C, one past
            a block boundary is planned in the same pass, a prefill chunk by the core on the
            same plan. Raises as ``advance_all``, and `UnitTypeError` naming
            ``num_new[i][g]`` for a count of the wrong unit.
        allocate_speculative: ``allocate_speculative(request_id, *num_new, lookahead=(...))``:
            one step of ``num_new`` positions per bound group followed by ``lookahead``
            speculative ones (a drafter's proposals to verify), atomically. Every position
            gets its slot (the mapping covers ``num_new + lookahead`` positions), so the step
            holds the blocks of all of them; after verification, ``rollback`` returns the
            rejected positions and the blocks only they used, and the next step accepts what
            is left. The lookahead counts in the group's ``max_in_flight`` like any position
            of the step (the admission cap covers it), and is never cached before it is
            accepted. Raises as ``allocate`` does.
        rollback: ``rollback(request_id, *rejected)``: remove the latest step's rejected
            lookahead positions, per bound group: the request's length goes back by them, and
            the blocks only they used go back to the pool (a partly used block stays), at its
            free queue's front: the next step that needs a block takes them again before a
            cached prefix is evicted.
            Residency stays right: sliding-window eviction only looks back from where the
            next step starts, which is never before the rolled-back step started. Raises
            `UnitTypeError` (wrong unit) and `RequestError` (more than the latest step left
            speculative; nothing changed).
        advance_speculative: ``advance_speculative(request_id, *num_new, lookahead=(...),
            rejected=(...))``: a drafting scheduler's step in one call: the ``rejected`` drafts
            of the request's latest step rolled back (``rollback``), then a step of
            ``num_new`` positions followed by ``lookahead`` speculative ones
            (``allocate_speculative`` without slot mappings), atomically: if either part
            fails, neither happens. ``rejected`` is all zeros for the first speculative step.
            Raises as ``rollback``, then as ``allocate_speculative``.
        advance_speculative_all: ``advance_speculative_all(request_ids, *num_new,
            lookahead=(...), rejected=[(...), ...])``: ``advance_speculative`` for every
            request of an engine step's batch (each once; ``rejected[i]`` is request i's),
            atomically over the batch.
        advance_speculative_each: ``advance_speculative_each(request_ids, [(...), ...],
            lookahead=[(...), ...], rejected=[(...), ...])``: ``advance_speculative`` for
            every request of an engine step's batch, each with its own counts (``num_new[i]``,
            ``lookahead[i]`` and ``rejected[i]``, a tuple of one count per bound group each,
            are request i's): a drafting engine step whose prefill chunks (lookahead and
            rejected zeros) run beside its drafting decodes, in one call and atomically over
            the batch. Requests within their blocks are stores in C, one past a block
            boundary (a prefill chunk's run of blocks too) is planned in the same pass.
            Raises as ``advance_speculative`` (the first failing request), `RequestError`
            (a request twice, a list not one tuple per request) and `UnitTypeError` naming
            ``num_new[i][g]``, ``lookahead[i][g]`` or ``rejected[i][g]``.
        advance_with_content: ``advance_with_content(request_id, *num_new, content=[(handle,
            keys), ...])``: ``advance`` then `KVCacheCoordinator.extend_content` of each
            ``keys`` into the sequence its ``handle`` reads (what the step's positions hold:
            the sampled token, the audio that came with it; one pair per sequence), in one call
            and atomically: if any part fails, nothing happens. A decode step within its blocks
            whose content fills no block is one set of stores. Raises as ``extend_content``
            (the content is checked first), then as ``advance``.
        advance_with_content_all: ``advance_with_content_all(request_ids, *num_new,
            content=[(handle, keys), ...])``: ``advance_with_content`` for every request of
            ``request_ids`` (an engine step's decodes, each once), in one call and atomically
            over the batch. ``keys`` holds the whole batch's content of its sequence in request
            order, an equal share each: request i's are ``keys.keys[i * k : (i + 1) * k]``,
            ``k = len(keys.keys) // len(request_ids)`` (the batch's sampled tokens as one
            ``ContentKeys(tokens, Tokens)``, their audio as one of ``EncoderTokens``). Requests
            within their blocks whose content fills no block are stores and appends in C.
            Raises as ``advance_with_content`` (the first failing request), or `RequestError`
            (a request twice, keys not an equal share).
        advance_speculative_with_content: ``advance_speculative_with_content(request_id,
            *num_new, lookahead=(...), rejected=(...), content=[(handle, keys), ...])``: a
            drafting scheduler's step with prefix caching on, in one call:
            ``advance_speculative``, then `KVCacheCoordinator.extend_content` of each ``keys``
            (what the latest step produced: its accepted drafts and the token sampled after
            them, and the audio that came with them; one pair per sequence), atomically. The
            blocks that content fills are registered in the same call, where the rollback
            accepted their positions (two calls leave them for the next step to register). A
            step within its blocks whose content fills no block is one set of stores. Raises
            as ``extend_content`` (the content is checked first), then as
            ``advance_speculative``.
        advance_speculative_all_with_content:
            ``advance_speculative_all_with_content(request_ids, *num_new, lookahead=(...),
            rejected=[(...), ...], content=[(handle, ContentBatch), ...])``:
            ``advance_speculative_with_content`` for every request of an engine step's batch
            (each once; ``rejected[i]`` and each sequence's i-th keys are request i's: what its
            latest step produced, which varies with the drafts it accepted, empty where
            nothing; a `ContentBatch` of every request's keys per sequence, or a list of one
            ``ContentKeys`` per request), in one call and atomically over the batch.
            Requests within their blocks whose content fills no block are stores and appends;
            the others planned on one plan, in order. Raises as
            ``advance_speculative_with_content`` (the first failing request), or
            `RequestError` (a request twice, ``rejected`` or a sequence's keys not one per
            request).
        handles: the bound groups, in argument order.
    """

    __slots__ = (
        "_admission_check",
        "_admit_lengths",
        "_lean_admit",
        "_lean_admit_prefix",
        "_owner",
        "advance",
        "advance_all",
        "advance_each",
        "advance_speculative",
        "advance_speculative_all",
        "advance_speculative_all_with_content",
        "advance_speculative_each",
        "advance_speculative_with_content",
        "advance_with_content",
        "advance_with_content_all",
        "allocate",
        "allocate_speculative",
        "handles",
        "rollback",
    )
    allocate: AllocateFn[*_Us]
    advance: AdvanceFn[*_Us]
    advance_all: AdvanceAllFn[*_Us]

    if TYPE_CHECKING:
        # Typed as methods (their signatures and mypy's messages name them); at run time they
        # are the generated functions, instance attributes (see `__init__`).
        def allocate_speculative(
            self, request_id: str, *num_new: *_Us, lookahead: tuple[*_Us]
        ) -> list[list[int]]: ...

        def advance_each(
            self, request_ids: Sequence[str], num_new: Sequence[tuple[*_Us]]
        ) -> None: ...

        def rollback(self, request_id: str, *rejected: *_Us) -> None: ...

        def advance_speculative(
            self,
            request_id: str,
            *num_new: *_Us,
            lookahead: tuple[*_Us],
            rejected: tuple[*_Us],
        ) -> None: ...

        def advance_speculative_all(
            self,
            request_ids: Sequence[str],
            *num_new: *_Us,
            lookahead: tuple[*_Us],
            rejected: Sequence[tuple[*_Us]],
        ) -> None: ...

        def advance_speculative_each(
            self,
            request_ids: Sequence[str],
            num_new: Sequence[tuple[*_Us]],
            *,
            lookahead: Sequence[tuple[*_Us]],
            rejected: Sequence[tuple[*_Us]],
        ) -> None: ...

        def advance_speculative_with_content(
            self,
            request_id: str,
            *num_new: *_Us,
            lookahead: tuple[*_Us],
            rejected: tuple[*_Us],
            content: Sequence[ContentFor],
        ) -> None: ...

        def advance_speculative_all_with_content(
            self,
            request_ids: Sequence[str],
            *num_new: *_Us,
            lookahead: tuple[*_Us],
            rejected: Sequence[tuple[*_Us]],
            content: Sequence[ContentsFor],
        ) -> None: ...

        def advance_with_content(
            self, request_id: str, *num_new: *_Us, content: Sequence[ContentFor]
        ) -> None: ...

        def advance_with_content_all(
            self, request_ids: Sequence[str], *num_new: *_Us, content: Sequence[ContentFor]
        ) -> None: ...

    def __init__(self, owner: KVCacheCoordinator, handles: tuple[GroupHandle[Any], ...]) -> None:
        self._owner = owner
        self.handles = handles
        made = _typed_functions(
            owner._core, handles, owner._content_pairs, owner._content_units,
            owner._content_lists,
        )
        self.allocate = cast(AllocateFn[*_Us], made["allocate"])
        self.advance = cast(AdvanceFn[*_Us], made["advance"])
        self.advance_all = cast(AdvanceAllFn[*_Us], made["advance_all"])
        setattr(self, "advance_each", made["advance_each"])  # noqa: B010
        setattr(self, "allocate_speculative", made["allocate_speculative"])  # noqa: B010
        setattr(self, "rollback", made["rollback"])  # noqa: B010
        setattr(self, "advance_speculative", made["advance_speculative"])  # noqa: B010
        setattr(self, "advance_speculative_all", made["advance_speculative_all"])  # noqa: B010
        setattr(self, "advance_speculative_each", made["advance_speculative_each"])  # noqa: B010
        setattr(  # noqa: B010
            self, "advance_speculative_with_content", made["advance_speculative_with_content"]
        )
        setattr(  # noqa: B010
            self,
            "advance_speculative_all_with_content",
            made["advance_speculative_all_with_content"],
        )
        setattr(self, "advance_with_content", made["advance_with_content"])  # noqa: B010
        setattr(self, "advance_with_content_all", made["advance_with_content_all"])  # noqa: B010
        self._admit_lengths = made["lengths"]
        # The core's lean admission, where the policy has no bookkeeping or check for an
        # admission of priority 0 without a prompt (`PolicyState.admitted_ops`,
        # `KVCacheCoordinator._admission_check`); the check an admission with a prefix
        # passes the core (None where there is none).
        policy = owner._policy
        unchecked = policy.policy.reserves or not any(policy.watermark_blocks)
        lean = policy.policy.scheduling_policy != "priority" and unchecked
        self._lean_admit = owner._core.fast.admit if lean else None
        # The same for an admission with a prefix (`_admit_prefix_lines`).
        self._lean_admit_prefix = made["admit_prefix"] if lean else None
        self._admission_check: Callable[[str, list[int]], None] | None = (
            None if unchecked else lambda rid, full: owner._admission_check(rid, full, None)
        )

    def __copy__(self) -> Stepper[*_Us]:
        return self  # a fixed binding of handles: nothing to copy

    def __deepcopy__(self, memo: dict[int, Any]) -> NoReturn:
        raise TypeError(
            "a Stepper is bound to its coordinator: deep-copy the coordinator, then bind the "
            "copy's handles with its stepper()"
        )

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Stepper is bound to a live coordinator and is not pickled")

    def admit(
        self,
        request_id: str,
        *max_len: *_Us,
        priority: int = 0,
        prompt: tuple[*_Us] | None = None,
    ) -> None:
        """Admit a request with its longest sequence per bound group (others: their limit).

        Args:
            request_id: the new request.
            *max_len: its longest sequence per bound group, each in its handle's unit: the
                cap ``reserve`` reserves, the length ``declared`` reserves exactly.
            priority: its priority, for ``scheduling_policy = "priority"`` (a larger value
                is preempted first, as in vLLM).
            prompt: per bound group, what its first step adds: ``on_demand`` admits it only
                if those blocks (at most its cap) and the watermark are free now (vLLM's
                ``allocate_slots`` check at admission); the other policies ignore it.

        Raises:
            UnitTypeError: a length in the wrong unit, a bare int, or not one per group.
            RequestError: the id is not a str of 1 .. 256 characters, or is already admitted.
            AdmissionError: the request can never fit; refuse it (nothing changed).
            AllocationError: not now: its caps cannot be reserved (``reserve``,
                ``declared``), or its first step and the watermark are not free
                (``on_demand``); retry later (nothing changed).
        """
        owner = self._owner
        lengths = self._checked_lengths(max_len)
        lean = self._lean_admit if prompt is None and type(priority) is int else None
        # Its common case stores on one line; False where the general path decides. (No line
        # of its own after it: an interrupt there would come after the admission.)
        if lean is None or priority or not lean(request_id, lengths):
            prompt_slots = None if prompt is None else self._prompt_slots(prompt)
            owner._admit(request_id, lengths, priority, prompt_slots)

    def can_admit(
        self, request_id: str, *max_len: *_Us, prompt: tuple[*_Us] | None = None
    ) -> Answer[None]:
        """Would `admit` admit this request now? Changes nothing.

        Returns:
            `Fits` (``Fits(None)``); `Wait`, with the cache blocks short per group; or
            `Never`, with the reason (the request can never fit).

        Raises:
            UnitTypeError, RequestError: as `admit` (a caller's mistake, not an answer).
        """
        owner = self._owner
        lengths = self._checked_lengths(max_len)
        prompt_slots = None if prompt is None else self._prompt_slots(prompt)
        answer: Answer[None] = owner._core.read(
            "can_admit", owner._can_admit, request_id, lengths, prompt_slots
        )
        return answer

    def try_allocate(self, request_id: str, *num_new: *_Us) -> Answer[list[list[int]]]:
        """`allocate`, answering instead of raising when the step cannot be taken.

        Returns:
            `Fits` with the step's slot mappings (the step was taken); `Wait`, with the cache
            blocks short per group (nothing changed: retry when blocks are freed, or preempt);
            `Never`, when the step goes beyond the group's ``max_in_flight`` or the request's
            ``max_len`` (nothing changed: split the step, or admit it longer).

        Raises:
            UnitTypeError, RequestError (not admitted), ConcurrentUseError: a caller's
                mistake, not an answer.
        """
        owner = self._owner
        core = owner._core
        dense = self._dense(num_new, "num_new")
        needs = step_needs(core, request_id, dense)
        if isinstance(needs, tuple):
            g, reason = needs
            return Never(reason, core.names[g])
        if any(needs):
            return _wait(core.names, needs, f"the step of request {request_id!r}")
        out = core.step_function(request_id, dense)
        return Fits([out[h.index] for h in self.handles])

    def allocate_preempting(self, request_id: str, *num_new: *_Us) -> Scheduled:
        """`allocate`; under ``on_demand``, a step that runs short preempts running requests
        (the policy's order, one at a time) until it fits, as vLLM's scheduler does.

        The preempted requests' blocks go back to the pools and they are no longer admitted:
        the scheduler puts them back in front of its waiting queue and recomputes them.
        Atomic: if an exception escapes, nothing was preempted.

        Returns:
            `Scheduled`: the step's slot mappings (None when the request itself was the one
            left to preempt, and was), and the `Preemption` records.

        Raises:
            UnitTypeError, RequestError: as `allocate`.
            AllocationError: the policy is not ``on_demand`` and the step runs short (it never
                does under ``reserve`` or ``declared``); nothing changed.
        """
        owner = self._owner
        dense = self._dense(num_new, "num_new")
        out, preempted = allocate_preempting(owner._policy, request_id, dense)
        records = tuple(
            owner._preemption(r, request_id, why, lost, priority)
            for r, why, lost, priority in preempted
        )
        if out is None:
            return Scheduled(None, records)
        return Scheduled([out[h.index] for h in self.handles], records)

    def _checked_lengths(self, max_len: tuple[object, ...]) -> list[int | None]:
        handles = self.handles
        if len(max_len) != len(handles):
            raise UnitTypeError(
                f"admit takes {len(handles)} lengths, one per bound group ("
                + ", ".join(f"{h.name}: {h.unit.unit}" for h in handles)
                + f"), got {len(max_len)}",
                field="max_len",
                expected=", ".join(h.unit.unit for h in handles),
                got=f"{len(max_len)} values",
            )
        lengths: list[int | None] = self._admit_lengths(max_len)
        return lengths

    def _prompt_slots(self, prompt: object) -> list[int]:
        """Slots per group of a first step (0 where unbound)."""
        lengths = self._lengths(cast(tuple[object, ...], prompt), "prompt")
        return [0 if n is None else n for n in lengths]

    def _dense(self, values: tuple[object, ...], what: str) -> list[int]:
        """One count per group in the core's positions (0 where unbound)."""
        dense = [0] * len(self._owner._core.names)
        for h, n in zip(self.handles, self._counts(values, what), strict=True):
            dense[h.index] = n * h.rows_per_unit
        return dense

    def seq_lens(self, request_id: str) -> tuple[*_Us]:
        """The request's length so far in each bound group, each in its handle's unit, read at
        one moment (never half of a step another thread is taking)."""
        rows = self._owner._core.rows(request_id)
        return cast(
            tuple[*_Us],
            tuple(_length_in(h, rows[h.index]) for h in self.handles),
        )

    # -- prefix caching -------------------------------------------------------------------

    @overload
    def admit_with_prefix(
        self: Stepper[_A],
        request_id: str,
        a: _A,
        /,
        *,
        prefix: tuple[BlockHashes[_A] | None],
        priority: int = 0,
    ) -> tuple[_A]: ...
    @overload
    def admit_with_prefix(
        self: Stepper[_A, _B],
        request_id: str,
        a: _A,
        b: _B,
        /,
        *,
        prefix: tuple[BlockHashes[_A] | None, BlockHashes[_B] | None],
        priority: int = 0,
    ) -> tuple[_A, _B]: ...
    @overload
    def admit_with_prefix(
        self: Stepper[_A, _B, _C],
        request_id: str,
        a: _A,
        b: _B,
        c: _C,
        /,
        *,
        prefix: tuple[BlockHashes[_A] | None, BlockHashes[_B] | None, BlockHashes[_C] | None],
        priority: int = 0,
    ) -> tuple[_A, _B, _C]: ...
    @overload
    def admit_with_prefix(
        self: Stepper[_A, _B, _C, _D],
        request_id: str,
        a: _A,
        b: _B,
        c: _C,
        d: _D,
        /,
        *,
        prefix: tuple[
            BlockHashes[_A] | None,
            BlockHashes[_B] | None,
            BlockHashes[_C] | None,
            BlockHashes[_D] | None,
        ],
        priority: int = 0,
    ) -> tuple[_A, _B, _C, _D]: ...
    def admit_with_prefix(
        self,
        request_id: str,
        *max_len: Any,
        prefix: tuple[BlockHashes[Any] | None, ...],
        priority: int = 0,
    ) -> tuple[Any, ...]:
        """Admit a request and adopt the longest prefix of its content the cache holds.

        Args:
            request_id: the new request.
            *max_len: its longest sequence per bound group, each in its handle's unit.
            prefix: per bound group, the block hashes of its content, made by that handle
                (`GroupHandle.block_hashes`), or None (no content: the group, and every group
                reading its sequence, gets no hit).

        Returns:
            Per bound group, in its handle's unit, the positions already in the cache: the
            request's length starts there, and its first step computes the rest. Groups that
            read one sequence (a model's token groups; its encoder groups) get one hit; the
            last position of the content is always computed.

        Raises:
            UnitTypeError: a length in the wrong unit, hashes made for another handle's unit.
            UnitValueError: hashes cut at another group's block boundaries.
            RequestError: content longer than the declared length, groups of one sequence
                given different content, or as `admit`.
            AdmissionError, AllocationError: as `admit` (nothing changed).
        """
        lean = self._lean_admit_prefix
        if lean is not None and type(priority) is int and not priority:
            # Its common case written out (None where the general path below decides).
            got = lean(request_id, max_len, prefix)
            if got is not None:
                return cast("tuple[Any, ...]", got)  # (a string: no alias built per call)
        owner = self._owner
        lengths = self._lengths(max_len)
        given: tuple[object, ...] = prefix
        if type(given) is not tuple or len(given) != len(self.handles):
            raise UnitTypeError(
                f"prefix takes a tuple of {len(self.handles)} BlockHashes or None, one per "
                f"bound group ({', '.join(h.name for h in self.handles)}), got "
                f"{describe(given)}",
                field="prefix",
                expected=f"tuple of {len(self.handles)}",
                got=describe(given),
            )
        parts: dict[int, PrefixPart | None] = {}
        by_sequence: dict[bool, tuple[GroupHandle[Any], BlockHashes[Any]]] = {}
        for i, (hashes, handle) in enumerate(zip(given, self.handles, strict=True)):
            if hashes is None:
                parts[handle.index] = None
                continue
            checked = handle.check_hashes(hashes, f"prefix[{i}]")
            encoder = handle.spec.slot_unit is PooledBlocks
            first = by_sequence.setdefault(encoder, (handle, checked))
            if first[1] is not checked and first[1].content != checked.content:
                raise RequestError(
                    f"groups {first[0].name!r} and {handle.name!r} read one sequence "
                    f"({checked.content.unit.unit}s) but were given different content; give "
                    "them the same ContentKeys",
                    request_id=str(request_id),
                )
            parts[handle.index] = checked.part()
        _check_priority(priority)
        hits = owner._core.admit_with_prefix(
            request_id,
            lengths,
            parts,
            owner._policy.admitted_ops(request_id, priority),
            self._admission_check,
        )
        return tuple([h.unit(hits[h.index] // h.rows_per_unit) for h in self.handles])

    def _counts(self, values: tuple[object, ...], what: str) -> list[int]:
        """Plain counts of one quantity per bound group, each checked against its unit."""
        if type(values) is not tuple or len(values) != len(self.handles):
            raise UnitTypeError(
                f"{what} takes {len(self.handles)} counts, one per bound group ("
                + ", ".join(f"{h.name}: {h.unit.unit}" for h in self.handles)
                + f"), got {describe(values)}",
                field=what,
                expected=", ".join(h.unit.unit for h in self.handles),
                got=describe(values),
            )
        out = []
        for i, (quantity, handle) in enumerate(zip(values, self.handles, strict=True)):
            if type(quantity) is not handle.unit:
                _reject(handle, quantity, f"{what}[{i}]")
            out.append(magnitude(cast(IntQuantity, quantity)))
        return out

    def _lengths(self, max_len: tuple[object, ...], what: str = "max_len") -> list[int | None]:
        """Per group (None where unbound), the bound groups' lengths in slots."""
        lengths: list[int | None] = [None] * len(self._owner._core.names)
        for handle, n in zip(self.handles, self._counts(max_len, what), strict=True):
            lengths[handle.index] = handle.slots_of(n)
        return lengths


class KVCacheCoordinator:
    """Paged KV-cache allocation for all layer groups of a model (see the module docstring).

    Args:
        groups: the model's layer groups (`kvunits.contracts.group_layers`), with their limits.
        num_blocks: each group's pool, `PoolBlocks` (its blocks, the null block included: the
            capacity plan's); or one: one pool that every group draws from (vLLM's layout),
            which needs one page size across the groups (`kvunits.runtime.shared_pool`
            unifies them).
        admission: the admission policy (`kvunits.runtime.policy`): ``reserve`` (default),
            ``on_demand`` (vLLM's: blocks as steps need them, preempting) or ``declared``.
        reserve: the older spelling of the two first: ``True`` is ``reserve``, ``False``
            ``on_demand``; give one of ``admission`` and ``reserve``.

    Not thread-safe: drive it from one scheduler thread, or hold one lock around every call;
    concurrent entry raises `ConcurrentUseError` (see the module docstring).
    """

    __slots__ = ("_content_units", "_core", "_groups", "_handles", "_policy")

    def __init__(
        self,
        groups: Sequence[AnyLayerGroup],
        num_blocks: Sequence[PoolBlocks] | PoolBlocks,
        *,
        admission: AdmissionPolicy | None = None,
        reserve: bool | None = None,
    ) -> None:
        policy = _policy_of(admission, reserve)
        shared = type(num_blocks) is PoolBlocks
        counts: Sequence[object] = (
            [num_blocks] * len(groups) if shared else cast(Sequence[object], num_blocks)
        )
        if len(groups) != len(counts) or not groups:
            raise SpecError(f"one num_blocks per group: {len(groups)} groups, {len(counts)} counts")
        names = [g.name for g in groups]
        if len(set(names)) != len(names):
            raise SpecError(f"group names must be distinct, got {names}")
        blocks = []
        for n, g in zip(counts, groups, strict=True):
            field = "num_blocks" if shared else f"num_blocks[{g.name}]"
            count = check_pool_size(n, field)
            if count < 1:
                raise UnitValueError(
                    f"group {g.name!r} needs at least 1 cache_block (the null block), got {n}",
                    field=field,
                    expected=">= 1 cache_block",
                    got=str(n),
                )
            blocks.append(count)
        if shared:
            pages = {manager_ints(g.manager).page_size_bytes for g in groups}
            if len(pages) > 1:
                raise SpecError(
                    "one pool for all groups needs one page size, but the groups' pages are "
                    + ", ".join(f"{g.manager.page_size} ({g.name})" for g in groups)
                    + "; plan with kv_cache_layout = 'shared' (kvunits.runtime.plan), which "
                    "unifies them by scaling the smaller pages' block sizes, or give one count "
                    "per group"
                )
        managers = [make_manager(g.manager) for g in groups]
        in_flight, limit = [], []
        for group in groups:
            fixed = manager_ints(group.manager).fixed_slots
            # A cross-attention group is written whole, once: its only limit is its length.
            in_flight.append(magnitude(group.limits.max_in_flight) if fixed is None else fixed)
            limit.append(magnitude(group.limits.max_len) if fixed is None else fixed)
        if shared:
            one = BlockPool(blocks[0], name="shared")
            pools = [one] * len(groups)
        else:
            pools = [BlockPool(n, name=name) for n, name in zip(blocks, names, strict=True)]
        ledger = AdmissionLedger(
            names,
            [g.manager for g in groups],
            [n - 1 for n in blocks],
            in_flight,
            limit,
            reserve=policy.reserves,
            pools=[0] * len(groups) if shared else None,
        )
        self._groups = tuple(groups)
        # Per group, the unit its content is keyed in (`extend_content`).
        self._content_units: tuple[type[Tokens] | type[EncoderTokens], ...] = tuple(
            EncoderTokens if g.manager.slot_unit is PooledBlocks else Tokens for g in groups
        )
        self._core = CoordinatorCore(
            names, managers, pools, ledger, in_flight, limit, make_fast=make_functions
        )
        self._policy = PolicyState(self._core, policy)
        self._handles: dict[tuple[str, type[IntQuantity]], GroupHandle[Any]] = {}
        for i, g in enumerate(groups):
            unit = g.manager.slot_unit
            self._handles[g.name, unit] = GroupHandle(self._core, i, unit, g.manager)
            if unit is PooledBlocks:
                handle = GroupHandle(self._core, i, EncoderTokens, g.manager)
                self._handles[g.name, EncoderTokens] = handle

    @classmethod
    def from_plan(
        cls,
        plan: CapacityPlan,
        *,
        admission: AdmissionPolicy | None = None,
        reserve: bool | None = None,
    ) -> KVCacheCoordinator:
        """A coordinator with the groups and pool sizes of a capacity plan (one pool for all
        groups when the plan's layout is ``"shared"``), admitting as the plan's engine says
        (``admission``, ``scheduling_policy``, ``watermark``) unless ``admission`` (or the
        older ``reserve``) says otherwise.

        Raises:
            SpecError: the plan shards positions with DCP: the coordinator steps a sequence
                in blocks of ``block_size`` slots on one rank, while a DCP-sharded group's
                block holds ``block_size × dcp`` positions spread over the ranks.
        """
        dcp = plan.parallelism.decode_context_parallel_size
        if dcp > 1:
            raise SpecError(
                f"the plan shards positions over decode_context_parallel_size {dcp}; the "
                "coordinator allocates one rank's positions in blocks of block_size, so it "
                "runs plans without DCP (the plan's per-rank numbers hold either way)"
            )
        groups = [p.group for p in plan.groups]
        if admission is None and reserve is None:
            admission = AdmissionPolicy.of_engine(plan.engine)
        if plan.layout == "shared":
            return cls(groups, plan.groups[0].num_blocks, admission=admission, reserve=reserve)
        return cls(
            groups, [p.num_blocks for p in plan.groups], admission=admission, reserve=reserve
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

    @overload
    def group(self, name: str, unit: type[StepUnit]) -> GroupHandle[StepUnit]: ...
    @overload
    def group(
        self, name: type[_Marker], unit: type[StepUnit]
    ) -> GroupHandle[StepUnit, _Marker]: ...
    def group(
        self, name: str | type[GroupMarker], unit: type[StepUnit]
    ) -> GroupHandle[StepUnit, Any]:
        """The handle of a group, stepped in ``unit``: the group's slot unit, or
        `EncoderTokens` for a pooled group (whose slots are `PooledBlocks`).

        Args:
            name: the group's name, or its `kvunits.contracts.GroupMarker` (``class
                Sliding(GroupMarker, name="sliding")``): the handle, its columns and its
                tables are then typed with it, so mypy keeps them out of another group's.
            unit: the unit its steps count.

        Raises:
            SpecError: no such group.
            UnitTypeError: the group cannot be stepped in ``unit``; a name that is neither.
        """
        if type(name) is not str:
            name = marker_name(name, "name") or ""
        handle = self._handles.get((name, unit))
        if handle is not None:
            return handle
        own = [h for (n, _), h in self._handles.items() if n == name]
        if not own:
            raise SpecError(f"no group {name!r}; groups: {', '.join(self._core.names)}")
        slot_unit = own[0].spec.slot_unit
        ways = " or ".join(f"coordinator.group({name!r}, {h.unit.__name__})" for h in own)
        raise UnitTypeError(
            f"group {name!r} counts {slot_unit.unit} ({slot_unit.__name__}), not "
            f"{getattr(unit, 'unit', unit)}; ask for {ways}",
            field="unit",
            expected=" | ".join(h.unit.unit for h in own),
            got=getattr(unit, "unit", repr(unit)),
        )

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
            SpecError: no handle, or a group twice.
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
            RequestError: the id is not a str of 1 .. 256 characters, or is already admitted,
                or the policy is ``declared`` (a request declares its length: `Stepper.admit`).
            AdmissionError: the request can never fit; refuse it (nothing changed).
            AllocationError: not now (its caps, or under ``on_demand`` the watermark); retry
                later (nothing changed).
        """
        self._admit(request_id, None, 0, None)

    def free(self, request_id: str) -> None:
        """Return every block and the reservation of a finished or preempted request.

        Raises:
            RequestError: the request is not admitted.
        """
        policy = self._policy
        # Its common case stores on one line; False where the general path decides.
        if not self._core.fast.free(
            request_id, policy.arrival, policy.priority, policy._waiting_arrival
        ):
            self._core.free(request_id, policy.freed_ops(request_id))

    @property
    def admission(self) -> AdmissionPolicy:
        """The admission policy."""
        return self._policy.policy

    def _admit(
        self,
        request_id: str,
        lengths: Sequence[int | None] | None,
        priority: int,
        prompt_slots: Sequence[int] | None,
    ) -> None:
        if type(priority) is not int:
            raise UnitTypeError(
                f"priority is a plain int (a larger value is preempted first), got "
                f"{describe(priority)}",
                field="priority",
                expected="int",
                got=describe(priority),
            )
        admitted = type(request_id) is str and request_id in self._core.requests
        if lengths is None and self._policy.policy.kind == "declared" and not admitted:
            check_request_id(request_id)
            raise RequestError(
                f"request {request_id!r}: under the 'declared' admission policy a "
                "request declares its length and reserves exactly that: admit it with "
                "coordinator.stepper(...).admit(request_id, *max_len)",
                request_id=str(request_id)[:256],
            )
        self._core.admit(
            request_id,
            lengths,
            self._policy.admitted_ops(request_id, priority),
            lambda rid, full: self._admission_check(rid, full, prompt_slots),
        )

    def _full_lengths(self, lengths: Sequence[int | None] | None) -> list[int]:
        limit = self._core._limit
        if lengths is None:
            return list(limit)
        return [limit[g] if n is None else n for g, n in enumerate(lengths)]

    def _admission_check(
        self,
        request_id: str,
        lengths: Sequence[int | None] | None,
        prompt_slots: Sequence[int] | None,
    ) -> None:
        """``on_demand``: refuse now (`AllocationError`) what its first step and the
        watermark do not leave room for; the other policies' ledger checks at admission."""
        policy = self._policy
        if policy.policy.reserves or (prompt_slots is None and not any(policy.watermark_blocks)):
            return
        core = self._core
        if type(request_id) is str and request_id in core.requests:
            return  # the core refuses it, with its message
        try:
            caps = core.ledger.caps(request_id, self._full_lengths(lengths))
        except AdmissionError:
            return  # the core refuses it, with its message
        short = admission_needs(policy, request_id, caps, prompt_slots)
        for g, n in enumerate(short):
            if n:
                free = core.pools[g].num_free
                raise AllocationError(
                    f"cannot admit request {request_id!r} now: group {core.names[g]!r} has "
                    f"{free} cache_block free, {n} short of its first step and the watermark "
                    f"({policy.watermark_blocks[g]} cache_block kept for running requests); "
                    "admit it when a running request finishes",
                    group=core.names[g],
                    needed=CacheBlocks(free + n),
                    free=CacheBlocks(free),
                    request_id=str(request_id),
                )

    def _can_admit(
        self,
        request_id: str,
        lengths: Sequence[int | None],
        prompt_slots: Sequence[int] | None,
    ) -> Answer[None]:
        check_request_id(request_id)
        core = self._core
        if request_id in core.requests:
            raise RequestError(
                f"request {request_id!r} is already admitted; free it before reusing its id",
                request_id=request_id,
            )
        try:
            caps = core.ledger.caps(request_id, self._full_lengths(lengths))
        except AdmissionError as err:
            return Never(err.args[0], err.group)
        short = admission_needs(self._policy, request_id, caps, prompt_slots)
        if any(short):
            return _wait(core.names, short, f"admitting request {request_id!r}")
        return Fits(None)

    def _preemption(
        self, request_id: str, for_request: str, reason: str, lost: Sequence[int], priority: int
    ) -> Preemption:
        units = [
            EncoderTokens if g.manager.slot_unit is PooledBlocks else Tokens for g in self._groups
        ]
        return Preemption(
            request_id=request_id,
            for_request=for_request,
            reason=reason,
            lost={
                name: unit(rows)
                for name, unit, rows in zip(self._core.names, units, lost, strict=True)
            },
            priority=priority,
        )

    def __contains__(self, request_id: object) -> bool:
        return type(request_id) is str and request_id in self._core.table.offsets

    @property
    def num_requests(self) -> int:
        """Requests admitted and not yet freed."""
        return len(self._core.table.offsets)

    def __copy__(self) -> NoReturn:
        raise TypeError(
            "a shallow copy of a KVCacheCoordinator would share its blocks and requests with "
            "the original: use copy.deepcopy for an independent coordinator"
        )

    def __deepcopy__(self, memo: dict[int, Any]) -> KVCacheCoordinator:
        """An independent coordinator: the same groups, requests, blocks and prefix cache,
        sharing nothing mutable with this one. Take handles and steppers from the copy.

        Raises:
            ConcurrentUseError: a call is in progress on this coordinator.
        """
        new = KVCacheCoordinator.__new__(KVCacheCoordinator)
        new._groups, new._content_units = self._groups, self._content_units
        new._core = copy.deepcopy(self._core, memo)
        new._policy = copy.deepcopy(self._policy, memo)  # its core: the copy (memo)
        new._handles = {
            key: GroupHandle(new._core, h.index, h.unit, h.spec)
            for key, h in self._handles.items()
        }
        return new

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            "a KVCacheCoordinator is not pickled (its state is a live allocator's); use "
            "copy.deepcopy for an independent coordinator in this process"
        )

    # -- per request, per group -----------------------------------------------------------------

    def block_table(self, request_id: str, handle: GroupHandle[Any, _GR]) -> BlockIds[_GR]:
        """The request's block table in a group, now: cache-block ids, one per block of its
        slots, the null block (0) where evicted. A `BlockIds` of the group: it is indexed
        with the group's columns (``handle.block_of(position)``), and refuses another
        group's."""
        self._own(handle)
        table = self._core.block_table(request_id, handle.index)
        return BlockIds._trusted(tuple(table), handle.name)

    @overload
    def slot_mapping(
        self,
        request_id: str,
        handle: GroupHandle[PooledBlocks, _GR] | GroupHandle[EncoderTokens, _GR],
    ) -> SlotIds[PooledBlocks, _GR]: ...
    @overload
    def slot_mapping(
        self, request_id: str, handle: GroupHandle[Tokens, _GR]
    ) -> SlotIds[Tokens, _GR]: ...
    def slot_mapping(self, request_id: str, handle: GroupHandle[Any, Any]) -> SlotIds[Any, Any]:
        """The latest step's slot mapping in a group: the cache slot of every slot it touches
        (manager units), slot s at ``table[s // block_size] × block_size + s % block_size``.
        Empty for a state group (one state per request, no rows per slot)."""
        self._own(handle)
        slots = self._core.slot_mapping(request_id, handle.index)
        return SlotIds._trusted(tuple(slots), handle.spec.slot_unit, handle.name)

    def seq_len(self, request_id: str, handle: GroupHandle[StepUnit]) -> StepUnit:
        """The request's length so far in a group, in the handle's unit (for a pooled group:
        slots held, or encoder tokens exactly)."""
        self._own(handle)
        return cast(StepUnit, _length_in(handle, self._core.rows(request_id)[handle.index]))

    def request_cap(self, request_id: str, handle: GroupHandle[Any]) -> AdmissionCap:
        """The cache blocks the request may hold at once in a group: the admission cap at its
        declared length (what it reserved)."""
        self._own(handle)
        return AdmissionCap(self._core.caps(request_id)[handle.index])

    @overload
    def kernel_inputs(
        self, request_id: str, handle: GroupHandle[Tokens, _GR]
    ) -> KernelInputs[Tokens, _GR]: ...
    @overload
    def kernel_inputs(
        self,
        request_id: str,
        handle: GroupHandle[PooledBlocks, _GR] | GroupHandle[EncoderTokens, _GR],
    ) -> KernelInputs[EncoderTokens, _GR]: ...
    def kernel_inputs(
        self, request_id: str, handle: GroupHandle[Any, Any]
    ) -> KernelInputs[Any, Any]:
        """What the kernels of a group read for the request's latest step: its block table,
        slot mapping (for `kvunits.kernels.write_kv`), the cache row of every position and the
        exact length, in the group's kernel unit (encoder tokens for a pooled group), read at
        one moment.

        Raises:
            UnitTypeError: not a handle of this coordinator.
            SpecError: a state group (one state per request: no positions, no rows).
        """
        self._own(handle)
        spec = handle.spec
        table, slots, rows, num_rows, step = self._core.read(
            "kernel_inputs", _kernel_view, self._core, request_id, handle
        )
        pool = spec.pool
        if spec.slot_unit is PooledBlocks:
            pooled = spec.expect(PooledBlocks)
            return KernelInputs(
                block_table=BlockIds._trusted(tuple(table), handle.name),
                tokens_per_block=expand_block_size(pooled.block_size, pool),
                slot_mapping=SlotIds._trusted(tuple(slots), PooledBlocks, handle.name),
                row_mapping=tuple(rows),
                seq_len=EncoderTokens(num_rows),
                step_len=EncoderTokens(step),
                pool=pool,
            )
        return KernelInputs(
            block_table=BlockIds._trusted(tuple(table), handle.name),
            tokens_per_block=spec.expect(Tokens).block_size,
            slot_mapping=SlotIds._trusted(tuple(slots), Tokens, handle.name),
            row_mapping=tuple(rows),
            seq_len=Tokens(num_rows),
            step_len=Tokens(step),
            pool=pool,
        )

    @overload
    def step_batch(
        self, handle: GroupHandle[Tokens, _GR], request_ids: Sequence[str]
    ) -> StepBatch[Tokens, _GR]: ...
    @overload
    def step_batch(
        self,
        handle: GroupHandle[PooledBlocks, _GR] | GroupHandle[EncoderTokens, _GR],
        request_ids: Sequence[str],
    ) -> StepBatch[EncoderTokens, _GR]: ...
    def step_batch(
        self, handle: GroupHandle[Any, Any], request_ids: Sequence[str]
    ) -> StepBatch[Any, Any]:
        """One group's step batch for the attention backends (`kvunits.contracts.batch`): per
        request, in the order given, its block table, its length after its latest step and
        that step's length, in the group's kernel unit. `kvunits.kernels.flash_attention_inputs`
        and `kvunits.kernels.flashinfer_inputs` turn it into tensors; nothing here loops over
        positions (a table is copied whole).

        Raises:
            UnitTypeError: not a handle of this coordinator.
            RequestError: a request is not admitted.
            SpecError: a state group (one state per request: no positions).
        """
        self._own(handle)
        spec = handle.spec
        if spec.kind == "state":
            raise SpecError(
                f"group {handle.name!r} holds one state per request: it has no positions "
                "for the attention kernels"
            )
        core, g = self._core, handle.index
        views = core.read("step_batch", _step_views, core, g, request_ids)
        if spec.slot_unit is PooledBlocks:
            unit: type[Any] = EncoderTokens
            per_block: BlockSize[Any] = expand_block_size(
                spec.expect(PooledBlocks).block_size, spec.pool
            )
        else:
            unit, per_block = Tokens, spec.expect(Tokens).block_size
        group = self._groups[g]
        return StepBatch(
            request_ids=tuple(request_ids),
            block_tables=tuple(
                BlockIds._trusted(tuple(table), handle.name) for table, _, _ in views
            ),
            unit=unit,
            tokens_per_block=per_block,
            block_table_width=magnitude(spec.block_table_width(group.limits.max_len)),
            windows=MappingProxyType({n: k.sliding_window for n, k in group.kernels.items()}),
            _seq_lens=tuple(rows for _, rows, _ in views),
            _query_lens=tuple(step for _, _, step in views),
        )

    # -- usage --------------------------------------------------------------------------------

    def usage(self, handle: GroupHandle[Any]) -> GroupUsage:
        """Blocks used, free and reserved in one group."""
        self._own(handle)
        return self._usage(handle.index, self._core.usage(handle.index))

    def usage_by_group(self) -> dict[str, GroupUsage]:
        """`usage` of every group, by name, read at one moment."""
        names = self._core.names
        return {
            names[g]: self._usage(g, figures) for g, figures in enumerate(self._core.usage_all())
        }

    def _usage(self, g: int, figures: tuple[int, int, int, int, int]) -> GroupUsage:
        capacity, used, free, reserved, cached = figures
        return GroupUsage(
            name=self._core.names[g],
            capacity=CacheBlocks(capacity),
            used=CacheBlocks(used),
            free=CacheBlocks(free),
            reserved=CacheBlocks(reserved),
            cached=CacheBlocks(cached),
        )

    def metrics(self) -> CacheMetrics:
        """A frozen snapshot of the cache's measures, under vLLM's metric names
        (`kvunits.runtime.metrics`): per group usage, cached blocks, prefix-cache queries and
        hits, and the preemptions. Take it on the scheduler's thread; hand the snapshot on."""
        from .metrics import CacheMetrics, GroupMetrics

        core = self._core
        usages = [self._usage(g, figures) for g, figures in enumerate(core.usage_all())]
        state = self._policy
        groups = []
        held = total = 0
        seen: set[int] = set()
        for g, (group, usage) in enumerate(zip(self._groups, usages, strict=True)):
            capacity = magnitude(usage.capacity)
            used = magnitude(usage.used)
            unit: type[Any] = EncoderTokens if group.manager.slot_unit is PooledBlocks else Tokens
            cache = core.caches[g]
            queried, hits = (0, 0) if cache is None else (cache.queried, cache.hits)
            groups.append(
                GroupMetrics(
                    name=group.name,
                    usage=usage,
                    kv_cache_usage_perc=used / capacity if capacity else 0.0,
                    prefix_cache_queries=unit(queried),
                    prefix_cache_hits=unit(hits),
                    preempted=unit(state.preempted_rows[g]),
                )
            )
            pool = core.pools[g]
            if id(pool) not in seen:  # a shared pool counts once, at its one page size
                seen.add(id(pool))
                block_bytes = manager_ints(group.manager).page_size_bytes * len(group.layer_names)
                held += pool.num_used * block_bytes
                total += (pool.num_blocks - 1) * block_bytes
        return CacheMetrics(
            groups=tuple(groups),
            kv_cache_usage_perc=held / total if total else 0.0,
            num_requests_running=len(core.requests),
            num_preemptions=state.num_preemptions,
            admission=state.policy.kind,
        )

    # -- the prefix cache --------------------------------------------------------------------

    @overload
    def prefix_cache_stats(self, handle: GroupHandle[Tokens]) -> PrefixCacheStats[Tokens]: ...
    @overload
    def prefix_cache_stats(
        self, handle: GroupHandle[PooledBlocks] | GroupHandle[EncoderTokens]
    ) -> PrefixCacheStats[EncoderTokens]: ...
    def prefix_cache_stats(self, handle: GroupHandle[Any]) -> PrefixCacheStats[Any]:
        """What a group's prefix cache served so far: admissions that brought content, the
        positions they brought and the positions found cached (vLLM's ``PrefixCacheStats``),
        in the group's kernel unit (encoder tokens for a pooled group)."""
        self._own(handle)
        unit: type[Any] = EncoderTokens if handle.spec.slot_unit is PooledBlocks else Tokens
        cache = self._core.caches[handle.index]
        if cache is None:
            return PrefixCacheStats(0, unit(0), unit(0))
        return cache.stats(unit)

    @overload
    def extend_content(
        self, request_id: str, handle: GroupHandle[Tokens], content: ContentKeys[Tokens]
    ) -> None: ...
    @overload
    def extend_content(
        self,
        request_id: str,
        handle: GroupHandle[PooledBlocks] | GroupHandle[EncoderTokens],
        content: ContentKeys[EncoderTokens],
    ) -> None: ...
    def extend_content(
        self, request_id: str, handle: GroupHandle[Any], content: ContentKeys[Any]
    ) -> None:
        """Append what the next positions of a request hold in the sequence a group reads (the
        tokens it generates, the audio as it arrives), after what it was admitted with: every
        group of that sequence admitted with content extends it (call once per sequence, not
        per group). Its blocks then enter the prefix cache once full and computed, as vLLM
        hashes a request's tokens as they are appended (a conversation's next turn then finds
        its answer cached too); a block is hashed once for all groups of one block size.

        Raises:
            UnitTypeError: content of another unit than the group's kernel unit.
            UnitValueError: a salt (it belongs to the first block only).
            RequestError: the request was admitted without content in this group.
        """
        # The checks of `_content_group` inline where they pass (a decode step makes this call
        # once per sequence): a handle of this coordinator, keys of its content unit, no salt;
        # then the core's generated entry for them (`_fast._extend`).
        core = self._core
        given: object = handle
        keys: object = content
        if not (
            type(given) is GroupHandle
            and given._owner is core
            and type(keys) is ContentKeys
            and keys.unit is self._content_units[given.index]
            and keys.salt is None
        ):
            self._content_group(handle, content)  # raises
        core.fast.extend(request_id, handle.index, content._int64s)

    def reset_prefix_cache(self) -> bool:
        """Forget every cached prefix, as vLLM's ``reset_prefix_cache`` (after a weight
        update, say): possible only when no request holds a block, in any group. A request
        that is admitted but holds no block yet does not stand in the way (its reservation
        stays); vLLM's ``BlockPool.reset_prefix_cache`` counts held blocks the same way.
        Every pool is then as built (`BlockPool.reset_ops`): its blocks free, none cached,
        nothing kept of the ids handed out or their order.

        Returns:
            Whether the cache was reset (``False``: some request holds a block; nothing
            changed).

        Example:
            >>> from kvunits.contracts import EncoderTokens, Tokens
            >>> from kvunits.contracts.config import load_config
            >>> from kvunits.runtime import plan
            >>> config = load_config("examples/voxtral_realtime.toml")
            >>> coord = KVCacheCoordinator.from_plan(plan(config.model, config.engine))
            >>> audio, text = coord.group("audio", EncoderTokens), coord.group("text", Tokens)
            >>> step = coord.stepper(audio, text)
            >>> step.admit("r", EncoderTokens(40_000), Tokens(512))
            >>> coord.reset_prefix_cache()  # r is admitted (its cap reserved), holds no block
            True
            >>> _ = step.allocate("r", EncoderTokens(4), Tokens(1))
            >>> coord.reset_prefix_cache()  # r holds a block in each group: nothing changes
            False
            >>> coord.free("r")
            >>> coord.reset_prefix_cache()
            True
        """
        return self._core.reset_prefix_cache()

    def _content_group(self, handle: object, content: object) -> int:
        """The index of ``handle``'s group, after checking ``content`` can extend it (see
        `extend_content`)."""
        self._own(handle)
        assert type(handle) is GroupHandle
        given: object = content
        expected: type[Any] = self._content_units[handle.index]
        if type(given) is not ContentKeys or given.unit is not expected:
            got = (
                f"ContentKeys of {given.unit.unit}"
                if type(given) is ContentKeys
                else describe(given)
            )
            raise UnitTypeError(
                f"group {handle.name!r} holds content in {expected.unit}; got {got}",
                field="content",
                expected=f"ContentKeys of {expected.unit}",
                got=got,
            )
        if given.salt is not None:
            raise UnitValueError(
                "a salt goes in the first block's hash: give it at admission, not when "
                "extending the content",
                field="content.salt",
                expected="None",
                got=repr(given.salt),
            )
        return handle.index

    def _content_pairs(self, content: object) -> list[tuple[int, Sequence[int]]]:
        """``Stepper.advance_with_content``'s content checked: per pair, the group's index and
        the keys (see `extend_content`)."""
        return [
            (self._content_group(handle, keys), keys._int64s)  # type: ignore[attr-defined]
            for handle, keys in _given_pairs(content, "content", "ContentKeys")
        ]

    def _content_lists(self, content: object) -> list[tuple[int, list[array[int]]]]:
        """``Stepper.advance_speculative_all_with_content``'s content checked: per pair, the
        group's index and each request's keys (see `extend_content`; how many is the core's to
        check), from a `ContentBatch` of the group's unit or a list of one `ContentKeys` per
        request, checked in passes in C (the first wrong one reported as `extend_content`
        reports it)."""
        out = []
        for handle, keys in _given_pairs(content, "a batch's content", "ContentBatch"):
            self._own(handle)
            assert type(handle) is GroupHandle
            if type(keys) is ContentBatch:
                expected = self._content_units[handle.index]
                if keys.unit is not expected:
                    raise UnitTypeError(
                        f"group {handle.name!r} holds content in {expected.unit}; got "
                        f"ContentBatch of {keys.unit.unit}",
                        field="content",
                        expected=f"ContentBatch of {expected.unit}",
                        got=f"ContentBatch of {keys.unit.unit}",
                    )
                out.append((handle.index, keys._arrays))
                continue
            if type(keys) is not list and type(keys) is not tuple:
                raise UnitTypeError(
                    f"group {handle.name!r}'s content in a batch is a ContentBatch, or one "
                    f"ContentKeys per request in a list; got {describe(keys)}",
                    field="content",
                    expected="ContentBatch, or a list of ContentKeys",
                    got=describe(keys),
                )
            count, unit = len(keys), self._content_units[handle.index]
            if (
                countOf(map(type, keys), ContentKeys) != count
                or countOf(map(_unit_of, keys), unit) != count
                or countOf(map(_salt_of, keys), None) != count
            ):
                for one in keys:
                    self._content_group(handle, one)  # raises for the first wrong one
            out.append((handle.index, list(map(_int64s_of, keys))))
        return out

    def _own(self, handle: object) -> None:
        if type(handle) is not GroupHandle or handle._owner is not self._core:
            raise UnitTypeError(
                f"expected a GroupHandle of this coordinator (coordinator.group(name, unit)), "
                f"got {describe(handle) if type(handle) is not GroupHandle else repr(handle)}",
                field="handle",
                expected="GroupHandle",
                got=describe(handle),
            )



def _given_pairs(content: object, what: str, carrier: str) -> Iterator[tuple[object, object]]:
    """``content``'s ``(handle, carrier)`` pairs, checked as a list (or tuple) of them, each a
    tuple of two, as each is reached (what each holds is the caller's to check, before the
    next pair's shape); ``what`` names it in the errors."""
    if type(content) is not list and type(content) is not tuple:
        raise UnitTypeError(
            f"{what} is given as (handle, {carrier}) pairs in a list; got {describe(content)}",
            field="content",
            expected=f"a list of (GroupHandle, {carrier})",
            got=describe(content),
        )
    for pair in content:
        if type(pair) is not tuple or len(pair) != 2:
            raise UnitTypeError(
                f"{what} is given as (handle, {carrier}) pairs; got {describe(pair)}",
                field="content",
                expected=f"(GroupHandle, {carrier})",
                got=describe(pair),
            )
        yield pair

def _reject(handle: GroupHandle[Any], value: object, what: str) -> NoReturn:
    hint = ""
    if type(value) is EncoderTokens and handle.unit is PooledBlocks:
        hint = (
            f"; step this group in encoder tokens with coordinator.group({handle.name!r}, "
            "EncoderTokens), or convert whole pooled blocks with kvunits.contracts.pool_length(n, "
            f"PoolFactor({handle.spec.pool.tokens_per_block}))"
        )
    raise UnitTypeError(
        f"{what} is for group {handle.name!r}, whose handle counts {handle.unit.unit} "
        f"({handle.unit.__name__}); got {describe(value)}{hint}",
        field=what,
        expected=handle.unit.unit,
        got=describe(value),
    )


def _count_error(handles: tuple[GroupHandle[Any], ...], what: str, given: object) -> NoReturn:
    raise UnitTypeError(
        f"{what} takes {len(handles)} counts, one per bound group ("
        + ", ".join(f"{h.name}: {h.unit.unit}" for h in handles)
        + f"), got {describe(given)}",
        field=what,
        expected=", ".join(h.unit.unit for h in handles),
        got=describe(given),
    )


def _typed_functions(
    core: CoordinatorCore,
    handles: tuple[GroupHandle[Any], ...],
    content_pairs: Callable[[object], list[tuple[int, Sequence[int]]]],
    units: tuple[type[Any], ...],
    content_lists: Callable[[object], list[tuple[int, list[array[int]]]]],
) -> dict[str, Callable[..., Any]]:
    """The stepper's typed entries, written out for its handles (as `kvunits.runtime._fast`
    writes the core's steps): each checks every argument's class once (``type(a) is unit``,
    the cheapest check there is), reads its int from the quantity's slot (a call, even
    `kvunits.contracts.internal.magnitude`, would cost the typed entry a few per cent of a
    step; the allocator benchmark prices it), scales a pooled group stepped in whole pooled
    blocks by P, and calls the core's function with one count per group, in the core's order
    (0 for a group the stepper does not bind). With ``admit``, the only reads of the slot
    outside contracts."""
    n, k = len(core.names), len(handles)
    names = [f"a{i}" for i in range(k)]
    args = ", ".join(names)

    def value(i: int, name: str) -> str:
        scale = handles[i].rows_per_unit
        return f"{name}._value * {scale}" if scale != 1 else f"{name}._value"

    def by_group(args: list[str]) -> list[str]:
        # Each group's count: its argument's value (scaled), 0 where not bound.
        out = ["0"] * n
        for i, h in enumerate(handles):
            out[h.index] = value(i, args[i])
        return out

    def dense(parts: list[str]) -> str:
        by_group = ["0"] * n
        for i, h in enumerate(handles):
            by_group[h.index] = parts[i]
        return "(" + ", ".join(by_group) + ("," if n == 1 else "") + ")"

    in_order = [h.index for h in handles] == list(range(n))
    identity = in_order and k == n and all(h.rows_per_unit == 1 for h in handles)
    # The core's call and the return on one line: no line runs after the call commits.
    pick = "out" if in_order else "[" + ", ".join(f"out[{h.index}]" for h in handles) + "]"

    def checks(what: str, prefix: str = "a") -> list[str]:
        return [
            f"        if type({prefix}{i}) is not U{i}: reject(H{i}, {prefix}{i}, "
            f'"{what}[{i}]")'
            for i in range(k)
        ]

    counts = dense([value(i, names[i]) for i in range(k)])
    rs = ", ".join(f"r{i}" for i in range(k)) + ("," if k == 1 else "")
    looked = [
        f"        if type(lookahead) is not tuple or len(lookahead) != {k}:",
        '            count_error(H, "lookahead", lookahead)',
        "        " + ", ".join(f"l{i}" for i in range(k)) + ("," * (k == 1)) + " = lookahead",
        *checks("lookahead", "l"),
        *(f"        v{i} = {value(i, f'l{i}')}" for i in range(k)),
    ]
    looks = [f"v{i}" for i in range(k)]
    # A drafting step's counts (its positions and lookahead), and the rejected drafts of the
    # latest step, checked and read.
    drafted = [f"{value(i, names[i])} + v{i}" for i in range(k)]
    unrolled = [value(i, f"r{i}") for i in range(k)]
    rejects = [
        f"        if type(rejected) is not tuple or len(rejected) != {k}:",
        '            count_error(H, "rejected", rejected)',
        f"        {rs} = rejected",
        *checks("rejected", "r"),
    ]
    spec_counts = dense(drafted)
    lookahead_counts = dense(looks)
    rejected_counts = dense(unrolled)
    # Each content pair checked inline (a handle of this core, keys of its content unit, no
    # salt) into ``pairs`` (group, keys); anything else goes to content_pairs, which raises
    # what extend_content does.
    pairs = [
        "        pairs = []",
        "        if type(content) is list or type(content) is tuple:",
        "            for pair in content:",
        "                if type(pair) is not tuple or len(pair) != 2:",
        "                    pairs = content_pairs(content); break",
        "                h, c = pair",
        "                if (type(h) is not Handle or h._owner is not core or type(c) is not Keys",
        "                        or c.unit is not units[h.index] or c.salt is not None):",
        "                    pairs = content_pairs(content); break",
        "                pairs.append((h.index, c._int64s))",
        "        else:",
        "            pairs = content_pairs(content)",
    ]
    lines = [
        "def make(fast, reject, count_error, H, U, content_pairs, Handle, Keys, core, units, "
        "content_lists):",
        "    step, core_advance = fast.step_typed, fast.advance_typed",
        "    speculative, core_rollback = fast.speculative_typed, fast.rollback_typed",
        "    core_all = fast.advance_all_typed",
        "    core_respec, core_respec_all = fast.respec_typed, fast.respec_all_typed",
        "    core_units = fast.respec_all_units",
        "    core_each, core_each_units = fast.advance_each, fast.advance_each_units",
        "    core_respec_each, core_respec_each_units = fast.respec_each, fast.respec_each_units",
        "    core_content, core_content_all = fast.content_typed, fast.content_all_typed",
        "    core_respec_content = core.advance_speculative_content",
        "    core_respec_content_all = core.advance_speculative_content_all",
        "    " + ", ".join(f"H{i}" for i in range(k)) + (", = H" if k == 1 else " = H"),
        "    " + ", ".join(f"U{i}" for i in range(k)) + (", = U" if k == 1 else " = U"),
        "",
        f"    def allocate(request_id, {args}):",
        *checks("num_new"),
        f"        out = step(request_id, {counts}); return {pick}",
        "",
        f"    def advance(request_id, {args}):",
        *checks("num_new"),
        *("        " + line for line in advance_lines(core, by_group(names))),
        "",
        f"    def advance_all(request_ids, {args}):",
        *checks("num_new"),
        f"        return core_all(request_ids, {counts})",
        "",
        "    def advance_each(request_ids, num_new):",
        *(
            # Every group bound in order, one position per unit: the core reads each
            # request's quantities itself (anything irregular: ``checked_each``).
            [
                "        if type(num_new) is list or type(num_new) is tuple:",
                "            return core_each_units(request_ids, num_new, U, checked_each)",
            ]
            if identity
            else []
        ),
        "        return checked_each(request_ids, num_new)",
        "",
        "    def checked_each(request_ids, num_new):",
        "        if type(num_new) is not list and type(num_new) is not tuple:",
        "            return core_each(request_ids, num_new)  # (raises, naming what it got)",
        "        raw = []",
        "        for i, given in enumerate(num_new):",
        f"            if type(given) is not tuple or len(given) != {k}:",
        '                count_error(H, f"num_new[{i}]", given)',
        f"            {args}{',' if k == 1 else ''} = given",
        *(
            f'            if type(a{g}) is not U{g}: reject(H{g}, a{g}, f"num_new[{{i}}][{g}]")'
            for g in range(k)
        ),
        f"            raw.append({counts})",
        "        return core_each(request_ids, raw)",
        "",
        f"    def rollback(request_id, {args}):",
        *checks("rejected"),
        *(
            # Every group bound in order: the core's lines in this frame (as `advance`).
            ["        " + line for line in rollback_lines(core, by_group(names))]
            if in_order
            else [f"        return core_rollback(request_id, {counts})"]
        ),
        "",
        f"    def allocate_speculative(request_id, {args}, *, lookahead):",
        *checks("num_new"),
        f"        if type(lookahead) is not tuple or len(lookahead) != {k}:",
        '            count_error(H, "lookahead", lookahead)',
        "        "
        + ", ".join(f"l{i}" for i in range(k))
        + (", = lookahead" if k == 1 else " = lookahead"),
        *checks("lookahead", "l"),
        *(f"        v{i} = {value(i, f'l{i}')}" for i in range(k)),
        *(
            ["        " + line for line in speculative_lines(core, drafted, looks)]
            if in_order
            else [
                "        out = speculative(request_id, "
                + dense(drafted)
                + ", "
                + dense(looks)
                + f"); return {pick}"
            ]
        ),
        "",
        f"    def advance_speculative(request_id, {args}, *, lookahead, rejected):",
        *checks("num_new"),
        *looked,
        *rejects,
        *(
            ["        " + line for line in respec_lines(core, drafted, looks, unrolled)]
            if in_order
            else [
                f"        return core_respec(request_id, {spec_counts}, {lookahead_counts}, "
                f"{rejected_counts})"
            ]
        ),
        "",
        f"    def advance_speculative_all(request_ids, {args}, *, lookahead, rejected):",
        *checks("num_new"),
        *looked,
        *(
            [
                # Every group bound in order, one position per unit: the core reads the
                # rejected counts itself (anything irregular: ``checked`` checks, reports).
                "        if type(rejected) is list or type(rejected) is tuple:",
                f"            return core_units(request_ids, {spec_counts}, {lookahead_counts}, "
                "rejected, U, checked)",
            ]
            if identity
            else []
        ),
        f"        return checked(request_ids, {spec_counts}, {lookahead_counts}, rejected)",
        "",
        "    def checked(request_ids, counts, looked, rejected):",
        "        return core_respec_all(request_ids, counts, looked, read_rejected(rejected))",
        "",
        # Each request's tuple checked and read where it is met (a scheduler that counts each
        # request's rejected drafts makes a tuple per request: a cache of them by identity
        # would miss on every one).
        "    def read_rejected(rejected):",
        "        raw = []",
        "        for given in rejected:",
        f"            if type(given) is not tuple or len(given) != {k}:",
        '                count_error(H, "rejected", given)',
        f"            {rs} = given",
        *("    " + line for line in checks("rejected", "r")),
        f"            raw.append({rejected_counts})",
        "        return raw",
        "",
        "    def advance_speculative_each(request_ids, num_new, *, lookahead, rejected):",
        *(
            # Every group bound in order, one position per unit: the core reads each
            # request's quantities itself (anything irregular: ``checked_respec_each``).
            [
                "        if (type(num_new) is list or type(num_new) is tuple) and (type(lookahead) "
                "is list or type(lookahead) is tuple) and (type(rejected) is list or "
                "type(rejected) is tuple):",
                "            return core_respec_each_units(request_ids, num_new, lookahead, "
                "rejected, U, checked_respec_each)",
            ]
            if identity
            else []
        ),
        "        return checked_respec_each(request_ids, num_new, lookahead, rejected)",
        "",
        "    def checked_respec_each(request_ids, num_new, lookahead, rejected):",
        "        if not all(type(x) is list or type(x) is tuple for x in (num_new, lookahead, "
        "rejected)) or not len(num_new) == len(lookahead) == len(rejected):",
        "            # (raises, naming what it got)",
        "            return core_respec_each(request_ids, num_new, lookahead, rejected)",
        "        raw, looks, backs = [], [], []",
        "        for i, (given, ahead, back) in enumerate(zip(num_new, lookahead, rejected)):",
        *(
            line
            for what, name, prefix in (
                ("num_new", "given", "a"), ("lookahead", "ahead", "l"), ("rejected", "back", "r")
            )
            for line in (
                f"            if type({name}) is not tuple or len({name}) != {k}:",
                f'                count_error(H, f"{what}[{{i}}]", {name})',
                "            " + ", ".join(f"{prefix}{g}" for g in range(k))
                + ("," if k == 1 else "") + f" = {name}",
                *(
                    f"            if type({prefix}{g}) is not U{g}: reject(H{g}, {prefix}{g}, "
                    f'f"{what}[{{i}}][{g}]")'
                    for g in range(k)
                ),
            )
        ),
        *(f"            v{i} = {value(i, f'l{i}')}" for i in range(k)),
        f"            raw.append({spec_counts}); looks.append({lookahead_counts}); "
        f"backs.append({rejected_counts})",
        "        return core_respec_each(request_ids, raw, looks, backs)",
        "",
        f"    def advance_speculative_all_with_content(request_ids, {args}, *, lookahead, "
        "rejected, content):",
        *checks("num_new"),
        *looked,
        f"        return core_respec_content_all(request_ids, {spec_counts}, {lookahead_counts}, "
        "read_rejected(rejected), content_lists(content))",
        "",
        f"    def advance_with_content(request_id, {args}, *, content):",
        *checks("num_new"),
        *(
            # Every group bound in order: the core's lines in this frame, one pass over the
            # pairs as given.
            ["        " + line for line in content_lines(core, by_group(names))]
            if in_order
            else [*pairs, f"        return core_content(request_id, {counts}, pairs)"]
        ),
        "",
        f"    def advance_with_content_all(request_ids, {args}, *, content):",
        *checks("num_new"),
        *pairs,
        f"        return core_content_all(request_ids, {counts}, pairs)",
        "",
        f"    def advance_speculative_with_content(request_id, {args}, *, lookahead, rejected, "
        "content):",
        *checks("num_new"),
        *looked,
        *rejects,
        *(
            # Every group bound in order: the core's lines in this frame (as
            # ``advance_with_content``).
            ["        " + line for line in respec_content_lines(core, drafted, looks, unrolled)]
            if in_order
            else [
                *pairs,
                f"        return core_respec_content(request_id, {spec_counts}, "
                f"{lookahead_counts}, {rejected_counts}, pairs)",
            ]
        ),
        "",
        *_admit_prefix_lines(core, handles),
        "    def lengths(given):",
        f"        if len(given) != {k}:",
        '            count_error(H, "max_len", given)',
        f"        {args}{',' if k == 1 else ''} = given",
        *checks("max_len"),
        "        return ["
        + ", ".join(
            "None"
            if all(h.index != g for h in handles)
            else (
                lambda i: f"-(-a{i}._value // {handles[i]._rows_per_slot})"
                if handles[i]._rows_per_slot != 1
                else f"a{i}._value"
            )(next(i for i, h in enumerate(handles) if h.index == g))
            for g in range(n)
        )
        + "]",
        "",
        "    return dict(allocate=allocate, advance=advance, advance_all=advance_all,",
        "                advance_each=advance_each,",
        "                rollback=rollback, allocate_speculative=allocate_speculative,",
        "                advance_speculative=advance_speculative,",
        "                advance_speculative_all=advance_speculative_all,",
        "                advance_speculative_each=advance_speculative_each,",
        "                advance_with_content=advance_with_content,",
        "                advance_with_content_all=advance_with_content_all,",
        "                advance_speculative_with_content=advance_speculative_with_content,",
        "                advance_speculative_all_with_content=(",
        "                    advance_speculative_all_with_content),",
        "                lengths=lengths, admit_prefix=admit_prefix)",
    ]
    namespace: dict[str, Any] = advance_names(core)
    namespace.update(Hashes=BlockHashes, sizes=[_content_block_size(h.spec) for h in handles])
    exec(compiled("\n".join(lines), f"<kvunits typed entries: {k} of {n} groups>"), namespace)
    made: dict[str, Callable[..., Any]] = namespace["make"](
        core.fast,
        _reject,
        _count_error,
        handles,
        tuple(h.unit for h in handles),
        content_pairs,
        GroupHandle,
        ContentKeys,
        core,
        units,
        content_lists,
    )
    return made


def _admit_prefix_lines(core: CoordinatorCore, handles: tuple[GroupHandle[Any], ...]) -> list[str]:
    """The source of the typed entries' ``admit_prefix(request_id, max_len, prefix)``:
    `Stepper.admit_with_prefix` (priority 0) of a stepper binding every group, its checks
    inline (each length's unit, each group's `BlockHashes` made for its handle's unit and
    block boundaries, groups of one sequence given one content) and the core's generated
    admission (``fast.admit_prefix``) called with each group's `PrefixPart`: the hits in each
    handle's unit. None, having changed nothing, where a check fails or the core declines:
    the caller's general path decides (and raises what it finds). ``admit_prefix = None``
    where some group is unbound or the core has no such admission."""
    n, k = len(core.names), len(handles)
    if k != n or core.fast.admit_prefix is None:
        return ["    admit_prefix = None", ""]
    names = ", ".join(f"a{i}" for i in range(k)) + ("," if k == 1 else "")
    hashes = ", ".join(f"b{i}" for i in range(k)) + ("," if k == 1 else "")
    lengths = ["0"] * n
    parts = []
    for i, h in enumerate(handles):
        rows = h._rows_per_slot
        lengths[h.index] = f"-(-a{i}._value // {rows})" if rows != 1 else f"a{i}._value"
        parts.append(f"{h.index}: b{i}._part")
    lines = [
        "    core_admit_prefix = fast.admit_prefix",
        "    " + ", ".join(f"S{i}" for i in range(k)) + (", = sizes" if k == 1 else " = sizes"),
        "",
        "    def admit_prefix(request_id, max_len, prefix):",
        f"        if len(max_len) != {k} or type(prefix) is not tuple or len(prefix) != {k}:",
        "            return None",
        f"        {names} = max_len",
        "        if " + " or ".join(f"type(a{i}) is not U{i}" for i in range(k)) + ":",
        "            return None",
        f"        {hashes} = prefix",
    ]
    for i in range(k):
        lines += [
            f"        if (type(b{i}) is not Hashes or b{i}.unit is not U{i}",
            f"                or b{i}.tokens_per_block is not S{i} and b{i}.tokens_per_block != "
            f"S{i}):",
            "            return None",
        ]
    # Groups of one sequence (its encoder's, its tokens') read one content.
    for i in range(k):
        for j in range(i + 1, k):
            if core._axis[handles[i].index] == core._axis[handles[j].index]:
                lines += [
                    f"        if b{i}.content is not b{j}.content and b{i}.content != "
                    f"b{j}.content:",
                    "            return None",
                ]
    hits = ", ".join(
        f"U{i}(out[{h.index}] // {h.rows_per_unit})" if h.rows_per_unit != 1 else
        f"U{i}(out[{h.index}])"
        for i, h in enumerate(handles)
    ) + ("," if k == 1 else "")
    lines += [
        "        out = core_admit_prefix(request_id, [" + ", ".join(lengths) + "], {"
        + ", ".join(parts) + "}, None, None)",
        f"        return None if out is None else ({hits})",
        "",
    ]
    return lines


def _kernel_view(
    core: CoordinatorCore, request_id: str, handle: GroupHandle[Any]
) -> tuple[list[int], list[int], list[int], int, int]:
    """`KVCacheCoordinator.kernel_inputs`'s reading, with the token held."""
    if handle.spec.kind == "state":
        raise SpecError(
            f"group {handle.name!r} holds one state per request: it has no positions "
            "for the attention kernels"
        )
    return core._kernel_view(request_id, handle.index)


def _step_views(
    core: CoordinatorCore, g: int, request_ids: Sequence[str]
) -> list[tuple[tuple[int, ...], int, int]]:
    """Per request, its table in group ``g``, its positions and its latest step's (read with
    the token held)."""
    out = []
    table = core.table
    for request_id in request_ids:
        o = core.offset(request_id)
        out.append((tuple(table.table(o, g)), table.rows(o, g), table.field(o, g, STEP)))
    return out


def _check_priority(priority: object) -> None:
    if type(priority) is not int:
        raise UnitTypeError(
            f"priority is a plain int (a larger value is preempted first), got "
            f"{describe(priority)}",
            field="priority",
            expected="int",
            got=describe(priority),
        )


def _length_in(handle: GroupHandle[Any], rows: int) -> Any:
    """A group's positions so far (kernel unit) in its handle's unit: whole pooled blocks held
    (slots, rounding up) for a pooled handle, else exact."""
    if handle.unit is PooledBlocks:
        return handle.unit(-(-rows // handle.spec.pool.tokens_per_block))
    return handle.unit(rows)


def _content_block_size(spec: ManagerSpec[Any]) -> BlockSize[Any]:
    """Positions of content per cache block of a group: ``block_size × P`` encoder tokens for a
    pooled group (`kvunits.contracts.expand_block_size`), ``block_size`` tokens otherwise."""
    if spec.slot_unit is PooledBlocks:
        return expand_block_size(spec.block_size, spec.pool)
    return spec.block_size


def check_pool_size(n: object, field: str) -> int:
    """A pool's size as the plain int of its blocks; a count of another meaning (pages held,
    a request's cap) refused by name, as a bare int is."""
    if type(n) is PoolBlocks:
        return magnitude(n)
    what = f"{n!r}, {n.meaning}" if isinstance(n, IntQuantity) else describe(n)
    raise UnitTypeError(
        f"{field} is a pool's size, PoolBlocks (its blocks, the null block included), got "
        f"{what}: write PoolBlocks(n), or pass the capacity plan's num_blocks",
        field=field,
        expected="PoolBlocks",
        got=describe(n),
    )


def _policy_of(admission: object, reserve: object) -> AdmissionPolicy:
    """The coordinator's policy from its ``admission`` or its older ``reserve`` argument."""
    if admission is not None and reserve is not None:
        raise SpecError(
            "give one of admission (an AdmissionPolicy) and reserve (its older spelling: True "
            "is admission='reserve', False 'on_demand')"
        )
    if admission is None:
        if reserve is None or reserve is True:
            return AdmissionPolicy()
        if reserve is False:
            return AdmissionPolicy(kind="on_demand")
        raise SpecError(f"reserve is True or False, got {describe(reserve)}")
    if type(admission) is not AdmissionPolicy:
        raise SpecError(
            f"admission is an AdmissionPolicy (kvunits.runtime.AdmissionPolicy(kind=...)), got "
            f"{describe(admission)}"
        )
    return admission


def _wait(names: Sequence[str], short: Sequence[int], what: str) -> Wait:
    """The `Wait` answer of a shortfall per group (cache blocks; 0: the group fits)."""
    shortfall = {names[g]: CacheBlocks(n) for g, n in enumerate(short) if n > 0}
    reason = (
        f"{what} is short of "
        + ", ".join(f"{n} in group {name!r}" for name, n in shortfall.items())
        + " now; wait for requests to finish, or preempt"
    )
    return Wait(shortfall, reason)
