"""The event recorder: aggregation, the bounded file, reading it back, kubectl's ages."""

from __future__ import annotations

import dataclasses
import json
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from lightkube.models.core_v1 import Pod
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet.node.events import (
    COMBINED,
    EventRecorder,
    PodEvent,
    age,
    read_events,
    read_pod_events,
    rotated,
    since_creation,
)

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


def test_the_file_is_rotated_past_its_bound_keeping_one_older_part(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    recorder = EventRecorder(path=path, clock=Clock(), max_file_bytes=2000)
    for i in range(40):
        recorder(pod(name=f"p{i}", uid=f"u{i}"), type="Normal", reason="Started", message="m")
    assert path.stat().st_size <= 2000
    assert rotated(path).stat().st_size <= 2000
    assert not path.with_name("events.jsonl.2").exists()
    seen = [e.pod for e in read_events(path)]
    assert seen[-1] == "p39"
    assert "p0" not in seen
    assert seen == sorted(seen, key=lambda name: int(name[1:]))


@pytest.mark.anyio
async def test_while_the_writer_runs_events_reach_the_file_from_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from asynckubelet import hostfs

    path = tmp_path / "events.jsonl"
    recorder = EventRecorder(path=path, clock=Clock())
    writers: list[int] = []
    append = hostfs.append_file

    def recording_append(*args: object, **kwargs: object) -> None:
        writers.append(threading.get_ident())
        append(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(hostfs, "append_file", recording_append)
    async with anyio.create_task_group() as tg:
        await tg.start(recorder.run)
        for i in range(5):
            recorder(pod(name=f"p{i}", uid=f"u{i}"), type="Normal", reason="Started", message="m")
        assert not path.exists()
        await anyio.wait_all_tasks_blocked()
        assert [e.pod for e in read_events(path)] == [f"p{i}" for i in range(5)]
        recorder(pod(name="last", uid="u9"), type="Normal", reason="Started", message="m")
        tg.cancel_scope.cancel()
    assert read_events(path)[-1].pod == "last"
    assert threading.get_ident() not in writers[:-1]


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


def test_the_events_file_is_readable_by_its_owner_only_also_after_rotation(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state" / "events.jsonl"
    recorder = EventRecorder(path=path, clock=Clock(), max_file_bytes=600)
    recorder(pod(), type="Normal", reason="Started", message="m0")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o750
    for i in range(6):
        recorder(pod(), type="Normal", reason="Started", message=f"m{i}")
    assert rotated(path).exists()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(rotated(path).stat().st_mode) == 0o600


def test_events_are_not_appended_through_a_link_in_place_of_the_file(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("host\n")
    path = tmp_path / "events.jsonl"
    path.symlink_to(victim)
    EventRecorder(path=path, clock=Clock())(pod(), type="Normal", reason="Started", message="m")
    assert victim.read_text() == "host\n"


class ManualClock:
    """A clock that moves only when told."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def backoff(recorder: EventRecorder, *, container: str = "a") -> None:
    recorder(pod(), type="Warning", reason="BackOff", message="Back-off", container=container)


def test_an_objects_events_past_the_burst_are_counted_but_reported_once_per_refill() -> None:
    clock = ManualClock()
    recorder = EventRecorder(clock=clock)
    reported: list[int] = []
    recorder.subscribe(lambda e: reported.append(e.count))
    for _ in range(40):
        backoff(recorder)
        clock.advance(1)
    assert reported == list(range(1, 26))
    (event,) = recorder.list()
    assert (event.count, event.first_timestamp) == (25, T0)
    clock.advance(300)
    backoff(recorder)
    (event,) = recorder.list()
    assert (event.count, event.first_timestamp, event.last_timestamp) == (41, T0, clock.now)
    assert reported[-1] == 41


def test_the_rate_is_per_object() -> None:
    clock = ManualClock()
    recorder = EventRecorder(clock=clock)
    for _ in range(30):
        backoff(recorder)
    recorder(pod(name="db", uid="u2"), type="Normal", reason="Started", message="m")
    assert [e.pod for e in recorder.list(uid="u2")] == ["db"]


def test_held_back_events_reach_neither_the_file_nor_the_log(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    recorder = EventRecorder(path=path, clock=ManualClock())
    for _ in range(30):
        backoff(recorder)
    assert len(path.read_text().splitlines()) == 25
    assert read_events(path)[0].count == 25


@pytest.mark.parametrize(
    ("messages", "shown"),
    [
        (
            [f"m{i}" for i in range(9)],
            [(f"m{i}", 1) for i in range(9)],
        ),
        (
            [f"m{i}" for i in range(12)],
            [
                *((f"m{i}", 1) for i in range(9)),
                ("(combined from similar events): m11", 3),
            ],
        ),
    ],
)
def test_more_than_ten_similar_events_within_ten_minutes_are_combined(
    messages: list[str], shown: list[tuple[str, int]]
) -> None:
    clock = ManualClock()
    recorder = EventRecorder(clock=clock)
    for message in messages:
        recorder(pod(), type="Warning", reason="Failed", message=message, container="a")
        clock.advance(1)
    assert [(e.message, e.count) for e in recorder.list()] == shown


def similar_failures(
    recorder: EventRecorder, clock: ManualClock, count: int, *, apart: float = 1
) -> None:
    """``count`` similar Warnings of the pod ``web`` (``Failed``: ``m0``, ``m1``...),
    ``apart`` seconds apart."""
    for i in range(count):
        recorder(pod(), type="Warning", reason="Failed", message=f"m{i}")
        clock.advance(apart)


def test_similar_events_ten_minutes_apart_are_not_combined() -> None:
    clock = ManualClock()
    recorder = EventRecorder(clock=clock)
    similar_failures(recorder, clock, 12, apart=601)
    assert not any(e.combined for e in recorder.list())


def test_a_combined_event_read_back_from_the_file_is_one_event(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    clock = ManualClock()
    recorder = EventRecorder(path=path, clock=clock)
    similar_failures(recorder, clock, 14)
    combined = [e for e in read_events(path) if e.combined]
    assert [(e.message, e.count) for e in combined] == [("(combined from similar events): m13", 5)]


def test_a_forgotten_pod_starts_its_counts_and_rate_afresh() -> None:
    clock = ManualClock()
    recorder = EventRecorder(clock=clock)
    for _ in range(30):
        backoff(recorder)
    recorder.forget("u1")
    backoff(recorder)
    assert [e.count for e in recorder.list()] == [1]


def test_an_event_written_to_the_file_keeps_every_field() -> None:
    now = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)
    event = PodEvent(
        namespace="ns",
        pod="web",
        uid="u1",
        type="Warning",
        reason="BackOff",
        message="m",
        first_timestamp=now,
        last_timestamp=now + timedelta(seconds=5),
        count=3,
        container="c",
        source="kubelet",
        combined=True,
    )
    data = json.loads(json.dumps(event.to_json()))
    assert set(data) == {f.name for f in dataclasses.fields(PodEvent)}
    assert PodEvent.from_json(data) == event


def started(recorder: EventRecorder, *, name: str = "web", uid: str = "u1") -> None:
    recorder(pod(name=name, uid=uid), type="Normal", reason="Started", message="m", container="a")


def restarted(path: Path, clock: ManualClock, **kwargs: Any) -> EventRecorder:
    recorder = EventRecorder(path=path, clock=clock, **kwargs)
    recorder.load()
    return recorder


def test_a_restarted_recorder_lists_the_events_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    clock = ManualClock()
    first = EventRecorder(path=path, clock=clock)
    started(first, uid="u1")
    clock.advance(1)
    backoff(first)
    started(first, name="db", uid="u2")
    again = EventRecorder(path=path, clock=clock)
    assert again.load() == 3
    assert again.list() == first.list()
    assert [e.pod for e in again.list(uid="u2")] == ["db"]


def test_a_repeat_after_a_restart_counts_on_from_the_event_read_back(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    clock = ManualClock()
    first = EventRecorder(path=path, clock=clock)
    for _ in range(3):
        backoff(first)
        clock.advance(1)
    again = restarted(path, clock)
    backoff(again)
    (event,) = again.list()
    assert (event.count, event.first_timestamp, event.last_timestamp) == (4, T0, clock.now)
    (written,) = read_events(path)
    assert written == event


def test_similar_events_after_a_restart_are_combined_with_those_read_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.jsonl"
    clock = ManualClock()
    first = EventRecorder(path=path, clock=clock)
    similar_failures(first, clock, 12)
    again = restarted(path, clock)
    again(pod(), type="Warning", reason="Failed", message="m12")
    combined = [e for e in again.list() if e.combined]
    assert [(e.message, e.count) for e in combined] == [(COMBINED + "m12", 4)]
    assert len(again.list()) == 10


def test_a_restarted_recorder_skips_a_torn_or_garbled_last_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    clock = ManualClock()
    started(EventRecorder(path=path, clock=clock))
    with path.open("ab") as f:
        f.write(b'{"namespace": "default", "pod": "web", "uid": "u1", "ty')
    again = restarted(path, clock)
    assert [e.reason for e in again.list()] == ["Started"]
    with path.open("ab") as f:
        f.write(b"\n\xff\xfe[1, 2]\n42\n[]\n")
        f.write(json.dumps({**read_events(path)[0].to_json(), "last_timestamp": "x"}).encode())
    assert [e.reason for e in restarted(path, clock).list()] == ["Started"]
    naive = {**read_events(path)[0].to_json(), "last_timestamp": "2026-01-01T00:00:00"}
    with path.open("a") as f:
        f.write("\n" + json.dumps(naive) + "\n")
    assert [e.reason for e in restarted(path, clock).list()] == ["Started"]


def test_events_older_than_the_ttl_are_neither_read_back_nor_listed(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    clock = ManualClock()
    first = EventRecorder(path=path, clock=clock)
    started(first, name="old", uid="u1")
    clock.advance(30 * 60)
    started(first, name="new", uid="u2")
    clock.advance(31 * 60)
    assert [e.pod for e in first.list()] == ["new"]
    assert [e.pod for e in restarted(path, clock).list()] == ["new"]
    assert [e.pod for e in read_events(path, now=clock.now)] == ["new"]
    assert [e.pod for e in read_events(path)] == ["old", "new"]
    kept = restarted(path, clock, ttl=None)
    clock.advance(3600)
    assert [e.pod for e in kept.list()] == ["old", "new"]
    started(kept, name="old", uid="u1")
    assert [(e.pod, e.count) for e in kept.list()] == [("new", 1), ("old", 2)]


def test_a_restarted_recorder_takes_back_its_bound_of_the_latest_events(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    clock = ManualClock()
    first = EventRecorder(path=path, clock=clock)
    for i in range(8):
        started(first, name=f"p{i}", uid=f"u{i}")
        clock.advance(1)
    again = restarted(path, clock, max_events=3)
    assert [e.pod for e in again.list()] == ["p5", "p6", "p7"]


def test_a_deleted_pods_events_stay_gone_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    clock = ManualClock()
    first = EventRecorder(path=path, clock=clock)
    for _ in range(2):
        started(first, uid="u1")
    first(pod(uid="u1"), type="Normal", reason="Killing", message="Stopping container a")
    started(first, name="db", uid="u2")
    first.forget("u1")
    assert [e.pod for e in read_events(path)] == ["db"]
    clock.advance(5)
    started(first, uid="u1")
    assert [(e.reason, e.count) for e in first.list(uid="u1")] == [("Started", 1)]
    again = restarted(path, clock)
    assert [(e.pod, e.reason, e.count) for e in again.list()] == [
        ("db", "Started", 1),
        ("web", "Started", 1),
    ]
    started(again, uid="u1")
    assert [e.count for e in again.list(uid="u1")] == [2]


def test_a_pods_events_from_before_its_creation_are_not_its_own() -> None:
    created = T0 + timedelta(seconds=10)

    def at(seconds: float) -> PodEvent:
        when = T0 + timedelta(seconds=seconds)
        return PodEvent(
            namespace="default",
            pod="web",
            uid="u1",
            type="Normal",
            reason=f"at{seconds}",
            message="m",
            first_timestamp=when,
            last_timestamp=when,
        )

    events = [at(1), at(9.9), at(10), at(10.5), at(11)]
    assert [e.reason for e in since_creation(events, created)] == ["at10", "at10.5", "at11"]
    assert [e.reason for e in since_creation(events, created.replace(tzinfo=None))] == [
        "at10",
        "at10.5",
        "at11",
    ]
    same_second = created + timedelta(microseconds=700_000)
    assert [e.reason for e in since_creation(events, same_second)] == ["at10", "at10.5", "at11"]
    assert since_creation(events, None) == events


def test_the_file_read_for_one_pod_gives_its_own_events_within_the_ttl(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    clock = ManualClock()
    recorder = EventRecorder(path=path, clock=clock)
    recorder(pod(uid="u1"), type="Normal", reason="Killing", message="Stopping container a")
    clock.advance(10.5)
    started(recorder, uid="u1")
    started(recorder, name="db", uid="u2")
    created = T0 + timedelta(seconds=10)
    again = Pod(
        metadata=ObjectMeta(name="web", namespace="default", uid="u1", creationTimestamp=created)
    )
    assert [e.reason for e in read_pod_events(path, again, now=clock.now)] == ["Started"]
    untimed = Pod(metadata=ObjectMeta(name="web", namespace="default", uid="u1"))
    assert [e.reason for e in read_pod_events(path, untimed, now=clock.now)] == [
        "Killing",
        "Started",
    ]
    later = clock.now + timedelta(hours=2)
    assert read_pod_events(path, untimed, now=later) == []
