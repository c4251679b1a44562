"""The bounds every HTTP server of the node is served with, on a real aiohttp server on
loopback: clients that send half a request, or their headers byte by byte, are let go
after the header timeout (a keep-alive client's second request too); at the connection
cap a new client takes the place of the one that has waited longest for its request, or
is closed at once when every connection is being answered; bodies over the application's
limit are refused with 413 naming it; established streams outlive the header timeout."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import anyio
import anyio.abc
import pytest
from aiohttp import web

from asynckubelet import httpbounds
from asynckubelet.api import endpoints

pytestmark = pytest.mark.anyio

BODY_LIMIT = 1024
SHORT = httpbounds.Limits(header_timeout=0.3)
LONG = 60.0
"""A header timeout no test waits for."""
WAIT = 10.0
"""How long a test waits for what it expects before it fails (never what it asserts)."""
PIECES_LIMIT = 64
REQUEST = b"GET /hello HTTP/1.1\r\nHost: test\r\n\r\n"
HOLDING = web.AppKey("holding", list[web.Request])
BOTH_HELD = web.AppKey("both_held", anyio.Event)
RELEASE = web.AppKey("release", anyio.Event)


def application() -> web.Application:
    app = web.Application(client_max_size=BODY_LIMIT)
    app[HOLDING] = []
    app[BOTH_HELD] = anyio.Event()
    app[RELEASE] = anyio.Event()

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello")

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await request.read())

    async def bounded(request: web.Request) -> web.Response:
        body = await httpbounds.read_body(request, PIECES_LIMIT)
        if len(body) > PIECES_LIMIT:
            return web.Response(status=413, text=f"over {PIECES_LIMIT}")
        return web.Response(body=body)

    async def hold(request: web.Request) -> web.Response:
        request.app[HOLDING].append(request)
        if len(request.app[HOLDING]) == 2:
            request.app[BOTH_HELD].set()
        await request.app[RELEASE].wait()
        return web.Response(text="released")

    async def ticks(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        for _ in range(12):
            await response.write(b"tick\n")
            await anyio.sleep(0.1)
        await response.write_eof()
        return response

    async def websocket(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for message in ws:
            await ws.send_str(f"echo {message.data}")
        return ws

    app.router.add_route("*", "/hello", hello)
    app.router.add_post("/echo", echo)
    app.router.add_post("/bounded", bounded)
    app.router.add_get("/hold", hold)
    app.router.add_get("/ticks", ticks)
    app.router.add_get("/ws", websocket)
    return app


Serve = Callable[..., Awaitable[int]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Starts an application under some limits on loopback; its port."""
    async with anyio.create_task_group() as tg:

        async def start(app: web.Application, limits: httpbounds.Limits) -> int:
            async def run(*, task_status: anyio.abc.TaskStatus[int]) -> None:
                await endpoints.serve_site(
                    app,
                    httpbounds.TCP("127.0.0.1", 0),
                    lambda site: task_status.started(endpoints.bound_port(site, 0)),
                    limits=limits,
                )

            port: int = await tg.start(run)
            return port

        yield start
        tg.cancel_scope.cancel()


async def connect(port: int, sent: bytes = b"") -> anyio.abc.SocketStream:
    stream = await anyio.connect_tcp("127.0.0.1", port)
    if sent:
        await stream.send(sent)
    return stream


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


async def answer(stream: anyio.abc.SocketStream, ending: bytes) -> bytes:
    """What the server sends until ``ending``."""
    received = b""
    with anyio.fail_after(WAIT):
        while not received.endswith(ending):
            received += await stream.receive()
    return received


async def get(port: int, path: str = "/hello") -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}{path}", timeout=aiohttp.ClientTimeout(WAIT)) as r,
    ):
        return r.status, await r.text()


async def test_a_client_that_sends_half_a_request_line_is_disconnected(serve: Serve) -> None:
    port = await serve(application(), SHORT)
    stalled = await connect(port, b"GET /hel")
    assert await until_closed(stalled) == b""


