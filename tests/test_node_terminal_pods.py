"""A pod that reached a terminal phase gives back its sandbox and its IP, as the kubelet's
pod worker does: the sandbox is stopped and the network torn down once, the containers stay
for their logs, and the status keeps the IP the pod had."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
from lightkube.models.core_v1 import PodStatus
from worker_helpers import StubRuntime, worker_pod

from asynckubelet.node.runner import PodWorker
from asynckubelet.node.worker_state import Termination, WorkerPolicy
from asynckubelet.runtime.results import PodSyncResult
from asynckubelet.runtime.types import (
    ContainerState,
    ContainerStatus,
    PodRuntimeStatus,
    SandboxState,
    SandboxStatus,
)

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class FinishedPodRuntime(StubRuntime):
    """A pod whose only container exited 0 while its sandbox still runs with an IP; a
    ``kill_pod`` stops the sandbox (its IP gone from then on)."""

    def __init__(self) -> None:
        self.sandbox_state = SandboxState.READY
        self.kills = 0
        self.syncs = 0
        self.looks = 0
        self.looked_after_kill = anyio.Event()

    async def get_pod_status(self, *, uid: str, name: str, namespace: str) -> PodRuntimeStatus:
        self.looks += 1
        if self.kills and self.looks > 3:
            self.looked_after_kill.set()
        ready = self.sandbox_state is SandboxState.READY
        return PodRuntimeStatus(
            uid=uid,
            name=name,
            namespace=namespace,
            sandboxes=(
                SandboxStatus(
                    id="s1",
                    attempt=0,
                    state=self.sandbox_state,
                    created_at=NOW,
                    ip="10.1.0.7" if ready else "",
                ),
            ),
            containers=(
                ContainerStatus(
                    id="c1",
                    name="app",
                    state=ContainerState.EXITED,
                    created_at=NOW,
                    started_at=NOW,
                    finished_at=NOW,
                    exit_code=0,
                    reason="Completed",
                    sandbox_id="s1",
                ),
            ),
        )

    async def sync_pod(self, *args: Any, **kwargs: Any) -> PodSyncResult:
        self.syncs += 1
        return PodSyncResult()

    async def kill_pod(self, *args: Any, **kwargs: Any) -> PodSyncResult:
        self.kills += 1
        self.sandbox_state = SandboxState.NOTREADY
        return PodSyncResult()

    async def remove_pod(self, *, uid: str) -> list[str]:
        raise AssertionError("a finished pod's containers are kept")


async def test_a_finished_pod_stops_its_sandbox_once_and_keeps_its_ip_in_the_status() -> None:
    rm = FinishedPodRuntime()
    statuses: list[PodStatus] = []
    pod = worker_pod("job")
    pod.status = PodStatus(phase="Running", podIP="10.1.0.7")
    worker = PodWorker(
        rm,
        pod,
        on_status=lambda pod, status: statuses.append(status),
        policy=WorkerPolicy(exit_when_terminal=False, own_events=False, resync_interval=0.01),
    )
    worker.termination = Termination(leave_running=True)
    stop = anyio.Event()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, stop)
            await rm.looked_after_kill.wait()
            stop.set()
    assert rm.kills == 1
    assert rm.syncs == 0
    assert {s.phase for s in statuses} == {"Succeeded"}
    last = statuses[-1]
    assert last.podIP == "10.1.0.7"
    assert [ip.ip for ip in last.podIPs or []] == ["10.1.0.7"]


async def test_a_pod_worker_that_exits_on_a_terminal_phase_leaves_the_sandbox_to_its_finish() -> (
    None
):
    rm = FinishedPodRuntime()
    worker = PodWorker(rm, worker_pod("job"), policy=WorkerPolicy(own_events=False))
    worker.termination = Termination(leave_running=True)
    with anyio.fail_after(10):
        outcome = await worker.run(anyio.Event())
    assert outcome.status is not None
    assert outcome.status.phase == "Succeeded"
    assert rm.kills == 0
