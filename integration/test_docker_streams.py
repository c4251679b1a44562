"""The adapter's streams against a real engine: abandoning one gives its connection back."""

from __future__ import annotations

import anyio
import pytest

from asynckubelet.docker import DockerClient
from asynckubelet.runtime import naming
from integration.harness import BUSYBOX_IMAGE, held_connections

pytestmark = pytest.mark.anyio


async def test_cancelled_event_and_log_streams_release_their_connections(
    docker: DockerClient, node_name: str
) -> None:
    cid = await docker.create_container(
        {
            "Image": BUSYBOX_IMAGE,
            "Cmd": ["sh", "-c", "while true; do echo tick; sleep 0.1; done"],
            "Labels": {naming.LABEL_NODE: node_name},
        },
        name=f"{node_name}-ticker",
    )
    await docker.start_container(cid)
    for _ in range(5):
        following = anyio.Event()
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                async for _event in docker.events(filters={"type": ["container"]}):
                    pass

            async def follow(following: anyio.Event) -> None:
                async for _line in docker.logs(cid, follow=True):
                    following.set()

            tg.start_soon(watch)
            tg.start_soon(follow, following)
            with anyio.fail_after(10):
                await following.wait()
                while held_connections(docker) < 2:  # noqa: ASYNC110
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
        assert held_connections(docker) == 0


async def test_a_followed_log_of_a_container_that_exits_at_once_has_all_of_its_output(
    docker: DockerClient, node_name: str
) -> None:
    """Docker's follow stream may end, as its container stops, before the last thing the
    container wrote: the adapter reads what it missed (a short-lived ``cat``'s output)."""
    for i in range(20):
        cid = await docker.create_container(
            {
                "Image": BUSYBOX_IMAGE,
                "Cmd": ["sh", "-c", f"echo first-{i}; sleep 0.2; printf last-{i}"],
                "Labels": {naming.LABEL_NODE: node_name},
            },
            name=f"{node_name}-quick-{i}",
        )
        try:
            await docker.start_container(cid)
            with anyio.fail_after(10):
                lines = [(line.text, line.newline) async for line in docker.logs(cid, follow=True)]
        finally:
            await docker.remove_container(cid, force=True)
        assert lines == [(f"first-{i}", True), (f"last-{i}", False)], i
