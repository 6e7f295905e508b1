"""Admission policies, and the typed answers of the questions a scheduler asks the cache.

Three policies (`AdmissionPolicy.kind`, the engine setting ``admission``):

* ``reserve``: admitting a request reserves its admission cap in every group at the length it
  declares, by default the engine's limits (`kvunits.runtime.admission`). A step of an admitted
  request never runs short; nothing is ever preempted. Safe, and wasteful when requests are far
  shorter than ``max_model_len``: Llama-3.1-8B at 40 GiB admits 2 requests of 131072 tokens.
* ``declared``: a request declares its length and reserves exactly what that length needs; a
  step beyond it is refused. Nothing is preempted.
* ``on_demand``: vLLM's policy. Nothing is reserved; a request's blocks are taken as its
  steps need them. A request is admitted when the blocks its first step needs (``prompt``) and
  a watermark of free blocks fit; when a running request's step runs short,
  `kvunits.runtime.Stepper.allocate_preempting` preempts running requests, one at a time, until
  it fits: their blocks go back to the pools and the answer says who was preempted and why, so
  that the scheduler puts them back in its waiting queue and recomputes them. Which request goes
  first is vLLM 0.33's rule (``vllm/v1/core/sched/scheduler.py``, ``Scheduler.schedule``):
  ``fcfs``, the request admitted last (``self.running[-1]``); ``priority``, the largest
  ``(priority, arrival)`` (a larger value is a lower priority; the latest arrival among equals).
  The request whose step runs short may be that victim itself; it is then preempted and its
  step is not taken.

Every policy refuses up front a request that can never fit (`AdmissionError`, or `Never`).

The answers (`Fits`, `Wait`, `Never`) let a scheduler ask without catching exceptions:
`kvunits.runtime.Stepper.can_admit` and `kvunits.runtime.Stepper.try_allocate` return one of them.
A caller's mistake (a unit, an unknown request) still raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, TypeVar, final

from kvunits.contracts import CacheBlocks, SpecError

if TYPE_CHECKING:
    from kvunits.contracts import EngineSpec

#: The admission policies, as the engine setting ``admission`` names them.
AdmissionKind = Literal["reserve", "on_demand", "declared"]

#: Which running request ``on_demand`` preempts first (vLLM's ``scheduling_policy``).
SchedulingPolicy = Literal["fcfs", "priority"]

_KINDS: Final = ("reserve", "on_demand", "declared")
_ORDERS: Final = ("fcfs", "priority")

_T = TypeVar("_T")


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionPolicy:
    """How a coordinator admits requests and whom it preempts (see the module docstring).

    Attributes:
        kind: ``reserve``, ``on_demand`` or ``declared``.
        scheduling_policy: ``fcfs`` or ``priority``: the order ``on_demand`` preempts in.
        watermark: the fraction of each pool's blocks ``on_demand`` keeps free when it
            admits a request while others are admitted (vLLM 0.33's
            ``SchedulerConfig.watermark``: ``int(watermark × num_blocks)`` blocks; 0: none).

    Raises:
        SpecError: an unknown kind or order, or a watermark outside ``[0, 1)``.

    Example:
        >>> AdmissionPolicy(kind="on_demand")
        AdmissionPolicy(kind='on_demand', scheduling_policy='fcfs', watermark=0.0)
    """

    kind: AdmissionKind = "reserve"
    scheduling_policy: SchedulingPolicy = "fcfs"
    watermark: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise SpecError(f"admission is one of {', '.join(_KINDS)}, got {self.kind!r}")
        if self.scheduling_policy not in _ORDERS:
            raise SpecError(
                f"scheduling_policy is one of {', '.join(_ORDERS)}, got {self.scheduling_policy!r}"
            )
        if type(self.watermark) not in (float, int) or not 0 <= self.watermark < 1:
            raise SpecError(
                f"watermark is a fraction of the pool's blocks in [0, 1), got {self.watermark!r}"
            )

    @classmethod
    def of_engine(cls, engine: EngineSpec) -> AdmissionPolicy:
        """The policy an engine's settings name (``admission``, ``scheduling_policy``,
        ``watermark``)."""
        return cls(
            kind=engine.admission,
            scheduling_policy=engine.scheduling_policy,
            watermark=engine.watermark,
        )

    @property
    def reserves(self) -> bool:
        """Whether admission reserves each request's cap (``reserve`` and ``declared``)."""
        return self.kind != "on_demand"

    def watermark_blocks(self, num_blocks: int) -> int:
        """Blocks kept free for running requests in a pool of ``num_blocks`` (the null block
        included, as vLLM counts them): ``int(watermark × num_blocks)``, rounding down."""
        return int(self.watermark * num_blocks)


# -- answers ------------------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class Fits(Generic[_T]):
    """It fits now. ``result``: what the call produced (a step's slot mappings; None for a
    question that changes nothing, `can_admit`)."""

    result: _T


@final
@dataclass(frozen=True, slots=True)
class Wait:
    """Not now: blocks are short. It may fit once requests finish (or are preempted).

    Attributes:
        shortfall: per short group, the cache blocks missing (groups that fit are absent).
        reason: the same in words.
    """

    shortfall: Mapping[str, CacheBlocks]
    reason: str


@final
@dataclass(frozen=True, slots=True)
class Never:
    """Never, whatever finishes: the request asks for more than the cache or its limits allow.

    Attributes:
        reason: why, and what to change.
        group: the group that refuses it (None: not one group's).
    """

    reason: str
    group: str | None = None


#: What `can_admit` and `try_allocate` answer.
Answer = Fits[_T] | Wait | Never


# -- preemption ---------------------------------------------------------------------------------


@final
@dataclass(frozen=True, slots=True)
class Preemption:
    """A request preempted to make room for another's step: its blocks went back to the pools,
    it is no longer admitted, and the scheduler recomputes it (admits it again, then steps
    through what it had computed).

    Attributes:
        request_id: the request preempted.
        for_request: the request whose step needed its blocks (itself, when it was the last
            one left to preempt).
        reason: why, in words (the group, the blocks needed and free).
        lost: per group, the positions it had computed, by group name, in each group's kernel
            unit (encoder tokens for a pooled group): what recomputing it costs.
        priority: its priority (the order of ``scheduling_policy = "priority"``).
    """

    request_id: str
    for_request: str
    reason: str
    lost: Mapping[str, Any]
    priority: int = 0


@final
@dataclass(frozen=True, slots=True)
class Scheduled:
    """The outcome of `kvunits.runtime.Stepper.allocate_preempting`.

    Attributes:
        slot_mappings: per bound group, the step's slot mapping (as ``allocate`` returns it);
            None when the request itself was preempted (its step was not taken).
        preempted: the requests preempted for it, in order (empty when it fitted).
    """

    slot_mappings: list[list[int]] | None
    preempted: tuple[Preemption, ...] = field(default=())

    @property
    def ran(self) -> bool:
        """Whether the step was taken."""
        return self.slot_mappings is not None
