"""The status reporter: the node's pod statuses, patched into the API server.

The node's status manager tells of every change; the reporter keeps, per pod, what the
node wants the API server to show and what the API server shows
(:class:`~asynckubelet.cluster.podstatus.PodStatusState`). As the kubelet's status
manager, it holds one pending status per pod, the latest: changes that come while the
pod's patch waits or is on its way are sent together in the next one. One loop sends the
patches that are needed as soon as a change comes, in order of change, at most
``writers`` at once and never two of one pod at once (a burst of pods turning Ready is
not written one round trip after another); each is retried a few times when the server
does not answer and then again at the next round (every ``resync`` seconds, as the
kubelet's status manager syncs all pods every 10 s). A pod the API server no longer has
(404) or that is a newer pod of the same name (the UID precondition fails, 409) is
dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
from lightkube.models.core_v1 import Pod, PodStatus

from asynckubelet import _trace, errors
from asynckubelet._logging import logger
from asynckubelet.cluster.api import ClusterAPI
from asynckubelet.cluster.podstatus import PodStatusState, owned
from asynckubelet.cluster.retry import call
from asynckubelet.node.status_manager import PodRecord, StatusManager

RESYNC = 10.0
WRITERS = 5
"""Status patches in flight at once (each of its own pod)."""


class PodStatusReporter:
    """Patches the status of tracked pods (keyed by the node's pod UID)."""

    def __init__(
        self,
        api: ClusterAPI,
        *,
        resync: float = RESYNC,
        writers: int = WRITERS,
        on_patched: Callable[[str, PodStatus], None] | None = None,
    ) -> None:
        self.api = api
        self.resync = resync
        self.on_patched = on_patched
        self.states: dict[str, PodStatusState] = {}
        self._dirty: dict[str, None] = {}
        self._wake = anyio.Event()
        self._slots = anyio.Semaphore(writers)
        self._sending: set[str] = set()
        self._stalled = False
        self.patches = 0

    def attach(self, status: StatusManager) -> Callable[[], None]:
        """Follow the node's status manager; returns the function that stops it."""

        def changed(record: PodRecord | None, uid: str) -> None:
            if record is not None and uid in self.states:
                self.want(uid, record.status)

        for record in status.list():
            changed(record, record.uid)
        return status.subscribe(changed)

    def track(self, uid: str, pod: Pod, *, api_uid: str | None = None) -> None:
        """Report the status of the node's pod ``uid`` on the API pod ``pod`` (its mirror,
        for a static pod: then ``api_uid`` is the mirror's UID)."""
        meta = pod.metadata
        assert meta is not None  # noqa: S101  (type narrowing: an API object has metadata)
        state = self.states.get(uid)
        if state is None:
            state = PodStatusState(
                namespace=meta.namespace or "default",
                name=meta.name or "",
                uid=api_uid or meta.uid or uid,
            )
            self.states[uid] = state
            state.observe_api(pod.status)
        elif api_uid is not None and state.uid != api_uid:
            state.uid, state.name = api_uid, meta.name or state.name
            state.sent = state.left = None
            state.observe_api(pod.status)

    def observe(self, uid: str, pod: Pod) -> None:
        """The API server's copy of a tracked pod, from the watch."""
        state = self.states.get(uid)
        if state is None:
            return
        state.observe_api(pod.status)
        if state.patch_needed():
            self._mark(uid)

    def want(self, uid: str, status: PodStatus) -> None:
        state = self.states.get(uid)
        if state is None:
            return
        state.wanted = owned(status)
        if state.patch_needed():
            self._mark(uid)

    def forget(self, uid: str) -> None:
        self.states.pop(uid, None)
        self._dirty.pop(uid, None)

    def _mark(self, uid: str) -> None:
        self._dirty[uid] = None
        self._wake.set()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        async with anyio.create_task_group() as tg:
            task_status.started()
            while True:
                with anyio.move_on_after(self.resync):
                    await self._wake.wait()
                self._wake = anyio.Event()
                for uid, state in self.states.items():
                    idle = uid not in self._dirty and uid not in self._sending
                    if idle and state.patch_needed():
                        self._dirty[uid] = None
                self._stalled = False
                for uid in list(self._dirty):
                    if self._stalled:
                        break
                    if uid in self._sending:
                        continue
                    await self._slots.acquire()
                    if uid not in self._dirty or uid in self._sending:
                        self._slots.release()
                        continue
                    del self._dirty[uid]
                    self._sending.add(uid)
                    tg.start_soon(self._send, uid)

    async def _send(self, uid: str) -> None:
        try:
            if not await self.flush(uid):
                self._stalled = True
                return
        finally:
            self._sending.discard(uid)
            self._slots.release()
        if uid in self._dirty:
            self._wake.set()

    async def flush(self, uid: str) -> bool:
        """Send the pod's status now if it needs to be; False when the server did not
        answer (the pod stays due, for the next round)."""
        state = self.states.get(uid)
        if state is None or not state.patch_needed():
            return True
        patch = state.patch()
        wanted = state.wanted
        try:
            answer = await call(
                lambda: self.api.patch_pod_status(state.namespace, state.name, patch)
            )
        except errors.ClusterAPIError as e:
            if e.not_found or e.conflict:
                logger.debug("status of pod {}/{} not sent: {}", state.namespace, state.name, e)
                if self.states.get(uid) is state:
                    state.sent, state.left = wanted, state.api
                return True
            logger.warning("status of pod {}/{} not sent: {}", state.namespace, state.name, e)
            if self.states.get(uid) is state:
                state.sent, state.left = wanted, state.api
            return True
        except errors.ClusterError as e:
            logger.debug("status of pod {}/{} not sent yet: {}", state.namespace, state.name, e)
            self._dirty[uid] = None
            return False
        self.patches += 1
        if _trace.enabled() and _ready(wanted):
            _trace.mark("ready reported", uid)
        if self.states.get(uid) is state:
            state.patched(answer.status, sent=wanted)
            if state.patch_needed():
                self._mark(uid)
        if self.on_patched is not None and answer.status is not None:
            self.on_patched(uid, answer.status)
        return True


def _ready(status: dict[str, Any] | None) -> bool:
    conditions = (status or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


__all__ = ["RESYNC", "WRITERS", "PodStatusReporter"]
