"""The DaemonSet controller's decisions (``pkg/controller/daemon``) for the one node there
is, as a pure function of a DaemonSet, its pods and the node.

The node should run the daemon pod when the template's node selector and required node
affinity match the node's labels and every ``NoSchedule``/``NoExecute`` taint is tolerated
(by the template's tolerations and those the controller adds to every daemon pod). Its pod
is named ``<daemonset>-<5 random characters>`` and labelled with the
``controller-revision-hash`` of the template's revision (:mod:`~asynckubelet.workloads.
revisions` keeps them) and the ``pod-template-generation``. A template change rolls
the pod: with ``RollingUpdate`` (``maxUnavailable`` at least one, on one node) the old pod
is deleted and the new one made once it is gone; with a ``maxSurge`` the new pod is made
first and the old one deleted once the new is available; with ``OnDelete`` a new pod comes
only when the old one is deleted by someone else. A failed pod is deleted and replaced.
"""

from __future__ import annotations

import copy
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from lightkube.models.core_v1 import Pod, Toleration

from asynckubelet.node.admission import Taint, _tolerates, matches_node_selector
from asynckubelet.workloads.deployment import pod_template_hash
from asynckubelet.workloads.pods import PodView

__all__ = [
    "DAEMON_TOLERATIONS",
    "REVISION_HASH",
    "TEMPLATE_GENERATION",
    "DaemonSetPlan",
    "NodeView",
    "daemon_affinity",
    "daemon_tolerations",
    "node_labels",
    "reconcile_daemonset",
    "revision_hash",
    "should_run",
]

REVISION_HASH = "controller-revision-hash"
TEMPLATE_GENERATION = "pod-template-generation"
DAEMON_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
"""The tolerations ``AddOrUpdateDaemonPodTolerations`` gives every daemon pod."""
_HOST_NETWORK_TOLERATION = {
    "key": "node.kubernetes.io/network-unavailable",
    "operator": "Exists",
    "effect": "NoSchedule",
}


@dataclass(frozen=True)
class NodeView:
    """The node as the daemon controller matches it."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...] = ()


@dataclass
class DaemonSetPlan:
    """What to do for one DaemonSet."""

    create: bool = False
    """Make the daemon pod (of the current template)."""
    delete: list[str] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    requeue_after: float | None = None


def node_labels(name: str, given: Mapping[str, str] | None) -> dict[str, str]:
    """The labels the node has as the Kubernetes API serves it: its ``--node-labels`` and
    the kubelet's own (hostname, OS, architecture)."""
    machine = platform.machine()
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)
    return {
        **(given or {}),
        "beta.kubernetes.io/arch": arch,
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": arch,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
    }


def revision_hash(daemonset: Mapping[str, Any]) -> str:
    """The ``controller-revision-hash`` of the DaemonSet's current template."""
    spec = daemonset.get("spec") or {}
    collision = (daemonset.get("status") or {}).get("collisionCount")
    return pod_template_hash(spec.get("template") or {}, collision)


