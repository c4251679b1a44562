"""A restart in place (``RestartAllContainers``) as the sync executor carries it out: the
running instances stop without ``preStop``, every instance is removed, the sandbox stays,
and each container's next instance is one restart further."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from lightkube.models.core_v1 import Pod

from asynckubelet.manifests import load_manifests_text
from asynckubelet.runtime import naming
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from asynckubelet.runtime.results import SyncAction
from asynckubelet.runtime.types import (
    ContainerState,
    ContainerStatus,
    PodRuntimeStatus,
    SandboxState,
    SandboxStatus,
)
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _pod() -> Pod:
    text = """
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  restartPolicy: Never
  initContainers: [{name: init, image: busybox}]
  containers:
  - name: app
    image: busybox
    lifecycle: {preStop: {exec: {command: ["sleep", "5"]}}}
  - name: trigger
    image: busybox
    restartPolicy: Never
    restartPolicyRules:
    - action: RestartAllContainers
      exitCodes: {operator: In, values: [42]}
"""
    return load_manifests_text(text, node_name="n1").pods[0]


def _runtime(pod: Pod, docker: FakeDocker) -> PodRuntimeStatus:
    assert pod.metadata is not None
    uid = pod.metadata.uid or ""
    docker.add_container(id="sandbox", state="running")
    docker.add_container(id="init-1", state="exited")
    docker.add_container(id="app-1", state="running")
    docker.add_container(id="trigger-1", state="exited", exit_code=42)

    def instance(cid: str, name: str, state: ContainerState, code: int = 0) -> ContainerStatus:
        return ContainerStatus(
            id=cid,
            name=name,
            state=state,
            created_at=NOW,
            exit_code=code,
            restart_count=2,
            sandbox_id="sandbox",
        )

    return PodRuntimeStatus(
        uid=uid,
        name="web",
        namespace="default",
        sandboxes=(
            SandboxStatus(
                id="sandbox", attempt=0, state=SandboxState.READY, created_at=NOW, ip="10.0.0.2"
            ),
        ),
        containers=(
            instance("trigger-1", "trigger", ContainerState.EXITED, 42),
            instance("app-1", "app", ContainerState.RUNNING),
            instance("init-1", "init", ContainerState.EXITED),
        ),
    )


async def test_a_restart_in_place_removes_every_container_and_keeps_the_sandbox() -> None:
    docker = FakeDocker(images=["busybox"])
    pod = _pod()
    runtime = _runtime(pod, docker)
    async with RuntimeManager(RuntimeConfig(node_name="n1"), docker=docker) as rm:
        result = await rm.sync_pod(pod, runtime, restart_all_containers=True)
    assert result.ok
    assert result.containers_reset
    assert docker.targets("stop_container") == ["app-1"]
    assert docker.count("exec_run") == 0, "preStop must not run in a restart in place"
    assert docker.targets("remove_container") == ["init-1", "app-1", "trigger-1"]
    assert set(docker.containers) == {"sandbox"}
    assert docker.count("create_container") == 0
    removed = [r.target for r in result.results if r.action is SyncAction.REMOVE_CONTAINER]
    assert removed == ["init", "app", "trigger"]


async def test_the_next_instance_after_a_restart_in_place_counts_one_restart_more() -> None:
    docker = FakeDocker(images=["busybox"])
    pod = _pod()
    runtime = _runtime(pod, docker)
    async with RuntimeManager(RuntimeConfig(node_name="n1"), docker=docker) as rm:
        await rm.sync_pod(pod, runtime, restart_all_containers=True)
        empty = PodRuntimeStatus(
            uid=runtime.uid, name="web", namespace="default", sandboxes=runtime.sandboxes
        )
        await rm.sync_pod(pod, empty)
        (init,) = [
            c
            for c in docker.containers.values()
            if c.labels.get(naming.LABEL_CONTAINER_NAME) == "init"
        ]
    assert init.labels[naming.LABEL_RESTART_COUNT] == "3"
    assert docker.targets("start_container")[-1] == init.id
