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

Not carried over, because a Docker node has no use for them yet: in-place resize
(``ContainersToUpdate``), ephemeral containers and per-container restart rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

from lightkube.models.core_v1 import Container, Pod, PodSpec

from asynckubelet.runtime import naming
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
"""The kubelet's ``containerKillReason`` values; a spec change kills with reason ``""``."""

RESTART_ALWAYS = "Always"
RESTART_ON_FAILURE = "OnFailure"
RESTART_NEVER = "Never"

_NO_PROBES: Mapping[str, ProbeResult] = MappingProxyType({})


@dataclass(frozen=True)
class ContainerToKill:
    """One container instance a sync must stop, with the kubelet's words for why."""

    container_id: str
    """Docker container id of the instance."""
    name: str
    """The container's name in the pod spec."""
    reason: str
    """``StartupProbe``, ``LivenessProbe``, ``Unknown`` or ``""`` (spec changed)."""
    message: str
    """For the ``Killing`` event: ``Container app failed liveness probe, will be restarted``."""


@dataclass(frozen=True)
class PodActions:
    """The kubelet's ``podActions``: everything one sync of a pod must do, in order.

    ``sync_pod`` carries these out as the kubelet does: kill the pod if ``kill_pod``; kill
    ``containers_to_kill``; create the sandbox (attempt ``attempt``) if ``create_sandbox``,
    else use ``sandbox_id``; start ``init_containers_to_start`` in order; start
    ``containers_to_start``.
    """

    kill_pod: bool = False
    """Stop every running container and the sandbox."""
    create_sandbox: bool = False
    """Create a new sandbox; when the pod also has init containers they restart from the first."""
    sandbox_id: str = ""
    """The existing (newest) sandbox, where containers start when none is created."""
    attempt: int = 0
    """Attempt number of the sandbox to create (newest attempt + 1; 0 for the first)."""
    next_init_container_to_start: str | None = None
    """Name of the init container to start next, for pods without restartable init containers."""
    init_containers_to_start: tuple[int, ...] = ()
    """Indexes into ``spec.initContainers`` to start, in spec order."""
    containers_to_start: tuple[int, ...] = ()
    """Indexes into ``spec.containers`` to start."""
    containers_to_kill: Mapping[str, ContainerToKill] = field(
        default_factory=lambda: MappingProxyType({})
    )
    """Docker container id -> what to kill and why."""
    reason: str = ""
    """Why the sandbox is (re)created or the pod killed; ``""`` when neither happens."""

    @property
    def is_noop(self) -> bool:
        """True when a sync has nothing to do."""
        return not (
            self.kill_pod
            or self.create_sandbox
            or self.init_containers_to_start
            or self.containers_to_start
            or self.containers_to_kill
        )


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
) -> PodActions:
    """Decide what a sync of ``pod`` must do, given what Docker holds for it.

    ``pod`` is a defaulted lightkube ``Pod``. ``liveness`` and ``startup`` map a Docker
    container id to the prober's latest result; a missing id means "not probed yet".
    """
    plan = _Plan(status=status, liveness=liveness, startup=startup)
    plan.decide(pod)
    return plan.freeze(pod)


def should_container_be_restarted(
    container: Container, *, pod: Pod, status: PodRuntimeStatus
) -> bool:
    """The kubelet's ``ShouldContainerBeRestarted`` for a regular container."""
    if pod.metadata is not None and pod.metadata.deletionTimestamp is not None:
        return False
    cs = status.find_container(container.name)
    if cs is None:
        return True
    if cs.state is ContainerState.RUNNING:
        return False
    if cs.state in (ContainerState.UNKNOWN, ContainerState.CREATED):
        return True
    policy = restart_policy(pod)
    if policy == RESTART_NEVER:
        return False
    if policy == RESTART_ON_FAILURE:
        return cs.exit_code != 0
    return True


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
    to_kill: dict[str, ContainerToKill] = field(default_factory=dict)
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
            containers_to_kill=MappingProxyType(dict(self.to_kill)),
            reason=self.reason,
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
            if not (policy == RESTART_ON_FAILURE and _succeeded(c, self.status))
        ]
        if not to_start and _any_regular_container_created(pod, self.status):
            self.create_sandbox = False
            self.reason += "; not creating one: every container succeeded"
            return
        if _init_containers(pod):
            self.init_to_start = [0]
            return
        self.to_start = to_start

    def decide_init_containers(self, pod: Pod) -> bool:
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
        restart_on_failure = _restart_on_failure(pod)
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
                    if not restart_on_failure:
                        self.fail_init(c)
                        return False
                    picked.append(i)
                elif i == last:
                    initialized = True
                else:
                    picked.append(i + 1)
            else:
                if not sidecar and not restart_on_failure:
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

    def fail_init(self, c: Container) -> None:
        self.kill_pod = True
        self.init_to_start = []
        self.reason = f"Init container {c.name} failed and the pod's restartPolicy is Never"

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
            restart = _restart_on_failure(pod)
            if naming.hash_container(c) != cs.hash:
                message, reason = f"Container {c.name} definition changed", ""
                restart = True
            elif self.liveness.get(cs.id) is ProbeResult.FAILURE:
                message = f"Container {c.name} failed liveness probe"
                reason = KILL_REASON_LIVENESS_PROBE
            elif self.startup.get(cs.id) is ProbeResult.FAILURE:
                message = f"Container {c.name} failed startup probe"
                reason = KILL_REASON_STARTUP_PROBE
            else:
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
