"""The node's pod workers run as its configuration says: by default the node agent's way
(a terminal pod stays listed, its containers kept for their logs); with
``exit_when_terminal``, as ``run`` asks, a pod's worker ends once the pod is terminal and
its containers go, its last status still readable."""

from __future__ import annotations

import anyio
import pytest
from lightkube.models.core_v1 import Container, Pod, PodSpec
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet.node.kubelet import Kubelet, KubeletConfig
from asynckubelet.node.worker_state import WorkerPolicy
from asynckubelet.runtime import naming
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio
BUSYBOX = "akltest.local/busybox:1.35"
PAUSE = "akltest.local/pause:3.10"


def _config(*, exit_when_terminal: bool = False) -> KubeletConfig:
    return KubeletConfig(
        node_name="n1",
        pause_image=PAUSE,
        docker_url="tcp://fake:2375",
        housekeeping_period=3600.0,
        resync_period=0.05,
        exit_when_terminal=exit_when_terminal,
    )


def _docker() -> FakeDocker:
    return FakeDocker(images=[BUSYBOX, PAUSE], url="tcp://fake:2375")


def _once() -> Pod:
    return Pod(
        metadata=ObjectMeta(name="once", namespace="default"),
        spec=PodSpec(restartPolicy="Never", containers=[Container(name="c", image=BUSYBOX)]),
    )


def _app_container_id(fake: FakeDocker) -> str:
    (found,) = [
        c.id for c in fake.containers.values() if c.labels.get(naming.LABEL_CONTAINER_NAME) == "c"
    ]
    return found


def test_the_node_agents_workers_stay_once_terminal_and_the_pleg_wakes_them() -> None:
    assert Kubelet(_config(), docker=_docker()).worker_policy == WorkerPolicy(
        exit_when_terminal=False, own_events=False, resync_interval=0.05
    )


def test_a_run_asks_its_workers_to_end_once_terminal() -> None:
    policy = Kubelet(_config(exit_when_terminal=True), docker=_docker()).worker_policy
    assert policy == WorkerPolicy(exit_when_terminal=True, own_events=False, resync_interval=0.05)


async def test_the_node_agent_keeps_a_terminal_pods_worker_and_containers() -> None:
    fake = _docker()
    with anyio.fail_after(20):
        async with Kubelet(_config(), docker=fake) as node:
            (pod,) = await node.apply(_once())
            assert pod.metadata is not None
            assert pod.metadata.uid is not None
            await node.wait("default", "once", "Running")
            fake.exit(_app_container_id(fake), exit_code=0)
            await node.wait("default", "once", "Succeeded")
            assert node.has_pod(pod.metadata.uid)
            assert _app_container_id(fake) in fake.containers


async def test_a_worker_under_exit_when_terminal_ends_and_removes_the_pod() -> None:
    fake = _docker()
    with anyio.fail_after(20):
        async with Kubelet(_config(exit_when_terminal=True), docker=fake) as node:
            (pod,) = await node.apply(_once())
            assert pod.metadata is not None
            assert pod.metadata.uid is not None
            await node.wait("default", "once", "Running")
            fake.exit(_app_container_id(fake), exit_code=0)
            while node.has_pod(pod.metadata.uid):
                with anyio.move_on_after(0.05):
                    await node.status.changed()
            assert fake.containers == {}
            got = node.get("default", "once")
            assert got is not None
            assert got.status is not None
            assert got.status.phase == "Succeeded"
