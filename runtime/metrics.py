"""A snapshot of what a coordinator's cache does, under vLLM's metric names.

`kvunits.runtime.KVCacheCoordinator.metrics` returns a `CacheMetrics`; `to_dict` gives it to a
dashboard or a log line, and `kvunits.runtime.prometheus.PrometheusMetrics` exposes it to
Prometheus (the optional ``metrics`` extra, ``prometheus_client``). The names are vLLM 0.33's
(``vllm/v1/metrics/loggers.py``) where vLLM has the measure:

==========================  =========  ===================================================
name                        vLLM kind  here
==========================  =========  ===================================================
``kv_cache_usage_perc``     gauge      blocks held ÷ blocks requests can hold (1 = full):
                                       per group, and over all groups by their bytes
``prefix_cache_queries``    counter    positions admissions brought as content, per group
                                       (kernel unit: tokens, or encoder tokens)
``prefix_cache_hits``       counter    of those, positions found cached
``num_preemptions``         counter    requests preempted (``on_demand``)
``num_requests_running``    gauge      requests admitted
==========================  =========  ===================================================

and kvunits' own: blocks held, free, reserved and cached per group, and the positions the
preempted requests had computed (what the scheduler recomputes).

A snapshot is taken on the scheduler's thread (a coordinator is driven by one thread) and is
frozen: hand it to another thread, never the coordinator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, final

from kvunits.contracts import IntQuantity, SpecError

if TYPE_CHECKING:
    from .usage import GroupUsage


@final
@dataclass(frozen=True, slots=True)
class GroupMetrics:
    """One group's measures.

    Attributes:
        name: the group.
        usage: its blocks now (capacity, used, free, reserved, cached).
        kv_cache_usage_perc: ``used ÷ capacity`` (vLLM's ``KVCacheManager.usage``: 1 is
            100 percent; a free block that still caches a prefix counts as free).
        prefix_cache_queries: positions admitted with content in this group (kernel unit).
        prefix_cache_hits: positions of those found cached (kernel unit).
        preempted: positions the requests preempted had computed (kernel unit): the
            recomputation preemption cost.
    """

    name: str
    usage: GroupUsage
    kv_cache_usage_perc: float
    prefix_cache_queries: IntQuantity
    prefix_cache_hits: IntQuantity
    preempted: IntQuantity


@final
@dataclass(frozen=True, slots=True)
class CacheMetrics:
    """A coordinator's measures at one moment (see the module docstring).

    Attributes:
        groups: per group, in the coordinator's order.
        kv_cache_usage_perc: bytes of the blocks held ÷ bytes of the blocks requests can
            hold, over every pool (1 is 100 percent).
        num_requests_running: requests admitted now.
        num_preemptions: requests preempted so far.
        admission: the admission policy's kind.
    """

    groups: tuple[GroupMetrics, ...]
    kv_cache_usage_perc: float
    num_requests_running: int
    num_preemptions: int
    admission: str

    def group(self, name: str) -> GroupMetrics:
        """The measures of group ``name``."""
        for metrics in self.groups:
            if metrics.name == name:
                return metrics
        raise SpecError(f"no group {name!r}; groups: {', '.join(g.name for g in self.groups)}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, under vLLM's names; quantities as ``{"value", "unit"}``.

        Example:
            >>> metrics.to_dict()["num_preemptions"]  # doctest: +SKIP
            0
        """

        def quantity(q: IntQuantity) -> dict[str, Any]:
            return {"value": q.numerical_value_in(type(q)), "unit": q.unit}

        def blocks(q: IntQuantity) -> int:
            return q.numerical_value_in(type(q))

        return {
            "kv_cache_usage_perc": self.kv_cache_usage_perc,
            "num_requests_running": self.num_requests_running,
            "num_preemptions": self.num_preemptions,
            "admission": self.admission,
            "groups": {
                g.name: {
                    "kv_cache_usage_perc": g.kv_cache_usage_perc,
                    "prefix_cache_queries": quantity(g.prefix_cache_queries),
                    "prefix_cache_hits": quantity(g.prefix_cache_hits),
                    "preempted": quantity(g.preempted),
                    "blocks": {
                        "capacity": blocks(g.usage.capacity),
                        "used": blocks(g.usage.used),
                        "free": blocks(g.usage.free),
                        "reserved": blocks(g.usage.reserved),
                        "cached": blocks(g.usage.cached),
                        "unit": "cache_block",
                    },
                }
                for g in self.groups
            },
        }
