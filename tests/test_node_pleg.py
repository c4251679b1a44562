"""The PLEG's relist: only pods whose containers changed are woken."""

from __future__ import annotations

import pytest

from asynckubelet import errors
from asynckubelet.node.pleg import PLEG
from asynckubelet.runtime import naming
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio


def add(docker: FakeDocker, cid: str, uid: str, state: str) -> None:
    docker.add_container(
        id=cid, state=state, labels={naming.LABEL_NODE: "n1", naming.LABEL_POD_UID: uid}
    )


def pleg(docker: FakeDocker, woken: list[str]) -> PLEG:
    return PLEG(docker, node_name="n1", wake=woken.append)


async def test_the_first_relist_wakes_every_pod_seen() -> None:
    docker, woken = FakeDocker(), list[str]()
    add(docker, "c1", "u1", "running")
    add(docker, "c2", "u2", "exited")
    await pleg(docker, woken).relist()
    assert sorted(woken) == ["u1", "u2"]


async def test_a_relist_without_change_wakes_nobody() -> None:
    docker, woken = FakeDocker(), list[str]()
    add(docker, "c1", "u1", "running")
    p = pleg(docker, woken)
    await p.relist()
    woken.clear()
    await p.relist()
    assert woken == []


async def test_a_changed_state_wakes_only_its_pod() -> None:
    docker, woken = FakeDocker(), list[str]()
    add(docker, "c1", "u1", "running")
    add(docker, "c2", "u2", "running")
    p = pleg(docker, woken)
    await p.relist()
    woken.clear()
    docker.exit("c1")
    await p.relist()
    assert woken == ["u1"]


async def test_a_vanished_container_wakes_its_pod() -> None:
    docker, woken = FakeDocker(), list[str]()
    add(docker, "c1", "u1", "running")
    p = pleg(docker, woken)
    await p.relist()
    woken.clear()
    await docker.remove_container("c1")
    await p.relist()
    assert woken == ["u1"]


async def test_a_failed_relist_is_survived_and_wakes_nobody() -> None:
    docker, woken = FakeDocker(), list[str]()
    docker.fail("list_containers", errors.RuntimeUnavailable("engine gone"))
    await pleg(docker, woken).relist()
    assert woken == []


async def test_each_relist_reports_its_duration() -> None:
    docker, durations = FakeDocker(), list[float]()
    p = PLEG(docker, node_name="n1", wake=lambda uid: None, on_relist=durations.append)
    await p.relist()
    assert len(durations) == 1
    assert durations[0] >= 0
