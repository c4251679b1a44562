"""``RuntimeManager``: the kubelet's ``SyncPod``, ``KillPod`` and ``GetPodStatus`` on Docker.

``sync_pod`` decides nothing itself: :func:`~asynckubelet.runtime.actions.compute_pod_actions`
decides, and this module carries the :class:`~asynckubelet.runtime.actions.PodActions` out
in the kubelet's order (kill pod or unwanted containers, sandbox and network, init
containers one at a time, app containers concurrently), recording one result per step.
Independent work runs concurrently: image pulls for every container start at the
beginning of the sync, and app containers are created and started together.

State lives in Docker only (names and labels), so a manager that is restarted, or a
process that dies half-way, converges on the next call. Cleanup of half-made objects runs
shielded from cancellation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Self

import anyio
from lightkube.models.core_v1 import Container, Pod
from loguru import logger

from asynckubelet import errors
from asynckubelet.docker import ContainerConfig, ContainerInspect, DockerAPI, DockerClient
from asynckubelet.images.build import DEFAULT_PAUSE_TAG, REGISTRY_PAUSE_IMAGE
from asynckubelet.network import (
    LoopbackPlugin,
    NetworkPlugin,
    PodDNS,
    PodNetworkRequest,
    PortMapping,
    requested_ips,
)
from asynckubelet.network.dns import (
    DNSSettings,
    engine_dns,
    pod_resolver,
    sandbox_hostname,
    write_pod_files,
)
from asynckubelet.network.factory import is_local_daemon
from asynckubelet.runtime import backoff as backoff_mod
from asynckubelet.runtime import containers as ctr
from asynckubelet.runtime import hooks, naming, nodefiles, probehelper, security
from asynckubelet.runtime.actions import (
    KILL_REASON_LIVENESS_PROBE,
    KILL_REASON_STARTUP_PROBE,
    ContainerToKill,
    PodActions,
    compute_pod_actions,
)
from asynckubelet.runtime.env import PodContext, make_environment
from asynckubelet.runtime.events import EventSink, log_event
from asynckubelet.runtime.images import (
    ImageManager,
    RegistryAuth,
    auths_from_secrets,
    validate_image_name,
)
from asynckubelet.runtime.metrics import RuntimeMetrics, count_failed_steps, measured
from asynckubelet.runtime.probes import ProbeResult
from asynckubelet.runtime.qos import BEST_EFFORT, BURSTABLE, GUARANTEED, qos_class
from asynckubelet.runtime.resources import host_config_resources
from asynckubelet.runtime.results import PodSyncResult, SyncAction, SyncError, SyncResult
from asynckubelet.runtime.types import (
    ContainerState,
    ContainerStatus,
    PodRuntimeStatus,
    SandboxState,
)
from asynckubelet.runtime.volumes import Mount, VolumeProvider

MINIMUM_GRACE_PERIOD = 2
"""Seconds: the kubelet's ``minimumGracePeriodInSeconds``."""
DEFAULT_GRACE_PERIOD = 30
DEFAULT_TERMINATION_MESSAGE_PATH = "/dev/termination-log"
MAX_TERMINATION_MESSAGE = 4096
"""Bytes of the termination message file read (kubelet ``MaxContainerTerminationMessageLength``)."""
MAX_TERMINATION_LOG_LINES = 80
MAX_TERMINATION_LOG_BYTES = 2048
MAX_OUTDATED = 4096
"""Container ids marked outdated kept at most; past that, ids not cached are dropped."""


@dataclass(frozen=True)
class RuntimeConfig:
    """How the runtime manager works on this node."""

    node_name: str = field(default_factory=socket.gethostname)
    """Ownership label of everything created; objects of other nodes are never touched."""
    pause_image: str | None = None
    """None: the locally built ``asynckubelet.local/pause`` when present, else
    ``registry.k8s.io/pause:3.10``."""
    docker_url: str | None = None
    dns: DNSSettings = field(default_factory=DNSSettings)
    """Cluster DNS, cluster domain and the node's resolver file, for pods' resolv.conf."""
    cgroup_root: str | None = None
    """Run each pod's containers under one pod cgroup below this root, grouped by QoS class
    as the kubelet does (e.g. ``/asynckubelet``); None: Docker's own placement. Local
    engines only."""
    pod_log_dir: Path | None = None
    """Link each container instance's log file here as
    ``<namespace>_<name>_<uid>/<container>/<restartCount>.log`` (the kubelet's
    /var/log/pods layout); None: no links. Local engines only."""


def _pod_ref(pod: Pod) -> str:
    name, ns, _ = ctr.pod_identity(pod)
    return f"{ns}/{name}"


