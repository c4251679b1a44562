"""``ClusterAPI``: what a node agent needs of a Kubernetes API server, and nothing more.

The agent's parts (registration, the Lease, the pod source, the status, event and token
sinks) speak to the API server only through this protocol, so each can be tested over an
in-memory fake, and only :mod:`asynckubelet.cluster.client` knows the HTTP client. Every
method raises the project's errors: :class:`~asynckubelet.errors.ClusterUnavailable` when
the server cannot be reached, :class:`~asynckubelet.errors.ClusterAPIError` (with the HTTP
status and the ``Status`` reason) when it answers with an error.

Objects are lightkube-models instances; patches are plain dicts, sent as a strategic merge
patch (pod status) or a JSON merge patch (node status, events).
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from lightkube.models.coordination_v1 import Lease
from lightkube.models.core_v1 import ConfigMap, Event, Node, Pod, Secret

ObjectKind = Literal["ConfigMap", "Secret"]
WatchEvent = tuple[str, Any]
"""``(type, object)``: ``ADDED``, ``MODIFIED``, ``DELETED`` (``BOOKMARK`` is never asked for)."""


@dataclass(frozen=True)
class BoundToken:
    """A service-account token the API server issued (``TokenRequest``)."""

    value: str
    expires_at: datetime

    def __repr__(self) -> str:
        return f"BoundToken(expires_at={self.expires_at.isoformat()})"


@dataclass(frozen=True)
class Listed:
    """A list's items and the resource version to watch from."""

    items: tuple[Any, ...]
    resource_version: str


class ClusterAPI(Protocol):
    """The API server, as the node agent uses it."""

    @property
    def server(self) -> str:
        """The API server's URL, for messages."""

    async def server_version(self) -> str:
        """``GET /version``'s ``gitVersion`` (``v1.20.2``); the first call a node makes, so
        credentials the server refuses are found here."""

    async def get_node(self, name: str) -> Node | None: ...

    async def create_node(self, node: Node) -> Node: ...

    async def patch_node(self, name: str, patch: Mapping[str, Any]) -> Node:
        """A JSON merge patch of the Node (labels of an adopted Node)."""

    async def patch_node_status(self, name: str, patch: Mapping[str, Any]) -> Node:
        """A JSON merge patch of the ``status`` subresource (the spec, taints included, is
        never sent: NodeRestriction refuses a node that changes its taints)."""

    async def get_lease(self, namespace: str, name: str) -> Lease | None: ...

    async def create_lease(self, lease: Lease) -> Lease: ...

    async def replace_lease(self, lease: Lease) -> Lease:
        """PUT with the lease's ``resourceVersion``: a stale one is a 409 Conflict."""

    async def list_pods(self, *, node: str) -> Listed:
        """Every pod bound to ``node`` (``spec.nodeName``), in all namespaces."""

    def watch_pods(self, *, node: str, resource_version: str) -> AsyncIterator[WatchEvent]:
        """Changes of the pods bound to ``node`` after ``resource_version``; a version too
        old is a ``ClusterAPIError`` with ``gone`` (410), after which one lists again."""

    async def list_services(self) -> Listed:
        """Every Service, in all namespaces (their variables go into pods' environments)."""

    def watch_services(self, *, resource_version: str) -> AsyncIterator[WatchEvent]:
        """Changes of the Services after ``resource_version`` (410: list again)."""

    async def get_pod(self, namespace: str, name: str) -> Pod | None: ...

    async def create_pod(self, pod: Pod) -> Pod: ...

    async def patch_pod_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> Pod:
        """A strategic merge patch of the pod's ``status`` subresource."""

    async def delete_pod(
        self, namespace: str, name: str, *, uid: str | None, grace_period: int | None
    ) -> None:
        """DELETE with ``gracePeriodSeconds`` and, given ``uid``, a UID precondition (the
        pod of that name may be a newer one by now)."""

    async def list_object(self, kind: ObjectKind, namespace: str, name: str) -> Listed:
        """The one ConfigMap or Secret of that name (none or one item), listed by
        ``metadata.name`` so that it can be watched from the version returned."""

    def watch_object(
        self, kind: ObjectKind, namespace: str, name: str, *, resource_version: str
    ) -> AsyncIterator[WatchEvent]: ...

    async def request_token(
        self,
        *,
        namespace: str,
        service_account: str,
        audiences: tuple[str, ...],
        expiration_seconds: int,
        pod_name: str,
        pod_uid: str,
    ) -> BoundToken:
        """``TokenRequest`` for a token bound to the pod."""

    async def create_event(self, event: Event) -> Event: ...

    async def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> Event:
        """A JSON merge patch (count and last timestamp of a repeated event)."""


def secret_bytes(secret: Secret) -> dict[str, bytes]:
    """A Secret's ``data``, decoded (the API sends it base64-encoded)."""
    return {key: base64.b64decode(value) for key, value in (secret.data or {}).items()}


def configmap_parts(cm: ConfigMap) -> tuple[dict[str, str], dict[str, bytes]]:
    """A ConfigMap's ``data`` and its decoded ``binaryData``."""
    return (
        dict(cm.data or {}),
        {key: base64.b64decode(value) for key, value in (cm.binaryData or {}).items()},
    )


__all__ = [
    "BoundToken",
    "ClusterAPI",
    "Listed",
    "ObjectKind",
    "WatchEvent",
    "configmap_parts",
    "secret_bytes",
]
