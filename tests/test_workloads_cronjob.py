"""The CronJob controller's decisions at a fake time: schedules with macros and time
zones, missed runs (one, many, more than 100), the starting deadline, the concurrency
policies, suspension, history limits and the Jobs' names, annotations and owners."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from asynckubelet.manifests.cron import ScheduleError, parse_schedule
from asynckubelet.workloads.cronjob import (
    SCHEDULED_TIMESTAMP,
    job_name,
    reconcile_cronjob,
)

CREATED = datetime(2026, 11, 30, 12, 0, 30, tzinfo=UTC)


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def cronjob(status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "tick",
            "namespace": "default",
            "uid": "cj-1",
            "creationTimestamp": stamp(CREATED),
        },
        "spec": {
            "schedule": "*/5 * * * *",
            "concurrencyPolicy": "Allow",
            "suspend": False,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 1,
            "jobTemplate": {
                "metadata": {"labels": {"app": "tick"}},
                "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}},
            },
            **spec,
        },
        "status": status or {},
    }


def job(name: str, *, finished: str | None = None, started: int = 0) -> dict[str, Any]:
    status: dict[str, Any] = {"startTime": stamp(CREATED + timedelta(minutes=started))}
    if finished is not None:
        status["conditions"] = [{"type": finished, "status": "True"}]
        status["completionTime"] = stamp(CREATED + timedelta(minutes=started, seconds=5))
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"u-{name}"},
        "status": status,
    }


def ref(name: str) -> dict[str, Any]:
    return {"kind": "Job", "name": name, "namespace": "default", "uid": f"u-{name}"}


def at(minutes: float) -> datetime:
    return CREATED + timedelta(minutes=minutes)


@pytest.mark.parametrize(
    ("schedule", "after", "expected"),
    [
        ("*/5 * * * *", "2026-01-01T00:03", "2026-01-01T00:05"),
        ("@hourly", "2026-01-01T00:03", "2026-01-01T01:00"),
        ("@daily", "2026-01-01T00:03", "2026-01-02T00:00"),
        ("@weekly", "2026-01-01T00:03", "2026-01-04T00:00"),
        ("@monthly", "2026-01-01T00:03", "2026-02-01T00:00"),
        ("@yearly", "2026-01-01T00:03", "2027-01-01T00:00"),
        ("0 9 * * mon-fri", "2026-01-02T10:00", "2026-01-05T09:00"),
        ("0 0 13 * fri", "2026-01-01T00:00", "2026-01-02T00:00"),
        ("15 10 * jun *", "2026-01-01T00:00", "2026-06-01T10:15"),
        ("0 0 30 2 *", "2026-01-01T00:00", None),
    ],
)
def test_the_next_time_of_a_schedule(schedule: str, after: str, expected: str | None) -> None:
    found = parse_schedule(schedule).next(datetime.fromisoformat(after).replace(tzinfo=UTC))
    shown = found.strftime("%Y-%m-%dT%H:%M") if found is not None else None
    assert shown == expected


def test_a_schedule_in_a_time_zone_runs_at_its_wall_clock_and_skips_a_missing_hour() -> None:
    zone = ZoneInfo("America/New_York")
    daily = parse_schedule("30 2 * * *")
    first = daily.next(datetime(2026, 3, 6, 12, 0, tzinfo=UTC), zone)
    assert first == datetime(2026, 3, 7, 7, 30, tzinfo=UTC)
    # 02:30 does not exist on 8 March 2026 in New York (clocks go from 02:00 to 03:00).
    assert daily.next(first, zone) == datetime(2026, 3, 9, 6, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
        ("61 * * * *", "end of range (61) above maximum (59): 61"),
        ("@often", "unrecognized descriptor: @often"),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
        ("", "empty spec string"),
    ],
)
def test_a_schedule_that_does_not_parse_says_why(schedule: str, message: str) -> None:
    with pytest.raises(ScheduleError) as raised:
        parse_schedule(schedule)
    assert str(raised.value) == message


def test_nothing_runs_before_the_first_scheduled_time_and_it_wakes_just_after() -> None:
    plan = reconcile_cronjob(cronjob(), [], at(2))
    assert plan.create is None
    assert plan.requeue_after == pytest.approx(150.1)


def test_the_scheduled_time_makes_a_job_named_annotated_and_owned_as_upstream() -> None:
    plan = reconcile_cronjob(cronjob(timeZone="Europe/Paris"), [], at(5))
    assert plan.create is not None
    scheduled = datetime(2026, 11, 30, 12, 5, tzinfo=UTC)
    meta = plan.create["metadata"]
    assert meta["name"] == f"tick-{int(scheduled.timestamp()) // 60}" == job_name("tick", scheduled)
    assert meta["annotations"] == {SCHEDULED_TIMESTAMP: "2026-11-30T13:05:00+01:00"}
    assert meta["labels"] == {"app": "tick"}
    (owner,) = meta["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "CronJob",
        "tick",
        "cj-1",
        True,
    )
    assert plan.status["lastScheduleTime"] == "2026-11-30T12:05:00Z"
    assert [a["name"] for a in plan.status["active"]] == [meta["name"]]
    assert ("Normal", "SuccessfulCreate", f"Created job {meta['name']}") in plan.events


def test_a_time_already_run_is_not_run_again() -> None:
    status = {"lastScheduleTime": stamp(at(4.5))}
    assert reconcile_cronjob(cronjob(status), [], at(6)).create is None


def test_of_several_missed_times_only_the_latest_runs() -> None:
    plan = reconcile_cronjob(cronjob(), [], at(22))
    assert plan.create is not None
    assert plan.status["lastScheduleTime"] == "2026-11-30T12:20:00Z"
    assert not [e for e in plan.events if e[1] == "TooManyMissedTimes"]


def test_more_than_a_hundred_missed_times_warn_once_and_run_the_latest() -> None:
    plan = reconcile_cronjob(cronjob(schedule="* * * * *"), [], at(500.5))
    warnings = [e for e in plan.events if e[1] == "TooManyMissedTimes"]
    assert len(warnings) == 1
    assert warnings[0][2] == (
        "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check "
        "clock skew"
    )
    assert plan.status["lastScheduleTime"] == stamp(at(500.5).replace(second=0))


def test_a_time_past_its_starting_deadline_does_not_run() -> None:
    late = at(5) + timedelta(seconds=60)
    plan = reconcile_cronjob(cronjob(startingDeadlineSeconds=30), [], late)
    assert plan.create is None
    assert "lastScheduleTime" not in plan.status


def test_a_time_within_its_starting_deadline_runs() -> None:
    late = at(5) + timedelta(seconds=60)
    plan = reconcile_cronjob(cronjob(startingDeadlineSeconds=120), [], late)
    assert plan.create is not None


def test_the_starting_deadline_keeps_a_long_outage_from_counting_as_too_many() -> None:
    plan = reconcile_cronjob(
        cronjob(schedule="* * * * *", startingDeadlineSeconds=200), [], at(5000.5)
    )
    assert plan.create is not None
    assert not [e for e in plan.events if e[1] == "TooManyMissedTimes"]


@pytest.mark.parametrize(
    ("policy", "creates", "deletes", "reason"),
    [
        ("Allow", True, [], "SuccessfulCreate"),
        ("Forbid", False, [], "JobAlreadyActive"),
        ("Replace", True, ["tick-old"], "SuccessfulDelete"),
    ],
)
def test_the_concurrency_policy_decides_about_an_active_job(
    policy: str, creates: bool, deletes: list[str], reason: str
) -> None:
    status = {"active": [ref("tick-old")], "lastScheduleTime": stamp(at(-0.5))}
    plan = reconcile_cronjob(cronjob(status, concurrencyPolicy=policy), [job("tick-old")], at(5))
    assert (plan.create is not None) == creates
    assert plan.delete == deletes
    assert reason in [e[1] for e in plan.events]
    active = [a["name"] for a in plan.status.get("active") or []]
    if policy == "Replace":
        assert "tick-old" not in active


def test_a_suspended_cronjob_makes_nothing() -> None:
    assert reconcile_cronjob(cronjob(suspend=True), [], at(5)).create is None


def test_a_finished_job_leaves_the_active_list_and_sets_the_last_success() -> None:
    status = {"active": [ref("tick-a")], "lastScheduleTime": stamp(at(0))}
    plan = reconcile_cronjob(cronjob(status), [job("tick-a", finished="Complete")], at(1))
    assert "active" not in plan.status
    assert plan.status["lastSuccessfulTime"] == stamp(CREATED + timedelta(seconds=5))
    assert ("Normal", "SawCompletedJob", "Saw completed job: tick-a, condition: Complete") in (
        plan.events
    )


def test_a_vanished_active_job_is_reported_missing() -> None:
    status = {"active": [ref("tick-a")], "lastScheduleTime": stamp(at(0))}
    plan = reconcile_cronjob(cronjob(status), [], at(1))
    assert ("Normal", "MissingJob", "Active job went missing: tick-a") in plan.events
    assert "active" not in plan.status


def test_the_oldest_finished_jobs_beyond_the_history_limits_are_deleted() -> None:
    jobs = [job(f"ok-{i}", finished="Complete", started=i) for i in range(5)]
    jobs += [job(f"bad-{i}", finished="Failed", started=i) for i in range(3)]
    plan = reconcile_cronjob(cronjob({"lastScheduleTime": stamp(at(0))}), jobs, at(1))
    assert plan.delete == ["ok-0", "ok-1", "bad-0", "bad-1"]


def test_an_unknown_time_zone_is_reported_and_nothing_runs() -> None:
    plan = reconcile_cronjob(cronjob(timeZone="Mars/Olympus"), [], at(5))
    assert plan.create is None
    assert [e[1] for e in plan.events] == ["UnknownTimeZone"]


def test_the_latest_of_an_irregular_schedule_is_found_after_many_missed_times() -> None:
    # 06:30, 10:30 and 14:30 on weekdays, from Monday 30 November to Monday 7 December.
    cron = cronjob(schedule="30 6-16/4 * * 1-5")
    plan = reconcile_cronjob(cron, [], datetime(2026, 12, 7, 9, 0, tzinfo=UTC))
    assert plan.status["lastScheduleTime"] == "2026-12-07T06:30:00Z"
    assert not [e for e in plan.events if e[1] == "TooManyMissedTimes"]


def test_finished_jobs_without_a_start_time_are_the_last_deleted() -> None:
    unstarted = job("ok-none", finished="Complete")
    unstarted["status"].pop("startTime")
    jobs = [unstarted, *(job(f"ok-{i}", finished="Complete", started=i) for i in range(3))]
    cron = cronjob({"lastScheduleTime": stamp(at(0))}, successfulJobsHistoryLimit=1)
    assert reconcile_cronjob(cron, jobs, at(1)).delete == ["ok-0", "ok-1", "ok-2"]
