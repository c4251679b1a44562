"""activeDeadlineSeconds in ``status.generate``: the pod fails with DeadlineExceeded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from lightkube.models.core_v1 import Pod, PodStatus

from asynckubelet.manifests import load_manifests_text
from asynckubelet.node.status import generate
from asynckubelet.runtime.types import PodRuntimeStatus

UID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"

START = datetime(2026, 1, 1, tzinfo=UTC)


def _pod(deadline: str) -> Pod:
    return load_manifests_text(
        f"""
apiVersion: v1
kind: Pod
metadata: {{name: p, uid: {UID}}}
spec:
  {deadline}
  containers: [{{name: c, image: x}}]
"""
    ).pods[0]


def _status(pod: Pod, *, after: float) -> PodStatus:
    runtime = PodRuntimeStatus(uid=UID, name="p", namespace="default")
    previous = PodStatus(phase="Pending", startTime=START)
    return generate(pod, runtime, previous=previous, now=START + timedelta(seconds=after))


@pytest.mark.parametrize(
    ("deadline", "after", "phase"),
    [
        ("activeDeadlineSeconds: 10", 9.9, "Pending"),
        ("activeDeadlineSeconds: 10", 10, "Failed"),
        ("activeDeadlineSeconds: 10", 3600, "Failed"),
        ("{}", 3600, "Pending"),
    ],
)
def test_a_pod_past_its_active_deadline_is_failed(deadline: str, after: float, phase: str) -> None:
    if deadline == "{}":
        deadline = "restartPolicy: Always"
    assert _status(_pod(deadline), after=after).phase == phase


def test_the_deadline_failure_carries_the_kubelets_reason_and_message() -> None:
    status = _status(_pod("activeDeadlineSeconds: 1"), after=5)
    assert (status.reason, status.message) == (
        "DeadlineExceeded",
        "Pod was active on the node longer than the specified deadline",
    )
    ready = next(c for c in status.conditions or [] if c.type == "Ready")
    assert ready.status == "False"
