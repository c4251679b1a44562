"""The kubelet's own table tests for computePodActions, ported as data.

Ported from ``pkg/kubelet/kuberuntime/kuberuntime_manager_test.go`` (the release where the
legacy sidecar path is gated off) and ``pkg/kubelet/kuberuntime/util/util_test.go``:

* ``TestComputePodActions``: all 17 cases.
* ``TestComputePodActionsWithInitContainers``: all 15 cases. The kubelet also runs them a
  second time as ``...WithLegacySidecarContainers``, expecting ``NextInitContainerToStart``
  as well; here both fields are checked in the same case.
* ``TestComputePodActionsWithRestartableInitContainers``: all 24 cases.
* ``TestPodSandboxChanged``: all 7 cases.
* ``TestComputePodActionsWithContainerRestartRules``: its cases as the kubelet's test
  table holds them, and the restart-rule cases it implies (exit-code rules, probe
  failures, init containers with their own policy), under the same base pod.
* ``TestComputePodActionsForRestartAllContainers``: the regular-container rows, and the
  init-container rows rebuilt from ``getContainersToReset``.

Each case keeps the kubelet's name and facts: the base pod, what the runtime holds, the
prober's verdicts and the expected actions. Three adjustments carry the facts across:
pods whose kubelet case leaves ``restartPolicy`` empty get ``Always`` (what defaulting
gives them, and what the kubelet treats "" as); kill messages and reasons are left out of
the table as the kubelet's ``verifyActions`` clears them, and are tested separately below;
a sandbox whose kubelet case carries no network status is given an IP, because a Docker
sandbox always reports one (empty when missing) and the IP check would otherwise fire.

Ephemeral containers (``TestComputePodActionsWithInitAndEphemeralContainers``) are tested
in ``test_ephemeral_actions``, the in-place resize cases
(``TestComputePodActionsForPodResize``: update in place, restart for ``RestartContainer``)
in ``test_resize_actions``. Skipped, because they test what a Docker node does not do: the
user-namespace cases of ``TestNamespacesForPod``.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import builders
import pytest
from lightkube.models.core_v1 import Pod

from asynckubelet.runtime import naming
from asynckubelet.runtime.actions import (
    KILL_REASON_LIVENESS_PROBE,
    KILL_REASON_STARTUP_PROBE,
    KILL_REASON_UNKNOWN,
    ContainerToReset,
    PodActions,
    compute_pod_actions,
    pod_sandbox_changed,
)
from asynckubelet.runtime.probes import ProbeResult
from asynckubelet.runtime.types import (
    ContainerState,
    ContainerStatus,
    PodRuntimeStatus,
    SandboxState,
    SandboxStatus,
)

T0 = datetime(2024, 1, 1, tzinfo=UTC)
RUNNING = ContainerState.RUNNING
EXITED = ContainerState.EXITED
CREATED = ContainerState.CREATED
UNKNOWN = ContainerState.UNKNOWN
READY = SandboxState.READY
NOTREADY = SandboxState.NOTREADY
SUCCESS = ProbeResult.SUCCESS
FAILURE = ProbeResult.FAILURE
PROBE_UNKNOWN = ProbeResult.UNKNOWN
SANDBOX_ID = "sandboxID"

REGULAR = [{"name": f"foo{i}", "image": "busybox"} for i in (1, 2, 3)]
PLAIN_INITS = [{"name": f"init{i}", "image": "bar-image"} for i in (1, 2, 3)]
SIDECARS: list[dict[str, Any]] = [
    {"name": "restartable-init-1", "image": "bar-image", "restartPolicy": "Always"},
    {
        "name": "restartable-init-2",
        "image": "bar-image",
        "restartPolicy": "Always",
        "livenessProbe": {},
        "startupProbe": {},
    },
    {
        "name": "restartable-init-3",
        "image": "bar-image",
        "restartPolicy": "Always",
        "livenessProbe": {},
        "startupProbe": {},
    },
]
IDS = {
    "foo1": "id1",
    "foo2": "id2",
    "foo3": "id3",
    "init1": "initid1",
    "init2": "initid2",
    "init3": "initid3",
    "restartable-init-1": "initid1",
    "restartable-init-2": "initid2",
    "restartable-init-3": "initid3",
}


@dataclass(frozen=True)
class C:
    """One container instance the runtime holds; its hash is the base spec's unless given."""

    name: str
    state: ContainerState = RUNNING
    exit_code: int = 0
    hash: str | None = None


@dataclass(frozen=True)
class S:
    """One sandbox the runtime holds."""

    state: SandboxState = READY
    attempt: int = 0
    ip: str = "10.0.0.1"
    id: str = SANDBOX_ID


@dataclass(frozen=True)
class Case:
    id: str
    containers: tuple[C, ...]
    inits: tuple[dict[str, Any], ...] = ()
    restart_policy: str = "Always"
    init_patch: Mapping[int, dict[str, Any]] = field(default_factory=dict)
    patch: Mapping[int, dict[str, Any]] = field(default_factory=dict)
    sandboxes: tuple[S, ...] = (S(),)
    liveness: Mapping[str, ProbeResult] = field(default_factory=dict)
    startup: Mapping[str, ProbeResult] = field(default_factory=dict)
    kill_pod: bool = False
    create_sandbox: bool = False
    sandbox_id: str = SANDBOX_ID
    attempt: int = 0
    next_init: str | None = None
    init_to_start: tuple[int, ...] = ()
    to_start: tuple[int, ...] = ()
    to_kill: tuple[str, ...] = ()


def make_pod(
    *,
    inits: tuple[dict[str, Any], ...] | list[dict[str, Any]] = (),
    restart_policy: str = "Always",
    host_network: bool = False,
    init_patch: Mapping[int, dict[str, Any]] | None = None,
    patch: Mapping[int, dict[str, Any]] | None = None,
    deleted: bool = False,
) -> Pod:
    init_containers = copy.deepcopy(list(inits))
    for index, changes in (init_patch or {}).items():
        init_containers[index].update(changes)
    containers = copy.deepcopy(REGULAR)
    for index, changes in (patch or {}).items():
        containers[index].update(changes)
    spec: dict[str, Any] = {"restartPolicy": restart_policy, "hostNetwork": host_network}
    if init_containers:
        spec["initContainers"] = init_containers
    return builders.pod(
        "foo",
        namespace="foo-ns",
        uid="12345678",
        meta={"deletionTimestamp": "2024-01-01T00:00:00Z"} if deleted else None,
        containers=containers,
        **spec,
    )


