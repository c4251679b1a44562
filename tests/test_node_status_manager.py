"""The status manager: versions, watchers and the status files other processes read."""

from __future__ import annotations

import stat
from pathlib import Path

import anyio
import anyio.abc
import builders
import pytest
from lightkube.models.core_v1 import Pod, PodStatus

from asynckubelet.node.status_manager import PodRecord, StatusManager, read_status_files


def pod(uid: str = "u1", name: str = "web") -> Pod:
    return builders.pod(name, uid=uid, containers=[builders.container("a")])


def test_a_changed_status_bumps_the_version() -> None:
    manager = StatusManager()
    first = manager.set(pod(), PodStatus(phase="Pending"))
    second = manager.set(pod(), PodStatus(phase="Running"))
    assert second.version == first.version + 1


def test_an_unchanged_status_keeps_the_version_and_notifies_nobody() -> None:
    manager = StatusManager()
    manager.set(pod(), PodStatus(phase="Running"))
    calls: list[str] = []
    manager.subscribe(lambda record, uid: calls.append(uid))
    manager.set(pod(), PodStatus(phase="Running"))
    assert calls == []


def test_watchers_see_changes_and_removals() -> None:
    manager = StatusManager()
    seen: list[tuple[str | None, str]] = []

    def watcher(record: PodRecord | None, uid: str) -> None:
        seen.append((record.status.phase if record else None, uid))

    manager.subscribe(watcher)
    manager.set(pod(), PodStatus(phase="Running"))
    manager.remove("u1")
    assert seen == [("Running", "u1"), (None, "u1")]


def test_find_looks_pods_up_by_namespace_and_name() -> None:
    manager = StatusManager()
    manager.set(pod(uid="u2", name="db"), PodStatus(phase="Running"))
    record = manager.find("default", "db")
    assert record is not None
    assert record.uid == "u2"


def test_the_api_object_is_a_full_v1_pod_with_status() -> None:
    manager = StatusManager()
    record = manager.set(pod(), PodStatus(phase="Running"))
    obj = record.api_object()
    assert (obj.apiVersion, obj.kind, obj.status.phase if obj.status else None) == (
        "v1",
        "Pod",
        "Running",
    )


def test_status_files_round_trip_and_vanish_with_the_pod(tmp_path: Path) -> None:
    manager = StatusManager(state_dir=tmp_path)
    manager.set(pod(), PodStatus(phase="Running"))
    files = read_status_files(tmp_path)
    assert files["u1"].status is not None
    assert files["u1"].status.phase == "Running"
    manager.remove("u1")
    assert read_status_files(tmp_path) == {}


@pytest.mark.anyio
async def test_changed_wakes_a_waiter_on_the_next_change() -> None:
    manager = StatusManager()
    woke = anyio.Event()

    async def waiter(*, task_status: anyio.abc.TaskStatus[None]) -> None:
        changed = manager.changed()
        task_status.started()
        await changed
        woke.set()

    async with anyio.create_task_group() as tg:
        await tg.start(waiter)
        manager.set(pod(), PodStatus(phase="Running"))
        with anyio.fail_after(5):
            await woke.wait()


def test_prune_removes_files_of_pods_no_longer_held(tmp_path: Path) -> None:
    StatusManager(state_dir=tmp_path).set(pod(uid="gone"), PodStatus(phase="Running"))
    manager = StatusManager(state_dir=tmp_path)
    manager.set(pod(uid="kept"), PodStatus(phase="Running"))
    assert manager.prune() == ["gone"]
    assert set(read_status_files(tmp_path)) == {"kept"}


def test_status_files_and_their_directory_are_closed_to_other_users(tmp_path: Path) -> None:
    StatusManager(state_dir=tmp_path).set(pod(), PodStatus(phase="Running"))
    assert stat.S_IMODE((tmp_path / "pods").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "pods" / "u1.json").stat().st_mode) == 0o600


@pytest.mark.parametrize("uid", ["../../victim", "../victim", "a/b"])
def test_a_pod_uid_that_is_a_path_writes_and_removes_no_file_outside(
    tmp_path: Path, uid: str
) -> None:
    state = tmp_path / "a" / "state"
    state.mkdir(parents=True)
    victim = tmp_path / "a" / "victim.json"
    victim.write_text("host")
    before = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")}
    manager = StatusManager(state_dir=state)
    manager.set(pod(uid=uid), PodStatus(phase="Running"))
    made = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")} - before
    manager.remove(uid)
    assert made <= {"a/state/pods"}
    assert victim.read_text() == "host"


def test_a_status_file_planted_as_a_link_is_replaced_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("host")
    (tmp_path / "state" / "pods").mkdir(parents=True)
    (tmp_path / "state" / "pods" / "u1.json").symlink_to(victim)
    StatusManager(state_dir=tmp_path / "state").set(pod(), PodStatus(phase="Running"))
    assert victim.read_text() == "host"


def test_an_unchanged_status_writes_no_file(tmp_path: Path) -> None:
    manager = StatusManager(state_dir=tmp_path)
    manager.set(pod(), PodStatus(phase="Running"))
    manager.set(pod(), PodStatus(phase="Running"))
    assert manager.writes == 1


def test_a_record_is_serialized_once_for_the_file_and_every_reader(tmp_path: Path) -> None:
    manager = StatusManager(state_dir=tmp_path)
    record = manager.set(pod(), PodStatus(phase="Running"))
    assert record.json_text is record.json_text
    assert (tmp_path / "pods" / "u1.json").read_text() == record.json_text


def test_a_record_s_view_shares_its_parts_while_api_object_is_a_copy() -> None:
    manager = StatusManager()
    record = manager.set(pod(), PodStatus(phase="Running"))
    view = record.view
    assert (view.apiVersion, view.kind) == ("v1", "Pod")
    assert view.spec is record.pod.spec
    assert view.status is record.status
    assert record.pod.status is None
    copy = record.api_object()
    assert copy.spec is not record.pod.spec
    copy.status.phase = "Failed"  # type: ignore[union-attr]
    assert record.status.phase == "Running"
    changed = manager.set(pod(), PodStatus(phase="Succeeded"))
    assert changed.view.status is not None
    assert changed.view.status.phase == "Succeeded"


@pytest.mark.anyio
async def test_the_writer_task_writes_the_latest_status_of_each_changed_pod(
    tmp_path: Path,
) -> None:
    manager = StatusManager(state_dir=tmp_path)
    async with anyio.create_task_group() as tg:
        await tg.start(manager.run)
        manager.set(pod(uid="u1"), PodStatus(phase="Pending"))
        manager.set(pod(uid="u1"), PodStatus(phase="Running"))
        manager.set(pod(uid="u2"), PodStatus(phase="Running"))
        manager.set(pod(uid="u3"), PodStatus(phase="Running"))
        manager.remove("u3")
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
    files = read_status_files(tmp_path)
    assert sorted(files) == ["u1", "u2"]
    assert files["u1"].status is not None
    assert files["u1"].status.phase == "Running"
    assert manager.writes == 3


@pytest.mark.anyio
async def test_changes_not_yet_written_are_written_when_the_writer_stops(tmp_path: Path) -> None:
    manager = StatusManager(state_dir=tmp_path)
    async with anyio.create_task_group() as tg:
        await tg.start(manager.run)
        manager.set(pod(), PodStatus(phase="Running"))
        tg.cancel_scope.cancel()
    assert set(read_status_files(tmp_path)) == {"u1"}
