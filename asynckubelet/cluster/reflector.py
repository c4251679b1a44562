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
list (``started``) and after each event.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio
import anyio.abc
from lightkube.models.core_v1 import Pod
from loguru import logger

from asynckubelet import errors
from asynckubelet.cluster.api import ClusterAPI
from asynckubelet.cluster.retry import Reconnect

PodChange = Callable[[Mapping[str, Pod], set[str]], None]
"""Called with every pod known now (uid -> pod) and the uids that changed (a uid not in
the mapping was deleted)."""


def pod_uid(pod: Any) -> str:
    return str((pod.metadata.uid if pod.metadata else None) or "")


def _version(pod: Any) -> str | None:
    return pod.metadata.resourceVersion if pod.metadata is not None else None


class PodReflector:
    """Keeps :attr:`pods` equal to the API server's pods bound to ``node_name``."""

    def __init__(
        self,
        api: ClusterAPI,
        *,
        node_name: str,
        on_change: PodChange,
        reconnect: Reconnect | None = None,
    ) -> None:
        self.api = api
        self.node_name = node_name
        self.on_change = on_change
        self.reconnect = reconnect or Reconnect()
        self.pods: dict[str, Pod] = {}
        self.resource_version: str | None = None
        self.lists = 0
        """How many times the pods were listed (1 + re-lists after a 410 or a failure)."""
        self.connected = False

    def replace(self, items: tuple[Any, ...]) -> set[str]:
        """A list's items become :attr:`pods`; returns the uids that changed."""
        fresh = {pod_uid(p): p for p in items if pod_uid(p)}
        changed = {uid for uid in self.pods if uid not in fresh}
        for uid, pod in fresh.items():
            old = self.pods.get(uid)
            if old is None or _version(old) != _version(pod) or old != pod:
                changed.add(uid)
        self.pods = fresh
        return changed

    def apply(self, kind: str, pod: Any) -> set[str]:
        """One watch event; returns the uids that changed."""
        uid = pod_uid(pod)
        if not uid:
            return set()
        if kind == "DELETED":
            if self.pods.pop(uid, None) is None:
                return set()
            return {uid}
        if kind in ("ADDED", "MODIFIED"):
            old = self.pods.get(uid)
            if old is not None and _version(old) == _version(pod):
                return set()
            self.pods[uid] = pod
            return {uid}
        return set()

    async def list_once(self) -> None:
        listed = await self.api.list_pods(node=self.node_name)
        self.lists += 1
        changed = self.replace(listed.items)
        self.resource_version = listed.resource_version
        self.on_change(self.pods, changed)

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
                    logger.info("pod watch: {}; listing the node's pods again", e)
                    self.resource_version = None
                    continue
                await self._failed(e)
            except errors.ClusterError as e:
                self.connected = False
                await self._failed(e)

    async def _watch(self) -> None:
        assert self.resource_version is not None  # noqa: S101  (type narrowing: the list before the watch sets it)
        stream = self.api.watch_pods(node=self.node_name, resource_version=self.resource_version)
        async for kind, pod in stream:
            if not self.connected:
                self.connected = True
                if self.reconnect.failures:
                    logger.info("pod watch of node {} resumed", self.node_name)
                self.reconnect.succeeded()
            version = _version(pod)
            changed = self.apply(kind, pod)
            if version:
                self.resource_version = version
            if changed:
                self.on_change(self.pods, changed)

    async def _failed(self, error: errors.ClusterError) -> None:
        log = logger.warning if self.reconnect.failures == 0 else logger.debug
        log("pod watch of node {} lost ({}); reconnecting", self.node_name, error)
        delay = await self.reconnect.failed()
        logger.debug("pod watch: reconnecting after {:.1f} s", delay)


__all__ = ["PodChange", "PodReflector", "pod_uid"]
