"""Service allocation: ClusterIPs and node ports, as the API server's registry gives them,
and the node's ports no Service may take.

A Service applied to the node is admitted as the API server admits it (:func:`allocate`):
a ClusterIP from the node's own range (``--service-cluster-ip-range``, ``10.96.0.0/16`` by
default) unless it names one, a nodePort from ``--service-node-port-range``
(``30000-32767``) for NodePort and LoadBalancer Services, with the API server's refusals
(``provided port is already allocated``, an address out of range, ``spec.clusterIPs[0]``
changed). Allocations live in the stored Services themselves, so a restarted node finds
them where the objects are kept.

A nodePort, and a LoadBalancer's ``port``, are DNATed on every local address of the node,
loopback included: a port the node itself serves would answer from a pod. So, unlike on
a cluster, where the API server knows nothing of the nodes' sockets, such a port is
refused with the holder named (:class:`PortHolder`): the node's own servers (``serve
--listen``, the cluster DNS; :class:`ReservedPort`), a pod's hostPort, a process on the
host listening on it (:mod:`asynckubelet.node.listeners`), or a Service of another node
on the same host, which DNATs it too (:mod:`asynckubelet.node.neighbours`). A
LoadBalancer's ``port`` is also held to the Pod Security level of its namespace: under
``baseline`` and ``restricted``, which forbid a pod any hostPort, a LoadBalancer is
published only on a port of the node port range, the ports the node hands out to
Services anyway; only ``privileged`` publishes it anywhere else.

A port a Service kept from its stored version is not checked against the holders again
at apply: the Service controller does it at every sync (:func:`unpublished`), and a port
taken since (a process started, a node restarted) is left unpublished with a Warning event
rather than refusing the apply of a Service that did not change.
"""

from __future__ import annotations

import copy
import ipaddress
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lightkube.models.core_v1 import Pod, Service

from asynckubelet.errors import FieldError
from asynckubelet.manifests.messages import forbidden, invalid
from asynckubelet.manifests.security import Level
from asynckubelet.manifests.service import HEADLESS
from asynckubelet.node.admission import HostPort, host_ports
from asynckubelet.node.listeners import Listener
from asynckubelet.runtime import containers as ctr

__all__ = [
    "DEFAULT_CLUSTER_IP_RANGE",
    "DEFAULT_NODE_PORT_RANGE",
    "PORT_FORBIDDEN",
    "PORT_IN_USE",
    "LevelInForce",
    "PortHolder",
    "ReservedPort",
    "ServiceRanges",
    "Unpublished",
    "allocate",
    "claimed_ports",
    "key_of",
    "port_holders",
    "spec_of",
    "unpublished",
]

DEFAULT_CLUSTER_IP_RANGE = "10.96.0.0/16"
DEFAULT_NODE_PORT_RANGE = "30000-32767"
PORT_IN_USE = "PortInUse"
"""The reason of the event saying that a stored Service's port is held by someone else."""
PORT_FORBIDDEN = "PortForbidden"
"""The reason of the event saying that the level in force forbids a LoadBalancer's port."""
_PROTOCOLS = ("TCP", "UDP", "SCTP")
_RANDOM_TRIES = 64
Key = tuple[str, str]
PortKey = tuple[str, int]
"""``(protocol, port)``."""


