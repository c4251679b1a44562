"""Writes of ``pods/status``: ``PUT`` and ``PATCH`` (JSON, merge and strategic merge).

The kubelet owns a pod's status and writes over a client's change of it at its next sync,
as on a cluster; what a client's write keeps is what the kubelet leaves to others: the
conditions of types that are not its own (a readiness gate's condition, such as
``example.com/load-balancer-ready``). They replace the ones written before, the pod's
status is generated anew with them, and its ``Ready`` condition waits for its readiness
gates' conditions to be ``True``, as the kubelet's does. A stale ``resourceVersion`` is
``409``; a condition without a type or with a status other than ``True``, ``False`` or
``Unknown`` is ``422``, worded as the API server words it.
"""

from __future__ import annotations

import json
from typing import Any, cast

from aiohttp import web
from lightkube.models.core_v1 import PodCondition

from asynckubelet import httpbounds
from asynckubelet.api.answers import not_found, served_pod, status
from asynckubelet.api.endpoints import NODE_KEY
from asynckubelet.api.kube.pods import HISTORY_KEY
from asynckubelet.api.kube.podwrites import patch_type
from asynckubelet.api.kube.writes import Refused, apply_patch
from asynckubelet.kubectl import pods as pod_printing
from asynckubelet.node.status import KUBELET_CONDITIONS

MAX_BODY_BYTES = 1 << 20
STATUSES = ("False", "True", "Unknown")


def _invalid(name: str, field: str, detail: str) -> Refused:
    message = f'Pod "{name}" is invalid: {field}: {detail}'
    return Refused(status(422, "Invalid", message, name=name, kind="Pod"))


def _current(request: web.Request, name: str) -> tuple[str, dict[str, Any]] | None:
    """The pod's uid and its document as served now, or None."""
    node = request.app[NODE_KEY]
    record = node.status.find(request.match_info["namespace"], name)
    if record is None:
        return None
    body = pod_printing.pod_document(served_pod(node, record.view))
    version = request.app[HISTORY_KEY].version_of(record.uid, record.version)
    body.setdefault("metadata", {})["resourceVersion"] = str(version)
    return record.uid, body


async def _read(request: web.Request) -> Any:
    raw = await httpbounds.read_body(request, MAX_BODY_BYTES)
    if len(raw) > MAX_BODY_BYTES:
        raise Refused(status(413, "RequestEntityTooLarge", "the request body is too large"))
    try:
        return json.loads(raw.decode() or "null")
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        message = f"the body of the request was in an unknown format: {e}"
        raise Refused(status(400, "BadRequest", message)) from None


def _conditions(name: str, body: Any) -> list[PodCondition]:
    """The conditions of ``body``'s status that are not the kubelet's, checked."""
    found = ((body.get("status") or {}) if isinstance(body, dict) else {}).get("conditions")
    if found is None:
        return []
    if not isinstance(found, list):
        raise _invalid(name, "status.conditions", "Invalid value: must be a list")
    kept: list[PodCondition] = []
    for index, item in enumerate(found):
        field = f"status.conditions[{index}]"
        if not isinstance(item, dict) or not isinstance(item.get("type"), str) or not item["type"]:
            raise _invalid(name, f"{field}.type", "Required value")
        if item.get("status") not in STATUSES:
            shown = json.dumps(item.get("status"))
            supported = ", ".join(f'"{s}"' for s in STATUSES)
            raise _invalid(
                name,
                f"{field}.status",
                f"Unsupported value: {shown}: supported values: {supported}",
            )
        if item["type"] in KUBELET_CONDITIONS:
            continue
        try:
            kept.append(cast(PodCondition, PodCondition.from_dict(item)))
        except (ValueError, TypeError) as e:
            raise _invalid(name, field, f"Invalid value: {e}") from None
    return kept


def _store(
    request: web.Request, name: str, uid: str, old: dict[str, Any], new: Any
) -> web.Response:
    if not isinstance(new, dict) or new.get("kind", "Pod") != "Pod":
        raise Refused(status(400, "BadRequest", "the body of the request must be a Pod"))
    meta = new.get("metadata") or {}
    if meta.get("name", name) != name:
        message = (
            f"the name of the object ({meta.get('name')}) does not match the name on the URL "
            f"({name})"
        )
        raise Refused(status(400, "BadRequest", message))
    given = str(meta.get("resourceVersion") or "")
    if given and given != old["metadata"]["resourceVersion"]:
        message = (
            f'Operation cannot be fulfilled on pods "{name}": the object has been modified; '
            "please apply your changes to the latest version and try again"
        )
        raise Refused(status(409, "Conflict", message, name=name, kind="pods"))
    conditions = _conditions(name, new)
    if not request.app[NODE_KEY].set_conditions(uid, conditions):
        return not_found("pods", name)
    own = [
        c
        for c in old.get("status", {}).get("conditions") or []
        if c.get("type") in KUBELET_CONDITIONS
    ]
    old.setdefault("status", {})["conditions"] = [*own, *(c.to_dict() for c in conditions)]
    return web.json_response(old)


async def replace_status(request: web.Request) -> web.Response:
    """``PUT pods/NAME/status``."""
    name = request.match_info["name"]
    try:
        found = _current(request, name)
        if found is None:
            return not_found("pods", name)
        return _store(request, name, *found, await _read(request))
    except Refused as e:
        return e.response


async def patch_status(request: web.Request) -> web.Response:
    """``PATCH pods/NAME/status``."""
    name = request.match_info["name"]
    try:
        kind = patch_type(request)
        found = _current(request, name)
        if found is None:
            return not_found("pods", name)
        uid, old = found
        changed = apply_patch(json.loads(json.dumps(old)), await _read(request), kind)
        return _store(request, name, uid, old, changed)
    except Refused as e:
        return e.response


__all__ = ["patch_status", "replace_status"]
