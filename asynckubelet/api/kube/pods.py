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
from collections.abc import Callable, Mapping
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
from asynckubelet.api.kube import fields
from asynckubelet.api.kube.history import Change, Expired, PodHistory
from asynckubelet.api.kube.nodes import ThisNode, node_object, node_table
from asynckubelet.kubectl import pods as pod_printing
from asynckubelet.kubectl import times
from asynckubelet.runtime import containers as ctr

HISTORY_KEY = web.AppKey("pod_history", PodHistory)
THIS_NODE_KEY = web.AppKey("this_node", ThisNode)
DEFAULT_WATCH_SECONDS = 1800
"""A watch without ``timeoutSeconds`` ends after this long (the API server's
``--min-request-timeout``); the client watches anew."""
MAX_WATCH_SECONDS = 24 * 3600


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
        body = _document(pod, record.version)
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
    if wants_table(request):
        return web.json_response(_table(node.node_name, [pod], record.version))
    return web.json_response(_document(pod, record.version))


def watch_seconds(request: web.Request) -> float:
    text = request.query.get("timeoutSeconds")
    if text is None:
        return DEFAULT_WATCH_SECONDS
    if not text.isdigit():
        raise BadRequest(f'timeoutSeconds: Invalid value: "{text}": must be a non-negative integer')
    return min(int(text), MAX_WATCH_SECONDS)


async def watch_pods(
    request: web.Request, wanted: Callable[[Any, Mapping[str, Any] | None], bool]
) -> web.StreamResponse:
    """A Kubernetes watch of the pods from ``resourceVersion``, one JSON event per line,
    until ``timeoutSeconds``: objects are Pods, or one-row ``Table``s when the client asks
    for server-side printing. A version older than the window, or a watch that falls
    behind, ends with an ``ERROR`` event carrying the API server's ``410 Expired``."""
    node = request.app[NODE_KEY]
    history = request.app[HISTORY_KEY]
    seconds = watch_seconds(request)
    as_table = wants_table(request)
    response = web.StreamResponse(headers={"Content-Type": "application/json"})

    async def send(kind: str, body: Mapping[str, Any]) -> None:
        await response.write(json.dumps({"type": kind, "object": body}).encode() + b"\n")

    async def emit(change: Change) -> None:
        pod = served_pod(node, change.record.view)
        body = _document(pod, change.version)
        if not wanted(pod, body):
            return
        await send(change.type, _table(node.node_name, [pod], change.version) if as_table else body)

    listing = request.query.get("sendInitialEvents") == "true"
    with contextlib.ExitStack() as stack:
        try:
            since = "" if listing else request.query.get("resourceVersion", "")
            watch = stack.enter_context(history.watch(since))
            at = str(history.version)
        except ValueError as e:
            return status(400, "BadRequest", f'invalid resource version "{e}"')
        except Expired as e:
            await response.prepare(request)
            await send("ERROR", status_body(410, "Expired", str(e)))
            await response.write_eof()
            return response
        try:
            await response.prepare(request)
            with anyio.move_on_after(seconds):
                for change in watch.initial:
                    await emit(change)
                if listing:
                    await send("BOOKMARK", _initial_events_end(at))
                async for change in watch.changes:
                    await emit(change)
                if watch.fell_behind:
                    message = "the watch fell too far behind; list again and watch from there"
                    await send("ERROR", status_body(410, "Expired", message))
        except ConnectionResetError:
            return response
    await response.write_eof()
    return response


def _initial_events_end(version: str) -> dict[str, Any]:
    """The ``BOOKMARK`` that ends a watch-list's initial ``ADDED`` events (kubectl 1.34+
    watches so, ``sendInitialEvents=true``, to wait for a delete)."""
    annotations = {"k8s.io/initial-events-end": "true"}
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": version, "annotations": annotations},
    }


# -- this node --------------------------------------------------------------------------------


def _nodes(request: web.Request) -> list[dict[str, Any]]:
    labels = label_selector(request)
    match = fields.matcher(field_terms(request, "nodes", namespaced=False))
    body = node_object(request.app[THIS_NODE_KEY], now=times.now_utc())
    keep = selected(labels, body["metadata"]["labels"]) and match(body)
    return [body] if keep else []


async def list_nodes(request: web.Request) -> web.Response:
    if flag_param(request, "watch"):
        return not_allowed()
    found = _nodes(request)
    if wants_table(request):
        return web.json_response(node_table(found, now=times.now_utc()))
    return web.json_response(
        {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": found}
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
    "watch_pods",
]
