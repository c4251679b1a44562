"""Events to the API server: the node's pod events as ``kubectl describe`` shows them.

The node's :class:`~asynckubelet.node.events.EventRecorder` already names events as the
kubelet does (``Pulling``, ``Pulled``, ``Created``, ``Started``, ``Killing``, ``BackOff``,
``Unhealthy``, ``FailedMount``...) and counts repeats. This posts them as core/v1 Events
about the API pod (``involvedObject`` with its UID and the container's ``fieldPath``),
with the kubelet's source (``component: kubelet``, ``host: <node>``); a repeat of an
event already posted is a patch of its ``count`` and ``lastTimestamp``, as client-go's
event correlator does. As there, each object gets a token bucket (25 events, then one per
5 minutes: ``EventSourceObjectSpamFilter``), and the queue is bounded: an event over
either limit is dropped with a debug line, never blocking the node. Events about the
Node itself (``Starting``, ``NodeReady``, ``NodeNotReady``) refer to it as the kubelet's
``nodeRef`` does (UID = node name), in the ``default`` namespace.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio
import anyio.abc
from lightkube.models.core_v1 import Event, EventSource, ObjectReference
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.cluster.api import ClusterAPI
from asynckubelet.node.events import EventRecorder, PodEvent

BURST = 25
REFILL_SECONDS = 300.0
QUEUE_SIZE = 1000
MAX_POSTED = 4096
"""Event names remembered for repeats (the correlator's LRU cache holds 4096)."""
MAX_BUCKETS = 4096
"""Objects whose rate limit is remembered (the spam filter's LRU cache holds 4096); the
least recently made is forgotten first."""


@dataclass(frozen=True)
class Involved:
    """The API object an event is about."""

    kind: str
    namespace: str
    name: str
    uid: str
    field_path: str = ""


class TokenBucket:
    """``burst`` tokens, refilled one per ``refill`` seconds; ``clock`` injected."""

    def __init__(
        self, *, burst: int = BURST, refill: float = REFILL_SECONDS, clock: Callable[[], float]
    ) -> None:
        self.burst = burst
        self.refill = refill
        self.clock = clock
        self._tokens = float(burst)
        self._at = clock()

    def take(self) -> bool:
        now = self.clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) / self.refill)
        self._at = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False


@dataclass(frozen=True)
class _Pending:
    involved: Involved
    key: tuple[str, ...]
    type: str
    reason: str
    message: str
    count: int
    first: datetime
    last: datetime


class EventReporter:
    """Posts events; ``resolve`` maps the node's pod UID to the API pod (None: not one
    the API server knows, so the event stays local)."""

    def __init__(
        self,
        api: ClusterAPI,
        *,
        node_name: str,
        resolve: Callable[[str], Involved | None],
        clock: Callable[[], float] = time.monotonic,
        burst: int = BURST,
        refill: float = REFILL_SECONDS,
        queue_size: int = QUEUE_SIZE,
    ) -> None:
        self.api = api
        self.node_name = node_name
        self.resolve = resolve
        self.clock = clock
        self.burst = burst
        self.refill = refill
        self._buckets: dict[tuple[str, str], TokenBucket] = {}
        self._posted: OrderedDict[tuple[str, ...], str] = OrderedDict()
        self._send, self._receive = anyio.create_memory_object_stream[_Pending](queue_size)
        self.dropped = 0
        self.posted = 0

    def attach(self, recorder: EventRecorder) -> Callable[[], None]:
        return recorder.subscribe(self.offer)

    def offer(self, event: PodEvent) -> None:
        """A node event about a pod (the recorder's subscriber)."""
        involved = self.resolve(event.uid)
        if involved is None:
            return
        if event.container:
            involved = Involved(
                kind=involved.kind,
                namespace=involved.namespace,
                name=involved.name,
                uid=involved.uid,
                field_path=event.field_path,
            )
        self._queue(
            involved,
            key=event.key,
            type=event.type,
            reason=event.reason,
            message=event.message,
            count=event.count,
            first=event.first_timestamp,
            last=event.last_timestamp,
        )

    def node_event(self, *, type: str, reason: str, message: str) -> None:
        """An event about the Node."""
        now = datetime.now(UTC)
        involved = Involved(kind="Node", namespace="", name=self.node_name, uid=self.node_name)
        self._queue(
            involved,
            key=("node", type, reason, message, str(now.timestamp())),
            type=type,
            reason=reason,
            message=message,
            count=1,
            first=now,
            last=now,
        )

    def _queue(self, involved: Involved, *, key: tuple[str, ...], **fields: object) -> None:
        bucket_key = (involved.kind, involved.uid)
        bucket = self._buckets.get(bucket_key)
        if bucket is None:
            bucket = TokenBucket(burst=self.burst, refill=self.refill, clock=self.clock)
            self._buckets[bucket_key] = bucket
            while len(self._buckets) > MAX_BUCKETS:
                del self._buckets[next(iter(self._buckets))]
        if not bucket.take():
            self.dropped += 1
            logger.debug("event {} about {} dropped: rate limit", fields["reason"], involved.name)
            return
        try:
            self._send.send_nowait(_Pending(involved=involved, key=key, **fields))  # type: ignore[arg-type]
        except anyio.WouldBlock:
            self.dropped += 1
            logger.debug("event {} about {} dropped: queue full", fields["reason"], involved.name)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        async with self._send, self._receive:
            async for pending in self._receive:
                try:
                    await self._post(pending)
                except errors.ClusterError as e:
                    logger.debug("event {} not posted: {}", pending.reason, e)

    async def _post(self, pending: _Pending) -> None:
        involved = pending.involved
        namespace = involved.namespace or "default"
        name = self._posted.get(pending.key)
        if name is not None and pending.count > 1:
            try:
                await self.api.patch_event(
                    namespace,
                    name,
                    {
                        "count": pending.count,
                        "lastTimestamp": _stamp(pending.last),
                        "message": pending.message,
                    },
                )
                self.posted += 1
                self._posted.move_to_end(pending.key)
                return
            except errors.ClusterAPIError as e:
                if not e.not_found:
                    raise
        name = f"{involved.name}.{time.time_ns():x}"
        event = Event(
            apiVersion="v1",
            kind="Event",
            metadata=ObjectMeta(name=name, namespace=namespace),
            involvedObject=ObjectReference(
                apiVersion="v1",
                kind=involved.kind,
                namespace=involved.namespace or None,
                name=involved.name,
                uid=involved.uid,
                fieldPath=involved.field_path or None,
            ),
            reason=pending.reason,
            message=pending.message,
            type=pending.type,
            count=pending.count,
            firstTimestamp=pending.first,
            lastTimestamp=pending.last,
            source=EventSource(component="kubelet", host=self.node_name),
            reportingComponent="kubelet",
            reportingInstance=self.node_name,
        )
        await self.api.create_event(event)
        self.posted += 1
        self._posted[pending.key] = name
        while len(self._posted) > MAX_POSTED:
            self._posted.popitem(last=False)


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


__all__ = ["BURST", "REFILL_SECONDS", "EventReporter", "Involved", "TokenBucket"]
