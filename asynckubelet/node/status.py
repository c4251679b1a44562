"""The Kubernetes PodStatus of a pod, generated from what Docker holds: a pure function.

Users read a pod through its status (``kubectl get`` and ``describe``, controllers, the
CLI here), so it must say what the kubelet would say, word for word: the same phase, the
same five conditions with the same reasons and messages, the same container states and
waiting reasons. Keeping it a pure function of data (the pod, the runtime's records, the
prober's verdicts, the reasons the last sync failed, the previous status and the time)
makes each of those rules a table test, and lets the agent regenerate status at any time.

The logic follows the kubelet's ``generateAPIPodStatus``, ``convertToAPIContainerStatuses``
and ``getPhase`` (``pkg/kubelet/kubelet_pods.go``), the prober manager's
``UpdatePodStatus`` (ready/started), the condition generators in
``pkg/kubelet/status/generate.go``, the status manager's start time and transition times,
and ``GetPodQOS`` (``pkg/apis/core/v1/helper/qos``). ``kubectl_status`` and
``ready_string`` are kubectl's ``printPod`` STATUS and READY columns.

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
from datetime import datetime

from lightkube.models.core_v1 import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    HostIP,
    Pod,
    PodCondition,
    PodIP,
    PodSpec,
    PodStatus,
)
from lightkube.models.core_v1 import ContainerStatus as V1ContainerStatus

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
    }
)

CONTAINER_CREATING = "ContainerCreating"
POD_INITIALIZING = "PodInitializing"
CONTAINER_STATUS_UNKNOWN = "ContainerStatusUnknown"
COMPLETED = "Completed"
ERROR = "Error"

UNKNOWN_CONTAINER_STATUSES = "UnknownContainerStatuses"
POD_COMPLETED = "PodCompleted"
POD_FAILED = "PodFailed"
CONTAINERS_NOT_READY = "ContainersNotReady"
CONTAINERS_NOT_INITIALIZED = "ContainersNotInitialized"
READINESS_GATES_NOT_READY = "ReadinessGatesNotReady"
RESTART_ALL_CONTAINERS_STARTED = "RestartAllContainersStarted"
RESTART_ALL_CONTAINERS_STARTED_MESSAGE = "container exited with restart policy rule"
RESTARTING_ALL_CONTAINERS = "RestartingAllContainers"
RESTARTING_ALL_CONTAINERS_MESSAGE = "The container is removed because RestartAllContainers in place"
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
    status.containerStatuses = _convert_statuses(
        pod,
        runtime,
        previous=list(old.containerStatuses or []),
        containers=list(spec.containers),
        has_init=has_init,
        is_init=False,
        waiting_reasons=waiting_reasons,
        restarting=restarting,
    )
    status.initContainerStatuses = _convert_statuses(
        pod,
        runtime,
        previous=list(old.initContainerStatuses or []),
        containers=inits,
        has_init=has_init,
        is_init=True,
        waiting_reasons=waiting_reasons,
        restarting=restarting,
    )

    phase = get_phase(
        spec,
        [*status.containerStatuses, *status.initContainerStatuses],
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
        phase = status.phase = "Failed"
        status.reason = DEADLINE_EXCEEDED
        status.message = DEADLINE_EXCEEDED_MESSAGE

    _set_probe_fields(spec, status, readiness=readiness, started=started)

    all_statuses = [*status.initContainerStatuses, *status.containerStatuses]
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
    status.conditions = _with_transition_times(conditions, old.conditions or [], now=now)

    ips = [ip for ip in [host_ip, *host_ips] if ip]
    ips = list(dict.fromkeys(ips))
    if ips:
        status.hostIP = ips[0]
        status.hostIPs = [HostIP(ip=ip) for ip in ips[:2]]
        if spec.hostNetwork and not status.podIP:
            status.podIP = ips[0]
            status.podIPs = [PodIP(ip=ip) for ip in ips[:2]]

    status.startTime = start
    return status


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


def get_phase(
    spec: PodSpec, statuses: Sequence[V1ContainerStatus], *, pod_is_terminal: bool = False
) -> str:
    """The kubelet's ``getPhase`` over regular and init container statuses."""
    by_name = {s.name: s for s in statuses}
    pending_init = failed_init = 0
    unknown = running = waiting = stopped = stopped_for_good = succeeded = 0
    inits = list(spec.initContainers or [])
    for c in inits:
        if actions.is_restartable_init_container(c):
            continue
        s = by_name.get(c.name)
        state = _state(s)
        if s is None or state.running is not None:
            pending_init += 1
        elif state.terminated is not None:
            if state.terminated.exitCode != 0 and not _restartable(c, spec, state.terminated):
                failed_init += 1
        elif state.waiting is not None:
            last = s.lastState.terminated if s.lastState is not None else None
            if last is None:
                pending_init += 1
            elif last.exitCode != 0 and not _restartable(c, spec, last):
                failed_init += 1
        else:
            pending_init += 1
    for c in inits:
        if not actions.is_restartable_init_container(c):
            continue
        s = by_name.get(c.name)
        if s is None:
            unknown += 1
            continue
        state = _state(s)
        if state.running is not None:
            if not s.started:
                pending_init += 1
            running += 1
        elif state.terminated is not None:
            pass
        elif state.waiting is not None:
            if s.lastState is None or s.lastState.terminated is None:
                pending_init += 1
                waiting += 1
        else:
            pending_init += 1
            unknown += 1
    for c in spec.containers:
        s = by_name.get(c.name)
        if s is None:
            unknown += 1
            continue
        state = _state(s)
        if state.running is not None:
            running += 1
        elif state.terminated is not None:
            stopped += 1
            if not _restartable(c, spec, state.terminated):
                stopped_for_good += 1
            if state.terminated.exitCode == 0:
                succeeded += 1
        elif state.waiting is not None:
            last = s.lastState.terminated if s.lastState is not None else None
            if last is not None:
                stopped += 1
                if not _restartable(c, spec, last):
                    stopped_for_good += 1
            else:
                waiting += 1
        else:
            unknown += 1

    if failed_init > 0:
        return FAILED
    if (pending_init > 0 and not has_any_regular_container_started(spec, statuses)) or waiting:
        return PENDING
    if running > 0 and unknown == 0:
        return RUNNING
    if running == 0 and stopped > 0 and unknown == 0:
        if pod_is_terminal:
            return SUCCEEDED if stopped == succeeded else FAILED
        if stopped != stopped_for_good:
            return RUNNING
        return SUCCEEDED if stopped == succeeded else FAILED
    return PENDING


