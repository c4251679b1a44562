"""The node's Kubernetes API on its unix socket: what the command line asks.

One node, one truth: ``get``, ``describe``, ``apply``, ``delete``, ``logs`` and ``exec``
ask the daemon that runs the pods instead of rebuilding its view from Docker and files,
so they see its node name, its Pod Security level and its objects, and answer in
milliseconds under load. The socket (``<state dir>/api.sock``, mode 0600,
:mod:`asynckubelet.node.daemon`) serves the very app of the TLS endpoint
(:func:`asynckubelet.api.kube.server.create_app`): the same paths, objects, tables,
watches and ``Status`` errors. Only authentication differs: each connection is
authenticated by the kernel's record of its peer (``SO_PEERCRED``,
:mod:`asynckubelet.peercred`), and only the daemon's own user and root are served, so it
needs no certificate, and a web page cannot reach it at all (the TCP endpoint of
:mod:`asynckubelet.api.server` serves only health and metrics).

Besides the Kubernetes API, the socket answers ``/metrics`` and the node's own
``/apis/local.asynckubelet/v1/apply`` (manifest texts in; each object's verdict,
``created``, ``configured`` or ``unchanged``, out, or 422 with every field error and
nothing applied). The daemon's effective configuration, which no Kubernetes object carries,
is the ``node.json`` it publishes beside the socket. Admission happens in
:mod:`asynckubelet.api.apply`, with the daemon's level, node name and namespace policy,
and with the Namespaces it stores.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

import anyio
import anyio.abc
from aiohttp import web

from asynckubelet import hostfs, httpbounds, peercred
from asynckubelet._logging import logger
from asynckubelet.api.answers import LOCAL_PREFIX, refusal, status
from asynckubelet.api.apply import apply
from asynckubelet.api.endpoints import DEFAULT_LIMITS, metrics, serve_site
from asynckubelet.api.kube import discovery
from asynckubelet.api.kube.nodes import ThisNode, this_node
from asynckubelet.api.kube.server import Handler, create_app, node_of
from asynckubelet.node.daemon import SOCKET_MODE
from asynckubelet.node.kubelet import Kubelet
from asynckubelet.workloads.services import ServiceController

SERVER_ADDRESS = "localhost"
"""The address legacy discovery names on the socket, where there is none."""


@web.middleware
async def _anyone(request: web.Request, handler: Handler) -> web.StreamResponse:
    return await handler(request)


def create_local_app(
    node: Kubelet,
    *,
    this: ThisNode | None = None,
    services: ServiceController | None = None,
    uids: Collection[int] | None = None,
) -> web.Application:
    """The Kubernetes API of ``node`` as the unix socket serves it; ``this`` its Node
    (:func:`~asynckubelet.api.kube.server.node_of`; without it, one naming no engine
    version); ``services`` admits Services and knows their endpoints. Only a client on
    the unix socket whose user ID is in ``uids`` (default: the daemon's own user and root)
    is served (:mod:`asynckubelet.peercred`); an empty ``uids`` serves anyone who can
    connect, which only tests over TCP ask for."""
    allowed = peercred.default_uids() if uids is None else frozenset(uids)
    gate = peercred.only_uids(allowed, refuse=refusal) if allowed else _anyone
    if this is None:
        this = this_node(
            node,
            runtime_version="docker://unknown",
            kubelet_version=discovery.version_info()["gitVersion"],
        )
    app = create_app(node, gate=gate, this=this, server_address=SERVER_ADDRESS, services=services)
    r = app.router
    r.add_get("/metrics", metrics)
    r.add_post(f"{LOCAL_PREFIX}/apply", apply)
    return app


async def serve_local(
    node: Kubelet,
    *,
    path: str,
    services: ServiceController | None = None,
    limits: httpbounds.Limits = DEFAULT_LIMITS,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the API on the unix socket ``path`` (made 0600 before it is announced)
    until cancelled; reports the socket's inode when started. The caller removes a stale
    socket first (:func:`~asynckubelet.node.daemon.claim_socket`). ``limits`` bound
    connections and requests; a refused request is answered with a ``Status``."""
    socket_file = Path(path)
    this = await node_of(node)

    def started(site: web.BaseSite) -> None:
        # A new socket is 0755 under the usual umask: nobody else may write to it (connect)
        # before it is made 0600.
        hostfs.chmod(socket_file.parent, socket_file.name, SOCKET_MODE)
        inode = os.lstat(path).st_ino
        logger.info("local API on {}", path)
        task_status.started(inode)

    await serve_site(
        create_local_app(node, this=this, services=services),
        httpbounds.Unix(path),
        started,
        limits=limits,
        refuse=status,
    )


__all__ = ["create_local_app", "serve_local", "status"]
