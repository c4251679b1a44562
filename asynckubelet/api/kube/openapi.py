"""OpenAPI v2 and v3 documents of the kinds served, for ``kubectl explain`` and kubectl's
client-side validation.

The API server publishes its schema at ``/openapi/v2`` (one Swagger 2.0 document) and
``/openapi/v3`` (an index of one OpenAPI 3.0 document per group version). The node has
no generated schema of its own; it builds one from the Kubernetes models it already
uses (lightkube-models, generated from upstream's OpenAPI): each model's fields, their
JSON names and types from its annotations, and the descriptions from its docstring.
Schemas are named as upstream's (``io.k8s.api.core.v1.Pod``), the served kinds and their
lists carry ``x-kubernetes-group-version-kind``, and the lists that strategic merge patch
merges by key carry upstream's ``x-kubernetes-patch-merge-key``/``-patch-strategy`` (and
in v3 ``x-kubernetes-list-type: map`` with its keys), from the table below.

What the models do not carry is left out: maps are ``object`` without their value type
(kubectl explain shows ``<Object>`` where upstream shows ``<map[string]string>``), and
there are no ``required`` lists beyond the fields the models make mandatory, no enums,
no formats but ``date-time`` and ``int-or-string``.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import re
from typing import Any

from aiohttp import web

from asynckubelet.api.answers import status
from asynckubelet.api.kube import discovery, openapi_proto

JSON = "application/json"

PACKAGES = {
    "core_v1": "io.k8s.api.core.v1",
    "apps_v1": "io.k8s.api.apps.v1",
    "batch_v1": "io.k8s.api.batch.v1",
    "discovery_v1": "io.k8s.api.discovery.v1",
    "events_v1": "io.k8s.api.events.v1",
    "meta_v1": "io.k8s.apimachinery.pkg.apis.meta.v1",
    "runtime": "io.k8s.apimachinery.pkg.runtime",
}
"""lightkube-models' modules followed, and upstream's schema prefix of each."""
MERGE_KEYS: dict[tuple[str, str], tuple[str, ...]] = {
    ("core_v1.PodSpec", "containers"): ("name",),
    ("core_v1.PodSpec", "initContainers"): ("name",),
    ("core_v1.PodSpec", "ephemeralContainers"): ("name",),
    ("core_v1.PodSpec", "volumes"): ("name",),
    ("core_v1.PodSpec", "imagePullSecrets"): ("name",),
    ("core_v1.PodSpec", "hostAliases"): ("ip",),
    ("core_v1.PodSpec", "schedulingGates"): ("name",),
    ("core_v1.PodSpec", "resourceClaims"): ("name",),
    ("core_v1.PodSpec", "topologySpreadConstraints"): ("topologyKey", "whenUnsatisfiable"),
    ("core_v1.Container", "ports"): ("containerPort", "protocol"),
    ("core_v1.Container", "env"): ("name",),
    ("core_v1.Container", "volumeMounts"): ("mountPath",),
    ("core_v1.Container", "volumeDevices"): ("devicePath",),
    ("core_v1.Container", "resizePolicy"): ("resourceName",),
    ("core_v1.EphemeralContainer", "ports"): ("containerPort", "protocol"),
    ("core_v1.EphemeralContainer", "env"): ("name",),
    ("core_v1.EphemeralContainer", "volumeMounts"): ("mountPath",),
    ("core_v1.EphemeralContainer", "volumeDevices"): ("devicePath",),
    ("core_v1.ServiceSpec", "ports"): ("port", "protocol"),
    ("core_v1.PodStatus", "conditions"): ("type",),
    ("core_v1.NodeStatus", "conditions"): ("type",),
    ("core_v1.NodeStatus", "addresses"): ("type",),
    ("core_v1.NamespaceStatus", "conditions"): ("type",),
    ("core_v1.ServiceStatus", "conditions"): ("type",),
    ("apps_v1.DeploymentStatus", "conditions"): ("type",),
    ("apps_v1.ReplicaSetStatus", "conditions"): ("type",),
    ("apps_v1.DaemonSetStatus", "conditions"): ("type",),
    ("apps_v1.StatefulSetStatus", "conditions"): ("type",),
    ("batch_v1.JobStatus", "conditions"): ("type",),
    ("meta_v1.ObjectMeta", "ownerReferences"): ("uid",),
}
"""Upstream's ``patchMergeKey`` (the first key) and list-map keys of merged lists."""
MERGED_SETS = {("meta_v1.ObjectMeta", "finalizers")}
"""Lists merged as sets (``patchStrategy: merge`` without a key)."""
_BULLET = re.compile(r"^\s*\* \*\*(\w+)\*\* ``[^`]*`` - (.*)$")


