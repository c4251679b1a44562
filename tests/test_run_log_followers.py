"""The log followers of a run never keep it alive reading a backlog: a stopped pod's
output is shown while its containers stop, then read for a bounded time only; output
nobody reads any more (a closed stdout) is not followed at all; a pod that ended by itself
has all of its output shown. The run command drops pod output once stdout is closed,
without formatting it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from lightkube.models.core_v1 import Pod

from asynckubelet.cli import output
from asynckubelet.cli.commands import run as run_command
from asynckubelet.docker import LogLine
from asynckubelet.manifests import load_manifests_text
from asynckubelet.node.runner import PodWorker, run_pods
from asynckubelet.runtime import naming
from asynckubelet.runtime.results import PodSyncResult
from asynckubelet.runtime.types import (
    ContainerState,
    ContainerStatus,
    PodRuntimeStatus,
    SandboxState,
    SandboxStatus,
)
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ENDS_WITHIN = 5.0
"""Seconds within which each run here ends; the hang these tests catch never ends."""


def _pod() -> Pod:
    text = """
apiVersion: v1
kind: Pod
metadata: {name: many}
spec:
  restartPolicy: Never
  containers: [{name: app, image: busybox}]
"""
    return load_manifests_text(text, node_name="n1").pods[0]


class Backlog(FakeDocker):
    """An engine whose container printed more than a follower can ever read: the log
    stream of ``app`` never ends (a line, then a turn for the other tasks)."""

    def __init__(self) -> None:
        super().__init__()
        self.served = 0
        labels = naming.pod_labels(node="n1", pod="many", namespace="default", uid="u")
        self.add_container(id="app", labels=labels, state="running")

    async def logs(
        self,
        container_id: str,
        *,
        follow: bool = False,
        stdout: bool = True,
        stderr: bool = True,
        tail: int | None = None,
        since: float | None = None,
        timestamps: bool = False,
    ) -> AsyncIterator[LogLine]:
        await self._enter("logs", container_id)
        with self._stream("logs"):
            while True:
                self.served += 1
                yield LogLine(stream="stdout", text=f"line {self.served}")
                await anyio.lowlevel.checkpoint()


class FakeRuntime:
    """The runtime surface a pod worker uses: one pod whose container ``app`` is in
    ``state``; ``kill_pod`` awaits ``while_killing`` (the containers stopping), and what
    the worker asks for is recorded."""

    node = "n1"
    volumes = None

    def __init__(self, pod: Pod, docker: FakeDocker, *, state: ContainerState) -> None:
        assert pod.metadata is not None
        assert pod.metadata.uid is not None
        self.docker = docker
        self.asked: list[str] = []
        self.while_killing: Any = None
        self.runtime = PodRuntimeStatus(
            uid=pod.metadata.uid,
            name="many",
            namespace="default",
            sandboxes=(SandboxStatus(id="s", attempt=0, state=SandboxState.READY, created_at=NOW),),
            containers=(
                ContainerStatus(id="app", name="app", state=state, created_at=NOW, sandbox_id="s"),
            ),
        )

    def events(self, *args: Any, **kwargs: Any) -> None:
        pass

    async def hook_target(self, *args: Any, **kwargs: Any) -> Any:
        return None

    async def get_pod_status(self, *, uid: str, name: str, namespace: str) -> PodRuntimeStatus:
        return self.runtime

    async def sync_pod(self, *args: Any, **kwargs: Any) -> PodSyncResult:
        return PodSyncResult()

    async def garbage_collect(self, *args: Any) -> list[str]:
        return []

    async def kill_pod(self, *args: Any, **kwargs: Any) -> PodSyncResult:
        self.asked.append("kill_pod")
        if self.while_killing is not None:
            await self.while_killing()
        return PodSyncResult()

    async def remove_pod(self, *, uid: str) -> list[str]:
        self.asked.append("remove_pod")
        return []

    def forget(self, cid: str) -> None:
        pass


class Lines:
    """An ``on_log`` sink that counts lines and says when the first came."""

    def __init__(self) -> None:
        self.count = 0
        self.first = anyio.Event()
        self._wanted = 0
        self._reached = anyio.Event()

    def __call__(self, pod: Pod, container: str, line: LogLine) -> None:
        self.count += 1
        self.first.set()
        if self.count >= self._wanted:
            self._reached.set()

    async def more(self, count: int) -> None:
        """Wait until ``count`` more lines have come."""
        self._wanted, self._reached = self.count + count, anyio.Event()
        await self._reached.wait()


async def test_a_stopped_pods_backlog_is_read_only_for_the_log_drain() -> None:
    pod = _pod()
    docker = Backlog()
    rm = FakeRuntime(pod, docker, state=ContainerState.RUNNING)
    lines = Lines()
    worker = PodWorker(rm, pod, on_log=lines)  # type: ignore[arg-type]
    worker.log_drain = 0.2
    stop = anyio.Event()
    with anyio.fail_after(ENDS_WITHIN):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, stop)
            await lines.first.wait()
            stop.set()
    assert rm.asked == ["kill_pod", "remove_pod"]
    assert docker.open_streams("logs") == 0


async def test_a_stopping_pods_output_is_shown_while_its_containers_stop() -> None:
    pod = _pod()
    docker = Backlog()
    rm = FakeRuntime(pod, docker, state=ContainerState.RUNNING)
    lines = Lines()
    shown_while_stopping: list[int] = []

    async def stopping() -> None:
        before = lines.count
        await lines.more(100)
        shown_while_stopping.append(lines.count - before)

    rm.while_killing = stopping
    worker = PodWorker(rm, pod, on_log=lines)  # type: ignore[arg-type]
    worker.log_drain = 0.0
    stop = anyio.Event()
    with anyio.fail_after(ENDS_WITHIN):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, stop)
            await lines.first.wait()
            stop.set()
    assert shown_while_stopping
    assert shown_while_stopping[0] >= 100


async def test_closed_output_is_not_followed_and_no_line_more_is_shown() -> None:
    pod = _pod()
    docker = Backlog()
    rm = FakeRuntime(pod, docker, state=ContainerState.RUNNING)
    stop = anyio.Event()
    output_closed = anyio.Event()
    seen: list[str] = []
    streams_while_stopping: list[int] = []

    def on_log(pod: Pod, container: str, line: LogLine) -> None:
        seen.append(line.text)
        output_closed.set()
        stop.set()

    async def stopping() -> None:
        await anyio.sleep(0.1)
        streams_while_stopping.append(docker.open_streams("logs"))

    rm.while_killing = stopping
    with anyio.fail_after(ENDS_WITHIN):
        outcomes = await run_pods(
            rm,  # type: ignore[arg-type]
            [pod],
            stop=stop,
            on_log=on_log,
            output_closed=output_closed,
        )
    assert seen == ["line 1"]
    assert streams_while_stopping == [0]
    assert outcomes[0].stopped
    assert rm.asked == ["kill_pod", "remove_pod"]


async def test_a_worker_told_to_stop_following_cancels_its_followers_at_once() -> None:
    pod = _pod()
    docker = Backlog()
    rm = FakeRuntime(pod, docker, state=ContainerState.RUNNING)
    lines = Lines()
    worker = PodWorker(rm, pod, on_log=lines)  # type: ignore[arg-type]
    stop = anyio.Event()
    with anyio.fail_after(ENDS_WITHIN):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, stop)
            await lines.first.wait()
            worker.stop_following()
            shown = lines.count
            stop.set()
    assert lines.count == shown
    assert docker.open_streams("logs") == 0


async def test_a_pod_that_ended_by_itself_has_all_of_its_output_shown() -> None:
    pod = _pod()
    docker = FakeDocker()
    labels = naming.pod_labels(node="n1", pod="many", namespace="default", uid="u")
    docker.add_container(id="app", labels=labels, state="exited")
    docker.log_lines["app"] = [LogLine(stream="stdout", text=f"line {i}") for i in range(5000)]
    rm = FakeRuntime(pod, docker, state=ContainerState.EXITED)
    lines = Lines()
    worker = PodWorker(rm, pod, on_log=lines)  # type: ignore[arg-type]
    worker.log_drain = 0.0
    with anyio.fail_after(ENDS_WITHIN):
        outcome = await worker.run(anyio.Event())
    assert not outcome.stopped
    assert lines.count == 5000


# -- the run command ---------------------------------------------------------------------------


def test_the_renderer_drops_pod_output_unformatted_once_stdout_is_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    printed: list[str] = []
    monkeypatch.setattr(output.out, "print", lambda text, **_: printed.append(text))
    renderer = run_command._Renderer(color=True)
    line = LogLine(stream="stdout", text="[bold]hello[/bold]")
    renderer.log(_pod(), "app", line)
    renderer.closed = True
    renderer.log(_pod(), "other", line)
    assert len(printed) == 1
    assert list(renderer.colors) == ["many/app"], "the second line was not even prefixed"


async def test_a_closed_stdout_closes_the_output_and_stops_the_run() -> None:
    session = run_command._Session(
        node=None,  # type: ignore[arg-type]
        config=None,  # type: ignore[arg-type]
        options=None,  # type: ignore[arg-type]
        pulls=None,  # type: ignore[arg-type]
    )
    session.stop, session.output_closed = anyio.Event(), anyio.Event()
    session.stdout_closed()
    assert session.closed_stdout
    assert session.renderer.closed
    assert session.output_closed.is_set()
    assert session.stop.is_set()
