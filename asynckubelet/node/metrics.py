"""The node's Prometheus metrics, named as the kubelet names them.

Operators already have dashboards and alerts on ``kubelet_running_pods``,
``kubelet_pod_start_duration_seconds``, ``kubelet_pod_start_sli_duration_seconds``,
``kubelet_runtime_operations_duration_seconds`` and
``kubelet_pleg_relist_duration_seconds``; exposing the same names lets them point those
at this node. ``prometheus_client`` keeps and renders them, in a registry per node (never
the process-wide one, so two nodes in one program do not mix), beside its standard
``process_*`` metrics.

Two need more than a counter. The pod start SLI (:class:`PodStartupTracker`) is the
Kubernetes SLO's: from the pod's creation (here: when a source first gave it to the node)
until all its containers are reported started, minus the time spent pulling images and
running init containers; pods that ran before the node started, that could not be
scheduled at once, or that mount a stateful volume are left out of it. And
``asynckubelet_event_loop_lag_seconds`` (:class:`LoopLagMonitor`) says how late the
node's event loop wakes a sleeper: everything the node does shares that one thread, so a
late wake-up is late probes, late status and slow HTTP answers.

``prometheus_client`` is imported when a node's metrics are made, not with this module: a
node that keeps none (:class:`NoMetrics`, a foreground run nobody scrapes) never loads it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
from lightkube.models.core_v1 import Pod, PodStatus

if TYPE_CHECKING:
    from prometheus_client import Counter, Histogram

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
POD_START_BUCKETS = (0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480)
POD_START_SLI_BUCKETS = (*POD_START_BUCKETS, 600, 900, 1200, 1800, 2700, 3600)
PLEG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
LOOP_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
LOOP_LAG_PERIOD = 0.1
"""Seconds the loop-lag monitor sleeps between measurements: ten wake-ups a second, so a
stall of 0.1 s or more is always seen, at a cost an idle node does not notice."""
STATELESS_VOLUMES = ("secret", "configMap", "downwardAPI", "emptyDir")
"""Volume sources of a stateless pod, as the pod startup SLO defines it."""
_PULLED = re.compile(r'^Successfully pulled image "(?P<image>.*)" in (?P<seconds>[0-9.]+)s')


class NodeMetrics:
    """Every metric of one node; also the runtime's
    :class:`~asynckubelet.runtime.metrics.RuntimeMetrics`."""

    def __init__(
        self,
        *,
        running_pods: Callable[[], int],
        running_containers: Callable[[], dict[str, int]],
    ) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector

        from asynckubelet.node.collectors import NodeState, WithoutCreated

        self.registry = CollectorRegistry()
        self.pod_start_duration: Histogram = Histogram(
            "kubelet_pod_start_duration_seconds",
            "Duration in seconds from the kubelet seeing a pod for the first time to the pod "
            "starting to run",
            buckets=POD_START_BUCKETS,
            registry=None,
        )
        self.runtime_operations_duration: Histogram = Histogram(
            "kubelet_runtime_operations_duration_seconds",
            "Duration in seconds of runtime operations. Broken down by operation type.",
            ["operation_type"],
            buckets=LATENCY_BUCKETS,
            registry=None,
        )
        self.runtime_operations_errors: Counter = Counter(
            "kubelet_runtime_operations_errors",
            "Cumulative number of runtime operation errors by operation type.",
            ["operation_type"],
            registry=None,
        )
        self.pod_start_sli_duration: Histogram = Histogram(
            "kubelet_pod_start_sli_duration_seconds",
            "Duration in seconds to start a pod, excluding time to pull images and run init "
            "containers, measured from pod creation timestamp to when all its containers are "
            "reported as started and observed via watch",
            buckets=POD_START_SLI_BUCKETS,
            registry=None,
        )
        self.pod_start_total_duration: Histogram = Histogram(
            "kubelet_pod_start_total_duration_seconds",
            "Duration in seconds to start a pod since creation, including time to pull images "
            "and run init containers, measured from pod creation timestamp to when all its "
            "containers are reported as started and observed via watch",
            buckets=POD_START_SLI_BUCKETS,
            registry=None,
        )
        self.pleg_relist_duration: Histogram = Histogram(
            "kubelet_pleg_relist_duration_seconds",
            "Duration in seconds for relisting pods in PLEG.",
            buckets=PLEG_BUCKETS,
            registry=None,
        )
        self.event_loop_lag: Histogram = Histogram(
            "asynckubelet_event_loop_lag_seconds",
            "Seconds by which the node's event loop woke a sleeping task later than asked.",
            buckets=LOOP_LAG_BUCKETS,
            registry=None,
        )
        self.registry.register(NodeState(running_pods, running_containers))
        self.registry.register(
            WithoutCreated(
                [
                    self.pod_start_duration,
                    self.pod_start_sli_duration,
                    self.pod_start_total_duration,
                    self.runtime_operations_duration,
                    self.runtime_operations_errors,
                    self.pleg_relist_duration,
                    self.event_loop_lag,
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
        from prometheus_client import generate_latest

        return generate_latest(self.registry).decode()


class _Ignored:
    def observe(self, value: float) -> None:
        pass


class NoMetrics:
    """The metrics of a node that keeps none: every observation is dropped, the
    exposition is empty (the same attributes as :class:`NodeMetrics`)."""

    def __init__(self) -> None:
        ignored = _Ignored()
        self.pod_start_duration = ignored
        self.pod_start_sli_duration = ignored
        self.pod_start_total_duration = ignored
        self.pleg_relist_duration = ignored
        self.event_loop_lag = ignored

    def operation_finished(self, operation: str, *, seconds: float) -> None:
        pass

    def operation_failed(self, operation: str) -> None:
        pass

    def render(self) -> str:
        return ""


class LoopLagMonitor:
    """Sleeps ``period`` seconds at a time and records how much later than asked it woke.

    Any task that holds the loop (a long serialization, a blocking call) and any wait for
    the CPU or the GIL show as lag in the next measurement."""

    def __init__(
        self, observe: Callable[[float], None], *, period: float = LOOP_LAG_PERIOD
    ) -> None:
        self.observe = observe
        self.period = period

    async def run(self) -> None:
        while True:
            asked = anyio.current_time() + self.period
            await anyio.sleep(self.period)
            self.observe(max(anyio.current_time() - asked, 0.0))


def image_pulling_time(sessions: Iterable[tuple[float, float]]) -> float:
    """Seconds covered by the pull sessions ``(start, end)``, overlaps counted once."""
    total = 0.0
    reached: float | None = None
    for start, end in sorted(sessions):
        if reached is None or start > reached:
            total += end - start
            reached = end
        elif end > reached:
            total += end - reached
            reached = end
    return total


def init_containers_runtime(pod: Pod, status: PodStatus) -> float:
    """Seconds the pod's (non-sidecar) init containers ran, each instance the status shows
    (the current one and the one before it) from its start to its finish."""
    sidecars = {
        c.name
        for c in (pod.spec.initContainers if pod.spec else None) or []
        if c.restartPolicy == "Always"
    }
    total = 0.0
    for cs in status.initContainerStatuses or []:
        if cs.name in sidecars:
            continue
        for state in (cs.state, cs.lastState):
            done = state.terminated if state is not None else None
            if done is not None and done.startedAt is not None and done.finishedAt is not None:
                total += max((done.finishedAt - done.startedAt).total_seconds(), 0.0)
    return total


def is_stateful(pod: Pod) -> bool:
    """A pod that mounts a volume other than a Secret, ConfigMap, downward API or emptyDir
    (the pod startup SLO keeps such pods apart)."""
    return any(
        all(getattr(v, kind, None) is None for kind in STATELESS_VOLUMES)
        for v in (pod.spec.volumes if pod.spec else None) or []
    )


def has_started(status: PodStatus) -> bool:
    """Every regular container is reported running (the SLO's "all its containers are
    reported as started")."""
    statuses = status.containerStatuses or []
    return bool(statuses) and all(
        cs.state is not None and cs.state.running is not None and cs.state.running.startedAt
        for cs in statuses
    )


def is_unschedulable(status: PodStatus) -> bool:
    return any(c.type == "PodScheduled" and c.status == "False" for c in status.conditions or [])


@dataclass
class _Start:
    seen: float
    pulls: list[tuple[float, float]] = field(default_factory=list)
    pulled: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class PodStart:
    """One pod's start, as the two start histograms receive it."""

    total: float
    """Seconds from first seen to all containers started."""
    sli: float | None
    """``total`` less image pulls and init containers; None for a stateful pod."""


class PodStartupTracker:
    """The kubelet's pod startup latency tracker, for one node.

    :meth:`seen` when a source first gives a pod, :meth:`event` with every event recorded
    (a ``Pulled`` event after a pull carries the pull's duration), :meth:`status` with
    every status the node publishes; the first status that shows all containers started
    is observed once, into ``total`` and (stateless pods) ``sli``."""

    def __init__(
        self,
        *,
        sli: Callable[[float], None],
        total: Callable[[float], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sli = sli
        self._total = total
        self._clock = clock
        self._pods: dict[str, _Start] = {}
        self._excluded: set[str] = set()

    def seen(self, uid: str, *, started_before: bool = False) -> None:
        """A source gave the pod ``uid``; ``started_before``: it ran before this node did
        (an adopted pod), so its start is not this node's to measure."""
        if uid in self._pods or uid in self._excluded:
            return
        if started_before:
            self._excluded.add(uid)
            return
        self._pods[uid] = _Start(seen=self._clock())

    def pulled(self, uid: str, *, image: str, seconds: float) -> None:
        """An image of the pod was pulled, ending now, in ``seconds`` (counted once per
        image: the sync reports a pull to each container that uses the image)."""
        state = self._pods.get(uid)
        if state is None or image in state.pulled:
            return
        state.pulled.add(image)
        end = self._clock()
        state.pulls.append((end - seconds, end))

    def event(self, uid: str, *, reason: str, message: str) -> None:
        if reason != "Pulled":
            return
        match = _PULLED.match(message)
        if match is not None:
            self.pulled(uid, image=match["image"], seconds=float(match["seconds"]))

    def status(self, uid: str, pod: Pod, status: PodStatus) -> PodStart | None:
        """Observe the pod's start when ``status`` is the first to show it; returns what was
        observed."""
        state = self._pods.get(uid)
        if state is None:
            return None
        if status.phase in ("Succeeded", "Failed") or is_unschedulable(status):
            del self._pods[uid]
            self._excluded.add(uid)
            return None
        if not has_started(status):
            return None
        del self._pods[uid]
        self._excluded.add(uid)
        total = self._clock() - state.seen
        self._total(total)
        if is_stateful(pod):
            return PodStart(total=total, sli=None)
        sli = total - image_pulling_time(state.pulls) - init_containers_runtime(pod, status)
        self._sli(sli)
        return PodStart(total=total, sli=sli)

    def forget(self, uid: str) -> None:
        self._pods.pop(uid, None)
        self._excluded.discard(uid)


__all__ = ["LoopLagMonitor", "NoMetrics", "NodeMetrics", "PodStartupTracker"]
