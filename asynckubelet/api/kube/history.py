"""The pods' recent changes, each with its resourceVersion: what a watch resumes from.

kubectl lists, then watches from the list's ``resourceVersion``; a change that happens
between the two must still reach it, and one it was already shown must not come twice.
Every change of any pod takes the next number of the API's one resourceVersion
sequence (:class:`Versions`, shared with the other kinds' histories,
:mod:`~asynckubelet.api.kube.watchcache`), and this window keeps the last
:data:`WINDOW` changes with their versions, as the API server's watch cache does. A
watch from a version inside the window gets the changes after it and then every new
one; from a version older than the window it gets the API server's ``410 Expired``
(list again); with no version (or ``0``) it starts with an ``ADDED`` for each pod there
now.

A watcher that falls :data:`BUFFER` changes behind is ended, never slowed down: the
status manager tells watchers synchronously and must not wait for any of them.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from asynckubelet.node.status_manager import PodRecord, StatusManager

WINDOW = 250
"""Changes kept for watches that resume (upstream's default watch cache holds 100 per
resource)."""
BUFFER = 1000
"""Changes a watcher may be behind before it is ended."""


class Versions:
    """The API's one resourceVersion sequence: every change of any kind served takes the
    next number, so a client compares versions across kinds as upstream's."""

    def __init__(self, start: int = 0) -> None:
        self.value = start

    def next(self) -> int:
        self.value += 1
        return self.value


@dataclass(frozen=True)
class Change:
    """One change of a pod: its type (``ADDED``, ``MODIFIED``, ``DELETED``), the pod's
    record as it was then (the last one for ``DELETED``), the resourceVersion, and the
    record before it (None for ``ADDED``), which a selective watch needs to tell an
    object leaving its selector."""

    type: str
    record: PodRecord
    version: int
    previous: PodRecord | None = None


class Expired(Exception):
    """The version asked for is older than the window (the API server's 410 Gone)."""


class Watch:
    """One watcher's changes (:class:`Change` of pods, or another kind's,
    :class:`~asynckubelet.api.kube.watchcache.ObjectChange`): :attr:`initial` first,
    then those :attr:`changes` receives; :attr:`fell_behind` says why the changes ended."""

    def __init__(self, initial: list[Any], changes: MemoryObjectReceiveStream[Any]) -> None:
        self.initial = initial
        self.changes = changes
        self.fell_behind = False


class PodHistory:
    """The window of changes of ``status``'s pods; subscribed until :meth:`close`."""

    def __init__(
        self, status: StatusManager, *, window: int = WINDOW, versions: Versions | None = None
    ) -> None:
        self._status = status
        self._versions = versions if versions is not None else Versions(status.version)
        self._changes: deque[Change] = deque(maxlen=window)
        self._known = {record.uid: record for record in status.list()}
        self._rv = {record.uid: record.version for record in status.list()}
        self._floor = self._versions.value
        """The newest version not in the window: a watch from it or later misses nothing."""
        self._watches: dict[MemoryObjectSendStream[Change], Watch] = {}
        self._unsubscribe = status.subscribe(self._offer)

    @property
    def version(self) -> int:
        """The current resourceVersion (of a list made now)."""
        return self._versions.value

    def version_of(self, uid: str, default: int = 0) -> int:
        """The resourceVersion of the pod ``uid``'s last change."""
        return self._rv.get(uid, default)

    @property
    def floor(self) -> int:
        """The newest version no longer in the window."""
        return self._floor

    def close(self) -> None:
        self._unsubscribe()
        for send in list(self._watches):
            send.close()
        self._watches.clear()

    def _offer(self, record: PodRecord | None, uid: str) -> None:
        if record is None:
            old = self._known.pop(uid, None)
            if old is None:
                return
            self._rv.pop(uid, None)
            change = Change("DELETED", old, self._versions.next(), old)
        else:
            previous = self._known.get(uid)
            version = self._versions.next()
            kind = "MODIFIED" if previous is not None else "ADDED"
            change = Change(kind, record, version, previous)
            self._known[uid] = record
            self._rv[uid] = version
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
        with open_watch(
            resource_version,
            current=lambda: [
                Change("ADDED", r, self.version_of(r.uid)) for r in self._status.list()
            ],
            changes=self._changes,
            floor=self._floor,
            watches=self._watches,
            buffer=buffer,
        ) as watch:
            yield watch


@contextlib.contextmanager
def open_watch(
    resource_version: str,
    *,
    current: Callable[[], list[Any]],
    changes: Iterable[Any],
    floor: int,
    watches: dict[MemoryObjectSendStream[Any], Watch],
    buffer: int,
) -> Iterator[Watch]:
    """A watch of one window of changes: from ``resource_version`` the ``changes`` after
    it (``""``/``"0"``: ``current``, the objects there now), then each new one sent to
    the stream it registers in ``watches``, until the block is left. Raises
    :class:`Expired` for a version older than ``floor``, ValueError for one that is not a
    version."""
    if resource_version in ("", "0"):
        initial = current()
    else:
        if not resource_version.isdigit():
            raise ValueError(resource_version)
        since = int(resource_version)
        if since < floor:
            raise Expired(f"too old resource version: {since} ({floor + 1})")
        initial = [c for c in changes if c.version > since]
    send, receive = anyio.create_memory_object_stream[Any](buffer)
    watch = Watch(initial, receive)
    watches[send] = watch
    try:
        with receive:
            yield watch
    finally:
        if watches.pop(send, None) is not None:
            send.close()


__all__ = [
    "BUFFER",
    "WINDOW",
    "Change",
    "Expired",
    "PodHistory",
    "Versions",
    "Watch",
    "open_watch",
]
