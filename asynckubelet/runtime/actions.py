"""What a sync must do to a pod: the kubelet's ``computePodActions``, as a pure function.

The runtime decides first and acts second. Everything the kubelet decides about a pod's
lifecycle (recreate the sandbox? which init container next? which containers to start,
which to kill and why?) is decided here from data alone: the pod spec, what Docker holds
(:class:`~asynckubelet.runtime.types.PodRuntimeStatus`) and the prober's latest verdicts.
That keeps every rule testable as a table, lets a "plan" print a sync without doing it,
and leaves ``sync_pod`` with nothing to decide, only a :class:`PodActions` to carry out.

The logic follows the kubelet's ``computePodActions`` and ``podActions``
(``pkg/kubelet/kuberuntime/kuberuntime_manager.go``), ``computeInitContainerActions``
(``kuberuntime_container.go``), ``PodSandboxChanged`` (``kuberuntime/util``) and
``ShouldContainerBeRestarted`` (``pkg/kubelet/container``), as of the releases where
sidecar containers are GA and the legacy init path is gone: every pod, with or without
restartable init containers, takes the sidecar-aware init path, and
``init_containers_to_start`` is the authoritative list. ``next_init_container_to_start``
is the legacy field kept for pods without sidecars, where the list has at most one entry.

Per-container restart rules (``ContainerRestartRules``) follow the kubelet's: a container's
own ``restartPolicy`` overrides the pod's, its ``restartPolicyRules`` are matched against the
exit code first (``podutil.ContainerShouldRestart``), and a probe failure or an unknown state
consults the container's policy only (there is no exit code to match yet). The
``RestartAllContainers`` action (``RestartAllContainersOnContainerExits``) is decided here
too: the caller says whether the pod is restarting in place (``should_all_containers_restart``,
the kubelet's ``ShouldAllContainersRestart``), and the actions then only remove every
container, keeping the sandbox, as ``getContainersToReset`` does.

Ephemeral containers (``EphemeralContainersToStart``) are started once, whenever the pod
keeps its sandbox, even before it is initialized; they are never restarted and never
killed for a probe. In-place resize (``computePodResizeAction``) is decided per running
container that keeps running (:func:`~asynckubelet.runtime.resizing.container_resize`):
a ``RestartContainer`` resource restarts it, any other change updates it in place
(``containers_to_update``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple, cast

from lightkube.models.core_v1 import Container, ContainerRestartRule, Pod, PodSpec, PodStatus

from asynckubelet.runtime import naming, resizing
from asynckubelet.runtime.podactions import ContainerToKill as ContainerToKill
from asynckubelet.runtime.podactions import ContainerToReset as ContainerToReset
from asynckubelet.runtime.podactions import ContainerToUpdate as ContainerToUpdate
from asynckubelet.runtime.podactions import PodActions as PodActions
from asynckubelet.runtime.probes import ProbeResult
from asynckubelet.runtime.types import (
    ContainerState,
    ContainerStatus,
    PodRuntimeStatus,
    SandboxState,
)

KILL_REASON_STARTUP_PROBE = "StartupProbe"
KILL_REASON_LIVENESS_PROBE = "LivenessProbe"
KILL_REASON_FAILED_POST_START_HOOK = "FailedPostStartHook"
KILL_REASON_UNKNOWN = "Unknown"
KILL_REASON_RESTART_ALL_CONTAINERS = "RestartAllContainers"
"""The kubelet's ``containerKillReason`` values; a spec change kills with reason ``""``."""

RESTART_ALWAYS = "Always"
RESTART_ON_FAILURE = "OnFailure"
RESTART_NEVER = "Never"

RULE_ACTION_RESTART = "Restart"
RULE_ACTION_RESTART_ALL_CONTAINERS = "RestartAllContainers"
RULE_OPERATOR_IN = "In"
RULE_OPERATOR_NOT_IN = "NotIn"

ALL_CONTAINERS_RESTARTING = "AllContainersRestarting"
"""The pod condition that is True while a ``RestartAllContainers`` restart is under way."""