def make_status(
    *,
    inits: tuple[dict[str, Any], ...],
    containers: tuple[C, ...],
    sandboxes: tuple[S, ...],
    patch: Mapping[int, dict[str, Any]] | None = None,
) -> PodRuntimeStatus:
    """The runtime's view; instances of ``patch``ed regular containers were created from
    the patched spec (a ``init_patch`` is a spec change the instances predate)."""
    regular = copy.deepcopy(REGULAR)
    for index, changes in (patch or {}).items():
        regular[index].update(changes)
    specs = {c["name"]: c for c in [*regular, *inits]}
    return PodRuntimeStatus(
        uid="12345678",
        name="foo",
        namespace="foo-ns",
        sandboxes=tuple(
            SandboxStatus(id=s.id, attempt=s.attempt, state=s.state, created_at=T0, ip=s.ip)
            for s in sandboxes
        ),
        containers=tuple(
            ContainerStatus(
                id=IDS[c.name],
                name=c.name,
                state=c.state,
                created_at=T0,
                exit_code=c.exit_code,
                hash=c.hash if c.hash is not None else naming.hash_container(specs[c.name]),
            )
            for c in containers
        ),
    )


def run(case: Case) -> tuple[PodActions, PodRuntimeStatus]:
    pod = make_pod(
        inits=case.inits,
        restart_policy=case.restart_policy,
        init_patch=case.init_patch,
        patch=case.patch,
    )
    status = make_status(
        inits=case.inits,
        containers=case.containers,
        sandboxes=case.sandboxes,
        patch=case.patch,
    )
    liveness = {IDS[name]: result for name, result in case.liveness.items()}
    startup = {IDS[name]: result for name, result in case.startup.items()}
    return compute_pod_actions(pod, status, liveness=liveness, startup=startup), status


def assert_matches(case: Case, actions: PodActions, status: PodRuntimeStatus) -> None:
    assert actions.kill_pod == case.kill_pod
    assert actions.create_sandbox == case.create_sandbox
    assert actions.sandbox_id == case.sandbox_id
    assert actions.attempt == case.attempt
    assert actions.next_init_container_to_start == case.next_init
    assert actions.init_containers_to_start == case.init_to_start
    assert actions.containers_to_start == case.to_start
    expected_kill = {status.find_container(n).id: n for n in case.to_kill}  # type: ignore[union-attr]
    assert {k: v.name for k, v in actions.containers_to_kill.items()} == expected_kill


ALL_RUNNING = (C("foo1"), C("foo2"), C("foo3"))

COMPUTE_POD_ACTIONS = [
    Case("everything is good; do nothing", ALL_RUNNING),
    Case(
        "start pod sandbox and all containers for a new pod",
        (),
        sandboxes=(),
        kill_pod=True,
        create_sandbox=True,
        sandbox_id="",
        to_start=(0, 1, 2),
    ),
    Case(
        "restart exited containers if RestartPolicy == Always",
        (C("foo1", EXITED, 0), C("foo2", EXITED, 111), C("foo3")),
        to_start=(0, 1),
    ),
    Case(
        "restart failed containers if RestartPolicy == OnFailure",
        (C("foo1", EXITED, 0), C("foo2", EXITED, 111), C("foo3")),
        restart_policy="OnFailure",
        to_start=(1,),
    ),
    Case(
        "restart created but not started containers if RestartPolicy == OnFailure",
        (C("foo1", EXITED, 0), C("foo2", CREATED), C("foo3")),
        restart_policy="OnFailure",
        to_start=(1,),
    ),
    Case(
        "don't restart containers if RestartPolicy == Never",
        (C("foo1", EXITED, 0), C("foo2", EXITED, 111), C("foo3")),
        restart_policy="Never",
    ),
    Case(
        "Kill pod and recreate everything if the pod sandbox is dead, and RestartPolicy == Always",
        ALL_RUNNING,
        sandboxes=(S(NOTREADY),),
        kill_pod=True,
        create_sandbox=True,
        attempt=1,
        to_start=(0, 1, 2),
    ),
    Case(
        "Kill pod and recreate all containers (except for the succeeded one) if the pod sandbox"
        " is dead, and RestartPolicy == OnFailure",
        (C("foo1"), C("foo2", EXITED, 0), C("foo3")),
        restart_policy="OnFailure",
        sandboxes=(S(NOTREADY),),
        kill_pod=True,
        create_sandbox=True,
        attempt=1,
        to_start=(0, 2),
    ),
    Case(
        "Kill pod and recreate all containers if the PodSandbox does not have an IP",
        ALL_RUNNING,
        sandboxes=(S(ip=""),),
        kill_pod=True,
        create_sandbox=True,
        attempt=1,
        to_start=(0, 1, 2),
    ),
    Case(
        "Kill and recreate the container if the container's spec changed",
        (C("foo1"), C("foo2", hash="432423432"), C("foo3")),
        to_start=(1,),
        to_kill=("foo2",),
    ),
    Case(
        "Kill and recreate the container if the liveness check has failed",
        ALL_RUNNING,
        liveness={"foo2": FAILURE},
        to_start=(1,),
        to_kill=("foo2",),
    ),
    Case(
        "Kill and recreate the container if the startup check has failed",
        ALL_RUNNING,
        startup={"foo2": FAILURE},
        to_start=(1,),
        to_kill=("foo2",),
    ),
    Case(
        "Verify we do not create a pod sandbox if no ready sandbox for pod with"
        " RestartPolicy=Never and all containers exited",
        (C("foo1", EXITED, 0), C("foo2", EXITED, 0), C("foo3", EXITED, 0)),
        restart_policy="Never",
        sandboxes=(S(NOTREADY, attempt=1),),
        kill_pod=True,
        attempt=2,
    ),
    Case(
        "Verify we do not create a pod sandbox if no ready sandbox for pod with"
        " RestartPolicy=OnFailure and all containers succeeded",
        (C("foo1", EXITED, 0), C("foo2", EXITED, 0), C("foo3", EXITED, 0)),
        restart_policy="OnFailure",
        sandboxes=(S(NOTREADY, attempt=1),),
        kill_pod=True,
        attempt=2,
    ),
    Case(
        "Verify we create a pod sandbox if no ready sandbox for pod with RestartPolicy=Never"
        " and no containers have ever been created",
        (),
        restart_policy="Never",
        sandboxes=(S(NOTREADY, attempt=2),),
        kill_pod=True,
        create_sandbox=True,
        attempt=3,
        to_start=(0, 1, 2),
    ),
    Case(
        "Kill and recreate the container if the container is in unknown state",
        (C("foo1"), C("foo2", UNKNOWN), C("foo3")),
        restart_policy="Never",
        to_start=(1,),
        to_kill=("foo2",),
    ),
    Case(
        "Restart the container if the container is in created state",
        (C("foo1"), C("foo2", CREATED), C("foo3")),
        restart_policy="Never",
        to_start=(1,),
    ),
]

