"""The node's Prometheus metrics, named as the kubelet names them.

Operators already have dashboards and alerts on ``kubelet_running_pods``,
``kubelet_pod_start_duration_seconds``, ``kubelet_runtime_operations_duration_seconds``
and ``kubelet_pleg_relist_duration_seconds``; exposing the same names lets them point
those at this node. ``prometheus_client`` keeps and renders them, in a registry per node
(never the process-wide one, so two nodes in one program do not mix), beside its standard
``process_*`` metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
POD_START_BUCKETS = (0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480)
PLEG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _NodeState(Collector):
    """The gauges read when scraped: running pods, and containers by state."""

    def __init__(
        self, running_pods: Callable[[], int], running_containers: Callable[[], dict[str, int]]
    ) -> None:
        self._running_pods = running_pods
        self._running_containers = running_containers

    def collect(self) -> Iterator[Metric]:
        pods = GaugeMetricFamily(
            "kubelet_running_pods", "Number of pods that have a running pod sandbox"
        )
        pods.add_metric([], float(self._running_pods()))
        yield pods
        containers = GaugeMetricFamily(
            "kubelet_running_containers",
            "Number of containers currently running",
            labels=["container_state"],
        )
        for state, n in sorted(self._running_containers().items()):
            containers.add_metric([state], float(n))
        yield containers


class _WithoutCreated(Collector):
    """The metrics given, without the ``*_created`` series: the kubelet exposes none."""

    def __init__(self, collectors: Iterable[Collector]) -> None:
        self._collectors = tuple(collectors)

    def collect(self) -> Iterator[Metric]:
        for collector in self._collectors:
            for family in collector.collect():
                family.samples = [s for s in family.samples if not s.name.endswith("_created")]
                yield family


class NodeMetrics:
    """Every metric of one node; also the runtime's
    :class:`~asynckubelet.runtime.metrics.RuntimeMetrics`."""

    def __init__(
        self,
        *,
        running_pods: Callable[[], int],
        running_containers: Callable[[], dict[str, int]],
    ) -> None:
        self.registry = CollectorRegistry()
        self.pod_start_duration = Histogram(
            "kubelet_pod_start_duration_seconds",
            "Duration in seconds from the kubelet seeing a pod for the first time to the pod "
            "starting to run",
            buckets=POD_START_BUCKETS,
            registry=None,
        )
        self.runtime_operations_duration = Histogram(
            "kubelet_runtime_operations_duration_seconds",
            "Duration in seconds of runtime operations. Broken down by operation type.",
            ["operation_type"],
            buckets=LATENCY_BUCKETS,
            registry=None,
        )
        self.runtime_operations_errors = Counter(
            "kubelet_runtime_operations_errors",
            "Cumulative number of runtime operation errors by operation type.",
            ["operation_type"],
            registry=None,
        )
        self.pleg_relist_duration = Histogram(
            "kubelet_pleg_relist_duration_seconds",
            "Duration in seconds for relisting pods in PLEG.",
            buckets=PLEG_BUCKETS,
            registry=None,
        )
        self.registry.register(_NodeState(running_pods, running_containers))
        self.registry.register(
            _WithoutCreated(
                [
                    self.pod_start_duration,
                    self.runtime_operations_duration,
                    self.runtime_operations_errors,
                    self.pleg_relist_duration,
                ]
            )
        )
        ProcessCollector(registry=self.registry)

    def operation_finished(self, operation: str, *, seconds: float) -> None:
        self.runtime_operations_duration.labels(operation_type=operation).observe(seconds)

    def operation_failed(self, operation: str) -> None:
        self.runtime_operations_errors.labels(operation_type=operation).inc()

    def render(self) -> str:
        """Every metric in Prometheus' text exposition format (version 0.0.4)."""
        return generate_latest(self.registry).decode()


__all__ = ["NodeMetrics"]
