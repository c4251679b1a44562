"""The kubelet's housekeeping (mixed into :class:`~asynckubelet.node.kubelet.Kubelet`):
pods on the engine that no source wants are killed and removed, and at start the objects
a previous run kept are taken back, their pods wanted again before housekeeping could take
them for unwanted (upstream's ``HandlePodCleanups``)."""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import TYPE_CHECKING

import anyio

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.manifests import inspect_manifests_text
from asynckubelet.node.objects import persisted_text, read_persisted
from asynckubelet.runtime import containers as ctr

if TYPE_CHECKING:
    from lightkube.models.core_v1 import Pod

    from asynckubelet.node.admission import NodeAdmitter
    from asynckubelet.node.config import KubeletConfig
    from asynckubelet.node.engine_ports import EnginePorts
    from asynckubelet.node.objects import ObjectStore
    from asynckubelet.node.status_manager import StatusManager
    from asynckubelet.runtime.manager import RuntimeManager


class Housekeeping:
    """Housekeeping and the objects kept across restarts, over the kubelet's parts."""

    config: KubeletConfig
    objects: ObjectStore
    status: StatusManager
    runtime: RuntimeManager
    admitter: NodeAdmitter
    engine_ports: EnginePorts
    _entries: Mapping[str, object]
    _sources: dict[str, set[str]]
    _saved: dict[str, Pod]
    _unready_sources: set[str]
    _housekeeping_wanted: anyio.Event

    @property
    def node_name(self) -> str:
        raise NotImplementedError

    def _want(self, pod: Pod, source: str) -> None:
        raise NotImplementedError

    def _restore_objects(self) -> None:
        """Take back the objects a previous run kept (those of the node's API, and those
        its controllers made), loaded as any manifest is; their pods are wanted again, as
        their source's, before housekeeping could take them for unwanted."""
        for source in self.objects.persistent_sources:
            directory = self.objects.source_directory(source)
            if directory is None or not directory.is_dir():
                continue
            kept = read_persisted(directory)
            report = inspect_manifests_text(
                persisted_text(directory),
                source_name=str(directory),
                pod_security=self.config.pod_security,
                allow_namespace_policy=self.config.allow_namespace_policy,
                node_name=self.node_name,
                node_labels=self.admitter.node.labels is not None,
                namespaces=self.objects.namespaces(),
            )
            for error in report.errors:
                logger.warning(
                    "a kept object was not taken back: {}: {}", error.source, error.field
                )
            self.objects.restore(report.manifests, source=source, kept=kept)
            for pod in report.manifests.pods:
                self._want(pod, source)
            self._sources.setdefault(source, set()).update(
                ctr.pod_identity(p)[2] for p in report.manifests.pods
            )

    async def _housekeeping_loop(self) -> None:
        while True:
            await anyio.sleep(self.config.housekeeping_period)
            self._housekeeping_wanted = anyio.Event()
            await self.engine_ports.refresh()
            try:
                await self.housekeeping()
            except errors.DockerError as e:
                logger.warning("housekeeping failed: {}", e)
                continue
            with anyio.move_on_after(self.config.relist_period):
                await self._housekeeping_wanted.wait()

    async def housekeeping(self) -> builtins.list[str]:
        """Kill and remove this node's pods that no source wants; returns their uids."""
        if self._unready_sources:
            return []
        self._saved.clear()
        self.status.prune()
        removed = []
        for uid, (ns, name) in (await self.runtime.list_pod_uids()).items():
            if uid in self._entries:
                continue
            logger.bind(pod=f"{ns}/{name}").info("removing pod {} that is not wanted", uid)
            runtime = await self.runtime.get_pod_status(uid=uid, name=name, namespace=ns)
            if uid in self._entries:
                continue
            with anyio.CancelScope(shield=True):
                await self.runtime.kill_pod(None, runtime)
                await self.runtime.remove_pod(uid=uid)
            removed.append(uid)
        return removed


__all__ = ["Housekeeping"]
