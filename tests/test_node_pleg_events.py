"""The PLEG's event stream: each event wakes its pod and drops the runtime's cached view of
the container it names (Docker emits ``die`` before its container list shows the exit);
a lost stream is opened again and counted."""

from __future__ import annotations

import anyio
import pytest

from asynckubelet.docker import Event
from asynckubelet.node.pleg import PLEG
from asynckubelet.runtime import naming
from asynckubelet.runtime.results import PodSyncResult, SyncAction, SyncError
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio


def event(action: str, cid: str, uid: str) -> Event:
    return {"Action": action, "Actor": {"ID": cid, "Attributes": {naming.LABEL_POD_UID: uid}}}


def engine(streams: list[list[Event]]) -> FakeDocker:
    """Streams that each deliver some events, then fail as a restarting engine does."""
    docker = FakeDocker()
    docker.event_streams = streams
    return docker


async def watch(docker: FakeDocker) -> tuple[PLEG, list[str], list[str]]:
    woken: list[str] = []
    forgotten: list[str] = []
    pleg = PLEG(
        docker,
        node_name="n1",
        wake=woken.append,
        relist_period=3600,
        forget=forgotten.append,
    )
    streams = len(docker.event_streams)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await tg.start(pleg.run)
            # The PLEG opens one stream more only after handling every event of the last.
            while docker.count("events") <= streams:  # noqa: ASYNC110
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    return pleg, woken, forgotten


async def test_an_event_wakes_its_pod_and_drops_the_cached_container() -> None:
    _, woken, forgotten = await watch(engine([[event("die", "c1", "u1")]]))
    assert woken == ["u1"]
    assert forgotten == ["c1"]


async def test_events_after_a_lost_stream_come_through_the_reopened_one() -> None:
    docker = engine([[event("start", "c1", "u1")], [event("die", "c1", "u1")]])
    pleg, woken, _ = await watch(docker)
    assert woken == ["u1", "u1"]
    assert pleg.reconnects >= 1


def result_with(error: SyncError | None) -> PodSyncResult:
    result = PodSyncResult()
    step = result.add(SyncAction.START_CONTAINER, "app")
    if error is not None:
        step.fail(error, "message")
    return result


@pytest.mark.parametrize(
    ("error", "failed"),
    [
        (None, False),
        (SyncError.CRASH_LOOP_BACK_OFF, False),
        (SyncError.IMAGE_PULL_BACK_OFF, False),
        (SyncError.CREATE_CONTAINER_CONFIG, False),
        (SyncError.CREATE_POD_SANDBOX, True),
        (SyncError.RUN_CONTAINER, True),
        (SyncError.CREATE_CONTAINER, True),
        (SyncError.KILL_CONTAINER, True),
    ],
)
def test_only_failed_docker_operations_count_as_runtime_failures(
    error: SyncError | None, failed: bool
) -> None:
    assert result_with(error).failed_in_runtime() is failed
