"""Server-side printing: the ``Table`` each kind is served as (``Accept: ...;as=Table``).

Both sides of the node API answer a table request with these, the local API over its
socket and the in-process side straight from Docker and the state dir, so ``get`` prints
the same rows whichever side answered. Pure functions of the objects and the clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lightkube.models.core_v1 import Pod

from asynckubelet import printers, tables
from asynckubelet.node.objects import StoredObject
from asynckubelet.runtime import containers as ctr


def pod_labels(pod: Pod) -> dict[str, str]:
    return dict((pod.metadata.labels if pod.metadata is not None else None) or {})


def row_meta(name: str, namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """A table row's object metadata: name, namespace and (for ``--show-labels``) any
    labels."""
    return {"name": name, "namespace": namespace, **({"labels": dict(labels)} if labels else {})}


def pod_table(node_name: str, pods: Iterable[Pod]) -> dict[str, Any]:
    now = printers.now_utc()
    rows = [
        (
            printers.pod_row(p, node_name=node_name, now=now),
            row_meta(ctr.pod_identity(p)[0], ctr.pod_identity(p)[1], pod_labels(p)),
        )
        for p in pods
    ]
    return tables.table(printers.POD_COLUMNS, rows)


def object_table(kind: str, objects: Iterable[StoredObject]) -> dict[str, Any]:
    """ConfigMaps, Secrets and the workload kinds as stored."""
    now = printers.now_utc()
    if kind in printers.WORKLOAD_COLUMNS:
        found = [(printers.workload_row(o, now=now), _stored_meta(o)) for o in objects]
        return tables.table(printers.WORKLOAD_COLUMNS[kind], found)
    if kind == "Service":
        found = [(printers.service_row(o.body, now=now), _stored_meta(o)) for o in objects]
        return tables.table(printers.SERVICE_COLUMNS, found)
    columns = printers.SECRET_COLUMNS if kind == "Secret" else printers.CONFIGMAP_COLUMNS
    found = [(printers.object_row(o, now=now), _stored_meta(o)) for o in objects]
    return tables.table(columns, found)


def _stored_meta(obj: StoredObject) -> dict[str, Any]:
    return row_meta(obj.name, obj.namespace, obj.labels)


def event_table(bodies: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    now = printers.now_utc()
    rows = [(printers.event_row(b, now=now), b.get("metadata") or {}) for b in bodies]
    return tables.table(printers.EVENT_COLUMNS, rows)


def namespace_table(bodies: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    now = printers.now_utc()
    rows = [
        (
            printers.namespace_row(
                b, terminating=(b.get("status") or {}).get("phase") == "Terminating", now=now
            ),
            b.get("metadata") or {},
        )
        for b in bodies
    ]
    return tables.table(printers.NAMESPACE_COLUMNS, rows)


def service_table(bodies: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    now = printers.now_utc()
    rows = [(printers.service_row(b, now=now), b.get("metadata") or {}) for b in bodies]
    return tables.table(printers.SERVICE_COLUMNS, rows)


def endpoints_table(bodies: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    now = printers.now_utc()
    rows = [(printers.endpoints_row(b, now=now), b.get("metadata") or {}) for b in bodies]
    return tables.table(printers.ENDPOINTS_COLUMNS, rows)
