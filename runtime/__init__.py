"""kvunits runtime: capacity planning and the paged KV-cache allocator.

Imports no torch and no triton; the hot paths work on plain ints after one unit check at the
entry of each public call (`KVCacheCoordinator`, `Stepper`).

Rooms: ``capacity`` (what a budget buys per group), ``deployment`` (per rank: the stages'
layers, each rank's page, cap and blocks; the reverse questions), ``shared_pool`` (one pool
for all groups: page unification), ``block_pool`` (blocks, reference counts and the free
queue), ``managers`` (which blocks each attention kind still needs), ``prefix_cache``
(content keys, block hashes, the longest cached prefix), ``admission`` (caps and
reservations), ``_core`` (the untyped two-phase step, speculation, prefix adoption) and
``coordinator`` (the typed API).
"""

from contracts.errors import AdmissionError as AdmissionError
from contracts.errors import AllocationError as AllocationError
from contracts.errors import ConcurrentUseError as ConcurrentUseError
from contracts.errors import RequestError as RequestError

from .block_pool import NULL_BLOCK as NULL_BLOCK
from .capacity import CapacityPlan as CapacityPlan
from .capacity import GroupPlan as GroupPlan
from .capacity import plan as plan
from .coordinator import GroupHandle as GroupHandle
from .coordinator import GroupUsage as GroupUsage
from .coordinator import KernelInputs as KernelInputs
from .coordinator import KVCacheCoordinator as KVCacheCoordinator
from .coordinator import Stepper as Stepper
from .deployment import RankGroupPlan as RankGroupPlan
from .deployment import StagePlan as StagePlan
from .deployment import budget_for as budget_for
from .deployment import concurrency_at as concurrency_at
from .deployment import longest_max_model_len as longest_max_model_len
from .prefix_cache import BlockHashes as BlockHashes
from .prefix_cache import ContentKeys as ContentKeys
from .prefix_cache import PrefixCacheStats as PrefixCacheStats

__all__ = [
    "NULL_BLOCK",
    "AdmissionError",
    "AllocationError",
    "BlockHashes",
    "CapacityPlan",
    "ConcurrentUseError",
    "ContentKeys",
    "GroupHandle",
    "GroupPlan",
    "GroupUsage",
    "KVCacheCoordinator",
    "KernelInputs",
    "PrefixCacheStats",
    "RankGroupPlan",
    "RequestError",
    "StagePlan",
    "Stepper",
    "budget_for",
    "concurrency_at",
    "longest_max_model_len",
    "plan",
]
