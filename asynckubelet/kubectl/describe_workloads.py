"""kubectl's ``describe`` pages of the workloads: CronJob, DaemonSet, Deployment, Job,
ReplicaSet and StatefulSet.

kubectl writes these pages through a tab writer: a label and its value are two cells, and
the labels of consecutive lines that all have one are padded to the longest of them plus
two spaces; a line without a tab (``Pod Template:``, the DaemonSet's counters) ends such a
run. :func:`tabbed` does the same, so the values line up where kubectl lines them up. The
pod template reuses the pod page's container and volume blocks. An object's text reaches
a terminal: as kubectl does, an escape character shows as ``^[`` and a carriage return as
``\\r``, so a label or annotation cannot move the cursor or rewrite what is shown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from lightkube.models.core_v1 import PodTemplateSpec

from asynckubelet.kubectl.describe import (
    container_lines,
    event_lines,
    harmless,
    rfc1123z,
    volume_lines,
)
from asynckubelet.kubectl.objects import format_label_selector
from asynckubelet.kubectl.times import now_utc
from asynckubelet.node.events import PodEvent, age
from asynckubelet.node.printpod import parse_time

_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_MAX_ANNOTATION = 140


def _page(lines: Sequence[str]) -> str:
    return "\n".join(tabbed([harmless(line) for line in lines]))


def tabbed(lines: Sequence[str], *, padding: int = 2) -> list[str]:
    """``lines`` as Go's ``text/tabwriter`` (no minimum width, padded with spaces) prints
    them: every tab-terminated cell padded to the widest cell of its column block."""
    rows = [line.split("\t") for line in lines]
    out = [""] * len(rows)

    def write(first: int, end: int, widths: list[int]) -> None:
        for i in range(first, end):
            out[i] = "".join(
                cell.ljust(widths[j]) if j < len(widths) else cell for j, cell in enumerate(rows[i])
            )

    def blocks(first: int, end: int, widths: list[int]) -> None:
        column = len(widths)
        this = first
        while this < end:
            if column >= len(rows[this]) - 1:
                this += 1
                continue
            write(first, this, widths)
            first = this
            width = 0
            while this < end and column < len(rows[this]) - 1:
                width = max(width, len(rows[this][column]) + padding)
                this += 1
            blocks(first, this, [*widths, width])
            first = this
        write(first, end, widths)

    blocks(0, len(rows), [])
    return out


def _labels(title: str, values: Mapping[str, Any] | None) -> list[str]:
    """``printLabelsMultiline``: ``title:<TAB>k=v``, further labels on ``<TAB>k=v`` lines."""
    items = sorted((str(k), str(v)) for k, v in (values or {}).items())
    if not items:
        return [f"{title}:\t<none>"]
    return [f"{title}:\t{k}={v}" if i == 0 else f"\t{k}={v}" for i, (k, v) in enumerate(items)]


def _annotations(title: str, values: Mapping[str, Any] | None) -> list[str]:
    """``printAnnotationsMultiline``: ``key: value``, kubectl's last-applied copy left
    out, a long or multi-line value on its own lines under its key, cut at 140."""
    items = sorted((str(k), str(v)) for k, v in (values or {}).items() if k != _LAST_APPLIED)
    if not items:
        return [f"{title}:\t<none>"]
    lines = []
    for i, (key, raw) in enumerate(items):
        head = f"{title}:\t" if i == 0 else "\t"
        value = raw.removesuffix("\n")
        if len(value) + len(key) + 2 > _MAX_ANNOTATION or "\n" in value:
            lines.append(f"{head}{key}:")
            cut = _MAX_ANNOTATION - 2
            lines += [f"\t  {s[:cut] + '...' if len(s) > cut else s}" for s in value.split("\n")]
        else:
            lines.append(f"{head}{key}: {value}")
    return lines


def _tolerations(items: Sequence[Mapping[str, Any]]) -> list[str]:
    """``printPodTolerationsMultiline`` under a pod template, sorted by key."""
    shown = []
    for t in sorted(items, key=lambda t: str(t.get("key") or "")):
        text = str(t.get("key") or "")
        if t.get("value"):
            text += f"={t['value']}"
        if t.get("effect"):
            text += f":{t['effect']}"
        if t.get("operator") == "Exists" and not t.get("value"):
            text += " op=Exists" if t.get("key") or t.get("effect") else "op=Exists"
        if t.get("tolerationSeconds") is not None:
            text += f" for {t['tolerationSeconds']}s"
        shown.append(text)
    if not shown:
        return ["  Tolerations:\t<none>"]
    return [f"  Tolerations:\t{shown[0]}", *(f"\t{s}" for s in shown[1:])]


def pod_template_lines(template: Mapping[str, Any] | None) -> list[str]:
    """kubectl's ``DescribePodTemplate``: the template's labels, annotations, service
    account, containers (without status), volumes, node selector and tolerations."""
    if template is None:
        return ["Pod Template:", "  <unset>"]
    meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    typed = cast(PodTemplateSpec, PodTemplateSpec.from_dict(dict(template)))
    pod_spec = typed.spec
    lines = ["Pod Template:", *_labels("  Labels", meta.get("labels"))]
    if meta.get("annotations"):
        lines += _annotations("  Annotations", meta["annotations"])
    if spec.get("serviceAccountName"):
        lines.append(f"  Service Account:\t{spec['serviceAccountName']}")
    if pod_spec is not None and pod_spec.initContainers:
        lines.append("  Init Containers:")
        for c in pod_spec.initContainers:
            lines += container_lines(c, None, template=True)
    containers = pod_spec.containers if pod_spec is not None else []
    lines.append("  Containers:" if containers else "  Containers: <none>")
    for c in containers:
        lines += container_lines(c, None, template=True)
    if pod_spec is not None and pod_spec.volumes:
        lines += volume_lines(pod_spec, template=True)
    else:
        lines.append("  Volumes:\t<none>")
    if spec.get("priorityClassName"):
        lines.append(f"  Priority Class Name:\t{spec['priorityClassName']}")
    lines += _labels("  Node-Selectors", spec.get("nodeSelector"))
    lines += _tolerations(spec.get("tolerations") or [])
    return lines


def _events(events: Sequence[PodEvent], now: datetime | None) -> list[str]:
    if not events:
        return ["Events:\t<none>"]
    return event_lines(events, now=now or now_utc())


def _set(value: object, unit: str = "") -> str:
    return "<unset>" if value is None else f"{value}{unit}"


def label_selector(selector: Mapping[str, Any] | None) -> str:
    """``metav1.LabelSelectorAsSelector(...).String()``: every requirement, sorted by key
    (``app=web,tier in (a,b),!canary``); empty for no selector."""
    found: list[tuple[str, str]] = [
        (str(k), f"{k}={v}") for k, v in ((selector or {}).get("matchLabels") or {}).items()
    ]
    for expr in (selector or {}).get("matchExpressions") or []:
        key, op = str(expr.get("key") or ""), expr.get("operator")
        values = ",".join(sorted(str(v) for v in expr.get("values") or []))
        shown = {
            "In": f"{key} in ({values})",
            "NotIn": f"{key} notin ({values})",
            "Exists": key,
            "DoesNotExist": f"!{key}",
        }.get(str(op))
        if shown is not None:
            found.append((key, shown))
    return ",".join(text for _, text in sorted(found))


def _controlled_by(meta: Mapping[str, Any]) -> list[str]:
    owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
    return [] if owner is None else [f"Controlled By:\t{owner.get('kind')}/{owner.get('name')}"]


def _conditions(status: Mapping[str, Any]) -> list[str]:
    rows = status.get("conditions") or []
    if not rows:
        return []
    return [
        "Conditions:",
        "  Type\tStatus\tReason",
        "  ----\t------\t------",
        *(f"  {c.get('type')} \t{c.get('status')}\t{c.get('reason') or ''}" for c in rows),
    ]


def _pods_line(pods: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> str:
    running, waiting, succeeded, failed = pods_status(pods, uid=str(meta.get("uid") or ""))
    return (
        f"Pods Status:\t{running} Running / {waiting} Waiting / {succeeded} Succeeded / "
        f"{failed} Failed"
    )


def describe_cronjob(
    body: Mapping[str, Any], events: Sequence[PodEvent] = (), *, now: datetime | None = None
) -> str:
    """``kubectl describe cronjob``: schedule and policies, the Job template, the last
    schedule time, the active Jobs, then the CronJob's events."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    job = (spec.get("jobTemplate") or {}).get("spec") or {}
    suspend = spec.get("suspend")
    lines = [
        f"Name:\t{meta.get('name') or ''}",
        f"Namespace:\t{meta.get('namespace') or 'default'}",
        *_labels("Labels", meta.get("labels")),
        *_annotations("Annotations", meta.get("annotations")),
        f"Schedule:\t{spec.get('schedule') or ''}",
        f"Concurrency Policy:\t{spec.get('concurrencyPolicy') or ''}",
        f"Suspend:\t{'<unset>' if suspend is None else str(bool(suspend))}",
        f"Time Zone:\t{_set(spec.get('timeZone'))}",
        f"Successful Job History Limit:\t{_set(spec.get('successfulJobsHistoryLimit'))}",
        f"Failed Job History Limit:\t{_set(spec.get('failedJobsHistoryLimit'))}",
        f"Starting Deadline Seconds:\t{_set(spec.get('startingDeadlineSeconds'), 's')}",
        f"Selector:\t{label_selector(job['selector']) if job.get('selector') else '<unset>'}",
        f"Parallelism:\t{_set(job.get('parallelism'))}",
        f"Completions:\t{_set(job.get('completions'))}",
    ]
    if job.get("activeDeadlineSeconds") is not None:
        lines.append(f"Active Deadline Seconds:\t{job['activeDeadlineSeconds']}s")
    lines += pod_template_lines(job.get("template") or {})
    last = status.get("lastScheduleTime")
    lines.append(f"Last Schedule Time:\t{rfc1123z(last) if last else '<unset>'}")
    active = [str(ref.get("name") or "") for ref in status.get("active") or []]
    lines.append(f"Active Jobs:\t{', '.join(active) or '<none>'}")
    lines += _events(events, now)
    return _page(lines)


