"""Bounds on what a client can hold of the node's HTTP servers.

A server that waits as long as a client likes for a request's headers, and takes every
connection offered, is held by anyone who opens connections and sends half a request:
each one keeps a descriptor and a task until the client goes. Every server of the node
(the TCP endpoint, the local API, the kubelet API: :func:`asynckubelet.api.endpoints.serve_site`)
is served through this module, under :class:`Limits`:

- **header timeout**: a connection that has not sent a whole request line and headers
  within ``header_timeout`` seconds of being accepted (its TLS handshake included), or of
  the end of its previous response, is closed, as net/http's ``ReadHeaderTimeout`` does
  (an idle keep-alive connection goes by the same rule). Once a request's headers are in,
  its handler runs as long as it needs: a ``follow`` log stream, an exec or port-forward
  session;
- **connection cap**: at most ``max_connections`` open at once. One more takes the place
  of the connection that has waited longest for its request; when none waits (every one
  is being answered) it is closed at once. Slow clients hold a descriptor for the header
  timeout at most and never keep a well-behaved client out;
- **headers**: a request line or a header field over its size, or more than
  ``max_headers`` fields, is a 400 (about net/http's 1 MiB ``MaxHeaderBytes`` in all);
- **body**: the application's ``client_max_size``. A request that declares a longer body
  is refused with 413 before any handler runs, and one whose body passes it while read
  likewise, in the server's own words (``refuse``: the local API answers a ``Status``).

Connections are accepted here, not by asyncio's server: a TLS handshake happens before
aiohttp's protocol sees the connection, and a client that never finishes its handshake
must be counted and timed from accept like one that never finishes its headers.
"""

from __future__ import annotations

import asyncio
import errno
import math
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from asynckubelet._logging import logger

DEFAULT_HEADER_TIMEOUT = 10.0
"""Seconds; the API server's ``ReadHeaderTimeout`` is 32 s, sized to its 60 s request
timeout: these servers' clients are programs (the CLI, kubectl through the API server,
scrapers), which send a request at once."""
DEFAULT_MAX_CONNECTIONS = 256
BACKLOG = 128
ACCEPT_RETRY_DELAY = 1.0
"""Seconds accepting pauses when the process is out of descriptors (asyncio's own)."""
WARNING_INTERVAL = 60.0
"""Seconds between two warnings that a server is at its connection cap."""

Refusal = Callable[[int, str, str], web.StreamResponse]
"""``(code, reason, message)`` to the response a server refuses a request with."""
_Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, kw_only=True)
class Limits:
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    """Seconds from accept, or from the end of the previous response, to a request's
    whole line and headers (a TLS handshake included)."""
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_line_size: int = 8190
    """Bytes of the request line (aiohttp's default, as the three below)."""
    max_field_size: int = 8190
    """Bytes of one header field."""
    max_headers: int = 128

    def __post_init__(self) -> None:
        if not self.header_timeout > 0:
            raise ValueError(f"header_timeout must be positive, not {self.header_timeout}")
        for name in ("max_connections", "max_line_size", "max_field_size", "max_headers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")


@dataclass(frozen=True)
class TCP:
    """Where a server listens on TCP: every address ``host`` names, over TLS with ``ssl``."""

    host: str
    port: int
    ssl: ssl.SSLContext | None = None


@dataclass(frozen=True)
class Unix:
    """A unix socket; the caller removes a stale one first."""

    path: str


Address = TCP | Unix


