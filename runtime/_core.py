"""The untyped inner core of the coordinator: plain ints, no unit objects, no checks of units.

`kvunits.runtime.coordinator.KVCacheCoordinator` checks units once at its entry and delegates here;
the allocator benchmark runs the same trace through both to price that check. Groups are
addressed by index. A step counts *positions* in each group's kernel unit (encoder tokens for
a pooled group, tokens otherwise); the core turns them into slots with the formulas of
`kvunits.contracts.crossing` (a pooled step may continue a partial slot), and limits, caps and
eviction work in slots; block counts are in cache blocks.

Every call is atomic whatever interrupts it, and one call at a time holds the core
(`kvunits.runtime._guard`): a call checks and plans before it changes anything, then makes all
its changes in one commit. Requests live in flat arrays (`kvunits.runtime._table`). A step that
needs neither the pools nor another block, most decode steps, runs a function written out for
the coordinator's groups (`kvunits.runtime._fast`); every other step takes the general path
here, `CoordinatorCore._plan_step`, which the fast functions are tested against call by call.
"""

from __future__ import annotations

import copy
import reprlib
from array import array
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from itertools import compress, repeat
from math import lcm
from operator import setitem
from typing import Any, Final, NamedTuple, TypeVar, overload

from kvunits.contracts import CacheBlocks, PooledBlocks
from kvunits.contracts.errors import AllocationError, ConcurrentUseError, RequestError

from ._guard import Guard, Ops, commit, ops_of
from ._table import (
    ANCHOR,
    BASE,
    CAPACITY,
    COLD,
    EVICT,
    HOT,
    LENGTH,
    MAXLEN,
    SKIPPED,
    SLACK,
    START,
    STEP,
    RequestTable,
    SlabPlan,
    due,
    grown,
)
from .admission import AdmissionLedger
from .block_pool import (
    NULL_BLOCK,
    BlockPool,
    CacheMap,
    HeldBlocks,
    PoolPlan,
    flag_op,
    holders,
    key_ops,
    lists_ops,
)
from .managers import SingleTypeManager
from .prefix_cache import (
    CACHEABLE_KINDS,
    GroupCache,
    PrefixPart,
    chain_hashes,
    longest_common_hit,
)

_T = TypeVar("_T")

#: No blocks (a window that drops none, or dropped them as a run); never written to.
_NO_BLOCKS: Final[array[int]] = array("i")

#: The longest request id accepted (characters).
MAX_REQUEST_ID_CHARS: Final = 256


def check_request_id(request_id: object) -> None:
    """Raise `RequestError` unless ``request_id`` is a str of 1 .. `MAX_REQUEST_ID_CHARS`
    characters (ids key dicts and appear in every message: no bytes, ints, None, lists)."""
    if type(request_id) is str and 0 < len(request_id) <= MAX_REQUEST_ID_CHARS:
        return
    if type(request_id) is not str:
        shown = reprlib.repr(request_id)  # bounded, whatever the object
        problem = f"a request id is a str, got {shown} ({type(request_id).__name__})"
        if isinstance(request_id, bytes):
            problem += "; decode it first"
    else:
        problem = (
            "a request id must not be empty"
            if not request_id
            else f"a request id is at most {MAX_REQUEST_ID_CHARS} characters long, got "
            f"{len(request_id)}"
        )
        shown = repr(request_id[:80])
    raise RequestError(problem, request_id=shown)


#: What the generated crossing of a drafting step with content returns where it does not plan
#: the call (`CoordinatorCore.advance_speculative_content`): its caller then does, the token
#: still held.
DECLINED: Final = object()

#: The sequences a call's counts and contents come as (others: its general path decides).
_SEQUENCES: Final = frozenset((tuple, list))

#: Planned keys up to which `CoordinatorCore._emit_boundary` writes each as it comes, not
#: sorted by map first (a request's step plans one or two; a prompt's chunk hundreds).
_FEW_KEYS: Final = 4


class HashStream:
    """A request's content on one sequence at one granularity, hashed as blocks fill: shared
    by every group that caches that sequence in blocks of ``rows_per_block`` positions.

    Attributes:
        axis: the sequence (1: the encoder's, 0: tokens).
        rows_per_block: positions per cache block (kernel unit).
        hashes: the chained hashes of the full blocks so far: the caller's tuple (immutable,
            so kept, not copied: a request costs a reference) until content adds some
            (`more_hashes`), a list of its own from then.
        tail: the keys after the last full block (fewer than ``rows_per_block``), an int64
            array made of the ints or int64 bytes given (a resting request's copy).
        parent: the hash the next full block chains from.
        given: the caller's tuple of tail keys the stream was made of (None: another form):
            while the hashes are still the caller's tuple and the tail as long, no content
            came, so the tail is that tuple's keys, and a resting request keeps the tuple
            (a reference, as of the hashes), not a copy.
        part: the caller's `PrefixPart` the stream was made of (None: another form); a
            request of one group whose stream is still that part's keeps the part itself at
            rest (`RequestExtras.resting`).
    """

    __slots__ = ("axis", "given", "hashes", "parent", "part", "rows_per_block", "tail")

    def __init__(
        self,
        axis: int,
        rows_per_block: int,
        hashes: tuple[bytes, ...] | list[bytes],
        tail: Sequence[int] | bytes,
        parent: bytes,
        part: PrefixPart | None = None,
    ) -> None:
        self.axis = axis
        self.rows_per_block = rows_per_block
        self.hashes = hashes
        self.tail = array("q", tail)
        self.parent = parent
        self.given = tail if type(tail) is tuple else None
        self.part = part if type(part) is PrefixPart else None


def more_hashes(stream: HashStream, new: list[bytes]) -> tuple[Any, ...]:
    """The operation that appends ``new`` to a stream's hashes: an extend once they are the
    stream's own list, else a list of its own made (once: the caller's tuple is kept until
    then). One per stream per call: it is planned from the hashes as they are."""
    hashes = stream.hashes
    if type(hashes) is list:
        return (hashes.extend, new)
    return (setattr, stream, "hashes", [*hashes, *new])


class RequestExtras:
    """What a request admitted with content keeps: its hash streams and what it registered.

    Attributes:
        streams: its `HashStream` objects (one per sequence and granularity), a tuple.
        stream_of: per group, the index of its stream (-1: no content there); a tuple the
            core shares between requests of one shape (`CoordinatorCore._shapes`).
        registered: per group, leading table entries already in the prefix cache (hit,
            registered, or passed over because no aligned hit can use them).
    """

    __slots__ = ("registered", "stream_of", "streams")

    def __init__(
        self, streams: tuple[HashStream, ...], stream_of: tuple[int, ...], registered: list[int]
    ) -> None:
        self.streams = streams
        self.stream_of = stream_of
        self.registered = registered

    def pending(self) -> bool:
        """Whether some group knows hashes beyond what it registered (a step may commit
        them)."""
        streams = self.streams
        for s, r in zip(self.stream_of, self.registered, strict=True):
            if s >= 0 and len(streams[s].hashes) > r:
                return True
        return False

    def has_streams(self) -> bool:
        """Whether it holds content in some group."""
        return bool(self.streams)

    def resting(self, registered: Sequence[int]) -> RestingExtras | PrefixPart:
        """Its resting form, its groups having registered ``registered`` (nothing pending
        then: a caller's check): the caller's `PrefixPart` itself where a request of one
        group still holds exactly that part's content, every full block registered (no
        object of its own: a text model's common case), else a
        `RestingExtras`. Each tail is kept as it is now (`_kept_tail`)."""
        streams = self.streams
        if len(streams) == 1:  # one sequence, one granularity: the common case, no loop
            one = streams[0]
            part = one.part
            if (
                part is not None
                and self.stream_of == ONE_GROUP  # (one group: one registered count)
                and one.hashes is part.hashes
                and registered[0] == len(part.hashes)
                and len(one.tail) == len(part.tail)
                and one.parent is part.parent
            ):
                return part
            return RestingExtras(
                (self.stream_of, *registered, one.hashes, _kept_tail(one), one.parent)
            )
        flat: list[Any] = [self.stream_of, *registered]
        for stream in streams:
            flat += (stream.hashes, _kept_tail(stream), stream.parent)
        return RestingExtras(flat)


def _kept_tail(stream: HashStream) -> tuple[int, ...] | bytes:
    """A stream's tail keys as they are now, to keep at rest (the stream's own array may
    change once they are stored): the caller's tuple they were made of where no content
    came since (`HashStream.given`: a reference), else a copy as their int64s' bytes (8
    byte a key in one object, where a tuple's keys are an int object each: a token id past
    256 costs 36 byte, most of a resting request's memory when its prompt ends within a
    block). `HashStream` makes its array of either."""
    tail, given = stream.tail, stream.given
    if not tail:
        return ()
    if given is not None and type(stream.hashes) is tuple and len(given) == len(tail):
        return given
    return tail.tobytes()


#: The `RequestExtras.stream_of` of a request of one group with content (every core's, from
#: `CoordinatorCore._shapes`): the shape a resting `PrefixPart` stands for.
ONE_GROUP: Final[tuple[int, ...]] = (0,)


def awake(
    extra: RestingExtras | PrefixPart, axis: Sequence[int], rows_per_block: Sequence[int]
) -> RequestExtras:
    """The `RequestExtras` a resting form stands for (``axis``, ``rows_per_block``: per
    group), made anew for a call that adds content: a `RestingExtras`' (its `active`), or a
    `PrefixPart`'s, the resting form of a request of one group holding that part's content,
    every full block registered (`RequestExtras.resting`)."""
    if type(extra) is RestingExtras:
        return extra.active(axis, rows_per_block)
    part: PrefixPart = extra  # type: ignore[assignment]  # (the other form)
    one = HashStream(axis[0], rows_per_block[0], part.hashes, part.tail, part.parent, part)
    return RequestExtras((one,), ONE_GROUP, [len(part.hashes)])


class RestingExtras(tuple[Any, ...]):
    """What a request keeps of its content while no group has hashes left to register (a
    prompt computed, no content added since): one flat tuple, its shared ``stream_of``, its
    registered entries per group, then per stream its hashes, tail keys and parent. The
    common state of a running request costs one object, not five (`RequestExtras`, its
    registered list and streams, a `HashStream` and a tail array per stream). A call that
    adds content plans on a `RequestExtras` made from it (`CoordinatorCore._active`) and
    stores that with its other changes, at its commit (the generated paths leave such a
    call to the core's); the views read both forms alike."""

    __slots__ = ()

    def pending(self) -> bool:
        """Never: a request rests only with nothing to register."""
        return False

    @property
    def stream_of(self) -> tuple[int, ...]:
        """Per group, the index of its stream (-1: none)."""
        shape: tuple[int, ...] = self[0]
        return shape

    @property
    def registered(self) -> list[int]:
        """Per group, leading table entries in the prefix cache."""
        return list(self[1 : 1 + len(self[0])])

    def has_streams(self) -> bool:
        """Whether it holds content in some group."""
        return len(self) > 1 + len(self[0])

    def hashes(self, s: int) -> tuple[bytes, ...] | list[bytes]:
        """The hashes of stream ``s``."""
        hashes: tuple[bytes, ...] | list[bytes] = self[1 + len(self[0]) + 3 * s]
        return hashes

    def active(self, axis: Sequence[int], rows_per_block: Sequence[int]) -> RequestExtras:
        """The `RequestExtras` it stands for (``axis``, ``rows_per_block``: per group)."""
        shape: tuple[int, ...] = self[0]
        n = len(shape)
        if len(self) == n + 4:  # one stream (one sequence, one granularity): no loop
            g = shape.index(0)
            one = HashStream(axis[g], rows_per_block[g], self[n + 1], self[n + 2], self[n + 3])
            return RequestExtras((one,), shape, list(self[1 : 1 + n]))
        streams = []
        for s in range(max(shape) + 1):
            g = shape.index(s)
            hashes, tail, parent = self[1 + n + 3 * s : 4 + n + 3 * s]
            streams.append(HashStream(axis[g], rows_per_block[g], hashes, tail, parent))
        return RequestExtras(tuple(streams), shape, self.registered)


class Preempted(NamedTuple):
    """A request `CoordinatorCore.step_preempting` ended: its id, its offset (until the
    commit), the positions per group it had computed (kernel unit), and the shortfall that
    made it go."""

    request_id: str
    offset: int
    rows: list[int]
    short: AllocationError


