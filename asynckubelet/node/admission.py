"""Node admission: whether this node takes a pod, decided as the kubelet decides it.

A kubelet refuses a pod it cannot run rather than start it and fail later or, worse, start
it over something already there: the predicate admit handler
(``pkg/kubelet/lifecycle/predicate.go``) runs the scheduler's ``AdmissionCheck``
(``NodeResourcesFit``, ``NodeAffinity``, ``NodeName``, ``NodePorts``) and the
``NoExecute`` taints over the node and the pods it already runs, and the first failure
becomes the pod's status: phase ``Failed``, a reason such as ``OutOfcpu`` or ``NodePorts``
and a message ``Pod was rejected: ...`` (:func:`asynckubelet.node.status.rejected_status`).
:func:`admit` is that decision as a pure function of data, worded as the kubelet words it.

Two things differ from a kubelet in a cluster, because here no scheduler chose the node:

* A host port already bound on the host by a process that is not a pod is refused
  (``HostPortConflict``), found by an injected probe that binds the address and lets go at
  once (:func:`host_port_in_use`). A kubelet's NodePorts check only sees other pods, and a
  hostPort forwarded by firewall rules would otherwise take a listening port's traffic
  without a word.
* Host ports held on the Docker engine by running containers of pods this node does not
  own (``asynckubelet run``'s, another node's) are taken, as those of its own pods are
  (``NodePorts``): they are forwarded by firewall rules, which no probe of the host's
  sockets sees (:mod:`asynckubelet.node.engine_ports` reads them).
* A request for an extended resource the node does not advertise is refused with
  ``OutOf<name>``, as the scheduler would leave such a pod unplaced. In cluster mode
  (``ignore_unadvertised_extended``) the kubelet's ``removeMissingExtendedResources``
  applies instead: the scheduler placed the pod, and unknown names are cluster-level or
  DRA-backed resources the node does not count.

Node labels are optional: a node that does not know its labels (the standalone default,
where manifests' ``nodeSelector`` and ``affinity`` only get a "not honoured" warning) does
not check them; a node given labels checks them as the kubelet does.
"""

from __future__ import annotations

import errno
import math
import os
import shutil
import socket
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from lightkube.models.core_v1 import (
    Container,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodSpec,
    Toleration,
)

from asynckubelet.manifests.messages import is_qualified_name
from asynckubelet.manifests.quantity import QuantityError, parse_quantity
from asynckubelet.node.podfeatures import unsupported_feature

__all__ = [
    "DEFAULT_MAX_PODS",
    "HOST_PORT_CONFLICT",
    "HeldPorts",
    "HostPort",
    "HostPortProbe",
    "NodeAdmitter",
    "NodeInfo",
    "NodeResources",
    "PublishedPorts",
    "Rejection",
    "Taint",
    "admit",
    "admit_together",
    "host_port_in_use",
    "host_resources",
    "parse_labels",
    "parse_node_resources",
    "parse_taints",
    "pod_requests",
]

DEFAULT_MAX_PODS = 110
"""The kubelet's ``--max-pods`` default."""
NODE_OS = "linux"
"""The node's ``kubernetes.io/os``: Docker runs Linux containers."""
OS_LABEL = "kubernetes.io/os"

POD_OS_SELECTOR_NODE_LABEL_DOES_NOT_MATCH = "PodOSSelectorNodeLabelDoesNotMatch"
POD_OS_NOT_SUPPORTED = "PodOSNotSupported"
SUPPLEMENTAL_GROUPS_POLICY_NOT_SUPPORTED = "SupplementalGroupsPolicyNotSupported"
NODE_AFFINITY = "NodeAffinity"
NODE_NAME = "NodeName"
NODE_PORTS = "NodePorts"
TAINT_TOLERATION = "TaintToleration"
HOST_PORT_CONFLICT = "HostPortConflict"
"""This node's reason for a host port a process that is not a pod holds (the kubelet's
own name for a host port conflict before the scheduler predicates took it over)."""
INSUFFICIENT_RESOURCE_PREFIX = "OutOf"

