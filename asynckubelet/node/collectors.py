"""The Prometheus collectors of a node's metrics (:class:`~asynckubelet.node.metrics.
NodeMetrics`): apart, so that importing the metrics module loads no ``prometheus_client``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


class NodeState(Collector):
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


class WithoutCreated(Collector):
    """The metrics given, without the ``*_created`` series: the kubelet exposes none."""

    def __init__(self, collectors: Iterable[Collector]) -> None:
        self._collectors = tuple(collectors)

    def collect(self) -> Iterator[Metric]:
        for collector in self._collectors:
            for family in collector.collect():
                family.samples = [s for s in family.samples if not s.name.endswith("_created")]
                yield family


__all__ = ["NodeState", "WithoutCreated"]
