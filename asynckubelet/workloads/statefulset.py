"""The StatefulSet controller's decisions (``pkg/controller/statefulset``), as a pure
function of a StatefulSet and its pods.

Pods are ``<name>-<ordinal>``, with a stable hostname (``spec.subdomain`` from
``serviceName``) and the ``controller-revision-hash``, ``statefulset.kubernetes.io/
pod-name`` and ``apps.kubernetes.io/pod-index`` labels. Under ``OrderedReady`` a pod is
made only once every pod before it runs and is ready, pods beyond ``replicas`` go from
the highest ordinal down, one at a time, and a failed pod is deleted and made again;
``Parallel`` does all of this at once. A ``RollingUpdate`` replaces the pods of an older
revision from the highest ordinal down to ``partition``, one at a time, each once the
others are ready; ``OnDelete`` leaves that to whoever deletes them. The update revision
is the ``ControllerRevision`` of the template (:mod:`~asynckubelet.workloads.revisions`
keeps them), named from the template's hash; ``status.currentRevision`` moves to it once
every pod runs it and is ready.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from asynckubelet.workloads.deployment import pod_template_hash
from asynckubelet.workloads.pods import PodView

__all__ = [
    "POD_INDEX",
    "POD_NAME",
    "REVISION_HASH",
    "StatefulSetPlan",
    "ordinal_of",
    "reconcile_statefulset",
    "update_revision",
]

REVISION_HASH = "controller-revision-hash"
POD_NAME = "statefulset.kubernetes.io/pod-name"
POD_INDEX = "apps.kubernetes.io/pod-index"


@dataclass
class StatefulSetPlan:
    """What to do for one StatefulSet."""

    create: list[int] = field(default_factory=list)
    """Ordinals of the pods to make (of the update revision)."""
    delete: list[str] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    requeue_after: float | None = None


def update_revision(statefulset: Mapping[str, Any]) -> str:
    """The name of the revision of the StatefulSet's current template."""
    spec = statefulset.get("spec") or {}
    collision = (statefulset.get("status") or {}).get("collisionCount")
    name = str(statefulset["metadata"]["name"])
    return f"{name}-{pod_template_hash(spec.get('template') or {}, collision)}"


def ordinal_of(statefulset_name: str, pod_name: str) -> int | None:
    """The ordinal of a pod named ``<statefulset>-<ordinal>``, or None."""
    prefix, _, number = pod_name.rpartition("-")
    if prefix != statefulset_name or not number.isdigit():
        return None
    return int(number)


def _running_ready(pod: PodView) -> bool:
    return pod.phase == "Running" and pod.ready and not pod.deleting


def reconcile_statefulset(
    statefulset: Mapping[str, Any],
    pods: Sequence[PodView],
    now: datetime,
    *,
    revision: str | None = None,
) -> StatefulSetPlan:
    """``updateStatefulSet`` for one StatefulSet and the pods it owns; ``revision`` names
    its update revision (by default the one its template's hash names)."""
    plan = StatefulSetPlan()
    spec = dict(statefulset.get("spec") or {})
    name = str(statefulset["metadata"]["name"])
    given = spec.get("replicas")
    replicas = 1 if given is None else int(given)
    start = int((spec.get("ordinals") or {}).get("start") or 0)
    wanted = range(start, start + replicas)
    ordered = (spec.get("podManagementPolicy") or "OrderedReady") == "OrderedReady"
    strategy = spec.get("updateStrategy") or {}
    rolling = (strategy.get("type") or "RollingUpdate") == "RollingUpdate"
    partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
    revision = revision or update_revision(statefulset)

    by_ordinal = _members(name, pods)
    condemned = sorted((o for o in by_ordinal if o not in wanted), reverse=True)
    blocked = _make_wanted(plan, wanted, by_ordinal, ordered=ordered)
    if not blocked:
        blocked = _delete_condemned(plan, condemned, wanted, by_ordinal, ordered=ordered)
    if not blocked and rolling and not condemned:
        _roll_one(plan, wanted, by_ordinal, revision=revision, first=partition + start)
    _status(plan, statefulset, by_ordinal, replicas=replicas, revision=revision, now=now)
    return plan


