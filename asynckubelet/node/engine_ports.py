"""Host ports that pods of other agents hold on the same Docker engine.

A pod's hostPorts are forwarded by firewall rules, not bound by a listening socket, so
the host-port probe of admission (:func:`~asynckubelet.node.admission.host_port_in_use`)
does not see those of a pod another agent started: ``asynckubelet run``'s pods (another
owner), or another node's on a shared engine. Every container records the ports its spec
declares (:data:`~asynckubelet.runtime.naming.LABEL_PORTS`), so the running containers of
the engine tell which host ports are taken, and admission refuses a pod asking for one
with the kubelet's ``NodePorts`` reason, as for a pod of its own node.

Reading them costs one container list of the engine, filtered by Docker to running
containers that declare ports; :class:`EnginePorts` keeps the answer for the admissions
that follow, and the node reads it again before each batch it admits.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from lightkube.models.core_v1 import Container, ContainerPort, Pod, PodSpec
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet import errors
from asynckubelet.docker import ContainerSummary, DockerAPI
from asynckubelet.node.admission import HostPort, host_ports
from asynckubelet.runtime import naming

__all__ = ["EnginePorts", "list_port_holders", "port_holders"]


def port_holders(rows: Iterable[ContainerSummary]) -> list[Pod]:
    """The pods of these containers, as far as their host ports go: one pod per pod uid,
    one container per container that declares a host port, nothing else."""
    holders: dict[str, Pod] = {}
    for row in rows:
        labels = row.get("Labels") or {}
        ports = _declared_host_ports(labels.get(naming.LABEL_PORTS))
        if not ports:
            continue
        uid = labels.get(naming.LABEL_POD_UID) or row["Id"]
        pod = holders.setdefault(
            uid,
            Pod(
                metadata=ObjectMeta(
                    name=labels.get(naming.LABEL_POD_NAME),
                    namespace=labels.get(naming.LABEL_POD_NAMESPACE),
                    uid=uid,
                ),
                spec=PodSpec(containers=[]),
            ),
        )
        assert pod.spec is not None  # noqa: S101  (made with a spec just above)
        pod.spec.containers.append(
            Container(name=labels.get(naming.LABEL_CONTAINER_NAME) or "", ports=ports)
        )
    return list(holders.values())


def _declared_host_ports(text: str | None) -> list[ContainerPort]:
    try:
        declared = json.loads(text or "[]")
    except ValueError:
        return []
    if not isinstance(declared, list):
        return []
    return [
        ContainerPort(
            containerPort=int(p.get("containerPort") or 0),
            hostPort=int(p["hostPort"]),
            protocol=p.get("protocol"),
            hostIP=p.get("hostIP"),
        )
        for p in declared
        if isinstance(p, dict) and isinstance(p.get("hostPort"), int) and p["hostPort"] > 0
    ]


async def list_port_holders(docker: DockerAPI) -> list[ContainerSummary]:
    """The engine's running containers that declare ports: one container list."""
    return await docker.list_containers(labels={naming.LABEL_PORTS: None}, all=False)


class EnginePorts:
    """The host ports held on the engine by running containers this node does not own
    (those of another node name, or of another owner such as a ``run``), as last read.

    A node owns the containers labelled with its node name and its owner
    (:attr:`~asynckubelet.runtime.manager.RuntimeConfig.owner`, empty for the node agent):
    its own pods are admitted against its pods' specs, and one it is deleting does not
    hold its ports against the pod that replaces it.
    """

    def __init__(self, docker: DockerAPI, *, node_name: str, owner: str = "") -> None:
        self.docker = docker
        self.node_name = node_name
        self.owner = owner
        self.ports: tuple[HostPort, ...] = ()
        """``(protocol, host IP, port)`` of every host port held, as last read."""

    def owns(self, row: ContainerSummary) -> bool:
        labels = row.get("Labels") or {}
        return (
            labels.get(naming.LABEL_NODE) == self.node_name
            and labels.get(naming.LABEL_OWNER, "") == self.owner
        )

    async def refresh(self) -> None:
        """Read them again (one container list); an engine that does not answer leaves
        the last answer in place."""
        try:
            rows = await list_port_holders(self.docker)
        except errors.DockerError:
            return
        pods = port_holders(row for row in rows if not self.owns(row))
        self.ports = tuple(port for pod in pods for port in host_ports(pod))