async def read_body(request: web.BaseRequest, limit: int) -> bytes:
    """The request's body, read until it ends or passes ``limit`` bytes: a body longer
    than ``limit`` comes back ``limit + 1`` bytes long, the rest unread. (One ``read`` of
    the stream answers with what has arrived so far, a part of a body sent in pieces.)"""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = await request.content.read(limit + 1 - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def text_refusal(code: int, reason: str, message: str) -> web.StreamResponse:
    return web.Response(status=code, text=f"{message}\n")


def too_large(refuse: Refusal, limit: int) -> web.StreamResponse:
    """The API server's answer to a body over its limit."""
    response = refuse(413, "RequestEntityTooLarge", f"Request entity too large: limit is {limit}")
    response.force_close()
    return response


class _Connection:
    """One accepted connection: its socket, then the task that makes its transport (and
    does its TLS handshake), then its handler."""

    __slots__ = ("handler", "handshake", "sock", "wrapped")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.handler: BoundedHandler | None = None
        self.handshake: asyncio.Task[None] | None = None
        self.wrapped = False
        """Whether a transport owns the socket (and alone may close it)."""

    def close(self) -> None:
        """Let the connection go at once: no unsent data and no TLS closing handshake
        keep its descriptor."""
        handler = self.handler
        if handler is not None:
            transport = handler.transport
            handler.force_close()
            if transport is not None:
                transport.abort()
            return
        if self.handshake is not None:
            self.handshake.cancel()
        if not self.wrapped:
            self.sock.close()


class BoundedHandler(web.RequestHandler):
    """aiohttp's protocol for one connection, telling the server when the connection
    waits for a request (made, a response finished) and when it is gone."""

    __slots__ = ("_bounds", "_connection")

    def __init__(self, bounds: BoundedServer, connection: _Connection, **kwargs: Any) -> None:
        super().__init__(bounds, **kwargs)
        self._bounds = bounds
        self._connection = connection

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._connection.handler = self
        super().connection_made(transport)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._bounds.release(self._connection)
        super().connection_lost(exc)

    async def finish_response(
        self, request: web.BaseRequest, resp: web.StreamResponse, start_time: float | None
    ) -> tuple[web.StreamResponse, bool]:
        try:
            return await super().finish_response(request, resp, start_time)
        finally:
            self._bounds.waiting(self._connection)

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """A request the parser refused is answered as aiohttp does, and logged at
        debug level: a client's garbage is no traceback on the node's error output."""
        if status >= 500:
            return super().handle_error(request, status, exc, message)
        logger.debug("{}: refused a request from {}: {}", self._bounds.name, request.remote, exc)
        if request.writer.output_size > 0:
            raise ConnectionError("the response had begun when the request was refused")
        response = web.Response(status=status, text=message or "")
        response.force_close()
        return response


class BoundedServer(web.Server):
    """aiohttp's server of one application, with the connections it accepts bounded."""

    def __init__(
        self,
        handler: _Handler,
        *,
        request_factory: Callable[..., web.BaseRequest],
        name: str,
        limits: Limits,
        refuse: Refusal,
        loop: asyncio.AbstractEventLoop,
        handler_cancellation: bool = False,
        **kwargs: Any,
    ) -> None:
        self.name = name
        self.limits = limits
        self._refuse = refuse
        self._event_loop = loop
        self._handler_kwargs = {
            "loop": loop,
            "max_line_size": limits.max_line_size,
            "max_field_size": limits.max_field_size,
            "max_headers": limits.max_headers,
            **kwargs,
        }
        self._open: set[_Connection] = set()
        self._waiting: dict[_Connection, float] = {}
        """Connections waiting for a request, oldest first, and their deadlines."""
        self._sweep_handle: asyncio.TimerHandle | None = None
        self._handshakes: set[asyncio.Task[None]] = set()
        self._let_go = 0
        self._refused = 0
        self._warned = -math.inf
        super().__init__(
            self._bounded(handler),
            request_factory=self._requested(request_factory),
            handler_cancellation=handler_cancellation,
            loop=loop,
            **kwargs,
        )

    def accept(self, sock: socket.socket, tls: ssl.SSLContext | None) -> None:
        """Take an accepted socket: admitted (in the place of the connection that has
        waited longest for a request, at the cap) or closed at once."""
        if len(self._open) >= self.limits.max_connections:
            admitted = self._evict()
            if admitted:
                self._let_go += 1
            else:
                self._refused += 1
            self._warn_at_cap()
            if not admitted:
                sock.close()
                return
        connection = _Connection(sock)
        self._open.add(connection)
        self.waiting(connection)
        task = self._event_loop.create_task(self._connect(connection, tls))
        connection.handshake = task
        self._handshakes.add(task)
        task.add_done_callback(self._handshakes.discard)

    async def _connect(self, connection: _Connection, tls: ssl.SSLContext | None) -> None:
        """Make the connection's transport; when that fails (a handshake refused or too
        slow, the connection let go), asyncio has closed the transport it made."""
        timeout = self.limits.header_timeout if tls is not None else None
        connection.wrapped = True
        try:
            await self._event_loop.connect_accepted_socket(
                lambda: BoundedHandler(self, connection, **self._handler_kwargs),
                connection.sock,
                ssl=tls,
                ssl_handshake_timeout=timeout,
                ssl_shutdown_timeout=timeout,
            )
        except Exception as e:
            if not isinstance(e, OSError):
                logger.opt(exception=e).error("{}: a connection failed", self.name)
            self.release(connection)
        except asyncio.CancelledError:
            self.release(connection)
            raise
        finally:
            connection.handshake = None

    def waiting(self, connection: _Connection) -> None:
        """``connection`` waits for a request's headers from now on."""
        if connection not in self._open:
            return
        self._waiting.pop(connection, None)
        deadline = self._event_loop.time() + self.limits.header_timeout
        self._waiting[connection] = deadline
        if self._sweep_handle is None:
            self._sweep_handle = self._event_loop.call_at(deadline, self._sweep)

    def release(self, connection: _Connection) -> None:
        self._open.discard(connection)
        self._waiting.pop(connection, None)

    def _sweep(self) -> None:
        """Close the connections whose headers are late."""
        self._sweep_handle = None
        now = self._event_loop.time()
        while self._waiting:
            connection, deadline = next(iter(self._waiting.items()))
            if deadline > now:
                self._sweep_handle = self._event_loop.call_at(deadline, self._sweep)
                return
            self.release(connection)
            connection.close()

    def _warn_at_cap(self) -> None:
        now = time.monotonic()
        if now - self._warned < WARNING_INTERVAL:
            return
        self._warned = now
        logger.warning(
            "{}: at its cap of {} connections; {} waiting for their request let go for newer "
            "ones, {} closed at once as every one was being answered",
            self.name,
            self.limits.max_connections,
            self._let_go,
            self._refused,
        )
        self._let_go = self._refused = 0

    def _evict(self) -> bool:
        for connection in self._waiting:
            self.release(connection)
            connection.close()
            return True
        return False

    def _requested(self, factory: Callable[..., web.BaseRequest]) -> Callable[..., web.BaseRequest]:
        waiting = self._waiting

        def make(message: Any, payload: Any, protocol: Any, *args: Any) -> web.BaseRequest:
            if isinstance(protocol, BoundedHandler):
                waiting.pop(protocol._connection, None)
            return factory(message, payload, protocol, *args)

        return make

    def _bounded(self, handler: _Handler) -> _Handler:
        refuse = self._refuse

        async def handle(request: web.BaseRequest) -> web.StreamResponse:
            limit = request.client_max_size
            length = request.content_length
            if limit and length is not None and length > limit:
                return too_large(refuse, limit)
            try:
                return await handler(request)
            except web.HTTPRequestEntityTooLarge:
                return too_large(refuse, limit)

        return handle

    def pre_shutdown(self) -> None:
        for connection in list(self._open):
            if connection.handler is None:
                self.release(connection)
                connection.close()
        super().pre_shutdown()

    async def shutdown(self, timeout: float | None = None) -> None:
        await super().shutdown(timeout)
        if self._sweep_handle is not None:
            self._sweep_handle.cancel()
            self._sweep_handle = None


class Runner(web.AppRunner):
    """An application's runner whose server is a :class:`BoundedServer`."""

    __slots__ = ("_limits", "_refuse")

    def __init__(
        self, app: web.Application, *, limits: Limits, refuse: Refusal, shutdown_timeout: float
    ) -> None:
        super().__init__(app, access_log=None, shutdown_timeout=shutdown_timeout)
        self._limits = limits
        self._refuse = refuse

    async def _make_server(self) -> web.Server:
        made = await super()._make_server()
        return BoundedServer(
            made.request_handler,
            request_factory=made.request_factory,
            name="",
            limits=self._limits,
            refuse=self._refuse,
            loop=asyncio.get_running_loop(),
            handler_cancellation=True,
            access_log=None,
        )


class _Listener(asyncio.AbstractServer):
    """Accepts on ``sockets`` and hands every connection to ``server``."""

    def __init__(
        self, server: BoundedServer, sockets: list[socket.socket], tls: ssl.SSLContext | None
    ) -> None:
        self._server = server
        self._tls = tls
        self._loop = asyncio.get_running_loop()
        self.sockets = tuple(sockets)
        for sock in self.sockets:
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def _accept(self, sock: socket.socket) -> None:
        for _ in range(BACKLOG):
            try:
                conn, _ = sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as e:
                if e.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    raise
                logger.warning(
                    "{}: cannot accept a connection: {}; accepting again in {:g}s",
                    self._server.name,
                    e,
                    ACCEPT_RETRY_DELAY,
                )
                self._loop.remove_reader(sock.fileno())
                self._loop.call_later(ACCEPT_RETRY_DELAY, self._resume, sock)
                return
            conn.setblocking(False)
            self._server.accept(conn, self._tls)

    def _resume(self, sock: socket.socket) -> None:
        if sock in self.sockets:
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def close(self) -> None:
        for sock in self.sockets:
            self._loop.remove_reader(sock.fileno())
            sock.close()
        self.sockets = ()

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def is_serving(self) -> bool:
        return bool(self.sockets)

    async def start_serving(self) -> None:
        pass

    async def serve_forever(self) -> None:
        raise NotImplementedError

    async def wait_closed(self) -> None:
        pass


class Site(web.BaseSite):
    """A listening site of a :class:`Runner` at ``address``."""

    __slots__ = ("_address",)

    def __init__(self, runner: Runner, address: Address) -> None:
        super().__init__(runner, ssl_context=address.ssl if isinstance(address, TCP) else None)
        self._address = address

    @property
    def name(self) -> str:
        address = self._address
        if isinstance(address, Unix):
            return f"http://unix:{address.path}:"
        scheme = "https" if address.ssl is not None else "http"
        host = f"[{address.host}]" if ":" in address.host else address.host
        sockets = getattr(self._server, "sockets", None)
        port = sockets[0].getsockname()[1] if sockets else address.port
        return f"{scheme}://{host}:{port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        if not isinstance(server, BoundedServer):
            raise TypeError(f"a bounded site needs a bounded runner, not {self._runner!r}")
        sockets = await _listen(self._address)
        self._server = _Listener(server, sockets, self._ssl_context)
        server.name = self.name


async def _listen(address: Address) -> list[socket.socket]:
    """Listening sockets for ``address``, as asyncio's ``create_server`` makes them."""
    infos: list[tuple[Any, ...]]
    if isinstance(address, Unix):
        infos = [(socket.AF_UNIX, socket.SOCK_STREAM, 0, "", address.path)]
    else:
        loop = asyncio.get_running_loop()
        found = await loop.getaddrinfo(
            address.host or None,
            address.port,
            type=socket.SOCK_STREAM,
            flags=socket.AI_PASSIVE,
        )
        infos = list(dict.fromkeys(found))
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, where in infos:
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            if family != socket.AF_UNIX:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(where)
            except OSError as e:
                raise OSError(
                    e.errno,
                    f"error while attempting to bind on address {where!r}: "
                    f"{(e.strerror or '').lower()}",
                ) from None
            sock.listen(BACKLOG)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


__all__ = [
    "DEFAULT_HEADER_TIMEOUT",
    "DEFAULT_MAX_CONNECTIONS",
    "TCP",
    "Address",
    "BoundedHandler",
    "BoundedServer",
    "Limits",
    "Refusal",
    "Runner",
    "Site",
    "Unix",
    "read_body",
    "text_refusal",
    "too_large",
]
