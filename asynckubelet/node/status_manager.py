"""The status manager: the latest ``PodStatus`` of every pod, versioned, with watchers.

Pod workers produce statuses; readers (the library's ``get``/``wait``/``watch``, the HTTP
``/pods`` endpoint, ``asynckubelet get`` in another process) consume them. A version
number that grows on every change lets a watcher know it missed nothing. With a state
dir, every change is also written (atomically) as the full v1 Pod with its status to
``<state>/pods/<uid>.json``, so that commands run in another process see what the daemon
sees, waiting reasons such as ``CrashLoopBackOff`` included. A status holds the pod's
spec, environment values included, so the directory is 0700 and the files 0600, and they
are written and removed only through :mod:`asynckubelet.hostfs` (a pod UID is one file
name, never a path).

A status equal to the last one is no change: no new version, no watcher told, no file
written. A record is serialized once: the status file and every ``/pods`` answer reuse
that text, so a pod that does not change is never serialized again. While
:meth:`StatusManager.run` runs (the node runs it), files are written by that task in a
worker thread, the latest record of each pod that changed since the last round: a burst of
changes neither blocks the event loop on the disk nor writes a file per intermediate
status. Without it, each change is written at once.
"""

from __future__ import annotations

import builtins
import copy
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import cast

import anyio
import anyio.abc
from lightkube.models.core_v1 import Pod, PodStatus

from asynckubelet import _trace, hostfs
from asynckubelet._logging import logger
from asynckubelet.node.writer import BatchWriter
from asynckubelet.runtime import containers as ctr

PODS_DIR = "pods"
STATUS_DIR_MODE = 0o700
STATUS_FILE_MODE = 0o600


def _file_name(uid: str) -> str:
    return f"{hostfs.single_name(uid, what='pod UID')}.json"


@dataclass(frozen=True)
class PodRecord:
    """A pod as the node last saw it: its spec and metadata, its status, and a version."""

    pod: Pod
    status: PodStatus
    version: int

    @property
    def uid(self) -> str:
        return ctr.pod_identity(self.pod)[2]

    def api_object(self) -> Pod:
        """The full v1 Pod: the desired pod with ``status`` set (a copy)."""
        pod = copy.deepcopy(self.pod)
        pod.status = copy.deepcopy(self.status)
        if pod.apiVersion is None:
            pod.apiVersion = "v1"
        if pod.kind is None:
            pod.kind = "Pod"
        return pod

    @property
    def view(self) -> Pod:
        """The full v1 Pod sharing its parts with this record, for a reader that neither
        changes nor keeps it (one that does takes :meth:`api_object`, a deep copy): made
        in a few microseconds and held by no one, so the node keeps one copy of each pod."""
        pod = copy.copy(self.pod)
        pod.status = self.status
        if pod.apiVersion is None:
            pod.apiVersion = "v1"
        if pod.kind is None:
            pod.kind = "Pod"
        return pod

    @functools.cached_property
    def json_text(self) -> str:
        """The full v1 Pod as JSON text, made once per record."""
        return json.dumps(self.view.to_dict(), separators=(",", ":"))


Watcher = Callable[[PodRecord | None, str], None]
"""Called with the new record (or None when the pod is gone) and the pod's uid."""


