"""status.generate for pods with per-container restart rules and restarts in place.

The phase rows follow the kubelet's ``getPhase`` with ``ContainerRestartRules`` (a stopped
container that will start again keeps the pod Running); the condition rows follow
``TestGenerateAllContainersRestartingCondition`` and ``TestShouldAllContainersRestart``
(``pkg/kubelet/status/generate_test.go``, ``pkg/kubelet/container/helpers_test.go``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import builders
import pytest
from lightkube.models.core_v1 import (
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    Pod,
    PodCondition,
    PodStatus,
)
from lightkube.models.core_v1 import ContainerStatus as V1ContainerStatus

from asynckubelet.node import status as st
from asynckubelet.runtime import actions
from asynckubelet.runtime.types import ContainerState as RState
from asynckubelet.runtime.types import (
    ContainerStatus,
    PodRuntimeStatus,
    SandboxState,
    SandboxStatus,
)

T0 = datetime(2024, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(hours=1)
RUNNING, EXITED = RState.RUNNING, RState.EXITED
SANDBOX = SandboxStatus(id="sb", attempt=0, state=SandboxState.READY, created_at=T0, ip="10.0.0.5")


def rule(action: str, operator: str, *values: int) -> dict[str, Any]:
    return {"action": action, "exitCodes": {"operator": operator, "values": list(values)}}


RESTART_42 = rule("Restart", "In", 42)
RESTART_ALL_42 = rule("RestartAllContainers", "In", 42)


def make_pod(
    containers: Mapping[str, Mapping[str, Any]],
    *,
    policy: str = "Always",
    inits: Mapping[str, Mapping[str, Any]] | None = None,
) -> Pod:
    def container(name: str, extra: Mapping[str, Any]) -> dict[str, Any]:
        return builders.container(name, f"{name}-image", **extra)

    spec: dict[str, Any] = {"restartPolicy": policy}
    if inits:
        spec["initContainers"] = [container(n, e) for n, e in inits.items()]
    return builders.pod(
        "web", uid="u", containers=[container(n, e) for n, e in containers.items()], **spec
    )


def rc(name: str, state: RState = RUNNING, exit_code: int = 0, *, at: int = 0) -> ContainerStatus:
    created = T0 + timedelta(seconds=at)
    return ContainerStatus(
        id=f"{name}-{at}",
        name=name,
        state=state,
        created_at=created,
        started_at=created + timedelta(seconds=1),
        finished_at=created + timedelta(seconds=5) if state is EXITED else None,
        exit_code=exit_code,
        image=f"{name}-image",
    )


def runtime(*containers: ContainerStatus) -> PodRuntimeStatus:
    return PodRuntimeStatus(
        uid="u",
        name="web",
        namespace="default",
        sandboxes=(SANDBOX,),
        containers=tuple(sorted(containers, key=lambda c: c.created_at, reverse=True)),
    )


@dataclass(frozen=True)
class PhaseCase:
    id: str
    pod: Pod
    containers: tuple[ContainerStatus, ...]
    phase: str


PHASES = [
    PhaseCase(
        "a container that its own Always restarts keeps a Never pod Running",
        make_pod({"app": {"restartPolicy": "Always"}}, policy="Never"),
        (rc("app", EXITED, 1),),
        "Running",
    ),
    PhaseCase(
        "a container that succeeded under its own OnFailure lets a Never pod succeed",
        make_pod({"app": {"restartPolicy": "OnFailure"}}, policy="Never"),
        (rc("app", EXITED, 0),),
        "Succeeded",
    ),
    PhaseCase(
        "a container that failed under its own Never fails an Always pod",
        make_pod({"app": {"restartPolicy": "Never"}}),
        (rc("app", EXITED, 1),),
        "Failed",
    ),
    PhaseCase(
        "a container that succeeded under its own Never lets an Always pod succeed",
        make_pod({"app": {"restartPolicy": "Never"}}),
        (rc("app", EXITED, 0),),
        "Succeeded",
    ),
    PhaseCase(
        "an exit code a Restart rule lists keeps a Never pod Running",
        make_pod(
            {"app": {"restartPolicy": "Never", "restartPolicyRules": [RESTART_42]}}, policy="Never"
        ),
        (rc("app", EXITED, 42),),
        "Running",
    ),
    PhaseCase(
        "an exit code no rule lists fails a Never pod",
        make_pod(
            {"app": {"restartPolicy": "Never", "restartPolicyRules": [RESTART_42]}}, policy="Never"
        ),
        (rc("app", EXITED, 1),),
        "Failed",
    ),
    PhaseCase(
        "one container stopped for good and one that will restart keep the pod Running",
        make_pod({"a": {"restartPolicy": "Never"}, "b": {}}),
        (rc("a", EXITED, 1), rc("b", EXITED, 1)),
        "Running",
    ),
    PhaseCase(
        "an init container failing under its own OnFailure keeps a Never pod Pending",
        make_pod({"app": {}}, policy="Never", inits={"init": {"restartPolicy": "OnFailure"}}),
        (rc("init", EXITED, 1),),
        "Pending",
    ),
    PhaseCase(
        "an init container failing under its own Never fails an Always pod",
        make_pod({"app": {}}, inits={"init": {"restartPolicy": "Never"}}),
        (rc("init", EXITED, 1),),
        "Failed",
    ),
    PhaseCase(
        "an init container failing under the pod's Never fails the pod (unchanged)",
        make_pod({"app": {}}, policy="Never", inits={"init": {}}),
        (rc("init", EXITED, 1),),
        "Failed",
    ),
    PhaseCase(
        "the exit that asks to restart all containers keeps a Never pod Running",
        make_pod(
            {"app": {"restartPolicy": "Never", "restartPolicyRules": [RESTART_ALL_42]}},
            policy="Never",
        ),
        (rc("app", EXITED, 42),),
        "Running",
    ),
]


@pytest.mark.parametrize("case", PHASES, ids=lambda c: c.id)
def test_phase(case: PhaseCase) -> None:
    status = st.generate(case.pod, runtime(*case.containers), now=NOW)
    assert status.phase == case.phase


IN_PLACE = make_pod(
    {"app": {}, "trigger": {"restartPolicy": "Never", "restartPolicyRules": [RESTART_ALL_42]}},
    policy="Never",
)
RESTARTING = PodCondition(type="AllContainersRestarting", status="True")


@dataclass(frozen=True)
class ConditionCase:
    id: str
    pod: Pod
    containers: tuple[ContainerStatus, ...]
    expected: str | None
    previous: Sequence[PodCondition] = ()


def summary(c: PodCondition) -> str:
    return " ".join(x for x in (c.status, c.reason or "", c.message or "") if x)


CONDITIONS = [
    ConditionCase(
        "a pod without a RestartAllContainers rule has no such condition",
        make_pod({"app": {}}),
        (rc("app"),),
        None,
    ),
    ConditionCase("all containers running: False", IN_PLACE, (rc("app"), rc("trigger")), "False"),
    ConditionCase(
        "the trigger exited with a listed code: True, the kubelet's reason and message",
        IN_PLACE,
        (rc("app"), rc("trigger", EXITED, 42)),
        "True RestartAllContainersStarted container exited with restart policy rule",
    ),
    ConditionCase(
        "the trigger exited with another code: False",
        IN_PLACE,
        (rc("app"), rc("trigger", EXITED, 1)),
        "False",
    ),
    ConditionCase(
        "a restart under way stays True while containers are left",
        IN_PLACE,
        (rc("app"),),
        "True RestartAllContainersStarted container exited with restart policy rule",
        previous=(RESTARTING,),
    ),
    ConditionCase(
        "once every container is removed: False",
        IN_PLACE,
        (),
        "False",
        previous=(RESTARTING,),
    ),
    ConditionCase(
        "a failed pod: False, PodFailed",
        make_pod(
            {"app": {"restartPolicy": "Never", "restartPolicyRules": [RESTART_ALL_42]}},
            policy="Never",
        ),
        (rc("app", EXITED, 1),),
        "False PodFailed",
    ),
    ConditionCase(
        "a succeeded pod: False, PodCompleted",
        make_pod(
            {"app": {"restartPolicy": "Never", "restartPolicyRules": [RESTART_ALL_42]}},
            policy="Never",
        ),
        (rc("app", EXITED, 0),),
        "False PodCompleted",
    ),
]


@pytest.mark.parametrize("case", CONDITIONS, ids=lambda c: c.id)
def test_all_containers_restarting_condition(case: ConditionCase) -> None:
    previous = PodStatus(conditions=list(case.previous)) if case.previous else None
    status = st.generate(case.pod, runtime(*case.containers), now=NOW, previous=previous)
    found = [c for c in status.conditions or [] if c.type == "AllContainersRestarting"]
    assert [summary(c) for c in found] == ([] if case.expected is None else [case.expected])


def test_the_restart_condition_comes_after_the_five_conditions() -> None:
    status = st.generate(IN_PLACE, runtime(rc("app"), rc("trigger")), now=NOW)
    assert [c.type for c in status.conditions or []] == [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
        "AllContainersRestarting",
    ]


def running_status(name: str, restarts: int = 0) -> V1ContainerStatus:
    return V1ContainerStatus(
        name=name,
        image=f"{name}-image",
        imageID="",
        ready=True,
        restartCount=restarts,
        state=ContainerState(running=ContainerStateRunning(startedAt=T0)),
    )


def test_removed_containers_read_restarting_all_containers_and_count_a_restart() -> None:
    previous = PodStatus(
        phase="Running",
        conditions=[RESTARTING],
        containerStatuses=[running_status("app", 2), running_status("trigger")],
    )
    status = st.generate(IN_PLACE, runtime(), now=NOW, previous=previous)
    app = next(c for c in status.containerStatuses or [] if c.name == "app")
    assert app.state is not None
    assert app.state.waiting is not None
    assert app.lastState is not None
    assert app.lastState.terminated is not None
    assert (
        app.state.waiting.reason,
        app.state.waiting.message,
        app.lastState.terminated.reason,
        app.lastState.terminated.exitCode,
        app.restartCount,
    ) == (
        "RestartingAllContainers",
        "The container is removed because RestartAllContainers in place",
        "RestartingAllContainers",
        137,
        3,
    )


def test_a_pod_restarting_in_place_stays_running_with_every_container_removed() -> None:
    previous = PodStatus(
        phase="Running",
        conditions=[RESTARTING],
        containerStatuses=[running_status("app"), running_status("trigger")],
    )
    first = st.generate(IN_PLACE, runtime(), now=NOW, previous=previous)
    second = st.generate(IN_PLACE, runtime(), now=NOW, previous=first)
    assert (first.phase, second.phase) == ("Running", "Running")


def test_a_new_instance_keeps_the_restart_count_its_removed_predecessor_reached() -> None:
    waiting = V1ContainerStatus(
        name="app",
        image="app-image",
        imageID="",
        ready=False,
        restartCount=3,
        state=ContainerState(waiting=ContainerStateWaiting(reason="RestartingAllContainers")),
        lastState=ContainerState(
            terminated=ContainerStateTerminated(exitCode=137, reason="RestartingAllContainers")
        ),
    )
    previous = PodStatus(phase="Running", containerStatuses=[waiting])
    status = st.generate(make_pod({"app": {}}), runtime(rc("app")), now=NOW, previous=previous)
    assert (status.containerStatuses or [])[0].restartCount == 3


def test_a_pod_restarting_in_place_stays_initialized_while_its_init_containers_rerun() -> None:
    pod = make_pod(
        {"app": {"restartPolicy": "Never", "restartPolicyRules": [RESTART_ALL_42]}},
        inits={"init": {}},
    )
    previous = PodStatus(conditions=[PodCondition(type="Initialized", status="True")])
    status = st.generate(pod, runtime(rc("init")), now=NOW, previous=previous)
    initialized = next(c for c in status.conditions or [] if c.type == "Initialized")
    assert initialized.status == "True"


def test_a_pod_without_restart_rules_is_initialized_again_from_its_init_containers() -> None:
    pod = make_pod({"app": {}}, inits={"init": {}})
    previous = PodStatus(conditions=[PodCondition(type="Initialized", status="True")])
    status = st.generate(pod, runtime(rc("init")), now=NOW, previous=previous)
    initialized = next(c for c in status.conditions or [] if c.type == "Initialized")
    assert initialized.status == "False"


def terminated_status(name: str, exit_code: int) -> V1ContainerStatus:
    return V1ContainerStatus(
        name=name,
        image=f"{name}-image",
        imageID="",
        ready=False,
        restartCount=0,
        state=ContainerState(terminated=ContainerStateTerminated(exitCode=exit_code)),
    )


@dataclass(frozen=True)
class ShouldRestartCase:
    id: str
    pod: Pod
    containers: tuple[ContainerStatus, ...]
    expected: bool
    api: PodStatus | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


NEVER_RULES = {"restartPolicy": "Never", "restartPolicyRules": [RESTART_ALL_42]}
SHOULD_ALL_CONTAINERS_RESTART = [
    ShouldRestartCase(
        "pod marked with condition",
        make_pod({"regular": NEVER_RULES}),
        (rc("regular"),),
        True,
        api=PodStatus(conditions=[RESTARTING]),
    ),
    ShouldRestartCase(
        "regular container exited with matching rules",
        make_pod({"regular": NEVER_RULES}),
        (rc("regular", EXITED, 42),),
        True,
    ),
    ShouldRestartCase(
        "regular container exited with non-matching rules",
        make_pod({"regular": NEVER_RULES}),
        (rc("regular", EXITED, 1),),
        False,
    ),
    ShouldRestartCase(
        "regular container running",
        make_pod({"regular": NEVER_RULES}),
        (rc("regular"),),
        False,
    ),
    ShouldRestartCase(
        "init container exited with matching rules",
        make_pod({"regular": {}}, inits={"init": NEVER_RULES}),
        (rc("init", EXITED, 42),),
        True,
    ),
    ShouldRestartCase(
        "sidecar exited with matching rules",
        make_pod(
            {"regular": {}},
            inits={"sidecar": {"restartPolicy": "Always", "restartPolicyRules": [RESTART_ALL_42]}},
        ),
        (rc("sidecar", EXITED, 42), rc("regular")),
        True,
    ),
    ShouldRestartCase(
        "the last status holds the matching exit, the container is gone",
        make_pod({"regular": NEVER_RULES}),
        (),
        True,
        api=PodStatus(containerStatuses=[terminated_status("regular", 42)]),
    ),
    ShouldRestartCase(
        "a rule with the Restart action restarts only its container",
        make_pod({"regular": {"restartPolicy": "Never", "restartPolicyRules": [RESTART_42]}}),
        (rc("regular", EXITED, 42),),
        False,
    ),
]


@pytest.mark.parametrize("case", SHOULD_ALL_CONTAINERS_RESTART, ids=lambda c: c.id)
def test_should_all_containers_restart(case: ShouldRestartCase) -> None:
    result = actions.should_all_containers_restart(case.pod, runtime(*case.containers), case.api)
    assert result is case.expected


def test_a_rejected_pod_is_failed_with_the_kubelets_reason_and_message() -> None:
    pod = make_pod({"app": {"resources": {"requests": {"cpu": "8"}}}})
    status = st.rejected_status(
        pod,
        reason="OutOfcpu",
        message="Node didn't have enough resource: cpu, requested: 8000, used: 0, capacity: 2000",
        now=NOW,
    )
    assert (status.phase, status.reason, status.message, status.qosClass, status.startTime) == (
        "Failed",
        "OutOfcpu",
        "Pod was rejected: Node didn't have enough resource: cpu, requested: 8000, used: 0,"
        " capacity: 2000",
        "Burstable",
        NOW,
    )