class CoordinatorCore:
    """Block pools, managers and requests of all groups, on plain ints.

    Args:
        names: the groups' names (for messages).
        managers: one manager per group.
        pools: the block pool of each group; one pool object in every entry when the groups
            share one pool.
        ledger: the admission ledger over the same groups.
        max_in_flight_slots: per group, the most slots one step may add (the group's unit).
        max_len_slots: per group, the longest sequence a request may declare (its unit).
        make_fast: builds the core's generated functions (`kvunits.runtime._fast`) from the
            core and the generated source, if known already (a copy's: its original's), given
            by the coordinator so that this module never imports the one that generates them.

    Attributes:
        names: the groups' names, in order.
        pools: the groups' block pools, in order.
        caches: each group's prefix cache (None for a kind no prefix can serve).
        ledger: the admission ledger.
        table: the admitted requests (`kvunits.runtime._table.RequestTable`).
        extras: by offset, what requests admitted with content keep (`RequestExtras`, or
            `RestingExtras` while they have nothing left to register).
        specs: by offset, the speculative positions of a request's latest step, per group.
        guard: the token (`kvunits.runtime._guard.Guard`).
    """

    __slots__ = (
        "_align",
        "_axis",
        "_axis_peers",
        "_batch_caches",
        "_block_size",
        "_caps_by_lengths",
        "_has_rows",
        "_in_flight",
        "_keeps",
        "_lean_axes",
        "_lean_pools",
        "_limit",
        "_make_fast",
        "_managers",
        "_one_pool",
        "_pool",
        "_shapes",
        "_swa_mask",
        "caches",
        "extras",
        "fast",
        "guard",
        "ledger",
        "names",
        "pools",
        "specs",
        "table",
    )

    def __init__(
        self,
        names: Sequence[str],
        managers: Sequence[SingleTypeManager],
        pools: Sequence[BlockPool],
        ledger: AdmissionLedger,
        max_in_flight_slots: Sequence[int],
        max_len_slots: Sequence[int],
        *,
        make_fast: Callable[[CoordinatorCore, str | None], FastFunctions],
    ) -> None:
        self.names = tuple(names)
        self._managers = tuple(managers)
        self.pools = tuple(pools)
        self.ledger = ledger
        self._in_flight = tuple(max_in_flight_slots)
        self._limit = tuple(max_len_slots)
        self._block_size = tuple(m.block_size_slots for m in managers)
        self._has_rows = tuple(m.has_slot_rows for m in managers)
        self._pool = tuple(m.spec.pool.tokens_per_block for m in managers)
        self._axis = tuple(int(m.spec.slot_unit is PooledBlocks) for m in managers)
        # Per group, the other groups that read its sequence (`extend_content`'s check that
        # content extends one stream).
        self._axis_peers = tuple(
            tuple(h for h in range(len(managers)) if h != g and self._axis[h] == self._axis[g])
            for g in range(len(managers))
        )
        distinct = {id(p) for p in pools}
        self._one_pool = self.pools[0] if len(distinct) == 1 and len(pools) > 1 else None
        self.caches = tuple(
            GroupCache(m.spec, p) if m.kind in CACHEABLE_KINDS else None
            for m, p in zip(managers, pools, strict=True)
        )
        # Whether a group's requests keep every block until they end (no window or chunk ever
        # evicts one within the group's limit): only there is a shared block reserved once.
        self._keeps = tuple(
            m.skipped_blocks(limit) == 0 for m, limit in zip(managers, max_len_slots, strict=True)
        )
        # Per group, the positions a prefix hit of its sequence is a multiple of: the least
        # common multiple of the cacheable groups' blocks there (vLLM's alignment tokens).
        rows = [m.block_size_slots * p for m, p in zip(managers, self._pool, strict=True)]
        self._align = tuple(
            lcm(
                1,
                *(
                    rows[h]
                    for h, c in enumerate(self.caches)
                    if c is not None and self._axis[h] == self._axis[g]
                ),
            )
            for g in range(len(managers))
        )
        self._swa_mask = tuple(
            self._window_mask(g) if self.caches[g] is not None else None
            for g in range(len(managers))
        )
        wide = any(
            limit * p >= 2**31 - 1 for limit, p in zip(max_len_slots, self._pool, strict=True)
        )
        self.table = RequestTable(len(self.names), wide=wide)
        # A new request's offset is one of a pool's id objects (the largest pool's).
        self.table.offset_ints = max(
            (p._ids for p in self.pools if type(p._ids) is tuple), key=len, default=()
        )
        self.extras: dict[int, RequestExtras | RestingExtras | PrefixPart] = {}
        # The requests' `RequestExtras.stream_of`, one tuple per shape (a few per layout):
        # `ONE_GROUP`, the shape a resting `PrefixPart` stands for, among them.
        self._shapes: dict[tuple[int, ...], tuple[int, ...]] = {ONE_GROUP: ONE_GROUP}
        # `_lean_prefix`'s layout: each sequence's groups, and each pool's.
        axes: dict[int, list[int]] = {}
        for g in range(len(managers)):
            axes.setdefault(self._axis[g], []).append(g)
        self._lean_axes = tuple(tuple(members) for members in axes.values())
        self._lean_pools = tuple(
            tuple(g for g, p in enumerate(self.pools) if p is pool)
            for pool in {id(p): p for p in self.pools}.values()
        )
        # The lean admission's caps per lengths (`kvunits.runtime._fast`): a few per service,
        # emptied with the last request, as everything else a request leaves.
        self._caps_by_lengths: dict[tuple[int, ...], tuple[int, ...]] = {}
        self.specs: dict[int, tuple[int, ...]] = {}
        # The caches of the fast functions' batches with content (`_fast`: the last batch
        # classified, ``kept``, and per batch shape ``cuts`` and ``chunks``), emptied with the
        # last request: they hold that batch's extras and a slice a request.
        self._batch_caches: tuple[list[Any], dict[Any, Any], dict[Any, Any]] = ([], {}, {})
        self.guard = Guard()
        self._make_fast = make_fast
        self.fast = make_fast(self, None)

    # -- the typed layer's entries ------------------------------------------------------------

    @property
    def step_function(self) -> StepFn:
        """``step(request_id, num_new) -> slot mappings``: the step without lookahead, chosen
        for these groups at construction (`kvunits.runtime._fast`); the typed
        `kvunits.runtime.Stepper.allocate` calls it after its unit checks."""
        return self.fast.step

    @property
    def requests(self) -> Mapping[str, RequestView]:
        """The admitted requests by id, as live read-only views (for inspection and tests;
        not for use while another thread drives the core)."""
        return _Requests(self)

    # -- admission ------------------------------------------------------------------------

    def admit(
        self,
        request_id: str,
        max_len_slots: Sequence[int | None] | None = None,
        also: Ops | None = None,
        check: Callable[[str, list[int]], None] | None = None,
    ) -> None:
        """Admit a request; ``max_len_slots`` per group, in its unit (None: the group's limit);
        ``also``: more operations, committed with the admission (a policy's bookkeeping);
        ``check``: a policy's own refusal, given the id and lengths, run with the core held.

        Raises:
            RequestError: the id is not a str of 1 .. `MAX_REQUEST_ID_CHARS` characters, or is
                already admitted.
            AdmissionError: it can never fit (nothing changes).
            AllocationError: it cannot be reserved now (nothing changes).
            ConcurrentUseError: another call is in progress (nothing changes).
        """
        # Its common case (nothing more to commit, no policy's check) stores on one line
        # (the generated ``admit``, as the typed entry takes it); False where this decides.
        if also is None and check is None and self.fast.admit(
            request_id, (None,) * len(self.names) if max_len_slots is None else max_len_slots
        ):
            return
        me: list[object] = []
        guard = self.guard
        try:
            if guard.claim(0, me) is not me:
                guard.contend(me, self._concurrent, "admit")
            check_request_id(request_id)
            table = self.table
            if request_id in table.offsets:
                raise self._admitted(request_id)
            lengths = list(self._limit)
            if max_len_slots is not None:
                for g, length in enumerate(max_len_slots):
                    if length is not None:
                        lengths[g] = length
            caps = self.ledger.caps(request_id, lengths)
            if check is not None:
                check(request_id, lengths)
            ops: Ops = []
            self.ledger.take_ops(ops, request_id, caps)
            self._new_request(ops, request_id, lengths, [0] * len(self.names), ())
            if also:
                ops.extend(also)
            commit(ops_of(ops)); del guard.owner[0]  # noqa: E702 - the commit: one line (_guard)
        except BaseException:
            guard.drop(me)
            raise

    def _new_request(
        self,
        ops: Ops,
        request_id: str,
        lengths: Sequence[int],
        rows: Sequence[int],
        tables: Sequence[Sequence[int]],
        content: Sequence[int] = (),
    ) -> int:
        """Plan a new request's fields (and its tables after a prefix hit, placed with room
        for the entries of its ``content``, per group in the kernel unit: its first steps
        fill them in place, as a request without a hit gets its prompt's entries exactly);
        its offset."""
        table = self.table
        o = table.claim_ops(ops)
        slabs = SlabPlan(ops)
        for g in range(len(self.names)):
            # SLACK and EVICT 0: the first step takes the general path (it takes blocks).
            fields = [0] * (HOT + COLD)
            fields[ANCHOR], fields[MAXLEN] = rows[g], lengths[g]
            hit = tables[g] if tables else ()
            if hit:
                skipped = 0
                while skipped < len(hit) and hit[skipped] == NULL_BLOCK:
                    skipped += 1
                assert NULL_BLOCK not in hit[skipped:], hit  # the evicted entries lead
                fields[SKIPPED] = skipped
                p = self._pool[g]
                slots = min(-(-content[g] // p), lengths[g])
                room = self._managers[g].table_length(slots) - skipped
                table.segment_ops(slabs, g, 0, list(hit[skipped:]), fields, room)
            table.write_ops(ops, o, g, fields)
        ops.append((setitem, table.offsets, request_id, o))
        slabs.emit(table)
        return o

    def admit_with_prefix(
        self,
        request_id: str,
        max_len_slots: Sequence[int | None],
        prefix: Mapping[int, PrefixPart | None],
        also: Ops | None = None,
        check: Callable[[str, list[int]], None] | None = None,
    ) -> list[int]:
        """Admit a request whose leading positions may be in the prefix cache, and adopt them
        (``also``: as `admit`).

        Args:
            request_id: the new request.
            max_len_slots: per group, its longest sequence in the group's unit (None: the
                group's limit).
            prefix: by group index, for the groups the caller binds: the request's content
                there (`prefix_cache.PrefixPart`: its block hashes at the group's granularity,
                its length in the kernel unit), or None (no content, so no hit). A group
                not in it takes no part.

        Returns:
            Per group, the positions found in the cache (kernel unit, whole blocks): the
            request starts there, its first step computes the rest.

        The hit of groups of one sequence is one (`prefix_cache.longest_common_hit`); a state
        group, or a bound group given no content, makes its sequence's hit 0. Hit blocks gain
        a reference; the admission reserves the request's caps less the hit blocks another
        request already holds in groups that keep their blocks (reserved once, by both).

        Raises:
            RequestError: a bad or admitted id, content longer than the declared length,
                hashes for a group no prefix can serve, or groups of one sequence given
                content of different lengths.
            AdmissionError, AllocationError: as `admit` (nothing changes).
        """
        # Its common case written out for the layout (`_fast`: None where it declines, having
        # changed nothing), else planned; on one line: an interrupt after its commit comes
        # after the call.
        lean, args = self.fast.admit_prefix, (request_id, max_len_slots, prefix, also, check)
        return (lean is not None and lean(*args)) or self._admit_with_prefix(*args)

    def _admit_with_prefix(
        self,
        request_id: str,
        max_len_slots: Sequence[int | None],
        prefix: Mapping[int, PrefixPart | None],
        also: Ops | None,
        check: Callable[[str, list[int]], None] | None,
    ) -> list[int]:
        """`admit_with_prefix` planned: `_lean_prefix` where it plans it, else in full."""
        me: list[object] = []
        guard = self.guard
        try:
            if guard.claim(0, me) is not me:
                guard.contend(me, self._concurrent, "admit")
            check_request_id(request_id)
            if request_id in self.table.offsets:
                raise self._admitted(request_id)
            n = len(self.names)
            if len(max_len_slots) != n:
                raise self._arity(request_id, len(max_len_slots))
            lengths = [
                self._limit[g] if length is None else length
                for g, length in enumerate(max_len_slots)
            ]
            # Its common case planned in passes over the hit blocks (`_lean_prefix`), else the
            # general plan; on one line: an interrupt after its commit comes after the call.
            args = (request_id, lengths, prefix, also, check)
            return self._lean_prefix(*args) or self._general_prefix(*args)
        except BaseException:
            guard.drop(me)
            raise

    def _general_prefix(
        self,
        request_id: str,
        lengths: list[int],
        prefix: Mapping[int, PrefixPart | None],
        also: Ops | None,
        check: Callable[[str, list[int]], None] | None,
    ) -> list[int]:
        """`admit_with_prefix` planned in full (the token held, the id and arity checked)."""
        n = len(self.names)
        pre: Ops = []
        for pool in self._unique_pools():
            pool.compact_ops(pre)
        if pre:
            commit(ops_of(pre))  # drops stale queue entries only: nothing observable
        hits, tables = self._lookup(request_id, lengths, prefix)
        caps = self.ledger.caps(request_id, lengths)
        if check is not None:
            check(request_id, lengths)
        pools: dict[int, PoolPlan] = {}
        discount = [0] * n
        for g, found in enumerate(tables):
            plan = self._plan_of(pools, g)
            for block in found:
                # A hit block another request holds is reserved once, where kept.
                if block != NULL_BLOCK and plan.touch(block) and self._keeps[g]:
                    discount[g] += 1
        ops: Ops = []
        self.ledger.take_ops(ops, request_id, caps, discount)
        content = [0 if part is None else part.rows for part in map(prefix.get, range(n))]
        o = self._new_request(ops, request_id, lengths, hits, tables, content)
        ops.append((setitem, self.extras, o, self._extras_of(prefix, tables)))
        for g, part in prefix.items():
            cache = self.caches[g]
            if part is not None and cache is not None:
                ops.append((setattr, cache, "requests", cache.requests + 1))
                ops.append((setattr, cache, "queried", cache.queried + part.rows))
                ops.append((setattr, cache, "hits", cache.hits + hits[g]))
        for plan in pools.values():
            plan.emit(ops)
        if also:
            ops.extend(also)
        commit(ops_of(ops)); del self.guard.owner[0]; return hits  # noqa: E702 - the commit: one line (_guard)

    def _extras_of(
        self, prefix: Mapping[int, PrefixPart | None], tables: Sequence[Sequence[int]]
    ) -> RequestExtras | RestingExtras | PrefixPart:
        """What a request admitted with ``prefix`` keeps (its hit ``tables`` registered): one
        `HashStream` per sequence and granularity, resting where nothing is left to
        register."""
        n = len(self.names)
        streams: dict[tuple[int, int], int] = {}
        made: list[HashStream] = []
        stream_of, registered = [-1] * n, [0] * n
        for g in sorted(prefix):  # (in group order, whatever order the handles were bound in)
            part, cache = prefix[g], self.caches[g]
            if part is None or cache is None:
                continue
            key = (self._axis[g], cache.rows_per_block)
            if key not in streams:
                streams[key] = len(made)
                made.append(HashStream(*key, part.hashes, part.tail, part.parent, part))
            stream_of[g] = streams[key]
            registered[g] = len(tables[g])
        shape = tuple(stream_of)
        shape = self._shapes.setdefault(shape, shape)
        extra = RequestExtras(tuple(made), shape, registered)
        return extra if extra.pending() else extra.resting(registered)

    def _lean_prefix(
        self,
        request_id: str,
        lengths: list[int],
        prefix: Mapping[int, PrefixPart | None],
        also: Ops | None,
        check: Callable[[str, list[int]], None] | None,
    ) -> list[int] | None:
        """`admit_with_prefix` (the token held, the id and arity checked) of a request giving
        content to every group, each cacheable: its hit looked up as
        `_lookup` does, the hit blocks touched per pool in passes over them (as
        `PoolPlan.touch` touches each: another table's one reference more, a free cached one
        taken back out of the queue), its fields and segments written as `_new_request`
        writes them (`_lean_fields`), its extras by `_extras_of`, in one commit; the hits.

        None, having changed nothing, where the general path decides: a group without
        content or cache, content longer than a group's length or of two lengths on one
        sequence, a pool whose queue is due a compaction (`BlockPool.compact_ops`) or whose
        ids the plan's emit would drop (`PoolPlan.emit`: every block free), a hit holding a
        block twice; the queue's taken entries are dropped as that emit drops them. Raises
        as the general path does (caps, the check, the reservation)."""
        n = len(self.names)
        if len(prefix) != n or None in self.caches:
            return None
        given = list(map(prefix.get, range(n)))
        if None in given:
            return None
        caches: tuple[GroupCache, ...] = self.caches  # type: ignore[assignment]  # (no None)
        parts: list[PrefixPart] = given  # type: ignore[assignment]  # (no None)
        hits: list[int] = [0] * n
        tables: list[Sequence[int]] = [()] * n
        for members in self._lean_axes:
            rows = parts[members[0]].rows
            for g in members:
                if parts[g].rows != rows or rows > lengths[g] * self._pool[g]:
                    return None
            hit, held = longest_common_hit(
                [caches[g] for g in members],
                [parts[g].hashes for g in members],
                max(rows - 1, 0),  # the last position is always computed (its output)
            )
            for g, table in zip(members, held, strict=True):
                hits[g], tables[g] = hit, table
        key = tuple(lengths)
        caps = self._caps_by_lengths.get(key)
        if caps is None:
            caps = tuple(self.ledger.caps(request_id, lengths))  # raises as the general path
            if len(self._caps_by_lengths) < 256:
                self._caps_by_lengths[key] = caps
        if check is not None:
            check(request_id, lengths)
        ops: Ops = []
        discount = [0] * n
        lives: list[Sequence[int]] = list(tables)  # the hit blocks (evicted ones dropped)
        for groups in self._lean_pools:
            pool = self.pools[groups[0]]
            if pool.compaction_due():
                return None
            shared, flags, stale = pool._shared, pool._free_cached, pool._stale
            taken: list[int] = []
            for g in groups:
                found: Sequence[int] = tables[g]
                if not found:
                    continue
                if found[0] == NULL_BLOCK:  # a window's evicted entries lead
                    found = lives[g] = [b for b in found if b != NULL_BLOCK]
                # Free and cached: taken back out.
                back = set(compress(found, map(flags.__getitem__, found)))
                if len(set(found)) != len(found):
                    return None
                if back:
                    taken += [b for b in found if b in back]
                    found = [b for b in found if b not in back]
                if self._keeps[g]:
                    discount[g] = len(found)
                ops += [(setitem, shared, b, shared.get(b, 1) + 1) for b in found]
            used, head, queue = pool._used + len(taken), pool._head, pool._queue
            if head and (head >= len(queue) or 2 * head >= len(queue) or not used):
                # The entries taken from its front dropped, as the plan's emit drops them.
                ops.append((queue.__delitem__, slice(0, head)))
                ops.append((setattr, pool, "_head", 0))
            if not used and len(pool._iota):
                return None
            if taken:
                ops += [(setitem, stale, b, stale.get(b, 0) + 1) for b in taken]
                ops.append((setattr, pool, "_num_stale", pool._num_stale + len(taken)))
                ops.append((setattr, pool, "_used", used))
                ops.append(flag_op(flags, taken, 0))
        self.ledger.take_ops(ops, request_id, caps, discount)
        o = self._lean_fields(ops, request_id, lengths, hits, tables, lives, parts)
        ops.append((setitem, self.extras, o, self._extras_of(prefix, tables)))
        for cache, part, hit in zip(caches, parts, hits, strict=True):
            ops.append((setattr, cache, "requests", cache.requests + 1))
            ops.append((setattr, cache, "queried", cache.queried + part.rows))
            ops.append((setattr, cache, "hits", cache.hits + hit))
        if also:
            ops.extend(also)
        commit(ops_of(ops)); del self.guard.owner[0]; return hits  # noqa: E702 - the commit: one line (_guard)

    def _lean_fields(
        self,
        ops: Ops,
        request_id: str,
        lengths: Sequence[int],
        hits: Sequence[int],
        tables: Sequence[Sequence[int]],
        lives: Sequence[Sequence[int]],
        parts: Sequence[PrefixPart],
    ) -> int:
        """`_new_request` of `_lean_prefix`'s request (``tables``: its hit tables; ``lives``:
        their blocks, the evicted entries dropped): its fields written at once, each hit a
        segment at its slab's end with room for its content's entries; its offset."""
        table = self.table
        cold: list[int] = []
        for g, live in enumerate(lives):
            if not live:  # no hit, or evicted entries only (a chunked group's): no segment
                cold += (hits[g], 0, 0, len(tables[g]), 0, 0, 0, lengths[g])
                continue
            # (as `_new_request` places it: a first placement of ``len(live)`` entries)
            skipped = len(tables[g]) - len(live)
            slots = min(-(-parts[g].rows // self._pool[g]), lengths[g])
            room = max(self._managers[g].table_length(slots) - skipped, len(live))
            slab = table.slabs[g]
            cold += (hits[g], 0, 0, skipped, len(slab), len(live), room, lengths[g])
            ops.append((slab.extend, array("i", live) + array("i", bytes(4 * (room - len(live))))))
        fields = array(table.st.typecode, cold)
        if table.spare:
            o = table.spare[-1]
            c = table.cold(o)
            ops.append((table.spare.pop,))
            ops.append((setitem, table.hot, slice(o, o + table.hot_width), [0] * table.hot_width))
            ops.append((setitem, table.st, slice(c, c + table.cold_width), fields))
        else:
            o = table.offset_of(len(table.hot))
            ops.append((table.hot.extend, [0] * table.hot_width))
            ops.append((table.st.extend, fields))
        ops.append((setitem, table.offsets, request_id, o))
        return o

    def _lookup(
        self,
        request_id: str,
        lengths: Sequence[int],
        prefix: Mapping[int, PrefixPart | None],
    ) -> tuple[list[int], list[list[int]]]:
        """The hit of every group (kernel unit) and its table prefix; changes nothing."""
        n = len(self.names)
        hits = [0] * n
        tables: list[list[int]] = [[] for _ in range(n)]
        axes: dict[int, list[int]] = {}
        for g, part in sorted(prefix.items()):
            manager = self._managers[g]
            rows = 0 if part is None else part.rows
            if part is not None and self.caches[g] is None:
                raise RequestError(
                    f"request {request_id!r} gives content for group {self.names[g]!r}, a "
                    f"{manager.kind} group, which no prefix can serve (it is written whole, or "
                    "holds one state); give it none",
                    request_id=request_id,
                    group=self.names[g],
                )
            encoder = self._axis[g] == 1
            if part is not None and rows > lengths[g] * self._pool[g]:
                unit = "encoder_token" if encoder else "token"
                raise RequestError(
                    f"request {request_id!r} gives {rows} {unit} of content in group "
                    f"{self.names[g]!r}, beyond its max_len of {lengths[g] * self._pool[g]} "
                    f"{unit}; declare a longer max_len",
                    request_id=request_id,
                    group=self.names[g],
                )
            if manager.kind == "cross_attention":
                continue
            axes.setdefault(self._axis[g], []).append(g)
        for members in axes.values():
            given = [prefix[g] for g in members]
            parts = [p for p in given if p is not None]
            caches = [self.caches[g] for g in members]
            ready = [c for c in caches if c is not None]
            if len(parts) < len(members) or len(ready) < len(members):
                continue  # a member that cannot hit holds its whole sequence to 0
            sizes = {p.rows for p in parts}
            if len(sizes) > 1:
                raise RequestError(
                    f"request {request_id!r}: groups {', '.join(self.names[g] for g in members)} "
                    f"read one sequence but were given content of {sorted(sizes)} positions; "
                    "give them the same content",
                    request_id=request_id,
                )
            (length,) = sizes
            hit, found = longest_common_hit(
                ready,
                [p.hashes for p in parts],
                max(length - 1, 0),  # the last position is always computed (its output)
            )
            for g, table in zip(members, found, strict=True):
                hits[g] = hit
                tables[g] = table
        return hits, tables

    # -- steps ----------------------------------------------------------------------------

    def allocate_step(
        self,
        request_id: str,
        num_new: Sequence[int],
        lookahead: Sequence[int] | None = None,
    ) -> list[list[int]]:
        """Allocate one step of a request in every group, atomically.

        Args:
            request_id: an admitted request.
            num_new: per group, in group order, the positions the step adds in the group's
                kernel unit (encoder tokens for a pooled group; 0: none). A cross attention
                or state group allocates its blocks at the request's first step.
            lookahead: per group, how many of the step's last positions are speculative
                (checked by `allocate_speculative`, the way to give it): they stay
                uncommitted, so not cached, until a later step; `rollback` may remove them.

        Returns:
            Per group, the step's slot mapping (`kvunits.contracts.crossing.step_cache_slots`):
            the cache slot of every slot the step touches, manager units. For a pooled group
            the first may be the partial slot the step continues.

        Raises:
            RequestError: unknown request, a step touching more slots than the group's
                ``max_in_flight``, or ending beyond the request's ``max_len``.
            AllocationError: a group lacks blocks; nothing changed in any group.
            ConcurrentUseError: another call is in progress (nothing changes).
        """
        if lookahead is None:
            return self.fast.step(request_id, num_new)
        return self.allocate_speculative(request_id, num_new, lookahead)

    def advance_step(self, request_id: str, num_new: Sequence[int]) -> None:
        """`allocate_step` without building the slot mapping (read it later, if needed, with
        `slot_mapping`): what a scheduler that leaves slots to its model runner calls."""
        return self.fast.advance(request_id, num_new)

    def advance_content(
        self,
        request_id: str,
        num_new: Sequence[int],
        contents: Sequence[tuple[int, Sequence[int]]],
    ) -> None:
        """`advance_step` then, for each ``(g, keys)`` of ``contents``, `extend_content(
        request_id, g, keys)`, in one call and atomically: a decode step and what its positions
        hold (the sampled token, the audio that came with it; one pair per sequence). If any
        part fails, nothing happens. In the common case (the step within every group's slack,
        no block filled by the content) one set of stores; otherwise one plan: the content's
        hashes, then the step's, which registers the blocks they fill as `extend_content`
        after it would.

        Raises:
            RequestError: as `extend_content` (the content is checked first), or as
                `advance_step`.
            AllocationError: as `advance_step`.
        """
        return self.fast.content(request_id, num_new, contents)

    def advance_content_all(
        self,
        request_ids: Sequence[str],
        num_new: Sequence[int],
        contents: Sequence[tuple[int, Sequence[int]]],
    ) -> None:
        """`advance_content` for every request of ``request_ids`` (an engine step's running
        requests, each once), atomically over the whole batch: if any request's step or content
        fails, nothing changes. ``contents``: per sequence, ``(g, keys)`` with the keys of the
        whole batch in request order, an equal share each (request i's are ``keys[i * k : (i +
        1) * k]``, ``k = len(keys) // len(request_ids)``). The same as `advance_content` of each
        request in turn (`tests/runtime/test_fast_step.py` compares them call by call); the
        requests within their slack whose content fills no block are stores and appends in C,
        the others planned on the same plan, one commit.

        Raises:
            RequestError: a request twice, keys not an equal share per request, or as
                `advance_content` (the first failing request).
            AllocationError: as `advance_content`, counting the batch's steps before it.
        """
        return self.fast.content_all(request_ids, num_new, contents)

    def advance_all(self, request_ids: Sequence[str], num_new: Sequence[int]) -> None:
        """One step of ``num_new`` positions per group for every request of ``request_ids`` (an
        engine step's running requests, each once), atomically over the whole batch: if any
        request's step fails, no request's step is taken.

        Raises:
            RequestError: a request twice, or as `allocate_step` (the first failing request).
            AllocationError: as `allocate_step`, counting the batch's steps before it.
        """
        return self.fast.advance_all(request_ids, num_new)

    def advance_each(self, request_ids: Sequence[str], num_new: Sequence[Sequence[int]]) -> None:
        """One step for every request of ``request_ids`` (an engine step's running requests,
        each once), request i's of ``num_new[i]`` positions per group: an engine step whose
        prefill chunks run beside its decodes, in one call and atomically over the whole
        batch: if any request's step fails, no request's step is taken. The same as
        `advance_step` for each request in turn (the tests compare them call by call).

        Raises:
            RequestError: a request twice, ``num_new`` not one count per group for each
                request, or as `allocate_step` (the first failing request).
            AllocationError: as `allocate_step`, counting the batch's steps before it.
        """
        return self.fast.advance_each(request_ids, num_new)

    def allocate_speculative(
        self, request_id: str, num_new: Sequence[int], lookahead: Sequence[int]
    ) -> list[list[int]]:
        """A step whose last ``lookahead[g]`` positions of ``num_new[g]`` are speculative (a
        drafter's proposals, to be verified): `allocate_step` with them marked, so that
        `rollback` can remove the rejected ones and the prefix cache waits for the rest.

        Raises:
            RequestError: a lookahead is negative or more than the step's positions, or as
                `allocate_step`.
        """
        return self.fast.speculative(request_id, num_new, lookahead)

    def advance_speculative(
        self,
        request_id: str,
        num_new: Sequence[int],
        lookahead: Sequence[int],
        rejected: Sequence[int],
    ) -> None:
        """A speculative decode step in one call: the ``rejected`` drafts of the request's
        latest step rolled back (`rollback`), then a step of ``num_new`` positions whose last
        ``lookahead`` are speculative (`allocate_speculative`, without slot mappings), all
        atomically: if any part fails, neither happens. The same as those two calls in turn
        (`tests/runtime/test_fast_step.py` compares them call by call), in one token claim
        and, in the common case (neither crosses a block), one set of stores.

        Raises:
            RequestError: as `rollback` (checked first), or as `allocate_speculative`.
            AllocationError: as `allocate_speculative`, after the rollback's blocks went back.
        """
        return self.fast.respec(request_id, num_new, lookahead, rejected)

    def advance_speculative_all(
        self,
        request_ids: Sequence[str],
        num_new: Sequence[int],
        lookahead: Sequence[int],
        rejected: Sequence[Sequence[int]],
    ) -> None:
        """`advance_speculative` for every request of ``request_ids`` (an engine step's
        running requests, each once; ``rejected[i]`` is request i's), atomically over the whole
        batch: if any request's rollback or step fails, nothing changes.

        Raises:
            RequestError: a request twice, ``rejected`` not one per request, or as
                `advance_speculative` (the first failing request).
            AllocationError: as `advance_speculative`, counting the batch's steps before it.
        """
        return self.fast.respec_all(request_ids, num_new, lookahead, rejected)

    def advance_speculative_each(
        self,
        request_ids: Sequence[str],
        num_new: Sequence[Sequence[int]],
        lookahead: Sequence[Sequence[int]],
        rejected: Sequence[Sequence[int]],
    ) -> None:
        """`advance_speculative` for every request of ``request_ids`` (an engine step's
        running requests, each once), request i's with its own counts: ``rejected[i]`` of its
        latest step's drafts rolled back, then a step of ``num_new[i]`` positions per group
        whose last ``lookahead[i]`` are drafts. A drafting engine step whose prefill chunks
        run beside its drafting decodes (a chunk's lookahead and rejected counts are zeros),
        in one call and atomically over the whole batch: if any request's rollback or step
        fails, nothing changes. The same as `advance_speculative` of each request in turn
        (`tests/runtime/test_fast_step.py` compares them call by call); each request's
        lookahead is kept, zeros too, as `advance_speculative` keeps it.

        Raises:
            RequestError: a request twice; ``num_new``, ``lookahead`` or ``rejected`` not one
                tuple of one count per group for each request; or as `advance_speculative`
                (the first failing request, in batch order).
            AllocationError: as `advance_speculative`, counting the batch's steps before it.
        """
        return self.fast.respec_each(request_ids, num_new, lookahead, rejected)

    def advance_speculative_content(
        self,
        request_id: str,
        num_new: Sequence[int],
        lookahead: Sequence[int],
        rejected: Sequence[int],
        contents: Sequence[tuple[int, Sequence[int]]],
    ) -> None:
        """`advance_speculative` then, for each ``(g, keys)`` of ``contents``, `extend_content(
        request_id, g, keys)`, in one call and atomically: a drafting scheduler's step with
        prefix caching on, the latest step's rejected drafts rolled back, what that step
        produced appended (its accepted drafts and the token sampled after them, the audio
        that came with them: one pair per sequence), and the next speculative step. If any part
        fails, nothing happens. In the common case (the rollback and the step within every
        group's slack, no block filled by the content) one set of stores; otherwise one plan:
        the content's hashes, the rollback, then the step, which registers the blocks whose
        positions the rollback accepted or the step commits, as `extend_content` after it
        would, in the same call (two calls leave the content's blocks for the next step to
        register).

        Raises:
            RequestError: as `extend_content` (the content is checked first), or as
                `advance_speculative`.
            AllocationError: as `advance_speculative`.
        """
        me: list[object] = []
        guard = self.guard
        try:
            if guard.claim(0, me) is not me:
                guard.contend(me, self._concurrent, "allocate")
            o = self.table.offsets.get(request_id) if type(request_id) is str else None
            if o is None:
                raise self._unknown(request_id)
            given = self._content_streams(o, contents)
            if given is not None:
                extra, picked, adds, fill = given
                ops = self._respec_stores(o, num_new, lookahead, rejected)
                if ops is not None and not fill:
                    ops += zip(repeat(array.extend), [s.tail for s in picked], adds)
                    commit(ops_of(ops)); del guard.owner[0]; return  # noqa: E702 - the commit: one line (_guard)
                # Else the generated plans (each commit and this return on one line: nothing
                # runs after the commit): a block filled within the slacks, filled past one,
                # or a crossing whose appends are committed with it.
                fast = self.fast
                if ops is not None:
                    if fast.respec_fill(me, request_id, o, num_new, lookahead, rejected, extra, picked, adds) is not DECLINED: return  # noqa: E701, E501
                elif not self._spec_counts(num_new, lookahead, rejected):
                    pass  # the core's plan says what is wrong (the crossings read them as given)
                elif fill:
                    if fast.respec_fill_cross(me, request_id, o, num_new, lookahead, rejected, extra, picked, adds) is not DECLINED: return  # noqa: E701, E501
                else:
                    more: Ops = [*zip(repeat(array.extend), [s.tail for s in picked], adds)]
                    if fast.respec_cross(me, request_id, o, num_new, lookahead, rejected, more) is not DECLINED: return  # noqa: E701, E501
            return self._planned_respec_content(
                me, request_id, o, num_new, lookahead, rejected, contents
            )
        except BaseException:
            guard.drop(me)
            raise

    def _content_streams(
        self, o: int, contents: Sequence[tuple[int, Sequence[int]]]
    ) -> tuple[RequestExtras, list[HashStream], list[array[int]], bool] | None:
        """Request ``o``'s content, ``contents``, as the generated plans take it: its
        `RequestExtras`, the stream each pair appends to and the keys, and whether they fill a
        block; None for any other than an active request with nothing left to register and
        content of int64 arrays, a sequence once each (the typed entry's checks,
        `kvunits.runtime._fast.respec_content_lines`)."""
        extra = self.extras.get(o)
        if type(extra) is not RequestExtras or type(contents) not in _SEQUENCES:
            return None
        streams, of = extra.streams, extra.stream_of
        for s, r in zip(of, extra.registered, strict=True):  # `RequestExtras.pending`
            if s >= 0 and len(streams[s].hashes) > r:
                return None
        n, axes = len(self.names), self._axis
        picked: list[HashStream] = []
        adds: list[array[int]] = []
        fill = False
        seen = 0  # the sequences appended to, a bit each
        for pair in contents:
            if type(pair) is not tuple or len(pair) != 2:
                return None
            g, keys = pair
            if type(g) is not int or not 0 <= g < n or of[g] < 0 or type(keys) is not array:
                return None
            axis = axes[g]
            if seen >> axis & 1 or keys.typecode != "q":
                return None
            seen |= 1 << axis
            for stream in streams:
                if stream.axis == axis:
                    fill = fill or len(stream.tail) + len(keys) >= stream.rows_per_block
                    picked.append(stream)
                    adds.append(keys)
        return extra, picked, adds, fill

    def advance_speculative_content_all(
        self,
        request_ids: Sequence[str],
        num_new: Sequence[int],
        lookahead: Sequence[int],
        rejected: Sequence[Sequence[int]],
        contents: Sequence[tuple[int, Sequence[Sequence[int]]]],
    ) -> None:
        """`advance_speculative_content` for every request of ``request_ids`` (an engine
        step's running requests, each once), atomically over the whole batch: if any
        request's rollback, content or step fails, nothing changes. ``rejected[i]``: request
        i's rejected drafts; ``contents``: per sequence, ``(g, keys)`` with one key sequence
        per request, in request order (``keys[i]``: what request i's latest step produced;
        int64 arrays take the generated path). The same as `advance_speculative_content` of
        each request in turn (`tests/runtime/test_fast_step.py` compares them call by call):
        a request within its slacks whose content fills no block is stores and appends; the
        others planned on one plan (`plan_fill`, `plan_cross` with the rollback and the
        lookahead, the core's boundary path for a request whose content rests), one commit.

        Raises:
            RequestError: a request twice, ``rejected`` or a sequence's keys not one per
                request, or as `advance_speculative_content` (the first failing request).
            AllocationError: as `advance_speculative_content`, counting the batch's steps
                before it.
        """
        return self.fast.respec_content_all(request_ids, num_new, lookahead, rejected, contents)

    def _respec_content_planned(
        self,
        ops: Ops,
        plan: _Boundary,
        request_id: str,
        o: int,
        num_new: Sequence[int],
        lookahead: Sequence[int],
        rejected: Sequence[int],
        contents: Sequence[tuple[int, Sequence[int]]],
    ) -> bool:
        """One request of `advance_speculative_content_all` that the generated planners
        leave (its content resting, or registration pending), planned on the batch's ``ops``
        and boundary ``plan`` as `_planned_respec_content` plans it there: its content's
        hashes, then the rollback and the step, which registers what they commit. False where
        the boundary path declines (the batch takes the general path, or compacts the slab
        of ``plan.compact`` first)."""
        hashed, active = self._content_planned(ops, o, self._by_axis(request_id, o, contents))
        back = self._plan_unroll(o, rejected, plan, num_new)
        return back is not None and self._plan_boundary(
            ops, plan, o, num_new, None, lookahead, back,
            rests=active is None, hashed=hashed, active=active,
        )

    def _general_respec_content_all(
        self,
        me: object,
        request_ids: Sequence[str],
        num_new: Sequence[int],
        lookahead: Sequence[int],
        rejected: Sequence[Sequence[int]],
        contents: Sequence[tuple[int, Sequence[Sequence[int]]]],
    ) -> None:
        """`advance_speculative_content_all`'s general path, with the token held (as
        `_general_step`): every request's content, rollback and step planned as
        `_planned_respec_content`'s general path plans them, one after the other on the
        same plans (each sees the blocks the ones before it took), one commit."""
        n, count = len(self.names), len(request_ids)
        first = str(request_ids[0]) if count else "(none)"
        if len(num_new) != n:
            raise self._arity(first, len(num_new))
        if len(rejected) != count:
            raise RequestError(
                f"a batched speculative step gives {len(rejected)} rejected counts for "
                f"{count} requests; give one tuple (one count per group) per request",
                request_id=first,
            )
        self._check_lookahead(first, num_new, lookahead)
        shares = self._respec_shares(first, count, contents)
        offsets = [self._offset(request_id) for request_id in request_ids]
        _check_each_once(request_ids)
        self._compact_due()
        ops: Ops = []
        slabs = SlabPlan(ops)
        pools: dict[int, PoolPlan] = {}
        for i, (request_id, o, r) in enumerate(zip(request_ids, offsets, rejected, strict=True)):
            mine = [(g, keys[i]) for g, keys in shares]
            hashed, active = self._content_planned(ops, o, self._by_axis(request_id, o, mine))
            self._check_rejected(request_id, o, r)
            self._plan_respec(
                ops, slabs, pools, request_id, o, num_new, lookahead, r, hashed, active
            )
        for pool_plan in pools.values():
            pool_plan.emit(ops)
        slabs.emit(self.table)
        commit(ops_of(ops)); del self.guard.owner[0]  # noqa: E702 - the commit: one line (_guard)

    def _respec_shares(
        self, first: str, count: int, contents: object
    ) -> list[tuple[int, Sequence[Sequence[int]]]]:
        """A drafting batch's contents checked: per sequence ``(g, keys)``, one key sequence
        per request."""
        if type(contents) not in _SEQUENCES:
            raise RequestError(
                f"a batched drafting step's content is a list of (group, keys per request) "
                f"pairs, got {reprlib.repr(contents)}",
                request_id=first,
            )
        out = []
        for pair in contents:  # type: ignore[attr-defined]
            if type(pair) is not tuple or len(pair) != 2 or type(pair[0]) is not int:
                raise RequestError(
                    f"a batched drafting step's content is (group, keys per request) pairs, "
                    f"got {reprlib.repr(pair)}",
                    request_id=first,
                )
            g, keys = pair
            if not 0 <= g < len(self.names):
                raise RequestError(
                    f"a batched drafting step's content names group {g}; the groups are 0 .. "
                    f"{len(self.names) - 1}",
                    request_id=first,
                )
            if type(keys) not in _SEQUENCES or len(keys) != count:
                given = len(keys) if type(keys) in _SEQUENCES else reprlib.repr(keys)
                raise RequestError(
                    f"a batched drafting step gives {given} key sequences of group "
                    f"{self.names[g]!r}'s sequence for {count} requests; give one per "
                    "request (what its latest step produced, empty where nothing), in "
                    "request order",
                    request_id=first,
                    group=self.names[g],
                )
            out.append((g, keys))
        return out

    def _spec_counts(
        self, num_new: Sequence[int], lookahead: Sequence[int], rejected: Sequence[int]
    ) -> bool:
        """Whether a drafting step's counts are as the generated plans read them (which check
        what they plan from, not the arguments' form): per group, in a tuple or list, ints,
        ``0 <= lookahead <= num_new`` and ``rejected`` not negative."""
        n = len(self.names)
        for given in (num_new, lookahead, rejected):
            if type(given) not in _SEQUENCES or len(given) != n:
                return False
        for q, k, r in zip(num_new, lookahead, rejected, strict=True):
            if type(q) is not int or type(k) is not int or type(r) is not int:
                return False
            if not 0 <= k <= q or r < 0:
                return False
        return True

    def _respec_stores(
        self, o: int, num_new: Sequence[int], lookahead: Sequence[int], rejected: Sequence[int]
    ) -> Ops | None:
        """`advance_speculative`'s stores where they are all it takes (None for any other):
        every group's rollback and step within its slack, the generated step's rule
        (`kvunits.runtime._fast._fits`): ``0 < q − r <= slack``, ``r`` at most the latest
        lookahead, a fixed table's rollback freeing nothing, and the step's slots within
        ``max_in_flight`` where that is less than a block."""
        n = len(self.names)
        for given in (num_new, lookahead, rejected):
            if type(given) not in _SEQUENCES or len(given) != n:
                return None
        table = self.table
        hot, st, cold = table.hot, table.st, table.cold(o) - HOT
        spec = self.specs.get(o) or (0,) * n
        ops: Ops = []
        for g, (q, k, r, j) in enumerate(zip(num_new, lookahead, rejected, spec, strict=True)):
            if type(q) is not int or type(k) is not int or type(r) is not int:
                return None
            h, c = o + g * HOT, cold + g * COLD
            slack = hot[h]
            if not 0 <= k <= q or not 0 <= r <= j or not 0 < q - r <= slack:
                return None
            manager = self._managers[g]
            if (
                r
                and manager.kind in ("state", "cross_attention")
                and manager.table_length(0) < st[c + SKIPPED] + st[c + LENGTH]
            ):
                return None
            if self._in_flight[g] < self._block_size[g] or not self._has_rows[g]:
                rows, p = st[c + ANCHOR] - slack - r, self._pool[g]
                if -(-(rows + q) // p) - rows // p > self._in_flight[g]:
                    return None
            ops.append((setitem, hot, slice(h, h + HOT), [slack + r - q, q]))
        ops.append((setitem, self.specs, o, tuple(lookahead)))
        return ops

    def _planned_respec_content(
        self,
        me: object,
        request_id: str,
        o: int,
        num_new: Sequence[int],
        lookahead: Sequence[int],
        rejected: Sequence[int],
        contents: Sequence[tuple[int, Sequence[int]]],
    ) -> None:
        """`advance_speculative_content` past its stores, with the token held (as
        `_general_step`): the content planned first (its hashes, given to the step's
        registration), then the rollback and the step on the boundary path's plan
        (`_plan_unroll`, `_plan_boundary`, compacting first where a move would make a slab
        due) or, for any other, the general path's; one commit. The request's content stays
        active (it rests only where a step without content registered all it knew)."""
        content_ops: Ops = []
        hashed, active = self._content_planned(
            content_ops, o, self._by_axis(request_id, o, contents)
        )
        stores = self._respec_stores(o, num_new, lookahead, rejected)
        if stores is not None and active is not None:
            # Every group's rollback and step within its slack (content filled a block, or
            # woke the request): the stores, the content, and the registration of the blocks
            # committed positions fill (as `_plan_boundary` plans a group within its slack).
            ops = content_ops + stores
            plan = _Boundary()
            table = self.table
            hot, st, cold = table.hot, table.st, table.cold(o) - HOT
            after = [
                (
                    st[cold + g * COLD + SKIPPED],
                    st[cold + g * COLD + ANCHOR] - hot[o + g * HOT + SLACK] - r + q,
                    NULL_BLOCK,
                )
                for g, (q, r) in enumerate(zip(num_new, rejected, strict=True))
            ]
            if self._register_boundary(ops, plan, o, active, after, lookahead, False, hashed):
                self._emit_boundary(ops, plan)
                commit(ops_of(ops)); del self.guard.owner[0]; return  # noqa: E702 - the commit: one line (_guard)
        n = len(self.names)
        shaped = (
            isinstance(lookahead, tuple | list)
            and len(lookahead) == len(num_new) == n
            and all(
                type(k) is int and type(q) is int and 0 <= k <= q
                for k, q in zip(lookahead, num_new, strict=True)
            )
        )
        compacted: frozenset[int] = frozenset()
        while shaped:
            ops = list(content_ops)
            plan = _Boundary(compacted)
            back = self._plan_unroll(o, rejected, plan, num_new)
            # (Without content, as `advance_speculative`: a request with nothing left to
            # register rests.)
            if back is not None and self._plan_boundary(
                ops, plan, o, num_new, None, lookahead, back,
                rests=active is None, hashed=hashed, active=active,
            ):
                self._emit_boundary(ops, plan)
                commit(ops_of(ops)); del self.guard.owner[0]; return  # noqa: E702 - the commit: one line (_guard)
            if back is None or plan.compact < 0:
                break
            # A segment move that makes its slab due: compacted first (as `_boundary_step`).
            compacted |= {plan.compact}
            pre: Ops = []
            self.table.compact_ops(pre, compacted)
            commit(ops_of(pre))  # moves segments only: nothing observable
        self._check_rejected(request_id, o, rejected)
        if len(num_new) != n:
            raise self._arity(request_id, len(num_new))
        self._check_lookahead(request_id, num_new, lookahead)
        self._compact_due()
        ops = list(content_ops)
        slabs = SlabPlan(ops)
        pools: dict[int, PoolPlan] = {}
        self._plan_respec(
            ops, slabs, pools, request_id, o, num_new, lookahead, rejected, hashed, active
        )
        for pool_plan in pools.values():
            pool_plan.emit(ops)
        slabs.emit(self.table)
        commit(ops_of(ops)); del self.guard.owner[0]  # noqa: E702 - the commit: one line (_guard)

    def _general_step(
        self,
        me: object,
        request_id: str,
        o: int,
        num_new: Sequence[int],
        lookahead: Sequence[int] | None,
        mapping: bool,
    ) -> list[list[int]] | None:
        """The general path of a step, with the token held (by ``me``): plan it, commit it
        and release the token, or raise having changed nothing (the caller's handler then
        releases the token)."""
        n = len(self.names)
        if len(num_new) != n:
            raise self._arity(request_id, len(num_new))
        if lookahead is not None:
            self._check_lookahead(request_id, num_new, lookahead)
        self._compact_due()
        ops: Ops = []
        slabs = SlabPlan(ops)
        pools: dict[int, PoolPlan] = {}
        out = self._plan_step(ops, slabs, pools, request_id, o, num_new, lookahead, mapping)
        for plan in pools.values():
            plan.emit(ops)
        slabs.emit(self.table)
        commit(ops_of(ops)); del self.guard.owner[0]; return out  # noqa: E702 - the commit: one line (_guard)

    def _general_content(
        self,
        me: object,
        request_id: str,
        o: int,
        num_new: Sequence[int],
        contents: Sequence[tuple[int, Sequence[int]]],
    ) -> None:
        """`advance_content`'s general path, with the token held (as `_general_step`): the
        content planned first (its hashes, given to the step's registration), then the step,
        on one plan and one commit. Contents of one sequence are appended in order."""
        n = len(self.names)
        if len(num_new) != n:
            raise self._arity(request_id, len(num_new))
        by_axis = self._by_axis(request_id, o, contents)
        self._compact_due()
        ops: Ops = []
        hashed, active = self._content_planned(ops, o, by_axis)
        slabs = SlabPlan(ops)
        pools: dict[int, PoolPlan] = {}
        self._plan_step(
            ops, slabs, pools, request_id, o, num_new, None, False, None, hashed, active
        )
        for plan in pools.values():
            plan.emit(ops)
        slabs.emit(self.table)
        commit(ops_of(ops)); del self.guard.owner[0]  # noqa: E702 - the commit: one line (_guard)

    def _general_all(
        self,
        me: object,
        request_ids: Sequence[str],
        num_new: Sequence[int],
        fast: list[int],
        slow: list[tuple[str, int]],
    ) -> None:
        """`advance_all`'s general path, with the token held (as `_general_step`): the
        requests of ``fast`` are below their bounds (their rows and steps are written in C),
        those of ``slow`` are planned one after the other on the same plans, so that each
        sees the blocks the ones before it took; none when the fast function gave up early
        (then every request is planned here)."""
        first = request_ids[0] if request_ids else "(none)"
        self._check_counts(first, num_new, "")
        _check_each_once(request_ids)
        self._plan_batch(
            request_ids,
            slow,
            bool(fast or slow),
            lambda _: num_new,
            lambda ops: self._fast_ops(ops, fast, num_new),
        )

    def _general_each(
        self,
        me: object,
        request_ids: Sequence[str],
        num_new: Sequence[Sequence[int]],
        fast: list[int],
        rows: list[tuple[int, ...]],
        slow: list[tuple[str, int]],
    ) -> None:
        """`advance_each`'s general path, with the token held (as `_general_all`): the
        requests of ``fast`` are within their slacks (``rows``, their new hot fields, are
        stored in C), those of ``slow`` are planned one after the other on the same plans,
        each with its own counts; none when the fast function gave up early (then every
        request's counts are checked and every request planned here)."""
        n = len(self.names)
        if type(num_new) is not list and type(num_new) is not tuple:
            raise RequestError(
                f"a batch's counts are given as {type(num_new).__name__}; give a list with "
                "one tuple of counts per request",
                request_id=str(request_ids[0]) if request_ids else "(none)",
            )
        if len(num_new) != len(request_ids):
            raise RequestError(
                f"{len(num_new)} counts for {len(request_ids)} requests; give one tuple of "
                "counts per request, in the order of the requests",
                request_id=str(request_ids[0]) if request_ids else "(none)",
            )
        # In batch order, as the fast pass reads them: each request known, then its counts;
        # a request given twice after.
        counts: dict[str, Sequence[int]] = {}
        for request_id, given in zip(request_ids, num_new, strict=True):
            self._offset(request_id)
            if type(given) is not list and type(given) is not tuple:
                raise RequestError(
                    f"request {request_id!r}'s counts are {type(given).__name__}; give a "
                    f"tuple of {n} counts, one per group ({', '.join(self.names)})",
                    request_id=str(request_id),
                )
            self._check_counts(request_id, given, f" to request {request_id!r}")
            counts[request_id] = given
        _check_each_once(request_ids)
        hot, width = self.table.hot, n * HOT
        stores = (commit, map(setitem, repeat(hot), [slice(o, o + width) for o in fast], rows))
        self._plan_batch(
            request_ids, slow, bool(fast or slow), counts.__getitem__, lambda o: o.append(stores)
        )

    def _check_counts(self, request_id: str, given: Sequence[int], whose: str) -> None:
        """Raise `RequestError` unless a batched step's ``given`` counts (``whose``: the
        request they are for, in the message) are one int of 0 or more per group."""
        if len(given) != len(self.names):
            raise self._arity(request_id, len(given))
        for g, q in enumerate(given):
            if type(q) is not int or q < 0:
                raise RequestError(
                    f"a batched step adds {q!r} positions{whose} in group {self.names[g]!r}; "
                    "give a count of 0 or more",
                    request_id=str(request_id),
                    group=self.names[g],
                )

    def _plan_batch(
        self,
        request_ids: Sequence[str],
        slow: list[tuple[str, int]],
        boundary: bool,
        counts: Callable[[str], Sequence[int]],
        fast_ops: Callable[[Ops], None],
    ) -> None:
        """A checked batch's commit: the requests of ``slow`` (each with ``counts(its id)``)
        planned one after the other on the same plans (with ``boundary``, on one boundary
        plan first, `_batch_boundary`), every request when the fast function gave up early
        (``slow`` empty, no ``boundary``); ``fast_ops`` adds the stores of the requests
        within their slacks."""
        if not boundary:
            slow = [(request_id, self._offset(request_id)) for request_id in request_ids]
        else:
            planned = self._batch_boundary([(o, counts(request_id)) for request_id, o in slow])
            if planned is not None:
                fast_ops(planned)
                commit(ops_of(planned)); del self.guard.owner[0]; return  # noqa: E702 - the commit: one line (_guard)
        self._compact_due()
        ops: Ops = []
        slabs = SlabPlan(ops)
        pools: dict[int, PoolPlan] = {}
        for request_id, o in slow:
            self._plan_step(ops, slabs, pools, request_id, o, counts(request_id), None, False)
        fast_ops(ops)
        for pool_plan in pools.values():
            pool_plan.emit(ops)
        slabs.emit(self.table)
        commit(ops_of(ops)); del self.guard.owner[0]  # noqa: E702 - the commit: one line (_guard)

    def _batch_boundary(self, slow: list[tuple[int, Sequence[int]]]) -> Ops | None:
        """A batch's requests past their slacks (``slow``: offsets and counts, in batch
        order), planned on one boundary plan (`_plan_boundary`: most are at a block boundary)
        and its ops returned, or None where it declines one (the caller's general path
        decides). (The generated batches plan theirs so themselves, compacting a slab that a
        move would make due: the core's is what they give up.)"""
        planned: Ops = []
        plan = _Boundary()
        for o, num_new in slow:
            if not self._plan_boundary(planned, plan, o, num_new, None, rests=True):
                return None
        self._emit_boundary(planned, plan)
        return planned

    def _boundary_step(
        self,
        me: object,
        request_id: str,
        o: int,
        num_new: Sequence[int],
        mapping: bool,
        lookahead: Sequence[int] | None = None,
        rolled: Sequence[int] | None = None,
    ) -> list[list[int]] | None:
        """A plain step past some group's slack, with the token held (as `_general_step`):
        the common one (`_plan_boundary`) planned in a few lines per group and committed at
        once; any other goes to `_general_step`. The tests compare it with the general path
        call by call. ``rolled``: a rollback to make first (`_plan_unroll`; any other goes to
        `_general_respec`)."""
        compacted: frozenset[int] = frozenset()
        while True:
            ops: Ops = []
            out: list[list[int]] | None = [] if mapping else None
            plan = _Boundary(compacted)
            back = None if rolled is None else self._plan_unroll(o, rolled, plan, num_new)
            if (rolled is None or back is not None) and self._plan_boundary(
                ops, plan, o, num_new, out, lookahead, back, rests=True
            ):
                break
            if plan.compact < 0:
                if rolled is not None:
                    assert lookahead is not None
                    return self._general_respec(me, request_id, o, num_new, lookahead, rolled)
                return self._general_step(me, request_id, o, num_new, lookahead, mapping)
            # A segment move that makes its slab due: the slab compacted first, then the step
            # planned again, the move allowed there (its old segment is then all the garbage).
            compacted |= {plan.compact}
            pre: Ops = []
            self.table.compact_ops(pre, compacted)
            commit(ops_of(pre))  # moves segments only: nothing observable
        self._emit_boundary(ops, plan)
        commit(ops_of(ops)); del self.guard.owner[0]; return out  # noqa: E702 - the commit: one line (_guard)

    def _general_content_all(
        self,
        me: object,
        request_ids: Sequence[str],
        num_new: Sequence[int],
        contents: Sequence[tuple[int, Sequence[int]]],
    ) -> None:
        """`advance_content_all`'s general path, with the token held (as `_general_step`):
        every request's content and step planned as `_general_content` plans them, one after
        the other on the same plans (each sees the blocks the ones before it took), one
        commit."""
        n, count = len(self.names), len(request_ids)
        first = str(request_ids[0]) if count else "(none)"
        if len(num_new) != n:
            raise self._arity(first, len(num_new))
        for g, q in enumerate(num_new):
            if type(q) is not int or q < 0:
                raise RequestError(
                    f"a batched step adds {q!r} positions in group {self.names[g]!r}; give a "
                    "count of 0 or more",
                    request_id=first,
                    group=self.names[g],
                )
        shares = self._shares(first, count, contents)
        offsets = [self._offset(request_id) for request_id in request_ids]
        _check_each_once(request_ids)
        self._compact_due()
        ops: Ops = []
        slabs = SlabPlan(ops)
        pools: dict[int, PoolPlan] = {}
        for i, (request_id, o) in enumerate(zip(request_ids, offsets, strict=True)):
            mine = [(g, keys[i * k : i * k + k]) for g, keys, k in shares]
            hashed, active = self._content_planned(ops, o, self._by_axis(request_id, o, mine))
            self._plan_step(
                ops, slabs, pools, request_id, o, num_new, None, False, None, hashed, active
            )
        for plan in pools.values():
            plan.emit(ops)
        slabs.emit(self.table)
        commit(ops_of(ops)); del self.guard.owner[0]  # noqa: E702 - the commit: one line (_guard)

    def _shares(
        self, first: str, count: int, contents: object
    ) -> list[tuple[int, array[int], int]]:
        """A batch's contents checked: per sequence ``(g, keys, k)``, ``k`` keys a request."""
        if type(contents) is not list and type(contents) is not tuple:
            raise RequestError(
                f"a batched step's content is a list of (group, keys) pairs, got "
                f"{reprlib.repr(contents)}",
                request_id=first,
            )
        out = []
        for pair in contents:
            if type(pair) is not tuple or len(pair) != 2 or type(pair[0]) is not int:
                raise RequestError(
                    f"a batched step's content is (group, keys) pairs, got {reprlib.repr(pair)}",
                    request_id=first,
                )
            g, keys = pair
            if not 0 <= g < len(self.names):
                raise RequestError(
                    f"a batched step's content names group {g}; the groups are 0 .. "
                    f"{len(self.names) - 1}",
                    request_id=first,
                )
            added = array("q", keys)
            k = len(added) // count if count else 0
            if k * count != len(added):
                raise RequestError(
                    f"a batched step gives {len(added)} keys of group {self.names[g]!r}'s "
                    f"sequence for {count} requests; give each request the same number, in "
                    "request order",
                    request_id=first,
                    group=self.names[g],
                )
            out.append((g, added, k))
        return out

    def _by_axis(
        self, request_id: str, o: int, contents: Sequence[tuple[int, Sequence[int]]]
    ) -> list[tuple[RequestExtras, int, array[int]]]:
        """A request's content per sequence (one entry per axis, contents of one sequence
        joined in order), after checking each group has content (else raise)."""
        by_axis: dict[int, tuple[RequestExtras, int, array[int]]] = {}
        extra: RequestExtras | None = None
        for g, keys in contents:
            extra = self._content_extra(request_id, o, g, extra)
            added = array("q", keys)
            axis = self._axis[g]
            if axis in by_axis:
                added = by_axis[axis][2] + added
            by_axis[axis] = (extra, g, added)
        return list(by_axis.values())

    def _content_planned(
        self, ops: Ops, o: int, by_axis: list[tuple[RequestExtras, int, array[int]]]
    ) -> tuple[dict[int, list[bytes]], RequestExtras | None]:
        """Plan on ``ops`` request ``o``'s content per sequence (`_by_axis`): its active form
        kept (one form of the request's content for every sequence), each sequence's keys
        appended and the blocks they fill hashed (`_plan_content`). Returns the hashes, for
        the step's registration, and the active form (None without content)."""
        hashed: dict[int, list[bytes]] = {}
        active = by_axis[0][0] if by_axis else None
        if active is not None:
            self._keep_active(ops, o, active)
        for extra, g, added in by_axis:
            hashed.update(self._plan_content(ops, extra, g, added))
        return hashed, active

    def _plan_boundary(
        self,
        ops: Ops,
        plan: _Boundary,
        o: int,
        num_new: Sequence[int],
        out: list[list[int]] | None,
        lookahead: Sequence[int] | None = None,
        back: Sequence[tuple[int, int, int, int]] | None = None,
        *,
        rests: bool = False,
        hashed: Mapping[int, list[bytes]] | None = None,
        active: RequestExtras | None = None,
    ) -> bool:
        """Plan a plain step of a request whose every group is within its slack or at a block
        boundary: at most one block taken at its table's end (a cached one is evicted from the
        prefix cache, a stale queue entry is not taken here), and those a window evicts at
        its front (a shared one loses a reference; a segment without room moves).
        Returns False for any other step: the caller then discards the plan and takes the
        general path, which decides it (or reports what is wrong). ``back``: per group, the
        fields ``(ANCHOR, SLACK, BASE, LENGTH)`` after a rollback planned before the step on
        the same ``plan`` (`_plan_unroll`), instead of the table's. ``hashed``: per stream,
        hashes content planned with the step adds, on ``active``, the form of the request's
        content the call stores (as `_plan_step`'s)."""
        n = len(self.names)
        if len(num_new) != n:
            return False
        extra = self.extras.get(o) if active is None else active
        # Content hashed ahead of the committed positions: registered below, from the
        # positions and evictions after the step (per group).
        after: list[tuple[int, int, int | array[int]]] | None = (
            [] if hashed or (type(extra) is RequestExtras and extra.pending()) else None
        )
        table, managers = self.table, self._managers
        hot, st, never = table.hot, table.st, table.never
        cold = table.cold(o) - HOT
        for g, q in enumerate(num_new):
            if type(q) is not int:
                return False
            h, c = o + g * HOT, cold + g * COLD
            if back is None:
                anchor0, slack, base0, length = st[c + ANCHOR], hot[h], st[c + BASE], st[c + LENGTH]
            else:
                anchor0, slack, base0, length = back[g]
                if anchor0 != st[c + ANCHOR] or base0 != st[c + BASE]:
                    kept = array(st.typecode, (anchor0, base0))
                    ops.append((setitem, st, slice(c + ANCHOR, c + BASE + 1), kept))
                if length != st[c + LENGTH]:
                    ops.append((setitem, st, c + LENGTH, length))
            p, size = self._pool[g], self._block_size[g]
            rows = anchor0 - slack
            first, end = (rows, rows + q) if p == 1 else (rows // p, -(-(rows + q) // p))
            touched = end - first if q else 0
            if 0 <= q <= slack and (slack or q) and touched <= self._in_flight[g]:
                # Within its slack: a fast group.
                ops.append((setitem, hot, slice(h, h + HOT), [slack - q, q]))
                if out is not None:
                    base = base0 * size
                    has = q and self._has_rows[g]
                    out.append(list(range(base + first, base + end)) if has else [])
                if after is not None:
                    after.append((st[c + SKIPPED], rows + q, NULL_BLOCK))
                continue
            manager = managers[g]
            skipped, evict = st[c + SKIPPED], st[c + EVICT]
            start, capacity, max_len = st[c + START], st[c + CAPACITY], st[c + MAXLEN]
            if (
                q < 0
                or not self._has_rows[g]
                or manager.kind == "cross_attention"
                or touched > self._in_flight[g]
                or end > max_len
            ):
                return False
            skip = max(manager.skipped_blocks(first), skipped) if first >= evict else skipped
            want = max(manager.table_length(end) - skipped - length, 0)
            dropped = skip - skipped
            pool = self.pools[g]
            state = plan.pools.get(id(pool))
            if state is None:
                state = plan.pools[id(pool)] = [pool, pool._fresh, pool._head, [], [], []]
            slab = table.slabs[g]
            # (the last first, as vLLM 0.33's `_remove_blocks_in_range` frees them)
            gone = slab[start : start + dropped][::-1] if dropped else _NO_BLOCKS
            if dropped > 1 and (not pool._shared or pool._shared.keys().isdisjoint(gone)):
                # Evicted as a run (a window passed over by a long step): a slice, no int each.
                if pool._cached:
                    ops.append(flag_op(pool._free_cached, pool._cached.keys() & gone, 1))
                state[4].extend(gone)
                gone = _NO_BLOCKS
            for block in gone:
                # Evicted the last first (the first decode step after a prefill drops several). A
                # block a prefix hit shares loses one reference (the plan's count, for a
                # batch). A cached one keeps its content in the queue (a hit may take it back).
                held = plan.shared.get((id(pool), block))
                count = pool._shared.get(block, 1) if held is None else held[2]
                if count > 1:  # (at 1, `_emit_boundary` drops it from the shared ones)
                    plan.shared[id(pool), block] = (pool, block, count - 1)
                    continue
                if block in pool._cached:
                    ops.append((setitem, pool._free_cached, block, 1))
                state[4].append(block)
            taken = NULL_BLOCK
            run: array[int] | None = None
            if want > 1:
                # A long step's blocks (a prefill chunk's): taken as a run of the queue's front.
                # (past the queue's entries, the blocks the plan evicted: taken back)
                run = None if state[5] else pool.front(state[1], state[2], want, state[4])
                if run is None:  # a stale entry in it, short, or blocks a rollback gave back
                    return False  # ahead of it (`_plan_unroll`): the general path decides
                fresh = min(want, pool.num_blocks - state[1])
                state[1] += fresh
                state[2] += want - fresh
                if pool._cached:  # cached blocks among them: evicted from the prefix cache
                    plan.evict_run(ops, pool, run)
            elif want:
                if state[1] < pool.num_blocks:
                    taken = state[1]
                    state[1] += 1
                elif state[5]:  # a block a rollback of the plan gave back (`_plan_unroll`)
                    taken = state[5].pop(0)
                elif (head := plan.live_head(state)) is not None or (
                    head := plan.released_head(state)
                ) is not None:
                    # The queue's first live entry (stale entries before it skipped), or past
                    # the queue a block the plan evicted (a full pool: a window's block given
                    # back and taken again).
                    taken = head
                    filed_as = pool._cached.get(taken)
                    if filed_as is not None:  # a cached block: evicted from the prefix cache
                        plan.listed(pool.map_of(taken, filed_as), filed_as).remove(taken)
                        ops.append((pool._cached.pop, taken, None))
                        ops.append((setitem, pool._free_cached, taken, 0))
                    state[2] += 1
                else:  # short: the general path decides
                    return False
            if out is not None:
                if not q:
                    out.append([])
                elif run is None:
                    out.append(_slots_across(slab, start, skipped, length, size, first, end, taken))
                else:
                    live = _Joined(slab[start : start + length], 0, run)
                    out.append(self._slots(live, skipped, g, first, end))
            # The group's table after the step: front evicted, blocks appended (in place, or
            # the segment moved to the slab's end with room to grow).
            garbage = plan.garbage.get(g, table.garbage[g]) + dropped
            moved = None
            tail = plan.slab_end.get(g, len(slab))
            if run is not None and length + want > capacity > dropped and start + capacity == tail:
                # A run into the slab's last segment grows there to the room a move would
                # give (`RequestTable.segment_ops`' rule): nothing copied, no garbage.
                most = manager.table_length(max_len) - skip
                room = grown(length - dropped + want, capacity, skip, want, most)
                ops.append((slab.extend, array("i", (0,)) * (room - capacity + dropped)))
                ops.append((setitem, slab, slice(start + length, start + length + want), run))
                plan.slab_end[g] = tail + room - capacity + dropped
                start, capacity = start + dropped, room
            elif want and length + want > capacity:
                if g not in plan.compacted and due(
                    garbage + capacity - dropped, plan.slab_end.get(g, len(slab))
                ):
                    # The move would make its slab due (its old segment then garbage).
                    plan.compact = g
                    return False  # compacted first (`_boundary_step`), or the general path
                if run is None:
                    moved = slab[start + dropped : start + length]
                    moved.append(taken)
                    room = grown(len(moved), capacity, skip)
                    moved.extend(array("i", bytes(4 * (room - len(moved)))))
                else:  # made whole at once, its parts copied in by memory views
                    staying = length - dropped
                    most = manager.table_length(max_len) - skip
                    room = grown(staying + want, capacity, skip, want, most)
                    moved = array("i", (0,)) * room
                    with memoryview(moved) as to, memoryview(slab) as source:
                        to[:staying] = source[start + dropped : start + length]
                        to[staying : staying + want] = run
                at = plan.slab_end.get(g, len(slab))
                plan.slab_end[g] = at + room
                ops.append((slab.extend, moved))
                garbage += capacity - dropped
                start, capacity = at, room
            else:
                if run is not None:
                    ops.append((setitem, slab, slice(start + length, start + length + want), run))
                elif want:
                    ops.append((setitem, slab, start + length, taken))
                start, capacity = start + dropped, capacity - dropped
            if garbage != table.garbage[g]:
                plan.garbage[g] = garbage
            length += want - dropped
            # Its bound for the next step.
            rows += q
            if first >= evict:
                evict = min(manager.first_evicting(skip), never)
            index = rows // p // size
            base, anchor = base0, rows
            if skip <= index < skip + length:
                at = index - skip
                if moved is not None:
                    block = moved[at]
                elif want and at >= length - want:
                    block = taken if run is None else run[at - length + want]
                else:
                    block = slab[start + at]
                base = block - index
                room = min(manager.reach(skip + length), max_len)
                anchor = max(min(room, evict, (index + 1) * size) * p, rows)
            ops.append((setitem, hot, slice(h, h + HOT), [anchor - rows, q]))
            if after is not None:
                after.append((skip, rows, taken if run is None else run))
            fields = (anchor, base, evict, skip, start, length, capacity)
            ops.append(
                (setitem, st, slice(c + ANCHOR, c + CAPACITY + 1), array(st.typecode, fields))
            )
        if after is not None:
            assert isinstance(extra, RequestExtras)  # pending: a resting one never is
            if not self._register_boundary(ops, plan, o, extra, after, lookahead, rests, hashed):
                return False
        if lookahead is not None:  # a speculative step records its lookahead, zeros included
            ops.append((setitem, self.specs, o, tuple(lookahead)))
        elif o in self.specs:  # a plain step accepts the latest lookahead
            ops.append((self.specs.pop, o, None))
        return True

    def _register_boundary(
        self,
        ops: Ops,
        plan: _Boundary,
        o: int,
        extra: RequestExtras,
        after: Sequence[tuple[int, int, int | array[int]]],
        lookahead: Sequence[int] | None,
        rests: bool,
        hashed: Mapping[int, list[bytes]] | None = None,
    ) -> bool:
        """Plan, within a boundary step, the registration of the full blocks of committed
        positions whose hash is known (`_register_plan`'s rule: per group, ``after`` gives its
        evicted entries, positions after the step and the block the step takes at its table's
        end, `NULL_BLOCK` if none, or the run it takes, a prefill chunk's: registered as a run,
        `_Boundary.register_run`; the hashes are the request's streams', computed once per
        sequence and granularity when the content came: a prompt's first step after a hit
        fills and registers the block it takes; ``hashed``: per stream, those content planned
        with the step adds). Hashes still ahead of the positions afterwards (a prompt's chunk
        before its last) hold the request's fields, as `_plan_step` does (its next steps
        register on the boundary path), where ``rests``. Returns False when it is not the
        common case (a block already cached, hashes left without ``rests``): the caller then
        takes the general path."""
        table = self.table
        st, cold = table.st, table.cold(o) - HOT
        registered = list(extra.registered)
        streams = extra.streams
        known = [
            [*s.hashes, *hashed[i]] if hashed and i in hashed else s.hashes
            for i, s in enumerate(streams)
        ]
        for g, s in enumerate(extra.stream_of):
            if s < 0:
                continue
            cache = self.caches[g]
            assert cache is not None
            hashes = known[s]
            skip, rows, taken = after[g]
            committed = rows - (lookahead[g] if lookahead is not None else 0)
            full = min(committed // cache.rows_per_block, len(hashes))
            if full <= registered[g]:
                continue
            c = cold + g * COLD
            skipped, start, length = st[c + SKIPPED], st[c + START], st[c + LENGTH]
            slab, pool, mask = table.slabs[g], self.pools[g], self._swa_mask[g]
            blocks_of = cache.blocks
            if not isinstance(taken, int):  # a run taken: the table's blocks, then the run's
                lo, ends = max(registered[g], skip), skipped + length  # (skip >= skipped)
                if mask is not None or full > ends + len(taken):
                    return False
                mid = min(full, ends)
                held = slab[start + lo - skipped : start + mid - skipped] if lo < mid else ()
                if held and not pool._cached.keys().isdisjoint(held):
                    return False
                blocks = [*held, *taken[max(lo - ends, 0) : max(full - ends, 0)]]
                plan.register_run(ops, pool, blocks_of, blocks, hashes[lo:full])
                registered[g] = full
                ops.append((setitem, extra.registered, g, full))
                continue
            for i in range(registered[g], full):
                if i < skip or (mask is not None and not mask(i)):
                    continue
                if skipped <= i < skipped + length:
                    block = slab[start + i - skipped]
                    if block in pool._cached:
                        return False
                elif i == skipped + length and taken != NULL_BLOCK:
                    block = taken  # taken by this step (evicted from the cache if it was)
                else:
                    return False
                key, block = hashes[i], pool._ids[block]  # (the id's own object: `add_map`)
                ops.append((setitem, pool._cached, block, key))
                plan.listed(blocks_of, key).append(block)
            registered[g] = full
            ops.append((setitem, extra.registered, g, full))
        for s, r in zip(extra.stream_of, registered, strict=True):
            if s >= 0 and len(known[s]) > r:
                # Hashes ahead of the positions (a prompt's chunk before its last): where the
                # caller stores what rests (``rests``; the generated planners' callers assume
                # nothing is left), its next steps register them, as `_plan_step` holds them.
                if not rests:
                    return False
                hot = table.hot
                for g, (_, rows, _) in enumerate(after):
                    c = cold + g * COLD
                    ops.append((setitem, hot, o + g * HOT + SLACK, 0))
                    ops.append((setitem, st, c + ANCHOR, rows))
                    ops.append((setitem, st, c + EVICT, 0))
                return True
        if rests:  # nothing left to register (a prompt's last hash): the request rests
            ops.append((setitem, self.extras, o, extra.resting(registered)))
        return True

    def _emit_boundary(self, ops: Ops, plan: _Boundary) -> None:
        """Add the pools' and slabs' part of planned boundary steps to ``ops``."""
        for pool, fresh, head, _, evicted, front in plan.pools.values():
            if fresh > pool._fresh:
                ops.append((setattr, pool, "_fresh", fresh))
            if evicted:
                ops.append((pool._queue.extend, evicted))
            # Every block taken came from the fresh ids, the blocks a rollback gave back or the
            # queue's front past the stale entries skipped (`_Boundary.live_head`); those
            # given back and not taken again go ahead of it.
            taken = fresh - pool._fresh + head - pool._head
            skipped = plan.stale.get(id(pool))
            if skipped is not None:
                counts, (passed,) = skipped
                stale = pool._stale
                ops += [
                    (setitem, stale, block, left) if left else (stale.pop, block, None)
                    for block, left in counts.items()
                ]
                ops.append((setattr, pool, "_num_stale", pool._num_stale - passed))
                taken -= passed
            if front:
                head = pool.front_ops(ops, front, head, len(pool._queue) + len(evicted))
            if head != pool._head:
                ops.append((setattr, pool, "_head", head))
            if taken != len(evicted) + len(front):
                used = pool._used + taken - len(evicted) - len(front)
                ops.append((setattr, pool, "_used", used))
        for g, garbage in plan.garbage.items():
            ops.append((setitem, self.table.garbage, g, garbage))
        for pool, block, count in plan.shared.values():
            shared = pool._shared
            ops.append((setitem, shared, block, count) if count > 1 else (shared.pop, block, None))
        # Per map, the keys left without blocks popped and the others set (`filed`,
        # inlined), one op each: a prompt's chunk plans hundreds (sorted in one pass over
        # the plan's lists). A key whose list keeps two blocks or more changed in place
        # (`key_ops`). A request's crossing plans a key or two: each written as it comes
        # (`lists_ops`), where the sorting pass costs more (one key: 600 ns against 220).
        lists = plan.lists
        if not lists:
            return
        if len(lists) <= _FEW_KEYS:
            lists_ops(ops, lists)
            return
        # One pass: per map (by id), its keys gone and its keys set, in the plan's order.
        maps: dict[int, tuple[CacheMap, list[bytes], dict[bytes, Any], list[Any]]] = {}
        for m, k, b in lists.values():
            parts = maps.get(id(m))
            if parts is None:
                parts = maps[id(m)] = (m, [], {}, [])
            if not b:
                parts[1].append(k)
            elif type(b) is list:
                parts[2][k] = b[0] if len(b) == 1 else b
            else:
                parts[3].append((k, b))
        for cache_map, gone, kept, changed in maps.values():
            if gone:
                ops.append((commit, map(cache_map.pop, gone, repeat(None))))
            if kept:
                ops.append((cache_map.update, kept))
            for k, b in changed:
                ops += key_ops(cache_map, k, b)

    def _fast_ops(self, ops: Ops, fast: list[int], num_new: Sequence[int]) -> None:
        """Add to ``ops`` the steps of the requests ``fast`` (offsets), all within their slack:
        each group's slack less its count, its step the count."""
        hot = self.table.hot
        for g, q in enumerate(num_new):
            at = [o + g * HOT + SLACK for o in fast]
            ops.append((commit, map(setitem, repeat(hot), at, [hot[i] - q for i in at])))
            ops.append((commit, map(setitem, repeat(hot), [i + STEP for i in at], repeat(q))))

    def _check_lookahead(
        self, request_id: str, num_new: Sequence[int], lookahead: Sequence[int]
    ) -> None:
        if len(lookahead) != len(num_new):
            raise RequestError(
                f"a speculative step of request {request_id!r} gives {len(lookahead)} "
                f"lookahead counts for {len(num_new)} groups; give one per group",
                request_id=str(request_id),
            )
        for g, (k, q) in enumerate(zip(lookahead, num_new, strict=True)):
            if not 0 <= k <= q:
                raise RequestError(
                    f"a speculative step of request {request_id!r} in group "
                    f"{self.names[g]!r} marks {k} of its {q} positions as lookahead; the "
                    "lookahead positions are the step's last ones (0 .. the step's positions)",
                    request_id=str(request_id),
                    group=self.names[g],
                )

    def _plan_step(
        self,
        ops: Ops,
        slabs: SlabPlan,
        pools: dict[int, PoolPlan],
        request_id: str,
        o: int,
        num_new: Sequence[int],
        lookahead: Sequence[int] | None,
        mapping: bool,
        given: tuple[list[list[int]], list[array[int]]] | None = None,
        hashed: Mapping[int, list[bytes]] | None = None,
        active: RequestExtras | None = None,
    ) -> list[list[int]] | None:
        """Plan one request's step into ``ops`` (the general path; see `allocate_step`);
        ``given``: the request's fields and live entries per group as planned before (a
        rollback's), instead of the table's; ``hashed``: per stream, hashes content planned
        with the step adds (`_general_content`), on ``active``, the form of the request's
        content the call stores (`_active`)."""
        table, managers = self.table, self._managers
        never = table.never
        # Phase 1: the slots each group's step touches, checked against the limits, in every
        # group before any shortfall is looked for (a caller's mistake is not transient).
        spans = []
        if given is None:
            fields_of = [table.read(o, g) for g in range(len(self.names))]
        else:
            fields_of = given[0]
        for g, q in enumerate(num_new):
            fields = fields_of[g]
            c, p = fields[ANCHOR] - fields[SLACK], self._pool[g]
            if type(q) is not int or q < 0:
                raise RequestError(
                    f"a step of request {request_id!r} in group {self.names[g]!r} adds "
                    f"{q!r} positions; give a count of 0 or more",
                    request_id=request_id,
                    group=self.names[g],
                )
            first, end = (c, c + q) if p == 1 else (c // p, -(-(c + q) // p))
            max_len = fields[MAXLEN]
            if (end - first if q else 0) > self._in_flight[g] or end > max_len:
                raise self._too_long(request_id, o, g, first, end, q, self._in_flight[g], max_len)
            spans.append((c, first, end))
        # Phase 2: every group's evictions go back first (vLLM's remove_skipped_blocks: no
        # query of the step reads them), then the new blocks are taken.
        kept: list[tuple[int, array[int], int]] = []
        for g, (_, first, _) in enumerate(spans):
            fields = fields_of[g]
            skipped = fields[SKIPPED]
            skip = skipped
            if first >= fields[EVICT]:
                skip = max(managers[g].skipped_blocks(first), skipped)
            live = table.live(o, g) if given is None else given[1][g]
            dropped = skip - skipped
            assert dropped <= len(live), (skip, skipped, len(live))
            if dropped:
                self._plan_of(pools, g).release(live[:dropped][::-1])
            kept.append((skip, live, dropped))
        wants = [
            managers[g].table_length(end) - fields_of[g][SKIPPED] - len(kept[g][1])
            for g, (_, _, end) in enumerate(spans)
        ]
        if self._one_pool is not None:
            plan = self._plan_of(pools, 0)
            want = sum(w for w in wants if w > 0)
            if want > plan.num_free:
                last = max(g for g, w in enumerate(wants) if w > 0)
                raise self._short(request_id, last, want, plan.num_free)
        out: list[list[int]] | None = [] if mapping else None
        spec = list(lookahead) if lookahead is not None else None
        extra = self.extras.get(o) if active is None else active
        new_live: list[tuple[int, Sequence[int]]] = []
        new_rows: list[int] = []
        for g, q in enumerate(num_new):
            c, first, end = spans[g]
            skip, live, dropped = kept[g]
            plan = self._plan_of(pools, g)
            want = wants[g]
            taken: Sequence[int] = ()
            if want > 0:
                if want > plan.num_free:
                    raise self._short(request_id, g, want, plan.num_free)
                taken = plan.take(want)
            fields = fields_of[g]
            most = managers[g].table_length(fields[MAXLEN]) - skip
            table.segment_ops(slabs, g, dropped, taken, fields, most=most)
            entries = _Joined(live, dropped, taken)  # the live table after the step
            rows = c + q
            fields[STEP], fields[SKIPPED] = q, skip
            if first >= fields[EVICT]:
                fields[EVICT] = min(managers[g].first_evicting(skip), never)
            self._bound(g, fields, rows, entries)
            if out is not None:
                out.append(
                    self._slots(entries, skip, g, first, end) if q and self._has_rows[g] else []
                )
            new_live.append((skip, entries))
            new_rows.append(rows)
        if spec is not None:  # a speculative step records its lookahead, zeros included
            ops.append((setitem, self.specs, o, tuple(spec)))
        elif o in self.specs:
            ops.append((self.specs.pop, o, None))
        # A resting request has nothing to register (content in the call woke it first).
        if isinstance(extra, RequestExtras) and self._register_plan(
            ops, pools, o, extra, new_rows, spec, new_live, hashed
        ):
            for fields, rows in zip(fields_of, new_rows, strict=True):
                _hold(fields, rows, empty_too=True)
        for g, fields in enumerate(fields_of):
            table.write_ops(ops, o, g, fields)
        return out

    def _bound(self, g: int, fields: list[int], rows: int, entries: Sequence[int]) -> None:
        """Set ``ANCHOR``, ``SLACK`` and ``BASE`` of a group's planned fields for the next
        step, from its positions and its table after the step (``entries``: its live
        entries). A step whose slots end at or below the bound (in slots: the table's room
        within the declared length, the first slot that evicts, the end of the block holding
        the next step's first slot) needs neither the pools nor another block."""
        skip, total = fields[SKIPPED], fields[SKIPPED] + len(entries)
        p = self._pool[g]
        if not self._has_rows[g]:
            # One state, no rows: once its block is held, only the request's length bounds it.
            bound = fields[MAXLEN] if total else -1
            fields[BASE] = 0
        else:
            size = self._block_size[g]
            index = rows // p // size  # the next step's first slot's block
            if not skip <= index < total:  # a block to take first (or an evicted one)
                bound = -1
            else:
                room = min(self._managers[g].reach(total), fields[MAXLEN])
                fields[BASE] = entries[index - skip] - index
                bound = min(room, fields[EVICT], (index + 1) * size)
        if bound * p > rows:
            fields[ANCHOR], fields[SLACK] = bound * p, bound * p - rows
        else:
            _hold(fields, rows)

    def _slots(self, entries: Sequence[int], skip: int, g: int, first: int, end: int) -> list[int]:
        """The cache slots of slots ``first .. end − 1``, built block by block."""
        size = self._block_size[g]
        out: list[int] = []
        while first < end:
            index = first // size
            stop = min(end, (index + 1) * size)
            base = (entries[index - skip] - index) * size
            out.extend(range(base + first, base + stop))
            first = stop
        return out

    def _register_plan(
        self,
        ops: Ops,
        pools: dict[int, PoolPlan],
        o: int,
        extra: RequestExtras,
        rows: Sequence[int],
        spec: Sequence[int] | None,
        entries: Sequence[tuple[int, Sequence[int]]] | None,
        hashed: Mapping[int, list[bytes]] | None = None,
    ) -> bool:
        """Plan the registration of every full block of committed positions whose hash is
        known, in every group with content (``entries``: per group, the planned table's
        evicted entries and live ones, None: as now; ``hashed``: per stream, hashes the call
        adds). Returns whether hashes are known beyond what is registered then: the
        request's next steps must take the general path (the caller holds its fields)."""
        table = self.table
        registered = list(extra.registered)
        known = [
            len(s.hashes) + len(hashed.get(i, ())) if hashed else len(s.hashes)
            for i, s in enumerate(extra.streams)
        ]
        for g, s in enumerate(extra.stream_of):
            if s < 0:
                continue
            cache = self.caches[g]
            assert cache is not None
            stream = extra.streams[s]
            old, more = stream.hashes, hashed.get(s, []) if hashed else []
            committed = rows[g] - (spec[g] if spec is not None else 0)
            full = min(committed // cache.rows_per_block, known[s])
            start = registered[g]
            if full <= start:
                continue
            if entries is not None:
                skip, live = entries[g]
            else:
                skip, live = table.field(o, g, SKIPPED), table.live(o, g)
            plan = self._plan_of(pools, g)
            mask = self._swa_mask[g]
            if mask is None:  # the blocks from ``start`` (those evicted skipped) as a run
                lo = max(start, skip)
                if lo < full:
                    if full <= len(old):
                        keys = old[lo:full]
                    elif lo >= len(old):
                        keys = more[lo - len(old) : full - len(old)]
                    else:
                        keys = [*old[lo:], *more[: full - len(old)]]
                    plan.register_run(live[lo - skip : full - skip], cache.blocks, keys)
            else:
                for i in range(start, full):
                    if i < skip or not mask(i):
                        continue
                    key = old[i] if i < len(old) else more[i - len(old)]
                    plan.register(live[i - skip], cache.blocks, key)
            registered[g] = full
            ops.append((setitem, extra.registered, g, full))
        for s, r in zip(extra.stream_of, registered, strict=True):
            if s >= 0 and known[s] > r:
                return True
        if hashed is None:  # nothing left to register, no content in the call: it rests
            ops.append((setitem, self.extras, o, extra.resting(registered)))
        return False

    def _window_mask(self, g: int) -> Callable[[int], bool] | None:
        """Which blocks of a sliding-window group the prefix cache keeps: only those an aligned
        hit can use (vLLM 0.33's ``SlidingWindowManager.reachable_block_mask``, dense
        retention). A hit ends on a multiple of the sequence's alignment and reads the
        ``cdiv(window − 1, block_size)`` blocks before it, so of each run of ``per`` blocks
        between two aligned ends only the last ``need`` are kept (every block when ``need``
        covers the run). None: keep every block."""
        manager, cache = self._managers[g], self.caches[g]
        if manager.kind != "sliding_window" or cache is None:
            return None
        window = cache.window
        assert window is not None
        per = self._align[g] // cache.rows_per_block
        need = -(-(window - 1) // cache.block_size)
        if need >= per:
            return None
        return lambda i: i % per >= per - need

    # -- speculation, content, the end ------------------------------------------------------

    def rollback(self, request_id: str, rejected: Sequence[int]) -> None:
        """Remove the rejected speculative positions of the latest step, per group (kernel
        unit): the length goes back, and the blocks only they used go back to the pool, at
        its free queue's front (`PoolPlan.release_front`: taken again first, before any
        cached block is evicted, as if kept, as vLLM keeps them).

        Eviction stays right: the next step starts at or after where the rolled-back step
        started, so the window's first needed slot never moves back, and every block the
        next step's queries read is still held.

        Raises:
            RequestError: unknown request, or more rejected positions than the latest step
                left speculative in a group (nothing changes).
            ConcurrentUseError: another call is in progress (nothing changes).
        """
        return self.fast.rollback(request_id, rejected)

    def _boundary_rollback(
        self, me: object, request_id: str, o: int, rejected: Sequence[int]
    ) -> None:
        """A rollback past the fast function's reach, with the token held (as
        `_general_step`): the common one (no more than a block freed per group, one neither
        shared nor cached, as every block of rejected drafts only is; the bound set again)
        planned in a few lines per group; any other goes to `_general_rollback`."""
        n = len(self.names)
        spec = self.specs.get(o)
        if spec is None or len(rejected) != n:
            return self._general_rollback(me, request_id, o, rejected)
        table, managers = self.table, self._managers
        hot, st = table.hot, table.st
        cold = table.cold(o) - HOT
        ops: Ops = []
        freed: dict[int, list[Any]] = {}
        for g, r in enumerate(rejected):
            if type(r) is not int or not 0 <= r <= spec[g]:
                return self._general_rollback(me, request_id, o, rejected)
            if not r:
                continue
            h, c = o + g * HOT, cold + g * COLD
            p, size = self._pool[g], self._block_size[g]
            rows = st[c + ANCHOR] - hot[h] - r
            skipped, length, start = st[c + SKIPPED], st[c + LENGTH], st[c + START]
            cut = managers[g].table_length(-(-rows // p)) - skipped
            dropped = length - cut
            pool = self.pools[g]
            if cut < 0 or dropped > 1 or not self._has_rows[g]:
                return self._general_rollback(me, request_id, o, rejected)
            slab = table.slabs[g]
            if dropped:
                # A block of rejected drafts only (never registered: only committed positions
                # are) goes to the queue's front (`PoolPlan.release_front`), unless a prefix
                # hit shares it.
                block = slab[start + cut]
                if block in pool._shared or block in pool._cached or block in pool._stale:
                    return self._general_rollback(me, request_id, o, rejected)
                freed.setdefault(id(pool), [pool, []])[1].append(block)
            length = cut
            index = rows // p // size
            base, anchor = st[c + BASE], rows
            if skipped <= index < skipped + length:
                base = slab[start + index - skipped] - index
                room = min(managers[g].reach(skipped + length), st[c + MAXLEN])
                anchor = max(min(room, st[c + EVICT], (index + 1) * size) * p, rows)
            ops.append((setitem, hot, slice(h, h + HOT), [anchor - rows, hot[h + STEP] - r]))
            fields = array(st.typecode, (anchor, base))
            ops.append((setitem, st, slice(c + ANCHOR, c + BASE + 1), fields))
            if dropped:
                ops.append((setitem, st, c + LENGTH, length))
        for pool, blocks in freed.values():
            head = pool.front_ops(ops, blocks, pool._head, len(pool._queue))
            ops.append((setattr, pool, "_head", head))
            ops.append((setattr, pool, "_used", pool._used - len(blocks)))
        left = tuple(k - r for k, r in zip(spec, rejected, strict=True))
        ops.append((setitem, self.specs, o, left))
        commit(ops_of(ops)); del self.guard.owner[0]  # noqa: E702 - the commit: one line (_guard)

    def _general_rollback(
        self, me: object, request_id: str, o: int, rejected: Sequence[int]
    ) -> None:
        """`rollback`'s general path, with the token held (as `_general_step`)."""
        self._check_rejected(request_id, o, rejected)
        if not any(rejected):
            del self.guard.owner[0]; return  # noqa: E702 - the commit: one line (_guard)
        ops: Ops = []
        pools: dict[int, PoolPlan] = {}
        fields_of, _ = self._plan_rollback(pools, o, rejected)
        for g, fields in enumerate(fields_of):
            if rejected[g]:
                self.table.write_ops(ops, o, g, fields)
        spec = self.specs.get(o, (0,) * len(self.names))
        left = tuple(k - r for k, r in zip(spec, rejected, strict=True))
        ops.append((setitem, self.specs, o, left))  # cleared by the next plain step
        for plan in pools.values():
            plan.emit(ops)
        commit(ops_of(ops)); del self.guard.owner[0]  # noqa: E702 - the commit: one line (_guard)

    def _check_rejected(self, request_id: str, o: int, rejected: Sequence[int]) -> None:
        """Raise unless ``rejected`` gives, per group, at most what the latest step of the
        request (at offset ``o``) left speculative."""
        n = len(self.names)
        if len(rejected) != n:
            raise self._arity(request_id, len(rejected))
        spec = self.specs.get(o, (0,) * n)
        for g, r in enumerate(rejected):
            if type(r) is not int or not 0 <= r <= spec[g]:
                raise RequestError(
                    f"request {request_id!r} rolls back {r!r} positions in group "
                    f"{self.names[g]!r}, but its latest step left {spec[g]} speculative "
                    "there (allocate_speculative's lookahead, less what was rolled back); "
                    "only those can be rolled back",
                    request_id=request_id,
                    group=self.names[g],
                )

    def _plan_rollback(
        self,
        pools: dict[int, PoolPlan],
        o: int,
        rejected: Sequence[int],
        num_new: Sequence[int] | None = None,
    ) -> tuple[list[list[int]], list[array[int]]]:
        """Plan a checked rollback on ``pools``: every group's fields and live entries after
        it (the blocks only rejected positions used released into the plans, to the queue's
        front: `PoolPlan.release_front`, one run per pool in group order). With ``num_new``,
        the step that follows it (`advance_speculative`): only blocks past that step's end
        are released (`_kept`)."""
        table = self.table
        fields_of = [table.read(o, g) for g in range(len(self.names))]
        lives = [table.live(o, g) for g in range(len(self.names))]
        freed: dict[int, tuple[PoolPlan, list[int]]] = {}
        for g, r in enumerate(rejected):
            if not r:
                continue
            fields, live = fields_of[g], lives[g]
            rows = fields[ANCHOR] - fields[SLACK] - r
            keep = self._kept(g, rows, None if num_new is None else num_new[g])
            cut = keep - fields[SKIPPED]
            assert cut >= 0, (keep, fields[SKIPPED])  # speculative blocks are never evicted
            if cut < len(live):
                plan = self._plan_of(pools, g)
                freed.setdefault(id(plan), (plan, []))[1].extend(live[cut:])
                del live[cut:]
                fields[LENGTH] = cut
            fields[STEP] -= r
            self._bound(g, fields, rows, live)
        for plan, blocks in freed.values():
            plan.release_front(blocks)
        return fields_of, lives

    def _kept(self, g: int, rows: int, q: object) -> int:
        """The table entries of group ``g`` a rollback to ``rows`` positions keeps: those the
        rolled-back positions use, and when a step of ``q`` positions follows in the same call
        (`advance_speculative`) those that step's positions use too. A fused rollback and
        step never gives back a block the step takes again: vLLM 0.33 does not either (its
        scheduler rewinds ``num_computed_tokens`` over rejected drafts and keeps
        ``req_to_blocks``; the next ``KVCacheManager.allocate_slots`` allocates only what
        ``SingleTypeKVCacheManager.get_num_blocks_to_allocate`` counts past the held blocks),
        so the same blocks are held as rollback then step, the kept ones with their ids."""
        p, manager = self._pool[g], self._managers[g]
        keep = manager.table_length(-(-rows // p))
        if type(q) is int and q > 0:
            keep = max(keep, manager.table_length(-(-(rows + q) // p)))
        return keep

    def _general_respec(
        self,
        me: object,
        request_id: str,
        o: int,
        num_new: Sequence[int],
        lookahead: Sequence[int],
        rejected: Sequence[int],
    ) -> list[list[int]] | None:
        """`advance_speculative`'s general path, with the token held (as `_general_step`):
        the rollback and the step planned on the same plans, committed at once."""
        plan = _Boundary()
        back = self._plan_unroll(o, rejected, plan, num_new)
        ops: Ops = []
        if (
            back is not None
            and len(lookahead) == len(num_new)
            and all(type(k) is int and 0 <= k <= q for k, q in zip(lookahead, num_new, strict=True))
            and self._plan_boundary(ops, plan, o, num_new, None, lookahead, back, rests=True)
        ):
            self._emit_boundary(ops, plan)
            commit(ops_of(ops)); del self.guard.owner[0]; return None  # noqa: E702 - the commit: one line (_guard)
        self._check_rejected(request_id, o, rejected)
        if len(num_new) != len(self.names):
            raise self._arity(request_id, len(num_new))
        self._check_lookahead(request_id, num_new, lookahead)
        self._compact_due()
        ops = []
        slabs = SlabPlan(ops)
        pools: dict[int, PoolPlan] = {}
        self._plan_respec(ops, slabs, pools, request_id, o, num_new, lookahead, rejected)
        for pool_plan in pools.values():
            pool_plan.emit(ops)
        slabs.emit(self.table)
        commit(ops_of(ops)); del self.guard.owner[0]; return None  # noqa: E702 - the commit: one line (_guard)

    def _general_respec_all(
        self,
        me: object,
        request_ids: Sequence[str],
        num_new: Sequence[int],
        lookahead: Sequence[int],
        rejected: Sequence[Sequence[int]],
        fast: list[tuple[int, list[int]]],
        slow: list[tuple[str, int, Sequence[int]]],
    ) -> None:
        """`advance_speculative_all`'s general path, with the token held (as
        `_general_all`): the requests of ``fast`` (offset, new slacks) need only stores;
        those of ``slow`` are planned one after the other on the same plans, each rollback
        before its step; none when the fast function gave up early (then all are planned)."""
        n = len(self.names)
        first = request_ids[0] if len(request_ids) else "(none)"
        if len(num_new) != n:
            raise self._arity(str(first), len(num_new))
        if len(rejected) != len(request_ids):
            raise RequestError(
                f"a batched speculative step gives {len(rejected)} rejected counts for "
                f"{len(request_ids)} requests; give one tuple (one count per group) per request",
                request_id=str(first),
            )
        self._check_lookahead(str(first), num_new, lookahead)
        _check_each_once(request_ids)
        boundary = bool(fast or slow)
        if not boundary:
            slow = [
                (request_id, self._offset(request_id), r)
                for request_id, r in zip(request_ids, rejected, strict=True)
            ]
        for request_id, o, r in slow:
            self._check_rejected(request_id, o, r)
        self._respecs_committed(
            [(request_id, o, num_new, lookahead, r) for request_id, o, r in slow],
            lambda ops: self._respec_ops(ops, fast, num_new, lookahead),
            boundary,
        )

    def _respecs_committed(
        self,
        slow: list[tuple[str, int, Sequence[int], Sequence[int], Sequence[int]]],
        fast_ops: Callable[[Ops], None],
        boundary: bool,
    ) -> None:
        """A checked drafting batch's commit (`_general_respec_all`'s and
        `_general_respec_each`'s): the requests of ``slow`` (id, offset, counts, lookahead,
        rejected) planned one after the other on the same plans, each rollback before its
        step; with ``boundary`` (the fast function planned the others), on one boundary plan
        first, again after compacting the slabs where it declines (a boundary step refuses to
        move a segment when that would make its slab due: the general path moves it, and
        compacts a call later). ``fast_ops`` adds the stores of the requests within their
        slacks."""
        if boundary:
            for _ in range(2):
                planned: Ops = []
                plan = _Boundary()
                for _, o, counts, looks, back in slow:
                    unroll = self._plan_unroll(o, back, plan, counts)
                    if unroll is None or not self._plan_boundary(
                        planned, plan, o, counts, None, looks, unroll, rests=True
                    ):
                        break
                else:
                    self._emit_boundary(planned, plan)
                    fast_ops(planned)
                    commit(ops_of(planned)); del self.guard.owner[0]; return  # noqa: E702 - the commit: one line (_guard)
                pre: Ops = []
                self.table.compact_ops(pre, soon=True)
                if not pre:
                    break
                commit(ops_of(pre))  # moves segments only: nothing observable
        self._compact_due()
        ops: Ops = []
        slabs = SlabPlan(ops)
        pools: dict[int, PoolPlan] = {}
        for request_id, o, counts, looks, back in slow:
            self._plan_respec(ops, slabs, pools, request_id, o, counts, looks, back)
        fast_ops(ops)
        for pool_plan in pools.values():
            pool_plan.emit(ops)
        slabs.emit(self.table)
        commit(ops_of(ops)); del self.guard.owner[0]  # noqa: E702 - the commit: one line (_guard)

    def _general_respec_each(
        self,
        me: object,
        request_ids: Sequence[str],
        num_new: Sequence[Sequence[int]],
        lookahead: Sequence[Sequence[int]],
        rejected: Sequence[Sequence[int]],
        fast: list[int],
        rows: list[tuple[tuple[int, ...], tuple[int, ...]]],
        slow: list[tuple[str, int]],
    ) -> None:
        """`advance_speculative_each`'s general path, with the token held (as
        `_general_each`): the requests of ``fast`` are within their slacks after their
        rollbacks (``rows``: their new hot fields and their lookahead, stored in C); those of
        ``slow`` are planned one after the other on the same plans, each rollback before its
        step, each with its own counts; none when the fast function gave up early (then
        every request's counts are checked, in batch order, and every request planned here)."""
        n = len(self.names)
        first = str(request_ids[0]) if len(request_ids) else "(none)"
        batch: tuple[tuple[str, object], ...] = (
            ("counts", num_new), ("lookahead counts", lookahead), ("rejected counts", rejected)
        )
        for name, given in batch:
            if type(given) is not list and type(given) is not tuple:
                raise RequestError(
                    f"a batch's {name} are given as {type(given).__name__}; give a list with "
                    "one tuple of counts per request",
                    request_id=first,
                )
            if len(given) != len(request_ids):
                raise RequestError(
                    f"{len(given)} tuples of {name} for {len(request_ids)} requests; give one "
                    "tuple (one count per group) per request, in the order of the requests",
                    request_id=first,
                )
        # In batch order: each request known, then its rollback (checked first, as
        # `advance_speculative` checks it), its counts and its lookahead; a request given
        # twice after.
        steps: dict[str, tuple[Sequence[int], Sequence[int], Sequence[int]]] = {}
        for request_id, counts, looks, back in zip(
            request_ids, num_new, lookahead, rejected, strict=True
        ):
            o = self._offset(request_id)
            mine: tuple[tuple[str, object], ...] = (
                ("rejected counts", back), ("counts", counts), ("lookahead counts", looks)
            )
            for name, one in mine:
                if type(one) is not list and type(one) is not tuple:
                    raise RequestError(
                        f"request {request_id!r}'s {name} are {type(one).__name__}; give a "
                        f"tuple of {n} counts, one per group ({', '.join(self.names)})",
                        request_id=str(request_id),
                    )
            self._check_rejected(request_id, o, back)
            self._check_counts(request_id, counts, f" to request {request_id!r}")
            self._check_lookahead(request_id, counts, looks)
            steps[request_id] = (counts, looks, back)
        _check_each_once(request_ids)
        hot, width, specs = self.table.hot, n * HOT, self.specs

        def fast_ops(ops: Ops) -> None:
            spans = [slice(o, o + width) for o in fast]
            ops.append((commit, map(setitem, repeat(hot), spans, [row for row, _ in rows])))
            ops.append((commit, map(setitem, repeat(specs), fast, [spec for _, spec in rows])))

        boundary = bool(fast or slow)
        if not boundary:
            slow = [(request_id, self._offset(request_id)) for request_id in request_ids]
        self._respecs_committed(
            [(request_id, o, *steps[request_id]) for request_id, o in slow], fast_ops, boundary
        )

    def _plan_respec(
        self,
        ops: Ops,
        slabs: SlabPlan,
        pools: dict[int, PoolPlan],
        request_id: str,
        o: int,
        num_new: Sequence[int],
        lookahead: Sequence[int],
        rejected: Sequence[int],
        hashed: Mapping[int, list[bytes]] | None = None,
        active: RequestExtras | None = None,
    ) -> None:
        """A drafting step on the general path's plans (`_plan_rollback`, `_plan_step`): the
        rollback of ``rejected``, then the step, which registers what it commits with the
        content's ``hashed`` where the request has content (``active``, `_content_planned`)."""
        given = self._plan_rollback(pools, o, rejected, num_new)
        self._plan_step(
            ops, slabs, pools, request_id, o, num_new, lookahead, False, given,
            hashed if active is not None else None, active,
        )

    def _plan_unroll(
        self, o: int, rejected: Sequence[int], plan: _Boundary, num_new: Sequence[int]
    ) -> list[tuple[int, int, int, int]] | None:
        """Plan a rollback before a boundary step of ``num_new`` positions on the same
        ``plan`` (`_boundary_rollback`'s common case: at most one block freed per group, only
        past the step's end (`_kept`), neither shared nor cached; the blocks freed go to the
        queue's front, ahead of those an earlier rollback of the plan gave back, where the
        plan's next take gets them again, as `PoolPlan.release_front` puts them): per group,
        ``(ANCHOR, SLACK, BASE, LENGTH)`` after it. None for any other rollback (or one the
        general path reports), nothing planned."""
        if not isinstance(num_new, tuple | list) or len(num_new) != len(self.names):
            return None
        spec = self.specs.get(o)
        n = len(self.names)
        if not isinstance(rejected, tuple | list) or len(rejected) != n:
            return None
        if spec is None:
            if not all(type(r) is int and r == 0 for r in rejected):
                return None
            spec = (0,) * n
        table, managers = self.table, self._managers
        hot, st, cold = table.hot, table.st, table.cold(o) - HOT
        out = []
        freed: dict[int, list[Any]] = {}
        for g, r in enumerate(rejected):
            if type(r) is not int or not 0 <= r <= spec[g]:
                return None
            h, c = o + g * HOT, cold + g * COLD
            anchor, slack, base, length = st[c + ANCHOR], hot[h], st[c + BASE], st[c + LENGTH]
            if r:
                p, size = self._pool[g], self._block_size[g]
                rows = anchor - slack - r
                skipped, start = st[c + SKIPPED], st[c + START]
                cut = min(self._kept(g, rows, num_new[g]) - skipped, length)
                pool = self.pools[g]
                if cut < 0 or length - cut > 1 or not self._has_rows[g]:
                    return None
                slab = table.slabs[g]
                if cut < length:
                    block = slab[start + cut]
                    if block in pool._shared or block in pool._cached or block in pool._stale:
                        return None
                    freed.setdefault(id(pool), [pool, []])[1].append(block)
                    length = cut
                index = rows // p // size
                anchor = rows
                if skipped <= index < skipped + length:
                    base = slab[start + index - skipped] - index
                    room = min(managers[g].reach(skipped + length), st[c + MAXLEN])
                    anchor = max(min(room, st[c + EVICT], (index + 1) * size) * p, rows)
                slack = anchor - rows
            out.append((anchor, slack, base, length))
        for pool, blocks in freed.values():
            state = plan.pools.get(id(pool))
            if state is None:
                state = plan.pools[id(pool)] = [pool, pool._fresh, pool._head, [], [], []]
            state[5][:0] = blocks
        return out

    def _respec_ops(
        self,
        ops: Ops,
        fast: list[tuple[int, list[int]]],
        num_new: Sequence[int],
        lookahead: Sequence[int],
    ) -> None:
        """Add to ``ops`` the speculative steps of ``fast`` (offset, per group the slack after
        the rollback, each within it): its slack less the count, its step the count."""
        hot, specs = self.table.hot, self.specs
        spec = tuple(lookahead)
        for o, slacks in fast:
            for g, q in enumerate(num_new):
                h = o + g * HOT
                ops.append((setitem, hot, slice(h, h + HOT), [slacks[g] - q, q]))
            ops.append((setitem, specs, o, spec))

    def extend_content(self, request_id: str, g: int, keys: Sequence[int]) -> None:
        """Append content to an admitted request's sequence, the one group ``g`` reads (the
        tokens it generated, the audio that arrived): every group of that sequence admitted
        with content extends it. Full blocks get hashes, once per granularity, and those its
        steps have committed enter the prefix cache, as vLLM hashes a request's tokens as they
        are appended.

        Raises:
            RequestError: unknown request, or one admitted without content in group ``g``.
            ConcurrentUseError: another call is in progress (nothing changes).
        """
        # The common call (a generated token, keys already int64: `ContentKeys`'): the
        # generated function (`_fast._extend`), which appends where the block fills not and
        # leaves anything else, nothing changed, to `_extend_general`.
        g_ok = type(g) is int and 0 <= g < len(self.names)
        if g_ok and type(keys) is array and keys.typecode == "q":
            self.fast.extend(request_id, g, keys)
            return
        self._extend_general(request_id, g, keys)

    def _extend_general(self, request_id: str, g: int, keys: Sequence[int]) -> None:
        """`extend_content` past its generated function: any request, group and keys (checked
        here), a block filled (hashed, registered where its positions are committed)."""
        me: list[object] = []
        guard = self.guard
        try:
            if guard.claim(0, me) is not me:
                guard.contend(me, self._concurrent, "extend_content")
            table = self.table
            o = self._offset(request_id)
            extra = self._content_extra(request_id, o, g)
            added = array("q", keys)
            ops: Ops = []
            self._keep_active(ops, o, extra)
            hashed = self._plan_content(ops, extra, g, added)
            if hashed:
                hot, st, cold = table.hot, table.st, table.cold(o) - HOT
                groups = range(len(self.names))
                rows = [st[cold + h * COLD + ANCHOR] - hot[o + h * HOT + SLACK] for h in groups]
                pools: dict[int, PoolPlan] = {}
                spec = self.specs.get(o)
                if self._register_plan(ops, pools, o, extra, rows, spec, None, hashed):
                    # Hashes ahead of the committed positions: the steps that commit them
                    # take the general path, which registers (`_hold`, field by field).
                    for h in groups:
                        c = cold + h * COLD
                        ops.append((setitem, hot, o + h * HOT + SLACK, 0))
                        ops.append((setitem, st, c + ANCHOR, rows[h]))
                        ops.append((setitem, st, c + EVICT, 0))
                for plan in pools.values():
                    plan.emit(ops)
            commit(ops_of(ops)); del guard.owner[0]  # noqa: E702 - the commit: one line (_guard)
        except BaseException:
            guard.drop(me)
            raise

    def _content_extra(
        self, request_id: str, o: int, g: int, active: RequestExtras | None = None
    ) -> RequestExtras:
        """What request ``o`` keeps of its content, if group ``g`` has some (else raise), in
        its active form (``active``: the one this call already made, `_active`)."""
        extra = self._active(o) if active is None else active
        if extra is None or extra.stream_of[g] < 0:
            raise RequestError(
                f"request {request_id!r} was admitted without content in group "
                f"{self.names[g]!r}: admit it with admit_with_prefix to cache its blocks",
                request_id=request_id,
                group=self.names[g],
            )
        return extra

    def _active(self, o: int) -> RequestExtras | None:
        """What request ``o`` keeps of its content, as a `RequestExtras` (None: nothing), for
        a call that adds content (its streams change in place): a resting one's is made
        anew, and the call stores it with its changes (`_keep_active`)."""
        extra = self.extras.get(o)
        if extra is None or isinstance(extra, RequestExtras):
            return extra
        rows = [0 if c is None else c.rows_per_block for c in self.caches]
        return awake(extra, self._axis, rows)

    def _keep_active(self, ops: Ops, o: int, extra: RequestExtras) -> None:
        """Add to ``ops`` the store of ``extra``, `_active`'s form of request ``o``'s
        content, if the core holds another form (a resting one)."""
        if self.extras.get(o) is not extra:
            ops.append((setitem, self.extras, o, extra))

    def _plan_content(
        self, ops: Ops, extra: RequestExtras, g: int, added: array[int]
    ) -> dict[int, list[bytes]]:
        """Plan appending ``added`` to every stream of the sequence group ``g`` reads; return
        per stream the hashes of the blocks it fills (once for every group of a granularity;
        the tail left is shorter than a block, whatever the content's length)."""
        axis = self._axis[g]
        hashed: dict[int, list[bytes]] = {}
        for s, stream in enumerate(extra.streams):
            if stream.axis != axis:
                continue
            rpb, tail = stream.rows_per_block, stream.tail
            if len(tail) + len(added) < rpb:
                ops.append((tail.extend, added))
                continue
            joined = tail + added
            full = len(joined) // rpb * rpb
            new = chain_hashes(stream.parent, joined, rpb)  # its full blocks
            ops.append(more_hashes(stream, new))
            ops.append((setitem, tail, slice(None), joined[full:]))
            ops.append((setattr, stream, "parent", new[-1]))
            hashed[s] = new
        return hashed

    def free(self, request_id: str, also: Ops | None = None) -> None:
        """Return every block of a finished (or preempted) request, and its reservation
        (``also``: more operations, committed with it).

        Raises:
            RequestError: the request is not admitted.
            ConcurrentUseError: another call is in progress (nothing changes).
        """
        # Its common case (nothing more to commit, no policy's bookkeeping here) stores on
        # one line (the generated ``free``); False where `_general_free` decides. (No line
        # of its own after it: an interrupt there would come after the end.)
        if also is not None or not self.fast.free(request_id, {}, {}, {}):
            self._general_free(request_id, also)

    def _general_free(self, request_id: str, also: Ops | None) -> None:
        """`free`, planned in full (any request, ``also`` committed with it)."""
        me: list[object] = []
        guard = self.guard
        try:
            if guard.claim(0, me) is not me:
                guard.contend(me, self._concurrent, "free")
            o = self._offset(request_id)
            ops: Ops = []
            slabs = SlabPlan(ops)
            pools: dict[int, PoolPlan] = {}
            ledger = self._release_plan(ops, slabs, pools, request_id, o)
            self.ledger.give_back_ops(ops, *ledger)
            for plan in pools.values():
                plan.emit(ops)
            slabs.emit(self.table)
            # A slab the end leaves due is compacted with it, without the ended segments.
            self.table.compact_ops(ops, (), slabs, o)
            if also:
                ops.extend(also)
            commit(ops_of(ops)); del guard.owner[0]  # noqa: E702 - the commit: one line (_guard)
        except BaseException:
            guard.drop(me)
            raise

    def _batch_caches_emptied(self) -> Ops:
        """The ops that empty `_batch_caches` (with the end of the last request: here and in
        the generated ``free``)."""
        kept, cuts, chunks = self._batch_caches
        return [(setitem, kept, slice(None), [None] * len(kept)), (cuts.clear,), (chunks.clear,)]

    def _release_plan(
        self,
        ops: Ops,
        slabs: SlabPlan,
        pools: dict[int, PoolPlan],
        request_id: str,
        o: int,
    ) -> tuple[list[int], list[int] | None]:
        """Plan the end of a request (its blocks back to the pools, its fields and segments
        free, its content and speculation forgotten); return the caps and shares the ledger
        gives back (the caller sums them when it plans several ends)."""
        table = self.table
        extra = self.extras.get(o)
        # A request that cached its prefix frees it tail first, as vLLM does: among blocks
        # freed together, the chain's head (the most shared) is evicted last. Those without
        # content go to the queue's front (`PoolPlan.release_front`): one run per pool, its
        # groups in order.
        cached = extra is not None and (isinstance(extra, PrefixPart) or extra.has_streams())
        unshared = self._unshared(o, pools)
        freed: dict[int, tuple[PoolPlan, list[int]]] = {}
        for g in range(len(self.names)):
            live = table.live(o, g)
            if cached:
                live.reverse()
            plan = self._plan_of(pools, g)
            freed.setdefault(id(plan), (plan, []))[1].extend(live)
        for plan, blocks in freed.values():
            plan.release_front(blocks)
        caps = self.ledger.caps_of([table.field(o, g, MAXLEN) for g in range(len(self.names))])
        last = len(table.offsets) == 1
        table.release_ops(slabs, o, request_id)
        if last:  # emptied so: a dict keeps its size after pops, not after clear
            ops.append((self.extras.clear,))
            ops.append((self.specs.clear,))
            ops.append((self._caps_by_lengths.clear,))
            ops += self._batch_caches_emptied()
            for plan in pools.values():  # an idle pool as built (`PoolPlan.emit`)
                plan.last = True
            return caps, unshared
        if extra is not None:
            ops.append((self.extras.pop, o, None))
        if o in self.specs:
            ops.append((self.specs.pop, o, None))
        return caps, unshared

    def step_preempting(
        self,
        request_id: str,
        num_new: Sequence[int],
        victim: Callable[[Sequence[str]], str],
        also: Callable[[Sequence[Preempted]], Ops],
    ) -> tuple[list[list[int]] | None, list[Preempted]]:
        """One step of a request; while it runs short, end the request ``victim`` chooses
        among those admitted (in admission order), and plan the step again: all in one
        commit, so an exception leaves every request as it was (vLLM's scheduler loop).

        Args:
            request_id: the request that steps.
            num_new: as `allocate_step`.
            victim: given the admitted requests still running, in admission order, the one
                to preempt next (it may be ``request_id`` itself: then its step is not taken).
            also: given the preemptions, more operations committed with them (a policy's
                counters).

        Returns:
            The step's slot mappings (None if the request preempted itself), and the
            preemptions, in order.

        Raises:
            RequestError: as `allocate_step`.
            AllocationError: nothing is left to preempt (never: the request itself is).
        """
        me: list[object] = []
        guard = self.guard
        try:
            if guard.claim(0, me) is not me:
                guard.contend(me, self._concurrent, "allocate_preempting")
            o = self._offset(request_id)
            if len(num_new) != len(self.names):
                raise self._arity(request_id, len(num_new))
            self._compact_due()
            done: list[Preempted] = []
            while True:
                # Each attempt is planned afresh, on top of the ends planned so far.
                ops: Ops = []
                slabs = SlabPlan(ops)
                pools: dict[int, PoolPlan] = {}
                caps = [0] * len(self.names)
                unshared = [0] * len(self.names)
                for ended in done:
                    given = self._release_plan(ops, slabs, pools, ended.request_id, ended.offset)
                    caps = [a + b for a, b in zip(caps, given[0], strict=True)]
                    if given[1] is not None:
                        unshared = [a + b for a, b in zip(unshared, given[1], strict=True)]
                gone = {p.request_id for p in done}
                if request_id in gone:
                    out = None
                    break
                out, short = self._try_plan_step(ops, slabs, pools, request_id, o, num_new)
                if short is None:
                    break
                else:
                    left = [r for r in self.table.offsets if r not in gone]
                    chosen = victim(left)
                    assert chosen in left, chosen
                    v = self.table.offsets[chosen]
                    rows = [self.table.rows(v, g) for g in range(len(self.names))]
                    done.append(Preempted(chosen, v, rows, short))
            self.ledger.give_back_ops(ops, caps, unshared if any(unshared) else None)
            for plan in pools.values():
                plan.emit(ops)
            slabs.emit(self.table)
            ops.extend(also(done))
            commit(ops_of(ops)); del guard.owner[0]; return out, done  # noqa: E702 - the commit: one line (_guard)
        except BaseException:
            guard.drop(me)
            raise

    def _try_plan_step(
        self,
        ops: Ops,
        slabs: SlabPlan,
        pools: dict[int, PoolPlan],
        request_id: str,
        o: int,
        num_new: Sequence[int],
    ) -> tuple[list[list[int]] | None, AllocationError | None]:
        """`_plan_step`, its shortfall returned rather than raised. (A function of its own: a
        ``try`` nested in a function that holds the token would leave the nested ``try:``
        line outside the outer handler in CPython 3.11.)"""
        try:
            return self._plan_step(ops, slabs, pools, request_id, o, num_new, None, True), None
        except AllocationError as short:
            return None, short

    def _unshared(self, o: int, pools: dict[int, PoolPlan]) -> list[int] | None:
        """Per group, the shared blocks of a request that its end leaves with one holder
        less, where the ledger counts them (groups that keep their blocks); None if none.
        Counted on the planned references (other ends planned in the same call)."""
        shared = self.ledger.shared
        if not any(shared):
            return None
        out = [0] * len(self.names)
        for g in range(len(self.names)):
            if shared[g] and self._keeps[g]:
                out[g] = self._plan_of(pools, g).count_shared(self.table.live(o, g))
        return out

    def reset_prefix_cache(self) -> bool:
        """Forget every cached prefix if no request holds a block (vLLM's
        ``reset_prefix_cache``); whether it did."""
        me: list[object] = []
        guard = self.guard
        try:
            if guard.claim(0, me) is not me:
                guard.contend(me, self._concurrent, "reset_prefix_cache")
            ops: Ops = []
            done = True
            for pool in self._unique_pools():
                if not pool.reset_ops(ops):
                    done, ops = False, []
                    break
            commit(ops_of(ops)); del guard.owner[0]  # noqa: E702 - the commit: one line (_guard)
        except BaseException:
            guard.drop(me)
            raise
        return done

    # -- reading ----------------------------------------------------------------------------

    def read(self, operation: str, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` with the token held: what it reads existed at one moment.

        Raises:
            ConcurrentUseError: another call is in progress.
        """
        me: list[object] = []
        guard = self.guard
        try:
            if guard.claim(0, me) is not me:
                guard.contend(me, self._concurrent, operation)
            out = fn(*args); del guard.owner[0]  # noqa: E702 - the commit: one line (_guard)
        except BaseException:
            guard.drop(me)
            raise
        return out

    def _compact_due(self) -> None:
        """Compact every slab whose garbage is due, in a commit of its own (it moves segments
        only: nothing observable), as a general path does before it plans."""
        pre: Ops = []
        self.table.compact_ops(pre)
        if pre:
            commit(ops_of(pre))

    def offset(self, request_id: object) -> int:
        """The offset of an admitted request (see `kvunits.runtime._table`)."""
        return self._offset(request_id)

    def _offset(self, request_id: object) -> int:
        o = self.table.offsets.get(request_id) if type(request_id) is str else None
        if o is None:
            raise self._unknown(request_id)
        return o

    def rows(self, request_id: str) -> list[int]:
        """Positions so far per group (kernel unit), read at one moment."""
        return self.read("seq_len", self._rows, request_id)

    def _rows(self, request_id: str) -> list[int]:
        o = self._offset(request_id)
        return [self.table.rows(o, g) for g in range(len(self.names))]

    def caps(self, request_id: str) -> list[int]:
        """Per group, the admission cap the request reserved (cache blocks)."""
        return self.read("request_cap", self._caps, request_id)

    def _caps(self, request_id: str) -> list[int]:
        o, table = self._offset(request_id), self.table
        return self.ledger.caps_of([table.field(o, g, MAXLEN) for g in range(len(self.names))])

    def block_table(self, request_id: str, g: int) -> list[int]:
        """The request's block table in group ``g``, the null block where evicted (a copy)."""
        return self.read("block_table", self._table_of, request_id, g)

    def _table_of(self, request_id: str, g: int) -> list[int]:
        return self.table.table(self._offset(request_id), g)

    def slot_mapping(self, request_id: str, g: int) -> list[int]:
        """The latest step's slot mapping in group ``g`` (manager units; see `allocate_step`)."""
        return self.read("slot_mapping", self._slot_mapping, request_id, g)

    def _slot_mapping(self, request_id: str, g: int) -> list[int]:
        o = self._offset(request_id)
        table = self.table
        q = table.field(o, g, STEP)
        if not self._has_rows[g] or not q:
            return []
        c, p = table.rows(o, g) - q, self._pool[g]
        live = self.table.live(o, g)
        return self._slots(live, table.field(o, g, SKIPPED), g, c // p, -(-(c + q) // p))

    def kernel_view(
        self, request_id: str, g: int
    ) -> tuple[list[int], list[int], list[int], int, int]:
        """For one group, read at one moment: the block table, the latest step's slot mapping
        and cache rows, the positions so far and the latest step's."""
        return self.read("kernel_inputs", self._kernel_view, request_id, g)

    def _kernel_view(
        self, request_id: str, g: int
    ) -> tuple[list[int], list[int], list[int], int, int]:
        o = self._offset(request_id)
        rows, q = self.table.rows(o, g), self.table.field(o, g, STEP)
        table = self.table.table(o, g)
        slots = self._slot_mapping(request_id, g)
        cache_rows: list[int] = []
        if self._has_rows[g] and q:
            p, size = self._pool[g], self._block_size[g]
            span = size * p
            first = rows - q
            while first < rows:
                index = first // span
                stop = min(rows, (index + 1) * span)
                base = (table[index] - index) * span
                cache_rows.extend(range(base + first, base + stop))
                first = stop
        return table, slots, cache_rows, rows, q

    def usage(self, g: int) -> tuple[int, int, int, int, int]:
        """Group ``g`` now: capacity, used, free, reserved, cached (cache blocks)."""
        return self.read("usage", self._usage, g)

    def usage_all(self) -> list[tuple[int, int, int, int, int]]:
        """`usage` of every group, read at one moment."""
        return self.read("usage_by_group", lambda: [self._usage(g) for g in range(len(self.names))])

    def _usage(self, g: int) -> tuple[int, int, int, int, int]:
        pool = self.pools[g]
        used = pool.num_used
        if self._one_pool is not None:
            table = self.table
            used = len({b for o in table.offsets.values() for b in table.live(o, g)})
        cache = self.caches[g]
        cached = 0
        if cache is not None and cache.blocks:
            flags = pool._free_cached
            cached = sum(1 for held in cache.blocks.values() for b in holders(held) if flags[b])
        return pool.num_blocks - 1, used, pool.num_free, self.ledger.in_effect(g), cached

    # -- plumbing ----------------------------------------------------------------------------

    def _plan_of(self, pools: dict[int, PoolPlan], g: int) -> PoolPlan:
        pool = self.pools[g]
        plan = pools.get(id(pool))
        if plan is None:
            plan = pools[id(pool)] = PoolPlan(pool)
        return plan

    def _unique_pools(self) -> list[BlockPool]:
        return list({id(p): p for p in self.pools}.values())

    def __copy__(self) -> CoordinatorCore:
        raise TypeError(
            "a shallow copy of a coordinator would share its blocks and requests with the "
            "original: use copy.deepcopy for an independent coordinator"
        )

    def __deepcopy__(self, memo: dict[int, Any]) -> CoordinatorCore:
        """An independent core: the same requests, blocks and cache, sharing nothing
        mutable with this one (its fast functions are written again for its own state).

        Raises:
            ConcurrentUseError: a call is in progress on this core.
        """
        return self.read("deepcopy", self._deepcopy, memo)

    def _deepcopy(self, memo: dict[int, Any]) -> CoordinatorCore:
        new = CoordinatorCore.__new__(CoordinatorCore)
        state = {
            name: getattr(self, name)
            for name in (
                "pools",
                "caches",
                "ledger",
                "table",
                "extras",
                "specs",
                "_one_pool",
                "_shapes",
                "_caps_by_lengths",
            )
        }
        copied = copy.deepcopy(state, memo)
        for name in CoordinatorCore.__slots__:
            if name in copied:
                setattr(new, name, copied[name])
            elif name not in ("guard", "fast", "_batch_caches"):
                setattr(new, name, getattr(self, name))  # immutable: shared
        new.guard = Guard()
        new._batch_caches = ([], {}, {})  # the copy's fast functions' own, empty
        new.fast = self._make_fast(new, self.fast.source)  # one layout: one source
        return new

    def __reduce__(self) -> Any:
        raise TypeError(
            "a coordinator is not pickled (its state is live allocator state tied to one "
            "process); use copy.deepcopy for an independent coordinator in this process"
        )

    # -- errors -------------------------------------------------------------------------------

    def _unknown(self, request_id: object) -> RequestError:
        check_request_id(request_id)
        return RequestError(
            f"request {request_id!r} is not admitted (never admitted, or already freed); "
            "admit it first",
            request_id=str(request_id),
        )

    def _admitted(self, request_id: str) -> RequestError:
        return RequestError(
            f"request {request_id!r} is already admitted; free it before reusing its id",
            request_id=request_id,
        )

    def _concurrent(self, operation: str) -> ConcurrentUseError:
        return ConcurrentUseError(
            f"{operation} entered a KVCacheCoordinator while another call was still in "
            "progress on it (a second thread, or a callback from inside a call); this call "
            "changed nothing. One scheduler thread drives a coordinator: share one between "
            "threads only under one lock held around every call",
            operation=operation,
        )

    def _arity(self, request_id: str, given: int) -> RequestError:
        return RequestError(
            f"a step of request {request_id!r} gives {given} counts for "
            f"{len(self.names)} groups ({', '.join(self.names)}); give one per group, in order",
            request_id=str(request_id),
        )

    def _too_long(
        self,
        request_id: str,
        o: int,
        g: int,
        first: int,
        end: int,
        q: int,
        in_flight: int,
        max_len: int,
    ) -> RequestError:
        unit = self._managers[g].spec.slot_unit.unit
        name = self.names[g]
        held = -(-self.table.rows(o, g) // self._pool[g])
        if end > max_len:
            what = (
                f"would hold {end} {unit} ({held} + {end - held}), beyond the request's "
                f"max_len of {max_len} {unit}"
            )
        elif self._pool[g] == 1:
            what = f"adds {q} {unit}, more than the group's max_in_flight of {in_flight} {unit}"
        else:
            what = (
                f"touches {end - first} {unit} (slots {first}..{end - 1}), more than the "
                f"group's max_in_flight of {in_flight} {unit}"
            )
        return RequestError(
            f"a step of request {request_id!r} in group {name!r} {what}; the admission cap "
            "only covers steps within both limits: split the step or admit with a larger "
            "max_len",
            request_id=request_id,
            group=name,
        )

    def _short(self, request_id: str, g: int, want: int, usable: int) -> AllocationError:
        name = self.names[g]
        where = f"in group {name!r}"
        if self._one_pool is not None:
            where = f"from the pool all groups share (group {name!r} among them)"
        return AllocationError(
            f"step of request {request_id!r} needs {want} new cache_block {where} "
            f"but only {usable} are free (evictions of this step included), "
            f"{want - usable} short; nothing was allocated in any group: preempt a request "
            "or retry after one finishes",
            group=name,
            needed=CacheBlocks(want),
            free=CacheBlocks(usable),
            request_id=request_id,
        )


#: A core's step without lookahead: ``step(request_id, num_new) -> slot mappings``.
StepFn = Callable[[str, Sequence[int]], list[list[int]]]


class FastFunctions(NamedTuple):
    """A core's generated functions (see the module docstring)."""

    step: Callable[[str, Sequence[int]], list[list[int]]]
    advance: Callable[[str, Sequence[int]], None]
    speculative: Callable[[str, Sequence[int], Sequence[int]], list[list[int]]]
    rollback: Callable[[str, Sequence[int]], None]
    advance_all: Callable[[Sequence[str], Sequence[int]], None]
    respec: Callable[[str, Sequence[int], Sequence[int], Sequence[int]], None]
    respec_all: Callable[
        [Sequence[str], Sequence[int], Sequence[int], Sequence[Sequence[int]]], None
    ]
    content: Callable[[str, Sequence[int], Sequence[tuple[int, Sequence[int]]]], None]
    content_all: Callable[[Sequence[str], Sequence[int], Sequence[tuple[int, Sequence[int]]]], None]
    step_typed: Callable[[str, tuple[int, ...]], list[list[int]]]
    advance_typed: Callable[[str, tuple[int, ...]], None]
    speculative_typed: Callable[[str, tuple[int, ...], tuple[int, ...]], list[list[int]]]
    rollback_typed: Callable[[str, tuple[int, ...]], None]
    advance_all_typed: Callable[[Sequence[str], tuple[int, ...]], None]
    respec_typed: Callable[[str, tuple[int, ...], tuple[int, ...], tuple[int, ...]], None]
    respec_all_typed: Callable[
        [Sequence[str], tuple[int, ...], tuple[int, ...], Sequence[tuple[int, ...]]], None
    ]
    content_typed: Callable[[str, tuple[int, ...], Sequence[tuple[int, Sequence[int]]]], None]
    content_all_typed: Callable[
        [Sequence[str], tuple[int, ...], Sequence[tuple[int, Sequence[int]]]], None
    ]
    respec_all_units: Callable[
        [
            Sequence[str],
            tuple[int, ...],
            tuple[int, ...],
            Sequence[Any],
            tuple[type, ...],
            Callable[..., None],
        ],
        None,
    ]
    advance_each: Callable[[Sequence[str], Sequence[Sequence[int]]], None]
    advance_each_units: Callable[
        [Sequence[str], Sequence[Any], tuple[type, ...], Callable[..., None]], None
    ]
    respec_each: Callable[
        [
            Sequence[str],
            Sequence[Sequence[int]],
            Sequence[Sequence[int]],
            Sequence[Sequence[int]],
        ],
        None,
    ]
    respec_each_units: Callable[
        [
            Sequence[str],
            Sequence[Any],
            Sequence[Any],
            Sequence[Any],
            tuple[type, ...],
            Callable[..., None],
        ],
        None,
    ]
    cross: Callable[..., list[list[int]] | None]
    uncross: Callable[..., None]
    respec_cross: Callable[..., None]
    content_cross: Callable[..., None]
    content_fill: Callable[..., None]
    respec_fill: Callable[..., object]
    respec_fill_cross: Callable[..., object]
    respec_content_all: Callable[..., None]
    admit: Callable[[str, Sequence[int | None]], bool]
    admit_prefix: Callable[..., list[int] | None] | None
    free: Callable[[str, Container[str], Container[str], Container[str]], bool]
    extend: Callable[[str, int, array[int]], None]
    source: str


class _Joined(Sequence[int]):
    """A table's live entries after a step, read without copying them: ``live[dropped:]``
    (an array) followed by ``taken`` (a prefill's blocks: thousands of them)."""

    __slots__ = ("_dropped", "_kept", "_live", "_taken")

    def __init__(self, live: array[int], dropped: int, taken: Sequence[int]) -> None:
        self._live, self._dropped, self._taken = live, dropped, taken
        self._kept = len(live) - dropped

    def __len__(self) -> int:
        return self._kept + len(self._taken)

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...
    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            kept, dropped = self._kept, self._dropped
            head = self._live[dropped + start : dropped + min(stop, kept)] if start < kept else ()
            return [*head, *self._taken[max(start - kept, 0) : max(stop - kept, 0)]]
        if index < 0:
            index += len(self)
        if index < self._kept:
            return self._live[self._dropped + index]
        return self._taken[index - self._kept]


class _Boundary:
    """What planned boundary steps share: per pool (by id) ``[pool, fresh, head, _,
    evicted, front]``, the slabs' planned ends and garbage, the prefix cache's planned block
    lists (by the map's id and the key), and the planned reference counts of shared blocks a
    window dropped (by the pool's id and the block: ``(pool, block, count)``). The blocks taken
    are those between the pool's and the plan's ``fresh`` and ``head`` and those a rollback
    gave back (``front``: the ones not taken again, ahead of the queue's front, taken after
    the fresh ids; ``_``, an empty list, is read by nothing: the takes are the counters')."""

    __slots__ = (
        "compact",
        "compacted",
        "garbage",
        "lists",
        "pools",
        "shared",
        "slab_end",
        "stale",
    )

    def __init__(self, compacted: frozenset[int] = frozenset()) -> None:
        self.compacted = compacted  # groups whose slab the call compacted: moves allowed
        self.compact = -1  # the group whose slab a refused move would have made due
        self.pools: dict[int, list[Any]] = {}
        self.shared: dict[tuple[int, int], tuple[BlockPool, int, int]] = {}
        self.slab_end: dict[int, int] = {}
        self.garbage: dict[int, int] = {}
        self.lists: dict[tuple[int, bytes], tuple[CacheMap, bytes, list[int] | HeldBlocks]] = {}
        # Per pool (by id), the stale queue entries its takes skipped: (planned stale counts
        # of their blocks, how many).
        self.stale: dict[int, tuple[dict[int, int], list[int]]] = {}

    def released_head(self, state: list[Any]) -> int | None:
        """The block a take reaches past the queue's entries of ``state``'s pool: one of the
        blocks the plan evicted (``state[4]``, which go to the queue's back before any take,
        as vLLM's ``remove_skipped_blocks`` runs before its allocation), in their order; None
        where the plan's head is within the queue or past them too. Changes nothing."""
        at = int(state[2]) - len(state[0]._queue)
        evicted = state[4]
        return evicted[at] if 0 <= at < len(evicted) else None

    def live_head(self, state: list[Any]) -> int | None:
        """The block at the first live entry of the queue of ``state``'s pool from the plan's
        head on, the head moved to it: the stale entries before it (blocks a prefix hit took
        back out of the queue) skipped as `PoolPlan.take` skips them, their counts planned.
        None where the queue holds no live entry there."""
        pool: BlockPool = state[0]
        queue, head = pool._queue, int(state[2])
        if head >= len(queue):
            return None
        block = queue[head]
        if block not in pool._stale:
            return block
        counts, skipped = self.stale.setdefault(id(pool), ({}, [0]))
        while True:
            left = counts.get(block)
            if left is None:
                left = pool._stale.get(block, 0)
            if not left:
                state[2] = head
                return block
            counts[block] = left - 1
            skipped[0] += 1
            head += 1
            if head >= len(queue):
                state[2] = head
                return None
            block = queue[head]

    def listed(self, cache_map: CacheMap, key: bytes) -> list[int] | HeldBlocks:
        """The planned blocks of ``key`` in a group's prefix-cache map (`HeldBlocks`: the
        plan's changes to its entry, not a copy; or a list the plan made), written back by
        `CoordinatorCore._emit_boundary`."""
        planned = self.lists.get((id(cache_map), key))
        if planned is None:
            planned = self.lists[id(cache_map), key] = (
                cache_map,
                key,
                HeldBlocks(cache_map.get(key)),
            )
        return planned[2]

    def _new_keys(self, cache_map: CacheMap, keys: Sequence[bytes]) -> bool:
        """Whether ``keys`` are distinct and none is planned in ``cache_map``'s lists."""
        return len(set(keys)) == len(keys) and (
            not self.lists or self.lists.keys().isdisjoint(zip(repeat(id(cache_map)), keys))
        )

    def evict_run(self, ops: Ops, pool: BlockPool, run: Sequence[int]) -> None:
        """Plan the eviction from the prefix cache of the cached blocks among ``run`` (taken
        from the queue's front): in passes in C where the pool has one map and each block is
        its key's one block (a prompt's blocks, cached when it ended), else one by one."""
        cached = pool._cached
        gone = sorted(cached.keys() & run)
        sole = pool.sole_keys(gone)  # one map, each block its key's one block
        if sole is not None and self._new_keys(pool._maps[0], sole):
            # (each key's entry a list of its own, made in C: an empty one per key)
            cache_map = pool._maps[0]
            emptied: Iterator[list[int]] = map(list, repeat((), len(sole)))
            self.lists.update(
                zip(
                    zip(repeat(id(cache_map)), sole),
                    zip(repeat(cache_map), sole, emptied),
                    strict=True,
                )
            )
            ops.append((commit, map(cached.pop, gone)))
            ops.append(flag_op(pool._free_cached, gone, 0))
            return
        for block, key in zip(gone, map(cached.__getitem__, gone), strict=True):
            self.listed(pool.map_of(block, key), key).remove(block)
            ops.append((cached.pop, block, None))
            ops.append((setitem, pool._free_cached, block, 0))

    def register_run(
        self,
        ops: Ops,
        pool: BlockPool,
        cache_map: CacheMap,
        blocks: Sequence[int],
        keys: Sequence[bytes],
    ) -> None:
        """Plan the registration of ``blocks`` (held, none cached after the plan) under
        ``keys`` in ``cache_map``: in passes in C where the keys are new to it (a prompt's
        content not seen before), else one by one. Each entry holds the id's own int object
        (`BlockPool.add_map`)."""
        blocks = list(map(pool._ids.__getitem__, blocks))
        ops.append((pool._cached.update, dict(zip(blocks, keys, strict=True))))
        if not cache_map.keys().isdisjoint(keys) or not self._new_keys(cache_map, keys):
            for block, key in zip(blocks, keys, strict=True):
                self.listed(cache_map, key).append(block)
            return
        # (each key's entry a one-block list of its own, made in C)
        self.lists.update(
            zip(
                zip(repeat(id(cache_map)), keys),
                zip(repeat(cache_map), keys, map(list, zip(blocks))),
                strict=True,
            )
        )


def _check_each_once(request_ids: Sequence[str]) -> None:
    """Raise `RequestError` naming the first request of a batched step that is not an id
    (`check_request_id`: an unhashable one must not reach the set) or that it lists twice."""
    seen: set[str] = set()
    for request_id in request_ids:
        if type(request_id) is not str:
            check_request_id(request_id)
        if request_id in seen:
            raise RequestError(
                f"request {request_id!r} appears twice in one batched step; give each "
                "running request once",
                request_id=request_id,
            )
        seen.add(request_id)


def _slots_across(
    slab: array[int],
    start: int,
    skipped: int,
    length: int,
    size: int,
    first: int,
    end: int,
    taken: int,
) -> list[int]:
    """The cache slots of slots ``first .. end − 1`` of a table (its live entries ``slab[start
    : start + length]`` after ``skipped`` evicted ones) followed by the block ``taken``."""
    out: list[int] = []
    while first < end:
        index = first // size
        stop = min(end, (index + 1) * size)
        at = index - skipped
        base = ((slab[start + at] if at < length else taken) - index) * size
        out.extend(range(base + first, base + stop))
        first = stop
    return out


def _hold(fields: list[int], rows: int, empty_too: bool = False) -> None:
    """Send a group's next step that adds positions to the general path (no slack), and with
    ``empty_too`` an empty one as well (no eviction point assumed)."""
    fields[ANCHOR], fields[SLACK] = rows, 0
    if empty_too:
        fields[EVICT] = 0


class RequestView:
    """A live read-only view of one admitted request (see `CoordinatorCore.requests`).

    Attributes read the core's state at each access, as lists in group order: ``tables``
    (the null block where evicted), ``num_rows`` (kernel unit), ``num_slots``, ``step_rows``,
    ``skipped``, ``max_len`` (slots), ``caps`` (cache blocks), and ``extra``
    (`ExtraView`, None without content or speculation).
    """

    __slots__ = ("_core", "_id")

    def __init__(self, core: CoordinatorCore, request_id: str) -> None:
        self._core, self._id = core, request_id

    def _field(self, name: int) -> list[int]:
        core = self._core
        o = core._offset(self._id)
        return [core.table.field(o, g, name) for g in range(len(core.names))]

    @property
    def tables(self) -> list[list[int]]:
        core = self._core
        o = core._offset(self._id)
        return [core.table.table(o, g) for g in range(len(core.names))]

    @property
    def num_rows(self) -> list[int]:
        core = self._core
        o = core._offset(self._id)
        return [core.table.rows(o, g) for g in range(len(core.names))]

    @property
    def num_slots(self) -> list[int]:
        return [-(-r // p) for r, p in zip(self.num_rows, self._core._pool, strict=True)]

    @property
    def step_rows(self) -> list[int]:
        return self._field(STEP)

    @property
    def skipped(self) -> list[int]:
        return self._field(SKIPPED)

    @property
    def max_len(self) -> list[int]:
        return self._field(MAXLEN)

    @property
    def caps(self) -> list[int]:
        return self._core.ledger.caps_of(self._field(MAXLEN))

    @property
    def extra(self) -> ExtraView | None:
        core = self._core
        o = core._offset(self._id)
        if o not in core.extras and o not in core.specs:
            return None
        return ExtraView(core, o)


class ExtraView:
    """A request's prefix and speculation state, read live: ``hashes`` (per group, its
    content's block hashes, None without content), ``registered`` and ``spec`` (per group)."""

    __slots__ = ("_core", "_o")

    def __init__(self, core: CoordinatorCore, o: int) -> None:
        self._core, self._o = core, o

    @property
    def hashes(self) -> list[list[bytes] | None]:
        extra = self._core.extras.get(self._o)
        if extra is None:
            return [None] * len(self._core.names)
        if isinstance(extra, PrefixPart):  # (one group)
            return [list(extra.hashes)]
        if isinstance(extra, RestingExtras):
            return [None if s < 0 else list(extra.hashes(s)) for s in extra.stream_of]
        return [None if s < 0 else list(extra.streams[s].hashes) for s in extra.stream_of]

    @property
    def registered(self) -> list[int]:
        extra = self._core.extras.get(self._o)
        if extra is None:
            return [0] * len(self._core.names)
        if isinstance(extra, PrefixPart):  # (one group, every full block registered)
            return [len(extra.hashes)]
        return list(extra.registered)

    @property
    def spec(self) -> list[int]:
        return list(self._core.specs.get(self._o, (0,) * len(self._core.names)))


class _Requests(Mapping[str, RequestView]):
    __slots__ = ("_core",)

    def __init__(self, core: CoordinatorCore) -> None:
        self._core = core

    def __getitem__(self, request_id: str) -> RequestView:
        if request_id not in self._core.table.offsets:
            raise KeyError(request_id)
        return RequestView(self._core, request_id)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._core.table.offsets))

    def __reversed__(self) -> Iterator[str]:
        return reversed(list(self._core.table.offsets))

    def __len__(self) -> int:
        return len(self._core.table.offsets)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._core.table.offsets
