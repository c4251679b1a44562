"""The Job controller's decisions (``pkg/controller/job``), as a pure function of a Job
and its pods.

Matches the controller lightkube-models 1.37 goes with (``JobPodReplacementPolicy``
and ``JobSuccessPolicy`` on): pods are made up to ``parallelism`` and no more than the
completions left, a failed one is replaced after the controller's back-off (10 s, doubling
per failure since the last success, at most 10 min), and the Job fails once more pods
failed than ``backoffLimit`` allows (with ``restartPolicy: OnFailure``, once the restarts
of its running pods reach it) or it ran longer than ``activeDeadlineSeconds``. An ending
Job first gets ``FailureTarget`` (``BackoffLimitExceeded``, ``DeadlineExceeded``) or
``SuccessCriteriaMet`` (``CompletionsReached``), its active pods are deleted, and only
once none is left terminating does it get ``Failed`` or ``Complete``; a finished Job with
``ttlSecondsAfterFinished`` is deleted that long after.

Pods are counted as the controller counts them: each carries the
``batch.kubernetes.io/job-tracking`` finalizer until its end is in the Job's status
(through ``uncountedTerminatedPods``, so a crash between the two writes neither loses nor
double-counts a pod); a pod being deleted before it succeeded counts as failed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from asynckubelet.workloads.pods import PodView
from asynckubelet.workloads.replicaset import pods_to_delete

__all__ = [
    "DEFAULT_BACKOFF",
    "MAX_BACKOFF",
    "TRACKING_FINALIZER",
    "JobPlan",
    "backoff_remaining",
    "is_finished",
    "reconcile_job",
]

TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
DEFAULT_BACKOFF = 10.0
"""``DefaultJobPodFailureBackOff``, seconds."""
MAX_BACKOFF = 600.0
"""``MaxJobPodFailureBackOff``, seconds."""
BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
DEADLINE_EXCEEDED = "DeadlineExceeded"
COMPLETIONS_REACHED = "CompletionsReached"
BACKOFF_MESSAGE = "Job has reached the specified backoff limit"
DEADLINE_MESSAGE = "Job was active longer than specified deadline"
COMPLETIONS_MESSAGE = "Reached expected number of succeeded pods"


@dataclass
class JobPlan:
    """What to do for one Job."""

    create: int = 0
    delete: list[str] = field(default_factory=list)
    """Names of active pods to delete."""
    untrack: list[str] = field(default_factory=list)
    """Names of pods whose end is now counted (their tracking finalizer goes)."""
    interim: dict[str, Any] | None = None
    """The status naming the pods about to be counted, written before they are untracked."""
    status: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[str, str, str]] = field(default_factory=list)
    requeue_after: float | None = None
    expired: bool = False
    """Finished ``ttlSecondsAfterFinished`` ago: delete the Job."""


def _condition(status: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    for c in status.get("conditions") or []:
        if c.get("type") == kind and c.get("status") == "True":
            return dict(c)
    return None


def is_finished(status: Mapping[str, Any]) -> str | None:
    """``Complete`` or ``Failed`` when the Job has that condition, else None."""
    for kind in ("Complete", "Failed"):
        if _condition(status, kind) is not None:
            return kind
    return None


def _parse(text: Any) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def _iso(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _new_condition(kind: str, reason: str, message: str, now: datetime) -> dict[str, Any]:
    stamp = _iso(now)
    return {
        "type": kind,
        "status": "True",
        "lastProbeTime": stamp,
        "lastTransitionTime": stamp,
        "reason": reason,
        "message": message,
    }


def _ensure(
    conditions: list[dict[str, Any]],
    kind: str,
    status: str,
    reason: str,
    message: str,
    now: datetime,
) -> tuple[list[dict[str, Any]], bool]:
    """``ensureJobConditionStatus``: added, or updated when it differs; a False one is
    never added."""
    for i, c in enumerate(conditions):
        if c.get("type") == kind:
            if (c.get("status"), c.get("reason"), c.get("message")) == (status, reason, message):
                return conditions, False
            updated = _new_condition(kind, reason, message, now)
            updated["status"] = status
            return [*conditions[:i], updated, *conditions[i + 1 :]], True
    if status == "False":
        return conditions, False
    return [*conditions, _new_condition(kind, reason, message, now)], True


def backoff_remaining(pods: Sequence[PodView], now: datetime) -> float:
    """Seconds before a failed pod may be replaced: ``10s * 2^(failures-1)`` (at most
    :data:`MAX_BACKOFF`) from the last failure, counting failures since the last success."""
    ended = sorted((p for p in pods if p.terminal or p.deleting), key=lambda p: p.finished_at())
    failures = 0
    last: datetime | None = None
    for pod in ended:
        if pod.phase == "Succeeded":
            failures, last = 0, None
        else:
            failures += 1
            last = pod.finished_at()
    if failures == 0 or last is None:
        return 0.0
    delay = DEFAULT_BACKOFF
    for _ in range(1, failures):
        delay *= 2
        if delay >= MAX_BACKOFF:
            delay = MAX_BACKOFF
            break
    return max(0.0, delay - (now - last).total_seconds())


def reconcile_job(
    job: Mapping[str, Any],
    pods: Sequence[PodView],
    *,
    now: datetime,
    tracked: Callable[[PodView], bool] | None = None,
) -> JobPlan:
    """``syncJob`` for one Job and the pods it owns. ``tracked`` says whether a pod's end
    is still to be counted (by default: it carries :data:`TRACKING_FINALIZER`)."""
    is_tracked = tracked or (lambda p: TRACKING_FINALIZER in p.finalizers)
    plan = JobPlan()
    spec = dict(job.get("spec") or {})
    status = dict(job.get("status") or {})
    finished = is_finished(status)
    if finished is not None:
        plan.status = status
        plan.untrack = [p.name for p in pods if p.stored and is_tracked(p)]
        _ttl(plan, spec, status, finished, now)
        return plan

    ends = _ends(spec, status, pods, is_tracked)
    succeeded = int(status.get("succeeded") or 0) + len(ends.new_ok) + len(ends.uncounted_ok)
    failures = int(status.get("failed") or 0) + len(ends.new_failed) + len(ends.uncounted_failed)
    active = [p for p in pods if p.active]
    terminating = sum(1 for p in pods if p.deleting and not p.terminal)
    if status.get("startTime") is None and not spec.get("suspend"):
        status["startTime"] = _iso(now)

    conditions = list(status.get("conditions") or [])
    ending = _condition(status, "SuccessCriteriaMet") or _condition(status, "FailureTarget")
    if ending is None:
        ending = _failure_target(plan, spec, status, pods, failures, now)
    if ending is not None:
        plan.delete += [p.name for p in active]
        terminating += len(active)
    else:
        active = _manage(plan, spec, active, pods, succeeded, terminating, now)
        ending, conditions = _progress(plan, spec, status, conditions, active, succeeded, now)

    if ending is not None and not any(c.get("type") == ending["type"] for c in conditions):
        conditions.append(ending)
    # Count what ended: first name the pods in the status, then untrack them, then count.
    if ending is not None and ending["type"] == "FailureTarget":
        ends.new_failed += [
            p for p in pods if is_tracked(p) and p.active and p.uid not in ends.uncounted_failed
        ]
    still_active = [] if ending is not None else active
    base = {
        **status,
        "conditions": conditions,
        "active": len(still_active),
        "ready": sum(1 for p in still_active if p.ready),
        "terminating": terminating,
    }
    _count(plan, ends, base)
    final = {
        **base,
        "succeeded": int(status.get("succeeded") or 0) + len(ends.uncounted_ok) + len(ends.new_ok),
        "failed": int(status.get("failed") or 0)
        + len(ends.uncounted_failed)
        + len(ends.new_failed),
        "uncountedTerminatedPods": {},
    }
    if ending is not None and terminating == 0:
        _finish(plan, spec, final, ending, now)
    for key in ("active", "succeeded", "failed"):
        if not final.get(key):
            final.pop(key, None)
    if plan.interim is not None and not plan.interim.get("active"):
        plan.interim.pop("active", None)
    plan.status = final
    return plan


@dataclass
class _Ends:
    """The Job's pods whose end is counted in the status's uncounted lists (by UID), and
    those whose end is not counted anywhere yet."""

    uncounted_ok: set[str]
    uncounted_failed: set[str]
    new_ok: list[PodView]
    new_failed: list[PodView]


def _ends(
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    pods: Sequence[PodView],
    is_tracked: Callable[[PodView], bool],
) -> _Ends:
    replace_failed_only = spec.get("podReplacementPolicy") == "Failed"

    def failed(pod: PodView) -> bool:
        """``isPodFailed``."""
        if pod.phase == "Failed":
            return True
        if replace_failed_only:
            return False
        return pod.deleting and pod.phase != "Succeeded"

    uncounted = status.get("uncountedTerminatedPods") or {}
    uncounted_ok = set(uncounted.get("succeeded") or [])
    uncounted_failed = set(uncounted.get("failed") or [])
    return _Ends(
        uncounted_ok=uncounted_ok,
        uncounted_failed=uncounted_failed,
        new_ok=[
            p
            for p in pods
            if is_tracked(p) and p.phase == "Succeeded" and p.uid not in uncounted_ok
        ],
        new_failed=[
            p for p in pods if is_tracked(p) and failed(p) and p.uid not in uncounted_failed
        ],
    )


def _failure_target(
    plan: JobPlan,
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    pods: Sequence[PodView],
    failures: int,
    now: datetime,
) -> dict[str, Any] | None:
    """The ``FailureTarget`` condition when the back-off limit or the active deadline is
    passed; else None (and when to look again for the deadline)."""
    limit = spec.get("backoffLimit")
    backoff_limit = 6 if limit is None else int(limit)
    if failures > backoff_limit or _past_backoff_on_failure(spec, pods, backoff_limit):
        return _new_condition("FailureTarget", BACKOFF_LIMIT_EXCEEDED, BACKOFF_MESSAGE, now)
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is None or spec.get("suspend"):
        return None
    started = _parse(status.get("startTime"))
    left = float(deadline) - ((now - started).total_seconds() if started else 0.0)
    if left <= 0:
        return _new_condition("FailureTarget", DEADLINE_EXCEEDED, DEADLINE_MESSAGE, now)
    plan.requeue_after = left
    return None


def _progress(
    plan: JobPlan,
    spec: Mapping[str, Any],
    status: dict[str, Any],
    conditions: list[dict[str, Any]],
    active: Sequence[PodView],
    succeeded: int,
    now: datetime,
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """For a Job still going: ``SuccessCriteriaMet`` once its completions succeeded, else
    its ``Suspended`` condition kept (a resumed Job starts its clock again)."""
    completions = spec.get("completions")
    if completions is None:
        complete = succeeded > 0 and not active
    else:
        complete = succeeded >= int(completions) and not active
    if complete:
        met = _new_condition("SuccessCriteriaMet", COMPLETIONS_REACHED, COMPLETIONS_MESSAGE, now)
        return met, conditions
    suspended = bool(spec.get("suspend"))
    if suspended:
        reason, message = "JobSuspended", "Job suspended"
    else:
        reason, message = "JobResumed", "Job resumed"
    conditions, changed = _ensure(
        conditions, "Suspended", "True" if suspended else "False", reason, message, now
    )
    if changed:
        plan.events.append(("Normal", "Suspended" if suspended else "Resumed", message))
        if not suspended:
            status["startTime"] = _iso(now)
    return None, conditions


def _count(plan: JobPlan, ends: _Ends, base: Mapping[str, Any]) -> None:
    """The interim status naming the pods about to be counted, and the pods to untrack."""
    if not ends.new_ok and not ends.new_failed:
        return
    plan.interim = {
        **base,
        "uncountedTerminatedPods": {
            "succeeded": sorted(ends.uncounted_ok | {p.uid for p in ends.new_ok}),
            "failed": sorted(ends.uncounted_failed | {p.uid for p in ends.new_failed}),
        },
    }
    plan.untrack = [p.name for p in [*ends.new_ok, *ends.new_failed] if p.stored]


def _finish(
    plan: JobPlan,
    spec: Mapping[str, Any],
    final: dict[str, Any],
    ending: Mapping[str, Any],
    now: datetime,
) -> None:
    """``Complete`` or ``Failed`` after its interim condition, once no pod terminates."""
    done = "Complete" if ending["type"] == "SuccessCriteriaMet" else "Failed"
    final["conditions"] = [
        *final["conditions"],
        _new_condition(
            done, str(ending.get("reason") or ""), str(ending.get("message") or ""), now
        ),
    ]
    final["active"] = 0
    if done == "Complete":
        final["completionTime"] = _iso(now)
        plan.events.append(("Normal", "Completed", "Job completed"))
    else:
        plan.events.append(("Warning", str(ending.get("reason")), str(ending.get("message"))))
    _ttl(plan, spec, final, done, now)


def _manage(
    plan: JobPlan,
    spec: Mapping[str, Any],
    active: list[PodView],
    pods: Sequence[PodView],
    succeeded: int,
    terminating: int,
    now: datetime,
) -> list[PodView]:
    """``manageJob``: delete the surplus or make the pods missing; the pods left active."""
    if spec.get("suspend"):
        plan.delete += [p.name for p in active]
        return []
    given = spec.get("parallelism")
    parallelism = 1 if given is None else int(given)
    completions = spec.get("completions")
    if completions is None:
        want = len(active) if succeeded > 0 else parallelism
    else:
        want = max(0, min(int(completions) - succeeded, parallelism))
    if len(active) > want:
        surplus = pods_to_delete(active, len(active) - want, now)
        plan.delete += [p.name for p in surplus]
        gone = {p.name for p in surplus}
        return [p for p in active if p.name not in gone]
    waiting = terminating if spec.get("podReplacementPolicy") == "Failed" else 0
    missing = want - waiting - len(active)
    if missing > 0:
        remaining = backoff_remaining(pods, now)
        if remaining > 0:
            plan.requeue_after = (
                remaining if plan.requeue_after is None else min(plan.requeue_after, remaining)
            )
        else:
            plan.create = missing
    return active


def _past_backoff_on_failure(spec: Mapping[str, Any], pods: Sequence[PodView], limit: int) -> bool:
    """``pastBackoffLimitOnFailure``: the restarts of running and pending pods."""
    template = (spec.get("template") or {}).get("spec") or {}
    if template.get("restartPolicy") != "OnFailure":
        return False
    restarts = sum(p.restarts for p in pods if p.phase in ("Running", "Pending"))
    return restarts > 0 if limit == 0 else restarts >= limit


def _ttl(
    plan: JobPlan, spec: Mapping[str, Any], status: Mapping[str, Any], kind: str, now: datetime
) -> None:
    """The TTL-after-finished controller: expire ``ttlSecondsAfterFinished`` after the
    terminal condition's transition."""
    ttl = spec.get("ttlSecondsAfterFinished")
    if ttl is None:
        return
    condition = _condition(status, kind) or {}
    since = _parse(condition.get("lastTransitionTime")) or now
    left = since.timestamp() + int(ttl) - now.timestamp()
    if left <= 0:
        plan.expired = True
    else:
        plan.requeue_after = left if plan.requeue_after is None else min(plan.requeue_after, left)
