"""kubectl's ``describe pod`` and ``describe service`` pages, and a probe as they show it;
the container, volume and event blocks the workload pages share.

The same sections in the same order, with the same padding, so people find things where
kubectl habit looks for them. Pure functions of the objects and their events: the command
line only fetches and prints.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from lightkube.models.core_v1 import (
    Container,
    ContainerStatus,
    Pod,
    PodCondition,
    PodSpec,
    Probe,
    ProjectedVolumeSource,
    Volume,
)

from asynckubelet.kubectl.objects import endpoint_addresses, selector_text
from asynckubelet.kubectl.pods import bound_node
from asynckubelet.kubectl.tables import layout
from asynckubelet.kubectl.times import now_utc
from asynckubelet.node.events import PodEvent, age
from asynckubelet.node.printpod import parse_time, pod_spec
from asynckubelet.runtime import containers as ctr


def harmless(text: str) -> str:
    """``text`` safe to print on a terminal, as kubectl shows an object's text: an escape
    character as ``^[`` and a carriage return as ``\\r``, so nothing a manifest or a
    container wrote can move the cursor or rewrite what is shown."""
    return text.replace("\x1b", "^[").replace("\r", "\\r")


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
        lines += event_lines(events, now=now or now_utc())
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


def rfc1123z(value: datetime | str | None) -> str:
    """A time as kubectl's pages show it (Go's ``RFC1123Z``); empty for none."""
    t = parse_time(value)
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
        field("Started", rfc1123z(running.startedAt))
    elif terminated is not None:
        lines.append(head + "Terminated")
        field("Reason", terminated.reason or "")
        if terminated.message:
            field("Message", terminated.message)
        field("Exit Code", terminated.exitCode)
        if terminated.signal:
            field("Signal", terminated.signal)
        field("Started", rfc1123z(terminated.startedAt))
        field("Finished", rfc1123z(terminated.finishedAt))
    elif waiting is not None:
        lines.append(head + "Waiting")
        if waiting.reason:
            field("Reason", waiting.reason)
        if waiting.message:
            field("Message", waiting.message)
    else:
        lines.append(head + "<none>" if label == "Last State" else head + "Waiting")
    return lines


def container_lines(  # noqa: C901  (mirrors kubectl describeContainers)
    c: Container, cs: ContainerStatus | None, *, template: bool = False
) -> list[str]:
    """One container's block; in a ``template`` (a workload's ``Pod Template``) its name
    one space further in, no status lines (kubectl has no status to show there), and a tab
    between each label and its value for the page's tab writer to align."""
    pad = 16
    lines = [f"   {c.name}:" if template else f"  {c.name}:"]

    def field(name: str, value: object) -> None:
        lines.append(
            f"    {name}:\t{value}" if template else f"    {(name + ':').ljust(pad)}{value}"
        )

    if cs is not None and cs.containerID:
        field("Container ID", cs.containerID)
    field("Image", c.image or "")
    if not template:
        field("Image ID", (cs.imageID if cs else "") or "")
    ports = [f"{p.containerPort}/{p.protocol or 'TCP'}" for p in c.ports or []]
    field("Ports" if len(ports) > 1 else "Port", ", ".join(ports) or "<none>")
    host_ports = [f"{p.hostPort or 0}/{p.protocol or 'TCP'}" for p in c.ports or []]
    field("Host Ports" if len(host_ports) > 1 else "Host Port", ", ".join(host_ports) or "<none>")
    for title, parts in (("Command", c.command), ("Args", c.args)):
        if parts:
            lines.append(f"    {title}:")
            lines += [f"      {line}" for part in parts for line in part.split("\n")]
    if not template:
        lines += _status_lines(cs, pad)
    resources = c.resources
    for title, values in (
        ("Limits", resources.limits if resources else None),
        ("Requests", resources.requests if resources else None),
    ):
        if values:
            lines.append(f"    {title}:")
            width = max(len(k) for k in values) + 3
            lines += [
                f"      {k}:\t{values[k]}"
                if template
                else f"      {(k + ':').ljust(width)}{values[k]}"
                for k in sorted(values)
            ]
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
            lines.append(f"      {env.name}:{chr(9) if template else '  '}{shown}")
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


def _status_lines(cs: ContainerStatus | None, pad: int) -> list[str]:
    lines = _state_lines("State", cs.state if cs else None, pad)
    if (
        cs is not None
        and cs.lastState is not None
        and (cs.lastState.terminated or cs.lastState.running or cs.lastState.waiting)
    ):
        lines += _state_lines("Last State", cs.lastState, pad)
    lines.append(f"    {'Ready:'.ljust(pad)}{'True' if cs is not None and cs.ready else 'False'}")
    lines.append(f"    {'Restart Count:'.ljust(pad)}{cs.restartCount if cs is not None else 0}")
    return lines


def event_lines(events: Sequence[PodEvent], *, now: datetime) -> list[str]:
    """kubectl's ``Events:`` section: a table of the events, repeats counted."""
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
    spec = pod_spec(pod)
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
        lines.append(field("Start Time", rfc1123z(status.startTime)))
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
                shown.replace("<invalid>", age(parse_time(meta.deletionTimestamp) or now, now=now)),
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
            lines += container_lines(c, init_statuses.get(c.name))
    lines.append("Containers:")
    for c in spec.containers:
        lines += container_lines(c, statuses.get(c.name))
    lines += _condition_lines((status.conditions if status else None) or [])
    lines += volume_lines(spec) if spec.volumes else [field("Volumes", "<none>")]
    lines.append(field("QoS Class", (status.qosClass if status else None) or "BestEffort"))
    lines.append(field("Node-Selectors", "\n".join(_map(spec.nodeSelector, pad))))
    tolerations = [
        f"{t.key or ''}{'=' + t.value if t.value else ''}:{t.effect or ''}"
        for t in spec.tolerations or []
    ]
    lines.append(field("Tolerations", ("\n" + " " * pad).join(tolerations) or "<none>"))
    lines += event_lines(events, now=now)
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


def volume_lines(spec: PodSpec, *, template: bool = False) -> list[str]:
    """kubectl's ``describeVolumes``: per volume its name, then its source's fields, each
    volume's labels aligned among themselves (as its tab writer aligns them); in a
    ``template`` the title two spaces in and each name one space further."""
    lines = ["  Volumes:" if template else "Volumes:"]
    for v in spec.volumes or []:
        lines.append(f"   {v.name}:" if template else f"  {v.name}:")
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


__all__ = [
    "container_lines",
    "describe_pod",
    "describe_probe",
    "describe_service",
    "event_lines",
    "harmless",
    "rfc1123z",
    "volume_lines",
]
