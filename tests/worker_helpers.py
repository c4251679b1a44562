"""Pods and runtimes for unit tests of a pod worker without a runtime manager: a pod of one
container ``app`` on node ``n1``, what the runtime reports of it, and the runtime surface a
worker uses, doing nothing unless a test's subclass says otherwise."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import builders
from lightkube.models.core_v1 import Pod

from asynckubelet.manifests import load_manifests_text
from asynckubelet.node.podsyncer import PodSyncer
from asynckubelet.runtime.results import PodSyncResult
from asynckubelet.runtime.types import (
    ContainerState,
    ContainerStatus,
    PodRuntimeStatus,
    SandboxState,
    SandboxStatus,
)
from asynckubelet.testing import FakeDocker

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def worker_pod(name: str = "web", *, restart_policy: str | None = "Never") -> Pod:
    """The pod ``name`` of one container ``app`` (busybox), as loaded for node ``n1``."""
    spec: dict[str, Any] = {} if restart_policy is None else {"restartPolicy": restart_policy}
    manifest = builders.pod_doc(name, **spec)
    return load_manifests_text(json.dumps(manifest), node_name="n1").pods[0]


def pod_status(pod: Pod, *, app: ContainerState, container_id: str = "c") -> PodRuntimeStatus:
    """The pod as the runtime reports it: a ready sandbox ``s``, and ``app`` in ``app``."""
    assert pod.metadata is not None
    assert pod.metadata.uid is not None
    assert pod.metadata.name is not None
    return PodRuntimeStatus(
        uid=pod.metadata.uid,
        name=pod.metadata.name,
        namespace="default",
        sandboxes=(SandboxStatus(id="s", attempt=0, state=SandboxState.READY, created_at=NOW),),
        containers=(
            ContainerStatus(id=container_id, name="app", state=app, created_at=NOW, sandbox_id="s"),
        ),
    )


class StubRuntime(PodSyncer):
    """The pod worker's syncer (:class:`~asynckubelet.node.podsyncer.PodSyncer`) doing
    nothing: a pod with nothing running, syncs, kills and removals that succeed, no events
    kept, an engine (a FakeDocker) made when first asked for."""

    node = "n1"
    volumes = None
    _docker: FakeDocker | None = None

    @property
    def docker(self) -> FakeDocker:
        if self._docker is None:
            self._docker = FakeDocker()
        return self._docker

    @docker.setter
    def docker(self, docker: FakeDocker) -> None:
        self._docker = docker

    def events(self, pod: Pod, *, type: str, reason: str, message: str, **kwargs: Any) -> None:
        pass

    async def hook_target(self, *args: Any, **kwargs: Any) -> Any:
        return None

    async def get_pod_status(self, *, uid: str, name: str, namespace: str) -> PodRuntimeStatus:
        return PodRuntimeStatus(uid=uid, name=name, namespace=namespace)

    async def sync_pod(self, *args: Any, **kwargs: Any) -> PodSyncResult:
        return PodSyncResult()

    async def garbage_collect(self, *args: Any) -> list[str]:
        return []

    async def kill_pod(self, *args: Any, **kwargs: Any) -> PodSyncResult:
        return PodSyncResult()

    async def remove_pod(self, *, uid: str) -> list[str]:
        return []

    def forget(self, cid: str) -> None:
        pass


class FakeRuntime(StubRuntime):
    """The pod's state is ``runtime``; its engine is ``docker``; what the worker asks for
    (``kill_pod``, ``remove_pod``) is recorded, and ``kill_pod`` awaits ``while_killing``
    (the containers stopping) when there is one."""

    def __init__(self, runtime: PodRuntimeStatus, docker: FakeDocker | None = None) -> None:
        self.runtime = runtime
        self.docker = docker or FakeDocker()
        self.asked: list[str] = []
        self.while_killing: Callable[[], Awaitable[None]] | None = None

    async def get_pod_status(self, *, uid: str, name: str, namespace: str) -> PodRuntimeStatus:
        return self.runtime

    async def kill_pod(self, *args: Any, **kwargs: Any) -> PodSyncResult:
        self.asked.append("kill_pod")
        if self.while_killing is not None:
            await self.while_killing()
        return PodSyncResult()

    async def remove_pod(self, *, uid: str) -> list[str]:
        self.asked.append("remove_pod")
        return []
