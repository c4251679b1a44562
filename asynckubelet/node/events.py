"""The event recorder: Kubernetes-style events about pods, counted, kept and written down.

``kubectl describe`` ends with the pod's events (``Pulling``, ``Created``, ``BackOff``...),
and users read them first when a pod misbehaves. The kubelet's recorder aggregates repeats
of the same event into one with a ``count`` and first/last timestamps; this one does the
same, keeps a bounded history in memory for the library (``Kubelet.events()``), and appends
every change to a bounded JSON-lines file in the state dir, so that ``describe`` in another
process (or after a restart) shows the same events. The file is 0600: event messages name
pods, images and errors that other local users have no business reading.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lightkube.models.core_v1 import Pod
from loguru import logger

from asynckubelet import hostfs
from asynckubelet.runtime import containers as ctr

EVENTS_FILE = "events.jsonl"
EVENTS_MODE = 0o600
MAX_EVENTS = 1000
"""Distinct events kept in memory and, once the file is compacted, on disk."""


@dataclass(frozen=True)
class PodEvent:
    """One (aggregated) event about a pod, as ``kubectl describe`` shows it."""

    namespace: str
    pod: str
    uid: str
    type: str
    """``Normal`` or ``Warning``."""
    reason: str
    message: str
    first_timestamp: datetime
    last_timestamp: datetime
    count: int = 1
    container: str | None = None
    source: str = "kubelet"

    @property
    def field_path(self) -> str:
        """The ``involvedObject.fieldPath`` of the event (``spec.containers{name}``)."""
        return f"spec.containers{{{self.container}}}" if self.container else ""

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return (self.uid, self.type, self.reason, self.message, self.container or "")

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["first_timestamp"] = self.first_timestamp.isoformat()
        data["last_timestamp"] = self.last_timestamp.isoformat()
        return data

    def to_v1(self) -> dict[str, Any]:
        """The core API's v1 ``Event`` about the pod (as ``kubectl get events`` reads it)."""
        involved: dict[str, Any] = {
            "kind": "Pod",
            "apiVersion": "v1",
            "namespace": self.namespace,
            "name": self.pod,
            "uid": self.uid,
        }
        if self.field_path:
            involved["fieldPath"] = self.field_path
        component, _, host = self.source.partition(", ")
        digest = hashlib.sha256(repr(self.key).encode()).hexdigest()[:16]
        return {
            "kind": "Event",
            "apiVersion": "v1",
            "metadata": {"name": f"{self.pod}.{digest}", "namespace": self.namespace},
            "involvedObject": involved,
            "reason": self.reason,
            "message": self.message,
            "type": self.type,
            "count": self.count,
            "firstTimestamp": self.first_timestamp.isoformat(),
            "lastTimestamp": self.last_timestamp.isoformat(),
            "source": {"component": component, **({"host": host} if host else {})},
        }

    @classmethod
    def from_v1(cls, data: dict[str, Any]) -> PodEvent:
        """The event a v1 ``Event`` (:meth:`to_v1`) describes."""
        involved = data.get("involvedObject") or {}
        path = str(involved.get("fieldPath") or "")
        container = (
            path[len("spec.containers{") : -1] if path.startswith("spec.containers{") else None
        )
        source = data.get("source") or {}
        host = source.get("host")
        component = str(source.get("component") or "kubelet")
        return cls(
            namespace=str(involved.get("namespace") or ""),
            pod=str(involved.get("name") or ""),
            uid=str(involved.get("uid") or ""),
            type=str(data.get("type") or ""),
            reason=str(data.get("reason") or ""),
            message=str(data.get("message") or ""),
            first_timestamp=datetime.fromisoformat(str(data["firstTimestamp"])),
            last_timestamp=datetime.fromisoformat(str(data["lastTimestamp"])),
            count=int(data.get("count") or 1),
            container=container or None,
            source=f"{component}, {host}" if host else component,
        )

    @classmethod
    def from_json(cls, data: dict[str, object]) -> PodEvent:
        return cls(
            namespace=str(data["namespace"]),
            pod=str(data["pod"]),
            uid=str(data["uid"]),
            type=str(data["type"]),
            reason=str(data["reason"]),
            message=str(data["message"]),
            first_timestamp=datetime.fromisoformat(str(data["first_timestamp"])),
            last_timestamp=datetime.fromisoformat(str(data["last_timestamp"])),
            count=int(str(data.get("count", 1))),
            container=str(data["container"]) if data.get("container") else None,
            source=str(data.get("source") or "kubelet"),
        )


EventSubscriber = Callable[[PodEvent], None]
"""Told every new or repeated event (``Kubelet.events()`` readers)."""


