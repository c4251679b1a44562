"""The engine's facts from ``docker info`` are asked once, however many pods want them at
the same moment (FakeDocker)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import pytest

from asynckubelet import errors
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio
PODS = 20


def manager(docker: FakeDocker) -> RuntimeManager:
    return RuntimeManager(RuntimeConfig(node_name="n1"), docker=docker)


async def burst(docker: FakeDocker, ask: Callable[[], Awaitable[object]]) -> list[object]:
    """``PODS`` calls of ``ask`` at once, the first ``docker info`` held until all wait."""
    answers: list[object] = []
    held = docker.hold("info")

    async def one() -> None:
        answers.append(await ask())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for _ in range(PODS):
                tg.start_soon(one)
            await anyio.wait_all_tasks_blocked()
            held.set()
    return answers


async def test_a_burst_of_pods_asking_for_the_cgroup_driver_makes_one_info_request() -> None:
    docker = FakeDocker(info={"CgroupDriver": "systemd"})
    rm = manager(docker)
    assert await burst(docker, rm.engine_cgroup_driver) == ["systemd"] * PODS
    assert docker.count("info") == 1


async def test_a_burst_of_pods_asking_whether_the_engine_is_isolated_makes_one_request() -> None:
    docker = FakeDocker(
        url="unix:///var/run/docker.sock", info={"SecurityOptions": ["name=rootless"]}
    )
    rm = manager(docker)
    assert await burst(docker, rm.deps.engine.isolated) == [True] * PODS
    assert docker.count("info") == 1


async def test_an_info_request_that_fails_is_made_again_by_the_next_pod() -> None:
    docker = FakeDocker(info={"SecurityOptions": ["name=rootless"]})
    rm = manager(docker)
    docker.fail("info", errors.RuntimeUnavailable("engine gone"))
    assert await rm.deps.engine.isolated() is False
    assert await rm.deps.engine.isolated() is True
    assert docker.count("info") == 2
