"""The client commands' operations on a node's pods, over a fake runtime: deleting pods (by
the daemon or by this process) and waiting until they are gone, removing the manifests
that hold them, finding the container instance a command acts on, following a container
to its next instance, and waiting until applied pods are Ready."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import builders
import pytest
from lightkube.models.core_v1 import (
    Container,
    ContainerStateTerminated,
    ContainerStateWaiting,
    Pod,
    PodStatus,
)
from lightkube.models.core_v1 import ContainerState as V1ContainerState
from lightkube.models.core_v1 import ContainerStatus as V1ContainerStatus

from asynckubelet import errors
from asynckubelet.node import operations
from asynckubelet.node.operations import PodKey
from asynckubelet.node.status import gated_status, generate
from asynckubelet.runtime import naming
from asynckubelet.runtime.types import (
    ContainerState,
    ContainerStatus,
    PodRuntimeStatus,
    SandboxState,
    SandboxStatus,
)

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WEB: PodKey = ("default", "web")
OTHER: PodKey = ("default", "other")


class FakeRuntime:
    """The runtime calls the operations make, over a table of pods on Docker.

    ``vanish_after`` makes a pod disappear from Docker after that many listings (a daemon
    removing it); ``statuses`` gives a pod's status reads in turn, the last one repeated.
    """

    def __init__(
        self,
        pods: dict[str, PodKey] | None = None,
        *,
        vanish_after: dict[str, int] | None = None,
        statuses: dict[str, list[PodRuntimeStatus]] | None = None,
    ) -> None:
        self.pods = dict(pods or {})
        self.vanish_after = dict(vanish_after or {})
        self.statuses = {uid: list(s) for uid, s in (statuses or {}).items()}
        self.killed: list[tuple[str, float | None]] = []
        self.removed: list[str] = []

    async def list_pod_uids(self) -> dict[str, tuple[str, str]]:
        for uid, left in list(self.vanish_after.items()):
            if left <= 0:
                self.pods.pop(uid, None)
            self.vanish_after[uid] = left - 1
        return dict(self.pods)

    async def get_pod_status(self, *, uid: str, name: str, namespace: str) -> PodRuntimeStatus:
        reads = self.statuses.get(uid)
        if not reads:
            return PodRuntimeStatus(uid=uid, name=name, namespace=namespace)
        return reads.pop(0) if len(reads) > 1 else reads[0]

    async def kill_pod(
        self,
        pod: Pod | None = None,
        status: PodRuntimeStatus | None = None,
        *,
        grace_period: float | None = None,
    ) -> None:
        assert status is not None
        self.killed.append((status.uid, grace_period))

    async def remove_pod(self, *, uid: str) -> list[str]:
        self.removed.append(uid)
        self.pods.pop(uid, None)
        return []


def pod(
    name: str = "web",
    *,
    uid: str = "u1",
    containers: tuple[str, ...] = ("app",),
    image: str = "busybox",
    policy: str = "Always",
) -> Pod:
    ctrs = [builders.container(c, image) for c in containers]
    return builders.pod(name, uid=uid, containers=ctrs, restartPolicy=policy)


def instance(
    cid: str,
    *,
    name: str = "app",
    state: ContainerState = ContainerState.RUNNING,
    exit_code: int = 0,
    spec: Container | None = None,
) -> ContainerStatus:
    return ContainerStatus(
        id=cid,
        name=name,
        state=state,
        created_at=T0,
        started_at=None if state is ContainerState.CREATED else T0,
        finished_at=T0 if state is ContainerState.EXITED else None,
        exit_code=exit_code,
        hash=naming.hash_container(spec) if spec is not None else "",
    )


def runtime_status(subject: Pod, *containers: ContainerStatus) -> PodRuntimeStatus:
    assert subject.metadata is not None
    return PodRuntimeStatus(
        uid=subject.metadata.uid or "",
        name=subject.metadata.name or "",
        namespace="default",
        sandboxes=(
            SandboxStatus(
                id="s1", attempt=0, state=SandboxState.READY, created_at=T0, ip="10.0.0.2"
            ),
        ),
        containers=containers,
    )


def running(subject: Pod) -> PodRuntimeStatus:
    """The pod running its own spec: each container one running instance of it."""
    assert subject.spec is not None
    return runtime_status(
        subject, *(instance(f"c-{c.name}", name=c.name, spec=c) for c in subject.spec.containers)
    )


def as_the_node_shows(subject: Pod, status: PodRuntimeStatus | PodStatus) -> Pod:
    shown = copy.deepcopy(subject)
    if isinstance(status, PodStatus):
        shown.status = status
    else:
        shown.status = generate(shown, status, now=T0)
    return shown


# -- delete_pods -----------------------------------------------------------------------------


async def test_without_a_daemon_the_pods_are_stopped_and_removed_here() -> None:
    runtime = FakeRuntime({"u1": WEB, "u2": OTHER})
    left = await operations.delete_pods(runtime, pods={WEB}, daemon_running=False, timeout=10)
    assert left == set()
    assert (runtime.killed, runtime.removed) == ([("u1", None)], ["u1"])
    assert runtime.pods == {"u2": OTHER}


async def test_with_a_daemon_the_pods_are_left_to_it_and_waited_for() -> None:
    runtime = FakeRuntime({"u1": WEB}, vanish_after={"u1": 2})
    left = await operations.delete_pods(
        runtime, pods={WEB}, daemon_running=True, timeout=10, poll_interval=0
    )
    assert left == set()
    assert (runtime.killed, runtime.removed) == ([], [])


async def test_a_grace_period_with_a_daemon_stops_the_pods_here_and_leaves_removal_to_it() -> None:
    runtime = FakeRuntime({"u1": WEB}, vanish_after={"u1": 2})
    left = await operations.delete_pods(
        runtime, pods={WEB}, daemon_running=True, grace_period=1, timeout=10, poll_interval=0
    )
    assert left == set()
    assert (runtime.killed, runtime.removed) == ([("u1", 1)], [])


async def test_the_pods_still_there_when_the_timeout_ends_are_returned() -> None:
    runtime = FakeRuntime({"u1": WEB, "u2": OTHER}, vanish_after={"u2": 0})
    left = await operations.delete_pods(
        runtime, pods={WEB, OTHER}, daemon_running=True, timeout=0.05, poll_interval=0.01
    )
    assert left == {WEB}


async def test_a_pod_docker_does_not_hold_is_not_waited_for() -> None:
    runtime = FakeRuntime({"u2": OTHER})
    left = await operations.delete_pods(runtime, pods={WEB}, daemon_running=False, timeout=None)
    assert left == set()
    assert (runtime.killed, runtime.removed, runtime.pods) == ([], [], {"u2": OTHER})


# -- find_container and next_instance --------------------------------------------------------


async def test_the_current_instance_of_the_named_container_is_found() -> None:
    subject = pod(containers=("app", "side"))
    runtime = FakeRuntime(statuses={"u1": [runtime_status(subject, instance("c2", name="side"))]})
    notices: list[str] = []
    target = await operations.find_container(
        runtime,
        [pod("other", uid="u2"), subject],
        namespace="default",
        name="web",
        container="side",
        on_notice=notices.append,
    )
    assert (target.container, target.container_id, notices) == ("side", "c2", [])


async def test_the_default_container_is_chosen_with_kubectls_notice() -> None:
    subject = pod(containers=("app", "side"))
    runtime = FakeRuntime(statuses={"u1": [runtime_status(subject, instance("c1"))]})
    notices: list[str] = []
    target = await operations.find_container(
        runtime,
        [subject],
        namespace="default",
        name="web",
        container=None,
        on_notice=notices.append,
    )
    assert (target.container, target.container_id) == ("app", "c1")
    assert notices == ['Defaulted container "app" out of: app, side']


async def test_previous_finds_the_dead_instance_before_the_current_one() -> None:
    subject = pod()
    status = runtime_status(
        subject, instance("c2"), instance("c1", state=ContainerState.EXITED, exit_code=1)
    )
    runtime = FakeRuntime(statuses={"u1": [status]})
    target = await operations.find_container(
        runtime, [subject], namespace="default", name="web", container=None, previous=True
    )
    assert target.container_id == "c1"


async def test_a_pod_that_is_not_there_is_not_found() -> None:
    with pytest.raises(errors.NotFound, match='pods "web" not found'):
        await operations.find_container(
            FakeRuntime(), [], namespace="default", name="web", container=None
        )


async def test_the_next_instance_is_the_first_new_one_that_started() -> None:
    subject = pod()
    reads = [
        runtime_status(subject, instance("c1", state=ContainerState.EXITED, exit_code=1)),
        runtime_status(subject, instance("c-app", state=ContainerState.CREATED), instance("c1")),
        runtime_status(subject, instance("c2"), instance("c1")),
    ]
    runtime = FakeRuntime(statuses={"u1": reads})
    found = await operations.next_instance(
        runtime, pod=subject, container="app", seen={"c1"}, poll_interval=0
    )
    assert found == "c2"


@pytest.mark.parametrize(("policy", "exit_code"), [("Never", 1), ("Never", 0), ("OnFailure", 0)])
async def test_there_is_no_next_instance_when_the_policy_leaves_the_container_exited(
    policy: str, exit_code: int
) -> None:
    subject = pod(policy=policy)
    exited = instance("c1", state=ContainerState.EXITED, exit_code=exit_code)
    runtime = FakeRuntime(statuses={"u1": [runtime_status(subject, exited)]})
    found = await operations.next_instance(runtime, pod=subject, container="app", seen={"c1"})
    assert found is None


async def test_there_is_no_next_instance_once_the_pods_containers_are_gone() -> None:
    subject = pod()
    runtime = FakeRuntime(statuses={"u1": [runtime_status(subject)]})
    assert await operations.next_instance(runtime, pod=subject, container="app", seen=()) is None


# -- wait_until_ready ------------------------------------------------------------------------


async def wait(
    applied: list[Pod],
    shown: list[Pod],
    runtime: FakeRuntime,
    *,
    timeout: float = 10,
    node_running: Callable[[], bool] = lambda: True,
    seen: dict[str, Any] | None = None,
) -> None:
    record = seen if seen is not None else {}

    async def read() -> list[Pod]:
        return shown

    await operations.wait_until_ready(
        runtime,
        pods=applied,
        read_pods=read,
        node_running=node_running,
        timeout=timeout,
        on_ready=lambda p: record.setdefault("ready", []).append(p.metadata and p.metadata.name),
        on_waiting=lambda reasons: record.setdefault("waiting", []).append(dict(reasons)),
        poll_interval=0.01,
    )


async def test_a_ready_pod_on_the_applied_spec_ends_the_wait_and_is_reported() -> None:
    subject = pod()
    runtime = FakeRuntime(statuses={"u1": [running(subject)]})
    seen: dict[str, Any] = {}
    await wait([subject], [as_the_node_shows(subject, running(subject))], runtime, seen=seen)
    assert seen == {"ready": ["web"]}


async def test_a_succeeded_pod_ends_the_wait_unreported() -> None:
    subject = pod(policy="Never")
    done = runtime_status(subject, instance("c1", state=ContainerState.EXITED, spec=None))
    shown = as_the_node_shows(subject, done)
    assert shown.status is not None
    assert shown.status.phase == "Succeeded"
    seen: dict[str, Any] = {}
    await wait([subject], [shown], FakeRuntime(), seen=seen)
    assert seen == {}


async def test_a_pod_the_node_has_not_seen_times_out_saying_so() -> None:
    seen: dict[str, Any] = {}
    with pytest.raises(errors.PodError) as caught:
        await wait([pod()], [], FakeRuntime(), timeout=0.05, seen=seen)
    assert (
        str(caught.value) == "timed out after 0.05s waiting for pod/web: not seen by the node yet"
    )
    assert seen["waiting"][0] == {WEB: "not seen by the node yet"}


async def test_a_pod_the_node_runs_with_another_spec_is_not_seen_yet() -> None:
    old, new = pod(image="busybox:1"), pod(image="busybox:2")
    runtime = FakeRuntime(statuses={"u1": [running(old)]})
    with pytest.raises(errors.PodError, match="pod/web: not seen by the node yet"):
        await wait([new], [as_the_node_shows(old, running(old))], runtime, timeout=0.05)


async def test_a_ready_pod_whose_containers_run_an_older_spec_is_waited_for() -> None:
    subject = pod()
    assert subject.spec is not None
    stale = runtime_status(subject, instance("c1", spec=Container(name="app", image="old")))
    runtime = FakeRuntime(statuses={"u1": [stale]})
    seen: dict[str, Any] = {}
    with pytest.raises(errors.PodError, match=r"waiting for pod/web: Running"):
        await wait([subject], [as_the_node_shows(subject, stale)], runtime, timeout=0.05, seen=seen)
    assert "ready" not in seen


async def test_a_ready_status_about_the_replaced_instance_is_waited_past() -> None:
    subject = pod()
    assert subject.spec is not None
    old = runtime_status(subject, instance("c1", spec=Container(name="app", image="old")))
    new = running(subject)
    runtime = FakeRuntime(statuses={"u1": [new]})
    seen: dict[str, Any] = {}
    with pytest.raises(errors.PodError, match=r"the edited containers are not running yet"):
        await wait([subject], [as_the_node_shows(subject, old)], runtime, timeout=0.05, seen=seen)
    assert "ready" not in seen


async def test_an_applied_instance_created_but_not_started_is_waited_for() -> None:
    subject = pod()
    assert subject.spec is not None
    created = runtime_status(
        subject, instance("c-app", state=ContainerState.CREATED, spec=subject.spec.containers[0])
    )
    shown = as_the_node_shows(subject, running(subject))
    runtime = FakeRuntime(statuses={"u1": [created]})
    seen: dict[str, Any] = {}
    with pytest.raises(errors.PodError, match=r"the edited containers are not running yet"):
        await wait([subject], [shown], runtime, timeout=0.05, seen=seen)
    assert "ready" not in seen


async def test_a_failed_pod_ends_the_wait_with_its_state() -> None:
    subject = pod(policy="Never")
    failed = runtime_status(subject, instance("c1", state=ContainerState.EXITED, exit_code=3))
    with pytest.raises(errors.PodError, match=r"pod/web failed: Error; app: exited 3"):
        await wait([subject], [as_the_node_shows(subject, failed)], FakeRuntime())


async def test_a_scheduling_gated_pod_ends_the_wait_saying_how_it_starts() -> None:
    subject = pod()
    shown = as_the_node_shows(subject, gated_status(subject, now=T0))
    with pytest.raises(
        errors.PodError,
        match=r"pod/web is SchedulingGated \(.*\); it starts once spec\.schedulingGates is",
    ):
        await wait([subject], [shown], FakeRuntime())


async def test_the_wait_ends_when_the_node_stops() -> None:
    with pytest.raises(errors.RuntimeUnavailable, match="the node stopped while waiting"):
        await wait([pod()], [], FakeRuntime(), node_running=lambda: False)


async def test_the_wait_reports_each_pod_still_waited_for() -> None:
    ready, late = pod(), pod("late", uid="u2")
    runtime = FakeRuntime(statuses={"u1": [running(ready)]})
    seen: dict[str, Any] = {}
    with pytest.raises(errors.PodError, match=r"waiting for pod/late: not seen by the node yet$"):
        await wait(
            [ready, late],
            [as_the_node_shows(ready, running(ready))],
            runtime,
            timeout=0.05,
            seen=seen,
        )
    assert seen["ready"] == ["web"]
    assert seen["waiting"][-1] == {("default", "late"): "not seen by the node yet"}


async def test_a_crash_loop_past_max_restarts_ends_the_wait_with_its_last_log_line() -> None:
    subject = pod()
    shown = as_the_node_shows(
        subject,
        PodStatus(
            phase="Running",
            containerStatuses=[
                V1ContainerStatus(
                    name="app",
                    image="busybox",
                    imageID="",
                    ready=False,
                    restartCount=2,
                    state=V1ContainerState(
                        waiting=ContainerStateWaiting(reason="CrashLoopBackOff", message="back-off")
                    ),
                    lastState=V1ContainerState(
                        terminated=ContainerStateTerminated(exitCode=4, reason="Error")
                    ),
                )
            ],
        ),
    )
    asked: list[tuple[PodKey, str]] = []

    async def last_line(key: PodKey, container: str) -> str:
        asked.append((key, container))
        return "no config"

    async def read() -> list[Pod]:
        return [shown]

    with pytest.raises(errors.PodError) as raised:
        await operations.wait_until_ready(
            FakeRuntime(),
            pods=[subject],
            read_pods=read,
            node_running=lambda: True,
            timeout=10,
            poll_interval=0.01,
            max_restarts=2,
            last_line=last_line,
        )
    assert str(raised.value) == (
        "pod/web/app: CrashLoopBackOff: last exit code 4 (Error); gave up after 2 restarts; "
        "last log line: no config"
    )
    assert asked == [(("default", "web"), "app")]