def daemon_tolerations(template_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The template's tolerations with the controller's added (those it lacks)."""
    given = [dict(t) for t in template_spec.get("tolerations") or []]
    wanted = list(DAEMON_TOLERATIONS)
    if template_spec.get("hostNetwork"):
        wanted.append(_HOST_NETWORK_TOLERATION)
    for toleration in wanted:
        if not any(
            t.get("key") == toleration["key"] and t.get("effect") == toleration["effect"]
            for t in given
        ):
            given.append(dict(toleration))
    return given


def daemon_affinity(affinity: Mapping[str, Any] | None, node_name: str) -> dict[str, Any]:
    """``ReplaceDaemonSetPodNodeNameNodeAffinity``: the pod's required node affinity
    becomes the one term naming this node (``metadata.name``); the rest is kept."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
    found = copy.deepcopy(dict(affinity or {}))
    node_affinity = found.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    required["nodeSelectorTerms"] = [term]
    return found


def should_run(template: Mapping[str, Any], node: NodeView) -> bool:
    """``NodeShouldRunDaemonPod``: node selector and required affinity match, and every
    ``NoSchedule`` and ``NoExecute`` taint is tolerated."""
    spec = dict(template.get("spec") or {})
    pod = cast(
        Pod, Pod.from_dict({"metadata": {"name": "daemon"}, "spec": {"containers": [], **spec}})
    )
    if not matches_node_selector(pod, node.labels, node.name):
        return False
    tolerations = [cast(Toleration, Toleration.from_dict(t)) for t in daemon_tolerations(spec)]
    for taint in node.taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            return False
    return True


def reconcile_daemonset(
    daemonset: Mapping[str, Any],
    pods: Sequence[PodView],
    node: NodeView,
    now: datetime,
    *,
    current: str | None = None,
) -> DaemonSetPlan:
    """``syncDaemonSet`` (``manage`` and ``rollingUpdate``) for the one node; ``current``
    is the hash of the current revision (by default its template's hash)."""
    plan = DaemonSetPlan()
    spec = dict(daemonset.get("spec") or {})
    template = dict(spec.get("template") or {})
    current = current or revision_hash(daemonset)
    wanted = should_run(template, node)
    live = [p for p in pods if not p.deleting and not p.terminal]
    failed = [p for p in pods if p.phase == "Failed" and not p.deleting]
    plan.delete += [p.name for p in failed]
    min_ready = int(spec.get("minReadySeconds") or 0)
    if not wanted:
        plan.delete += [p.name for p in live]
    else:
        new = [p for p in live if p.labels.get(REVISION_HASH) == current]
        old = [p for p in live if p.labels.get(REVISION_HASH) != current]
        # More than one daemon pod: keep the oldest of the newest revision.
        keep = sorted(new or old, key=lambda p: (p.created is None, p.created))[:1]
        plan.delete += [p.name for p in (new or old) if p not in keep]
        terminating = any(p.deleting and not p.terminal for p in pods)
        strategy = spec.get("updateStrategy") or {}
        if not keep and not terminating:
            plan.create = True
        elif keep and not new and (strategy.get("type") or "RollingUpdate") == "RollingUpdate":
            _roll(plan, strategy, keep[0], min_ready, now)
        elif new and old and any(p.available(min_ready, now) for p in keep):
            plan.delete += [p.name for p in old]
    plan.status = _status(daemonset, pods, wanted=wanted, current=current, now=now)
    if min_ready > 0:
        for pod in live:
            since = pod.ready_since
            if since is not None and not pod.available(min_ready, now):
                left = min_ready - (now - since).total_seconds()
                plan.requeue_after = (
                    left if plan.requeue_after is None else min(plan.requeue_after, left)
                )
    return plan


def _roll(
    plan: DaemonSetPlan, strategy: Mapping[str, Any], old: PodView, min_ready: int, now: datetime
) -> None:
    """Replace the old pod: surge first when ``maxSurge`` allows one, else delete it."""
    surge = (strategy.get("rollingUpdate") or {}).get("maxSurge")
    surging = surge not in (None, 0, "0", "0%")
    if surging and old.available(min_ready, now):
        plan.create = True
    else:
        plan.delete.append(old.name)


def _status(
    daemonset: Mapping[str, Any],
    pods: Sequence[PodView],
    *,
    wanted: bool,
    current: str,
    now: datetime,
) -> dict[str, Any]:
    min_ready = int((daemonset.get("spec") or {}).get("minReadySeconds") or 0)
    existing = [p for p in pods if not p.deleting and not p.terminal]
    scheduled = 1 if wanted and existing else 0
    ready = 1 if wanted and any(p.ready for p in existing) else 0
    updated = 1 if wanted and any(p.labels.get(REVISION_HASH) == current for p in existing) else 0
    available = 1 if wanted and any(p.available(min_ready, now) for p in existing) else 0
    desired = 1 if wanted else 0
    status: dict[str, Any] = {
        "currentNumberScheduled": scheduled,
        "numberMisscheduled": 1 if existing and not wanted else 0,
        "desiredNumberScheduled": desired,
        "numberReady": ready,
        "observedGeneration": int((daemonset.get("metadata") or {}).get("generation") or 1),
        "updatedNumberScheduled": updated,
        "numberAvailable": available,
    }
    if desired - available > 0:
        status["numberUnavailable"] = desired - available
    collision = (daemonset.get("status") or {}).get("collisionCount")
    if collision is not None:
        status["collisionCount"] = collision
    return status
