"""The ReplicaSet controller's decisions (``pkg/controller/replicaset``), as a pure
function of the ReplicaSet and its pods.

``manageReplicas``: too few active pods, create the difference; too many, delete the
surplus, the pods least far along first (``getPodsToDelete`` ranks them: pending before
running, not ready before ready, ready for less time first, more restarts first, newer
first). The status counts active, ready and available pods (ready for
``minReadySeconds``). One deliberate addition: a pod the node refused to admit is
``Failed`` at once, where a cluster's scheduler would have left it ``Pending``; its
replacement then waits as a crash-looping container would (10 s, doubling, at most
5 min, counted over the refused pods kept), and only the newest few refused pods are
kept, so a pod that can never be admitted is not made again and again without pause.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from asynckubelet.workloads.pods import PodView

__all__ = [
    "BURST_REPLICAS",
    "KEEP_FAILED",
    "ReplicaSetPlan",
    "pods_to_delete",
    "reconcile_replicaset",
    "replicaset_status",
]

BURST_REPLICAS = 500
"""``BurstReplicas``: pods created or deleted in one sync at most."""
KEEP_FAILED = 3
"""Pods the node refused that a ReplicaSet keeps (for ``describe``), newest first."""
RETRY_FIRST = 10.0
RETRY_MAX = 300.0
_PHASE_RANK = {"Pending": 0, "Unknown": 1, "Running": 2}


@dataclass(frozen=True)
class ReplicaSetPlan:
    """What to do for one ReplicaSet."""

    create: int = 0
    delete: tuple[str, ...] = ()
    """Names of pods to delete (the surplus, then refused pods beyond :data:`KEEP_FAILED`)."""
    status: dict[str, Any] = field(default_factory=dict)
    requeue_after: float | None = None
    """Seconds after which to look again (a pod becoming available, a retry)."""


def _rank(pod: PodView, now: datetime) -> tuple[Any, ...]:
    """``ActivePodsWithRanks`` order: the first is deleted first."""
    since = pod.ready_since
    ready_for = (now - since).total_seconds() if pod.ready and since is not None else 0.0
    created = pod.created.timestamp() if pod.created is not None else 0.0
    cost = 0
    text = pod.annotations.get("controller.kubernetes.io/pod-deletion-cost")
    if text is not None:
        try:
            cost = int(text)
        except ValueError:
            cost = 0
    return (
        _PHASE_RANK.get(pod.phase, 1),
        pod.ready,
        cost,
        ready_for,
        -pod.restarts,
        -created,
    )


def pods_to_delete(pods: Sequence[PodView], count: int, now: datetime) -> list[PodView]:
    """``getPodsToDelete``: the ``count`` active pods to delete first."""
    return sorted(pods, key=lambda p: _rank(p, now))[:count]


def replicaset_status(
    *,
    pods: Sequence[PodView],
    selector_labels: dict[str, str],
    min_ready_seconds: int,
    generation: int,
    now: datetime,
) -> dict[str, Any]:
    """``calculateStatus``: the ReplicaSet's status from its pods."""
    active = [p for p in pods if p.active]
    template_labelled = [
        p for p in active if all(p.labels.get(k) == v for k, v in selector_labels.items())
    ]
    ready = [p for p in active if p.ready]
    available = [p for p in active if p.available(min_ready_seconds, now)]
    terminating = [p for p in pods if p.deleting and not p.terminal]
    status: dict[str, Any] = {
        "replicas": len(active),
        "fullyLabeledReplicas": len(template_labelled),
        "readyReplicas": len(ready),
        "availableReplicas": len(available),
        "terminatingReplicas": len(terminating),
        "observedGeneration": generation,
    }
    return status


def _retry_after(refused: Sequence[PodView], now: datetime) -> float:
    """Seconds before another pod may replace refused ones (0: now)."""
    if not refused:
        return 0.0
    delay = min(RETRY_FIRST * 2.0 ** (len(refused) - 1), RETRY_MAX)
    newest = max(p.finished_at() for p in refused)
    return max(0.0, delay - (now - newest).total_seconds())


def refused(pod: PodView) -> bool:
    """A pod the node would not take: Failed before any container was made."""
    if pod.phase != "Failed" or pod.deleting:
        return False
    statuses = [*(pod.status.initContainerStatuses or []), *(pod.status.containerStatuses or [])]
    return not any(c.containerID for c in statuses)


def reconcile_replicaset(
    *,
    replicas: int,
    pods: Sequence[PodView],
    selector_labels: dict[str, str],
    min_ready_seconds: int,
    generation: int,
    now: datetime,
) -> ReplicaSetPlan:
    """``syncReplicaSet`` for a ReplicaSet wanting ``replicas`` pods, given its pods."""
    active = [p for p in pods if p.active]
    turned_away = sorted(
        (p for p in pods if refused(p)), key=lambda p: p.finished_at(), reverse=True
    )
    stale = tuple(p.name for p in turned_away[KEEP_FAILED:])
    diff = len(active) - replicas
    create = 0
    delete: tuple[str, ...] = ()
    requeue: float | None = None
    if diff < 0:
        wait = _retry_after(turned_away[:KEEP_FAILED], now)
        if wait > 0:
            requeue = wait
        else:
            create = min(-diff, BURST_REPLICAS)
    elif diff > 0:
        delete = tuple(p.name for p in pods_to_delete(active, min(diff, BURST_REPLICAS), now))
    status = replicaset_status(
        pods=pods,
        selector_labels=selector_labels,
        min_ready_seconds=min_ready_seconds,
        generation=generation,
        now=now,
    )
    if min_ready_seconds > 0:
        for pod in active:
            since = pod.ready_since
            if since is None or pod.available(min_ready_seconds, now):
                continue
            left = min_ready_seconds - (now - since).total_seconds()
            requeue = left if requeue is None else min(requeue, left)
    return ReplicaSetPlan(
        create=create, delete=delete + stale, status=status, requeue_after=requeue
    )
