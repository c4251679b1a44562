"""The API server's defaulting and validation of a ``v1`` Service.

A Service manifest must mean here what it means on a cluster: ``SetDefaults_Service``
fills in the type, the session affinity, each port's protocol and ``targetPort`` (the
port itself when absent), and ``ValidateService`` refuses what an API server refuses, in
its words and with its field paths (``spec.ports[0].targetPort``, ``spec.clusterIPs[0]``).
What depends on the node's state (a ClusterIP or nodePort already taken, the ranges the
node was started with) is checked where the node allocates them,
:mod:`asynckubelet.workloads.services`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lightkube.models.core_v1 import Service, ServicePort, ServiceSpec

from asynckubelet.errors import FieldError
from asynckubelet.manifests.messages import (
    duplicate,
    forbidden,
    ignored,
    invalid,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_ip_address,
    is_qualified_name,
    is_valid_label_value,
    is_valid_port_name,
    is_valid_port_num,
    not_supported,
    required,
)

__all__ = [
    "HEADLESS",
    "SERVICE_TYPES",
    "default_service",
    "is_headless",
    "unhonoured_service_fields",
    "validate_service",
    "validate_service_name",
]

SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
HEADLESS = "None"
"""``spec.clusterIP`` of a headless Service: no virtual IP, DNS names the pods."""
_PROTOCOLS = ("SCTP", "TCP", "UDP")
_AFFINITIES = ("ClientIP", "None")
_TRAFFIC_POLICIES = ("Cluster", "Local")
_IP_FAMILY_POLICIES = ("PreferDualStack", "RequireDualStack", "SingleStack")


def default_service(doc: dict[str, Any]) -> None:
    """``SetDefaults_Service`` on a strict-checked Service document, in place."""
    meta = doc.setdefault("metadata", {})
    if not meta.get("namespace"):
        meta["namespace"] = "default"
    spec = doc.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    kind = spec["type"]
    for port in spec.get("ports") or []:
        if not isinstance(port, dict):
            continue
        port.setdefault("protocol", "TCP")
        target = port.get("targetPort")
        if target in (None, 0, ""):
            port["targetPort"] = port.get("port")
    if kind in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if kind != "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")
    cluster_ip = spec.get("clusterIP")
    if cluster_ip and not spec.get("clusterIPs"):
        spec["clusterIPs"] = [cluster_ip]
    elif spec.get("clusterIPs") and not cluster_ip:
        spec["clusterIP"] = spec["clusterIPs"][0]


_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
    "an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)


def validate_service_name(name: str | None) -> list[FieldError]:
    """``NameIsDNS1035Label``: a Service's name is a DNS label that starts with a letter
    (it becomes ``<name>.<namespace>.svc``)."""
    if not name:
        return [required("metadata.name", "name or generateName is required")]
    errs = []
    if len(name) > 63:
        errs.append(invalid("metadata.name", name, "must be no more than 63 characters"))
    if not _DNS1035.fullmatch(name):
        errs.append(invalid("metadata.name", name, _DNS1035_MSG))
    return errs


def is_headless(service: Service) -> bool:
    return service.spec is not None and service.spec.clusterIP == HEADLESS


def validate_service(service: Service) -> list[FieldError]:
    """``ValidateService`` without the object metadata (checked by the caller): type,
    ports, selector, cluster IPs, and what each type allows."""
    errs: list[FieldError] = []
    spec = service.spec
    if spec is None:
        return [required("spec")]
    kind = spec.type or "ClusterIP"
    if kind not in SERVICE_TYPES:
        errs.append(not_supported("spec.type", kind, SERVICE_TYPES))
        return errs
    if kind == "ExternalName":
        _validate_external_name(spec.externalName, errs)
    elif spec.externalName:
        errs.append(
            forbidden("spec.externalName", "may not be set when `type` is not 'ExternalName'")
        )
    _validate_cluster_ips(spec.clusterIP, list(spec.clusterIPs or []), kind, errs)
    ports = list(spec.ports or [])
    if not ports and spec.clusterIP != HEADLESS and kind != "ExternalName":
        errs.append(required("spec.ports"))
    _validate_ports(ports, kind, errs)
    _validate_selector(spec.selector, errs)
    _validate_policies(spec, kind, errs)
    return errs


def _validate_ports(ports: list[ServicePort], kind: str, errs: list[FieldError]) -> None:
    names: set[str] = set()
    node_ports: set[tuple[int, str]] = set()
    seen_ports: set[tuple[int, str]] = set()
    for i, port in enumerate(ports):
        path = f"spec.ports[{i}]"
        if port.name:
            msgs = is_dns1123_label(port.name)
            errs.extend(invalid(f"{path}.name", port.name, m) for m in msgs)
            if not msgs and port.name in names:
                errs.append(duplicate(f"{path}.name", port.name))
            names.add(port.name)
        elif len(ports) > 1:
            errs.append(required(f"{path}.name"))
        errs.extend(invalid(f"{path}.port", port.port, m) for m in is_valid_port_num(port.port))
        protocol = port.protocol or ""
        if not protocol:
            errs.append(required(f"{path}.protocol"))
        elif protocol not in _PROTOCOLS:
            errs.append(not_supported(f"{path}.protocol", protocol, _PROTOCOLS))
        elif (port.port, protocol) in seen_ports:
            errs.append(duplicate(path, f"{port.port}/{protocol}"))
        seen_ports.add((port.port, protocol))
        _validate_target_port(port.targetPort, f"{path}.targetPort", errs)
        if port.nodePort:
            _validate_node_port(port.nodePort, protocol, kind, f"{path}.nodePort", node_ports, errs)


def _validate_node_port(
    value: int,
    protocol: str,
    kind: str,
    path: str,
    seen: set[tuple[int, str]],
    errs: list[FieldError],
) -> None:
    if kind in ("ClusterIP", "ExternalName"):
        errs.append(forbidden(path, f"may not be used when `type` is '{kind}'"))
        return
    errs.extend(invalid(path, value, m) for m in is_valid_port_num(value))
    if (value, protocol) in seen:
        errs.append(duplicate(path, value))
    seen.add((value, protocol))


def _validate_policies(spec: ServiceSpec, kind: str, errs: list[FieldError]) -> None:
    if spec.sessionAffinity and spec.sessionAffinity not in _AFFINITIES:
        errs.append(not_supported("spec.sessionAffinity", spec.sessionAffinity, _AFFINITIES))
    for path, value in (
        ("spec.externalTrafficPolicy", spec.externalTrafficPolicy),
        ("spec.internalTrafficPolicy", spec.internalTrafficPolicy),
    ):
        if value and value not in _TRAFFIC_POLICIES:
            errs.append(not_supported(path, value, _TRAFFIC_POLICIES))
    if spec.externalTrafficPolicy and kind not in ("NodePort", "LoadBalancer"):
        errs.append(
            invalid(
                "spec.externalTrafficPolicy",
                spec.externalTrafficPolicy,
                "may only be set for externally-accessible services",
            )
        )
    if spec.ipFamilyPolicy and spec.ipFamilyPolicy not in _IP_FAMILY_POLICIES:
        errs.append(not_supported("spec.ipFamilyPolicy", spec.ipFamilyPolicy, _IP_FAMILY_POLICIES))
    for i, family in enumerate(spec.ipFamilies or []):
        if family not in ("IPv4", "IPv6"):
            errs.append(not_supported(f"spec.ipFamilies[{i}]", family, ("IPv4", "IPv6")))
    for i, ip in enumerate(spec.externalIPs or []):
        if not is_ip_address(ip):
            errs.append(invalid(f"spec.externalIPs[{i}]", ip, "must be a valid IP address"))


def _validate_external_name(name: str | None, errs: list[FieldError]) -> None:
    if not name:
        errs.append(required("spec.externalName"))
        return
    errs.extend(invalid("spec.externalName", name, m) for m in is_dns1123_subdomain(name))


def _validate_cluster_ips(
    ip: str | None, ips: list[str], kind: str, errs: list[FieldError]
) -> None:
    if kind == "ExternalName":
        if ip:
            errs.append(forbidden("spec.clusterIP", "may not be set for ExternalName services"))
        return
    if ip and ips and ips[0] != ip:
        errs.append(invalid("spec.clusterIPs", ips, "first value must match `clusterIP`"))
        return
    for i, value in enumerate(ips or ([ip] if ip else [])):
        path = f"spec.clusterIPs[{i}]"
        if value == HEADLESS:
            if i > 0 or len(ips) > 1:
                errs.append(invalid(path, value, "must be a valid IP address"))
            elif kind in ("NodePort", "LoadBalancer"):
                errs.append(invalid(path, value, f"may not be set to 'None' for {kind} services"))
            continue
        if not is_ip_address(value):
            errs.append(invalid(path, value, "must be empty, 'None', or a valid IP address"))
    if len(ips) > 2:
        errs.append(invalid("spec.clusterIPs", ips, "may only hold up to 2 values"))


def _validate_target_port(value: int | str | None, path: str, errs: list[FieldError]) -> None:
    if value is None or value == "" or value == 0:
        errs.append(required(path))
    elif isinstance(value, int):
        errs.extend(invalid(path, value, m) for m in is_valid_port_num(value))
    else:
        errs.extend(invalid(path, value, m) for m in is_valid_port_name(value))


def _validate_selector(selector: Mapping[str, Any] | None, errs: list[FieldError]) -> None:
    for key, value in (selector or {}).items():
        errs.extend(invalid("spec.selector", key, m) for m in is_qualified_name(key))
        if not isinstance(value, str):
            errs.append(invalid(f"spec.selector[{key}]", value, "must be a string"))
        else:
            errs.extend(invalid("spec.selector", value, m) for m in is_valid_label_value(value))


def unhonoured_service_fields(service: Service) -> list[FieldError]:
    """Fields accepted as the API server accepts them, that this node does not act on."""
    spec = service.spec
    if spec is None:
        return []
    found: list[FieldError] = []
    if spec.sessionAffinity == "ClientIP":
        found.append(
            ignored("spec.sessionAffinity", "each connection picks a ready endpoint at random")
        )
    if spec.externalIPs:
        found.append(
            ignored("spec.externalIPs", "the node publishes Services on its own addresses")
        )
    if spec.loadBalancerSourceRanges:
        found.append(
            ignored("spec.loadBalancerSourceRanges", "every source reaches the node's addresses")
        )
    if spec.externalTrafficPolicy == "Local" or spec.internalTrafficPolicy == "Local":
        found.append(
            ignored("spec.externalTrafficPolicy", "one node: every endpoint is local to it")
        )
    if "IPv6" in (spec.ipFamilies or []):
        found.append(ignored("spec.ipFamilies", "ClusterIPs are IPv4 on this node"))
    return found
