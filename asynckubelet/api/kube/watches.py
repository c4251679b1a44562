"""Kubernetes watches of every kind, as the API server streams them.

One JSON event per line (``ADDED``, ``MODIFIED``, ``DELETED``, ``BOOKMARK``, ``ERROR``)
until ``timeoutSeconds``. The label and field selectors are applied to each change as
upstream's watch cache applies them: an object that stops matching is a ``DELETED``
event, one that starts matching an ``ADDED``. With ``allowWatchBookmarks`` the client
gets a ``BOOKMARK`` (an object of the kind carrying only the current resourceVersion)
every :data:`BOOKMARK_SECONDS`, so it resumes from a recent version after a quiet
period. A version older than the window, or a watcher that falls behind, ends the
watch with an ``ERROR`` event carrying ``410 Expired``.

The changes come from :mod:`~asynckubelet.api.kube.history` (pods) and
:mod:`~asynckubelet.api.kube.watchcache` (the other kinds).
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from aiohttp import web

from asynckubelet.api import rows
from asynckubelet.api.answers import (
    NAME_LABEL,
    label_selector,
    selected,
    status,
    status_body,
    wants_table,
)
from asynckubelet.api.endpoints import flag_param
from asynckubelet.api.kube import fields
from asynckubelet.api.kube.history import Expired, Watch
from asynckubelet.api.kube.watchcache import ObjectChange, ObjectHistory
from asynckubelet.manifests import kinds as kind_table
from asynckubelet.node.objects import StoredObject, secret_summary

OBJECTS_KEY = web.AppKey("object_history", ObjectHistory)
BOOKMARK_SECONDS = 60.0
"""How often a quiet watch that allows bookmarks gets one (the API server's is about a
minute)."""
DEFAULT_WATCH_SECONDS = 1800
"""A watch without ``timeoutSeconds`` ends after this long (the API server's
``--min-request-timeout``); the client watches anew."""
MAX_WATCH_SECONDS = 24 * 3600
FELL_BEHIND = "the watch fell too far behind; list again and watch from there"

Event = tuple[str, Mapping[str, Any]]
Render = Callable[[Any], Event | None]


def bad_request(message: str) -> web.HTTPBadRequest:
    return web.HTTPBadRequest(
        text=json.dumps(status_body(400, "BadRequest", message)), content_type="application/json"
    )


def watch_seconds(request: web.Request) -> float:
    text = request.query.get("timeoutSeconds")
    if text is None:
        return DEFAULT_WATCH_SECONDS
    if not text.isdigit():
        raise bad_request(
            f'timeoutSeconds: Invalid value: "{text}": must be a non-negative integer'
        )
    return min(int(text), MAX_WATCH_SECONDS)


def event_type(change_type: str, *, was: bool, now: bool) -> str | None:
    """The event a selective watcher is sent for a change: whether the object matched
    before (``was``) and matches after it (``now``); None: nothing."""
    if change_type == "DELETED":
        return "DELETED" if was else None
    if now:
        return "MODIFIED" if was else "ADDED"
    return "DELETED" if was else None


def with_version(body: Mapping[str, Any], version: int) -> dict[str, Any]:
    shown = copy.deepcopy(dict(body))
    shown.setdefault("metadata", {})["resourceVersion"] = str(version)
    return shown


async def serve_watch(
    request: web.Request,
    opened: contextlib.AbstractContextManager[Watch],
    render: Render,
    *,
    bookmark: Callable[[], Mapping[str, Any]],
) -> web.StreamResponse:
    """Stream ``opened``'s changes, each turned into an event by ``render`` (None: not
    sent), until the request's ``timeoutSeconds``."""
    seconds = watch_seconds(request)
    listing = request.query.get("sendInitialEvents") == "true"
    bookmarks = flag_param(request, "allowWatchBookmarks")
    interval = BOOKMARK_SECONDS
    response = web.StreamResponse(headers={"Content-Type": "application/json"})

    async def send(kind: str, body: Mapping[str, Any]) -> None:
        await response.write(json.dumps({"type": kind, "object": body}).encode() + b"\n")

    async def emit(change: Any) -> None:
        event = render(change)
        if event is not None:
            await send(*event)

    with contextlib.ExitStack() as stack:
        try:
            watch = stack.enter_context(opened)
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
                    await send("BOOKMARK", initial_events_end(bookmark()))
                await _follow(watch, emit, send, bookmark if bookmarks else None, interval)
                if watch.fell_behind:
                    await send("ERROR", status_body(410, "Expired", FELL_BEHIND))
        except ConnectionResetError:
            return response
    await response.write_eof()
    return response


async def _follow(
    watch: Watch,
    emit: Callable[[Any], Awaitable[None]],
    send: Callable[[str, Mapping[str, Any]], Awaitable[None]],
    bookmark: Callable[[], Mapping[str, Any]] | None,
    interval: float,
) -> None:
    while True:
        change: Any = None
        with anyio.move_on_after(interval if bookmark is not None else None):
            try:
                change = await watch.changes.receive()
            except anyio.EndOfStream:
                return
        if change is None:
            if bookmark is not None:
                await send("BOOKMARK", bookmark())
            continue
        await emit(change)


