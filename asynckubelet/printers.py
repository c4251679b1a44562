"""kubectl's output for pods: the ``get pods`` table, its STATUS and READY words, and the
``describe pod`` page.

People read these outputs with years of kubectl habit: the same columns, the same STATUS
words, the same ``2 (5s ago)`` restarts and the same ``describe`` sections let them find
things where they look. These are pure functions of the v1 Pod (with status) and its
events, so the command line only fetches and prints.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from lightkube.models.core_v1 import (
    Container,
    ContainerStatus,
    Pod,
    PodCondition,
    PodSpec,
    PodStatus,
    Probe,
    ProjectedVolumeSource,
    Volume,
)

from asynckubelet.node.container_status import COMPLETED, POD_INITIALIZING, container_state
from asynckubelet.node.events import PodEvent, age
from asynckubelet.node.objects import StoredObject, data_count
from asynckubelet.node.status import (
    INITIALIZED,
    POD_SCHEDULED,
    READY,
    RUNNING,
    SCHEDULING_GATED,
    TERMINAL_PHASES,
    is_scheduling_gated,
)
from asynckubelet.runtime import actions
from asynckubelet.runtime import containers as ctr
from asynckubelet.tables import layout, render, table

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Go's duration syntax as kubectl takes it (``5s``, ``2m30s``, ``1h``) in seconds."""
    pos = 0
    total = 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise ValueError(f"invalid duration {text!r}: use a number and a unit, e.g. 30s, 5m, 1h")
    return total


def kubectl_status(pod: Pod, status: PodStatus) -> str:
    """The STATUS column of ``kubectl get pods`` (kubectl's ``printPod``)."""
    return _print_pod(pod, status)[0]


def ready_string(pod: Pod, status: PodStatus) -> str:
    """The READY column of ``kubectl get pods``: ready / total, sidecars counted."""
    _, ready, total = _print_pod(pod, status)
    return f"{ready}/{total}"


def _print_pod(pod: Pod, status: PodStatus) -> tuple[str, int, int]:  # noqa: C901  (mirrors kubectl printPod)
    """kubectl's ``printPod``: the STATUS text, ready containers and total containers."""
    spec = _spec(pod)
    reason = status.reason or status.phase or ""
    for cond in status.conditions or []:
        if cond.type == POD_SCHEDULED and cond.reason == SCHEDULING_GATED:
            reason = SCHEDULING_GATED
    inits = {c.name: c for c in spec.initContainers or []}
    total = len(spec.containers) + sum(
        1 for c in inits.values() if actions.is_restartable_init_container(c)
    )
    ready = 0
    initializing = False
    for i, cs in enumerate(status.initContainerStatuses or []):
        state = container_state(cs)
        term = state.terminated
        spec_c = inits.get(cs.name)
        if term is not None and term.exitCode == 0:
            continue
        if spec_c is not None and actions.is_restartable_init_container(spec_c) and cs.started:
            ready += 1 if cs.ready else 0
            continue
        if term is not None:
            if term.reason:
                reason = f"Init:{term.reason}"
            elif term.signal:
                reason = f"Init:Signal:{term.signal}"
            else:
                reason = f"Init:ExitCode:{term.exitCode}"
        elif (
            state.waiting is not None
            and state.waiting.reason
            and state.waiting.reason != POD_INITIALIZING
        ):
            reason = f"Init:{state.waiting.reason}"
        else:
            reason = f"Init:{i}/{len(spec.initContainers or [])}"
        initializing = True
        break
    if not initializing or _condition_true(status, INITIALIZED):
        has_running = False
        for cs in reversed(status.containerStatuses or []):
            state = container_state(cs)
            if state.waiting is not None and state.waiting.reason:
                reason = state.waiting.reason
            elif state.terminated is not None and state.terminated.reason:
                reason = state.terminated.reason
            elif state.terminated is not None:
                if state.terminated.signal:
                    reason = f"Signal:{state.terminated.signal}"
                else:
                    reason = f"ExitCode:{state.terminated.exitCode}"
            elif cs.ready and state.running is not None:
                has_running = True
                ready += 1
        if reason == COMPLETED and has_running:
            reason = RUNNING if _condition_true(status, READY) else "NotReady"
    deleted = pod.metadata is not None and pod.metadata.deletionTimestamp is not None
    if deleted and status.reason == "NodeLost":
        reason = "Unknown"
    elif deleted and status.phase not in TERMINAL_PHASES:
        reason = "Terminating"
    return reason, ready, total


