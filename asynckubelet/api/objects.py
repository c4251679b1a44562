"""The local API's reads of the node's stored objects: Events, Namespaces, ConfigMaps,
Secrets (listed without their values), the workload kinds, Services and their Endpoints,
each by kind, namespace and name as the API server serves them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from asynckubelet.api import rows
from asynckubelet.api.answers import (
    NAME_LABEL,
    SERVICES_KEY,
    STARTED_KEY,
    TERMINATING_KEY,
    label_selector,
    listing,
    not_found,
    selected,
    served_pods,
    status,
    wants_table,
)
from asynckubelet.api.endpoints import NODE_KEY
from asynckubelet.kubectl import objects as object_printing
from asynckubelet.kubectl import resources
from asynckubelet.node.events import PodEvent
from asynckubelet.node.kubelet import Kubelet
from asynckubelet.node.objects import (
    PLURALS,
    StoredObject,
    secret_summary,
)
from asynckubelet.workloads.services import ServiceController, ServiceEndpoints


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
    bodies = [b for b in bodies if selected(selector, b["metadata"].get("labels"))]
    if wants_table(request):
        return web.json_response(rows.event_table(sorted(bodies, key=object_printing.event_seen)))
    return listing("Event", bodies)


async def get_event(request: web.Request) -> web.Response:
    """One Event of a namespace, by its name."""
    node = request.app[NODE_KEY]
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    events = [e for e in node.recorder.list() if e.namespace == namespace]
    for body in (e.to_v1() for e in _own_events(node, events)):
        if body["metadata"]["name"] == name:
            return (
                web.json_response(rows.event_table([body]))
                if wants_table(request)
                else web.json_response(body)
            )
    return not_found("events", name)


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
            spaces = [b for b in _namespaces(request.app) if selected(selector, _labels(b))]
            if wants_table(request):
                return web.json_response(rows.namespace_table(spaces))
            return listing(kind, spaces)
        namespace = request.match_info.get("namespace")
        found = [o for o in node.objects.list(kind, namespace) if selected(selector, o.labels)]
        if wants_table(request):
            return web.json_response(rows.object_table(kind, found))
        return listing(kind, (_shown(o) for o in found))

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
                return web.json_response(rows.namespace_table(spaces))
            return web.json_response(spaces[0])
        found = node.objects.get(kind, request.match_info.get("namespace"), name)
        if found is None:
            known = resources.by_plural(PLURALS[kind])
            return not_found(known.qualified_plural if known else PLURALS[kind], name)
        if wants_table(request):
            return web.json_response(rows.object_table(kind, [found]))
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


def _services(request: web.Request) -> ServiceController:
    services = request.app[SERVICES_KEY]
    if services is None:
        raise web.HTTPNotFound(text="this node runs no Service controller\n")
    return services


async def list_services(request: web.Request) -> web.Response:
    services = _services(request)
    selector = label_selector(request)
    bodies = [
        services.with_status(s) for s in services.services(request.match_info.get("namespace"))
    ]
    bodies = [b for b in bodies if selected(selector, _labels(b))]
    if wants_table(request):
        return web.json_response(rows.service_table(bodies))
    return listing("Service", bodies)


async def get_service(request: web.Request) -> web.Response:
    services = _services(request)
    name = request.match_info["name"]
    found = services.service(request.match_info["namespace"], name)
    if found is None:
        return not_found("services", name)
    body = services.with_status(found)
    if wants_table(request):
        return web.json_response(rows.service_table([body]))
    return web.json_response(body)


def endpoints_body(services: ServiceController, namespace: str, name: str) -> dict[str, Any]:
    """The Endpoints object of a Service with a selector (empty while nothing matches)."""
    found = services.endpoints(namespace, name) or ServiceEndpoints(namespace, name)
    body = found.v1()
    stored = services.objects.get("Service", namespace, name)
    created = ((stored.body.get("metadata") or {}) if stored else {}).get("creationTimestamp")
    if created:
        body["metadata"]["creationTimestamp"] = created
    return body


def has_endpoints(svc: Any) -> bool:
    return bool(svc.spec is not None and svc.spec.selector and svc.spec.type != "ExternalName")


async def list_endpoints(request: web.Request) -> web.Response:
    services = _services(request)
    selector = label_selector(request)
    bodies = [
        endpoints_body(services, *_identity(s))
        for s in services.services(request.match_info.get("namespace"))
        if has_endpoints(s)
    ]
    bodies = [b for b in bodies if selected(selector, _labels(b))]
    if wants_table(request):
        return web.json_response(rows.endpoints_table(bodies))
    return listing("Endpoints", bodies)


async def get_endpoints(request: web.Request) -> web.Response:
    services = _services(request)
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    svc = services.service(namespace, name)
    if svc is None or not has_endpoints(svc):
        return not_found("endpoints", name)
    body = endpoints_body(services, namespace, name)
    if wants_table(request):
        return web.json_response(rows.endpoints_table([body]))
    return web.json_response(body)


def _identity(svc: Any) -> tuple[str, str]:
    return svc.metadata.namespace or "default", svc.metadata.name


def terminating(app: web.Application, node: Kubelet, namespace: str) -> bool:
    """Whether ``namespace`` was deleted and pods of it are still stopping: nothing new
    may be made in it until they are gone (the API server's namespace lifecycle)."""
    marked = app[TERMINATING_KEY]
    if namespace not in marked:
        return False
    if served_pods(node, namespace):
        return True
    marked.discard(namespace)
    return False
