"""The engine's facts from ``docker info`` are asked once, however many pods want them at
the same moment (FakeDocker)."""

from __future__ import annotations

import anyio
import pytest

from asynckubelet import errors
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio
PODS = 20


def manager(docker: FakeDocker) -> RuntimeManager:
    return RuntimeManager(RuntimeConfig(node_name="n1"), docker=docker)


async def test_a_burst_of_pods_asking_for_the_cgroup_driver_makes_one_info_request() -> None:
    docker = FakeDocker(info={"CgroupDriver": "systemd"})
    rm = manager(docker)
    answers: list[str] = []
    held = docker.hold("info")

    async def ask() -> None:
        answers.append(await rm.engine_cgroup_driver())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for _ in range(PODS):
                tg.start_soon(ask)
            await anyio.wait_all_tasks_blocked()
            held.set()
    assert answers == ["systemd"] * PODS
    assert docker.count("info") == 1


async def test_a_burst_of_pods_asking_whether_the_engine_is_isolated_makes_one_request() -> None:
    docker = FakeDocker(
        url="unix:///var/run/docker.sock", info={"SecurityOptions": ["name=rootless"]}
    )
    rm = manager(docker)
    answers: list[bool] = []
    held = docker.hold("info")

    async def ask() -> None:
        answers.append(await rm._engine_isolated())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for _ in range(PODS):
                tg.start_soon(ask)
            await anyio.wait_all_tasks_blocked()
            held.set()
    assert answers == [True] * PODS
    assert docker.count("info") == 1


async def test_an_info_request_that_fails_is_made_again_by_the_next_pod() -> None:
    docker = FakeDocker(info={"SecurityOptions": ["name=rootless"]})
    rm = manager(docker)
    docker.fail("info", errors.RuntimeUnavailable("engine gone"))
    assert await rm._engine_isolated() is False
    assert await rm._engine_isolated() is True
    assert docker.count("info") == 2
