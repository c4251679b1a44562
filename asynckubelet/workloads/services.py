"""Services on one node: ClusterIPs and nodePorts allocated, endpoints kept, traffic sent.

A Service applied to the node is admitted as the API server admits it
(:func:`allocate`): a ClusterIP from the node's own range (``--service-cluster-ip-range``,
``10.96.0.0/16`` by default) unless it names one, a nodePort from
``--service-node-port-range`` (``30000-32767``) for NodePort and LoadBalancer Services,
with the API server's refusals (``provided port is already allocated``, an address out of
range, ``spec.clusterIPs[0]`` changed). Allocations live in the stored Services
themselves, so a restarted node finds them where the objects are kept.

The endpoints of each Service with a selector are the pods of its namespace whose labels
match, that have an IP, are not finished and are not being deleted; an endpoint is ready
when its pod's Ready condition is true (or the Service publishes not-ready addresses), and
a named ``targetPort`` is resolved per pod from its containers' ports, as the endpoints
controller does (:func:`endpoints_for`). :class:`ServiceController` recomputes them
whenever a pod's status or a stored object changes, and hands the ready ones to the
firewall as one atomic set of rules (:func:`service_rules`): a pod that turns unready leaves
the rotation at the next status change, a new ready pod joins it. A pod being stopped
leaves the rules before its preStop hook or SIGTERM can end its serving: the controller is
one of the node's stop hooks and returns once rules without the pod are in place; rules the
packet filter refused are programmed again a second later, not at the next change. Tracked
UDP and SCTP flows left pointing at a removed endpoint (or refused while there was none)
are then cleared, as kube-proxy clears them (:mod:`asynckubelet.network.conntrack`).
"""

from __future__ import annotations

import builtins
import copy
import ipaddress
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import anyio.abc
from lightkube.models.core_v1 import Pod, Service

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.errors import FieldError
from asynckubelet.manifests import Manifests
from asynckubelet.manifests.messages import invalid
from asynckubelet.manifests.service import HEADLESS
from asynckubelet.network.conntrack import FlowCleaner, NetlinkFlowCleaner, stale_flows
from asynckubelet.network.firewall import Firewall, ServiceRule
from asynckubelet.node.kubelet import Kubelet
from asynckubelet.node.objects import Key, ObjectStore
from asynckubelet.runtime import containers as ctr

DEFAULT_CLUSTER_IP_RANGE = "10.96.0.0/16"
DEFAULT_NODE_PORT_RANGE = "30000-32767"
TERMINAL = ("Succeeded", "Failed")
RETRY_AFTER = 1.0
"""Seconds before rules the packet filter refused are programmed again."""


# -- configuration ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ServiceRanges:
    """The node's ClusterIP range and nodePort range, as the API server's flags give them."""

    cluster_ip_range: ipaddress.IPv4Network = field(
        default_factory=lambda: ipaddress.IPv4Network(DEFAULT_CLUSTER_IP_RANGE)
    )
    node_ports: tuple[int, int] = (30000, 32767)

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


# -- allocation (the API server's registry) ---------------------------------------------------


def _spec(service: Service) -> Any:
    if service.spec is None:
        raise ValueError("a Service reaches allocation only once validated: it has a spec")
    return service.spec


def _name(service: Service) -> tuple[str, str]:
    meta = service.metadata
    if meta is None or not meta.name:
        raise ValueError("a Service reaches allocation only once validated: it has a name")
    return meta.namespace or "default", meta.name


@dataclass
class _Taken:
    ips: dict[str, tuple[str, str]]
    node_ports: dict[int, tuple[str, str]]
    published: dict[tuple[int, str], tuple[str, str]]


def _taken(stored: Iterable[Service]) -> _Taken:
    taken = _Taken({}, {}, {})
    for svc in stored:
        _claim(taken, svc)
    return taken


def _claim(taken: _Taken, svc: Service) -> None:
    key = _name(svc)
    spec = _spec(svc)
    if spec.clusterIP and spec.clusterIP != HEADLESS:
        taken.ips[spec.clusterIP] = key
    for port in spec.ports or []:
        if port.nodePort:
            taken.node_ports[port.nodePort] = key
        if spec.type == "LoadBalancer":
            taken.published[(port.port, port.protocol or "TCP")] = key


def _release(taken: _Taken, key: tuple[str, str]) -> None:
    taken.ips = {k: v for k, v in taken.ips.items() if v != key}
    taken.node_ports = {k: v for k, v in taken.node_ports.items() if v != key}
    taken.published = {k: v for k, v in taken.published.items() if v != key}


