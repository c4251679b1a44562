"""The node's side of an in-place resize: which resize it takes on (``Infeasible`` and
``Deferred`` in the kubelet's words, the allocated resources kept meanwhile) and how the
pod's status reports it (``PodResizePending``, ``PodResizeInProgress``,
``containerStatuses[].resources`` and ``allocatedResources``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import builders
from lightkube.models.core_v1 import ContainerStatus as ApiContainerStatus
from lightkube.models.core_v1 import Pod, PodCondition, PodStatus, ResourceRequirements

from asynckubelet.node.admission import NodeInfo, NodeResources
from asynckubelet.node.resizes import (
    Allocations,
    Pending,
    allocated_of,
    applied_resources,
    apply,
    check,
    is_resize,
)
from asynckubelet.runtime.types import (
    ContainerResources,
    ContainerState,
    ContainerStatus,
    PodRuntimeStatus,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
NODE = NodeInfo(name="n", allocatable=NodeResources(cpu_millis=2000, memory=4 * 2**30))


def pod(cpu: str, memory: str, *, name: str = "web", image: str = "busybox") -> Pod:
    both = {"cpu": cpu, "memory": memory}
    res = {"requests": dict(both), "limits": dict(both)}
    return builders.pod(name, containers=[builders.container(image=image, resources=res)])


def test_a_resize_beyond_the_node_capacity_is_infeasible_in_the_kubelet_words() -> None:
    assert check(pod("3", "1Gi"), node=NODE, others=()) == Pending(
        "Infeasible", "Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000"
    )
    assert check(pod("3", "5Gi"), node=NODE, others=()) == Pending(
        "Infeasible",
        "Node didn't have enough capacity: memory, requested: 5368709120, capacity: 4294967296",
    )


def test_a_resize_that_does_not_fit_beside_the_other_pods_is_deferred() -> None:
    assert check(pod("1500m", "1Gi"), node=NODE, others=[pod("1", "1Gi", name="b")]) == Pending(
        "Deferred",
        "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000",
    )


def test_a_resize_that_fits_is_taken_on() -> None:
    assert check(pod("1", "1Gi"), node=NODE, others=[pod("1", "1Gi", name="b")]) is None


def test_a_change_of_the_resources_of_the_same_containers_is_a_resize() -> None:
    assert is_resize(pod("1", "1Gi"), pod("2", "1Gi"))
    assert not is_resize(pod("1", "1Gi"), pod("1", "1Gi"))
    assert is_resize(pod("1", "1Gi"), pod("2", "1Gi", image="other"))
    assert not is_resize(pod("1", "1Gi"), pod("1", "1Gi", image="other"))


def test_a_pending_resize_keeps_the_allocated_resources_until_it_fits() -> None:
    allocations = Allocations()
    running, wanted = pod("1", "1Gi"), pod("3", "1Gi")
    kept = allocations.allocate("u", running, wanted, node=NODE, others=())
    assert kept.spec is not None
    assert running.spec is not None
    assert kept.spec.containers[0].resources == running.spec.containers[0].resources
    assert allocations.pending["u"].reason == "Infeasible"
    smaller = pod("2", "1Gi")
    assert allocations.allocate("u", kept, smaller, node=NODE, others=()) is smaller
    assert "u" not in allocations.pending


def _runtime(actual: ContainerResources | None) -> PodRuntimeStatus:
    instance = ContainerStatus(
        id="c1", name="app", state=ContainerState.RUNNING, created_at=NOW, resources=actual
    )
    return PodRuntimeStatus(uid="u", name="web", namespace="default", containers=(instance,))


def _status() -> PodStatus:
    return PodStatus(
        containerStatuses=[
            ApiContainerStatus(name="app", image="busybox", imageID="", ready=True, restartCount=0)
        ],
        conditions=[PodCondition(type="Ready", status="True")],
    )


APPLIED = ContainerResources(cpu_shares=512, cpu_quota=50_000, cpu_period=100_000, memory=2**30)
"""The engine's settings of ``pod("500m", "1Gi")``."""


def _applied(**kwargs: Any) -> PodStatus:
    status = _status()
    apply(status, pod("500m", "1Gi"), _runtime(APPLIED), previous=None, now=NOW, **kwargs)
    return status


