"""The node's local API: what the command line asks the running daemon.

One node, one truth: ``get``, ``describe``, ``apply``, ``delete``, ``logs`` and ``exec``
ask the daemon that runs the pods instead of rebuilding its view from Docker and files,
so they see its node name, its Pod Security level and its objects, and answer in
milliseconds under load. The API is served on a unix socket in the state dir, mode 0600
(:mod:`asynckubelet.node.daemon`), and each connection is authenticated by the kernel's
record of its peer (``SO_PEERCRED``, :mod:`asynckubelet.peercred`): only the daemon's own
user and root are served, so it needs no token, and a web page cannot reach it at all
(the TCP endpoint of :mod:`asynckubelet.api.server` serves only health and metrics).

Paths are Kubernetes-shaped where Kubernetes has the verb: ``/api/v1/pods``,
``/api/v1/namespaces/{ns}/pods[/{name}[/log]]``, ``.../events``, ``.../configmaps``,
``.../secrets`` (listed without their values), ``/api/v1/namespaces``; errors are
``Status`` objects. The node's own verbs live under ``/apis/local.asynckubelet/v1``:
``apply`` (manifest texts in; each object's verdict, ``created``, ``configured`` or
``unchanged``, out, or 422 with every field error and nothing applied), ``delete``
(objects by kind, namespace and name; which were deleted) and ``node`` (the effective
configuration). Admission happens here, with the daemon's level, node name and
namespace policy, and with the Namespaces it stores.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
from aiohttp import web
from lightkube.models.core_v1 import Pod

from asynckubelet import errors, hostfs, httpbounds, peercred
from asynckubelet._logging import logger
from asynckubelet.api import rows
from asynckubelet.api.answers import (
    INFO_KEY,
    LOCAL_PREFIX,
    MAX_REQUEST_BYTES,
    SERVICES_KEY,
    STARTED_KEY,
    TERMINATING_KEY,
    InfoSource,
    label_selector,
    listing,
    not_found,
    refusal,
    selected,
    served_pod,
    served_pods,
    status,
    wants_table,
)
from asynckubelet.api.apply import apply, delete
from asynckubelet.api.endpoints import DEFAULT_LIMITS, NODE_KEY, healthz, metrics, serve_site
from asynckubelet.api.endpoints import flag_param as _flag
from asynckubelet.api.objects import (
    get_endpoints,
    get_event,
    get_object,
    get_service,
    list_endpoints,
    list_events,
    list_objects,
    list_services,
)
from asynckubelet.kubectl import pods as pod_printing
from asynckubelet.kubectl import times
from asynckubelet.manifests import kinds as kind_table
from asynckubelet.node import access, operations
from asynckubelet.node.daemon import SOCKET_MODE, DaemonInfo
from asynckubelet.node.kubelet import Kubelet
from asynckubelet.runtime import containers as ctr
from asynckubelet.workloads.services import ServiceController


async def list_pods(request: web.Request) -> web.StreamResponse:
    """The pods (those ``labelSelector`` selects), or with ``watch`` their changes
    (:func:`watch_pods`)."""
    node = request.app[NODE_KEY]
    namespace = request.match_info.get("namespace")
    selector = label_selector(request)
    if _flag(request, "watch"):
        name = None
        fields = request.query.get("fieldSelector", "")
        if fields:
            key, sep, name = fields.partition("=")
            if key != "metadata.name" or not sep:
                return status(400, "BadRequest", f'field label not supported: "{key}"')
        return await watch_pods(
            request, node, namespace=namespace, name=name or None, selector=selector
        )
    pods = [p for p in served_pods(node, namespace) if selected(selector, rows.pod_labels(p))]
    if wants_table(request):
        return web.json_response(rows.pod_table(node.node_name, pods))
    return listing("Pod", (pod_printing.pod_document(p) for p in pods))


async def get_pod(request: web.Request) -> web.Response:
    node = request.app[NODE_KEY]
    name = request.match_info["name"]
    pod = node.get(request.match_info["namespace"], name)
    if pod is None:
        return not_found("pods", name)
    pod = served_pod(node, pod)
    if wants_table(request):
        return web.json_response(rows.pod_table(node.node_name, [pod]))
    return web.json_response(pod_printing.pod_document(pod))


INITIAL_EVENTS_END = "k8s.io/initial-events-end"
"""The annotation of the ``BOOKMARK`` that ends a watch's initial ``ADDED`` events."""


