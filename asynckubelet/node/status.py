"""The Kubernetes PodStatus of a pod, generated from what Docker holds: a pure function.

Users read a pod through its status (``kubectl get`` and ``describe``, controllers, the
CLI here), so it must say what the kubelet would say, word for word: the same phase, the
same five conditions with the same reasons and messages, the same container states and
waiting reasons. Keeping it a pure function of data (the pod, the runtime's records, the
prober's verdicts, the reasons the last sync failed, the previous status and the time)
makes each of those rules a table test, and lets the agent regenerate status at any time.

The logic follows the kubelet's ``generateAPIPodStatus`` and ``getPhase``
(``pkg/kubelet/kubelet_pods.go``; the containers' statuses are converted in
:mod:`asynckubelet.node.container_status`), the condition generators in
``pkg/kubelet/status/generate.go``, the status manager's start time and transition times,
and ``GetPodQOS`` (``pkg/apis/core/v1/helper/qos``). kubectl's STATUS and READY columns
of these statuses are :mod:`asynckubelet.node.printpod`'s.

Per-container restart rules count in the phase as the kubelet counts them: a stopped
container that its rules or policies will start again keeps the pod Running. A pod that
can restart in place (a ``RestartAllContainers`` rule) also carries the kubelet's
``AllContainersRestarting`` condition, and while it restarts its removed containers read
``RestartingAllContainers``. A pod refused at admission gets :func:`rejected_status`.
"""

from __future__ import annotations

import copy
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from lightkube.models.core_v1 import (
    Container,
    ContainerStateTerminated,
    HostIP,
    Pod,
    PodCondition,
    PodIP,
    PodSpec,
    PodStatus,
)
from lightkube.models.core_v1 import ContainerStatus as V1ContainerStatus

from asynckubelet.node.container_status import (
    RESTARTING_ALL_CONTAINERS,
    container_state,
    convert_container_statuses,
    set_probe_fields,
)
from asynckubelet.runtime import actions
from asynckubelet.runtime import types as rt
from asynckubelet.runtime.qos import qos_class

PENDING = "Pending"
RUNNING = "Running"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
TERMINAL_PHASES = frozenset({SUCCEEDED, FAILED})

POD_READY_TO_START_CONTAINERS = "PodReadyToStartContainers"
INITIALIZED = "Initialized"
READY = "Ready"
CONTAINERS_READY = "ContainersReady"
POD_SCHEDULED = "PodScheduled"
ALL_CONTAINERS_RESTARTING = actions.ALL_CONTAINERS_RESTARTING
KUBELET_CONDITIONS = frozenset(
    {
        POD_READY_TO_START_CONTAINERS,
        INITIALIZED,
        READY,
        CONTAINERS_READY,
        POD_SCHEDULED,
        ALL_CONTAINERS_RESTARTING,
        "PodResizePending",
        "PodResizeInProgress",
    }
)


UNKNOWN_CONTAINER_STATUSES = "UnknownContainerStatuses"
POD_COMPLETED = "PodCompleted"
POD_FAILED = "PodFailed"
CONTAINERS_NOT_READY = "ContainersNotReady"
CONTAINERS_NOT_INITIALIZED = "ContainersNotInitialized"
READINESS_GATES_NOT_READY = "ReadinessGatesNotReady"
RESTART_ALL_CONTAINERS_STARTED = "RestartAllContainersStarted"
RESTART_ALL_CONTAINERS_STARTED_MESSAGE = "container exited with restart policy rule"
REJECTED_MESSAGE_PREFIX = "Pod was rejected: "


_NO_REASONS: Mapping[str, tuple[str, str]] = {}
_NO_VERDICTS: Mapping[str, bool] = {}


