"""A resized container's resources as the engine's update call takes them."""

from __future__ import annotations

from typing import Any

import pytest
from lightkube.models.core_v1 import Container, ContainerResizePolicy, ResourceRequirements

from asynckubelet.runtime.resizing import (
    ResizeError,
    carry_out,
    resize_action,
    update_resources,
)
from asynckubelet.testing import FakeDocker


def ctr(*policies: tuple[str, str], **resources: Any) -> Container:
    return Container(
        name="app",
        image="nginx",
        resources=ResourceRequirements(**resources),
        resizePolicy=[ContainerResizePolicy(resourceName=n, restartPolicy=p) for n, p in policies],
    )


def sized(cpu: str, memory: str, *policies: tuple[str, str]) -> Container:
    return ctr(*policies, limits={"cpu": cpu, "memory": memory})


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


async def resized_on_fake_engine(
    old: Container, new: Container, usage: int | None = None
) -> tuple[FakeDocker, bool, str]:
    docker = FakeDocker()
    docker.add_image("nginx")
    cid = await docker.create_container(
        {"Image": "nginx", "HostConfig": update_resources(old)}, name="app"
    )
    await docker.start_container(cid)
    actual = (await docker.inspect_container(cid))["HostConfig"]
    in_place = await carry_out(docker, cid, resize_action(new, actual, memory_usage=usage))
    return docker, in_place, cid


@pytest.mark.anyio
async def test_not_required_policies_update_in_place_without_a_restart() -> None:
    old, new = sized("100m", "32Mi"), sized("500m", "128Mi")
    docker, in_place, cid = await resized_on_fake_engine(old, new)
    assert in_place
    assert docker.count("update_container") == 1
    assert docker.count("stop_container") + docker.count("kill_container") == 0
    host = (await docker.inspect_container(cid))["HostConfig"]
    assert (host["CpuQuota"], host["Memory"]) == (50_000, 128 * 2**20)


@pytest.mark.anyio
async def test_a_restart_container_policy_on_a_resized_resource_asks_a_restart() -> None:
    restart_memory = ("memory", "RestartContainer")
    old, new = sized("100m", "32Mi", restart_memory), sized("100m", "64Mi", restart_memory)
    docker, in_place, _ = await resized_on_fake_engine(old, new)
    assert not in_place
    assert docker.count("update_container") == 0


@pytest.mark.anyio
async def test_a_restart_policy_on_an_unchanged_resource_updates_in_place() -> None:
    restart_memory = ("memory", "RestartContainer")
    old, new = sized("100m", "32Mi", restart_memory), sized("200m", "32Mi", restart_memory)
    docker, in_place, _ = await resized_on_fake_engine(old, new)
    assert in_place
    assert docker.count("update_container") == 1


@pytest.mark.anyio
async def test_unchanged_resources_make_no_engine_call() -> None:
    docker, in_place, _ = await resized_on_fake_engine(sized("1", "1Gi"), sized("1", "1Gi"))
    assert in_place
    assert docker.count("update_container") == 0


def test_a_memory_limit_below_usage_is_refused_with_the_kubelets_message() -> None:
    actual = update_resources(sized("1", "128Mi"))
    with pytest.raises(ResizeError) as e:
        resize_action(sized("1", "16Mi"), actual, memory_usage=20 * 2**20)
    assert str(e.value) == (
        'attempting to set container "app" memory limit (16777216) below current usage (20971520)'
    )
    assert resize_action(sized("1", "64Mi"), actual, memory_usage=20 * 2**20).update
