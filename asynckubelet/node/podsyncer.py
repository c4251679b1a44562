"""The pod worker's syncer: the runtime operations a :class:`~asynckubelet.node.runner.
PodWorker` drives its pod with, as a protocol.

The kubelet's pod workers call an injected ``podSyncer`` (``SyncPod``,
``SyncTerminatingPod``, ``SyncTerminatedPod``) and know nothing of the runtime behind
it. Here the worker is handed a :class:`PodSyncer`: the
:class:`~asynckubelet.runtime.manager.RuntimeManager` in production, anything with the
same surface in a test (a stub that records what it was asked), with no subclassing of
the manager.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from lightkube.models.core_v1 import Pod

    from asynckubelet.docker import DockerAPI
    from asynckubelet.runtime import backoff as backoff_mod
    from asynckubelet.runtime import hooks
    from asynckubelet.runtime.env import PodContext
    from asynckubelet.runtime.events import EventSink
    from asynckubelet.runtime.probes import ProbeResult
    from asynckubelet.runtime.results import PodSyncResult
    from asynckubelet.runtime.types import PodRuntimeStatus
    from asynckubelet.runtime.volumes import VolumeProvider


class PodSyncer(Protocol):
    """What a pod worker asks of the runtime: read the pod, sync it toward its spec, stop
    it, remove it, collect its dead containers; the engine for logs, events and probes."""

    @property
    def node(self) -> str:
        """The node name every object of the pod is marked with."""
        ...

    @property
    def docker(self) -> DockerAPI: ...

    @property
    def volumes(self) -> VolumeProvider | None: ...

    @property
    def events(self) -> EventSink: ...

    async def get_pod_status(self, *, uid: str, name: str, namespace: str) -> PodRuntimeStatus: ...

    async def sync_pod(
        self,
        pod: Pod,
        status: PodRuntimeStatus | None = None,
        *,
        context: PodContext | None = None,
        pull_secrets: Sequence[tuple[str, Mapping[str, bytes]]] = (),
        backoff: backoff_mod.Backoff | None = None,
        image_backoff: backoff_mod.Backoff | None = None,
        liveness: Mapping[str, ProbeResult] | None = None,
        startup: Mapping[str, ProbeResult] | None = None,
        restart_all_containers: bool = False,
    ) -> PodSyncResult: ...

    async def kill_pod(
        self,
        pod: Pod | None = None,
        status: PodRuntimeStatus | None = None,
        *,
        grace_period: float | None = None,
    ) -> PodSyncResult: ...

    async def remove_pod(self, *, uid: str) -> list[str]: ...

    async def garbage_collect(self, status: PodRuntimeStatus) -> list[str]: ...

    async def hook_target(
        self, pod: Pod, *, container_id: str, sandbox_id: str, pod_ip: str | None = None
    ) -> hooks.HookTarget: ...

    def forget(self, container_id: str) -> None:
        """Drop what is cached of a container an event says changed."""
        ...


__all__ = ["PodSyncer"]
