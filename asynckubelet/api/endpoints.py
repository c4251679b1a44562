"""The kubelet's read-only HTTP handlers, shared by the node's endpoints
(:mod:`asynckubelet.api.server`), its local API and the kubelet API of cluster node mode.

``/healthz``, ``/pods`` (a v1 ``PodList`` of the node's pods), ``/metrics`` (Prometheus
text) and ``/containerLogs/{namespace}/{pod}/{container}`` with the kubelet's query
parameters (``follow``, ``previous``, ``tailLines``, ``sinceSeconds``, ``timestamps``,
``limitBytes``), numeric ones checked as the API server checks ``PodLogOptions``: a bad
value is a 400 naming it. The application holds the node under :data:`NODE_KEY`; who may
ask is the server's business. :func:`serve_site` runs any of the three applications on its
socket until cancelled, with the bounds of :mod:`asynckubelet.httpbounds` on connections,
headers and bodies.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable

import anyio
from aiohttp import web

from asynckubelet import errors, httpbounds
from asynckubelet._logging import logger
from asynckubelet.docker import LogLine
from asynckubelet.node.kubelet import Kubelet

NODE_KEY = web.AppKey("node", Kubelet)
INT64_MAX = 2**63 - 1
DEFAULT_LIMITS = httpbounds.Limits()


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


def flag_param(request: web.Request, name: str) -> bool:
    return request.query.get(name, "").lower() in ("1", "true", "yes")


def int_param(request: web.Request, name: str, *, minimum: int, message: str) -> int | None:
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
    tail = int_param(request, "tailLines", minimum=0, message="must be greater than or equal to 0")
    since_seconds = int_param(request, "sinceSeconds", minimum=1, message="must be greater than 0")
    limit = int_param(request, "limitBytes", minimum=1, message="must be greater than 0")
    since = max(0.0, time.time() - since_seconds) if since_seconds is not None else None
    response = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})
    async with contextlib.AsyncExitStack() as stack:
        try:
            lines = await stack.enter_async_context(
                node.logs(
                    ns,
                    name,
                    container=container,
                    follow=flag_param(request, "follow"),
                    previous=flag_param(request, "previous"),
                    tail=tail,
                    timestamps=flag_param(request, "timestamps"),
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

        async def send(line: LogLine) -> bool:
            """Write one line as the container wrote it; False once ``limitBytes`` are
            written (the kubelet's limit cuts the output there, mid-line if need be)."""
            nonlocal left
            data = (line.text + ("\n" if line.newline else "")).encode()
            if left is not None:
                data = data[:left]
                left -= len(data)
            await response.write(data)
            return left is None or left > 0

        if first is not None and await send(first):
            try:
                async for line in lines:
                    if not await send(line):
                        break
            except errors.DockerError as e:
                logger.debug("log stream of {}/{}/{} ended: {}", ns, name, container, e)
    await response.write_eof()
    return response


async def serve_site(
    app: web.Application,
    address: httpbounds.Address,
    started: Callable[[web.BaseSite], None],
    *,
    limits: httpbounds.Limits = DEFAULT_LIMITS,
    refuse: httpbounds.Refusal = httpbounds.text_refusal,
) -> None:
    """Serve ``app`` at ``address`` until cancelled, calling ``started`` once it listens;
    connections, headers and bodies are bounded by ``limits`` (:mod:`asynckubelet.httpbounds`),
    and ``refuse`` words a refusal; requests are cancelled with their client, and at the
    end those in flight get two seconds."""
    runner = httpbounds.Runner(app, limits=limits, refuse=refuse, shutdown_timeout=2.0)
    await runner.setup()
    try:
        listening = httpbounds.Site(runner, address)
        await listening.start()
        started(listening)
        await anyio.sleep_forever()
    finally:
        with anyio.CancelScope(shield=True):
            await runner.cleanup()


def bound_port(site: web.BaseSite, asked: int) -> int:
    """The TCP port ``site`` listens on (``asked`` unless that was 0)."""
    sockets = getattr(site._server, "sockets", None) or []
    return int(sockets[0].getsockname()[1]) if sockets else asked


__all__ = [
    "DEFAULT_LIMITS",
    "INT64_MAX",
    "NODE_KEY",
    "bound_port",
    "container_logs",
    "flag_param",
    "healthz",
    "int_param",
    "metrics",
    "pods",
    "serve_site",
]