def allocate(
    services: Sequence[Service],
    *,
    stored: Mapping[tuple[str, str], Service],
    ranges: ServiceRanges,
    rng: random.Random | None = None,
) -> tuple[list[Service], list[tuple[tuple[str, str], FieldError]]]:
    """The Services as they will be stored (ClusterIP and nodePorts filled in, those of
    the stored Service kept when the manifest leaves them out, as ``kubectl apply`` keeps
    them), and every refusal, keyed by the Service it is about."""
    pick = rng or random.SystemRandom()
    taken = _taken(stored.values())
    done: list[Service] = []
    problems: list[tuple[tuple[str, str], FieldError]] = []
    for original in services:
        svc = copy.deepcopy(original)
        key = _name(svc)
        old = stored.get(key)
        _release(taken, key)
        errs = _allocate_ip(svc, old, taken, ranges, pick)
        errs += _allocate_node_ports(svc, old, taken, ranges, pick)
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
    spec = _spec(svc)
    if spec.type == "ExternalName":
        spec.clusterIP, spec.clusterIPs = None, None
        return []
    spec.ipFamilies = spec.ipFamilies or ["IPv4"]
    spec.ipFamilyPolicy = spec.ipFamilyPolicy or "SingleStack"
    old_ip = _spec(old).clusterIP if old is not None and _spec(old).type != "ExternalName" else None
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


def _allocate_node_ports(
    svc: Service, old: Service | None, taken: _Taken, ranges: ServiceRanges, pick: random.Random
) -> list[FieldError]:
    spec = _spec(svc)
    if spec.type not in ("NodePort", "LoadBalancer"):
        return []
    ports = list(spec.ports or [])
    previous: dict[tuple[int, str], int] = {}
    if old is not None:
        for port in _spec(old).ports or []:
            if port.nodePort:
                previous[(port.port, port.protocol or "TCP")] = port.nodePort
    errs: list[FieldError] = []
    mine: set[int] = set()
    for i, port in enumerate(ports):
        protocol = port.protocol or "TCP"
        if spec.type == "LoadBalancer" and (port.port, protocol) in taken.published:
            errs.append(
                invalid(f"spec.ports[{i}].port", port.port, "provided port is already allocated")
            )
        if not port.nodePort:
            port.nodePort = previous.get((port.port, protocol))
        if port.nodePort:
            errs.extend(_given_node_port(port.nodePort, f"spec.ports[{i}].nodePort", taken, ranges))
            mine.add(port.nodePort)
    errs.extend(_assign_node_ports(ports, taken, ranges, mine, pick))
    return errs


def _given_node_port(
    value: int, path: str, taken: _Taken, ranges: ServiceRanges
) -> list[FieldError]:
    first, last = ranges.node_ports
    if not first <= value <= last:
        return [
            invalid(
                path,
                value,
                "provided port is not in the valid range. The range of valid ports "
                f"is {ranges.node_port_text}",
            )
        ]
    if value in taken.node_ports:
        return [invalid(path, value, "provided port is already allocated")]
    return []


def _assign_node_ports(
    ports: list[Any], taken: _Taken, ranges: ServiceRanges, mine: set[int], pick: random.Random
) -> list[FieldError]:
    """A random free nodePort for each port without one (``mine`` holds those taken by
    this Service already, and grows)."""
    first, last = ranges.node_ports
    for port in ports:
        if port.nodePort:
            continue
        if (last - first + 1) - len(taken.node_ports) - len(mine) <= 0:
            return [invalid("spec.ports", [], "failed to allocate a nodePort: range is full")]
        while True:
            candidate = pick.randint(first, last)
            if candidate not in taken.node_ports and candidate not in mine:
                break
        port.nodePort = candidate
        mine.add(candidate)
    return []


# -- endpoints (the endpoints controller) -----------------------------------------------------


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
    namespace, name = _name(service)
    spec = _spec(service)
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


def service_rules(
    services: Iterable[Service], endpoints: Mapping[tuple[str, str], ServiceEndpoints]
) -> list[ServiceRule]:
    """What the packet filter carries: per port of each Service with a ClusterIP, its
    ready endpoints' IPv4 addresses and resolved ports."""
    rules: list[ServiceRule] = []
    for svc in services:
        spec = _spec(svc)
        if not spec.clusterIP or spec.clusterIP == HEADLESS or ":" in spec.clusterIP:
            continue
        key = _name(svc)
        eps = endpoints.get(key)
        for port in spec.ports or []:
            protocol = port.protocol or "TCP"
            targets: list[tuple[str, int]] = []
            for e in eps.ready if eps is not None else ():
                for p in e.ports:
                    if p.name == (port.name or "") and p.protocol == protocol and ":" not in e.ip:
                        targets.append((e.ip, p.port))
            rules.append(
                ServiceRule(
                    name=f"{key[0]}/{key[1]}:{port.name or ''}",
                    protocol=protocol,
                    cluster_ip=spec.clusterIP,
                    port=port.port,
                    node_port=port.nodePort or 0,
                    published_port=port.port if spec.type == "LoadBalancer" else 0,
                    endpoints=tuple(targets),
                )
            )
    return rules


