"""kvunits runtime: capacity planning and the paged KV-cache allocator.

Imports no torch and no triton; the hot paths work on plain ints after one unit check at the
entry of each public call (`KVCacheCoordinator`, `Stepper`).

Rooms: ``capacity`` (what a budget buys per group), ``like_vllm`` (what ``vllm serve``
0.33 computes: its groups, blocks and headline numbers), ``deployment`` (per rank: the stages'
layers, each rank's page, cap and blocks; the reverse questions), ``shared_pool`` (one pool
for all groups: page unification), ``block_pool`` (blocks, reference counts and the free
queue), ``managers`` (which blocks each attention kind still needs), ``prefix_cache``
(content keys, block hashes, the longest cached prefix), ``admission`` (caps and
reservations), ``policy`` (the admission policies and the answers ``can_admit`` and
``try_allocate`` give), ``preemption`` (their untyped side: shortfalls, preemption),
``metrics`` (a snapshot under vLLM's metric names; ``prometheus``: its collector),
``_core`` (the untyped two-phase step, speculation, prefix adoption) and ``coordinator``
(the typed API).
"""

if __name__ != "kvunits.runtime":
    # A checkout's root on sys.path exposes this directory as `runtime`: a second copy of every
    # class, and a name other distributions use. kvunits._names says where, and the fix.
    from kvunits._names import bare_name_error

    raise bare_name_error(__name__, __file__, "kvunits.runtime")


from typing import TYPE_CHECKING

from kvunits.contracts.errors import AdmissionError as AdmissionError
from kvunits.contracts.errors import AllocationError as AllocationError
from kvunits.contracts.errors import ConcurrentUseError as ConcurrentUseError
from kvunits.contracts.errors import RequestError as RequestError

if TYPE_CHECKING:
    from .block_pool import NULL_BLOCK as NULL_BLOCK
    from .capacity import CapacityPlan as CapacityPlan
    from .capacity import GroupPlan as GroupPlan
    from .capacity import plan as plan
    from .coordinator import GroupHandle as GroupHandle
    from .coordinator import KernelInputs as KernelInputs
    from .coordinator import KVCacheCoordinator as KVCacheCoordinator
    from .coordinator import Stepper as Stepper
    from .deployment import RankGroupPlan as RankGroupPlan
    from .deployment import StagePlan as StagePlan
    from .deployment import budget_for as budget_for
    from .deployment import concurrency_at as concurrency_at
    from .deployment import longest_max_model_len as longest_max_model_len
    from .like_vllm import VLLM_GPUS as VLLM_GPUS
    from .like_vllm import VllmGpu as VllmGpu
    from .like_vllm import VllmGroup as VllmGroup
    from .like_vllm import VllmPlan as VllmPlan
    from .like_vllm import plan_like_vllm as plan_like_vllm
    from .like_vllm_packed import plan_deepseek_v4_like_vllm as plan_deepseek_v4_like_vllm
    from .like_vllm_packed_v41 import plan_deepseek_v41_like_vllm as plan_deepseek_v41_like_vllm
    from .metrics import CacheMetrics as CacheMetrics
    from .metrics import GroupMetrics as GroupMetrics
    from .policy import AdmissionPolicy as AdmissionPolicy
    from .policy import Answer as Answer
    from .policy import Fits as Fits
    from .policy import Never as Never
    from .policy import Preemption as Preemption
    from .policy import Scheduled as Scheduled
    from .policy import Wait as Wait
    from .prefix_cache import BlockHashes as BlockHashes
    from .prefix_cache import ContentBatch as ContentBatch
    from .prefix_cache import ContentKeys as ContentKeys
    from .prefix_cache import PrefixCacheStats as PrefixCacheStats
    from .usage import GroupUsage as GroupUsage

#: Each public name by the room that defines it, imported on first use: planning
#: (``kvunits.runtime.capacity``, all ``kvunits plan`` needs) then does not import the allocator.
_EXPORTS = {
    "NULL_BLOCK": "block_pool",
    "CapacityPlan": "capacity",
    "GroupPlan": "capacity",
    "plan": "capacity",
    "GroupHandle": "coordinator",
    "GroupUsage": "usage",
    "KernelInputs": "coordinator",
    "KVCacheCoordinator": "coordinator",
    "Stepper": "coordinator",
    "RankGroupPlan": "deployment",
    "StagePlan": "deployment",
    "budget_for": "deployment",
    "concurrency_at": "deployment",
    "longest_max_model_len": "deployment",
    "VLLM_GPUS": "like_vllm",
    "VllmGpu": "like_vllm",
    "VllmGroup": "like_vllm",
    "VllmPlan": "like_vllm",
    "plan_like_vllm": "like_vllm",
    "plan_deepseek_v4_like_vllm": "like_vllm_packed",
    "plan_deepseek_v41_like_vllm": "like_vllm_packed_v41",
    "BlockHashes": "prefix_cache",
    "ContentBatch": "prefix_cache",
    "ContentKeys": "prefix_cache",
    "PrefixCacheStats": "prefix_cache",
    "AdmissionPolicy": "policy",
    "Answer": "policy",
    "Fits": "policy",
    "Never": "policy",
    "Preemption": "policy",
    "Scheduled": "policy",
    "Wait": "policy",
    "CacheMetrics": "metrics",
    "GroupMetrics": "metrics",
}


def __getattr__(name: str) -> object:
    room = _EXPORTS.get(name)
    if room is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{room}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "NULL_BLOCK",
    "VLLM_GPUS",
    "AdmissionError",
    "AdmissionPolicy",
    "AllocationError",
    "Answer",
    "BlockHashes",
    "CacheMetrics",
    "CapacityPlan",
    "ConcurrentUseError",
    "ContentBatch",
    "ContentKeys",
    "Fits",
    "GroupHandle",
    "GroupMetrics",
    "GroupPlan",
    "GroupUsage",
    "KVCacheCoordinator",
    "KernelInputs",
    "Never",
    "Preemption",
    "PrefixCacheStats",
    "RankGroupPlan",
    "RequestError",
    "Scheduled",
    "StagePlan",
    "Stepper",
    "VllmGpu",
    "VllmGroup",
    "VllmPlan",
    "Wait",
    "budget_for",
    "concurrency_at",
    "longest_max_model_len",
    "plan",
    "plan_deepseek_v4_like_vllm",
    "plan_deepseek_v41_like_vllm",
    "plan_like_vllm",
]
