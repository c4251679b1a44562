"""In-place resize in the pod's decision (the kubelet's ``computePodResizeAction``, from
``TestComputePodActionsForPodResize``): a running container whose CPU or memory differ
from the engine's settings is updated in place, or restarted when its policy asks for it,
and a change of resources alone never counts as a changed spec."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import builders
import pytest
from lightkube.models.core_v1 import Container, Pod

from asynckubelet.runtime import naming, resizing
from asynckubelet.runtime.actions import compute_pod_actions
from asynckubelet.runtime.resizing import engine_host_config
from asynckubelet.runtime.resources import host_config_resources
from asynckubelet.runtime.types import (
    ContainerResources,
    ContainerState,
    ContainerStatus,
    PodRuntimeStatus,
    SandboxState,
    SandboxStatus,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def resources(cpu: str, memory: str) -> dict[str, Any]:
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}


def pod_with(
    cpu: str, memory: str, *, policy: dict[str, str] | None = None, image: str = "busybox"
) -> Pod:
    policies = [
        {"resourceName": name, "restartPolicy": (policy or {}).get(name, "NotRequired")}
        for name in ("cpu", "memory")
    ]
    ctr = builders.container(image=image, resources=resources(cpu, memory), resizePolicy=policies)
    return builders.pod(uid="u1", containers=[ctr], restartPolicy="Always")


def engine(container: Container) -> ContainerResources:
    host = host_config_resources(container)
    return ContainerResources(
        cpu_shares=host.get("CpuShares") or 0,
        cpu_quota=host.get("CpuQuota") or 0,
        cpu_period=host.get("CpuPeriod") or 0,
        memory=host.get("Memory") or 0,
    )


def running(created_from: Pod, *, known: bool = True) -> PodRuntimeStatus:
    """The runtime holding one running instance of ``created_from``'s container."""
    assert created_from.spec is not None
    ctr = created_from.spec.containers[0]
    instance = ContainerStatus(
        id="c1",
        name="app",
        state=ContainerState.RUNNING,
        created_at=T0,
        started_at=T0,
        hash=naming.hash_container(ctr),
        sandbox_id="s1",
        resources=engine(ctr) if known else None,
    )
    sandbox = SandboxStatus(
        id="s1", attempt=0, state=SandboxState.READY, created_at=T0, ip="10.0.0.2"
    )
    return PodRuntimeStatus(
        uid="u1", name="web", namespace="default", sandboxes=(sandbox,), containers=(instance,)
    )


def test_the_container_hash_leaves_resources_and_resize_policy_out() -> None:
    small, big = pod_with("100m", "32Mi"), pod_with("1", "1Gi", policy={"cpu": "RestartContainer"})
    assert small.spec is not None
    assert big.spec is not None
    assert naming.hash_container(small.spec.containers[0]) == naming.hash_container(
        big.spec.containers[0]
    )
    other = pod_with("100m", "32Mi", image="busybox:other")
    assert other.spec is not None
    assert naming.hash_container(other.spec.containers[0]) != naming.hash_container(
        small.spec.containers[0]
    )


def test_unchanged_resources_need_no_action() -> None:
    pod = pod_with("100m", "32Mi")
    assert compute_pod_actions(pod, running(pod)).is_noop


def test_a_resize_under_not_required_updates_the_running_container_in_place() -> None:
    actions = compute_pod_actions(pod_with("500m", "64Mi"), running(pod_with("100m", "32Mi")))
    assert not actions.containers_to_kill
    assert actions.containers_to_start == ()
    (update,) = actions.containers_to_update
    assert (update.container_id, update.name) == ("c1", "app")
    assert update.action.resized == frozenset({"cpu", "memory"})
    assert update.action.update == {
        "CpuShares": 512,
        "CpuPeriod": 100_000,
        "CpuQuota": 50_000,
        "Memory": 64 * 2**20,
        "MemorySwap": 128 * 2**20,
    }
    assert not update.lowers_memory


def test_a_lowered_memory_limit_is_marked_for_the_usage_check() -> None:
    actions = compute_pod_actions(pod_with("100m", "16Mi"), running(pod_with("100m", "32Mi")))
    (update,) = actions.containers_to_update
    assert update.action.resized == frozenset({"memory"})
    assert update.lowers_memory


@pytest.mark.parametrize("resource", ["cpu", "memory"])
def test_a_resource_with_the_restart_container_policy_restarts_only_when_it_changes(
    resource: str,
) -> None:
    before = pod_with("100m", "32Mi", policy={resource: "RestartContainer"})
    cpu, memory = ("200m", "32Mi") if resource == "cpu" else ("100m", "64Mi")
    actions = compute_pod_actions(
        pod_with(cpu, memory, policy={resource: "RestartContainer"}), running(before)
    )
    assert actions.containers_to_start == (0,)
    assert actions.containers_to_kill["c1"].message == "Container app resize requires restart"
    assert actions.containers_to_kill["c1"].reason == ""
    assert actions.containers_to_update == ()


def test_a_change_of_the_other_resource_is_updated_in_place_despite_a_restart_policy() -> None:
    before = pod_with("100m", "32Mi", policy={"memory": "RestartContainer"})
    actions = compute_pod_actions(
        pod_with("300m", "32Mi", policy={"memory": "RestartContainer"}), running(before)
    )
    assert not actions.containers_to_kill
    (update,) = actions.containers_to_update
    assert update.action.resized == frozenset({"cpu"})


def test_a_container_whose_engine_settings_are_unknown_is_left_alone() -> None:
    actions = compute_pod_actions(
        pod_with("500m", "64Mi"), running(pod_with("100m", "32Mi"), known=False)
    )
    assert actions.is_noop


def test_the_engine_settings_read_back_compare_equal_to_the_spec() -> None:
    pod = pod_with("250m", "48Mi")
    assert pod.spec is not None
    ctr = pod.spec.containers[0]
    action = resizing.resize_action(ctr, engine_host_config(engine(ctr)))
    assert action == resizing.ResizeAction()