def generate(
    pod: Pod,
    runtime: rt.PodRuntimeStatus,
    *,
    now: datetime,
    waiting_reasons: Mapping[str, tuple[str, str]] = _NO_REASONS,
    readiness: Mapping[str, bool] = _NO_VERDICTS,
    started: Mapping[str, bool] = _NO_VERDICTS,
    host_ip: str = "",
    host_ips: Sequence[str] = (),
    previous: PodStatus | None = None,
    pod_is_terminal: bool = False,
) -> PodStatus:
    """The pod's API status, as the kubelet would report it now.

    ``waiting_reasons`` maps a container name to the ``(reason, message)`` its last start
    failed with (``CrashLoopBackOff``, ``ErrImagePull``...: the kubelet's reason cache).
    ``readiness`` and ``started`` map a container name to the readiness and startup probe
    verdicts of its current instance; a container with such a probe and no verdict is not
    ready / not started. ``previous`` is the last status generated (the status manager's
    copy), else ``pod.status`` serves. ``pod_is_terminal`` says the pod worker has decided
    the pod is finished, so stopped containers make the phase terminal.
    """
    spec = _spec(pod)
    api = pod.status or PodStatus()
    old = previous if previous is not None else api
    inits = list(spec.initContainers or [])
    has_init = bool(inits)
    restarting = actions.should_all_containers_restart(pod, runtime, old)

    status = PodStatus(qosClass=qos_class(pod))
    pod_ips = _sort_pod_ips(_runtime_ips(runtime))
    if pod_ips:
        status.podIPs = [PodIP(ip=ip) for ip in pod_ips]
        status.podIP = pod_ips[0]
    status.containerStatuses = convert_container_statuses(
        pod,
        runtime,
        previous=list(old.containerStatuses or []),
        containers=list(spec.containers),
        has_init=has_init,
        is_init=False,
        waiting_reasons=waiting_reasons,
        restarting=restarting,
    )
    status.initContainerStatuses = convert_container_statuses(
        pod,
        runtime,
        previous=list(old.initContainerStatuses or []),
        containers=inits,
        has_init=has_init,
        is_init=True,
        waiting_reasons=waiting_reasons,
        restarting=restarting,
    )

    ephemeral = actions.ephemeral_containers(pod)
    if ephemeral:
        status.ephemeralContainerStatuses = convert_container_statuses(
            pod,
            runtime,
            previous=list(old.ephemeralContainerStatuses or []),
            containers=ephemeral,
            has_init=has_init,
            is_init=True,
            waiting_reasons=waiting_reasons,
            restarting=restarting,
        )

    start = _set_phase(status, spec, old=old, api=api, pod_is_terminal=pod_is_terminal, now=now)
    set_probe_fields(spec, status, readiness=readiness, started=started)
    status.conditions = _conditions(pod, runtime, status, old=old, api=api, now=now)
    _set_host_ips(status, spec, [host_ip, *host_ips])
    status.startTime = start
    return status


def _set_phase(
    status: PodStatus,
    spec: PodSpec,
    *,
    old: PodStatus,
    api: PodStatus,
    pod_is_terminal: bool,
    now: datetime,
) -> datetime:
    """Phase, reason and message (a terminal phase never reverts; past the active deadline
    the pod fails); returns the pod's start time."""
    phase = get_phase(
        spec,
        [*(status.containerStatuses or []), *(status.initContainerStatuses or [])],
        pod_is_terminal=pod_is_terminal,
    )
    if phase not in TERMINAL_PHASES:
        if old.phase in TERMINAL_PHASES:
            phase = old.phase
        elif api.phase in TERMINAL_PHASES:
            phase = api.phase
    if phase == old.phase:
        status.reason = old.reason or api.reason
        status.message = old.message or api.message
    if api.phase in TERMINAL_PHASES:
        phase = api.phase
    status.phase = phase
    start = old.startTime or api.startTime or now
    if phase not in TERMINAL_PHASES and past_active_deadline(spec, start=start, now=now):
        status.phase = "Failed"
        status.reason = DEADLINE_EXCEEDED
        status.message = DEADLINE_EXCEEDED_MESSAGE
    return start


def _conditions(
    pod: Pod,
    runtime: rt.PodRuntimeStatus,
    status: PodStatus,
    *,
    old: PodStatus,
    api: PodStatus,
    now: datetime,
) -> list[PodCondition]:
    """Conditions set by others first, then the kubelet's five, in the kubelet's order."""
    spec = _spec(pod)
    phase = status.phase or PENDING
    all_statuses = [*(status.initContainerStatuses or []), *(status.containerStatuses or [])]
    conditions = [
        copy.deepcopy(c) for c in api.conditions or [] if c.type not in KUBELET_CONDITIONS
    ]
    in_place = actions.has_restart_all_containers_rule(pod)
    conditions.append(ready_to_start_containers_condition(pod, runtime))
    conditions.append(
        initialized_condition(
            spec, all_statuses, phase, previous=(old.conditions or []) if in_place else ()
        )
    )
    conditions.append(ready_condition(spec, conditions, all_statuses, phase))
    conditions.append(containers_ready_condition(spec, all_statuses, phase))
    conditions.append(PodCondition(type=POD_SCHEDULED, status="True"))
    if in_place:
        conditions.append(all_containers_restarting_condition(pod, runtime, old, phase))
    return _with_transition_times(conditions, old.conditions or [], now=now)


