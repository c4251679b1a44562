"""The pods bound to this node, as the API server holds them: a list, then a watch.

client-go's reflector for one field selector (``spec.nodeName=<node>``), as the kubelet's
API pod source uses it: list every pod and remember the list's resource version, watch
from there, and keep the version of each event seen. When the watch ends it is opened again
from that version, so nothing in between is missed; when the server says the version is
too old (410 Gone, after a long outage) the pods are listed again and the new list
replaces the old one, a pod missing from it counting as deleted. An API server that cannot
be reached is tried again with growing, jittered delays, and meanwhile the last known
pods stay as they are: the node keeps running them.

Pods are keyed by UID, so a pod seen again after a reconnect (or a re-list) is the same
pod, never a second one. ``on_change`` hears of every pod that changed, after the first
list (``started``) and after each event. :class:`ServiceReflector` does the same for every
Service of the cluster (the kubelet's Service informer, for pods' Service variables).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anyio
import anyio.abc
from lightkube.models.core_v1 import Pod

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.cluster.api import ClusterAPI, Listed, WatchEvent
from asynckubelet.cluster.retry import Reconnect

PodChange = Callable[[Mapping[str, Pod], set[str]], None]
"""Called with every pod known now (uid -> pod) and the uids that changed (a uid not in
the mapping was deleted)."""
Change = Callable[[Mapping[str, Any], set[str]], None]


def pod_uid(pod: Any) -> str:
    return str((pod.metadata.uid if pod.metadata else None) or "")


def _version(pod: Any) -> str | None:
    return pod.metadata.resourceVersion if pod.metadata is not None else None


class Reflector:
    """Keeps :attr:`items` (by UID) equal to what the API server lists and then watches:
    the list and watch of :meth:`_list` and :meth:`_stream`, named ``what`` in the log."""

    what = "objects"

    def __init__(self, *, on_change: Change, reconnect: Reconnect | None = None) -> None:
        self.on_change = on_change
        self.reconnect = reconnect or Reconnect()
        self.items: dict[str, Any] = {}
        self.resource_version: str | None = None
        self.lists = 0
        """How many times the items were listed (1 + re-lists after a 410 or a failure)."""
        self.connected = False

    async def _list(self) -> Listed:
        raise NotImplementedError

    def _stream(self, resource_version: str) -> AsyncIterator[WatchEvent]:
        raise NotImplementedError

    def replace(self, items: tuple[Any, ...]) -> set[str]:
        """A list's items become :attr:`items`; returns the uids that changed."""
        fresh = {pod_uid(p): p for p in items if pod_uid(p)}
        changed = {uid for uid in self.items if uid not in fresh}
        for uid, pod in fresh.items():
            old = self.items.get(uid)
            if old is None or _version(old) != _version(pod) or old != pod:
                changed.add(uid)
        self.items = fresh
        return changed

    def apply(self, kind: str, pod: Any) -> set[str]:
        """One watch event; returns the uids that changed."""
        uid = pod_uid(pod)
        if not uid:
            return set()
        if kind == "DELETED":
            if self.items.pop(uid, None) is None:
                return set()
            return {uid}
        if kind in ("ADDED", "MODIFIED"):
            old = self.items.get(uid)
            if old is not None and _version(old) == _version(pod):
                return set()
            self.items[uid] = pod
            return {uid}
        return set()

    async def list_once(self) -> None:
        listed = await self._list()
        self.lists += 1
        changed = self.replace(listed.items)
        self.resource_version = listed.resource_version
        self.on_change(self.items, changed)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """List, then watch forever; reports started after the first list."""
        started = False
        while True:
            try:
                if self.resource_version is None:
                    await self.list_once()
                    if not started:
                        started = True
                        task_status.started()
                await self._watch()
                self.reconnect.succeeded()
            except errors.ClusterAPIError as e:
                self.connected = False
                if e.gone:
                    logger.info("{} watch: {}; listing them again", self.what, e)
                    self.resource_version = None
                    continue
                await self._failed(e)
            except errors.ClusterError as e:
                self.connected = False
                await self._failed(e)

    async def _watch(self) -> None:
        assert self.resource_version is not None  # noqa: S101  (type narrowing: the list before the watch sets it)
        stream = self._stream(self.resource_version)
        async for kind, pod in stream:
            if not self.connected:
                self.connected = True
                if self.reconnect.failures:
                    logger.info("{} watch resumed", self.what)
                self.reconnect.succeeded()
            version = _version(pod)
            changed = self.apply(kind, pod)
            if version:
                self.resource_version = version
            if changed:
                self.on_change(self.items, changed)

    async def _failed(self, error: errors.ClusterError) -> None:
        log = logger.warning if self.reconnect.failures == 0 else logger.debug
        log("{} watch lost ({}); reconnecting", self.what, error)
        delay = await self.reconnect.failed()
        logger.debug("{} watch: reconnecting after {:.1f} s", self.what, delay)


class PodReflector(Reflector):
    """Keeps :attr:`pods` equal to the API server's pods bound to ``node_name``."""

    def __init__(
        self,
        api: ClusterAPI,
        *,
        node_name: str,
        on_change: PodChange,
        reconnect: Reconnect | None = None,
    ) -> None:
        super().__init__(on_change=on_change, reconnect=reconnect)
        self.api = api
        self.node_name = node_name
        self.what = f"pods of node {node_name}"

    @property
    def pods(self) -> dict[str, Pod]:
        return self.items

    async def _list(self) -> Listed:
        return await self.api.list_pods(node=self.node_name)

    def _stream(self, resource_version: str) -> AsyncIterator[WatchEvent]:
        return self.api.watch_pods(node=self.node_name, resource_version=resource_version)


class ServiceReflector(Reflector):
    """Keeps :attr:`items` equal to the cluster's Services, and their bodies (as pods'
    Service variables read them) at hand in :meth:`bodies`."""

    what = "services"

    def __init__(self, api: ClusterAPI, *, reconnect: Reconnect | None = None) -> None:
        super().__init__(on_change=self._changed, reconnect=reconnect)
        self.api = api
        self._bodies: dict[str, dict[str, Any]] = {}

    def _changed(self, items: Mapping[str, Any], changed: set[str]) -> None:
        for uid in changed:
            if uid in items:
                self._bodies[uid] = items[uid].to_dict()
            else:
                self._bodies.pop(uid, None)

    def bodies(self) -> list[dict[str, Any]]:
        """Every Service as the API server has it; a ``CreateContainerConfigError`` until
        they were listed once, as the kubelet refuses to guess a pod's environment."""
        if not self.lists:
            raise errors.ContainerConfigError(
                "services have not yet been read at least once, cannot construct envvars"
            )
        return list(self._bodies.values())

    async def _list(self) -> Listed:
        return await self.api.list_services()

    def _stream(self, resource_version: str) -> AsyncIterator[WatchEvent]:
        return self.api.watch_services(resource_version=resource_version)


__all__ = ["PodChange", "PodReflector", "Reflector", "ServiceReflector", "pod_uid"]
