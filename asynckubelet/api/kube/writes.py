"""Writes of the Kubernetes API: create, update, patch, server-side apply and delete.

Every write goes through the node's one admission (:func:`~asynckubelet.api.apply.
admit_and_apply`, what ``asynckubelet apply`` uses) and every delete through its one
delete (:func:`~asynckubelet.api.apply.delete_one`); this module only speaks the API
server's verbs over them: ``POST`` (``409 AlreadyExists``, ``generateName``), ``PUT``
(``409 Conflict`` on a stale ``resourceVersion``), ``PATCH`` in the four types
(:mod:`~asynckubelet.api.kube.patches`), ``DELETE`` of one object or a collection
(``gracePeriodSeconds``, ``propagationPolicy``), ``dryRun=All`` and
``fieldValidation``. A ``status`` sent is ignored, as the API server ignores it
outside the ``status`` subresource. Server-side apply stores the applied object whole
(no field-level merging between managers) and answers it with one ``managedFields``
entry for its manager.
"""

from __future__ import annotations

import copy
import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import yaml
from aiohttp import web

from asynckubelet.api import apply as writes
from asynckubelet.api.answers import not_found, served_pod, status
from asynckubelet.api.endpoints import NODE_KEY
from asynckubelet.api.kube import patches, protobuf
from asynckubelet.api.kube.discovery import Served
from asynckubelet.api.kube.pods import HISTORY_KEY
from asynckubelet.kubectl import pods as pod_printing
from asynckubelet.kubectl import times
from asynckubelet.manifests import decoding, defaults, strict
from asynckubelet.manifests import kinds as kind_table
from asynckubelet.manifests.selectors import parse_label_selector, selector_matches
from asynckubelet.node.kubelet import API_SOURCE, Kubelet
from asynckubelet.node.objects import SERVER_FIELDS, secret_summary

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MAX_BODY_BYTES = 3 * 1024 * 1024
"""The API server's request size limit."""
NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
"""What ``generateName`` appends (upstream's ``utilrand.String`` alphabet), 5 of them."""
PROPAGATION = ("Foreground", "Background", "Orphan")
FOREGROUND_SECONDS = 300
"""How long a ``Foreground`` delete waits for the dependent pods to be gone before it
answers (the owner is gone once they are, as the garbage collector's finalizer orders)."""


class Refused(Exception):
    """A write refused with the API server's answer."""

    def __init__(self, response: web.Response) -> None:
        super().__init__(response.text)
        self.response = response


def _refuse(code: int, reason: str, message: str, **details: Any) -> Refused:
    return Refused(status(code, reason, message, **details))


def _json(body: Any, code: int = 200, warnings: list[str] | None = None) -> web.Response:
    response = web.json_response(body, status=code)
    for text in warnings or []:
        response.headers.add("Warning", f"299 - {json.dumps(text)}")
    return response


async def _read(request: web.Request, *, yaml_ok: bool = False) -> Any:
    raw = await request.content.read(MAX_BODY_BYTES + 1)
    if len(raw) > MAX_BODY_BYTES:
        raise _refuse(413, "RequestEntityTooLarge", "the request body is too large")
    if request.content_type == protobuf.PROTOBUF:
        try:
            return protobuf.decode(raw)
        except (ValueError, UnicodeDecodeError) as e:
            message = f"the protobuf body of the request was not read: {e}; send application/json"
            raise _refuse(415, "UnsupportedMediaType", message) from None
    try:
        text = raw.decode()
        if not yaml_ok:
            return json.loads(text)
        documents = list(decoding.load_documents(text))
    except (ValueError, UnicodeDecodeError, RecursionError, yaml.YAMLError) as e:
        message = f"the body of the request was in an unknown format: {e}"
        raise _refuse(400, "BadRequest", message) from None
    if len(documents) != 1:
        raise _refuse(400, "BadRequest", "the apply configuration must be one YAML document")
    return documents[0]


def _what(served: Served) -> str:
    return f"{served.name}.{served.group}" if served.group else served.name


def _dry_run(request: web.Request) -> bool:
    values = request.query.getall("dryRun", [])
    for value in values:
        if value != "All":
            raise _refuse(
                400, "BadRequest", f'dryRun: Unsupported value: "{value}": supported values: "All"'
            )
    return bool(values)


def _namespace(request: web.Request, served: Served) -> str:
    return request.match_info.get("namespace", "default") if served.namespaced else ""


