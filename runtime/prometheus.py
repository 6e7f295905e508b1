"""Prometheus collectors of a coordinator's metrics (the optional ``metrics`` extra).

``prometheus_client`` is imported when a `PrometheusMetrics` is built, never by importing
kvunits. The scheduler's thread records a snapshot after its steps (`record`, cheap: it keeps
a reference); a scrape, on the HTTP server's thread, reads the latest snapshot and never
touches the coordinator, which one thread drives (a scrape that called it mid-step would be
refused with `kvunits.runtime.ConcurrentUseError`, or refuse the step).

Names are vLLM 0.33's (``vllm/v1/metrics/loggers.py``) with its ``vllm:`` prefix by default,
so that its dashboards read them; each carries a ``group`` label where it is per group
(a ``unit`` label too where it counts positions). Counters are exposed with ``_total``, as
prometheus_client exposes vLLM's own.

Example:
    >>> from prometheus_client import CollectorRegistry, generate_latest  # doctest: +SKIP
    >>> registry = CollectorRegistry()  # doctest: +SKIP
    >>> exported = PrometheusMetrics(registry)  # doctest: +SKIP
    >>> exported.record(coordinator.metrics())  # on the scheduler's thread  # doctest: +SKIP
    >>> b"vllm:num_preemptions_total" in generate_latest(registry)  # doctest: +SKIP
    True
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .metrics import CacheMetrics


class PrometheusMetrics:
    """A Prometheus collector of the latest `CacheMetrics` recorded.

    Args:
        registry: where to register (prometheus_client's ``CollectorRegistry``); None: the
            default registry; False: none (register it yourself).
        prefix: prepended to every name (vLLM's ``vllm:``).
        labels: constant labels on every sample (vLLM's ``model_name``, ``engine``).

    Raises:
        ImportError: prometheus_client is not installed (``pip install "kvunits[metrics]"``).
    """

    def __init__(
        self,
        registry: Any = None,
        *,
        prefix: str = "vllm:",
        labels: Mapping[str, str] | None = None,
    ) -> None:
        try:
            import prometheus_client
            from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        except ImportError as exc:  # pragma: no cover - the extra is installed in CI
            raise ImportError(
                'kvunits.runtime.prometheus needs prometheus_client: pip install "kvunits[metrics]"'
            ) from exc
        self._counter = CounterMetricFamily
        self._gauge = GaugeMetricFamily
        self._prefix = prefix
        self._labels = dict(labels or {})
        self._latest: CacheMetrics | None = None
        if registry is not False:
            (prometheus_client.REGISTRY if registry is None else registry).register(self)

    def record(self, metrics: CacheMetrics) -> None:
        """Keep ``metrics`` (a frozen snapshot) for the next scrape."""
        if type(metrics) is not CacheMetrics:
            raise TypeError(f"record takes coordinator.metrics(), got {type(metrics).__name__}")
        self._latest = metrics

    def describe(self) -> list[Any]:
        """Nothing to describe before a scrape (prometheus_client then skips the check of
        names at registration, which would call `collect` early)."""
        return []

    def collect(self) -> Iterator[Any]:
        """The latest snapshot's families (none before the first `record`)."""
        snapshot = self._latest
        if snapshot is None:
            return
        keys, values = list(self._labels), list(self._labels.values())
        name = self._prefix

        def gauge(metric: str, text: str, extra: tuple[str, ...] = ()) -> Any:
            return self._gauge(name + metric, text, labels=[*keys, *extra])

        def counter(metric: str, text: str, extra: tuple[str, ...] = ()) -> Any:
            return self._counter(name + metric, text, labels=[*keys, *extra])

        usage = gauge("kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
        usage.add_metric(values, snapshot.kv_cache_usage_perc)
        yield usage
        running = gauge("num_requests_running", "Number of requests admitted to the cache.")
        running.add_metric(values, snapshot.num_requests_running)
        yield running
        preemptions = counter("num_preemptions", "Cumulative number of preemption from the engine.")
        preemptions.add_metric(values, snapshot.num_preemptions)
        yield preemptions
        per_group = gauge(
            "kv_cache_group_usage_perc", "KV-cache usage of one layer group.", ("group",)
        )
        blocks = gauge(
            "kv_cache_group_blocks",
            "Cache blocks of one layer group, by state (used, free, reserved, cached).",
            ("group", "state"),
        )
        queries = counter(
            "prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried positions.",
            ("group", "unit"),
        )
        hits = counter(
            "prefix_cache_hits",
            "Prefix cache hits, in terms of number of cached positions.",
            ("group", "unit"),
        )
        recomputed = counter(
            "preempted_positions",
            "Positions preempted requests had computed (recomputed when they resume).",
            ("group", "unit"),
        )
        for g in snapshot.groups:
            per_group.add_metric([*values, g.name], g.kv_cache_usage_perc)
            usage_of = g.usage
            for state, count in (
                ("used", usage_of.used),
                ("free", usage_of.free),
                ("reserved", usage_of.reserved),
                ("cached", usage_of.cached),
            ):
                blocks.add_metric([*values, g.name, state], count.numerical_value_in(type(count)))
            for family, quantity in (
                (queries, g.prefix_cache_queries),
                (hits, g.prefix_cache_hits),
                (recomputed, g.preempted),
            ):
                family.add_metric(
                    [*values, g.name, quantity.unit], quantity.numerical_value_in(type(quantity))
                )
        yield per_group
        yield blocks
        yield queries
        yield hits
        yield recomputed
