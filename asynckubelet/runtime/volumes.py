"""The runtime's view of pod volumes: mounts as data, made ready by someone else.

The kubelet's volume manager is node-level work (directories, tmpfs, atomic writers,
Docker volumes), and arrows point from ``node`` to ``runtime``. So the runtime defines
the small :class:`VolumeProvider` interface it calls, and the node hands it an
implementation (:class:`asynckubelet.node.volumes.VolumeManager`). The runtime asks for
three things: make the pod's volumes ready before a sync starts containers, give the
mounts of one container, and remove the pod's volumes when the pod is removed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from lightkube.models.core_v1 import Container, Pod

from asynckubelet.docker import DockerAPI
from asynckubelet.runtime.env import PodContext

PROPAGATION = {
    None: "",
    "None": "",
    "HostToContainer": "rslave",
    "Bidirectional": "rshared",
}
"""``volumeMounts[].mountPropagation`` to Docker's bind propagation (``""``: Docker's default)."""


@dataclass(frozen=True)
class Mount:
    """One mount of a container, in terms Docker understands."""

    target: str
    source: str
    """A host path (``bind``) or a Docker volume name (``volume``)."""
    kind: str = "bind"
    read_only: bool = False
    propagation: str = ""

    def to_docker(self) -> dict[str, Any]:
        """The entry of ``HostConfig.Mounts``."""
        mount: dict[str, Any] = {
            "Type": self.kind,
            "Source": self.source,
            "Target": self.target,
            "ReadOnly": self.read_only,
        }
        if self.kind == "bind" and self.propagation:
            mount["BindOptions"] = {"Propagation": self.propagation}
        return mount


class VolumeProvider(Protocol):
    """What the runtime needs from the node's volume manager."""

    async def setup_pod(self, pod: Pod, *, context: PodContext, docker: DockerAPI) -> None:
        """Make every volume of the pod ready (idempotent; refreshes ConfigMap/Secret files).

        Raises :class:`~asynckubelet.errors.VolumeError` naming the volume that failed.
        """

    async def mounts_for(
        self, pod: Pod, container: Container, *, environment: Mapping[str, str]
    ) -> list[Mount]:
        """The mounts of ``container`` (after :meth:`setup_pod`).

        Raises :class:`~asynckubelet.errors.ContainerConfigError` when a ``subPath`` cannot
        be prepared.
        """

    async def termination_log(self, pod: Pod, container: Container, *, restart_count: int) -> str:
        """A fresh, empty, world-writable file for the instance's termination message."""

    async def write_network_files(self, uid: str, *, resolv_conf: str, hosts: str) -> None:
        """Write the pod's resolv.conf and hosts file (for a sandbox of which Docker makes
        none: see :func:`~asynckubelet.runtime.sandbox.sandbox_docker_config`)."""

    async def network_file_mounts(self, pod: Pod, container: Container) -> list[Mount]:
        """The mounts of the pod's resolv.conf and hosts file in ``container`` (none when
        the node wrote none for the pod, or where a volume of the container is mounted)."""

    async def teardown_pod(self, *, uid: str) -> None:
        """Remove everything made for the pod (named persistent volumes are kept)."""
