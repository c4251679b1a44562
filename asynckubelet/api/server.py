"""The node's unauthenticated HTTP endpoint: what the kubelet's read-only port serves.

Health checks and Prometheus scrape a kubelet without credentials: ``/healthz`` and
``/metrics`` (Prometheus text) answer here, and nothing else. Pod specs (environment values
among them), containers' output and every verb that changes something go through an API
that authenticates its client: the local API on the state dir's unix socket
(:mod:`asynckubelet.api.localapi`, the daemon's own user or root) or, in cluster mode, the
kubelet API (:mod:`asynckubelet.cluster.kubeletapi`). The default address is loopback;
listening on any other address must be asked for explicitly.

A web page in the user's browser can make it send requests to ``127.0.0.1:10255`` under a
name of the page's choosing that resolves to loopback (DNS rebinding), and read the
answers: so a request whose ``Host`` is not the address it came in on (or ``localhost``,
on loopback, or a name the server was told to accept) is refused with 403.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable

import anyio
import anyio.abc
from aiohttp import web

from asynckubelet import httpbounds
from asynckubelet._logging import logger
from asynckubelet.api.endpoints import (
    DEFAULT_LIMITS,
    NODE_KEY,
    bound_port,
    healthz,
    metrics,
    serve_site,
)
from asynckubelet.node.kubelet import Kubelet

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 10255
HOSTS_KEY = web.AppKey("allowed_hosts", frozenset[str])
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
PUBLIC_ROUTES: dict[str, Callable[[web.Request], Awaitable[web.StreamResponse]]] = {
    "/healthz": healthz,
    "/metrics": metrics,
}
"""Every path the endpoint serves, all without authentication, as the kubelet's
read-only port would: health and Prometheus metrics, nothing a pod wrote or was given."""


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
            f"refusing to listen on {host}: the endpoint has no authentication; "
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


def create_app(
    node: Kubelet, *, host: str = DEFAULT_HOST, allowed_hosts: Iterable[str] = ()
) -> web.Application:
    """The endpoint for ``node`` (``/healthz`` and ``/metrics``), served on ``host``;
    ``allowed_hosts`` are further names clients may use in ``Host`` (addresses need no
    listing)."""
    app = web.Application(middlewares=[check_host])
    app[NODE_KEY] = node
    app[HOSTS_KEY] = _allowed_names(host, allowed_hosts)
    for path, handler in PUBLIC_ROUTES.items():
        app.router.add_get(path, handler)
    return app


async def serve_http(
    node: Kubelet,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    allow_remote: bool = False,
    allowed_hosts: Iterable[str] = (),
    limits: httpbounds.Limits = DEFAULT_LIMITS,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the endpoints until cancelled; reports the bound port when started.

    ``allowed_hosts`` are names besides the listen address that clients may send as
    ``Host`` (a DNS name of the node, say); ``limits`` bound connections and requests."""
    check_listen(host, allow_remote=allow_remote)

    def started(site: web.BaseSite) -> None:
        bound = bound_port(site, port)
        logger.info("serving on http://{}:{}", host, bound)
        task_status.started(bound)

    await serve_site(
        create_app(node, host=host, allowed_hosts=allowed_hosts),
        httpbounds.TCP(host, port),
        started,
        limits=limits,
    )


__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "PUBLIC_ROUTES",
    "check_listen",
    "create_app",
    "host_allowed",
    "parse_listen",
    "serve_http",
]
