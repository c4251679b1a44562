"""RuntimeManager against real Docker: restart policies, back-off, sidecars, edits, re-sync."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from asynckubelet.docker import DockerClient
from asynckubelet.runtime import nodefiles
from asynckubelet.runtime.backoff import Backoff
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from asynckubelet.runtime.types import ContainerState
from integration.harness import PAUSE_IMAGE, Engine
from integration.runtime_helpers import (
    CountingDocker,
    Driver,
    Recorder,
    container_status,
    edit,
    manager,
    pod_from,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
async def counting(docker_engine: Engine, docker: DockerClient) -> AsyncIterator[CountingDocker]:
    async with CountingDocker(url=docker_engine.url) as client:
        yield client


def _phase(phase: str):  # type: ignore[no-untyped-def]
    return lambda s: s.phase == phase


async def test_a_second_sync_of_a_healthy_pod_makes_no_mutating_docker_call(
    counting: CountingDocker, node_name: str
) -> None:
    pod = pod_from(
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: steady}
        spec:
          initContainers: [{name: init, image: BUSYBOX, command: ["true"]}]
          containers:
            - {name: a, image: BUSYBOX, command: ["sleep", "600"]}
            - {name: b, image: BUSYBOX, command: ["sleep", "600"]}
        """,
        node=node_name,
    )
    async with manager(counting, node_name) as rm:
        driver = Driver(rm, pod)
        await driver.until(lambda s: all(c.ready for c in s.containerStatuses or []))
        counting.calls.clear()
        for _ in range(3):
            result = await driver.sync()
            assert result.results == []
        assert counting.calls == []
        await rm.kill_pod(pod, grace_period=0)


async def test_always_restarts_an_exited_container_and_counts_the_restart(
    docker: DockerClient, node_name: str
) -> None:
    pod = pod_from(
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: restarter}
        spec:
          restartPolicy: Always
          containers: [{name: app, image: BUSYBOX, command: ["sh", "-c", "sleep 0.2; exit 0"]}]
        """,
        node=node_name,
    )
    async with manager(docker, node_name) as rm:
        driver = Driver(rm, pod, backoff=Backoff(initial=0.2, cap=0.4))
        status = await driver.until(lambda s: container_status(s, "app").restartCount >= 2)
        app = container_status(status, "app")
        assert app.lastState.terminated.reason == "Completed"
        assert app.lastState.terminated.exitCode == 0
        assert status.phase in ("Running", "Pending")


@pytest.mark.parametrize(
    ("exit_code", "restarts"),
    [(0, False), (4, True)],
    ids=["success is not restarted", "failure is restarted"],
)
async def test_on_failure_restarts_only_a_failed_container(
    docker: DockerClient, node_name: str, exit_code: int, restarts: bool
) -> None:
    pod = pod_from(
        f"""
        apiVersion: v1
        kind: Pod
        metadata: {{name: onfailure}}
        spec:
          restartPolicy: OnFailure
          containers: [{{name: app, image: BUSYBOX, command: ["sh", "-c", "exit {exit_code}"]}}]
        """,
        node=node_name,
    )
    async with manager(docker, node_name) as rm:
        driver = Driver(rm, pod, backoff=Backoff(initial=0.2, cap=0.4))
        if restarts:
            status = await driver.until(lambda s: container_status(s, "app").restartCount >= 1)
            assert container_status(status, "app").lastState.terminated.exitCode == exit_code
        else:
            status = await driver.until(_phase("Succeeded"))
            assert container_status(status, "app").restartCount == 0
            assert container_status(status, "app").state.terminated.reason == "Completed"


async def test_never_does_not_restart_and_the_pod_fails_with_the_containers_reason(
    docker: DockerClient, node_name: str
) -> None:
    pod = pod_from(
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: never}
        spec:
          restartPolicy: Never
          containers:
            - {name: bad, image: BUSYBOX, command: ["sh", "-c", "exit 7"]}
            - {name: good, image: BUSYBOX, command: ["true"]}
        """,
        node=node_name,
    )
    async with manager(docker, node_name) as rm:
        driver = Driver(rm, pod)
        status = await driver.until(_phase("Failed"))
        bad = container_status(status, "bad")
        assert bad.state.terminated.exitCode == 7
        assert bad.state.terminated.reason == "Error"
        assert bad.restartCount == 0
        assert container_status(status, "good").state.terminated.reason == "Completed"


