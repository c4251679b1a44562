"""This node as the Kubernetes API serves it: one ``Node``, for ``kubectl get nodes``.

A standalone node has no API server to register with, yet kubectl users expect to see
the node their pods run on. The object is put together the way cluster mode registers
and reports its Node (:mod:`asynckubelet.cluster.nodestatus`): the kubelet's labels
(``kubernetes.io/hostname``, ``os``, ``arch``) with the ``--node-labels``, the
``--register-with-taints``, capacity and allocatable, addresses, ``nodeInfo`` and the four
conditions from a fresh sample of the host at each request. ``Ready`` is ``True``: the
API answers from inside the running kubelet.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from lightkube.models.core_v1 import NodeCondition

from asynckubelet.cluster import host
from asynckubelet.cluster.nodestatus import (
    NodeFacts,
    Readiness,
    default_labels,
    node_conditions,
    status_fields,
)
from asynckubelet.kubectl import tables, times
from asynckubelet.node.events import age
from asynckubelet.node.kubelet import Kubelet
from asynckubelet.node.printpod import parse_time

NODE_COLUMNS = (
    ("Name", 0),
    ("Status", 0),
    ("Roles", 0),
    ("Age", 0),
    ("Version", 0),
    ("Internal-IP", 1),
    ("External-IP", 1),
    ("OS-Image", 1),
    ("Kernel-Version", 1),
    ("Container-Runtime", 1),
)
"""kubectl's ``get nodes`` columns (the last five with ``-o wide``)."""
ROLE_PREFIX = "node-role.kubernetes.io/"
STEADY = (
    ("MemoryPressure", "False"),
    ("DiskPressure", "False"),
    ("PIDPressure", "False"),
    ("Ready", "True"),
)
"""The conditions as they stand since the node started (their transition time then): a
condition sampled otherwise now changed now."""


@dataclass(frozen=True)
class ThisNode:
    """What stays the same for a run: the facts cluster mode would register."""

    facts: NodeFacts
    labels: Mapping[str, str]
    taints: tuple[Mapping[str, str], ...]
    created: str
    state_dir: Path | None


def this_node(kubelet: Kubelet, *, runtime_version: str, kubelet_version: str) -> ThisNode:
    """The node's facts, from its kubelet's configuration and the host."""
    config = kubelet.config
    info = kubelet.admitter.node
    name = config.node_name
    node_ip = config.host_ips[0] if config.host_ips else None
    quantities = info.allocatable.as_quantities()
    facts = NodeFacts(
        name=name,
        addresses=host.node_addresses(node_name=name, node_ip=node_ip),
        capacity=quantities,
        allocatable=quantities,
        info=host.node_info(runtime_version=runtime_version, kubelet_version=kubelet_version),
        kubelet_port=0,
    )
    labels = {**(info.labels or {}), **default_labels(name, arch=host.go_arch())}
    taints = tuple(
        {"key": t.key, **({"value": t.value} if t.value else {}), "effect": t.effect}
        for t in info.taints
    )
    created = times.now_utc().strftime("%Y-%m-%dT%H:%M:%SZ")
    return ThisNode(
        facts=facts, labels=labels, taints=taints, created=created, state_dir=config.state_dir
    )


def node_object(node: ThisNode, *, now: datetime) -> dict[str, Any]:
    """The v1 ``Node``, its conditions from a sample of the host taken now (to the
    second, as the API's times are)."""
    now = now.replace(microsecond=0)
    sample = host.sample_host(nodefs=node.state_dir or Path("/"))
    since = parse_time(node.created)
    steady = [
        NodeCondition(type=kind, status=status, lastTransitionTime=since) for kind, status in STEADY
    ]
    conditions = node_conditions(sample=sample, readiness=Readiness(), previous=steady, now=now)
    name = node.facts.name
    spec: dict[str, Any] = {"taints": [dict(t) for t in node.taints]} if node.taints else {}
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"asynckubelet-node:{name}")),
            "creationTimestamp": node.created,
            "labels": dict(sorted(node.labels.items())),
        },
        "spec": spec,
        "status": status_fields(node.facts, conditions),
    }


def node_row(body: Mapping[str, Any], *, now: datetime) -> list[str]:
    """A Node's cells in :data:`NODE_COLUMNS`, as kubectl's printer words them."""
    meta = body.get("metadata") or {}
    status = body.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    words = ["Ready" if ready and ready.get("status") == "True" else "NotReady"]
    if (body.get("spec") or {}).get("unschedulable"):
        words.append("SchedulingDisabled")
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    info = status.get("nodeInfo") or {}
    created = parse_time(meta.get("creationTimestamp") or None)
    return [
        str(meta.get("name") or ""),
        ",".join(words),
        roles(meta.get("labels") or {}),
        age(created, now=now) if created is not None else "<unknown>",
        str(info.get("kubeletVersion") or ""),
        str(addresses.get("InternalIP") or "<none>"),
        str(addresses.get("ExternalIP") or "<none>"),
        str(info.get("osImage") or "<unknown>"),
        str(info.get("kernelVersion") or "<unknown>"),
        str(info.get("containerRuntimeVersion") or "<unknown>"),
    ]


def roles(labels: Mapping[str, str]) -> str:
    """The ROLES cell: the ``node-role.kubernetes.io/<role>`` labels (and ``kubernetes.io/
    role``), comma-separated; ``<none>``."""
    found = {k[len(ROLE_PREFIX) :] for k in labels if k.startswith(ROLE_PREFIX)}
    if labels.get("kubernetes.io/role"):
        found.add(labels["kubernetes.io/role"])
    return ",".join(sorted(r for r in found if r)) or "<none>"


def node_table(bodies: Iterable[Mapping[str, Any]], *, now: datetime) -> dict[str, Any]:
    rows = [(node_row(b, now=now), b.get("metadata") or {}) for b in bodies]
    return tables.table(NODE_COLUMNS, rows)


__all__ = [
    "NODE_COLUMNS",
    "ThisNode",
    "node_object",
    "node_row",
    "node_table",
    "roles",
    "this_node",
]
