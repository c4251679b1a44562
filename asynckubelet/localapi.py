"""The node's local API: what the command line asks the running daemon.

One node, one truth: ``get``, ``describe``, ``apply``, ``delete``, ``logs`` and ``exec``
ask the daemon that runs the pods instead of rebuilding its view from Docker and files,
so they see its node name, its Pod Security level and its objects, and answer in
milliseconds under load. The API is served on a unix socket in the state dir, mode 0600
(:mod:`asynckubelet.node.daemon`), and each connection is authenticated by the kernel's
record of its peer (``SO_PEERCRED``, :mod:`asynckubelet.peercred`): only the daemon's own
user and root are served, so it needs no token, and a web page cannot reach it at all
(the TCP endpoint of :mod:`asynckubelet.server` serves only health and metrics).

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

import copy
import json
import os
import time
from collections.abc import AsyncGenerator, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.abc
import anyio.to_thread
from aiohttp import web
from lightkube.models.core_v1 import Namespace, Pod

from asynckubelet import errors, hostfs, httpbounds, peercred
from asynckubelet._logging import logger
from asynckubelet.endpoints import DEFAULT_LIMITS, NODE_KEY, healthz, metrics, serve_site
from asynckubelet.endpoints import flag_param as _flag
from asynckubelet.endpoints import int_param as _int_param
from asynckubelet.errors import FieldError
from asynckubelet.kubectl import objects as object_printing
from asynckubelet.kubectl import pods as pod_printing
from asynckubelet.kubectl import resources, tables, times
from asynckubelet.manifests import Manifests, inspect_manifests_text
from asynckubelet.manifests import kinds as kind_table
from asynckubelet.manifests.decoding import MAX_DOCUMENT_BYTES
from asynckubelet.manifests.workloads import parse_label_selector, selector_matches
from asynckubelet.node import access, operations, printpod
from asynckubelet.node.daemon import API_GROUP, SOCKET_MODE, DaemonInfo
from asynckubelet.node.events import PodEvent
from asynckubelet.node.kubelet import API_SOURCE, Kubelet
from asynckubelet.node.objects import (
    KINDS,
    PLURALS,
    RESOURCES,
    Applied,
    StoredObject,
    object_key,
    secret_summary,
)
from asynckubelet.node.status import is_scheduling_gated
from asynckubelet.runtime import containers as ctr
from asynckubelet.workloads.services import ServiceController, ServiceEndpoints

SERVICES_KEY: web.AppKey[ServiceController | None] = web.AppKey("services")
InfoSource = Callable[[], DaemonInfo]
INFO_KEY: web.AppKey[InfoSource] = web.AppKey("info")
TERMINATING_KEY: web.AppKey[set[str]] = web.AppKey("terminating")
"""Namespaces deleted while pods of theirs may still be stopping."""
STARTED_KEY: web.AppKey[str] = web.AppKey("started")
"""When the local API began (the ``default`` Namespace's creation time when not stored)."""
NAME_LABEL = "kubernetes.io/metadata.name"
"""The label the API server gives every Namespace: its name."""
LOCAL_PREFIX = f"/apis/{API_GROUP}/v1"
MAX_REQUEST_BYTES = 4 * MAX_DOCUMENT_BYTES
"""A request may carry a few manifest texts of the loader's own limit each."""
KIND_OF_PLURAL = {plural: kind for kind, plural in PLURALS.items()}


# -- answers ---------------------------------------------------------------------------------


def status(code: int, reason: str, message: str, **details: Any) -> web.Response:
    """A Kubernetes ``Status``: ``{"kind": "Status", "status": "Failure", ...}``."""
    return web.json_response(_status_body(code, reason, message, **details), status=code)


def _status_body(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def _refusal(code: int, message: str) -> web.Response:
    return status(code, "Unauthorized" if code == 401 else "Forbidden", message)


def not_found(resource: str, name: str) -> web.Response:
    return status(404, "NotFound", f'{resource} "{name}" not found', name=name, kind=resource)


def _list(kind: str, items: Iterable[Mapping[str, Any]]) -> web.Response:
    found = kind_table.info(kind)
    version = found.api_version if found is not None else "v1"
    body = {"kind": f"{kind}List", "apiVersion": version, "metadata": {}, "items": list(items)}
    return web.json_response(body)


def label_selector(request: web.Request) -> dict[str, Any] | None:
    """The request's ``labelSelector`` as a ``LabelSelector`` dict (None: none given);
    :class:`web.HTTPBadRequest` carrying the API server's ``Status`` for one it cannot
    parse."""
    text = request.query.get("labelSelector", "").strip()
    if not text:
        return None
    try:
        return parse_label_selector(text)
    except ValueError as e:
        body = _status_body(400, "BadRequest", str(e))
        raise web.HTTPBadRequest(text=json.dumps(body), content_type="application/json") from None


def _selected(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    return selector is None or selector_matches(selector, labels or {})


def _pod_labels(pod: Pod) -> dict[str, str]:
    return dict((pod.metadata.labels if pod.metadata is not None else None) or {})


def bound_pod(pod: Pod, *, node_name: str) -> Pod:
    """The pod as the API server holds it on this node: bound (``spec.nodeName``) unless
    scheduling gates hold it back. ``pod`` is left as it is; what differs is a new object."""
    if pod.spec is not None and not pod.spec.nodeName and not is_scheduling_gated(pod):
        spec = copy.copy(pod.spec)
        spec.nodeName = node_name
        pod = copy.copy(pod)
        pod.spec = spec
    return pod


def served_pod(node: Kubelet, pod: Pod) -> Pod:
    """The pod as this node's API serves it: bound (:func:`bound_pod`), with the
    ``creationTimestamp`` of the object stored for it (its first apply). ``pod`` is left
    as it is (it may be shared: :meth:`~asynckubelet.node.reads.PodReads.views`)."""
    pod = bound_pod(pod, node_name=node.node_name)
    meta = pod.metadata
    if meta is not None and meta.creationTimestamp is None:
        name, namespace, _ = ctr.pod_identity(pod)
        stored = node.objects.get("Pod", namespace, name)
        created = stored.created() if stored is not None else None
        if created is None and pod.status is not None:
            created = printpod.created(pod)
        if created is not None:
            pod = copy.copy(pod)
            pod.metadata = copy.copy(meta)
            pod.metadata.creationTimestamp = created
    return pod


def _pods(node: Kubelet, namespace: str | None) -> list[Pod]:
    """The node's pods (of one namespace, or of all), by namespace and name, as the API
    server lists them."""
    pods = [
        served_pod(node, p)
        for p in node.views()
        if namespace is None or ctr.pod_identity(p)[1] == namespace
    ]
    return sorted(pods, key=lambda p: (ctr.pod_identity(p)[1], ctr.pod_identity(p)[0]))


# -- reading ---------------------------------------------------------------------------------


def wants_table(request: web.Request) -> bool:
    """Whether the client asks for server-side printing (``Accept: ...;as=Table``)."""
    return "as=Table" in request.headers.get("Accept", "")


def _pod_table(node: Kubelet, pods: Iterable[Pod]) -> web.Response:
    return web.json_response(_pod_rows(node, pods))


def _pod_rows(node: Kubelet, pods: Iterable[Pod]) -> dict[str, Any]:
    now = times.now_utc()
    rows = [
        (
            pod_printing.pod_row(p, node_name=node.node_name, now=now),
            _meta(ctr.pod_identity(p)[0], ctr.pod_identity(p)[1], _pod_labels(p)),
        )
        for p in pods
    ]
    return tables.table(pod_printing.POD_COLUMNS, rows)


def _typed_table(kind: str, objects: Iterable[StoredObject]) -> web.Response:
    now = times.now_utc()
    if kind in object_printing.WORKLOAD_COLUMNS:
        rows = [(object_printing.workload_row(o, now=now), _row_meta(o)) for o in objects]
        return web.json_response(tables.table(object_printing.WORKLOAD_COLUMNS[kind], rows))
    columns = (
        object_printing.SECRET_COLUMNS if kind == "Secret" else object_printing.CONFIGMAP_COLUMNS
    )
    rows = [(object_printing.object_row(o, now=now), _row_meta(o)) for o in objects]
    return web.json_response(tables.table(columns, rows))


def _row_meta(obj: StoredObject) -> dict[str, Any]:
    return _meta(obj.name, obj.namespace, obj.labels)


def _meta(name: str, namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """A table row's object metadata: name, namespace and (for ``--show-labels``) any
    labels."""
    return {"name": name, "namespace": namespace, **({"labels": dict(labels)} if labels else {})}


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
    pods = [p for p in _pods(node, namespace) if _selected(selector, _pod_labels(p))]
    if wants_table(request):
        return _pod_table(node, pods)
    return _list("Pod", (pod_printing.pod_document(p) for p in pods))


async def get_pod(request: web.Request) -> web.Response:
    node = request.app[NODE_KEY]
    name = request.match_info["name"]
    pod = node.get(request.match_info["namespace"], name)
    if pod is None:
        return not_found("pods", name)
    pod = served_pod(node, pod)
    if wants_table(request):
        return _pod_table(node, [pod])
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
            and _selected(selector, _pod_labels(pod))
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
                body = _pod_rows(node, [pod]) if as_table else pod_printing.pod_document(pod)
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


async def list_events(request: web.Request) -> web.Response:
    """Events of a namespace (or of all); ``fieldSelector`` may name
    ``involvedObject.uid`` and ``involvedObject.name``, as kubectl describe asks. As a
    table (``kubectl get events``) they come by when they were last seen."""
    node = request.app[NODE_KEY]
    namespace = request.match_info.get("namespace")
    selector = label_selector(request)
    wanted: dict[str, str] = {}
    for term in filter(None, request.query.get("fieldSelector", "").split(",")):
        key, sep, value = term.partition("=")
        if not sep or key not in ("involvedObject.uid", "involvedObject.name"):
            return status(400, "BadRequest", f'field label not supported: "{key}"')
        wanted[key] = value
    uid = wanted.get("involvedObject.uid")
    events = [
        e
        for e in node.recorder.list(uid=uid)
        if (namespace is None or e.namespace == namespace)
        and wanted.get("involvedObject.name", e.pod) == e.pod
    ]
    bodies = [e.to_v1() for e in _own_events(node, events)]
    bodies = [b for b in bodies if _selected(selector, b["metadata"].get("labels"))]
    if wants_table(request):
        return _events_table(sorted(bodies, key=object_printing.event_seen))
    return _list("Event", bodies)


async def get_event(request: web.Request) -> web.Response:
    """One Event of a namespace, by its name."""
    node = request.app[NODE_KEY]
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    events = [e for e in node.recorder.list() if e.namespace == namespace]
    for body in (e.to_v1() for e in _own_events(node, events)):
        if body["metadata"]["name"] == name:
            return _events_table([body]) if wants_table(request) else web.json_response(body)
    return not_found("events", name)


def _events_table(bodies: Iterable[Mapping[str, Any]]) -> web.Response:
    now = times.now_utc()
    rows = [(object_printing.event_row(b, now=now), b.get("metadata") or {}) for b in bodies]
    return web.json_response(tables.table(object_printing.EVENT_COLUMNS, rows))


def _own_events(node: Kubelet, events: list[PodEvent]) -> list[PodEvent]:
    """``events`` less those of an earlier pod of the same name, as the library lists
    them (:meth:`~asynckubelet.node.reads.PodReads.own_events`)."""
    return node.own_events(events)


def _shown(obj: StoredObject) -> Mapping[str, Any]:
    return secret_summary(obj.body) if obj.kind == "Secret" else obj.body


def list_objects(kind: str) -> Any:
    async def handler(request: web.Request) -> web.Response:
        node = request.app[NODE_KEY]
        selector = label_selector(request)
        if kind == "Namespace":
            spaces = [b for b in _namespaces(request.app) if _selected(selector, _labels(b))]
            if wants_table(request):
                return _namespace_table(request.app, spaces)
            return _list(kind, spaces)
        namespace = request.match_info.get("namespace")
        found = [o for o in node.objects.list(kind, namespace) if _selected(selector, o.labels)]
        if wants_table(request):
            return _typed_table(kind, found)
        return _list(kind, (_shown(o) for o in found))

    return handler


def get_object(kind: str) -> Any:
    async def handler(request: web.Request) -> web.Response:
        node = request.app[NODE_KEY]
        name = request.match_info["name"]
        if kind == "Namespace":
            spaces = [b for b in _namespaces(request.app) if b["metadata"].get("name") == name]
            if not spaces:
                return not_found("namespaces", name)
            if wants_table(request):
                return _namespace_table(request.app, spaces)
            return web.json_response(spaces[0])
        found = node.objects.get(kind, request.match_info.get("namespace"), name)
        if found is None:
            known = resources.by_plural(PLURALS[kind])
            return not_found(known.qualified_plural if known else PLURALS[kind], name)
        if wants_table(request):
            return _typed_table(kind, [found])
        return web.json_response(_shown(found))

    return handler


def _labels(body: Mapping[str, Any]) -> dict[str, str]:
    return dict((body.get("metadata") or {}).get("labels") or {})


def _namespaces(app: web.Application) -> list[dict[str, Any]]:
    """The Namespaces as the API server serves them: those stored, and ``default``
    (always there), each labelled with its name, by name."""
    node = app[NODE_KEY]
    bodies = {o.name: copy.deepcopy(dict(o.body)) for o in node.objects.list("Namespace")}
    bodies.setdefault(
        "default",
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "default", "creationTimestamp": app[STARTED_KEY]},
            "spec": {"finalizers": ["kubernetes"]},
        },
    )
    for name, body in bodies.items():
        meta = body.setdefault("metadata", {})
        meta["labels"] = {**(meta.get("labels") or {}), NAME_LABEL: name}
        phase = "Terminating" if terminating(app, node, name) else "Active"
        body["status"] = {**(body.get("status") or {}), "phase": phase}
    return [bodies[name] for name in sorted(bodies)]


def _namespace_table(app: web.Application, bodies: Iterable[Mapping[str, Any]]) -> web.Response:
    now = times.now_utc()
    rows = [
        (
            object_printing.namespace_row(
                b, terminating=(b.get("status") or {}).get("phase") == "Terminating", now=now
            ),
            b.get("metadata") or {},
        )
        for b in bodies
    ]
    return web.json_response(tables.table(object_printing.NAMESPACE_COLUMNS, rows))


def _services(request: web.Request) -> ServiceController:
    services = request.app[SERVICES_KEY]
    if services is None:
        raise web.HTTPNotFound(text="this node runs no Service controller\n")
    return services


def _service_table(bodies: Iterable[Mapping[str, Any]]) -> web.Response:
    now = times.now_utc()
    rows = [(object_printing.service_row(b, now=now), b.get("metadata") or {}) for b in bodies]
    return web.json_response(tables.table(object_printing.SERVICE_COLUMNS, rows))


def _endpoints_table(bodies: Iterable[Mapping[str, Any]]) -> web.Response:
    now = times.now_utc()
    rows = [(object_printing.endpoints_row(b, now=now), b.get("metadata") or {}) for b in bodies]
    return web.json_response(tables.table(object_printing.ENDPOINTS_COLUMNS, rows))


async def list_services(request: web.Request) -> web.Response:
    services = _services(request)
    selector = label_selector(request)
    bodies = [
        services.with_status(s) for s in services.services(request.match_info.get("namespace"))
    ]
    bodies = [b for b in bodies if _selected(selector, _labels(b))]
    if wants_table(request):
        return _service_table(bodies)
    return _list("Service", bodies)


async def get_service(request: web.Request) -> web.Response:
    services = _services(request)
    name = request.match_info["name"]
    found = services.service(request.match_info["namespace"], name)
    if found is None:
        return not_found("services", name)
    body = services.with_status(found)
    if wants_table(request):
        return _service_table([body])
    return web.json_response(body)


def _endpoints_body(services: ServiceController, namespace: str, name: str) -> dict[str, Any]:
    """The Endpoints object of a Service with a selector (empty while nothing matches)."""
    found = services.endpoints(namespace, name) or ServiceEndpoints(namespace, name)
    body = found.v1()
    stored = services.objects.get("Service", namespace, name)
    created = ((stored.body.get("metadata") or {}) if stored else {}).get("creationTimestamp")
    if created:
        body["metadata"]["creationTimestamp"] = created
    return body


def _has_endpoints(svc: Any) -> bool:
    return bool(svc.spec is not None and svc.spec.selector and svc.spec.type != "ExternalName")


async def list_endpoints(request: web.Request) -> web.Response:
    services = _services(request)
    selector = label_selector(request)
    bodies = [
        _endpoints_body(services, *_identity(s))
        for s in services.services(request.match_info.get("namespace"))
        if _has_endpoints(s)
    ]
    bodies = [b for b in bodies if _selected(selector, _labels(b))]
    if wants_table(request):
        return _endpoints_table(bodies)
    return _list("Endpoints", bodies)


async def get_endpoints(request: web.Request) -> web.Response:
    services = _services(request)
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    svc = services.service(namespace, name)
    if svc is None or not _has_endpoints(svc):
        return not_found("endpoints", name)
    body = _endpoints_body(services, namespace, name)
    if wants_table(request):
        return _endpoints_table([body])
    return web.json_response(body)


def _identity(svc: Any) -> tuple[str, str]:
    return svc.metadata.namespace or "default", svc.metadata.name


async def node_info(request: web.Request) -> web.Response:
    return web.json_response(request.app[INFO_KEY]().to_json())


async def pod_log(request: web.Request) -> web.StreamResponse:
    """The kubelet's ``GetContainerLogs`` with the pod log endpoint's parameters
    (``container``, ``follow``, ``previous``, ``tailLines``, ``timestamps``,
    ``sinceSeconds``, ``limitBytes``); with ``follow`` it goes on across the container's
    restarts until the pod will not start it again."""
    node = request.app[NODE_KEY]
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    tail = _int_param(request, "tailLines", minimum=0, message="must be greater than or equal to 0")
    since_seconds = _int_param(request, "sinceSeconds", minimum=1, message="must be greater than 0")
    limit = _int_param(request, "limitBytes", minimum=1, message="must be greater than 0")
    since = max(0.0, time.time() - since_seconds) if since_seconds is not None else None
    follow, previous = _flag(request, "follow"), _flag(request, "previous")
    timestamps = _flag(request, "timestamps")
    record = node.status.find(namespace, name)
    if record is None:
        return not_found("pods", name)
    pod = record.pod
    try:
        chosen, _ = access.default_container(pod, request.query.get("container") or None)
        instance = await access.container_instance(
            node.runtime, pod, container=chosen, previous=previous, reported=record.status
        )
    except errors.NotFound as e:
        return status(400, "BadRequest", str(e))
    except errors.DockerError as e:
        return status(500, "InternalError", str(e))
    response = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})
    await response.prepare(request)
    left = limit
    cid, seen = instance.id, {instance.id}
    follow = follow and not previous
    try:
        while True:
            lines = node.runtime.docker.logs(
                cid, follow=follow, tail=tail, timestamps=timestamps, since=since
            )
            try:
                async for line in lines:
                    data = (line.text + ("\n" if line.newline else "")).encode()
                    if left is not None:
                        data = data[:left]
                        left -= len(data)
                    await response.write(data)
                    if left is not None and left <= 0:
                        break
            finally:
                # The engine's stream is closed as soon as it is left, not when collected.
                if isinstance(lines, AsyncGenerator):
                    with anyio.CancelScope(shield=True):
                        await lines.aclose()
            if not follow or (left is not None and left <= 0):
                break
            following = await operations.next_instance(
                node.runtime, pod=pod, container=chosen, seen=seen
            )
            if following is None:
                break
            seen.add(following)
            cid, tail, since = following, None, None
    except errors.DockerError as e:
        logger.debug("log stream of {}/{}/{} ended: {}", namespace, name, chosen, e)
    await response.write_eof()
    return response


