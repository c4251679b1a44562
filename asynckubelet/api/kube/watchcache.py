"""The recent changes of every kind but pods, each with its resourceVersion.

The API server gives every object of every kind a ``resourceVersion`` from one sequence
(etcd's revision) and keeps a window of recent changes per resource for watches (its
watch cache). The node keeps its objects in :class:`~asynckubelet.node.objects.
ObjectStore` and its Events in the recorder; this cache listens to both, gives each
change the next number of the API's one sequence (:class:`~asynckubelet.api.kube.
history.Versions`, shared with the pods' :class:`~asynckubelet.api.kube.history.
PodHistory`), remembers each object's version, and keeps the last :data:`WINDOW`
changes of each kind, so a watch of any kind resumes from a list's version as one of
pods does: the changes after it, ``410 Expired`` when it is older than the window, an
``ADDED`` for each object there now without one.

Bodies are kept as stored (a Secret's values too: what a client is shown is decided when
it is sent, :mod:`~asynckubelet.api.kube.watches`).
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from asynckubelet.api.kube.history import BUFFER, WINDOW, Versions, Watch, open_watch
from asynckubelet.node.events import EventRecorder, PodEvent
from asynckubelet.node.objects import Key, ObjectStore

STORED_KINDS = (
    "Namespace",
    "ConfigMap",
    "Secret",
    "ServiceAccount",
    "Service",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "Job",
    "DaemonSet",
    "CronJob",
    "ControllerRevision",
)
"""The kinds served from the object store (pods are served from their statuses)."""

ObjectKey = tuple[str, str]
"""``(namespace, name)`` within one kind; ``""`` for a cluster-scoped object."""


@dataclass(frozen=True)
class ObjectChange:
    """One change of an object: ``ADDED``, ``MODIFIED`` or ``DELETED``, its body then (the
    last one for ``DELETED``), the resourceVersion, and the body before (None for
    ``ADDED``)."""

    type: str
    key: ObjectKey
    body: Mapping[str, Any]
    version: int
    previous: Mapping[str, Any] | None = None


class _Kind:
    def __init__(self, window: int, floor: int) -> None:
        self.changes: deque[ObjectChange] = deque(maxlen=window)
        self.known: dict[ObjectKey, tuple[Mapping[str, Any], int]] = {}
        self.floor = floor
        self.watches: dict[MemoryObjectSendStream[Any], Watch] = {}


class ObjectHistory:
    """The windows of changes of the store's kinds and of Events; see the module."""

    def __init__(self, versions: Versions, *, window: int = WINDOW) -> None:
        self.versions = versions
        self._window = window
        self._kinds: dict[str, _Kind] = {}
        self._stops: list[Callable[[], None]] = []

    def _kind(self, kind: str) -> _Kind:
        found = self._kinds.get(kind)
        if found is None:
            found = self._kinds[kind] = _Kind(self._window, self.versions.value)
        return found

    # -- feeds ---------------------------------------------------------------------------

    def follow_store(self, store: ObjectStore) -> None:
        """Take the store's objects now and every later change of them."""
        start = self.versions.next()
        for kind in STORED_KINDS:
            entry = self._kind(kind)
            for obj in store.list(kind):
                entry.known[(obj.namespace, obj.name)] = (obj.body, start)

        def observed(key: Key) -> None:
            kind, namespace, name = key
            if kind not in STORED_KINDS:
                return
            obj = store.get(kind, namespace, name)
            self.record(kind, (namespace, name), None if obj is None else obj.body)

        self._stops.append(store.observe(observed))

    def follow_events(self, recorder: EventRecorder) -> None:
        """Take the recorder's Events now and every later one."""
        entry = self._kind("Event")
        start = self.versions.value
        for event in recorder.list():
            body = event.to_v1()
            entry.known[_event_key(body)] = (body, start)

        def reported(event: PodEvent) -> None:
            body = event.to_v1()
            self.record("Event", _event_key(body), body)

        self._stops.append(recorder.subscribe(reported))

    def close(self) -> None:
        for stop in self._stops:
            stop()
        self._stops.clear()
        for entry in self._kinds.values():
            for send in list(entry.watches):
                send.close()
            entry.watches.clear()

    # -- reading -------------------------------------------------------------------------

    def version_of(self, kind: str, key: ObjectKey) -> int:
        """The resourceVersion of an object's last change (the current one when unknown)."""
        found = self._kind(kind).known.get(key)
        return found[1] if found is not None else self.versions.value

    def floor(self, kind: str) -> int:
        return self._kind(kind).floor

    def current(self, kind: str) -> list[ObjectChange]:
        """An ``ADDED`` for each object of ``kind`` known now, by namespace and name."""
        entry = self._kind(kind)
        return [
            ObjectChange("ADDED", key, body, version)
            for key, (body, version) in sorted(entry.known.items())
        ]

    # -- changing ------------------------------------------------------------------------

    def record(self, kind: str, key: ObjectKey, body: Mapping[str, Any] | None) -> None:
        """One object of ``kind`` now is ``body`` (None: it is gone)."""
        entry = self._kind(kind)
        old = entry.known.get(key)
        if body is None:
            if old is None:
                return
            del entry.known[key]
            change = ObjectChange("DELETED", key, old[0], self.versions.next(), old[0])
        else:
            if old is not None and old[0] == body:
                return
            version = self.versions.next()
            previous = None if old is None else old[0]
            change = ObjectChange(
                "ADDED" if old is None else "MODIFIED", key, body, version, previous
            )
            entry.known[key] = (body, version)
        if len(entry.changes) == entry.changes.maxlen:
            entry.floor = entry.changes[0].version
        entry.changes.append(change)
        for send, watch in list(entry.watches.items()):
            try:
                send.send_nowait(change)
            except anyio.WouldBlock:
                watch.fell_behind = True
                del entry.watches[send]
                send.close()

    def replace(self, kind: str, bodies: Mapping[ObjectKey, Mapping[str, Any]]) -> None:
        """The objects of ``kind`` now are ``bodies``: each that changed is recorded, each
        no longer there is ``DELETED`` (a kind derived from others, as Endpoints from
        Services and pods)."""
        for key in [k for k in self._kind(kind).known if k not in bodies]:
            self.record(kind, key, None)
        for key, body in sorted(bodies.items()):
            self.record(kind, key, body)

    def body_of(self, kind: str, key: ObjectKey) -> Mapping[str, Any] | None:
        """The object of ``kind`` at ``key`` now (None: none)."""
        found = self._kind(kind).known.get(key)
        return None if found is None else found[0]

    def on_close(self, stop: Callable[[], None]) -> None:
        """Call ``stop`` (an unsubscription of a feed) when the history closes."""
        self._stops.append(stop)

    @contextlib.contextmanager
    def watch(self, kind: str, resource_version: str, *, buffer: int = BUFFER) -> Iterator[Watch]:
        """The changes of ``kind`` after ``resource_version`` (``""``/``"0"``: an
        ``ADDED`` for each object now), then each new one, until the block is left.
        Raises :class:`~asynckubelet.api.kube.history.Expired` for a version older than
        the window, ValueError for one that is not a version."""
        entry = self._kind(kind)
        with open_watch(
            resource_version,
            current=lambda: self.current(kind),
            changes=entry.changes,
            floor=entry.floor,
            watches=entry.watches,
            buffer=buffer,
        ) as watch:
            yield watch


def _event_key(body: Mapping[str, Any]) -> ObjectKey:
    meta = body.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


__all__ = ["STORED_KINDS", "ObjectChange", "ObjectHistory"]