def current(
    node: Kubelet, app: web.Application, served: Served, ns: str, name: str
) -> dict[str, Any] | None:
    """The object as a GET answers it, None when there is none."""
    if served.kind == "Pod":
        record = node.status.find(ns, name)
        if record is None:
            applied = _stored_form(node, served, ns, name)
            if applied is not None:
                applied["metadata"]["resourceVersion"] = str(app[HISTORY_KEY].version)
                applied.setdefault("status", pod_printing.pending_status(applied))
            return applied
        body = pod_printing.pod_document(served_pod(node, record.view))
        version = app[HISTORY_KEY].version_of(record.uid, record.version)
        body.setdefault("metadata", {})["resourceVersion"] = str(version)
        return body
    return _stored_form(node, served, ns, name)


def _stored_form(node: Kubelet, served: Served, ns: str, name: str) -> dict[str, Any] | None:
    """The object a patch applies to: as stored (a pod's spec as applied, no status)."""
    stored = node.objects.get(served.kind, ns or None, name)
    return copy.deepcopy(dict(stored.body)) if stored is not None else None


def _checked(
    body: Any, served: Served, request: web.Request, *, ns: str, name: str | None
) -> tuple[dict[str, Any], list[str]]:
    """``body`` as the kind ``served`` in ``ns`` named ``name`` (from the path), unknown
    fields handled as ``fieldValidation`` asks; the warnings to send."""
    if not isinstance(body, dict):
        raise _refuse(400, "BadRequest", "the body of the request must be an object")
    info = kind_table.KINDS[served.kind]
    body.setdefault("apiVersion", info.api_version)
    body.setdefault("kind", served.kind)
    if body.get("kind") != served.kind or body.get("apiVersion") != info.api_version:
        raise _refuse(
            400,
            "BadRequest",
            f"the API version in the data ({body.get('apiVersion')}) does not match the "
            f"expected API version ({info.api_version})",
        )
    meta = body.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise _refuse(400, "BadRequest", "metadata must be an object")
    if served.namespaced:
        given = meta.get("namespace")
        if given and given != ns:
            raise _refuse(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on "
                "the request",
            )
        meta["namespace"] = ns
    if name is not None and meta.get("name") and meta["name"] != name:
        raise _refuse(
            400,
            "BadRequest",
            f"the name of the object ({meta['name']}) does not match the name on the URL ({name})",
        )
    if name is not None:
        meta["name"] = name
    words = _validated_fields(body, served, request.query.get("fieldValidation", "Strict"))
    for field in SERVER_FIELDS:
        if field != "resourceVersion":
            meta.pop(field, None)
    body.pop("status", None)
    return body, words


def _validated_fields(body: dict[str, Any], served: Served, mode: str) -> list[str]:
    """``fieldValidation``: unknown fields refused (``Strict``, kubectl's default), or
    dropped and warned of (``Warn``: the warnings) or not (``Ignore``)."""
    if mode not in ("Strict", "Warn", "Ignore"):
        raise _refuse(
            400,
            "BadRequest",
            f'fieldValidation: Unsupported value: "{mode}": supported values: '
            '"Ignore", "Warn", "Strict"',
        )
    unknown = list(strict.check_document(body, kind_table.KINDS[served.kind].model).unknown)
    words = [f"unknown field {json.dumps(p)}" for p in unknown]
    if unknown and mode == "Strict":
        raise _refuse(400, "BadRequest", "strict decoding error: " + ", ".join(words))
    for path in unknown:
        _drop_path(body, path)
    return words if mode == "Warn" else []


def _drop_path(body: Any, path: str) -> None:
    """Remove ``spec.containers[0].x`` from ``body``."""
    parts: list[str | int] = []
    for piece in path.split("."):
        name, _, rest = piece.partition("[")
        if name:
            parts.append(name)
        for index in filter(None, rest.replace("]", "").split("[")):
            parts.append(int(index) if index.isdigit() else index)
    at = body
    for part in parts[:-1]:
        try:
            at = at[part]
        except (KeyError, IndexError, TypeError):
            return
    if isinstance(at, dict):
        at.pop(parts[-1], None)


async def _store(
    request: web.Request, served: Served, body: dict[str, Any], *, dry_run: bool
) -> None:
    """Admit and store ``body`` through the node's one admission."""
    meta = body["metadata"]
    meta.pop("resourceVersion", None)
    source = f"{served.name}/{meta.get('name')}"
    outcome = await writes.admit_and_apply(
        request.app, [(source, json.dumps(body))], dry_run=dry_run
    )
    if isinstance(outcome, web.Response):
        raise Refused(_reworded(outcome, served, str(meta.get("name"))))


