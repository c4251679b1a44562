"""The API machinery a list answer gains on its way out: resourceVersions, chunks and
the watches of the kinds kept in the object store, of Events and of the kinds derived
from them (Endpoints and EndpointSlices, :mod:`~asynckubelet.api.kube.slices`; the
``events.k8s.io`` Events, :mod:`~asynckubelet.api.kube.cached`).

The local API's handlers (:mod:`asynckubelet.api.objects`) answer lists without
versions; this wrapper gives each object the resourceVersion of its last change and the
list the current one (:mod:`~asynckubelet.api.kube.watchcache`, one sequence with the
pods'), cuts it to ``limit`` from ``continue`` (:mod:`~asynckubelet.api.kube.paging`),
and answers ``watch`` of those kinds (:mod:`~asynckubelet.api.kube.watches`). Pods and
this Node carry their own versions and watches (:mod:`~asynckubelet.api.kube.pods`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from asynckubelet.api.endpoints import flag_param
from asynckubelet.api.kube import cached, paging, watches
from asynckubelet.api.kube.discovery import Served
from asynckubelet.api.kube.pods import HISTORY_KEY
from asynckubelet.api.kube.watchcache import STORED_KINDS

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
WATCHED = (*STORED_KINDS, "Event", "Endpoints", "EndpointSlice")
"""The kinds whose watches this module answers."""


def _versioned(body: dict[str, Any], versions: Callable[[str, str], int]) -> None:
    for item in body.get("items") or []:
        meta = item.setdefault("metadata", {})
        meta["resourceVersion"] = str(
            versions(str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        )


def listed(served: Served, handler: Handler) -> Handler:
    """``handler`` (a list of ``served``) with versions, chunks and watches."""
    kind = served.kind

    async def answer(request: web.Request) -> web.StreamResponse:
        history = request.app[watches.OBJECTS_KEY]
        if flag_param(request, "watch"):
            if kind in WATCHED:
                found = cached.of(served)
                return await watches.watch_objects(
                    request,
                    kind,
                    found.resource if found is not None else served.name,
                    namespaced=served.namespaced,
                    api_version=served.group_version,
                    convert=found.convert if found is not None else None,
                )
            return await handler(request)
        version = history.versions.value
        floor = request.app[HISTORY_KEY].floor if kind == "Pod" else history.floor(kind)
        try:
            paging.check_match(request, version=version, floor=floor)
        except paging.ListError as e:
            return e.response()
        response = await handler(request)
        if response.status != 200 or not isinstance(response, web.Response):
            return response
        body = json.loads(response.text or "{}")
        if kind in WATCHED:
            _versioned(body, lambda ns, name: history.version_of(kind, (ns, name)))
        try:
            return web.json_response(paging.page(request, body, version=version, floor=floor))
        except paging.ListError as e:
            return e.response()

    return answer


__all__ = ["WATCHED", "listed"]
