"""The PLEG's event stream: each event wakes its pod and drops the runtime's cached view of
the container it names (Docker emits ``die`` before its container list shows the exit);
a lost stream is opened again and counted."""

from __future__ import annotations

import anyio
import pytest

from asynckubelet.docker import Event
from asynckubelet.node import pleg as pleg_module
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


class RecordingDocker(FakeDocker):
    """Records the ``since`` each opening of the event stream asks for."""

    def __init__(self) -> None:
        super().__init__()
        self.since: list[float | None] = []

    async def events(self, *, filters=None, since=None):  # type: ignore[no-untyped-def]
        self.since.append(since)
        async for e in super().events(filters=filters, since=since):
            yield e


async def test_a_reopened_stream_starts_from_the_last_event_seen() -> None:
    docker = RecordingDocker()
    first = event("start", "c1", "u1")
    first["timeNano"] = 1_700_000_000_500_000_000
    docker.event_streams = [[first]]
    pleg = PLEG(docker, node_name="n1", wake=lambda uid: None, relist_period=3600)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await tg.start(pleg.run)
            while len(docker.since) < 2:  # noqa: ASYNC110
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    assert docker.since[0] is None
    assert docker.since[1] == pytest.approx(1_700_000_000.5)


async def test_a_connected_stream_leaves_relisting_to_the_safety_net() -> None:
    docker = FakeDocker()
    pleg = PLEG(docker, node_name="n1", wake=lambda uid: None)
    with anyio.move_on_after(1):
        async with anyio.create_task_group() as tg:
            await tg.start(pleg.run)
            await anyio.wait_all_tasks_blocked()
            tg.cancel_scope.cancel()
    assert docker.count("list_containers") == 1
    assert pleg.relist_period == 300


async def test_a_died_container_wakes_its_pod_again_once_docker_shows_the_exit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pleg_module, "DIE_REWAKES", (0.01, 0.02))
    woken: list[str] = []
    docker = engine([[event("die", "c1", "u1"), event("start", "c2", "u2")]])
    pleg = PLEG(docker, node_name="n1", wake=woken.append, relist_period=3600)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await tg.start(pleg.run)
            while woken.count("u1") < 3:  # noqa: ASYNC110
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    assert woken.count("u1") == 3
    assert woken.count("u2") == 1


@pytest.mark.parametrize(
    ("action", "outdated"),
    [
        ("die", True),
        ("oom", True),
        ("kill", True),
        ("stop", True),
        ("create", False),
        ("start", False),
        ("destroy", False),
    ],
)
async def test_only_an_event_the_container_list_may_lag_drops_the_cached_container(
    action: str, outdated: bool
) -> None:
    _, woken, forgotten = await watch(engine([[event(action, "c1", "u1")]]))
    assert woken == ["u1"]
    assert forgotten == (["c1"] if outdated else [])