def _split(doc: str) -> tuple[str, dict[str, str]]:
    """A model's description and its fields' from its docstring."""
    head, _, params = doc.partition("**parameters**")
    fields: dict[str, str] = {}
    current: str | None = None
    for line in params.splitlines():
        found = _BULLET.match(line)
        if found:
            current = found.group(1)
            fields[current] = found.group(2).strip()
        elif current is not None and line.strip():
            fields[current] += " " + line.strip()
    return " ".join(head.split()), fields


class _Builder:
    def __init__(self, *, v3: bool) -> None:
        self.v3 = v3
        self.ref = "#/components/schemas/" if v3 else "#/definitions/"
        self.schemas: dict[str, dict[str, Any]] = {}

    def name(self, module: str, cls: str) -> str:
        return f"{PACKAGES[module]}.{cls}"

    def type_of(self, text: str, module: str) -> dict[str, Any]:
        text = text.strip()
        for wrapper in ("Optional[", "List[", "Dict[str, "):
            if text.startswith(wrapper) and text.endswith("]"):
                inner = self.type_of(text[len(wrapper) : -1], module)
                if wrapper == "Optional[":
                    return inner
                if wrapper == "List[":
                    return {"type": "array", "items": inner}
                return {"type": "object", "additionalProperties": inner}
        simple = {
            "str": {"type": "string"},
            "int": {"type": "integer", "format": "int64"},
            "float": {"type": "number", "format": "double"},
            "bool": {"type": "boolean"},
            "dict": {"type": "object"},
            "object": {"type": "object"},
        }
        if text in simple:
            return dict(simple[text])
        owner, _, cls = text.rpartition(".")
        owner = owner or module
        if owner == "resource":
            return {"type": "string"}
        if owner == "util_intstr":
            if self.v3:
                return {"x-kubernetes-int-or-string": True}
            return {"type": "string", "format": "int-or-string"}
        if owner == "meta_v1" and cls in ("Time", "MicroTime"):
            return {"type": "string", "format": "date-time"}
        if owner not in PACKAGES:
            return {"type": "object"}
        model = getattr(importlib.import_module(f"lightkube.models.{owner}"), cls, None)
        if not isinstance(model, type):
            return {"type": "object"}
        self.add(owner, cls)
        return {"$ref": self.ref + self.name(owner, cls)}

    def add(self, module: str, cls: str) -> str:
        name = self.name(module, cls)
        if name in self.schemas:
            return name
        model = getattr(importlib.import_module(f"lightkube.models.{module}"), cls)
        description, docs = _split(model.__doc__ or "")
        schema: dict[str, Any] = {"description": description, "type": "object"}
        self.schemas[name] = schema
        properties: dict[str, Any] = {}
        required: list[str] = []
        json_names = _json_names(model)
        for field, text in _annotations(model).items():
            wire = json_names.get(field, field)
            prop = self.type_of(text, module)
            if "$ref" in prop and self.v3:
                prop = {"allOf": [prop]}
            if docs.get(wire) or docs.get(field):
                prop["description"] = docs.get(wire) or docs.get(field)
            keys = MERGE_KEYS.get((f"{module}.{cls}", wire))
            if keys:
                prop["x-kubernetes-patch-merge-key"] = keys[0]
                prop["x-kubernetes-patch-strategy"] = "merge"
                if self.v3:
                    prop["x-kubernetes-list-type"] = "map"
                    prop["x-kubernetes-list-map-keys"] = list(keys)
            elif (f"{module}.{cls}", wire) in MERGED_SETS:
                prop["x-kubernetes-patch-strategy"] = "merge"
                if self.v3:
                    prop["x-kubernetes-list-type"] = "set"
            properties[wire] = prop
            if not text.startswith("Optional["):
                required.append(wire)
        schema["properties"] = properties
        if required:
            schema["required"] = required
        return name


def _annotations(model: Any) -> dict[str, str]:
    found: dict[str, str] = {}
    for klass in reversed(model.__mro__):
        for field, text in getattr(klass, "__annotations__", {}).items():
            if isinstance(text, str) and not field.startswith("_"):
                found[field] = text
    return found


def _json_names(model: Any) -> dict[str, str]:
    fields = getattr(model, "__struct_fields__", ())
    encoded = getattr(model, "__struct_encode_fields__", fields)
    return dict(zip(fields, encoded, strict=False))


def _module_of(served: discovery.Served) -> str:
    return f"{served.group.split('.')[0] or 'core'}_{served.version}"


def _build(*, v3: bool, group_version: str | None) -> dict[str, dict[str, Any]]:
    builder = _Builder(v3=v3)
    for served in discovery.SERVED:
        if served.group == discovery.METRICS:
            continue
        if group_version is not None and served.group_version != group_version:
            continue
        module = _module_of(served)
        for kind in (served.kind, f"{served.kind}List"):
            name = builder.add(module, kind)
            builder.schemas[name]["x-kubernetes-group-version-kind"] = [
                {"group": served.group, "kind": kind, "version": served.version}
            ]
    return builder.schemas