_NO_PROBES: Mapping[str, ProbeResult] = MappingProxyType({})


class SandboxChange(NamedTuple):
    """The answer of :func:`pod_sandbox_changed`."""

    changed: bool
    attempt: int
    sandbox_id: str
    reason: str


def pod_sandbox_changed(pod: Pod, status: PodRuntimeStatus) -> SandboxChange:
    """Whether the pod needs a new sandbox, the attempt to use, and the current sandbox id.

    The kubelet's ``PodSandboxChanged``. ``status.sandboxes`` is newest first. The sandbox id
    is returned even when a new sandbox is needed, so the old one can be reported and
    killed, except after a host-network change, where the kubelet returns none.
    """
    if not status.sandboxes:
        return SandboxChange(
            True, 0, "", "No sandbox for pod can be found. Need to start a new one"
        )
    ready = sum(1 for s in status.sandboxes if s.state is SandboxState.READY)
    max_attempt = max(s.attempt for s in status.sandboxes)
    newest = status.sandboxes[0]
    host_network = _host_network(pod)
    if ready > 1:
        return SandboxChange(
            True,
            max_attempt + 1,
            newest.id,
            "Multiple sandboxes are ready for Pod. Need to reconcile them",
        )
    if newest.state is not SandboxState.READY:
        return SandboxChange(
            True,
            max_attempt + 1,
            newest.id,
            "No ready sandbox for pod can be found. Need to start a new one",
        )
    if newest.host_network != host_network:
        return SandboxChange(
            True, max_attempt + 1, "", "Sandbox for pod has changed. Need to start a new one"
        )
    if not host_network and newest.ip == "":
        return SandboxChange(
            True,
            max_attempt + 1,
            newest.id,
            "Sandbox for pod has no IP address. Need to start a new one",
        )
    return SandboxChange(False, max_attempt, newest.id, "")


def compute_pod_actions(
    pod: Pod,
    status: PodRuntimeStatus,
    *,
    liveness: Mapping[str, ProbeResult] = _NO_PROBES,
    startup: Mapping[str, ProbeResult] = _NO_PROBES,
    restart_all_containers: bool = False,
) -> PodActions:
    """Decide what a sync of ``pod`` must do, given what Docker holds for it.

    ``pod`` is a defaulted lightkube ``Pod``. ``liveness`` and ``startup`` map a Docker
    container id to the prober's latest result; a missing id means "not probed yet".
    ``restart_all_containers`` says the pod is restarting in place (the caller's
    :func:`should_all_containers_restart` over the runtime and the last status).
    """
    if restart_all_containers:
        sandbox = pod_sandbox_changed(pod, status)
        return PodActions(
            sandbox_id=sandbox.sandbox_id,
            attempt=sandbox.attempt,
            containers_to_reset=containers_to_reset(pod, status),
            reason="A container exited with a RestartAllContainers rule: restarting the pod",
        )
    plan = _Plan(status=status, liveness=liveness, startup=startup)
    plan.decide(pod)
    return plan.freeze(pod)


def should_container_be_restarted(
    container: Container, *, pod: Pod, status: PodRuntimeStatus
) -> bool:
    """The kubelet's ``ShouldContainerBeRestarted``: its restart rules, then its own
    ``restartPolicy``, then the pod's, decide over the exit code of the newest instance."""
    if pod.metadata is not None and pod.metadata.deletionTimestamp is not None:
        return False
    cs = status.find_container(container.name)
    if cs is None:
        return True
    if cs.state is ContainerState.RUNNING:
        return False
    if cs.state in (ContainerState.UNKNOWN, ContainerState.CREATED):
        return True
    return container_should_restart(container, _spec(pod), cs.exit_code)


