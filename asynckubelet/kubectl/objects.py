"""kubectl's ``get`` rows for the kinds other than pods: ConfigMaps and Secrets (a count of
keys, never a value), Events, Namespaces, Services and Endpoints, ControllerRevisions and
the workloads (Deployment, ReplicaSet, StatefulSet, Job), each with kubectl's columns and
priorities.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from asynckubelet.node.events import age
from asynckubelet.node.objects import StoredObject, data_count
from asynckubelet.node.printpod import parse_time

CONFIGMAP_COLUMNS = (("Name", 0), ("Data", 0), ("Age", 0))
SECRET_COLUMNS = (("Name", 0), ("Type", 0), ("Data", 0), ("Age", 0))


def object_row(obj: StoredObject, *, now: datetime) -> list[str]:
    """A ConfigMap's cells in :data:`CONFIGMAP_COLUMNS`, a Secret's in
    :data:`SECRET_COLUMNS` (the number of keys, never a value)."""
    since = obj.created()
    shown_age = age(since, now=now) if since is not None else "<unknown>"
    count = str(data_count(obj))
    if obj.kind == "Secret":
        return [obj.name, str(obj.body.get("type") or "Opaque"), count, shown_age]
    return [obj.name, count, shown_age]


CONTROLLERREVISION_COLUMNS = (("Name", 0), ("Controller", 0), ("Revision", 0), ("Age", 0))


def controllerrevision_row(obj: StoredObject, *, now: datetime) -> list[str]:
    """``printControllerRevision``: the controller as ``kind.group/name``."""
    since = obj.created()
    shown_age = age(since, now=now) if since is not None else "<unknown>"
    controller = "<none>"
    for ref in (obj.body.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            group = str(ref.get("apiVersion") or "").rpartition("/")[0]
            kind = str(ref.get("kind") or "").lower()
            controller = (
                f"{kind}.{group}/{ref.get('name')}" if group else f"{kind}/{ref.get('name')}"
            )
            break
    revision = obj.body.get("revision")
    return [obj.name, controller, str(revision if isinstance(revision, int) else 0), shown_age]


EVENT_COLUMNS = (
    ("Last Seen", 0),
    ("Type", 0),
    ("Reason", 0),
    ("Object", 0),
    ("Subobject", 1),
    ("Source", 1),
    ("Message", 0),
    ("First Seen", 1),
    ("Count", 1),
    ("Name", 1),
)
NAMESPACE_COLUMNS = (("Name", 0), ("Status", 0), ("Age", 0))


def event_row(event: Mapping[str, Any], *, now: datetime) -> list[str]:
    """A v1 Event's cells in :data:`EVENT_COLUMNS`: when last and first seen, as AGE
    is shown, the object as ``kind/name``, the source as ``component, host``."""
    first = parse_time(event.get("firstTimestamp") or event.get("eventTime"))
    last = parse_time(event.get("lastTimestamp")) or first
    involved = event.get("involvedObject") or {}
    kind = str(involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = event.get("source") or {}
    shown_source = ", ".join(
        str(part) for part in (source.get("component"), source.get("host")) if part
    )
    return [
        age(last, now=now) if last is not None else "<unknown>",
        str(event.get("type") or ""),
        str(event.get("reason") or ""),
        target,
        str(involved.get("fieldPath") or ""),
        shown_source,
        str(event.get("message") or "").strip(),
        age(first, now=now) if first is not None else "<unknown>",
        str(event.get("count") or 1),
        str((event.get("metadata") or {}).get("name") or ""),
    ]


def event_seen(event: Mapping[str, Any]) -> datetime:
    """When an Event was last seen (its first time, when it has no last), for sorting."""
    seen = parse_time(event.get("lastTimestamp") or event.get("firstTimestamp"))
    return seen if seen is not None else datetime.min.replace(tzinfo=UTC)


def namespace_row(body: Mapping[str, Any], *, terminating: bool, now: datetime) -> list[str]:
    """A Namespace's cells in :data:`NAMESPACE_COLUMNS`."""
    name = str((body.get("metadata") or {}).get("name") or "")
    return [name, "Terminating" if terminating else "Active", _shown_age(body, now)]


