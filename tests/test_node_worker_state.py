"""The pod worker's states as the kubelet's pod workers name them: the transition table,
and the states a worker goes through for a pod that ends by itself, one its owner stops,
one the node keeps listed once terminal, and one left running."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from worker_helpers import FakeRuntime, pod_status, worker_pod

from asynckubelet.node.runner import PodWorker
from asynckubelet.node.worker_state import (
    Termination,
    WorkerEvent,
    WorkerPolicy,
    WorkerState,
    transition,
)
from asynckubelet.runtime.results import PodSyncResult
from asynckubelet.runtime.types import ContainerState, PodRuntimeStatus

SYNCING, TERMINATING, TERMINATED = (
    WorkerState.SYNCING,
    WorkerState.TERMINATING,
    WorkerState.TERMINATED,
)
TERMINAL, STOP, STOPPED = WorkerEvent.TERMINAL, WorkerEvent.STOP, WorkerEvent.STOPPED


@pytest.mark.parametrize(
    ("state", "event", "after"),
    [
        (SYNCING, TERMINAL, TERMINATING),
        (SYNCING, STOP, TERMINATING),
        (TERMINATING, TERMINAL, TERMINATING),
        (TERMINATING, STOP, TERMINATING),
        (TERMINATING, STOPPED, TERMINATED),
        (TERMINATED, TERMINAL, TERMINATED),
        (TERMINATED, STOP, TERMINATED),
        (TERMINATED, STOPPED, TERMINATED),
    ],
)
def test_a_worker_moves_forward_only(
    state: WorkerState, event: WorkerEvent, after: WorkerState
) -> None:
    assert transition(state, event) is after


def test_a_syncing_pod_cannot_have_been_stopped() -> None:
    with pytest.raises(ValueError, match="stopped while Syncing"):
        transition(SYNCING, STOPPED)


class RecordingRuntime(FakeRuntime):
    """A pod in the given state; the worker's state is recorded at each kill and removal."""

    def __init__(self, runtime: PodRuntimeStatus) -> None:
        super().__init__(runtime)
        self.worker: PodWorker | None = None
        self.seen: list[tuple[str, WorkerState]] = []

    def _note(self, what: str) -> None:
        assert self.worker is not None
        self.seen.append((what, self.worker.state))

    async def kill_pod(self, *args: Any, **kwargs: Any) -> PodSyncResult:
        self._note("kill_pod")
        return await super().kill_pod(*args, **kwargs)

    async def remove_pod(self, *, uid: str) -> list[str]:
        self._note("remove_pod")
        return await super().remove_pod(uid=uid)


anyio_test = pytest.mark.anyio


def worker_for(
    app: ContainerState, *, policy: WorkerPolicy, restart_policy: str = "Never"
) -> tuple[PodWorker, RecordingRuntime]:
    pod = worker_pod(restart_policy=restart_policy)
    rm = RecordingRuntime(pod_status(pod, app=app))
    worker = PodWorker(rm, pod, policy=policy)
    rm.worker = worker
    return worker, rm


@anyio_test
async def test_a_pod_that_ends_by_itself_under_run_is_terminated_and_removed() -> None:
    worker, rm = worker_for(ContainerState.EXITED, policy=WorkerPolicy(own_events=False))
    with anyio.fail_after(10):
        outcome = await worker.run(anyio.Event())
    assert outcome.phase == "Succeeded"
    # Nothing of it runs: no kill, and its removal takes the sandbox with the rest.
    assert rm.seen == [("remove_pod", TERMINATED)]
    assert worker.state is TERMINATED


@anyio_test
async def test_a_running_pod_its_owner_stops_is_terminating_while_it_is_killed() -> None:
    worker, rm = worker_for(
        ContainerState.RUNNING,
        policy=WorkerPolicy(own_events=False),
        restart_policy="Always",
    )
    stop = anyio.Event()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, stop)
            await anyio.wait_all_tasks_blocked()
            assert worker.state is SYNCING
            stop.set()
    assert rm.seen == [("kill_pod", TERMINATING), ("remove_pod", TERMINATED)]
    assert worker.outcome.stopped


@anyio_test
async def test_a_node_keeps_a_terminal_pod_terminated_until_it_is_stopped() -> None:
    worker, rm = worker_for(
        ContainerState.EXITED,
        policy=WorkerPolicy(exit_when_terminal=False, own_events=False),
    )
    stop = anyio.Event()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, stop)
            await anyio.wait_all_tasks_blocked()
            assert rm.seen == [("kill_pod", TERMINATING)]
            assert worker.state is TERMINATED
            stop.set()
    assert rm.seen[-1] == ("remove_pod", TERMINATED)


@anyio_test
async def test_a_pod_left_running_is_handed_over_syncing() -> None:
    worker, rm = worker_for(
        ContainerState.RUNNING,
        policy=WorkerPolicy(own_events=False),
        restart_policy="Always",
    )
    worker.termination = Termination(leave_running=True)
    stop = anyio.Event()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, stop)
            await anyio.wait_all_tasks_blocked()
            stop.set()
    assert rm.seen == []
    assert worker.state is SYNCING
