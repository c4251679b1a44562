"""Running pods in the foreground, as ``asynckubelet run`` and a library's "run these pods,
show their output, tell me how they ended" want.

On a node (:class:`Foreground`, mixed into :class:`~asynckubelet.node.kubelet.Kubelet`):
the pods are taken all or none (:meth:`Foreground.admit_all`), their output and statuses
go to the :class:`PodOutput` the node was given, each pod's :class:`~asynckubelet.node.
runoptions.PodOutcome` stays readable once its worker ended, and :meth:`Foreground.
kill_now` kills every pod at once. On a bare runtime (:func:`run_pods`): a :class:`~
asynckubelet.node.runner.PodWorker` per pod under the run's policy (each ends once its pod
is terminal), all stopped together on ``stop`` and, when asked, killed at once on ``kill``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import anyio.abc
from lightkube.models.core_v1 import Pod

from asynckubelet.manifests import Manifests
from asynckubelet.node.admission import admit_together, host_ports
from asynckubelet.node.podsyncer import PodSyncer
from asynckubelet.node.runner import LogSink, PodWorker, StatusSink
from asynckubelet.node.runoptions import PodOutcome, RunOptions
from asynckubelet.runtime import containers as ctr

if TYPE_CHECKING:
    from asynckubelet.node.admission import NodeAdmitter, Rejection
    from asynckubelet.node.engine_ports import EnginePorts
    from asynckubelet.node.objects import ObjectStore

KILL_AGAIN_EVERY = 0.5
"""Seconds between rounds of SIGKILL once a run's pods are to be killed at once."""


@dataclass(frozen=True, kw_only=True)
class PodOutput:
    """Where a node shows its pods (a foreground run's terminal): each container's output
    as it is printed, each status as it is made; ``closed`` is set when nobody reads the
    output any more (a closed stdout), and the logs stop being followed at once."""

    logs: LogSink | None = None
    statuses: StatusSink | None = None
    closed: anyio.Event | None = None


@dataclass(eq=False)
class WorkerEntry:
    """A pod worker as its node holds it."""

    worker: PodWorker
    source: str
    stop: anyio.Event
    done: anyio.Event
    seen: float
    deleting: bool = False
    replacement: tuple[Pod, str, RunOptions] | None = None


class Foreground:
    """What makes a node a foreground run's, over the kubelet's parts."""

    admitter: NodeAdmitter
    objects: ObjectStore
    engine_ports: EnginePorts
    _entries: dict[str, WorkerEntry]
    _sources: dict[str, set[str]]
    _outcomes: dict[str, PodOutcome]
    _killing: bool
    _tg: anyio.abc.TaskGroup | None

    def _prepare(self, pods: Manifests | Pod | Iterable[Pod]) -> tuple[list[Pod], Manifests]:
        raise NotImplementedError

    def _check_objects(self, manifests: Manifests) -> None:
        raise NotImplementedError

    def _options(self, pod: Pod) -> RunOptions:
        raise NotImplementedError

    def _admitted(self) -> list[Pod]:
        raise NotImplementedError

    def _want(self, pod: Pod, source: str) -> None:
        raise NotImplementedError

    def _start_worker(self, pod: Pod, source: str, options: RunOptions) -> None:
        raise NotImplementedError

    async def admit_all(
        self,
        pods: Manifests | Pod | Iterable[Pod],
        *,
        running: Sequence[Pod] = (),
        source: str,
        keep: bool = False,
        grace_period: float | None = None,
    ) -> list[tuple[Pod, Rejection]]:
        """Take the pods as ``source``'s all together or none of them (a foreground run's):
        each is admitted over the node's pods, ``running`` (another node's on the same host)
        and the pods before it. The pods refused, each with why, and then nothing of them
        is kept or started; empty when every pod was taken and its worker started.

        ``keep`` leaves each pod's containers on Docker when its worker ends;
        ``grace_period`` overrides the pods' ``terminationGracePeriodSeconds`` when they
        are stopped. A pod the node runs already is updated as :meth:`apply` would.
        """
        prepared, manifests = self._prepare(pods)
        self._check_objects(manifests)
        if any(True for pod in prepared for _ in host_ports(pod)):
            await self.engine_ports.refresh()
        new = [p for p in prepared if ctr.pod_identity(p)[2] not in self._entries]
        refused = admit_together(self.admitter, new, admitted=[*running, *self._admitted()])
        if refused:
            return refused
        self.objects.put(manifests, source=source)
        for pod in prepared:
            uid = ctr.pod_identity(pod)[2]
            if uid in self._entries:
                self._want(pod, source)
                continue
            options = self._options(pod)
            options.keep, options.grace_period = keep, grace_period
            self._start_worker(pod, source, options)
        self._sources.setdefault(source, set()).update(ctr.pod_identity(p)[2] for p in prepared)
        return []

    def outcome(self, uid: str) -> PodOutcome | None:
        """How the pod ``uid``'s run went (ended, once its worker has ended); None when the
        node never ran it, or it was deleted."""
        entry = self._entries.get(uid)
        return entry.worker.outcome if entry is not None else self._outcomes.get(uid)

    async def wait_ended(self, uids: Iterable[str]) -> None:
        """Returns once the workers of the pods ``uids`` have all ended (with
        :attr:`~asynckubelet.node.config.KubeletConfig.exit_when_terminal`: once each pod
        is terminal, stopped and removed)."""
        for uid in uids:
            entry = self._entries.get(uid)
            if entry is not None:
                await entry.done.wait()

    def kill_now(self) -> None:
        """Kill every pod at once: no more grace, and their running containers SIGKILLed,
        again every :data:`KILL_AGAIN_EVERY` seconds (a container a sync was still starting
        is caught by the next round) until each worker has ended; the pods admitted after
        this are killed too."""
        self._killing = True
        for entry in list(self._entries.values()):
            self._kill(entry)

    def _kill(self, entry: WorkerEntry) -> None:
        entry.worker.options.grace_period = 0
        if self._tg is not None:
            worker = entry.worker
            self._tg.start_soon(
                self._kill_until_ended, entry, name=f"kill {worker.namespace}/{worker.name}"
            )

    async def _kill_until_ended(self, entry: WorkerEntry) -> None:
        while not entry.done.is_set():
            await entry.worker.kill_now()
            with anyio.move_on_after(KILL_AGAIN_EVERY):
                await entry.done.wait()