# -- apply and delete ------------------------------------------------------------------------


def _cause(error: FieldError) -> dict[str, str]:
    return {
        "field": error.field,
        "reason": error.reason,
        "message": error.detail,
        "source": error.source,
    }


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        raise web.HTTPBadRequest(text="the request body is not JSON\n") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="the request body must be a JSON object\n")
    return body


@dataclass(frozen=True)
class Forbidden:
    """A PodSecurity rejection: the error, the file and the object it refuses."""

    error: FieldError
    source: str
    kind: str
    name: str

    def message(self) -> str:
        """The API server's: ``error when creating "web.yaml": pods "web" is forbidden:
        violates PodSecurity ...``."""
        info = kind_table.KINDS[self.kind]
        group = info.api_version.rpartition("/")[0]
        what = f"{info.plural}.{group}" if group else info.plural
        return (
            f'error when creating "{self.source}": {what} "{self.name}" is forbidden: '
            f"{self.error.detail}"
        )


def admit(
    files: list[tuple[str, str]], *, node: Kubelet, namespaces: list[Namespace]
) -> tuple[Manifests, tuple[FieldError, ...], tuple[FieldError, ...], tuple[Forbidden, ...]]:
    """Load ``(source, text)`` files as this node admits them (its level, node name and
    namespace policy; Namespaces stored or in an earlier file count): everything they
    hold, every error, every warning, and the PodSecurity rejections among the errors."""
    config = node.config
    merged: dict[str, list[Any]] = {
        "pods": [],
        "configmaps": [],
        "secrets": [],
        "ns": [],
        "objects": [],
        "services": [],
        "order": [],
    }
    secret_data: dict[tuple[str, str], Mapping[str, bytes]] = {}
    problems: list[FieldError] = []
    warnings: list[FieldError] = []
    forbidden: list[Forbidden] = []
    known = list(namespaces)
    for source, text in files:
        report = inspect_manifests_text(
            text,
            source_name=source,
            pod_security=config.pod_security,
            allow_namespace_policy=config.allow_namespace_policy,
            node_name=node.node_name,
            namespaces=known,
        )
        problems += report.errors
        warnings += report.warnings
        forbidden += [Forbidden(e, source, kind, name) for e, kind, name in report.forbidden]
        found = report.manifests
        known += found.namespaces
        merged["pods"] += found.pods
        merged["configmaps"] += found.configmaps
        merged["secrets"] += found.secrets
        merged["ns"] += found.namespaces
        merged["objects"] += found.objects
        merged["services"] += found.services
        merged["order"] += found.order
        secret_data.update(found.secret_data)
    manifests = Manifests(
        pods=tuple(merged["pods"]),
        configmaps=tuple(merged["configmaps"]),
        secrets=tuple(merged["secrets"]),
        secret_data=secret_data,
        namespaces=tuple(merged["ns"]),
        services=tuple(merged["services"]),
        warnings=tuple(warnings),
        objects=tuple(merged["objects"]),
        order=tuple(merged["order"]),
    )
    return manifests, tuple(problems), tuple(warnings), tuple(forbidden)


