"""The Job controller's decisions as tables: the Job and its pods in, pods to make or
delete, counts, conditions and back-off out (upstream's job_controller.go cases)."""

from __future__ import annotations

from typing import Any

import pytest
from workload_helpers import NOW, ago, pod

from asynckubelet.workloads.job import (
    TRACKING_FINALIZER,
    backoff_remaining,
    reconcile_job,
)
from asynckubelet.workloads.pods import PodView

T = (TRACKING_FINALIZER,)


def job(status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    body_spec: dict[str, Any] = {
        "completions": 1,
        "parallelism": 1,
        "backoffLimit": 6,
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]}},
    }
    body_spec.update(spec)
    return {
        "metadata": {"name": "migrate", "namespace": "default", "uid": "j-1"},
        "spec": {k: v for k, v in body_spec.items() if v is not None},
        "status": {"startTime": ago(30), **(status or {})},
    }


def types(status: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["type"], c.get("reason", "")) for c in status.get("conditions") or []]


def ok(name: str, finished: float = 5, **kw: Any) -> PodView:
    return pod(name, phase="Succeeded", ready=False, finished=finished, finalizers=T, **kw)


def failed(name: str, finished: float = 5, **kw: Any) -> PodView:
    return pod(name, phase="Failed", ready=False, finished=finished, finalizers=T, **kw)


def running(name: str, **kw: Any) -> PodView:
    return pod(name, finalizers=T, **kw)


CREATE = [
    ("a new Job makes one pod", {}, [], 1),
    ("parallelism bounds the pods", {"completions": 5, "parallelism": 2}, [], 2),
    (
        "completions left bound the pods",
        {"completions": 3, "parallelism": 3},
        [ok("a"), ok("b")],
        1,
    ),
    ("running pods count", {"completions": 3, "parallelism": 2}, [running("a")], 1),
    ("no completions: parallelism", {"completions": None, "parallelism": 3}, [], 3),
    (
        "no completions: none after a success",
        {"completions": None, "parallelism": 3},
        [ok("a"), running("b")],
        0,
    ),
]


@pytest.mark.parametrize(
    ("spec", "pods", "create"), [c[1:] for c in CREATE], ids=[c[0] for c in CREATE]
)
def test_a_job_makes_the_pods_it_still_needs(
    spec: dict[str, Any], pods: list[PodView], create: int
) -> None:
    assert reconcile_job(job(**spec), pods, now=NOW).create == create


def test_a_job_done_gets_success_criteria_met_then_complete() -> None:
    plan = reconcile_job(job(), [ok("a")], now=NOW)
    assert types(plan.status) == [
        ("SuccessCriteriaMet", "CompletionsReached"),
        ("Complete", "CompletionsReached"),
    ]
    assert plan.status["succeeded"] == 1
    assert plan.status["completionTime"]
    assert plan.events == [("Normal", "Completed", "Job completed")]


def test_an_ended_pod_is_named_in_the_status_before_it_is_untracked() -> None:
    plan = reconcile_job(job(completions=2, parallelism=2), [ok("a"), running("b")], now=NOW)
    assert plan.interim is not None
    assert plan.interim["uncountedTerminatedPods"] == {"succeeded": ["uid-a"], "failed": []}
    assert plan.untrack == ["a"]
    assert plan.status["succeeded"] == 1
    assert plan.status["uncountedTerminatedPods"] == {}


def test_a_counted_pod_is_not_counted_again() -> None:
    counted = pod("a", phase="Succeeded", ready=False, finished=5)
    plan = reconcile_job(job({"succeeded": 1}, completions=2, parallelism=1), [counted], now=NOW)
    assert plan.status["succeeded"] == 1
    assert plan.interim is None
    assert plan.create == 1


def test_pods_named_uncounted_before_a_crash_are_counted_once() -> None:
    untracked = pod("a", phase="Succeeded", ready=False, finished=5)
    status = {"uncountedTerminatedPods": {"succeeded": ["uid-a"], "failed": []}}
    plan = reconcile_job(job(status), [untracked], now=NOW)
    assert plan.status["succeeded"] == 1
    assert plan.status["uncountedTerminatedPods"] == {}


def test_a_failed_pod_is_replaced_after_the_back_off() -> None:
    soon = reconcile_job(job(), [failed("a", finished=3)], now=NOW)
    later = reconcile_job(
        job({"failed": 1}), [pod("a", phase="Failed", ready=False, finished=11)], now=NOW
    )
    assert soon.create == 0
    assert soon.requeue_after == pytest.approx(7.0)
    assert soon.status["failed"] == 1
    assert later.create == 1


