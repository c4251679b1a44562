"""The node's read-only HTTP endpoints, as the kubelet serves them.

Tools that scrape or probe a kubelet (Prometheus, health checks, scripts that read
``/pods``) work unchanged against this node: ``/healthz``, ``/pods`` (a v1 ``PodList``),
``/metrics`` (Prometheus text) and ``/containerLogs/{namespace}/{pod}/{container}`` with
``follow``, ``tailLines``, ``previous``, ``timestamps`` and ``sinceSeconds``. Nothing here
changes a pod. The default address is loopback; listening on any other address must be
asked for explicitly, as the endpoints have no authentication.
"""

from __future__ import annotations

import ipaddress
import json
import time

import anyio
import anyio.abc
from aiohttp import web
from loguru import logger

from asynckubelet import errors
from asynckubelet.node.kubelet import Kubelet

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 10255
NODE_KEY = web.AppKey("node", Kubelet)


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


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) into its parts."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--listen must be HOST:PORT, not {value!r}")
    return host.strip("[]") or DEFAULT_HOST, int(port)


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def pods(request: web.Request) -> web.Response:
    node = request.app[NODE_KEY]
    body = {
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {},
        "items": [p.to_dict() for p in node.list()],
    }
    return web.Response(text=json.dumps(body), content_type="application/json")


async def metrics(request: web.Request) -> web.Response:
    node = request.app[NODE_KEY]
    return web.Response(
        body=node.metrics.render().encode(),
        headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
    )


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "").lower() in ("1", "true", "yes")


async def container_logs(request: web.Request) -> web.StreamResponse:
    node = request.app[NODE_KEY]
    ns = request.match_info["namespace"]
    name = request.match_info["pod"]
    container = request.match_info["container"]
    try:
        tail = int(request.query["tailLines"]) if "tailLines" in request.query else None
        since_seconds = (
            int(request.query["sinceSeconds"]) if "sinceSeconds" in request.query else None
        )
    except ValueError:
        raise web.HTTPBadRequest(text="tailLines and sinceSeconds must be integers\n") from None
    since = time.time() - since_seconds if since_seconds is not None else None
    lines = node.logs(
        ns,
        name,
        container=container,
        follow=_flag(request, "follow"),
        previous=_flag(request, "previous"),
        tail=tail,
        timestamps=_flag(request, "timestamps"),
        since=since,
    )
    response = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})
    try:
        first = await anext(lines, None)
    except errors.NotFound as e:
        raise web.HTTPNotFound(text=f"{e}\n") from None
    except errors.DockerError as e:
        raise web.HTTPInternalServerError(text=f"{e}\n") from None
    await response.prepare(request)
    if first is not None:
        await response.write((first.text + "\n").encode())
        try:
            async for line in lines:
                await response.write((line.text + "\n").encode())
        except errors.DockerError as e:
            logger.debug("log stream of {}/{}/{} ended: {}", ns, name, container, e)
    await response.write_eof()
    return response


def create_app(node: Kubelet) -> web.Application:
    app = web.Application()
    app[NODE_KEY] = node
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
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the endpoints until cancelled; reports the bound port when started."""
    check_listen(host, allow_remote=allow_remote)
    runner = web.AppRunner(
        create_app(node), access_log=None, handler_cancellation=True, shutdown_timeout=2.0
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
    "parse_listen",
    "serve_http",
]