_PREDICATE_REASONS = {
    NODE_AFFINITY: "node(s) didn't match Pod's node affinity/selector",
    NODE_NAME: "node(s) didn't match the requested node name",
    NODE_PORTS: "node(s) didn't have free ports for the requested pod ports",
    TAINT_TOLERATION: "node(s) had taints that the pod didn't tolerate",
}
_CPU, _MEMORY, _EPHEMERAL, _PODS = "cpu", "memory", "ephemeral-storage", "pods"
_NATIVE = frozenset({_CPU, _MEMORY, _EPHEMERAL, _PODS, "storage"})
_POD_LEVEL = (_CPU, _MEMORY)
_WILDCARD_IP = "0.0.0.0"  # noqa: S104  (a hostIP to compare with; binds nothing)
_NO_EXECUTE = "NoExecute"
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

HostPortProbe = Callable[[str, str, int], bool]
"""``(protocol, host IP, port)`` -> whether something on the host holds it."""
HostPort = tuple[str, str, int]
"""``(protocol, host IP, port)``."""
HeldPorts = Callable[[], Iterable[HostPort]]
"""The host ports that pods the node does not run hold, as last known."""
PublishedPorts = Callable[[], Mapping[tuple[str, int], str]]
"""``(protocol, port)`` -> the Service that publishes it on the node (``Service ns/name``)."""


@dataclass(frozen=True)
class Rejection:
    """Why the node refuses a pod: the kubelet's ``PodAdmitResult`` reason and message."""

    reason: str
    message: str
    """Without the ``Pod was rejected: `` that the pod's status puts before it."""


