"""A node cancelled with its owner leaves its pods running when told to (FakeDocker)."""

from __future__ import annotations

import anyio
import builders
import pytest
from lightkube.models.core_v1 import Pod

from asynckubelet.node.kubelet import Kubelet, KubeletConfig
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio
BUSYBOX = "akltest.local/busybox:1.35"
PAUSE = "akltest.local/pause:3.10"


def web() -> Pod:
    return builders.pod("web", containers=[builders.container("c", BUSYBOX)])


async def run_then_cancel(docker: FakeDocker, *, leave_running: bool) -> None:
    config = KubeletConfig(
        node_name="n1",
        pause_image=PAUSE,
        docker_url="tcp://fake:2375",
        leave_running=leave_running,
    )
    with anyio.fail_after(10):
        async with anyio.create_task_group() as owner:

            async def node() -> None:
                async with Kubelet(config, docker=docker) as kubelet:
                    await kubelet.apply(web())
                    await kubelet.wait("default", "web", "Running")
                    owner.cancel_scope.cancel()
                    try:
                        await anyio.sleep_forever()
                    finally:
                        # The owner's own clean-up takes a while: the pod workers see
                        # the cancellation before the node's exit does.
                        with anyio.CancelScope(shield=True):
                            await anyio.sleep(0.3)

            owner.start_soon(node)


def running(docker: FakeDocker) -> int:
    return sum(1 for c in docker.containers.values() if c.status == "running")


async def test_cancelling_the_owner_of_a_node_that_leaves_pods_running_leaves_them() -> None:
    docker = FakeDocker(images=[BUSYBOX, PAUSE], url="tcp://fake:2375")
    await run_then_cancel(docker, leave_running=True)
    assert running(docker) == 2
    assert docker.count("remove_container") == 0


async def test_cancelling_the_owner_of_a_node_that_does_not_stops_and_removes_its_pods() -> None:
    docker = FakeDocker(images=[BUSYBOX, PAUSE], url="tcp://fake:2375")
    await run_then_cancel(docker, leave_running=False)
    assert running(docker) == 0
    assert not docker.containers