def _members(name: str, pods: Sequence[PodView]) -> dict[int, PodView]:
    """The StatefulSet's pods by ordinal (a live pod before a deleted one of its ordinal)."""
    by_ordinal: dict[int, PodView] = {}
    for pod in pods:
        ordinal = ordinal_of(name, pod.name)
        if ordinal is None:
            continue
        known = by_ordinal.get(ordinal)
        if known is None or (known.deleting and not pod.deleting):
            by_ordinal[ordinal] = pod
    return by_ordinal


def _make_wanted(
    plan: StatefulSetPlan,
    wanted: range,
    by_ordinal: Mapping[int, PodView],
    *,
    ordered: bool,
) -> bool:
    """Create the missing ordinals and replace failed pods, in order; True when an
    ordered StatefulSet must wait before going further."""
    for ordinal in wanted:
        member = by_ordinal.get(ordinal)
        if member is None:
            plan.create.append(ordinal)
        elif member.phase == "Failed" and not member.deleting:
            plan.delete.append(member.name)
        elif member.deleting or not _running_ready(member):
            if ordered:
                return True
            continue
        else:
            continue
        if ordered:
            return True
    return False


def _all_running_ready(wanted: Iterable[int], by_ordinal: Mapping[int, PodView]) -> bool:
    return all((p := by_ordinal.get(o)) is not None and _running_ready(p) for o in wanted)


def _delete_condemned(
    plan: StatefulSetPlan,
    condemned: Sequence[int],
    wanted: range,
    by_ordinal: Mapping[int, PodView],
    *,
    ordered: bool,
) -> bool:
    """Delete the pods past the wanted ordinals, highest first (one at a time, once every
    wanted pod is running and ready, when ordered); True when an ordered StatefulSet
    must wait."""
    every_ready = _all_running_ready(wanted, by_ordinal)
    for ordinal in condemned:
        pod = by_ordinal[ordinal]
        if pod.deleting:
            if ordered:
                return True
            continue
        if ordered and not every_ready:
            return True
        plan.delete.append(pod.name)
        if ordered:
            return True
    return False


def _roll_one(
    plan: StatefulSetPlan,
    wanted: range,
    by_ordinal: Mapping[int, PodView],
    *,
    revision: str,
    first: int,
) -> None:
    """Delete the highest pod of another revision at or above ``first`` once all others
    are running and ready (its replacement is made of the update revision)."""
    for ordinal in sorted(wanted, reverse=True):
        if ordinal < first:
            return
        candidate = by_ordinal.get(ordinal)
        if candidate is None:
            continue
        if candidate.labels.get(REVISION_HASH) != revision and not candidate.deleting:
            others = (o for o in wanted if o != ordinal)
            if _all_running_ready(others, by_ordinal) and _running_ready(candidate):
                plan.delete.append(candidate.name)
            return
        if not _running_ready(candidate):
            return


def _status(
    plan: StatefulSetPlan,
    statefulset: Mapping[str, Any],
    by_ordinal: Mapping[int, PodView],
    *,
    replicas: int,
    revision: str,
    now: datetime,
) -> None:
    """The StatefulSet's status from its pods, and when to look again for availability."""
    spec = statefulset.get("spec") or {}
    min_ready = int(spec.get("minReadySeconds") or 0)
    status_in = dict(statefulset.get("status") or {})
    current_revision = str(status_in.get("currentRevision") or revision)
    existing = [p for p in by_ordinal.values() if not p.deleting]
    ready = [p for p in existing if p.ready]
    available = [p for p in existing if p.available(min_ready, now)]
    updated = [p for p in existing if p.labels.get(REVISION_HASH) == revision]
    current = [p for p in existing if p.labels.get(REVISION_HASH) == current_revision]
    if len(updated) == replicas and len(ready) == replicas and len(existing) == replicas:
        current_revision = revision
        current = updated
    plan.status = {
        "observedGeneration": int(statefulset["metadata"].get("generation") or 1),
        "replicas": len(existing),
        "readyReplicas": len(ready),
        "currentReplicas": len(current),
        "updatedReplicas": len(updated),
        "availableReplicas": len(available),
        "currentRevision": current_revision,
        "updateRevision": revision,
    }
    collision = status_in.get("collisionCount")
    plan.status["collisionCount"] = collision if isinstance(collision, int) else 0
    if min_ready > 0:
        for pod in existing:
            since = pod.ready_since
            if since is not None and not pod.available(min_ready, now):
                left = min_ready - (now - since).total_seconds()
                plan.requeue_after = (
                    left if plan.requeue_after is None else min(plan.requeue_after, left)
                )
