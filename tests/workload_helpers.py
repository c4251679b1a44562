"""Pods and workloads as data, for the controllers' decision tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

import builders
from lightkube.models.core_v1 import Pod

from asynckubelet.workloads.pods import PodView

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def ago(seconds: float) -> str:
    return (NOW - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(
    name: str,
    *,
    phase: str = "Running",
    ready: bool = True,
    ready_for: float = 60.0,
    created: float = 120.0,
    restarts: int = 0,
    deleting: bool = False,
    stored: bool = True,
    finalizers: tuple[str, ...] = (),
    finished: float | None = None,
    labels: dict[str, str] | None = None,
    container_id: str | None = "docker://c",
) -> PodView:
    """A pod as the node reports it: ``ready_for`` seconds Ready, ``finished`` seconds
    ago its container ended (for terminal phases)."""
    conditions = [
        {
            "type": "Ready",
            "status": "True" if ready else "False",
            "lastTransitionTime": ago(ready_for if ready else (finished or 0)),
        }
    ]
    state: dict[str, Any] = {"running": {"startedAt": ago(created)}}
    if phase in ("Succeeded", "Failed"):
        code = 0 if phase == "Succeeded" else 1
        state = {
            "terminated": {
                "exitCode": code,
                "finishedAt": ago(finished if finished is not None else 0),
                "startedAt": ago(created),
            }
        }
    elif phase == "Pending":
        state = {"waiting": {"reason": "ContainerCreating"}}
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": conditions,
        "containerStatuses": [
            {
                "name": "c",
                "image": "busybox",
                "imageID": "",
                "ready": ready,
                "restartCount": restarts,
                "state": state,
                **({"containerID": container_id} if container_id else {}),
            }
        ],
    }
    meta: dict[str, Any] = {"creationTimestamp": ago(created)}
    if deleting:
        meta["deletionTimestamp"] = ago(1)
    if finalizers:
        meta["finalizers"] = list(finalizers)
    made = builders.pod(
        name,
        uid=f"uid-{name}",
        labels=labels or {},
        meta=meta,
        containers=[builders.container("c")],
    )
    made.status = cast(Pod, Pod.from_dict({"metadata": {}, "status": status})).status
    return PodView(pod=made, stored=stored)
