"""Integer tensors tagged with the unit they count: the kernels' metadata arguments.

A bare ``torch.Tensor`` of lengths says nothing about whether it counts encoder tokens or
pooled blocks, which is the seed's bug. These thin frozen wrappers carry the unit class next
to the tensor, so that

* mypy sees ``SeqLens[PooledBlocks]`` where the attention wrapper wants
  ``SeqLens[EncoderTokens]`` (tied to its ``KernelSpec[EncoderTokens]``) and reports it, and
* the wrappers check ``.unit`` again at run time and raise `kvunits.contracts.UnitTypeError`.

The wrappers cost nothing on the GPU: they hold the tensor, they never copy it.

Example:
    >>> import torch
    >>> from kvunits.contracts import EncoderTokens
    >>> lens = SeqLens(torch.tensor([54, 97], dtype=torch.int32), EncoderTokens)
    >>> lens
    SeqLens[encoder_token](tensor([54, 97], dtype=torch.int32))
    >>> lens.tensor_in(EncoderTokens)
    tensor([54, 97], dtype=torch.int32)

The tensor leaves a wrapper only through ``tensor_in(unit)``, naming its unit, and a tensor
object is wrapped in one unit for its lifetime: ``SeqLens(t, EncoderTokens)`` of a tensor
already wrapped as ``SeqLens[PooledBlocks]`` raises `kvunits.contracts.UnitTypeError` (the
conversion is
`unpool_seq_lens`, which says where the encoder lengths come from).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, NoReturn, final

import torch

from kvunits.contracts import (
    BlockIds,
    CacheBlocks,
    EncoderTokens,
    IntQuantity,
    PooledBlocks,
    PoolFactor,
    SeqUnit,
    SlotIds,
    SlotUnit,
    Tokens,
    UnitAttributeError,
    UnitTypeError,
    UnitValueError,
)
from kvunits.contracts.errors import KernelTypeError, KernelValueError
from kvunits.contracts.internal import check_pool, describe

_INDEX_DTYPES = (torch.int32, torch.int64)
_SEQ_UNITS: tuple[type[EncoderTokens | PooledBlocks | Tokens], ...] = (
    EncoderTokens,
    PooledBlocks,
    Tokens,
)
_SLOT_UNITS: tuple[type[PooledBlocks | Tokens], ...] = (PooledBlocks, Tokens)


def _check_tensor(name: str, tensor: object, ndim: int, axes: str) -> torch.Tensor:
    if not isinstance(tensor, torch.Tensor):
        raise KernelTypeError(
            f"{name} wraps a torch integer tensor of shape {axes}, got {describe(tensor)}",
            argument=name,
        )
    if tensor.dim() != ndim:
        raise KernelValueError(
            f"{name} must have shape {axes} ({ndim}-D), got {tuple(tensor.shape)}", argument=name
        )
    if tensor.dtype not in _INDEX_DTYPES:
        raise KernelTypeError(f"{name} must be int32 or int64, got {tensor.dtype}", argument=name)
    return tensor


def _check_unit(name: str, unit: object, allowed: tuple[type[object], ...]) -> None:
    if unit not in allowed:
        names = " | ".join(u.__name__ for u in allowed)
        raise UnitTypeError(
            f"{name} counts {names}, got {describe(unit)}; pass the unit class, e.g. "
            f"{name}(tensor, {allowed[0].__name__})",
            field=name,
            expected=names,
            got=describe(unit),
        )


class _UnitTensor:
    """The body of the unit-tagged tensors: the tensor, its unit, the checks (see module doc).

    The tensor leaves with `tensor_in`, naming its unit; a tensor object carries one unit
    for its lifetime, so wrapping one tensor in a second unit is refused (the relabelling of
    ``SeqLens(pooled_lens.tensor_in(PooledBlocks), EncoderTokens)``; the conversion is
    `unpool_seq_lens`, which makes a new tensor).
    """

    __slots__ = ("__weakref__", "_tensor", "unit")
    _name: ClassVar[str]
    _axes: ClassVar[str]
    _units: ClassVar[tuple[type[IntQuantity], ...]]
    _tensor: torch.Tensor
    unit: type[Any]

    def __init__(self, tensor: torch.Tensor, unit: type[Any]) -> None:
        _check_tensor(self._name, tensor, 1, self._axes)
        _check_unit(self._name, unit, self._units)
        _claim(self._name, tensor, unit)
        _set_tensor(self, tensor)
        _set_unit(self, unit)

    def _tensor_in(self, unit: type[object]) -> torch.Tensor:
        if unit is not self.unit:
            _wrong_unit(f"{self._name}.tensor_in", self.unit, unit)
        return self._tensor

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __repr__(self) -> str:
        return f"{self._name}[{self.unit.unit}]({self._tensor!r})"

    if not TYPE_CHECKING:

        @property
        def tensor(self):
            raise UnitAttributeError(
                f"{self._name} has no .tensor: read tensor_in({self.unit.__name__}), which "
                "names the unit its values count",
                field="tensor",
                expected=f"tensor_in({self.unit.__name__})",
                got=".tensor",
            )


_set_tensor = _UnitTensor.__dict__["_tensor"].__set__
_set_unit = _UnitTensor.__dict__["unit"].__set__

#: Which unit each live tensor was wrapped in, by id (the weak reference drops the entry
#: with the tensor, so a recycled id is not mistaken for it).
_UNIT_OF: dict[int, tuple[weakref.ref[torch.Tensor], type[IntQuantity]]] = {}


def _claim(name: str, tensor: torch.Tensor, unit: type[IntQuantity]) -> None:
    key = id(tensor)
    entry = _UNIT_OF.get(key)
    if entry is not None and entry[0]() is tensor:
        if entry[1] is not unit:
            hint = _CONVERT_HINT.get((entry[1].unit, unit.unit), "")
            raise UnitTypeError(
                f"{name}: this tensor already counts {entry[1].unit} (it was wrapped in that "
                f"unit), so it cannot count {unit.unit} too: relabelling states where the "
                f"values came from{hint or '; convert it with a named function'}",
                field=name,
                expected=unit.unit,
                got=f"a tensor of {entry[1].unit}",
            )
        return

    def drop(ref: weakref.ref[torch.Tensor], key: int = key) -> None:
        if _UNIT_OF.get(key, (None,))[0] is ref:
            del _UNIT_OF[key]

    _UNIT_OF[key] = (weakref.ref(tensor, drop), unit)


@final
class SeqLens(_UnitTensor, Generic[SeqUnit]):
    """Per-request sequence lengths *after* this step, tagged with their unit.

    Args:
        tensor: shape ``[num_requests]``, int32 or int64; entry r counts the positions of
            request r, in ``unit``.
        unit: `EncoderTokens` (a pooled layer's kernel), `PooledBlocks` (its manager) or
            `Tokens`.
    """

    __slots__ = ()
    _name: ClassVar[str] = "SeqLens"
    _axes: ClassVar[str] = "[num_requests]"
    _units: ClassVar[tuple[type[IntQuantity], ...]] = _SEQ_UNITS
    unit: type[SeqUnit]

    def __init__(self, tensor: torch.Tensor, unit: type[SeqUnit]) -> None:
        super().__init__(tensor, unit)

    def tensor_in(self, unit: type[SeqUnit]) -> torch.Tensor:
        """The tensor, ``unit`` being its own unit (mypy and the run time check it).

        Raises:
            UnitTypeError: ``unit`` is another unit than the tensor's.
        """
        return self._tensor_in(unit)


@final
class QueryStartLoc(_UnitTensor, Generic[SeqUnit]):
    """Where each request's rows of this step start: the cumulative query lengths.

    Args:
        tensor: shape ``[num_requests + 1]``, int32 or int64, non-decreasing, ``tensor[0] ==
            0``; the rows of request r are ``tensor[r]:tensor[r + 1]`` of the step's query
            (and new K/V) tensors, one row per position of ``unit``.
        unit: the unit one row counts (`EncoderTokens` for a pooled layer's kernel).
    """

    __slots__ = ()
    _name: ClassVar[str] = "QueryStartLoc"
    _axes: ClassVar[str] = "[num_requests + 1]"
    _units: ClassVar[tuple[type[IntQuantity], ...]] = _SEQ_UNITS
    unit: type[SeqUnit]

    def __init__(self, tensor: torch.Tensor, unit: type[SeqUnit]) -> None:
        super().__init__(tensor, unit)
        if tensor.shape[0] < 1:
            raise KernelValueError(
                "QueryStartLoc needs at least one entry (the leading 0)", argument="QueryStartLoc"
            )

    def tensor_in(self, unit: type[SeqUnit]) -> torch.Tensor:
        """The tensor, ``unit`` being its own unit (mypy and the run time check it).

        Raises:
            UnitTypeError: ``unit`` is another unit than the tensor's.
        """
        return self._tensor_in(unit)

    @property
    def num_requests(self) -> int:
        return int(self._tensor.shape[0]) - 1


@final
class SlotMapping(_UnitTensor, Generic[SlotUnit]):
    """The cache slots a step writes, in the *manager's* unit, one entry per slot.

    Slot ``s`` lives in cache block ``s // block_size`` at slot offset ``s % block_size``
    (``block_size`` in slots: pooled blocks for a pooled layer). For a pooled layer an entry
    stands for up to P encoder-token rows; the write kernel expands it (see `write_kv`).

    Args:
        tensor: shape ``[num_slots_of_step]``, int32 or int64; -1 marks an entry to skip.
        unit: `PooledBlocks` (pooled layer) or `Tokens`.
    """

    __slots__ = ()
    _name: ClassVar[str] = "SlotMapping"
    _axes: ClassVar[str] = "[num_slots_of_step]"
    _units: ClassVar[tuple[type[IntQuantity], ...]] = _SLOT_UNITS
    unit: type[SlotUnit]

    def __init__(self, tensor: torch.Tensor, unit: type[SlotUnit]) -> None:
        super().__init__(tensor, unit)

    @classmethod
    def from_ids(
        cls,
        slots: SlotIds[SlotUnit],
        *,
        dtype: torch.dtype = torch.int64,
        device: torch.device | str | None = None,
    ) -> SlotMapping[SlotUnit]:
        """The slot mapping of a step as the coordinator gives it (`SlotIds`, which carries
        its unit): ``SlotMapping.from_ids(coord.kernel_inputs(r, handle).slot_mapping)``.

        Raises:
            UnitTypeError: ``slots`` is a block table (`BlockIds`) or plain ints: a slot
                mapping is built from a slot mapping.
        """
        given: object = slots
        if type(given) is not SlotIds:
            raise UnitTypeError(
                f"SlotMapping.from_ids takes the SlotIds of a step (KernelInputs.slot_mapping), "
                f"got {describe(given)}"
                + (
                    ": a block table is not a slot mapping (slot s lives in block "
                    "s // block_size); build a BlockTable from it"
                    if type(given) is BlockIds
                    else ""
                ),
                field="slots",
                expected="SlotIds",
                got=describe(given),
            )
        data = torch.tensor(slots.slots_in(slots.unit), dtype=dtype, device=device)
        return cls(data, slots.unit)

    def tensor_in(self, unit: type[SlotUnit]) -> torch.Tensor:
        """The tensor, ``unit`` being its own unit (mypy and the run time check it).

        Raises:
            UnitTypeError: ``unit`` is another unit than the tensor's.
        """
        return self._tensor_in(unit)


@final
@dataclass(frozen=True, slots=True, eq=False, repr=False)
class BlockTable:
    """Per-request block tables: cache-block ids (unit ``cache_block``).

    Column k of row r holds the cache block with positions ``k × tokens_per_block`` to
    ``(k + 1) × tokens_per_block − 1`` of request r (in the kernel's unit); 0 is the null block
    (evicted or never allocated).

    Attributes:
        tensor: shape ``[num_requests, max_blocks_per_request]``, int32 or int64.
    """

    tensor: torch.Tensor

    def __post_init__(self) -> None:
        given: object = self.tensor
        if isinstance(given, (SlotIds, SlotMapping)):
            raise UnitTypeError(
                f"BlockTable takes cache-block ids, got a slot mapping ({describe(given)}): slot "
                "s lives in block s // block_size; pass the requests' block tables "
                "(BlockTable.from_rows(coord.block_table(r, handle) for r in ...))",
                field="BlockTable",
                expected="cache-block ids",
                got=describe(given),
            )
        _check_tensor("BlockTable", self.tensor, 2, "[num_requests, max_blocks_per_request]")

    @classmethod
    def from_rows(
        cls,
        rows: Iterable[BlockIds],
        *,
        width: int | None = None,
        dtype: torch.dtype = torch.int32,
        device: torch.device | str | None = None,
    ) -> BlockTable:
        """The block tables of requests, one `BlockIds` each (the coordinator's), padded with
        the null block (0) to ``width`` columns (default: the longest row).

        Raises:
            UnitTypeError: a row is not `BlockIds` (a slot mapping, plain ints), or the rows
                belong to different groups (each group has a table of its own).
            KernelValueError: a row is longer than ``width``.
        """
        given: list[object] = list(rows)
        owners: set[str] = set()
        for i, row in enumerate(given):
            if type(row) is not BlockIds:
                raise UnitTypeError(
                    f"BlockTable.from_rows takes one BlockIds per request "
                    f"(coord.block_table(r, handle)), got {describe(row)} at row {i}"
                    + (
                        ": a slot mapping is not a block table (slot s lives in block "
                        "s // block_size)"
                        if type(row) is SlotIds
                        else ""
                    ),
                    field=f"rows[{i}]",
                    expected="BlockIds",
                    got=describe(row),
                )
            if row.owner is not None:
                owners.add(row.owner)
        named = owners
        if len(named) > 1:
            raise UnitTypeError(
                f"the rows belong to groups {sorted(named)}: one BlockTable holds one group's "
                "tables (the groups' block sizes differ, and so do their columns)",
                field="rows",
                expected="rows of one group",
                got=", ".join(sorted(named)),
            )
        ids = [row.ids_in(CacheBlocks) for row in given]  # type: ignore[attr-defined]
        longest = max((len(r) for r in ids), default=0)
        columns = longest if width is None else width
        if longest > columns:
            raise KernelValueError(
                f"a block table row has {longest} columns, more than width {columns}",
                argument="width",
            )
        data = torch.zeros((len(ids), columns), dtype=dtype, device=device)
        for r, row_ids in enumerate(ids):
            if row_ids:
                data[r, : len(row_ids)] = torch.tensor(row_ids, dtype=dtype)
        return cls(data)

    def __repr__(self) -> str:
        return f"BlockTable[cache_block]({self.tensor!r})"


def unpool_seq_lens(
    seq_lens: SeqLens[PooledBlocks],
    pool: PoolFactor,
    *,
    last_block_tokens: torch.Tensor | None = None,
) -> SeqLens[EncoderTokens]:
    """The exact encoder-token lengths of requests whose lengths the manager counts in slots.

    ``s`` full pooled blocks hold ``s × P`` encoder tokens (`kvunits.contracts.unpool_length`); when
    the last pooled block of a request is partial, the kernel needs the exact length
    ``(s − 1) × P + last_block_tokens``, not the rounded-up one, or it would attend to
    positions that do not exist yet.

    Args:
        seq_lens: lengths in pooled blocks, shape ``[num_requests]``.
        pool: the layer's P.
        last_block_tokens: encoder tokens in each request's last pooled block, in ``[1, P]``
            (ignored where the length is 0); None: every last block is full.

    Returns:
        Lengths in encoder tokens, same shape, dtype and device.

    Raises:
        UnitTypeError: ``seq_lens`` does not count pooled blocks, or ``pool`` is no PoolFactor.
        UnitValueError: a ``last_block_tokens`` entry is outside ``[1, P]``.
        KernelValueError: ``last_block_tokens`` has another shape than ``seq_lens``.

    Example:
        >>> import torch
        >>> from kvunits.contracts import PooledBlocks, PoolFactor
        >>> lens = SeqLens(torch.tensor([188, 14]), PooledBlocks)
        >>> tokens = unpool_seq_lens(lens, PoolFactor(4), last_block_tokens=torch.tensor([2, 4]))
        >>> tokens.tensor_in(EncoderTokens)
        tensor([750,  56])
    """
    slots = check_seq_lens(seq_lens, PooledBlocks, "seq_lens")
    p = check_pool(pool).tokens_per_block
    tokens = slots * p
    if last_block_tokens is not None:
        if last_block_tokens.shape != slots.shape:
            raise KernelValueError(
                f"last_block_tokens must have shape {tuple(slots.shape)} (one entry "
                f"per request), got {tuple(last_block_tokens.shape)}",
                argument="last_block_tokens",
            )
        tail = last_block_tokens.to(device=tokens.device, dtype=tokens.dtype)
        present = slots > 0
        bad = present & ((tail < 1) | (tail > p))
        if bool(bad.any()):
            r = int(bad.nonzero()[0, 0])
            raise UnitValueError(
                f"last_block_tokens[{r}] is {int(tail[r])} encoder_token, but a pooled block "
                f"holds 1 to {p} (P = {p})",
                field="last_block_tokens",
                expected=f"1..{p} encoder_token",
                got=f"{int(tail[r])} encoder_token",
            )
        tokens = torch.where(present, tokens - (p - tail), tokens)
    return SeqLens(tokens, EncoderTokens)


def check_seq_lens(value: object, unit: type[SeqUnit], field: str) -> torch.Tensor:
    """Entry check: ``value`` is a `SeqLens` counting ``unit``; return its tensor.

    Raises:
        UnitTypeError: a bare tensor, or lengths in another unit (naming the conversion).
    """
    if not isinstance(value, SeqLens):
        _not_wrapped(field, value, "SeqLens", unit)
    if value.unit is not unit:
        _wrong_unit(field, value.unit, unit)
    return value._tensor


def check_query_start_loc(value: object, unit: type[SeqUnit], field: str) -> torch.Tensor:
    """Entry check: ``value`` is a `QueryStartLoc` counting ``unit``; return its tensor."""
    if not isinstance(value, QueryStartLoc):
        _not_wrapped(field, value, "QueryStartLoc", unit)
    if value.unit is not unit:
        _wrong_unit(field, value.unit, unit)
    return value._tensor


def check_slot_mapping(
    value: object, unit: type[PooledBlocks] | type[Tokens], field: str
) -> torch.Tensor:
    """Entry check: ``value`` is a `SlotMapping` counting ``unit`` (the manager's unit);
    return its tensor."""
    if not isinstance(value, SlotMapping):
        _not_wrapped(field, value, "SlotMapping", unit)
    if value.unit is not unit:
        _wrong_unit(field, value.unit, unit)
    return value._tensor


def check_block_table(value: object, field: str) -> BlockTable:
    """Entry check: ``value`` is a `BlockTable`."""
    if not isinstance(value, BlockTable):
        raise UnitTypeError(
            f"{field} must be a BlockTable of cache-block ids, got {describe(value)}; wrap "
            f"the tensor: BlockTable(tensor)",
            field=field,
            expected="BlockTable (cache_block ids)",
            got=describe(value),
        )
    return value


_CONVERT_HINT = {
    ("pooled_block", "encoder_token"): (
        "; convert with kvunits.kernels.unpool_seq_lens(lengths, pool)"
    ),
}


def _not_wrapped(field: str, value: object, cls_name: str, unit: type[object]) -> NoReturn:
    unit_name = getattr(unit, "unit", "?")
    raise UnitTypeError(
        f"{field} must be a {cls_name} of {unit_name}, got {describe(value)}; wrap the "
        f"tensor with its unit: {cls_name}(tensor, {getattr(unit, '__name__', '?')})",
        field=field,
        expected=f"{cls_name}[{unit_name}]",
        got=describe(value),
    )


def _wrong_unit(field: str, got: type[object], expected: type[object]) -> NoReturn:
    got_name = getattr(got, "unit", "?")
    expected_name = getattr(expected, "unit", "?")
    hint = _CONVERT_HINT.get((got_name, expected_name), "")
    raise UnitTypeError(
        f"{field} counts {got_name}, but this argument takes {expected_name}{hint}",
        field=field,
        expected=expected_name,
        got=got_name,
    )
