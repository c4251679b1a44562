"""Deletes of the Kubernetes API: ``DELETE`` of one object or of a collection (by
``labelSelector``), with ``gracePeriodSeconds`` and ``propagationPolicy`` from the query
or a ``DeleteOptions`` body, through the node's one delete
(:func:`~asynckubelet.api.apply.delete_one`)."""

from __future__ import annotations

import json
from typing import Any

import anyio
from aiohttp import web

from asynckubelet.api import apply as writes
from asynckubelet.api.answers import not_found
from asynckubelet.api.endpoints import NODE_KEY
from asynckubelet.api.kube.discovery import Served
from asynckubelet.api.kube.pods import HISTORY_KEY
from asynckubelet.api.kube.writes import (
    MAX_BODY_BYTES,
    Handler,
    Refused,
    answer_json,
    answered,
    current,
    is_dry_run,
    namespace_of,
    refuse,
    what,
)
from asynckubelet.kubectl import times
from asynckubelet.manifests import kinds as kind_table
from asynckubelet.manifests.selectors import parse_label_selector, selector_matches
from asynckubelet.node.kubelet import API_SOURCE

PROPAGATION = ("Foreground", "Background", "Orphan")
FOREGROUND_SECONDS = 300
"""How long a ``Foreground`` delete waits for the dependent pods to be gone before it
answers (the owner is gone once they are, as the garbage collector's finalizer orders)."""


async def _options(request: web.Request) -> tuple[float | None, str]:
    """``gracePeriodSeconds`` and ``propagationPolicy`` from the query or the body's
    ``DeleteOptions``."""
    raw = await request.content.read(MAX_BODY_BYTES + 1) if request.can_read_body else b""
    options: Any = {}
    if raw.strip():
        try:
            options = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise refuse(400, "BadRequest", "the DeleteOptions body is not JSON") from None
    if not isinstance(options, dict):
        raise refuse(400, "BadRequest", "the DeleteOptions body must be an object")
    grace: Any = options.get("gracePeriodSeconds", request.query.get("gracePeriodSeconds"))
    policy = str(options.get("propagationPolicy") or request.query.get("propagationPolicy") or "")
    if policy and policy not in PROPAGATION:
        raise refuse(
            400,
            "BadRequest",
            f'propagationPolicy: Unsupported value: "{policy}": supported values: '
            '"Foreground", "Background", "Orphan"',
        )
    if grace is None:
        return None, policy
    try:
        seconds = int(grace)
    except (TypeError, ValueError):
        raise refuse(400, "BadRequest", f'gracePeriodSeconds: Invalid value: "{grace}"') from None
    return float(max(seconds, 0)), policy


async def _delete(
    request: web.Request, served: Served, ns: str, name: str, *, grace: float | None, policy: str
) -> dict[str, Any] | None:
    """Delete one object; what it was (with ``deletionTimestamp`` for a pod still
    stopping), None when there was none."""
    node = request.app[NODE_KEY]
    found = current(node, request.app, served, ns, name)
    if found is None:
        return None
    if is_dry_run(request):
        return answered(request, served, found, dry_run=True)
    if policy == "Orphan" and served.kind != "Pod":
        node.objects.remove(served.kind, ns or None, name)
    else:
        result = {"kind": served.kind, "namespace": ns, "name": name, "status": "notfound"}
        pods = await writes.delete_one(request.app, node, result, grace=grace)
        if policy == "Foreground" and served.kind != "Pod":
            with anyio.move_on_after(FOREGROUND_SECONDS):
                for pod in pods:
                    await node.wait(pod["namespace"], pod["name"], "Deleted")
    if served.kind == "Pod":
        after = current(node, request.app, served, ns, name)
        if after is not None:
            meta = after.setdefault("metadata", {})
            meta.setdefault("deletionTimestamp", times.now_utc().strftime("%Y-%m-%dT%H:%M:%SZ"))
            spec_grace = (after.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            meta.setdefault(
                "deletionGracePeriodSeconds", int(grace) if grace is not None else spec_grace
            )
            return after
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {
            "name": name,
            "group": served.group,
            "kind": served.name,
            "uid": (found.get("metadata") or {}).get("uid", ""),
        },
    }


def delete(served: Served) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            name = request.match_info["name"]
            grace, policy = await _options(request)
            answer = await _delete(
                request, served, namespace_of(request, served), name, grace=grace, policy=policy
            )
            if answer is None:
                return not_found(what(served), name)
            return answer_json(answer)
        except Refused as e:
            return e.response

    return handler


def delete_collection(served: Served) -> Handler:
    """``DELETE`` of a list: each object the ``labelSelector`` selects, answered as a list."""

    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            node = request.app[NODE_KEY]
            grace, policy = await _options(request)
            try:
                selector = parse_label_selector(request.query.get("labelSelector", ""))
            except ValueError as e:
                raise refuse(400, "BadRequest", str(e)) from None
            ns = request.match_info.get("namespace")
            deleted = []
            for obj in node.objects.list(served.kind, ns):
                if obj.source != API_SOURCE or not selector_matches(selector, obj.labels):
                    continue
                found = current(node, request.app, served, obj.namespace, obj.name)
                gone = await _delete(
                    request, served, obj.namespace, obj.name, grace=grace, policy=policy
                )
                if gone is not None and found is not None:
                    deleted.append(answered(request, served, found, dry_run=True))
            info = kind_table.KINDS[served.kind]
            version = str(request.app[HISTORY_KEY].version)
            return answer_json(
                {
                    "kind": f"{served.kind}List",
                    "apiVersion": info.api_version,
                    "metadata": {"resourceVersion": version},
                    "items": deleted,
                }
            )
        except Refused as e:
            return e.response

    return handler
