"""Block ids and slot mappings: the allocator's integer sequences, each a type of its own.

A request's block table and a step's slot mapping are both sequences of plain ints, and the
kernels index memory with either: a slot mapping passed where a block table goes reads pages
``block_size`` times too far (a cache slot ``s`` lives in block ``s // block_size``), and a
column of one group's table used in another group's table reads the wrong page when their
block sizes differ. So each is an immutable container of its own, and neither is a
``Sequence[int]`` to mypy (they iterate, they have a length, but they inherit no
``Sequence``): a constructor that takes plain ints refuses the other container, statically
(``[arg-type]``) and at run time (`UnitTypeError`, naming both):

* `BlockIds`: one request's block table in one group: cache-block ids, 0 the null block (an
  evicted or never-allocated entry). It is indexed with a block-table column, a
  ``Position[CacheBlocks]`` (what a view's or handle's ``block_of`` returns), and a column of
  another group is refused with both groups named (a plain int index names no group: it is
  the caller's own reading);
* `SlotIds`: a step's slot mapping in the manager's unit (``SlotIds[PooledBlocks]`` of a pooled
  group, ``SlotIds[Tokens]``): the cache slot of each slot the step touches, slot ``s`` of
  the request at ``table[s // block_size] × block_size + s % block_size``.

Both carry the group that made them (``owner``, None for one built by hand): by name at run
time, and as a type parameter where the group was asked for by its marker
(``BlockIds[Sliding]``, `kvunits.contracts.GroupMarker`), so that mypy refuses a column of
another marked group (``Position[CacheBlocks, Full]``) as the run time does. The plain ints
leave with `BlockIds.ids_in` and `SlotIds.slots_in`, naming their unit; the kernels' tensors
are built from them without one (`kvunits.kernels.BlockTable.from_rows`,
`kvunits.kernels.SlotMapping.from_ids`).

Example:
    >>> from kvunits.contracts import Position, CacheBlocks
    >>> table = BlockIds([5, 7], owner="text")
    >>> table[Position(1, CacheBlocks)], len(table), table
    (7, 2, BlockIds([5, 7], owner='text'))
    >>> SlotIds(table, Tokens)
    Traceback (most recent call last):
    ...
    kvunits.contracts.errors.UnitTypeError: ...
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final, Generic, NoReturn, final, overload

from ._describe import describe
from ._group_marker import GroupT, marker_name
from ._kinds import Position
from ._quantity import CacheBlocks, PooledBlocks, SlotUnit, Tokens
from .errors import UnitAttributeError, UnitTypeError, UnitValueError

_SLOT_UNITS: Final = (PooledBlocks, Tokens)


def _ints(name: str, values: object, minimum: int) -> tuple[int, ...]:
    """``values`` as a tuple of ints ``>= minimum``; the other container refused by name."""
    if isinstance(values, (BlockIds, SlotIds)):
        own = (
            "a block table (cache-block ids)"
            if isinstance(values, BlockIds)
            else (f"a slot mapping (cache slots of {values.unit.unit})")
        )
        raise UnitTypeError(
            f"{name} takes plain ints, got {own}: a block table and a slot mapping are not "
            "each other (slot s lives in block s // block_size); build each from what it "
            "counts",
            field=name,
            expected=name,
            got=type(values).__name__,
        )
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, range)):
        raise UnitTypeError(
            f"{name} takes a sequence of ints (a list, tuple or range), got {describe(values)}",
            field=name,
            expected="Sequence[int]",
            got=describe(values),
        )
    out = tuple(values)
    for i, v in enumerate(out):
        if type(v) is not int or v < minimum:
            raise UnitValueError(
                f"{name}[{i}] must be an int >= {minimum}, got {describe(v)}",
                field=f"{name}[{i}]",
                expected=f"int >= {minimum}",
                got=describe(v),
            )
    return out


def _owner(owner: object) -> str | None:
    return marker_name(owner)


@final
class BlockIds(Generic[GroupT]):
    """One request's block table in one group: cache-block ids, ``0`` the null block.

    Args:
        ids: the ids, in column order (a list, tuple or range of ints >= 0).
        owner: the group the table belongs to: its name, or its `GroupMarker` (the table is
            then typed with it); the coordinator sets it.

    Raises:
        UnitTypeError: ``ids`` is a `SlotIds` (a slot mapping) or not a sequence.
        UnitValueError: an id is not an int >= 0.
    """

    __slots__ = ("_ids", "_owner")
    _ids: tuple[int, ...]
    _owner: str | None

    def __init__(self, ids: Sequence[int], *, owner: str | type[GroupT] | None = None) -> None:
        _set_ids(self, _ints("BlockIds", ids, 0))
        _set_owner(self, _owner(owner))

    @classmethod
    def _trusted(cls, ids: tuple[int, ...], owner: str | None) -> BlockIds[Any]:
        # The coordinator's own tables: already ints >= 0.
        new: BlockIds[Any] = object.__new__(cls)
        _set_ids(new, ids)
        _set_owner(new, owner)
        return new

    @property
    def owner(self) -> str | None:
        """The group the table belongs to (None: built by hand)."""
        return self._owner

    def ids_in(self, unit: type[CacheBlocks]) -> tuple[int, ...]:
        """The ids as plain ints, ``unit`` naming what they count (`CacheBlocks`)."""
        if unit is not CacheBlocks:
            raise UnitTypeError(
                f"block ids count cache_block, not {getattr(unit, 'unit', describe(unit))}",
                field="unit",
                expected="cache_block",
                got=describe(unit),
            )
        return self._ids

    @overload
    def __getitem__(self, column: Position[CacheBlocks, GroupT] | int) -> int: ...
    @overload
    def __getitem__(self, column: slice) -> BlockIds[GroupT]: ...
    def __getitem__(
        self, column: Position[CacheBlocks, GroupT] | int | slice
    ) -> int | BlockIds[GroupT]:
        """The id in ``column`` (a block-table column: ``view.block_of(position)``, checked to
        be this group's; or a plain int index, which names no group), or a slice.

        Raises:
            UnitTypeError: another group's column, or a position of a sequence (convert it
                with the view's ``block_of``).
            IndexError: past the table's end.
        """
        if type(column) is slice:
            return BlockIds._trusted(self._ids[column], self.owner)
        if type(column) is int:
            return self._ids[column]
        given: object = column  # checked at run time too: mypy's view is the annotation's
        if type(given) is not Position or given.unit is not CacheBlocks:
            raise UnitTypeError(
                f"a block table is indexed with a column, Position[CacheBlocks], got "
                f"{describe(given)}: a position of a sequence lives in column "
                "view.block_of(position) of its own group's table",
                field="column",
                expected="Position[CacheBlocks]",
                got=describe(given),
            )
        owner = given.owner
        if owner is not None and self.owner is not None and owner != self.owner:
            raise UnitTypeError(
                f"column {given._n} was computed by group {owner!r} (its block size) but "
                f"indexes the block table of group {self.owner!r}: groups cut positions into "
                f"blocks of their own size; ask group {self.owner!r}'s view or handle for the "
                "column",
                field="column",
                expected=f"a column of group {self.owner!r}",
                got=f"a column of group {owner!r}",
            )
        return self._ids[given._n]

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[int]:
        return iter(self._ids)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("BlockIds is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_block_ids, (self._ids, self.owner))

    def __repr__(self) -> str:
        owner = "" if self.owner is None else f", owner={self.owner!r}"
        return f"BlockIds({list(self._ids)}{owner})"

    def __eq__(self, other: object) -> bool:
        """Equal to a table of the same ids and group, or to the plain ids (a list or tuple
        of ints: what a test expects); compared with a slot mapping, `UnitTypeError` (at run
        time only: a visible ``__eq__`` switches mypy's strict equality off, and comparing a
        table with its expected ids is the common case)."""
        if type(other) is BlockIds:
            return self._ids == other._ids and self.owner == other.owner
        if type(other) is SlotIds:
            _compare_refused(self, other)
        if isinstance(other, (list, tuple)):
            return self._ids == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(("BlockIds", self._ids, self.owner))

    if not TYPE_CHECKING:

        @property
        def ids(self):
            raise UnitAttributeError(
                "BlockIds has no .ids: read ids_in(CacheBlocks), which names what they count",
                field="ids",
                expected="ids_in(CacheBlocks)",
                got=".ids",
            )


@final
class SlotIds(Generic[SlotUnit, GroupT]):
    """A step's slot mapping in the manager's unit: the cache slot of each slot it touches.

    Args:
        slots: the cache slots, in order (ints >= -1; -1 marks an entry to skip, as the
            kernels' slot mappings do).
        unit: the unit a slot counts: `PooledBlocks` (a pooled group) or `Tokens`.
        owner: the group the step belongs to: its name or its `GroupMarker` (the coordinator
            sets it).

    Raises:
        UnitTypeError: ``slots`` is a `BlockIds` (a block table), or ``unit`` not a slot unit.
        UnitValueError: a slot is not an int >= -1.
    """

    __slots__ = ("_owner", "_slots", "unit")
    _slots: tuple[int, ...]
    _owner: str | None
    unit: type[SlotUnit]

    def __init__(
        self,
        slots: Sequence[int],
        unit: type[SlotUnit],
        *,
        owner: str | type[GroupT] | None = None,
    ) -> None:
        if unit not in _SLOT_UNITS:
            raise UnitTypeError(
                f"SlotIds counts pooled_block or token slots, got {describe(unit)}",
                field="unit",
                expected="PooledBlocks | Tokens",
                got=describe(unit),
            )
        _set_slots(self, _ints("SlotIds", slots, -1))
        _set_slot_unit(self, unit)
        _set_slot_owner(self, _owner(owner))

    @classmethod
    def _trusted(
        cls, slots: tuple[int, ...], unit: type[SlotUnit], owner: str | None
    ) -> SlotIds[SlotUnit, Any]:
        new: SlotIds[SlotUnit, Any] = object.__new__(cls)
        _set_slots(new, slots)
        _set_slot_unit(new, unit)
        _set_slot_owner(new, owner)
        return new

    @property
    def owner(self) -> str | None:
        """The group the step belongs to (None: built by hand)."""
        return self._owner

    def slots_in(self, unit: type[SlotUnit]) -> tuple[int, ...]:
        """The cache slots as plain ints, ``unit`` naming what a slot counts (its own)."""
        if unit is not self.unit:
            raise UnitTypeError(
                f"this slot mapping counts {self.unit.unit} slots, not "
                f"{getattr(unit, 'unit', describe(unit))}",
                field="unit",
                expected=self.unit.unit,
                got=describe(unit),
            )
        return self._slots

    def __getitem__(self, index: int) -> int:
        return self._slots[index]

    def __len__(self) -> int:
        return len(self._slots)

    def __iter__(self) -> Iterator[int]:
        return iter(self._slots)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("SlotIds is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_slot_ids, (self._slots, self.unit, self.owner))

    def __repr__(self) -> str:
        owner = "" if self.owner is None else f", owner={self.owner!r}"
        return f"SlotIds({list(self._slots)}, {self.unit.__name__}{owner})"

    def __eq__(self, other: object) -> bool:
        """Equal to a slot mapping of the same slots, unit and group, or to the plain slots (a
        list or tuple of ints); compared with a block table, `UnitTypeError` (run time)."""
        if type(other) is SlotIds:
            return (
                self._slots == other._slots
                and self.unit is other.unit
                and self.owner == other.owner
            )
        if type(other) is BlockIds:
            _compare_refused(self, other)
        if isinstance(other, (list, tuple)):
            return self._slots == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(("SlotIds", self._slots, self.unit.unit, self.owner))


_set_ids = BlockIds.__dict__["_ids"].__set__
_set_owner = BlockIds.__dict__["_owner"].__set__
_set_slots = SlotIds.__dict__["_slots"].__set__
_set_slot_unit = SlotIds.__dict__["unit"].__set__
_set_slot_owner = SlotIds.__dict__["_owner"].__set__


def _compare_refused(left: object, right: object) -> NoReturn:
    raise UnitTypeError(
        f"cannot compare {type(left).__name__} with {describe(right)}: compare a table with a "
        "table, a slot mapping with a slot mapping (read plain ints with ids_in / slots_in)",
        expected=type(left).__name__,
        got=describe(right),
    )


def _block_ids(ids: tuple[int, ...], owner: str | None) -> BlockIds[Any]:
    return BlockIds._trusted(ids, owner)


def _slot_ids(slots: tuple[int, ...], unit: type[Any], owner: str | None) -> SlotIds[Any]:
    return SlotIds._trusted(slots, unit, owner)
