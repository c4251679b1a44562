"""The Deployment controller's decisions (``pkg/controller/deployment``), as a pure
function of a Deployment and its ReplicaSets.

A Deployment owns one ReplicaSet per pod template it has had, named
``<deployment>-<pod-template-hash>``: the hash is the FNV-32a of the template (and of
the collision count, when there was a collision), spelled with ``rand.SafeEncodeString``.
Upstream hashes Go's ``spew`` printing of the template struct, which nothing outside Go
reproduces byte for byte; here the template's canonical JSON is hashed, so names have the
same shape and the same stability (same template, same name) but not the same letters as
a cluster's.

Rolling update (``rolling.go``): the new ReplicaSet grows while all pods together stay
within ``replicas + maxSurge``; old ReplicaSets shrink while the available pods stay at
least ``replicas - maxUnavailable`` (unhealthy old pods go first), so with
``maxUnavailable: 0`` a pod only goes once a new one is available. Recreate: old pods
all go first, then the new ReplicaSet is scaled up. The status, the ``Available`` and
``Progressing`` conditions, the revision annotations and the clean-up of ReplicaSets
beyond ``revisionHistoryLimit`` follow ``sync.go`` and ``progress.go``. Not done: the
proportional scaling of several active ReplicaSets when ``replicas`` changes during a
rollout (the rolling rules converge on the new size instead), adoption of ReplicaSets
without an owner reference, and ``paused`` beyond stopping the rollout.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from asynckubelet.manifests.workloads import scaled_value
from asynckubelet.workloads.pods import ALPHANUMS, owner_reference

__all__ = [
    "DESIRED_REPLICAS",
    "MAX_REPLICAS",
    "POD_TEMPLATE_HASH",
    "REVISION",
    "REVISION_HISTORY",
    "DeploymentPlan",
    "RSView",
    "max_surge",
    "max_unavailable",
    "pod_template_hash",
    "reconcile_deployment",
]

POD_TEMPLATE_HASH = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
_NOT_COPIED = frozenset(
    {
        "kubectl.kubernetes.io/last-applied-configuration",
        REVISION,
        REVISION_HISTORY,
        DESIRED_REPLICAS,
        MAX_REPLICAS,
        "deprecated.deployment.rollback.to",
    }
)
"""The Deployment's annotations its ReplicaSets do not take (``skipCopyAnnotation``)."""
_POD_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


def _fnv32a(data: bytes) -> int:
    value = _FNV_OFFSET
    for byte in data:
        value ^= byte
        value = (value * _FNV_PRIME) & 0xFFFFFFFF
    return value


def safe_encode(text: str) -> str:
    """``rand.SafeEncodeString``: each character mapped onto :data:`ALPHANUMS`."""
    return "".join(ALPHANUMS[ord(ch) % len(ALPHANUMS)] for ch in text)


