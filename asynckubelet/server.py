"""The node's read-only HTTP endpoints, as the kubelet serves them.

Tools that scrape or probe a kubelet (Prometheus, health checks, scripts that read
``/pods``) work unchanged against this node: ``/healthz``, ``/pods`` (a v1 ``PodList``),
``/metrics`` (Prometheus text) and ``/containerLogs/{namespace}/{pod}/{container}`` with
``follow``, ``tailLines``, ``previous``, ``timestamps``, ``sinceSeconds`` and
``limitBytes``. Nothing here changes a pod. The default address is loopback; listening on
any other address must be asked for explicitly, as the endpoints have no authentication.

Two guards stand in for the authentication a cluster's kubelet has. A web page in the
user's browser can make it send requests to ``127.0.0.1:10255`` under a name of the
page's choosing that resolves to loopback (DNS rebinding), and read the answers: so a
request whose ``Host`` is not the address it came in on (or ``localhost``, on loopback,
or a name the server was told to accept) is refused with 403. And numeric query
parameters are checked as the API server checks ``PodLogOptions``: a bad value is a 400
naming it, never a traceback.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import socket
import time
from collections.abc import Awaitable, Callable, Iterable

import anyio
import anyio.abc
from aiohttp import web
from loguru import logger

from asynckubelet import errors
from asynckubelet.node.kubelet import Kubelet

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 10255
NODE_KEY = web.AppKey("node", Kubelet)
HOSTS_KEY = web.AppKey("allowed_hosts", frozenset[str])
INT64_MAX = 2**63 - 1
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_listen(host: str, *, allow_remote: bool) -> None:
    """Refuse a non-loopback address unless ``allow_remote`` says it is wanted."""
    if not is_loopback(host) and not allow_remote:
        raise ValueError(
            f"refusing to listen on {host}: the endpoints have no authentication; "
            "pass --allow-remote to listen on a non-loopback address"
        )


def split_host(header: str) -> tuple[str, int | None]:
    """``Host`` header value into a lower-case name or address and its port (None when
    absent). Raises ValueError for a malformed value."""
    text = header.strip().lower()
    if text.startswith("["):
        name, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(header)
        port = rest[1:] if rest else None
    else:
        name, sep, port_text = text.rpartition(":")
        if not sep:
            name, port_text = text, ""
        port = port_text if sep else None
        if ":" in name:
            raise ValueError(header)
    if not name or (port is not None and not (port.isdigit() and int(port) <= 65535)):
        raise ValueError(header)
    return name.rstrip("."), int(port) if port is not None else None


def host_allowed(header: str | None, *, local: tuple[str, int], names: Iterable[str] = ()) -> bool:
    """Whether a request that arrived on ``local`` (address, port) with ``Host: header``
    is addressed to this server: the port is the one it arrived on, and the name is that
    address, a loopback name when it arrived on loopback, or one of ``names``."""
    if not header:
        return False
    try:
        name, port = split_host(header)
    except ValueError:
        return False
    address, local_port = local
    if (port if port is not None else 80) != local_port:
        return False
    try:
        wanted = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(wanted, ipaddress.IPv6Address) and wanted.ipv4_mapped is not None:
        wanted = wanted.ipv4_mapped
    accepted = {str(wanted), *(n.lower().rstrip(".") for n in names)}
    if wanted.is_loopback:
        accepted.update(LOOPBACK_NAMES)
    return name in accepted


def _allowed_names(host: str, extra: Iterable[str]) -> frozenset[str]:
    """Names accepted in ``Host`` besides addresses: those given, the listen host when it
    is a name, and this machine's host name when listening beyond loopback."""
    names = set(extra)
    if host and not _is_address(host):
        names.add(host)
    if not is_loopback(host):
        names.add(socket.gethostname())
    return frozenset(n.lower().rstrip(".") for n in names)


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@web.middleware
async def check_host(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Refuse a request whose ``Host`` is not this server (DNS rebinding)."""
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    if not sockname:
        raise web.HTTPForbidden(text="cannot tell which address the request came in on\n")
    local = (str(sockname[0]), int(sockname[1]))
    header = request.headers.get("Host")
    names: frozenset[str] = request.app[HOSTS_KEY]
    if not host_allowed(header, local=local, names=names):
        logger.warning("refused a request for Host {!r} on {}:{}", header, *local)
        raise web.HTTPForbidden(text=f"Host {header!r} is not this server\n")
    return await handler(request)


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) into its parts."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--listen must be HOST:PORT, not {value!r}")
    return host.strip("[]") or DEFAULT_HOST, int(port)


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def pods(request: web.Request) -> web.Response:
    """A v1 ``PodList``, put together from each pod's JSON as the status manager keeps it
    (a pod is serialized once per change, not once per request)."""
    node = request.app[NODE_KEY]
    items = ",".join(node.list_json())
    body = '{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[' + items + "]}"
    return web.Response(text=body, content_type="application/json")


async def metrics(request: web.Request) -> web.Response:
    node = request.app[NODE_KEY]
    return web.Response(
        body=node.metrics.render().encode(),
        headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
    )


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "").lower() in ("1", "true", "yes")


def _int_param(request: web.Request, name: str, *, minimum: int, message: str) -> int | None:
    """A numeric query parameter as ``ValidatePodLogOptions`` checks it (an int64 of at
    least ``minimum``); None when absent; a 400 naming it otherwise."""
    text = request.query.get(name)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise web.HTTPBadRequest(
            text=f"{name}: Invalid value: {json.dumps(text)}: must be an integer\n"
        ) from None
    if value > INT64_MAX:
        raise web.HTTPBadRequest(
            text=f"{name}: Invalid value: {json.dumps(text)}: value out of range\n"
        )
    if value < minimum:
        raise web.HTTPBadRequest(text=f"{name}: Invalid value: {value}: {message}\n")
    return value


async def container_logs(request: web.Request) -> web.StreamResponse:
    node = request.app[NODE_KEY]
    ns = request.match_info["namespace"]
    name = request.match_info["pod"]
    container = request.match_info["container"]
    tail = _int_param(request, "tailLines", minimum=0, message="must be greater than or equal to 0")
    since_seconds = _int_param(request, "sinceSeconds", minimum=1, message="must be greater than 0")
    limit = _int_param(request, "limitBytes", minimum=1, message="must be greater than 0")
    since = max(0.0, time.time() - since_seconds) if since_seconds is not None else None
    response = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})
    async with contextlib.AsyncExitStack() as stack:
        try:
            lines = await stack.enter_async_context(
                node.logs(
                    ns,
                    name,
                    container=container,
                    follow=_flag(request, "follow"),
                    previous=_flag(request, "previous"),
                    tail=tail,
                    timestamps=_flag(request, "timestamps"),
                    since=since,
                )
            )
            first = await anext(lines, None)
        except errors.NotFound as e:
            raise web.HTTPNotFound(text=f"{e}\n") from None
        except errors.DockerError as e:
            raise web.HTTPInternalServerError(text=f"{e}\n") from None
        await response.prepare(request)
        left = limit

        async def send(text: str) -> bool:
            """Write one line; False once ``limitBytes`` are written (the kubelet's limit
            cuts the output there, mid-line if need be)."""
            nonlocal left
            data = (text + "\n").encode()
            if left is not None:
                data = data[:left]
                left -= len(data)
            await response.write(data)
            return left is None or left > 0

        if first is not None and await send(first.text):
            try:
                async for line in lines:
                    if not await send(line.text):
                        break
            except errors.DockerError as e:
                logger.debug("log stream of {}/{}/{} ended: {}", ns, name, container, e)
    await response.write_eof()
    return response


def create_app(
    node: Kubelet, *, host: str = DEFAULT_HOST, allowed_hosts: Iterable[str] = ()
) -> web.Application:
    """The endpoints for ``node``, served on ``host``; ``allowed_hosts`` are further names
    clients may use in ``Host`` (addresses need no listing)."""
    app = web.Application(middlewares=[check_host])
    app[NODE_KEY] = node
    app[HOSTS_KEY] = _allowed_names(host, allowed_hosts)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/pods", pods)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", container_logs)
    return app


async def serve_http(
    node: Kubelet,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    allow_remote: bool = False,
    allowed_hosts: Iterable[str] = (),
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the endpoints until cancelled; reports the bound port when started.

    ``allowed_hosts`` are names besides the listen address that clients may send as
    ``Host`` (a DNS name of the node, say)."""
    check_listen(host, allow_remote=allow_remote)
    runner = web.AppRunner(
        create_app(node, host=host, allowed_hosts=allowed_hosts),
        access_log=None,
        handler_cancellation=True,
        shutdown_timeout=2.0,
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = port
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            bound = int(sockets[0].getsockname()[1])
        logger.info("serving on http://{}:{}", host, bound)
        task_status.started(bound)
        await anyio.sleep_forever()
    finally:
        with anyio.CancelScope(shield=True):
            await runner.cleanup()


__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "check_listen",
    "create_app",
    "host_allowed",
    "parse_listen",
    "serve_http",
]
