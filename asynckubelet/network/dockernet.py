"""The ``docker`` backend: a Docker-managed network, for daemons the node cannot enter.

On Docker Desktop, with a rootless daemon or a remote ``DOCKER_HOST``, this process cannot
reach the containers' namespaces, so Docker must do the networking: one user-defined bridge
network per node (``akl-<node>``, labelled with the node name, made on demand), every
sandbox created on it, hostPorts published by Docker on the sandbox (``PortBindings``), the
pod IP read back from ``inspect``. Docker frees a sandbox's endpoint when the sandbox stops
or goes, so teardown has nothing of its own to undo.
"""

from __future__ import annotations

import contextlib
import re

from asynckubelet import errors
from asynckubelet.docker import DockerAPI
from asynckubelet.docker.labels import LABEL_NODE
from asynckubelet.docker.types import HostConfig
from asynckubelet.network import PodNetwork, PodNetworkRequest, PortMapping, SandboxExtra


def network_name(node_name: str) -> str:
    """``akl-<node>``, with characters Docker refuses in a network name replaced."""
    cleaned = re.sub(r"[^a-zA-Z0-9_.-]", "-", node_name).strip("-.") or "node"
    return f"akl-{cleaned}"[:60]


class DockerNetworkPlugin:
    """Pods on the node's user-defined Docker bridge network."""

    name = "docker"

    def __init__(self, *, docker: DockerAPI, node_name: str, network: str | None = None):
        self.docker = docker
        self.node_name = node_name
        self.network = network or network_name(node_name)

    def sandbox_network_mode(self, *, host_network: bool) -> str:
        return "host" if host_network else self.network

    def sandbox_extra(
        self, *, host_network: bool, port_mappings: tuple[PortMapping, ...]
    ) -> SandboxExtra:
        if host_network or not port_mappings:
            return SandboxExtra()
        bindings: dict[str, list[dict[str, str]]] = {}
        for p in port_mappings:
            key = f"{p.container_port}/{p.protocol.lower()}"
            bindings.setdefault(key, []).append({"HostIp": p.host_ip, "HostPort": str(p.host_port)})
        host = HostConfig(PortBindings=bindings)
        return SandboxExtra(host_config=host, exposed_ports={k: {} for k in bindings})

    async def start(self) -> None:
        await self.ensure_network()

    async def ensure_network(self) -> None:
        """Create the node's network unless it exists; refuse one that is not ours."""
        try:
            info = await self.docker.inspect_network(self.network)
        except errors.NotFound:
            with contextlib.suppress(errors.Conflict):
                await self.docker.create_network(self.network, labels={LABEL_NODE: self.node_name})
            return
        labels = info.get("Labels") or {}
        if labels.get(LABEL_NODE) != self.node_name:
            raise errors.NetworkError(
                f"Docker network {self.network} exists but is not node {self.node_name}'s "
                f"(label {LABEL_NODE}={labels.get(LABEL_NODE)!r})"
            )

    async def remove_network(self) -> None:
        """Remove the node's network (when no container uses it any more)."""
        await self.docker.remove_network(self.network)

    async def status(self) -> tuple[bool, str]:
        try:
            await self.ensure_network()
        except errors.AsyncKubeletError as e:
            return False, str(e)
        return True, ""

    async def _ip(self, sandbox_id: str) -> str:
        info = await self.docker.inspect_container(sandbox_id)
        networks = (info.get("NetworkSettings") or {}).get("Networks") or {}
        endpoint = networks.get(self.network) or {}
        return str(endpoint.get("IPAddress") or "")

    async def setup_pod(self, request: PodNetworkRequest) -> PodNetwork:
        try:
            ip = await self._ip(request.sandbox_id)
        except errors.DockerError as e:
            raise errors.NetworkError(f"reading the sandbox's address: {e}") from e
        if not ip:
            raise errors.NetworkError(
                f"sandbox {request.sandbox_id[:12]} has no address on Docker network {self.network}"
            )
        return PodNetwork(ips=(ip,))

    async def teardown_pod(self, *, sandbox_id: str) -> None:
        return None

    async def get_pod_network_status(self, *, sandbox_id: str) -> PodNetwork | None:
        try:
            ip = await self._ip(sandbox_id)
        except errors.NotFound:
            return PodNetwork()
        return PodNetwork(ips=(ip,) if ip else ())


__all__ = ["DockerNetworkPlugin", "network_name"]