def pod_template_hash(template: Mapping[str, Any], collision_count: int | None = None) -> str:
    """``controller.ComputeHash``: FNV-32a of the template (its canonical JSON), then of
    the collision count as 8 little-endian bytes when there is one, spelled safely."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count is not None:
        data += (collision_count & 0xFFFFFFFF).to_bytes(4, "little") + bytes(4)
    return safe_encode(str(_fnv32a(data)))


@dataclass(frozen=True)
class RSView:
    """A ReplicaSet of the Deployment: its stored body and its status as its pods make it
    now (``replicas``, ``readyReplicas``, ``availableReplicas``...)."""

    body: Mapping[str, Any] = field(repr=False)
    status: Mapping[str, Any] = field(default_factory=dict)
    old_pods_running: int = 0
    """Its pods not yet finished, those being deleted included (Recreate waits for 0)."""

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def replicas(self) -> int:
        return int((self.body.get("spec") or {}).get("replicas") or 0)

    @property
    def available(self) -> int:
        return int(self.status.get("availableReplicas") or 0)

    @property
    def actual(self) -> int:
        return int(self.status.get("replicas") or 0)

    @property
    def revision(self) -> int:
        text = ((self.body.get("metadata") or {}).get("annotations") or {}).get(REVISION)
        try:
            return int(text) if text is not None else 0
        except ValueError:
            return 0

    @property
    def created(self) -> str:
        return str((self.body.get("metadata") or {}).get("creationTimestamp") or "")

    @property
    def template(self) -> dict[str, Any]:
        return dict((self.body.get("spec") or {}).get("template") or {})


@dataclass
class DeploymentPlan:
    """What to do for one Deployment."""

    create: dict[str, Any] | None = None
    """A new ReplicaSet to store (with its replicas)."""
    scale: dict[str, int] = field(default_factory=dict)
    """ReplicaSet name -> its new ``spec.replicas``."""
    annotate: dict[str, dict[str, str]] = field(default_factory=dict)
    """ReplicaSet name -> annotations to set on it (a new revision, the revision history,
    the Deployment's own annotations)."""
    delete: list[str] = field(default_factory=list)
    """Old ReplicaSets beyond ``revisionHistoryLimit``."""
    status: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    events: list[tuple[str, str, str]] = field(default_factory=list)
    """``(type, reason, message)`` about the Deployment."""
    requeue_after: float | None = None


def _spec(deployment: Mapping[str, Any]) -> dict[str, Any]:
    return dict(deployment.get("spec") or {})


def _replicas(deployment: Mapping[str, Any]) -> int:
    value = _spec(deployment).get("replicas")
    return 1 if value is None else int(value)


def _rolling(deployment: Mapping[str, Any]) -> dict[str, Any] | None:
    strategy = _spec(deployment).get("strategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return None
    return dict(strategy.get("rollingUpdate") or {})


def _fenceposts(deployment: Mapping[str, Any]) -> tuple[int, int]:
    """``ResolveFenceposts``: surge rounded up, unavailable down; not both 0."""
    rolling = _rolling(deployment)
    if rolling is None:
        return 0, 0
    desired = _replicas(deployment)
    surge = scaled_value(rolling.get("maxSurge", "25%"), desired, round_up=True)
    unavailable = scaled_value(rolling.get("maxUnavailable", "25%"), desired, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_surge(deployment: Mapping[str, Any]) -> int:
    return _fenceposts(deployment)[0]


def max_unavailable(deployment: Mapping[str, Any]) -> int:
    """``MaxUnavailable``: 0 for Recreate or no replicas, never above ``replicas``."""
    desired = _replicas(deployment)
    if _rolling(deployment) is None or desired == 0:
        return 0
    return min(_fenceposts(deployment)[1], desired)


def _without_hash(template: Mapping[str, Any]) -> dict[str, Any]:
    shown = copy.deepcopy(dict(template))
    labels = (shown.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(POD_TEMPLATE_HASH, None)
        if not labels:
            shown["metadata"].pop("labels")
    meta = shown.get("metadata")
    if isinstance(meta, dict):
        if meta.get("creationTimestamp", "") is None:
            meta.pop("creationTimestamp")
        if not meta:
            shown.pop("metadata")
    # A typed client sends a container's empty ``resources`` as ``{}`` (Go writes the
    # struct out whole): ``kubectl rollout undo`` does. Empty and absent are one value.
    for key in _POD_CONTAINER_LISTS:
        for container in (shown.get("spec") or {}).get(key) or []:
            if isinstance(container, dict) and container.get("resources") == {}:
                container.pop("resources")
    return shown


def _same_template(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """``EqualIgnoreHash``."""
    return _without_hash(a) == _without_hash(b)


def _new_replicaset_body(
    deployment: Mapping[str, Any], *, name: str, hash_: str, replicas: int, revision: int
) -> dict[str, Any]:
    meta = deployment["metadata"]
    spec = _spec(deployment)
    template = copy.deepcopy(dict(spec.get("template") or {}))
    template.setdefault("metadata", {}).setdefault("labels", {})[POD_TEMPLATE_HASH] = hash_
    selector = copy.deepcopy(dict(spec.get("selector") or {}))
    selector.setdefault("matchLabels", {})[POD_TEMPLATE_HASH] = hash_
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace") or "default",
            "labels": dict(template["metadata"]["labels"]),
            "annotations": {
                **_copied_annotations(deployment),
                DESIRED_REPLICAS: str(_replicas(deployment)),
                MAX_REPLICAS: str(_replicas(deployment) + max_surge(deployment)),
                REVISION: str(revision),
            },
            "ownerReferences": [
                owner_reference(
                    api_version="apps/v1",
                    kind="Deployment",
                    name=str(meta["name"]),
                    uid=str(meta.get("uid") or ""),
                )
            ],
        },
        "spec": {
            "replicas": replicas,
            "minReadySeconds": int(spec.get("minReadySeconds") or 0),
            "selector": selector,
            "template": template,
        },
    }
    return body


def _condition(
    conditions: list[dict[str, Any]], kind: str, status: str, reason: str, message: str, now: str
) -> list[dict[str, Any]]:
    """``SetDeploymentCondition``: unchanged when status and reason are; the transition
    time kept while the status is."""
    old = next((c for c in conditions if c.get("type") == kind), None)
    if old is not None and old.get("status") == status and old.get("reason") == reason:
        if old.get("message") == message:
            return conditions
        updated = {**old, "message": message, "lastUpdateTime": now}
        return [updated if c is old else c for c in conditions]
    new = {
        "type": kind,
        "status": status,
        "lastUpdateTime": now,
        "lastTransitionTime": old.get("lastTransitionTime", now)
        if old is not None and old.get("status") == status
        else now,
        "reason": reason,
        "message": message,
    }
    return _ordered([*(c for c in conditions if c.get("type") != kind), new])


def _ordered(conditions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    order = {"Available": 0, "Progressing": 1, "ReplicaFailure": 2}
    return sorted(conditions, key=lambda c: order.get(str(c.get("type")), 3))


def _iso(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def reconcile_deployment(
    deployment: Mapping[str, Any], replicasets: Sequence[RSView], now: datetime
) -> DeploymentPlan:
    """``syncDeployment`` for one Deployment and the ReplicaSets it owns."""
    plan = DeploymentPlan()
    spec = _spec(deployment)
    meta = deployment["metadata"]
    template = dict(spec.get("template") or {})
    status = dict(deployment.get("status") or {})
    paused = bool(spec.get("paused"))

    current = {rs.name: rs for rs in replicasets}
    matching = sorted(
        (rs for rs in replicasets if _same_template(rs.template, template)),
        key=lambda rs: (rs.created, rs.name),
    )
    new = matching[0] if matching else None
    olds = [rs for rs in replicasets if rs is not new]
    max_old_revision = max((rs.revision for rs in olds), default=0)

    def scale(rs: RSView, to: int) -> None:
        if to == rs.replicas and rs.name not in plan.scale:
            return
        before = plan.scale.get(rs.name, rs.replicas)
        if to == before:
            return
        plan.scale[rs.name] = to
        direction = "up" if to > before else "down"
        plan.events.append(
            (
                "Normal",
                "ScalingReplicaSet",
                f"Scaled {direction} replica set {rs.name} from {before} to {to}",
            )
        )

    def replicas_of(rs: RSView) -> int:
        return plan.scale.get(rs.name, rs.replicas)

    created_name: str | None = None
    if new is None and not paused:
        new = _create_new(plan, deployment, status, current, olds, revision=max_old_revision + 1)
        created_name = new.name
    elif new is not None:
        _annotate_new(plan, deployment, new, max_old_revision)

    revision = (
        plan.annotate.get(new.name, {}).get(REVISION, str(new.revision))
        if new is not None
        else None
    )
    if revision is not None and (meta.get("annotations") or {}).get(REVISION) != revision:
        plan.annotations[REVISION] = revision

    if new is not None and not paused and created_name is None:
        if _rolling(deployment) is not None:
            _roll(deployment, new, olds, scale, replicas_of)
        else:
            _recreate(deployment, new, olds, scale, replicas_of)

    plan.status, requeue = _status(deployment, new, olds, replicas_of, status, created_name, now)
    plan.requeue_after = requeue
    if new is not None and _complete(deployment, plan.status):
        plan.delete = _cleanup(deployment, olds, replicas_of)
    return plan


def _copied_annotations(deployment: Mapping[str, Any]) -> dict[str, str]:
    annotations = (deployment.get("metadata") or {}).get("annotations") or {}
    return {k: str(v) for k, v in annotations.items() if k not in _NOT_COPIED}


def _annotate_new(
    plan: DeploymentPlan, deployment: Mapping[str, Any], new: RSView, max_old_revision: int
) -> None:
    """``SetNewReplicaSetAnnotations`` on an existing new ReplicaSet: the Deployment's
    annotations copied, and a revision above the old ones (the one it had joins
    ``revision-history``), as when a rollback takes an old ReplicaSet back."""
    current = (new.body.get("metadata") or {}).get("annotations") or {}
    wanted = {k: v for k, v in _copied_annotations(deployment).items() if current.get(k) != v}
    if new.revision <= max_old_revision:
        wanted[REVISION] = str(max_old_revision + 1)
        if new.revision > 0:
            history = current.get(REVISION_HISTORY)
            old = str(new.revision)
            wanted[REVISION_HISTORY] = f"{history},{old}" if history else old
    if wanted:
        plan.annotate[new.name] = wanted


def _create_new(
    plan: DeploymentPlan,
    deployment: Mapping[str, Any],
    status: dict[str, Any],
    current: Mapping[str, RSView],
    olds: Sequence[RSView],
    *,
    revision: int,
) -> RSView:
    """The ReplicaSet of the current template, named by its hash (counting a collision
    with another template's name), started as large as the strategy allows."""
    name = str(deployment["metadata"]["name"])
    template = dict(_spec(deployment).get("template") or {})
    collision = status.get("collisionCount")
    desired = _replicas(deployment)
    hash_ = pod_template_hash(template, collision)
    rs_name = f"{name}-{hash_}"
    if rs_name in current:
        # Another template hashed to this name: count the collision, name anew.
        count = (collision or 0) + 1
        status["collisionCount"] = count
        hash_ = pod_template_hash(template, count)
        rs_name = f"{name}-{hash_}"
    old_total = sum(rs.replicas for rs in olds)
    if _rolling(deployment) is not None:
        room = desired + max_surge(deployment) - old_total
        start = max(0, min(room, desired))
    else:
        start = desired if not any(rs.old_pods_running or rs.replicas for rs in olds) else 0
    plan.create = _new_replicaset_body(
        deployment, name=rs_name, hash_=hash_, replicas=start, revision=revision
    )
    plan.events.append(
        ("Normal", "ScalingReplicaSet", f"Scaled up replica set {rs_name} from 0 to {start}")
    )
    return RSView(body=plan.create, status={})


def _roll(
    deployment: Mapping[str, Any],
    new: RSView,
    olds: Sequence[RSView],
    scale: Any,
    replicas_of: Any,
) -> None:
    """``rolloutRolling``: grow the new ReplicaSet, then shrink the old ones."""
    desired = _replicas(deployment)
    if new.replicas > desired:
        scale(new, desired)
        return
    if new.replicas < desired:
        total = sum(replicas_of(rs) for rs in olds) + new.replicas
        room = desired + max_surge(deployment) - total
        if room > 0:
            scale(new, new.replicas + min(room, desired - new.replicas))
            return
    active_olds = [rs for rs in olds if replicas_of(rs) > 0]
    if not active_olds:
        return
    all_pods = sum(replicas_of(rs) for rs in olds) + replicas_of(new)
    min_available = desired - max_unavailable(deployment)
    new_unavailable = replicas_of(new) - new.available
    max_scaled_down = all_pods - min_available - new_unavailable
    if max_scaled_down <= 0:
        return
    # cleanupUnhealthyReplicas: old pods that are not available go first.
    scaled = 0
    for rs in sorted(active_olds, key=lambda r: (r.created, r.name)):
        if scaled >= max_scaled_down:
            break
        unhealthy = replicas_of(rs) - rs.available
        if unhealthy <= 0:
            continue
        down = min(unhealthy, max_scaled_down - scaled)
        scale(rs, replicas_of(rs) - down)
        scaled += down
    # scaleDownOldReplicaSetsForRollingUpdate: then as many as availability allows.
    available = sum(rs.available for rs in [*olds, new])
    room = available - min_available
    done = 0
    for rs in sorted(active_olds, key=lambda r: (r.created, r.name)):
        if done >= room:
            break
        if replicas_of(rs) == 0:
            continue
        down = min(replicas_of(rs), room - done)
        scale(rs, replicas_of(rs) - down)
        done += down


def _recreate(
    deployment: Mapping[str, Any],
    new: RSView,
    olds: Sequence[RSView],
    scale: Any,
    replicas_of: Any,
) -> None:
    """``rolloutRecreate``: every old pod gone before the new ReplicaSet grows."""
    for rs in olds:
        if replicas_of(rs) > 0:
            scale(rs, 0)
    if any(rs.old_pods_running for rs in olds) or any(rs.replicas for rs in olds):
        return
    desired = _replicas(deployment)
    if new.replicas != desired:
        scale(new, desired)


def _status(
    deployment: Mapping[str, Any],
    new: RSView | None,
    olds: Sequence[RSView],
    replicas_of: Any,
    status: dict[str, Any],
    created_name: str | None,
    now: datetime,
) -> tuple[dict[str, Any], float | None]:
    """``calculateStatus`` and ``syncRolloutStatus``."""
    desired = _replicas(deployment)
    every = [*olds, *([new] if new is not None else [])]
    available = sum(rs.available for rs in every)
    updated = new.actual if new is not None else 0
    result: dict[str, Any] = {
        "observedGeneration": int(deployment["metadata"].get("generation") or 1),
        "replicas": sum(rs.actual for rs in every),
        "updatedReplicas": updated,
        "readyReplicas": sum(int(rs.status.get("readyReplicas") or 0) for rs in every),
        "availableReplicas": available,
        "unavailableReplicas": max(0, sum(replicas_of(rs) for rs in every) - available),
    }
    terminating = sum(int(rs.status.get("terminatingReplicas") or 0) for rs in every)
    if terminating:
        result["terminatingReplicas"] = terminating
    if status.get("collisionCount") is not None:
        result["collisionCount"] = status["collisionCount"]
    stamp = _iso(now)
    conditions = list(status.get("conditions") or [])
    if available >= desired - max_unavailable(deployment):
        conditions = _condition(
            conditions,
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
            stamp,
        )
    else:
        conditions = _condition(
            conditions,
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
            stamp,
        )
    rs_name = new.name if new is not None else ""
    conditions, requeue = _progress_condition(
        deployment, conditions, result, rs_name=rs_name, created_name=created_name, now=now
    )
    result["conditions"] = conditions
    return result, requeue


def _progress_condition(
    deployment: Mapping[str, Any],
    conditions: list[dict[str, Any]],
    result: Mapping[str, Any],
    *,
    rs_name: str,
    created_name: str | None,
    now: datetime,
) -> tuple[list[dict[str, Any]], float | None]:
    """``syncRolloutStatus``'s ``Progressing`` condition, and when to look again for the
    progress deadline."""
    stamp = _iso(now)
    deadline = (deployment.get("spec") or {}).get("progressDeadlineSeconds")
    progressing = next((c for c in conditions if c.get("type") == "Progressing"), None)
    if created_name is not None:
        message = f'Created new replica set "{created_name}"'
        return _condition(
            conditions, "Progressing", "True", "NewReplicaSetCreated", message, stamp
        ), None
    if deadline is None:
        return [c for c in conditions if c.get("type") != "Progressing"], None
    if (
        progressing is not None
        and progressing.get("reason") == "NewReplicaSetAvailable"
        and result["replicas"] == result["updatedReplicas"]
    ):
        return conditions, None
    if _complete(deployment, result):
        message = f'ReplicaSet "{rs_name}" has successfully progressed.'
        return _condition(
            conditions, "Progressing", "True", "NewReplicaSetAvailable", message, stamp
        ), None
    if _progressing(result, deployment.get("status") or {}):
        kept = (
            progressing if progressing is not None and progressing.get("status") == "True" else None
        )
        entry = {
            "type": "Progressing",
            "status": "True",
            "lastUpdateTime": stamp,
            "lastTransitionTime": (kept or {}).get("lastTransitionTime", stamp),
            "reason": "ReplicaSetUpdated",
            "message": f'ReplicaSet "{rs_name}" is progressing.',
        }
        others = [c for c in conditions if c.get("type") != "Progressing"]
        return _ordered([*others, entry]), float(deadline)
    if progressing is None or progressing.get("reason") == "ProgressDeadlineExceeded":
        return conditions, None
    since = _parse(progressing.get("lastUpdateTime"))
    if since is None:
        return conditions, None
    left = since.timestamp() + int(deadline) - now.timestamp()
    if left > 0:
        return conditions, left
    message = f'ReplicaSet "{rs_name}" has timed out progressing.'
    return _condition(
        conditions, "Progressing", "False", "ProgressDeadlineExceeded", message, stamp
    ), None


def _progressing(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """``DeploymentProgressing``: more updated, ready or available pods, or fewer old."""
    old_old = int(old.get("replicas") or 0) - int(old.get("updatedReplicas") or 0)
    new_old = int(new.get("replicas") or 0) - int(new.get("updatedReplicas") or 0)
    return (
        int(new.get("updatedReplicas") or 0) > int(old.get("updatedReplicas") or 0)
        or new_old < old_old
        or int(new.get("readyReplicas") or 0) > int(old.get("readyReplicas") or 0)
        or int(new.get("availableReplicas") or 0) > int(old.get("availableReplicas") or 0)
    )


def _complete(deployment: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """``DeploymentComplete``."""
    desired = _replicas(deployment)
    generation = int(deployment["metadata"].get("generation") or 1)
    return (
        int(status.get("updatedReplicas") or 0) == desired
        and int(status.get("replicas") or 0) == desired
        and int(status.get("availableReplicas") or 0) == desired
        and int(status.get("observedGeneration") or 0) >= generation
    )


def _cleanup(deployment: Mapping[str, Any], olds: Sequence[RSView], replicas_of: Any) -> list[str]:
    """``cleanupDeployment``: old ReplicaSets without pods beyond the history limit,
    oldest first."""
    limit = (deployment.get("spec") or {}).get("revisionHistoryLimit")
    if limit is None:
        return []
    idle = [
        rs for rs in olds if replicas_of(rs) == 0 and rs.actual == 0 and not rs.old_pods_running
    ]
    surplus = len(olds) - int(limit)
    if surplus <= 0:
        return []
    idle.sort(key=lambda rs: (rs.revision, rs.created))
    return [rs.name for rs in idle[:surplus]]