async def watch_pods(
    request: web.Request,
    node: Kubelet,
    *,
    namespace: str | None,
    name: str | None,
    selector: Mapping[str, Any] | None = None,
) -> web.StreamResponse:
    """A Kubernetes watch of the pods, one JSON event per line: an ``ADDED`` for each pod
    there now, a ``BOOKMARK`` annotated ``k8s.io/initial-events-end`` (the API server's
    ``sendInitialEvents``), then ``ADDED``, ``MODIFIED`` and ``DELETED`` as they happen.
    Objects are Pods, or one-row ``Table``s when the client asks for server-side
    printing. A watch that falls behind ends with an ``ERROR`` event carrying the API
    server's ``410 Expired`` Status: list again and watch anew."""

    def wanted(pod: Pod) -> bool:
        pod_name, pod_namespace, _ = ctr.pod_identity(pod)
        return (
            (namespace is None or pod_namespace == namespace)
            and name in (None, pod_name)
            and selected(selector, rows.pod_labels(pod))
        )

    as_table = wants_table(request)
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)

    async def send(kind: str, body: Mapping[str, Any]) -> None:
        await response.write(json.dumps({"type": kind, "object": body}).encode() + b"\n")

    initial = sum(1 for record in node.status.list() if wanted(record.api_object()))
    try:
        async with node.watch() as changes:
            if not initial:
                await send("BOOKMARK", _initial_events_end())
            async for kind, pod in changes:
                if not wanted(pod):
                    continue
                pod = served_pod(node, pod)
                body = (
                    rows.pod_table(node.node_name, [pod])
                    if as_table
                    else pod_printing.pod_document(pod)
                )
                await send(kind, body)
                if initial:
                    initial -= 1
                    if not initial:
                        await send("BOOKMARK", _initial_events_end())
    except errors.ResyncNeeded as e:
        expired = {"kind": "Status", "apiVersion": "v1", "status": "Failure"}
        await send("ERROR", {**expired, "reason": "Expired", "code": 410, "message": str(e)})
    except ConnectionResetError:
        return response
    await response.write_eof()
    return response


def _initial_events_end() -> dict[str, Any]:
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"annotations": {INITIAL_EVENTS_END: "true"}},
    }


async def node_info(request: web.Request) -> web.Response:
    return web.json_response(request.app[INFO_KEY]().to_json())


async def pod_log(request: web.Request) -> web.StreamResponse:
    """The kubelet's ``GetContainerLogs`` with the pod log endpoint's parameters
    (:class:`~asynckubelet.node.operations.PodLogOptions`); with ``follow`` it goes on
    across the container's restarts until the pod will not start it again."""
    node = request.app[NODE_KEY]
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    try:
        options = operations.PodLogOptions.from_query(request.query)
    except ValueError as e:
        raise web.HTTPBadRequest(text=f"{e}\n") from None
    record = node.status.find(namespace, name)
    if record is None:
        return not_found("pods", name)
    pod = record.pod
    try:
        chosen, _ = access.default_container(pod, options.container)
        instance = await access.container_instance(
            node.runtime, pod, container=chosen, previous=options.previous, reported=record.status
        )
    except errors.NotFound as e:
        return status(400, "BadRequest", str(e))
    except errors.DockerError as e:
        return status(500, "InternalError", str(e))
    response = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})
    await response.prepare(request)
    target = operations.ContainerTarget(pod=pod, container=chosen, container_id=instance.id)
    pieces = operations.container_log(node.runtime, target, options)
    try:
        async for data in pieces:
            await response.write(data)
    except errors.DockerError as e:
        logger.debug("log stream of {}/{}/{} ended: {}", namespace, name, chosen, e)
    finally:
        with anyio.CancelScope(shield=True):
            await pieces.aclose()
    await response.write_eof()
    return response


# -- apply and delete ------------------------------------------------------------------------