async def apply(request: web.Request) -> web.Response:
    """``{"files": [{"source": name, "manifest": text}, ...], "prune": {"selector": s,
    "all": bool}}``: every object of every file, or (any error, an immutable field
    changed included) none. With ``prune``, the objects applied earlier through this API
    that the files no longer hold are then deleted, those matching the label
    ``selector`` (or ``all``), in the namespaces the files name, as ``kubectl apply
    --prune`` deletes them."""
    node = request.app[NODE_KEY]
    body = await _body(request)
    files = body.get("files")
    if not isinstance(files, list) or not all(
        isinstance(f, dict) and isinstance(f.get("manifest"), str) for f in files
    ):
        return status(400, "BadRequest", 'body must be {"files": [{"source", "manifest"}]}')
    selector = _prune_selector(body.get("prune"))
    if isinstance(selector, web.Response):
        return selector
    texts = [(str(f.get("source") or "<text>"), str(f["manifest"])) for f in files]
    namespaces = node.objects.namespaces()
    manifests, problems, warnings, policy = await anyio.to_thread.run_sync(
        lambda: admit(texts, node=node, namespaces=namespaces)
    )
    services = request.app[SERVICES_KEY]
    if not problems and services is not None:
        manifests, refused = await services.admit(manifests)
        problems = (*problems, *refused)
    if problems and len(policy) == len(problems):
        for rejection in policy:
            logger.info(
                "{}/{} rejected from {}",
                _singular(rejection.kind),
                rejection.name,
                rejection.source,
            )
        return _forbidden(policy)
    if problems:
        return _rejected(problems)
    verdicts = in_input_order(node.objects.verdicts(manifests), manifests.order)
    forbidden = _in_terminating_namespace(request.app, node, verdicts)
    if forbidden is not None:
        return forbidden
    if verdicts:
        try:
            await node.apply(manifests)
        except errors.ManifestError as e:
            return _rejected(tuple(e.errors))
    for applied in verdicts:
        if applied.verdict != "unchanged":
            logger.info("{} {}", applied, "from " + ", ".join(s for s, _ in texts))
    pruned = await _prune(node, verdicts, selector) if selector is not None else []
    return web.json_response(
        {
            "kind": "ApplyResult",
            "apiVersion": f"{API_GROUP}/v1",
            "items": [_verdict(node, a) for a in verdicts],
            "pruned": pruned,
            "warnings": [_cause(w) for w in warnings],
        }
    )


