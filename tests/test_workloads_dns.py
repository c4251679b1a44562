"""The node's cluster DNS: the records a cluster's CoreDNS gives, over UDP and TCP on
loopback, forwarding of other names to the resolvers configured, here a resolver this
test runs itself on loopback (nothing is ever sent elsewhere), and who is answered: the
pod network and the node, anyone else REFUSED."""

from __future__ import annotations

import errno
import ipaddress
import math
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, cast

import anyio
import anyio.abc
import dns.asyncquery
import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest
from lightkube.models.core_v1 import Service

from asynckubelet import errors
from asynckubelet.workloads import dns as dns_server
from asynckubelet.workloads.dns import (
    MAX_FORWARDS,
    MAX_INFLIGHT,
    ClusterDNS,
    ClusterZone,
    DNSConfig,
    IPAddress,
    client_allowed,
    is_node_address,
    upstreams_from_resolv_conf,
)
from asynckubelet.workloads.services import Endpoint, EndpointPort, ServiceEndpoints

pytestmark = pytest.mark.anyio


def service(name: str, **spec: Any) -> Service:
    body = {"metadata": {"name": name, "namespace": "default"}, "spec": spec}
    return cast(Service, Service.from_dict(body))


WEB = service(
    "web", clusterIP="10.96.0.10", ports=[{"name": "http", "port": 80, "protocol": "TCP"}]
)
DB = service("db", clusterIP="None", ports=[{"name": "pg", "port": 5432, "protocol": "TCP"}])
EXT = service("ext", type="ExternalName", externalName="db.example.org")
ENDPOINTS = {
    ("default", "db"): ServiceEndpoints(
        "default",
        "db",
        (
            Endpoint(
                ip="10.137.0.5",
                ready=True,
                pod="db-0",
                uid="u0",
                ports=(EndpointPort("pg", 5432, "TCP"),),
                hostname="db-0",
            ),
            Endpoint(
                ip="10.137.0.6",
                ready=True,
                pod="db-1",
                uid="u1",
                ports=(EndpointPort("pg", 5432, "TCP"),),
            ),
            Endpoint(ip="10.137.0.7", ready=False, pod="db-2", uid="u2", ports=()),
        ),
    )
}
ZONE = ClusterZone.build(domain="cluster.local", services=[WEB, DB, EXT], endpoints=ENDPOINTS)


def ask(name: str, rdtype: str = "A") -> dns.message.Message:
    return ZONE.resolve(dns.message.make_query(name, rdtype))


def answers(message: dns.message.Message) -> list[str]:
    return sorted(r.to_text() for rrset in message.answer for r in rrset)


def test_a_service_name_is_its_cluster_ip() -> None:
    reply = ask("web.default.svc.cluster.local")
    assert answers(reply) == ["10.96.0.10"]
    assert reply.flags & dns.flags.AA


def test_a_headless_service_name_lists_its_ready_pods() -> None:
    assert answers(ask("db.default.svc.cluster.local")) == ["10.137.0.5", "10.137.0.6"]


def test_a_pod_with_hostname_and_subdomain_has_its_own_name() -> None:
    assert answers(ask("db-0.db.default.svc.cluster.local")) == ["10.137.0.5"]


def test_named_ports_have_srv_records() -> None:
    assert answers(ask("_http._tcp.web.default.svc.cluster.local", "SRV")) == [
        "0 100 80 web.default.svc.cluster.local."
    ]
    assert answers(ask("_pg._tcp.db.default.svc.cluster.local", "SRV")) == [
        "0 50 5432 10-137-0-6.db.default.svc.cluster.local.",
        "0 50 5432 db-0.db.default.svc.cluster.local.",
    ]


def test_a_pod_address_name_answers_the_address_it_spells() -> None:
    assert answers(ask("10-137-0-9.default.pod.cluster.local")) == ["10.137.0.9"]


def test_an_external_name_service_is_a_cname() -> None:
    assert answers(ask("ext.default.svc.cluster.local")) == ["db.example.org."]


def test_a_cluster_ip_has_a_reverse_name() -> None:
    assert answers(ask("10.0.96.10.in-addr.arpa", "PTR")) == ["web.default.svc.cluster.local."]


def test_an_unknown_name_is_nxdomain_with_the_zones_soa() -> None:
    reply = ask("nope.default.svc.cluster.local")
    assert reply.rcode() == dns.rcode.NXDOMAIN
    assert [rrset.rdtype for rrset in reply.authority] == [dns.rdatatype.SOA]
    assert reply.authority[0].name.to_text() == "cluster.local."


def test_a_known_name_without_that_type_is_an_empty_answer_not_nxdomain() -> None:
    reply = ask("web.default.svc.cluster.local", "AAAA")
    assert (reply.rcode(), reply.answer) == (dns.rcode.NOERROR, [])
    assert [rrset.rdtype for rrset in reply.authority] == [dns.rdatatype.SOA]


