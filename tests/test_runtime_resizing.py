"""A resized container's resources as the engine's update call takes them."""

from __future__ import annotations

from typing import Any

import pytest
from lightkube.models.core_v1 import Container, ResourceRequirements

from asynckubelet.runtime.resizing import update_resources
from asynckubelet.testing import FakeDocker


def ctr(**resources: Any) -> Container:
    return Container(name="app", image="nginx", resources=ResourceRequirements(**resources))


def test_cpu_and_memory_map_as_at_create_with_the_swap_limit_beside_memory() -> None:
    body = update_resources(
        ctr(requests={"cpu": "250m", "memory": "64Mi"}, limits={"cpu": "500m", "memory": "128Mi"})
    )
    assert body == {
        "CpuShares": 256,
        "CpuPeriod": 100_000,
        "CpuQuota": 50_000,
        "Memory": 128 * 2**20,
        "MemorySwap": 256 * 2**20,
    }


def test_requests_only_set_shares_and_no_limits() -> None:
    assert update_resources(ctr(requests={"cpu": "2", "memory": "64Mi"})) == {"CpuShares": 2048}


def test_a_container_without_resources_gets_the_minimum_shares() -> None:
    assert update_resources(ctr()) == {"CpuShares": 2}


@pytest.mark.anyio
async def test_the_fake_engine_shows_the_update_in_inspect() -> None:
    docker = FakeDocker()
    docker.add_image("nginx")
    cid = await docker.create_container(
        {"Image": "nginx", "HostConfig": {"Memory": 64 * 2**20, "NetworkMode": "none"}},
        name="app",
    )
    await docker.update_container(cid, {"Memory": 2**27, "MemorySwap": 2**28})
    host = (await docker.inspect_container(cid))["HostConfig"]
    assert (host["Memory"], host["MemorySwap"], host["NetworkMode"]) == (2**27, 2**28, "none")
    assert docker.count("update_container") == 1