INITS = tuple(PLAIN_INITS)
ALL_INITS_DONE = (C("init1", EXITED), C("init2", EXITED), C("init3", EXITED))
INIT3_FAILED = (C("init1", EXITED), C("init2", EXITED), C("init3", EXITED, 137))
INIT3_UNKNOWN = (C("init1", EXITED), C("init2", EXITED), C("init3", UNKNOWN))

WITH_INIT_CONTAINERS = [
    Case(
        "initialization completed; start all containers", ALL_INITS_DONE, INITS, to_start=(0, 1, 2)
    ),
    Case(
        "no init containers have been started; start the first one",
        (),
        INITS,
        next_init="init1",
        init_to_start=(0,),
    ),
    Case(
        "initialization in progress; do nothing",
        (C("init1", EXITED), C("init2", EXITED), C("init3", RUNNING)),
        INITS,
    ),
    Case(
        "Kill pod and restart the first init container if the pod sandbox is dead",
        ALL_INITS_DONE,
        INITS,
        sandboxes=(S(NOTREADY),),
        kill_pod=True,
        create_sandbox=True,
        attempt=1,
        next_init="init1",
        init_to_start=(0,),
    ),
    Case(
        "initialization failed; restart the last init container if RestartPolicy == Always",
        INIT3_FAILED,
        INITS,
        next_init="init3",
        init_to_start=(2,),
    ),
    Case(
        "initialization failed; restart the last init container if RestartPolicy == OnFailure",
        INIT3_FAILED,
        INITS,
        restart_policy="OnFailure",
        next_init="init3",
        init_to_start=(2,),
    ),
    Case(
        "initialization failed; kill pod if RestartPolicy == Never",
        INIT3_FAILED,
        INITS,
        restart_policy="Never",
        kill_pod=True,
    ),
    Case(
        "init container state unknown; kill and recreate the last init container if"
        " RestartPolicy == Always",
        INIT3_UNKNOWN,
        INITS,
        next_init="init3",
        init_to_start=(2,),
        to_kill=("init3",),
    ),
    Case(
        "init container state unknown; kill and recreate the last init container if"
        " RestartPolicy == OnFailure",
        INIT3_UNKNOWN,
        INITS,
        restart_policy="OnFailure",
        next_init="init3",
        init_to_start=(2,),
        to_kill=("init3",),
    ),
    Case(
        "init container state unknown; kill pod if RestartPolicy == Never",
        INIT3_UNKNOWN,
        INITS,
        restart_policy="Never",
        kill_pod=True,
    ),
    Case(
        "Pod sandbox not ready, init container failed, but RestartPolicy == Never; kill pod only",
        ALL_INITS_DONE,
        INITS,
        restart_policy="Never",
        sandboxes=(S(NOTREADY),),
        kill_pod=True,
        attempt=1,
    ),
    Case(
        "Pod sandbox not ready, and RestartPolicy == Never, but no visible init containers;"
        " create a new pod sandbox",
        (),
        INITS,
        restart_policy="Never",
        sandboxes=(S(NOTREADY),),
        kill_pod=True,
        create_sandbox=True,
        attempt=1,
        next_init="init1",
        init_to_start=(0,),
    ),
    Case(
        "Pod sandbox not ready, init container failed, and RestartPolicy == OnFailure;"
        " create a new pod sandbox",
        INIT3_FAILED,
        INITS,
        restart_policy="OnFailure",
        sandboxes=(S(NOTREADY),),
        kill_pod=True,
        create_sandbox=True,
        attempt=1,
        next_init="init1",
        init_to_start=(0,),
    ),
    Case(
        "some of the init container statuses are missing but the last init container is"
        " running, don't restart preceding ones",
        (C("init3", RUNNING),),
        INITS,
    ),
    Case(
        "an init container is in the created state due to an unknown error when starting"
        " container; restart it",
        (C("init1", EXITED), C("init2", EXITED), C("init3", CREATED)),
        INITS,
        next_init="init3",
        init_to_start=(2,),
    ),
]

SIDECAR_INITS = tuple(SIDECARS)
R1, R2, R3 = "restartable-init-1", "restartable-init-2", "restartable-init-3"
SIDECARS_RUNNING = (C(R1), C(R2), C(R3))
PROBES_OK = {R2: SUCCESS, R3: SUCCESS}
MAIN_RUNNING = (C("foo1"), C("foo2"), C("foo3"))
MAIN_SUCCEEDED = (C("foo1", EXITED, 0), C("foo2", EXITED, 0), C("foo3", EXITED, 0))


def sidecar_case(
    id: str,
    containers: tuple[C, ...],
    *,
    liveness: Mapping[str, ProbeResult] = PROBES_OK,
    startup: Mapping[str, ProbeResult] = PROBES_OK,
    **expected: Any,
) -> Case:
    """A restartable-init case; as in the kubelet, probed sidecars start with passing probes."""
    return Case(
        id,
        containers,
        SIDECAR_INITS,
        liveness=liveness,
        startup=startup,
        **expected,
    )