def test_names_outside_the_zone_are_not_its_to_answer() -> None:
    assert not ZONE.answers(dns.message.make_query("example.org", "A").question[0].name)


def test_the_nodes_resolvers_are_read_from_its_resolv_conf() -> None:
    text = "nameserver 127.0.0.53\nnameserver not-an-ip\nsearch x\nnameserver 10.0.0.1\n"
    assert upstreams_from_resolv_conf(text) == (("127.0.0.53", 53), ("10.0.0.1", 53))


# -- the server ---------------------------------------------------------------------------


async def start(tg: anyio.abc.TaskGroup, server: ClusterDNS) -> int:
    port: int = await tg.start(
        lambda task_status: server.serve(host="127.0.0.1", port=0, task_status=task_status)
    )
    return port


@pytest.fixture
async def upstream() -> AsyncIterator[tuple[int, list[str]]]:
    """A resolver of the test's own on loopback: every A question gets 192.0.2.1."""
    asked: list[str] = []
    async with await anyio.create_udp_socket(local_host="127.0.0.1") as udp:
        port = int(udp.extra(anyio.abc.SocketAttribute.local_port))  # noqa: S610  (anyio's typed attribute, not Django)

        async def serve() -> None:
            async for packet, (host, cport) in udp:
                query = dns.message.from_wire(packet)
                asked.append(query.question[0].name.to_text())
                reply = dns.message.make_response(query)
                reply.answer.append(
                    dns.rrset.from_text(query.question[0].name, 60, "IN", "A", "192.0.2.1")
                )
                await udp.sendto(reply.to_wire(), host, cport)

        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            yield port, asked
            tg.cancel_scope.cancel()


def server(upstreams: tuple[tuple[str, int], ...] = ()) -> ClusterDNS:
    zone: Callable[[], ClusterZone] = lambda: ZONE  # noqa: E731
    return ClusterDNS(config=DNSConfig(upstreams=upstreams, forward_timeout=2.0), zone=zone)


async def test_the_server_answers_over_udp_and_tcp() -> None:
    async with anyio.create_task_group() as tg:
        port = await start(tg, server())
        query = dns.message.make_query("web.default.svc.cluster.local", "A")
        udp = await dns.asyncquery.udp(query, "127.0.0.1", port=port, timeout=5)
        tcp = await dns.asyncquery.tcp(query, "127.0.0.1", port=port, timeout=5)
        assert answers(udp) == answers(tcp) == ["10.96.0.10"]
        tg.cancel_scope.cancel()


async def test_a_second_server_on_the_same_address_is_refused_naming_the_way_out() -> None:
    async with anyio.create_task_group() as tg:
        port = await start(tg, server())
        with pytest.raises(errors.NetworkError) as refused:
            await server().serve(host="127.0.0.1", port=port)
        assert str(refused.value).startswith(f"cluster DNS cannot listen on 127.0.0.1:{port}/udp")
        assert "--no-dns-server" in str(refused.value)
        tg.cancel_scope.cancel()


async def test_other_names_are_forwarded_to_the_configured_resolver(
    upstream: tuple[int, list[str]],
) -> None:
    up_port, asked = upstream
    async with anyio.create_task_group() as tg:
        port = await start(tg, server(upstreams=(("127.0.0.1", up_port),)))
        query = dns.message.make_query("example.org", "A")
        reply = await dns.asyncquery.udp(query, "127.0.0.1", port=port, timeout=5)
        assert (reply.id, answers(reply)) == (query.id, ["192.0.2.1"])
        cluster = dns.message.make_query("web.default.svc.cluster.local", "A")
        await dns.asyncquery.udp(cluster, "127.0.0.1", port=port, timeout=5)
        tg.cancel_scope.cancel()
    assert asked == ["example.org."]


async def test_without_a_resolver_other_names_fail_and_nothing_is_sent() -> None:
    async with anyio.create_task_group() as tg:
        port = await start(tg, server())
        query = dns.message.make_query("example.org", "A")
        reply = await dns.asyncquery.udp(query, "127.0.0.1", port=port, timeout=5)
        assert reply.rcode() == dns.rcode.SERVFAIL
        tg.cancel_scope.cancel()