def _reworded(response: web.Response, served: Served, name: str) -> web.Response:
    """The node's ``422 Invalid`` as the API server words it for one object:
    ``Pod "x" is invalid: spec.containers[0].image: Required value``."""
    if response.status != 422:
        return response
    body = json.loads(response.text or "{}")
    causes = body.get("details", {}).get("causes") or []
    parts = [
        f"{c.get('field')}: {c.get('reason')}" + (f": {c['message']}" if c.get("message") else "")
        for c in causes
    ]
    body["message"] = f'{served.kind} "{name}" is invalid: ' + (
        "[" + ", ".join(parts) + "]" if len(parts) > 1 else "".join(parts)
    )
    body["details"]["causes"] = [_api_cause(c) for c in causes]
    body.setdefault("details", {}).update(name=name, kind=served.kind, group=served.group)
    return web.json_response(body, status=422)


_CAUSE_TYPES = {
    "Required value": "FieldValueRequired",
    "Invalid value": "FieldValueInvalid",
    "Unsupported value": "FieldValueNotSupported",
    "Duplicate value": "FieldValueDuplicate",
    "Forbidden": "FieldValueForbidden",
    "Too long": "FieldValueTooLong",
    "Too many": "FieldValueTooMany",
    "Not found": "FieldValueNotFound",
    "Internal error": "InternalError",
}


def _api_cause(cause: dict[str, Any]) -> dict[str, Any]:
    """A cause as the API server sends it: its type (``FieldValueForbidden``) and its
    message with the type's words first (``Forbidden: ...``), which kubectl prints."""
    reason = str(cause.get("reason") or "")
    message = str(cause.get("message") or "")
    return {
        "reason": _CAUSE_TYPES.get(reason, reason),
        "message": f"{reason}: {message}" if reason and message else reason or message,
        "field": cause.get("field", ""),
    }


def _answer(
    request: web.Request, served: Served, body: dict[str, Any], *, dry_run: bool
) -> dict[str, Any]:
    """The object written as a read answers it (a Secret without its values)."""
    found = body if dry_run else _written(request, served, body)
    return secret_summary(found) if served.kind == "Secret" else found


def _written(request: web.Request, served: Served, body: dict[str, Any]) -> dict[str, Any]:
    node = request.app[NODE_KEY]
    meta = body["metadata"]
    ns, name = meta.get("namespace", ""), meta["name"]
    found = current(node, request.app, served, ns, name)
    stored = _stored_form(node, served, ns, name)
    if found is None or stored is None:
        return found or body
    if served.kind == "Pod":
        for key in ("labels", "annotations"):
            found["metadata"].pop(key, None)
            if key in stored["metadata"]:
                found["metadata"][key] = stored["metadata"][key]
        found["spec"] = {**found.get("spec", {}), **stored.get("spec", {})}
    return found


# -- the verbs ------------------------------------------------------------------------------


def create(served: Served) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            node = request.app[NODE_KEY]
            dry = _dry_run(request)
            ns = _namespace(request, served)
            body, warned = _checked(await _read(request), served, request, ns=ns, name=None)
            meta = body["metadata"]
            if not meta.get("name") and meta.get("generateName"):
                suffix = "".join(secrets.choice(NAME_CHARS) for _ in range(5))
                meta["name"] = f"{meta['generateName']}{suffix}"
            if not meta.get("name"):
                raise _refuse(
                    422,
                    "Invalid",
                    f'{served.kind}.{served.version} "" is invalid: metadata.name: Required '
                    "value: name or generateName is required",
                )
            name = meta["name"]
            if node.objects.get(served.kind, ns or None, name) is not None or (
                served.kind == "Pod" and node.status.find(ns, name) is not None
            ):
                raise _refuse(
                    409,
                    "AlreadyExists",
                    f'{_what(served)} "{name}" already exists',
                    name=name,
                    group=served.group,
                    kind=served.name,
                )
            await _store(request, served, body, dry_run=dry)
            return _json(_answer(request, served, body, dry_run=dry), 201, warned)
        except Refused as e:
            return e.response

    return handler