def without(results: Mapping[str, ProbeResult], name: str) -> dict[str, ProbeResult]:
    return {k: v for k, v in results.items() if k != name}


WITH_RESTARTABLE_INIT_CONTAINERS = [
    sidecar_case(
        "initialization completed; start all containers", SIDECARS_RUNNING, to_start=(0, 1, 2)
    ),
    sidecar_case(
        "no init containers have been started; start the first one", (), init_to_start=(0,)
    ),
    sidecar_case(
        "an init container is stuck in the created state; restart it",
        (C(R1), C(R2), C(R3, CREATED)),
        init_to_start=(2,),
    ),
    sidecar_case(
        "restartable init container has started; start the next", (C(R1),), init_to_start=(1,)
    ),
    sidecar_case(
        "livenessProbe has not been run; start the nothing",
        (C(R1), C(R2)),
        liveness=without(PROBES_OK, R2),
        init_to_start=(2,),
    ),
    sidecar_case(
        "livenessProbe in progress; start the next",
        (C(R1), C(R2)),
        liveness={**PROBES_OK, R2: PROBE_UNKNOWN},
        init_to_start=(2,),
    ),
    sidecar_case("livenessProbe has completed; start the next", (C(R1), C(R2)), init_to_start=(2,)),
    sidecar_case(
        "kill and recreate the restartable init container if the liveness check has failed",
        SIDECARS_RUNNING,
        liveness={**PROBES_OK, R3: FAILURE},
        init_to_start=(2,),
        to_kill=(R3,),
        to_start=(0, 1, 2),
    ),
    sidecar_case(
        "startupProbe has not been run; do nothing",
        (C(R1), C(R2)),
        startup=without(PROBES_OK, R2),
    ),
    sidecar_case(
        "startupProbe in progress; do nothing",
        (C(R1), C(R2)),
        startup={**PROBES_OK, R2: PROBE_UNKNOWN},
    ),
    sidecar_case("startupProbe has completed; start the next", (C(R1), C(R2)), init_to_start=(2,)),
    sidecar_case(
        "kill and recreate the restartable init container if the startup check has failed",
        SIDECARS_RUNNING,
        startup={**PROBES_OK, R3: FAILURE},
        init_patch={2: {"startupProbe": {}}},
        init_to_start=(2,),
        to_kill=(R3,),
    ),
    sidecar_case(
        "kill and recreate the restartable init container if the container definition changes",
        SIDECARS_RUNNING,
        init_patch={2: {"image": "foo-image"}},
        init_to_start=(2,),
        to_kill=(R3,),
        to_start=(0, 1, 2),
    ),
    sidecar_case(
        "restart terminated restartable init container and next init container",
        (C(R1, EXITED), C(R2), C(R3, EXITED)),
        init_to_start=(0, 2),
    ),
    sidecar_case(
        "restart terminated restartable init container and regular containers",
        (C(R1, EXITED), C(R2), C(R3)),
        init_to_start=(0,),
        to_start=(0, 1, 2),
    ),
    sidecar_case(
        "Pod sandbox not ready, restartable init container failed, but RestartPolicy == Never;"
        " kill pod only",
        (C(R1), C(R2), C(R3, EXITED, 137)),
        restart_policy="Never",
        sandboxes=(S(NOTREADY),),
        kill_pod=True,
        attempt=1,
    ),
    sidecar_case(
        "Pod sandbox not ready, and RestartPolicy == Never, but no visible restartable init"
        " containers; create a new pod sandbox",
        (),
        restart_policy="Never",
        sandboxes=(S(NOTREADY),),
        kill_pod=True,
        create_sandbox=True,
        attempt=1,
        init_to_start=(0,),
    ),
    sidecar_case(
        "Pod sandbox not ready, restartable init container failed, and RestartPolicy =="
        " OnFailure; create a new pod sandbox",
        (C(R1), C(R2), C(R3, EXITED, 137)),
        restart_policy="OnFailure",
        sandboxes=(S(NOTREADY),),
        kill_pod=True,
        create_sandbox=True,
        attempt=1,
        init_to_start=(0,),
    ),
    sidecar_case(
        "Pod sandbox not ready, restartable init container failed, and RestartPolicy == Always;"
        " create a new pod sandbox",
        (C(R1), C(R2), C(R3, EXITED, 137)),
        sandboxes=(S(NOTREADY),),
        kill_pod=True,
        create_sandbox=True,
        attempt=1,
        init_to_start=(0,),
    ),
    sidecar_case(
        "initialization failed; restart the last restartable init container even if pod's"
        " RestartPolicy == Never",
        (C(R1), C(R2), C(R3, EXITED, 137)),
        restart_policy="Never",
        init_to_start=(2,),
    ),
    sidecar_case(
        "restartable init container state unknown; kill and recreate the last restartable init"
        " container even if pod's RestartPolicy == Never",
        (C(R1), C(R2), C(R3, UNKNOWN)),
        restart_policy="Never",
        init_to_start=(2,),
        to_kill=(R3,),
    ),
    sidecar_case(
        "restart restartable init container if regular containers are running even if pod's"
        " RestartPolicy == Never",
        (C(R1), C(R2), C(R3, EXITED, 137), *MAIN_RUNNING),
        restart_policy="Never",
        init_to_start=(2,),
    ),
    sidecar_case(
        "kill the pod if all main containers succeeded if pod's RestartPolicy == Never",
        (*SIDECARS_RUNNING, *MAIN_SUCCEEDED),
        restart_policy="Never",
        kill_pod=True,
    ),
    sidecar_case(
        "some of the init container statuses are missing but the last init container is"
        " running, restart restartable init and regular containers",
        (C(R3),),
        init_to_start=(0, 1),
        to_start=(0, 1, 2),
    ),
]


@pytest.mark.parametrize("case", COMPUTE_POD_ACTIONS, ids=lambda c: c.id)
def test_compute_pod_actions(case: Case) -> None:
    actions, status = run(case)
    assert_matches(case, actions, status)


