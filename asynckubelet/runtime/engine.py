"""``Engine``: the facts about the Docker engine and the node that the runtime looks up once.

Whether the engine is local, its ``docker info`` (its cgroup and log drivers, whether it
runs apart from this machine's namespaces), and the sandbox image once it is known to be
there. A burst of pods wants them all at the same moment: one question serves every pod,
and a question that failed is asked again by the next. What follows from them for one pod
is here too: its cgroup parent, its log configuration and its log links on the node.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import anyio
from lightkube.models.core_v1 import Pod

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.docker import DockerAPI
from asynckubelet.docker.engine import is_local_daemon
from asynckubelet.images.build import DEFAULT_PAUSE_TAG
from asynckubelet.runtime import containers as ctr
from asynckubelet.runtime import nodefiles, probehelper
from asynckubelet.runtime.config import RuntimeConfig, log_rotation
from asynckubelet.runtime.images import ImageManager
from asynckubelet.runtime.qos import qos_class


class Engine:
    """The engine's facts, each looked up once, and what they decide for a pod."""

    def __init__(self, docker: DockerAPI, *, config: RuntimeConfig, images: ImageManager) -> None:
        self.docker = docker
        self.config = config
        self.images = images
        self.cgroup_driver: str | None = None
        """The engine's cgroup driver, once looked up (:meth:`find_cgroup_driver`)."""
        self._pause_ready = False
        self._isolated: bool | None = None
        self._info: Mapping[str, Any] | None = None
        self._info_lock = anyio.Lock()
        """One ``docker info`` at a time: the pods of a burst all want the engine's facts
        at once, and one answer serves them all."""
        self._log_rotation = log_rotation(config)
        self._log_driver: str | None = None

    def is_local(self) -> bool:
        """Whether the engine's files and namespaces are on this machine."""
        return is_local_daemon(self.docker.url)

    async def info(self) -> Mapping[str, Any]:
        """``docker info``, asked once (a failure is asked again next time)."""
        if self._info is None:
            async with self._info_lock:
                if self._info is None:
                    self._info = await self.docker.info()
        return self._info

    async def find_cgroup_driver(self) -> str:
        if self.cgroup_driver is None:
            info = await self.info()
            self.cgroup_driver = str(info.get("CgroupDriver", "cgroupfs"))
        return self.cgroup_driver

    async def isolated(self) -> bool:
        """Whether the engine runs apart from this machine's namespaces (a VM, rootless);
        False while ``docker info`` fails."""
        if self._isolated is None:
            try:
                self._isolated = probehelper.engine_is_isolated(await self.info())
            except errors.DockerError:
                return False
        return self._isolated

    async def may_have_probe_helpers(self) -> bool:
        return not self.is_local() or not probehelper.is_root() or await self.isolated()

    async def container_log_config(self) -> dict[str, Any] | None:
        """``HostConfig.LogConfig`` of the containers this node makes: the log limits, in
        the engine's default log driver when it rotates files; None otherwise (said once).
        An engine that cannot say its driver fails the step (no container is made without
        the limits), as for its cgroup driver."""
        rotation = self._log_rotation
        if rotation.max_size < 0:
            return None
        if self._log_driver is None:
            driver = str((await self.info()).get("LoggingDriver") or "")
            if self._log_driver is None and rotation.log_config(driver) is None:
                logger.info(
                    "the engine's log driver is {}: container logs are not rotated by this"
                    " node (the driver keeps them)",
                    driver or "unknown",
                )
            self._log_driver = driver
        return rotation.log_config(self._log_driver)

    async def cgroup_parent(self, pod: Pod) -> str | None:
        """The pod's cgroup parent, or None when pod cgroups are off."""
        root = self.config.cgroup_root
        if root is None or not self.is_local():
            return None
        driver = await self.find_cgroup_driver()
        _, _, uid = ctr.pod_identity(pod)
        return nodefiles.pod_cgroup_parent(root=root, driver=driver, qos=qos_class(pod), uid=uid)

    async def link_log(self, pod: Pod, container: str, restart_count: int, cid: str) -> None:
        """Link the instance's log file into the pod's log directory, when there is one."""
        root = self.config.pod_log_dir
        if root is None or not self.is_local():
            return
        log_path = (await self.docker.inspect_container(cid)).get("LogPath") or ""
        if log_path:
            name, ns, uid = ctr.pod_identity(pod)
            await anyio.to_thread.run_sync(
                partial(
                    nodefiles.link_container_log,
                    root,
                    namespace=ns,
                    name=name,
                    uid=uid,
                    container=container,
                    restart_count=restart_count,
                    log_path=log_path,
                )
            )

    async def pause_image(self) -> str:
        """The sandbox image; the project's own is made here the first time it is missing
        (:class:`~errors.ImagePullError` saying why when it cannot be). A ``pause_image``
        of the configuration is pulled by the sandbox step when it is missing."""
        if self.config.pause_image is not None:
            return self.config.pause_image
        if not self._pause_ready:
            await self.images.ensure(DEFAULT_PAUSE_TAG, policy="IfNotPresent")
            self._pause_ready = True
        return DEFAULT_PAUSE_TAG


__all__ = ["Engine"]