def _set_host_ips(status: PodStatus, spec: PodSpec, candidates: Sequence[str]) -> None:
    """The node's addresses (two at most, one per family); a host-network pod's too."""
    ips = list(dict.fromkeys(ip for ip in candidates if ip))
    if ips:
        status.hostIP = ips[0]
        status.hostIPs = [HostIP(ip=ip) for ip in ips[:2]]
        if spec.hostNetwork and not status.podIP:
            status.podIP = ips[0]
            status.podIPs = [PodIP(ip=ip) for ip in ips[:2]]


SCHEDULING_GATED = "SchedulingGated"
SCHEDULING_GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"
"""The API server's ``PodScheduled`` condition for a pod created with scheduling gates."""


def rejected_status(pod: Pod, *, reason: str, message: str, now: datetime) -> PodStatus:
    """The status of a pod the node refused at admission (the kubelet's ``rejectPod``):
    Failed, the admit handler's reason, ``Pod was rejected: `` and its message."""
    return PodStatus(
        phase=FAILED,
        reason=reason,
        message=REJECTED_MESSAGE_PREFIX + message,
        qosClass=qos_class(pod),
        startTime=now,
    )


def is_scheduling_gated(pod: Pod) -> bool:
    """The pod lists ``spec.schedulingGates``: it must not start until they are removed."""
    return bool(pod.spec is not None and pod.spec.schedulingGates)


def gated_status(pod: Pod, *, now: datetime, previous: PodStatus | None = None) -> PodStatus:
    """The status of a pod held by its scheduling gates, as the API server writes it at
    creation (``applySchedulingGatedCondition``): Pending, its QoS class and one
    ``PodScheduled`` condition, False with reason ``SchedulingGated``; no container
    statuses, as no kubelet has seen it."""
    condition = PodCondition(
        type=POD_SCHEDULED,
        status="False",
        reason=SCHEDULING_GATED,
        message=SCHEDULING_GATED_MESSAGE,
    )
    old = previous.conditions if previous is not None else None
    return PodStatus(
        phase=PENDING,
        qosClass=qos_class(pod),
        conditions=_with_transition_times([condition], old or [], now=now),
    )


DEADLINE_EXCEEDED = "DeadlineExceeded"
DEADLINE_EXCEEDED_MESSAGE = "Pod was active on the node longer than the specified deadline"


def past_active_deadline(spec: PodSpec, *, start: datetime, now: datetime) -> bool:
    """The kubelet's ``activeDeadlineHandler.pastActiveDeadline``, from the pod's start time."""
    deadline = spec.activeDeadlineSeconds
    return deadline is not None and (now - start).total_seconds() >= deadline


@dataclass
class _PhaseCounts:
    """What ``getPhase`` counts over the pod's containers."""

    pending_init: int = 0
    failed_init: int = 0
    unknown: int = 0
    running: int = 0
    waiting: int = 0
    stopped: int = 0
    stopped_for_good: int = 0
    succeeded: int = 0


def get_phase(
    spec: PodSpec, statuses: Sequence[V1ContainerStatus], *, pod_is_terminal: bool = False
) -> str:
    """The kubelet's ``getPhase`` over regular and init container statuses."""
    by_name = {s.name: s for s in statuses}
    n = _PhaseCounts()
    inits = list(spec.initContainers or [])
    for c in inits:
        if not actions.is_restartable_init_container(c):
            _count_init(n, c, spec, by_name.get(c.name))
    for c in inits:
        if actions.is_restartable_init_container(c):
            _count_sidecar(n, by_name.get(c.name))
    for c in spec.containers:
        _count_regular(n, c, spec, by_name.get(c.name))

    if n.failed_init > 0:
        return FAILED
    if (n.pending_init > 0 and not has_any_regular_container_started(spec, statuses)) or n.waiting:
        return PENDING
    if n.running > 0 and n.unknown == 0:
        return RUNNING
    if n.running == 0 and n.stopped > 0 and n.unknown == 0:
        if pod_is_terminal:
            return SUCCEEDED if n.stopped == n.succeeded else FAILED
        if n.stopped != n.stopped_for_good:
            return RUNNING
        return SUCCEEDED if n.stopped == n.succeeded else FAILED
    return PENDING


def _restartable(c: Container, spec: PodSpec, terminated: ContainerStateTerminated) -> bool:
    """A stopped container that will run again: its rules and policies say so, or it was
    removed by a restart in place."""
    if terminated.reason == RESTARTING_ALL_CONTAINERS:
        return True
    return actions.container_should_restart(c, spec, terminated.exitCode)