def since(request: web.Request) -> str:
    """Where a watch starts: the request's ``resourceVersion``, or the whole current state
    for a watch-list (``sendInitialEvents=true``, kubectl 1.34+ waiting for a delete),
    whose initial ``ADDED`` events end with :func:`initial_events_end`."""
    if request.query.get("sendInitialEvents") == "true":
        return ""
    return request.query.get("resourceVersion", "")


def initial_events_end(bookmark: Mapping[str, Any]) -> dict[str, Any]:
    """The ``BOOKMARK`` object that ends a watch-list's initial events: ``bookmark`` with
    the ``k8s.io/initial-events-end`` annotation."""
    annotations = {"k8s.io/initial-events-end": "true"}
    metadata = {**bookmark.get("metadata", {}), "annotations": annotations}
    return {**bookmark, "metadata": metadata}


def bookmark_of(kind: str, version: int) -> dict[str, Any]:
    """An object of ``kind`` carrying only ``version``: what a ``BOOKMARK`` event holds."""
    found = kind_table.info(kind)
    api_version = found.api_version if found is not None else "v1"
    return {"kind": kind, "apiVersion": api_version, "metadata": {"resourceVersion": str(version)}}


# -- the kinds of the object store and Events ---------------------------------------------


def shown(kind: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """A stored body as a client is shown it: a Secret without its values, a Namespace
    with its name label and phase."""
    if kind == "Secret":
        return dict(secret_summary(body))
    shown_body = dict(body)
    if kind == "Namespace":
        shown_body = copy.deepcopy(shown_body)
        meta = shown_body.setdefault("metadata", {})
        meta["labels"] = {**(meta.get("labels") or {}), NAME_LABEL: meta.get("name", "")}
        shown_body["status"] = {"phase": "Active", **(shown_body.get("status") or {})}
    return shown_body


def table_of(kind: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """A one-row ``Table`` of one object, as ``kubectl get -w`` prints it."""
    if kind == "Service":
        return rows.service_table([body])
    if kind == "Namespace":
        return rows.namespace_table([body])
    if kind == "Event":
        return rows.event_table([body])
    if kind == "Endpoints":
        return rows.endpoints_table([body])
    if kind == "EndpointSlice":
        return rows.endpointslice_table([body])
    meta = body.get("metadata") or {}
    obj = StoredObject(
        kind=kind,
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        body=body,
        source="",
    )
    return rows.object_table(kind, [obj])


async def watch_objects(
    request: web.Request,
    kind: str,
    resource: str,
    *,
    namespaced: bool,
    api_version: str | None = None,
    convert: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None,
) -> web.StreamResponse:
    """``GET ...?watch=1`` of a kind of the object store, of Events or of the kinds
    derived from them; ``convert`` turns a kept body into the group version served
    (``api_version``), and selectors apply to what it gives."""
    history = request.app[OBJECTS_KEY]
    namespace = request.match_info.get("namespace")
    labels = label_selector(request)
    try:
        terms = fields.parse(
            request.query.get("fieldSelector", ""), resource=resource, namespaced=namespaced
        )
    except ValueError as e:
        raise bad_request(str(e)) from None
    match = fields.matcher(terms)
    as_table = wants_table(request)

    def selects(body: Mapping[str, Any] | None) -> bool:
        if body is None:
            return False
        meta = body.get("metadata") or {}
        if namespace is not None and meta.get("namespace") != namespace:
            return False
        if not selected(labels, dict(meta.get("labels") or {})):
            return False
        return not terms or match(dict(body))

    def served(body: Mapping[str, Any]) -> dict[str, Any]:
        body = shown(kind, body)
        return convert(body) if convert is not None else body

    def render(change: ObjectChange) -> Event | None:
        now_body = served(change.body)
        before = None if change.previous is None else served(change.previous)
        kind_of_event = event_type(
            change.type, was=selects(before), now=change.type != "DELETED" and selects(now_body)
        )
        if kind_of_event is None:
            return None
        if as_table:
            kept = with_version(shown(kind, change.body), change.version)
            return kind_of_event, _versioned_table(table_of(kind, kept), change.version)
        return kind_of_event, with_version(now_body, change.version)

    def bookmark() -> dict[str, Any]:
        body = bookmark_of(kind, history.versions.value)
        if api_version is not None:
            body["apiVersion"] = api_version
        return body

    return await serve_watch(
        request, history.watch(kind, since(request)), render, bookmark=bookmark
    )


def _versioned_table(table: dict[str, Any], version: int) -> dict[str, Any]:
    table.setdefault("metadata", {})["resourceVersion"] = str(version)
    return table


__all__ = [
    "BOOKMARK_SECONDS",
    "OBJECTS_KEY",
    "bad_request",
    "bookmark_of",
    "event_type",
    "serve_watch",
    "shown",
    "table_of",
    "watch_objects",
    "watch_seconds",
    "with_version",
]
