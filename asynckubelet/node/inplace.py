"""Containers restarted in place: the same container stopped and started again by its pod
worker, its filesystem kept.

``--watch`` with a ``sync+restart`` rule copies changed files into a running container
and then restarts that very container, so that its process reads them; a new container
from the image would not have them. A restart from outside the node races the pod's
worker: a worker that looks between the stop and the start sees the container exited
and, as the kubelet would, starts a replacement. Here the worker does the restart itself,
at the start of one of its iterations, so no sync of the pod sees the container stopped
(:meth:`InPlaceRestarts.carry_out`). The container keeps its ID and restart count (it is
not a new container as the kubelet's restarts make), its stop signal gets the grace
period asked for, then SIGKILL, and no hook runs; the pod's events say what happened
(``Killing``: ``Stopping container app to restart it in place``, then ``Started``).

:meth:`Restarter.restart_in_place` is the node's entry: the pod by namespace and name, its
containers by name. A pod the node does not run is ``pods "x" not found``, a container the
pod does not have names those it has, and a container that is not running, or a pod being
stopped, is a conflict that names it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.runtime import containers as ctr
from asynckubelet.runtime.types import ContainerState

if TYPE_CHECKING:
    from lightkube.models.core_v1 import Pod

    from asynckubelet.node.foreground import WorkerEntry
    from asynckubelet.node.podsyncer import PodSyncer

__all__ = ["InPlaceRestarts", "RestartRequest", "Restarted", "Restarter"]


@dataclass
class RestartRequest:
    """One ask: the containers by name, the grace period of their stop; ``restarted``
    (their IDs, in the order asked) or ``error`` once ``done`` is set."""

    containers: tuple[str, ...]
    grace_period: float
    done: anyio.Event = field(default_factory=anyio.Event)
    restarted: list[str] = field(default_factory=list)
    error: Exception | None = None


@dataclass(frozen=True)
class Restarted:
    """A container restarted: its name, its ID, and when its stopped process ended by the
    engine's clock (its output after that is the new process's)."""

    container: str
    container_id: str
    ended: float | None


class InPlaceRestarts:
    """A pod worker's pending restarts, carried out by the worker between two syncs."""

    def __init__(self) -> None:
        self._pending: list[RestartRequest] = []
        self._closed: str | None = None

    def ask(self, containers: Sequence[str], *, grace_period: float) -> RestartRequest:
        """A restart for the worker's next iteration (the caller wakes the worker)."""
        request = RestartRequest(containers=tuple(containers), grace_period=grace_period)
        if self._closed is not None:
            request.error = errors.PodConflict(self._closed)
            request.done.set()
        else:
            self._pending.append(request)
        return request

    def close(self, why: str) -> None:
        """No restart any more (the worker ends): every pending one refused with ``why``."""
        self._closed = why
        pending, self._pending = self._pending, []
        for request in pending:
            request.error = errors.PodConflict(why)
            request.done.set()

    async def carry_out(self, rm: PodSyncer, pod: Pod) -> list[Restarted]:
        """Every pending restart, each container stopped (its stop signal, SIGKILL after
        the grace period) and started again, with the kubelet's ``Killing`` and ``Started``
        events; the containers restarted."""
        name, namespace, uid = ctr.pod_identity(pod)
        done: list[Restarted] = []
        while self._pending:
            request = self._pending.pop(0)
            try:
                runtime = await rm.get_pod_status(uid=uid, name=name, namespace=namespace)
                ids = []
                for container in request.containers:
                    running = [
                        c.id
                        for c in runtime.containers
                        if c.name == container and c.state is ContainerState.RUNNING
                    ]
                    if not running:
                        raise errors.PodConflict(
                            f'container "{container}" of pod "{name}" is not running'
                        )
                    ids.append(running[-1])
                for container, container_id in zip(request.containers, ids, strict=True):
                    rm.events(
                        pod,
                        type="Normal",
                        reason="Killing",
                        message=f"Stopping container {container} to restart it in place",
                        container=container,
                    )
                    await rm.docker.stop_container(container_id, grace_period=request.grace_period)
                    stopped = await rm.docker.inspect_container(container_id)
                    ended = ctr.parse_time((stopped.get("State") or {}).get("FinishedAt"))
                    await rm.docker.start_container(container_id)
                    rm.forget(container_id)
                    rm.events(
                        pod,
                        type="Normal",
                        reason="Started",
                        message=f"Started container {container}",
                        container=container,
                    )
                    logger.bind(pod=f"{namespace}/{name}").info(
                        "container {} restarted in place", container
                    )
                    request.restarted.append(container_id)
                    done.append(
                        Restarted(container, container_id, ended.timestamp() if ended else None)
                    )
            except (errors.AsyncKubeletError, OSError) as e:
                request.error = e
            finally:
                request.done.set()
        return done


class Restarter:
    """The node's side: a restart handed to the pod's worker and waited for."""

    _entries: dict[str, WorkerEntry]

    async def restart_in_place(
        self, namespace: str, name: str, containers: Sequence[str], *, grace_period: float
    ) -> list[str]:
        """Restart the pod's ``containers`` in place; their IDs, in the order asked."""
        entry = next(
            (
                e
                for e in self._entries.values()
                if ctr.pod_identity(e.worker.pod)[1::-1] == (namespace, name)
            ),
            None,
        )
        if entry is None:
            raise errors.PodNotFound(f'pods "{name}" not found')
        spec = entry.worker.pod.spec
        have = [c.name for c in (spec.containers if spec else None) or []]
        for container in containers:
            if container not in have:
                raise errors.ContainerNotValid(
                    f"container {container} is not valid for pod {name}: "
                    f"choose one of: [{' '.join(have)}]"
                )
        if entry.deleting or entry.stop.is_set():
            raise errors.PodConflict(f'pod "{name}" is being stopped')
        request = entry.worker.restarts.ask(containers, grace_period=grace_period)
        entry.worker.poke()
        await request.done.wait()
        if request.error is not None:
            raise request.error
        return request.restarted
