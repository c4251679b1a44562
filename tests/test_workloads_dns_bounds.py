"""The cluster DNS server's TCP listener, bounded like the node's HTTP servers: a client
that sends half a query, or never reads its answers, is let go after ``tcp_idle``, and a
connection beyond the cap is closed at once rather than held waiting for a slot."""

from __future__ import annotations

import socket
from typing import cast

import anyio
import anyio.abc
import dns.asyncquery
import dns.message
import pytest
from lightkube.models.core_v1 import Service

from asynckubelet.workloads import dns as dns_server
from asynckubelet.workloads.dns import ClusterDNS, ClusterZone, DNSConfig
from asynckubelet.workloads.services import Endpoint, ServiceEndpoints

pytestmark = pytest.mark.anyio

WAIT = 10.0
"""How long a test waits for what it expects before it fails (never what it asserts)."""
PODS = tuple(
    Endpoint(ip=f"10.137.{i // 250}.{i % 250 + 1}", ready=True, pod=f"p{i}", uid=f"u{i}", ports=())
    for i in range(400)
)
ZONE = ClusterZone.build(domain="cluster.local", services=[], endpoints={})
MANY = cast(
    Service,
    Service.from_dict(
        {"metadata": {"name": "many", "namespace": "default"}, "spec": {"clusterIP": "None"}}
    ),
)
BIG = ClusterZone.build(
    domain="cluster.local",
    services=[MANY],
    endpoints={("default", "many"): ServiceEndpoints("default", "many", PODS)},
)


def _server(zone: ClusterZone, **config: float) -> ClusterDNS:
    return ClusterDNS(config=DNSConfig(**config), zone=lambda: zone)  # type: ignore[arg-type]


async def start(tg: anyio.abc.TaskGroup, server: ClusterDNS) -> int:
    port: int = await tg.start(
        lambda task_status: server.serve(host="127.0.0.1", port=0, task_status=task_status)
    )
    return port


async def until_closed(stream: anyio.abc.SocketStream) -> bytes:
    """What the server sent before it closed the connection."""
    received = b""
    with anyio.fail_after(WAIT):
        while True:
            try:
                received += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError):
                await stream.aclose()
                return received


def framed(query: dns.message.Message) -> bytes:
    wire = query.to_wire()
    return len(wire).to_bytes(2) + wire


async def test_a_tcp_client_that_sends_half_a_query_is_disconnected() -> None:
    async with anyio.create_task_group() as tg:
        port = await start(tg, _server(ZONE, tcp_idle=0.3))
        stream = await anyio.connect_tcp("127.0.0.1", port)
        whole = framed(dns.message.make_query("web.default.svc.cluster.local", "A"))
        await stream.send(whole[: len(whole) // 2])
        assert await until_closed(stream) == b""
        tg.cancel_scope.cancel()


async def test_a_tcp_connection_beyond_the_cap_is_closed_at_once() -> None:
    async with anyio.create_task_group() as tg:
        port = await start(tg, _server(ZONE, tcp_idle=60.0, max_tcp_connections=2))
        held = [await anyio.connect_tcp("127.0.0.1", port) for _ in range(2)]
        query = dns.message.make_query("web.default.svc.cluster.local", "A")
        refused = await anyio.connect_tcp("127.0.0.1", port)
        await refused.send(framed(query))
        assert await until_closed(refused) == b""
        for stream in held:
            await stream.aclose()
        with anyio.fail_after(WAIT):
            while True:
                try:
                    reply = await dns.asyncquery.tcp(query, "127.0.0.1", port=port, timeout=WAIT)
                except EOFError:
                    await anyio.sleep(0.01)
                    continue
                break
        assert reply.id == query.id
        tg.cancel_scope.cancel()


async def test_a_tcp_client_that_never_reads_its_answers_is_let_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = dns_server._bound_socket

    def small_buffers(host: str, port: int, kind: socket.SocketKind) -> socket.socket:
        # The server's connections inherit a send buffer a few answers fill.
        sock = real(host, port, kind)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        return sock

    monkeypatch.setattr(dns_server, "_bound_socket", small_buffers)
    async with anyio.create_task_group() as tg:
        port = await start(tg, _server(BIG, tcp_idle=0.3))
        queries = [
            dns.message.make_query("many.default.svc.cluster.local", "A", use_edns=False)
            for _ in range(200)
        ]
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", port))
            sock.sendall(b"".join(framed(q) for q in queries))
            await anyio.sleep(1.0)
            sock.setblocking(False)
            received = b""
            with anyio.fail_after(WAIT):
                while True:
                    await anyio.wait_readable(sock)
                    try:
                        more = sock.recv(65536)
                    except ConnectionError:
                        break
                    if not more:
                        break
                    received += more
        answered = 0
        while len(received) >= 2 and len(received) >= 2 + int.from_bytes(received[:2]):
            answered += 1
            received = received[2 + int.from_bytes(received[:2]) :]
        assert 0 < answered < len(queries)
        tg.cancel_scope.cancel()
