"""kubectl's ``printPod``: the STATUS and READY words of ``kubectl get pods``.

People read a pod's state in these words (``Init:0/2``, ``CrashLoopBackOff``,
``Terminating``) from years of kubectl habit, and the node speaks them too: what ``run``
waits for, why ``logs`` or ``exec`` cannot reach a container yet. They are pure functions
of the v1 Pod and its status, so they sit in the node, beside the status they read;
:mod:`asynckubelet.kubectl` prints them in its tables.
"""

from __future__ import annotations

from datetime import UTC, datetime

from lightkube.models.core_v1 import Pod, PodSpec, PodStatus

from asynckubelet.node.container_status import COMPLETED, POD_INITIALIZING, container_state
from asynckubelet.node.status import (
    INITIALIZED,
    POD_SCHEDULED,
    READY,
    RUNNING,
    SCHEDULING_GATED,
    TERMINAL_PHASES,
)
from asynckubelet.runtime import actions


def kubectl_status(pod: Pod, status: PodStatus) -> str:
    """The STATUS column of ``kubectl get pods`` (kubectl's ``printPod``)."""
    return _print_pod(pod, status)[0]


def ready_string(pod: Pod, status: PodStatus) -> str:
    """The READY column of ``kubectl get pods``: ready / total, sidecars counted."""
    _, ready, total = _print_pod(pod, status)
    return f"{ready}/{total}"


def _print_pod(pod: Pod, status: PodStatus) -> tuple[str, int, int]:  # noqa: C901  (mirrors kubectl printPod)
    """kubectl's ``printPod``: the STATUS text, ready containers and total containers."""
    spec = pod_spec(pod)
    reason = status.reason or status.phase or ""
    for cond in status.conditions or []:
        if cond.type == POD_SCHEDULED and cond.reason == SCHEDULING_GATED:
            reason = SCHEDULING_GATED
    inits = {c.name: c for c in spec.initContainers or []}
    total = len(spec.containers) + sum(
        1 for c in inits.values() if actions.is_restartable_init_container(c)
    )
    ready = 0
    initializing = False
    for i, cs in enumerate(status.initContainerStatuses or []):
        state = container_state(cs)
        term = state.terminated
        spec_c = inits.get(cs.name)
        if term is not None and term.exitCode == 0:
            continue
        if spec_c is not None and actions.is_restartable_init_container(spec_c) and cs.started:
            ready += 1 if cs.ready else 0
            continue
        if term is not None:
            if term.reason:
                reason = f"Init:{term.reason}"
            elif term.signal:
                reason = f"Init:Signal:{term.signal}"
            else:
                reason = f"Init:ExitCode:{term.exitCode}"
        elif (
            state.waiting is not None
            and state.waiting.reason
            and state.waiting.reason != POD_INITIALIZING
        ):
            reason = f"Init:{state.waiting.reason}"
        else:
            reason = f"Init:{i}/{len(spec.initContainers or [])}"
        initializing = True
        break
    if not initializing or _condition_true(status, INITIALIZED):
        has_running = False
        for cs in reversed(status.containerStatuses or []):
            state = container_state(cs)
            if state.waiting is not None and state.waiting.reason:
                reason = state.waiting.reason
            elif state.terminated is not None and state.terminated.reason:
                reason = state.terminated.reason
            elif state.terminated is not None:
                if state.terminated.signal:
                    reason = f"Signal:{state.terminated.signal}"
                else:
                    reason = f"ExitCode:{state.terminated.exitCode}"
            elif cs.ready and state.running is not None:
                has_running = True
                ready += 1
        if reason == COMPLETED and has_running:
            reason = RUNNING if _condition_true(status, READY) else "NotReady"
    deleted = pod.metadata is not None and pod.metadata.deletionTimestamp is not None
    if deleted and status.reason == "NodeLost":
        reason = "Unknown"
    elif deleted and status.phase not in TERMINAL_PHASES:
        reason = "Terminating"
    return reason, ready, total


def _condition_true(status: PodStatus, kind: str) -> bool:
    for c in status.conditions or []:
        if c.type == kind:
            return c.status == "True"
    return False


def parse_time(value: datetime | str | None) -> datetime | None:
    """An API timestamp (RFC 3339 text, or a datetime) as an aware datetime; naive is UTC."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def created(pod: Pod) -> datetime | None:
    """When the pod began, for AGE: its creation time, else its start time."""
    meta = pod.metadata
    if meta is not None and meta.creationTimestamp is not None:
        return parse_time(meta.creationTimestamp)
    return parse_time(pod.status.startTime) if pod.status else None


def pod_spec(pod: Pod) -> PodSpec:
    """The pod's spec, or an empty one."""
    return pod.spec or PodSpec(containers=[])


__all__ = ["created", "kubectl_status", "parse_time", "pod_spec", "ready_string"]