SERVICE_COLUMNS = (
    ("Name", 0),
    ("Type", 0),
    ("Cluster-IP", 0),
    ("External-IP", 0),
    ("Port(s)", 0),
    ("Age", 0),
    ("Selector", 1),
)
ENDPOINTS_COLUMNS = (("Name", 0), ("Endpoints", 0), ("Age", 0))
MAX_ENDPOINTS_SHOWN = 3
"""kubectl lists three endpoints, then ``+ N more...``."""


def _created_at(body: Mapping[str, Any]) -> datetime | None:
    return parse_time((body.get("metadata") or {}).get("creationTimestamp"))


def _shown_age(body: Mapping[str, Any], now: datetime) -> str:
    since = _created_at(body)
    return age(since, now=now) if since is not None else "<unknown>"


def service_ports(body: Mapping[str, Any]) -> str:
    """kubectl's PORT(S): ``80/TCP``, ``80:30080/TCP`` with a nodePort; ``<none>``."""
    shown = []
    for port in (body.get("spec") or {}).get("ports") or []:
        text = str(port.get("port"))
        if port.get("nodePort"):
            text += f":{port['nodePort']}"
        shown.append(f"{text}/{port.get('protocol') or 'TCP'}")
    return ",".join(shown) or "<none>"


def service_external_ip(body: Mapping[str, Any]) -> str:
    spec = body.get("spec") or {}
    kind = spec.get("type") or "ClusterIP"
    if kind == "ExternalName":
        return str(spec.get("externalName") or "<none>")
    ingress = ((body.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    shown = [str(i.get("ip") or i.get("hostname") or "") for i in ingress]
    shown += list(spec.get("externalIPs") or [])
    if kind == "LoadBalancer" and not shown:
        return "<pending>"
    return ",".join(s for s in shown if s) or "<none>"


def selector_text(selector: Mapping[str, str] | None) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted((selector or {}).items())) or "<none>"


def service_row(body: Mapping[str, Any], *, now: datetime) -> list[str]:
    """One Service's cells in :data:`SERVICE_COLUMNS`."""
    spec = body.get("spec") or {}
    return [
        str((body.get("metadata") or {}).get("name") or ""),
        str(spec.get("type") or "ClusterIP"),
        str(spec.get("clusterIP") or "<none>"),
        service_external_ip(body),
        service_ports(body),
        _shown_age(body, now),
        selector_text(spec.get("selector")),
    ]


def endpoint_addresses(body: Mapping[str, Any]) -> list[str]:
    """``ip:port`` of every ready address of a v1 Endpoints object, in order."""
    found = []
    for subset in body.get("subsets") or []:
        ports = subset.get("ports") or []
        for address in subset.get("addresses") or []:
            if not ports:
                found.append(str(address.get("ip")))
            for port in ports:
                found.append(f"{address.get('ip')}:{port.get('port')}")
    return found


def endpoints_row(body: Mapping[str, Any], *, now: datetime) -> list[str]:
    """One Endpoints object's cells in :data:`ENDPOINTS_COLUMNS`."""
    found = endpoint_addresses(body)
    shown = ",".join(found[:MAX_ENDPOINTS_SHOWN]) or "<none>"
    if len(found) > MAX_ENDPOINTS_SHOWN:
        shown += f" + {len(found) - MAX_ENDPOINTS_SHOWN} more..."
    return [str((body.get("metadata") or {}).get("name") or ""), shown, _shown_age(body, now)]


ENDPOINTSLICE_COLUMNS = (
    ("Name", 0),
    ("AddressType", 0),
    ("Ports", 0),
    ("Endpoints", 0),
    ("Age", 0),
)


def _first_three(found: list[str]) -> str:
    """kubectl's short list: three items, then ``+ N more...``; ``<unset>`` for none."""
    shown = ",".join(found[:MAX_ENDPOINTS_SHOWN])
    if len(found) > MAX_ENDPOINTS_SHOWN:
        return f"{shown} + {len(found) - MAX_ENDPOINTS_SHOWN} more..."
    return shown or "<unset>"


def endpointslice_row(body: Mapping[str, Any], *, now: datetime) -> list[str]:
    """One EndpointSlice's cells in :data:`ENDPOINTSLICE_COLUMNS`: its ports (a port
    without a number by its name, else ``*``) and its endpoints' addresses."""
    ports = [
        str(p["port"]) if p.get("port") is not None else str(p.get("name") or "*")
        for p in body.get("ports") or []
    ]
    addresses = [str(a) for e in body.get("endpoints") or [] for a in e.get("addresses") or []]
    return [
        str((body.get("metadata") or {}).get("name") or ""),
        str(body.get("addressType") or ""),
        _first_three(ports),
        _first_three(addresses),
        _shown_age(body, now),
    ]


# -- workloads ---------------------------------------------------------------------------------

DEPLOYMENT_COLUMNS = (
    ("Name", 0),
    ("Ready", 0),
    ("Up-to-date", 0),
    ("Available", 0),
    ("Age", 0),
    ("Containers", 1),
    ("Images", 1),
    ("Selector", 1),
)
REPLICASET_COLUMNS = (
    ("Name", 0),
    ("Desired", 0),
    ("Current", 0),
    ("Ready", 0),
    ("Age", 0),
    ("Containers", 1),
    ("Images", 1),
    ("Selector", 1),
)
STATEFULSET_COLUMNS = (("Name", 0), ("Ready", 0), ("Age", 0), ("Containers", 1), ("Images", 1))
JOB_COLUMNS = (
    ("Name", 0),
    ("Status", 0),
    ("Completions", 0),
    ("Duration", 0),
    ("Age", 0),
    ("Containers", 1),
    ("Images", 1),
    ("Selector", 1),
)
DAEMONSET_COLUMNS = (
    ("Name", 0),
    ("Desired", 0),
    ("Current", 0),
    ("Ready", 0),
    ("Up-to-date", 0),
    ("Available", 0),
    ("Node Selector", 0),
    ("Age", 0),
    ("Containers", 1),
    ("Images", 1),
    ("Selector", 1),
)
CRONJOB_COLUMNS = (
    ("Name", 0),
    ("Schedule", 0),
    ("Timezone", 0),
    ("Suspend", 0),
    ("Active", 0),
    ("Last Schedule", 0),
    ("Age", 0),
    ("Containers", 1),
    ("Images", 1),
    ("Selector", 1),
)
WORKLOAD_COLUMNS = {
    "Deployment": DEPLOYMENT_COLUMNS,
    "ReplicaSet": REPLICASET_COLUMNS,
    "StatefulSet": STATEFULSET_COLUMNS,
    "Job": JOB_COLUMNS,
    "DaemonSet": DAEMONSET_COLUMNS,
    "CronJob": CRONJOB_COLUMNS,
}
"""kubectl's ``get`` columns of each workload kind (``printDeployment``, ``printJob``...)."""


def format_label_selector(selector: Mapping[str, Any] | None) -> str:
    """``metav1.FormatLabelSelector``: ``app=web,tier in (a,b)``; ``<none>`` for none."""
    if not selector:
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted(dict(selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op = expr.get("key"), expr.get("operator")
        values = ",".join(sorted(expr.get("values") or []))
        if op == "In":
            parts.append(f"{key} in ({values})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or "<none>"


def _containers(body: Mapping[str, Any]) -> tuple[str, str]:
    """``layoutContainerCells``: container names and images, comma-separated."""
    spec = ((body.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = spec.get("containers") or []
    return (
        ",".join(str(c.get("name") or "") for c in containers),
        ",".join(str(c.get("image") or "") for c in containers),
    )


def _n(value: Any) -> int:
    return int(value) if isinstance(value, int) else 0


def job_status_word(body: Mapping[str, Any]) -> str:
    """kubectl's Job STATUS column."""
    status = body.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    meta = body.get("metadata") or {}
    if conditions.get("Complete") == "True":
        return "Complete"
    if conditions.get("Failed") == "True":
        return "Failed"
    if meta.get("deletionTimestamp"):
        return "Terminating"
    if conditions.get("Suspended") == "True":
        return "Suspended"
    if conditions.get("FailureTarget") == "True":
        return "FailureTarget"
    return "Running"


def workload_row(obj: StoredObject, *, now: datetime) -> list[str]:
    """A workload's cells in its :data:`WORKLOAD_COLUMNS`."""
    body = dict(obj.body)
    spec = dict(body.get("spec") or {})
    status = dict(body.get("status") or {})
    since = obj.created()
    shown_age = age(since, now=now) if since is not None else "<unknown>"
    names, images = _containers(body)
    selector = format_label_selector(spec.get("selector"))
    desired = 1 if spec.get("replicas") is None else _n(spec.get("replicas"))
    if obj.kind == "Deployment":
        ready = f"{_n(status.get('readyReplicas'))}/{desired}"
        updated, available = _n(status.get("updatedReplicas")), _n(status.get("availableReplicas"))
        return [obj.name, ready, str(updated), str(available), shown_age, names, images, selector]
    if obj.kind == "ReplicaSet":
        current, ready_n = _n(status.get("replicas")), _n(status.get("readyReplicas"))
        return [
            obj.name,
            str(desired),
            str(current),
            str(ready_n),
            shown_age,
            names,
            images,
            selector,
        ]
    if obj.kind == "StatefulSet":
        return [obj.name, f"{_n(status.get('readyReplicas'))}/{desired}", shown_age, names, images]
    if obj.kind == "DaemonSet":
        return _daemonset_row(obj.name, spec, status, shown_age, (names, images, selector))
    if obj.kind == "CronJob":
        return _cronjob_row(obj.name, spec, status, shown_age, now)
    succeeded = _n(status.get("succeeded"))
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{_n(spec.get('completions'))}"
    elif _n(spec.get("parallelism")) > 1:
        completions = f"{succeeded}/1 of {_n(spec.get('parallelism'))}"
    else:
        completions = f"{succeeded}/1"
    started = parse_time(status.get("startTime"))
    finished = parse_time(status.get("completionTime"))
    duration = ""
    if started is not None:
        duration = age(started, now=finished or now)
    return [
        obj.name,
        job_status_word(body),
        completions,
        duration,
        shown_age,
        names,
        images,
        selector,
    ]


def _daemonset_row(
    name: str,
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    shown_age: str,
    wide: tuple[str, str, str],
) -> list[str]:
    """``printDaemonSet``."""
    node_selector = ((spec.get("template") or {}).get("spec") or {}).get("nodeSelector")
    counts = (
        "desiredNumberScheduled",
        "currentNumberScheduled",
        "numberReady",
        "updatedNumberScheduled",
        "numberAvailable",
    )
    return [
        name,
        *(str(_n(status.get(key))) for key in counts),
        selector_text(node_selector),
        shown_age,
        *wide,
    ]


def _cronjob_row(
    name: str, spec: Mapping[str, Any], status: Mapping[str, Any], shown_age: str, now: datetime
) -> list[str]:
    """``printCronJob``."""
    job_spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    template = {"spec": {"template": job_spec.get("template") or {}}}
    names, images = _containers(template)
    last = parse_time(status.get("lastScheduleTime"))
    return [
        name,
        str(spec.get("schedule") or ""),
        str(spec.get("timeZone") or "<none>"),
        "True" if spec.get("suspend") else "False",
        str(len(status.get("active") or [])),
        age(last, now=now) if last is not None else "<none>",
        shown_age,
        names,
        images,
        format_label_selector(job_spec.get("selector")),
    ]
