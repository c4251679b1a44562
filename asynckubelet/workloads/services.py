"""Services on one node: endpoints kept, traffic sent to them.

Services are admitted as the API server admits them, with the node's own ports kept out
of their reach (:mod:`asynckubelet.workloads.allocation`). The endpoints of each Service
with a selector are the pods of its namespace whose labels match, that have an IP, are not
finished and are not being deleted; an endpoint is ready when its pod's Ready condition is
true (or the Service publishes not-ready addresses), and a named ``targetPort`` is resolved
per pod from its containers' ports, as the endpoints controller does
(:mod:`asynckubelet.workloads.endpoints`). :class:`ServiceController` recomputes them
whenever a pod's status or a stored object changes, and hands the ready ones to the firewall
as one atomic set of rules (:func:`service_rules`): a pod that turns unready leaves the
rotation at the next status change, a new ready pod joins it. The new endpoints are shown
(the API, the cluster DNS, waiters) once the rules that follow them are in, so whoever sees
an endpoint leave sees its traffic gone. A pod being stopped leaves the rules before its
preStop hook or SIGTERM can end its serving: the controller is one of the node's stop hooks
and returns once rules without the pod are in place; rules the packet filter refused are
programmed again a second later, not at the next change. Tracked UDP and SCTP flows left
pointing at a removed endpoint (or refused while there was none) are then cleared, as
kube-proxy clears them (:mod:`asynckubelet.network.conntrack`).

A nodePort or LoadBalancer port that someone else holds now (a process started on the host
since the Service was applied, another node of the host that published it first, a node
restarted with other servers or another level) is left out of the rules, with a Warning
event on the Service and a log line; the ports are looked at again after every change of
the Services and every :data:`PORT_RECHECK` seconds while any is published, and a port
given back is published again. The ports published are recorded for the host's other
nodes to keep away from (:mod:`asynckubelet.node.neighbours`).
"""

from __future__ import annotations

import builtins
import copy
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import anyio
import anyio.abc
import anyio.to_thread
from lightkube.models.core_v1 import Namespace, Pod, Service

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.errors import FieldError
from asynckubelet.manifests import Manifests
from asynckubelet.manifests.security import ENFORCE_LABEL, enforced_level
from asynckubelet.manifests.service import HEADLESS
from asynckubelet.network.conntrack import FlowCleaner, NetlinkFlowCleaner, stale_flows
from asynckubelet.network.firewall import Firewall, ServiceRule
from asynckubelet.node.kubelet import Kubelet
from asynckubelet.node.listeners import Listener
from asynckubelet.node.neighbours import Neighbours, Published
from asynckubelet.node.objects import Key, ObjectStore
from asynckubelet.runtime import containers as ctr
from asynckubelet.workloads.allocation import (
    DEFAULT_CLUSTER_IP_RANGE,
    DEFAULT_NODE_PORT_RANGE,
    LevelInForce,
    PortHolder,
    PortKey,
    ReservedPort,
    ServiceRanges,
    Unpublished,
    allocate,
    claimed_ports,
    key_of,
    port_holders,
    spec_of,
    unpublished,
)
from asynckubelet.workloads.endpoints import (
    TERMINAL,
    Endpoint,
    EndpointPort,
    ServiceEndpoints,
    endpoints_for,
    find_port,
    pod_is_ready,
    selects,
)

RETRY_AFTER = 1.0
"""Seconds before rules the packet filter refused are programmed again."""
PORT_RECHECK = 10.0
"""Seconds between two looks at the host's listening sockets while a Service publishes a
port on the node (a change of the Services looks at once)."""
COMPONENT = "service-controller"


