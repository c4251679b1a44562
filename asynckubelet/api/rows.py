"""Server-side printing: the ``Table`` each kind is served as (``Accept: ...;as=Table``).

Both sides of the node API answer a table request with these, the local API over its
socket and the in-process side straight from Docker and the state dir, so ``get`` prints
the same rows whichever side answered. Pure functions of the objects and the clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lightkube.models.core_v1 import Pod

from asynckubelet.kubectl import objects as object_printing
from asynckubelet.kubectl import pods as pod_printing
from asynckubelet.kubectl import tables, times
from asynckubelet.node.objects import StoredObject
from asynckubelet.runtime import containers as ctr


def pod_labels(pod: Pod) -> dict[str, str]:
    return dict((pod.metadata.labels if pod.metadata is not None else None) or {})


def row_meta(name: str, namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """A table row's object metadata: name, namespace and (for ``--show-labels``) any
    labels."""
    return {"name": name, "namespace": namespace, **({"labels": dict(labels)} if labels else {})}


def pod_table(node_name: str, pods: Iterable[Pod]) -> dict[str, Any]:
    now = times.now_utc()
    rows = [
        (
            pod_printing.pod_row(p, node_name=node_name, now=now),
            row_meta(ctr.pod_identity(p)[0], ctr.pod_identity(p)[1], pod_labels(p)),
        )
        for p in pods
    ]
    return tables.table(pod_printing.POD_COLUMNS, rows)


def object_table(kind: str, objects: Iterable[StoredObject]) -> dict[str, Any]:
    """ConfigMaps, Secrets and the workload kinds as stored."""
    now = times.now_utc()
    if kind in object_printing.WORKLOAD_COLUMNS:
        found = [(object_printing.workload_row(o, now=now), _stored_meta(o)) for o in objects]
        return tables.table(object_printing.WORKLOAD_COLUMNS[kind], found)
    if kind == "Service":
        found = [(object_printing.service_row(o.body, now=now), _stored_meta(o)) for o in objects]
        return tables.table(object_printing.SERVICE_COLUMNS, found)
    if kind == "ControllerRevision":
        found = [
            (object_printing.controllerrevision_row(o, now=now), _stored_meta(o)) for o in objects
        ]
        return tables.table(object_printing.CONTROLLERREVISION_COLUMNS, found)
    columns = (
        object_printing.SECRET_COLUMNS if kind == "Secret" else object_printing.CONFIGMAP_COLUMNS
    )
    found = [(object_printing.object_row(o, now=now), _stored_meta(o)) for o in objects]
    return tables.table(columns, found)


def _stored_meta(obj: StoredObject) -> dict[str, Any]:
    return row_meta(obj.name, obj.namespace, obj.labels)


def event_table(bodies: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    now = times.now_utc()
    rows = [(object_printing.event_row(b, now=now), b.get("metadata") or {}) for b in bodies]
    return tables.table(object_printing.EVENT_COLUMNS, rows)


def namespace_table(bodies: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    now = times.now_utc()
    rows = [
        (
            object_printing.namespace_row(
                b, terminating=(b.get("status") or {}).get("phase") == "Terminating", now=now
            ),
            b.get("metadata") or {},
        )
        for b in bodies
    ]
    return tables.table(object_printing.NAMESPACE_COLUMNS, rows)


def service_table(bodies: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    now = times.now_utc()
    rows = [(object_printing.service_row(b, now=now), b.get("metadata") or {}) for b in bodies]
    return tables.table(object_printing.SERVICE_COLUMNS, rows)


def endpoints_table(bodies: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    now = times.now_utc()
    rows = [(object_printing.endpoints_row(b, now=now), b.get("metadata") or {}) for b in bodies]
    return tables.table(object_printing.ENDPOINTS_COLUMNS, rows)


def endpointslice_table(bodies: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    now = times.now_utc()
    rows = [
        (object_printing.endpointslice_row(b, now=now), b.get("metadata") or {}) for b in bodies
    ]
    return tables.table(object_printing.ENDPOINTSLICE_COLUMNS, rows)
