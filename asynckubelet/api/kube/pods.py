"""Pods and this Node in the Kubernetes API: list, get, watch, with resourceVersions.

The objects are the local API's (:func:`~asynckubelet.api.answers.served_pod`,
:func:`~asynckubelet.kubectl.pods.pod_document`, :func:`~asynckubelet.api.rows.pod_table`);
what this module adds is what kubectl's ``get -w`` relies on: each pod carries the
resourceVersion of its last change, a list the version it was made at, and a watch
resumes from a list's version without losing or repeating a change
(:mod:`~asynckubelet.api.kube.history`). Field selectors are the API server's
(:mod:`~asynckubelet.api.kube.fields`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import anyio
from aiohttp import web

from asynckubelet.api import rows
from asynckubelet.api.answers import (
    label_selector,
    not_found,
    selected,
    served_pod,
    status,
    status_body,
    wants_table,
)
from asynckubelet.api.endpoints import NODE_KEY, flag_param
from asynckubelet.api.kube import fields, watches
from asynckubelet.api.kube.history import Change, PodHistory, Watch
from asynckubelet.api.kube.nodes import ThisNode, node_object, node_table
from asynckubelet.kubectl import pods as pod_printing
from asynckubelet.kubectl import times
from asynckubelet.runtime import containers as ctr

HISTORY_KEY = web.AppKey("pod_history", PodHistory)
THIS_NODE_KEY = web.AppKey("this_node", ThisNode)


class BadRequest(web.HTTPBadRequest):
    """A 400 carrying the API server's ``Status``."""

    def __init__(self, message: str) -> None:
        super().__init__(
            text=json.dumps(status_body(400, "BadRequest", message)),
            content_type="application/json",
        )


def field_terms(request: web.Request, resource: str, *, namespaced: bool) -> list[fields.Term]:
    try:
        return fields.parse(
            request.query.get("fieldSelector", ""), resource=resource, namespaced=namespaced
        )
    except ValueError as e:
        raise BadRequest(str(e)) from None


def _document(pod: Any, version: int) -> dict[str, Any]:
    body = pod_printing.pod_document(pod)
    body.setdefault("metadata", {})["resourceVersion"] = str(version)
    return body


def _table(node_name: str, pods: list[Any], version: int) -> dict[str, Any]:
    table = rows.pod_table(node_name, pods)
    table["metadata"]["resourceVersion"] = str(version)
    return table


def _pod_filter(
    request: web.Request, namespace: str | None, name: str | None = None
) -> Callable[[Any, Mapping[str, Any] | None], bool]:
    """Whether a served pod (and its document, when one is made) is selected by the
    request's namespace, name, label and field selectors."""
    labels = label_selector(request)
    terms = field_terms(request, "pods", namespaced=True)
    match = fields.matcher(terms)

    def wanted(pod: Any, body: Mapping[str, Any] | None) -> bool:
        pod_name, pod_namespace, _ = ctr.pod_identity(pod)
        if namespace is not None and pod_namespace != namespace:
            return False
        if name is not None and pod_name != name:
            return False
        if not selected(labels, rows.pod_labels(pod)):
            return False
        return not terms or match(body if body is not None else pod_printing.pod_document(pod))

    return wanted


async def list_pods(request: web.Request) -> web.StreamResponse:
    """``GET .../pods``: a ``PodList`` or a ``Table`` at the current resourceVersion, or
    with ``watch`` the changes (:func:`watch_pods`)."""
    namespace = request.match_info.get("namespace")
    wanted = _pod_filter(request, namespace)
    if flag_param(request, "watch"):
        return await watch_pods(request, wanted)
    node = request.app[NODE_KEY]
    version = request.app[HISTORY_KEY].version
    records = node.status.list()
    if wants_table(request):
        pods = [p for p in (served_pod(node, r.view) for r in records) if wanted(p, None)]
        return web.json_response(_table(node.node_name, pods, version))
    items = []
    for record in records:
        pod = served_pod(node, record.view)
        body = _document(pod, request.app[HISTORY_KEY].version_of(record.uid, record.version))
        if wanted(pod, body):
            items.append(body)
    meta = {"resourceVersion": str(version)}
    return web.json_response(
        {"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": items}
    )