def in_input_order(
    verdicts: list[Applied], order: Sequence[tuple[str, str | None, str]]
) -> list[Applied]:
    """The verdicts in the order the files hold their objects, as kubectl reports them
    (the node applies them by kind: Namespaces first, then what pods use)."""
    rank: dict[tuple[str, str, str], int] = {}
    for i, (kind, namespace, name) in enumerate(order):
        rank.setdefault(object_key(kind, namespace, name), i)
    return sorted(verdicts, key=lambda a: rank.get((a.kind, a.namespace, a.name), len(rank)))


def _prune_selector(prune: object) -> dict[str, Any] | web.Response | None:
    """An apply's ``prune``: its label selector (``{}`` with ``all``), None without
    one, or the ``BadRequest`` answer for a malformed one."""
    if prune is None:
        return None
    if not isinstance(prune, dict):
        return status(400, "BadRequest", 'prune must be {"selector": text, "all": bool}')
    try:
        selector = parse_label_selector(str(prune.get("selector") or ""))
    except ValueError as e:
        return status(400, "BadRequest", str(e))
    if not selector and prune.get("all") is not True:
        return status(400, "BadRequest", "prune needs a label selector or all")
    return selector


def _in_terminating_namespace(
    app: web.Application, node: Kubelet, verdicts: Iterable[Applied]
) -> web.Response | None:
    """The API server's ``Forbidden`` for the first object an apply would create in a
    namespace being terminated; None when there is none."""
    for made in verdicts:
        if (
            made.kind != "Namespace"
            and made.verdict == "created"
            and terminating(app, node, made.namespace)
        ):
            known = resources.by_plural(PLURALS[made.kind])
            what = known.qualified_plural if known else PLURALS[made.kind]
            return status(
                403,
                "Forbidden",
                f'{what} "{made.name}" is forbidden: unable to create new content in '
                f"namespace {made.namespace} because it is being terminated",
            )
    return None