def _count_init(n: _PhaseCounts, c: Container, spec: PodSpec, s: V1ContainerStatus | None) -> None:
    state = container_state(s)
    if s is None or state.running is not None:
        n.pending_init += 1
    elif state.terminated is not None:
        if state.terminated.exitCode != 0 and not _restartable(c, spec, state.terminated):
            n.failed_init += 1
    elif state.waiting is not None:
        last = s.lastState.terminated if s.lastState is not None else None
        if last is None:
            n.pending_init += 1
        elif last.exitCode != 0 and not _restartable(c, spec, last):
            n.failed_init += 1
    else:
        n.pending_init += 1


def _count_sidecar(n: _PhaseCounts, s: V1ContainerStatus | None) -> None:
    if s is None:
        n.unknown += 1
        return
    state = container_state(s)
    if state.running is not None:
        if not s.started:
            n.pending_init += 1
        n.running += 1
    elif state.terminated is not None:
        pass
    elif state.waiting is not None:
        if s.lastState is None or s.lastState.terminated is None:
            n.pending_init += 1
            n.waiting += 1
    else:
        n.pending_init += 1
        n.unknown += 1


def _count_regular(
    n: _PhaseCounts, c: Container, spec: PodSpec, s: V1ContainerStatus | None
) -> None:
    if s is None:
        n.unknown += 1
        return
    state = container_state(s)
    if state.running is not None:
        n.running += 1
    elif state.terminated is not None:
        n.stopped += 1
        if not _restartable(c, spec, state.terminated):
            n.stopped_for_good += 1
        if state.terminated.exitCode == 0:
            n.succeeded += 1
    elif state.waiting is not None:
        last = s.lastState.terminated if s.lastState is not None else None
        if last is not None:
            n.stopped += 1
            if not _restartable(c, spec, last):
                n.stopped_for_good += 1
        else:
            n.waiting += 1
    else:
        n.unknown += 1


def has_any_regular_container_started(spec: PodSpec, statuses: Sequence[V1ContainerStatus]) -> bool:
    """True once any regular container has run (running or terminated)."""
    names = {c.name for c in spec.containers}
    for s in statuses:
        if (
            s.name in names
            and s.state is not None
            and (s.state.running is not None or s.state.terminated is not None)
        ):
            return True
    return False


def ready_to_start_containers_condition(pod: Pod, runtime: rt.PodRuntimeStatus) -> PodCondition:
    """True once the pod has a sandbox with networking that needs no replacing."""
    changed = actions.pod_sandbox_changed(pod, runtime).changed
    return PodCondition(type=POD_READY_TO_START_CONTAINERS, status="False" if changed else "True")


def initialized_condition(
    spec: PodSpec,
    statuses: Sequence[V1ContainerStatus],
    phase: str,
    *,
    previous: Sequence[PodCondition] = (),
) -> PodCondition:
    """The kubelet's ``GeneratePodInitializedCondition``. ``previous`` are the last
    conditions of a pod that can restart in place: once initialized, it stays so while its
    init containers run again."""
    by_name = {s.name: s for s in statuses}
    unknown: list[str] = []
    incomplete: list[str] = []
    for c in spec.initContainers or []:
        s = by_name.get(c.name)
        if s is None:
            unknown.append(c.name)
        elif not _init_container_initialized(c, s):
            incomplete.append(c.name)
    if phase == SUCCEEDED and not unknown:
        return PodCondition(type=INITIALIZED, status="True", reason=POD_COMPLETED)
    if has_any_regular_container_started(spec, statuses):
        return PodCondition(type=INITIALIZED, status="True")
    messages = []
    if unknown:
        messages.append(f"containers with unknown status: {_go_list(unknown)}")
    if incomplete:
        messages.append(f"containers with incomplete status: {_go_list(incomplete)}")
    if messages:
        if any(c.type == INITIALIZED and c.status == "True" for c in previous):
            return PodCondition(type=INITIALIZED, status="True")
        return PodCondition(
            type=INITIALIZED,
            status="False",
            reason=CONTAINERS_NOT_INITIALIZED,
            message=", ".join(messages),
        )
    return PodCondition(type=INITIALIZED, status="True")


