"""The API statuses of a pod's containers, from the runtime's records: the kubelet's
``convertToAPIContainerStatuses`` (``pkg/kubelet/kubelet_pods.go``) and the prober
manager's ``UpdatePodStatus`` (``started`` and ``ready``).

Each container's newest instance gives its state and the one before its last state; a
container not created yet waits (``ContainerCreating``, or ``PodInitializing`` behind init
containers) or for the reason its last start failed; one that was running and is gone
ended unknown. Pure functions of data, as :mod:`asynckubelet.node.status` is.

``stopSignal`` is the effective one, as a CRI runtime reports it (KEP-4960): the spec's,
else the image's ``STOPSIGNAL``, else SIGTERM, in upstream's spelling (an image may say
``QUIT`` or ``3``; the status says ``SIGQUIT``).
"""

from __future__ import annotations

import copy
import signal
from collections.abc import Mapping

from lightkube.models.core_v1 import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    Pod,
    PodSpec,
    PodStatus,
)
from lightkube.models.core_v1 import ContainerStatus as V1ContainerStatus

from asynckubelet.runtime import actions
from asynckubelet.runtime import types as rt

CONTAINER_CREATING = "ContainerCreating"
POD_INITIALIZING = "PodInitializing"
CONTAINER_STATUS_UNKNOWN = "ContainerStatusUnknown"
COMPLETED = "Completed"
ERROR = "Error"
RESTARTING_ALL_CONTAINERS = "RestartingAllContainers"
RESTARTING_ALL_CONTAINERS_MESSAGE = "The container is removed because RestartAllContainers in place"


def container_state(status: V1ContainerStatus | None) -> ContainerState:
    """The status's state; an empty one when there is none."""
    if status is None or status.state is None:
        return ContainerState()
    return status.state


def convert_container_statuses(
    pod: Pod,
    runtime: rt.PodRuntimeStatus,
    *,
    previous: list[V1ContainerStatus],
    containers: list[Container],
    has_init: bool,
    is_init: bool,
    waiting_reasons: Mapping[str, tuple[str, str]],
    restarting: bool = False,
) -> list[V1ContainerStatus]:
    """The kubelet's ``convertToAPIContainerStatuses`` for one list of containers;
    ``restarting`` says the pod is restarting in place."""
    old = {s.name: s for s in previous}
    default_reason = POD_INITIALIZING if has_init else CONTAINER_CREATING
    statuses = _default_statuses(containers, old, default_reason)
    present = {cs.name for cs in runtime.containers}
    for c in containers:
        if c.name not in present:
            before = old.get(c.name)
            if (
                restarting
                and before is not None
                and (before.state is None or before.state.waiting is None)
            ):
                _mark_restarting(statuses[c.name], before)
            else:
                _mark_lost(pod, statuses[c.name], before, default_reason)
    _apply_runtime(runtime, statuses, old, restarting=restarting)
    for c in containers:
        if is_init:
            found = runtime.find_container(c.name)
            if (
                found is not None
                and found.state is rt.ContainerState.EXITED
                and found.exit_code == 0
            ):
                continue
        if not actions.should_container_be_restarted(c, pod=pod, status=runtime):
            continue
        cached = waiting_reasons.get(c.name)
        if cached is None:
            continue
        status = statuses[c.name]
        if status.state is not None and status.state.terminated is not None:
            status.lastState = status.state
        status.state = ContainerState(
            waiting=ContainerStateWaiting(reason=cached[0], message=cached[1] or None)
        )
    if is_init:
        return [statuses[c.name] for c in containers]
    return [statuses[name] for name in sorted(statuses)]


def _default_statuses(
    containers: list[Container], old: Mapping[str, V1ContainerStatus], default_reason: str
) -> dict[str, V1ContainerStatus]:
    """Each container waiting for ``default_reason``, keeping its restart count and last
    state, or its whole old status once it had terminated."""
    statuses: dict[str, V1ContainerStatus] = {}
    for c in containers:
        status = V1ContainerStatus(
            name=c.name,
            image=c.image or "",
            imageID="",
            ready=False,
            restartCount=0,
            state=ContainerState(waiting=ContainerStateWaiting(reason=default_reason)),
        )
        before = old.get(c.name)
        if before is not None:
            if before.state is not None and before.state.terminated is not None:
                status = copy.deepcopy(before)
            else:
                status.restartCount = before.restartCount
                status.lastState = copy.deepcopy(before.lastState)
        statuses[c.name] = status
    return statuses


def _mark_restarting(status: V1ContainerStatus, before: V1ContainerStatus) -> None:
    """A container removed by a restart in place waits to run again, one restart more."""
    status.state = ContainerState(
        waiting=ContainerStateWaiting(
            reason=RESTARTING_ALL_CONTAINERS, message=RESTARTING_ALL_CONTAINERS_MESSAGE
        )
    )
    status.lastState = ContainerState(
        terminated=ContainerStateTerminated(
            exitCode=137,
            reason=RESTARTING_ALL_CONTAINERS,
            message=RESTARTING_ALL_CONTAINERS_MESSAGE,
        )
    )
    status.restartCount = before.restartCount + 1