@dataclass(frozen=True)
class NodeResources:
    """What the node offers pods (its allocatable), in the units the kubelet counts:
    millicores, bytes, a number of pods, and whole units of every other resource."""

    cpu_millis: int
    memory: int
    pods: int = DEFAULT_MAX_PODS
    ephemeral_storage: int = 0
    scalars: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    """Extended resources (``example.com/dongle``) and hugepages (``hugepages-2Mi``)."""

    def amount(self, name: str) -> int:
        if name == _CPU:
            return self.cpu_millis
        if name == _MEMORY:
            return self.memory
        if name == _EPHEMERAL:
            return self.ephemeral_storage
        if name == _PODS:
            return self.pods
        return self.scalars.get(name, 0)

    def as_quantities(self) -> dict[str, str]:
        """The Node ``status.allocatable`` form: ``{"cpu": "4", "memory": "8Gi", ...}``."""
        out = {
            _CPU: f"{self.cpu_millis}m" if self.cpu_millis % 1000 else str(self.cpu_millis // 1000),
            _MEMORY: str(self.memory),
            _PODS: str(self.pods),
            _EPHEMERAL: str(self.ephemeral_storage),
        }
        out.update({name: str(value) for name, value in sorted(self.scalars.items())})
        return out


@dataclass(frozen=True)
class Taint:
    """A node taint (``key=value:effect``)."""

    key: str
    effect: str
    value: str = ""


@dataclass(frozen=True)
class NodeInfo:
    """The node as admission sees it."""

    name: str
    allocatable: NodeResources
    labels: Mapping[str, str] | None = None
    """None: the node does not know its labels, so selectors and affinity are not checked."""
    taints: tuple[Taint, ...] = ()
    supplemental_groups_policy: bool = False
    """The runtime can apply ``supplementalGroupsPolicy: Strict`` (Docker cannot)."""


def admit(
    pod: Pod,
    *,
    node: NodeInfo,
    admitted: Iterable[Pod] = (),
    held_ports: Iterable[HostPort] = (),
    published: Mapping[tuple[str, int], str] | None = None,
    host_port_in_use: HostPortProbe | None = None,
    static: bool = True,
    ignore_unadvertised_extended: bool = False,
) -> Rejection | None:
    """None when ``node`` takes ``pod``, else the first reason it does not.

    ``admitted`` are the active pods the node already runs; ``held_ports`` are host ports
    that pods it does not run hold (taken as theirs are); ``published`` are the ports the
    node's Services publish on every address, by ``(protocol, port)``, with the Service
    (its firewall rules would take the hostPort's traffic, or the hostPort the Service's).
    ``host_port_in_use`` is asked about each host port no admitted pod holds (None: ask
    nothing). ``static`` pods (from
    files, the CLI or the library, not the API server) are not checked against taints, and
    their ``nodeName`` is this node's, as the kubelet's file source sets it.
    """
    others = list(admitted)
    spec = _spec(pod)
    labels = (pod.metadata.labels if pod.metadata is not None else None) or {}
    if OS_LABEL in labels and labels[OS_LABEL] != NODE_OS:
        return Rejection(
            POD_OS_SELECTOR_NODE_LABEL_DOES_NOT_MATCH,
            "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
        )
    if spec.os is not None and spec.os.name != NODE_OS:
        return Rejection(
            POD_OS_NOT_SUPPORTED, "Failed to admit pod as the OS field doesn't match node OS"
        )
    context = spec.securityContext
    if (
        context is not None
        and context.supplementalGroupsPolicy == "Strict"
        and not node.supplemental_groups_policy
    ):
        return Rejection(
            SUPPLEMENTAL_GROUPS_POLICY_NOT_SUPPORTED,
            "SupplementalGroupsPolicy=Strict is not supported in this node",
        )
    unsupported = unsupported_feature(spec)
    if unsupported is not None:
        return Rejection(*unsupported)
    shortage = _insufficient_resource(
        pod, node=node, others=others, ignore_unadvertised=ignore_unadvertised_extended
    )
    if shortage is not None:
        return shortage
    if node.labels is not None and not matches_node_selector(pod, node.labels, node.name):
        return _predicate(NODE_AFFINITY)
    if not static and spec.nodeName and spec.nodeName != node.name:
        return _predicate(NODE_NAME)
    wanted = list(host_ports(pod))
    in_use = _HostPortInfo([*(port for other in others for port in host_ports(other)), *held_ports])
    if any(in_use.conflicts(p) for p in wanted):
        return _predicate(NODE_PORTS)
    if not static and untolerated_taint(node.taints, spec.tolerations or []) is not None:
        return _predicate(TAINT_TOLERATION)
    return _host_port_conflict(wanted, published or {}, host_port_in_use)


def _host_port_conflict(
    wanted: Sequence[HostPort],
    published: Mapping[tuple[str, int], str],
    host_port_in_use: HostPortProbe | None,
) -> Rejection | None:
    """The first of ``wanted`` that a Service publishes, else that a process holds."""
    for protocol, ip, port in wanted:
        service = published.get((protocol, port))
        if service is not None:
            return _conflict(protocol, ip, port, service)
    if host_port_in_use is not None:
        for protocol, ip, port in wanted:
            if host_port_in_use(protocol, ip, port):
                return _conflict(protocol, ip, port, "a process that is not one of its pods")
    return None


def _conflict(protocol: str, ip: str, port: int, holder: str) -> Rejection:
    return Rejection(
        HOST_PORT_CONFLICT,
        f"cannot start the pod due to host port conflict: {ip}:{port}/{protocol}"
        f" is already in use on the node by {holder}",
    )


@dataclass
class NodeAdmitter:
    """Admission as the node agent runs it, before a pod worker starts.

    ``admit`` decides for a pod new to the node; a pod ``running`` already (adopted from
    Docker when the agent restarts) skips the host-port probe, since the ports it finds
    bound may be that pod's own, and keeps its hostPorts over the Services'. ``held_ports``
    tells the host ports that pods of other agents on the engine hold (None: none are
    known); ``published_ports`` the ports the node's Services publish (set by the Service
    controller while it runs).
    """

    node: NodeInfo
    host_port_in_use: HostPortProbe | None = None
    held_ports: HeldPorts | None = None
    ignore_unadvertised_extended: bool = False
    published_ports: PublishedPorts | None = None

    def admit(
        self, pod: Pod, *, admitted: Iterable[Pod], static: bool = True, running: bool = False
    ) -> Rejection | None:
        return admit(
            pod,
            node=self.node,
            admitted=admitted,
            held_ports=self.held_ports() if self.held_ports is not None else (),
            published=None
            if running or self.published_ports is None or not any(host_ports(pod))
            else self.published_ports(),
            host_port_in_use=None if running else self.host_port_in_use,
            static=static,
            ignore_unadvertised_extended=self.ignore_unadvertised_extended,
        )


def admit_together(
    admitter: NodeAdmitter, pods: Iterable[Pod], *, admitted: Iterable[Pod] = ()
) -> list[tuple[Pod, Rejection]]:
    """Admission of pods that start together or not at all (a foreground run's): each is
    admitted over ``admitted`` and the pods before it that were taken. The pods refused,
    each with why; empty when the node takes them all."""
    taken = list(admitted)
    refused = []
    for pod in pods:
        rejection = admitter.admit(pod, admitted=taken)
        if rejection is None:
            taken.append(pod)
        else:
            refused.append((pod, rejection))
    return refused


def _predicate(name: str) -> Rejection:
    return Rejection(name, f"Predicate {name} failed: {_PREDICATE_REASONS[name]}")


# -- resources --------------------------------------------------------------------------


def _insufficient_resource(
    pod: Pod, *, node: NodeInfo, others: Sequence[Pod], ignore_unadvertised: bool
) -> Rejection | None:
    """``noderesources.Fits``: the first resource the pod needs more of than is left."""
    allocatable = node.allocatable
    if len(others) + 1 > allocatable.pods:
        return _insufficient(_PODS, 1, len(others), allocatable.pods)
    wanted = pod_requests(pod)
    if ignore_unadvertised:
        wanted = {
            name: value
            for name, value in wanted.items()
            if not (is_extended_resource_name(name) and name not in allocatable.scalars)
        }
    used: dict[str, int] = {}
    for other in others:
        for name, value in pod_requests(other).items():
            used[name] = used.get(name, 0) + value
    scalars = sorted(n for n in wanted if n not in (_CPU, _MEMORY, _EPHEMERAL, _PODS))
    for name in (_CPU, _MEMORY, _EPHEMERAL, *scalars):
        request = wanted.get(name, 0)
        if request > 0 and request > allocatable.amount(name) - used.get(name, 0):
            return _insufficient(name, request, used.get(name, 0), allocatable.amount(name))
    return None


def _insufficient(name: str, requested: int, used: int, capacity: int) -> Rejection:
    return Rejection(
        f"{INSUFFICIENT_RESOURCE_PREFIX}{name}",
        f"Node didn't have enough resource: {name}, requested: {requested}, used: {used},"
        f" capacity: {capacity}",
    )


def pod_requests(pod: Pod) -> dict[str, int]:
    """What the pod asks of the node (``resourcehelper.PodRequests``): the sum of its
    containers (and sidecars), or more while an init container runs beside the sidecars
    started before it, pod-level requests for cpu and memory when set, plus the overhead.
    cpu in millicores, everything else in whole units, rounded up."""
    spec = _spec(pod)
    total: dict[str, Fraction] = {}
    for c in spec.containers:
        _add(total, _container_requests(c))
    sidecars: dict[str, Fraction] = {}
    peak: dict[str, Fraction] = {}
    for c in spec.initContainers or []:
        requests = _container_requests(c)
        if c.restartPolicy == "Always":
            _add(total, requests)
            _add(sidecars, requests)
            running = dict(sidecars)
        else:
            running = dict(requests)
            _add(running, sidecars)
        for name, value in running.items():
            peak[name] = max(peak.get(name, Fraction(0)), value)
    for name, value in peak.items():
        total[name] = max(total.get(name, Fraction(0)), value)
    if spec.resources is not None:
        pod_level = {**_quantities(spec.resources.limits), **_quantities(spec.resources.requests)}
        for name in _POD_LEVEL:
            if name in pod_level:
                total[name] = pod_level[name]
    _add(total, _quantities(spec.overhead))
    return {
        name: math.ceil(value * 1000 if name == _CPU else value)
        for name, value in total.items()
        if name != _PODS
    }


def _container_requests(c: Container) -> dict[str, Fraction]:
    if c.resources is None:
        return {}
    return {**_quantities(c.resources.limits), **_quantities(c.resources.requests)}


def _quantities(values: Mapping[str, Any] | None) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    for name, text in (values or {}).items():
        try:
            out[name] = parse_quantity(str(text)).value
        except QuantityError:
            continue
    return out


def _add(total: dict[str, Fraction], more: Mapping[str, Fraction]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, Fraction(0)) + value


def is_extended_resource_name(name: str) -> bool:
    """``IsExtendedResourceName``: a qualified name with a domain outside kubernetes.io."""
    if "/" not in name or name.startswith("requests."):
        return False
    domain = name.split("/", 1)[0]
    if domain == "kubernetes.io" or domain.endswith(".kubernetes.io"):
        return False
    return not is_qualified_name(name)


# -- node affinity ----------------------------------------------------------------------


def matches_node_selector(pod: Pod, labels: Mapping[str, str], node_name: str) -> bool:
    """``GetRequiredNodeAffinity(pod).Match(node)``: ``nodeSelector`` and the required
    node affinity terms (ORed; an empty or malformed term matches nothing)."""
    spec = _spec(pod)
    for key, value in (spec.nodeSelector or {}).items():
        if labels.get(key) != value:
            return False
    affinity = spec.affinity.nodeAffinity if spec.affinity is not None else None
    required = affinity.requiredDuringSchedulingIgnoredDuringExecution if affinity else None
    if required is None:
        return True
    return any(_term_matches(t, labels, node_name) for t in required.nodeSelectorTerms or [])


def _term_matches(term: NodeSelectorTerm, labels: Mapping[str, str], node_name: str) -> bool:
    expressions = term.matchExpressions or []
    fields = term.matchFields or []
    if not expressions and not fields:
        return False
    for r in expressions:
        if not _label_requirement_matches(r, labels):
            return False
    for r in fields:
        if (
            r.key != "metadata.name"
            or r.operator not in ("In", "NotIn")
            or len(r.values or []) != 1
        ):
            return False
        if (node_name in (r.values or [])) != (r.operator == "In"):
            return False
    return True


def _label_requirement_matches(r: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    values = r.values or []
    has = r.key in labels
    if r.operator == "In":
        return bool(values) and has and labels[r.key] in values
    if r.operator == "NotIn":
        return bool(values) and (not has or labels[r.key] not in values)
    if r.operator == "Exists":
        return not values and has
    if r.operator == "DoesNotExist":
        return not values and not has
    if r.operator in ("Gt", "Lt") and len(values) == 1 and has:
        try:
            mine, theirs = int(labels[r.key]), int(values[0])
        except ValueError:
            return False
        return mine > theirs if r.operator == "Gt" else mine < theirs
    return False


# -- taints -----------------------------------------------------------------------------


def untolerated_taint(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> Taint | None:
    """``FindMatchingUntoleratedTaint`` over the ``NoExecute`` taints, the only ones the
    kubelet checks."""
    tolerations = list(tolerations)
    for taint in taints:
        if taint.effect != _NO_EXECUTE:
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            return taint
    return None


def _tolerates(t: Toleration, taint: Taint) -> bool:
    """``Toleration.ToleratesTaint``."""
    if t.effect and t.effect != taint.effect:
        return False
    if t.key and t.key != taint.key:
        return False
    operator = t.operator or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (t.value or "") == taint.value
    return False


# -- host ports -------------------------------------------------------------------------


def host_ports(pod: Pod) -> Iterator[tuple[str, str, int]]:
    """``GetHostPorts``: ``(protocol, host IP, port)`` of the ports of regular containers
    and sidecars that ask for a host port; protocol TCP and IP 0.0.0.0 when unset."""
    spec = _spec(pod)
    sidecars = [c for c in spec.initContainers or [] if c.restartPolicy == "Always"]
    for c in [*sidecars, *spec.containers]:
        for p in c.ports or []:
            if p.hostPort and p.hostPort > 0:
                yield (p.protocol or "TCP", p.hostIP or _WILDCARD_IP, p.hostPort)


class _HostPortInfo:
    """The scheduler's ``HostPortInfo``: 0.0.0.0 conflicts with every address."""

    def __init__(self, ports: Iterable[tuple[str, str, int]]) -> None:
        self._by_ip: dict[str, set[tuple[str, int]]] = {}
        for protocol, ip, port in ports:
            self._by_ip.setdefault(ip, set()).add((protocol, port))

    def conflicts(self, wanted: tuple[str, str, int]) -> bool:
        protocol, ip, port = wanted
        if ip == _WILDCARD_IP:
            return any((protocol, port) in used for used in self._by_ip.values())
        return any((protocol, port) in self._by_ip.get(key, set()) for key in (_WILDCARD_IP, ip))


_SOCKET_KINDS = {
    "TCP": (socket.SOCK_STREAM, 0),
    "UDP": (socket.SOCK_DGRAM, 0),
    "SCTP": (socket.SOCK_STREAM, getattr(socket, "IPPROTO_SCTP", 132)),
}


def host_port_in_use(protocol: str, host_ip: str, port: int) -> bool:
    """Whether something on this host holds ``host_ip:port`` for ``protocol``.

    Binds a socket of that protocol to the address and closes it at once; nothing is
    sent. A TCP socket binds with ``SO_REUSEADDR``: a listening or bound socket still
    refuses it, while connections a stopped server left in TIME_WAIT do not count. UDP and
    SCTP bind without it, so any socket holding the port is found. An address that is not
    this host's, or a protocol this kernel lacks, is not "in use".
    """
    ip = host_ip or _WILDCARD_IP
    kind, proto = _SOCKET_KINDS.get(protocol, _SOCKET_KINDS["TCP"])
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    try:
        sock = socket.socket(family, kind, proto)
    except OSError:
        return False
    with sock:
        if protocol == "TCP":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((ip, port))
        except OSError as e:
            return e.errno == errno.EADDRINUSE
    return False


# -- configuration ----------------------------------------------------------------------


def host_resources() -> NodeResources:
    """The node's capacity read from this host: its CPUs, its memory, 110 pods and the
    size of the root filesystem, as a kubelet's cAdvisor would report them."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return NodeResources(
        cpu_millis=cpus * 1000,
        memory=_memory_total(),
        pods=DEFAULT_MAX_PODS,
        ephemeral_storage=shutil.disk_usage("/").total,
    )


def _memory_total() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def parse_node_resources(text: str, *, base: NodeResources) -> NodeResources:
    """``cpu=4,memory=8Gi,pods=50,ephemeral-storage=100Gi,example.com/dongle=2`` over
    ``base``: each named resource replaces the base's, the others are kept.

    Raises ValueError naming the item that is not ``NAME=QUANTITY``, a name that is not a
    resource name, or a quantity that is not one (or negative, or pods not a whole number).
    """
    cpu, memory, pods, ephemeral = base.cpu_millis, base.memory, base.pods, base.ephemeral_storage
    scalars = dict(base.scalars)
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise ValueError(f"{item!r}: expected NAME=QUANTITY, e.g. cpu=4 or memory=8Gi")
        try:
            quantity = parse_quantity(value).value
        except QuantityError as e:
            raise ValueError(f"{item!r}: {value!r} is not a quantity ({e})") from None
        if quantity < 0:
            raise ValueError(f"{item!r}: a capacity cannot be negative")
        if name == _CPU:
            cpu = math.ceil(quantity * 1000)
        elif name == _MEMORY:
            memory = math.ceil(quantity)
        elif name == _EPHEMERAL:
            ephemeral = math.ceil(quantity)
        elif name == _PODS:
            if quantity.denominator != 1:
                raise ValueError(f"{item!r}: pods is a whole number")
            pods = int(quantity)
        elif name.startswith("hugepages-") or is_extended_resource_name(name):
            scalars[name] = math.ceil(quantity)
        else:
            raise ValueError(
                f"{item!r}: {name!r} is not a resource this node can offer (cpu, memory, pods,"
                " ephemeral-storage, hugepages-<size> or an extended resource such as"
                " example.com/dongle)"
            )
    return NodeResources(
        cpu_millis=cpu,
        memory=memory,
        pods=pods,
        ephemeral_storage=ephemeral,
        scalars=MappingProxyType(scalars),
    )


def parse_labels(text: str) -> dict[str, str]:
    """``--node-labels`` form: ``key=value,key2=value2``."""
    labels: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key or is_qualified_name(key):
            raise ValueError(f"{item!r}: expected KEY=VALUE with a qualified label key")
        labels[key] = value
    return labels


def parse_taints(text: str) -> tuple[Taint, ...]:
    """``--register-with-taints`` form: ``key=value:Effect,key2:Effect``."""
    taints: list[Taint] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        head, sep, effect = item.rpartition(":")
        key, _, value = head.partition("=")
        if not sep or not key or effect not in _TAINT_EFFECTS or is_qualified_name(key):
            raise ValueError(
                f"{item!r}: expected KEY[=VALUE]:EFFECT with effect one of "
                + ", ".join(_TAINT_EFFECTS)
            )
        taints.append(Taint(key=key, value=value, effect=effect))
    return tuple(taints)


def _spec(pod: Pod) -> PodSpec:
    if pod.spec is None:
        raise ValueError("the pod has no spec")
    return pod.spec