def all_containers_restarting_condition(
    pod: Pod, runtime: rt.PodRuntimeStatus, previous: PodStatus | None, phase: str
) -> PodCondition:
    """The kubelet's ``GenerateAllContainersRestartingCondition``: True from the exit that
    asks for a restart in place until every container of the pod has been removed."""
    if phase == SUCCEEDED:
        return PodCondition(type=ALL_CONTAINERS_RESTARTING, status="False", reason=POD_COMPLETED)
    if phase == FAILED:
        return PodCondition(type=ALL_CONTAINERS_RESTARTING, status="False", reason=POD_FAILED)
    if not actions.should_all_containers_restart(
        pod, runtime, previous
    ) or actions.all_containers_restart_cleaned_up(pod, runtime):
        return PodCondition(type=ALL_CONTAINERS_RESTARTING, status="False")
    return PodCondition(
        type=ALL_CONTAINERS_RESTARTING,
        status="True",
        reason=RESTART_ALL_CONTAINERS_STARTED,
        message=RESTART_ALL_CONTAINERS_STARTED_MESSAGE,
    )


def containers_ready_condition(
    spec: PodSpec, statuses: Sequence[V1ContainerStatus], phase: str
) -> PodCondition:
    """The kubelet's ``GenerateContainersReadyCondition``."""
    by_name = {s.name: s for s in statuses}
    unknown: list[str] = []
    unready: list[str] = []
    sidecars = [c for c in spec.initContainers or [] if actions.is_restartable_init_container(c)]
    for c in [*sidecars, *spec.containers]:
        s = by_name.get(c.name)
        if s is None:
            unknown.append(c.name)
        elif not s.ready:
            unready.append(c.name)
    if (phase == SUCCEEDED and not unknown) or phase == FAILED:
        return PodCondition(
            type=CONTAINERS_READY,
            status="False",
            reason=POD_COMPLETED if phase == SUCCEEDED else POD_FAILED,
        )
    messages = []
    if unknown:
        messages.append(f"containers with unknown status: {_go_list(unknown)}")
    if unready:
        messages.append(f"containers with unready status: {_go_list(unready)}")
    if messages:
        return PodCondition(
            type=CONTAINERS_READY,
            status="False",
            reason=CONTAINERS_NOT_READY,
            message=", ".join(messages),
        )
    return PodCondition(type=CONTAINERS_READY, status="True")


def ready_condition(
    spec: PodSpec,
    conditions: Sequence[PodCondition],
    statuses: Sequence[V1ContainerStatus],
    phase: str,
) -> PodCondition:
    """The kubelet's ``GeneratePodReadyCondition``, readiness gates included."""
    containers = containers_ready_condition(spec, statuses, phase)
    if containers.status != "True":
        return PodCondition(
            type=READY,
            status=containers.status,
            reason=containers.reason,
            message=containers.message,
        )
    by_type = {c.type: c for c in conditions}
    messages = []
    for gate in spec.readinessGates or []:
        c = by_type.get(gate.conditionType)
        if c is None:
            messages.append(
                f'corresponding condition of pod readiness gate "{gate.conditionType}"'
                " does not exist."
            )
        elif c.status != "True":
            messages.append(
                f'the status of pod readiness gate "{gate.conditionType}" is not "True",'
                f" but {c.status}"
            )
    if messages:
        return PodCondition(
            type=READY,
            status="False",
            reason=READINESS_GATES_NOT_READY,
            message=", ".join(messages),
        )
    return PodCondition(type=READY, status="True")


def _spec(pod: Pod) -> PodSpec:
    if pod.spec is None:
        raise ValueError("the pod has no spec")
    return pod.spec


def _go_list(names: Sequence[str]) -> str:
    return "[" + " ".join(names) + "]"


def _init_container_initialized(c: Container, status: V1ContainerStatus) -> bool:
    if actions.is_restartable_init_container(c):
        return bool(status.started)
    return bool(status.ready)


def _runtime_ips(runtime: rt.PodRuntimeStatus) -> list[str]:
    if runtime.ips:
        return list(runtime.ips)
    if runtime.sandboxes and runtime.sandboxes[0].state is rt.SandboxState.READY:
        newest = runtime.sandboxes[0]
        return [ip for ip in [newest.ip, *newest.additional_ips] if ip]
    return []


def _sort_pod_ips(ips: Sequence[str]) -> list[str]:
    """The first IPv4 then the first IPv6 address, as the kubelet orders pod IPs."""
    out: list[str] = []
    for version in (4, 6):
        for ip in ips:
            try:
                if ipaddress.ip_address(ip).version == version:
                    out.append(ip)
                    break
            except ValueError:
                continue
    return out


def _with_transition_times(
    conditions: list[PodCondition], old: Sequence[PodCondition], *, now: datetime
) -> list[PodCondition]:
    previous = {c.type: c for c in old}
    for c in conditions:
        before = previous.get(c.type)
        if c.lastTransitionTime is None:
            if before is not None and before.status == c.status and before.lastTransitionTime:
                c.lastTransitionTime = before.lastTransitionTime
            else:
                c.lastTransitionTime = now
    return conditions
