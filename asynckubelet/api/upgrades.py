"""Upgraded connections for exec, attach and port forwarding, as every server of the node
answers them: the kubelet API of cluster mode and the node's Kubernetes API.

A client asks for a stream protocol in one of two ways, and both end in the same
sessions (:mod:`asynckubelet.api.streaming`):

- ``Upgrade: SPDY/3.1`` with ``X-Stream-Protocol-Version`` headers: a ``101`` and SPDY
  frames on the raw connection (:mod:`asynckubelet.api.spdy`); what kubectl before 1.30
  speaks, and its fallback since;
- ``Upgrade: websocket`` with a ``Sec-WebSocket-Protocol``: for exec and attach the
  remotecommand channels (``v5.channel.k8s.io`` first, what kubectl 1.30+ asks), for port
  forwarding ``SPDY/3.1+portforward.k8s.io``, SPDY frames carried in binary messages
  (kubectl 1.31+), so the one port-forward session serves both.

Everything read is bounded: WebSocket messages by ``MAX_MESSAGE``, SPDY by its frame and
header limits, and reading pauses while the session has not taken what came.
"""

from __future__ import annotations

import base64
import contextlib
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import aiohttp
import anyio
import anyio.abc
from aiohttp import web

from asynckubelet._logging import logger
from asynckubelet.api import spdy, streaming

MAX_MESSAGE = 1 << 20
"""Largest WebSocket message taken from a client (kubectl sends 32 KiB at most)."""
TUNNELED_PORTFORWARD = "SPDY/3.1+portforward.k8s.io"
"""The WebSocket subprotocol of port forwarding: SPDY frames in binary messages."""


class _Switching(web.StreamResponse):
    """A 101 response whose body is the upgraded protocol (no length, no chunking)."""

    _length_check = False


class _Feeder:
    """What arrives on an upgraded connection, as aiohttp hands it to a payload parser."""

    def __init__(self, transport: Any) -> None:
        self.send, self.receive = anyio.create_memory_object_stream[bytes](math.inf)
        self.transport = transport
        self.paused = False

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.send.send_nowait(bytes(data))
        if self.send.statistics().current_buffer_used > 64 and not self.paused:
            self.paused = True
            self.transport.pause_reading()
        return False, b""

    def feed_eof(self) -> None:
        self.send.close()

    async def chunks(self) -> AsyncIterator[bytes]:
        async for data in self.receive:
            if self.paused and self.receive.statistics().current_buffer_used < 16:
                self.paused = False
                with contextlib.suppress(Exception):
                    self.transport.resume_reading()
            yield data


@dataclass(frozen=True)
class Upgrade:
    """An upgraded connection: its SPDY session, the streams the client opens, the
    negotiated protocol, and the response the handler returns."""

    session: spdy.Session
    streams: streaming.StreamCollector
    protocol: str
    response: web.StreamResponse


@contextlib.asynccontextmanager
async def _session(
    write: Callable[[bytes], Awaitable[None]], chunks: AsyncIterator[bytes]
) -> AsyncIterator[tuple[spdy.Session, streaming.StreamCollector]]:
    """A SPDY session fed from ``chunks`` while the body runs."""
    collector = streaming.StreamCollector()
    session = spdy.Session(write, on_stream=collector)

    async def read() -> None:
        try:
            async for data in chunks:
                await session.feed(data)
        except (spdy.ProtocolError, anyio.BrokenResourceError) as e:
            logger.debug("spdy session ended: {}", e)
        finally:
            session.connection_lost()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            try:
                yield session, collector
            finally:
                tg.cancel_scope.cancel()
    finally:
        session.release()


