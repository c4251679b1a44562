"""Writes of the Kubernetes API: create, update, patch and server-side apply.

Every write goes through the node's one admission (:func:`~asynckubelet.api.apply.
admit_and_apply`, what ``asynckubelet apply`` uses); this module only speaks the API
server's verbs over it: ``POST`` (``409 AlreadyExists``, ``generateName``), ``PUT``
(``409 Conflict`` on a stale ``resourceVersion``), ``PATCH`` in the four types
(:mod:`~asynckubelet.api.kube.patches`), ``dryRun=All`` and ``fieldValidation``.
Deletes are :mod:`~asynckubelet.api.kube.deletes`' and the ``scale`` subresource
:mod:`~asynckubelet.api.kube.scales`'. A ``status`` sent is ignored, as the API server
ignores it outside the ``status`` subresource. Every write keeps ``metadata.managedFields`` as the
API server does (:mod:`~asynckubelet.api.kube.ownership`): a create, update or patch as
its field manager's ``Update``, a server-side apply merged into the live object by field
ownership, with conflicts.
"""

from __future__ import annotations

import copy
import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import yaml
from aiohttp import web

from asynckubelet import httpbounds
from asynckubelet.api import apply as writes
from asynckubelet.api.answers import not_found, served_pod, status
from asynckubelet.api.endpoints import NODE_KEY
from asynckubelet.api.kube import ownership, patches, protobuf
from asynckubelet.api.kube.discovery import Served
from asynckubelet.api.kube.pods import HISTORY_KEY
from asynckubelet.api.kube.watchcache import STORED_KINDS
from asynckubelet.api.kube.watches import OBJECTS_KEY
from asynckubelet.kubectl import pods as pod_printing
from asynckubelet.kubectl import times
from asynckubelet.manifests import decoding, defaults, strict
from asynckubelet.manifests import kinds as kind_table
from asynckubelet.node.kubelet import Kubelet
from asynckubelet.node.objects import SERVER_FIELDS, secret_summary

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MAX_BODY_BYTES = 3 * 1024 * 1024
"""The API server's request size limit."""
NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
"""What ``generateName`` appends (upstream's ``utilrand.String`` alphabet), 5 of them."""


class Refused(Exception):
    """A write refused with the API server's answer."""

    def __init__(self, response: web.Response) -> None:
        super().__init__(response.text)
        self.response = response


def refuse(code: int, reason: str, message: str, **details: Any) -> Refused:
    return Refused(status(code, reason, message, **details))


def answer_json(body: Any, code: int = 200, warnings: list[str] | None = None) -> web.Response:
    response = web.json_response(body, status=code)
    for text in warnings or []:
        response.headers.add("Warning", f"299 - {json.dumps(text)}")
    return response


async def read_body(request: web.Request, *, yaml_ok: bool = False) -> Any:
    raw = await httpbounds.read_body(request, MAX_BODY_BYTES)
    if len(raw) > MAX_BODY_BYTES:
        raise refuse(413, "RequestEntityTooLarge", "the request body is too large")
    if request.content_type == protobuf.PROTOBUF:
        try:
            return protobuf.decode(raw)
        except (ValueError, UnicodeDecodeError) as e:
            message = f"the protobuf body of the request was not read: {e}; send application/json"
            raise refuse(415, "UnsupportedMediaType", message) from None
    try:
        text = raw.decode()
        if not yaml_ok:
            return json.loads(text)
        documents = list(decoding.load_documents(text))
    except (ValueError, UnicodeDecodeError, RecursionError, yaml.YAMLError) as e:
        message = f"the body of the request was in an unknown format: {e}"
        raise refuse(400, "BadRequest", message) from None
    if len(documents) != 1:
        raise refuse(400, "BadRequest", "the apply configuration must be one YAML document")
    return documents[0]


def what(served: Served) -> str:
    return f"{served.name}.{served.group}" if served.group else served.name


def is_dry_run(request: web.Request) -> bool:
    values = request.query.getall("dryRun", [])
    for value in values:
        if value != "All":
            raise refuse(
                400, "BadRequest", f'dryRun: Unsupported value: "{value}": supported values: "All"'
            )
    return bool(values)


def namespace_of(request: web.Request, served: Served) -> str:
    return request.match_info.get("namespace", "default") if served.namespaced else ""


