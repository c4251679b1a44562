"""The pods' window of changes: a watch resumes after a version without losing or
repeating a change, starts with every pod added without one, and is expired when the
version is older than the window or the watcher falls behind."""

from __future__ import annotations

import pytest
from lightkube.models.core_v1 import Container, Pod, PodSpec, PodStatus
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet.api.kube.history import Expired, PodHistory, Watch
from asynckubelet.node.status_manager import StatusManager
from asynckubelet.runtime import containers as ctr


def pod(name: str) -> Pod:
    return Pod(
        metadata=ObjectMeta(name=name, namespace="default", uid=f"uid-{name}"),
        spec=PodSpec(containers=[Container(name="c", image="busybox")]),
    )


def changes(watch: Watch) -> list[tuple[str, str, int]]:
    return [(c.type, ctr.pod_identity(c.record.pod)[0], c.version) for c in watch.initial]


def test_a_watch_without_a_version_starts_with_every_pod_added() -> None:
    status = StatusManager()
    status.set(pod("web"), PodStatus(phase="Pending"))
    history = PodHistory(status)
    with history.watch("") as watch:
        assert changes(watch) == [("ADDED", "web", 1)]


def test_a_watch_resumes_after_a_version_with_each_later_change_once() -> None:
    status = StatusManager()
    history = PodHistory(status)
    status.set(pod("web"), PodStatus(phase="Pending"))
    listed = history.version
    status.set(pod("web"), PodStatus(phase="Running"))
    status.set(pod("db"), PodStatus(phase="Pending"))
    status.remove("uid-web")
    with history.watch(str(listed)) as watch:
        assert changes(watch) == [("MODIFIED", "web", 2), ("ADDED", "db", 3), ("DELETED", "web", 4)]


def test_a_version_that_is_no_number_is_refused() -> None:
    history = PodHistory(StatusManager())
    with pytest.raises(ValueError, match="abc"), history.watch("abc"):
        pass


def test_a_version_older_than_the_window_is_expired_but_one_inside_is_served() -> None:
    status = StatusManager()
    history = PodHistory(status, window=2)
    for phase in ("Pending", "Running", "Succeeded", "Failed"):
        status.set(pod("web"), PodStatus(phase=phase))
    with pytest.raises(Expired, match=r"too old resource version: 1 \(3\)"), history.watch("1"):
        pass
    with history.watch("2") as watch:
        assert [c.version for c in watch.initial] == [3, 4]


@pytest.mark.anyio
async def test_a_watcher_that_falls_behind_is_ended_and_told() -> None:
    status = StatusManager()
    history = PodHistory(status)
    with history.watch(str(history.version), buffer=1) as watch:
        status.set(pod("web"), PodStatus(phase="Pending"))
        status.set(pod("web"), PodStatus(phase="Running"))
        received = [c async for c in watch.changes]
        assert watch.fell_behind
    assert [c.version for c in received] == [1]
    assert status.watcher_count == 1
    history.close()
    assert status.watcher_count == 0