# -- configuration ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ServiceRanges:
    """The node's ClusterIP range and nodePort range, as the API server's flags give them."""

    cluster_ip_range: ipaddress.IPv4Network = field(
        default_factory=lambda: ipaddress.IPv4Network(DEFAULT_CLUSTER_IP_RANGE)
    )
    """Where Services' ClusterIPs come from (``--service-cluster-ip-range``)."""
    node_ports: tuple[int, int] = (30000, 32767)
    """The first and last nodePort (``--service-node-port-range``), both included."""

    @classmethod
    def parse(
        cls,
        *,
        cluster_ip_range: str = DEFAULT_CLUSTER_IP_RANGE,
        node_port_range: str = DEFAULT_NODE_PORT_RANGE,
    ) -> ServiceRanges:
        """Both ranges from their flag text; ValueError names the flag and what is wrong."""
        try:
            network = ipaddress.ip_network(cluster_ip_range, strict=True)
        except ValueError as e:
            raise ValueError(f"--service-cluster-ip-range {cluster_ip_range!r}: {e}") from None
        if not isinstance(network, ipaddress.IPv4Network):
            raise ValueError(
                f"--service-cluster-ip-range {cluster_ip_range!r}: must be an IPv4 network"
            )
        if network.num_addresses < 8:
            raise ValueError(f"--service-cluster-ip-range {cluster_ip_range!r}: too small")
        low, sep, high = node_port_range.partition("-")
        try:
            first, last = int(low), int(high if sep else low)
        except ValueError:
            raise ValueError(
                f"--service-node-port-range {node_port_range!r}: must be FIRST-LAST, "
                "e.g. 30000-32767"
            ) from None
        if not 1 <= first <= last <= 65535:
            raise ValueError(
                f"--service-node-port-range {node_port_range!r}: must be ports 1-65535, "
                "first not above last"
            )
        return cls(cluster_ip_range=network, node_ports=(first, last))

    @property
    def node_port_text(self) -> str:
        return f"{self.node_ports[0]}-{self.node_ports[1]}"

    def usable_ips(self) -> tuple[int, int]:
        """First and last allocatable address (the network and broadcast are not)."""
        net = self.cluster_ip_range
        return int(net.network_address) + 1, int(net.broadcast_address) - 1

    def in_node_ports(self, port: int) -> bool:
        return self.node_ports[0] <= port <= self.node_ports[1]


@dataclass(frozen=True)
class LevelInForce:
    """The Pod Security level in force for a namespace, and whether the namespace's own
    ``pod-security.kubernetes.io/enforce`` label set it (else the node's level did)."""

    level: Level
    labelled: bool = False


PRIVILEGED = LevelInForce("privileged")


@dataclass(frozen=True)
class ReservedPort:
    """A port one of the node's own servers uses (``serve --listen``, the cluster DNS)."""

    protocol: str
    port: int
    server: str
    """Who, as the refusal names it: ``serve --listen``."""


@dataclass(frozen=True)
class PortHolder:
    """Who holds a port of the node outside the Services."""

    kind: str
    """``node`` (a server of the node's own), ``hostPort``, ``host`` (a process) or
    ``neighbour`` (another node of the host)."""
    name: str
    """The server, the pod (``namespace/name``), the address listened on or the node."""

    def message(self) -> str:
        if self.kind == "neighbour":
            return f"provided port is already allocated by a Service of node {self.name}"
        if self.kind == "node":
            return f"port is in use on the node ({self.name})"
        if self.kind == "hostPort":
            return f"port is in use on the node by hostPort of {self.name}"
        return f"port is in use on the node by a host process listening on {self.name}"


def port_holders(
    *,
    reserved: Iterable[ReservedPort] = (),
    pods: Iterable[Pod] = (),
    engine_ports: Iterable[HostPort] = (),
    listeners: Iterable[Listener] = (),
    neighbours: Mapping[PortKey, str] | None = None,
) -> dict[PortKey, PortHolder]:
    """Who holds each port, the node's own servers named first, then pods' hostPorts
    (whatever their hostIP: a Service takes every address), then the host's sockets, then
    the ports other nodes of the host publish (``neighbours``: the node of each)."""
    holders: dict[PortKey, PortHolder] = {}
    for own in reserved:
        holders.setdefault((own.protocol, own.port), PortHolder("node", own.server))
    for pod in pods:
        if pod.spec is None:
            continue
        name, namespace, _ = ctr.pod_identity(pod)
        for protocol, _ip, port in host_ports(pod):
            holders.setdefault((protocol, port), PortHolder("hostPort", f"pod {namespace}/{name}"))
    for protocol, _ip, port in engine_ports:
        holders.setdefault(
            (protocol, port), PortHolder("hostPort", "a pod of another agent on the engine")
        )
    for listener in listeners:
        holders.setdefault((listener.protocol, listener.port), PortHolder("host", listener.address))
    for key, node in (neighbours or {}).items():
        holders.setdefault(key, PortHolder("neighbour", node))
    return holders


# -- allocation (the API server's registry) ---------------------------------------------------


def spec_of(service: Service) -> Any:
    if service.spec is None:
        raise ValueError("a Service reaches allocation only once validated: it has a spec")
    return service.spec