def pods_status(pods: Sequence[Mapping[str, Any]], *, uid: str) -> tuple[int, int, int, int]:
    """kubectl's ``getPodStatusForController``: running, waiting (Pending), succeeded and
    failed pods among ``pods`` whose controller is the object ``uid``."""
    counts = {"Running": 0, "Pending": 0, "Succeeded": 0, "Failed": 0}
    for pod in pods:
        owners = (pod.get("metadata") or {}).get("ownerReferences") or []
        if not any(o.get("controller") and o.get("uid") == uid for o in owners):
            continue
        phase = str((pod.get("status") or {}).get("phase") or "")
        if phase in counts:
            counts[phase] += 1
    return counts["Running"], counts["Pending"], counts["Succeeded"], counts["Failed"]


def describe_daemonset(
    body: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]] = (),
    events: Sequence[PodEvent] = (),
    *,
    now: datetime | None = None,
) -> str:
    """``kubectl describe daemonset``: selectors, the scheduling counters, the status of
    the pods it controls (among ``pods``), the pod template, then its events."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    template = spec.get("template") or {}
    node_selector = (template.get("spec") or {}).get("nodeSelector") or {}
    lines = [
        f"Name:\t{meta.get('name') or ''}",
        f"Namespace:\t{meta.get('namespace') or 'default'}",
        f"Selector:\t{label_selector(spec.get('selector'))}",
        "Node-Selector:\t"
        + (",".join(f"{k}={v}" for k, v in sorted(node_selector.items())) or "<none>"),
        *_labels("Labels", meta.get("labels")),
        *_annotations("Annotations", meta.get("annotations")),
        f"Desired Number of Nodes Scheduled: {status.get('desiredNumberScheduled') or 0}",
        f"Current Number of Nodes Scheduled: {status.get('currentNumberScheduled') or 0}",
        "Number of Nodes Scheduled with Up-to-date Pods: "
        f"{status.get('updatedNumberScheduled') or 0}",
        f"Number of Nodes Scheduled with Available Pods: {status.get('numberAvailable') or 0}",
        f"Number of Nodes Misscheduled: {status.get('numberMisscheduled') or 0}",
        _pods_line(pods, meta),
        *pod_template_lines(template),
        *_events(events, now),
    ]
    return _page(lines)


def describe_job(
    body: Mapping[str, Any], events: Sequence[PodEvent] = (), *, now: datetime | None = None
) -> str:
    """``kubectl describe job``: its selector, owner, completion settings, start and
    completion times, its pods' counts (from the Job's status), the pod template, events."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    lines = [
        f"Name:\t{meta.get('name') or ''}",
        f"Namespace:\t{meta.get('namespace') or 'default'}",
        f"Selector:\t{label_selector(spec.get('selector'))}",
        *_labels("Labels", meta.get("labels")),
        *_annotations("Annotations", meta.get("annotations")),
        *_controlled_by(meta),
    ]
    if spec.get("parallelism") is not None:
        lines.append(f"Parallelism:\t{spec['parallelism']}")
    lines.append(f"Completions:\t{_set(spec.get('completions'))}")
    if spec.get("completionMode"):
        lines.append(f"Completion Mode:\t{spec['completionMode']}")
    if spec.get("suspend") is not None:
        lines.append(f"Suspend:\t{str(bool(spec['suspend'])).lower()}")
    for label, key in (
        ("Backoff Limit", "backoffLimit"),
        ("TTL Seconds After Finished", "ttlSecondsAfterFinished"),
    ):
        if spec.get(key) is not None:
            lines.append(f"{label}:\t{spec[key]}")
    started, completed = (
        parse_time(status.get("startTime")),
        parse_time(status.get("completionTime")),
    )
    if started is not None:
        lines.append(f"Start Time:\t{rfc1123z(started)}")
    if completed is not None:
        lines.append(f"Completed At:\t{rfc1123z(completed)}")
    if started is not None and completed is not None:
        lines.append(f"Duration:\t{age(started, now=completed)}")
    if spec.get("activeDeadlineSeconds") is not None:
        lines.append(f"Active Deadline Seconds:\t{spec['activeDeadlineSeconds']}s")
    active = status.get("active") or 0
    ready = "" if status.get("ready") is None else f" ({status['ready']} Ready)"
    lines.append(
        f"Pods Statuses:\t{active} Active{ready} / {status.get('succeeded') or 0} Succeeded / "
        f"{status.get('failed') or 0} Failed"
    )
    if spec.get("completionMode") == "Indexed":
        lines.append(f"Completed Indexes:\t{_indexes(str(status.get('completedIndexes') or ''))}")
    lines += pod_template_lines(spec.get("template") or {})
    lines += _events(events, now)
    return _page(lines)


