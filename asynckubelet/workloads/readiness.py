"""When an applied object is ready, in each kind's own terms: what ``apply --wait``
waits for.

A Deployment is ready when ``kubectl rollout status`` would say it rolled out (its
controller saw the latest spec, every replica is updated and available, no old one is
left); it fails when its progress deadline passed. A Job is ready when ``Complete`` and
fails when ``Failed``, with the controller's reason. A StatefulSet is ready when every
replica is ready and of the update revision, a ReplicaSet when every replica is
available, a DaemonSet when its pod is updated and available (a CronJob, which makes
nothing until its schedule says so, is ready once stored). :data:`CHECKS` holds one
pure function per kind over the object as stored (a kind without one is ready once
stored), so another kind adds its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["CHECKS", "Readiness", "readiness"]

State = Literal["ready", "waiting", "failed"]


@dataclass(frozen=True)
class Readiness:
    state: State
    message: str = ""


def _n(value: Any) -> int:
    return int(value) if isinstance(value, int) else 0


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for c in status.get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def _observed(body: Mapping[str, Any]) -> bool:
    generation = _n((body.get("metadata") or {}).get("generation"))
    return _n((body.get("status") or {}).get("observedGeneration")) >= generation


def deployment(body: Mapping[str, Any]) -> Readiness:
    """``kubectl rollout status`` of a Deployment."""
    name = (body.get("metadata") or {}).get("name")
    spec, status = body.get("spec") or {}, body.get("status") or {}
    if not _observed(body):
        return Readiness("waiting", "Waiting for deployment spec update to be observed...")
    progressing = _condition(status, "Progressing")
    if progressing is not None and progressing.get("reason") == "ProgressDeadlineExceeded":
        return Readiness("failed", f'deployment "{name}" exceeded its progress deadline')
    desired = 1 if spec.get("replicas") is None else _n(spec.get("replicas"))
    updated, replicas = _n(status.get("updatedReplicas")), _n(status.get("replicas"))
    available = _n(status.get("availableReplicas"))
    if updated < desired:
        return Readiness(
            "waiting",
            f"{updated} out of {desired} new replicas have been updated",
        )
    if replicas > updated:
        return Readiness("waiting", f"{replicas - updated} old replicas are pending termination")
    if available < updated:
        return Readiness("waiting", f"{available} of {updated} updated replicas are available")
    return Readiness("ready", "successfully rolled out")


def job(body: Mapping[str, Any]) -> Readiness:
    """A Job: ``Complete`` is ready, ``Failed`` failed (with the controller's reason)."""
    status = body.get("status") or {}
    for kind, state in (("Complete", "ready"), ("Failed", "failed")):
        found = _condition(status, kind)
        if found is not None and found.get("status") == "True":
            if state == "ready":
                return Readiness("ready", "complete")
            return Readiness("failed", f"{found.get('reason')}: {found.get('message')}")
    spec = body.get("spec") or {}
    completions = spec.get("completions")
    shown = f"{_n(status.get('succeeded'))}/{completions if completions is not None else 1}"
    return Readiness("waiting", f"{shown} completions, {_n(status.get('active'))} active")


def statefulset(body: Mapping[str, Any]) -> Readiness:
    """``kubectl rollout status`` of a StatefulSet (RollingUpdate)."""
    if not _observed(body):
        return Readiness("waiting", "Waiting for statefulset spec update to be observed...")
    spec, status = body.get("spec") or {}, body.get("status") or {}
    desired = 1 if spec.get("replicas") is None else _n(spec.get("replicas"))
    ready = _n(status.get("readyReplicas"))
    if ready < desired:
        return Readiness("waiting", f"{ready} of {desired} pods are ready")
    strategy = (spec.get("updateStrategy") or {}).get("type") or "RollingUpdate"
    partition = _n(((spec.get("updateStrategy") or {}).get("rollingUpdate") or {}).get("partition"))
    rolling = strategy == "RollingUpdate" and partition == 0
    if rolling and status.get("updateRevision") != status.get("currentRevision"):
        updated = _n(status.get("updatedReplicas"))
        return Readiness("waiting", f"{updated} of {desired} pods are updated")
    return Readiness("ready", f"{ready} pods ready")


def replicaset(body: Mapping[str, Any]) -> Readiness:
    if not _observed(body):
        return Readiness("waiting", "waiting for the replica set to be observed")
    spec, status = body.get("spec") or {}, body.get("status") or {}
    desired = 1 if spec.get("replicas") is None else _n(spec.get("replicas"))
    available = _n(status.get("availableReplicas"))
    if available < desired:
        return Readiness("waiting", f"{available} of {desired} replicas are available")
    return Readiness("ready", f"{available} replicas available")


def daemonset(body: Mapping[str, Any]) -> Readiness:
    """``kubectl rollout status`` of a DaemonSet (``DaemonSetStatusViewer``)."""
    spec, status = body.get("spec") or {}, body.get("status") or {}
    name = (body.get("metadata") or {}).get("name")
    if ((spec.get("updateStrategy") or {}).get("type") or "RollingUpdate") != "RollingUpdate":
        return Readiness(
            "ready", "rollout status is only available for RollingUpdate strategy type"
        )
    if not _observed(body):
        return Readiness("waiting", "Waiting for daemon set spec update to be observed...")
    desired = _n(status.get("desiredNumberScheduled"))
    updated = _n(status.get("updatedNumberScheduled"))
    available = _n(status.get("numberAvailable"))
    if updated < desired:
        return Readiness(
            "waiting",
            f'Waiting for daemon set "{name}" rollout to finish: {updated} out of {desired} '
            "new pods have been updated...",
        )
    if available < desired:
        return Readiness(
            "waiting",
            f'Waiting for daemon set "{name}" rollout to finish: {available} of {desired} '
            "updated pods are available...",
        )
    return Readiness("ready", f'daemon set "{name}" successfully rolled out')


CHECKS: dict[str, Callable[[Mapping[str, Any]], Readiness]] = {
    "DaemonSet": daemonset,
    "Deployment": deployment,
    "Job": job,
    "StatefulSet": statefulset,
    "ReplicaSet": replicaset,
}


def readiness(kind: str, body: Mapping[str, Any]) -> Readiness:
    """Whether the object ``body`` of ``kind`` is ready, waited for, or failed."""
    check = CHECKS.get(kind)
    return check(body) if check is not None else Readiness("ready")
