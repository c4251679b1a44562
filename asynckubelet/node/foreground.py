"""Running pods in the foreground, as ``asynckubelet run`` and a library's "run these pods,
show their output, tell me how they ended" want: a :class:`~asynckubelet.node.runner.
PodWorker` per pod under the run's policy (each ends once its pod is terminal), all
stopped together on ``stop`` and, when asked, killed at once on ``kill``."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
from lightkube.models.core_v1 import Pod

from asynckubelet.node.podsyncer import PodSyncer
from asynckubelet.node.runner import LogSink, PodWorker, StatusSink
from asynckubelet.node.runoptions import PodOutcome, RunOptions

KILL_AGAIN_EVERY = 0.5
"""Seconds between rounds of SIGKILL once a run's pods are to be killed at once."""


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


__all__ = ["KILL_AGAIN_EVERY", "run_pods"]