def _condition_true(status: PodStatus, kind: str) -> bool:
    for c in status.conditions or []:
        if c.type == kind:
            return c.status == "True"
    return False


def _spec(pod: Pod) -> PodSpec:
    return pod.spec or PodSpec(containers=[])


def _time(value: datetime | str | None) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def created(pod: Pod) -> datetime | None:
    """When the pod began, for AGE: its creation time, else its start time."""
    meta = pod.metadata
    if meta is not None and meta.creationTimestamp is not None:
        return _time(meta.creationTimestamp)
    return _time(pod.status.startTime) if pod.status else None


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
        finished = _time(term.finishedAt) if term is not None else None
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
"""The ``get pods`` columns and their priority (1: ``-o wide`` only)."""
CONFIGMAP_COLUMNS = (("Name", 0), ("Data", 0), ("Age", 0))
SECRET_COLUMNS = (("Name", 0), ("Type", 0), ("Data", 0), ("Age", 0))


def pod_row(pod: Pod, *, node_name: str, now: datetime) -> list[str]:
    """One pod's cells in :data:`POD_COLUMNS`."""
    name, _, _ = ctr.pod_identity(pod)
    status = pod.status
    since = created(pod)
    return [
        name,
        ready_string(pod, status) if status else f"0/{len(_spec(pod).containers)}",
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
    first, and every container status with its ``lastState`` (``{}`` when it has none)."""
    body = {"apiVersion": "v1", "kind": "Pod", **pod.to_dict()}
    status = body.get("status") or {}
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(key) or []:
            cs.setdefault("lastState", {})
            cs.setdefault("state", {})
    return body


def readiness_gates(pod: Pod) -> str:
    """The READINESS GATES column: gates whose condition is True / gates, or ``<none>``."""
    gates = [g.conditionType for g in _spec(pod).readinessGates or []]
    if not gates:
        return "<none>"
    conditions = {c.type: c.status for c in (pod.status.conditions if pod.status else None) or []}
    return f"{sum(1 for g in gates if conditions.get(g) == 'True')}/{len(gates)}"


def describe_probe(probe: Probe) -> str:
    """A probe as ``kubectl describe`` shows it: ``http-get http://:8080/healthz delay=3s
    timeout=1s period=3s #success=1 #failure=3``."""
    attrs = (
        f"delay={probe.initialDelaySeconds or 0}s timeout={probe.timeoutSeconds or 0}s "
        f"period={probe.periodSeconds or 0}s #success={probe.successThreshold or 0} "
        f"#failure={probe.failureThreshold or 0}"
    )
    if probe.exec is not None:
        return f"exec [{' '.join(probe.exec.command or [])}] {attrs}"
    if probe.httpGet is not None:
        get = probe.httpGet
        host = get.host or ""
        port = str(get.port) if get.port is not None else ""
        if port:
            host = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        path = get.path or ""
        if path and not path.startswith("/"):
            path = "/" + path
        return f"http-get {(get.scheme or 'HTTP').lower()}://{host}{path} {attrs}"
    if probe.tcpSocket is not None:
        return f"tcp-socket {probe.tcpSocket.host or ''}:{probe.tcpSocket.port} {attrs}"
    if probe.grpc is not None:
        return f"grpc <pod>:{probe.grpc.port} {probe.grpc.service or ''} {attrs}"
    return f"unknown {attrs}"


def object_row(obj: StoredObject, *, now: datetime) -> list[str]:
    """A ConfigMap's cells in :data:`CONFIGMAP_COLUMNS`, a Secret's in
    :data:`SECRET_COLUMNS` (the number of keys, never a value)."""
    since = obj.created()
    shown_age = age(since, now=now) if since is not None else "<unknown>"
    count = str(data_count(obj))
    if obj.kind == "Secret":
        return [obj.name, str(obj.body.get("type") or "Opaque"), count, shown_age]
    return [obj.name, count, shown_age]


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
    first = _time(event.get("firstTimestamp") or event.get("eventTime"))
    last = _time(event.get("lastTimestamp")) or first
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
    seen = _time(event.get("lastTimestamp") or event.get("firstTimestamp"))
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
    return _time((body.get("metadata") or {}).get("creationTimestamp"))


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


_SERVICE_PAD = 26


def _field(label: str, value: object) -> str:
    return f"{(label + ':').ljust(_SERVICE_PAD)}{value}"


def describe_service(
    body: Mapping[str, Any],
    endpoints: Mapping[str, Any] | None,
    events: Sequence[PodEvent] = (),
    *,
    now: datetime | None = None,
) -> str:
    """``kubectl describe service``; ``endpoints`` is its v1 Endpoints object (None:
    none, as for a Service without a selector), ``events`` those about the Service."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    kind = spec.get("type") or "ClusterIP"
    lines = [
        _field("Name", meta.get("name") or ""),
        _field("Namespace", meta.get("namespace") or "default"),
        _field("Labels", "\n".join(_map(meta.get("labels"), _SERVICE_PAD))),
        _field("Annotations", "\n".join(_map(meta.get("annotations"), _SERVICE_PAD))),
        _field("Selector", selector_text(spec.get("selector"))),
        _field("Type", kind),
        *_service_addresses(body, kind),
        *_service_ports(spec, endpoints),
    ]
    if endpoints is None and kind != "ExternalName":
        lines.append(_field("Endpoints", "<none>"))
    lines.append(_field("Session Affinity", spec.get("sessionAffinity") or "None"))
    if spec.get("externalTrafficPolicy"):
        lines.append(_field("External Traffic Policy", spec["externalTrafficPolicy"]))
    if spec.get("internalTrafficPolicy"):
        lines.append(_field("Internal Traffic Policy", spec["internalTrafficPolicy"]))
    if events:
        lines += _event_lines(events, now=now or now_utc())
    else:
        lines.append(_field("Events", "<none>"))
    return "\n".join(lines)


def _service_addresses(body: Mapping[str, Any], kind: str) -> list[str]:
    spec = body.get("spec") or {}
    lines = []
    if kind == "ExternalName":
        lines.append(_field("External Name", spec.get("externalName") or ""))
    else:
        if spec.get("ipFamilyPolicy"):
            lines.append(_field("IP Family Policy", spec["ipFamilyPolicy"]))
        if spec.get("ipFamilies"):
            lines.append(_field("IP Families", ",".join(spec["ipFamilies"])))
        lines.append(_field("IP", spec.get("clusterIP") or "<none>"))
        if spec.get("clusterIPs"):
            lines.append(_field("IPs", ",".join(spec["clusterIPs"])))
    ingress = ((body.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    if ingress:
        shown = [
            f"{i.get('ip') or i.get('hostname')}" + (f" ({i['ipMode']})" if i.get("ipMode") else "")
            for i in ingress
        ]
        lines.append(_field("LoadBalancer Ingress", ", ".join(shown)))
    return lines


def _service_ports(spec: Mapping[str, Any], endpoints: Mapping[str, Any] | None) -> list[str]:
    lines = []
    for port in spec.get("ports") or []:
        name = port.get("name") or "<unset>"
        protocol = port.get("protocol") or "TCP"
        lines.append(_field("Port", f"{name}  {port.get('port')}/{protocol}"))
        lines.append(_field("TargetPort", f"{port.get('targetPort')}/{protocol}"))
        if port.get("nodePort"):
            lines.append(_field("NodePort", f"{name}  {port['nodePort']}/{protocol}"))
        if endpoints is not None:
            mine = _port_addresses(endpoints, port.get("name") or "", protocol)
            lines.append(_field("Endpoints", ",".join(mine) or "<none>"))
    if not spec.get("ports") and endpoints is not None:
        lines.append(_field("Endpoints", ",".join(endpoint_addresses(endpoints)) or "<none>"))
    return lines


def _port_addresses(endpoints: Mapping[str, Any], name: str, protocol: str) -> list[str]:
    found = []
    for subset in endpoints.get("subsets") or []:
        for port in subset.get("ports") or []:
            if (port.get("name") or "") == name and (port.get("protocol") or "TCP") == protocol:
                found += [
                    f"{a.get('ip')}:{port.get('port')}" for a in subset.get("addresses") or []
                ]
    return found


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


def _when(value: datetime | str | None) -> str:
    t = _time(value)
    return t.strftime("%a, %d %b %Y %H:%M:%S %z") if t is not None else ""


def _map(values: dict[str, str] | None, indent: int) -> list[str]:
    if not values:
        return ["<none>"]
    items = sorted(values.items())
    return [f"{k}={v}" for k, v in items[:1]] + [" " * indent + f"{k}={v}" for k, v in items[1:]]


def _state_lines(label: str, state: object, pad: int) -> list[str]:
    running = getattr(state, "running", None)
    waiting = getattr(state, "waiting", None)
    terminated = getattr(state, "terminated", None)
    lines: list[str] = []

    def field(name: str, value: object) -> None:
        lines.append(f"      {(name + ':').ljust(pad - 2)}{value}")

    head = f"    {(label + ':').ljust(pad)}"
    if running is not None:
        lines.append(head + "Running")
        field("Started", _when(running.startedAt))
    elif terminated is not None:
        lines.append(head + "Terminated")
        field("Reason", terminated.reason or "")
        if terminated.message:
            field("Message", terminated.message)
        field("Exit Code", terminated.exitCode)
        if terminated.signal:
            field("Signal", terminated.signal)
        field("Started", _when(terminated.startedAt))
        field("Finished", _when(terminated.finishedAt))
    elif waiting is not None:
        lines.append(head + "Waiting")
        if waiting.reason:
            field("Reason", waiting.reason)
        if waiting.message:
            field("Message", waiting.message)
    else:
        lines.append(head + "<none>" if label == "Last State" else head + "Waiting")
    return lines


def _container_lines(c: Container, cs: ContainerStatus | None) -> list[str]:  # noqa: C901  (mirrors kubectl describeContainers)
    pad = 16
    lines = [f"  {c.name}:"]

    def field(name: str, value: object) -> None:
        lines.append(f"    {(name + ':').ljust(pad)}{value}")

    if cs is not None and cs.containerID:
        field("Container ID", cs.containerID)
    field("Image", c.image or "")
    field("Image ID", (cs.imageID if cs else "") or "")
    ports = [f"{p.containerPort}/{p.protocol or 'TCP'}" for p in c.ports or []]
    field("Ports" if len(ports) > 1 else "Port", ", ".join(ports) or "<none>")
    host_ports = [f"{p.hostPort or 0}/{p.protocol or 'TCP'}" for p in c.ports or []]
    field("Host Ports" if len(host_ports) > 1 else "Host Port", ", ".join(host_ports) or "<none>")
    for title, parts in (("Command", c.command), ("Args", c.args)):
        if parts:
            lines.append(f"    {title}:")
            lines += [f"      {line}" for part in parts for line in part.split("\n")]
    lines += _state_lines("State", cs.state if cs else None, pad)
    if (
        cs is not None
        and cs.lastState is not None
        and (cs.lastState.terminated or cs.lastState.running or cs.lastState.waiting)
    ):
        lines += _state_lines("Last State", cs.lastState, pad)
    field("Ready", "True" if cs is not None and cs.ready else "False")
    field("Restart Count", cs.restartCount if cs is not None else 0)
    resources = c.resources
    for title, values in (
        ("Limits", resources.limits if resources else None),
        ("Requests", resources.requests if resources else None),
    ):
        if values:
            lines.append(f"    {title}:")
            width = max(len(k) for k in values) + 3
            lines += [f"      {(k + ':').ljust(width)}{values[k]}" for k in sorted(values)]
    for title, probe in (
        ("Liveness", c.livenessProbe),
        ("Readiness", c.readinessProbe),
        ("Startup", c.startupProbe),
    ):
        if probe is not None:
            field(title, describe_probe(probe))
    if c.env:
        lines.append("    Environment:")
        for env in c.env:
            if env.valueFrom is not None:
                ref = env.valueFrom
                if ref.secretKeyRef is not None:
                    key, secret = ref.secretKeyRef.key, ref.secretKeyRef.name
                    shown = f"<set to the key '{key}' in secret '{secret}'>"
                elif ref.configMapKeyRef is not None:
                    shown = (
                        f"<set to the key '{ref.configMapKeyRef.key}' of config map "
                        f"'{ref.configMapKeyRef.name}'>"
                    )
                elif ref.fieldRef is not None:
                    shown = f" ({ref.fieldRef.apiVersion or 'v1'}:{ref.fieldRef.fieldPath})"
                else:
                    shown = "<set from a reference>"
            else:
                shown = env.value or ""
            lines.append(f"      {env.name}:  {shown}")
    else:
        field("Environment", "<none>")
    mounts = [
        f"{m.mountPath} from {m.name} ({'ro' if m.readOnly else 'rw'})"
        for m in c.volumeMounts or []
    ]
    if mounts:
        lines.append("    Mounts:")
        lines += [f"      {m}" for m in mounts]
    else:
        field("Mounts", "<none>")
    return lines


def _event_lines(events: Sequence[PodEvent], *, now: datetime) -> list[str]:
    if not events:
        return ["Events:            <none>"]
    rows = [
        ["Type", "Reason", "Age", "From", "Message"],
        ["----", "------", "----", "----", "-------"],
    ]
    for e in events:
        shown_age = age(e.last_timestamp, now=now)
        if e.count > 1:
            shown_age = f"{shown_age} (x{e.count} over {age(e.first_timestamp, now=now)})"
        rows.append([e.type, e.reason, shown_age, e.source, e.message])
    text = layout(rows)
    return ["Events:"] + ["  " + line for line in text.splitlines()]


def describe_pod(pod: Pod, events: Sequence[PodEvent], *, node_name: str, now: datetime) -> str:
    """``kubectl describe pod``: metadata, containers, conditions, volumes, then events."""
    meta = pod.metadata
    spec = _spec(pod)
    status = pod.status
    name, ns, _ = ctr.pod_identity(pod)
    pad = 18

    def field(label: str, value: object) -> str:
        return f"{(label + ':').ljust(pad)}{value}"

    host_ip = (status.hostIP if status else None) or ""
    bound = bound_node(pod, node_name=node_name)
    lines = [
        field("Name", name),
        field("Namespace", ns),
        field("Priority", spec.priority or 0),
        field("Service Account", spec.serviceAccountName or "default"),
        field("Node", "<none>" if bound is None else f"{bound}/{host_ip}" if host_ip else bound),
    ]
    if status is not None and status.startTime is not None:
        lines.append(field("Start Time", _when(status.startTime)))
    lines += [
        field("Labels", "\n".join(_map(meta.labels if meta else None, pad))),
        field("Annotations", "\n".join(_map(meta.annotations if meta else None, pad))),
    ]
    shown = (status.phase if status else None) or "Unknown"
    if meta is not None and meta.deletionTimestamp is not None:
        shown = "Terminating (lasts <invalid>)"
        grace = meta.deletionGracePeriodSeconds
        lines.append(
            field(
                "Status",
                shown.replace("<invalid>", age(_time(meta.deletionTimestamp) or now, now=now)),
            )
        )
        if grace is not None:
            lines.append(field("Termination Grace Period", f"{grace}s"))
    else:
        lines.append(field("Status", shown))
    if status is not None and status.reason:
        lines.append(field("Reason", status.reason))
    if status is not None and status.message:
        lines.append(field("Message", status.message))
    lines.append(field("IP", (status.podIP if status else None) or ""))
    ips = [ip.ip for ip in (status.podIPs if status else None) or []]
    if ips:
        lines.append("IPs:")
        lines += [f"  IP:  {ip}" for ip in ips]
    else:
        lines.append(field("IPs", "<none>"))
    owner = next((r for r in (meta.ownerReferences if meta else None) or [] if r.controller), None)
    if owner is not None:
        lines.append(field("Controlled By", f"{owner.kind}/{owner.name}"))
    init_statuses = {c.name: c for c in (status.initContainerStatuses if status else None) or []}
    statuses = {c.name: c for c in (status.containerStatuses if status else None) or []}
    if spec.initContainers:
        lines.append("Init Containers:")
        for c in spec.initContainers:
            lines += _container_lines(c, init_statuses.get(c.name))
    lines.append("Containers:")
    for c in spec.containers:
        lines += _container_lines(c, statuses.get(c.name))
    lines += _condition_lines((status.conditions if status else None) or [])
    lines += _volume_lines(spec) if spec.volumes else [field("Volumes", "<none>")]
    lines.append(field("QoS Class", (status.qosClass if status else None) or "BestEffort"))
    lines.append(field("Node-Selectors", "\n".join(_map(spec.nodeSelector, pad))))
    tolerations = [
        f"{t.key or ''}{'=' + t.value if t.value else ''}:{t.effect or ''}"
        for t in spec.tolerations or []
    ]
    lines.append(field("Tolerations", ("\n" + " " * pad).join(tolerations) or "<none>"))
    lines += _event_lines(events, now=now)
    return "\n".join(lines)


def _condition_lines(conditions: Sequence[PodCondition]) -> list[str]:
    if not conditions:
        return []
    width = max(len("Type"), *(len(c.type) for c in conditions)) + 3
    return [
        "Conditions:",
        f"  {'Type'.ljust(width)}Status",
        *(f"  {c.type.ljust(width)}{c.status} " for c in conditions),
    ]


def _volume_lines(spec: PodSpec) -> list[str]:
    """kubectl's ``describeVolumes``: per volume its name, then its source's fields, each
    volume's labels aligned among themselves (as its tab writer aligns them)."""
    lines = ["Volumes:"]
    for v in spec.volumes or []:
        lines.append(f"  {v.name}:")
        fields = _volume_fields(v)
        if fields is None:
            lines.append("  <unknown>")
            continue
        width = max(len(label) for label, _ in fields) + 2
        lines += [f"    {(label + ':').ljust(width + 1)}{value}" for label, value in fields]
        if v.downwardAPI is not None:
            lines.append("    Items:")
            for item in v.downwardAPI.items or []:
                if item.fieldRef is not None:
                    lines.append(f"      {item.fieldRef.fieldPath} -> {item.path}")
                if item.resourceFieldRef is not None:
                    lines.append(f"      {item.resourceFieldRef.resource} -> {item.path}")
    return lines


def _go_bool(value: bool | None) -> str:
    return "true" if value else "false"


def _volume_fields(v: Volume) -> list[tuple[str, object]] | None:
    """The ``(label, value)`` lines kubectl prints for a volume's source (``Type`` first);
    None for a source it does not know."""
    if v.hostPath is not None:
        return [
            ("Type", "HostPath (bare host directory volume)"),
            ("Path", v.hostPath.path),
            ("HostPathType", v.hostPath.type if v.hostPath.type is not None else "<none>"),
        ]
    if v.emptyDir is not None:
        limit = v.emptyDir.sizeLimit
        return [
            ("Type", "EmptyDir (a temporary directory that shares a pod's lifetime)"),
            ("Medium", v.emptyDir.medium or ""),
            ("SizeLimit", limit if limit and not _is_zero_quantity(limit) else "<unset>"),
        ]
    if v.secret is not None:
        return [
            ("Type", "Secret (a volume populated by a Secret)"),
            ("SecretName", v.secret.secretName or ""),
            ("Optional", _go_bool(v.secret.optional)),
        ]
    if v.configMap is not None:
        return [
            ("Type", "ConfigMap (a volume populated by a ConfigMap)"),
            ("Name", v.configMap.name or ""),
            ("Optional", _go_bool(v.configMap.optional)),
        ]
    if v.persistentVolumeClaim is not None:
        return [
            (
                "Type",
                "PersistentVolumeClaim (a reference to a PersistentVolumeClaim in the same "
                "namespace)",
            ),
            ("ClaimName", v.persistentVolumeClaim.claimName),
            ("ReadOnly", _go_bool(v.persistentVolumeClaim.readOnly)),
        ]
    if v.downwardAPI is not None:
        return [("Type", "DownwardAPI (a volume populated by information about the pod)")]
    if v.projected is not None:
        return [
            ("Type", "Projected (a volume that contains injected data from multiple sources)"),
            *_projected_fields(v.projected),
        ]
    return None


def _projected_fields(projected: ProjectedVolumeSource) -> list[tuple[str, object]]:
    fields: list[tuple[str, object]] = []
    for source in projected.sources or []:
        if source.secret is not None:
            fields += [
                ("SecretName", source.secret.name or ""),
                ("Optional", _go_bool(source.secret.optional)),
            ]
        elif source.downwardAPI is not None:
            fields.append(("DownwardAPI", "true"))
        elif source.configMap is not None:
            fields += [
                ("ConfigMapName", source.configMap.name or ""),
                ("Optional", _go_bool(source.configMap.optional)),
            ]
        elif source.serviceAccountToken is not None:
            seconds = source.serviceAccountToken.expirationSeconds
            fields.append(("TokenExpirationSeconds", seconds if seconds is not None else 3600))
    return fields


def _is_zero_quantity(quantity: str) -> bool:
    return re.fullmatch(r"[+]?0*(\.0*)?([a-zA-Z]*)", str(quantity)) is not None


def now_utc() -> datetime:
    return datetime.now(UTC)


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
WORKLOAD_COLUMNS = {
    "Deployment": DEPLOYMENT_COLUMNS,
    "ReplicaSet": REPLICASET_COLUMNS,
    "StatefulSet": STATEFULSET_COLUMNS,
    "Job": JOB_COLUMNS,
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
    succeeded = _n(status.get("succeeded"))
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{_n(spec.get('completions'))}"
    elif _n(spec.get("parallelism")) > 1:
        completions = f"{succeeded}/1 of {_n(spec.get('parallelism'))}"
    else:
        completions = f"{succeeded}/1"
    started = _time(status.get("startTime"))
    finished = _time(status.get("completionTime"))
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
