"""``RuntimeDeps``: everything the runtime's parts work with, in one frozen record.

The sync step executor (:mod:`~asynckubelet.runtime.sync`), the killer
(:mod:`~asynckubelet.runtime.kill`) and the status reader
(:mod:`~asynckubelet.runtime.status_reader`) each take this record and nothing else of
the runtime: the engine, the network backend, the event sink, volumes, images, the start
gate, probe helpers, the engine's facts, the status cache and the restart counts kept
across a restart in place. :class:`~asynckubelet.runtime.manager.RuntimeManager` builds it
once and composes the parts; none of them knows the manager. The record is frozen; what
changes while the node runs (the caches, the counts) lives in the objects it holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from lightkube.models.core_v1 import Pod

from asynckubelet import errors
from asynckubelet.docker import DockerAPI
from asynckubelet.network import NetworkPlugin
from asynckubelet.runtime import hooks, probehelper
from asynckubelet.runtime.config import RuntimeConfig
from asynckubelet.runtime.engine import Engine
from asynckubelet.runtime.events import EventSink
from asynckubelet.runtime.gate import StartGate
from asynckubelet.runtime.images import ImageManager
from asynckubelet.runtime.metrics import RuntimeMetrics
from asynckubelet.runtime.statuscache import StatusCache
from asynckubelet.runtime.volumes import VolumeProvider


@dataclass(frozen=True, kw_only=True)
class RuntimeDeps:
    """What the sync, the killer and the status reader work with."""

    config: RuntimeConfig
    docker: DockerAPI
    network: NetworkPlugin
    events: EventSink
    volumes: VolumeProvider | None
    """Pod volumes; None: volumes are not mounted."""
    metrics: RuntimeMetrics | None
    images: ImageManager
    starts: StartGate
    """Turns at creating and starting a container on the engine."""
    probe_helpers: probehelper.ProbeHelpers
    """Per-sandbox helpers for HTTP/TCP probes of pods the node cannot reach."""
    engine: Engine
    cache: StatusCache
    reset_restart_counts: dict[tuple[str, str], int]
    """(pod UID, container name) -> the restart count of the container's next instance,
    after a restart in place removed every instance that carried it."""

    @property
    def node(self) -> str:
        return self.config.node_name

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
            engine_local=self.engine.is_local(),
            engine_isolated=await self.engine.isolated(),
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

    async def sandbox_pid(self, uid: str, sandbox_id: str) -> int:
        """The process id of the started sandbox of pod ``uid`` (its network namespace);
        the inspect that tells it is kept, so the next status read need not make it again."""
        info = await self.docker.inspect_container(sandbox_id)
        self.cache.remember_sandbox(uid, info)
        return int(info.get("State", {}).get("Pid", 0) or 0)


__all__ = ["RuntimeDeps"]