async def test_a_failed_init_container_under_never_fails_the_pod_without_starting_apps(
    docker: DockerClient, node_name: str
) -> None:
    pod = pod_from(
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: initfail}
        spec:
          restartPolicy: Never
          initContainers: [{name: init, image: BUSYBOX, command: ["sh", "-c", "exit 2"]}]
          containers: [{name: app, image: BUSYBOX, command: ["true"]}]
        """,
        node=node_name,
    )
    async with manager(docker, node_name) as rm:
        driver = Driver(rm, pod)
        status = await driver.until(_phase("Failed"))
        assert container_status(status, "init").state.terminated.exitCode == 2
        assert driver.runtime is not None
        assert driver.runtime.find_container("app") is None
        conditions = {c.type: c for c in status.conditions or []}
        assert conditions["Initialized"].status == "False"


async def test_init_containers_run_one_at_a_time_in_order(
    docker: DockerClient, node_name: str
) -> None:
    pod = pod_from(
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: ordered}
        spec:
          restartPolicy: Never
          initContainers:
            - {name: one, image: BUSYBOX, command: ["sleep", "0.3"]}
            - {name: two, image: BUSYBOX, command: ["sleep", "0.3"]}
            - {name: three, image: BUSYBOX, command: ["true"]}
          containers: [{name: app, image: BUSYBOX, command: ["true"]}]
        """,
        node=node_name,
    )
    async with manager(docker, node_name) as rm:
        driver = Driver(rm, pod)
        await driver.until(_phase("Succeeded"))
        assert driver.runtime is not None
        by_name = {c.name: c for c in driver.runtime.containers}
        order = ["one", "two", "three", "app"]
        for before, after in itertools.pairwise(order):
            finished, started = by_name[before].finished_at, by_name[after].started_at
            assert finished is not None
            assert started is not None
            assert finished <= started