def _indexes(indexes: str, soft_limit: int = 50) -> str:
    """``capIndexesListOrNone``: the list cut at the first comma past 50 characters."""
    if not indexes:
        return "<none>"
    cut = indexes.find(",", soft_limit)
    return indexes if cut < 0 else indexes[: cut + 1] + "..."


def describe_replicaset(
    body: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]] = (),
    events: Sequence[PodEvent] = (),
    *,
    now: datetime | None = None,
) -> str:
    """``kubectl describe replicaset``: selector, owner, replicas, the status of the pods it
    controls (among ``pods``), the pod template, its conditions and events."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    replicas = spec.get("replicas")
    lines = [
        f"Name:\t{meta.get('name') or ''}",
        f"Namespace:\t{meta.get('namespace') or 'default'}",
        f"Selector:\t{format_label_selector(spec.get('selector'))}",
        *_labels("Labels", meta.get("labels")),
        *_annotations("Annotations", meta.get("annotations")),
        *_controlled_by(meta),
        f"Replicas:\t{status.get('replicas') or 0} current / "
        f"{1 if replicas is None else replicas} desired",
        _pods_line(pods, meta),
        *pod_template_lines(spec.get("template") or {}),
        *_conditions(status),
        *_events(events, now),
    ]
    return _page(lines)


def describe_statefulset(
    body: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]] = (),
    events: Sequence[PodEvent] = (),
    *,
    now: datetime | None = None,
) -> str:
    """``kubectl describe statefulset``: creation time, selector, service, policies,
    replicas, the status of the pods it controls, the pod template, its volume claim
    templates and events."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    replicas = spec.get("replicas")
    lines = [
        f"Name:\t{meta.get('name') or ''}",
        f"Namespace:\t{meta.get('namespace') or 'default'}",
        f"CreationTimestamp:\t{rfc1123z(meta.get('creationTimestamp'))}",
        f"Selector:\t{label_selector(spec.get('selector'))}",
        *_labels("Labels", meta.get("labels")),
        *_annotations("Annotations", meta.get("annotations")),
    ]
    if spec.get("serviceName"):
        lines.append(f"Service Name:\t{spec['serviceName']}")
    if spec.get("podManagementPolicy"):
        lines.append(f"Pod Management Policy:\t{spec['podManagementPolicy']}")
    lines.append(
        f"Replicas:\t{1 if replicas is None else replicas} desired | "
        f"{status.get('replicas') or 0} total"
    )
    strategy = spec.get("updateStrategy") or {}
    lines.append(f"Update Strategy:\t{strategy.get('type') or ''}")
    rolling = strategy.get("rollingUpdate") or {}
    if rolling.get("partition") is not None:
        lines.append(f"  Partition:\t{rolling['partition']}")
        if rolling.get("maxUnavailable") is not None:
            lines.append(f"  MaxUnavailable:\t{rolling['maxUnavailable']}")
    retention = spec.get("persistentVolumeClaimRetentionPolicy")
    if retention is not None:
        lines += [
            "Persistent Volume Claim Retention Policy:",
            f"  WhenDeleted:\t{retention.get('whenDeleted') or ''}",
            f"  WhenScaled:\t{retention.get('whenScaled') or ''}",
        ]
    lines.append(_pods_line(pods, meta))
    lines += pod_template_lines(spec.get("template") or {})
    lines += _claim_templates(spec.get("volumeClaimTemplates") or [])
    lines += _events(events, now)
    return _page(lines)


