"""Lists and reads of the kinds answered from the API's window of changes.

EndpointSlices (:mod:`~asynckubelet.api.kube.slices`) and the ``events.k8s.io`` Events
(:mod:`~asynckubelet.api.kube.eventsv1`) have no handler in the local API: their objects
now are the ones :class:`~asynckubelet.api.kube.watchcache.ObjectHistory` knows (as the
API server's watch cache answers a list), shown in the group version served. Label and
field selectors apply to what is served; a table is printed from the kept objects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from asynckubelet.api import rows
from asynckubelet.api.answers import label_selector, not_found, selected, wants_table
from asynckubelet.api.kube import eventsv1, fields, slices
from asynckubelet.api.kube.discovery import Served
from asynckubelet.api.kube.watches import OBJECTS_KEY, bad_request, shown
from asynckubelet.kubectl.objects import event_seen

Handler = Callable[[web.Request], Any]
Convert = Callable[[Mapping[str, Any]], dict[str, Any]]


def _same(body: Mapping[str, Any]) -> dict[str, Any]:
    return dict(body)


def _event_table(bodies: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return rows.event_table(sorted(bodies, key=event_seen))


@dataclass(frozen=True)
class Cached:
    """How one resource is answered from the window: the kind kept, the resource's name
    in messages and selectors, the conversion to what is served, and its table."""

    kind: str
    resource: str
    convert: Convert
    table: Callable[[Sequence[Mapping[str, Any]]], dict[str, Any]]


CACHED: Mapping[tuple[str, str], Cached] = {
    (slices.API_VERSION, "endpointslices"): Cached(
        "EndpointSlice",
        "endpointslices.discovery.k8s.io",
        _same,
        rows.endpointslice_table,
    ),
    (eventsv1.API_VERSION, "events"): Cached(
        "Event", eventsv1.RESOURCE, eventsv1.to_events_v1, _event_table
    ),
}
"""The resources answered here, by group version and name."""


def of(served: Served) -> Cached | None:
    return CACHED.get((served.group_version, served.name))


def handlers(served: Served, cached: Cached) -> tuple[Handler, Handler]:
    """(list, get) of ``served``."""

    async def listing(request: web.Request) -> web.Response:
        history = request.app[OBJECTS_KEY]
        namespace = request.match_info.get("namespace")
        labels = label_selector(request)
        try:
            terms = fields.parse(
                request.query.get("fieldSelector", ""),
                resource=cached.resource,
                namespaced=served.namespaced,
            )
        except ValueError as e:
            raise bad_request(str(e)) from None
        match = fields.matcher(terms)
        kept, items = [], []
        for change in history.current(cached.kind):
            body = shown(cached.kind, change.body)
            item = cached.convert(body)
            meta = item.get("metadata") or {}
            if namespace is not None and meta.get("namespace") != namespace:
                continue
            if not selected(labels, dict(meta.get("labels") or {})) or not match(item):
                continue
            kept.append(body)
            items.append(item)
        if wants_table(request):
            return web.json_response(cached.table(kept))
        answer = {
            "kind": f"{served.kind}List",
            "apiVersion": served.group_version,
            "metadata": {},
            "items": items,
        }
        return web.json_response(answer)

    async def one(request: web.Request) -> web.Response:
        history = request.app[OBJECTS_KEY]
        name = request.match_info["name"]
        key = (request.match_info.get("namespace", ""), name)
        found = history.body_of(cached.kind, key)
        if found is None:
            return not_found(cached.resource, name)
        body = shown(cached.kind, found)
        if wants_table(request):
            return web.json_response(cached.table([body]))
        item = cached.convert(body)
        version = str(history.version_of(cached.kind, key))
        item["metadata"] = {**(item.get("metadata") or {}), "resourceVersion": version}
        return web.json_response(item)

    return listing, one


__all__ = ["CACHED", "Cached", "handlers", "of"]
