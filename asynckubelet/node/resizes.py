"""In-place pod resize on the node: which resize the node takes on (the kubelet's
allocation manager) and how the pod's status reports it.

A pod's spec may change its containers' CPU and memory (through the ``resize``
subresource). The node admits the new size as the kubelet does (``handlePodResourcesResize``):
a pod that asks for more CPU or memory than the node's allocatable holds at all is
``Infeasible``, one that does not fit beside the other pods is ``Deferred``; either way the
worker keeps the resources it had (the *allocated* ones) and the pod gets the
``PodResizePending`` condition with upstream's message. A resize that fits becomes the
allocated resources, and the runtime's sync carries it out
(:func:`~asynckubelet.runtime.resizing.container_resize`). While the engine's settings of
a running container differ from what is allocated the pod has ``PodResizeInProgress``
(reason ``Error`` and the message when the engine's update call failed), and every
container's status reports what the engine applied (``resources``) and what is allocated
(``allocatedResources``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from lightkube.models.core_v1 import (
    Container,
    ContainerStatus,
    Pod,
    PodCondition,
    PodStatus,
    ResourceRequirements,
)

from asynckubelet.node.admission import NodeInfo, pod_requests
from asynckubelet.runtime import resizing
from asynckubelet.runtime import types as rt
from asynckubelet.runtime.resources import host_config_resources

PENDING = "PodResizePending"
IN_PROGRESS = "PodResizeInProgress"
INFEASIBLE = "Infeasible"
DEFERRED = "Deferred"
ERROR = "Error"
RESIZE_CONDITIONS = (PENDING, IN_PROGRESS)


@dataclass(frozen=True)
class Pending:
    """Why the node has not taken a resize on: ``Infeasible`` or ``Deferred``."""

    reason: str
    message: str


def _containers(pod: Pod) -> list[Container]:
    spec = pod.spec
    if spec is None:
        return []
    return [*spec.containers, *(spec.initContainers or [])]


def is_resize(old: Pod, new: Pod) -> bool:
    """``new`` gives the same containers as ``old`` other resources (or resize policies)."""
    before, after = _containers(old), _containers(new)
    if [c.name for c in before] != [c.name for c in after]:
        return False
    return [c.resources for c in before] != [c.resources for c in after]


def with_resources_of(pod: Pod, allocated: Pod) -> Pod:
    """``pod`` with the resources and resize policies of ``allocated``'s containers."""
    out = copy.deepcopy(pod)
    for ctr, had in zip(_containers(out), _containers(allocated), strict=True):
        ctr.resources = copy.deepcopy(had.resources)
        ctr.resizePolicy = copy.deepcopy(had.resizePolicy)
    return out


def allocated_of(pod: Pod, saved: Pod) -> Pod | None:
    """``pod`` with the resources the node had allocated to its containers when it last
    wrote ``saved``, its status file (the requests from ``allocatedResources``, the limits
    from ``resources``): where a restarted node starts from, as the kubelet starts from its
    checkpoint of allocated resources. None when they are ``pod``'s own or not known."""
    statuses = {
        s.name: s
        for s in [
            *((saved.status.containerStatuses or []) if saved.status else []),
            *((saved.status.initContainerStatuses or []) if saved.status else []),
        ]
    }
    out = copy.deepcopy(pod)
    for ctr in _containers(out):
        status = statuses.get(ctr.name)
        if status is None or status.resources is None or status.allocatedResources is None:
            continue
        ctr.resources = ResourceRequirements(
            requests=dict(status.allocatedResources) or None,
            limits=dict(status.resources.limits or {}) or None,
        )
    return out if is_resize(pod, out) else None


def check(pod: Pod, *, node: NodeInfo, others: Iterable[Pod]) -> Pending | None:
    """None when the node takes the resized ``pod`` on beside ``others``, else why not, in
    the kubelet's words."""
    wanted = pod_requests(pod)
    cpu, memory = wanted.get("cpu", 0), wanted.get("memory", 0)
    allocatable = node.allocatable
    if cpu > allocatable.cpu_millis or memory > allocatable.memory:
        if memory > allocatable.memory:
            detail = f"memory, requested: {memory}, capacity: {allocatable.memory}"
        else:
            detail = f"cpu, requested: {cpu}, capacity: {allocatable.cpu_millis}"
        return Pending(INFEASIBLE, "Node didn't have enough capacity: " + detail)
    used: dict[str, int] = {}
    for other in others:
        for name, value in pod_requests(other).items():
            used[name] = used.get(name, 0) + value
    for name, request in (("cpu", cpu), ("memory", memory)):
        capacity = allocatable.amount(name)
        if request > 0 and request > capacity - used.get(name, 0):
            message = (
                f"Node didn't have enough resource: {name}, requested: {request}, "
                f"used: {used.get(name, 0)}, capacity: {capacity}"
            )
            return Pending(DEFERRED, message)
    return None


class ResizedWorker(Protocol):
    """What :meth:`Allocations.take` sets on a pod worker."""

    pod: Pod
    resize_pending: Pending | None
    desired: Pod | None