class StatusManager:
    """Holds one :class:`PodRecord` per pod uid."""

    def __init__(self, *, state_dir: Path | None = None) -> None:
        self._records: dict[str, PodRecord] = {}
        self._version = 0
        self._watchers: list[Watcher] = []
        self._changed = anyio.Event()
        self._dir = state_dir / PODS_DIR if state_dir is not None else None
        self._writer = BatchWriter[tuple[str, PodRecord | None]](self._write_batch)
        """``(uid, the record to write)``; None: the file to remove."""
        self.writes = 0
        """Status files written (or removed) so far."""

    @property
    def version(self) -> int:
        return self._version

    def get(self, uid: str) -> PodRecord | None:
        return self._records.get(uid)

    def find(self, namespace: str, name: str) -> PodRecord | None:
        for record in self._records.values():
            pname, pns, _ = ctr.pod_identity(record.pod)
            if (pns, pname) == (namespace, name):
                return record
        return None

    def list(self) -> list[PodRecord]:
        return sorted(self._records.values(), key=lambda r: ctr.pod_identity(r.pod)[1::-1])

    def running_pods(self) -> int:
        """Pods with a running sandbox: Running, or any container running
        (``kubelet_running_pods``)."""
        count = 0
        for record in self.list():
            if record.status.phase == "Running" or any(
                (c.state is not None and c.state.running is not None)
                for c in record.status.containerStatuses or []
            ):
                count += 1
        return count

    def container_states(self) -> dict[str, int]:
        """The pods' containers by state (``kubelet_running_containers``)."""
        counts = {"running": 0, "exited": 0, "created": 0, "unknown": 0}
        for record in self.list():
            for c in [
                *(record.status.initContainerStatuses or []),
                *(record.status.containerStatuses or []),
            ]:
                if c.state is None:
                    continue
                if c.state.running is not None:
                    counts["running"] += 1
                elif c.state.terminated is not None:
                    counts["exited"] += 1
                else:
                    counts["created" if c.containerID else "unknown"] += 1
        return counts

    def set(self, pod: Pod, status: PodStatus) -> PodRecord:
        """Record ``status`` as the pod's latest; a change bumps the version and notifies."""
        uid = ctr.pod_identity(pod)[2]
        old = self._records.get(uid)
        if old is not None and old.status == status and old.pod == pod:
            return old
        self._version += 1
        record = PodRecord(pod=pod, status=status, version=self._version)
        self._records[uid] = record
        self._store(uid, record)
        self._notify(record, uid)
        return record

    def show_deleted(self, pod: Pod, grace: float | None, *, at: datetime | None = None) -> None:
        """A recorded pod's status shows its deletion: since when (``at``, unless shown
        already) and the grace period in force."""
        pod = copy.deepcopy(pod)
        if pod.metadata is not None:
            pod.metadata.deletionTimestamp = at or pod.metadata.deletionTimestamp
            pod.metadata.deletionGracePeriodSeconds = int(grace) if grace is not None else None
        if (record := self._records.get(ctr.pod_identity(pod)[2])) is not None:
            self.set(pod, record.status)

    def remove(self, uid: str) -> None:
        if self._records.pop(uid, None) is None:
            return
        self._version += 1
        self._store(uid, None)
        self._notify(None, uid)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Write the status files of changed pods in a worker thread until cancelled; what
        is left is written before this returns."""
        await self._writer.run(task_status=task_status)

    def _store(self, uid: str, record: PodRecord | None) -> None:
        if self._dir is None:
            return
        self._writer.add((uid, record))

    def _write_batch(self, batch: builtins.list[tuple[str, PodRecord | None]]) -> None:
        """Each pod's last record of ``batch`` written (or its file removed), once."""
        for uid, record in dict(batch).items():
            if record is None:
                self._remove_file(uid)
            else:
                self._write(record)

    def prune(self) -> builtins.list[str]:
        """Remove status files of pods this manager does not hold (left by a killed daemon)."""
        if self._dir is None or not self._dir.is_dir():
            return []
        stale = [p for p in self._dir.glob("*.json") if p.stem not in self._records]
        for path in stale:
            hostfs.remove_file(self._dir, path.name)
        return [p.stem for p in stale]

    def subscribe(self, watcher: Watcher) -> Callable[[], None]:
        self._watchers.append(watcher)
        return lambda: self._watchers.remove(watcher) if watcher in self._watchers else None

    @property
    def watcher_count(self) -> int:
        """How many watchers are subscribed now."""
        return len(self._watchers)

    async def changed(self) -> None:
        """Wait until the next change of any pod."""
        await self._changed.wait()

    def _notify(self, record: PodRecord | None, uid: str) -> None:
        self._changed.set()
        self._changed = anyio.Event()
        for watcher in list(self._watchers):
            watcher(record, uid)

    def _remove_file(self, uid: str) -> None:
        if self._dir is None:
            return
        self.writes += 1
        try:
            hostfs.remove_file(self._dir, _file_name(uid))
        except OSError as e:
            logger.warning("cannot remove the status of pod {}: {}", uid, e)

    def _write(self, record: PodRecord) -> None:
        if self._dir is None:
            return
        self.writes += 1
        try:
            if not self._dir.is_dir():
                hostfs.make_dirs(self._dir, ".", mode=STATUS_DIR_MODE)
            hostfs.write_file(
                self._dir, _file_name(record.uid), record.json_text.encode(), mode=STATUS_FILE_MODE
            )
            if _trace.enabled() and record.status.phase == "Running":
                _trace.mark("written", record.uid)
        except OSError as e:
            logger.warning("cannot write the status of pod {}: {}", record.uid, e)


def read_status_files(state_dir: Path) -> dict[str, Pod]:
    """uid -> the v1 Pod (with status) that a daemon last wrote for it."""
    found: dict[str, Pod] = {}
    directory = state_dir / PODS_DIR
    if not directory.is_dir():
        return found
    for path in directory.glob("*.json"):
        try:
            pod = cast(Pod, Pod.from_dict(json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError, TypeError, KeyError) as e:
            logger.debug("skipping unreadable status file {}: {}", path, e)
            continue
        found[path.stem] = pod
    return found