@pytest.mark.parametrize("case", WITH_INIT_CONTAINERS, ids=lambda c: c.id)
def test_compute_pod_actions_with_init_containers(case: Case) -> None:
    actions, status = run(case)
    assert_matches(case, actions, status)


@pytest.mark.parametrize("case", WITH_RESTARTABLE_INIT_CONTAINERS, ids=lambda c: c.id)
def test_compute_pod_actions_with_restartable_init_containers(case: Case) -> None:
    actions, status = run(case)
    assert_matches(case, actions, status)


@dataclass(frozen=True)
class SandboxCase:
    id: str
    sandboxes: tuple[SandboxStatus, ...]
    changed: bool
    attempt: int
    sandbox_id: str
    host_network: bool = False


def sandbox(id: str, attempt: int, state: SandboxState, ip: str = "") -> SandboxStatus:
    return SandboxStatus(id=id, attempt=attempt, state=state, created_at=T0, ip=ip)


POD_SANDBOX_CHANGED = [
    SandboxCase("Pod with no existing sandboxes", (), True, 0, ""),
    SandboxCase(
        "Pod with multiple ready sandbox statuses",
        (sandbox("sandboxID2", 1, READY), sandbox("sandboxID1", 0, READY)),
        True,
        2,
        "sandboxID2",
    ),
    SandboxCase(
        "Pod with no ready sandbox statuses",
        (sandbox("sandboxID2", 1, NOTREADY), sandbox("sandboxID1", 0, NOTREADY)),
        True,
        2,
        "sandboxID2",
    ),
    SandboxCase(
        "Pod with ready sandbox status but network namespace mismatch",
        (sandbox("sandboxID1", 0, READY),),
        True,
        1,
        "",
        host_network=True,
    ),
    SandboxCase(
        "Pod with ready sandbox status but no IP",
        (sandbox("sandboxID1", 0, READY, ip=""),),
        True,
        1,
        "sandboxID1",
    ),
    SandboxCase(
        "Pod with ready sandbox status with IP",
        (sandbox("sandboxID1", 0, READY, ip="10.0.0.10"),),
        False,
        0,
        "sandboxID1",
    ),
    SandboxCase(
        "Pod with multiple sandboxes but ready one is not latest",
        (
            sandbox("sandboxID1", 0, READY, ip="10.0.0.10"),
            sandbox("sandboxID2", 1, NOTREADY),
        ),
        False,
        1,
        "sandboxID1",
    ),
]


@pytest.mark.parametrize("case", POD_SANDBOX_CHANGED, ids=lambda c: c.id)
def test_pod_sandbox_changed(case: SandboxCase) -> None:
    pod = make_pod(host_network=case.host_network)
    status = PodRuntimeStatus(
        uid="12345678", name="foo", namespace="foo-ns", sandboxes=case.sandboxes
    )
    changed, attempt, sandbox_id, _ = pod_sandbox_changed(pod, status)
    assert (changed, attempt, sandbox_id) == (case.changed, case.attempt, case.sandbox_id)


def actions_for(
    containers: tuple[C, ...],
    *,
    inits: tuple[dict[str, Any], ...] = (),
    restart_policy: str = "Always",
    liveness: Mapping[str, ProbeResult] | None = None,
    startup: Mapping[str, ProbeResult] | None = None,
    **pod_options: Any,
) -> PodActions:
    pod = make_pod(inits=inits, restart_policy=restart_policy, **pod_options)
    status = make_status(inits=inits, containers=containers, sandboxes=(S(),))
    return compute_pod_actions(
        pod,
        status,
        liveness={IDS[k]: v for k, v in (liveness or {}).items()},
        startup={IDS[k]: v for k, v in (startup or {}).items()},
    )


def only_kill(actions: PodActions) -> tuple[str, str]:
    (kill,) = actions.containers_to_kill.values()
    return kill.reason, kill.message


def test_a_changed_spec_is_killed_with_the_kubelets_message() -> None:
    actions = actions_for((C("foo1"), C("foo2", hash="0"), C("foo3")), restart_policy="Never")
    assert only_kill(actions) == ("", "Container foo2 definition changed, will be restarted")


def test_a_changed_spec_restarts_the_container_even_under_never() -> None:
    actions = actions_for((C("foo1"), C("foo2", hash="0"), C("foo3")), restart_policy="Never")
    assert actions.containers_to_start == (1,)


def test_a_failed_liveness_probe_is_killed_with_the_kubelets_message() -> None:
    actions = actions_for(ALL_RUNNING, liveness={"foo1": FAILURE})
    assert only_kill(actions) == (
        KILL_REASON_LIVENESS_PROBE,
        "Container foo1 failed liveness probe, will be restarted",
    )


def test_a_failed_startup_probe_is_killed_with_the_kubelets_message() -> None:
    actions = actions_for(ALL_RUNNING, startup={"foo3": FAILURE})
    assert only_kill(actions) == (
        KILL_REASON_STARTUP_PROBE,
        "Container foo3 failed startup probe, will be restarted",
    )


def test_a_failed_liveness_probe_under_never_kills_without_restarting() -> None:
    actions = actions_for(ALL_RUNNING, restart_policy="Never", liveness={"foo1": FAILURE})
    assert (actions.containers_to_start, only_kill(actions)[1]) == (
        (),
        "Container foo1 failed liveness probe",
    )


def test_a_container_in_unknown_state_is_killed_with_the_kubelets_message() -> None:
    actions = actions_for((C("foo1"), C("foo2", UNKNOWN), C("foo3")))
    assert only_kill(actions) == (
        KILL_REASON_UNKNOWN,
        'Container is in "unknown" state, try killing it before restart',
    )


def test_an_init_container_in_unknown_state_is_killed_with_the_kubelets_message() -> None:
    actions = actions_for(INIT3_UNKNOWN, inits=INITS)
    assert only_kill(actions) == (
        KILL_REASON_UNKNOWN,
        'Init container is in "unknown" state, try killing it before restart',
    )