def test_a_carried_out_resize_reports_the_applied_and_allocated_resources() -> None:
    status = _applied(pending=None, error="")
    (cs,) = status.containerStatuses or []
    assert cs.allocatedResources == {"cpu": "500m", "memory": "1Gi"}
    assert cs.resources == ResourceRequirements(
        requests={"cpu": "500m", "memory": "1Gi"}, limits={"cpu": "500m", "memory": "1Gi"}
    )
    assert [c.type for c in status.conditions or []] == ["Ready"]


def test_a_resize_not_yet_applied_is_in_progress_with_the_engine_settings_reported() -> None:
    status = _status()
    old = ContainerResources(cpu_shares=102, cpu_quota=10_000, cpu_period=100_000, memory=2**29)
    apply(status, pod("500m", "1Gi"), _runtime(old), pending=None, error="", previous=None, now=NOW)
    (cs,) = status.containerStatuses or []
    assert cs.allocatedResources == {"cpu": "500m", "memory": "1Gi"}
    assert cs.resources == ResourceRequirements(
        requests={"cpu": "100m", "memory": "1Gi"}, limits={"cpu": "100m", "memory": "512Mi"}
    )
    progress = (status.conditions or [])[0]
    assert (progress.type, progress.status, progress.reason) == (
        "PodResizeInProgress",
        "True",
        None,
    )


def test_a_failed_update_is_in_progress_with_reason_error_and_its_message() -> None:
    status = _status()
    old = ContainerResources(cpu_shares=102, cpu_quota=10_000, cpu_period=100_000, memory=2**29)
    error = 'attempting to set container "app" memory limit (1) below current usage (2)'
    apply(
        status, pod("500m", "1Gi"), _runtime(old), pending=None, error=error, previous=None, now=NOW
    )
    progress = (status.conditions or [])[0]
    assert (progress.type, progress.reason, progress.message) == (
        "PodResizeInProgress",
        "Error",
        error,
    )


def test_a_pending_resize_is_reported_with_its_reason_and_message() -> None:
    pending = Pending(
        "Infeasible", "Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000"
    )
    status = _applied(pending=pending, error="")
    (condition, ready) = status.conditions or []
    assert (condition.type, condition.status, condition.reason, condition.message) == (
        "PodResizePending",
        "True",
        "Infeasible",
        pending.message,
    )
    assert condition.lastTransitionTime == NOW
    assert ready.type == "Ready"


def test_a_container_without_resources_reports_none() -> None:
    assert applied_resources(None, APPLIED) is None
    assert applied_resources(ResourceRequirements(), APPLIED) is None


def _saved(cpu: str, memory: str, *, allocated: bool = True) -> Pod:
    """A status file's pod whose container ``app`` had ``cpu``/``memory`` allocated."""
    both = {"cpu": cpu, "memory": memory}
    saved = pod("3", "1Gi")
    saved.status = PodStatus(
        containerStatuses=[
            ApiContainerStatus(
                name="app",
                image="busybox",
                imageID="",
                ready=True,
                restartCount=0,
                allocatedResources=dict(both) if allocated else None,
                resources=ResourceRequirements(requests=dict(both), limits=dict(both)),
            )
        ]
    )
    return saved


def test_a_restarted_node_starts_from_the_allocation_its_status_file_recorded() -> None:
    wanted = pod("3", "1Gi")
    started = allocated_of(wanted, _saved("500m", "512Mi"))
    assert started is not None
    assert started.spec is not None
    assert started.spec.containers[0].resources == ResourceRequirements(
        requests={"cpu": "500m", "memory": "512Mi"}, limits={"cpu": "500m", "memory": "512Mi"}
    )
    assert wanted.spec is not None
    assert wanted.spec.containers[0].resources.limits == {"cpu": "3", "memory": "1Gi"}  # type: ignore[union-attr]


def test_an_allocation_equal_to_the_spec_or_not_recorded_changes_nothing() -> None:
    assert allocated_of(pod("3", "1Gi"), _saved("3", "1Gi")) is None
    assert allocated_of(pod("3", "1Gi"), _saved("500m", "512Mi", allocated=False)) is None
    assert allocated_of(pod("3", "1Gi"), pod("1", "1Gi")) is None
