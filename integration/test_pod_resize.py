"""In-place resize on a real engine: the update call changes a running container's cgroup
settings without restarting it."""

from __future__ import annotations

import pytest
from lightkube.models.core_v1 import Container, ResourceRequirements

from asynckubelet.docker import DockerClient
from asynckubelet.runtime import naming
from asynckubelet.runtime.resizing import update_resources
from asynckubelet.runtime.resources import host_config_resources
from integration.harness import BUSYBOX_IMAGE

pytestmark = pytest.mark.anyio


def ctr(cpu: str, memory: str) -> Container:
    limits = {"cpu": cpu, "memory": memory}
    return Container(name="app", image=BUSYBOX_IMAGE, resources=ResourceRequirements(limits=limits))


async def test_a_running_container_is_resized_up_in_cpu_and_memory_without_a_restart(
    docker: DockerClient, node_name: str
) -> None:
    cid = await docker.create_container(
        {
            "Image": BUSYBOX_IMAGE,
            "Cmd": ["sleep", "3600"],
            "Labels": {naming.LABEL_NODE: node_name},
            "HostConfig": host_config_resources(ctr("100m", "32Mi")),
        },
        name=f"{node_name}-resized",
    )
    await docker.start_container(cid)
    before = await docker.inspect_container(cid)
    await docker.update_container(cid, update_resources(ctr("500m", "128Mi")))
    after = await docker.inspect_container(cid)
    host = after["HostConfig"]
    assert (host["CpuQuota"], host["CpuPeriod"], host["CpuShares"]) == (50_000, 100_000, 512)
    assert (host["Memory"], host["MemorySwap"]) == (128 * 2**20, 256 * 2**20)
    assert after["State"]["Running"]
    assert after["State"]["StartedAt"] == before["State"]["StartedAt"]
    assert after["State"]["Pid"] == before["State"]["Pid"]
