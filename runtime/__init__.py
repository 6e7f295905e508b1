"""kvunits runtime: capacity planning, the paged block allocator, admission, the CLI.

Imports no torch and no triton; the hot paths work on plain ints after one unit check at the
entry of each public call (`KVCacheCoordinator`, `Stepper`).

Importing this package imports nothing else: each public name loads its module on first use
(PEP 562), so that ``kvunits --help`` and ``runtime.capacity`` do not pay for the allocator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._errors import AdmissionError as AdmissionError
    from ._errors import AllocationError as AllocationError
    from ._errors import RequestError as RequestError
    from .block_pool import NULL_BLOCK as NULL_BLOCK
    from .coordinator import AllocateFn as AllocateFn
    from .coordinator import GroupHandle as GroupHandle
    from .coordinator import GroupUsage as GroupUsage
    from .coordinator import KVCacheCoordinator as KVCacheCoordinator
    from .coordinator import Stepper as Stepper
    from .kernel_boundary import PooledKernelInputs as PooledKernelInputs
    from .kernel_boundary import expand_slot_mapping as expand_slot_mapping
    from .kernel_boundary import kernel_seq_len as kernel_seq_len
    from .kernel_boundary import pooled_kernel_inputs as pooled_kernel_inputs
    from .managers import MANAGER_BY_KIND as MANAGER_BY_KIND

#: The module of each public name, imported on first use.
_LAZY = {
    "AdmissionError": "_errors",
    "AllocationError": "_errors",
    "RequestError": "_errors",
    "NULL_BLOCK": "block_pool",
    "AllocateFn": "coordinator",
    "GroupHandle": "coordinator",
    "GroupUsage": "coordinator",
    "KVCacheCoordinator": "coordinator",
    "Stepper": "coordinator",
    "PooledKernelInputs": "kernel_boundary",
    "expand_slot_mapping": "kernel_boundary",
    "kernel_seq_len": "kernel_boundary",
    "pooled_kernel_inputs": "kernel_boundary",
    "MANAGER_BY_KIND": "managers",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'runtime' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "MANAGER_BY_KIND",
    "NULL_BLOCK",
    "AdmissionError",
    "AllocateFn",
    "AllocationError",
    "GroupHandle",
    "GroupUsage",
    "KVCacheCoordinator",
    "PooledKernelInputs",
    "RequestError",
    "Stepper",
    "expand_slot_mapping",
    "kernel_seq_len",
    "pooled_kernel_inputs",
]