@contextlib.asynccontextmanager
async def upgraded(request: web.Request, protocols: Sequence[str]) -> AsyncIterator[Upgrade]:
    """Answer 101 with SPDY/3.1 and the negotiated protocol; the session runs meanwhile."""
    if request.headers.get("Upgrade", "").lower() != "spdy/3.1" or "upgrade" not in (
        request.headers.get("Connection", "").lower()
    ):
        raise web.HTTPBadRequest(
            text="unable to upgrade: missing upgrade headers in request: "
            f"Connection={request.headers.get('Connection', '')!r} "
            f"Upgrade={request.headers.get('Upgrade', '')!r}\n"
        )
    try:
        protocol = streaming.negotiate(
            request.headers.getall(streaming.STREAM_PROTOCOL_HEADER, []), protocols
        )
    except streaming.NegotiationError as e:
        raise web.HTTPForbidden(text=f"{e}\n") from None
    headers = {"Connection": "Upgrade", "Upgrade": "SPDY/3.1"}
    if protocol:
        headers[streaming.STREAM_PROTOCOL_HEADER] = protocol
    response = _Switching(status=101, headers=headers)
    response.force_close()
    feeder = _Feeder(request.transport)
    request.protocol.set_parser(cast(Any, feeder))
    writer = await response.prepare(request)
    if writer is None:
        raise ConnectionResetError("the connection closed before the protocol switch")
    closing = [False]

    async def write(data: bytes) -> None:
        if closing[0] or request.transport is None or request.transport.is_closing():
            raise anyio.BrokenResourceError("connection closed")
        await writer.write(data)

    async with _session(write, feeder.chunks()) as (session, collector):
        try:
            yield Upgrade(session, collector, protocol, response)
        finally:
            closing[0] = True


