"""A pod's first look at Docker: no container list for a pod Docker holds nothing of, a
list (and the pod adopted, not made twice) for one it may hold containers of (FakeDocker)."""

from __future__ import annotations

from collections.abc import Mapping

import anyio
import builders
import pytest
from lightkube.models.core_v1 import Pod

from asynckubelet import errors
from asynckubelet.docker import ContainerConfig, ContainerSummary
from asynckubelet.manifests.loader import pod_uid
from asynckubelet.node.foreground import run_pods
from asynckubelet.node.kubelet import Kubelet, KubeletConfig
from asynckubelet.runtime import naming
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio
BUSYBOX = "akltest.local/busybox:1.35"
PAUSE = "akltest.local/pause:3.10"
UID = pod_uid(node_name="n1", namespace="default", name="web")


class ListingDocker(FakeDocker):
    """A FakeDocker that keeps, in call order, the pod UID each container list asked for
    ("" for a list of the whole node) and each container made ("create")."""

    def __init__(self) -> None:
        super().__init__(images=[BUSYBOX, PAUSE], url="tcp://fake:2375")
        self.asked: list[str] = []

    async def list_containers(
        self,
        *,
        labels: Mapping[str, str | None] | None = None,
        name: str | None = None,
        all: bool = True,
    ) -> list[ContainerSummary]:
        self.asked.append((labels or {}).get(naming.LABEL_POD_UID) or "")
        return await super().list_containers(labels=labels, name=name, all=all)

    async def create_container(self, config: ContainerConfig, *, name: str) -> str:
        self.asked.append("create")
        return await super().create_container(config, name=name)


def web() -> Pod:
    return builders.pod("web", containers=[builders.container("c", BUSYBOX)])


def config(*, leave_running: bool = False) -> KubeletConfig:
    return KubeletConfig(
        node_name="n1", pause_image=PAUSE, docker_url="tcp://fake:2375", leave_running=leave_running
    )


def before_first_create(docker: ListingDocker, since: int) -> list[str]:
    asked = docker.asked[since:]
    return asked[: asked.index("create")] if "create" in asked else asked


async def test_a_pod_new_to_docker_is_made_without_listing_its_containers_first() -> None:
    docker = ListingDocker()
    with anyio.fail_after(10):
        async with Kubelet(config(), docker=docker) as kubelet:
            since = len(docker.asked)
            await kubelet.apply(web())
            await kubelet.wait("default", "web", "Running")
            assert UID not in before_first_create(docker, since)
            # Looks after the first, when the pod's containers exist, list them.
            assert UID in docker.asked[since:]


async def test_a_pod_whose_containers_docker_holds_at_start_is_listed_and_adopted() -> None:
    docker = ListingDocker()
    with anyio.fail_after(10):
        async with Kubelet(config(leave_running=True), docker=docker) as kubelet:
            await kubelet.apply(web())
            await kubelet.wait("default", "web", "Running")
    held = set(docker.containers)
    assert len(held) == 2
    since = len(docker.asked)
    with anyio.fail_after(10):
        async with Kubelet(config(), docker=docker) as kubelet:
            await kubelet.apply(web())
            await kubelet.wait("default", "web", "Running")
            assert UID in before_first_create(docker, since)
            assert "create" not in docker.asked[since:]
            assert set(docker.containers) == held


async def test_a_pod_with_containers_of_another_owner_on_the_node_is_listed_first() -> None:
    docker = ListingDocker()
    docker.add_container(
        id="other",
        state="exited",
        labels={
            naming.LABEL_NODE: "n1",
            naming.LABEL_POD_UID: UID,
            naming.LABEL_OWNER: "someone-else",
        },
    )
    with anyio.fail_after(10):
        async with Kubelet(config(), docker=docker) as kubelet:
            since = len(docker.asked)
            await kubelet.apply(web())
            await kubelet.wait("default", "web", "Running")
            assert before_first_create(docker, since)[:1] == [UID]


async def test_a_pod_made_again_after_its_removal_is_new_to_docker_again() -> None:
    docker = ListingDocker()
    with anyio.fail_after(10):
        async with Kubelet(config(), docker=docker) as kubelet:
            await kubelet.apply(web())
            await kubelet.wait("default", "web", "Running")
            assert await kubelet.delete("default", "web")
            assert not docker.containers
            since = len(docker.asked)
            await kubelet.apply(web())
            await kubelet.wait("default", "web", "Running")
            assert UID not in before_first_create(docker, since)


async def test_a_pod_whose_removal_failed_is_listed_when_made_again() -> None:
    docker = ListingDocker()
    with anyio.fail_after(10):
        async with Kubelet(config(), docker=docker) as kubelet:
            await kubelet.apply(web())
            await kubelet.wait("default", "web", "Running")
            sandbox = next(
                cid
                for cid, c in docker.containers.items()
                if c.labels.get(naming.LABEL_TYPE) == naming.TYPE_SANDBOX
            )
            docker.fail("remove_container", errors.DockerError("engine refused"), target=sandbox)
            assert await kubelet.delete("default", "web")
            assert sandbox in docker.containers
            since = len(docker.asked)
            await kubelet.apply(web())
            await kubelet.wait("default", "web", "Running")
            assert UID in before_first_create(docker, since)


def job(uid: str) -> Pod:
    return builders.pod(
        "job", uid=uid, containers=[builders.container("c", BUSYBOX)], restartPolicy="Never"
    )


class EndingDocker(ListingDocker):
    """App containers end (exit code 0) as soon as they start."""

    async def start_container(self, container_id: str) -> None:
        await super().start_container(container_id)
        if self.containers[container_id].labels.get(naming.LABEL_TYPE) == naming.TYPE_CONTAINER:
            self.exit(container_id, exit_code=0)


async def run_one(docker: EndingDocker, pod: Pod, *, new_uids: bool) -> None:
    config = RuntimeConfig(node_name="n1", pause_image=PAUSE)
    with anyio.fail_after(10):
        async with RuntimeManager(config, docker=docker) as rm:
            outcomes = await run_pods(rm, [pod], new_uids=new_uids)
    assert outcomes[0].phase == "Succeeded"


async def test_run_pods_with_new_uids_makes_each_pod_without_listing_its_containers_first() -> None:
    docker = EndingDocker()
    await run_one(docker, job("u-new"), new_uids=True)
    assert "u-new" not in before_first_create(docker, 0)
    assert not docker.containers


async def test_run_pods_lists_a_pods_containers_first_unless_told_its_uid_is_new() -> None:
    docker = EndingDocker()
    await run_one(docker, job("u-old"), new_uids=False)
    assert before_first_create(docker, 0)[:1] == ["u-old"]
