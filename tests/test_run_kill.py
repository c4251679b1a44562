"""A foreground run's kill on a bare runtime: the pods' workers SIGKILL their containers
(``run_pods``'s ``kill``), so a pod whose process ignores SIGTERM stops at once instead of
at the end of its grace period, and the run still removes it (FakeDocker). ``run``'s
second signal does the same through its node (``Kubelet.kill_now``, in
``test_node_foreground``)."""

from __future__ import annotations

import anyio
import pytest
from lightkube.models.core_v1 import Container, Pod, PodSpec, PodStatus
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet.node.foreground import run_pods
from asynckubelet.runtime import naming
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio
BUSYBOX = "akltest.local/busybox:1.35"
PAUSE = "akltest.local/pause:3.10"


def stubborn() -> Pod:
    return Pod(
        metadata=ObjectMeta(name="stubborn", namespace="default", uid="u-stubborn"),
        spec=PodSpec(
            restartPolicy="Always",
            terminationGracePeriodSeconds=3600,
            containers=[Container(name="app", image=BUSYBOX)],
        ),
    )


async def test_a_kill_ends_a_graceful_stop_at_once_and_the_pod_is_still_removed() -> None:
    docker = FakeDocker(images=[BUSYBOX, PAUSE], url="tcp://fake:2375")
    stop, kill, running = anyio.Event(), anyio.Event(), anyio.Event()

    def on_status(pod: Pod, status: PodStatus) -> None:
        if status.phase == "Running":
            running.set()

    config = RuntimeConfig(node_name="n1", pause_image=PAUSE)
    with anyio.fail_after(20):
        async with RuntimeManager(config, docker=docker) as rm, anyio.create_task_group() as tg:
            ended: list[object] = []

            async def run() -> None:
                ended.extend(
                    await run_pods(rm, [stubborn()], stop=stop, kill=kill, on_status=on_status)
                )

            tg.start_soon(run)
            await running.wait()
            (app,) = [
                c
                for c in docker.containers.values()
                if c.labels.get(naming.LABEL_CONTAINER_NAME) == "app"
            ]
            app.ignores_stop_signal = True
            stop.set()
            await anyio.wait_all_tasks_blocked()
            assert not ended
            assert docker.count("kill_container") == 0
            kill.set()
    assert app.id in docker.targets("kill_container")
    assert app.exit_code == 137
    assert docker.containers == {}
