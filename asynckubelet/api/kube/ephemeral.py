"""Writes of ``pods/NAME/ephemeralcontainers``: ``PUT`` and ``PATCH`` (JSON, merge and
strategic merge), as ``kubectl debug`` sends them.

Only the ephemeral containers of what is sent are kept (the API server's
``dropNonEphemeralContainerUpdates``); the pod they make is validated as
``ValidatePodEphemeralContainersUpdate`` validates it
(:mod:`~asynckubelet.manifests.ephemeral`: additions only, names unique across every
container, no ports, probes, resources or lifecycle, ``targetContainerName`` naming a
container), refused with ``422 Invalid`` worded as the API server words it, and a stale
``resourceVersion`` is ``409``. The pod is then stored through the same path as an update of
it, and its worker starts the added containers (:mod:`~asynckubelet.runtime.actions`).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from asynckubelet.api.answers import not_found, status
from asynckubelet.api.endpoints import NODE_KEY
from asynckubelet.api.kube import patches
from asynckubelet.api.kube.discovery import SERVED
from asynckubelet.api.kube.writes import (
    Refused,
    api_cause,
    current,
    read_body,
    refuse,
    replace,
    stored_form,
)
from asynckubelet.errors import FieldError
from asynckubelet.manifests.ephemeral import (
    ephemeral_update,
    validate_ephemeral_containers_update,
)

SUBRESOURCE = "ephemeralcontainers"
PODS = next(s for s in SERVED if s.kind == "Pod")


def _invalid(name: str, errors: list[FieldError]) -> Refused:
    parts = [str(e) for e in errors]
    message = f'Pod "{name}" is invalid: ' + (
        "[" + ", ".join(parts) + "]" if len(parts) > 1 else parts[0]
    )
    causes = [
        api_cause({"reason": e.reason, "message": e.detail, "field": e.field}) for e in errors
    ]
    return refuse(422, "Invalid", message, name=name, kind="Pod", causes=causes)


async def _store(request: web.Request, name: str, sent: Any) -> web.Response:
    node = request.app[NODE_KEY]
    ns = request.match_info["namespace"]
    stored = stored_form(node, PODS, ns, name)
    live = current(node, request.app, PODS, ns, name)
    if stored is None or live is None:
        return not_found("pods", name)
    if not isinstance(sent, dict) or sent.get("kind", "Pod") != "Pod":
        raise refuse(400, "BadRequest", "the body of the request must be a Pod")
    meta = sent.get("metadata") or {}
    if not isinstance(meta, dict) or meta.get("name", name) != name:
        message = (
            f"the name of the object ({meta.get('name') if isinstance(meta, dict) else None}) "
            f"does not match the name on the URL ({name})"
        )
        raise refuse(400, "BadRequest", message)
    new = ephemeral_update(sent, stored)
    errors = validate_ephemeral_containers_update(new, stored)
    if errors:
        raise _invalid(name, errors)
    new.setdefault("metadata", {})["resourceVersion"] = str(meta.get("resourceVersion") or "")
    return await replace(request, PODS, new, name=name, subresource=SUBRESOURCE)


async def replace_ephemeral(request: web.Request) -> web.Response:
    """``PUT pods/NAME/ephemeralcontainers``."""
    try:
        return await _store(request, request.match_info["name"], await read_body(request))
    except Refused as e:
        return e.response


async def patch_ephemeral(request: web.Request) -> web.Response:
    """``PATCH pods/NAME/ephemeralcontainers``."""
    name = request.match_info["name"]
    kind = request.content_type
    accepted = (patches.JSON_PATCH, patches.MERGE_PATCH, patches.STRATEGIC_PATCH)
    if kind not in accepted:
        message = (
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(accepted)
        )
        return status(415, "UnsupportedMediaType", message)
    try:
        node = request.app[NODE_KEY]
        ns = request.match_info["namespace"]
        original = stored_form(node, PODS, ns, name)
        live = current(node, request.app, PODS, ns, name)
        if original is None or live is None:
            return not_found("pods", name)
        version = (live.get("metadata") or {}).get("resourceVersion")
        if version:
            original.setdefault("metadata", {})["resourceVersion"] = version
        patch = await read_body(request)
        try:
            changed = patches.patched(original, patch, kind)
        except (ValueError, KeyError, IndexError, TypeError, RecursionError) as e:
            code = 422 if kind == patches.JSON_PATCH else 400
            return status(code, "BadRequest", str(e))
        return await _store(request, name, changed)
    except Refused as e:
        return e.response


__all__ = ["patch_ephemeral", "replace_ephemeral"]
