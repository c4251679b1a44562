"""The local API's answers in the API server's shapes: ``Status`` errors, ``List``s,
server-side printed ``Table``s, label selectors as the API server reads them.

Every handler of :mod:`asynckubelet.api.localapi`, :mod:`~asynckubelet.api.objects` and
:mod:`~asynckubelet.api.apply` answers through these, so a client (the command line,
kubectl) meets one wording and one shape whatever it asked.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any

from aiohttp import web
from lightkube.models.core_v1 import Pod

from asynckubelet.manifests import kinds as kind_table
from asynckubelet.manifests.decoding import MAX_DOCUMENT_BYTES
from asynckubelet.manifests.selectors import parse_label_selector, selector_matches
from asynckubelet.node import printpod
from asynckubelet.node.daemon import API_GROUP
from asynckubelet.node.kubelet import Kubelet
from asynckubelet.node.objects import (
    PLURALS,
)
from asynckubelet.node.status import is_scheduling_gated
from asynckubelet.runtime import containers as ctr
from asynckubelet.workloads.services import ServiceController

SERVICES_KEY: web.AppKey[ServiceController | None] = web.AppKey("services")
TERMINATING_KEY: web.AppKey[set[str]] = web.AppKey("terminating")
"""Namespaces deleted while pods of theirs may still be stopping."""
STARTED_KEY: web.AppKey[str] = web.AppKey("started")
"""When the local API began (the ``default`` Namespace's creation time when not stored)."""
NAME_LABEL = "kubernetes.io/metadata.name"
"""The label the API server gives every Namespace: its name."""
LOCAL_PREFIX = f"/apis/{API_GROUP}/v1"
MAX_REQUEST_BYTES = 4 * MAX_DOCUMENT_BYTES
"""A request may carry a few manifest texts of the loader's own limit each."""
KIND_OF_PLURAL = {plural: kind for kind, plural in PLURALS.items()}


# -- answers ---------------------------------------------------------------------------------


def status(code: int, reason: str, message: str, **details: Any) -> web.Response:
    """A Kubernetes ``Status``: ``{"kind": "Status", "status": "Failure", ...}``."""
    return web.json_response(status_body(code, reason, message, **details), status=code)


def status_body(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def refusal(code: int, message: str) -> web.Response:
    return status(code, "Unauthorized" if code == 401 else "Forbidden", message)


def not_found(resource: str, name: str) -> web.Response:
    return status(404, "NotFound", f'{resource} "{name}" not found', name=name, kind=resource)


def listing(kind: str, items: Iterable[Mapping[str, Any]]) -> web.Response:
    found = kind_table.info(kind)
    version = found.api_version if found is not None else "v1"
    body = {"kind": f"{kind}List", "apiVersion": version, "metadata": {}, "items": list(items)}
    return web.json_response(body)


def label_selector(request: web.Request) -> dict[str, Any] | None:
    """The request's ``labelSelector`` as a ``LabelSelector`` dict (None: none given);
    :class:`web.HTTPBadRequest` carrying the API server's ``Status`` for one it cannot
    parse."""
    text = request.query.get("labelSelector", "").strip()
    if not text:
        return None
    try:
        return parse_label_selector(text)
    except ValueError as e:
        body = status_body(400, "BadRequest", str(e))
        raise web.HTTPBadRequest(text=json.dumps(body), content_type="application/json") from None


def selected(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    return selector is None or selector_matches(selector, labels or {})


def wants_table(request: web.Request) -> bool:
    """Whether the client asks for server-side printing (``Accept: ...;as=Table``)."""
    return "as=Table" in request.headers.get("Accept", "")


def bound_pod(pod: Pod, *, node_name: str) -> Pod:
    """The pod as the API server holds it on this node: bound (``spec.nodeName``) unless
    scheduling gates hold it back. ``pod`` is left as it is; what differs is a new object."""
    if pod.spec is not None and not pod.spec.nodeName and not is_scheduling_gated(pod):
        spec = copy.copy(pod.spec)
        spec.nodeName = node_name
        pod = copy.copy(pod)
        pod.spec = spec
    return pod


def served_pod(node: Kubelet, pod: Pod) -> Pod:
    """The pod as this node's API serves it: bound (:func:`bound_pod`), with the
    ``creationTimestamp`` of the object stored for it (its first apply). ``pod`` is left
    as it is (it may be shared: :meth:`~asynckubelet.node.reads.PodReads.views`)."""
    pod = bound_pod(pod, node_name=node.node_name)
    meta = pod.metadata
    if meta is not None and meta.creationTimestamp is None:
        name, namespace, _ = ctr.pod_identity(pod)
        stored = node.objects.get("Pod", namespace, name)
        created = stored.created() if stored is not None else None
        if created is None and pod.status is not None:
            created = printpod.created(pod)
        if created is not None:
            pod = copy.copy(pod)
            pod.metadata = copy.copy(meta)
            pod.metadata.creationTimestamp = created
    return pod


def served_pods(node: Kubelet, namespace: str | None) -> list[Pod]:
    """The node's pods (of one namespace, or of all), by namespace and name, as the API
    server lists them."""
    pods = [
        served_pod(node, p)
        for p in node.views()
        if namespace is None or ctr.pod_identity(p)[1] == namespace
    ]
    return sorted(pods, key=lambda p: (ctr.pod_identity(p)[1], ctr.pod_identity(p)[0]))


# -- reading ---------------------------------------------------------------------------------
