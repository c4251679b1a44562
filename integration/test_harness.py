"""The harness itself: engine, offline images and cleanup of what tests leave behind."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import anyio
import pytest

from asynckubelet import errors
from asynckubelet.docker import DockerClient
from asynckubelet.runtime import naming
from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE, Engine, remove_owned

pytestmark = pytest.mark.anyio
pytest_plugins = ["pytester"]


async def _make(client: DockerClient, *, node: str | None, name: str) -> str:
    labels = {naming.LABEL_NODE: node} if node else {"akltest.unowned": "1"}
    cid = await client.create_container(
        {"Image": BUSYBOX_IMAGE, "Cmd": ["sleep", "300"], "Labels": labels}, name=name
    )
    await client.start_container(cid)
    return cid


async def test_the_engine_answers_and_has_the_offline_test_images(docker: DockerClient) -> None:
    assert await docker.ping()
    assert await docker.image_exists(BUSYBOX_IMAGE)
    assert await docker.image_exists(PAUSE_IMAGE)


async def test_the_busybox_test_image_runs_a_shell(docker: DockerClient, node_name: str) -> None:
    cid = await docker.create_container(
        {
            "Image": BUSYBOX_IMAGE,
            "Cmd": ["sh", "-c", "echo hello from $(hostname) && exit 3"],
            "Labels": {naming.LABEL_NODE: node_name},
        },
        name=f"{node_name}-sh",
    )
    await docker.start_container(cid)
    assert await docker.wait_container(cid) == 3
    lines = [line.text async for line in docker.logs(cid)]
    assert lines[0].startswith("hello from ")


async def test_owned_containers_are_removed_and_others_are_left(
    docker: DockerClient, node_name: str
) -> None:
    mine = await _make(docker, node=node_name, name=f"{node_name}-mine")
    other = await _make(docker, node=None, name=f"{node_name}-other")
    try:
        removed = await remove_owned(docker, node_name)
        assert removed == [mine]
        assert await docker.list_containers(labels={naming.LABEL_NODE: node_name}) == []
        assert (await docker.inspect_container(other))["State"]["Running"]
    finally:
        await docker.remove_container(other, force=True)


def test_a_failing_test_still_has_its_containers_removed(
    pytester: pytest.Pytester,
    docker_engine: Engine,
    test_images: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent.parent))
    record = pytester.path / "node.txt"
    pytester.makeconftest("from integration.conftest import *  # noqa: F403\n")
    pytester.makepyfile(
        test_inner=textwrap.dedent(
            f"""
            import pytest
            from asynckubelet.runtime import naming

            @pytest.mark.anyio
            async def test_fails(docker, node_name):
                open({str(record)!r}, "w").write(node_name)
                cid = await docker.create_container(
                    {{"Image": {BUSYBOX_IMAGE!r}, "Cmd": ["sleep", "300"],
                      "Labels": {{naming.LABEL_NODE: node_name}}}},
                    name=node_name + "-left",
                )
                await docker.start_container(cid)
                assert False, "this test fails on purpose"
            """
        )
    )
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--rootdir={pytester.path}",
    )
    result.assert_outcomes(failed=1)
    node = record.read_text()

    async def left() -> list[str]:
        async with DockerClient(url=docker_engine.url) as client:
            return [r["Id"] for r in await client.list_containers(labels={naming.LABEL_NODE: node})]

    assert anyio.run(left) == []


def test_docker_host_points_at_the_session_engine(docker_engine: Engine) -> None:
    assert os.environ["DOCKER_HOST"] == docker_engine.url
    if docker_engine.private:
        assert Path(docker_engine.url.removeprefix("unix://")).is_socket()


async def test_a_container_created_while_the_cleanup_runs_is_removed_too(
    docker: DockerClient, node_name: str
) -> None:
    first = await _make(docker, node=node_name, name=f"{node_name}-first")

    async def late_create() -> None:
        # As a create that was in flight in a killed agent: it lands after the first pass.
        while True:
            try:
                await docker.inspect_container(first)
            except errors.NotFound:
                break
            await anyio.sleep(0.01)
        await _make(docker, node=node_name, name=f"{node_name}-late")

    async with anyio.create_task_group() as tg:
        tg.start_soon(late_create)
        await remove_owned(docker, node_name)
    assert await docker.list_containers(labels={naming.LABEL_NODE: node_name}) == []