class EventRecorder:
    """The node's :class:`~asynckubelet.runtime.events.EventSink`: aggregates repeats, keeps a
    bounded history, writes it to the state dir and tells subscribers."""

    def __init__(
        self,
        *,
        path: Path | None = None,
        node_name: str = "",
        max_events: int = MAX_EVENTS,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.path = path
        self.node_name = node_name
        self.max_events = max_events
        self._clock = clock
        self._events: OrderedDict[tuple[str, str, str, str, str], PodEvent] = OrderedDict()
        self._subscribers: list[EventSubscriber] = []
        self._lines_written = _count_lines(path) if path is not None else 0

    def __call__(
        self, pod: Pod, *, type: str, reason: str, message: str, container: str | None = None
    ) -> None:
        name, namespace, uid = ctr.pod_identity(pod)
        self.record(
            namespace=namespace,
            name=name,
            uid=uid,
            type=type,
            reason=reason,
            message=message,
            container=container,
        )

    def record(
        self,
        *,
        namespace: str,
        name: str,
        uid: str,
        type: str,
        reason: str,
        message: str,
        container: str | None = None,
    ) -> None:
        """An event about an object known by name and uid only (a manifest file that made
        no pod is one)."""
        now = self._clock()
        event = PodEvent(
            namespace=namespace,
            pod=name,
            uid=uid,
            type=type,
            reason=reason,
            message=message,
            container=container,
            first_timestamp=now,
            last_timestamp=now,
            source=f"kubelet, {self.node_name}" if self.node_name else "kubelet",
        )
        old = self._events.pop(event.key, None)
        if old is not None:
            event = replace(old, count=old.count + 1, last_timestamp=now)
        self._events[event.key] = event
        while len(self._events) > self.max_events:
            self._events.popitem(last=False)
        logger.bind(pod=f"{namespace}/{name}", container=container).info(
            "{} {}: {}", type, reason, message
        )
        self._append(event)
        for subscriber in list(self._subscribers):
            subscriber(event)

    def subscribe(self, subscriber: EventSubscriber) -> Callable[[], None]:
        """Call ``subscriber`` with every new or repeated event; returns the unsubscribe
        function."""
        self._subscribers.append(subscriber)
        return lambda: (
            self._subscribers.remove(subscriber) if subscriber in self._subscribers else None
        )

    @property
    def subscriber_count(self) -> int:
        """How many subscribers there are now."""
        return len(self._subscribers)

    def list(self, *, uid: str | None = None) -> list[PodEvent]:
        """Events in the order they last happened, those of one pod when ``uid`` is given."""
        found = [e for e in self._events.values() if uid is None or e.uid == uid]
        return sorted(found, key=lambda e: e.last_timestamp)

    def forget(self, uid: str) -> None:
        for key in [k for k in self._events if k[0] == uid]:
            del self._events[key]

    def _append(self, event: PodEvent) -> None:
        if self.path is None:
            return
        try:
            line = json.dumps(event.to_json()) + "\n"
            hostfs.append_file(self.path.parent, self.path.name, line.encode(), mode=EVENTS_MODE)
            self._lines_written += 1
            if self._lines_written > 2 * self.max_events:
                self._compact()
        except OSError as e:
            logger.warning("cannot write events to {}: {}", self.path, e)

    def _compact(self) -> None:
        assert self.path is not None  # noqa: S101  (type narrowing: called only when a path is set)
        latest = read_events(self.path)[-self.max_events :]
        text = "".join(json.dumps(e.to_json()) + "\n" for e in latest)
        hostfs.write_file(self.path.parent, self.path.name, text.encode(), mode=EVENTS_MODE)
        self._lines_written = len(latest)


def _count_lines(path: Path) -> int:
    try:
        with path.open("rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def read_events(path: Path, *, uid: str | None = None) -> list[PodEvent]:
    """The events in a recorder's file, latest record of each, oldest first.

    Lines that do not parse (a write cut short by a crash) are skipped.
    """
    latest: dict[tuple[str, str, str, str, str], PodEvent] = {}
    try:
        with path.open(encoding="utf-8") as f:
            lines: Iterable[str] = list(f)
    except OSError:
        return []
    for line in lines:
        try:
            event = PodEvent.from_json(json.loads(line))
        except (ValueError, KeyError, TypeError):
            continue
        if uid is None or event.uid == uid:
            latest.pop(event.key, None)
            latest[event.key] = event
    return sorted(latest.values(), key=lambda e: e.last_timestamp)


def age(since: datetime, *, now: datetime) -> str:
    """kubectl's ``HumanDuration``: ``5s``, ``3m20s``, ``2d3h``."""
    seconds = max(0, math.floor((now - since).total_seconds()))
    if seconds < 60 * 2:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        rest = seconds % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        rest = hours % 24
        return f"{days}d{rest}h" if rest else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    years = days // 365
    if days < 365 * 8:
        rest = days % 365
        return f"{years}y{rest}d" if rest else f"{years}y"
    return f"{years}y"