def _now() -> datetime:
    return datetime.now(UTC)


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
        self.metrics = metrics
        """Told the duration and failures of ``sync_pod``, ``kill_pod`` and ``get_pod_status``."""
        """Pod volumes; None: volumes are not mounted (the node normally hands one in)."""
        self._owned_docker: DockerClient | None = None
        if docker is None:
            docker = self._owned_docker = DockerClient(url=self.config.docker_url)
        self.docker = docker
        self.network: NetworkPlugin = network or LoopbackPlugin()
        self.events: EventSink = events or log_event
        self.images = ImageManager(self.docker)
        self._image_ids: dict[str, str] = {}
        self._cgroup_driver: str | None = None
        self._inspected: dict[str, tuple[str, str, ContainerStatus | ContainerInspect]] = {}
        """Container id -> (pod uid, Docker state, record). An instance's inspect output
        changes only with its state, so a relist re-inspects only what changed state."""
        self._outdated: set[str] = set()
        """Container ids an event was about since their last inspect (see :meth:`forget`)."""
        self._pause_image: str | None = self.config.pause_image
        self.probe_helpers = probehelper.ProbeHelpers(docker=self.docker, node=self.node)
        """Per-sandbox helpers for HTTP/TCP probes of pods the node cannot reach."""
        self._isolated: bool | None = None

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

    async def _inspect_all(self, ids: Iterable[str]) -> list[ContainerInspect]:
        found: list[ContainerInspect] = []

        async def one(cid: str) -> None:
            try:
                found.append(await self.docker.inspect_container(cid))
            except errors.NotFound:
                pass

        async with anyio.create_task_group() as tg:
            for cid in ids:
                tg.start_soon(one, cid)
        return found

    async def _image_id(self, image_ref: str) -> str:
        """``docker-pullable://repo@sha256:...`` when the image has a digest, else
        ``docker://sha256:...``, as cri-dockerd reports it."""
        if image_ref in self._image_ids:
            return self._image_ids[image_ref]
        try:
            info = await self.docker.inspect_image(image_ref)
        except errors.ImageNotFound:
            return f"docker://{image_ref}"
        digests = info.get("RepoDigests") or []
        value = f"docker-pullable://{digests[0]}" if digests else f"docker://{info.get('Id', '')}"
        self._image_ids[image_ref] = value
        return value

    def forget(self, container_id: str) -> None:
        """Inspect this container afresh on the next status read. For event watchers: Docker
        emits ``die`` before its container list shows the exit, so a read woken by the
        event would otherwise keep the cached ``running``. The cached record stays in use
        by a read already under way."""
        self._outdated.add(container_id)
        if len(self._outdated) > MAX_OUTDATED:
            self._outdated.intersection_update(self._inspected)

    async def get_pod_status(self, *, uid: str, name: str, namespace: str) -> PodRuntimeStatus:
        """Everything Docker holds about the pod, newest first, from Docker alone."""
        with measured(self.metrics, "get_pod_status"):
            return await self._read_pod_status(uid=uid, name=name, namespace=namespace)

    async def _read_pod_status(self, *, uid: str, name: str, namespace: str) -> PodRuntimeStatus:
        rows = await self.docker.list_containers(
            labels={naming.LABEL_NODE: self.node, naming.LABEL_POD_UID: uid}
        )
        states = {r["Id"]: str(r.get("State", "")) for r in rows}
        cache = self._inspected
        for cid in [c for c, (owner, _, _) in cache.items() if owner == uid and c not in states]:
            del cache[cid]
            self._outdated.discard(cid)
        stale = [
            cid
            for cid, state in states.items()
            if cid not in cache or cache[cid][1] != state or cid in self._outdated
        ]
        self._outdated.difference_update(stale)
        for info in await self._inspect_all(stale):
            labels = ctr.labels_of(info)
            cid = info.get("Id", "")
            if labels.get(naming.LABEL_TYPE) == naming.TYPE_SANDBOX:
                cache[cid] = (uid, states.get(cid, ""), info)
            elif labels.get(naming.LABEL_TYPE) == naming.TYPE_CONTAINER:
                image_id = await self._image_id(info.get("Image", ""))
                status = ctr.container_status_from_inspect(info, image_id=image_id)
                if status.state is ContainerState.EXITED:
                    status = await self._with_termination_message(info, status)
                cache[cid] = (uid, states.get(cid, ""), status)
        sandboxes = []
        containers = []
        for cid in states:
            if cid not in cache:
                continue
            record = cache[cid][2]
            if isinstance(record, ContainerStatus):
                containers.append(record)
                continue
            ip: str | None = None
            more: tuple[str, ...] = ()
            if record.get("State", {}).get("Running"):
                net = await self.network.get_pod_network_status(sandbox_id=cid)
                ip = (net.ips[0] if net.ips else "") if net is not None else None
                more = tuple(net.ips[1:]) if net is not None else ()
            sandboxes.append(ctr.sandbox_status_from_inspect(record, ip=ip, additional_ips=more))
        sandboxes.sort(key=lambda s: (s.created_at, s.attempt), reverse=True)
        containers.sort(key=lambda c: (c.created_at, c.restart_count), reverse=True)
        ips: tuple[str, ...] = ()
        if sandboxes and sandboxes[0].ip:
            ips = (sandboxes[0].ip, *sandboxes[0].additional_ips)
        return PodRuntimeStatus(
            uid=uid,
            name=name,
            namespace=namespace,
            sandboxes=tuple(sandboxes),
            containers=tuple(containers),
            ips=ips,
        )

    async def _with_termination_message(
        self, info: ContainerInspect, status: ContainerStatus
    ) -> ContainerStatus:
        """The kubelet's ``getTerminationMessage``: the file, else (policy) the logs' tail."""
        labels = ctr.labels_of(info)
        path = labels.get(naming.LABEL_TERMINATION_MESSAGE_PATH, DEFAULT_TERMINATION_MESSAGE_PATH)
        source = next(
            (m.get("Source") for m in info.get("Mounts") or [] if m.get("Destination") == path),
            None,
        )
        message = ""
        if source:
            message = await anyio.to_thread.run_sync(_read_termination_file, source)
        policy = labels.get(naming.LABEL_TERMINATION_MESSAGE_POLICY, "File")
        if not message and policy == "FallbackToLogsOnError" and status.exit_code != 0:
            lines: list[str] = []
            try:
                async for line in self.docker.logs(status.id, tail=MAX_TERMINATION_LOG_LINES):
                    lines.append(line.text)
            except errors.DockerError:
                lines = []
            text = "\n".join(lines)
            message = text[-MAX_TERMINATION_LOG_BYTES:] + ("\n" if lines else "")
        if not message:
            return status
        return dataclasses.replace(status, message=message)

    async def get_status_of(self, pod: Pod) -> PodRuntimeStatus:
        name, ns, uid = ctr.pod_identity(pod)
        return await self.get_pod_status(uid=uid, name=name, namespace=ns)

    async def list_pod_uids(self) -> dict[str, tuple[str, str]]:
        """uid -> (namespace, name) of every pod with objects of this node on Docker."""
        rows = await self.docker.list_containers(labels={naming.LABEL_NODE: self.node})
        pods: dict[str, tuple[str, str]] = {}
        for row in rows:
            labels = row.get("Labels") or {}
            uid = labels.get(naming.LABEL_POD_UID)
            if uid:
                pods[uid] = (
                    labels.get(naming.LABEL_POD_NAMESPACE, ""),
                    labels.get(naming.LABEL_POD_NAME, ""),
                )
        return pods

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
    ) -> PodSyncResult:
        """Bring the pod on Docker one step closer to its spec; the kubelet's ``SyncPod``.

        ``pull_secrets`` are ``(type, data)`` of the pod's image pull Secrets.
        """
        with measured(self.metrics, "sync_pod"):
            result = await self._sync_pod(
                pod,
                status,
                context=context,
                pull_secrets=pull_secrets,
                backoff=backoff,
                image_backoff=image_backoff,
                liveness=liveness,
                startup=startup,
            )
        count_failed_steps(self.metrics, result)
        return result

    async def _sync_pod(
        self,
        pod: Pod,
        status: PodRuntimeStatus | None,
        *,
        context: PodContext | None,
        pull_secrets: Sequence[tuple[str, Mapping[str, bytes]]],
        backoff: backoff_mod.Backoff | None,
        image_backoff: backoff_mod.Backoff | None,
        liveness: Mapping[str, ProbeResult] | None,
        startup: Mapping[str, ProbeResult] | None,
    ) -> PodSyncResult:
        if status is None:
            status = await self.get_status_of(pod)
        actions = compute_pod_actions(pod, status, liveness=liveness or {}, startup=startup or {})
        result = PodSyncResult()
        run = _Sync(
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
        return result

    # -- kill -----------------------------------------------------------------------------

    def grace_period_of(self, pod: Pod | None, override: float | None) -> float:
        if override is not None:
            return max(float(override), 0.0)
        if pod is not None and pod.spec is not None:
            if pod.metadata is not None and pod.metadata.deletionGracePeriodSeconds is not None:
                return float(pod.metadata.deletionGracePeriodSeconds)
            if pod.spec.terminationGracePeriodSeconds is not None:
                return float(pod.spec.terminationGracePeriodSeconds)
        return float(DEFAULT_GRACE_PERIOD)

    async def kill_container(
        self,
        pod: Pod | None,
        status: ContainerStatus,
        *,
        grace_period: float,
        reason: str = "",
        message: str = "",
        result: PodSyncResult | None = None,
    ) -> None:
        """Stop one container: its stop signal, then SIGKILL after the grace period (>= 2 s)."""
        step = (result or PodSyncResult()).add(SyncAction.KILL_CONTAINER, status.name)
        if pod is not None:
            text = message or f"Stopping container {status.name}"
            self.events(pod, type="Normal", reason="Killing", message=text, container=status.name)
        grace = grace_period
        spec = _container_spec(pod, status.name)
        if grace > 0 and pod is not None and spec is not None and spec.lifecycle is not None:
            if spec.lifecycle.preStop is not None:
                grace -= await self._pre_stop(pod, spec, status, grace)
        grace = max(grace, MINIMUM_GRACE_PERIOD)
        try:
            with anyio.CancelScope(shield=True):
                await self.docker.stop_container(status.id, grace_period=grace)
        except errors.NotFound:
            pass
        except errors.DockerError as e:
            step.fail(SyncError.KILL_CONTAINER, str(e))

    async def _pre_stop(
        self, pod: Pod, spec: Container, status: ContainerStatus, grace: float
    ) -> float:
        """Run ``preStop`` for at most ``grace`` seconds; returns the seconds it took."""
        assert spec.lifecycle is not None
        started = anyio.current_time()
        with anyio.CancelScope(shield=True):
            target = await self.hook_target(
                pod, container_id=status.id, sandbox_id=status.sandbox_id
            )
            message: str | None = None
            with anyio.move_on_after(grace):
                message = await hooks.run_hook(
                    spec.lifecycle.preStop,
                    pod,
                    spec,
                    target,
                    docker=self.docker,
                    timeout=grace,
                )
        if message is not None:
            logger.bind(pod=_pod_ref(pod), container=spec.name).warning("preStop: {}", message)
            self.events(
                pod,
                type="Warning",
                reason="FailedPreStopHook",
                message="PreStopHook failed",
                container=spec.name,
            )
        return anyio.current_time() - started

    async def hook_target(
        self, pod: Pod, *, container_id: str, sandbox_id: str, pod_ip: str | None = None
    ) -> hooks.Target:
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
            engine_local=self._engine_is_local(),
            engine_isolated=await self._engine_isolated(),
            root=probehelper.is_root(),
        )
        if route is probehelper.Route.NODE_LOOPBACK:
            return hooks.Target(container_id=container_id, host="127.0.0.1", netns=None)
        if route is probehelper.Route.POD_IP:
            return hooks.Target(container_id=container_id, host=pod_ip or "", netns=None)
        host = pod_ip or "127.0.0.1"
        if route is probehelper.Route.HELPER:
            try:
                helper = await self.probe_helpers.container_for(sandbox_id=sandbox_id)
            except errors.AsyncKubeletError as e:
                return hooks.Target(
                    container_id=container_id,
                    host=host,
                    netns=None,
                    error=f"cannot start the pod's probe helper: {e}",
                )
            return hooks.Target(container_id=container_id, host=host, netns=None, helper=helper)
        netns: str | None = None
        try:
            info = await self.docker.inspect_container(sandbox_id)
            pid = info.get("State", {}).get("Pid", 0)
            netns = f"/proc/{pid}/ns/net" if pid else None
        except errors.DockerError:
            pass
        return hooks.Target(container_id=container_id, host="127.0.0.1", netns=netns)

    async def _engine_isolated(self) -> bool:
        if self._isolated is None:
            try:
                self._isolated = probehelper.engine_is_isolated(await self.docker.info())
            except errors.DockerError:
                return False
        return self._isolated

    async def _may_have_probe_helpers(self) -> bool:
        return (
            not self._engine_is_local()
            or not probehelper.is_root()
            or await self._engine_isolated()
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
            result = await self._kill_pod(pod, status, grace_period=grace_period)
        count_failed_steps(self.metrics, result)
        return result

    async def _kill_pod(
        self, pod: Pod | None, status: PodRuntimeStatus | None, *, grace_period: float | None
    ) -> PodSyncResult:
        if status is None:
            assert pod is not None
            status = await self.get_status_of(pod)
        result = PodSyncResult()
        grace = self.grace_period_of(pod, grace_period)
        running = [c for c in status.containers if c.state is ContainerState.RUNNING]
        kinds = {c.id: self._kind_of(pod, c) for c in running}
        regular = [c for c in running if kinds[c.id] == "regular"]
        sidecars = [c for c in running if kinds[c.id] == "sidecar"]
        others = [c for c in running if kinds[c.id] not in ("regular", "sidecar")]
        order = self._sidecar_order(pod)
        sidecars.sort(key=lambda c: order.get(c.name, 0), reverse=True)
        started = anyio.current_time()

        def left() -> float:
            return max(grace - (anyio.current_time() - started), 0.0)

        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for c in regular + others:
                    tg.start_soon(
                        partial(self.kill_container, pod, c, grace_period=grace, result=result)
                    )
            for c in sidecars:
                await self.kill_container(pod, c, grace_period=left(), result=result)
            for sandbox in status.sandboxes:
                await self._stop_sandbox(sandbox.id, result)
        return result

    def _kind_of(self, pod: Pod | None, c: ContainerStatus) -> str:
        if pod is not None:
            return ctr.container_type(pod, c.name)
        return "regular"

    @staticmethod
    def _sidecar_order(pod: Pod | None) -> dict[str, int]:
        if pod is None or pod.spec is None:
            return {}
        return {c.name: i for i, c in enumerate(pod.spec.initContainers or [])}

    async def _stop_sandbox(self, sandbox_id: str, result: PodSyncResult) -> None:
        step = result.add(SyncAction.KILL_POD_SANDBOX, sandbox_id[:12])
        net = result.add(SyncAction.TEARDOWN_NETWORK, sandbox_id[:12])
        with anyio.CancelScope(shield=True):
            try:
                await self.network.teardown_pod(sandbox_id=sandbox_id)
            except errors.AsyncKubeletError as e:
                net.fail(SyncError.TEARDOWN_NETWORK, str(e))
            try:
                if await self._may_have_probe_helpers():
                    await self.probe_helpers.remove_for(sandbox_id=sandbox_id)
                await self.docker.stop_container(sandbox_id, grace_period=MINIMUM_GRACE_PERIOD)
            except errors.NotFound:
                pass
            except errors.DockerError as e:
                step.fail(SyncError.KILL_POD_SANDBOX, str(e))

    async def remove_pod(self, *, uid: str) -> list[str]:
        """Remove every Docker object of the pod (after :meth:`kill_pod`); returns the ids."""
        rows = await self.docker.list_containers(
            labels={naming.LABEL_NODE: self.node, naming.LABEL_POD_UID: uid}
        )
        rows.sort(
            key=lambda r: (r.get("Labels") or {}).get(naming.LABEL_TYPE) == naming.TYPE_SANDBOX
        )
        labels = (rows[0].get("Labels") or {}) if rows else {}
        with anyio.CancelScope(shield=True):
            for row in rows:
                if (row.get("Labels") or {}).get(naming.LABEL_TYPE) == naming.TYPE_SANDBOX:
                    await self.network.teardown_pod(sandbox_id=row["Id"])
                await self.docker.remove_container(row["Id"], force=True)
            if self.volumes is not None:
                await self.volumes.teardown_pod(uid=uid)
            await self._remove_node_files(
                uid,
                labels.get(naming.LABEL_POD_NAMESPACE, ""),
                labels.get(naming.LABEL_POD_NAME, ""),
            )
        return [r["Id"] for r in rows]

    async def garbage_collect(self, status: PodRuntimeStatus) -> list[str]:
        """Remove dead containers but the newest dead instance of each container name, and
        dead sandboxes but the newest that no remaining container uses; returns the ids."""
        doomed = set(dead_instances_to_remove(status))
        kept_sandboxes = {c.sandbox_id for c in status.containers if c.id not in doomed}
        for s in status.sandboxes[1:]:
            if s.state is not SandboxState.READY and s.id not in kept_sandboxes:
                doomed.add(s.id)
        with anyio.CancelScope(shield=True):
            for cid in doomed:
                await self.docker.remove_container(cid, force=True)
            if self.config.pod_log_dir is not None:
                for c in status.containers:
                    if c.id in doomed:
                        nodefiles.unlink_container_log(
                            self.config.pod_log_dir,
                            namespace=status.namespace,
                            name=status.name,
                            uid=status.uid,
                            container=c.name,
                            restart_count=c.restart_count,
                        )
        return sorted(doomed)

    # -- sandbox image -------------------------------------------------------------------

    def _engine_is_local(self) -> bool:
        return is_local_daemon(self.docker.url)

    async def cgroup_parent(self, pod: Pod) -> str | None:
        """The pod's cgroup parent, or None when pod cgroups are off."""
        root = self.config.cgroup_root
        if root is None or not self._engine_is_local():
            return None
        if self._cgroup_driver is None:
            self._cgroup_driver = str((await self.docker.info()).get("CgroupDriver", "cgroupfs"))
        _, _, uid = ctr.pod_identity(pod)
        return nodefiles.pod_cgroup_parent(
            root=root, driver=self._cgroup_driver, qos=qos_class(pod), uid=uid
        )

    async def _link_log(self, pod: Pod, container: str, restart_count: int, cid: str) -> None:
        root = self.config.pod_log_dir
        if root is None or not self._engine_is_local():
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

    async def _remove_node_files(self, uid: str, namespace: str, name: str) -> None:
        if not self._engine_is_local():
            return
        if self.config.cgroup_root is not None and self._cgroup_driver != "systemd":
            for qos in (GUARANTEED, BURSTABLE, BEST_EFFORT):
                parent = nodefiles.pod_cgroup_parent(
                    root=self.config.cgroup_root, driver="cgroupfs", qos=qos, uid=uid
                )
                await anyio.to_thread.run_sync(nodefiles.remove_pod_cgroup, parent)
        if self.config.pod_log_dir is not None and name:
            await anyio.to_thread.run_sync(
                partial(
                    nodefiles.remove_pod_logs,
                    self.config.pod_log_dir,
                    namespace=namespace,
                    name=name,
                    uid=uid,
                )
            )

    async def pause_image(self) -> str:
        if self._pause_image is None:
            local = await self.docker.image_exists(DEFAULT_PAUSE_TAG)
            self._pause_image = DEFAULT_PAUSE_TAG if local else REGISTRY_PAUSE_IMAGE
        return self._pause_image


def _read_termination_file(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_TERMINATION_MESSAGE).decode(errors="replace")
    except OSError:
        return ""


def _container_spec(pod: Pod | None, name: str) -> Container | None:
    if pod is None or pod.spec is None:
        return None
    for c in list(pod.spec.initContainers or []) + list(pod.spec.containers or []):
        if c.name == name:
            return c
    return None


def dead_instances_to_remove(status: PodRuntimeStatus) -> list[str]:
    """Ids of dead container instances beyond the newest dead one of each name.

    An instance created but never started is not the dead one kept: while it is the newest
    of its name it may be a start in flight and stays; the instance that ran before it is
    what ``logs --previous`` reads until the next one exists.
    """
    seen: set[str] = set()
    seen_dead: set[str] = set()
    doomed: list[str] = []
    for c in status.containers:
        newest = c.name not in seen
        seen.add(c.name)
        if c.state is ContainerState.RUNNING:
            continue
        if c.state is ContainerState.CREATED:
            if not newest:
                doomed.append(c.id)
            continue
        if c.name in seen_dead:
            doomed.append(c.id)
        else:
            seen_dead.add(c.name)
    return doomed


class _Sync:
    """One ``sync_pod`` call: carries out a :class:`PodActions` in the kubelet's order."""

    def __init__(
        self,
        rm: RuntimeManager,
        pod: Pod,
        status: PodRuntimeStatus,
        actions: PodActions,
        result: PodSyncResult,
        *,
        context: PodContext,
        auths: list[RegistryAuth],
        backoff: backoff_mod.Backoff,
        image_backoff: backoff_mod.Backoff,
    ) -> None:
        self.rm = rm
        self.pod = pod
        self.status = status
        self.actions = actions
        self.result = result
        self.context = context
        self.auths = auths
        self.backoff = backoff
        self.image_backoff = image_backoff
        self.pulls: dict[str, _PullTask] = {}
        assert pod.spec is not None
        self.spec = pod.spec

    def event(self, type: str, reason: str, message: str, container: str | None = None) -> None:
        self.rm.events(self.pod, type=type, reason=reason, message=message, container=container)

    async def execute(self) -> None:
        actions = self.actions
        if actions.create_sandbox and self.status.sandboxes:
            self.event(
                "Normal", "SandboxChanged", "Pod sandbox changed, it will be killed and re-created."
            )
        if actions.kill_pod:
            killed = await self.rm.kill_pod(self.pod, self.status)
            self.result.results.extend(killed.results)
            if not killed.ok:
                return
            if actions.create_sandbox:
                await self._purge_init_containers()
        else:
            await self._kill_unwanted()
        to_start = (
            [self.spec.initContainers[i] for i in actions.init_containers_to_start]
            if (self.spec.initContainers)
            else []
        )
        app = [self.spec.containers[i] for i in actions.containers_to_start]
        volumes_ready = await self._setup_volumes()
        if not (actions.create_sandbox or to_start or app) or not volumes_ready:
            return
        async with anyio.create_task_group() as tg:
            for container in to_start + app:
                self._prefetch(tg, container)
            try:
                await self._run(actions, to_start, app)
            finally:
                tg.cancel_scope.cancel()

    async def _run(self, actions: PodActions, init: list[Container], app: list[Container]) -> None:
        sandbox_id = actions.sandbox_id
        if actions.create_sandbox:
            created = await self._create_sandbox(actions.attempt)
            if created is None:
                return
            sandbox_id = created
        self.sandbox_id = sandbox_id
        for container in init:
            ok = await self._start(container, init=True)
            if not ok and container.restartPolicy != "Always":
                return
        async with anyio.create_task_group() as tg:
            for container in app:
                tg.start_soon(self._start, container, False)

    async def _setup_volumes(self) -> bool:
        """The kubelet's ``WaitForAttachAndMount``: no container starts before its volumes."""
        provider = self.rm.volumes
        if provider is None or not self.spec.volumes:
            return True
        try:
            await provider.setup_pod(self.pod, context=self.context, docker=self.rm.docker)
        except errors.VolumeError as e:
            self.event("Warning", "FailedMount", str(e))
            return False
        return True

    async def _kill_unwanted(self) -> None:
        to_kill = list(self.actions.containers_to_kill.values())
        if not to_kill:
            return
        by_id = {c.id: c for c in self.status.containers}
        grace = self.rm.grace_period_of(self.pod, None)
        async with anyio.create_task_group() as tg:
            for info in to_kill:
                status = by_id.get(info.container_id)
                if status is None:
                    continue
                tg.start_soon(self._kill_one, status, self._probe_grace(info, grace), info.message)

    def _probe_grace(self, info: ContainerToKill, grace: float) -> float:
        """A probe's own ``terminationGracePeriodSeconds`` when it is why the kill happens."""
        spec = _container_spec(self.pod, info.name)
        if spec is None:
            return grace
        probe = {
            KILL_REASON_LIVENESS_PROBE: spec.livenessProbe,
            KILL_REASON_STARTUP_PROBE: spec.startupProbe,
        }.get(info.reason)
        if probe is not None and probe.terminationGracePeriodSeconds is not None:
            return float(probe.terminationGracePeriodSeconds)
        return grace

    async def _kill_one(self, status: ContainerStatus, grace: float, message: str) -> None:
        await self.rm.kill_container(
            self.pod, status, grace_period=grace, message=message, result=self.result
        )

    async def _purge_init_containers(self) -> None:
        names = {c.name for c in self.spec.initContainers or []}
        with anyio.CancelScope(shield=True):
            for c in self.status.containers:
                if c.name in names and c.state is not ContainerState.RUNNING:
                    await self.rm.docker.remove_container(c.id, force=True)

    async def _make_sandbox(self, config: ContainerConfig, name: str) -> str:
        """Create and start the pause container as one step a cancelled caller cannot split;
        a sandbox that fails to start is removed."""
        with anyio.CancelScope(shield=True):
            sandbox_id = await self.rm.docker.create_container(config, name=name)
            try:
                await self.rm.docker.start_container(sandbox_id)
            except BaseException:
                await self.rm.docker.remove_container(sandbox_id, force=True)
                raise
        return sandbox_id

    async def _create_sandbox(self, attempt: int) -> str | None:
        step = self.result.add(SyncAction.CREATE_POD_SANDBOX, ctr.pod_identity(self.pod)[0])
        host_network = bool(self.spec.hostNetwork)
        mode = self.rm.network.sandbox_network_mode(host_network=host_network)
        sandbox_id: str | None = None
        try:
            image = await self.rm.pause_image()
            extra = self.rm.network.sandbox_extra(
                host_network=host_network, port_mappings=_port_mappings(self.pod)
            )
            name, config = ctr.sandbox_config(
                self.pod,
                node=self.rm.node,
                attempt=attempt,
                image=image,
                network_mode=mode,
                extra_host=extra.host_config,
                exposed_ports=extra.exposed_ports,
            )
            cgroup_parent = await self.rm.cgroup_parent(self.pod)
            if cgroup_parent is not None:
                config.setdefault("HostConfig", {})["CgroupParent"] = cgroup_parent
            fqdn = sandbox_hostname(self.pod, cluster_domain=self.rm.config.dns.cluster_domain)
            if fqdn is not None and not host_network:
                config["Hostname"] = fqdn
            if not host_network and not self.rm._engine_is_local():
                resolver = await pod_resolver(self.pod, settings=self.rm.config.dns)
                config.setdefault("HostConfig", {}).update(engine_dns(self.pod, resolver=resolver))
            try:
                sandbox_id = await self._make_sandbox(config, name)
            except errors.ImageNotFound:
                await self.rm.images.pull(image)
                sandbox_id = await self._make_sandbox(config, name)
            ips: tuple[str, ...] = ()
            if not host_network:
                net_step = self.result.add(SyncAction.SETUP_NETWORK, name)
                info = await self.rm.docker.inspect_container(sandbox_id)
                pid = info.get("State", {}).get("Pid", 0)
                try:
                    resolver = await pod_resolver(self.pod, settings=self.rm.config.dns)
                    request = PodNetworkRequest(
                        sandbox_id=sandbox_id,
                        pod_name=ctr.pod_identity(self.pod)[0],
                        namespace=ctr.pod_identity(self.pod)[1],
                        uid=ctr.pod_identity(self.pod)[2],
                        netns_path=f"/proc/{pid}/ns/net" if pid else "",
                        port_mappings=_port_mappings(self.pod),
                        dns=PodDNS(
                            servers=resolver.nameservers,
                            searches=resolver.searches,
                            options=resolver.options,
                        ),
                        ips=requested_ips(
                            self.pod.metadata.annotations if self.pod.metadata else None
                        ),
                    )
                    net = await self.rm.network.setup_pod(request)
                except errors.AsyncKubeletError as e:
                    net_step.fail(SyncError.SETUP_NETWORK, str(e))
                    raise
                ips = net.ips
            await write_pod_files(
                docker=self.rm.docker,
                pod=self.pod,
                sandbox_id=sandbox_id,
                pod_ips=ips,
                settings=self.rm.config.dns,
                event=self.event,
            )
            self.context = dataclasses.replace(self.context, pod_ips=ips)
            return sandbox_id
        except (errors.AsyncKubeletError, OSError) as e:
            message = f"Failed to create pod sandbox: {e}"
            step.fail(SyncError.CREATE_POD_SANDBOX, message)
            self.event("Warning", "FailedCreatePodSandBox", message)
            if sandbox_id is not None:
                with anyio.CancelScope(shield=True):
                    try:
                        await self.rm.network.teardown_pod(sandbox_id=sandbox_id)
                    finally:
                        await self.rm.docker.remove_container(sandbox_id, force=True)
            return None
        except BaseException:
            if sandbox_id is not None:
                with anyio.CancelScope(shield=True):
                    try:
                        await self.rm.network.teardown_pod(sandbox_id=sandbox_id)
                    finally:
                        await self.rm.docker.remove_container(sandbox_id, force=True)
            raise

    # -- images ---------------------------------------------------------------------------

    def _prefetch(self, tg: anyio.abc.TaskGroup, container: Container) -> None:
        image = container.image or ""
        if image in self.pulls:
            return
        task = _PullTask(self, container)
        self.pulls[image] = task
        tg.start_soon(task.run)

    async def _ensure_image(self, container: Container, step: SyncResult) -> bool:
        task = self.pulls.get(container.image or "")
        if task is None:
            task = _PullTask(self, container)
            await task.run()
        await task.done.wait()
        for type, reason, message in task.events:
            self.event(type, reason, message, container.name)
        if task.error is not None:
            error, message = task.error
            step.fail(error, message)
            return False
        return True

    # -- containers -----------------------------------------------------------------------

    async def _start(self, container: Container, init: bool) -> bool:
        action = SyncAction.INIT_CONTAINER if init else SyncAction.START_CONTAINER
        step = self.result.add(action, container.name)
        check = backoff_mod.should_back_off(
            backoff=self.backoff, pod=self.pod, container=container, status=self.status
        )
        if check.in_backoff:
            step.fail(SyncError.CRASH_LOOP_BACK_OFF, check.message)
            self.event("Warning", "BackOff", check.event_message, container.name)
            return False
        if not await self._ensure_image(container, step):
            return False
        previous = self.status.find_container(container.name)
        restart_count = previous.restart_count + 1 if previous is not None else 0
        try:
            environment = make_environment(self.pod, container, self.context)
            resources = host_config_resources(container)
            resources.update(security.host_config_security(self.pod, container))
            if security.effective(self.pod, container).run_as_non_root:
                image = await self.rm.docker.inspect_image(container.image or "")
                security.verify_run_as_non_root(
                    self.pod, container, image_user_field=image.get("Config", {}).get("User") or ""
                )
            if self.rm.volumes is None and container.volumeMounts:
                raise errors.ContainerConfigError(
                    f"container {container.name} mounts volumes, but this node cannot provide"
                    " them (pod volumes are directories on the node: they need a local Docker"
                    " engine)"
                )
            if self.rm.volumes is not None and container.volumeMounts:
                mounts = await self.rm.volumes.mounts_for(
                    self.pod, container, environment=dict(environment.env)
                )
                resources["Mounts"] = [m.to_docker() for m in mounts]
            if self.rm.volumes is not None:
                log = await self.rm.volumes.termination_log(
                    self.pod, container, restart_count=restart_count
                )
                target = container.terminationMessagePath or DEFAULT_TERMINATION_MESSAGE_PATH
                resources.setdefault("Mounts", []).append(
                    Mount(target=target, source=log).to_docker()
                )
        except errors.ContainerConfigError as e:
            step.fail(SyncError.CREATE_CONTAINER_CONFIG, str(e))
            self.event("Warning", "Failed", f"Error: {e}", container.name)
            return False
        cgroup_parent = await self.rm.cgroup_parent(self.pod)
        if cgroup_parent is not None:
            resources["CgroupParent"] = cgroup_parent
        name, config = ctr.container_config(
            self.pod,
            container,
            node=self.rm.node,
            sandbox_id=self.sandbox_id,
            restart_count=restart_count,
            environment=environment,
            extra_host=resources,
        )
        # Created and started as one step: a cancelled caller never leaves a container
        # that was made but not started.
        with anyio.CancelScope(shield=True):
            cid = await self._create_and_start(container, name, config, step)
        if cid is None:
            return False
        await self.rm._link_log(self.pod, container.name, restart_count, cid)
        lifecycle = container.lifecycle
        if lifecycle is not None and lifecycle.postStart is not None:
            return await self._post_start(container, cid, step)
        return True

    async def _post_start(self, container: Container, cid: str, step: SyncResult) -> bool:
        """Run ``postStart``; on failure kill the container, as ``kuberuntime`` does."""
        assert container.lifecycle is not None
        target = await self.rm.hook_target(self.pod, container_id=cid, sandbox_id=self.sandbox_id)
        message = await hooks.run_hook(
            container.lifecycle.postStart,
            self.pod,
            container,
            target,
            docker=self.rm.docker,
            timeout=None,
        )
        if message is None:
            return True
        step.fail(SyncError.POST_START_HOOK, message)
        self.event("Warning", "FailedPostStartHook", "PostStartHook failed", container.name)
        started = ContainerStatus(
            id=cid, name=container.name, state=ContainerState.RUNNING, created_at=_now()
        )
        await self.rm.kill_container(
            self.pod,
            started,
            grace_period=self.rm.grace_period_of(self.pod, None),
            message="FailedPostStartHook",
            result=self.result,
        )
        return False

    async def _create_and_start(
        self, container: Container, name: str, config: ContainerConfig, step: SyncResult
    ) -> str | None:
        docker = self.rm.docker
        try:
            try:
                cid = await docker.create_container(config, name=name)
            except errors.Conflict:
                await self._remove_stale(name)
                cid = await docker.create_container(config, name=name)
        except errors.DockerError as e:
            step.fail(SyncError.CREATE_CONTAINER, str(e))
            self.event("Warning", "Failed", f"Error: {e}", container.name)
            if isinstance(e, errors.RuntimeUnavailable):
                # The answer was lost, not the create: Docker may have made the container.
                with contextlib.suppress(errors.DockerError):
                    await self._remove_stale(name)
            return None
        self.event("Normal", "Created", f"Created container {container.name}", container.name)
        try:
            await docker.start_container(cid)
        except errors.DockerError as e:
            step.fail(SyncError.RUN_CONTAINER, str(e))
            self.event("Warning", "Failed", f"Error: {e}", container.name)
            return None
        self.event("Normal", "Started", f"Started container {container.name}", container.name)
        return cid

    async def _remove_stale(self, name: str) -> None:
        """A container of this name exists from a sync that died before starting it."""
        rows = await self.rm.docker.list_containers(
            labels={naming.LABEL_NODE: self.rm.node}, name=f"^/{name}$"
        )
        for row in rows:
            if row.get("State") != "running":
                await self.rm.docker.remove_container(row["Id"], force=True)


class _PullTask:
    """One image of one sync: checked, pulled if needed, with pull back-off.

    Several containers of the pod may use the image; the work is done once and its
    events are replayed for each container, as the kubelet reports them per container.
    """

    def __init__(self, sync: _Sync, container: Container) -> None:
        self.sync = sync
        self.container = container
        self.done = anyio.Event()
        self.error: tuple[SyncError, str] | None = None
        self.events: list[tuple[str, str, str]] = []
        self.started = False

    async def run(self) -> None:
        if self.started:
            return
        self.started = True
        try:
            await self._run()
        finally:
            self.done.set()

    def _event(self, type: str, reason: str, message: str) -> None:
        self.events.append((type, reason, message))

    async def _run(self) -> None:
        sync = self.sync
        image = self.container.image or ""
        policy = self.container.imagePullPolicy or "IfNotPresent"
        key = backoff_mod.image_pull_key(pod_uid=sync.status.uid, image=image)
        now = _now()
        try:
            validate_image_name(image)
        except errors.InvalidImageName as e:
            self.error = (SyncError.INVALID_IMAGE_NAME, str(e))
            self._event("Warning", "InspectFailed", str(e))
            return
        try:
            present = policy != "Always" and await sync.rm.images.is_present(image)
        except errors.DockerError as e:
            self.error = (SyncError.IMAGE_PULL, str(e))
            return
        if present:
            self._event("Normal", "Pulled", f'Container image "{image}" already present on machine')
            return
        if policy != "Never" and sync.image_backoff.is_in_backoff_since_update(key, event_time=now):
            message = backoff_mod.image_pull_back_off_message(image)
            self.error = (SyncError.IMAGE_PULL_BACK_OFF, message)
            self._event("Normal", "BackOff", message)
            return
        if policy != "Never":
            self._event("Normal", "Pulling", f'Pulling image "{image}"')
        try:
            _, message = await sync.rm.images.ensure(image, policy=policy, auths=sync.auths)
        except errors.InvalidImageName as e:
            self.error = (SyncError.INVALID_IMAGE_NAME, str(e))
            self._event("Warning", "InspectFailed", str(e))
            return
        except errors.ImageNeverPull as e:
            self.error = (SyncError.IMAGE_NEVER_PULL, str(e))
            self._event("Warning", "ErrImageNeverPull", str(e))
            return
        except errors.DockerError as e:
            sync.image_backoff.next(key, event_time=now)
            self.error = (SyncError.IMAGE_PULL, str(e))
            self._event("Warning", "Failed", f'Failed to pull image "{image}": {e}')
            self._event("Warning", "Failed", "Error: ErrImagePull")
            return
        self._event("Normal", "Pulled", message)


def _port_mappings(pod: Pod) -> tuple[PortMapping, ...]:
    found: list[PortMapping] = []
    spec = pod.spec
    if spec is None:
        return ()
    for c in list(spec.initContainers or []) + list(spec.containers or []):
        for p in c.ports or []:
            if p.hostPort:
                found.append(
                    PortMapping(
                        container_port=p.containerPort,
                        host_port=p.hostPort,
                        protocol=p.protocol or "TCP",
                        host_ip=p.hostIP or "",
                    )
                )
    return tuple(found)


__all__ = ["RuntimeConfig", "RuntimeManager"]