def test_a_sidecar_failing_liveness_is_killed_with_the_kubelets_message() -> None:
    actions = actions_for(
        SIDECARS_RUNNING,
        inits=SIDECAR_INITS,
        liveness={R2: SUCCESS, R3: FAILURE},
        startup=PROBES_OK,
    )
    assert only_kill(actions) == (
        KILL_REASON_LIVENESS_PROBE,
        "Init container restartable-init-3 failed liveness probe",
    )


def test_a_sidecar_failing_startup_is_killed_with_the_kubelets_message() -> None:
    actions = actions_for(
        SIDECARS_RUNNING,
        inits=SIDECAR_INITS,
        liveness=PROBES_OK,
        startup={R2: SUCCESS, R3: FAILURE},
    )
    assert only_kill(actions) == (
        KILL_REASON_STARTUP_PROBE,
        "Init container restartable-init-3 failed startup probe",
    )


def test_a_changed_sidecar_is_killed_with_the_kubelets_message() -> None:
    actions = actions_for(
        SIDECARS_RUNNING,
        inits=SIDECAR_INITS,
        liveness=PROBES_OK,
        startup=PROBES_OK,
        init_patch={0: {"image": "other"}},
    )
    assert only_kill(actions) == ("", "Init container restartable-init-1 definition changed")


def test_an_oom_killed_init_container_counts_as_failed() -> None:
    pod = make_pod(inits=INITS, restart_policy="Never")
    status = make_status(inits=INITS, containers=ALL_INITS_DONE, sandboxes=(S(),))
    oom = ContainerStatus(
        id="initid3", name="init3", state=EXITED, created_at=T0, reason="OOMKilled"
    )
    status = PodRuntimeStatus(
        uid=status.uid,
        name=status.name,
        namespace=status.namespace,
        sandboxes=status.sandboxes,
        containers=(*status.containers[:2], oom),
    )
    assert compute_pod_actions(pod, status).kill_pod


def test_a_pod_being_deleted_does_not_restart_exited_containers() -> None:
    actions = actions_for((C("foo1", EXITED, 1), C("foo2"), C("foo3")), deleted=True)
    assert actions.containers_to_start == ()


def test_a_host_network_change_recreates_the_sandbox() -> None:
    actions = actions_for(ALL_RUNNING, host_network=True)
    assert (actions.kill_pod, actions.create_sandbox, actions.attempt) == (True, True, 1)


def test_a_pod_with_sidecars_has_no_legacy_next_init_container() -> None:
    actions = actions_for((), inits=SIDECAR_INITS)
    assert (actions.next_init_container_to_start, actions.init_containers_to_start) == (None, (0,))


def test_a_new_pod_says_why_a_sandbox_is_created() -> None:
    pod = make_pod()
    status = PodRuntimeStatus(uid="12345678", name="foo", namespace="foo-ns")
    assert compute_pod_actions(pod, status).reason == (
        "No sandbox for pod can be found. Need to start a new one"
    )


def test_a_finished_never_pod_says_why_no_sandbox_is_created() -> None:
    pod = make_pod(restart_policy="Never")
    status = make_status(inits=(), containers=MAIN_SUCCEEDED, sandboxes=(S(NOTREADY, attempt=1),))
    assert compute_pod_actions(pod, status).reason == (
        "No ready sandbox for pod can be found. Need to start a new one;"
        " not creating one: restartPolicy is Never and containers have run"
    )


def test_an_init_failure_under_never_says_which_container_failed() -> None:
    actions = actions_for(INIT3_FAILED, inits=INITS, restart_policy="Never")
    assert actions.reason == "Init container init3 failed and the pod's restartPolicy is Never"


def test_a_healthy_pod_needs_no_action() -> None:
    assert actions_for(ALL_RUNNING).is_noop


def test_a_pod_with_a_container_to_start_is_not_a_noop() -> None:
    assert not actions_for((C("foo1"), C("foo2"))).is_noop


def test_pod_actions_are_frozen() -> None:
    actions = actions_for(ALL_RUNNING)
    with pytest.raises(AttributeError):
        actions.kill_pod = True  # type: ignore[misc]


def rule(action: str, operator: str, *values: int) -> dict[str, Any]:
    return {"action": action, "exitCodes": {"operator": operator, "values": list(values)}}


ALWAYS = {"restartPolicy": "Always"}
ON_FAILURE = {"restartPolicy": "OnFailure"}
NEVER = {"restartPolicy": "Never"}


def with_rules(policy: str, *rules: dict[str, Any]) -> dict[str, Any]:
    return {"restartPolicy": policy, "restartPolicyRules": list(rules)}