async def test_an_answer_too_big_for_udp_is_truncated_and_whole_over_tcp() -> None:
    pods = tuple(
        Endpoint(ip=f"10.137.1.{i}", ready=True, pod=f"p{i}", uid=f"u{i}", ports=())
        for i in range(1, 60)
    )
    big = ClusterZone.build(
        domain="cluster.local",
        services=[service("many", clusterIP="None")],
        endpoints={("default", "many"): ServiceEndpoints("default", "many", pods)},
    )
    dns_server = ClusterDNS(config=DNSConfig(), zone=lambda: big)
    async with anyio.create_task_group() as tg:
        port = await start(tg, dns_server)
        query = dns.message.make_query("many.default.svc.cluster.local", "A", use_edns=False)
        udp = await dns.asyncquery.udp(query, "127.0.0.1", port=port, timeout=5)
        tcp = await dns.asyncquery.tcp(query, "127.0.0.1", port=port, timeout=5)
        assert udp.flags & dns.flags.TC
        assert len(answers(tcp)) == 59
        tg.cancel_scope.cancel()


async def test_garbage_gets_no_answer_and_does_not_stop_the_server() -> None:
    async with anyio.create_task_group() as tg:
        port = await start(tg, server())
        async with await anyio.create_connected_udp_socket(
            remote_host="127.0.0.1", remote_port=port
        ) as s:
            await s.send(b"\x00\x01garbage")
        query = dns.message.make_query("web.default.svc.cluster.local", "A")
        reply = await dns.asyncquery.udp(query, "127.0.0.1", port=port, timeout=5)
        assert answers(reply) == ["10.96.0.10"]
        tg.cancel_scope.cancel()


async def test_answers_asked_together_are_all_sent_and_the_server_keeps_running() -> None:
    # A resolver asks A and AAAA together (busybox's nslookup, glibc).
    slow = server()
    async with anyio.create_task_group() as tg:
        port = await start(tg, slow)
        async with await anyio.create_connected_udp_socket(
            remote_host="127.0.0.1", remote_port=port
        ) as s:
            queries = [
                dns.message.make_query("web.default.svc.cluster.local", kind)
                for kind in ("A", "AAAA") * 4
            ]
            for query in queries:
                await s.send(query.to_wire())
            got: set[int] = set()
            with anyio.fail_after(5):
                while len(got) < len(queries):
                    got.add(dns.message.from_wire(await s.receive()).id)
        assert got == {q.id for q in queries}
        tg.cancel_scope.cancel()


@dataclass
class SilentResolver:
    """A resolver of the test's own on loopback that reads every query and answers none
    (a node resolver that cannot reach its own upstreams); ``heard`` gets each query."""

    port: int
    heard: anyio.abc.ObjectReceiveStream[bytes]


@pytest.fixture
async def silent_upstream() -> AsyncIterator[SilentResolver]:
    send, heard = anyio.create_memory_object_stream[bytes](math.inf)
    async with await anyio.create_udp_socket(local_host="127.0.0.1") as udp, send, heard:
        port = int(udp.extra(anyio.abc.SocketAttribute.local_port))  # noqa: S610  (anyio's typed attribute, not Django)

        async def swallow() -> None:
            async for packet, _ in udp:
                await send.send(packet)

        async with anyio.create_task_group() as tg:
            tg.start_soon(swallow)
            yield SilentResolver(port=port, heard=heard)
            tg.cancel_scope.cancel()


def waiting_forever(port: int) -> ClusterDNS:
    config = DNSConfig(upstreams=(("127.0.0.1", port),), forward_timeout=3600.0)
    return ClusterDNS(config=config, zone=lambda: ZONE)


async def send_forwarded(port: int, count: int) -> None:
    """``count`` queries for names outside the cluster, sent; their answers not read."""
    queries = [dns.message.make_query(f"name{i}.example.org", "AAAA") for i in range(count)]
    async with await anyio.create_connected_udp_socket(
        remote_host="127.0.0.1", remote_port=port
    ) as s:
        for query in queries:
            await s.send(query.to_wire())


async def test_cluster_names_are_answered_while_forwarded_queries_wait_on_a_silent_resolver(
    silent_upstream: SilentResolver,
) -> None:
    async with anyio.create_task_group() as tg:
        port = await start(tg, waiting_forever(silent_upstream.port))
        await send_forwarded(port, MAX_INFLIGHT + MAX_FORWARDS)
        query = dns.message.make_query("web.default.svc.cluster.local", "A")
        reply = await dns.asyncquery.udp(query, "127.0.0.1", port=port, timeout=5)
        assert answers(reply) == ["10.96.0.10"]
        tg.cancel_scope.cancel()


async def test_a_forwarded_query_beyond_the_limit_is_refused_not_dropped(
    silent_upstream: SilentResolver,
) -> None:
    async with anyio.create_task_group() as tg:
        port = await start(tg, waiting_forever(silent_upstream.port))
        await send_forwarded(port, MAX_FORWARDS)
        with anyio.fail_after(5):
            for _ in range(MAX_FORWARDS):
                await silent_upstream.heard.receive()
        query = dns.message.make_query("one-more.example.org", "A")
        reply = await dns.asyncquery.udp(query, "127.0.0.1", port=port, timeout=5)
        assert (reply.id, reply.rcode()) == (query.id, dns.rcode.REFUSED)
        tg.cancel_scope.cancel()