async def _replace(
    request: web.Request,
    served: Served,
    body: Any,
    *,
    name: str,
    created_ok: bool = False,
    managed: list[dict[str, Any]] | None = None,
) -> web.Response:
    """``body`` stored over the object ``name`` (created with ``created_ok``), with the
    ``managed`` fields entries, if any."""
    node = request.app[NODE_KEY]
    dry = _dry_run(request)
    ns = _namespace(request, served)
    body, warned = _checked(body, served, request, ns=ns, name=name)
    if managed:
        body["metadata"]["managedFields"] = managed
    old = current(node, request.app, served, ns, name)
    if old is None and not created_ok:
        return not_found(_what(served), name)
    stored = node.objects.get(served.kind, ns or None, name)
    if served.kind == "Pod" and old is not None and stored is None:
        raise _refuse(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {_what(served)} "{name}": the object is '
            "being deleted",
            name=name,
            kind=served.name,
        )
    given = str(body["metadata"].get("resourceVersion") or "")
    have = str(((old or {}).get("metadata") or {}).get("resourceVersion") or "")
    if given and have and given != have:
        raise _refuse(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {_what(served)} "{name}": the object has been '
            "modified; please apply your changes to the latest version and try again",
            name=name,
            group=served.group,
            kind=served.name,
        )
    if served.kind == "Pod" and stored is not None:
        _check_pod_update(stored.body.get("spec"), body.get("spec"), name)
    await _store(request, served, body, dry_run=dry)
    return _json(_answer(request, served, body, dry_run=dry), 201 if old is None else 200, warned)


POD_UPDATABLE = (
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
)
"""What an update may change in a pod's spec, as the API server lists it."""


def _check_pod_update(old: Any, new: Any, name: str) -> None:
    """The API server's rule for a pod's spec on update: only images, the active deadline,
    added tolerations and the grace period may change."""

    def mutable_cleared(spec: Any) -> Any:
        spec = copy.deepcopy(spec) if isinstance(spec, dict) else {}
        defaults.default_pod_spec(spec)
        for key in ("initContainers", "containers"):
            for container in spec.get(key) or []:
                if isinstance(container, dict):
                    container.pop("image", None)
        for key in ("activeDeadlineSeconds", "terminationGracePeriodSeconds"):
            spec.pop(key, None)
        return spec

    tolerations_kept = all(
        t in ((new or {}).get("tolerations") or []) for t in ((old or {}).get("tolerations") or [])
    )
    cleared = mutable_cleared(old), mutable_cleared(new)
    cleared[0].pop("tolerations", None)
    cleared[1].pop("tolerations", None)
    if cleared[0] == cleared[1] and tolerations_kept:
        return
    message = "Forbidden: pod updates may not change fields other than " + ",".join(POD_UPDATABLE)
    raise _refuse(
        422,
        "Invalid",
        f'Pod "{name}" is invalid: spec: {message}',
        name=name,
        kind="Pod",
        causes=[{"reason": "FieldValueForbidden", "message": message, "field": "spec"}],
    )


def update(served: Served) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            body = await _read(request)
            return await _replace(request, served, body, name=request.match_info["name"])
        except Refused as e:
            return e.response

    return handler


def patch(served: Served) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            node = request.app[NODE_KEY]
            name = request.match_info["name"]
            ns = _namespace(request, served)
            kind = request.content_type
            if kind == patches.APPLY_PATCH:
                return await _server_side_apply(request, served, name=name)
            if kind not in (patches.JSON_PATCH, patches.MERGE_PATCH, patches.STRATEGIC_PATCH):
                raise _refuse(
                    415,
                    "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - accepted media types "
                    f"include: {patches.JSON_PATCH}, {patches.MERGE_PATCH}, "
                    f"{patches.STRATEGIC_PATCH}, {patches.APPLY_PATCH}",
                )
            original = _stored_form(node, served, ns, name)
            if original is None:
                return not_found(_what(served), name)
            body = await _read(request)
            try:
                changed = patches.patched(original, body, kind)
            except (ValueError, KeyError, IndexError, TypeError, RecursionError) as e:
                code = 422 if kind == patches.JSON_PATCH else 400
                raise _refuse(code, "BadRequest", str(e)) from None
            return await _replace(request, served, changed, name=name)
        except Refused as e:
            return e.response

    return handler


async def _server_side_apply(request: web.Request, served: Served, *, name: str) -> web.Response:
    """The applied configuration stored whole, with one ``managedFields`` entry (its
    manager's, naming no fields: there is no field ownership)."""
    manager = request.query.get("fieldManager", "")
    if not manager:
        raise _refuse(
            400,
            "BadRequest",
            'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is '
            "required for apply patch",
        )
    body = await _read(request, yaml_ok=True)
    entry = {
        "manager": manager,
        "operation": "Apply",
        "apiVersion": kind_table.KINDS[served.kind].api_version,
        "time": times.now_utc().strftime("%Y-%m-%dT%H:%M:%SZ"),
        "fieldsType": "FieldsV1",
        "fieldsV1": {},
    }
    return await _replace(request, served, body, name=name, created_ok=True, managed=[entry])


