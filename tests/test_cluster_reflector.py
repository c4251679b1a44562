"""The pod list and watch: resume after a cut, re-list after 410, never lose or duplicate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import pytest
from fake_cluster import FakeCluster, WatchStep, pod
from lightkube.models.core_v1 import Pod

from asynckubelet import errors
from asynckubelet.cluster.reflector import PodReflector, ServiceReflector
from asynckubelet.cluster.retry import Reconnect

pytestmark = pytest.mark.anyio


class Recorder:
    def __init__(self) -> None:
        self.changes: list[set[str]] = []
        self.seen: dict[str, Pod] = {}

    def __call__(self, pods: Mapping[str, Pod], changed: set[str]) -> None:
        self.changes.append(set(changed))
        self.seen = dict(pods)


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await anyio.lowlevel.checkpoint()


async def run_until_watch_idle(api: FakeCluster, reflector: PodReflector) -> None:
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await tg.start(reflector.run)
            await api.watch_done.wait()
            tg.cancel_scope.cancel()


def make(api: FakeCluster, recorder: Recorder, sleeps: Sleeps | None = None) -> PodReflector:
    return PodReflector(
        api,
        node_name="n1",
        on_change=recorder,
        reconnect=Reconnect(sleep=sleeps or Sleeps()),
    )


async def test_the_first_list_reports_every_pod_then_watch_events_one_by_one() -> None:
    api = FakeCluster(list_items=[pod("a", "uid-a"), pod("b", "uid-b")], version=10)
    api.watch_steps = [
        WatchStep(
            events=[
                ("ADDED", pod("c", "uid-c", rv="11")),
                ("MODIFIED", pod("a", "uid-a", rv="12")),
                ("DELETED", pod("b", "uid-b", rv="13")),
            ]
        )
    ]
    recorder = Recorder()
    reflector = make(api, recorder)
    await run_until_watch_idle(api, reflector)
    assert recorder.changes == [{"uid-a", "uid-b"}, {"uid-c"}, {"uid-a"}, {"uid-b"}]
    assert sorted(recorder.seen) == ["uid-a", "uid-c"]
    assert [rv for call, rv in api.calls if call == "watch_pods"] == ["10", "13"]


async def test_a_cut_watch_resumes_from_the_last_version_without_listing_again() -> None:
    api = FakeCluster(list_items=[pod("a", "uid-a")], version=10)
    api.watch_steps = [
        WatchStep(
            events=[("ADDED", pod("b", "uid-b", rv="11"))],
            error=errors.ClusterUnavailable("connection reset"),
        ),
        WatchStep(error=errors.ClusterUnavailable("connection refused")),
        WatchStep(events=[("ADDED", pod("b", "uid-b", rv="11"))]),
    ]
    recorder, sleeps = Recorder(), Sleeps()
    reflector = make(api, recorder, sleeps)
    await run_until_watch_idle(api, reflector)
    assert reflector.lists == 1
    assert [rv for call, rv in api.calls if call == "watch_pods"] == ["10", "11", "11", "11"]
    assert sorted(recorder.seen) == ["uid-a", "uid-b"]
    assert recorder.changes == [{"uid-a"}, {"uid-b"}]
    assert len(sleeps.delays) == 2
    assert sleeps.delays[1] > sleeps.delays[0] * 0.5


async def test_a_version_too_old_lists_again_and_a_pod_gone_meanwhile_counts_as_deleted() -> None:
    api = FakeCluster(list_items=[pod("a", "uid-a"), pod("b", "uid-b")], version=10)
    api.watch_steps = [
        WatchStep(error=errors.ClusterAPIError("too old resource version", code=410)),
    ]
    recorder = Recorder()
    reflector = make(api, recorder)
    original = api.list_pods

    async def second_list(*, node: str):  # type: ignore[no-untyped-def]
        if reflector.lists == 1:
            api.list_items = [pod("a", "uid-a"), pod("c", "uid-c", rv="20")]
            api.version = 20
        return await original(node=node)

    api.list_pods = second_list  # type: ignore[method-assign]
    await run_until_watch_idle(api, reflector)
    assert reflector.lists == 2
    assert recorder.changes[-1] == {"uid-b", "uid-c"}
    assert sorted(recorder.seen) == ["uid-a", "uid-c"]
    assert [rv for call, rv in api.calls if call == "watch_pods"] == ["10", "20"]


async def test_an_unreachable_server_at_start_is_tried_again_until_it_lists() -> None:
    api = FakeCluster(list_items=[pod("a", "uid-a")], version=10)
    api.list_errors = [errors.ClusterUnavailable("refused")] * 3
    recorder, sleeps = Recorder(), Sleeps()
    reflector = make(api, recorder, sleeps)
    await run_until_watch_idle(api, reflector)
    assert len(sleeps.delays) == 3
    assert sorted(recorder.seen) == ["uid-a"]


async def test_an_event_seen_twice_changes_nothing() -> None:
    api = FakeCluster(list_items=[pod("a", "uid-a", rv="5")], version=10)
    api.watch_steps = [WatchStep(events=[("MODIFIED", pod("a", "uid-a", rv="5"))])]
    recorder = Recorder()
    await run_until_watch_idle(api, make(api, recorder))
    assert recorder.changes == [{"uid-a"}]


def _svc(name: str, uid: str, ip: str, rv: str = "1") -> Any:
    from lightkube.models.core_v1 import Service

    return Service.from_dict(
        {
            "metadata": {"name": name, "namespace": "team", "uid": uid, "resourceVersion": rv},
            "spec": {"clusterIP": ip, "ports": [{"port": 80}]},
        }
    )


async def test_services_are_refused_until_listed_then_follow_the_watch() -> None:
    """Pods' Service variables come from every Service of the cluster: before the first list
    the kubelet's error (no environment is guessed), then the list, then each event."""
    api = FakeCluster(version=20)
    api.services = [_svc("web", "uid-web", "10.96.0.10")]
    services = ServiceReflector(api, reconnect=Reconnect(sleep=Sleeps()))
    with pytest.raises(errors.ContainerConfigError, match="services have not yet been read"):
        services.bodies()
    await services.list_once()
    assert [b["spec"]["clusterIP"] for b in services.bodies()] == ["10.96.0.10"]
    services.on_change(services.items, services.apply("ADDED", _svc("db", "uid-db", "10.96.0.11")))
    services.on_change(services.items, services.apply("DELETED", _svc("web", "uid-web", "")))
    assert [b["metadata"]["name"] for b in services.bodies()] == ["db"]
    assert ("list_services", None) in api.calls