def wants_websocket(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower() == "websocket"


class WebSocketChannels:
    """:class:`streaming.Channels` over an aiohttp WebSocket: binary messages whose first
    byte is the channel, or on the ``base64`` protocols text with the channel's digit."""

    def __init__(self, ws: web.WebSocketResponse, *, base64_text: bool) -> None:
        self.ws = ws
        self.base64_text = base64_text

    async def send(self, channel: int, data: bytes) -> None:
        if self.base64_text:
            await self.ws.send_str(str(channel) + base64.b64encode(data).decode())
        else:
            await self.ws.send_bytes(bytes([channel]) + data)

    async def receive(self) -> tuple[int, bytes] | None:
        while True:
            message = await self.ws.receive()
            if message.type == aiohttp.WSMsgType.BINARY and message.data:
                return message.data[0], message.data[1:]
            if message.type == aiohttp.WSMsgType.TEXT and message.data:
                with contextlib.suppress(ValueError):
                    return int(message.data[0]), base64.b64decode(message.data[1:])
            elif message.type in (
                aiohttp.WSMsgType.CLOSE,
                aiohttp.WSMsgType.CLOSING,
                aiohttp.WSMsgType.CLOSED,
                aiohttp.WSMsgType.ERROR,
            ):
                return None


async def _websocket(request: web.Request, protocols: Sequence[str]) -> web.WebSocketResponse:
    ws = web.WebSocketResponse(protocols=protocols, max_msg_size=MAX_MESSAGE)
    await ws.prepare(request)
    return ws


async def serve_exec(
    request: web.Request,
    *,
    options: streaming.StreamOptions,
    command: Sequence[str],
    start: streaming.StartExec,
    what: str,
) -> web.StreamResponse:
    """Run one exec (or attach: ``start`` decides) over whichever upgrade the client
    asked for; ``what`` names it in the log."""
    if wants_websocket(request):
        ws = await _websocket(request, streaming.WEBSOCKET_PROTOCOLS)
        protocol = ws.ws_protocol or "channel.k8s.io"
        channels = WebSocketChannels(ws, base64_text="base64" in protocol)
        try:
            code = await streaming.serve_exec_websocket(
                channels, protocol=protocol, options=options, command=command, start=start
            )
        finally:
            with anyio.CancelScope(shield=True):
                await ws.close()
        logger.info("{} (websocket {}): {} ended with {}", what, protocol, list(command), code)
        return ws
    async with upgraded(request, streaming.REMOTECOMMAND_PROTOCOLS) as up:
        code = await streaming.serve_exec(
            up.session,
            up.streams,
            protocol=up.protocol,
            options=options,
            command=command,
            start=start,
        )
    logger.info("{} (spdy {}): {} ended with {}", what, up.protocol, list(command), code)
    return up.response


async def _messages(ws: web.WebSocketResponse) -> AsyncIterator[bytes]:
    async for message in ws:
        if message.type == aiohttp.WSMsgType.BINARY:
            yield message.data
        elif message.type != aiohttp.WSMsgType.TEXT:
            return


async def serve_port_forward(
    request: web.Request, *, pod: str, dial: streaming.Dial
) -> web.StreamResponse:
    """Forward the pod's ports over SPDY, on the connection or tunneled in a WebSocket."""
    if not wants_websocket(request):
        async with upgraded(request, streaming.PORTFORWARD_PROTOCOLS) as up:
            logger.info("port forwarding to {} (spdy {})", pod, up.protocol)
            await streaming.serve_port_forward(up.session, up.streams, pod=pod, dial=dial)
        return up.response
    ws = await _websocket(request, (TUNNELED_PORTFORWARD,))
    if ws.ws_protocol != TUNNELED_PORTFORWARD:
        await ws.close(
            code=aiohttp.WSCloseCode.PROTOCOL_ERROR,
            message=f"port forwarding speaks {TUNNELED_PORTFORWARD} only".encode(),
        )
        return ws
    logger.info("port forwarding to {} (websocket {})", pod, TUNNELED_PORTFORWARD)

    async def write(data: bytes) -> None:
        if ws.closed:
            raise anyio.BrokenResourceError("connection closed")
        await ws.send_bytes(data)

    try:
        async with _session(write, _messages(ws)) as (session, collector):
            await streaming.serve_port_forward(session, collector, pod=pod, dial=dial)
    finally:
        with anyio.CancelScope(shield=True):
            await ws.close()
    return ws


@contextlib.asynccontextmanager
async def tcp_dial(address: str, port: int) -> AsyncIterator[anyio.abc.ByteStream]:
    """A TCP connection to ``address:port`` (a pod's IP)."""
    connection = await anyio.connect_tcp(address, port)
    async with connection:
        yield connection


def container_exec(docker: Any, container_id: str) -> streaming.StartExec:
    """Commands started in the container through the engine's attached exec."""

    @contextlib.asynccontextmanager
    async def start(
        argv: Sequence[str], stdin: bool, tty: bool
    ) -> AsyncIterator[streaming.ExecProcess]:
        from asynckubelet.docker.execs import exec_session

        async with exec_session(docker, container_id, list(argv), stdin=stdin, tty=tty) as p:
            yield p

    return start


def container_attach(docker: Any, container_id: str) -> streaming.StartExec:
    """Sessions attached to the container's main process (no command: it runs already)."""

    @contextlib.asynccontextmanager
    async def start(
        argv: Sequence[str], stdin: bool, tty: bool
    ) -> AsyncIterator[streaming.ExecProcess]:
        from asynckubelet.docker.execs import attach_session

        async with attach_session(docker, container_id, stdin=stdin) as p:
            yield p

    return start


def pod_dial(pod: Any) -> streaming.Dial:
    """How to reach ``pod``'s ports: its IP on the node's pod network (loopback for a pod
    on the host's network); ValueError when it has none yet."""
    status = pod.status
    address = (status.podIP if status is not None else None) or ""
    if pod.spec is not None and pod.spec.hostNetwork:
        address = "127.0.0.1"
    if not address:
        raise ValueError("the pod has no IP address yet")

    def dial(port: int) -> contextlib.AbstractAsyncContextManager[anyio.abc.ByteStream]:
        return tcp_dial(address, port)

    return dial


__all__ = [
    "MAX_MESSAGE",
    "TUNNELED_PORTFORWARD",
    "Upgrade",
    "WebSocketChannels",
    "container_attach",
    "container_exec",
    "pod_dial",
    "serve_exec",
    "serve_port_forward",
    "tcp_dial",
    "upgraded",
    "wants_websocket",
]
