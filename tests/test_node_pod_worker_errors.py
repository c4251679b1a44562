"""A pod worker never dies silently: an unexpected error in a sync becomes a ``FailedSync``
Warning event and a status that says so, and the worker tries again after a pause."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from lightkube.models.core_v1 import Pod, PodStatus
from worker_helpers import StubRuntime, worker_pod

from asynckubelet.node import runner
from asynckubelet.node.runner import FAILED_SYNC, PodWorker
from asynckubelet.node.worker_state import WorkerPolicy
from asynckubelet.runtime.results import PodSyncResult

pytestmark = pytest.mark.anyio


class FakeRuntime(StubRuntime):
    """The runtime manager's surface a pod worker uses; ``sync_pod`` fails ``failures``
    times with an error no code expects, then succeeds."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.syncs = 0
        self.recorded: list[tuple[str, str, str]] = []
        self.synced = anyio.Event()

    def events(self, pod: Pod, *, type: str, reason: str, message: str, **_: Any) -> None:
        self.recorded.append((type, reason, message))

    async def sync_pod(self, *args: Any, **kwargs: Any) -> PodSyncResult:
        self.syncs += 1
        if self.syncs <= self.failures:
            raise KeyError("a key nobody expected")
        self.synced.set()
        return PodSyncResult()


async def _run(rm: FakeRuntime, monkeypatch: pytest.MonkeyPatch) -> list[PodStatus]:
    monkeypatch.setattr(runner, "SYNC_ERROR_PAUSE", (0.01, 0.02))
    statuses: list[PodStatus] = []
    worker = PodWorker(
        rm,
        worker_pod(restart_policy=None),
        on_status=lambda pod, status: statuses.append(status),
        policy=WorkerPolicy(own_events=False, resync_interval=0.01),
    )
    stop = anyio.Event()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, stop)
            await rm.synced.wait()
            stop.set()
    return statuses


async def test_an_unexpected_error_in_a_sync_is_a_failed_sync_event_and_a_retry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rm = FakeRuntime(failures=3)
    await _run(rm, monkeypatch)
    assert rm.syncs == 4
    failed = [e for e in rm.recorded if e[1] == FAILED_SYNC]
    assert len(failed) == 3
    assert failed[0] == (
        "Warning",
        FAILED_SYNC,
        "error syncing pod, will retry: KeyError: 'a key nobody expected'",
    )


async def test_the_status_shows_the_failed_sync_until_a_sync_succeeds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rm = FakeRuntime(failures=1)
    statuses = await _run(rm, monkeypatch)
    reasons = [s.reason for s in statuses]
    assert FAILED_SYNC in reasons
    after = statuses[reasons.index(FAILED_SYNC) + 1 :]
    assert after
    assert all(s.reason != FAILED_SYNC for s in after)
    shown = statuses[reasons.index(FAILED_SYNC)]
    assert shown.phase == "Pending"
    assert shown.message is not None
    assert "KeyError" in shown.message


async def test_the_pause_between_failed_syncs_grows_and_resets_after_a_success() -> None:
    worker = PodWorker(
        FakeRuntime(failures=0),
        worker_pod(restart_policy=None),
        policy=WorkerPolicy(own_events=False),
    )
    stop = anyio.Event()
    stop.set()
    pauses = []
    for failed in (True, True, True, True, True, False, True):
        await worker._pause_after_failure(stop, failed=failed, pause=(1.0, 4.0))
        pauses.append(worker._failure_pause)
    assert pauses == [1.0, 2.0, 4.0, 4.0, 4.0, 0.0, 1.0]