def _singular(kind: str) -> str:
    return kind_table.KINDS[kind].resource


def _forbidden(rejections: Sequence[Forbidden]) -> web.Response:
    """The API server's ``Forbidden``, one line per object PodSecurity refuses, each as
    kubectl prints it after the first."""
    message = "\nError from server (Forbidden): ".join(r.message() for r in rejections)
    first = rejections[0]
    return status(
        403,
        "Forbidden",
        message,
        name=first.name,
        kind=PLURALS.get(first.kind, first.kind),
    )


def _rejected(problems: Iterable[FieldError]) -> web.Response:
    found = list(problems)
    n = len(found)
    message = f"manifests rejected: {n} {'error' if n == 1 else 'errors'}"
    return status(422, "Invalid", message, causes=[_cause(e) for e in found])


PRUNE_KINDS = tuple(k for k in KINDS if k != "Namespace")
"""What ``--prune`` may delete: kubectl's default allowlist of the kinds kept here, less
Namespaces (a Namespace takes everything in it)."""


async def _prune(
    node: Kubelet, applied: Iterable[Applied], selector: Mapping[str, Any]
) -> list[dict[str, str]]:
    """Delete the objects of the node's API in the applied namespaces that the apply did
    not hold and that match ``selector``; each one deleted."""
    kept = {(a.kind, a.namespace, a.name) for a in applied}
    spaces = {a.namespace for a in applied if a.kind != "Namespace"} or {"default"}
    pruned: list[dict[str, str]] = []
    for kind in PRUNE_KINDS:
        for obj in node.objects.list(kind):
            if obj.source != API_SOURCE or obj.key in kept or obj.namespace not in spaces:
                continue
            if not selector_matches(selector, obj.labels):
                continue
            if kind == "Pod":
                await node.delete(obj.namespace, obj.name, wait=False)
            else:
                node.objects.remove(kind, obj.namespace, obj.name)
            logger.info("{}/{} pruned", obj.resource, obj.name)
            pruned.append(_ref(obj.kind, obj.namespace, obj.name))
    return pruned


