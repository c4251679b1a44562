"""The end of a run: a pod's containers are removed together (each sandbox after its
network), a pod seen ended by itself is removed without another look, a pod whose
containers have all ended is removed without a graceful stop, and a container's output is
followed from its start event."""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
from lightkube.models.core_v1 import Pod, PodStatus
from worker_helpers import FakeRuntime, pod_status, worker_pod

from asynckubelet import errors
from asynckubelet.docker import LogLine
from asynckubelet.node.runner import PodWorker, RunOptions
from asynckubelet.runtime import naming
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from asynckubelet.runtime.types import ContainerState, PodRuntimeStatus
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio

UID = "uid-1"


def _labels(kind: str, container: str = "") -> dict[str, str]:
    labels = {
        **naming.pod_labels(node="n1", pod="web", namespace="default", uid=UID),
        naming.LABEL_TYPE: kind,
    }
    if container:
        labels[naming.LABEL_CONTAINER_NAME] = container
    return labels


def _pod_in(docker: FakeDocker) -> None:
    docker.add_container(id="sandbox", labels=_labels(naming.TYPE_SANDBOX), state="running")
    for name in ("a", "b", "c"):
        docker.add_container(id=name, labels=_labels(naming.TYPE_CONTAINER, name), state="exited")


class Recorder:
    """A network plugin that notes its teardowns in the engine's call log."""

    def __init__(self, docker: FakeDocker) -> None:
        self.docker = docker

    async def teardown_pod(self, *, sandbox_id: str) -> None:
        await self.docker._enter("network teardown", sandbox_id)


class CountingDocker(FakeDocker):
    """Sets ``asked`` once ``remove_container`` has been called ``expected`` times."""

    def __init__(self, expected: int) -> None:
        super().__init__()
        self.expected = expected
        self.asked = anyio.Event()

    async def remove_container(self, container_id: str, **options: Any) -> None:
        if self.count("remove_container") + 1 >= self.expected:
            self.asked.set()
        await super().remove_container(container_id, **options)


async def test_a_pods_containers_are_removed_together() -> None:
    docker = CountingDocker(expected=4)
    _pod_in(docker)
    held = docker.hold("remove_container", target="a")
    async with (
        RuntimeManager(RuntimeConfig(node_name="n1"), docker=docker) as rm,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(functools.partial(rm.remove_pod, uid=UID))
        try:
            with anyio.move_on_after(5):
                await docker.asked.wait()
            removed_while_a_was_held = set(docker.containers) == {"a"}
        finally:
            held.set()
    assert removed_while_a_was_held
    assert docker.containers == {}


async def test_each_sandbox_is_removed_after_its_network() -> None:
    docker = FakeDocker()
    _pod_in(docker)
    async with RuntimeManager(RuntimeConfig(node_name="n1"), docker=docker) as rm:
        rm.network = Recorder(docker)  # type: ignore[assignment]
        await rm.remove_pod(uid=UID)
    order = [c.method for c in docker.calls if c.target == "sandbox"]
    assert order == ["network teardown", "remove_container"]


async def test_a_removal_that_fails_leaves_the_others_done_and_is_raised() -> None:
    docker = FakeDocker()
    _pod_in(docker)
    docker.fail("remove_container", errors.DockerAPIError("engine said no"), target="b")
    async with RuntimeManager(RuntimeConfig(node_name="n1"), docker=docker) as rm:
        with pytest.raises(errors.DockerAPIError, match="engine said no"):
            await rm.remove_pod(uid=UID)
    assert set(docker.containers) == {"b"}


# -- the pod worker --------------------------------------------------------------------------


class LookingRuntime(FakeRuntime):
    """Records each look at the pod (``look``) too."""

    async def get_pod_status(self, *, uid: str, name: str, namespace: str) -> PodRuntimeStatus:
        self.asked.append("look")
        return await super().get_pod_status(uid=uid, name=name, namespace=namespace)


async def test_a_pod_seen_ended_by_itself_is_removed_without_another_look() -> None:
    docker = FakeDocker()
    labels = naming.pod_labels(node="n1", pod="web", namespace="default", uid="u")
    docker.add_container(id="app", labels=labels, state="exited")
    docker.log_lines["app"] = [LogLine(stream="stdout", text="done")]
    rm = LookingRuntime(
        pod_status(worker_pod(), app=ContainerState.EXITED, container_id="app"), docker
    )
    worker = PodWorker(rm, worker_pod(), on_log=lambda pod, container, line: None)
    with anyio.fail_after(5):
        await worker.run(anyio.Event())
    assert rm.asked == ["look", "remove_pod"]


async def test_a_pod_killed_at_its_deadline_is_looked_at_again_before_its_removal() -> None:
    docker = FakeDocker()
    pod = worker_pod()
    assert pod.spec is not None
    pod.spec.activeDeadlineSeconds = 1
    pod.status = PodStatus(startTime=datetime.now(UTC) - timedelta(seconds=60))
    rm = LookingRuntime(pod_status(pod, app=ContainerState.RUNNING), docker)

    async def killed() -> None:
        rm.runtime = pod_status(pod, app=ContainerState.EXITED)

    rm.while_killing = killed
    worker = PodWorker(rm, pod)
    with anyio.fail_after(5):
        await worker.run(anyio.Event())
    assert rm.asked == ["look", "kill_pod", "look", "remove_pod"]


@pytest.mark.parametrize(
    ("app", "keep", "asked"),
    [
        (ContainerState.EXITED, False, ["remove_pod"]),
        (ContainerState.EXITED, True, ["kill_pod"]),
        (ContainerState.RUNNING, False, ["kill_pod", "remove_pod"]),
    ],
)
async def test_a_stopped_worker_stops_gracefully_only_what_runs_or_is_kept(
    app: ContainerState, keep: bool, asked: list[str]
) -> None:
    pod = worker_pod()
    rm = FakeRuntime(pod_status(pod, app=app))
    worker = PodWorker(rm, pod, options=RunOptions(keep=keep))
    stop = anyio.Event()
    stop.set()
    await worker.run(stop)
    assert rm.asked == asked


async def test_a_containers_output_is_followed_from_its_start_event() -> None:
    pod = worker_pod()
    assert pod.metadata is not None
    assert pod.metadata.uid is not None
    docker = FakeDocker()
    labels = _labels(naming.TYPE_CONTAINER, "app")
    docker.add_container(id="app-1", labels=labels, state="running")
    docker.log_lines["app-1"] = [LogLine(stream="stdout", text="hello")]
    docker.event_streams.append(
        [{"Action": "start", "Actor": {"ID": "app-1", "Attributes": labels}}]
    )
    # Status reads never show the container: only the event can have started the follower.
    empty = PodRuntimeStatus(uid=pod.metadata.uid, name="web", namespace="default")
    rm = FakeRuntime(empty, docker)
    seen: list[tuple[str, str]] = []
    shown = anyio.Event()

    def on_log(pod: Pod, container: str, line: LogLine) -> None:
        seen.append((container, line.text))
        shown.set()

    worker = PodWorker(rm, pod, on_log=on_log)
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run, stop)
        with anyio.fail_after(5):
            await shown.wait()
        docker.exit("app-1")
        stop.set()
    assert seen == [("app", "hello")]