def _claim_templates(claims: Sequence[Mapping[str, Any]]) -> list[str]:
    """``describeVolumeClaimTemplates``: each claim's name, class, labels, capacity and
    access modes."""
    if not claims:
        return ["Volume Claims:\t<none>"]
    lines = ["Volume Claims:"]
    for claim in claims:
        meta = claim.get("metadata") or {}
        spec = claim.get("spec") or {}
        annotations = meta.get("annotations") or {}
        storage_class = annotations.get(
            "volume.beta.kubernetes.io/storage-class", spec.get("storageClassName") or ""
        )
        capacity = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
        lines += [
            f"  Name:\t{meta.get('name') or ''}",
            f"  StorageClass:\t{storage_class}",
            *_labels("  Labels", meta.get("labels")),
            *_labels("  Annotations", annotations),
            f"  Capacity:\t{capacity if capacity is not None else '<default>'}",
            f"  Access Modes:\t[{' '.join(str(m) for m in spec.get('accessModes') or [])}]",
        ]
    return lines


_HASH_LABEL = "pod-template-hash"


def _pruned(value: Any) -> Any:
    """``value`` without empty maps, lists and nulls, as the API's semantic equality
    treats an empty field and a missing one alike."""
    if isinstance(value, Mapping):
        kept = {k: _pruned(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


def _unhashed(template: Mapping[str, Any]) -> Any:
    meta = dict(template.get("metadata") or {})
    meta["labels"] = {k: v for k, v in (meta.get("labels") or {}).items() if k != _HASH_LABEL}
    return _pruned({**template, "metadata": meta})


def deployment_replicasets(
    deployment: Mapping[str, Any], replicasets: Sequence[Mapping[str, Any]]
) -> tuple[list[Mapping[str, Any]], Mapping[str, Any] | None]:
    """kubectl's old and new ReplicaSets of a Deployment: among those it controls, the new
    one is the oldest whose pod template is the Deployment's (its ``pod-template-hash``
    label aside), every other is old; ordered by creation time, then name."""
    uid = (deployment.get("metadata") or {}).get("uid")
    owned = sorted(
        (
            rs
            for rs in replicasets
            if any(
                o.get("controller") and o.get("uid") == uid
                for o in (rs.get("metadata") or {}).get("ownerReferences") or []
            )
        ),
        key=lambda rs: (
            str((rs.get("metadata") or {}).get("creationTimestamp") or ""),
            str((rs.get("metadata") or {}).get("name") or ""),
        ),
    )
    wanted = _unhashed((deployment.get("spec") or {}).get("template") or {})
    new = next(
        (rs for rs in owned if _unhashed((rs.get("spec") or {}).get("template") or {}) == wanted),
        None,
    )
    return [rs for rs in owned if rs is not new], new


def _replicasets_text(replicasets: Sequence[Mapping[str, Any]]) -> str:
    """``printReplicaSetsByLabels``: ``name (current/desired replicas created)``."""
    shown = []
    for rs in replicasets:
        desired = (rs.get("spec") or {}).get("replicas")
        current = (rs.get("status") or {}).get("replicas") or 0
        name = (rs.get("metadata") or {}).get("name")
        shown.append(f"{name} ({current}/{1 if desired is None else desired} replicas created)")
    return ", ".join(shown) or "<none>"


def describe_deployment(
    body: Mapping[str, Any],
    replicasets: Sequence[Mapping[str, Any]] = (),
    events: Sequence[PodEvent] = (),
    *,
    now: datetime | None = None,
) -> str:
    """``kubectl describe deployment``: replicas, strategy, the pod template, conditions,
    its old and new ReplicaSets (among ``replicasets``), then its events."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    replicas = spec.get("replicas")
    strategy = spec.get("strategy") or {}
    lines = [
        f"Name:\t{meta.get('name') or ''}",
        f"Namespace:\t{meta.get('namespace') or 'default'}",
        f"CreationTimestamp:\t{rfc1123z(meta.get('creationTimestamp'))}",
        *_labels("Labels", meta.get("labels")),
        *_annotations("Annotations", meta.get("annotations")),
        f"Selector:\t{label_selector(spec.get('selector'))}",
        f"Replicas:\t{1 if replicas is None else replicas} desired | "
        f"{status.get('updatedReplicas') or 0} updated | {status.get('replicas') or 0} total | "
        f"{status.get('availableReplicas') or 0} available | "
        f"{status.get('unavailableReplicas') or 0} unavailable",
        f"StrategyType:\t{strategy.get('type') or ''}",
        f"MinReadySeconds:\t{spec.get('minReadySeconds') or 0}",
    ]
    rolling = strategy.get("rollingUpdate")
    if rolling is not None:
        lines.append(
            f"RollingUpdateStrategy:\t{rolling.get('maxUnavailable', 0)} max unavailable, "
            f"{rolling.get('maxSurge', 0)} max surge"
        )
    lines += pod_template_lines(spec.get("template") or {})
    lines += _conditions(status)
    old, new = deployment_replicasets(body, replicasets)
    if old or new is not None:
        lines.append(f"OldReplicaSets:\t{_replicasets_text(old)}")
        lines.append(f"NewReplicaSet:\t{_replicasets_text([new] if new is not None else [])}")
    lines += _events(events, now)
    return _page(lines)


__all__ = [
    "deployment_replicasets",
    "describe_cronjob",
    "describe_daemonset",
    "describe_deployment",
    "describe_job",
    "describe_replicaset",
    "describe_statefulset",
    "label_selector",
    "pod_template_lines",
    "pods_status",
    "tabbed",
]