WITH_CONTAINER_RESTART_RULES = [
    Case(
        "restart exited containers if RestartPolicy == Always",
        (C("foo1", EXITED, 0), C("foo2", EXITED, 111), C("foo3")),
        restart_policy="Never",
        patch={0: ALWAYS, 1: ALWAYS},
        to_start=(0, 1),
    ),
    Case(
        "restart failed containers if RestartPolicy == OnFailure",
        (C("foo1", EXITED, 0), C("foo2", EXITED, 111), C("foo3")),
        restart_policy="Never",
        patch={0: ON_FAILURE, 1: ON_FAILURE},
        to_start=(1,),
    ),
    Case(
        "restart created but not started containers if RestartPolicy == OnFailure",
        (C("foo1", EXITED, 0), C("foo2", CREATED), C("foo3")),
        restart_policy="Never",
        patch={0: ON_FAILURE, 1: ON_FAILURE},
        to_start=(1,),
    ),
    Case(
        "don't restart containers if RestartPolicy == Never",
        (C("foo1", EXITED, 0), C("foo2", EXITED, 111), C("foo3")),
        patch={0: NEVER, 1: NEVER},
    ),
    Case(
        "Kill pod and recreate all containers (except for the succeeded one) if the pod sandbox"
        " is dead",
        (C("foo1"), C("foo2", EXITED, 0), C("foo3")),
        patch={1: ON_FAILURE},
        sandboxes=(S(NOTREADY),),
        kill_pod=True,
        create_sandbox=True,
        attempt=1,
        to_start=(0, 2),
    ),
    Case(
        "restart a container whose exit code an In rule lists, under Never",
        (C("foo1", EXITED, 42), C("foo2"), C("foo3")),
        restart_policy="Never",
        patch={0: with_rules("Never", rule("Restart", "In", 42, 43))},
        to_start=(0,),
    ),
    Case(
        "do not restart a container whose exit code no rule matches: its own Never decides",
        (C("foo1", EXITED, 1), C("foo2"), C("foo3")),
        patch={0: with_rules("Never", rule("Restart", "In", 42))},
    ),
    Case(
        "restart a container whose exit code a NotIn rule does not list",
        (C("foo1", EXITED, 99), C("foo2"), C("foo3")),
        restart_policy="Never",
        patch={0: with_rules("Never", rule("Restart", "NotIn", 0, 1, 2))},
        to_start=(0,),
    ),
    Case(
        "do not restart a container whose exit code a NotIn rule lists",
        (C("foo1", EXITED, 1), C("foo2"), C("foo3")),
        restart_policy="Never",
        patch={0: with_rules("Never", rule("Restart", "NotIn", 0, 1, 2))},
    ),
    Case(
        "the first matching rule decides, later rules are not read",
        (C("foo1", EXITED, 3), C("foo2"), C("foo3")),
        restart_policy="Never",
        patch={0: with_rules("Never", rule("Restart", "In", 3), rule("Restart", "In", 4))},
        to_start=(0,),
    ),
    Case(
        "a rule with no values matches nothing with In and every exit with NotIn",
        (C("foo1", EXITED, 7), C("foo2", EXITED, 7), C("foo3")),
        restart_policy="Never",
        patch={
            0: with_rules("Never", rule("Restart", "In")),
            1: with_rules("Never", rule("Restart", "NotIn")),
        },
        to_start=(1,),
    ),
    Case(
        "a successful exit that OnFailure would not restart is restarted by a rule",
        (C("foo1", EXITED, 0), C("foo2"), C("foo3")),
        restart_policy="Never",
        patch={0: with_rules("OnFailure", rule("Restart", "In", 0))},
        to_start=(0,),
    ),
    Case(
        "kill without restarting a container that fails its liveness probe under its own Never",
        ALL_RUNNING,
        patch={1: NEVER},
        liveness={"foo2": FAILURE},
        to_kill=("foo2",),
    ),
    Case(
        "kill and restart a container that fails its liveness probe under its own Always,"
        " pod Never",
        ALL_RUNNING,
        restart_policy="Never",
        patch={1: ALWAYS},
        liveness={"foo2": FAILURE},
        to_start=(1,),
        to_kill=("foo2",),
    ),
    Case(
        "a probe failure ignores restart rules: a running container has no exit code",
        ALL_RUNNING,
        patch={1: with_rules("Never", rule("Restart", "NotIn"))},
        startup={"foo2": FAILURE},
        to_kill=("foo2",),
    ),
    Case(
        "a changed spec restarts a container even under its own Never",
        (C("foo1"), C("foo2", hash="0"), C("foo3")),
        patch={1: NEVER},
        to_start=(1,),
        to_kill=("foo2",),
    ),
    Case(
        "kill the pod once every container has stopped for good",
        (C("foo1", EXITED, 0), C("foo2", EXITED, 1), C("foo3", EXITED, 0)),
        patch={0: NEVER, 1: NEVER, 2: NEVER},
        kill_pod=True,
    ),
    Case(
        "keep the pod while a container of a Never pod will be restarted",
        (C("foo1", EXITED, 0), C("foo2", EXITED, 1), C("foo3", EXITED, 0)),
        restart_policy="Never",
        patch={1: ON_FAILURE},
        to_start=(1,),
    ),
]


INIT_RESTART_RULES = [
    Case(
        "an init container with its own Never fails the pod even when the pod restarts",
        (C("init1", EXITED, 1),),
        inits=INITS,
        init_patch={0: NEVER},
        kill_pod=True,
    ),
    Case(
        "an init container with its own OnFailure is retried in a Never pod",
        (C("init1", EXITED, 1),),
        inits=INITS,
        restart_policy="Never",
        init_patch={0: ON_FAILURE},
        next_init="init1",
        init_to_start=(0,),
    ),
    Case(
        "an init container rule retries a listed exit code in a Never pod",
        (C("init1", EXITED, 0), C("init2", EXITED, 75)),
        inits=INITS,
        restart_policy="Never",
        init_patch={1: with_rules("Never", rule("Restart", "In", 75))},
        next_init="init2",
        init_to_start=(1,),
    ),
    Case(
        "an init container rule that does not match leaves its own Never to fail the pod",
        (C("init1", EXITED, 0), C("init2", EXITED, 1)),
        inits=INITS,
        init_patch={1: with_rules("Never", rule("Restart", "In", 75))},
        kill_pod=True,
    ),
    Case(
        "an init container in unknown state under its own Never fails the pod",
        INIT3_UNKNOWN,
        inits=INITS,
        init_patch={2: NEVER},
        kill_pod=True,
    ),
    Case(
        "an init container in unknown state under its own OnFailure, pod Never, is restarted",
        INIT3_UNKNOWN,
        inits=INITS,
        restart_policy="Never",
        init_patch={2: ON_FAILURE},
        next_init="init3",
        init_to_start=(2,),
        to_kill=("init3",),
    ),
]


@pytest.mark.parametrize("case", WITH_CONTAINER_RESTART_RULES, ids=lambda c: c.id)
def test_compute_pod_actions_with_container_restart_rules(case: Case) -> None:
    actions, status = run(case)
    assert_matches(case, actions, status)


@pytest.mark.parametrize("case", INIT_RESTART_RULES, ids=lambda c: c.id)
def test_compute_pod_actions_with_init_container_restart_rules(case: Case) -> None:
    actions, status = run(case)
    assert_matches(case, actions, status)


def test_an_init_failure_under_its_own_never_says_so() -> None:
    actions, _ = run(INIT_RESTART_RULES[0])
    assert actions.reason == "Init container init1 failed and its restartPolicy is Never"


RESTART_ALL = rule("RestartAllContainers", "In", 1)


