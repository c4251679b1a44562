"""Ephemeral containers in the kubelet's ``computePodActions`` and in the pod's status:
started once in the pod's sandbox, never restarted, reported in
``ephemeralContainerStatuses`` and not counted in the pod's readiness."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

from lightkube.models.core_v1 import Pod

from asynckubelet.manifests.defaults import default_pod
from asynckubelet.node.status import generate
from asynckubelet.runtime import naming
from asynckubelet.runtime.actions import compute_pod_actions, ephemeral_containers
from asynckubelet.runtime.types import (
    ContainerState,
    ContainerStatus,
    PodRuntimeStatus,
    SandboxState,
    SandboxStatus,
)

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _pod(*ephemeral: dict[str, Any], policy: str = "Always") -> Pod:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
        "spec": {
            "restartPolicy": policy,
            "containers": [{"name": "app", "image": "busybox"}],
            "ephemeralContainers": list(ephemeral),
        },
    }
    default_pod(doc)
    return cast(Pod, Pod.from_dict(doc))


def _app(pod: Pod, state: ContainerState = ContainerState.RUNNING) -> ContainerStatus:
    (app,) = pod.spec.containers if pod.spec is not None else []
    return ContainerStatus(
        id="app1",
        name="app",
        state=state,
        created_at=T0,
        started_at=T0,
        hash=naming.hash_container(app),
        image="busybox",
    )


def _debugger(state: ContainerState, exit_code: int = 0) -> ContainerStatus:
    return ContainerStatus(
        id="dbg1",
        name="debugger",
        state=state,
        created_at=T0 + timedelta(seconds=5),
        started_at=T0 + timedelta(seconds=5),
        exit_code=exit_code,
        image="busybox",
        image_id="docker-pullable://busybox@sha256:1",
    )


def _runtime(*containers: ContainerStatus, ready: bool = True) -> PodRuntimeStatus:
    state = SandboxState.READY if ready else SandboxState.NOTREADY
    sandbox = SandboxStatus(id="sb", attempt=0, state=state, created_at=T0, ip="10.0.0.2")
    return PodRuntimeStatus(
        uid="u1", name="web", namespace="default", sandboxes=(sandbox,), containers=containers
    )


DEBUGGER = {"name": "debugger", "image": "busybox", "targetContainerName": "app"}


def test_an_added_ephemeral_container_is_started_in_the_running_sandbox() -> None:
    pod = _pod(DEBUGGER)
    actions = compute_pod_actions(pod, _runtime(_app(pod)))
    assert actions.ephemeral_containers_to_start == (0,)
    assert (actions.create_sandbox, actions.kill_pod, actions.sandbox_id) == (False, False, "sb")
    assert actions.containers_to_start == ()
    assert not actions.is_noop


def test_an_ephemeral_container_that_ran_is_never_started_again() -> None:
    pod = _pod(DEBUGGER)
    for state, code in ((ContainerState.RUNNING, 0), (ContainerState.EXITED, 1)):
        actions = compute_pod_actions(pod, _runtime(_app(pod), _debugger(state, code)))
        assert actions.ephemeral_containers_to_start == ()
        assert actions.is_noop
        assert "dbg1" not in actions.containers_to_kill


def test_no_ephemeral_container_starts_with_a_new_sandbox_or_a_killed_pod() -> None:
    pod = _pod(DEBUGGER)
    actions = compute_pod_actions(pod, _runtime(_app(pod), ready=False))
    assert actions.create_sandbox
    assert actions.ephemeral_containers_to_start == ()
    ended = _pod(DEBUGGER, policy="Never")
    actions = compute_pod_actions(ended, _runtime(_app(ended, ContainerState.EXITED)))
    assert actions.kill_pod
    assert actions.ephemeral_containers_to_start == ()


def test_ephemeral_containers_become_containers_without_their_target() -> None:
    (found,) = ephemeral_containers(_pod(DEBUGGER))
    assert (found.name, found.image) == ("debugger", "busybox")
    assert "targetContainerName" not in found.to_dict()


def test_the_status_reports_ephemeral_containers_as_the_kubelet_does() -> None:
    pod = _pod(DEBUGGER)
    status = generate(pod, _runtime(_app(pod)), now=T0)
    (waiting,) = status.ephemeralContainerStatuses or []
    assert waiting.state is not None
    assert waiting.state.waiting is not None
    assert (waiting.ready, waiting.restartCount) == (False, 0)
    status = generate(pod, _runtime(_app(pod), _debugger(ContainerState.RUNNING)), now=T0)
    (running,) = status.ephemeralContainerStatuses or []
    assert running.state is not None
    assert running.state.running is not None
    assert (running.name, running.ready, running.restartCount) == ("debugger", False, 0)
    assert (running.containerID, running.image) == ("docker://dbg1", "busybox")
    assert running.imageID == "docker-pullable://busybox@sha256:1"
    assert [c.name for c in status.containerStatuses or []] == ["app"]
    ready = {c.type: c.status for c in status.conditions or []}
    assert ready["Ready"] == "True"


def test_a_pod_without_ephemeral_containers_reports_none() -> None:
    pod = _pod()
    assert generate(pod, _runtime(_app(pod)), now=T0).ephemeralContainerStatuses is None
