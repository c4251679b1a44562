"""The runtime's cache of inspected containers: an event marks its container outdated, so the
next status read inspects it again even where Docker's list still shows the old state, and
a mark made while a read is under way never drops the container from that read."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from asynckubelet import errors
from asynckubelet.runtime import naming
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager

pytestmark = pytest.mark.anyio


class FakeDocker:
    """The adapter's list and inspect calls over a table of app containers."""

    def __init__(self, states: dict[str, str]) -> None:
        self.states = states
        self.inspected: list[str] = []
        self.gates: dict[str, anyio.Event] = {}

    async def list_containers(self, **_: Any) -> list[dict[str, Any]]:
        return [{"Id": cid, "State": state} for cid, state in self.states.items()]

    async def inspect_container(self, cid: str) -> dict[str, Any]:
        self.inspected.append(cid)
        if cid in self.gates:
            await self.gates.pop(cid).wait()
        return {
            "Id": cid,
            "Image": "sha256:1",
            "Created": "2026-01-01T00:00:00Z",
            "Config": {
                "Image": "img",
                "Labels": {
                    naming.LABEL_TYPE: naming.TYPE_CONTAINER,
                    naming.LABEL_CONTAINER_NAME: cid,
                },
            },
            "State": {"Status": self.states[cid], "Running": self.states[cid] == "running"},
        }

    async def inspect_image(self, ref: str) -> dict[str, Any]:
        raise errors.ImageNotFound(ref)


def manager(docker: FakeDocker) -> RuntimeManager:
    return RuntimeManager(RuntimeConfig(node_name="n1"), docker=docker)  # type: ignore[arg-type]


async def read(rm: RuntimeManager) -> list[str]:
    status = await rm.get_pod_status(uid="u1", name="p", namespace="default")
    return sorted(c.id for c in status.containers)


async def test_an_unchanged_listed_state_is_not_inspected_again() -> None:
    docker = FakeDocker({"c1": "running", "c2": "running"})
    rm = manager(docker)
    await read(rm)
    docker.inspected.clear()
    assert await read(rm) == ["c1", "c2"]
    assert docker.inspected == []


async def test_a_container_an_event_was_about_is_inspected_again() -> None:
    docker = FakeDocker({"c1": "running", "c2": "running"})
    rm = manager(docker)
    await read(rm)
    docker.inspected.clear()
    rm.forget("c1")
    await read(rm)
    assert docker.inspected == ["c1"]


async def test_a_container_marked_during_a_read_stays_in_that_read() -> None:
    docker = FakeDocker({"c1": "running", "c2": "created"})
    rm = manager(docker)
    await read(rm)
    docker.states["c2"] = "running"
    docker.gates["c2"] = gate = anyio.Event()
    async with anyio.create_task_group() as tg:
        found: list[list[str]] = []

        async def reader() -> None:
            found.append(await read(rm))

        tg.start_soon(reader)
        await anyio.sleep(0.01)
        rm.forget("c1")
        gate.set()
    assert found == [["c1", "c2"]]
    docker.inspected.clear()
    await read(rm)
    assert docker.inspected == ["c1"]
