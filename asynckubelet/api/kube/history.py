"""The pods' recent changes, each with its resourceVersion: what a watch resumes from.

kubectl lists, then watches from the list's ``resourceVersion``; a change that happens
between the two must still reach it, and one it was already shown must not come twice.
The status manager counts every change of any pod (:attr:`~asynckubelet.node.
status_manager.StatusManager.version`); that count is the pods' resourceVersion here,
and this window keeps the last :data:`WINDOW` changes with their counts, as the API
server's watch cache does. A watch from a version inside the window gets the changes
after it and then every new one; from a version older than the window it gets the API
server's ``410 Expired`` (list again); with no version (or ``0``) it starts with an
``ADDED`` for each pod there now.

A watcher that falls :data:`BUFFER` changes behind is ended, never slowed down: the
status manager tells watchers synchronously and must not wait for any of them.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from asynckubelet.node.status_manager import PodRecord, StatusManager

WINDOW = 250
"""Changes kept for watches that resume (upstream's default watch cache holds 100 per
resource)."""
BUFFER = 1000
"""Changes a watcher may be behind before it is ended."""


@dataclass(frozen=True)
class Change:
    """One change of a pod: its type (``ADDED``, ``MODIFIED``, ``DELETED``), the pod's
    record as it was then (the last one for ``DELETED``) and the resourceVersion."""

    type: str
    record: PodRecord
    version: int


class Expired(Exception):
    """The version asked for is older than the window (the API server's 410 Gone)."""


class Watch:
    """One watcher's changes: :attr:`initial` first, then those :attr:`changes` receives;
    :attr:`fell_behind` says why the changes ended."""

    def __init__(self, initial: list[Change], changes: MemoryObjectReceiveStream[Change]) -> None:
        self.initial = initial
        self.changes = changes
        self.fell_behind = False


class PodHistory:
    """The window of changes of ``status``'s pods; subscribed until :meth:`close`."""

    def __init__(self, status: StatusManager, *, window: int = WINDOW) -> None:
        self._status = status
        self._changes: deque[Change] = deque(maxlen=window)
        self._known = {record.uid: record for record in status.list()}
        self._floor = status.version
        """The newest version not in the window: a watch from it or later misses nothing."""
        self._watches: dict[MemoryObjectSendStream[Change], Watch] = {}
        self._unsubscribe = status.subscribe(self._offer)

    @property
    def version(self) -> int:
        """The current resourceVersion (of a list made now)."""
        return self._status.version

    def close(self) -> None:
        self._unsubscribe()
        for send in list(self._watches):
            send.close()
        self._watches.clear()

    def _offer(self, record: PodRecord | None, uid: str) -> None:
        version = self._status.version
        if record is None:
            old = self._known.pop(uid, None)
            if old is None:
                return
            change = Change("DELETED", old, version)
        else:
            change = Change("MODIFIED" if uid in self._known else "ADDED", record, version)
            self._known[uid] = record
        if len(self._changes) == self._changes.maxlen:
            self._floor = self._changes[0].version
        self._changes.append(change)
        for send, watch in list(self._watches.items()):
            try:
                send.send_nowait(change)
            except anyio.WouldBlock:
                watch.fell_behind = True
                del self._watches[send]
                send.close()

    @contextlib.contextmanager
    def watch(self, resource_version: str, *, buffer: int = BUFFER) -> Iterator[Watch]:
        """The changes after ``resource_version`` (``""``/``"0"``: an ``ADDED`` for each
        pod there now), then each new one, until the block is left. Raises
        :class:`Expired` for a version older than the window, ValueError for one that is
        not a version."""
        if resource_version in ("", "0"):
            initial = [Change("ADDED", r, r.version) for r in self._status.list()]
        else:
            if not resource_version.isdigit():
                raise ValueError(resource_version)
            since = int(resource_version)
            if since < self._floor:
                raise Expired(f"too old resource version: {since} ({self._floor + 1})")
            initial = [c for c in self._changes if c.version > since]
        send, receive = anyio.create_memory_object_stream[Change](buffer)
        watch = Watch(initial, receive)
        self._watches[send] = watch
        try:
            with receive:
                yield watch
        finally:
            if self._watches.pop(send, None) is not None:
                send.close()


__all__ = ["BUFFER", "WINDOW", "Change", "Expired", "PodHistory", "Watch"]
