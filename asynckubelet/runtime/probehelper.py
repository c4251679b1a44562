"""HTTP and TCP probes and hooks for pods whose address the node cannot reach.

The kubelet probes from the node to the pod IP. A node driving a remote Docker daemon
(``DOCKER_HOST=tcp://...``, a CI job's ``docker:dind`` service), Docker Desktop or a
rootless engine shares no network with its pods, and cannot enter their namespaces
either; yet the user's image need not hold wget or nc. So the probe runs in a helper
container of the project's own image (``asynckubelet.local/probe:<digest>``, a static C
program, loaded through the API when the engine lacks it), started once per sandbox
with the sandbox's network namespace (``NetworkMode: container:<sandbox>``) and driven
with Docker exec. Exec into a running helper costs one API round trip; a fresh one-shot
container per probe costs create, start, wait, logs and remove (``bench/probe_helper.py``
measures both), so the helper stays up for the pod's life.

The helper carries the pod's labels, the node's ownership label and its sandbox's id, and
its own type label, so the pod's status ignores it, removing the pod removes it, and
stopping the sandbox removes it (:meth:`ProbeHelpers.remove_for`).

:func:`choose_route` is the pure rule for where a probe goes.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping

import anyio

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.docker import ContainerConfig, DockerAPI
from asynckubelet.docker.engine import EngineTLS, is_local_daemon
from asynckubelet.images import build as image_build
from asynckubelet.runtime import naming

RECHECK_SECONDS = 10.0
"""How long a known helper is trusted to run before it is looked at again."""
HELPER_CONTAINER = "PROBE"
"""The name part where a container's name would be; upper case, so no Kubernetes container
name can collide with it."""


class Route(enum.Enum):
    """Where a probe's or hook's HTTP/TCP connection is made from."""

    POD_IP = "the node, to the pod IP"
    NODE_LOOPBACK = "the node, to 127.0.0.1 (host network)"
    NETNS = "the node, inside the pod's network namespace"
    HELPER = "a probe helper container in the pod's network namespace"


def choose_route(
    *, host_network: bool, pod_ip: str, engine_local: bool, engine_isolated: bool, root: bool
) -> Route:
    """The kubelet's route (node to pod IP) where the node shares the engine's network;
    else a helper in the pod's network namespace.

    ``engine_isolated``: a local socket whose engine runs elsewhere (Docker Desktop's VM)
    or in a user namespace (rootless), so its containers' addresses and namespaces are out
    of the node's reach.
    """
    if not engine_local or engine_isolated:
        return Route.HELPER
    if host_network:
        return Route.NODE_LOOPBACK
    if pod_ip:
        return Route.POD_IP
    return Route.NETNS if root else Route.HELPER


def engine_is_isolated(info: Mapping[str, object]) -> bool:
    """Docker Desktop or a rootless engine, from ``docker info``."""
    options = info.get("SecurityOptions") or []
    rootless = isinstance(options, list) and any("name=rootless" in str(o) for o in options)
    desktop = "docker desktop" in str(info.get("OperatingSystem") or "").lower()
    return rootless or desktop


def helper_name(*, pod: str, namespace: str, uid: str, attempt: str) -> str:
    """``akl_PROBE_<pod>_<ns>_<uid>_<sandbox attempt>``."""
    return f"{naming.NAME_PREFIX}_{HELPER_CONTAINER}_{pod}_{namespace}_{uid}_{attempt}"


def helper_config(
    *, image: str, node: str, sandbox_id: str, sandbox_labels: Mapping[str, str]
) -> tuple[str, ContainerConfig]:
    """The helper's name and Docker configuration for the sandbox with ``sandbox_labels``."""
    pod = sandbox_labels.get(naming.LABEL_POD_NAME, "")
    namespace = sandbox_labels.get(naming.LABEL_POD_NAMESPACE, "")
    uid = sandbox_labels.get(naming.LABEL_POD_UID, "")
    labels = {
        **naming.pod_labels(
            node=node,
            pod=pod,
            namespace=namespace,
            uid=uid,
            owner=sandbox_labels.get(naming.LABEL_OWNER, ""),
        ),
        naming.LABEL_TYPE: naming.TYPE_PROBE_HELPER,
        naming.LABEL_SANDBOX_ID: sandbox_id,
    }
    attempt = sandbox_labels.get(naming.LABEL_ATTEMPT, "0")
    config: ContainerConfig = {
        "Image": image,
        "Cmd": ["wait"],
        "Labels": labels,
        "HostConfig": {
            "NetworkMode": f"container:{sandbox_id}",
            "CapDrop": ["ALL"],
            "SecurityOpt": ["no-new-privileges"],
            "ReadonlyRootfs": True,
            "LogConfig": {"Type": "none", "Config": {}},
        },
    }
    name = helper_name(pod=pod, namespace=namespace, uid=uid, attempt=attempt)
    return name, config


class ProbeHelpers:
    """The node's probe helpers, one per sandbox that needs one, made on first use."""

    def __init__(self, *, docker: DockerAPI, node: str, image: str | None = None) -> None:
        self.docker = docker
        self.node = node
        self.image = image or image_build.default_probe_tag()
        self._helpers: dict[str, str] = {}
        self._checked: dict[str, float] = {}
        self._locks: dict[str, anyio.Lock] = {}
        self._image_lock = anyio.Lock()
        self._image_ready = False

    async def _ensure_image(self) -> None:
        async with self._image_lock:
            if self._image_ready:
                return
            if not await self.docker.image_exists(self.image):
                logger.info("loading the probe helper image {} into the engine", self.image)
                await image_build.build_probe_image(self.docker, tag=self.image)
            self._image_ready = True

    async def container_for(self, *, sandbox_id: str) -> str:
        """The id of the running helper of ``sandbox_id``, started when there is none.

        A known helper is looked at again every :data:`RECHECK_SECONDS`; one that stopped
        or went (killed, removed by hand) is replaced then."""
        if self._fresh(sandbox_id):
            return self._helpers[sandbox_id]
        lock = self._locks.setdefault(sandbox_id, anyio.Lock())
        async with lock:
            if self._fresh(sandbox_id):
                return self._helpers[sandbox_id]
            known = self._helpers.get(sandbox_id)
            if known is None or not await self._runs(known):
                known = await self._adopt_or_start(sandbox_id)
                self._helpers[sandbox_id] = known
            self._checked[sandbox_id] = anyio.current_time()
            return known

    def _fresh(self, sandbox_id: str) -> bool:
        checked = self._checked.get(sandbox_id)
        return (
            sandbox_id in self._helpers
            and checked is not None
            and anyio.current_time() - checked < RECHECK_SECONDS
        )

    async def _runs(self, helper: str) -> bool:
        try:
            info = await self.docker.inspect_container(helper)
        except errors.NotFound:
            return False
        return bool((info.get("State") or {}).get("Running"))

    async def _adopt_or_start(self, sandbox_id: str) -> str:
        rows = await self.docker.list_containers(
            labels={
                naming.LABEL_NODE: self.node,
                naming.LABEL_TYPE: naming.TYPE_PROBE_HELPER,
                naming.LABEL_SANDBOX_ID: sandbox_id,
            }
        )
        for row in rows:
            if row.get("State") == "running":
                return row["Id"]
            await self.docker.remove_container(row["Id"], force=True)
        sandbox = await self.docker.inspect_container(sandbox_id)
        labels = (sandbox.get("Config") or {}).get("Labels") or {}
        await self._ensure_image()
        name, config = helper_config(
            image=self.image, node=self.node, sandbox_id=sandbox_id, sandbox_labels=labels
        )
        with anyio.CancelScope(shield=True):
            helper = await self.docker.create_container(config, name=name)
            try:
                await self.docker.start_container(helper)
            except BaseException:
                await self.docker.remove_container(helper, force=True)
                raise
        logger.debug("probe helper {} started for sandbox {}", helper[:12], sandbox_id[:12])
        return helper

    async def remove_for(self, *, sandbox_id: str) -> None:
        """Remove the helpers of ``sandbox_id`` (with the sandbox's stop or removal)."""
        self._helpers.pop(sandbox_id, None)
        self._checked.pop(sandbox_id, None)
        self._locks.pop(sandbox_id, None)
        with anyio.CancelScope(shield=True):
            rows = await self.docker.list_containers(
                labels={
                    naming.LABEL_NODE: self.node,
                    naming.LABEL_TYPE: naming.TYPE_PROBE_HELPER,
                    naming.LABEL_SANDBOX_ID: sandbox_id,
                }
            )
            for row in rows:
                await self.docker.remove_container(row["Id"], force=True)


def is_root() -> bool:
    return os.geteuid() == 0


def describe_engine(*, url: str | None, tls: EngineTLS | None, isolated: bool) -> str:
    """What this node can reach of the engine at ``url``, and what follows for pods (for
    ``doctor``)."""
    where = url or "the default socket"
    if not is_local_daemon(url):
        if tls is None:
            how = "without TLS"
        elif tls.verify:
            how = f"over TLS, the engine verified against {tls.ca}, client certificate {tls.cert}"
        else:
            how = "over TLS without verifying the engine (DOCKER_TLS)"
        return (
            f"remote, {where} {how}: this node cannot enter its containers' namespaces or "
            "reach pod IPs, so pods use the docker network backend, httpGet/tcpSocket probes "
            "and hooks run in a probe helper container in each pod's network namespace, and "
            "volumes need a local engine"
        )
    if isolated:
        return (
            f"local socket {where}, but the engine runs apart (Docker Desktop's VM or "
            "rootless): pod IPs and namespaces are out of reach, so httpGet/tcpSocket probes "
            "and hooks run in a probe helper container in each pod's network namespace"
        )
    return (
        f"local, {where}: its containers' namespaces and pod volumes are reachable from "
        "here; probes and hooks go from this node to the pod IP"
    )


__all__ = [
    "ProbeHelpers",
    "Route",
    "choose_route",
    "describe_engine",
    "engine_is_isolated",
    "helper_config",
    "helper_name",
]