async def test_a_client_that_sends_nothing_is_disconnected(serve: Serve) -> None:
    port = await serve(application(), SHORT)
    assert await until_closed(await connect(port)) == b""


async def test_a_client_sending_its_headers_byte_by_byte_past_the_timeout_is_disconnected(
    serve: Serve,
) -> None:
    port = await serve(application(), SHORT)
    stream = await connect(port)
    request = b"GET /hello HTTP/1.1\r\nHost: test\r\nX-Slow: " + b"a" * 200 + b"\r\n\r\n"

    async def dribble() -> None:
        for byte in request:
            try:
                await stream.send(bytes([byte]))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
                return
            await anyio.sleep(0.05)

    async with anyio.create_task_group() as tg:
        tg.start_soon(dribble)
        assert await until_closed(stream) == b""


async def test_a_keep_alive_client_that_sends_half_its_second_request_is_disconnected(
    serve: Serve,
) -> None:
    port = await serve(application(), SHORT)
    stream = await connect(port, REQUEST)
    first = await answer(stream, b"hello")
    assert first.startswith(b"HTTP/1.1 200 OK\r\n")
    await stream.send(b"GET /hello HTTP/1.1\r\nHo")
    assert await until_closed(stream) == b""


async def test_a_new_client_at_the_cap_takes_the_place_of_the_longest_stalled_one(
    serve: Serve,
) -> None:
    port = await serve(application(), httpbounds.Limits(header_timeout=LONG, max_connections=4))
    stalled = [await connect(port, b"GET /hello HTTP/1.1\r\n") for _ in range(4)]
    assert await get(port) == (200, "hello")
    assert await until_closed(stalled[0]) == b""
    for stream in stalled[1:]:
        await stream.aclose()


async def test_many_stalled_clients_never_keep_a_request_out(serve: Serve) -> None:
    port = await serve(application(), httpbounds.Limits(header_timeout=LONG, max_connections=8))
    stalled = [await connect(port, b"GET /hel") for _ in range(40)]
    assert await get(port) == (200, "hello")
    for stream in stalled[:32]:
        assert await until_closed(stream) == b""
    for stream in stalled[32:]:
        await stream.aclose()


async def test_beyond_the_cap_a_connection_is_closed_when_every_one_is_being_answered(
    serve: Serve,
) -> None:
    app = application()
    port = await serve(app, httpbounds.Limits(header_timeout=LONG, max_connections=2))
    held = [await connect(port, b"GET /hold HTTP/1.1\r\nHost: test\r\n\r\n") for _ in range(2)]
    with anyio.fail_after(WAIT):
        await app[BOTH_HELD].wait()
    refused = await connect(port, REQUEST)
    assert await until_closed(refused) == b""
    app[RELEASE].set()
    for stream in held:
        assert (await answer(stream, b"released")).startswith(b"HTTP/1.1 200 OK\r\n")
        await stream.aclose()
    assert await get(port) == (200, "hello")


async def test_a_declared_body_over_the_limit_is_refused_with_413_naming_it(
    serve: Serve,
) -> None:
    port = await serve(application(), SHORT)
    stream = await connect(
        port, b"POST /hello HTTP/1.1\r\nHost: test\r\nContent-Length: 1025\r\n\r\n"
    )
    refused = await until_closed(stream)
    assert refused.startswith(b"HTTP/1.1 413 Request Entity Too Large\r\n")
    assert refused.endswith(b"\r\n\r\nRequest entity too large: limit is 1024\n")


async def test_a_streamed_body_over_the_limit_is_refused_with_413_naming_it(
    serve: Serve,
) -> None:
    port = await serve(application(), SHORT)

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(8):
            yield b"x" * 256

    async with (
        aiohttp.ClientSession() as http,
        http.post(f"http://127.0.0.1:{port}/echo", data=chunks()) as r,
    ):
        assert (r.status, await r.text()) == (413, "Request entity too large: limit is 1024\n")
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"http://127.0.0.1:{port}/echo", data=b"x" * BODY_LIMIT) as r,
    ):
        assert (r.status, len(await r.read())) == (200, BODY_LIMIT)