@pytest.mark.parametrize(
    ("failures", "expected"),
    [(1, 10.0), (2, 20.0), (3, 40.0), (6, 320.0), (7, 600.0), (12, 600.0)],
)
def test_the_back_off_doubles_per_failure_up_to_ten_minutes(failures: int, expected: float) -> None:
    pods = [pod(f"f{i}", phase="Failed", ready=False, finished=0) for i in range(failures)]
    assert backoff_remaining(pods, NOW) == pytest.approx(expected)


def test_a_success_resets_the_back_off() -> None:
    pods = [
        pod("f1", phase="Failed", ready=False, finished=50),
        pod("s", phase="Succeeded", ready=False, finished=40),
        pod("f2", phase="Failed", ready=False, finished=0),
    ]
    assert backoff_remaining(pods, NOW) == pytest.approx(10.0)


def test_more_failures_than_the_backoff_limit_fail_the_job() -> None:
    pods = [failed("a", finished=20), failed("b", finished=5), running("c")]
    plan = reconcile_job(job(backoffLimit=1, parallelism=2, completions=2), pods, now=NOW)
    assert types(plan.status) == [("FailureTarget", "BackoffLimitExceeded")]
    assert plan.delete == ["c"]
    assert plan.create == 0
    assert plan.status["failed"] == 3


def test_a_failing_job_is_failed_once_no_pod_is_terminating() -> None:
    target = {
        "type": "FailureTarget",
        "status": "True",
        "reason": "BackoffLimitExceeded",
        "message": "Job has reached the specified backoff limit",
    }
    stopping = pod("c", deleting=True, stored=False)
    waiting = reconcile_job(job({"conditions": [target], "failed": 3}), [stopping], now=NOW)
    gone = reconcile_job(job({"conditions": [target], "failed": 3}), [], now=NOW)
    assert types(waiting.status) == [("FailureTarget", "BackoffLimitExceeded")]
    assert types(gone.status) == [
        ("FailureTarget", "BackoffLimitExceeded"),
        ("Failed", "BackoffLimitExceeded"),
    ]
    assert gone.events == [
        ("Warning", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    ]
    assert "completionTime" not in gone.status


def test_a_job_past_its_deadline_fails_with_deadline_exceeded() -> None:
    plan = reconcile_job(job(activeDeadlineSeconds=10), [running("a")], now=NOW)
    assert types(plan.status) == [("FailureTarget", "DeadlineExceeded")]
    assert plan.delete == ["a"]
    early = reconcile_job(job(activeDeadlineSeconds=40), [running("a")], now=NOW)
    assert early.requeue_after == pytest.approx(10.0)


def test_on_failure_restarts_reaching_the_limit_fail_the_job() -> None:
    template = {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c"}]}}
    plan = reconcile_job(
        job(backoffLimit=2, template=template), [running("a", restarts=2)], now=NOW
    )
    assert types(plan.status) == [("FailureTarget", "BackoffLimitExceeded")]


def test_a_deleted_running_pod_counts_as_failed_and_is_replaced() -> None:
    plan = reconcile_job(job(), [pod("a", deleting=True, stored=False, finalizers=T)], now=NOW)
    assert plan.status["failed"] == 1
    assert plan.create == 0
    assert plan.requeue_after is not None


def test_a_suspended_job_deletes_its_pods_and_says_so() -> None:
    plan = reconcile_job(job(suspend=True), [running("a")], now=NOW)
    assert plan.delete == ["a"]
    assert types(plan.status) == [("Suspended", "JobSuspended")]
    assert plan.events == [("Normal", "Suspended", "Job suspended")]


def test_a_finished_job_expires_after_its_ttl() -> None:
    done = {
        "conditions": [
            {
                "type": "Complete",
                "status": "True",
                "lastTransitionTime": ago(30),
                "reason": "CompletionsReached",
            }
        ]
    }
    assert reconcile_job(job(done, ttlSecondsAfterFinished=20), [], now=NOW).expired
    waiting = reconcile_job(job(done, ttlSecondsAfterFinished=50), [], now=NOW)
    assert not waiting.expired
    assert waiting.requeue_after == pytest.approx(20.0)


def test_a_finished_job_makes_no_pod() -> None:
    done = {"conditions": [{"type": "Failed", "status": "True", "lastTransitionTime": ago(30)}]}
    plan = reconcile_job(job(done), [], now=NOW)
    assert (plan.create, plan.delete) == (0, [])
