"""Exec, attach and port-forward as the node's Kubernetes API and the kubelet API serve
them: v5's close signal ends stdin while the connection stays, a WebSocket client gets the
first protocol it offers that is served (kubectl offers v5 first), port forwarding takes
SPDY tunneled in WebSocket messages and closes a WebSocket without that protocol, and the
API server's refusals come as its ``Status`` before any upgrade."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

import aiohttp
import anyio
import anyio.abc
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from lightkube.models.core_v1 import Container, Pod, PodSpec
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet.api import spdy, streaming, upgrades
from asynckubelet.api.endpoints import NODE_KEY
from asynckubelet.api.kube import streams

pytestmark = pytest.mark.anyio

V5 = "v5.channel.k8s.io"


class Process:
    """A command that echoes its stdin once it ends, then exits with ``code``."""

    def __init__(self, code: int = 0) -> None:
        self.code = code
        self.input = b""
        self.input_closed = anyio.Event()
        self.closes = 0
        self.done = False

    async def read(self) -> tuple[int, bytes] | None:
        if self.done:
            return None
        await self.input_closed.wait()
        self.done = True
        return 1, self.input

    async def write(self, data: bytes) -> None:
        self.input += data

    def close_input(self) -> None:
        self.closes += 1
        self.input_closed.set()

    async def resize(self, *, rows: int, columns: int) -> None:
        return None

    async def exit_code(self) -> int:
        return self.code


def starter(process: Process) -> streaming.StartExec:
    @asynccontextmanager
    async def start(
        command: Sequence[str], stdin: bool, tty: bool
    ) -> AsyncIterator[streaming.ExecProcess]:
        yield process

    return start


class OpenChannels:
    """A WebSocket client that sends ``incoming`` and then stays connected."""

    def __init__(self, incoming: Sequence[tuple[int, bytes]]) -> None:
        self.incoming = list(incoming)
        self.sent: list[tuple[int, bytes]] = []

    async def send(self, channel: int, data: bytes) -> None:
        self.sent.append((channel, data))

    async def receive(self) -> tuple[int, bytes] | None:
        if self.incoming:
            return self.incoming.pop(0)
        await anyio.sleep_forever()
        return None


async def test_v5_close_signal_ends_stdin_and_later_stdin_is_dropped() -> None:
    channels = OpenChannels([(0, b"hello"), (255, b"\x00"), (0, b"late"), (255, b"\x00")])
    process = Process(code=3)
    code = await streaming.serve_exec_websocket(
        channels,
        protocol=V5,
        options=streaming.StreamOptions(stdin=True, stdout=True, stderr=False, tty=False),
        command=["cat"],
        start=starter(process),
    )
    assert code == 3
    assert process.closes == 1
    assert channels.sent[:2] == [(1, b""), (1, b"hello")]
    channel, data = channels.sent[2]
    status = json.loads(data)
    assert (channel, status["reason"], status["details"]["causes"][0]["message"]) == (
        3,
        "NonZeroExitCode",
        "3",
    )


async def test_a_close_signal_for_another_channel_leaves_stdin_open() -> None:
    channels = OpenChannels([(255, b"\x01"), (0, b"still"), (255, b"\x00")])
    process = Process()
    await streaming.serve_exec_websocket(
        channels,
        protocol=V5,
        options=streaming.StreamOptions(stdin=True, stdout=True, stderr=False, tty=False),
        command=["cat"],
        start=starter(process),
    )
    assert channels.sent[1] == (1, b"still")
    assert json.loads(channels.sent[2][1])["status"] == "Success"


# -- over HTTP ------------------------------------------------------------------------------

Client = TestClient[Any, Any]


@asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[Client]:
    async with TestClient(TestServer(app)) as client:
        yield client


async def test_a_websocket_client_gets_the_first_protocol_it_offers_that_is_served() -> None:
    process = Process(code=0)
    process.input_closed.set()

    async def handler(request: web.Request) -> web.StreamResponse:
        options = streaming.StreamOptions.from_query(request.query)
        return await upgrades.serve_exec(
            request, options=options, command=["true"], start=starter(process), what="exec"
        )

    app = web.Application()
    app.router.add_get("/exec", handler)
    async with serving(app) as client:
        ws = await client.ws_connect(
            "/exec?stdout=1", protocols=("v6.channel.k8s.io", V5, "v4.channel.k8s.io")
        )
        assert ws.protocol == V5
        messages = [await ws.receive() for _ in range(3)]
        await ws.close()
    assert [m.data[:1] for m in messages] == [b"\x01", b"\x01", b"\x03"]
    assert json.loads(messages[2].data[1:])["status"] == "Success"


@asynccontextmanager
async def echo_server() -> AsyncIterator[int]:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")

    async def echo(connection: anyio.abc.SocketStream) -> None:
        async with connection:
            async for data in connection:
                await connection.send(b"echo:" + data)

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, echo)
        attributes = cast(Mapping[Any, Callable[[], int]], listener.listeners[0].extra_attributes)
        yield attributes[anyio.abc.SocketAttribute.local_port]()
        tg.cancel_scope.cancel()


def forwarding_app(port: int) -> web.Application:
    async def handler(request: web.Request) -> web.StreamResponse:
        def dial(wanted: int) -> Any:
            return upgrades.tcp_dial("127.0.0.1", port)

        return await upgrades.serve_port_forward(request, pod="ns/web", dial=dial)

    app = web.Application()
    app.router.add_get("/portforward", handler)
    return app


async def test_port_forward_takes_spdy_tunneled_in_websocket_messages() -> None:
    async with echo_server() as port, serving(forwarding_app(port)) as client:
        ws = await client.ws_connect("/portforward", protocols=(upgrades.TUNNELED_PORTFORWARD,))
        assert ws.protocol == upgrades.TUNNELED_PORTFORWARD
        compressor = spdy.HeaderCompressor()
        headers = {"streamType": "error", "port": "80", "requestID": "0"}
        await ws.send_bytes(spdy.syn_stream(compressor, 1, headers))
        await ws.send_bytes(spdy.syn_stream(compressor, 3, {**headers, "streamType": "data"}))
        await ws.send_bytes(spdy.data_frame(3, b"ping"))
        reader = spdy.FrameReader()
        received = b""
        with anyio.fail_after(10):
            while b"echo:ping" not in received:
                message = await ws.receive()
                assert message.type == aiohttp.WSMsgType.BINARY
                for frame in reader.feed(message.data):
                    if isinstance(frame, spdy.DataFrame) and frame.stream_id == 3:
                        received += frame.data
        await ws.close()
    assert received == b"echo:ping"


async def test_port_forward_closes_a_websocket_without_the_tunneling_protocol() -> None:
    async with serving(forwarding_app(1)) as client:
        ws = await client.ws_connect("/portforward", protocols=("v4.channel.k8s.io",))
        message = await ws.receive()
    assert message.type == aiohttp.WSMsgType.CLOSE
    assert message.data == aiohttp.WSCloseCode.PROTOCOL_ERROR


# -- the API server's refusals ---------------------------------------------------------------


class Node:
    def __init__(self) -> None:
        self.pod = Pod(
            metadata=ObjectMeta(name="web", namespace="default", uid="u1"),
            spec=PodSpec(containers=[Container(name="c", image="busybox")]),
        )

    def get(self, namespace: str, name: str) -> Pod | None:
        return self.pod if (namespace, name) == ("default", "web") else None


@pytest.mark.parametrize(
    ("path", "code", "message"),
    [
        ("absent/exec?command=true&stdout=1", 404, 'pods "absent" not found'),
        ("absent/attach?stdout=1", 404, 'pods "absent" not found'),
        ("absent/portforward", 404, 'pods "absent" not found'),
        ("web/exec?command=true&stdout=1&container=x", 400, "container x is not valid for pod web"),
        ("web/exec?stdout=1", 400, "you must specify at least 1 command"),
        (
            "web/exec?command=true",
            400,
            "you must specify at least 1 of stdin, stdout, stderr",
        ),
        ("web/portforward", 400, "pod default/web does not have an IP address yet"),
    ],
)
async def test_a_refusal_is_the_api_servers_status_before_any_upgrade(
    path: str, code: int, message: str
) -> None:
    app = web.Application()
    app[NODE_KEY] = cast(Any, Node())
    streams.add_routes(app.router)
    async with serving(app) as client:
        response = await client.post(f"/api/v1/namespaces/default/pods/{path}")
        body = await response.json()
    assert response.status == code
    assert (body["kind"], body["code"], body["message"]) == ("Status", code, message)