def _restartable(c: Container, spec: PodSpec, terminated: ContainerStateTerminated) -> bool:
    """A stopped container that will run again: its rules and policies say so, or it was
    removed by a restart in place."""
    if terminated.reason == RESTARTING_ALL_CONTAINERS:
        return True
    return actions.container_should_restart(c, spec, terminated.exitCode)


def has_any_regular_container_started(spec: PodSpec, statuses: Sequence[V1ContainerStatus]) -> bool:
    """True once any regular container has run (running or terminated)."""
    names = {c.name for c in spec.containers}
    for s in statuses:
        if s.name in names and s.state is not None:
            if s.state.running is not None or s.state.terminated is not None:
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


def kubectl_status(pod: Pod, status: PodStatus) -> str:
    """The STATUS column of ``kubectl get pods`` (kubectl's ``printPod``)."""
    return _print_pod(pod, status)[0]


def ready_string(pod: Pod, status: PodStatus) -> str:
    """The READY column of ``kubectl get pods``: ready / total, sidecars counted."""
    _, ready, total = _print_pod(pod, status)
    return f"{ready}/{total}"


def _print_pod(pod: Pod, status: PodStatus) -> tuple[str, int, int]:
    """kubectl's ``printPod``: the STATUS text, ready containers and total containers."""
    spec = _spec(pod)
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
        state = _state(cs)
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
            state = _state(cs)
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


def _spec(pod: Pod) -> PodSpec:
    if pod.spec is None:
        raise ValueError("the pod has no spec")
    return pod.spec


def _state(status: V1ContainerStatus | None) -> ContainerState:
    if status is None or status.state is None:
        return ContainerState()
    return status.state


def _condition_true(status: PodStatus, kind: str) -> bool:
    for c in status.conditions or []:
        if c.type == kind:
            return c.status == "True"
    return False


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


def _convert_statuses(
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

    present = {cs.name for cs in runtime.containers}
    for c in containers:
        before = old.get(c.name)
        if c.name in present or before is None:
            continue
        if restarting and (before.state is None or before.state.waiting is None):
            status = statuses[c.name]
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
            continue
        if before.state is None:
            continue
        if before.state.terminated is not None or before.state.running is None:
            continue
        status = statuses[c.name]
        waiting = status.state.waiting if status.state is not None else None
        if waiting is None or waiting.reason != default_reason:
            continue
        if status.lastState is not None and status.lastState.terminated is not None:
            continue
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


def _set_probe_fields(
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
            term = _state(cs).terminated
            cs.ready = term is not None and term.exitCode == 0
        else:
            cs.ready = cs.started and _is_ready(c, cs, readiness)


def _is_started(c: Container, cs: V1ContainerStatus, started: Mapping[str, bool]) -> bool:
    if _state(cs).running is None:
        return False
    if c.name in started:
        return started[c.name]
    return c.startupProbe is None


def _is_ready(c: Container, cs: V1ContainerStatus, readiness: Mapping[str, bool]) -> bool:
    if _state(cs).running is None:
        return False
    if readiness.get(c.name):
        return True
    return c.readinessProbe is None
