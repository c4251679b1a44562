"""A pod worker looks at its pod again only when told of a change or when something is due.

``next_wake`` is the rule as a table; the worker tests show a pod that runs as it should
costs no Docker call, no status regeneration that changes anything and no file write
until it is poked."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from lightkube.models.core_v1 import (
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    Pod,
    PodStatus,
)
from worker_helpers import StubRuntime

from asynckubelet.manifests import load_manifests_text
from asynckubelet.node import runner
from asynckubelet.node.runner import PodWorker, next_wake
from asynckubelet.node.status_manager import StatusManager
from asynckubelet.node.worker_state import WorkerPolicy
from asynckubelet.runtime import backoff as backoff_mod
from asynckubelet.runtime import naming
from asynckubelet.runtime import types as rt
from asynckubelet.runtime.results import PodSyncResult
from asynckubelet.testing import FakeDocker

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def make_pod(extra: str = "", volumes: str = "") -> Pod:
    text = f"""
apiVersion: v1
kind: Pod
metadata: {{name: web}}
spec:
  {extra}
  containers: [{{name: app, image: busybox}}]
  {volumes}
"""
    return load_manifests_text(text, node_name="n1").pods[0]


def running() -> ContainerState:
    return ContainerState(running=ContainerStateRunning(startedAt=NOW))


def waiting(reason: str) -> ContainerState:
    return ContainerState(waiting=ContainerStateWaiting(reason=reason, message="m"))


def status(state: ContainerState, *, phase: str = "Running", start: datetime = NOW) -> PodStatus:
    return PodStatus(
        phase=phase,
        startTime=start,
        containerStatuses=[
            ContainerStatus(
                name="app", image="busybox", imageID="", ready=False, restartCount=0, state=state
            )
        ],
    )


def runtime(pod: Pod, *containers: rt.ContainerStatus) -> rt.PodRuntimeStatus:
    name = pod.metadata.name if pod.metadata else ""
    uid = pod.metadata.uid if pod.metadata else ""
    return rt.PodRuntimeStatus(
        uid=uid or "", name=name or "", namespace="default", containers=containers
    )


def exited(finished: datetime) -> rt.ContainerStatus:
    return rt.ContainerStatus(
        id="c1", name="app", state=rt.ContainerState.EXITED, created_at=NOW, finished_at=finished
    )


def wake(pod: Pod, st: PodStatus, rs: rt.PodRuntimeStatus, **kwargs: Any) -> float | None:
    args: dict[str, Any] = {
        "backoff": backoff_mod.Backoff(clock=lambda: NOW),
        "image_backoff": backoff_mod.Backoff(clock=lambda: NOW),
        "now": NOW,
    }
    args.update(kwargs)
    return next_wake(pod, st, rs, **args)


def test_a_running_pod_has_nothing_due() -> None:
    pod = make_pod()
    assert wake(pod, status(running()), runtime(pod)) is None


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_a_finished_pod_has_nothing_due(phase: str) -> None:
    pod = make_pod()
    assert wake(pod, status(waiting("ContainerCreating"), phase=phase), runtime(pod)) is None


def test_a_crash_looping_container_is_due_when_its_back_off_ends() -> None:
    pod = make_pod()
    uid = pod.metadata.uid if pod.metadata and pod.metadata.uid else ""
    backoff = backoff_mod.Backoff(clock=lambda: NOW)
    assert pod.spec is not None
    key = backoff_mod.crash_loop_key(pod_uid=uid, container=pod.spec.containers[0])
    backoff.next(key, event_time=NOW)
    died = NOW - timedelta(seconds=3)
    due = wake(
        pod,
        status(waiting(backoff_mod.CRASH_LOOP_BACK_OFF)),
        runtime(pod, exited(died)),
        backoff=backoff,
    )
    assert due == pytest.approx(7.0)


def test_a_back_off_the_latest_sync_decided_counts_though_the_status_is_older() -> None:
    pod = make_pod()
    uid = pod.metadata.uid if pod.metadata and pod.metadata.uid else ""
    backoff = backoff_mod.Backoff(clock=lambda: NOW)
    assert pod.spec is not None
    key = backoff_mod.crash_loop_key(pod_uid=uid, container=pod.spec.containers[0])
    backoff.next(key, event_time=NOW)
    died = NOW - timedelta(seconds=1)
    terminated = ContainerState(
        terminated=ContainerStateTerminated(exitCode=1, startedAt=died, finishedAt=died)
    )
    due = wake(
        pod,
        status(terminated),
        runtime(pod, exited(died)),
        waiting={"app": backoff_mod.CRASH_LOOP_BACK_OFF},
        backoff=backoff,
    )
    assert due == pytest.approx(9.0)


def test_an_image_in_pull_back_off_is_due_when_the_back_off_ends() -> None:
    pod = make_pod()
    uid = pod.metadata.uid if pod.metadata and pod.metadata.uid else ""
    images = backoff_mod.Backoff(clock=lambda: NOW - timedelta(seconds=4))
    images.next(backoff_mod.image_pull_key(pod_uid=uid, image="busybox"), event_time=NOW)
    due = wake(
        pod, status(waiting(backoff_mod.IMAGE_PULL_BACK_OFF)), runtime(pod), image_backoff=images
    )
    assert due == pytest.approx(6.0)


def test_a_container_waiting_for_another_reason_is_looked_at_again_soon() -> None:
    pod = make_pod()
    due = wake(pod, status(waiting("ContainerCreating"), phase="Pending"), runtime(pod))
    assert due == runner.WAITING_RETRY


def test_a_container_waiting_for_a_running_init_container_has_nothing_due() -> None:
    pod = make_pod()
    init = rt.ContainerStatus(id="i1", name="init", state=rt.ContainerState.RUNNING, created_at=NOW)
    due = wake(pod, status(waiting("PodInitializing"), phase="Pending"), runtime(pod, init))
    assert due is None


def test_the_active_deadline_is_due() -> None:
    pod = make_pod(extra="activeDeadlineSeconds: 30")
    due = wake(pod, status(running(), start=NOW - timedelta(seconds=10)), runtime(pod))
    assert due == pytest.approx(20.0)


def test_a_limited_disk_empty_dir_is_checked_when_the_node_has_volumes() -> None:
    pod = make_pod(volumes="volumes: [{name: v, emptyDir: {sizeLimit: 1Mi}}]")
    assert (
        wake(pod, status(running()), runtime(pod), eviction_check=True) == runner.EVICTION_INTERVAL
    )
    assert wake(pod, status(running()), runtime(pod), eviction_check=False) is None


def test_a_pod_with_a_token_volume_is_synced_for_the_refresh() -> None:
    token = (
        "volumes: [{name: t, projected: {sources: "
        "[{serviceAccountToken: {path: token, expirationSeconds: 3600}}]}}]"
    )
    pod = make_pod(volumes=token)
    assert wake(pod, status(running()), runtime(pod)) == runner.VOLUME_RESYNC


def test_the_earliest_due_thing_wins() -> None:
    pod = make_pod(extra="activeDeadlineSeconds: 30")
    due = wake(pod, status(waiting("ContainerCreating"), start=NOW), runtime(pod))
    assert due == runner.WAITING_RETRY


# -- the worker -------------------------------------------------------------------------


class SteadyRuntime(StubRuntime):
    """The runtime manager's surface a pod worker uses, for a pod whose one container runs
    and stays running: every read answers the same."""

    def __init__(self, pod: Pod) -> None:
        self.pod = pod
        self.reads = 0
        self.syncs = 0

    async def get_pod_status(self, *, uid: str, name: str, namespace: str) -> rt.PodRuntimeStatus:
        self.reads += 1
        assert self.pod.spec is not None
        container = self.pod.spec.containers[0]
        sandbox = rt.SandboxStatus(
            id="s1", attempt=0, state=rt.SandboxState.READY, created_at=NOW, ip=None
        )
        app = rt.ContainerStatus(
            id="c1",
            name="app",
            state=rt.ContainerState.RUNNING,
            created_at=NOW,
            started_at=NOW,
            image="busybox",
            hash=naming.hash_container(container),
            sandbox_id="s1",
        )
        return rt.PodRuntimeStatus(
            uid=uid, name=name, namespace=namespace, sandboxes=(sandbox,), containers=(app,)
        )

    async def sync_pod(self, *args: Any, **kwargs: Any) -> PodSyncResult:
        self.syncs += 1
        return PodSyncResult()


@pytest.mark.anyio
async def test_a_running_pod_costs_nothing_until_it_is_poked(tmp_path: Path) -> None:
    pod = make_pod()
    rm = SteadyRuntime(pod)
    manager = StatusManager(state_dir=tmp_path)

    def on_status(pod: Pod, status: PodStatus) -> None:
        manager.set(pod, status)

    worker = PodWorker(
        rm,
        pod,
        on_status=on_status,
        policy=WorkerPolicy(exit_when_terminal=False, own_events=False),
    )
    stop = anyio.Event()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, stop)
            await anyio.wait_all_tasks_blocked()
            first = (rm.reads, manager.writes, manager.version)
            assert worker.next_wake is None
            assert worker.prober.workers == {}

            worker.poke()
            await anyio.wait_all_tasks_blocked()
            second = (rm.reads, manager.writes, manager.version)
            stop.set()
    assert first == (1, 1, 1)
    assert second == (2, 1, 1)


def probed_pod() -> Pod:
    text = """
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - {name: app, image: busybox, readinessProbe: {exec: {command: ["true"]}, periodSeconds: 10}}
"""
    return load_manifests_text(text, node_name="n1").pods[0]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("pod", "on_log", "tasks"),
    [
        (make_pod, False, []),
        (probed_pod, False, ["prober default/web"]),
        (make_pod, True, ["logs default/web"]),
    ],
    ids=["a node's pod without probes", "with a probe", "with its output read"],
)
async def test_a_pod_worker_hosts_probers_and_log_followers_only_when_there_is_work_for_them(
    pod: Any, on_log: bool, tasks: list[str]
) -> None:
    made = pod()
    rm = SteadyRuntime(made)
    rm.docker = FakeDocker()
    worker = PodWorker(
        rm,
        made,
        on_status=lambda pod, status: None,
        on_log=(lambda *args: None) if on_log else None,
        policy=WorkerPolicy(exit_when_terminal=False, own_events=False),
    )
    stop = anyio.Event()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, stop)
            await anyio.wait_all_tasks_blocked()
            names = {t.get_name() for t in asyncio.all_tasks()}
            stop.set()
    hosts = [n for n in ("prober default/web", "logs default/web") if n in names]
    assert hosts == tasks


def test_an_image_pull_back_off_the_status_does_not_show_yet_is_shown_at_the_next_look() -> None:
    pod = make_pod()
    uid = pod.metadata.uid if pod.metadata and pod.metadata.uid else ""
    images = backoff_mod.Backoff(clock=lambda: NOW - timedelta(seconds=4))
    images.next(backoff_mod.image_pull_key(pod_uid=uid, image="busybox"), event_time=NOW)
    due = wake(
        pod,
        status(waiting("ErrImagePull")),
        runtime(pod),
        waiting={"app": backoff_mod.IMAGE_PULL_BACK_OFF},
        image_backoff=images,
    )
    assert due == runner.WAITING_RETRY