async def run_pods(
    rm: PodSyncer,
    pods: Sequence[Pod],
    *,
    stop: anyio.Event | None = None,
    kill: anyio.Event | None = None,
    on_log: LogSink | None = None,
    on_status: StatusSink | None = None,
    options: RunOptions | None = None,
    output_closed: anyio.Event | None = None,
    new_uids: bool = False,
) -> list[PodOutcome]:
    """Run ``pods`` concurrently until each ends (or ``stop`` is set); clean up after them.

    A pod ends when its phase is terminal: with ``restartPolicy: Always`` that is never,
    so such a run lasts until ``stop``. Setting ``kill`` SIGKILLs the pods' running
    containers, again every :data:`KILL_AGAIN_EVERY` seconds (a container a sync was still
    starting is caught by the next round) until each worker has ended. Setting
    ``output_closed`` says nobody reads the pods' output any more (a closed stdout): their
    logs stop being followed at once and ``on_log`` is not called again; the pods
    themselves stop only on ``stop``. With ``new_uids`` the caller says the pods' UIDs
    were made for this run (no container on Docker can carry them): each pod's first look
    at Docker then asks it nothing.
    """
    stop = stop or anyio.Event()
    workers = [
        PodWorker(
            rm,
            pod,
            on_log=on_log,
            on_status=on_status,
            options=options,
            output_closed=output_closed,
            nothing_on_docker=new_uids,
        )
        for pod in pods
    ]
    async with anyio.create_task_group() as tg:
        for w in workers:
            tg.start_soon(_run_worker, w, stop, kill, name=f"pod {w.namespace}/{w.name}")
    return [w.outcome for w in workers]


async def _run_worker(worker: PodWorker, stop: anyio.Event, kill: anyio.Event | None) -> None:
    async with anyio.create_task_group() as tg:
        if kill is not None:
            tg.start_soon(_kill_on, worker, kill, name=f"kill {worker.namespace}/{worker.name}")
        await worker.run(stop)
        tg.cancel_scope.cancel()


async def _kill_on(worker: PodWorker, kill: anyio.Event) -> None:
    await kill.wait()
    while True:
        await worker.kill_now()
        await anyio.sleep(KILL_AGAIN_EVERY)


__all__ = ["KILL_AGAIN_EVERY", "Foreground", "PodOutput", "WorkerEntry", "run_pods"]