def _operations(*, v3: bool, group_version: str | None) -> dict[str, Any]:
    """The read paths of each served kind, each ``get`` naming its kind's
    ``x-kubernetes-group-version-kind`` and answer schema (what ``kubectl explain`` looks
    a resource up by)."""
    ref = "#/components/schemas/" if v3 else "#/definitions/"
    paths: dict[str, Any] = {}
    for served in discovery.SERVED:
        if served.group == discovery.METRICS:
            continue
        if group_version is not None and served.group_version != group_version:
            continue
        module = _module_of(served)
        base = f"/apis/{served.group_version}" if served.group else "/api/v1"
        gvk = {"group": served.group, "kind": served.kind, "version": served.version}
        places = [f"{base}/{served.name}"]
        if served.namespaced:
            places.append(f"{base}/namespaces/{{namespace}}/{served.name}")
        for place in places:
            for path, kind, action in (
                (place, f"{served.kind}List", "list"),
                (f"{place}/{{name}}", served.kind, "get"),
            ):
                if path.startswith(f"{base}/{served.name}/") and served.namespaced:
                    continue
                schema = {"$ref": ref + f"{PACKAGES[module]}.{kind}"}
                answer: dict[str, Any] = {"description": "OK"}
                if v3:
                    answer["content"] = {JSON: {"schema": schema}}
                else:
                    answer["schema"] = schema
                paths[path] = {
                    "get": {
                        "x-kubernetes-action": action,
                        "x-kubernetes-group-version-kind": gvk,
                        "responses": {"200": answer},
                    }
                }
    return paths


@functools.cache
def swagger() -> bytes:
    """``/openapi/v2``."""
    body = {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": discovery.version_info()["gitVersion"]},
        "paths": _operations(v3=False, group_version=None),
        "definitions": _build(v3=False, group_version=None),
    }
    return json.dumps(body).encode()


def _paths() -> dict[str, str]:
    """Each group version's document path, as the v3 index names it."""
    found: dict[str, str] = {}
    for served in discovery.SERVED:
        if served.group == discovery.METRICS:
            continue
        gv = served.group_version
        found[gv] = "api/v1" if gv == "v1" else f"apis/{gv}"
    return found


@functools.cache
def document(path: str) -> bytes | None:
    """``/openapi/v3/<path>`` (``api/v1``, ``apis/apps/v1``...), or None."""
    by_path = {p: gv for gv, p in _paths().items()}
    group_version = by_path.get(path.strip("/"))
    if group_version is None:
        return None
    body = {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": discovery.version_info()["gitVersion"]},
        "paths": _operations(v3=True, group_version=group_version),
        "components": {"schemas": _build(v3=True, group_version=group_version)},
    }
    return json.dumps(body).encode()


@functools.cache
def index() -> bytes:
    """``/openapi/v3``: each group version's document, named with its content's hash."""
    paths: dict[str, Any] = {}
    for path in sorted(set(_paths().values())):
        text = document(path) or b""
        digest = hashlib.sha512(text).hexdigest()[:64].upper()
        paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return json.dumps({"paths": paths}).encode()


def _answer(body: bytes | None, request: web.Request) -> web.Response:
    accept = request.headers.get("Accept", "")
    if body is None:
        raise web.HTTPNotFound()
    if accept and not any(t in accept for t in ("json", "*/*")):
        return status(406, "NotAcceptable", f"only the following media types are accepted: {JSON}")
    return web.Response(body=body, headers={"Content-Type": JSON})


@functools.cache
def swagger_proto() -> bytes:
    """``/openapi/v2`` as protobuf (:mod:`~asynckubelet.api.kube.openapi_proto`)."""
    return openapi_proto.document(json.loads(swagger()))


async def serve_v2(request: web.Request) -> web.Response:
    accept = request.headers.get("Accept", "")
    if any(f"application/{subtype}" in accept for subtype in openapi_proto.ACCEPTED):
        return web.Response(
            body=swagger_proto(), headers={"Content-Type": openapi_proto.CONTENT_TYPE}
        )
    return _answer(swagger(), request)


async def serve_v3_index(request: web.Request) -> web.Response:
    return _answer(index(), request)


async def serve_v3(request: web.Request) -> web.Response:
    return _answer(document(request.match_info["path"]), request)


def add_routes(router: web.UrlDispatcher) -> None:
    """``/openapi/v2``, ``/openapi/v3`` and each group version's v3 document."""
    router.add_get("/openapi/v2", serve_v2)
    router.add_get("/openapi/v3", serve_v3_index)
    router.add_get("/openapi/v3/{path:.+}", serve_v3)


__all__ = ["MERGE_KEYS", "add_routes", "document", "index", "swagger"]
