"""The HTTP endpoint's guards: requests for another Host are refused (DNS rebinding), it
serves health and metrics only, and the log handler's bad numeric parameters are a 400
naming them, never a 500 with a traceback."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from asynckubelet.api import endpoints
from asynckubelet.api.server import create_app, host_allowed, split_host
from asynckubelet.docker import LogLine

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("127.0.0.1:10255", ("127.0.0.1", 10255)),
        ("LocalHost:80", ("localhost", 80)),
        ("[::1]:10255", ("::1", 10255)),
        ("example.com.", ("example.com", None)),
        ("[::1]", ("::1", None)),
    ],
)
def test_host_headers_are_split_into_name_and_port(
    header: str, expected: tuple[str, int | None]
) -> None:
    assert split_host(header) == expected


@pytest.mark.parametrize("header", ["", "a:b:c", "[::1", "[::1]x", "host:99999", "host:-1", ":80"])
def test_malformed_host_headers_are_refused(header: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(header)}$"):
        split_host(header)


LOOP = ("127.0.0.1", 10255)
LAN = ("192.0.2.10", 10255)


@pytest.mark.parametrize(
    ("header", "local", "names", "allowed"),
    [
        ("127.0.0.1:10255", LOOP, (), True),
        ("localhost:10255", LOOP, (), True),
        ("[::1]:10255", LOOP, (), True),
        ("attacker.example:10255", LOOP, (), False),
        ("localhost.attacker.example:10255", LOOP, (), False),
        ("127.0.0.1:8080", LOOP, (), False),
        ("127.0.0.1", LOOP, (), False),
        (None, LOOP, (), False),
        ("192.0.2.10:10255", LAN, (), True),
        ("localhost:10255", LAN, (), False),
        ("node1:10255", LAN, ("node1",), True),
        ("NODE1.:10255", LAN, ("node1",), True),
        ("192.0.2.11:10255", LAN, (), False),
        ("127.0.0.1:10255", ("::ffff:127.0.0.1", 10255), (), True),
        ("[::1]:10255", ("::1", 10255), (), True),
        ("127.0.0.1:80", ("127.0.0.1", 80), (), True),
        ("127.0.0.1", ("127.0.0.1", 80), (), True),
    ],
)
def test_a_request_is_served_only_for_its_own_host(
    header: str | None, local: tuple[str, int], names: tuple[str, ...], allowed: bool
) -> None:
    assert host_allowed(header, local=local, names=names) is allowed


@dataclass
class FakeNode:
    """The part of ``Kubelet`` the endpoints read."""

    lines: list[str] = field(default_factory=lambda: ["one", "two", "three"])
    calls: list[dict[str, Any]] = field(default_factory=list)
    open_streams: int = 0
    read: int = 0

    def list_json(self) -> list[str]:
        return []

    def list(self) -> list[Any]:
        return []

    @contextlib.asynccontextmanager
    async def logs(
        self, namespace: str, name: str, **kwargs: Any
    ) -> AsyncIterator[AsyncIterator[LogLine]]:
        self.calls.append(kwargs)

        async def lines() -> AsyncIterator[LogLine]:
            for text in self.lines:
                self.read += 1
                yield LogLine(text=text, stream="stdout")

        self.open_streams += 1
        try:
            yield lines()
        finally:
            self.open_streams -= 1


@pytest.fixture
async def endpoint() -> AsyncIterator[TestClient[Any, Any]]:
    app = create_app(FakeNode())  # type: ignore[arg-type]
    async with TestClient(TestServer(app, host="127.0.0.1")) as c:
        yield c


@pytest.fixture
async def client() -> AsyncIterator[tuple[TestClient[Any, Any], FakeNode]]:
    """The log handler the kubelet API serves, on an application of its own."""
    node = FakeNode()
    app = web.Application()
    app[endpoints.NODE_KEY] = node  # type: ignore[misc]
    app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", endpoints.container_logs)
    async with TestClient(TestServer(app, host="127.0.0.1")) as c:
        yield c, node


async def test_a_request_for_a_foreign_host_is_refused_with_403(
    endpoint: TestClient[Any, Any],
) -> None:
    port = endpoint.server.port
    refused = await endpoint.get("/healthz", headers={"Host": f"rebound.example:{port}"})
    assert refused.status == 403
    assert "rebound.example" in await refused.text()
    assert (await endpoint.get("/healthz", headers={"Host": f"localhost:{port}"})).status == 200
    assert (await endpoint.get("/healthz")).status == 200


@pytest.mark.parametrize(
    "path",
    [
        "/pods",
        "/pods/",
        "/containerLogs/default/web/app",
        "/exec/default/web/app",
        "/api/v1/pods",
        "/api/v1/namespaces/default/pods/web/log",
        "/apis/local.asynckubelet/v1/node",
    ],
)
async def test_the_unauthenticated_endpoint_serves_no_pod_spec_or_output(
    endpoint: TestClient[Any, Any], path: str
) -> None:
    answer = await endpoint.get(path)
    assert answer.status == 404
    assert "web" not in await answer.text()


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("tailLines=-1", "tailLines: Invalid value: -1: must be greater than or equal to 0"),
        ("tailLines=abc", 'tailLines: Invalid value: "abc": must be an integer'),
        ("sinceSeconds=0", "sinceSeconds: Invalid value: 0: must be greater than 0"),
        ("sinceSeconds=1e9", 'sinceSeconds: Invalid value: "1e9": must be an integer'),
        (
            "sinceSeconds=99999999999999999999999",
            'sinceSeconds: Invalid value: "99999999999999999999999": value out of range',
        ),
        ("limitBytes=0", "limitBytes: Invalid value: 0: must be greater than 0"),
        ("limitBytes=-5", "limitBytes: Invalid value: -5: must be greater than 0"),
    ],
)
async def test_a_bad_numeric_log_parameter_is_a_400_that_names_it(
    client: tuple[TestClient[Any, Any], FakeNode], query: str, message: str
) -> None:
    c, node = client
    response = await c.get(f"/containerLogs/default/web/app?{query}")
    assert response.status == 400
    assert (await response.text()).strip() == message
    assert node.calls == []


async def test_limit_bytes_cuts_the_output_there(
    client: tuple[TestClient[Any, Any], FakeNode],
) -> None:
    c, _ = client
    response = await c.get("/containerLogs/default/web/app?limitBytes=6")
    assert response.status == 200
    assert await response.text() == "one\ntw"


async def test_the_log_stream_is_released_once_the_limit_is_reached(
    client: tuple[TestClient[Any, Any], FakeNode],
) -> None:
    c, node = client
    response = await c.get("/containerLogs/default/web/app?limitBytes=6")
    await response.text()
    assert (node.read, node.open_streams) == (2, 0)


async def test_a_huge_since_seconds_asks_for_everything_since_the_epoch(
    client: tuple[TestClient[Any, Any], FakeNode],
) -> None:
    c, node = client
    response = await c.get("/containerLogs/default/web/app?sinceSeconds=9000000000&tailLines=2")
    assert response.status == 200
    assert node.calls[0]["since"] == 0.0
    assert node.calls[0]["tail"] == 2