def key_of(service: Service) -> Key:
    meta = service.metadata
    if meta is None or not meta.name:
        raise ValueError("a Service reaches allocation only once validated: it has a name")
    return meta.namespace or "default", meta.name


@dataclass
class _Taken:
    ips: dict[str, Key]
    node_ports: dict[int, Key]
    """Whatever the protocol, as the API server's nodePort allocator counts them."""
    published: dict[PortKey, Key]
    """Every port DNATed on the node's addresses: nodePorts and LoadBalancer ports."""


def _taken(stored: Iterable[Service]) -> _Taken:
    taken = _Taken({}, {}, {})
    for svc in stored:
        _claim(taken, svc)
    return taken


def _claim(taken: _Taken, svc: Service) -> None:
    key = key_of(svc)
    spec = spec_of(svc)
    if spec.clusterIP and spec.clusterIP != HEADLESS:
        taken.ips[spec.clusterIP] = key
    for port in spec.ports or []:
        protocol = port.protocol or "TCP"
        if port.nodePort:
            taken.node_ports[port.nodePort] = key
            taken.published[(protocol, port.nodePort)] = key
        if spec.type == "LoadBalancer":
            taken.published[(protocol, port.port)] = key


def _release(taken: _Taken, key: Key) -> None:
    taken.ips = {k: v for k, v in taken.ips.items() if v != key}
    taken.node_ports = {k: v for k, v in taken.node_ports.items() if v != key}
    taken.published = {k: v for k, v in taken.published.items() if v != key}


def claimed_ports(stored: Iterable[Service]) -> dict[PortKey, str]:
    """Every port the Services publish on the node, with the Service that holds it
    (``Service default/web``): what a pod's hostPort may not take."""
    return {k: f"Service {ns}/{name}" for k, (ns, name) in _taken(stored).published.items()}


@dataclass(frozen=True)
class _Checks:
    ranges: ServiceRanges
    holders: Mapping[PortKey, PortHolder]
    level: LevelInForce


def allocate(
    services: Sequence[Service],
    *,
    stored: Mapping[Key, Service],
    ranges: ServiceRanges,
    rng: random.Random | None = None,
    holders: Mapping[PortKey, PortHolder] | None = None,
    levels: Callable[[str], LevelInForce] | None = None,
) -> tuple[list[Service], list[tuple[Key, FieldError]]]:
    """The Services as they will be stored (ClusterIP and nodePorts filled in, those of
    the stored Service kept when the manifest leaves them out, as ``kubectl apply`` keeps
    them), and every refusal, keyed by the Service it is about.

    ``holders`` hold ports outside the Services (:func:`port_holders`); ``levels`` gives
    the Pod Security level in force for a namespace (None: ``privileged`` everywhere)."""
    pick = rng or random.SystemRandom()
    taken = _taken(stored.values())
    done: list[Service] = []
    problems: list[tuple[Key, FieldError]] = []
    for original in services:
        svc = copy.deepcopy(original)
        key = key_of(svc)
        old = stored.get(key)
        _release(taken, key)
        checks = _Checks(ranges, holders or {}, levels(key[0]) if levels else PRIVILEGED)
        errs = _allocate_ip(svc, old, taken, ranges, pick)
        errs += _allocate_node_ports(svc, old, taken, checks, pick)
        if errs:
            problems += [(key, e) for e in errs]
            if old is not None:
                _claim(taken, old)
            continue
        _claim(taken, svc)
        done.append(svc)
    return done, problems