async def test_a_crash_looping_container_waits_per_the_backoff_schedule(
    docker: DockerClient, node_name: str
) -> None:
    pod = pod_from(
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: crasher}
        spec:
          containers: [{name: app, image: BUSYBOX, command: ["sh", "-c", "exit 1"]}]
        """,
        node=node_name,
    )
    events = Recorder()
    async with manager(docker, node_name, events) as rm:
        driver = Driver(rm, pod, backoff=Backoff(initial=0.5, cap=2.0))
        status = await driver.until(
            lambda s: container_status(s, "app").restartCount >= 3, interval=0.05
        )
        waiting = [
            container_status(s, "app").state.waiting
            for s in driver.history
            if container_status(s, "app").state.waiting is not None
        ]
        messages = [w.message for w in waiting if w.reason == "CrashLoopBackOff"]
        assert any("back-off 500ms restarting failed container=app" in m for m in messages)
        assert any("back-off 1s restarting failed container=app" in m for m in messages)
        assert pod.metadata is not None
        assert any(m.endswith(f"pod=crasher_default({pod.metadata.uid})") for m in messages)
        assert "BackOff" in events.reasons()
        assert driver.runtime is not None
        starts = sorted(c.started_at for c in driver.runtime.containers if c.started_at is not None)
        gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(starts)]
        # As the kubelet: the first restart is immediate, then 0.5 s, then 1 s (doubling).
        assert gaps[1] >= 0.5, gaps
        assert gaps[2] >= 1.0, gaps
        assert status.phase == "Running"


async def test_editing_one_container_restarts_only_that_container(
    docker: DockerClient, node_name: str
) -> None:
    pod = pod_from(
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: edited}
        spec:
          containers:
            - {name: keep, image: BUSYBOX, command: ["sleep", "600"]}
            - name: change
              image: BUSYBOX
              command: ["sleep", "600"]
              env: [{name: COLOUR, value: blue}]
        """,
        node=node_name,
    )
    async with manager(docker, node_name) as rm:
        driver = Driver(rm, pod)
        await driver.until(lambda s: all(c.ready for c in s.containerStatuses or []))
        assert driver.runtime is not None
        before = {c.name: c.id for c in driver.runtime.containers}
        sandbox = driver.runtime.sandboxes[0].id

        def recolour(data: dict) -> None:  # type: ignore[type-arg]
            data["spec"]["containers"][1]["env"][0]["value"] = "green"

        driver.pod = edit(pod, recolour, node=node_name)
        assert driver.pod.metadata is not None
        assert pod.metadata is not None
        assert driver.pod.metadata.uid == pod.metadata.uid
        status = await driver.until(
            lambda s: (
                container_status(s, "change").restartCount == 1
                and container_status(s, "change").ready
            )
        )
        assert driver.runtime is not None
        running = {
            c.name: c.id for c in driver.runtime.containers if c.state is ContainerState.RUNNING
        }
        assert running["keep"] == before["keep"]
        assert running["change"] != before["change"]
        assert driver.runtime.sandboxes[0].id == sandbox
        assert container_status(status, "keep").restartCount == 0


async def test_sidecars_start_before_app_containers_and_stop_after_them(
    docker: DockerClient, node_name: str
) -> None:
    pod = pod_from(
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: sidecars}
        spec:
          terminationGracePeriodSeconds: 10
          initContainers:
            - name: proxy
              image: BUSYBOX
              restartPolicy: Always
              command: ["sh", "-c", "trap 'sleep 0.5; exit 0' TERM; while true; do sleep 0.1; done"]
            - name: logger
              image: BUSYBOX
              restartPolicy: Always
              command: ["sh", "-c", "trap 'sleep 0.5; exit 0' TERM; while true; do sleep 0.1; done"]
          containers:
            - name: app
              image: BUSYBOX
              command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"]
        """,
        node=node_name,
    )
    async with manager(docker, node_name) as rm:
        driver = Driver(rm, pod)
        await driver.until(lambda s: all(c.ready for c in s.containerStatuses or []))
        assert driver.runtime is not None
        started = {c.name: c.started_at for c in driver.runtime.containers if c.started_at}
        assert started["proxy"] <= started["logger"] <= started["app"]
        await rm.kill_pod(pod)
        runtime = await rm.get_status_of(pod)
        finished = {c.name: c.finished_at for c in runtime.containers if c.finished_at}
        assert finished["app"] <= finished["logger"] <= finished["proxy"]
        assert all(c.exit_code == 0 for c in runtime.containers)


async def test_kill_gives_sigterm_first_and_sigkill_after_the_grace_period(
    docker: DockerClient, node_name: str
) -> None:
    pod = pod_from(
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: grace}
        spec:
          terminationGracePeriodSeconds: 2
          containers:
            - name: polite
              image: BUSYBOX
              command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"]
            - name: stubborn
              image: BUSYBOX
              command: ["sh", "-c", "trap '' TERM; while true; do sleep 0.1; done"]
        """,
        node=node_name,
    )
    events = Recorder()
    async with manager(docker, node_name, events) as rm:
        driver = Driver(rm, pod)
        await driver.until(lambda s: all(c.ready for c in s.containerStatuses or []))
        result = await rm.kill_pod(pod)
        assert result.ok
        runtime = await rm.get_status_of(pod)
        codes = {c.name: c.exit_code for c in runtime.containers}
        assert codes == {"polite": 0, "stubborn": 137}
        assert all(s.state.value == "notready" for s in runtime.sandboxes)
        assert events.reasons().count("Killing") == 2
        again = await rm.kill_pod(pod)
        assert again.ok


