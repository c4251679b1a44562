"""The pod lifecycle event generator: which pod changed on Docker, told at once.

The kubelet's generic PLEG relists the runtime every second and compares; its evented
PLEG takes the runtime's event stream instead and relists only as a safety net, every 300
seconds. Docker pushes events, so here, as in the evented PLEG, the event stream wakes the
right pod worker as soon as one of its containers starts, dies, is OOM-killed or removed,
and a relist catches what the stream missed: once at start, after every reconnect of the
stream (events lost while dockerd restarted), and every ``RELIST_PERIOD`` seconds. A node
whose pods change nothing thus makes no Docker call. The stream reconnects with
exponential backoff; neither an engine restart nor a lost connection stops the node.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
import anyio.abc

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.docker import DockerAPI
from asynckubelet.runtime import naming

WAKING_ACTIONS = frozenset({"create", "start", "die", "oom", "destroy", "kill", "stop"})
OUTDATING_ACTIONS = frozenset({"die", "oom", "kill", "stop"})
"""Events after which Docker's container list may still show the container's earlier state
(it emits ``die`` before the list shows the exit): the runtime's cached inspect of it is
dropped. After the others the list itself shows the change (a new container, a new state,
no row), which is enough for the status read to inspect it again."""
RELIST_PERIOD = 300.0
DIE_REWAKES = (0.5, 2.0)
"""Seconds after a ``die`` event at which its pod is woken again: Docker emits ``die``
before its container list and inspect show the exit, so a worker woken at once may still
read the container as running, and no later event would wake it."""
"""Seconds between safety-net relists (the evented PLEG's ``globalRelistPeriod``)."""


class PLEG:
    """Calls ``wake(uid)`` for every pod whose containers changed on Docker."""

    def __init__(
        self,
        docker: DockerAPI,
        *,
        node_name: str,
        wake: Callable[[str], None],
        relist_period: float = RELIST_PERIOD,
        on_relist: Callable[[float], None] | None = None,
        forget: Callable[[str], None] | None = None,
    ) -> None:
        self.docker = docker
        self.node_name = node_name
        self.wake = wake
        self.relist_period = relist_period
        self.on_relist = on_relist
        self.forget = forget
        """Told the id of each container an event is about: Docker emits ``die`` before its
        container list shows the exit, so a cached state of that container is stale."""
        self._seen: dict[str, tuple[str, str]] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self.connected = False
        """The event stream has delivered an event since it was (re)opened."""
        self.reconnects = 0
        """How many times the event stream was lost and opened again."""

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self._watch, name="pleg events")
            tg.start_soon(self._relist_loop, name="pleg relist")
            task_status.started()

    async def _watch(self) -> None:
        filters = {"type": ["container"], "label": [f"{naming.LABEL_NODE}={self.node_name}"]}
        delay = 0.1
        since: float | None = None
        while True:
            try:
                # Reopened, the stream starts from the last event seen: what happened
                # between the relist below and the new connection is replayed.
                async for event in self.docker.events(filters=filters, since=since):
                    self.connected = True
                    delay = 0.1
                    if event.get("timeNano"):
                        since = int(event["timeNano"]) / 1e9
                    action = event.get("Action", "").split(":")[0]
                    if action not in WAKING_ACTIONS:
                        continue
                    actor = event.get("Actor") or {}
                    if self.forget is not None and actor.get("ID") and action in OUTDATING_ACTIONS:
                        self.forget(str(actor["ID"]))
                    uid = (actor.get("Attributes") or {}).get(naming.LABEL_POD_UID)
                    if uid:
                        self.wake(uid)
                        if action == "die" and self._tg is not None:
                            self._tg.start_soon(self._wake_again, uid)
            except errors.DockerError as e:
                logger.debug("docker event stream lost ({}); reconnecting in {:.1f}s", e, delay)
            self.connected = False
            await anyio.sleep(delay)
            delay = min(delay * 2, 5.0)
            self.reconnects += 1
            await self.relist()

    async def _wake_again(self, uid: str) -> None:
        slept = 0.0
        for at in DIE_REWAKES:
            await anyio.sleep(at - slept)
            slept = at
            self.wake(uid)

    async def _relist_loop(self) -> None:
        while True:
            await self.relist()
            await anyio.sleep(self.relist_period)

    async def relist(self) -> None:
        """List this node's containers, and wake each pod whose containers changed."""
        started = time.monotonic()
        try:
            rows = await self.docker.list_containers(labels={naming.LABEL_NODE: self.node_name})
        except errors.DockerError as e:
            logger.warning("relist failed: {}", e)
            return
        now: dict[str, tuple[str, str]] = {}
        for row in rows:
            uid = (row.get("Labels") or {}).get(naming.LABEL_POD_UID, "")
            now[row["Id"]] = (uid, str(row.get("State", "")))
        changed = {uid for cid, (uid, state) in now.items() if self._seen.get(cid) != (uid, state)}
        changed |= {uid for cid, (uid, _) in self._seen.items() if cid not in now}
        self._seen = now
        for uid in changed:
            if uid:
                self.wake(uid)
        if self.on_relist is not None:
            self.on_relist(time.monotonic() - started)