def _allocate_ip(
    svc: Service, old: Service | None, taken: _Taken, ranges: ServiceRanges, pick: random.Random
) -> list[FieldError]:
    spec = spec_of(svc)
    if spec.type == "ExternalName":
        spec.clusterIP, spec.clusterIPs = None, None
        return []
    spec.ipFamilies = spec.ipFamilies or ["IPv4"]
    spec.ipFamilyPolicy = spec.ipFamilyPolicy or "SingleStack"
    old_ip = (
        spec_of(old).clusterIP if old is not None and spec_of(old).type != "ExternalName" else None
    )
    wanted = spec.clusterIP
    if not wanted and old_ip:
        wanted = old_ip
    elif wanted and old_ip and wanted != old_ip:
        return [invalid("spec.clusterIPs[0]", [wanted], "may not change once set")]
    if wanted == HEADLESS:
        spec.clusterIP, spec.clusterIPs = HEADLESS, [HEADLESS]
        return []
    if wanted:
        if wanted != old_ip:
            address = ipaddress.ip_address(wanted)
            if address not in ranges.cluster_ip_range or int(address) not in range(
                ranges.usable_ips()[0], ranges.usable_ips()[1] + 1
            ):
                return [
                    invalid(
                        "spec.clusterIPs",
                        [wanted],
                        f"failed to allocate IP {wanted}: the provided IP ({wanted}) is not "
                        f"in the valid range. The range of valid IPs is "
                        f"{ranges.cluster_ip_range}",
                    )
                ]
            if wanted in taken.ips:
                return [
                    invalid(
                        "spec.clusterIPs",
                        [wanted],
                        f"failed to allocate IP {wanted}: provided IP is already allocated",
                    )
                ]
        spec.clusterIP, spec.clusterIPs = wanted, [wanted]
        return []
    first, last = ranges.usable_ips()
    if last - first + 1 <= len(taken.ips):
        return [
            invalid(
                "spec.clusterIPs",
                [],
                "failed to allocate a serviceIP: range is full",
            )
        ]
    while True:
        candidate = str(ipaddress.IPv4Address(pick.randint(first, last)))
        if candidate not in taken.ips:
            break
    spec.clusterIP, spec.clusterIPs = candidate, [candidate]
    return []


def _published_ports(svc: Service | None) -> set[PortKey]:
    """``(protocol, port)`` of a LoadBalancer's ports (none for another type)."""
    if svc is None or spec_of(svc).type != "LoadBalancer":
        return set()
    return {(p.protocol or "TCP", p.port) for p in spec_of(svc).ports or []}


def _allocate_node_ports(
    svc: Service, old: Service | None, taken: _Taken, checks: _Checks, pick: random.Random
) -> list[FieldError]:
    spec = spec_of(svc)
    if spec.type not in ("NodePort", "LoadBalancer"):
        return []
    ports = list(spec.ports or [])
    previous: dict[PortKey, int] = {}
    if old is not None:
        for port in spec_of(old).ports or []:
            if port.nodePort:
                previous[(port.protocol or "TCP", port.port)] = port.nodePort
    kept_node_ports = set(previous.values())
    kept_published = _published_ports(old)
    own = _published_ports(svc)
    errs: list[FieldError] = []
    mine: set[int] = set()
    for i, port in enumerate(ports):
        protocol = port.protocol or "TCP"
        if spec.type == "LoadBalancer":
            errs += _given_port(
                port.port, protocol, i, taken, checks, kept=(protocol, port.port) in kept_published
            )
        if not port.nodePort:
            port.nodePort = previous.get((protocol, port.port))
        if port.nodePort:
            path = f"spec.ports[{i}].nodePort"
            value = port.nodePort
            found = _given_node_port(value, protocol, path, taken, checks.ranges)
            holder = checks.holders.get((protocol, value))
            if not found and value != port.port and (protocol, value) in own:
                found = [invalid(path, value, "provided port is already allocated")]
            if not found and holder is not None and value not in kept_node_ports:
                found = [invalid(path, value, holder.message())]
            errs += found
            mine.add(value)
    avoid = {p for _, p in own} | {p for _, p in checks.holders}
    errs.extend(_assign_node_ports(ports, taken, checks.ranges, mine, avoid, pick))
    return errs


def _given_port(
    value: int, protocol: str, i: int, taken: _Taken, checks: _Checks, *, kept: bool
) -> list[FieldError]:
    """A LoadBalancer's ``port``, published on the node's addresses."""
    path = f"spec.ports[{i}].port"
    if checks.level.level != "privileged" and not checks.ranges.in_node_ports(value):
        return [forbidden(path, level_refusal(value, checks.level, checks.ranges))]
    if (protocol, value) in taken.published:
        return [invalid(path, value, "provided port is already allocated")]
    holder = checks.holders.get((protocol, value))
    if holder is not None and not kept:
        return [invalid(path, value, holder.message())]
    return []