def container_should_restart(container: Container, spec: PodSpec, exit_code: int) -> bool:
    """``podutil.ContainerShouldRestart``: whether an exit with ``exit_code`` is followed by
    a new instance. The first matching rule decides (both actions restart); without one,
    the container's ``restartPolicy``, else the pod's."""
    if container.restartPolicy is not None:
        if find_matching_restart_rule(container, exit_code) is not None:
            return True
        if container.restartPolicy == RESTART_ALWAYS:
            return True
        if container.restartPolicy == RESTART_ON_FAILURE:
            return exit_code != 0
        if container.restartPolicy == RESTART_NEVER:
            return False
    policy = spec.restartPolicy or RESTART_ALWAYS
    if policy == RESTART_ON_FAILURE:
        return exit_code != 0
    return policy != RESTART_NEVER


def find_matching_restart_rule(container: Container, exit_code: int) -> ContainerRestartRule | None:
    """The first of the container's ``restartPolicyRules`` that matches the exit code
    (``findMatchingContainerRestartRule``); a rule without ``exitCodes`` never matches."""
    for rule in container.restartPolicyRules or []:
        codes = rule.exitCodes
        if codes is None:
            continue
        listed = exit_code in (codes.values or [])
        if codes.operator == RULE_OPERATOR_IN and listed:
            return rule
        if codes.operator == RULE_OPERATOR_NOT_IN and not listed:
            return rule
    return None


def restart_on_probe_failure(container: Container, pod: Pod) -> bool:
    """Whether a running container killed for a failed probe (or found in an unknown state)
    is started again: the container's own ``restartPolicy`` when set, else the pod's.
    Restart rules are not consulted; there is no exit code yet."""
    if container.restartPolicy is not None:
        return container.restartPolicy != RESTART_NEVER
    return _restart_on_failure(pod)


def has_restart_all_containers_rule(pod: Pod) -> bool:
    """Some container carries a ``RestartAllContainers`` rule (the pod can restart in place)."""
    spec = _spec(pod)
    return any(
        rule.action == RULE_ACTION_RESTART_ALL_CONTAINERS
        for c in [*(spec.initContainers or []), *spec.containers]
        for rule in c.restartPolicyRules or []
    )


def should_all_containers_restart(
    pod: Pod, runtime: PodRuntimeStatus, api_status: PodStatus | None
) -> bool:
    """The kubelet's ``ShouldAllContainersRestart``: the last status says a restart in place
    is under way, or a container (on Docker, or terminated in the last status) exited with
    a code whose first matching rule is ``RestartAllContainers``."""
    if not has_restart_all_containers_rule(pod):
        return False
    if api_status is not None:
        for condition in api_status.conditions or []:
            if condition.type == ALL_CONTAINERS_RESTARTING and condition.status == "True":
                return True
    api_statuses = {}
    if api_status is not None:
        for s in [*(api_status.initContainerStatuses or []), *(api_status.containerStatuses or [])]:
            api_statuses[s.name] = s
    spec = _spec(pod)
    for c in [*(spec.initContainers or []), *spec.containers]:
        cs = runtime.find_container(c.name)
        if cs is not None and cs.state is ContainerState.EXITED and _restarts_all(c, cs.exit_code):
            return True
        api = api_statuses.get(c.name)
        terminated = api.state.terminated if api is not None and api.state is not None else None
        if terminated is not None and _restarts_all(c, terminated.exitCode):
            return True
    return False


def all_containers_restart_cleaned_up(pod: Pod, runtime: PodRuntimeStatus) -> bool:
    """``AllContainersRestartCleanedUp``: no instance of any of the pod's containers is left."""
    spec = _spec(pod)
    return all(
        runtime.find_container(c.name) is None
        for c in [*(spec.initContainers or []), *spec.containers]
    )


def containers_to_reset(pod: Pod, runtime: PodRuntimeStatus) -> tuple[ContainerToReset, ...]:
    """``getContainersToReset``: every instance of every init and regular container; the
    instances whose exit matched a ``RestartAllContainers`` rule come last."""
    spec = _spec(pod)
    targets: list[ContainerToReset] = []
    sources: list[ContainerToReset] = []
    for init, containers in ((True, spec.initContainers or []), (False, spec.containers)):
        for c in containers:
            for cs in runtime.containers:
                if cs.name != c.name:
                    continue
                exited = cs.state is ContainerState.EXITED
                item = ContainerToReset(
                    container_id=cs.id,
                    name=cs.name,
                    init=init,
                    kill=not exited,
                    restart_count=cs.restart_count,
                )
                (sources if exited and _restarts_all(c, cs.exit_code) else targets).append(item)
    return (*targets, *sources)


