"""kvunits runtime: capacity planning, the paged block allocator, admission, the CLI.

Imports no torch and no triton; the hot paths work on plain ints after one unit check at the
entry of each public call (`KVCacheCoordinator`, `Stepper`).
"""

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
