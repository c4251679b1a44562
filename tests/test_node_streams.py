"""The node's streams hold their subscription or engine connection only inside their
``async with`` block, a watch that falls behind ends with ``ResyncNeeded`` instead of
dropping changes, and the node's exit kills the pods that outlast its time limit.

A :class:`~asynckubelet.testing.FakeDocker` stands in for the engine: it counts the log
streams open at any moment, and its containers can ignore their stop signal.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from lightkube.models.core_v1 import Pod, PodStatus

from asynckubelet import KubeletConfig, NotFound, ResyncNeeded
from asynckubelet.docker import LogLine
from asynckubelet.images.build import DEFAULT_PAUSE_TAG
from asynckubelet.manifests import load_manifests_text
from asynckubelet.node import Kubelet
from asynckubelet.runtime import naming
from asynckubelet.testing import FakeContainer, FakeDocker

pytestmark = pytest.mark.anyio

NODE = "n"
POD = """
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 3600
  containers:
  - {name: a, image: busybox:1.35, command: [sleep, "3600"], imagePullPolicy: Never}
"""


def pod(name: str = "web") -> Pod:
    return load_manifests_text(POD.replace("NAME", name), node_name=NODE).pods[0]


def make_node(tmp_path: Path, docker: FakeDocker, **config: Any) -> Kubelet:
    settings = KubeletConfig(
        node_name=NODE,
        state_dir=tmp_path / "state",
        housekeeping_period=3600,
        resync_period=0.05,
        **config,
    )
    return Kubelet(settings, docker=docker)


@pytest.fixture
def docker() -> FakeDocker:
    return FakeDocker(images=[DEFAULT_PAUSE_TAG, "busybox:1.35"])


@pytest.fixture
async def node(tmp_path: Path, docker: FakeDocker) -> AsyncIterator[Kubelet]:
    async with make_node(tmp_path, docker) as running:
        await running.apply(pod())
        await running.wait("default", "web", "Running", timeout=30)
        yield running


def app_container(docker: FakeDocker) -> FakeContainer:
    (found,) = [
        c for c in docker.containers.values() if c.labels.get(naming.LABEL_CONTAINER_NAME) == "a"
    ]
    return found


async def test_a_watch_is_subscribed_inside_its_block_and_unsubscribed_at_once_after(
    node: Kubelet,
) -> None:
    async with node.watch() as changes:
        kind, seen = await anext(changes)
        assert node.status.watcher_count == 1
    assert node.status.watcher_count == 0
    assert (kind, seen.metadata.name if seen.metadata else None) == ("ADDED", "web")


async def test_an_event_stream_is_subscribed_inside_its_block_and_unsubscribed_at_once_after(
    node: Kubelet,
) -> None:
    async with node.events(history=True) as events:
        first = await anext(events)
        assert node.recorder.subscriber_count == 1
    assert node.recorder.subscriber_count == 0
    assert first.pod == "web"


async def test_a_followed_log_holds_its_engine_stream_until_its_block_is_left(
    node: Kubelet, docker: FakeDocker
) -> None:
    docker.log_lines[app_container(docker).id] = [LogLine(text="hello", stream="stdout")]
    async with node.logs("default", "web", follow=True) as lines:
        line = await anext(lines)
        assert docker.open_streams("logs") == 1
    assert docker.open_streams("logs") == 0
    assert line.text == "hello"


async def test_a_reader_that_breaks_off_releases_the_log_stream_with_its_block(
    node: Kubelet, docker: FakeDocker
) -> None:
    docker.log_lines[app_container(docker).id] = [
        LogLine(text=str(i), stream="stdout") for i in range(3)
    ]
    async with node.logs("default", "web", follow=True) as lines:
        async for line in lines:
            if line.text == "1":
                break
    assert docker.open_streams("logs") == 0


async def test_read_logs_collects_the_output_so_far_and_leaves_no_stream_open(
    node: Kubelet, docker: FakeDocker
) -> None:
    docker.log_lines[app_container(docker).id] = [
        LogLine(text="a", stream="stdout"),
        LogLine(text="b", stream="stderr"),
    ]
    lines = await node.read_logs("default", "web")
    assert [(line.text, line.stream) for line in lines] == [("a", "stdout"), ("b", "stderr")]
    assert docker.open_streams("logs") == 0


async def test_logs_of_an_unknown_pod_are_refused_on_entry(node: Kubelet) -> None:
    with pytest.raises(NotFound, match='pods "nothing" not found'):
        async with node.logs("default", "nothing"):
            pass


async def test_list_events_gives_the_recorded_events_of_one_pod(node: Kubelet) -> None:
    reasons = [e.reason for e in node.list_events(namespace="default", name="web")]
    assert "Started" in reasons
    assert node.list_events(namespace="default", name="other") == []


def status_of(phase: str) -> PodStatus:
    return PodStatus(phase=phase)


async def test_a_watch_that_falls_behind_its_buffer_ends_with_resync_needed(
    tmp_path: Path, docker: FakeDocker
) -> None:
    node = make_node(tmp_path, docker)
    web = pod()
    async with node.watch(buffer=1) as changes:
        node.status.set(web, status_of("Pending"))
        node.status.set(web, status_of("Running"))
        assert node.status.watcher_count == 0
        kinds = []

        async def read() -> None:
            async for kind, seen in changes:
                kinds.append((kind, seen.status.phase if seen.status else None))

        with pytest.raises(ResyncNeeded):
            await read()
    assert kinds == [("ADDED", "Pending")]


async def test_a_watch_that_keeps_up_gets_every_change_and_no_resync(
    tmp_path: Path, docker: FakeDocker
) -> None:
    node = make_node(tmp_path, docker)
    web = pod()
    seen: list[tuple[str, str | None]] = []
    async with node.watch(buffer=1) as changes:
        for phase in ("Pending", "Running", "Succeeded"):
            node.status.set(web, status_of(phase))
            kind, changed = await anext(changes)
            seen.append((kind, changed.status.phase if changed.status else None))
        node.status.remove("does-not-exist")
        assert node.status.watcher_count == 1
    assert seen == [("ADDED", "Pending"), ("MODIFIED", "Running"), ("MODIFIED", "Succeeded")]


async def test_without_the_initial_listing_pods_there_already_change_and_go_as_known_pods(
    tmp_path: Path, docker: FakeDocker
) -> None:
    node = make_node(tmp_path, docker)
    web = pod()
    node.status.set(web, status_of("Running"))
    async with node.watch(initial=False) as changes:
        node.status.set(web, status_of("Succeeded"))
        node.status.remove((web.metadata.uid or "") if web.metadata else "")
        seen = [await anext(changes), await anext(changes)]
    assert [(kind, p.status.phase if p.status else None) for kind, p in seen] == [
        ("MODIFIED", "Succeeded"),
        ("DELETED", "Succeeded"),
    ]


async def test_a_deleted_pod_goes_as_the_node_last_showed_it_not_as_a_reader_changed_it(
    tmp_path: Path, docker: FakeDocker
) -> None:
    node = make_node(tmp_path, docker)
    web = pod()
    async with node.watch() as changes:
        node.status.set(web, status_of("Running"))
        _, added = await anext(changes)
        assert added.metadata is not None
        added.metadata.labels = {"changed": "by-the-reader"}
        node.status.remove((web.metadata.uid or "") if web.metadata else "")
        kind, deleted = await anext(changes)
    assert kind == "DELETED"
    assert deleted is not added
    assert deleted.metadata is not None
    assert deleted.metadata.labels != {"changed": "by-the-reader"}
    assert deleted.status is not None
    assert deleted.status.phase == "Running"


async def test_the_initial_listing_does_not_count_against_the_buffer(
    tmp_path: Path, docker: FakeDocker
) -> None:
    node = make_node(tmp_path, docker)
    for name in ("a", "b", "c"):
        node.status.set(pod(name), status_of("Running"))
    async with node.watch(buffer=0) as changes:
        names = []
        for _ in range(3):
            kind, seen = await anext(changes)
            names.append((kind, seen.metadata.name if seen.metadata else None))
        assert node.status.watcher_count == 1
    assert names == [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c")]


async def test_pods_stop_gracefully_within_the_shutdown_time_limit(
    tmp_path: Path, docker: FakeDocker
) -> None:
    async with make_node(tmp_path, docker) as node:
        await node.apply(pod())
        await node.wait("default", "web", "Running", timeout=30)
    assert docker.count("kill_container") == 0
    assert docker.containers == {}


async def test_pods_still_stopping_at_the_shutdown_time_limit_are_killed_and_removed(
    tmp_path: Path, docker: FakeDocker
) -> None:
    async with make_node(tmp_path, docker, shutdown_timeout=0.1) as node:
        await node.apply(pod())
        await node.wait("default", "web", "Running", timeout=30)
        app = app_container(docker)
        app.ignores_stop_signal = True
    assert app.id in docker.targets("kill_container")
    assert app.exit_code == 137
    assert docker.containers == {}


async def test_without_a_time_limit_the_grace_period_is_waited_for(
    tmp_path: Path, docker: FakeDocker
) -> None:
    """The same pod as above, with no time limit: the node is still stopping it after the
    point where the limit would have killed it."""
    stopped = anyio.Event()
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            async with make_node(tmp_path, docker, shutdown_timeout=None) as node:
                await node.apply(pod())
                await node.wait("default", "web", "Running", timeout=30)
                app_container(docker).ignores_stop_signal = True
                started.set()
            stopped.set()

        started = anyio.Event()
        tg.start_soon(run)
        await started.wait()
        await anyio.wait_all_tasks_blocked()
        assert docker.targets("stop_container") == [app_container(docker).id]
        assert not stopped.is_set()
        assert docker.count("kill_container") == 0
        docker.exit(app_container(docker).id, exit_code=0)
    assert stopped.is_set()
