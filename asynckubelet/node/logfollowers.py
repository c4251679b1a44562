"""A pod worker's log followers: every container instance's output, as it is printed.

Each container instance gets a follower as soon as it is seen (a status read, or its
``start`` event), so no output is lost, not even a crashed attempt's; a container restarted
in place is followed again from its new process on. :meth:`LogFollowers.stop_following`
ends the following, at once or within a bound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from lightkube.models.core_v1 import Pod

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.runtime import naming
from asynckubelet.runtime.types import ContainerState, PodRuntimeStatus

if TYPE_CHECKING:
    from collections.abc import Callable

    from asynckubelet.docker import LogLine
    from asynckubelet.node.inplace import Restarted
    from asynckubelet.node.podsyncer import PodSyncer

__all__ = ["LogFollowers"]


class LogFollowers:
    """The log following of a :class:`~asynckubelet.node.runner.PodWorker`."""

    rm: PodSyncer
    pod: Pod
    name: str
    on_log: Callable[[Pod, str, LogLine], None] | None
    output_closed: anyio.Event | None
    followed: set[str]
    _logs: anyio.abc.TaskGroup | None
    _followers_deadline: float
    _no_new_followers: anyio.Event
    _silenced: bool

    def stop_following(self, *, within: float | None = 0.0) -> None:
        """No new log follower starts, and those following end when their containers'
        output ends or ``within`` seconds from now, whichever comes first (None: no bound;
        0: at once, and ``on_log`` is not called again: nobody reads the output any more).
        A later call never extends an earlier bound."""
        self._no_new_followers.set()
        if within is None:
            return
        if within <= 0:
            self._silenced = True
        self._followers_deadline = min(
            self._followers_deadline, anyio.current_time() + max(within, 0.0)
        )
        if self._logs is not None:
            self._bound_followers(self._logs)

    def _unread(self) -> bool:
        """Nobody reads the pod's output any more."""
        return self._silenced or (self.output_closed is not None and self.output_closed.is_set())

    def _bound_followers(self, logs: anyio.abc.TaskGroup) -> None:
        if self._silenced:
            logs.cancel_scope.cancel()
        else:
            logs.cancel_scope.deadline = min(logs.cancel_scope.deadline, self._followers_deadline)

    async def _host_followers(
        self,
        done: anyio.Event,
        *,
        task_status: anyio.abc.TaskStatus[anyio.abc.TaskGroup] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """The log followers' task group, handed to :meth:`run`; open for new followers
        until :meth:`stop_following`, then ``done`` once each has ended (or was cut)."""
        try:
            async with anyio.create_task_group() as logs:
                self._bound_followers(logs)
                task_status.started(logs)
                await self._no_new_followers.wait()
        finally:
            done.set()

    def _follow_new(self, runtime: PodRuntimeStatus, tg: anyio.abc.TaskGroup) -> None:
        for c in runtime.containers:
            if c.state is not ContainerState.CREATED:
                self._follow_from(c.id, c.name, tg)

    def _follow_from(self, container_id: str, container: str, tg: anyio.abc.TaskGroup) -> None:
        if self.on_log is None or container_id in self.followed or self._no_new_followers.is_set():
            return
        self.followed.add(container_id)
        tg.start_soon(self._follow, container_id, container, name=f"logs {self.name}/{container}")

    def _follow_again(self, restarted: Restarted, tg: anyio.abc.TaskGroup) -> None:
        """A container restarted in place: its output from its new process on (the follower
        of the old one ended with it)."""
        if self.on_log is None or self._no_new_followers.is_set():
            return
        self.followed.add(restarted.container_id)
        tg.start_soon(
            self._follow,
            restarted.container_id,
            restarted.container,
            restarted.ended,
            name=f"logs {self.name}/{restarted.container}",
        )

    async def _follow(self, container_id: str, container: str, since: float | None = None) -> None:
        assert self.on_log is not None  # noqa: S101  (type narrowing: followed only when a log sink is set)
        try:
            async for line in self.rm.docker.logs(container_id, follow=True, since=since):
                if self._unread():
                    return
                self.on_log(self.pod, container, line)
        except errors.NotFound:
            pass
        except errors.DockerError as e:
            logger.warning("logs of {}/{} ended: {}", self.name, container, e)

    def _follow_started(self, actor: dict[str, Any]) -> None:
        """Follow a container's output from its start event, without waiting for the next
        status read, so that its first line is shown as soon as it is printed."""
        labels = actor.get("Attributes") or {}
        container_id = str(actor.get("ID") or "")
        name = labels.get(naming.LABEL_CONTAINER_NAME)
        if labels.get(naming.LABEL_TYPE) != naming.TYPE_CONTAINER or not (container_id and name):
            return
        if self._logs is not None:
            self._follow_from(container_id, name, self._logs)