def _mark_lost(
    pod: Pod, status: V1ContainerStatus, before: V1ContainerStatus | None, default_reason: str
) -> None:
    """A container that was running and is gone from the runtime ended unknown (137)."""
    if before is None or before.state is None:
        return
    if before.state.terminated is not None or before.state.running is None:
        return
    waiting = status.state.waiting if status.state is not None else None
    if waiting is None or waiting.reason != default_reason:
        return
    if status.lastState is not None and status.lastState.terminated is not None:
        return
    status.lastState = ContainerState(
        terminated=ContainerStateTerminated(
            exitCode=137,
            reason=CONTAINER_STATUS_UNKNOWN,
            message=(
                "The container could not be located when the pod was deleted."
                "  The container used to be Running"
            ),
        )
    )
    if pod.metadata is None or pod.metadata.deletionTimestamp is None:
        status.restartCount += 1


def _apply_runtime(
    runtime: rt.PodRuntimeStatus,
    statuses: dict[str, V1ContainerStatus],
    old: Mapping[str, V1ContainerStatus],
    *,
    restarting: bool = False,
) -> None:
    """The newest instance of each container is its state, the one before its last state."""
    seen: dict[str, int] = {}
    newest_first = sorted(runtime.containers, key=lambda cs: cs.created_at, reverse=True)
    for cs in newest_first:
        if cs.name not in statuses or seen.get(cs.name, 0) >= 2:
            continue
        converted = _convert_one(cs, old.get(cs.name), restarting=restarting)
        if seen.get(cs.name, 0) == 0:
            statuses[cs.name] = converted
        else:
            statuses[cs.name].lastState = converted.state
        seen[cs.name] = seen.get(cs.name, 0) + 1


def _convert_one(
    cs: rt.ContainerStatus, before: V1ContainerStatus | None, *, restarting: bool = False
) -> V1ContainerStatus:
    status = V1ContainerStatus(
        name=cs.name,
        image=cs.image,
        imageID=cs.image_id,
        ready=False,
        restartCount=cs.restart_count,
        containerID=cs.container_id,
        stopSignal=stop_signal_name(cs.stop_signal),
    )
    if before is not None and before.restartCount > status.restartCount:
        status.restartCount = before.restartCount
    if cs.state is rt.ContainerState.RUNNING:
        status.state = ContainerState(running=ContainerStateRunning(startedAt=cs.started_at))
    elif cs.state is rt.ContainerState.CREATED:
        status.state = ContainerState(waiting=ContainerStateWaiting())
    elif cs.state is rt.ContainerState.EXITED:
        status.state = ContainerState(
            terminated=ContainerStateTerminated(
                exitCode=cs.exit_code,
                reason=cs.reason or (COMPLETED if cs.exit_code == 0 else ERROR),
                message=cs.message or None,
                startedAt=cs.started_at,
                finishedAt=cs.finished_at,
                containerID=cs.container_id,
            )
        )
    elif before is not None and before.state is not None and before.state.running is not None:
        status.state = ContainerState(
            terminated=ContainerStateTerminated(
                exitCode=137,
                reason=RESTARTING_ALL_CONTAINERS if restarting else CONTAINER_STATUS_UNKNOWN,
                message="The container could not be located when the pod was terminated",
            )
        )
        status.restartCount = before.restartCount + 1
    else:
        status.state = ContainerState(waiting=ContainerStateWaiting())
    return status


def stop_signal_name(value: str) -> str:
    """An engine's stop signal (``SIGQUIT``, ``QUIT``, ``3``, '') as upstream names it."""
    text = value.strip().upper()
    if not text:
        return "SIGTERM"
    if not text.isdigit():
        return text if text.startswith("SIG") else f"SIG{text}"
    number = int(text)
    low, high = int(signal.SIGRTMIN), int(signal.SIGRTMAX)
    if low < number <= low + 15:
        return f"SIGRTMIN+{number - low}"
    if high - 14 <= number < high:
        return f"SIGRTMAX-{high - number}"
    try:
        return signal.Signals(number).name
    except ValueError:
        return text


def set_probe_fields(
    spec: PodSpec,
    status: PodStatus,
    *,
    readiness: Mapping[str, bool],
    started: Mapping[str, bool],
) -> None:
    """The prober manager's ``UpdatePodStatus``: ``started`` and ``ready`` per container."""
    regular = {c.name: c for c in spec.containers}
    inits = {c.name: c for c in spec.initContainers or []}
    for cs in status.containerStatuses or []:
        c = regular[cs.name]
        cs.started = _is_started(c, cs, started)
        cs.ready = cs.started and _is_ready(c, cs, readiness)
    for cs in status.initContainerStatuses or []:
        c = inits[cs.name]
        cs.started = _is_started(c, cs, started)
        if not actions.is_restartable_init_container(c):
            term = container_state(cs).terminated
            cs.ready = term is not None and term.exitCode == 0
        else:
            cs.ready = cs.started and _is_ready(c, cs, readiness)


def _is_started(c: Container, cs: V1ContainerStatus, started: Mapping[str, bool]) -> bool:
    if container_state(cs).running is None:
        return False
    if c.name in started:
        return started[c.name]
    return c.startupProbe is None


def _is_ready(c: Container, cs: V1ContainerStatus, readiness: Mapping[str, bool]) -> bool:
    if container_state(cs).running is None:
        return False
    if readiness.get(c.name):
        return True
    return c.readinessProbe is None


__all__ = [
    "COMPLETED",
    "CONTAINER_CREATING",
    "CONTAINER_STATUS_UNKNOWN",
    "ERROR",
    "POD_INITIALIZING",
    "RESTARTING_ALL_CONTAINERS",
    "RESTARTING_ALL_CONTAINERS_MESSAGE",
    "container_state",
    "convert_container_statuses",
    "set_probe_fields",
]
