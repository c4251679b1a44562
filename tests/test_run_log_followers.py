"""The log followers of a run never keep it alive reading a backlog: a stopped pod's
output is shown while its containers stop, then read for a bounded time only; output
nobody reads any more (a closed stdout) is not followed at all; a pod that ended by itself
has all of its output shown. The run command drops pod output once stdout is closed,
without formatting it."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest
from lightkube.models.core_v1 import Pod
from worker_helpers import FakeRuntime, pod_status, worker_pod

from asynckubelet.cli import output
from asynckubelet.cli.commands import run as run_command
from asynckubelet.cli.renderer import PodRenderer
from asynckubelet.docker import LogLine
from asynckubelet.node.foreground import run_pods
from asynckubelet.node.runner import PodWorker
from asynckubelet.runtime import naming
from asynckubelet.runtime.types import ContainerState
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio

ENDS_WITHIN = 5.0
"""Seconds within which each run here ends; the hang these tests catch never ends."""


def _running_app(docker: FakeDocker, *, state: str) -> FakeRuntime:
    """The pod ``many`` whose container ``app`` is in ``state`` on ``docker``."""
    labels = naming.pod_labels(node="n1", pod="many", namespace="default", uid="u")
    docker.add_container(id="app", labels=labels, state=state)
    app = ContainerState.RUNNING if state == "running" else ContainerState.EXITED
    return FakeRuntime(pod_status(worker_pod("many"), app=app, container_id="app"), docker)


def _backlog() -> tuple[FakeDocker, FakeRuntime]:
    """An engine whose container ``app`` printed more than a follower can ever read (its
    log stream never ends), and the runtime of the pod running it."""
    docker = FakeDocker()
    rm = _running_app(docker, state="running")
    docker.endless_logs.add("app")
    return docker, rm


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


async def _stop_after_the_first_line(
    worker: PodWorker, lines: Lines, *, first: Callable[[], None] = lambda: None
) -> int:
    """Run ``worker`` until its first line is shown, call ``first``, then stop it; the
    lines shown when it was told to stop."""
    stop = anyio.Event()
    with anyio.fail_after(ENDS_WITHIN):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, stop)
            await lines.first.wait()
            first()
            shown = lines.count
            stop.set()
    return shown


async def test_a_stopped_pods_backlog_is_read_only_for_the_log_drain() -> None:
    docker, rm = _backlog()
    lines = Lines()
    worker = PodWorker(rm, worker_pod("many"), on_log=lines)
    worker.log_drain = 0.2
    await _stop_after_the_first_line(worker, lines)
    assert rm.asked == ["kill_pod", "remove_pod"]
    assert docker.open_streams("logs") == 0


async def test_a_stopping_pods_output_is_shown_while_its_containers_stop() -> None:
    _, rm = _backlog()
    lines = Lines()
    shown_while_stopping: list[int] = []

    async def stopping() -> None:
        before = lines.count
        await lines.more(100)
        shown_while_stopping.append(lines.count - before)

    rm.while_killing = stopping
    worker = PodWorker(rm, worker_pod("many"), on_log=lines)
    worker.log_drain = 0.0
    await _stop_after_the_first_line(worker, lines)
    assert shown_while_stopping
    assert shown_while_stopping[0] >= 100


async def test_closed_output_is_not_followed_and_no_line_more_is_shown() -> None:
    docker, rm = _backlog()
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
            rm,
            [worker_pod("many")],
            stop=stop,
            on_log=on_log,
            output_closed=output_closed,
        )
    assert seen == ["line 1"]
    assert streams_while_stopping == [0]
    assert outcomes[0].stopped
    assert rm.asked == ["kill_pod", "remove_pod"]


async def test_a_worker_told_to_stop_following_cancels_its_followers_at_once() -> None:
    docker, rm = _backlog()
    lines = Lines()
    worker = PodWorker(rm, worker_pod("many"), on_log=lines)
    shown = await _stop_after_the_first_line(worker, lines, first=worker.stop_following)
    assert lines.count == shown
    assert docker.open_streams("logs") == 0


async def test_a_pod_that_ended_by_itself_has_all_of_its_output_shown() -> None:
    docker = FakeDocker()
    rm = _running_app(docker, state="exited")
    docker.log_lines["app"] = [LogLine(stream="stdout", text=f"line {i}") for i in range(5000)]
    lines = Lines()
    worker = PodWorker(rm, worker_pod("many"), on_log=lines)
    worker.log_drain = 0.0
    with anyio.fail_after(ENDS_WITHIN):
        outcome = await worker.run(anyio.Event())
    assert not outcome.stopped
    assert lines.count == 5000


class RemovingRuntime(FakeRuntime):
    """Removal takes the pod's containers, and their output, from the engine."""

    async def remove_pod(self, *, uid: str) -> list[str]:
        self.asked.append("remove_pod")
        assert self.docker is not None
        await self.docker.remove_container("app", force=True)
        return ["app"]


async def test_a_follower_that_opens_late_still_reads_a_finished_pods_output() -> None:
    docker = FakeDocker()
    labels = naming.pod_labels(node="n1", pod="many", namespace="default", uid="u")
    docker.add_container(id="app", labels=labels, state="exited")
    docker.log_lines["app"] = [LogLine(stream="stdout", text="token", newline=False)]
    rm = RemovingRuntime(
        pod_status(worker_pod("many"), app=ContainerState.EXITED, container_id="app"), docker
    )
    opened = docker.hold("logs", target="app")
    shown: list[str] = []
    worker = PodWorker(
        rm,
        worker_pod("many"),
        on_log=lambda pod, container, line: shown.append(line.text),
    )
    with anyio.fail_after(ENDS_WITHIN):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, anyio.Event())
            await anyio.wait_all_tasks_blocked()
            removed_before_read = "remove_pod" in rm.asked
            opened.set()
    assert not removed_before_read
    assert shown == ["token"]
    assert rm.asked[-1] == "remove_pod"


# -- the run command ---------------------------------------------------------------------------


def test_the_renderer_drops_pod_output_unformatted_once_stdout_is_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    printed: list[str] = []
    monkeypatch.setattr(output.out, "print", lambda text, **_: printed.append(text))
    renderer = PodRenderer(color=True)
    line = LogLine(stream="stdout", text="[bold]hello[/bold]")
    renderer.log(worker_pod("many"), "app", line)
    renderer.closed = True
    renderer.log(worker_pod("many"), "other", line)
    assert len(printed) == 1
    assert list(renderer.colors) == ["many/app"], "the second line was not even prefixed"


async def test_a_closed_stdout_closes_the_output_and_stops_the_run() -> None:
    session = run_command._Session(
        node=None,  # type: ignore[arg-type]
        config=None,  # type: ignore[arg-type]
        pulls=None,  # type: ignore[arg-type]
    )
    session.stop, session.output_closed = anyio.Event(), anyio.Event()
    session.stdout_closed()
    assert session.closed_stdout
    assert session.renderer.closed
    assert session.output_closed.is_set()
    assert session.stop.is_set()
