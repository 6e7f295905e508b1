"""One group's step batch as the attention backends read it: the contract between the runtime
(which builds it, `kvunits.runtime.KVCacheCoordinator.step_batch`) and the kernels (which
turn it into tensors, `kvunits.kernels.flash_attention_inputs` and
`kvunits.kernels.flashinfer_inputs`), neither of which imports the other.

Everything is in the group's *kernel* unit (encoder tokens for a pooled group, tokens
otherwise), and block tables in cache blocks of ``tokens_per_block`` positions; the plain
counts leave only naming their unit (`StepBatch.seq_lens_in`), as every quantity does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, final

from ._factors import BlockSize
from ._views import KernelUnit
from .errors import UnitTypeError


@final
@dataclass(frozen=True, slots=True)
class StepBatch(Generic[KernelUnit]):
    """The requests of one step in one layer group, in batch order.

    Attributes:
        request_ids: the requests, in the order of the step's query rows.
        block_tables: per request, its block table (cache-block ids; the null block, 0,
            where a window evicted), one entry per ``tokens_per_block`` positions.
        unit: the kernel unit the lengths count (`EncoderTokens` or `Tokens`).
        tokens_per_block: positions per cache block, in ``unit`` (``block_size × P``).
        block_table_width: the widest table a request of this group can have (the manager's
            ``block_table_width``): the padded width a CUDA graph wants.
    """

    request_ids: tuple[str, ...]
    block_tables: tuple[tuple[int, ...], ...]
    unit: type[KernelUnit]
    tokens_per_block: BlockSize[KernelUnit]
    block_table_width: int
    _seq_lens: tuple[int, ...]
    _query_lens: tuple[int, ...]

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
