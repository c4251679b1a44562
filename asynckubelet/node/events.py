"""The event recorder: Kubernetes-style events about pods, correlated, kept and written down.

``kubectl describe`` ends with the pod's events (``Pulling``, ``Created``, ``BackOff``...),
and users read them first when a pod misbehaves. The kubelet's recorder does not write
every occurrence: client-go's ``EventCorrelator`` counts a repeat of the same event into
one event with a ``count`` and first/last timestamps (``(x5 over 2m)``), combines more
than 10 events that differ only in their message within 10 minutes into one ``(combined
from similar events): ...`` event, and lets a source report 25 events about one object,
then one every 5 minutes (the counts go on meanwhile, and the next event reported
carries them). This recorder does the same with an injected clock, keeps a bounded
history in memory for the library (``Kubelet.events()``), and appends each reported
event to a JSON-lines file in the state dir, so that ``describe`` in another process (or
after a restart) shows the same events. The file is rotated when it grows past a bound
(one older file is kept, and read too) and is 0600: event messages name pods, images
and errors that other local users have no business reading.

A restarted node takes the file's events back (:meth:`EventRecorder.load`): they are shown
again, and a repeat of one goes on counting from it. Events are kept for an hour after
they last happened (the API server's ``--event-ttl``). A pod deleted takes its events with
it (a line in the file says so), and a pod's events older than its ``creationTimestamp``
are not shown for it (:func:`since_creation`): a local pod re-created under the same name
has the same UID, and the events of the one before are not its own.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import json
import math
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
from lightkube.models.core_v1 import Pod

from asynckubelet import hostfs
from asynckubelet._logging import logger
from asynckubelet.manifests import kinds
from asynckubelet.node.writer import BatchWriter
from asynckubelet.runtime import containers as ctr

EVENTS_FILE = "events.jsonl"
EVENTS_MODE = 0o600
MAX_EVENTS = 1000
"""Distinct events kept in memory."""
MAX_FILE_BYTES = 1 << 20
"""Past this size the events file is rotated: renamed with a ``.1`` suffix (the one
older file kept, replacing the previous one), a new one begun."""
SIMILAR_EVENTS = 10
"""Events differing only in their message that are combined (client-go's
``defaultAggregateMaxEvents``)..."""
SIMILAR_INTERVAL = timedelta(minutes=10)
"""...within this time of the last one (``defaultAggregateIntervalInSeconds``)."""
COMBINED = "(combined from similar events): "
SPAM_BURST = 25
"""Events about one object reported at once (``defaultSpamBurst``)..."""
SPAM_REFILL = timedelta(minutes=5)
"""...then one per this time (``defaultSpamQPS``, 1/300)."""
CACHE_SIZE = 4096
"""Entries each correlation cache holds, least recently used forgotten first (client-go's
``maxLruCacheEntries``)."""
EVENT_TTL = timedelta(hours=1)
"""How long an event is kept after it last happened (the API server's ``--event-ttl``)."""
FORGET = "forget"
"""The field of a line of the events file saying that the object with that uid is gone:
its events written before the line are no longer read."""


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
    kind: str = "Pod"
    """The kind of the object the event is about (a controller's events are about its
    Deployment, ReplicaSet or Job)."""
    combined: bool = False
    """Similar events combined into this one (its message is the latest's, prefixed
    ``(combined from similar events): ``); it is one event whatever its message."""

    @property
    def field_path(self) -> str:
        """The ``involvedObject.fieldPath`` of the event (``spec.containers{name}``)."""
        return f"spec.containers{{{self.container}}}" if self.container else ""

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """What makes two events one: everything but the times (and for a combined event,
        the message and container, which are the latest's)."""
        if self.combined:
            return (self.uid, self.type, self.reason, COMBINED, "")
        return (self.uid, self.type, self.reason, self.message, self.container or "")

    def to_json(self) -> dict[str, object]:
        return {
            "namespace": self.namespace,
            "pod": self.pod,
            "uid": self.uid,
            "type": self.type,
            "reason": self.reason,
            "message": self.message,
            "first_timestamp": self.first_timestamp.isoformat(),
            "last_timestamp": self.last_timestamp.isoformat(),
            "count": self.count,
            "container": self.container,
            "source": self.source,
            "combined": self.combined,
            "kind": self.kind,
        }

    def to_v1(self) -> dict[str, Any]:
        """The core API's v1 ``Event`` about the pod (as ``kubectl get events`` reads it)."""
        found = kinds.info(self.kind)
        involved: dict[str, Any] = {
            "kind": self.kind,
            "apiVersion": found.api_version if found is not None else "v1",
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
            kind=str(involved.get("kind") or "Pod"),
            combined=str(data.get("message") or "").startswith(COMBINED),
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
            kind=str(data.get("kind") or "Pod"),
            combined=bool(data.get("combined")),
        )


EventSubscriber = Callable[[PodEvent], None]
"""Told every new or repeated event (``Kubelet.events()`` readers)."""


class _Similar:
    """The messages of similar events seen lately (an aggregation record)."""

    def __init__(self, at: datetime) -> None:
        self.messages: set[str] = set()
        self.last = at


class EventCorrelator:
    """client-go's ``EventCorrelator`` with its defaults, as the kubelet uses it: each
    event is aggregated with similar ones, counted with its repeats, then let through or
    held back by a token bucket per object. Time is the events' own (their
    ``last_timestamp``); state is bounded (:data:`CACHE_SIZE` per cache)."""

    def __init__(
        self,
        *,
        similar_events: int = SIMILAR_EVENTS,
        similar_interval: timedelta = SIMILAR_INTERVAL,
        burst: int = SPAM_BURST,
        refill: timedelta = SPAM_REFILL,
        cache_size: int = CACHE_SIZE,
    ) -> None:
        self.similar_events = similar_events
        self.similar_interval = similar_interval
        self.burst = burst
        self.refill = refill
        self.cache_size = cache_size
        self._similar: OrderedDict[tuple[str, ...], _Similar] = OrderedDict()
        self._observed: OrderedDict[tuple[str, ...], PodEvent] = OrderedDict()
        self._buckets: OrderedDict[str, tuple[float, datetime]] = OrderedDict()

    def correlate(self, event: PodEvent) -> tuple[PodEvent, bool]:
        """The event as it is to be recorded (combined with similar ones, counted with its
        repeats) and whether to report it now (False: over its object's rate; its count
        goes on, and the next one reported carries it)."""
        now = event.last_timestamp
        event = self._aggregate(event, now)
        last = self._observed.pop(event.key, None)
        if last is not None:
            event = replace(event, first_timestamp=last.first_timestamp, count=last.count + 1)
        self._observed[event.key] = event
        _bound(self._observed, self.cache_size)
        return event, self._take(event.uid, now)

    def remember(self, event: PodEvent) -> None:
        """Take back an event recorded before (by an earlier run, read from its file), so that
        its repeats go on counting from it and similar events go on being combined with it.
        Events are to be remembered in the order they last happened."""
        self._observed.pop(event.key, None)
        self._observed[event.key] = event
        _bound(self._observed, self.cache_size)
        key = (event.uid, event.namespace, event.pod, event.type, event.reason)
        now = event.last_timestamp
        record = self._similar.pop(key, None)
        if record is None or now - record.last > self.similar_interval:
            record = _Similar(now)
        if event.combined:
            # Combined events stand for as many distinct messages as keep the next one
            # combined; which they were is not written down.
            record.messages.update(f"\0{i}" for i in range(self.similar_events - 1))
        else:
            record.messages.add(event.message)
        record.last = max(record.last, now)
        self._similar[key] = record
        _bound(self._similar, self.cache_size)

    def forget(self, uid: str) -> None:
        """Drop what is remembered about the object ``uid`` (it is gone)."""
        for cache in (self._similar, self._observed):
            for key in [k for k in cache if k[0] == uid]:
                del cache[key]
        self._buckets.pop(uid, None)

    def _aggregate(self, event: PodEvent, now: datetime) -> PodEvent:
        key = (event.uid, event.namespace, event.pod, event.type, event.reason)
        record = self._similar.pop(key, None)
        if record is None or now - record.last > self.similar_interval:
            record = _Similar(now)
        record.messages.add(event.message)
        record.last = now
        self._similar[key] = record
        _bound(self._similar, self.cache_size)
        if len(record.messages) < self.similar_events:
            return event
        record.messages.pop()
        return replace(event, message=COMBINED + event.message, combined=True)

    def _take(self, uid: str, now: datetime) -> bool:
        tokens, at = self._buckets.pop(uid, (float(self.burst), now))
        refill = self.refill.total_seconds()
        elapsed = max(0.0, (now - at).total_seconds())
        tokens = min(float(self.burst), tokens + (elapsed / refill if refill > 0 else self.burst))
        allowed = tokens >= 1
        self._buckets[uid] = (tokens - 1 if allowed else tokens, now)
        _bound(self._buckets, self.cache_size)
        return allowed


def _bound(cache: OrderedDict[Any, Any], size: int) -> None:
    while len(cache) > size:
        cache.popitem(last=False)


class EventRecorder:
    """The node's :class:`~asynckubelet.runtime.events.EventSink`: correlates events as
    the kubelet's recorder does (:class:`EventCorrelator`), keeps a bounded history of
    those reported, writes them to the state dir (rotated past ``max_file_bytes``) and
    tells subscribers. While :meth:`run` runs, the file is written in a worker thread, in
    batches: a burst of pods makes many events, and a write the disk is slow to take (while
    the engine unpacks layers and makes containers) would otherwise hold the node's loop.

    Events are listed for ``ttl`` after they last happened (None: as long as they are
    among the ``max_events`` latest); :meth:`load` takes back those of an earlier run."""

    def __init__(
        self,
        *,
        path: Path | None = None,
        node_name: str = "",
        max_events: int = MAX_EVENTS,
        max_file_bytes: int = MAX_FILE_BYTES,
        ttl: timedelta | None = EVENT_TTL,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.path = path
        self.node_name = node_name
        self.max_events = max_events
        self.max_file_bytes = max_file_bytes
        self.ttl = ttl
        self._clock = clock
        self.correlator = EventCorrelator()
        self._events: OrderedDict[tuple[str, str, str, str, str], PodEvent] = OrderedDict()
        self._subscribers: list[EventSubscriber] = []
        self._file_bytes = _size(path) if path is not None else 0
        self._writer = BatchWriter[bytes](self._write)

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
        kind: str = "Pod",
        component: str = "kubelet",
    ) -> None:
        """An event about an object known by name and uid only (a manifest file that made
        no pod is one); ``kind`` and ``component`` for a controller's events about its
        object (``Deployment``, ``deployment-controller``)."""
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
            source=f"{component}, {self.node_name}"
            if self.node_name and component == "kubelet"
            else component,
            kind=kind,
        )
        event, report = self.correlator.correlate(event)
        if not report:
            return
        self._events.pop(event.key, None)
        self._events[event.key] = event
        _bound(self._events, self.max_events)
        logger.bind(**{kind.lower(): f"{namespace}/{name}"}, container=container).info(
            "{} {}: {}", type, reason, event.message
        )
        self._append(event)
        for subscriber in list(self._subscribers):
            subscriber(event)

    def subscribe(self, subscriber: EventSubscriber) -> Callable[[], None]:
        """Call ``subscriber`` with every event reported (new, or repeated with its count);
        returns the unsubscribe function."""
        self._subscribers.append(subscriber)
        return lambda: (
            self._subscribers.remove(subscriber) if subscriber in self._subscribers else None
        )

    @property
    def subscriber_count(self) -> int:
        """How many subscribers there are now."""
        return len(self._subscribers)

    def list(self, *, uid: str | None = None) -> list[PodEvent]:
        """Events in the order they last happened, those of one pod when ``uid`` is given;
        those last seen longer than ``ttl`` ago are dropped."""
        if self.ttl is not None and self._events:
            cutoff = self._clock() - self.ttl
            for key in [k for k, e in self._events.items() if e.last_timestamp < cutoff]:
                del self._events[key]
        found = [e for e in self._events.values() if uid is None or e.uid == uid]
        return sorted(found, key=lambda e: e.last_timestamp)

    def load(self) -> int:
        """Take back the events in the file (an earlier run's, latest record of each, as
        :func:`read_events` reads them) that are within ``ttl`` and among the
        ``max_events`` latest: they are listed again, their repeats counted on from them and
        similar ones combined with them. Events recorded already are kept over those read.
        Returns how many were taken back; a file that cannot be read is none."""
        if self.path is None:
            return 0
        found = read_events(self.path, now=self._clock(), ttl=self.ttl)
        found = found[-self.max_events :] if self.max_events > 0 else []
        loaded: OrderedDict[tuple[str, str, str, str, str], PodEvent] = OrderedDict()
        for event in found:
            if event.key not in self._events:
                loaded[event.key] = event
                self.correlator.remember(event)
        count = len(loaded)
        loaded.update(self._events)
        self._events = loaded
        _bound(self._events, self.max_events)
        return count

    def forget(self, uid: str) -> None:
        """The object ``uid`` is gone: its events are dropped (also from what the file is
        read as, by a line saying so), and repeats of them count afresh."""
        for key in [k for k in self._events if k[0] == uid]:
            del self._events[key]
        self.correlator.forget(uid)
        if self.path is not None:
            line = {FORGET: uid, "at": self._clock().isoformat()}
            self._writer.add((json.dumps(line) + "\n").encode())

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Write the events recorded to the file in a worker thread until cancelled; what is
        left is written before this returns."""
        await self._writer.run(task_status=task_status)

    def _append(self, event: PodEvent) -> None:
        if self.path is None:
            return
        self._writer.add((json.dumps(event.to_json()) + "\n").encode())

    def _write(self, lines: builtins.list[bytes]) -> None:
        """Append ``lines`` to the file, rotating it first when they would take it past
        ``max_file_bytes``."""
        if self.path is None or not lines:
            return
        for data in _chunks(lines, self.max_file_bytes):
            try:
                if self._file_bytes and self._file_bytes + len(data) > self.max_file_bytes:
                    hostfs.rename(self.path.parent, self.path.name, rotated(self.path).name)
                    self._file_bytes = 0
                hostfs.append_file(self.path.parent, self.path.name, data, mode=EVENTS_MODE)
                self._file_bytes += len(data)
            except OSError as e:
                logger.warning("cannot write events to {}: {}", self.path, e)


def _chunks(lines: list[bytes], limit: int) -> list[bytes]:
    """``lines`` joined into as few pieces as keep each within ``limit`` (a longer line
    is a piece of its own), so that a rotation can fall between any two."""
    pieces: list[bytes] = []
    current = b""
    for line in lines:
        if current and len(current) + len(line) > limit:
            pieces.append(current)
            current = b""
        current += line
    if current:
        pieces.append(current)
    return pieces


def rotated(path: Path) -> Path:
    """Where the events file's previous part is kept once it is rotated."""
    return path.with_name(path.name + ".1")


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0


