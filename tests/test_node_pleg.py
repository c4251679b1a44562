"""The PLEG's relist: only pods whose containers changed are woken."""

from __future__ import annotations

from typing import Any

import pytest

from asynckubelet import errors
from asynckubelet.node.pleg import PLEG
from asynckubelet.runtime import naming

pytestmark = pytest.mark.anyio


class FakeDocker:
    """The Docker adapter's ``list_containers``, answering from a table."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.fail = False

    async def list_containers(self, **_: Any) -> list[dict[str, Any]]:
        if self.fail:
            raise errors.RuntimeUnavailable("engine gone")
        return self.rows


def row(cid: str, uid: str, state: str) -> dict[str, Any]:
    return {"Id": cid, "State": state, "Labels": {naming.LABEL_POD_UID: uid}}


def pleg(docker: FakeDocker, woken: list[str]) -> PLEG:
    return PLEG(docker, node_name="n1", wake=woken.append)  # type: ignore[arg-type]


async def test_the_first_relist_wakes_every_pod_seen() -> None:
    docker, woken = FakeDocker(), []
    docker.rows = [row("c1", "u1", "running"), row("c2", "u2", "exited")]
    await pleg(docker, woken).relist()
    assert sorted(woken) == ["u1", "u2"]


async def test_a_relist_without_change_wakes_nobody() -> None:
    docker, woken = FakeDocker(), []
    docker.rows = [row("c1", "u1", "running")]
    p = pleg(docker, woken)
    await p.relist()
    woken.clear()
    await p.relist()
    assert woken == []


async def test_a_changed_state_wakes_only_its_pod() -> None:
    docker, woken = FakeDocker(), []
    docker.rows = [row("c1", "u1", "running"), row("c2", "u2", "running")]
    p = pleg(docker, woken)
    await p.relist()
    woken.clear()
    docker.rows = [row("c1", "u1", "exited"), row("c2", "u2", "running")]
    await p.relist()
    assert woken == ["u1"]


async def test_a_vanished_container_wakes_its_pod() -> None:
    docker, woken = FakeDocker(), []
    docker.rows = [row("c1", "u1", "running")]
    p = pleg(docker, woken)
    await p.relist()
    woken.clear()
    docker.rows = []
    await p.relist()
    assert woken == ["u1"]


async def test_a_failed_relist_is_survived_and_wakes_nobody() -> None:
    docker, woken = FakeDocker(), []
    docker.fail = True
    await pleg(docker, woken).relist()
    assert woken == []


async def test_each_relist_reports_its_duration() -> None:
    docker, durations = FakeDocker(), []
    p = PLEG(docker, node_name="n1", wake=lambda uid: None, on_relist=durations.append)  # type: ignore[arg-type]
    await p.relist()
    assert len(durations) == 1 and durations[0] >= 0
