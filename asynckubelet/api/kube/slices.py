"""Endpoints and EndpointSlices, as the API server's controllers keep them.

The node's Service controller (:mod:`asynckubelet.workloads.services`) keeps each
Service's endpoints; this module turns them into the objects a client reads and watches:
the ``v1`` Endpoints (one per Service with a selector) and the ``discovery.k8s.io/v1``
EndpointSlices upstream's EndpointSlice controller would write. A slice is named from the
Service (``generateName`` ``<service>-``, five characters after it, the same for the same
Service and port set, so a name survives a restart), labelled
``kubernetes.io/service-name`` and ``endpointslice.kubernetes.io/managed-by``, owned by
its Service, and holds the endpoints that share one set of ports (at most
:data:`MAX_ENDPOINTS` of them, as upstream's default). A Service that selects no ready or
unready pod has one slice with no endpoints and no ports (upstream's placeholder).

Every answer about ``v1`` Endpoints carries the API server's deprecation warning
(:data:`ENDPOINTS_WARNING`, a ``Warning`` header kubectl prints), as from a 1.33 API
server.

Both kinds are kept in the API's window of changes
(:class:`~asynckubelet.api.kube.watchcache.ObjectHistory`) after every change of the
Services or of their endpoints, so they are listed and watched like the stored kinds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from aiohttp import web

from asynckubelet.api import objects
from asynckubelet.api.kube.watchcache import ObjectHistory, ObjectKey
from asynckubelet.workloads.services import Endpoint, EndpointPort, ServiceController

API_VERSION = "discovery.k8s.io/v1"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
CONTROLLER = "endpointslice-controller.k8s.io"
MAX_ENDPOINTS = 100
"""Endpoints in one slice (upstream's ``--max-endpoints-per-slice`` default)."""
SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""The characters the API server's ``generateName`` appends (no vowels, no look-alikes)."""
SUFFIX_LENGTH = 5
MAX_NAME = 63
ENDPOINTS_WARNING = "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"


def slice_name(service: str, uid: str, ports: tuple[EndpointPort, ...], index: int) -> str:
    """``<service>-`` (cut to leave room, as the API server cuts a ``generateName``) and
    five characters drawn from the Service's uid, its ports and the slice's place."""
    base = f"{service}-"[: MAX_NAME - SUFFIX_LENGTH]
    seed = f"{uid}/{[(p.name, p.port, p.protocol) for p in ports]}/{index}".encode()
    digest = hashlib.sha256(seed).digest()
    suffix = "".join(SUFFIX_ALPHABET[b % len(SUFFIX_ALPHABET)] for b in digest[:SUFFIX_LENGTH])
    return base + suffix


def _endpoint(e: Endpoint, namespace: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "addresses": [e.ip],
        "conditions": {"ready": e.ready, "serving": e.ready, "terminating": False},
    }
    if e.hostname:
        body["hostname"] = e.hostname
    if e.node_name:
        body["nodeName"] = e.node_name
    body["targetRef"] = {"kind": "Pod", "namespace": namespace, "name": e.pod, "uid": e.uid}
    return body


def _names(defaults: list[str], existing: Iterable[str]) -> list[str]:
    """The slices' names: each keeps its own when it is there; a new one takes the name
    of a slice that would go (upstream's controller updates a slice it would delete in
    place of creating one, so a placeholder that fills keeps its name)."""
    kept = list(existing)
    spare = [n for n in kept if n not in defaults]
    return [n if n in kept or not spare else spare.pop(0) for n in defaults]


def endpoint_slices(
    service: Mapping[str, Any], endpoints: tuple[Endpoint, ...], existing: Iterable[str] = ()
) -> list[dict[str, Any]]:
    """The EndpointSlices of ``service`` (its stored body) holding ``endpoints``; the
    names of its slices now are ``existing``."""
    meta = service.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
    uid = str(meta.get("uid") or "")
    groups: dict[tuple[EndpointPort, ...], list[Endpoint]] = {}
    for e in endpoints:
        groups.setdefault(e.ports, []).append(e)
    chunks: list[tuple[tuple[EndpointPort, ...] | None, list[Endpoint]]] = [
        (ports, found[i : i + MAX_ENDPOINTS])
        for ports, found in groups.items()
        for i in range(0, len(found), MAX_ENDPOINTS)
    ] or [(None, [])]
    labels = {
        **(meta.get("labels") or {}),
        SERVICE_NAME_LABEL: name,
        MANAGED_BY_LABEL: CONTROLLER,
    }
    owner = {
        "apiVersion": "v1",
        "kind": "Service",
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    slices = []
    seen: dict[tuple[EndpointPort, ...] | None, int] = {}
    defaults = []
    for ports, _ in chunks:
        index = seen[ports] = seen.get(ports, -1) + 1
        defaults.append(slice_name(name, uid, ports or (), index))
    for (ports, found), slice_named in zip(chunks, _names(defaults, existing), strict=True):
        metadata: dict[str, Any] = {
            "name": slice_named,
            "generateName": f"{name}-",
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": [owner],
        }
        if meta.get("creationTimestamp"):
            metadata["creationTimestamp"] = meta["creationTimestamp"]
        slices.append(
            {
                "kind": "EndpointSlice",
                "apiVersion": API_VERSION,
                "metadata": metadata,
                "addressType": "IPv4",
                "endpoints": [_endpoint(e, namespace) for e in found],
                "ports": None
                if ports is None
                else [{"name": p.name, "port": p.port, "protocol": p.protocol} for p in ports],
            }
        )
    return slices


def current(
    services: ServiceController, existing: Mapping[ObjectKey, list[str]]
) -> tuple[dict[ObjectKey, dict[str, Any]], dict[ObjectKey, dict[str, Any]]]:
    """The Endpoints and the EndpointSlices of every Service with a selector, now;
    ``existing`` names each Service's slices until now."""
    endpoints: dict[ObjectKey, dict[str, Any]] = {}
    slices: dict[ObjectKey, dict[str, Any]] = {}
    for stored in services.objects.list("Service"):
        svc = services.service(stored.namespace, stored.name)
        if svc is None or not objects.has_endpoints(svc):
            continue
        key = (stored.namespace, stored.name)
        endpoints[key] = objects.endpoints_body(services, *key)
        found = services.endpoints(*key)
        made = endpoint_slices(stored.body, found.endpoints if found else (), existing.get(key, []))
        for body in made:
            slices[(stored.namespace, body["metadata"]["name"])] = body
    return endpoints, slices


def follow_services(history: ObjectHistory, services: ServiceController | None) -> None:
    """Keep the Endpoints and EndpointSlices of ``services`` in ``history`` from now on
    (none without a Service controller)."""
    if services is None:
        return

    def refresh() -> None:
        existing: dict[ObjectKey, list[str]] = {}
        for change in history.current("EndpointSlice"):
            meta = change.body.get("metadata") or {}
            service = (meta.get("labels") or {}).get(SERVICE_NAME_LABEL, "")
            existing.setdefault((change.key[0], service), []).append(change.key[1])
        endpoints, slices = current(services, existing)
        history.replace("Endpoints", endpoints)
        history.replace("EndpointSlice", slices)

    refresh()
    history.on_close(services.subscribe(refresh))


def about_endpoints(path: str) -> bool:
    """Whether ``path`` is one of ``v1`` Endpoints (a list, a namespace's, one object)."""
    parts = path.strip("/").split("/")
    if parts[:2] != ["api", "v1"] or len(parts) < 3:
        return False
    if parts[2] == "namespaces":
        return len(parts) >= 5 and parts[4] == "endpoints"
    return parts[2] == "endpoints"


async def warn_of_endpoints(request: web.Request, response: web.StreamResponse) -> None:
    """Add the deprecation warning to an answer about ``v1`` Endpoints (an aiohttp
    ``on_response_prepare`` signal: a watch's stream gets it too)."""
    if about_endpoints(request.path):
        response.headers.add("Warning", f'299 - "{ENDPOINTS_WARNING}"')


__all__ = [
    "API_VERSION",
    "CONTROLLER",
    "ENDPOINTS_WARNING",
    "MANAGED_BY_LABEL",
    "SERVICE_NAME_LABEL",
    "about_endpoints",
    "current",
    "endpoint_slices",
    "follow_services",
    "slice_name",
    "warn_of_endpoints",
]
