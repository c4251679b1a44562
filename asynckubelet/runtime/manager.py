"""``RuntimeManager``: the kubelet's ``SyncPod``, ``KillPod`` and ``GetPodStatus`` on Docker.

A facade over three parts: reading a pod's state back from Docker
(:mod:`~asynckubelet.runtime.status_reader`), the sync step executor
(:mod:`~asynckubelet.runtime.sync`), which carries out what
:func:`~asynckubelet.runtime.actions.compute_pod_actions` decides, and stopping and
garbage collection (:mod:`~asynckubelet.runtime.kill`). The manager holds what they share:
the engine, the network backend, the event sink, volumes, images, probe helpers, and the
few facts about the engine that are looked up once (its cgroup driver, whether it is
local or runs apart).

State lives in Docker only (names and labels), so a manager that is restarted, or a
process that dies half-way, converges on the next call. Cleanup of half-made objects runs
shielded from cancellation.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import anyio
from lightkube.models.core_v1 import Pod

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.docker import DockerAPI, DockerClient
from asynckubelet.docker.engine import is_local_daemon
from asynckubelet.images.build import DEFAULT_PAUSE_TAG
from asynckubelet.network import LoopbackPlugin, NetworkPlugin
from asynckubelet.network.dns import DNSSettings
from asynckubelet.runtime import backoff as backoff_mod
from asynckubelet.runtime import containers as ctr
from asynckubelet.runtime import hooks, kill, nodefiles, probehelper
from asynckubelet.runtime.actions import compute_pod_actions
from asynckubelet.runtime.env import PodContext
from asynckubelet.runtime.events import EventSink, log_event
from asynckubelet.runtime.gate import StartGate, default_parallel_starts
from asynckubelet.runtime.images import ImageManager, auths_from_secrets
from asynckubelet.runtime.logrotation import (
    DEFAULT_MAX_FILES,
    DEFAULT_MAX_SIZE,
    LogRotation,
    check_max_files,
    parse_max_size,
)
from asynckubelet.runtime.metrics import RuntimeMetrics, count_failed_steps, measured
from asynckubelet.runtime.probes import ProbeResult
from asynckubelet.runtime.qos import qos_class
from asynckubelet.runtime.results import PodSyncResult
from asynckubelet.runtime.status_reader import StatusReader
from asynckubelet.runtime.sync import PodSync
from asynckubelet.runtime.types import ContainerStatus, PodRuntimeStatus
from asynckubelet.runtime.volumes import VolumeProvider


@dataclass(frozen=True)
class RuntimeConfig:
    """How the runtime manager works on this node."""

    node_name: str = field(default_factory=socket.gethostname)
    """Ownership label of everything created; objects of other nodes are never touched."""
    pause_image: str | None = None
    """The sandbox image, pulled when missing; None: the project's own
    ``asynckubelet.local/pause``, built here when missing and never pulled."""
    docker_url: str | None = None
    dns: DNSSettings = field(default_factory=DNSSettings)
    """Cluster DNS, cluster domain and the node's resolver file, for pods' resolv.conf."""
    cgroup_root: str | None = None
    """Run each pod's containers under one pod cgroup below this root, grouped by QoS class
    as the kubelet does (e.g. ``/asynckubelet``); None: Docker's own placement. Local
    engines only."""
    owner: str = ""
    """The owner mark of the pods this runtime makes (:data:`~asynckubelet.runtime.naming.
    LABEL_OWNER`), e.g. ``run-<id>``; empty for the node agent. A runtime lists as its
    node's pods only those with its own mark (or none, for the agent)."""
    pod_log_dir: Path | None = None
    """Link each container instance's log file here as
    ``<namespace>_<name>_<uid>/<container>/<restartCount>.log`` (the kubelet's
    /var/log/pods layout); None: no links. Local engines only."""
    max_parallel_starts: int = field(default_factory=default_parallel_starts)
    """At most this many containers (sandboxes included) are being created and started
    on the engine at once; the others wait their turn, a pod's own containers before new
    pods' sandboxes (:mod:`~asynckubelet.runtime.gate`). 0: no limit."""
    container_log_max_size: str = DEFAULT_MAX_SIZE
    """A container's log file is rotated past this size, a Kubernetes quantity (the
    kubelet's ``containerLogMaxSize``); negative: no rotation
    (:mod:`~asynckubelet.runtime.logrotation`)."""
    container_log_max_files: int = DEFAULT_MAX_FILES
    """Log files kept per container, the one written included; at least 2 (the kubelet's
    ``containerLogMaxFiles``)."""
    seccomp_default: bool = True
    """Containers whose pod and container set no seccomp profile get ``RuntimeDefault``, the
    engine's default profile (the kubelet's ``--seccomp-default``); False: ``Unconfined``."""

    def __post_init__(self) -> None:
        _log_rotation(self)