def read_events(
    path: Path,
    *,
    uid: str | None = None,
    now: datetime | None = None,
    ttl: timedelta | None = EVENT_TTL,
) -> list[PodEvent]:
    """The events in a recorder's file (and in its rotated part before it), latest
    record of each, oldest first; with ``now``, those last seen longer than ``ttl`` before
    it are left out.

    Lines that do not parse (a write cut short by a crash) are skipped; a line saying an
    object is gone (:meth:`EventRecorder.forget`) drops its events written before it.
    """
    latest: dict[tuple[str, str, str, str, str], PodEvent] = {}
    lines: list[str] = []
    for part in (rotated(path), path):
        with (
            contextlib.suppress(OSError),
            part.open(encoding="utf-8", errors="replace") as f,
        ):
            lines += list(f)
    for line in lines:
        try:
            data = json.loads(line)
            if isinstance(data, dict) and FORGET in data:
                gone = str(data[FORGET])
                for key in [k for k in latest if k[0] == gone]:
                    del latest[key]
                continue
            event = PodEvent.from_json(data)
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        if event.first_timestamp.tzinfo is None or event.last_timestamp.tzinfo is None:
            continue
        if uid is None or event.uid == uid:
            latest.pop(event.key, None)
            latest[event.key] = event
    found = list(latest.values())
    if now is not None and ttl is not None:
        found = [e for e in found if e.last_timestamp >= now - ttl]
    return sorted(found, key=lambda e: e.last_timestamp)


def read_pod_events(path: Path, pod: Pod, *, now: datetime) -> list[PodEvent]:
    """The events of ``pod`` in a recorder's file (:func:`read_events`) that are its own
    (:func:`since_creation`: from its ``creationTimestamp``, or its start time when it has
    none) and within :data:`EVENT_TTL` of ``now``."""
    meta, status = pod.metadata, pod.status
    created = meta.creationTimestamp if meta is not None else None
    if created is None and status is not None:
        created = status.startTime
    if isinstance(created, str):
        try:
            created = datetime.fromisoformat(created.replace("Z", "+00:00"))
        except ValueError:
            created = None
    events = read_events(path, uid=ctr.pod_identity(pod)[2], now=now)
    return since_creation(events, created)


def since_creation(events: Iterable[PodEvent], created: datetime | None) -> list[PodEvent]:
    """The events of an object created at ``created`` that are its own: those that last
    happened before it was created (the events of an earlier object with its name and
    uid) are left out. ``creationTimestamp`` has whole seconds, so an event of the second
    the object was created in is kept. Without ``created``, every event is."""
    if created is None:
        return list(events)
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    created = created.replace(microsecond=0)
    return [e for e in events if e.last_timestamp >= created]


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