async def test_with_port_0_a_udp_port_taken_for_tcp_is_given_up_for_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = dns_server._bound_socket
    refused: list[int] = []

    def bound(host: str, port: int, kind: socket.SocketKind) -> socket.socket:
        if kind == socket.SOCK_STREAM and not refused:
            refused.append(port)
            raise OSError(errno.EADDRINUSE, "Address already in use")
        return real(host, port, kind)

    monkeypatch.setattr(dns_server, "_bound_socket", bound)
    async with anyio.create_task_group() as tg:
        port = await start(tg, ClusterDNS(config=DNSConfig(), zone=lambda: ZONE))
        assert refused
        assert port != refused[0]
        tg.cancel_scope.cancel()


async def test_a_fixed_port_taken_for_tcp_is_an_error_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = dns_server._bound_socket

    def bound(host: str, port: int, kind: socket.SocketKind) -> socket.socket:
        if kind == socket.SOCK_STREAM:
            raise OSError(errno.EADDRINUSE, "Address already in use")
        return real(host, port, kind)

    monkeypatch.setattr(dns_server, "_bound_socket", bound)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    server = ClusterDNS(config=DNSConfig(), zone=lambda: ZONE)
    with pytest.raises(errors.NetworkError, match=f"127.0.0.1:{free}/tcp"):
        await server.serve(host="127.0.0.1", port=free)


# -- who is answered ---------------------------------------------------------------------

PODS = (ipaddress.ip_network("10.137.0.0/16"), ipaddress.ip_network("fd00:ac1::/64"))
NODE_OWN = {ipaddress.ip_address("192.168.1.10"), ipaddress.ip_address("2001:db8::10")}


@pytest.mark.parametrize(
    ("client", "pod_networks", "expected"),
    [
        ("10.137.0.5", PODS, True),
        ("10.137.0.1", PODS, True),
        ("fd00:ac1::5", PODS, True),
        ("::ffff:10.137.0.5", PODS, True),
        ("192.168.1.10", PODS, True),
        ("2001:db8::10", PODS, True),
        ("::ffff:192.168.1.10", PODS, True),
        ("192.168.1.10", (), True),
        ("192.168.1.20", PODS, False),
        ("10.138.0.5", PODS, False),
        ("2001:db8::20", PODS, False),
        ("fe80::1%eth0", PODS, False),
        ("::ffff:192.168.1.20", PODS, False),
        ("10.137.0.5", (), False),
        ("", PODS, False),
        ("not-an-address", PODS, False),
    ],
)
def test_the_pod_network_and_the_node_are_answered_and_nobody_else(
    client: str, pod_networks: tuple[Any, ...], expected: bool
) -> None:
    def node_own(address: IPAddress) -> bool:
        return address in NODE_OWN

    assert client_allowed(client, pod_networks=pod_networks, is_node_address=node_own) is expected


@pytest.mark.parametrize(
    ("address", "own"),
    [("127.0.0.1", True), ("127.0.0.53", True), ("::1", True), ("192.0.2.200", False)],
)
def test_the_node_knows_its_own_addresses_from_its_routes_without_sending_anything(
    address: str, own: bool
) -> None:
    assert is_node_address(ipaddress.ip_address(address)) is own


async def test_a_client_neither_pod_nor_node_is_refused_every_name_over_udp_and_tcp(
    upstream: tuple[int, list[str]],
) -> None:
    up_port, asked = upstream
    config = DNSConfig(upstreams=(("127.0.0.1", up_port),), pod_networks=("127.0.0.2/32",))
    stranger = ClusterDNS(config=config, zone=lambda: ZONE, is_node_address=lambda a: False)
    cluster = dns.message.make_query("web.default.svc.cluster.local", "A")
    other = dns.message.make_query("example.org", "A")
    async with anyio.create_task_group() as tg:
        port = await start(tg, stranger)
        refused = [
            await ask(query, "127.0.0.1", port=port, timeout=5)
            for query in (cluster, other)
            for ask in (dns.asyncquery.udp, dns.asyncquery.tcp)
        ]
        pod = await dns.asyncquery.udp(other, "127.0.0.1", port=port, timeout=5, source="127.0.0.2")
        tg.cancel_scope.cancel()
    assert [(r.rcode(), r.answer) for r in refused] == [(dns.rcode.REFUSED, [])] * 4
    assert [r.id for r in refused] == [cluster.id, cluster.id, other.id, other.id]
    assert (stranger.refused, asked) == (4, ["example.org."])
    assert answers(pod) == ["192.0.2.1"]