def level_refusal(port: int, level: LevelInForce, ranges: ServiceRanges) -> str:
    """Why a LoadBalancer may not be published on ``port`` under ``level``, and what to
    do instead."""
    lift = (
        "make its namespace's pod-security.kubernetes.io/enforce label privileged"
        if level.labelled
        else "run the node at --pod-security privileged"
    )
    return (
        f"port {port} is outside the node port range {ranges.node_port_text}: under the "
        f'"{level.level}:latest" Pod Security level, which forbids a pod any hostPort, a '
        "LoadBalancer is published on the node only on a port of --service-node-port-range; "
        f"use a port in {ranges.node_port_text} or a NodePort Service, or {lift}"
    )


def _given_node_port(
    value: int, protocol: str, path: str, taken: _Taken, ranges: ServiceRanges
) -> list[FieldError]:
    if not ranges.in_node_ports(value):
        return [
            invalid(
                path,
                value,
                "provided port is not in the valid range. The range of valid ports "
                f"is {ranges.node_port_text}",
            )
        ]
    if value in taken.node_ports or (protocol, value) in taken.published:
        return [invalid(path, value, "provided port is already allocated")]
    return []


def _free(candidate: int, taken: _Taken, mine: set[int], avoid: set[int]) -> bool:
    return (
        candidate not in taken.node_ports
        and candidate not in mine
        and candidate not in avoid
        and not any((p, candidate) in taken.published for p in _PROTOCOLS)
    )


def _assign_node_ports(
    ports: list[Any],
    taken: _Taken,
    ranges: ServiceRanges,
    mine: set[int],
    avoid: set[int],
    pick: random.Random,
) -> list[FieldError]:
    """A random free nodePort for each port without one (``mine`` holds those taken by
    this Service already, and grows; ``avoid`` are ports held outside the Services or
    published by this one): a few random picks, then the first free one from a random
    start."""
    first, last = ranges.node_ports
    for port in ports:
        if port.nodePort:
            continue
        chosen = None
        for _ in range(_RANDOM_TRIES):
            candidate = pick.randint(first, last)
            if _free(candidate, taken, mine, avoid):
                chosen = candidate
                break
        if chosen is None:
            start = pick.randint(first, last)
            size = last - first + 1
            chosen = next(
                (
                    c
                    for c in (first + (start - first + n) % size for n in range(size))
                    if _free(c, taken, mine, avoid)
                ),
                None,
            )
        if chosen is None:
            return [invalid("spec.ports", [], "failed to allocate a nodePort: range is full")]
        port.nodePort = chosen
        mine.add(chosen)
    return []


# -- what a sync publishes --------------------------------------------------------------------


@dataclass(frozen=True)
class Unpublished:
    """A port of a stored Service that the node does not publish, and why."""

    service: Key
    field: str
    """``port`` (a LoadBalancer's) or ``nodePort``."""
    protocol: str
    port: int
    reason: str
    """:data:`PORT_IN_USE` or :data:`PORT_FORBIDDEN`."""
    why: str

    def message(self) -> str:
        what = "Service port" if self.field == "port" else "nodePort"
        return f"{what} {self.port}/{self.protocol} is not published: {self.why}"


def unpublished(
    services: Iterable[Service],
    *,
    holders: Mapping[PortKey, PortHolder],
    ranges: ServiceRanges,
    levels: Callable[[str], LevelInForce] | None = None,
) -> list[Unpublished]:
    """The ports of stored Services that another holder took since they were admitted, or
    that the level in force for their namespace now forbids: those the node leaves out of
    its rules."""
    found: list[Unpublished] = []
    for svc in services:
        spec = spec_of(svc)
        if spec.type not in ("NodePort", "LoadBalancer"):
            continue
        key = key_of(svc)
        level = levels(key[0]) if levels else PRIVILEGED
        for port in spec.ports or []:
            protocol = port.protocol or "TCP"
            wanted = [("nodePort", port.nodePort)] if port.nodePort else []
            if spec.type == "LoadBalancer":
                wanted.append(("port", port.port))
            for what, number in wanted:
                holder = holders.get((protocol, number))
                forbids = level.level != "privileged" and not ranges.in_node_ports(number)
                if what == "port" and forbids:
                    why = level_refusal(number, level, ranges)
                    found.append(Unpublished(key, what, protocol, number, PORT_FORBIDDEN, why))
                elif holder is not None:
                    found.append(
                        Unpublished(key, what, protocol, number, PORT_IN_USE, holder.message())
                    )
    return found
