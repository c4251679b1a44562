"""The node's ports kept from Services: a nodePort or LoadBalancer port held by the node's
own servers, a pod's hostPort, a host process or another Service is refused naming the
holder; a LoadBalancer port outside the node port range only under ``privileged``; a
stored Service's port taken since is left unpublished."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, cast

import builders
import pytest
from lightkube.models.core_v1 import Pod, Service

from asynckubelet.manifests.security import Level
from asynckubelet.node.listeners import Listener
from asynckubelet.workloads.allocation import (
    PORT_FORBIDDEN,
    PORT_IN_USE,
    LevelInForce,
    PortHolder,
    ReservedPort,
    ServiceRanges,
    Unpublished,
    allocate,
    claimed_ports,
    port_holders,
    unpublished,
)

RANGES = ServiceRanges.parse(cluster_ip_range="10.96.0.0/28", node_port_range="30000-30009")


def svc(name: str, kind: str, *ports: dict[str, Any], namespace: str = "default") -> Service:
    body = {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {"type": kind, "ports": [{"protocol": "TCP", **p} for p in ports]},
    }
    return cast(Service, Service.from_dict(body))


def hostport_pod(name: str, port: int, *, protocol: str = "TCP", ip: str = "") -> Pod:
    spec_port: dict[str, Any] = {"containerPort": 80, "hostPort": port, "protocol": protocol}
    if ip:
        spec_port["hostIP"] = ip
    return builders.pod(
        name, uid=f"uid-{name}", containers=[builders.container("c", "x", ports=[spec_port])]
    )


HOLDERS = port_holders(
    reserved=[
        ReservedPort("TCP", 10255, "serve --listen"),
        ReservedPort("UDP", 53, "the cluster DNS on 10.88.0.1"),
    ],
    pods=[hostport_pod("x", 47001), hostport_pod("y", 30004, ip="127.0.0.1")],
    engine_ports=[("TCP", "0.0.0.0", 30006)],
    listeners=[
        Listener("TCP", "127.0.0.1", 5432),
        Listener("TCP", "::", 22),
        Listener("UDP", "0.0.0.0", 30005),
        Listener("TCP", "0.0.0.0", 30007),
    ],
)


@dataclass(frozen=True)
class Case:
    name: str
    service: Service
    refused: list[str] = field(default_factory=list)
    level: Level = "privileged"
    labelled: bool = False

    def __str__(self) -> str:
        return self.name


def lb(port: int, **extra: Any) -> Service:
    return svc("web", "LoadBalancer", {"port": port, **extra})


def np(node_port: int, **extra: Any) -> Service:
    return svc("web", "NodePort", {"port": 80, "nodePort": node_port, **extra})


CASES = [
    Case(
        "a LoadBalancer on serve's --listen port",
        lb(10255),
        ["spec.ports[0].port: Invalid value: 10255: port is in use on the node (serve --listen)"],
    ),
    Case(
        "a UDP LoadBalancer on the cluster DNS's port",
        lb(53, protocol="UDP"),
        [
            "spec.ports[0].port: Invalid value: 53: port is in use on the node (the cluster DNS "
            "on 10.88.0.1)"
        ],
    ),
    Case("a TCP LoadBalancer on a port only UDP holds", lb(30005)),
    Case(
        "a LoadBalancer on a pod's hostPort",
        lb(47001),
        [
            "spec.ports[0].port: Invalid value: 47001: port is in use on the node by hostPort "
            "of pod default/x"
        ],
    ),
    Case(
        "a LoadBalancer on a host process's loopback port",
        lb(5432),
        [
            "spec.ports[0].port: Invalid value: 5432: port is in use on the node by a host process "
            "listening on 127.0.0.1"
        ],
    ),
    Case(
        "a LoadBalancer on a host process's IPv6 wildcard port",
        lb(22),
        [
            "spec.ports[0].port: Invalid value: 22: port is in use on the node by a host process "
            "listening on ::"
        ],
    ),
    Case(
        "a nodePort a host process listens on",
        np(30007),
        [
            "spec.ports[0].nodePort: Invalid value: 30007: port is in use on the node by a host "
            "process listening on 0.0.0.0"
        ],
    ),
    Case(
        "a UDP nodePort a host process has bound",
        np(30005, protocol="UDP"),
        [
            "spec.ports[0].nodePort: Invalid value: 30005: port is in use on the node by a host "
            "process listening on 0.0.0.0"
        ],
    ),
    Case(
        "a nodePort a pod's hostPort on one address holds",
        np(30004),
        [
            "spec.ports[0].nodePort: Invalid value: 30004: port is in use on the node by hostPort "
            "of pod default/y"
        ],
    ),
    Case(
        "a nodePort another agent's pod holds on the engine",
        np(30006),
        [
            "spec.ports[0].nodePort: Invalid value: 30006: port is in use on the node by hostPort "
            "of a pod of another agent on the engine"
        ],
    ),
    Case("a free nodePort", np(30001)),
    Case("a LoadBalancer on a free port, privileged", lb(8080)),
    Case("a LoadBalancer in the range, baseline", lb(30001), level="baseline"),
    Case(
        "a LoadBalancer outside the range, baseline",
        lb(8080),
        [
            "spec.ports[0].port: Forbidden: port 8080 is outside the node port range "
            '30000-30009: under the "baseline:latest" Pod Security level, which forbids a pod '
            "any hostPort, a LoadBalancer is published on the node only on a port of "
            "--service-node-port-range; use a port in 30000-30009 or a NodePort Service, or "
            "run the node at --pod-security privileged"
        ],
        level="baseline",
    ),
    Case(
        "a LoadBalancer outside the range, restricted",
        svc("web", "LoadBalancer", {"name": "a", "port": 30002}, {"name": "b", "port": 443}),
        [
            "spec.ports[1].port: Forbidden: port 443 is outside the node port range 30000-30009: "
            'under the "restricted:latest" Pod Security level, which forbids a pod any hostPort, a '
            "LoadBalancer is published on the node only on a port of --service-node-port-range; "
            "use a port in 30000-30009 or a NodePort Service, or run the node at --pod-security "
            "privileged"
        ],
        level="restricted",
    ),
    Case(
        "a LoadBalancer outside the range, in a namespace labelled baseline",
        lb(8080),
        [
            "spec.ports[0].port: Forbidden: port 8080 is outside the node port range "
            '30000-30009: under the "baseline:latest" Pod Security level, which forbids a pod '
            "any hostPort, a LoadBalancer is published on the node only on a port of "
            "--service-node-port-range; use a port in 30000-30009 or a NodePort Service, or "
            "make its namespace's pod-security.kubernetes.io/enforce label privileged"
        ],
        level="baseline",
        labelled=True,
    ),
    Case(
        "a NodePort Service outside any LoadBalancer rule, restricted",
        np(30001),
        level="restricted",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_node_ports_and_load_balancer_ports(case: Case) -> None:
    _, problems = allocate(
        [case.service],
        stored={},
        ranges=RANGES,
        holders=HOLDERS,
        levels=lambda namespace: LevelInForce(case.level, case.labelled),
    )
    assert [str(e) for _, e in problems] == case.refused


def test_the_level_is_the_one_in_force_for_the_services_namespace() -> None:
    levels = {"open": LevelInForce("privileged"), "shut": LevelInForce("baseline")}
    services = [
        svc("a", "LoadBalancer", {"port": 8080}, namespace="open"),
        svc("b", "LoadBalancer", {"port": 8081}, namespace="shut"),
    ]
    done, problems = allocate(services, stored={}, ranges=RANGES, levels=levels.__getitem__)
    assert [s.metadata.namespace for s in done] == ["open"]  # type: ignore[union-attr]
    assert [(key, e.field, e.reason) for key, e in problems] == [
        (("shut", "b"), "spec.ports[0].port", "Forbidden")
    ]


def test_a_load_balancer_port_another_services_node_port_holds_is_already_allocated() -> None:
    first, _ = allocate([np(30003)], stored={}, ranges=RANGES)
    stored = {("default", "web"): first[0]}
    other = svc("other", "LoadBalancer", {"port": 30003, "nodePort": 30008})
    udp = svc("udp", "LoadBalancer", {"port": 30003, "nodePort": 30009, "protocol": "UDP"})
    _, problems = allocate([other, udp], stored=stored, ranges=RANGES)
    assert [(key, str(e)) for key, e in problems] == [
        (
            ("default", "other"),
            "spec.ports[0].port: Invalid value: 30003: provided port is already allocated",
        )
    ]


def test_a_node_port_another_services_load_balancer_publishes_is_already_allocated() -> None:
    first, _ = allocate([lb(30003, nodePort=30001)], stored={}, ranges=RANGES)
    stored = {("default", "web"): first[0]}
    _, problems = allocate(
        [svc("other", "NodePort", {"port": 80, "nodePort": 30003})], stored=stored, ranges=RANGES
    )
    assert [str(e) for _, e in problems] == [
        "spec.ports[0].nodePort: Invalid value: 30003: provided port is already allocated"
    ]


def test_one_services_node_port_may_not_be_its_other_ports_load_balancer_port() -> None:
    both = svc(
        "web",
        "LoadBalancer",
        {"name": "a", "port": 30002, "nodePort": 30003},
        {"name": "b", "port": 30004, "nodePort": 30002},
    )
    _, problems = allocate([both], stored={}, ranges=RANGES)
    assert [str(e) for _, e in problems] == [
        "spec.ports[1].nodePort: Invalid value: 30002: provided port is already allocated"
    ]


def test_random_node_ports_stay_in_the_range_and_skip_every_held_port() -> None:
    held = port_holders(listeners=[Listener("TCP", "0.0.0.0", p) for p in range(30000, 30009)])
    for seed in range(20):
        done, problems = allocate(
            [svc("web", "NodePort", {"port": 80})],
            stored={},
            ranges=RANGES,
            holders=held,
            rng=random.Random(seed),  # noqa: S311  (a seeded pick, not a secret)
        )
        assert problems == []
        assert done[0].spec.ports[0].nodePort == 30009  # type: ignore[union-attr,index]


def test_random_node_ports_skip_the_services_own_load_balancer_ports() -> None:
    ports = [{"name": f"p{i}", "port": 30000 + i} for i in range(5)]
    done, problems = allocate(
        [svc("web", "LoadBalancer", *ports)],
        stored={},
        ranges=RANGES,
        rng=random.Random(3),  # noqa: S311  (a seeded pick, not a secret)
    )
    assert problems == []
    node_ports = [int(p.nodePort or 0) for p in done[0].spec.ports]  # type: ignore[union-attr]
    assert sorted(node_ports) == [30005, 30006, 30007, 30008, 30009]


def test_a_range_left_without_a_free_port_is_full() -> None:
    held = port_holders(listeners=[Listener("TCP", "0.0.0.0", p) for p in range(30000, 30010)])
    _, problems = allocate(
        [svc("web", "NodePort", {"port": 80})], stored={}, ranges=RANGES, holders=held
    )
    assert [str(e) for _, e in problems] == [
        "spec.ports: Invalid value: []string{}: failed to allocate a nodePort: range is full"
    ]


def test_a_reapplied_service_keeps_its_ports_though_a_host_process_took_them_since() -> None:
    """The controller withholds them with an event; the apply of an unchanged Service is no
    place to refuse them."""
    first, _ = allocate([lb(8080, nodePort=30001)], stored={}, ranges=RANGES)
    stored = {("default", "web"): first[0]}
    since = port_holders(
        listeners=[Listener("TCP", "0.0.0.0", 8080), Listener("TCP", "0.0.0.0", 30001)]
    )
    again, problems = allocate([lb(8080)], stored=stored, ranges=RANGES, holders=since)
    assert problems == []
    assert again[0].spec.ports[0].nodePort == 30001  # type: ignore[union-attr,index]


def test_a_reapplied_load_balancer_is_held_to_the_level_in_force_now() -> None:
    first, _ = allocate([lb(8080)], stored={}, ranges=RANGES)
    stored = {("default", "web"): first[0]}
    _, problems = allocate(
        [lb(8080)], stored=stored, ranges=RANGES, levels=lambda ns: LevelInForce("baseline")
    )
    assert [(e.field, e.reason) for _, e in problems] == [("spec.ports[0].port", "Forbidden")]


def test_the_nodes_own_servers_are_named_before_pods_and_pods_before_processes() -> None:
    holders = port_holders(
        reserved=[ReservedPort("TCP", 10255, "serve --listen")],
        pods=[hostport_pod("x", 10255), hostport_pod("z", 6000)],
        listeners=[Listener("TCP", "127.0.0.1", 10255), Listener("TCP", "0.0.0.0", 6000)],
    )
    assert holders == {
        ("TCP", 10255): PortHolder("node", "serve --listen"),
        ("TCP", 6000): PortHolder("hostPort", "pod default/z"),
    }


def test_claimed_ports_are_every_node_port_and_load_balancer_port_with_its_service() -> None:
    services, _ = allocate(
        [
            svc("lb", "LoadBalancer", {"port": 8080, "nodePort": 30001}),
            svc("np", "NodePort", {"port": 53, "nodePort": 30002, "protocol": "UDP"}),
            svc("ip", "ClusterIP", {"port": 80}),
        ],
        stored={},
        ranges=RANGES,
    )
    assert claimed_ports(services) == {
        ("TCP", 8080): "Service default/lb",
        ("TCP", 30001): "Service default/lb",
        ("UDP", 30002): "Service default/np",
    }


def test_stored_ports_taken_since_or_forbidden_now_are_left_unpublished() -> None:
    stored = [
        lb(10255, nodePort=30001),
        svc("free", "LoadBalancer", {"port": 30002, "nodePort": 30003}),
        svc("late", "NodePort", {"port": 80, "nodePort": 30007}),
        svc("wide", "LoadBalancer", {"port": 8443, "nodePort": 30008}, namespace="shut"),
    ]
    levels = {"default": LevelInForce("privileged"), "shut": LevelInForce("baseline", True)}
    found = unpublished(stored, holders=HOLDERS, ranges=RANGES, levels=levels.__getitem__)
    assert [(u.service, u.field, u.port, u.reason) for u in found] == [
        (("default", "web"), "port", 10255, PORT_IN_USE),
        (("default", "late"), "nodePort", 30007, PORT_IN_USE),
        (("shut", "wide"), "port", 8443, PORT_FORBIDDEN),
    ]
    assert found[0].message() == (
        "Service port 10255/TCP is not published: port is in use on the node (serve --listen)"
    )
    assert found[1].message() == (
        "nodePort 30007/TCP is not published: port is in use on the node by a host process "
        "listening on 0.0.0.0"
    )


def test_an_unpublished_port_says_which_port_and_why() -> None:
    gone = Unpublished(("default", "web"), "nodePort", "UDP", 30005, PORT_IN_USE, "taken")
    assert gone.message() == "nodePort 30005/UDP is not published: taken"
