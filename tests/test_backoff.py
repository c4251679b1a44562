"""Crash-loop and image-pull back-off: the schedule, its cap and reset, and the kubelet's words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import builders
import pytest
from lightkube.models.core_v1 import Container, Pod

from asynckubelet.runtime import naming
from asynckubelet.runtime.backoff import (
    CRASH_LOOP_BACK_OFF,
    Backoff,
    crash_loop_key,
    crash_loop_message,
    go_duration,
    image_pull_back_off_message,
    image_pull_key,
    should_back_off,
)
from asynckubelet.runtime.types import ContainerState, ContainerStatus, PodRuntimeStatus

T0 = datetime(2024, 1, 1, tzinfo=UTC)
UID = "0f0e4a5c-1111-2222-3333-444455556666"


class FakeClock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def make_backoff() -> tuple[Backoff, FakeClock]:
    clock = FakeClock()
    return Backoff(clock=clock), clock


def fail_times(backoff: Backoff, key: str, times: int, clock: FakeClock) -> None:
    for _ in range(times):
        backoff.next(key, event_time=clock())


def web_pod() -> Pod:
    return builders.pod("web", uid=UID)


def app(pod: Pod) -> Container:
    assert pod.spec is not None
    return pod.spec.containers[0]


def status_with(*containers: ContainerStatus) -> PodRuntimeStatus:
    return PodRuntimeStatus(uid=UID, name="web", namespace="default", containers=containers)


def dead_app(*, finished_at: datetime, id: str = "c1") -> ContainerStatus:
    return ContainerStatus(
        id=id,
        name="app",
        state=ContainerState.EXITED,
        created_at=finished_at - timedelta(seconds=1),
        finished_at=finished_at,
        exit_code=1,
        hash=naming.hash_container(app(web_pod())),
    )


@pytest.mark.parametrize(
    ("failures", "delay"),
    [(1, 10), (2, 20), (3, 40), (4, 80), (5, 160), (6, 300), (7, 300), (20, 300)],
    ids=lambda v: str(v),
)
def test_the_delay_starts_at_ten_seconds_and_doubles_up_to_five_minutes(
    failures: int, delay: float
) -> None:
    backoff, clock = make_backoff()
    fail_times(backoff, "k", failures, clock)
    assert backoff.get("k") == delay


def test_the_schedule_is_tenacitys_exponential_wait() -> None:
    backoff, _ = make_backoff()
    assert [backoff.delay_for_step(n) for n in range(1, 8)] == [10, 20, 40, 80, 160, 300, 300]


def test_a_key_never_failed_has_no_delay() -> None:
    backoff, _ = make_backoff()
    assert backoff.get("k") == 0


def test_a_key_never_failed_is_not_in_backoff() -> None:
    backoff, clock = make_backoff()
    assert not backoff.is_in_backoff_since("k", event_time=clock())


def test_a_key_is_in_backoff_until_its_delay_has_passed() -> None:
    backoff, clock = make_backoff()
    backoff.next("k", event_time=clock())
    clock.advance(9.9)
    assert backoff.is_in_backoff_since("k", event_time=T0)


def test_a_key_leaves_backoff_once_its_delay_has_passed() -> None:
    backoff, clock = make_backoff()
    backoff.next("k", event_time=clock())
    clock.advance(10)
    assert not backoff.is_in_backoff_since("k", event_time=T0)


def test_ten_quiet_minutes_reset_the_delay() -> None:
    backoff, clock = make_backoff()
    fail_times(backoff, "k", 5, clock)
    clock.advance(600.001)
    backoff.next("k", event_time=clock())
    assert backoff.get("k") == 10


def test_less_than_ten_quiet_minutes_keep_doubling() -> None:
    backoff, clock = make_backoff()
    fail_times(backoff, "k", 2, clock)
    clock.advance(599)
    backoff.next("k", event_time=clock())
    assert backoff.get("k") == 40


def test_an_event_after_ten_quiet_minutes_is_not_in_backoff() -> None:
    backoff, clock = make_backoff()
    fail_times(backoff, "k", 6, clock)
    clock.advance(601)
    assert not backoff.is_in_backoff_since("k", event_time=clock())


def test_keys_back_off_independently() -> None:
    backoff, clock = make_backoff()
    fail_times(backoff, "a", 3, clock)
    backoff.next("b", event_time=clock())
    assert (backoff.get("a"), backoff.get("b")) == (40, 10)


def test_reset_forgets_a_key() -> None:
    backoff, clock = make_backoff()
    fail_times(backoff, "k", 3, clock)
    backoff.reset("k")
    assert backoff.get("k") == 0


def test_gc_drops_keys_quiet_for_ten_minutes() -> None:
    backoff, clock = make_backoff()
    backoff.next("old", event_time=clock())
    clock.advance(601)
    backoff.next("new", event_time=clock())
    backoff.gc()
    assert (backoff.get("old"), backoff.get("new"), len(backoff)) == (0, 10, 1)


def test_backoff_since_update_measures_from_the_last_failure() -> None:
    backoff, clock = make_backoff()
    backoff.next("k", event_time=clock())
    assert backoff.is_in_backoff_since_update("k", event_time=T0 + timedelta(seconds=9))


def test_backoff_since_update_ends_after_the_delay() -> None:
    backoff, clock = make_backoff()
    backoff.next("k", event_time=clock())
    assert not backoff.is_in_backoff_since_update("k", event_time=T0 + timedelta(seconds=10))


def test_crash_loop_keys_differ_per_pod() -> None:
    c = app(web_pod())
    assert crash_loop_key(pod_uid="a", container=c) != crash_loop_key(pod_uid="b", container=c)


def test_a_changed_container_spec_gets_a_fresh_crash_loop_key() -> None:
    c = app(web_pod())
    changed = Container(name="app", image="busybox:2")
    assert crash_loop_key(pod_uid=UID, container=c) != crash_loop_key(
        pod_uid=UID, container=changed
    )


def test_image_pull_keys_are_per_pod_and_image() -> None:
    assert image_pull_key(pod_uid="a", image="x") != image_pull_key(pod_uid="a", image="y")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (10, "10s"),
        (20, "20s"),
        (80, "1m20s"),
        (160, "2m40s"),
        (300, "5m0s"),
        (3725, "1h2m5s"),
        (1.5, "1.5s"),
        (0.25, "250ms"),
    ],
    ids=lambda v: str(v),
)
def test_durations_read_as_go_prints_them(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


def test_the_crash_loop_message_is_the_kubelets() -> None:
    assert crash_loop_message(delay=20, container="app", pod=web_pod()) == (
        f"back-off 20s restarting failed container=app pod=web_default({UID})"
    )


def test_the_image_pull_back_off_message_is_the_kubelets() -> None:
    assert image_pull_back_off_message("x") == 'Back-off pulling image "x"'


def test_a_container_that_never_died_does_not_back_off() -> None:
    backoff, _ = make_backoff()
    pod = web_pod()
    check = should_back_off(backoff=backoff, pod=pod, container=app(pod), status=status_with())
    assert not check.in_backoff


def test_the_first_crash_does_not_wait() -> None:
    backoff, clock = make_backoff()
    pod = web_pod()
    status = status_with(dead_app(finished_at=clock()))
    assert not should_back_off(
        backoff=backoff, pod=pod, container=app(pod), status=status
    ).in_backoff


def test_the_first_crash_starts_the_back_off_clock() -> None:
    backoff, _ = make_backoff()
    pod = web_pod()
    should_back_off(
        backoff=backoff, pod=pod, container=app(pod), status=status_with(dead_app(finished_at=T0))
    )
    assert backoff.get(crash_loop_key(pod_uid=UID, container=app(pod))) == 10


def crash_at(backoff: Backoff, clock: FakeClock, *deaths: float) -> PodRuntimeStatus:
    """Let the container die at each of ``deaths`` (seconds), checking back-off each time."""
    pod = web_pod()
    status = status_with()
    for n, at in enumerate(deaths):
        clock.now = T0 + timedelta(seconds=at)
        status = status_with(dead_app(finished_at=clock(), id=f"c{n}"), *status.containers)
        while should_back_off(
            backoff=backoff, pod=pod, container=app(pod), status=status
        ).in_backoff:
            clock.advance(1)
    return status


def test_a_second_crash_waits_with_crash_loop_back_off() -> None:
    backoff, clock = make_backoff()
    pod = web_pod()
    status = crash_at(backoff, clock, 0)
    clock.advance(2)
    status = status_with(dead_app(finished_at=clock(), id="c9"), *status.containers)
    check = should_back_off(backoff=backoff, pod=pod, container=app(pod), status=status)
    assert check == type(check)(
        in_backoff=True,
        reason=CRASH_LOOP_BACK_OFF,
        message=f"back-off 10s restarting failed container=app pod=web_default({UID})",
        event_message=f"Back-off restarting failed container app in pod web_default({UID})",
        report=True,
    )


def test_each_crash_doubles_the_wait_in_the_message() -> None:
    backoff, clock = make_backoff()
    pod = web_pod()
    status = crash_at(backoff, clock, 0, 12)
    clock.advance(2)
    status = status_with(dead_app(finished_at=clock(), id="c9"), *status.containers)
    check = should_back_off(backoff=backoff, pod=pod, container=app(pod), status=status)
    assert check.message.startswith("back-off 20s restarting failed container=app")


def test_a_crash_loop_waits_ten_then_twenty_seconds_before_restarting() -> None:
    backoff, clock = make_backoff()
    crash_at(backoff, clock, 0, 1)
    first_wait = clock() - (T0 + timedelta(seconds=1))
    crash_at(backoff, clock, 12)
    second_wait = clock() - (T0 + timedelta(seconds=12))
    assert (first_wait, second_wait) == (timedelta(seconds=10), timedelta(seconds=20))


def test_a_restart_after_the_delay_does_not_wait() -> None:
    backoff, clock = make_backoff()
    pod = web_pod()
    status = status_with(dead_app(finished_at=T0))
    should_back_off(backoff=backoff, pod=pod, container=app(pod), status=status)
    clock.advance(1)
    assert should_back_off(backoff=backoff, pod=pod, container=app(pod), status=status).in_backoff
    clock.advance(10)
    assert not should_back_off(
        backoff=backoff, pod=pod, container=app(pod), status=status
    ).in_backoff


def test_a_wait_is_reported_at_the_kubelets_rate_however_often_it_is_checked() -> None:
    backoff, clock = make_backoff()
    pod = web_pod()
    status = crash_at(backoff, clock, 0, 12)
    clock.advance(2)
    status = status_with(dead_app(finished_at=clock(), id="c9"), *status.containers)
    reported = []
    for second in range(30):
        check = should_back_off(backoff=backoff, pod=pod, container=app(pod), status=status)
        if check.report:
            reported.append(second)
        clock.advance(1)
        if not check.in_backoff:
            break
    assert reported == [0, 10]


def test_report_due_says_yes_once_per_period_for_each_key() -> None:
    backoff, clock = make_backoff()
    answers = []
    for _ in range(25):
        answers.append((backoff.report_due("a"), backoff.report_due("b")))
        clock.advance(1)
    assert [i for i, (a, _) in enumerate(answers) if a] == [0, 10, 20]
    assert [i for i, (_, b) in enumerate(answers) if b] == [0, 10, 20]
    backoff.reset("a")
    assert backoff.report_due("a")
