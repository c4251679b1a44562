"""``PUT`` and ``PATCH`` of a pod's subresources that change its spec (``resize``,
``ephemeralcontainers``), and the patch steps every pod subresource shares.

A ``PATCH`` is JSON, merge or strategic merge (``415`` otherwise) and applies to the pod as
stored, with the live pod's ``resourceVersion``; a patch that does not apply is ``422`` (JSON
patch) or ``400``. The pod sent or patched must be a Pod named as the URL names it
(``400``), and the pod must be there (``404``). Each subresource's update turns what is sent
into the pod to store (refusing it with the API server's answer); the pod is then stored
through the same path as an update of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from asynckubelet.api.answers import not_found
from asynckubelet.api.endpoints import NODE_KEY
from asynckubelet.api.kube import patches
from asynckubelet.api.kube.discovery import SERVED
from asynckubelet.api.kube.writes import (
    Refused,
    api_cause,
    apply_patch,
    current,
    patch_base,
    read_body,
    refuse,
    replace,
    stored_form,
)
from asynckubelet.errors import FieldError

PODS = next(s for s in SERVED if s.kind == "Pod")
PATCH_TYPES = (patches.JSON_PATCH, patches.MERGE_PATCH, patches.STRATEGIC_PATCH)

Update = Callable[[str, dict[str, Any], dict[str, Any]], dict[str, Any]]
"""The pod to store from its name, what was sent (a Pod named as the URL names it) and the
pod as stored; raises :class:`~asynckubelet.api.kube.writes.Refused`."""


def patch_type(request: web.Request) -> str:
    """The request's patch type; ``415`` when it is not one of :data:`PATCH_TYPES`."""
    kind = request.content_type
    if kind not in PATCH_TYPES:
        message = (
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(PATCH_TYPES)
        )
        raise refuse(415, "UnsupportedMediaType", message)
    return kind


def invalid_pod(name: str, errors: list[FieldError]) -> Refused:
    """``422 Invalid`` for the pod ``name``, worded as the API server words it."""
    parts = [str(e) for e in errors]
    message = f'Pod "{name}" is invalid: ' + (
        "[" + ", ".join(parts) + "]" if len(parts) > 1 else parts[0]
    )
    causes = [
        api_cause({"reason": e.reason, "message": e.detail, "field": e.field}) for e in errors
    ]
    return refuse(422, "Invalid", message, name=name, kind="Pod", causes=causes)


async def _store(
    request: web.Request, name: str, sent: Any, subresource: str, update: Update
) -> web.Response:
    node = request.app[NODE_KEY]
    ns = request.match_info["namespace"]
    stored = stored_form(node, PODS, ns, name)
    if stored is None or current(node, request.app, PODS, ns, name) is None:
        return not_found("pods", name)
    if not isinstance(sent, dict) or sent.get("kind", "Pod") != "Pod":
        raise refuse(400, "BadRequest", "the body of the request must be a Pod")
    meta = sent.get("metadata") or {}
    if not isinstance(meta, dict) or meta.get("name", name) != name:
        given = meta.get("name") if isinstance(meta, dict) else None
        message = f"the name of the object ({given}) does not match the name on the URL ({name})"
        raise refuse(400, "BadRequest", message)
    new = update(name, sent, stored)
    new.setdefault("metadata", {})["resourceVersion"] = str(meta.get("resourceVersion") or "")
    return await replace(request, PODS, new, name=name, subresource=subresource)


async def subresource_put(request: web.Request, subresource: str, update: Update) -> web.Response:
    """``PUT pods/NAME/<subresource>``: the pod sent, through ``update``."""
    try:
        name = request.match_info["name"]
        return await _store(request, name, await read_body(request), subresource, update)
    except Refused as e:
        return e.response


async def subresource_patch(request: web.Request, subresource: str, update: Update) -> web.Response:
    """``PATCH pods/NAME/<subresource>``: the stored pod patched, through ``update``."""
    name = request.match_info["name"]
    try:
        kind = patch_type(request)
        node = request.app[NODE_KEY]
        original = patch_base(node, request.app, PODS, request.match_info["namespace"], name)
        if original is None:
            return not_found("pods", name)
        changed = apply_patch(original, await read_body(request), kind)
        return await _store(request, name, changed, subresource, update)
    except Refused as e:
        return e.response


__all__ = [
    "PATCH_TYPES",
    "PODS",
    "Update",
    "invalid_pod",
    "patch_type",
    "subresource_patch",
    "subresource_put",
]