def instance(
    name: str,
    id: str,
    state: ContainerState = RUNNING,
    exit_code: int = 0,
    *,
    age: int = 0,
    restarts: int = 0,
) -> ContainerStatus:
    return ContainerStatus(
        id=id,
        name=name,
        state=state,
        created_at=datetime(2024, 1, 1, 0, 0, 59 - age, tzinfo=UTC),
        exit_code=exit_code,
        restart_count=restarts,
    )


def runtime_of(*instances: ContainerStatus) -> PodRuntimeStatus:
    return PodRuntimeStatus(
        uid="12345678",
        name="foo",
        namespace="foo-ns",
        sandboxes=(SandboxStatus(id=SANDBOX_ID, attempt=0, state=READY, created_at=T0, ip="1"),),
        containers=tuple(sorted(instances, key=lambda c: c.created_at, reverse=True)),
    )


def reset(
    name: str, id: str, *, kill: bool, init: bool = False, restarts: int = 0
) -> ContainerToReset:
    return ContainerToReset(
        container_id=id, name=name, init=init, kill=kill, restart_count=restarts
    )


@dataclass(frozen=True)
class ResetCase:
    id: str
    runtime: PodRuntimeStatus
    restart_all: bool
    patch: Mapping[int, dict[str, Any]] = field(default_factory=dict)
    inits: tuple[dict[str, Any], ...] = ()
    init_patch: Mapping[int, dict[str, Any]] = field(default_factory=dict)
    to_reset: tuple[ContainerToReset, ...] = ()
    to_start: tuple[int, ...] = ()
    init_to_start: tuple[int, ...] = ()


ALL_INSTANCES_RUNNING = runtime_of(
    instance("foo1", "id1"), instance("foo2", "id2"), instance("foo3", "id3")
)

FOR_RESTART_ALL_CONTAINERS = [
    ResetCase("pod not marked for RestartAllContainers", ALL_INSTANCES_RUNNING, False),
    ResetCase(
        "pod marked for RestartAllContainers",
        ALL_INSTANCES_RUNNING,
        True,
        to_reset=(
            reset("foo1", "id1", kill=True),
            reset("foo2", "id2", kill=True),
            reset("foo3", "id3", kill=True),
        ),
    ),
    ResetCase(
        "removes past terminated statuses",
        runtime_of(
            instance("foo1", "id1"),
            instance("foo2", "id2"),
            instance("foo3", "id3", EXITED, 1),
            instance("foo1", "id1-past", EXITED, 99, age=30),
            instance("foo2", "id2-past", EXITED, 99, age=30),
            instance("foo3", "id3-past", EXITED, 99, age=30),
        ),
        True,
        patch={2: with_rules("Always", RESTART_ALL)},
        to_reset=(
            reset("foo1", "id1", kill=True),
            reset("foo1", "id1-past", kill=False),
            reset("foo2", "id2", kill=True),
            reset("foo2", "id2-past", kill=False),
            reset("foo3", "id3-past", kill=False),
            reset("foo3", "id3", kill=False),
        ),
    ),
    ResetCase(
        "removes init containers and sidecars, the sidecar first",
        runtime_of(
            instance("init1", "initid1", EXITED, 0, age=50),
            instance("restartable-init-2", "initid2", age=40),
            instance("foo1", "id1", EXITED, 1),
            instance("foo2", "id2"),
        ),
        True,
        inits=(PLAIN_INITS[0], SIDECARS[1]),
        patch={0: with_rules("Never", RESTART_ALL)},
        to_reset=(
            reset("init1", "initid1", kill=False, init=True),
            reset("restartable-init-2", "initid2", kill=True, init=True),
            reset("foo2", "id2", kill=True),
            reset("foo1", "id1", kill=False),
        ),
    ),
    ResetCase(
        "a sidecar's own exit can be the one that asked for the restart",
        runtime_of(
            instance("restartable-init-1", "initid1", EXITED, 1, age=40),
            instance("foo1", "id1"),
        ),
        True,
        inits=(SIDECARS[0],),
        init_patch={0: {"restartPolicyRules": [RESTART_ALL]}},
        to_reset=(
            reset("foo1", "id1", kill=True),
            reset("restartable-init-1", "initid1", kill=False, init=True),
        ),
    ),
    ResetCase(
        "a reset carries each instance's restart count",
        runtime_of(instance("foo1", "id1", restarts=4)),
        True,
        to_reset=(reset("foo1", "id1", kill=True, restarts=4),),
    ),
    ResetCase(
        "all containers removed, start regular container",
        runtime_of(),
        False,
        to_start=(0, 1, 2),
    ),
    ResetCase(
        "all containers removed, start from the first init container",
        runtime_of(),
        False,
        inits=INITS,
        init_to_start=(0,),
    ),
]


@pytest.mark.parametrize("case", FOR_RESTART_ALL_CONTAINERS, ids=lambda c: c.id)
def test_compute_pod_actions_for_restart_all_containers(case: ResetCase) -> None:
    pod = make_pod(inits=case.inits, patch=case.patch, init_patch=case.init_patch)
    assert pod.spec is not None
    specs = {c.name: c for c in [*(pod.spec.initContainers or []), *pod.spec.containers]}
    runtime = dataclasses.replace(
        case.runtime,
        containers=tuple(
            dataclasses.replace(c, hash=naming.hash_container(specs[c.name]))
            for c in case.runtime.containers
        ),
    )
    actions = compute_pod_actions(pod, runtime, restart_all_containers=case.restart_all)
    assert (
        actions.containers_to_reset,
        actions.containers_to_start,
        actions.init_containers_to_start,
        actions.kill_pod,
        actions.create_sandbox,
        dict(actions.containers_to_kill),
        actions.sandbox_id,
    ) == (case.to_reset, case.to_start, case.init_to_start, False, False, {}, SANDBOX_ID)


def test_a_restart_in_place_keeps_the_sandbox_and_is_not_a_noop() -> None:
    pod = make_pod(patch={0: with_rules("Never", RESTART_ALL)})
    actions = compute_pod_actions(pod, ALL_INSTANCES_RUNNING, restart_all_containers=True)
    assert (actions.is_noop, actions.create_sandbox, actions.sandbox_id) == (
        False,
        False,
        SANDBOX_ID,
    )
