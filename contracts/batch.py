"""One group's step batch as the attention backends read it: the contract between the runtime
(which builds it, `kvunits.runtime.KVCacheCoordinator.step_batch`) and the kernels (which
turn it into tensors, `kvunits.kernels.flash_attention_inputs` and
`kvunits.kernels.flashinfer_inputs`), neither of which imports the other.

Everything is in the group's *kernel* unit (encoder tokens for a pooled group, tokens
otherwise), and block tables in cache blocks of ``tokens_per_block`` positions; the plain
counts leave only naming their unit (`StepBatch.seq_lens_in`), as every quantity does. The
block tables are the group's `BlockIds` (typed with its `GroupMarker` when the handle was),
never bare tuples a slot mapping could pass for; each layer's window is the kernel's own
`Window`, which the backends convert with their named conventions
(`kvunits.contracts.flash_attn_window_size`, `kvunits.contracts.flashinfer_window_left`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, final

from ._describe import describe
from ._factors import BlockSize
from ._group_marker import GroupT
from ._ids import BlockIds
from ._kinds import Window
from ._views import KernelUnit
from .errors import UnitTypeError


@final
@dataclass(frozen=True, slots=True)
class StepBatch(Generic[KernelUnit, GroupT]):
    """The requests of one step in one layer group, in batch order.

    Attributes:
        request_ids: the requests, in the order of the step's query rows.
        block_tables: per request, its block table in the group, a `BlockIds` (cache-block
            ids; the null block, 0, where a window evicted), one entry per
            ``tokens_per_block`` positions.
        unit: the kernel unit the lengths count (`EncoderTokens` or `Tokens`).
        tokens_per_block: positions per cache block, in ``unit`` (``block_size × P``).
        block_table_width: the widest table a request of this group can have (the manager's
            ``block_table_width``): the padded width a CUDA graph wants.
        windows: per layer of the group, its kernel's sliding window in ``unit`` (None: no
            window). Layers of one group share its tables but not always a window (750 and
            751 encoder tokens both manage 189 pooled slots at P = 4).
    """

    request_ids: tuple[str, ...]
    block_tables: tuple[BlockIds[GroupT], ...]
    unit: type[KernelUnit]
    tokens_per_block: BlockSize[KernelUnit]
    block_table_width: int
    windows: Mapping[str, Window[KernelUnit] | None]
    _seq_lens: tuple[int, ...]
    _query_lens: tuple[int, ...]

    def __post_init__(self) -> None:
        for i, table in enumerate(self.block_tables):
            if type(table) is not BlockIds:
                raise UnitTypeError(
                    f"StepBatch.block_tables[{i}] must be a BlockIds (a block table of cache-"
                    f"block ids), got {describe(table)}",
                    field=f"block_tables[{i}]",
                    expected="BlockIds",
                    got=describe(table),
                )
        for layer, window in self.windows.items():
            given: object = window  # checked at run time too: mypy's view is the annotation's
            if given is not None and (type(given) is not Window or given.unit is not self.unit):
                raise UnitTypeError(
                    f"StepBatch.windows[{layer!r}] must be a Window of {self.unit.unit} (the "
                    f"kernel's), got {describe(window)}",
                    field=f"windows[{layer!r}]",
                    expected=f"Window of {self.unit.unit}",
                    got=describe(window),
                )

    def seq_lens_in(self, unit: type[KernelUnit]) -> tuple[int, ...]:
        """Per request, its positions after the step (the step's included), in ``unit``.

        Raises:
            UnitTypeError: ``unit`` is not the batch's unit.
        """
        self._check(unit, "seq_lens_in")
        return self._seq_lens

    def query_lens_in(self, unit: type[KernelUnit]) -> tuple[int, ...]:
        """Per request, the positions the step adds (its query rows), in ``unit``.

        Raises:
            UnitTypeError: ``unit`` is not the batch's unit.
        """
        self._check(unit, "query_lens_in")
        return self._query_lens

    def _check(self, unit: Any, what: str) -> None:
        if unit is not self.unit:
            got = getattr(unit, "unit", repr(unit))
            raise UnitTypeError(
                f"StepBatch.{what}: the batch counts {self.unit.unit}, not {got}",
                field=what,
                expected=self.unit.unit,
                got=str(got),
            )

    def __len__(self) -> int:
        return len(self.request_ids)
