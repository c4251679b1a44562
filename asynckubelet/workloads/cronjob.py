"""The CronJob controller's decisions (``pkg/controller/cronjob``, ``syncCronJob``), as a
pure function of a CronJob, the Jobs it owns and the time.

Each pass first brings ``status.active`` in step with the Jobs (a finished one leaves it
with ``SawCompletedJob``, a vanished one with ``MissingJob``; the latest completion
becomes ``lastSuccessfulTime``), removes the oldest finished Jobs beyond
``successfulJobsHistoryLimit``/``failedJobsHistoryLimit``, and then, unless suspended,
finds the most recent scheduled time not yet run since the last one (or the CronJob's
creation; no earlier than ``startingDeadlineSeconds`` ago). More than 100 missed times give
one ``TooManyMissedTimes`` warning and only the latest runs; one past its starting
deadline is ``MissSchedule``d. ``concurrencyPolicy`` decides what an active Job means:
``Allow`` starts another, ``Forbid`` skips the run (``JobAlreadyActive``), ``Replace``
deletes the active ones first. The Job is named ``<cronjob>-<scheduled minutes since the
epoch>``, carries the ``batch.kubernetes.io/cronjob-scheduled-timestamp`` annotation and a
controller reference, and the pass asks to be woken just after the next scheduled time.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from asynckubelet.manifests.cron import Schedule, ScheduleError, parse_schedule
from asynckubelet.workloads.job import is_finished
from asynckubelet.workloads.pods import owner_reference

__all__ = [
    "MANY_MISSED",
    "SCHEDULED_TIMESTAMP",
    "CronJobPlan",
    "job_name",
    "most_recent_schedule",
    "reconcile_cronjob",
    "zone_of",
]

SCHEDULED_TIMESTAMP = "batch.kubernetes.io/cronjob-scheduled-timestamp"
MANY_MISSED = 100
"""More missed start times than this are "too many": only the latest runs."""
NEXT_DELTA = 0.1
"""Seconds past the next scheduled time the controller looks again (``nextScheduleDelta``)."""


@dataclass
class CronJobPlan:
    """What to do for one CronJob."""

    create: dict[str, Any] | None = None
    """The Job to make."""
    delete: list[str] = field(default_factory=list)
    """Names of Jobs to delete (with their pods)."""
    status: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[str, str, str]] = field(default_factory=list)
    requeue_after: float | None = None


def _parse(text: Any) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def zone_of(name: str | None) -> tzinfo:
    """The IANA zone ``name`` (UTC when unset); :class:`ValueError` when unknown."""
    if not name:
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {name}") from exc


def job_name(cronjob_name: str, scheduled: datetime) -> str:
    """``getJobName``: ``<cronjob>-<minutes since the epoch>``."""
    return f"{cronjob_name}-{int(scheduled.timestamp()) // 60}"


def most_recent_schedule(
    cronjob: Mapping[str, Any],
    schedule: Schedule,
    zone: tzinfo,
    now: datetime,
    *,
    with_deadline: bool = True,
) -> tuple[datetime, datetime | None, int]:
    """``mostRecentScheduleTime``: the earliest time looked from (the last scheduled time,
    or the CronJob's creation; no earlier than ``startingDeadlineSeconds`` ago), the
    latest scheduled time since then not after ``now`` (None: none), and roughly how many
    were missed (upstream's estimate from the interval of the first two)."""
    meta = cronjob.get("metadata") or {}
    spec = cronjob.get("spec") or {}
    earliest = _parse((cronjob.get("status") or {}).get("lastScheduleTime")) or _parse(
        meta.get("creationTimestamp")
    )
    if earliest is None:
        earliest = now
    deadline = spec.get("startingDeadlineSeconds")
    if with_deadline and deadline is not None:
        earliest = max(earliest, now - timedelta(seconds=int(deadline)))
    first = schedule.next(earliest, zone)
    second = schedule.next(first, zone) if first is not None else None
    if first is None or now < first:
        return earliest, None, 0
    if second is None or now < second:
        return earliest, first, 0
    interval = round((second - first).total_seconds())
    if interval < 1:
        return earliest, None, 0
    missed = int((now - first).total_seconds()) // interval + 1
    latest: datetime | None = None
    moment = schedule.next(first + timedelta(seconds=(missed - 2) * interval), zone)
    while moment is not None and moment <= now:
        latest = moment
        moment = schedule.next(moment, zone)
    return earliest, latest, missed


def _next_wake(
    cronjob: Mapping[str, Any], schedule: Schedule, zone: tzinfo, now: datetime
) -> float | None:
    """``nextScheduleTimeDuration``: seconds until just after the next scheduled time."""
    earliest, recent, missed = most_recent_schedule(
        cronjob, schedule, zone, now, with_deadline=False
    )
    if recent is None:
        recent = earliest if missed == 0 else now
    upcoming = schedule.next(recent, zone)
    if upcoming is None:
        return None
    return max(0.0, (upcoming - now).total_seconds()) + NEXT_DELTA


def _ref(job: Mapping[str, Any]) -> dict[str, Any]:
    meta = job.get("metadata") or {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
    }


def _reconcile_active(
    plan: CronJobPlan, status: dict[str, Any], jobs: Sequence[Mapping[str, Any]]
) -> None:
    active = [dict(a) for a in status.get("active") or []]
    active_uids = {a.get("uid") for a in active}
    children = set()
    last_ok = _parse(status.get("lastSuccessfulTime"))
    for job in jobs:
        meta = job.get("metadata") or {}
        uid = meta.get("uid")
        children.add(uid)
        finished = is_finished(job.get("status") or {})
        if uid not in active_uids and finished is None:
            plan.events.append(
                (
                    "Warning",
                    "UnexpectedJob",
                    f"Saw a job that the controller did not create or forgot: {meta.get('name')}",
                )
            )
        elif uid in active_uids and finished is not None:
            active = [a for a in active if a.get("uid") != uid]
            plan.events.append(
                (
                    "Normal",
                    "SawCompletedJob",
                    f"Saw completed job: {meta.get('name')}, condition: {finished}",
                )
            )
        if finished == "Complete":
            done = _parse((job.get("status") or {}).get("completionTime"))
            if done is not None and (last_ok is None or done > last_ok):
                last_ok = done
    for ref in list(active):
        if ref.get("uid") not in children:
            plan.events.append(("Normal", "MissingJob", f"Active job went missing: {ref['name']}"))
            active = [a for a in active if a.get("uid") != ref.get("uid")]
    status["active"] = active
    if last_ok is not None:
        status["lastSuccessfulTime"] = _iso(last_ok)


def _cleanup(plan: CronJobPlan, spec: Mapping[str, Any], jobs: Sequence[Mapping[str, Any]]) -> None:
    """``cleanupFinishedJobs``: the oldest finished Jobs beyond the history limits go."""
    for kind, key in (
        ("Complete", "successfulJobsHistoryLimit"),
        ("Failed", "failedJobsHistoryLimit"),
    ):
        limit = spec.get(key)
        if limit is None:
            continue
        ended = [j for j in jobs if is_finished(j.get("status") or {}) == kind]
        ended.sort(key=_by_start_time)
        for job in ended[: max(0, len(ended) - int(limit))]:
            name = str((job.get("metadata") or {}).get("name"))
            plan.delete.append(name)
            plan.events.append(("Normal", "SuccessfulDelete", f"Deleted job {name}"))


def _by_start_time(job: Mapping[str, Any]) -> tuple[bool, datetime, str]:
    """``byJobStartTime``: by start time, those without one last, ties by name."""
    started = _parse((job.get("status") or {}).get("startTime"))
    name = str((job.get("metadata") or {}).get("name") or "")
    return (started is None, started or datetime.fromtimestamp(0, UTC), name)


def _job_for(cronjob: Mapping[str, Any], scheduled: datetime, zone: tzinfo) -> dict[str, Any]:
    """``getJobFromTemplate2``."""
    meta = cronjob.get("metadata") or {}
    template = copy.deepcopy(dict((cronjob.get("spec") or {}).get("jobTemplate") or {}))
    template_meta = template.get("metadata") or {}
    annotations = dict(template_meta.get("annotations") or {})
    stamp = scheduled.astimezone(zone).isoformat().replace("+00:00", "Z")
    annotations[SCHEDULED_TIMESTAMP] = stamp
    owner = owner_reference(
        api_version="batch/v1", kind="CronJob", name=str(meta["name"]), uid=str(meta["uid"])
    )
    job_meta: dict[str, Any] = {
        "name": job_name(str(meta["name"]), scheduled),
        "namespace": meta.get("namespace") or "default",
        "annotations": annotations,
        "ownerReferences": [owner],
    }
    if template_meta.get("labels"):
        job_meta["labels"] = dict(template_meta["labels"])
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": job_meta,
        "spec": dict(template.get("spec") or {}),
    }


def reconcile_cronjob(
    cronjob: Mapping[str, Any], jobs: Sequence[Mapping[str, Any]], now: datetime
) -> CronJobPlan:
    """``syncCronJob`` for one CronJob and the Jobs it owns, at ``now``."""
    plan = CronJobPlan()
    spec = dict(cronjob.get("spec") or {})
    status = {k: v for k, v in dict(cronjob.get("status") or {}).items() if v is not None}
    _reconcile_active(plan, status, jobs)
    _cleanup(plan, spec, jobs)
    plan.status = status
    if not status.get("active"):
        status.pop("active", None)
    try:
        zone = zone_of(spec.get("timeZone"))
    except ValueError as exc:
        plan.events.append(
            ("Warning", "UnknownTimeZone", f"invalid timeZone: {spec.get('timeZone')!r}: {exc}")
        )
        return plan
    if spec.get("suspend"):
        return plan
    raw = str(spec.get("schedule") or "")
    try:
        schedule = parse_schedule(raw)
    except ScheduleError as exc:
        plan.events.append(
            ("Warning", "UnparseableSchedule", f"unparseable schedule: {raw!r} : {exc}")
        )
        return plan
    _, scheduled, missed = most_recent_schedule(cronjob, schedule, zone, now)
    if scheduled is not None and missed > MANY_MISSED:
        plan.events.append(
            (
                "Warning",
                "TooManyMissedTimes",
                "too many missed start times. Set or decrease .spec.startingDeadlineSeconds "
                "or check clock skew",
            )
        )
    plan.requeue_after = _next_wake(cronjob, schedule, zone, now)
    if scheduled is None:
        return plan
    deadline = spec.get("startingDeadlineSeconds")
    if deadline is not None and scheduled + timedelta(seconds=int(deadline)) < now:
        plan.events.append(
            (
                "Warning",
                "MissSchedule",
                "Missed scheduled time to start a job: "
                + scheduled.astimezone(UTC).strftime("%a, %d %b %Y %H:%M:%S +0000"),
            )
        )
        return plan
    name = job_name(str(cronjob["metadata"]["name"]), scheduled)
    active = list(status.get("active") or [])
    if (
        any(a.get("name") == name for a in active)
        or _parse(status.get("lastScheduleTime")) == scheduled
    ):
        return plan
    policy = spec.get("concurrencyPolicy") or "Allow"
    if policy == "Forbid" and active:
        plan.events.append(
            (
                "Normal",
                "JobAlreadyActive",
                "Not starting job because prior execution is running and concurrency "
                "policy is Forbid",
            )
        )
        return plan
    if policy == "Replace":
        for ref in active:
            plan.delete.append(str(ref["name"]))
            plan.events.append(("Normal", "SuccessfulDelete", f"Deleted job {ref['name']}"))
        active = []
    plan.create = _job_for(cronjob, scheduled, zone)
    plan.events.append(("Normal", "SuccessfulCreate", f"Created job {name}"))
    status["active"] = [*active, _ref(plan.create)]
    status["lastScheduleTime"] = _iso(scheduled)
    return plan
