"""The pod start SLI, as the kubelet's startup latency tracker measures it: from the pod's
first sighting to all its containers started, less image pulls and init containers, once
per pod, and only for pods the SLO covers."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from lightkube.models.core_v1 import (
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    Pod,
    PodCondition,
    PodStatus,
)

from asynckubelet.manifests import load_manifests_text
from asynckubelet.node.metrics import (
    NodeMetrics,
    PodStart,
    PodStartupTracker,
    image_pulling_time,
    init_containers_runtime,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def pod(spec: str = "") -> Pod:
    text = f"""
apiVersion: v1
kind: Pod
metadata: {{name: web}}
spec:
  containers: [{{name: app, image: busybox}}]
  {spec}
"""
    return load_manifests_text(text, node_name="n1").pods[0]


def app(state: ContainerState) -> ContainerStatus:
    return ContainerStatus(
        name="app", image="busybox", imageID="", ready=False, restartCount=0, state=state
    )


def init(name: str, ran: float) -> ContainerStatus:
    done = ContainerStateTerminated(
        exitCode=0, startedAt=T0, finishedAt=T0 + timedelta(seconds=ran)
    )
    return ContainerStatus(
        name=name,
        image="busybox",
        imageID="",
        ready=False,
        restartCount=0,
        state=ContainerState(terminated=done),
    )


STARTED = PodStatus(
    phase="Running",
    containerStatuses=[app(ContainerState(running=ContainerStateRunning(startedAt=T0)))],
)
CREATING = PodStatus(
    phase="Pending",
    containerStatuses=[
        app(ContainerState(waiting=ContainerStateWaiting(reason="ContainerCreating")))
    ],
)


@dataclass
class Clock:
    now: float = 100.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Observed:
    sli: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)


def tracker() -> tuple[PodStartupTracker, Clock, Observed]:
    clock, seen = Clock(), Observed()
    return PodStartupTracker(sli=seen.sli.append, total=seen.total.append, clock=clock), clock, seen


def test_a_plain_pod_is_observed_from_first_sight_to_all_containers_started() -> None:
    t, clock, seen = tracker()
    p = pod()
    t.seen("u1")
    t.status("u1", p, CREATING)
    clock.now += 2.5
    assert t.status("u1", p, STARTED) == PodStart(total=2.5, sli=2.5)
    assert (seen.sli, seen.total) == ([2.5], [2.5])


def test_a_pod_is_observed_once() -> None:
    t, clock, seen = tracker()
    t.seen("u1")
    clock.now += 1
    t.status("u1", pod(), STARTED)
    clock.now += 1
    assert t.status("u1", pod(), STARTED) is None
    assert seen.total == [1]


def test_image_pulls_are_left_out_of_the_sli() -> None:
    t, clock, _ = tracker()
    t.seen("u1")
    clock.now += 5
    t.event("u1", reason="Pulled", message='Successfully pulled image "busybox" in 3.000s')
    clock.now += 1
    assert t.status("u1", pod(), STARTED) == PodStart(total=6.0, sli=3.0)


def test_a_pull_reported_to_each_container_of_the_image_counts_once() -> None:
    t, clock, _ = tracker()
    t.seen("u1")
    clock.now += 5
    for _ in range(3):
        t.event("u1", reason="Pulled", message='Successfully pulled image "busybox" in 2.000s')
    assert t.status("u1", pod(), STARTED) == PodStart(total=5.0, sli=3.0)


def test_an_image_already_present_takes_nothing_off() -> None:
    t, clock, _ = tracker()
    t.seen("u1")
    clock.now += 4
    t.event("u1", reason="Pulled", message='Container image "busybox" already present on machine')
    assert t.status("u1", pod(), STARTED) == PodStart(total=4.0, sli=4.0)


def test_init_containers_are_left_out_of_the_sli_but_not_sidecars() -> None:
    t, clock, _ = tracker()
    p = pod(
        "initContainers: [{name: i1, image: busybox}, {name: i2, image: busybox}, "
        "{name: side, image: busybox, restartPolicy: Always}]"
    )
    t.seen("u1")
    clock.now += 10
    status = PodStatus(
        phase="Running",
        containerStatuses=STARTED.containerStatuses,
        initContainerStatuses=[init("i1", 2.0), init("i2", 1.5), init("side", 4.0)],
    )
    assert t.status("u1", p, status) == PodStart(total=10.0, sli=6.5)


def test_a_stateful_pod_counts_in_the_total_only() -> None:
    t, clock, seen = tracker()
    p = pod("volumes: [{name: data, persistentVolumeClaim: {claimName: c}}]")
    t.seen("u1")
    clock.now += 3
    assert t.status("u1", p, STARTED) == PodStart(total=3.0, sli=None)
    assert (seen.sli, seen.total) == ([], [3.0])


@pytest.mark.parametrize(
    "first",
    [
        PodStatus(phase="Pending", conditions=[PodCondition(type="PodScheduled", status="False")]),
        PodStatus(phase="Failed"),
    ],
    ids=["not schedulable (gated)", "finished before it started"],
)
def test_pods_the_slo_does_not_cover_are_never_observed(first: PodStatus) -> None:
    t, clock, seen = tracker()
    t.seen("u1")
    t.status("u1", pod(), first)
    clock.now += 1
    assert t.status("u1", pod(), STARTED) is None
    assert seen.total == []


def test_a_pod_that_ran_before_the_node_started_is_not_observed() -> None:
    t, _, seen = tracker()
    t.seen("u1", started_before=True)
    assert t.status("u1", pod(), STARTED) is None
    assert seen.total == []


@pytest.mark.parametrize(
    ("sessions", "seconds"),
    [
        ([], 0.0),
        ([(10.0, 16.0), (11.0, 18.0), (14.0, 20.0)], 10.0),
        ([(0.0, 1.0), (2.0, 3.0)], 2.0),
        ([(2.0, 3.0), (0.0, 5.0)], 5.0),
    ],
)
def test_overlapping_pulls_count_once(sessions: list[tuple[float, float]], seconds: float) -> None:
    assert image_pulling_time(sessions) == seconds


def test_init_container_runtime_counts_the_current_and_the_previous_instance() -> None:
    p = pod("initContainers: [{name: i1, image: busybox}]")
    current = init("i1", 2.0)
    current.lastState = ContainerState(
        terminated=ContainerStateTerminated(
            exitCode=1, startedAt=T0, finishedAt=T0 + timedelta(seconds=1)
        )
    )
    assert init_containers_runtime(p, PodStatus(initContainerStatuses=[current])) == 3.0


def test_the_node_exposes_the_start_histograms_and_the_loop_lag() -> None:
    text = NodeMetrics(running_pods=lambda: 0, running_containers=dict).render()
    for name in (
        "kubelet_pod_start_sli_duration_seconds_bucket",
        "kubelet_pod_start_total_duration_seconds_bucket",
        "kubelet_pod_start_duration_seconds_bucket",
        "asynckubelet_event_loop_lag_seconds_bucket",
    ):
        assert name in text