# -- delete ---------------------------------------------------------------------------------


async def _options(request: web.Request) -> tuple[float | None, str]:
    """``gracePeriodSeconds`` and ``propagationPolicy`` from the query or the body's
    ``DeleteOptions``."""
    raw = await request.content.read(MAX_BODY_BYTES + 1) if request.can_read_body else b""
    options: Any = {}
    if raw.strip():
        try:
            options = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise _refuse(400, "BadRequest", "the DeleteOptions body is not JSON") from None
    if not isinstance(options, dict):
        raise _refuse(400, "BadRequest", "the DeleteOptions body must be an object")
    grace: Any = options.get("gracePeriodSeconds", request.query.get("gracePeriodSeconds"))
    policy = str(options.get("propagationPolicy") or request.query.get("propagationPolicy") or "")
    if policy and policy not in PROPAGATION:
        raise _refuse(
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
        raise _refuse(400, "BadRequest", f'gracePeriodSeconds: Invalid value: "{grace}"') from None
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
    if _dry_run(request):
        return _answer(request, served, found, dry_run=True)
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
                request, served, _namespace(request, served), name, grace=grace, policy=policy
            )
            if answer is None:
                return not_found(_what(served), name)
            return _json(answer)
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
                raise _refuse(400, "BadRequest", str(e)) from None
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
                    deleted.append(_answer(request, served, found, dry_run=True))
            info = kind_table.KINDS[served.kind]
            version = str(request.app[HISTORY_KEY].version)
            return _json(
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


# -- the scale subresource ------------------------------------------------------------------


def _scale_of(body: dict[str, Any]) -> dict[str, Any]:
    """A Deployment's, ReplicaSet's or StatefulSet's ``autoscaling/v1`` ``Scale``."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    labels = ((spec.get("selector") or {}).get("matchLabels")) or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": int(spec.get("replicas", 1))},
        "status": {
            "replicas": int((body.get("status") or {}).get("replicas") or 0),
            "selector": ",".join(f"{k}={v}" for k, v in sorted(labels.items())),
        },
    }


def scale(served: Served) -> Handler:
    """``GET``, ``PUT`` and ``PATCH`` of ``.../{name}/scale``: the replicas read from and
    written to the object (through the node's admission, as any update)."""

    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            node = request.app[NODE_KEY]
            name = request.match_info["name"]
            ns = _namespace(request, served)
            stored = _stored_form(node, served, ns, name)
            if stored is None:
                return not_found(_what(served), name)
            if request.method == "GET":
                return _json(_scale_of(stored))
            body = await _read(request)
            if request.method == "PATCH":
                try:
                    body = patches.patched(_scale_of(stored), body, request.content_type)
                except (ValueError, KeyError, IndexError, TypeError, RecursionError) as e:
                    raise _refuse(400, "BadRequest", str(e)) from None
            replicas = ((body or {}).get("spec") or {}).get("replicas")
            if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
                raise _refuse(
                    422,
                    "Invalid",
                    f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: '
                    f"{json.dumps(replicas)}: must be greater than or equal to 0",
                )
            stored.setdefault("spec", {})["replicas"] = replicas
            stored.pop("status", None)
            response = await _replace(request, served, stored, name=name)
            if response.status != 200:
                return response
            return _json(_scale_of(json.loads(response.text or "{}")))
        except Refused as e:
            return e.response

    return handler


def add_routes(router: web.UrlDispatcher, served: Served, base: str) -> None:
    """The write verbs of ``served`` under ``base`` (``/api/v1``, ``/apis/apps/v1``)."""
    if served.kind not in kind_table.KINDS or served.name in ("nodes", "events"):
        return
    listing = (
        f"{base}/namespaces/{{namespace}}/{served.name}"
        if served.namespaced
        else (f"{base}/{served.name}")
    )
    router.add_post(listing, create(served))
    router.add_delete(listing, delete_collection(served))
    one = f"{listing}/{{name}}"
    router.add_put(one, update(served))
    router.add_patch(one, patch(served))
    router.add_delete(one, delete(served))
    if any(sub == "scale" for sub, _, _ in served.subresources):
        for method in ("GET", "PUT", "PATCH"):
            router.add_route(method, f"{one}/scale", scale(served))