# -- the controller ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ProxyTarget:
    """One packet filter the Services are programmed into: a firewall family and the
    bridge whose rules it carries."""

    firewall: Firewall
    bridge: str


class ServiceController:
    """Admits Services, keeps their endpoints, programs the packet filter.

    ``targets`` are where the rules go (none: endpoints are kept, no traffic is
    redirected, as on the ``docker`` network backend). ``load_balancer_ips`` are what a
    LoadBalancer Service reports as its ingress (the node's addresses). ``flows`` clears
    the tracked UDP and SCTP flows that the endpoints' changes left stale (default: over
    netlink, when there are targets)."""

    def __init__(
        self,
        node: Kubelet,
        *,
        ranges: ServiceRanges | None = None,
        targets: Sequence[ProxyTarget] = (),
        load_balancer_ips: Sequence[str] = ("127.0.0.1",),
        flows: FlowCleaner | None = None,
    ) -> None:
        self.node = node
        self.ranges = ranges or ServiceRanges()
        self.targets = tuple(targets)
        self.flows = flows if flows is not None or not targets else NetlinkFlowCleaner()
        self.load_balancer_ips = tuple(load_balancer_ips)
        self._endpoints: dict[tuple[str, str], ServiceEndpoints] = {}
        self._services_seen: builtins.list[Mapping[str, Any]] = []
        self._rules: list[ServiceRule] | None = None
        self._dirty = anyio.Event()
        self._changed = anyio.Event()
        self._listeners: list[Callable[[], None]] = []
        self.version = 0
        """Counts the changes of Services or endpoints seen (what waiters compare)."""
        self._stopping: set[str] = set()
        self._programmed: set[str] = set()
        """UIDs of the pods the packet filter's rules send traffic to now."""
        self._running = False
        self._begun = 0
        self._finished = 0
        self._synced = anyio.Event()

    @property
    def objects(self) -> ObjectStore:
        return self.node.objects

    # -- reading ----------------------------------------------------------------------------

    def services(self, namespace: str | None = None) -> builtins.list[Service]:
        return [
            cast(Service, Service.from_dict(copy.deepcopy(dict(o.body))))
            for o in self.objects.list("Service", namespace)
        ]

    def service(self, namespace: str, name: str) -> Service | None:
        found = self.objects.get("Service", namespace, name)
        if found is None:
            return None
        return cast(Service, Service.from_dict(copy.deepcopy(dict(found.body))))

    def endpoints(self, namespace: str, name: str) -> ServiceEndpoints | None:
        return self._endpoints.get((namespace, name))

    def all_endpoints(self) -> Mapping[tuple[str, str], ServiceEndpoints]:
        return dict(self._endpoints)

    def with_status(self, svc: Service) -> dict[str, Any]:
        """The Service as the API serves it: a LoadBalancer's ingress is the node."""
        body = svc.to_dict()
        body["apiVersion"], body["kind"] = "v1", "Service"
        status: dict[str, Any] = {"loadBalancer": {}}
        if svc.spec is not None and svc.spec.type == "LoadBalancer":
            status["loadBalancer"] = {
                "ingress": [{"ip": ip, "ipMode": "VIP"} for ip in self.load_balancer_ips]
            }
        body["status"] = status
        return body

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        """``listener`` is called after every recomputation that changed Services or
        endpoints."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    async def changed(self) -> None:
        """Wait for the next change of endpoints."""
        await self._changed.wait()

    # -- admission --------------------------------------------------------------------------

    def admit(self, manifests: Manifests) -> tuple[Manifests, builtins.list[FieldError]]:
        """``manifests`` with their Services allocated, and every refusal in the API
        server's words (the field prefixed by nothing: the caller names the source)."""
        if not manifests.services:
            return manifests, []
        stored = {_name(s): s for s in self.services()}
        done, problems = allocate(manifests.services, stored=stored, ranges=self.ranges)
        errs = [
            FieldError(e.field, e.reason, e.detail, source=f'Service "{key[1]}"')
            for key, e in problems
        ]
        return _replace_services(manifests, tuple(done)), errs

    # -- running ----------------------------------------------------------------------------

    def _wake(self, *_: Any) -> None:
        self._dirty.set()

    def _object_changed(self, key: Key) -> None:
        if key[0] in ("Service", "Pod", "Namespace"):
            self._dirty.set()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Keep endpoints and rules in step with pods and Services until cancelled; rules
        the packet filter refused are tried again after :data:`RETRY_AFTER`."""
        stop_status = self.node.status.subscribe(lambda record, uid: self._wake())
        stop_objects = self.objects.observe(self._object_changed)
        self.node.stop_hooks.append(self.pod_stopping)
        try:
            programmed = await self.sync()
            self._running = True
            task_status.started()
            while True:
                if programmed:
                    await self._dirty.wait()
                else:
                    with anyio.move_on_after(RETRY_AFTER):
                        await self._dirty.wait()
                self._dirty = anyio.Event()
                programmed = await self.sync()
        finally:
            self._running = False
            self._synced.set()
            self.node.stop_hooks.remove(self.pod_stopping)
            stop_status()
            stop_objects()

    async def pod_stopping(self, pod: Pod) -> None:
        """Return once no rule sends new connections to ``pod`` (a stop hook of the node:
        the pod's preStop hook and SIGTERM come after). A pod that is no endpoint returns
        at once; so does one whose rules cannot be programmed now."""
        uid = ctr.pod_identity(pod)[2]
        if not self._running or uid not in self._programmed:
            return
        self._stopping.add(uid)
        wanted = self._begun + 1
        self._dirty.set()
        while self._running and self._finished < wanted:
            await self._synced.wait()

    async def sync(self) -> bool:
        """Recompute every Service's endpoints; program the rules when they changed. False
        when the packet filter refused them."""
        self._begun += 1
        number = self._begun
        try:
            return await self._sync()
        finally:
            self._finished = number
            synced, self._synced = self._synced, anyio.Event()
            synced.set()

    async def _sync(self) -> bool:
        shown = [o.body for o in self.objects.list("Service")]
        if not shown and not self._services_seen and self._rules == []:
            # No Service now or at the last sync, whose empty rules are in: no change of a
            # pod changes anything, and the pods are not looked at (a burst of pods changes
            # status hundreds of times).
            self._stopping.clear()
            return True
        pods = self.node.views()
        present = {ctr.pod_identity(p)[2] for p in pods}
        self._stopping &= present
        candidates = [p for p in pods if ctr.pod_identity(p)[2] not in self._stopping]
        services = self.services()
        endpoints: dict[tuple[str, str], ServiceEndpoints] = {}
        for svc in services:
            found = endpoints_for(svc, candidates, node_name=self.node.node_name)
            if found is not None:
                endpoints[_name(svc)] = found
        if endpoints != self._endpoints or shown != self._services_seen:
            self._endpoints = endpoints
            self._services_seen = shown
            self.version += 1
            changed, self._changed = self._changed, anyio.Event()
            changed.set()
            for listener in list(self._listeners):
                listener()
        rules = service_rules(services, endpoints)
        serving = {e.uid for found in endpoints.values() for e in found.ready}
        if rules == self._rules or not self.targets:
            self._rules = rules
            self._programmed = serving
            return True
        for target in self.targets:
            try:
                await target.firewall.sync_services(bridge=target.bridge, rules=rules)
            except errors.NetworkError as e:
                logger.error("Service rules not programmed (trying again): {}", e)
                self._rules = None
                return False
        n = sum(len(r.endpoints) for r in rules)
        logger.debug("Service rules: {} ports, {} ready endpoints", len(rules), n)
        stale = stale_flows(self._rules, rules)
        if stale and self.flows is not None:
            await self.flows.clear(stale)
        self._rules = rules
        self._programmed = serving
        return True

    async def remove_rules(self) -> None:
        """Every Service rule gone (the node is leaving for good)."""
        with anyio.CancelScope(shield=True):
            for target in self.targets:
                try:
                    await target.firewall.sync_services(bridge=target.bridge, rules=[])
                except errors.NetworkError as e:
                    logger.warning("Service rules not removed: {}", e)
            self._rules = None


def _replace_services(manifests: Manifests, services: tuple[Service, ...]) -> Manifests:
    import dataclasses

    return dataclasses.replace(manifests, services=services)


__all__ = [
    "DEFAULT_CLUSTER_IP_RANGE",
    "DEFAULT_NODE_PORT_RANGE",
    "Endpoint",
    "EndpointPort",
    "ProxyTarget",
    "ServiceController",
    "ServiceEndpoints",
    "ServiceRanges",
    "allocate",
    "endpoints_for",
    "find_port",
    "pod_is_ready",
    "selects",
    "service_rules",
]
