"""The grace period of a pod being stopped, which a later delete may shorten.

A second delete with a shorter grace period than the one in force cuts the stop under way
short, as the kubelet cancels the pod's sync and stops it again with the new period: the
containers still running are stopped again with it (a longer one is ignored).
"""

from __future__ import annotations

import anyio
from lightkube.models.core_v1 import Pod

from asynckubelet.node.podsyncer import PodSyncer
from asynckubelet.node.runoptions import RunOptions
from asynckubelet.runtime.kill import cut_short, grace_period_of
from asynckubelet.runtime.types import PodRuntimeStatus


class GracePeriod:
    """One pod worker's stop, and the shorter grace periods given while it runs."""

    def __init__(self) -> None:
        self._hurried = anyio.Event()

    def shorten(self, pod: Pod, options: RunOptions, grace_period: float) -> None:
        """Make ``grace_period`` the one in force when it is shorter."""
        if grace_period >= grace_period_of(pod, options.grace_period):
            return
        options.grace_period = grace_period
        self._hurried.set()

    async def kill(
        self, rm: PodSyncer, pod: Pod, runtime: PodRuntimeStatus, options: RunOptions
    ) -> None:
        """Stop the pod within its grace period, or within a shorter one given meanwhile."""
        async with anyio.create_task_group() as tg:

            async def cut_short_when_hurried() -> None:
                while True:
                    await self._hurried.wait()
                    self._hurried = anyio.Event()
                    grace = grace_period_of(pod, options.grace_period)
                    await cut_short(rm.docker, runtime, grace_period=grace)

            tg.start_soon(cut_short_when_hurried)
            await rm.kill_pod(pod, runtime, grace_period=options.grace_period)
            tg.cancel_scope.cancel()


__all__ = ["GracePeriod"]