def create_local_app(
    node: Kubelet,
    info: DaemonInfo | InfoSource,
    *,
    services: ServiceController | None = None,
    uids: Collection[int] | None = None,
) -> web.Application:
    """The local API of ``node``; ``info`` is its published configuration (or what gives
    it when asked: the daemon completes it once all its listeners are bound);
    ``services`` admits Services and knows their endpoints. Only a client on the unix
    socket whose user ID is in ``uids`` (default: the daemon's own user and root) is
    served (:mod:`asynckubelet.peercred`); an empty ``uids`` serves anyone who can
    connect, which only tests over TCP ask for."""
    allowed = peercred.default_uids() if uids is None else frozenset(uids)
    middlewares = [peercred.only_uids(allowed, refuse=refusal)] if allowed else []
    app = web.Application(client_max_size=MAX_REQUEST_BYTES, middlewares=middlewares)
    app[NODE_KEY] = node
    app[SERVICES_KEY] = services
    app[INFO_KEY] = info if callable(info) else lambda: info
    app[TERMINATING_KEY] = set()
    app[STARTED_KEY] = times.now_utc().strftime("%Y-%m-%dT%H:%M:%SZ")
    r = app.router
    r.add_get("/healthz", healthz)
    r.add_get("/metrics", metrics)
    r.add_get("/api/v1/pods", list_pods)
    r.add_get("/api/v1/namespaces/{namespace}/pods", list_pods)
    r.add_get("/api/v1/namespaces/{namespace}/pods/{name}", get_pod)
    r.add_get("/api/v1/namespaces/{namespace}/pods/{name}/log", pod_log)
    r.add_get("/api/v1/events", list_events)
    r.add_get("/api/v1/namespaces/{namespace}/events", list_events)
    r.add_get("/api/v1/namespaces/{namespace}/events/{name}", get_event)
    r.add_get("/api/v1/namespaces", list_objects("Namespace"))
    r.add_get("/api/v1/namespaces/{name}", get_object("Namespace"))
    for found in kind_table.KINDS.values():
        if found.kind in ("Pod", "Namespace", "Service"):
            continue
        base = f"/apis/{found.api_version}" if found.group else "/api/v1"
        plural = found.plural
        r.add_get(f"{base}/{plural}", list_objects(found.kind))
        r.add_get(f"{base}/namespaces/{{namespace}}/{plural}", list_objects(found.kind))
        r.add_get(f"{base}/namespaces/{{namespace}}/{plural}/{{name}}", get_object(found.kind))
    r.add_get("/api/v1/services", list_services)
    r.add_get("/api/v1/namespaces/{namespace}/services", list_services)
    r.add_get("/api/v1/namespaces/{namespace}/services/{name}", get_service)
    r.add_get("/api/v1/endpoints", list_endpoints)
    r.add_get("/api/v1/namespaces/{namespace}/endpoints", list_endpoints)
    r.add_get("/api/v1/namespaces/{namespace}/endpoints/{name}", get_endpoints)
    r.add_get(f"{LOCAL_PREFIX}/node", node_info)
    r.add_post(f"{LOCAL_PREFIX}/apply", apply)
    r.add_post(f"{LOCAL_PREFIX}/delete", delete)
    return app


async def serve_local(
    node: Kubelet,
    info: DaemonInfo | InfoSource,
    *,
    path: str,
    services: ServiceController | None = None,
    limits: httpbounds.Limits = DEFAULT_LIMITS,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the local API on the unix socket ``path`` (made 0600 before it is announced)
    until cancelled; reports the socket's inode when started. The caller removes a stale
    socket first (:func:`~asynckubelet.node.daemon.claim_socket`). ``limits`` bound
    connections and requests; a refused request is answered with a ``Status``."""
    socket_file = Path(path)

    def started(site: web.BaseSite) -> None:
        # A new socket is 0755 under the usual umask: nobody else may write to it (connect)
        # before it is made 0600.
        hostfs.chmod(socket_file.parent, socket_file.name, SOCKET_MODE)
        inode = os.lstat(path).st_ino
        logger.info("local API on {}", path)
        task_status.started(inode)

    await serve_site(
        create_local_app(node, info, services=services),
        httpbounds.Unix(path),
        started,
        limits=limits,
        refuse=status,
    )


__all__ = ["create_local_app", "serve_local", "status"]
