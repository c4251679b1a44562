"""``RuntimeManager``: the kubelet's ``SyncPod``, ``KillPod`` and ``GetPodStatus`` on Docker.

A facade that composes three parts: reading a pod's state back from Docker
(:mod:`~asynckubelet.runtime.status_reader`), the sync step executor
(:mod:`~asynckubelet.runtime.sync`), which carries out what
:func:`~asynckubelet.runtime.actions.compute_pod_actions` decides, and stopping and
garbage collection (:mod:`~asynckubelet.runtime.kill`). The manager builds what they share
once, a frozen :class:`~asynckubelet.runtime.deps.RuntimeDeps` (the engine, the network
backend, the event sink, volumes, images, probe helpers, the engine's facts looked up once),
and hands it to each; none of them knows the manager.

State lives in Docker only (names and labels), so a manager that is restarted, or a
process that dies half-way, converges on the next call. Cleanup of half-made objects runs
shielded from cancellation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Self

from lightkube.models.core_v1 import Pod

from asynckubelet.docker import DockerAPI, DockerClient
from asynckubelet.network import LoopbackPlugin, NetworkPlugin
from asynckubelet.runtime import backoff as backoff_mod
from asynckubelet.runtime import containers as ctr
from asynckubelet.runtime import hooks, kill, probehelper, status_reader
from asynckubelet.runtime.actions import compute_pod_actions
from asynckubelet.runtime.config import RuntimeConfig
from asynckubelet.runtime.deps import RuntimeDeps
from asynckubelet.runtime.engine import Engine
from asynckubelet.runtime.env import PodContext
from asynckubelet.runtime.events import EventSink, log_event
from asynckubelet.runtime.gate import StartGate
from asynckubelet.runtime.images import ImageManager, auths_from_secrets
from asynckubelet.runtime.metrics import RuntimeMetrics, count_failed_steps, measured
from asynckubelet.runtime.probes import ProbeResult
from asynckubelet.runtime.results import PodSyncResult
from asynckubelet.runtime.statuscache import StatusCache
from asynckubelet.runtime.sync import PodSync
from asynckubelet.runtime.types import ContainerStatus, PodRuntimeStatus
from asynckubelet.runtime.volumes import VolumeProvider


class RuntimeManager:
    """Pod lifecycle on one Docker engine. Use as ``async with RuntimeManager(...) as rm``."""

    def __init__(
        self,
        config: RuntimeConfig | None = None,
        *,
        docker: DockerAPI | None = None,
        network: NetworkPlugin | None = None,
        events: EventSink | None = None,
        volumes: VolumeProvider | None = None,
        metrics: RuntimeMetrics | None = None,
    ) -> None:
        self.config = config or RuntimeConfig()
        self._owned_docker: DockerClient | None = None
        if docker is None:
            docker = self._owned_docker = DockerClient(url=self.config.docker_url)
        images = ImageManager(docker)
        self.deps = RuntimeDeps(
            config=self.config,
            docker=docker,
            network=network or LoopbackPlugin(),
            events=events or log_event,
            volumes=volumes,
            metrics=metrics,
            images=images,
            starts=StartGate(self.config.max_parallel_starts),
            probe_helpers=probehelper.ProbeHelpers(docker=docker, node=self.config.node_name),
            engine=Engine(docker, config=self.config, images=images),
            cache=StatusCache(),
            reset_restart_counts={},
        )
        """What the runtime's parts work with; replaced whole when a part is swapped."""
        self.images = images
        self.starts = self.deps.starts
        """Turns at creating and starting a container on the engine."""
        self.probe_helpers = self.deps.probe_helpers
        """Per-sandbox helpers for HTTP/TCP probes of pods the node cannot reach."""

    async def __aenter__(self) -> Self:
        if self._owned_docker is not None:
            await self._owned_docker.__aenter__()
        try:
            await self.network.start()
        except BaseException:
            if self._owned_docker is not None:
                await self._owned_docker.close()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._owned_docker is not None:
            await self._owned_docker.close()

    # -- the parts ------------------------------------------------------------------------

    @property
    def node(self) -> str:
        return self.config.node_name

    @property
    def docker(self) -> DockerAPI:
        return self.deps.docker

    @property
    def network(self) -> NetworkPlugin:
        return self.deps.network

    @network.setter
    def network(self, plugin: NetworkPlugin) -> None:
        self.deps = dataclasses.replace(self.deps, network=plugin)

    @property
    def events(self) -> EventSink:
        return self.deps.events

    @property
    def volumes(self) -> VolumeProvider | None:
        """Pod volumes; None: volumes are not mounted (the node normally hands one in)."""
        return self.deps.volumes

    @property
    def metrics(self) -> RuntimeMetrics | None:
        """Told the duration and failures of ``sync_pod``, ``kill_pod`` and ``get_pod_status``."""
        return self.deps.metrics

    @property
    def cgroup_driver(self) -> str | None:
        """The engine's cgroup driver, once looked up (:meth:`engine_cgroup_driver`)."""
        return self.deps.engine.cgroup_driver

    @property
    def reset_restart_counts(self) -> dict[tuple[str, str], int]:
        """(pod UID, container name) -> the restart count of the container's next instance,
        after a restart in place removed every instance that carried it."""
        return self.deps.reset_restart_counts

    # -- status ---------------------------------------------------------------------------

    async def get_pod_status(self, *, uid: str, name: str, namespace: str) -> PodRuntimeStatus:
        """Everything Docker holds about the pod, newest first, from Docker alone."""
        with measured(self.metrics, "get_pod_status"):
            return await status_reader.pod_status(
                self.deps, uid=uid, name=name, namespace=namespace
            )

    async def get_status_of(self, pod: Pod) -> PodRuntimeStatus:
        name, ns, uid = ctr.pod_identity(pod)
        return await self.get_pod_status(uid=uid, name=name, namespace=ns)

    async def sandbox_pid(self, uid: str, sandbox_id: str) -> int:
        """The process id of the started sandbox of pod ``uid`` (its network namespace);
        the inspect that tells it is kept, so the next status read need not make it again."""
        return await self.deps.sandbox_pid(uid, sandbox_id)

    def forget(self, container_id: str) -> None:
        """Inspect this container afresh on the next status read. For event watchers: Docker
        emits ``die`` before its container list shows the exit, so a read woken by the
        event would otherwise keep the cached ``running``."""
        self.deps.cache.forget(container_id)

    async def list_pod_uids(self, *, any_owner: bool = False) -> dict[str, tuple[str, str]]:
        """uid -> (namespace, name) of every pod with objects of this node on Docker: those
        of this runtime's owner (:attr:`RuntimeConfig.owner`), or with ``any_owner`` all."""
        return await status_reader.pod_uids(self.deps, any_owner=any_owner)

    async def list_pod_uids_by_owner(
        self,
    ) -> tuple[dict[str, tuple[str, str]], dict[str, tuple[str, str]]]:
        """Both of :meth:`list_pod_uids`' answers, this owner's pods and every pod of the
        node, from one container list."""
        return await status_reader.pods_on_node(self.deps)

    # -- sync -----------------------------------------------------------------------------

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
    ) -> PodSyncResult:
        """Bring the pod on Docker one step closer to its spec; the kubelet's ``SyncPod``.

        ``pull_secrets`` are ``(type, data)`` of the pod's image pull Secrets.
        ``restart_all_containers`` says the pod is restarting in place
        (:func:`~asynckubelet.runtime.actions.should_all_containers_restart`): this sync
        then only removes the pod's containers, keeping its sandbox, IP and volumes.
        """
        with measured(self.metrics, "sync_pod"):
            if status is None:
                status = await self.get_status_of(pod)
            actions = compute_pod_actions(
                pod,
                status,
                liveness=liveness or {},
                startup=startup or {},
                restart_all_containers=restart_all_containers,
            )
            result = PodSyncResult()
            run = PodSync(
                self.deps,
                pod,
                status,
                actions,
                result,
                context=context or PodContext(node_name=self.node),
                auths=auths_from_secrets(pull_secrets),
                backoff=backoff if backoff is not None else backoff_mod.Backoff(),
                image_backoff=image_backoff if image_backoff is not None else backoff_mod.Backoff(),
            )
            await run.execute()
        count_failed_steps(self.metrics, result)
        return result

    # -- kill and garbage collection ------------------------------------------------------

    def grace_period_of(self, pod: Pod | None, override: float | None) -> float:
        return kill.grace_period_of(pod, override)

    async def kill_container(
        self,
        pod: Pod | None,
        status: ContainerStatus,
        *,
        grace_period: float,
        reason: str = "",
        message: str = "",
        result: PodSyncResult | None = None,
        pre_stop: bool = True,
    ) -> None:
        """Stop one container: its ``preStop`` hook (unless ``pre_stop`` is False), its stop
        signal, then SIGKILL after the grace period (>= 2 s)."""
        await kill.kill_container(
            self.deps,
            pod,
            status,
            grace_period=grace_period,
            reason=reason,
            message=message,
            result=result,
            pre_stop=pre_stop,
        )

    async def kill_pod(
        self,
        pod: Pod | None = None,
        status: PodRuntimeStatus | None = None,
        *,
        grace_period: float | None = None,
    ) -> PodSyncResult:
        """Stop everything of the pod, gracefully and in order; idempotent.

        Regular containers stop first (together), then sidecars in reverse order, then
        anything else still running; then the sandbox, then the pod's network.
        """
        with measured(self.metrics, "kill_pod"):
            if status is None:
                assert pod is not None  # noqa: S101  (type narrowing: the pod or its status is given)
                status = await self.get_status_of(pod)
            result = await kill.kill_pod(self.deps, pod, status, grace_period=grace_period)
        count_failed_steps(self.metrics, result)
        return result

    async def remove_pod(self, *, uid: str) -> list[str]:
        """Remove every Docker object of the pod (after :meth:`kill_pod`); returns the ids."""
        return await kill.remove_pod(self.deps, uid=uid)

    async def garbage_collect(self, status: PodRuntimeStatus) -> list[str]:
        """Remove dead containers but the newest dead instance of each container name, and
        dead sandboxes but the newest that no remaining container uses; returns the ids."""
        return await kill.garbage_collect(self.deps, status)

    # -- hooks, probes, the engine and the node -------------------------------------------

    async def hook_target(
        self, pod: Pod, *, container_id: str, sandbox_id: str, pod_ip: str | None = None
    ) -> hooks.HookTarget:
        """Where a hook's or probe's HTTP/TCP goes (:meth:`RuntimeDeps.hook_target`)."""
        return await self.deps.hook_target(
            pod, container_id=container_id, sandbox_id=sandbox_id, pod_ip=pod_ip
        )

    async def may_have_probe_helpers(self) -> bool:
        return await self.deps.engine.may_have_probe_helpers()

    def engine_is_local(self) -> bool:
        """Whether the engine's files and namespaces are on this machine."""
        return self.deps.engine.is_local()

    async def engine_info(self) -> Mapping[str, Any]:
        """``docker info``, asked once (a failure is asked again next time)."""
        return await self.deps.engine.info()

    async def engine_cgroup_driver(self) -> str:
        return await self.deps.engine.find_cgroup_driver()

    async def container_log_config(self) -> dict[str, Any] | None:
        """``HostConfig.LogConfig`` of the containers this node makes
        (:meth:`Engine.container_log_config`)."""
        return await self.deps.engine.container_log_config()

    async def cgroup_parent(self, pod: Pod) -> str | None:
        """The pod's cgroup parent, or None when pod cgroups are off."""
        return await self.deps.engine.cgroup_parent(pod)

    async def link_log(self, pod: Pod, container: str, restart_count: int, cid: str) -> None:
        """Link the instance's log file into the pod's log directory, when there is one."""
        await self.deps.engine.link_log(pod, container, restart_count, cid)

    async def pause_image(self) -> str:
        """The sandbox image; the project's own is made here the first time it is missing
        (:meth:`Engine.pause_image`)."""
        return await self.deps.engine.pause_image()


__all__ = ["RuntimeConfig", "RuntimeManager"]