async def test_more_header_fields_than_the_limit_are_a_400_and_the_connection_closes(
    serve: Serve,
) -> None:
    port = await serve(application(), httpbounds.Limits(header_timeout=LONG, max_headers=8))
    fields = b"".join(b"X-Field-%d: v\r\n" % i for i in range(9))
    stream = await connect(port, b"GET /hello HTTP/1.1\r\nHost: test\r\n" + fields + b"\r\n")
    refused = await until_closed(stream)
    assert refused.split(b"\r\n", 1)[0].endswith(b" 400 Bad Request")
    assert refused.endswith(b"\r\n\r\nToo many headers received")
    fine = b"".join(b"X-Field-%d: v\r\n" % i for i in range(7))
    stream = await connect(port, b"GET /hello HTTP/1.1\r\nHost: test\r\n" + fine + b"\r\n")
    assert (await answer(stream, b"hello")).startswith(b"HTTP/1.1 200 OK\r\n")
    await stream.aclose()


async def test_the_header_timeout_lets_a_stalled_client_go_and_a_stream_run_on(
    serve: Serve,
) -> None:
    port = await serve(application(), SHORT)
    async with anyio.create_task_group() as tg:
        streamed: list[tuple[int, str]] = []

        async def follow() -> None:
            streamed.append(await get(port, "/ticks"))

        tg.start_soon(follow)
        stalled = await connect(port, b"GET /ticks HTTP/1.1\r\nHost: te")
        assert await until_closed(stalled) == b""
    assert streamed == [(200, "tick\n" * 12)]


async def test_an_upgraded_websocket_outlives_the_header_timeout_a_stalled_client_does_not(
    serve: Serve,
) -> None:
    port = await serve(application(), SHORT)
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(f"http://127.0.0.1:{port}/ws") as ws,
    ):
        stalled = await connect(port, b"GET /ws HTTP/1.1\r\nUpgrade: websocket\r\n")
        assert await until_closed(stalled) == b""
        for word in ("one", "two", "three"):
            await anyio.sleep(SHORT.header_timeout)
            await ws.send_str(word)
            assert await ws.receive_str(timeout=WAIT) == f"echo {word}"


def post_bounded(length: int) -> bytes:
    return (
        b"POST /bounded HTTP/1.1\r\nHost: test\r\nConnection: close\r\n"
        b"Content-Length: %d\r\n\r\n" % length
    )


async def test_a_body_sent_in_pieces_is_read_whole(serve: Serve) -> None:
    port = await serve(application(), httpbounds.Limits(header_timeout=LONG))
    pieces = [b'{"data": ', b'"a string cut in two', b' by the network"}']
    stream = await connect(port, post_bounded(sum(map(len, pieces))))
    for piece in pieces:
        await anyio.sleep(0.2)
        await stream.send(piece)
    received = await until_closed(stream)
    assert received.startswith(b"HTTP/1.1 200 ")
    assert received.endswith(b"".join(pieces))


async def test_a_body_past_the_limit_is_read_no_further_than_one_byte_over(serve: Serve) -> None:
    port = await serve(application(), httpbounds.Limits(header_timeout=LONG))
    stream = await connect(port, post_bounded(PIECES_LIMIT * 4) + b"x" * PIECES_LIMIT)
    await anyio.sleep(0.2)
    await stream.send(b"y" * PIECES_LIMIT)
    received = await answer(stream, f"over {PIECES_LIMIT}".encode())
    assert received.startswith(b"HTTP/1.1 413 ")
    await stream.aclose()


def test_limits_that_bound_nothing_are_refused() -> None:
    with pytest.raises(ValueError, match="header_timeout must be positive, not 0"):
        httpbounds.Limits(header_timeout=0)
    with pytest.raises(ValueError, match="max_connections must be at least 1, not 0"):
        httpbounds.Limits(max_connections=0)
