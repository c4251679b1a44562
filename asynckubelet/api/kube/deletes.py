"""Deletes of the Kubernetes API: ``DELETE`` of one object or of a collection (by
``labelSelector``), with ``gracePeriodSeconds`` and ``propagationPolicy`` from the query
or a ``DeleteOptions`` body, through the node's one delete
(:func:`~asynckubelet.api.apply.delete_one`).

``Background`` (the default) removes the owner at once and its dependents with it.
``Foreground`` keeps an owner (a Deployment, ReplicaSet, StatefulSet or Job) with a
``deletionTimestamp`` and the ``foregroundDeletion`` finalizer, answering it so, while
its pods stop, then removes it, as the garbage collector does: a watch sees it
``MODIFIED``, then ``DELETED``. ``Orphan`` removes the owner and its dependents' owner
references to it."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

from aiohttp import web

from asynckubelet import httpbounds
from asynckubelet._logging import logger
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
from asynckubelet.node.kubelet import API_SOURCE, Kubelet
from asynckubelet.node.objects import StoredObject
from asynckubelet.workloads.controller import OWNER_KINDS
from asynckubelet.workloads.pods import controller_of

PROPAGATION = ("Foreground", "Background", "Orphan")
FOREGROUND = "foregroundDeletion"
"""The finalizer that keeps an owner deleted in the foreground until its dependents are
gone."""
COLLECTING_KEY = web.AppKey("foreground_collections", dict[str, asyncio.Task[None]])
"""The collections under way, by owner UID."""


def _deleting(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` marked as being deleted in the foreground."""
    meta = body.setdefault("metadata", {})
    meta.setdefault("deletionTimestamp", times.now_utc().strftime("%Y-%m-%dT%H:%M:%SZ"))
    meta.setdefault("deletionGracePeriodSeconds", 0)
    finalizers = list(meta.get("finalizers") or [])
    if FOREGROUND not in finalizers:
        meta["finalizers"] = [*finalizers, FOREGROUND]
    return body


def _marked(node: Kubelet, kind: str, ns: str, name: str) -> StoredObject | None:
    """The owner ``kind`` ``ns/name`` kept with a ``deletionTimestamp`` and the
    ``foregroundDeletion`` finalizer (its controller stops at that), as are the owners
    among its dependents; the owner, None when it is gone."""
    stored = node.objects.get(kind, ns or None, name)
    if stored is None:
        return None
    for obj in (stored, *writes.dependents(node, stored)):
        meta = obj.body.get("metadata") or {}
        if obj.kind in OWNER_KINDS and FOREGROUND not in (meta.get("finalizers") or []):
            node.objects.put_object(_deleting(copy.deepcopy(dict(obj.body))), source=obj.source)
    return node.objects.get(kind, ns or None, name)


async def _collect(node: Kubelet, owner: StoredObject, grace: float | None) -> None:
    """What the garbage collector does for an owner deleted in the foreground: its pods
    deleted and waited for until the node has stopped them, then its other dependents and
    the owner itself removed."""
    found = writes.dependents(node, owner)
    pods = [{"namespace": o.namespace, "name": o.name} for o in found if o.kind == "Pod"]
    # A rollout's old pods, deleted before and still stopping, are waited for too.
    owners = {owner.uid, *(o.uid for o in found)}
    waited = pods + writes.stopping(node, owners, pods)
    for pod in pods:
        await node.delete(pod["namespace"], pod["name"], grace_period=grace, wait=False)
    for pod in waited:
        while node.status.find(pod["namespace"], pod["name"]) is not None:
            await node.status.changed()
    for obj in found:
        if obj.kind != "Pod":
            node.objects.remove(obj.kind, obj.namespace, obj.name)
    node.objects.remove(owner.kind, owner.namespace, owner.name)
    logger.info("{} {}/{} deleted (foreground)", owner.resource, owner.namespace, owner.name)


def _collect_later(app: web.Application, owner: StoredObject, grace: float | None) -> None:
    """Run :func:`_collect` for ``owner`` beside the request, once (a second delete of an
    owner being collected leaves the collection under way to finish)."""
    tasks = app[COLLECTING_KEY]
    if owner.uid in tasks:
        return
    task = asyncio.get_running_loop().create_task(_collect(app[NODE_KEY], owner, grace))
    tasks[owner.uid] = task
    task.add_done_callback(lambda _: tasks.pop(owner.uid, None))


async def resume_collections(app: web.Application) -> None:
    """Collect the owners left deleting in the foreground (by a daemon that stopped
    before their dependents were gone)."""
    node = app[NODE_KEY]
    for kind in OWNER_KINDS:
        for obj in node.objects.list(kind):
            if FOREGROUND in ((obj.body.get("metadata") or {}).get("finalizers") or []):
                owner = controller_of(obj.body.get("metadata"))
                if owner is None or owner.kind not in OWNER_KINDS:
                    _collect_later(app, obj, None)


async def cancel_collections(app: web.Application) -> None:
    """Stop the collections under way (the app stops)."""
    tasks: dict[str, asyncio.Task[None]] = app[COLLECTING_KEY]
    for task in list(tasks.values()):
        task.cancel()


def _orphan(node: Kubelet, owner: StoredObject) -> None:
    """The owner's dependents without their reference to it (``Orphan``)."""
    for kind in ("Job", "ReplicaSet", "ControllerRevision", "Pod"):
        for obj in node.objects.list(kind, owner.namespace):
            refs = (obj.body.get("metadata") or {}).get("ownerReferences") or []
            kept = [r for r in refs if not (isinstance(r, dict) and r.get("uid") == owner.uid)]
            if len(kept) == len(refs):
                continue
            body = copy.deepcopy(dict(obj.body))
            if kept:
                body["metadata"]["ownerReferences"] = kept
            else:
                body["metadata"].pop("ownerReferences", None)
            node.objects.put_object(body, source=obj.source)


async def _options(request: web.Request) -> tuple[float | None, str]:
    """``gracePeriodSeconds`` and ``propagationPolicy`` from the query or the body's
    ``DeleteOptions``."""
    raw = await httpbounds.read_body(request, MAX_BODY_BYTES) if request.can_read_body else b""
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
    if policy == "Foreground" and served.kind in OWNER_KINDS:
        owner = _marked(node, served.kind, ns, name)
        if owner is not None:
            _collect_later(request.app, owner, grace)
        return current(node, request.app, served, ns, name)
    if policy == "Orphan" and served.kind != "Pod":
        removed = node.objects.remove(served.kind, ns or None, name)
        if removed is not None:
            _orphan(node, removed)
    else:
        result = {"kind": served.kind, "namespace": ns, "name": name, "status": "notfound"}
        await writes.delete_one(request.app, node, result, grace=grace)
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
