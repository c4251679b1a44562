"""The node's Prometheus metrics, named as the kubelet names them.

Operators already have dashboards and alerts on ``kubelet_running_pods``,
``kubelet_pod_start_duration_seconds``, ``kubelet_runtime_operations_duration_seconds``
and ``kubelet_pleg_relist_duration_seconds``; exposing the same names lets them point
those at this node. The few metric types needed are kept here, in plain Python, and
rendered in the Prometheus text exposition format (version 0.0.4).
"""

from __future__ import annotations

import bisect
import os
import resource
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
POD_START_BUCKETS = (0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480)
PLEG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

Labels = tuple[tuple[str, str], ...]


def _labels(labels: Labels, extra: Iterable[tuple[str, str]] = ()) -> str:
    items = [*labels, *extra]
    if not items:
        return ""
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in items)
    return "{" + body + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if value == float("inf"):
        return "+Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class Histogram:
    """A Prometheus histogram with labels."""

    def __init__(self, name: str, help: str, *, buckets: Sequence[float]) -> None:
        self.name = name
        self.help = help
        self.buckets = tuple(buckets)
        self._counts: dict[Labels, list[int]] = {}
        self._sums: dict[Labels, float] = defaultdict(float)

    def observe(self, value: float, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        counts = self._counts.setdefault(key, [0] * (len(self.buckets) + 1))
        counts[bisect.bisect_left(self.buckets, value)] += 1
        self._sums[key] += value

    def count(self, **labels: str) -> int:
        return sum(self._counts.get(tuple(sorted(labels.items())), []))

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        for key, counts in sorted(self._counts.items()):
            running = 0
            for bound, n in zip([*self.buckets, float("inf")], counts, strict=True):
                running += n
                le = (("le", _number(bound)),)
                lines.append(f"{self.name}_bucket{_labels(key, le)} {running}")
            lines.append(f"{self.name}_sum{_labels(key)} {_number(self._sums[key])}")
            lines.append(f"{self.name}_count{_labels(key)} {running}")
        return lines


class Counter:
    def __init__(self, name: str, help: str) -> None:
        self.name = name
        self.help = help
        self._values: dict[Labels, float] = defaultdict(float)

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        self._values[tuple(sorted(labels.items()))] += amount

    def value(self, **labels: str) -> float:
        return self._values.get(tuple(sorted(labels.items())), 0.0)

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} counter"]
        for key, value in sorted(self._values.items()):
            lines.append(f"{self.name}{_labels(key)} {_number(value)}")
        return lines


class Gauge:
    """A gauge read when rendered: ``read()`` returns ``{labels: value}``."""

    def __init__(self, name: str, help: str, read: Callable[[], dict[Labels, float]]) -> None:
        self.name = name
        self.help = help
        self.read = read

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} gauge"]
        for key, value in sorted(self.read().items()):
            lines.append(f"{self.name}{_labels(key)} {_number(value)}")
        return lines


_START_TIME = time.time()


def process_metrics() -> list[str]:
    """The standard ``process_*`` metrics of this process, from ``/proc`` and ``getrusage``."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    lines = [
        "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.",
        "# TYPE process_cpu_seconds_total counter",
        f"process_cpu_seconds_total {_number(usage.ru_utime + usage.ru_stime)}",
        "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.",
        "# TYPE process_start_time_seconds gauge",
        f"process_start_time_seconds {_number(_START_TIME)}",
    ]
    try:
        with open("/proc/self/statm") as f:
            rss_pages = int(f.read().split()[1])
        rss = rss_pages * os.sysconf("SC_PAGE_SIZE")
        lines += [
            "# HELP process_resident_memory_bytes Resident memory size in bytes.",
            "# TYPE process_resident_memory_bytes gauge",
            f"process_resident_memory_bytes {rss}",
        ]
        fds = len(os.listdir("/proc/self/fd"))
        lines += [
            "# HELP process_open_fds Number of open file descriptors.",
            "# TYPE process_open_fds gauge",
            f"process_open_fds {fds}",
        ]
    except (OSError, ValueError, IndexError):
        pass
    return lines


class NodeMetrics:
    """Every metric of one node."""

    def __init__(
        self,
        *,
        running_pods: Callable[[], int],
        running_containers: Callable[[], dict[str, int]],
    ) -> None:
        self.pod_start_duration = Histogram(
            "kubelet_pod_start_duration_seconds",
            "Duration in seconds from the kubelet seeing a pod for the first time to the pod "
            "starting to run",
            buckets=POD_START_BUCKETS,
        )
        self.runtime_operations_duration = Histogram(
            "kubelet_runtime_operations_duration_seconds",
            "Duration in seconds of runtime operations. Broken down by operation type.",
            buckets=LATENCY_BUCKETS,
        )
        self.runtime_operations_errors = Counter(
            "kubelet_runtime_operations_errors_total",
            "Cumulative number of runtime operation errors by operation type.",
        )
        self.pleg_relist_duration = Histogram(
            "kubelet_pleg_relist_duration_seconds",
            "Duration in seconds for relisting pods in PLEG.",
            buckets=PLEG_BUCKETS,
        )
        self.running_pods = Gauge(
            "kubelet_running_pods",
            "Number of pods that have a running pod sandbox",
            lambda: {(): float(running_pods())},
        )
        self.running_containers = Gauge(
            "kubelet_running_containers",
            "Number of containers currently running",
            lambda: {
                (("container_state", state),): float(n) for state, n in running_containers().items()
            },
        )

    def render(self) -> str:
        lines: list[str] = []
        for metric in (
            self.running_pods,
            self.running_containers,
            self.pod_start_duration,
            self.runtime_operations_duration,
            self.runtime_operations_errors,
            self.pleg_relist_duration,
        ):
            lines += metric.render()
        lines += process_metrics()
        return "\n".join(lines) + "\n"
