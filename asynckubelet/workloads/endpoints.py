"""A Service's endpoints, as the endpoints controller finds them.

The endpoints of a Service with a selector are the pods of its namespace whose labels
match, that have an IP, are not finished and are not being deleted; an endpoint is ready
when its pod's Ready condition is true (or the Service publishes not-ready addresses), and
a named ``targetPort`` is resolved per pod from its containers' ports
(:func:`endpoints_for`). :class:`ServiceEndpoints` is one Service's set, and its ``v1``
Endpoints object.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lightkube.models.core_v1 import Pod, Service

from asynckubelet.runtime import containers as ctr
from asynckubelet.workloads.allocation import key_of, spec_of

TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class EndpointPort:
    name: str
    port: int
    protocol: str


@dataclass(frozen=True)
class Endpoint:
    """One pod behind a Service, with the ports it serves each Service port on."""

    ip: str
    ready: bool
    pod: str
    uid: str
    ports: tuple[EndpointPort, ...]
    hostname: str = ""
    node_name: str = ""


@dataclass(frozen=True)
class ServiceEndpoints:
    namespace: str
    name: str
    endpoints: tuple[Endpoint, ...] = ()

    @property
    def ready(self) -> tuple[Endpoint, ...]:
        return tuple(e for e in self.endpoints if e.ready)

    def v1(self) -> dict[str, Any]:
        """The ``v1`` Endpoints object: subsets of addresses that share their ports."""
        groups: dict[tuple[EndpointPort, ...], dict[str, list[dict[str, Any]]]] = {}
        for e in self.endpoints:
            group = groups.setdefault(e.ports, {"addresses": [], "notReadyAddresses": []})
            address: dict[str, Any] = {
                "ip": e.ip,
                "targetRef": {
                    "kind": "Pod",
                    "namespace": self.namespace,
                    "name": e.pod,
                    "uid": e.uid,
                },
            }
            if e.hostname:
                address["hostname"] = e.hostname
            if e.node_name:
                address["nodeName"] = e.node_name
            group["addresses" if e.ready else "notReadyAddresses"].append(address)
        subsets = []
        for ports, group in groups.items():
            subset: dict[str, Any] = {k: v for k, v in group.items() if v}
            subset["ports"] = [
                {"name": p.name, "port": p.port, "protocol": p.protocol}
                if p.name
                else {"port": p.port, "protocol": p.protocol}
                for p in ports
            ]
            subsets.append(subset)
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": self.name, "namespace": self.namespace},
        }
        if subsets:
            body["subsets"] = subsets
        return body


def selects(selector: Mapping[str, str] | None, labels: Mapping[str, str] | None) -> bool:
    """A Service selector (equality on every key) against a pod's labels."""
    if not selector:
        return False
    have = labels or {}
    return all(have.get(k) == v for k, v in selector.items())


def pod_is_ready(pod: Pod) -> bool:
    status = pod.status
    return status is not None and any(
        c.type == "Ready" and c.status == "True" for c in status.conditions or []
    )


def find_port(pod: Pod, target: int | str, protocol: str) -> int | None:
    """The container port a ``targetPort`` names on this pod (a number is itself)."""
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    for container in (pod.spec.containers if pod.spec else None) or []:
        for port in container.ports or []:
            if port.name == target and (port.protocol or "TCP") == protocol:
                return int(port.containerPort)
    return None


def endpoints_for(
    service: Service, pods: Iterable[Pod], *, node_name: str = ""
) -> ServiceEndpoints | None:
    """The Service's endpoints among ``pods``; None when it has no selector (its endpoints
    are someone else's to say)."""
    namespace, name = key_of(service)
    spec = spec_of(service)
    if not spec.selector or spec.type == "ExternalName":
        return None
    publish = bool(spec.publishNotReadyAddresses)
    found: list[Endpoint] = []
    for pod in pods:
        pname, pns, uid = ctr.pod_identity(pod)
        meta = pod.metadata
        if pns != namespace or meta is None or not selects(spec.selector, meta.labels):
            continue
        status = pod.status
        if status is None or not status.podIP or status.phase in TERMINAL:
            continue
        if meta.deletionTimestamp is not None and not publish:
            continue
        ports: list[EndpointPort] = []
        for port in spec.ports or []:
            protocol = port.protocol or "TCP"
            number = find_port(
                pod, port.targetPort if port.targetPort is not None else port.port, protocol
            )
            if number is not None:
                ports.append(EndpointPort(name=port.name or "", port=number, protocol=protocol))
        if spec.ports and not ports:
            continue
        pod_spec = pod.spec
        hostname = ""
        if pod_spec is not None and pod_spec.hostname and pod_spec.subdomain == name:
            hostname = pod_spec.hostname
        found.append(
            Endpoint(
                ip=status.podIP,
                ready=publish or pod_is_ready(pod),
                pod=pname,
                uid=uid,
                ports=tuple(ports),
                hostname=hostname,
                node_name=node_name,
            )
        )
    found.sort(key=lambda e: (tuple(int(x) for x in e.ip.split(".")) if "." in e.ip else (), e.ip))
    return ServiceEndpoints(namespace=namespace, name=name, endpoints=tuple(found))


__all__ = [
    "Endpoint",
    "EndpointPort",
    "ServiceEndpoints",
    "endpoints_for",
    "find_port",
    "pod_is_ready",
    "selects",
]
