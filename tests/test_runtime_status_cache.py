"""The runtime's cache of inspected containers: an event marks its container outdated, so the
next status read inspects it again even where Docker's list still shows the old state, and
a mark made while a read is under way never drops the container from that read."""

from __future__ import annotations

import anyio
import pytest

from asynckubelet.runtime import naming
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio


def engine(states: dict[str, str]) -> FakeDocker:
    """App containers of pod u1 on node n1, each named after its id, in these states."""
    docker = FakeDocker()
    for cid, state in states.items():
        docker.add_container(
            id=cid,
            state=state,
            labels={
                naming.LABEL_NODE: "n1",
                naming.LABEL_POD_UID: "u1",
                naming.LABEL_TYPE: naming.TYPE_CONTAINER,
                naming.LABEL_CONTAINER_NAME: cid,
            },
        )
    return docker


def manager(docker: FakeDocker) -> RuntimeManager:
    return RuntimeManager(RuntimeConfig(node_name="n1"), docker=docker)


async def read(rm: RuntimeManager) -> list[str]:
    status = await rm.get_pod_status(uid="u1", name="p", namespace="default")
    return sorted(c.id for c in status.containers)


async def test_an_unchanged_listed_state_is_not_inspected_again() -> None:
    docker = engine({"c1": "running", "c2": "running"})
    rm = manager(docker)
    await read(rm)
    docker.calls.clear()
    assert await read(rm) == ["c1", "c2"]
    assert docker.targets("inspect_container") == []


async def test_a_container_an_event_was_about_is_inspected_again() -> None:
    docker = engine({"c1": "running", "c2": "running"})
    rm = manager(docker)
    await read(rm)
    docker.calls.clear()
    rm.forget("c1")
    await read(rm)
    assert docker.targets("inspect_container") == ["c1"]


async def test_a_container_marked_during_a_read_stays_in_that_read() -> None:
    docker = engine({"c1": "running", "c2": "created"})
    rm = manager(docker)
    await read(rm)
    docker.containers["c2"].status = "running"
    gate = docker.hold("inspect_container", target="c2")
    async with anyio.create_task_group() as tg:
        found: list[list[str]] = []

        async def reader() -> None:
            found.append(await read(rm))

        tg.start_soon(reader)
        await anyio.wait_all_tasks_blocked()
        rm.forget("c1")
        gate.set()
    assert found == [["c1", "c2"]]
    docker.calls.clear()
    await read(rm)
    assert docker.targets("inspect_container") == ["c1"]


async def test_the_sandbox_inspected_for_its_network_is_not_inspected_again() -> None:
    docker = engine({"c1": "running"})
    docker.add_container(
        id="s1",
        state="running",
        labels={
            naming.LABEL_NODE: "n1",
            naming.LABEL_POD_UID: "u1",
            naming.LABEL_TYPE: naming.TYPE_SANDBOX,
        },
    )
    rm = manager(docker)
    assert isinstance(await rm.sandbox_pid("u1", "s1"), int)
    docker.calls.clear()
    status = await rm.get_pod_status(uid="u1", name="p", namespace="default")
    assert [s.id for s in status.sandboxes] == ["s1"]
    assert docker.targets("inspect_container") == ["c1"]
    docker.containers["s1"].status = "exited"
    docker.calls.clear()
    await rm.get_pod_status(uid="u1", name="p", namespace="default")
    assert docker.targets("inspect_container") == ["s1"]
