"""status.generate and kubectl's columns: the kubelet's and kubectl's rules as tables."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import builders
import pytest
from lightkube.models.core_v1 import (
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    Pod,
    PodCondition,
    PodStatus,
)
from lightkube.models.core_v1 import ContainerStatus as V1ContainerStatus

from asynckubelet.node import printpod
from asynckubelet.node import status as st
from asynckubelet.runtime.qos import qos_class
from asynckubelet.runtime.types import (
    ContainerState as RState,
)
from asynckubelet.runtime.types import (
    ContainerStatus,
    PodRuntimeStatus,
    SandboxState,
    SandboxStatus,
)

T0 = datetime(2024, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(hours=1)
UID = "uid-1"
RUNNING, EXITED, CREATED, UNKNOWN = RState.RUNNING, RState.EXITED, RState.CREATED, RState.UNKNOWN
CRASH = ("CrashLoopBackOff", "back-off 10s restarting failed container=app pod=web_default(uid-1)")


def make_pod(
    *,
    containers: tuple[str, ...] = ("app",),
    inits: tuple[str, ...] = (),
    sidecars: tuple[str, ...] = (),
    policy: str = "Always",
    host_network: bool = False,
    deleted: bool = False,
    readiness_probe: tuple[str, ...] = (),
    startup_probe: tuple[str, ...] = (),
    resources: Mapping[str, dict[str, Any]] | None = None,
    readiness_gates: tuple[str, ...] = (),
    status: dict[str, Any] | None = None,
) -> Pod:
    def container(name: str, **extra: Any) -> dict[str, Any]:
        c: dict[str, Any] = {"name": name, "image": f"{name}-image", **extra}
        if name in readiness_probe:
            c["readinessProbe"] = {"exec": {"command": ["true"]}}
        if name in startup_probe:
            c["startupProbe"] = {"exec": {"command": ["true"]}}
        if resources and name in resources:
            c["resources"] = resources[name]
        return c

    init_containers = [container(n, restartPolicy="Always") for n in sidecars]
    init_containers += [container(n) for n in inits]
    spec: dict[str, Any] = {"restartPolicy": policy, "hostNetwork": host_network}
    if init_containers:
        spec["initContainers"] = init_containers
    if readiness_gates:
        spec["readinessGates"] = [{"conditionType": g} for g in readiness_gates]
    return builders.pod(
        "web",
        uid=UID,
        meta={"deletionTimestamp": "2024-01-01T00:30:00Z"} if deleted else None,
        containers=[container(n) for n in containers],
        status=status or None,
        **spec,
    )


def rc(
    name: str,
    state: RState = RUNNING,
    exit_code: int = 0,
    *,
    at: int = 0,
    restarts: int = 0,
    reason: str = "",
    id: str | None = None,
) -> ContainerStatus:
    """One runtime container instance, created ``at`` seconds after T0."""
    created = T0 + timedelta(seconds=at)
    return ContainerStatus(
        id=id or f"{name}-{at}",
        name=name,
        state=state,
        created_at=created,
        started_at=created + timedelta(seconds=1) if state is not CREATED else None,
        finished_at=created + timedelta(seconds=5) if state is EXITED else None,
        exit_code=exit_code,
        reason=reason,
        image=f"{name}-image",
        image_id=f"docker-pullable://{name}-image@sha256:abc",
        hash="",
        restart_count=restarts,
    )


SANDBOX = SandboxStatus(id="sb", attempt=0, state=SandboxState.READY, created_at=T0, ip="10.0.0.5")


def runtime(
    *containers: ContainerStatus, sandboxes: tuple[SandboxStatus, ...] = (SANDBOX,)
) -> PodRuntimeStatus:
    ordered = tuple(sorted(containers, key=lambda c: c.created_at, reverse=True))
    return PodRuntimeStatus(
        uid=UID, name="web", namespace="default", sandboxes=sandboxes, containers=ordered
    )


@dataclass(frozen=True)
class Scenario:
    id: str
    pod: Mapping[str, Any]
    containers: tuple[ContainerStatus, ...]
    expected: str
    waiting: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    readiness: Mapping[str, bool] = field(default_factory=dict)
    started: Mapping[str, bool] = field(default_factory=dict)
    sandboxes: tuple[SandboxStatus, ...] = (SANDBOX,)
    previous_phase: str | None = None
    pod_is_terminal: bool = False


def generate(s: Scenario) -> tuple[Pod, PodStatus]:
    pod = make_pod(**s.pod)
    previous = PodStatus(phase=s.previous_phase) if s.previous_phase else None
    status = st.generate(
        pod,
        runtime(*s.containers, sandboxes=s.sandboxes),
        now=NOW,
        waiting_reasons=s.waiting,
        readiness=s.readiness,
        started=s.started,
        previous=previous,
        pod_is_terminal=s.pod_is_terminal,
    )
    return pod, status


PHASES = [
    Scenario("a new pod with nothing created is Pending", {}, (), "Pending", sandboxes=()),
    Scenario("a pod whose only container runs is Running", {}, (rc("app"),), "Running"),
    Scenario(
        "a pod whose init container still runs is Pending",
        {"inits": ("init1",)},
        (rc("init1"),),
        "Pending",
    ),
    Scenario(
        "a pod whose init container failed under Never is Failed",
        {"inits": ("init1",), "policy": "Never"},
        (rc("init1", EXITED, 1),),
        "Failed",
    ),
    Scenario(
        "a pod whose init container failed under OnFailure is Pending",
        {"inits": ("init1",), "policy": "OnFailure"},
        (rc("init1", EXITED, 1),),
        "Pending",
    ),
    Scenario(
        "a pod with a container still being created is Pending",
        {"containers": ("app", "web")},
        (rc("app"),),
        "Pending",
    ),
    Scenario(
        "a pod whose containers all succeeded under Never is Succeeded",
        {"policy": "Never", "containers": ("a", "b")},
        (rc("a", EXITED, 0), rc("b", EXITED, 0)),
        "Succeeded",
    ),
    Scenario(
        "a pod with a failed container under Never is Failed",
        {"policy": "Never", "containers": ("a", "b")},
        (rc("a", EXITED, 0), rc("b", EXITED, 2)),
        "Failed",
    ),
    Scenario(
        "a pod whose containers all succeeded under OnFailure is Succeeded",
        {"policy": "OnFailure"},
        (rc("app", EXITED, 0),),
        "Succeeded",
    ),
    Scenario(
        "a pod with a failed container under OnFailure is Running",
        {"policy": "OnFailure"},
        (rc("app", EXITED, 1),),
        "Running",
    ),
    Scenario(
        "a pod whose containers all exited under Always is Running",
        {},
        (rc("app", EXITED, 0),),
        "Running",
    ),
    Scenario(
        "a crash-looping container keeps the pod Running",
        {},
        (rc("app", EXITED, 1),),
        "Running",
        waiting={"app": CRASH},
    ),
    Scenario(
        "a terminal pod with stopped containers and a failure is Failed even under Always",
        {},
        (rc("app", EXITED, 1),),
        "Failed",
        pod_is_terminal=True,
    ),
    Scenario(
        "a terminal pod whose containers all succeeded is Succeeded",
        {},
        (rc("app", EXITED, 0),),
        "Succeeded",
        pod_is_terminal=True,
    ),
    Scenario(
        "a Succeeded pod never goes back to Running",
        {},
        (rc("app"),),
        "Succeeded",
        previous_phase="Succeeded",
    ),
    Scenario(
        "a Failed pod never goes back to Pending",
        {"containers": ("app", "web")},
        (rc("app"),),
        "Failed",
        previous_phase="Failed",
    ),
    Scenario(
        "a running sidecar next to running containers is Running",
        {"sidecars": ("proxy",)},
        (rc("proxy"), rc("app", at=2)),
        "Running",
    ),
    Scenario(
        "a sidecar that runs while no container has started keeps the pod Pending",
        {"sidecars": ("proxy",)},
        (rc("proxy"),),
        "Pending",
    ),
    Scenario(
        "a sidecar that exited does not hold back a Succeeded pod under Never",
        {"sidecars": ("proxy",), "policy": "Never"},
        (rc("proxy", EXITED, 137), rc("app", EXITED, 0, at=2)),
        "Succeeded",
    ),
]


@pytest.mark.parametrize("scenario", PHASES, ids=lambda s: s.id)
def test_phase(scenario: Scenario) -> None:
    _, status = generate(scenario)
    assert status.phase == scenario.expected


def cond(status: PodStatus, kind: str) -> PodCondition:
    (c,) = [c for c in status.conditions or [] if c.type == kind]
    return c


def summary(c: PodCondition) -> str:
    return " | ".join(x for x in (c.status, c.reason or "", c.message or "") if x)


CONDITIONS = [
    (
        Scenario(
            "Initialized lists the init containers that have not completed",
            {"inits": ("init1", "init2")},
            (rc("init1"),),
            "False | ContainersNotInitialized | containers with incomplete status: [init1 init2]",
        ),
        "Initialized",
    ),
    (
        Scenario(
            "Initialized is True once every init container succeeded",
            {"inits": ("init1",)},
            (rc("init1", EXITED, 0),),
            "True",
        ),
        "Initialized",
    ),
    (
        Scenario(
            "Initialized is True once a regular container started, whatever the init containers",
            {"inits": ("init1",)},
            (rc("app"),),
            "True",
        ),
        "Initialized",
    ),
    (
        Scenario(
            "Initialized waits for a sidecar to start",
            {"sidecars": ("proxy",)},
            (rc("proxy"),),
            "False | ContainersNotInitialized | containers with incomplete status: [proxy]",
            started={"proxy": False},
        ),
        "Initialized",
    ),
    (
        Scenario(
            "Initialized of a Succeeded pod says PodCompleted",
            {"policy": "Never"},
            (rc("app", EXITED, 0),),
            "True | PodCompleted",
        ),
        "Initialized",
    ),
    (
        Scenario(
            "ContainersReady lists the unready containers",
            {"containers": ("app", "web"), "readiness_probe": ("app",)},
            (rc("app"), rc("web")),
            "False | ContainersNotReady | containers with unready status: [app]",
        ),
        "ContainersReady",
    ),
    (
        Scenario(
            "ContainersReady lists containers the runtime does not know yet as unready",
            {"containers": ("app", "web")},
            (rc("app"),),
            "False | ContainersNotReady | containers with unready status: [web]",
        ),
        "ContainersReady",
    ),
    (
        Scenario(
            "ContainersReady counts sidecars",
            {"sidecars": ("proxy",), "readiness_probe": ("proxy",)},
            (rc("proxy"), rc("app", at=2)),
            "False | ContainersNotReady | containers with unready status: [proxy]",
        ),
        "ContainersReady",
    ),
    (
        Scenario(
            "ContainersReady is True when every container passes readiness",
            {"readiness_probe": ("app",)},
            (rc("app"),),
            "True",
            readiness={"app": True},
        ),
        "ContainersReady",
    ),
    (
        Scenario(
            "ContainersReady of a Succeeded pod says PodCompleted",
            {"policy": "Never"},
            (rc("app", EXITED, 0),),
            "False | PodCompleted",
        ),
        "ContainersReady",
    ),
    (
        Scenario(
            "ContainersReady of a Failed pod says PodFailed",
            {"policy": "Never"},
            (rc("app", EXITED, 1),),
            "False | PodFailed",
        ),
        "ContainersReady",
    ),
    (
        Scenario(
            "Ready repeats why the containers are not ready",
            {"readiness_probe": ("app",)},
            (rc("app"),),
            "False | ContainersNotReady | containers with unready status: [app]",
        ),
        "Ready",
    ),
    (
        Scenario(
            "Ready waits for the readiness gates",
            {"readiness_gates": ("example.com/lb",)},
            (rc("app"),),
            "False | ReadinessGatesNotReady | corresponding condition of pod readiness gate"
            ' "example.com/lb" does not exist.',
        ),
        "Ready",
    ),
    (
        Scenario("Ready is True when every container is ready", {}, (rc("app"),), "True"),
        "Ready",
    ),
    (
        Scenario(
            "PodReadyToStartContainers is False without a sandbox",
            {},
            (),
            "False",
            sandboxes=(),
        ),
        "PodReadyToStartContainers",
    ),
    (
        Scenario("PodReadyToStartContainers is True with a ready sandbox", {}, (), "True"),
        "PodReadyToStartContainers",
    ),
    (
        Scenario("PodScheduled is always True on the node", {}, (), "True"),
        "PodScheduled",
    ),
]


@pytest.mark.parametrize(
    ("scenario", "kind"), CONDITIONS, ids=lambda v: v.id if isinstance(v, Scenario) else ""
)
def test_condition(scenario: Scenario, kind: str) -> None:
    _, status = generate(scenario)
    assert summary(cond(status, kind)) == scenario.expected


def test_the_five_conditions_come_in_the_kubelets_order() -> None:
    _, status = generate(Scenario("", {}, (rc("app"),), ""))
    assert [c.type for c in status.conditions or []] == [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]


def test_conditions_set_by_others_are_kept_before_the_kubelets() -> None:
    gate = {"type": "example.com/lb", "status": "True"}
    pod = make_pod(readiness_gates=("example.com/lb",), status={"conditions": [gate]})
    status = st.generate(pod, runtime(rc("app")), now=NOW)
    assert [c.type for c in status.conditions or []][:1] == ["example.com/lb"]


def test_a_satisfied_readiness_gate_lets_the_pod_be_ready() -> None:
    gate = {"type": "example.com/lb", "status": "True"}
    pod = make_pod(readiness_gates=("example.com/lb",), status={"conditions": [gate]})
    status = st.generate(pod, runtime(rc("app")), now=NOW)
    assert cond(status, "Ready").status == "True"


def test_an_unchanged_condition_keeps_its_transition_time() -> None:
    pod = make_pod()
    first = st.generate(pod, runtime(rc("app")), now=T0)
    second = st.generate(pod, runtime(rc("app")), now=NOW, previous=first)
    assert cond(second, "Ready").lastTransitionTime == T0


def test_a_changed_condition_takes_the_current_time() -> None:
    pod = make_pod(readiness_probe=("app",))
    first = st.generate(pod, runtime(rc("app")), now=T0)
    second = st.generate(pod, runtime(rc("app")), now=NOW, previous=first, readiness={"app": True})
    assert cond(second, "Ready").lastTransitionTime == NOW


def only(status: PodStatus, name: str) -> V1ContainerStatus:
    (cs,) = [
        c
        for c in [*(status.initContainerStatuses or []), *(status.containerStatuses or [])]
        if c.name == name
    ]
    return cs


def state_summary(cs: V1ContainerStatus) -> str:
    state = cs.state or ContainerState()
    if state.running is not None:
        return "running"
    if state.terminated is not None:
        t = state.terminated
        return f"terminated {t.exitCode} {t.reason}"
    w = state.waiting
    assert w is not None
    return f"waiting {w.reason or ''}".strip()


CONTAINER_STATES = [
    Scenario("a running container is running", {}, (rc("app"),), "running"),
    Scenario(
        "a container not created yet is waiting in ContainerCreating",
        {},
        (),
        "waiting ContainerCreating",
    ),
    Scenario(
        "a container of a pod with init containers waits in PodInitializing",
        {"inits": ("init1",)},
        (rc("init1"),),
        "waiting PodInitializing",
    ),
    Scenario(
        "a container created but not started is waiting without a reason",
        {},
        (rc("app", CREATED),),
        "waiting",
    ),
    Scenario(
        "a container that exited 0 is terminated Completed",
        {"policy": "Never"},
        (rc("app", EXITED, 0),),
        "terminated 0 Completed",
    ),
    Scenario(
        "a container that exited non-zero is terminated Error",
        {"policy": "Never"},
        (rc("app", EXITED, 3),),
        "terminated 3 Error",
    ),
    Scenario(
        "an OOM-killed container is terminated OOMKilled",
        {"policy": "Never"},
        (rc("app", EXITED, 137, reason="OOMKilled"),),
        "terminated 137 OOMKilled",
    ),
    Scenario(
        "a crashed container in back-off is waiting in CrashLoopBackOff",
        {},
        (rc("app", EXITED, 1),),
        "waiting CrashLoopBackOff",
        waiting={"app": CRASH},
    ),
    Scenario(
        "a container whose image cannot be pulled is waiting in ErrImagePull",
        {},
        (),
        "waiting ErrImagePull",
        waiting={"app": ("ErrImagePull", "pull access denied")},
    ),
    Scenario(
        "a container that will not be restarted under Never ignores its last start failure",
        {"policy": "Never"},
        (rc("app", EXITED, 1),),
        "terminated 1 Error",
        waiting={"app": CRASH},
    ),
    Scenario(
        "a succeeded init container ignores its last start failure",
        {"inits": ("init1",)},
        (rc("init1", EXITED, 0), rc("app", at=9)),
        "running",
        waiting={"init1": CRASH},
    ),
]


@pytest.mark.parametrize("scenario", CONTAINER_STATES, ids=lambda s: s.id)
def test_container_state(scenario: Scenario) -> None:
    _, status = generate(scenario)
    containers = make_pod(**scenario.pod).spec.containers  # type: ignore[union-attr]
    assert state_summary(only(status, containers[0].name)) == scenario.expected


def test_a_running_container_reports_its_docker_identity() -> None:
    _, status = generate(Scenario("", {}, (rc("app", restarts=2, id="abc"),), ""))
    cs = only(status, "app")
    assert (cs.containerID, cs.image, cs.imageID, cs.restartCount) == (
        "docker://abc",
        "app-image",
        "docker-pullable://app-image@sha256:abc",
        2,
    )


def test_a_running_container_reports_when_it_started() -> None:
    _, status = generate(Scenario("", {}, (rc("app"),), ""))
    assert only(status, "app").state == ContainerState(
        running=ContainerStateRunning(startedAt=T0 + timedelta(seconds=1))
    )


def test_the_previous_instance_becomes_the_last_state() -> None:
    containers = (rc("app", EXITED, 1, at=0), rc("app", at=10, restarts=1))
    _, status = generate(Scenario("", {}, containers, ""))
    last = only(status, "app").lastState
    assert last is not None
    assert last.terminated == ContainerStateTerminated(
        exitCode=1,
        reason="Error",
        startedAt=T0 + timedelta(seconds=1),
        finishedAt=T0 + timedelta(seconds=5),
        containerID="docker://app-0",
    )


def test_a_crash_loop_wait_carries_the_kubelets_message() -> None:
    _, status = generate(Scenario("", {}, (rc("app", EXITED, 1),), "", waiting={"app": CRASH}))
    waiting = (only(status, "app").state or ContainerState()).waiting
    assert waiting is not None
    assert waiting.message == CRASH[1]


def test_a_crash_loop_wait_keeps_the_crash_as_last_state() -> None:
    _, status = generate(Scenario("", {}, (rc("app", EXITED, 1),), "", waiting={"app": CRASH}))
    last = only(status, "app").lastState
    assert last is not None
    assert last.terminated is not None
    assert last.terminated.exitCode == 1


def test_a_vanished_container_that_was_running_is_terminated_as_unknown() -> None:
    pod = make_pod()
    first = st.generate(pod, runtime(rc("app", restarts=1)), now=T0)
    second = st.generate(pod, runtime(rc("app", UNKNOWN)), now=NOW, previous=first)
    cs = only(second, "app")
    assert (state_summary(cs), cs.restartCount) == ("terminated 137 ContainerStatusUnknown", 2)


def test_a_container_that_disappeared_while_running_shows_as_stopped() -> None:
    pod = make_pod()
    first = st.generate(pod, runtime(rc("app", restarts=1)), now=T0)
    second = st.generate(pod, runtime(), now=NOW, previous=first)
    cs = only(second, "app")
    last = cs.lastState.terminated if cs.lastState is not None else None
    assert (last is not None and last.reason, cs.restartCount) == ("ContainerStatusUnknown", 2)


READY_AND_STARTED = [
    Scenario("a running container without probes is ready and started", {}, (rc("app"),), "T T"),
    Scenario(
        "a container with a readiness probe is not ready before its first success",
        {"readiness_probe": ("app",)},
        (rc("app"),),
        "F T",
    ),
    Scenario(
        "a container whose readiness probe succeeded is ready",
        {"readiness_probe": ("app",)},
        (rc("app"),),
        "T T",
        readiness={"app": True},
    ),
    Scenario(
        "a container with a startup probe is neither started nor ready before its success",
        {"startup_probe": ("app",)},
        (rc("app"),),
        "F F",
    ),
    Scenario(
        "a container whose startup probe succeeded is started",
        {"startup_probe": ("app",)},
        (rc("app"),),
        "T T",
        started={"app": True},
    ),
    Scenario(
        "a terminated container is neither ready nor started",
        {"policy": "Never"},
        (rc("app", EXITED, 0),),
        "F F",
    ),
]


@pytest.mark.parametrize("scenario", READY_AND_STARTED, ids=lambda s: s.id)
def test_ready_and_started(scenario: Scenario) -> None:
    _, status = generate(scenario)
    cs = only(status, "app")
    assert f"{'T' if cs.ready else 'F'} {'T' if cs.started else 'F'}" == scenario.expected


def test_a_succeeded_init_container_is_ready() -> None:
    _, status = generate(Scenario("", {"inits": ("init1",)}, (rc("init1", EXITED, 0),), ""))
    assert only(status, "init1").ready


def test_container_statuses_are_sorted_by_name() -> None:
    _, status = generate(Scenario("", {"containers": ("web", "app")}, (rc("web"), rc("app")), ""))
    assert [c.name for c in status.containerStatuses or []] == ["app", "web"]


def test_init_container_statuses_follow_the_spec_order() -> None:
    _, status = generate(Scenario("", {"inits": ("zeta", "alpha")}, (), ""))
    assert [c.name for c in status.initContainerStatuses or []] == ["zeta", "alpha"]


def test_pod_ips_come_from_the_sandbox_ipv4_first() -> None:
    sandbox = SandboxStatus(
        id="sb",
        attempt=0,
        state=SandboxState.READY,
        created_at=T0,
        ip="fd00::5",
        additional_ips=("10.0.0.5",),
    )
    _, status = generate(Scenario("", {}, (rc("app"),), "", sandboxes=(sandbox,)))
    assert (status.podIP, [p.ip for p in status.podIPs or []]) == (
        "10.0.0.5",
        ["10.0.0.5", "fd00::5"],
    )


def test_a_pod_without_a_ready_sandbox_has_no_ip() -> None:
    dead = SandboxStatus(
        id="sb", attempt=0, state=SandboxState.NOTREADY, created_at=T0, ip="1.2.3.4"
    )
    _, status = generate(Scenario("", {}, (), "", sandboxes=(dead,)))
    assert status.podIP is None


def test_the_host_ip_is_reported() -> None:
    status = st.generate(make_pod(), runtime(rc("app")), now=NOW, host_ip="192.168.1.2")
    assert (status.hostIP, [h.ip for h in status.hostIPs or []]) == (
        "192.168.1.2",
        ["192.168.1.2"],
    )


def test_a_host_network_pod_takes_the_host_ip() -> None:
    pod = make_pod(host_network=True)
    host_sandbox = SandboxStatus(
        id="sb", attempt=0, state=SandboxState.READY, created_at=T0, host_network=True
    )
    status = st.generate(
        pod, runtime(rc("app"), sandboxes=(host_sandbox,)), now=NOW, host_ip="192.168.1.2"
    )
    assert status.podIP == "192.168.1.2"


def test_the_start_time_is_set_on_first_generation() -> None:
    assert st.generate(make_pod(), runtime(), now=NOW).startTime == NOW


def test_the_start_time_never_changes() -> None:
    pod = make_pod()
    first = st.generate(pod, runtime(), now=T0)
    assert st.generate(pod, runtime(), now=NOW, previous=first).startTime == T0


def test_the_phase_reason_is_kept_while_the_phase_holds() -> None:
    previous = PodStatus(phase="Running", reason="Evicted", message="node pressure")
    status = st.generate(make_pod(), runtime(rc("app")), now=NOW, previous=previous)
    assert (status.reason, status.message) == ("Evicted", "node pressure")


def test_generate_does_not_change_its_inputs() -> None:
    pod = make_pod(status={"conditions": [{"type": "example.com/lb", "status": "True"}]})
    before = pod.to_dict()
    st.generate(pod, runtime(rc("app")), now=NOW)
    assert pod.to_dict() == before


CPU_MEM = {"cpu": "100m", "memory": "64Mi"}
QOS = [
    ("a pod without requests or limits is BestEffort", {}, "BestEffort"),
    ("a pod with requests only is Burstable", {"app": {"requests": CPU_MEM}}, "Burstable"),
    (
        "a pod whose requests equal its cpu and memory limits is Guaranteed",
        {"app": {"requests": CPU_MEM, "limits": CPU_MEM}},
        "Guaranteed",
    ),
    (
        "a pod with cpu and memory limits only is Guaranteed",
        {"app": {"limits": CPU_MEM}},
        "Guaranteed",
    ),
    ("a pod with only a cpu limit is Burstable", {"app": {"limits": {"cpu": "1"}}}, "Burstable"),
    (
        "a pod whose requests are below its limits is Burstable",
        {"app": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": CPU_MEM}},
        "Burstable",
    ),
    (
        "quantities in other units compare equal",
        {"app": {"requests": {"cpu": "0.1", "memory": "67108864"}, "limits": CPU_MEM}},
        "Guaranteed",
    ),
    (
        "a container without resources next to a guaranteed one makes the pod Burstable",
        {"app": {"limits": CPU_MEM}},
        "Burstable",
    ),
    (
        "zero requests do not count",
        {"app": {"requests": {"cpu": "0", "memory": "0"}}},
        "BestEffort",
    ),
]


@pytest.mark.parametrize(("id", "resources", "expected"), QOS, ids=[q[0] for q in QOS])
def test_qos_class(id: str, resources: dict[str, Any], expected: str) -> None:
    containers = ("app", "web") if id.startswith("a container without") else ("app",)
    assert qos_class(make_pod(containers=containers, resources=resources)) == expected


def test_the_qos_class_already_in_the_status_wins() -> None:
    assert qos_class(make_pod(status={"qosClass": "Burstable"})) == "Burstable"


KUBECTL = [
    Scenario("a new pod shows ContainerCreating", {}, (), "ContainerCreating 0/1"),
    Scenario("a running ready pod shows Running", {}, (rc("app"),), "Running 1/1"),
    Scenario(
        "a running pod that is not ready shows Running",
        {"readiness_probe": ("app",)},
        (rc("app"),),
        "Running 0/1",
    ),
    Scenario(
        "the first of two init containers running shows Init:0/2",
        {"inits": ("init1", "init2")},
        (rc("init1"),),
        "Init:0/2 0/1",
    ),
    Scenario(
        "the second of two init containers running shows Init:1/2",
        {"inits": ("init1", "init2")},
        (rc("init1", EXITED, 0), rc("init2", at=9)),
        "Init:1/2 0/1",
    ),
    Scenario(
        "a crash-looping init container shows Init:CrashLoopBackOff",
        {"inits": ("init1",)},
        (rc("init1", EXITED, 1),),
        "Init:CrashLoopBackOff 0/1",
        waiting={"init1": CRASH},
    ),
    Scenario(
        "a failed init container under Never shows Init:Error",
        {"inits": ("init1",), "policy": "Never"},
        (rc("init1", EXITED, 1),),
        "Init:Error 0/1",
    ),
    Scenario(
        "completed init containers and a container not started yet show PodInitializing",
        {"inits": ("init1",)},
        (rc("init1", EXITED, 0),),
        "PodInitializing 0/1",
    ),
    Scenario(
        "a crash-looping container shows CrashLoopBackOff",
        {},
        (rc("app", EXITED, 1),),
        "CrashLoopBackOff 0/1",
        waiting={"app": CRASH},
    ),
    Scenario(
        "an image that cannot be pulled shows ErrImagePull",
        {},
        (),
        "ErrImagePull 0/1",
        waiting={"app": ("ErrImagePull", "")},
    ),
    Scenario(
        "an image in pull back-off shows ImagePullBackOff",
        {},
        (),
        "ImagePullBackOff 0/1",
        waiting={"app": ("ImagePullBackOff", 'Back-off pulling image "app-image"')},
    ),
    Scenario(
        "a pod that ran to completion shows Completed",
        {"policy": "Never"},
        (rc("app", EXITED, 0),),
        "Completed 0/1",
    ),
    Scenario(
        "a pod whose container failed shows Error",
        {"policy": "Never"},
        (rc("app", EXITED, 1),),
        "Error 0/1",
    ),
    Scenario(
        "an OOM-killed container shows OOMKilled",
        {"policy": "Never"},
        (rc("app", EXITED, 137, reason="OOMKilled"),),
        "OOMKilled 0/1",
    ),
    Scenario(
        "a completed container next to a running one shows NotReady",
        {"containers": ("a", "b"), "policy": "OnFailure"},
        (rc("a"), rc("b", EXITED, 0)),
        "NotReady 1/2",
    ),
    Scenario(
        "a pod being deleted shows Terminating",
        {"deleted": True},
        (rc("app"),),
        "Terminating 1/1",
    ),
    Scenario(
        "a started sidecar counts as a ready container",
        {"sidecars": ("proxy",)},
        (rc("proxy"), rc("app", at=2)),
        "Running 2/2",
    ),
]


@pytest.mark.parametrize("scenario", KUBECTL, ids=lambda s: s.id)
def test_kubectl_columns(scenario: Scenario) -> None:
    pod, status = generate(scenario)
    assert (
        f"{printpod.kubectl_status(pod, status)} {printpod.ready_string(pod, status)}"
        == scenario.expected
    )


def test_an_init_container_killed_without_reason_shows_its_exit_code() -> None:
    pod = make_pod(inits=("init1",))
    status = PodStatus(
        phase="Pending",
        initContainerStatuses=[
            V1ContainerStatus(
                name="init1",
                image="i",
                imageID="",
                ready=False,
                restartCount=0,
                state=ContainerState(terminated=ContainerStateTerminated(exitCode=3)),
            )
        ],
    )
    assert printpod.kubectl_status(pod, status) == "Init:ExitCode:3"


def test_a_deleted_pod_on_a_lost_node_shows_unknown() -> None:
    status = PodStatus(phase="Running", reason="NodeLost")
    assert printpod.kubectl_status(make_pod(deleted=True), status) == "Unknown"


def test_a_deleted_pod_that_already_finished_keeps_its_status() -> None:
    pod = make_pod(deleted=True, policy="Never")
    status = st.generate(pod, runtime(rc("app", EXITED, 0)), now=NOW)
    assert printpod.kubectl_status(pod, status) == "Completed"


def test_a_gated_pod_has_the_api_servers_scheduling_gated_condition_and_nothing_else() -> None:
    pod = make_pod()
    status = st.gated_status(pod, now=NOW)
    assert (status.phase, status.qosClass) == ("Pending", "BestEffort")
    assert [c.to_dict() for c in status.conditions or []] == [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "SchedulingGated",
            "message": "Scheduling is blocked due to non-empty scheduling gates",
            "lastTransitionTime": "2024-01-01T01:00:00Z",
        }
    ]
    assert status.containerStatuses is None
    assert status.startTime is None


def test_a_gated_pod_keeps_its_condition_transition_time() -> None:
    pod = make_pod()
    first = st.gated_status(pod, now=T0)
    later = st.gated_status(pod, now=NOW, previous=first)
    assert later.conditions is not None
    assert later.conditions[0].lastTransitionTime == T0


def test_kubectl_shows_a_gated_pod_as_scheduling_gated_with_no_container_ready() -> None:
    pod = make_pod(containers=("a", "b"))
    status = st.gated_status(pod, now=NOW)
    assert (printpod.kubectl_status(pod, status), printpod.ready_string(pod, status)) == (
        "SchedulingGated",
        "0/2",
    )