def service_rules(
    services: Iterable[Service],
    endpoints: Mapping[tuple[str, str], ServiceEndpoints],
    *,
    withheld: Collection[Unpublished] = (),
) -> list[ServiceRule]:
    """What the packet filter carries: per port of each Service with a ClusterIP, its
    ready endpoints' IPv4 addresses and resolved ports; the ports ``withheld`` are not
    published on the node (their ClusterIP still is)."""
    out = {(u.service, u.field, u.protocol, u.port) for u in withheld}
    rules: list[ServiceRule] = []
    for svc in services:
        spec = spec_of(svc)
        if not spec.clusterIP or spec.clusterIP == HEADLESS or ":" in spec.clusterIP:
            continue
        key = key_of(svc)
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
                    node_port=0
                    if (key, "nodePort", protocol, port.nodePort) in out
                    else port.nodePort or 0,
                    published_port=port.port
                    if spec.type == "LoadBalancer" and (key, "port", protocol, port.port) not in out
                    else 0,
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
    netlink, when there are targets).

    No nodePort or LoadBalancer port goes to a port held outside the Services: one of
    ``reserved`` (the node's own servers), a hostPort of a pod the node runs, a socket
    that ``host_listeners`` lists (None: the host's sockets are not looked at), or a port
    that another node of the host publishes (``neighbours``, which records this node's
    too; None: the host's other nodes are not looked at)."""

    def __init__(
        self,
        node: Kubelet,
        *,
        ranges: ServiceRanges | None = None,
        targets: Sequence[ProxyTarget] = (),
        load_balancer_ips: Sequence[str] = ("127.0.0.1",),
        flows: FlowCleaner | None = None,
        reserved: Sequence[ReservedPort] = (),
        host_listeners: Callable[[], Iterable[Listener]] | None = None,
        neighbours: Neighbours | None = None,
    ) -> None:
        self.node = node
        self.ranges = ranges or ServiceRanges()
        self.reserved = tuple(reserved)
        self.host_listeners = host_listeners
        self.recheck_after = PORT_RECHECK
        self.neighbours = neighbours
        self._listening: tuple[Listener, ...] = ()
        self._peers: dict[PortKey, Published] = {}
        self._look_again = True
        self._publishing = False
        self._withheld: dict[tuple[tuple[str, str], str, str, int], Unpublished] = {}
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

    async def admit(self, manifests: Manifests) -> tuple[Manifests, builtins.list[FieldError]]:
        """``manifests`` with their Services allocated, and every refusal in the API
        server's words (the field prefixed by nothing: the caller names the source). The
        pods of ``manifests`` hold their hostPorts already, and their Namespaces' levels
        count."""
        if not manifests.services:
            return manifests, []
        stored = {key_of(s): s for s in self.services()}
        listening: Iterable[Listener] = ()
        peers: Mapping[PortKey, Published] = {}
        if any(_on_node(s) for s in manifests.services):
            if self.host_listeners is not None:
                listening = await anyio.to_thread.run_sync(self.host_listeners)
            if self.neighbours is not None:
                peers = await anyio.to_thread.run_sync(self.neighbours.published)
        done, problems = allocate(
            manifests.services,
            stored=stored,
            ranges=self.ranges,
            holders=self._holders([*manifests.pods, *self._active_pods()], listening, peers),
            levels=self.levels(manifests.namespaces),
        )
        errs = [
            FieldError(e.field, e.reason, e.detail, source=f'Service "{key[1]}"')
            for key, e in problems
        ]
        return _replace_services(manifests, tuple(done)), errs

    def published_ports(self) -> dict[PortKey, str]:
        """The ports the stored Services claim on the node, each with its Service: what
        the node's admission refuses a pod's hostPort."""
        return claimed_ports(self.services())

    def levels(self, namespaces: Iterable[Namespace] = ()) -> Callable[[str], LevelInForce]:
        """The Pod Security level in force for each namespace, those stored and
        ``namespaces`` counted (as the node's loader counts them for pods)."""
        config = self.node.config
        labels: dict[str, Mapping[str, str]] = {}
        for ns in [*self.objects.namespaces(), *namespaces]:
            if ns.metadata is not None and ns.metadata.name:
                labels[ns.metadata.name] = ns.metadata.labels or {}

        def level(name: str) -> LevelInForce:
            found = labels.get(name) or {}
            chosen = enforced_level(
                config.pod_security, found, allow_namespace_policy=config.allow_namespace_policy
            )
            return LevelInForce(chosen, labelled=found.get(ENFORCE_LABEL) == chosen)

        return level

    def _active_pods(self) -> builtins.list[Pod]:
        return [p for p in self.node.views() if p.status is None or p.status.phase not in TERMINAL]

    def _holders(
        self,
        pods: Iterable[Pod],
        listening: Iterable[Listener],
        peers: Mapping[PortKey, Published],
    ) -> dict[PortKey, PortHolder]:
        return port_holders(
            reserved=self.reserved,
            pods=pods,
            engine_ports=self.node.engine_ports.ports,
            listeners=listening,
            neighbours={key: claim.node for key, claim in peers.items()},
        )

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
        admitter = self.node.admitter
        before, admitter.published_ports = admitter.published_ports, self.published_ports
        try:
            programmed = await self.sync()
            self._running = True
            task_status.started()
            while True:
                wait = RETRY_AFTER if not programmed else None
                if self._publishing and self._looks_around:
                    wait = min(wait or self.recheck_after, self.recheck_after)
                with anyio.move_on_after(wait) as waited:
                    await self._dirty.wait()
                if waited.cancelled_caught:
                    self._look_again = True
                self._dirty = anyio.Event()
                programmed = await self.sync()
        finally:
            admitter.published_ports = before
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
                endpoints[key_of(svc)] = found
        withheld = await self._withhold(services, pods, again=shown != self._services_seen)
        publish = endpoints != self._endpoints or shown != self._services_seen
        try:
            return await self._program(services, endpoints, withheld)
        finally:
            # Published once the rules are in: whoever sees the endpoints change sees the
            # traffic follow them.
            if publish:
                self._publish(endpoints, shown)

    def _publish(
        self, endpoints: dict[tuple[str, str], ServiceEndpoints], shown: builtins.list[Any]
    ) -> None:
        self._endpoints = endpoints
        self._services_seen = shown
        self.version += 1
        changed, self._changed = self._changed, anyio.Event()
        changed.set()
        for listener in list(self._listeners):
            listener()

    async def _program(
        self,
        services: Sequence[Service],
        endpoints: dict[tuple[str, str], ServiceEndpoints],
        withheld: builtins.list[Unpublished],
    ) -> bool:
        rules = service_rules(services, endpoints, withheld=withheld)
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

    async def _withhold(
        self, services: Sequence[Service], pods: Iterable[Pod], *, again: bool
    ) -> builtins.list[Unpublished]:
        """The ports of ``services`` not to publish now, each newly withheld one reported
        (a Warning event on its Service, a log line). The host's sockets are read again
        when the Services changed (``again``) or the recheck is due."""
        on_node = [s for s in services if _on_node(s)]
        self._publishing = bool(on_node)
        if not on_node:
            self._listening, self._peers, self._look_again = (), {}, True
            self._report([], services)
            await self._record([])
            return []
        if self._looks_around and (again or self._look_again):
            if self.host_listeners is not None:
                self._listening = tuple(await anyio.to_thread.run_sync(self.host_listeners))
            if self.neighbours is not None:
                self._peers = await anyio.to_thread.run_sync(self.neighbours.published)
            self._look_again = False
        active = [p for p in pods if p.status is None or p.status.phase not in TERMINAL]
        neighbours = self.neighbours
        # A neighbour holds a port this node published first only when it was earlier.
        peers = {
            key: claim
            for key, claim in self._peers.items()
            if neighbours is not None and neighbours.holds(key, claim)
        }
        found = unpublished(
            on_node,
            holders=self._holders(active, self._listening, peers),
            ranges=self.ranges,
            levels=self.levels(),
        )
        self._report(found, services)
        held = {(u.protocol, u.port) for u in found}
        await self._record([key for key in claimed_ports(on_node) if key not in held])
        return found

    @property
    def _looks_around(self) -> bool:
        """Whether the host's sockets or other nodes are looked at."""
        return self.host_listeners is not None or self.neighbours is not None

    async def _record(self, ports: Sequence[PortKey]) -> None:
        """Record the ports this node publishes for the host's other nodes."""
        if self.neighbours is None:
            return
        try:
            await anyio.to_thread.run_sync(self.neighbours.record, ports)
        except OSError as e:
            logger.warning("the published ports are not recorded: {}", e)

    def _report(self, found: Sequence[Unpublished], services: Sequence[Service]) -> None:
        uids = {
            key_of(s): (s.metadata.uid if s.metadata is not None else None) or "" for s in services
        }
        now = {(u.service, u.field, u.protocol, u.port): u for u in found}
        for key, u in now.items():
            if self._withheld.get(key) == u:
                continue
            namespace, name = u.service
            logger.bind(service=f"{namespace}/{name}").warning("{}", u.message())
            self.node.recorder.record(
                namespace=namespace,
                name=name,
                uid=uids.get(u.service, ""),
                type="Warning",
                reason=u.reason,
                message=u.message(),
                kind="Service",
                component=COMPONENT,
            )
        for key, u in self._withheld.items():
            if key not in now and u.service in uids:
                namespace, name = u.service
                logger.bind(service=f"{namespace}/{name}").info(
                    "{} {}/{} is published", u.field, u.port, u.protocol
                )
        self._withheld = now

    async def remove_rules(self) -> None:
        """Every Service rule gone (the node is leaving for good)."""
        with anyio.CancelScope(shield=True):
            for target in self.targets:
                try:
                    await target.firewall.sync_services(bridge=target.bridge, rules=[])
                except errors.NetworkError as e:
                    logger.warning("Service rules not removed: {}", e)
            self._rules = None
            if self.neighbours is not None:
                try:
                    self.neighbours.clear()
                except OSError as e:
                    logger.warning("the published ports' record not removed: {}", e)


def _on_node(svc: Service) -> bool:
    """Whether the Service publishes ports on the node's addresses."""
    return spec_of(svc).type in ("NodePort", "LoadBalancer")


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
