"""kubectl's ``get pods``: its columns (``-o wide`` among them), each pod's cells, the
``2 (5s ago)`` restarts, and the pod as ``-o yaml|json`` serves it.

The STATUS and READY words come from :mod:`asynckubelet.node.printpod`, which the node
speaks too; this module lays them out with the other columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from lightkube.models.core_v1 import Pod

from asynckubelet.kubectl.tables import render, table
from asynckubelet.node.events import age
from asynckubelet.node.printpod import created, kubectl_status, parse_time, pod_spec, ready_string
from asynckubelet.node.status import is_scheduling_gated
from asynckubelet.runtime import containers as ctr
from asynckubelet.runtime.qos import qos_class


def restarts(pod: Pod, *, now: datetime) -> str:
    """The RESTARTS column: total restarts, with the age of the last one (kubectl 1.22+)."""
    status = pod.status
    if status is None:
        return "0"
    total = 0
    last: datetime | None = None
    for cs in [*(status.initContainerStatuses or []), *(status.containerStatuses or [])]:
        total += cs.restartCount or 0
        term = cs.lastState.terminated if cs.lastState is not None else None
        finished = parse_time(term.finishedAt) if term is not None else None
        if finished is not None and (last is None or finished > last):
            last = finished
    if total and last is not None:
        return f"{total} ({age(last, now=now)} ago)"
    return str(total)


def bound_node(pod: Pod, *, node_name: str) -> str | None:
    """The node the pod is bound to: this one, unless scheduling gates hold it back (the
    scheduler binds no gated pod, so kubectl shows it on no node)."""
    return None if is_scheduling_gated(pod) else node_name


POD_COLUMNS = (
    ("Name", 0),
    ("Ready", 0),
    ("Status", 0),
    ("Restarts", 0),
    ("Age", 0),
    ("IP", 1),
    ("Node", 1),
    ("Nominated Node", 1),
    ("Readiness Gates", 1),
)


def pod_row(pod: Pod, *, node_name: str, now: datetime) -> list[str]:
    """One pod's cells in :data:`POD_COLUMNS`."""
    name, _, _ = ctr.pod_identity(pod)
    status = pod.status
    since = created(pod)
    return [
        name,
        ready_string(pod, status) if status else f"0/{len(pod_spec(pod).containers)}",
        kubectl_status(pod, status) if status else "Unknown",
        restarts(pod, now=now),
        age(since, now=now) if since is not None else "<unknown>",
        (status.podIP if status else None) or "<none>",
        bound_node(pod, node_name=node_name) or "<none>",
        (status.nominatedNodeName if status else None) or "<none>",
        readiness_gates(pod),
    ]


def pod_document(pod: Pod) -> dict[str, Any]:
    """The pod as the API server serves it (``-o yaml|json``): ``apiVersion`` and ``kind``
    first, and every container status with its ``lastState`` (``{}`` when it has none).
    A pod the node has not synced yet is ``Pending`` with its QoS class, as the API
    server's create makes every pod."""
    body = {"apiVersion": "v1", "kind": "Pod", **pod.to_dict()}
    status = body.get("status") or {}
    if not status.get("phase"):
        status = body["status"] = {**pending_status(pod), **status}
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(key) or []:
            cs.setdefault("lastState", {})
            cs.setdefault("state", {})
    return body


def pending_status(pod: Pod | Mapping[str, Any]) -> dict[str, Any]:
    """The status the API server's create gives a pod: ``Pending`` and its QoS class."""
    typed = pod if isinstance(pod, Pod) else cast(Pod, Pod.from_dict(dict(pod)))
    return {"phase": "Pending", "qosClass": qos_class(typed)}


def readiness_gates(pod: Pod) -> str:
    """The READINESS GATES column: gates whose condition is True / gates, or ``<none>``."""
    gates = [g.conditionType for g in pod_spec(pod).readinessGates or []]
    if not gates:
        return "<none>"
    conditions = {c.type: c.status for c in (pod.status.conditions if pod.status else None) or []}
    return f"{sum(1 for g in gates if conditions.get(g) == 'True')}/{len(gates)}"


def pod_table(
    pods: Sequence[Pod],
    *,
    node_name: str,
    now: datetime,
    wide: bool = False,
    all_namespaces: bool = False,
    headers: bool = True,
    show_labels: bool = False,
) -> str:
    """``kubectl get pods`` (``-o wide``, ``-A``, ``--no-headers``, ``--show-labels``)."""
    rows = [
        (
            pod_row(p, node_name=node_name, now=now),
            {
                "namespace": ctr.pod_identity(p)[1],
                "labels": (p.metadata.labels if p.metadata is not None else None) or {},
            },
        )
        for p in pods
    ]
    return render(
        table(POD_COLUMNS, rows),
        wide=wide,
        all_namespaces=all_namespaces,
        headers=headers,
        show_labels=show_labels,
    )


__all__ = [
    "POD_COLUMNS",
    "bound_node",
    "pod_document",
    "pod_row",
    "pod_table",
    "readiness_gates",
    "restarts",
]
