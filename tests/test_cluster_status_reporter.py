"""The status reporter's writes: one pending status per pod, the latest wins, patches sent
in order of change, a bounded number at once, a failed one sent again."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from fake_cluster import FakeCluster, pod
from lightkube.models.core_v1 import Pod, PodCondition, PodStatus
from polling import until

from asynckubelet import errors
from asynckubelet.cluster.reporter import PodStatusReporter

pytestmark = pytest.mark.anyio


def status(ready: str, *, ip: str = "10.244.0.5") -> PodStatus:
    return PodStatus(
        phase="Running",
        podIP=ip,
        conditions=[PodCondition(type="Ready", status=ready)],
    )


def ready_of(patch: Mapping[str, Any]) -> str:
    return str(patch["status"]["conditions"][0]["status"])


class GatedCluster(FakeCluster):
    """Holds each status patch until the test lets it through; counts those in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = anyio.Event()
        self.in_flight = 0
        self.most_in_flight = 0
        self.started: list[str] = []

    async def patch_pod_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> Pod:
        self.started.append(name)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.gate.wait()
        finally:
            self.in_flight -= 1
        return await super().patch_pod_status(namespace, name, patch)

    def let_through(self) -> None:
        self.gate.set()
        self.gate = anyio.Event()


@asynccontextmanager
async def running(reporter: PodStatusReporter) -> AsyncIterator[None]:
    async with anyio.create_task_group() as tg:
        await tg.start(reporter.run)
        yield
        tg.cancel_scope.cancel()


def tracked(reporter: PodStatusReporter, *names: str) -> None:
    for name in names:
        reporter.track(name, pod(name, name))


async def test_changes_before_the_write_are_sent_as_one_patch_of_the_latest() -> None:
    api = FakeCluster()
    reporter = PodStatusReporter(api)
    tracked(reporter, "a")
    for ready in ("False", "True", "False", "True"):
        reporter.want("a", status(ready))
    async with running(reporter):
        await until(lambda: reporter.patches == 1, interval=0.001)
        await until(lambda: not reporter._sending, interval=0.001)
    assert [(name, ready_of(p)) for name, p in api.status_patches] == [("a", "True")]


async def test_changes_while_a_patch_is_on_its_way_follow_in_one_patch_of_the_latest() -> None:
    api = GatedCluster()
    reporter = PodStatusReporter(api)
    tracked(reporter, "a")
    async with running(reporter):
        reporter.want("a", status("False"))
        await until(lambda: api.in_flight == 1, interval=0.001)
        reporter.want("a", status("True", ip="10.244.0.6"))
        reporter.want("a", status("True", ip="10.244.0.7"))
        api.let_through()
        await until(lambda: reporter.patches == 1 and api.in_flight == 1, interval=0.001)
        api.let_through()
        await until(lambda: reporter.patches == 2, interval=0.001)
        assert not reporter.states["a"].patch_needed()
    assert [(name, ready_of(p)) for name, p in api.status_patches] == [
        ("a", "False"),
        ("a", "True"),
    ]
    assert api.status_patches[1][1]["status"]["podIP"] == "10.244.0.7"
    assert api.most_in_flight == 1


async def test_pods_are_written_in_order_of_change_at_most_writers_at_once() -> None:
    api = GatedCluster()
    reporter = PodStatusReporter(api, writers=2)
    names = ["d", "b", "a", "c"]
    tracked(reporter, *names)
    for name in names:
        reporter.want(name, status("True"))
    async with running(reporter):
        await until(lambda: api.in_flight == 2, interval=0.001)
        assert api.started == ["d", "b"]
        api.let_through()
        await until(lambda: reporter.patches == 2 and api.in_flight == 2, interval=0.001)
        assert api.started == names
        api.let_through()
        await until(lambda: reporter.patches == 4, interval=0.001)
    assert [name for name, _ in api.status_patches] == names
    assert api.most_in_flight == 2


async def test_a_write_the_server_did_not_take_is_sent_again_at_the_next_round() -> None:
    api = FakeCluster()
    api.fail_next["patch_pod_status"] = [errors.ClusterError("connection reset")]
    reporter = PodStatusReporter(api, resync=0.01)
    tracked(reporter, "a", "b")
    reporter.want("a", status("True"))
    reporter.want("b", status("True"))
    async with running(reporter):
        await until(lambda: reporter.patches == 2, interval=0.001)
    assert [c for c in api.calls if c[0] == "patch_pod_status"] == [
        ("patch_pod_status", "a"),
        ("patch_pod_status", "b"),
        ("patch_pod_status", "a"),
    ]
    assert sorted(name for name, _ in api.status_patches) == ["a", "b"]