def current(
    node: Kubelet, app: web.Application, served: Served, ns: str, name: str
) -> dict[str, Any] | None:
    """The object as a GET answers it, None when there is none."""
    if served.kind == "Pod":
        record = node.status.find(ns, name)
        if record is None:
            applied = stored_form(node, served, ns, name)
            if applied is not None:
                applied["metadata"]["resourceVersion"] = str(app[HISTORY_KEY].version)
                applied.setdefault("status", pod_printing.pending_status(applied))
            return applied
        body = pod_printing.pod_document(served_pod(node, record.view))
        version = app[HISTORY_KEY].version_of(record.uid, record.version)
        body.setdefault("metadata", {})["resourceVersion"] = str(version)
        return body
    found = stored_form(node, served, ns, name)
    if found is not None:
        versioned(app, served.kind, found)
    return found


def versioned(app: web.Application, kind: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` (an object of a kind the store keeps) with the resourceVersion of its last
    change."""
    meta = body.setdefault("metadata", {})
    if kind in STORED_KINDS:
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        meta["resourceVersion"] = str(app[OBJECTS_KEY].version_of(kind, key))
    return body


def stored_form(node: Kubelet, served: Served, ns: str, name: str) -> dict[str, Any] | None:
    """The object a patch applies to: as stored (a pod's spec as applied, no status)."""
    stored = node.objects.get(served.kind, ns or None, name)
    return copy.deepcopy(dict(stored.body)) if stored is not None else None


def patch_base(
    node: Kubelet, app: web.Application, served: Served, ns: str, name: str
) -> dict[str, Any] | None:
    """The stored form a patch applies to, with the live object's resourceVersion; None
    when either is gone."""
    original = stored_form(node, served, ns, name)
    live = current(node, app, served, ns, name)
    if original is None or live is None:
        return None
    version = (live.get("metadata") or {}).get("resourceVersion")
    if version:
        original.setdefault("metadata", {})["resourceVersion"] = version
    return original


def apply_patch(original: Any, patch: Any, kind: str) -> Any:
    """``patch`` of type ``kind`` applied to ``original``; one that does not apply is
    refused, ``422`` for a JSON patch and ``400`` for the others."""
    try:
        return patches.patched(original, patch, kind)
    except (ValueError, KeyError, IndexError, TypeError, RecursionError) as e:
        code = 422 if kind == patches.JSON_PATCH else 400
        raise refuse(code, "BadRequest", str(e)) from None


def _checked(
    body: Any, served: Served, request: web.Request, *, ns: str, name: str | None
) -> tuple[dict[str, Any], list[str]]:
    """``body`` as the kind ``served`` in ``ns`` named ``name`` (from the path), unknown
    fields handled as ``fieldValidation`` asks; the warnings to send."""
    if not isinstance(body, dict):
        raise refuse(400, "BadRequest", "the body of the request must be an object")
    info = kind_table.KINDS[served.kind]
    body.setdefault("apiVersion", info.api_version)
    body.setdefault("kind", served.kind)
    if body.get("kind") != served.kind or body.get("apiVersion") != info.api_version:
        raise refuse(
            400,
            "BadRequest",
            f"the API version in the data ({body.get('apiVersion')}) does not match the "
            f"expected API version ({info.api_version})",
        )
    meta = body.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise refuse(400, "BadRequest", "metadata must be an object")
    if served.namespaced:
        given = meta.get("namespace")
        if given and given != ns:
            raise refuse(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on "
                "the request",
            )
        meta["namespace"] = ns
    if name is not None and meta.get("name") and meta["name"] != name:
        raise refuse(
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
        raise refuse(
            400,
            "BadRequest",
            f'fieldValidation: Unsupported value: "{mode}": supported values: '
            '"Ignore", "Warn", "Strict"',
        )
    unknown = list(strict.check_document(body, kind_table.KINDS[served.kind].model).unknown)
    words = [f"unknown field {json.dumps(p)}" for p in unknown]
    if unknown and mode == "Strict":
        raise refuse(400, "BadRequest", "strict decoding error: " + ", ".join(words))
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
    body["details"]["causes"] = [api_cause(c) for c in causes]
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


def api_cause(cause: dict[str, Any]) -> dict[str, Any]:
    """A cause as the API server sends it: its type (``FieldValueForbidden``) and its
    message with the type's words first (``Forbidden: ...``), which kubectl prints."""
    reason = str(cause.get("reason") or "")
    message = str(cause.get("message") or "")
    return {
        "reason": _CAUSE_TYPES.get(reason, reason),
        "message": f"{reason}: {message}" if reason and message else reason or message,
        "field": cause.get("field", ""),
    }


def answered(
    request: web.Request, served: Served, body: dict[str, Any], *, dry_run: bool
) -> dict[str, Any]:
    """The object written as a read answers it (a Secret without its values); with
    ``dry_run``, as it would be: what the server keeps of the live one (its UID,
    creation time, resourceVersion, generation and status) on what was sent."""
    found = _would_be(request, served, body) if dry_run else _written(request, served, body)
    return secret_summary(found) if served.kind == "Secret" else found


def _would_be(request: web.Request, served: Served, body: dict[str, Any]) -> dict[str, Any]:
    meta = body.get("metadata") or {}
    node = request.app[NODE_KEY]
    live = current(
        node, request.app, served, str(meta.get("namespace") or ""), meta.get("name", "")
    )
    if live is None:
        return body
    shown = copy.deepcopy(body)
    kept = live.get("metadata") or {}
    for key in ("uid", "creationTimestamp", "resourceVersion", "generation"):
        if key in kept:
            shown.setdefault("metadata", {})[key] = kept[key]
    if "status" in live:
        shown["status"] = live["status"]
    return shown


def _written(request: web.Request, served: Served, body: dict[str, Any]) -> dict[str, Any]:
    node = request.app[NODE_KEY]
    meta = body["metadata"]
    ns, name = meta.get("namespace", ""), meta["name"]
    found = current(node, request.app, served, ns, name)
    stored = stored_form(node, served, ns, name)
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
            dry = is_dry_run(request)
            ns = namespace_of(request, served)
            given = await read_body(request)
            owners = ownership.requested(given)
            body, warned = _checked(given, served, request, ns=ns, name=None)
            meta = body["metadata"]
            if not meta.get("name") and meta.get("generateName"):
                suffix = "".join(secrets.choice(NAME_CHARS) for _ in range(5))
                meta["name"] = f"{meta['generateName']}{suffix}"
            if not meta.get("name"):
                raise refuse(
                    422,
                    "Invalid",
                    f'{served.kind}.{served.version} "" is invalid: metadata.name: Required '
                    "value: name or generateName is required",
                )
            name = meta["name"]
            spec = body.get("spec")
            if served.kind == "Pod" and isinstance(spec, dict) and spec.get("ephemeralContainers"):
                detail = "Forbidden: cannot be set on create"
                raise refuse(
                    422,
                    "Invalid",
                    f'Pod "{name}" is invalid: spec.ephemeralContainers: {detail}',
                    name=name,
                    kind="Pod",
                    causes=[
                        {
                            "reason": "FieldValueForbidden",
                            "message": detail,
                            "field": "spec.ephemeralContainers",
                        }
                    ],
                )
            if node.objects.get(served.kind, ns or None, name) is not None or (
                served.kind == "Pod" and node.status.find(ns, name) is not None
            ):
                raise refuse(
                    409,
                    "AlreadyExists",
                    f'{what(served)} "{name}" already exists',
                    name=name,
                    group=served.group,
                    kind=served.name,
                )
            meta["managedFields"] = ownership.updated(
                None, body, now=_now(), owners=owners, **_writer(request, served)
            )
            await _store(request, served, body, dry_run=dry)
            return answer_json(answered(request, served, body, dry_run=dry), 201, warned)
        except Refused as e:
            return e.response

    return handler


async def replace(
    request: web.Request,
    served: Served,
    body: Any,
    *,
    name: str,
    created_ok: bool = False,
    managed: list[dict[str, Any]] | None = None,
    subresource: str = "",
) -> web.Response:
    """``body`` stored over the object ``name`` (created with ``created_ok``), with the
    ``managed`` fields entries (by default, those of an ``Update`` by the request's
    field manager, through ``subresource`` if any)."""
    node = request.app[NODE_KEY]
    dry = is_dry_run(request)
    ns = namespace_of(request, served)
    owners = ownership.requested(body)
    body, warned = _checked(body, served, request, ns=ns, name=name)
    old = current(node, request.app, served, ns, name)
    if old is None and not created_ok:
        return not_found(what(served), name)
    stored = node.objects.get(served.kind, ns or None, name)
    if managed is None:
        managed = ownership.updated(
            None if stored is None else stored.body,
            body,
            now=_now(),
            subresource=subresource,
            owners=owners,
            **_writer(request, served),
        )
    body["metadata"]["managedFields"] = managed
    if served.kind == "Pod" and old is not None and stored is None:
        raise refuse(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {what(served)} "{name}": the object is '
            "being deleted",
            name=name,
            kind=served.name,
        )
    given = str(body["metadata"].get("resourceVersion") or "")
    have = str(((old or {}).get("metadata") or {}).get("resourceVersion") or "")
    if given and have and given != have:
        raise refuse(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {what(served)} "{name}": the object has been '
            "modified; please apply your changes to the latest version and try again",
            name=name,
            group=served.group,
            kind=served.name,
        )
    if (
        served.kind == "Pod"
        and stored is not None
        and subresource
        not in (
            "ephemeralcontainers",
            "resize",
        )
    ):
        _check_pod_update(stored.body.get("spec"), body.get("spec"), name)
    await _store(request, served, body, dry_run=dry)
    code = 201 if old is None else 200
    return answer_json(answered(request, served, body, dry_run=dry), code, warned)


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
    raise refuse(
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
            body = await read_body(request)
            return await replace(request, served, body, name=request.match_info["name"])
        except Refused as e:
            return e.response

    return handler


def patch(served: Served) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            node = request.app[NODE_KEY]
            name = request.match_info["name"]
            ns = namespace_of(request, served)
            kind = request.content_type
            if kind == patches.APPLY_PATCH:
                return await _server_side_apply(request, served, name=name)
            if kind not in (patches.JSON_PATCH, patches.MERGE_PATCH, patches.STRATEGIC_PATCH):
                raise refuse(
                    415,
                    "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - accepted media types "
                    f"include: {patches.JSON_PATCH}, {patches.MERGE_PATCH}, "
                    f"{patches.STRATEGIC_PATCH}, {patches.APPLY_PATCH}",
                )
            body = await read_body(request)
            original = patch_base(node, request.app, served, ns, name)
            if original is None:
                return not_found(what(served), name)
            return await replace(request, served, apply_patch(original, body, kind), name=name)
        except Refused as e:
            return e.response

    return handler


async def _server_side_apply(request: web.Request, served: Served, *, name: str) -> web.Response:
    """The applied configuration merged into the live object by field ownership
    (:mod:`~asynckubelet.api.kube.ownership`); ``409 Conflict`` naming each field another
    manager owns that it would change, unless ``force=true``."""
    writer = _writer(request, served)
    node = request.app[NODE_KEY]
    ns = namespace_of(request, served)
    given = await read_body(request, yaml_ok=True)
    sent = copy.deepcopy(given)
    checked, _ = _checked(given, served, request, ns=ns, name=name)
    config = _only_sent(checked, sent)
    config["apiVersion"], config["kind"] = checked["apiVersion"], checked["kind"]
    meta = config.setdefault("metadata", {})
    for key in ("name", "namespace"):
        if key in checked["metadata"]:
            meta[key] = checked["metadata"][key]
    live = stored_form(node, served, ns, name)
    if live is not None:
        live.pop("status", None)
    kubectls_annotation = not kind_table.KINDS[served.kind].controlled
    allowed = ownership.last_applied_fields(live, served.kind, writer["manager"])
    try:
        merged, managed = ownership.applied(
            live,
            config,
            now=_now(),
            force=request.query.get("force", "") in ("true", "1"),
            allowed=allowed if kubectls_annotation else frozenset(),
            **writer,
        )
    except ownership.Conflicts as e:
        raise refuse(409, "Conflict", e.message(), causes=e.causes()) from None
    return await replace(request, served, merged, name=name, created_ok=True, managed=managed)


def _only_sent(checked: Any, sent: Any) -> Any:
    """``checked`` (a configuration as the strict decoder left it: unknown fields dropped,
    a required field absent filled with its zero value) with only the fields ``sent``
    named: an apply configuration names only the fields its manager owns."""
    if isinstance(checked, dict) and isinstance(sent, dict):
        return {k: _only_sent(v, sent[k]) for k, v in checked.items() if k in sent}
    if isinstance(checked, list) and isinstance(sent, list) and len(checked) == len(sent):
        return [_only_sent(c, s) for c, s in zip(checked, sent, strict=True)]
    return checked


OPTIONS = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions"}
"""The options kind of each write method, as a refusal of its options names it."""


def _writer(request: web.Request, served: Served) -> dict[str, str]:
    """Who writes (the request's field manager), of which kind and in which version;
    ``422`` for a ``fieldManager`` or ``force`` the API server refuses."""
    causes = ownership.option_errors(
        request.query,
        apply=request.content_type == patches.APPLY_PATCH,
        patch=request.method == "PATCH",
    )
    if causes:
        words = [f"{c['field']}: {c['message']}" for c in causes]
        raise refuse(
            422,
            "Invalid",
            f'{OPTIONS.get(request.method, "PatchOptions")}.meta.k8s.io "" is invalid: '
            + (words[0] if len(words) == 1 else "[" + ", ".join(words) + "]"),
            group="meta.k8s.io",
            kind=OPTIONS.get(request.method, "PatchOptions"),
            causes=causes,
        )
    return {
        "kind": served.kind,
        "manager": ownership.manager_of(request.query, request.headers.get("User-Agent", "")),
        "api_version": kind_table.KINDS[served.kind].api_version,
    }


def _now() -> str:
    return times.now_utc().strftime("%Y-%m-%dT%H:%M:%SZ")
