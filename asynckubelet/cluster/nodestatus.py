"""The Node object and its status, as the kubelet makes them: pure functions of data.

A node registers a ``Node`` (``kubernetes.io/hostname``, ``kubernetes.io/os`` and
``kubernetes.io/arch`` labels with their ``beta.`` twins, the ``--node-labels``, the
``--register-with-taints``) and then reports its status: addresses, capacity and
allocatable, ``nodeInfo``, ``daemonEndpoints.kubeletEndpoint.port`` and four conditions,
in the kubelet's order and words (``pkg/kubelet/nodestatus/setters.go``):

* ``MemoryPressure``: ``memory.available`` under the eviction threshold (100Mi);
* ``DiskPressure``: ``nodefs.available`` under 10 %, ``nodefs.inodesFree`` under 5 % or
  ``imagefs.available`` under 15 % (the kubelet's hard eviction defaults);
* ``PIDPressure``: fewer than 5 % of ``pid_max`` left (the kubelet has no default
  threshold for PIDs; this node has one so that the condition says something);
* ``Ready``: the container runtime answers and the pod network is ready (a pod CIDR is
  known), else ``KubeletNotReady`` with what is wrong.

A condition keeps its ``lastTransitionTime`` while its status stays, and each report
stamps ``lastHeartbeatTime``. Since the Lease carries the heartbeat, the status is sent
only when it changed (heartbeat times aside), or when the last report is older than the
report frequency (5 minutes), as the kubelet's ``nodeStatusReportFrequency``: the
comparison is with the Node as the API server last showed it, so a condition the node
lifecycle controller set to ``Unknown`` while this node was away is put right at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lightkube.models.core_v1 import (
    Node,
    NodeCondition,
    NodeSpec,
    NodeStatus,
)
from lightkube.models.core_v1 import Taint as V1Taint
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet.node.admission import Taint

HOSTNAME_LABEL = "kubernetes.io/hostname"
OS_LABEL = "kubernetes.io/os"
ARCH_LABEL = "kubernetes.io/arch"
BETA_OS_LABEL = "beta.kubernetes.io/os"
BETA_ARCH_LABEL = "beta.kubernetes.io/arch"

MEMORY_PRESSURE = "MemoryPressure"
DISK_PRESSURE = "DiskPressure"
PID_PRESSURE = "PIDPressure"
READY = "Ready"

REPORT_FREQUENCY = 300.0
"""Seconds: the status is sent at least this often (``nodeStatusReportFrequency``)."""
UPDATE_FREQUENCY = 10.0
"""Seconds between status computations (``nodeStatusUpdateFrequency``)."""

_ALLOWED_LABEL_PREFIXES = ("kubelet.kubernetes.io/", "node.kubernetes.io/")
_ALLOWED_LABELS = frozenset(
    {
        HOSTNAME_LABEL,
        OS_LABEL,
        ARCH_LABEL,
        BETA_OS_LABEL,
        BETA_ARCH_LABEL,
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "failure-domain.beta.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "topology.kubernetes.io/zone",
    }
)


@dataclass(frozen=True)
class Thresholds:
    """Below these the node reports pressure (the kubelet's ``evictionHard`` defaults)."""

    memory_available: int = 100 * 1024 * 1024
    nodefs_available: float = 0.10
    nodefs_inodes_free: float = 0.05
    imagefs_available: float = 0.15
    pid_available: float = 0.05


@dataclass(frozen=True)
class HostSample:
    """What the host has left now; None where it cannot be read."""

    memory_available: int | None = None
    nodefs_available: int | None = None
    nodefs_capacity: int | None = None
    nodefs_inodes_free: int | None = None
    nodefs_inodes: int | None = None
    imagefs_available: int | None = None
    imagefs_capacity: int | None = None
    pids_max: int | None = None
    pids_running: int | None = None


@dataclass(frozen=True)
class Readiness:
    """Why the node cannot run pods: empty strings when it can."""

    runtime: str = ""
    """The container runtime's problem (``container runtime is down: ...``)."""
    network: str = ""
    """The pod network's problem (no pod CIDR yet, the plugin failed)."""


@dataclass(frozen=True)
class NodeFacts:
    """What the node says about itself, fixed for a run."""

    name: str
    addresses: tuple[tuple[str, str], ...]
    """``(type, address)``: ``InternalIP`` first, then ``Hostname``."""
    capacity: Mapping[str, str]
    allocatable: Mapping[str, str]
    info: Mapping[str, str] = field(default_factory=dict)
    """``nodeInfo`` fields (``kernelVersion``, ``containerRuntimeVersion``...)."""
    kubelet_port: int = 10250


def unknown_node_labels(labels: Mapping[str, str]) -> list[str]:
    """``--node-labels`` keys in the ``kubernetes.io``/``k8s.io`` namespaces a kubelet
    may not set on its own Node (the kubelet refuses to start with them)."""
    bad = []
    for key in labels:
        prefix = key.split("/", 1)[0] if "/" in key else ""
        restricted = prefix in ("kubernetes.io", "k8s.io") or prefix.endswith(
            (".kubernetes.io", ".k8s.io")
        )
        if not restricted:
            continue
        if key in _ALLOWED_LABELS or key.startswith(_ALLOWED_LABEL_PREFIXES):
            continue
        bad.append(key)
    return sorted(bad)


def default_labels(name: str, *, arch: str, os_name: str = "linux") -> dict[str, str]:
    return {
        BETA_ARCH_LABEL: arch,
        BETA_OS_LABEL: os_name,
        ARCH_LABEL: arch,
        HOSTNAME_LABEL: name,
        OS_LABEL: os_name,
    }


def registration(
    facts: NodeFacts,
    *,
    labels: Mapping[str, str],
    taints: Sequence[Taint] = (),
    arch: str,
) -> Node:
    """The Node a new node creates (status comes with the first report)."""
    all_labels = {**labels, **default_labels(facts.name, arch=arch)}
    spec = NodeSpec(
        taints=[V1Taint(key=t.key, value=t.value or None, effect=t.effect) for t in taints] or None
    )
    return Node(
        apiVersion="v1",
        kind="Node",
        metadata=ObjectMeta(name=facts.name, labels=all_labels),
        spec=spec,
    )


def label_patch(node: Node, *, labels: Mapping[str, str], arch: str) -> dict[str, Any] | None:
    """The merge patch that gives an adopted Node the default and configured labels;
    None when it has them."""
    wanted = {**labels, **default_labels(node.metadata.name or "", arch=arch)}  # type: ignore[union-attr]
    have = (node.metadata.labels if node.metadata else None) or {}
    missing = {k: v for k, v in wanted.items() if have.get(k) != v}
    return {"metadata": {"labels": missing}} if missing else None


def pressures(sample: HostSample, thresholds: Thresholds) -> tuple[bool, bool, bool]:
    """(memory, disk, PID) pressure."""
    memory = (
        sample.memory_available is not None
        and sample.memory_available < thresholds.memory_available
    )
    disk = (
        _below(sample.nodefs_available, sample.nodefs_capacity, thresholds.nodefs_available)
        or _below(sample.nodefs_inodes_free, sample.nodefs_inodes, thresholds.nodefs_inodes_free)
        or _below(sample.imagefs_available, sample.imagefs_capacity, thresholds.imagefs_available)
    )
    pid = (
        sample.pids_max is not None
        and sample.pids_running is not None
        and sample.pids_max - sample.pids_running < sample.pids_max * thresholds.pid_available
    )
    return memory, disk, pid


def _below(available: int | None, total: int | None, fraction: float) -> bool:
    if available is None or not total:
        return False
    return available < total * fraction


_PRESSURE_WORDS = {
    MEMORY_PRESSURE: (
        ("KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
        ("KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ),
    DISK_PRESSURE: (
        ("KubeletHasDiskPressure", "kubelet has disk pressure"),
        ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ),
    PID_PRESSURE: (
        ("KubeletHasInsufficientPID", "kubelet has insufficient PID available"),
        ("KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ),
}
READY_REASON = "KubeletReady"
READY_MESSAGE = "kubelet is posting ready status"
NOT_READY_REASON = "KubeletNotReady"


def node_conditions(
    *,
    sample: HostSample,
    readiness: Readiness,
    previous: Sequence[NodeCondition],
    now: datetime,
    thresholds: Thresholds | None = None,
) -> list[NodeCondition]:
    """The four conditions, transition times kept from ``previous`` while unchanged."""
    memory, disk, pid = pressures(sample, thresholds or Thresholds())
    wanted: list[tuple[str, str, str, str]] = []
    for kind, pressed in ((MEMORY_PRESSURE, memory), (DISK_PRESSURE, disk), (PID_PRESSURE, pid)):
        reason, message = _PRESSURE_WORDS[kind][0 if pressed else 1]
        wanted.append((kind, "True" if pressed else "False", reason, message))
    problems = [p for p in (readiness.runtime, readiness.network) if p]
    if problems:
        wanted.append((READY, "False", NOT_READY_REASON, ", ".join(problems)))
    else:
        wanted.append((READY, "True", READY_REASON, READY_MESSAGE))
    old = {c.type: c for c in previous}
    conditions = []
    for kind, status, reason, message in wanted:
        before = old.get(kind)
        transition = (
            before.lastTransitionTime
            if before is not None and before.status == status and before.lastTransitionTime
            else now
        )
        conditions.append(
            NodeCondition(
                type=kind,
                status=status,
                reason=reason,
                message=message,
                lastHeartbeatTime=now,
                lastTransitionTime=transition,
            )
        )
    return conditions


def status_fields(facts: NodeFacts, conditions: Sequence[NodeCondition]) -> dict[str, Any]:
    """The ``status`` this node owns, as the API's JSON (a merge patch's ``status``)."""
    status = NodeStatus(
        conditions=list(conditions),
        capacity=dict(facts.capacity),
        allocatable=dict(facts.allocatable),
    )
    body: dict[str, Any] = status.to_dict()
    body["addresses"] = [{"type": t, "address": a} for t, a in facts.addresses]
    body["daemonEndpoints"] = {"kubeletEndpoint": {"Port": facts.kubelet_port}}
    body["nodeInfo"] = dict(facts.info)
    return body


def _conditions_by_type(conditions: Any) -> dict[str, tuple[Any, Any, Any]]:
    return {
        c.get("type"): (c.get("status"), c.get("reason"), c.get("message"))
        for c in conditions or []
    }


def status_changed(current: NodeStatus | None, fields: Mapping[str, Any]) -> bool:
    """Whether ``fields`` say something the API server's status does not (times aside:
    a transition time only moves with its condition's status)."""
    if current is None:
        return True
    have = current.to_dict()
    for key, value in fields.items():
        present = have.get(key)
        if key == "conditions":
            old = _conditions_by_type(present)
            new = _conditions_by_type(value)
            if any(old.get(kind) != words for kind, words in new.items()):
                return True
        elif key in ("capacity", "allocatable", "nodeInfo"):
            if any(str((present or {}).get(k, "")) != str(v) for k, v in value.items()):
                return True
        elif present != value:
            return True
    return False


def needs_report(
    *,
    current: NodeStatus | None,
    fields: Mapping[str, Any],
    last_report: float | None,
    now: float,
    report_frequency: float = REPORT_FREQUENCY,
) -> bool:
    """Send the status now: it changed, or none was sent for ``report_frequency`` s."""
    if last_report is None or now - last_report >= report_frequency:
        return True
    return status_changed(current, fields)


def pod_cidr(node: Node | None) -> str | None:
    """``spec.podCIDR`` (the first of ``podCIDRs``), or None when none is assigned."""
    if node is None or node.spec is None:
        return None
    if node.spec.podCIDR:
        return node.spec.podCIDR
    return next(iter(node.spec.podCIDRs or []), None)


__all__ = [
    "DISK_PRESSURE",
    "MEMORY_PRESSURE",
    "PID_PRESSURE",
    "READY",
    "REPORT_FREQUENCY",
    "UPDATE_FREQUENCY",
    "HostSample",
    "NodeFacts",
    "Readiness",
    "Thresholds",
    "default_labels",
    "label_patch",
    "needs_report",
    "node_conditions",
    "pod_cidr",
    "pressures",
    "registration",
    "status_changed",
    "status_fields",
    "unknown_node_labels",
]