@dataclass
class Allocations:
    """The resizes the node has not taken on yet, by pod UID."""

    pending: dict[str, Pending] = field(default_factory=dict)

    def allocate(
        self, uid: str, running: Pod, wanted: Pod, *, node: NodeInfo, others: Iterable[Pod]
    ) -> Pod:
        """The pod the worker is to run: ``wanted``, or ``wanted`` with ``running``'s
        resources while its resize is pending."""
        if not is_resize(running, wanted):
            self.pending.pop(uid, None)
            return wanted
        pending = check(wanted, node=node, others=others)
        if pending is None:
            self.pending.pop(uid, None)
            return wanted
        self.pending[uid] = pending
        return with_resources_of(wanted, running)

    def take(
        self, uid: str, worker: ResizedWorker, wanted: Pod, *, node: NodeInfo, others: Iterable[Pod]
    ) -> Pod:
        """:meth:`allocate` for the pod ``worker`` runs, telling the worker what is
        pending."""
        pod = self.allocate(uid, worker.pod, wanted, node=node, others=others)
        worker.resize_pending = self.pending.get(uid)
        worker.desired = wanted if worker.resize_pending is not None else None
        return pod

    def forget(self, uid: str) -> None:
        self.pending.pop(uid, None)

    def deferred(self) -> list[str]:
        """The pods whose resize is ``Deferred``, in the order they were first pending."""
        return [uid for uid, pending in self.pending.items() if pending.reason == DEFERRED]


# -- status ----------------------------------------------------------------------------------


def _quantity_millis(millis: int) -> str:
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def _quantity_bytes(value: int) -> str:
    """Bytes as a binary-SI quantity (``96Mi``), as the kubelet reports them."""
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = 1024 ** ("KMGTPE".index(suffix[0]) + 1)
        if value and value % unit == 0:
            return f"{value // unit}{suffix}"
    return str(value)


def applied_resources(
    allocated: ResourceRequirements | None, actual: rt.ContainerResources | None
) -> ResourceRequirements | None:
    """``status.containerStatuses[].resources``: the allocated requests and limits, with the
    CPU and memory the engine applies where they differ (``convertContainerStatusResources``)."""
    if allocated is None or not (allocated.requests or allocated.limits):
        return None
    requests = dict(allocated.requests or {})
    limits = dict(allocated.limits or {})
    if actual is not None:
        wanted = host_config_resources(Container(name="-", resources=allocated))
        if "cpu" in limits and actual.cpu_quota and actual.cpu_quota != wanted.get("CpuQuota"):
            period = actual.cpu_period or 100_000
            limits["cpu"] = _quantity_millis(actual.cpu_quota * 1000 // period)
        if "memory" in limits and actual.memory and actual.memory != wanted.get("Memory"):
            limits["memory"] = _quantity_bytes(actual.memory)
        if "cpu" in requests and actual.cpu_shares != wanted.get("CpuShares"):
            requests["cpu"] = _quantity_millis(-(-actual.cpu_shares * 1000 // 1024))
    return ResourceRequirements(requests=requests or None, limits=limits or None)


def _condition(
    kind: str, reason: str, message: str, *, old: Sequence[PodCondition], now: datetime
) -> PodCondition:
    before = next((c for c in old if c.type == kind), None)
    since = now
    if before is not None and (before.reason or "", before.message or "") == (reason, message):
        since = before.lastTransitionTime or now
    return PodCondition(
        type=kind,
        status="True",
        reason=reason or None,
        message=message or None,
        lastTransitionTime=since,
        lastProbeTime=now,
    )


def in_progress(pod: Pod, runtime: rt.PodRuntimeStatus) -> bool:
    """A running container's engine settings differ from its allocated resources."""
    for ctr in _containers(pod):
        instance = runtime.find_container(ctr.name)
        if instance is None or instance.state is not rt.ContainerState.RUNNING:
            continue
        if resizing.container_resize(ctr, instance).resized:
            return True
    return False


def apply(
    status: PodStatus,
    pod: Pod,
    runtime: rt.PodRuntimeStatus,
    *,
    pending: Pending | None,
    error: str,
    previous: PodStatus | None,
    now: datetime,
) -> None:
    """The resize parts of the pod's ``status``, in place: the allocated and applied
    resources of every container, and the resize conditions."""
    allocated = {c.name: c for c in _containers(pod)}
    statuses: list[ContainerStatus] = [
        *(status.containerStatuses or []),
        *(status.initContainerStatuses or []),
    ]
    for cs in statuses:
        ctr = allocated.get(cs.name)
        if ctr is None or ctr.resources is None:
            continue
        if ctr.resources.requests:
            cs.allocatedResources = dict(ctr.resources.requests)
        instance = runtime.find_container(cs.name)
        actual = instance.resources if instance is not None else None
        cs.resources = applied_resources(ctr.resources, actual)
    old = list((previous or pod.status or PodStatus()).conditions or [])
    conditions = [c for c in status.conditions or [] if c.type not in RESIZE_CONDITIONS]
    added = []
    if pending is not None:
        added.append(_condition(PENDING, pending.reason, pending.message, old=old, now=now))
    if in_progress(pod, runtime):
        reason, message = (ERROR, error) if error else ("", "")
        added.append(_condition(IN_PROGRESS, reason, message, old=old, now=now))
    status.conditions = [*added, *conditions]


__all__ = [
    "DEFERRED",
    "ERROR",
    "INFEASIBLE",
    "IN_PROGRESS",
    "PENDING",
    "Allocations",
    "Pending",
    "applied_resources",
    "apply",
    "check",
    "in_progress",
    "is_resize",
    "with_resources_of",
]