async def test_garbage_collection_keeps_only_the_newest_dead_instance(
    docker: DockerClient, node_name: str
) -> None:
    pod = pod_from(
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: collected}
        spec:
          containers: [{name: app, image: BUSYBOX, command: ["sh", "-c", "exit 1"]}]
        """,
        node=node_name,
    )
    async with manager(docker, node_name) as rm:
        driver = Driver(rm, pod, backoff=Backoff(initial=0.1, cap=0.1))
        await driver.until(lambda s: container_status(s, "app").restartCount >= 3)
        runtime = await rm.get_status_of(pod)
        removed = await rm.garbage_collect(runtime)
        assert len(removed) >= 2
        after = await rm.get_status_of(pod)
        dead = [c for c in after.containers if c.state is ContainerState.EXITED]
        assert len(dead) <= 2
        newest = max(c.restart_count for c in runtime.containers)
        assert newest in {c.restart_count for c in after.containers}
        status = await driver.refresh()
        assert container_status(status, "app").restartCount >= 3


async def test_volume_mounts_without_a_volume_provider_are_a_config_error_not_ignored(
    docker: DockerClient, node_name: str
) -> None:
    pod = pod_from(
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: novolumes}
        spec:
          volumes: [{name: scratch, emptyDir: {}}]
          containers:
            - name: app
              image: BUSYBOX
              command: ["true"]
              volumeMounts: [{name: scratch, mountPath: /scratch}]
        """,
        node=node_name,
    )
    async with manager(docker, node_name) as rm:
        driver = Driver(rm, pod)
        result = await driver.sync()
        (error,) = result.errors
        assert str(error.error) == "CreateContainerConfigError"
        assert "need a local Docker engine" in error.message
        status = await driver.refresh()
        assert container_status(status, "app").state.waiting.reason == "CreateContainerConfigError"


async def test_pod_cgroup_and_log_links_follow_the_kubelet_layout_and_go_with_the_pod(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    pod = pod_from(
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: placed}
        spec:
          restartPolicy: Never
          containers:
            - name: app
              image: BUSYBOX
              command: ["sh", "-c", "echo placed; cat /proc/self/cgroup"]
        """,
        node=node_name,
    )
    root = f"/{node_name}"
    config = RuntimeConfig(
        node_name=node_name, pause_image=PAUSE_IMAGE, cgroup_root=root, pod_log_dir=tmp_path
    )
    async with RuntimeManager(config, docker=docker) as rm:
        driver = Driver(rm, pod)
        await driver.until(lambda s: s.phase == "Succeeded")
        assert pod.metadata is not None
        uid = pod.metadata.uid
        assert uid is not None
        parent = f"{root}/besteffort/pod{uid}"
        assert driver.runtime is not None
        for c in [*driver.runtime.containers]:
            info = await docker.inspect_container(c.id)
            assert info["HostConfig"]["CgroupParent"] == parent
        sandbox = await docker.inspect_container(driver.runtime.sandboxes[0].id)
        assert sandbox["HostConfig"]["CgroupParent"] == parent
        link = tmp_path / f"default_placed_{uid}" / "app" / "0.log"
        assert link.is_symlink()
        assert "placed" in link.read_text()
        assert parent in link.read_text()
        await rm.kill_pod(pod, grace_period=0)
        await rm.remove_pod(uid=uid)
        assert not (tmp_path / f"default_placed_{uid}").exists()
        leftovers = [
            m / parent.lstrip("/")
            for m in nodefiles.cgroup_mounts(await anyio.Path("/proc/self/mountinfo").read_text())
        ]
        assert [p for p in leftovers if p.exists()] == []
