"""An in-memory ``ClusterAPI`` for unit tests of the cluster node mode's parts.

It keeps objects by name with a growing resource version, records every call, and lets a
test script the watch: each ``watch_pods`` call takes the next scripted step, a list of
events to stream and then an error to raise (or None to end quietly), so reconnects and
410s can be played out without a server.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import anyio
import builders
from lightkube.models.coordination_v1 import Lease
from lightkube.models.core_v1 import Event, Node, Pod, Service
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet import errors
from asynckubelet.cluster.api import BoundToken, Listed, ObjectKind, WatchEvent


def pod(name: str, uid: str, *, rv: str = "1", node: str = "n1", **spec: Any) -> Pod:
    spec = {"nodeName": node, "containers": [builders.container("c")], **spec}
    return builders.pod(name, uid=uid, meta={"resourceVersion": rv}, **spec)


@dataclass
class WatchStep:
    events: list[WatchEvent] = field(default_factory=list)
    error: Exception | None = None


@dataclass
class FakeCluster:
    server: str = "https://fake"
    version: int = 100
    nodes: dict[str, Node] = field(default_factory=dict)
    leases: dict[str, Lease] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    services: list[Service] = field(default_factory=list)
    list_items: list[Pod] | None = None
    list_errors: list[Exception] = field(default_factory=list)
    watch_steps: list[WatchStep] = field(default_factory=list)
    calls: list[tuple[str, Any]] = field(default_factory=list)
    fail_next: dict[str, list[Exception]] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    event_patches: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)
    status_patches: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)
    watch_done: anyio.Event = field(default_factory=anyio.Event)

    def _bump(self) -> str:
        self.version += 1
        return str(self.version)

    def _maybe_fail(self, what: str) -> None:
        queue = self.fail_next.get(what)
        if queue:
            raise queue.pop(0)

    async def server_version(self) -> str:
        return "v1.20.2"

    async def get_node(self, name: str) -> Node | None:
        self.calls.append(("get_node", name))
        self._maybe_fail("get_node")
        node = self.nodes.get(name)
        return copy.deepcopy(node)

    async def create_node(self, node: Node) -> Node:
        self.calls.append(("create_node", node))
        assert node.metadata is not None
        assert node.metadata.name
        if node.metadata.name in self.nodes:
            raise errors.ClusterAPIError("exists", code=409, reason="AlreadyExists")
        stored = copy.deepcopy(node)
        assert stored.metadata is not None
        stored.metadata.uid = f"uid-{node.metadata.name}"
        stored.metadata.resourceVersion = self._bump()
        self.nodes[node.metadata.name] = stored
        return copy.deepcopy(stored)

    async def patch_node(self, name: str, patch: Mapping[str, Any]) -> Node:
        self.calls.append(("patch_node", patch))
        node = self.nodes[name]
        body = node.to_dict()
        labels = body.setdefault("metadata", {}).setdefault("labels", {})
        labels.update(patch.get("metadata", {}).get("labels", {}))
        self.nodes[name] = cast(Node, Node.from_dict(body))
        return copy.deepcopy(self.nodes[name])

    async def patch_node_status(self, name: str, patch: Mapping[str, Any]) -> Node:
        self.calls.append(("patch_node_status", patch))
        self._maybe_fail("patch_node_status")
        body = self.nodes[name].to_dict()
        body.setdefault("status", {}).update(patch["status"])
        self.nodes[name] = cast(Node, Node.from_dict(body))
        return copy.deepcopy(self.nodes[name])

    async def get_lease(self, namespace: str, name: str) -> Lease | None:
        self.calls.append(("get_lease", name))
        self._maybe_fail("get_lease")
        return copy.deepcopy(self.leases.get(name))

    async def create_lease(self, lease: Lease) -> Lease:
        self.calls.append(("create_lease", lease))
        self._maybe_fail("create_lease")
        assert lease.metadata is not None
        assert lease.metadata.name
        stored = copy.deepcopy(lease)
        assert stored.metadata is not None
        stored.metadata.resourceVersion = self._bump()
        self.leases[lease.metadata.name] = stored
        return copy.deepcopy(stored)

    async def replace_lease(self, lease: Lease) -> Lease:
        self.calls.append(("replace_lease", lease))
        self._maybe_fail("replace_lease")
        assert lease.metadata is not None
        assert lease.metadata.name
        current = self.leases.get(lease.metadata.name)
        if current is None:
            raise errors.ClusterAPIError("not found", code=404, reason="NotFound")
        assert current.metadata is not None
        if lease.metadata.resourceVersion != current.metadata.resourceVersion:
            raise errors.ClusterAPIError("conflict", code=409, reason="Conflict")
        stored = copy.deepcopy(lease)
        assert stored.metadata is not None
        stored.metadata.resourceVersion = self._bump()
        self.leases[lease.metadata.name] = stored
        return copy.deepcopy(stored)

    async def list_pods(self, *, node: str) -> Listed:
        self.calls.append(("list_pods", node))
        if self.list_errors:
            raise self.list_errors.pop(0)
        items = self.list_items if self.list_items is not None else list(self.pods.values())
        return Listed(items=tuple(copy.deepcopy(items)), resource_version=str(self.version))

    async def watch_pods(self, *, node: str, resource_version: str) -> AsyncIterator[WatchEvent]:
        self.calls.append(("watch_pods", resource_version))
        if not self.watch_steps:
            self.watch_done.set()
            await anyio.sleep_forever()
        step = self.watch_steps.pop(0)
        for event in step.events:
            yield event
        if step.error is not None:
            raise step.error

    async def list_services(self) -> Listed:
        self.calls.append(("list_services", None))
        return Listed(items=tuple(copy.deepcopy(self.services)), resource_version=str(self.version))

    async def watch_services(self, *, resource_version: str) -> AsyncIterator[WatchEvent]:
        self.calls.append(("watch_services", resource_version))
        await anyio.sleep_forever()
        yield ("ADDED", None)  # pragma: no cover

    async def get_pod(self, namespace: str, name: str) -> Pod | None:
        return None

    async def create_pod(self, pod: Pod) -> Pod:
        return pod

    async def patch_pod_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> Pod:
        self.calls.append(("patch_pod_status", name))
        self._maybe_fail("patch_pod_status")
        self.status_patches.append((name, patch))
        return cast(Pod, Pod.from_dict({"metadata": {"name": name}, "status": patch["status"]}))

    async def delete_pod(
        self, namespace: str, name: str, *, uid: str | None, grace_period: int | None
    ) -> None:
        self.calls.append(("delete_pod", (name, uid, grace_period)))

    async def list_object(self, kind: ObjectKind, namespace: str, name: str) -> Listed:
        return Listed(items=(), resource_version=str(self.version))

    async def watch_object(
        self, kind: ObjectKind, namespace: str, name: str, *, resource_version: str
    ) -> AsyncIterator[WatchEvent]:
        await anyio.sleep_forever()
        yield ("ADDED", None)  # pragma: no cover

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
        self.calls.append(("request_token", (namespace, service_account, pod_name, pod_uid)))
        return BoundToken(
            value=f"token-{pod_uid}",
            expires_at=datetime.now(UTC) + timedelta(seconds=expiration_seconds),
        )

    async def create_event(self, event: Event) -> Event:
        self._maybe_fail("create_event")
        self.events.append(event)
        return event

    async def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> Event:
        self.event_patches.append((name, patch))
        return Event(metadata=ObjectMeta(name=name), involvedObject={})  # type: ignore[arg-type]
