"""The event recorder: aggregation, the bounded file, reading it back, kubectl's ages."""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from lightkube.models.core_v1 import Pod
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet.node.events import EventRecorder, age, read_events

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def pod(name: str = "web", uid: str = "u1") -> Pod:
    return Pod(metadata=ObjectMeta(name=name, namespace="default", uid=uid))


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def test_a_repeated_event_is_counted_with_first_and_last_times() -> None:
    recorder = EventRecorder(clock=Clock())
    for _ in range(3):
        recorder(pod(), type="Warning", reason="BackOff", message="Back-off", container="a")
    (event,) = recorder.list()
    assert (event.count, event.first_timestamp, event.last_timestamp) == (
        3,
        T0 + timedelta(seconds=1),
        T0 + timedelta(seconds=3),
    )


def test_events_differing_in_message_are_kept_apart() -> None:
    recorder = EventRecorder(clock=Clock())
    recorder(pod(), type="Normal", reason="Pulled", message="image a")
    recorder(pod(), type="Normal", reason="Pulled", message="image b")
    assert [e.message for e in recorder.list()] == ["image a", "image b"]


def test_listing_one_pod_leaves_out_other_pods_events() -> None:
    recorder = EventRecorder(clock=Clock())
    recorder(pod(uid="u1"), type="Normal", reason="Started", message="x")
    recorder(pod(name="db", uid="u2"), type="Normal", reason="Started", message="x")
    assert [e.pod for e in recorder.list(uid="u2")] == ["db"]


def test_the_file_holds_the_latest_record_of_each_event(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    recorder = EventRecorder(path=path, clock=Clock())
    recorder(pod(), type="Warning", reason="BackOff", message="m", container="a")
    recorder(pod(), type="Warning", reason="BackOff", message="m", container="a")
    (event,) = read_events(path)
    assert (event.count, event.container, event.field_path) == (2, "a", "spec.containers{a}")


def test_the_file_is_compacted_to_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    recorder = EventRecorder(path=path, clock=Clock(), max_events=10)
    for i in range(25):
        recorder(pod(), type="Normal", reason="Started", message=f"m{i}")
    assert len(path.read_text().splitlines()) <= 20
    assert read_events(path)[-1].message == "m24"


def test_a_torn_line_in_the_file_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    recorder = EventRecorder(path=path, clock=Clock())
    recorder(pod(), type="Normal", reason="Started", message="m")
    with path.open("a") as f:
        f.write(json.dumps({"namespace": "default"})[:10])
    assert [e.reason for e in read_events(path)] == ["Started"]


def test_subscribers_receive_each_event_until_they_unsubscribe() -> None:
    recorder = EventRecorder(clock=Clock())
    got: list[str] = []
    unsubscribe = recorder.subscribe(lambda e: got.append(e.reason))
    recorder(pod(), type="Normal", reason="Pulling", message="m")
    unsubscribe()
    recorder(pod(), type="Normal", reason="Pulled", message="m")
    assert got == ["Pulling"]


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (185, "3m5s"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600 + 60, "3h1m"),
        (8 * 3600, "8h"),
        (47 * 3600, "47h"),
        (50 * 3600, "2d2h"),
        (8 * 86400, "8d"),
        (800 * 86400, "2y70d"),
        (9 * 365 * 86400, "9y"),
    ],
)
def test_ages_are_shown_as_kubectl_shows_them(seconds: int, shown: str) -> None:
    assert age(T0, now=T0 + timedelta(seconds=seconds)) == shown


def test_the_events_file_is_readable_by_its_owner_only_also_after_compaction(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state" / "events.jsonl"
    recorder = EventRecorder(path=path, clock=Clock(), max_events=2)
    recorder(pod(), type="Normal", reason="Started", message="m0")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o750
    for i in range(6):
        recorder(pod(), type="Normal", reason="Started", message=f"m{i}")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_events_are_not_appended_through_a_link_in_place_of_the_file(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("host\n")
    path = tmp_path / "events.jsonl"
    path.symlink_to(victim)
    EventRecorder(path=path, clock=Clock())(pod(), type="Normal", reason="Started", message="m")
    assert victim.read_text() == "host\n"