async def get_pod(request: web.Request) -> web.Response:
    node = request.app[NODE_KEY]
    name = request.match_info["name"]
    record = node.status.find(request.match_info["namespace"], name)
    if record is None:
        return not_found("pods", name)
    pod = served_pod(node, record.view)
    version = request.app[HISTORY_KEY].version_of(record.uid, record.version)
    if wants_table(request):
        return web.json_response(_table(node.node_name, [pod], version))
    return web.json_response(_document(pod, version))


async def watch_pods(
    request: web.Request, wanted: Callable[[Any, Mapping[str, Any] | None], bool]
) -> web.StreamResponse:
    """A Kubernetes watch of the pods from ``resourceVersion``
    (:func:`~asynckubelet.api.kube.watches.serve_watch`): objects are Pods, or one-row
    ``Table``s when the client asks for server-side printing."""
    node = request.app[NODE_KEY]
    history = request.app[HISTORY_KEY]
    as_table = wants_table(request)

    def render(change: Change) -> watches.Event | None:
        pod = served_pod(node, change.record.view)
        body = _document(pod, change.version)
        was = False
        if change.previous is not None:
            before = served_pod(node, change.previous.view)
            was = wanted(before, None)
        now = change.type != "DELETED" and wanted(pod, body)
        kind = watches.event_type(change.type, was=was, now=now)
        if kind is None:
            return None
        return kind, _table(node.node_name, [pod], change.version) if as_table else body

    return await watches.serve_watch(
        request,
        history.watch(watches.since(request)),
        render,
        bookmark=lambda: watches.bookmark_of("Pod", history.version),
    )


# -- this node --------------------------------------------------------------------------------


def _nodes(request: web.Request) -> list[dict[str, Any]]:
    labels = label_selector(request)
    match = fields.matcher(field_terms(request, "nodes", namespaced=False))
    body = node_object(request.app[THIS_NODE_KEY], now=times.now_utc())
    keep = selected(labels, body["metadata"]["labels"]) and match(body)
    return [body] if keep else []


async def list_nodes(request: web.Request) -> web.StreamResponse:
    found = _nodes(request)
    version = request.app[HISTORY_KEY].version
    for body in found:
        body["metadata"]["resourceVersion"] = str(version)
    if flag_param(request, "watch"):
        return await watch_node(request, found, version)
    if wants_table(request):
        table = node_table(found, now=times.now_utc())
        table["metadata"]["resourceVersion"] = str(version)
        return web.json_response(table)
    meta = {"resourceVersion": str(version)}
    return web.json_response(
        {"kind": "NodeList", "apiVersion": "v1", "metadata": meta, "items": found}
    )


@contextlib.contextmanager
def _node_watch(initial: list[Any]) -> Iterator[Watch]:
    send, receive = anyio.create_memory_object_stream[Any](1)
    with send, receive:
        yield Watch(initial, receive)


async def watch_node(
    request: web.Request, found: list[dict[str, Any]], version: int
) -> web.StreamResponse:
    """A watch of this Node: an ``ADDED`` for it without a version, then bookmarks only
    (its conditions and capacity are sampled when asked, not kept as changes)."""
    since = request.query.get("resourceVersion", "")
    if since and not since.isdigit():
        return status(400, "BadRequest", f'invalid resource version "{since}"')
    initial = found if since in ("", "0") else []
    as_table = wants_table(request)

    def render(body: dict[str, Any]) -> watches.Event:
        if as_table:
            table = node_table([body], now=times.now_utc())
            table["metadata"]["resourceVersion"] = str(version)
            return "ADDED", table
        return "ADDED", body

    return await watches.serve_watch(
        request,
        _node_watch(initial),
        render,
        bookmark=lambda: watches.bookmark_of("Node", request.app[HISTORY_KEY].version),
    )


async def get_node(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    found = [b for b in _nodes(request) if b["metadata"]["name"] == name]
    if not found:
        return not_found("nodes", name)
    if wants_table(request):
        return web.json_response(node_table(found, now=times.now_utc()))
    return web.json_response(found[0])


def not_allowed() -> web.Response:
    """The API server's answer to a verb a resource does not serve."""
    return status(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )


__all__ = [
    "HISTORY_KEY",
    "THIS_NODE_KEY",
    "BadRequest",
    "field_terms",
    "get_node",
    "get_pod",
    "list_nodes",
    "list_pods",
    "not_allowed",
    "watch_node",
    "watch_pods",
]