def _restarts_all(container: Container, exit_code: int) -> bool:
    rule = find_matching_restart_rule(container, exit_code)
    return rule is not None and rule.action == RULE_ACTION_RESTART_ALL_CONTAINERS


def restart_policy(pod: Pod) -> str:
    """The pod's restartPolicy; ``Always`` (the API default) when unset."""
    return _spec(pod).restartPolicy or RESTART_ALWAYS


def is_restartable_init_container(container: Container) -> bool:
    """A sidecar: an init container with ``restartPolicy: Always``."""
    return bool(container.restartPolicy == RESTART_ALWAYS)


def is_init_container_failed(status: ContainerStatus) -> bool:
    """The kubelet's ``isInitContainerFailed``: OOM-killed, exited non-zero, or unknown."""
    if status.reason == "OOMKilled":
        return True
    if status.state is ContainerState.EXITED and status.exit_code != 0:
        return True
    return status.state is ContainerState.UNKNOWN


def _spec(pod: Pod) -> PodSpec:
    if pod.spec is None:
        raise ValueError("the pod has no spec")
    return pod.spec


def _containers(pod: Pod) -> list[Container]:
    return list(_spec(pod).containers or [])


def ephemeral_containers(pod: Pod) -> list[Container]:
    """The pod's ephemeral containers as containers (without ``targetContainerName``), in
    spec order."""
    found = []
    for ec in _spec(pod).ephemeralContainers or []:
        body = {k: v for k, v in ec.to_dict().items() if k != "targetContainerName"}
        found.append(cast(Container, Container.from_dict(body)))
    return found


def _init_containers(pod: Pod) -> list[Container]:
    return list(_spec(pod).initContainers or [])


def _host_network(pod: Pod) -> bool:
    return bool(_spec(pod).hostNetwork)


def _restart_on_failure(pod: Pod) -> bool:
    return restart_policy(pod) != RESTART_NEVER


def _succeeded(container: Container, status: PodRuntimeStatus) -> bool:
    cs = status.find_container(container.name)
    return cs is not None and cs.state is ContainerState.EXITED and cs.exit_code == 0


def _any_regular_container_created(pod: Pod, status: PodRuntimeStatus) -> bool:
    for c in _containers(pod):
        cs = status.find_container(c.name)
        if cs is not None and cs.state in (
            ContainerState.CREATED,
            ContainerState.RUNNING,
            ContainerState.EXITED,
        ):
            return True
    return False


def _unknown_state_message(prefix: str) -> str:
    return f'{prefix} is in "{ContainerState.UNKNOWN.value}" state, try killing it before restart'


