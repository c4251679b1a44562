"""Attaching to a container's main process on a real engine: a process that had ended by
the time the attach was made ends the attach at once (the engine itself would hold such
an attach open until the container started again)."""

from __future__ import annotations

import anyio
import pytest

from asynckubelet.docker import DockerClient
from asynckubelet.docker.execs import attach_session
from asynckubelet.runtime import naming
from integration.harness import BUSYBOX_IMAGE

pytestmark = pytest.mark.anyio


async def test_an_attach_to_a_process_that_has_ended_ends_at_once(
    docker: DockerClient, node_name: str
) -> None:
    cid = await docker.create_container(
        {"Image": BUSYBOX_IMAGE, "Cmd": ["true"], "Labels": {naming.LABEL_NODE: node_name}},
        name=f"{node_name}-ended",
    )
    await docker.start_container(cid)
    with anyio.fail_after(30):
        while (await docker.inspect_container(cid))["State"]["Running"]:  # noqa: ASYNC110
            await anyio.sleep(0.05)
        async with attach_session(docker, cid, stdin=True) as session:
            assert await session.read() is None


async def test_an_attach_to_a_running_process_reads_it_until_it_ends(
    docker: DockerClient, node_name: str
) -> None:
    cid = await docker.create_container(
        {
            "Image": BUSYBOX_IMAGE,
            "Cmd": ["sh", "-c", "read line; echo got $line"],
            "OpenStdin": True,
            "StdinOnce": True,
            "Labels": {naming.LABEL_NODE: node_name},
        },
        name=f"{node_name}-running",
    )
    await docker.start_container(cid)
    with anyio.fail_after(30):
        async with attach_session(docker, cid, stdin=True) as session:
            await session.write(b"hello\n")
            seen = b""
            while (message := await session.read()) is not None:
                seen += message[1]
    assert seen == b"got hello\n"