def _ref(kind: str, namespace: str, name: str) -> dict[str, str]:
    found = kind_table.info(kind)
    return {
        "kind": kind,
        "namespace": namespace,
        "name": name,
        "resource": found.qualified if found is not None else kind.lower(),
    }


def _verdict(node: Kubelet, applied: Applied) -> dict[str, Any]:
    """One object's verdict, with the object as stored (what ``--wait`` waits for)."""
    item: dict[str, Any] = {
        **_ref(applied.kind, applied.namespace, applied.name),
        "verdict": applied.verdict,
    }
    stored = node.objects.get(applied.kind, applied.namespace, applied.name)
    if stored is None:
        return item
    if applied.kind == "Pod":
        pod = cast(Pod, Pod.from_dict(copy.deepcopy(dict(stored.body))))
        item["object"] = pod_printing.pod_document(served_pod(node, pod))
    elif applied.kind != "Secret":
        item["object"] = dict(stored.body)
    return item


def _seconds(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise web.HTTPBadRequest(text=f"{name} must be a number of seconds >= 0\n")
    return float(value)


async def _delete_namespace_contents(
    node: Kubelet, name: str, *, grace: float | None
) -> list[dict[str, str]]:
    """Forget the objects of namespace ``name`` (its workloads first, so no controller
    makes new pods), then delete its pods, not waiting; the pods deleted."""
    for other in KINDS:
        if other == "Namespace":
            continue
        for obj in node.objects.list(other, name):
            node.objects.remove(other, name, obj.name)
    deleted = []
    for inner in [*_pods(node, name)]:
        pod_name = ctr.pod_identity(inner)[0]
        if await node.delete(name, pod_name, grace_period=grace, wait=False):
            deleted.append({"namespace": name, "name": pod_name})
    return deleted


def terminating(app: web.Application, node: Kubelet, namespace: str) -> bool:
    """Whether ``namespace`` was deleted and pods of it are still stopping: nothing new
    may be made in it until they are gone (the API server's namespace lifecycle)."""
    marked = app[TERMINATING_KEY]
    if namespace not in marked:
        return False
    if _pods(node, namespace):
        return True
    marked.discard(namespace)
    return False


async def delete(request: web.Request) -> web.Response:
    """``{"objects": [{"kind", "namespace", "name"}], "gracePeriodSeconds",
    "timeoutSeconds"}``: each object deleted (pods gracefully, waited for until they are
    gone or the timeout ends; a Namespace with everything in it, its pods waited for as
    well); answers each one's fate: ``deleted``, ``notfound`` or, for a pod still there,
    ``timeout`` (a deleted namespace's pods still there are added, as ``timeout``)."""
    node = request.app[NODE_KEY]
    body = await _body(request)
    refs = body.get("objects")
    if not isinstance(refs, list) or not all(isinstance(r, dict) for r in refs):
        return status(400, "BadRequest", 'body must be {"objects": [{"kind", "name"}]}')
    grace = _seconds(body.get("gracePeriodSeconds"), "gracePeriodSeconds")
    timeout = _seconds(body.get("timeoutSeconds"), "timeoutSeconds")
    results: list[dict[str, str]] = []
    waiting: list[dict[str, str]] = []
    for ref in refs:
        kind, name = str(ref.get("kind") or ""), str(ref.get("name") or "")
        namespace = "" if kind == "Namespace" else str(ref.get("namespace") or "default")
        if kind not in KINDS or not name:
            return status(400, "BadRequest", f'the server doesn\'t have a resource type "{kind}"')
        result = {"kind": kind, "namespace": namespace, "name": name, "status": "notfound"}
        results.append(result)
        waiting += await _delete_one(request.app, node, result, grace=grace)
    with anyio.move_on_after(timeout):
        for pod in waiting:
            await node.wait(pod["namespace"], pod["name"], "Deleted")
    for pod in waiting:
        if node.get(pod["namespace"], pod["name"]) is not None:
            if pod not in results:
                results.append(pod)
            pod["status"] = "timeout"
    return web.json_response({"kind": "DeleteResult", "items": results})


async def _delete_one(
    app: web.Application, node: Kubelet, result: dict[str, str], *, grace: float | None
) -> list[dict[str, str]]:
    """Delete the object ``result`` names and set its status; the pods to wait for."""
    kind, namespace, name = result["kind"], result["namespace"], result["name"]
    if kind == "Pod":
        if not await node.delete(namespace, name, grace_period=grace, wait=False):
            return []
        result["status"] = "deleted"
        return [result]
    pods = []
    if kind == "Namespace":
        app[TERMINATING_KEY].add(name)
        pods = [
            {"kind": "Pod", **pod, "status": "deleted"}
            for pod in await _delete_namespace_contents(node, name, grace=grace)
        ]
    if node.objects.remove(kind, namespace, name) is not None:
        result["status"] = "deleted"
        logger.info("{} {} deleted", RESOURCES[kind], "/".join(filter(None, (namespace, name))))
    return pods


# -- the app ---------------------------------------------------------------------------------


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
    middlewares = [peercred.only_uids(allowed, refuse=_refusal)] if allowed else []
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