@dataclass
class _Plan:
    """The mutable ``podActions`` the decision is built in, frozen at the end."""

    status: PodRuntimeStatus
    liveness: Mapping[str, ProbeResult]
    startup: Mapping[str, ProbeResult]
    kill_pod: bool = False
    create_sandbox: bool = False
    sandbox_id: str = ""
    attempt: int = 0
    init_to_start: list[int] = field(default_factory=list)
    to_start: list[int] = field(default_factory=list)
    ephemeral_to_start: list[int] = field(default_factory=list)
    to_kill: dict[str, ContainerToKill] = field(default_factory=dict)
    to_update: list[ContainerToUpdate] = field(default_factory=list)
    reason: str = ""

    def freeze(self, pod: Pod) -> PodActions:
        inits = _init_containers(pod)
        next_init: str | None = None
        if self.init_to_start and not any(is_restartable_init_container(c) for c in inits):
            next_init = inits[self.init_to_start[0]].name
        return PodActions(
            kill_pod=self.kill_pod,
            create_sandbox=self.create_sandbox,
            sandbox_id=self.sandbox_id,
            attempt=self.attempt,
            next_init_container_to_start=next_init,
            init_containers_to_start=tuple(self.init_to_start),
            containers_to_start=tuple(self.to_start),
            ephemeral_containers_to_start=() if self.kill_pod else tuple(self.ephemeral_to_start),
            containers_to_kill=MappingProxyType(dict(self.to_kill)),
            reason=self.reason,
            containers_to_update=() if self.kill_pod else tuple(self.to_update),
        )

    def kill(self, cs: ContainerStatus, *, reason: str, message: str) -> None:
        self.to_kill[cs.id] = ContainerToKill(
            container_id=cs.id, name=cs.name, reason=reason, message=message
        )

    def decide(self, pod: Pod) -> None:
        sandbox = pod_sandbox_changed(pod, self.status)
        self.kill_pod = self.create_sandbox = sandbox.changed
        self.sandbox_id = sandbox.sandbox_id
        self.attempt = sandbox.attempt
        self.reason = sandbox.reason
        if sandbox.changed:
            self.decide_new_sandbox(pod)
            return
        # Ephemeral containers may start before the pod is initialized.
        self.ephemeral_to_start = [
            i
            for i, c in enumerate(ephemeral_containers(pod))
            if self.status.find_container(c.name) is None
        ]
        initialized = self.decide_init_containers(pod)
        if self.kill_pod or not initialized:
            return
        self.decide_containers(pod)

    def decide_new_sandbox(self, pod: Pod) -> None:
        if not _restart_on_failure(pod) and self.attempt != 0 and self.status.containers:
            self.create_sandbox = False
            self.reason += "; not creating one: restartPolicy is Never and containers have run"
            return
        policy = restart_policy(pod)
        to_start = [
            i
            for i, c in enumerate(_containers(pod))
            if not (
                (c.restartPolicy or policy) == RESTART_ON_FAILURE and _succeeded(c, self.status)
            )
        ]
        if not to_start and _any_regular_container_created(pod, self.status):
            self.create_sandbox = False
            self.reason += "; not creating one: every container succeeded"
            return
        if _init_containers(pod):
            self.init_to_start = [0]
            return
        self.to_start = to_start

    def decide_init_containers(self, pod: Pod) -> bool:  # noqa: C901  (mirrors upstream computeInitContainerActions)
        """``computeInitContainerActions``: True once the pod has been initialized."""
        inits = _init_containers(pod)
        if not inits:
            return True
        initialized = False
        for c in _containers(pod):
            cs = self.status.find_container(c.name)
            if cs is not None and cs.state in (ContainerState.CREATED, ContainerState.RUNNING):
                initialized = True
                break
        previously_initialized = initialized
        last = len(inits) - 1
        # Walk backwards: completed init containers may have been garbage-collected, so
        # the newest evidence of progress is the last init container that left a trace.
        picked: list[int] = []
        for i in range(last, -1, -1):
            c = inits[i]
            sidecar = is_restartable_init_container(c)
            cs = self.status.find_container(c.name)
            if cs is None:
                if previously_initialized and sidecar:
                    picked.append(i)
                continue
            if previously_initialized and not sidecar:
                continue
            if cs.state is ContainerState.CREATED:
                picked.append(i)
            elif cs.state is ContainerState.RUNNING:
                if sidecar and self.running_sidecar(
                    c,
                    cs,
                    index=i,
                    last=last,
                    previously_initialized=previously_initialized,
                    picked=picked,
                ):
                    initialized = True
            elif cs.state is ContainerState.EXITED:
                if sidecar:
                    picked.append(i)
                elif is_init_container_failed(cs):
                    if not self.restart_failed_init(c, cs, pod):
                        self.fail_init(c)
                        return False
                    picked.append(i)
                elif i == last:
                    initialized = True
                else:
                    picked.append(i + 1)
            else:
                if not sidecar and not restart_on_probe_failure(c, pod):
                    self.fail_init(c)
                    return False
                self.kill(
                    cs,
                    reason=KILL_REASON_UNKNOWN,
                    message=_unknown_state_message("Init container"),
                )
                picked.append(i)
            previously_initialized = True
        if not previously_initialized:
            picked.append(0)
        self.init_to_start = list(reversed(picked))
        return initialized

    def running_sidecar(
        self,
        c: Container,
        cs: ContainerStatus,
        *,
        index: int,
        last: int,
        previously_initialized: bool,
        picked: list[int],
    ) -> bool:
        """A running restartable init container; True when it completes initialization."""
        if c.startupProbe is not None:
            result = self.startup.get(cs.id)
            if result is None:
                return False
            if result is not ProbeResult.SUCCESS:
                if result is ProbeResult.FAILURE:
                    self.kill(
                        cs,
                        reason=KILL_REASON_STARTUP_PROBE,
                        message=f"Init container {c.name} failed startup probe",
                    )
                    picked.append(index)
                return False
        completes = index == last
        if not completes and not previously_initialized:
            picked.append(index + 1)
        if naming.hash_container(c) != cs.hash:
            self.kill(cs, reason="", message=f"Init container {c.name} definition changed")
            picked.append(index)
            return completes
        if c.livenessProbe is not None and self.liveness.get(cs.id) is ProbeResult.FAILURE:
            self.kill(
                cs,
                reason=KILL_REASON_LIVENESS_PROBE,
                message=f"Init container {c.name} failed liveness probe",
            )
            picked.append(index)
        return completes

    @staticmethod
    def restart_failed_init(c: Container, cs: ContainerStatus, pod: Pod) -> bool:
        """A failed init container is retried as its rules and policies say; an OOM kill
        with exit code 0 counts as a failure the policies retry unless ``Never``."""
        if pod.metadata is not None and pod.metadata.deletionTimestamp is not None:
            return False
        if cs.state is ContainerState.EXITED and cs.exit_code != 0:
            return container_should_restart(c, _spec(pod), cs.exit_code)
        return restart_on_probe_failure(c, pod)

    def fail_init(self, c: Container) -> None:
        self.kill_pod = True
        self.init_to_start = []
        policy = "its restartPolicy" if c.restartPolicy is not None else "the pod's restartPolicy"
        self.reason = f"Init container {c.name} failed and {policy} is Never"

    def decide_containers(self, pod: Pod) -> None:
        keep = 0
        for idx, c in enumerate(_containers(pod)):
            cs = self.status.find_container(c.name)
            if cs is None or cs.state is not ContainerState.RUNNING:
                if should_container_be_restarted(c, pod=pod, status=self.status):
                    self.to_start.append(idx)
                    if cs is not None and cs.state is ContainerState.UNKNOWN:
                        self.kill(
                            cs,
                            reason=KILL_REASON_UNKNOWN,
                            message=_unknown_state_message("Container"),
                        )
                continue
            restart = restart_on_probe_failure(c, pod)
            if naming.hash_container(c) != cs.hash:
                message, reason = f"Container {c.name} definition changed", ""
                restart = True
            elif self.liveness.get(cs.id) is ProbeResult.FAILURE:
                message = f"Container {c.name} failed liveness probe"
                reason = KILL_REASON_LIVENESS_PROBE
            elif self.startup.get(cs.id) is ProbeResult.FAILURE:
                message = f"Container {c.name} failed startup probe"
                reason = KILL_REASON_STARTUP_PROBE
            elif (resize := resizing.container_resize(c, cs)).restart:
                self.to_start.append(idx)
                self.kill(cs, reason="", message=resizing.RESTART_MESSAGE.format(name=c.name))
                continue
            else:
                if resize.update:
                    self.to_update.append(resizing.to_update(cs, resize))
                keep += 1
                continue
            if restart:
                message += ", will be restarted"
                self.to_start.append(idx)
            self.kill(cs, reason=reason, message=message)
        if keep == 0 and not self.to_start:
            self.kill_pod = True
            self.init_to_start = []
            self.reason = "No container is running or will be started"