def _log_rotation(config: RuntimeConfig) -> LogRotation:
    """The log limits; a :class:`ValueError` naming the field that is wrong."""
    return LogRotation(
        max_size=parse_max_size(config.container_log_max_size, name="container_log_max_size"),
        max_files=check_max_files(config.container_log_max_files, name="container_log_max_files"),
    )


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
        self.volumes = volumes
        """Pod volumes; None: volumes are not mounted (the node normally hands one in)."""
        self.metrics = metrics
        """Told the duration and failures of ``sync_pod``, ``kill_pod`` and ``get_pod_status``."""
        self._owned_docker: DockerClient | None = None
        if docker is None:
            docker = self._owned_docker = DockerClient(url=self.config.docker_url)
        self.docker = docker
        self.network: NetworkPlugin = network or LoopbackPlugin()
        self.events: EventSink = events or log_event
        self.images = ImageManager(self.docker)
        self.starts = StartGate(self.config.max_parallel_starts)
        """Turns at creating and starting a container on the engine."""
        self.probe_helpers = probehelper.ProbeHelpers(docker=self.docker, node=self.node)
        """Per-sandbox helpers for HTTP/TCP probes of pods the node cannot reach."""
        self.cgroup_driver: str | None = None
        """The engine's cgroup driver, once looked up (:meth:`engine_cgroup_driver`)."""
        self._status = StatusReader(self)
        self._pause_ready = False
        self.reset_restart_counts: dict[tuple[str, str], int] = {}
        """(pod UID, container name) -> the restart count of the container's next instance,
        after a restart in place removed every instance that carried it."""
        self._isolated: bool | None = None
        self._info: Mapping[str, Any] | None = None
        self._info_lock = anyio.Lock()
        """One ``docker info`` at a time: the pods of a burst all want the engine's facts
        at once, and one answer serves them all."""
        self._log_rotation = _log_rotation(self.config)
        self._log_driver: str | None = None

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

    @property
    def node(self) -> str:
        return self.config.node_name

    # -- status ---------------------------------------------------------------------------

    async def get_pod_status(self, *, uid: str, name: str, namespace: str) -> PodRuntimeStatus:
        """Everything Docker holds about the pod, newest first, from Docker alone."""
        with measured(self.metrics, "get_pod_status"):
            return await self._status.pod_status(uid=uid, name=name, namespace=namespace)

    async def get_status_of(self, pod: Pod) -> PodRuntimeStatus:
        name, ns, uid = ctr.pod_identity(pod)
        return await self.get_pod_status(uid=uid, name=name, namespace=ns)

    async def sandbox_pid(self, uid: str, sandbox_id: str) -> int:
        """The process id of the started sandbox of pod ``uid`` (its network namespace);
        the inspect that tells it is kept, so the next status read need not make it again."""
        info = await self.docker.inspect_container(sandbox_id)
        self._status.remember_sandbox(uid, info)
        return int(info.get("State", {}).get("Pid", 0) or 0)

    def forget(self, container_id: str) -> None:
        """Inspect this container afresh on the next status read. For event watchers: Docker
        emits ``die`` before its container list shows the exit, so a read woken by the
        event would otherwise keep the cached ``running``."""
        self._status.forget(container_id)

    async def list_pod_uids(self, *, any_owner: bool = False) -> dict[str, tuple[str, str]]:
        """uid -> (namespace, name) of every pod with objects of this node on Docker: those
        of this runtime's owner (:attr:`RuntimeConfig.owner`), or with ``any_owner`` all."""
        return await self._status.pod_uids(any_owner=any_owner)

    async def list_pod_uids_by_owner(
        self,
    ) -> tuple[dict[str, tuple[str, str]], dict[str, tuple[str, str]]]:
        """Both of :meth:`list_pod_uids`' answers, this owner's pods and every pod of the
        node, from one container list."""
        return await self._status.pods_on_node()

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
                self,
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
            self,
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
            result = await kill.kill_pod(self, pod, status, grace_period=grace_period)
        count_failed_steps(self.metrics, result)
        return result

    async def remove_pod(self, *, uid: str) -> list[str]:
        """Remove every Docker object of the pod (after :meth:`kill_pod`); returns the ids."""
        for key in [k for k in self.reset_restart_counts if k[0] == uid]:
            del self.reset_restart_counts[key]
        return await kill.remove_pod(self, uid=uid)

    async def garbage_collect(self, status: PodRuntimeStatus) -> list[str]:
        """Remove dead containers but the newest dead instance of each container name, and
        dead sandboxes but the newest that no remaining container uses; returns the ids."""
        return await kill.garbage_collect(self, status)

    # -- hooks and probes -----------------------------------------------------------------

    async def hook_target(
        self, pod: Pod, *, container_id: str, sandbox_id: str, pod_ip: str | None = None
    ) -> hooks.HookTarget:
        """Where a hook's or probe's HTTP/TCP goes (:func:`probehelper.choose_route`): the
        pod IP, the node's loopback, the sandbox's netns, or the pod's probe helper.
        ``pod_ip`` when the caller knows it (``""``: none), else it is looked up."""
        host_network = bool(pod.spec is not None and pod.spec.hostNetwork)
        if pod_ip is None and not host_network:
            try:
                net = await self.network.get_pod_network_status(sandbox_id=sandbox_id)
            except errors.AsyncKubeletError:
                net = None
            pod_ip = net.ips[0] if net is not None and net.ips else ""
        route = probehelper.choose_route(
            host_network=host_network,
            pod_ip=pod_ip or "",
            engine_local=self.engine_is_local(),
            engine_isolated=await self._engine_isolated(),
            root=probehelper.is_root(),
        )
        if route is probehelper.Route.NODE_LOOPBACK:
            return hooks.HookTarget(container_id=container_id, host="127.0.0.1", netns=None)
        if route is probehelper.Route.POD_IP:
            return hooks.HookTarget(container_id=container_id, host=pod_ip or "", netns=None)
        host = pod_ip or "127.0.0.1"
        if route is probehelper.Route.HELPER:
            try:
                helper = await self.probe_helpers.container_for(sandbox_id=sandbox_id)
            except errors.AsyncKubeletError as e:
                return hooks.HookTarget(
                    container_id=container_id,
                    host=host,
                    netns=None,
                    error=f"cannot start the pod's probe helper: {e}",
                )
            return hooks.HookTarget(container_id=container_id, host=host, netns=None, helper=helper)
        netns: str | None = None
        try:
            info = await self.docker.inspect_container(sandbox_id)
            pid = info.get("State", {}).get("Pid", 0)
            netns = f"/proc/{pid}/ns/net" if pid else None
        except errors.DockerError:
            pass
        return hooks.HookTarget(container_id=container_id, host="127.0.0.1", netns=netns)

    async def _engine_isolated(self) -> bool:
        if self._isolated is None:
            try:
                self._isolated = probehelper.engine_is_isolated(await self.engine_info())
            except errors.DockerError:
                return False
        return self._isolated

    async def may_have_probe_helpers(self) -> bool:
        return (
            not self.engine_is_local() or not probehelper.is_root() or await self._engine_isolated()
        )

    # -- the engine and the node ----------------------------------------------------------

    def engine_is_local(self) -> bool:
        """Whether the engine's files and namespaces are on this machine."""
        return is_local_daemon(self.docker.url)

    async def engine_info(self) -> Mapping[str, Any]:
        """``docker info``, asked once (a failure is asked again next time)."""
        if self._info is None:
            async with self._info_lock:
                if self._info is None:
                    self._info = await self.docker.info()
        return self._info

    async def engine_cgroup_driver(self) -> str:
        if self.cgroup_driver is None:
            info = await self.engine_info()
            self.cgroup_driver = str(info.get("CgroupDriver", "cgroupfs"))
        return self.cgroup_driver

    async def container_log_config(self) -> dict[str, Any] | None:
        """``HostConfig.LogConfig`` of the containers this node makes: the log limits, in
        the engine's default log driver when it rotates files; None otherwise (said once).
        An engine that cannot say its driver fails the step (no container is made without
        the limits), as for its cgroup driver."""
        rotation = self._log_rotation
        if rotation.max_size < 0:
            return None
        if self._log_driver is None:
            driver = str((await self.engine_info()).get("LoggingDriver") or "")
            if self._log_driver is None and rotation.log_config(driver) is None:
                logger.info(
                    "the engine's log driver is {}: container logs are not rotated by this"
                    " node (the driver keeps them)",
                    driver or "unknown",
                )
            self._log_driver = driver
        return rotation.log_config(self._log_driver)

    async def cgroup_parent(self, pod: Pod) -> str | None:
        """The pod's cgroup parent, or None when pod cgroups are off."""
        root = self.config.cgroup_root
        if root is None or not self.engine_is_local():
            return None
        driver = await self.engine_cgroup_driver()
        _, _, uid = ctr.pod_identity(pod)
        return nodefiles.pod_cgroup_parent(root=root, driver=driver, qos=qos_class(pod), uid=uid)

    async def link_log(self, pod: Pod, container: str, restart_count: int, cid: str) -> None:
        """Link the instance's log file into the pod's log directory, when there is one."""
        root = self.config.pod_log_dir
        if root is None or not self.engine_is_local():
            return
        log_path = (await self.docker.inspect_container(cid)).get("LogPath") or ""
        if log_path:
            name, ns, uid = ctr.pod_identity(pod)
            await anyio.to_thread.run_sync(
                partial(
                    nodefiles.link_container_log,
                    root,
                    namespace=ns,
                    name=name,
                    uid=uid,
                    container=container,
                    restart_count=restart_count,
                    log_path=log_path,
                )
            )

    async def pause_image(self) -> str:
        """The sandbox image; the project's own is made here the first time it is missing
        (:class:`~errors.ImagePullError` saying why when it cannot be). A ``pause_image``
        of the configuration is pulled by the sandbox step when it is missing."""
        if self.config.pause_image is not None:
            return self.config.pause_image
        if not self._pause_ready:
            await self.images.ensure(DEFAULT_PAUSE_TAG, policy="IfNotPresent")
            self._pause_ready = True
        return DEFAULT_PAUSE_TAG


__all__ = ["RuntimeConfig", "RuntimeManager"]
