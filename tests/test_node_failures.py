"""What holds a pod back and when a foreground wait is over: permanent waiting reasons end
it at once (an image that cannot be had, a registry name that does not resolve), a
missing ConfigMap after its timeout, a pull that keeps failing after the pull timeout, a
crash loop after max restarts, a rejection at once; a network error before its timeout
does not."""

from __future__ import annotations

import pytest
from lightkube.models.core_v1 import (
    ContainerState,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    Pod,
    PodCondition,
    PodStatus,
)
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet.node.failures import (
    DEFAULT_MAX_RESTARTS,
    Failure,
    FailureWatch,
    holding_back,
    holdups,
)

NOT_FOUND = "manifest for 127.0.0.1:5000/missing:1 not found: manifest unknown: manifest unknown"
NETWORK = "Get http://127.0.0.1:1/v2/: dial tcp 127.0.0.1:1: connect: connection refused"


def waiting(reason: str, message: str = "") -> PodStatus:
    state = ContainerState(waiting=ContainerStateWaiting(reason=reason, message=message or None))
    return PodStatus(
        phase="Pending",
        containerStatuses=[
            ContainerStatus(
                name="app", image="x", imageID="", ready=False, restartCount=0, state=state
            )
        ],
    )


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("ErrImageNeverPull", 'Container image "x" is not present with pull policy of Never'),
        ("InvalidImageName", 'couldn\'t parse image name "X": invalid reference format'),
        ("ErrImagePull", NOT_FOUND),
        ("ErrImagePull", "pull access denied for nope, repository does not exist"),
    ],
)
def test_a_permanent_waiting_reason_ends_the_wait_at_once(reason: str, message: str) -> None:
    watch = FailureWatch(pull_timeout=300, config_timeout=30)
    assert watch.observe(waiting(reason, message), now=0) == Failure(reason, message, "app")


def test_image_pull_back_off_after_a_missing_image_ends_with_the_pull_error() -> None:
    watch = FailureWatch(pull_timeout=None)
    watch.observe(waiting("ContainerCreating"), now=0)
    first = watch.observe(waiting("ErrImagePull", NOT_FOUND), now=1)
    assert first == Failure("ErrImagePull", NOT_FOUND, "app")


def test_a_network_error_is_retried_until_the_pull_timeout() -> None:
    watch = FailureWatch(pull_timeout=60)
    assert watch.observe(waiting("ErrImagePull", NETWORK), now=0) is None
    assert watch.observe(waiting("ImagePullBackOff", "Back-off pulling image"), now=59) is None
    late = watch.observe(waiting("ImagePullBackOff", "Back-off pulling image"), now=60)
    assert late == Failure("ImagePullBackOff", NETWORK, "app")


def test_a_missing_config_map_ends_the_wait_after_the_config_timeout() -> None:
    watch = FailureWatch(config_timeout=5)
    message = 'configmap "x" not found'
    assert watch.observe(waiting("CreateContainerConfigError", message), now=10) is None
    assert watch.observe(waiting("CreateContainerConfigError", message), now=14.9) is None
    failure = watch.observe(waiting("CreateContainerConfigError", message), now=15)
    assert failure == Failure("CreateContainerConfigError", message, "app")


def test_a_config_error_that_went_away_starts_its_timeout_again() -> None:
    watch = FailureWatch(config_timeout=5)
    message = 'configmap "x" not found'
    watch.observe(waiting("CreateContainerConfigError", message), now=0)
    watch.observe(waiting("ContainerCreating"), now=4)
    assert watch.observe(waiting("CreateContainerConfigError", message), now=6) is None


def test_a_rejected_pod_ends_the_wait_with_its_reason() -> None:
    status = PodStatus(
        phase="Failed",
        reason="OutOfcpu",
        message="Pod was rejected: Node didn't have enough resource: cpu, requested: 2000, "
        "used: 0, capacity: 1000",
    )
    failure = FailureWatch().observe(status, now=0)
    assert failure is not None
    assert failure.line("big") == (
        "pod/big: OutOfcpu: Pod was rejected: Node didn't have enough resource: cpu, "
        "requested: 2000, used: 0, capacity: 1000"
    )


# -- what holds a pod back -------------------------------------------------------------------

NO_SUCH_HOST = (
    'failed to pull image "registry.invalid/busybx:1.35": Get "https://registry.invalid/v2/": '
    "dial tcp: lookup registry.invalid on 10.255.255.53:53: no such host"
)
RESOLVER_DOWN = (
    'Get "https://registry.example/v2/": dial tcp: lookup registry.example on '
    "10.255.255.53:53: server misbehaving"
)
CRASH = "back-off 20s restarting failed container=app pod=web_default(u1)"


def crashed(restarts: int, *, exit_code: int = 1) -> PodStatus:
    return PodStatus(
        phase="Running",
        containerStatuses=[
            ContainerStatus(
                name="app",
                image="x",
                imageID="",
                ready=False,
                restartCount=restarts,
                state=ContainerState(
                    waiting=ContainerStateWaiting(reason="CrashLoopBackOff", message=CRASH)
                ),
                lastState=ContainerState(
                    terminated=ContainerStateTerminated(exitCode=exit_code, reason="Error")
                ),
            )
        ],
    )


@pytest.mark.parametrize(
    ("status", "max_restarts", "expected"),
    [
        (waiting("ContainerCreating"), 3, []),
        (waiting("PodInitializing"), 3, []),
        (
            waiting("ErrImageNeverPull", "not present"),
            3,
            [Failure("ErrImageNeverPull", "not present", "app", final=True)],
        ),
        (
            waiting("InvalidImageName", "invalid reference format"),
            3,
            [Failure("InvalidImageName", "invalid reference format", "app", final=True)],
        ),
        (
            waiting("ErrImagePull", NO_SUCH_HOST),
            3,
            [Failure("ErrImagePull", NO_SUCH_HOST, "app", final=True)],
        ),
        (waiting("ErrImagePull", NOT_FOUND), 3, [Failure("ErrImagePull", NOT_FOUND, "app")]),
        (
            waiting("ErrImagePull", RESOLVER_DOWN),
            3,
            [Failure("ErrImagePull", RESOLVER_DOWN, "app", final=False)],
        ),
        (
            waiting("ErrImagePull", NETWORK),
            3,
            [Failure("ErrImagePull", NETWORK, "app", final=False)],
        ),
        (
            waiting("ImagePullBackOff", 'Back-off pulling image "x"'),
            3,
            [Failure("ImagePullBackOff", 'Back-off pulling image "x"', "app", final=False)],
        ),
        (
            waiting("CreateContainerConfigError", 'configmap "x" not found'),
            3,
            [Failure("CreateContainerConfigError", 'configmap "x" not found', "app", final=False)],
        ),
        (
            crashed(2),
            3,
            [
                Failure(
                    "CrashLoopBackOff", f"{CRASH}; last exit code 1", "app", final=False, restarts=2
                )
            ],
        ),
        (
            crashed(3, exit_code=7),
            3,
            [
                Failure(
                    "CrashLoopBackOff",
                    "last exit code 7 (Error); gave up after 3 restarts",
                    "app",
                    final=True,
                    restarts=3,
                )
            ],
        ),
        (
            crashed(1),
            1,
            [
                Failure(
                    "CrashLoopBackOff",
                    "last exit code 1 (Error); gave up after 1 restart",
                    "app",
                    final=True,
                    restarts=1,
                )
            ],
        ),
        (
            crashed(0),
            0,
            [
                Failure(
                    "CrashLoopBackOff",
                    "last exit code 1 (Error); gave up after 0 restarts",
                    "app",
                    final=True,
                    restarts=0,
                )
            ],
        ),
        (
            crashed(50),
            None,
            [
                Failure(
                    "CrashLoopBackOff",
                    f"{CRASH}; last exit code 1",
                    "app",
                    final=False,
                    restarts=50,
                )
            ],
        ),
        (
            PodStatus(
                phase="Failed",
                reason="NodePorts",
                message="Pod was rejected: Predicate NodePorts failed",
            ),
            3,
            [Failure("NodePorts", "Pod was rejected: Predicate NodePorts failed", final=True)],
        ),
        (
            PodStatus(
                phase="Pending",
                conditions=[
                    PodCondition(
                        type="PodScheduled",
                        status="False",
                        reason="SchedulingGated",
                        message="Scheduling is blocked due to non-empty scheduling gates",
                    )
                ],
            ),
            3,
            [
                Failure(
                    "SchedulingGated",
                    "Scheduling is blocked due to non-empty scheduling gates",
                    final=False,
                )
            ],
        ),
        (PodStatus(phase="Failed", reason="Evicted", message="The node was low"), 3, []),
        (None, 3, []),
    ],
    ids=[
        "creating",
        "initializing",
        "never-pull",
        "invalid-name",
        "registry-name-does-not-resolve",
        "registry-says-not-found",
        "resolver-failed",
        "registry-unreachable",
        "pull-back-off",
        "config-error",
        "crash-loop-below-max-restarts",
        "crash-loop-at-max-restarts",
        "crash-loop-one-restart",
        "crash-loop-no-restart-allowed",
        "crash-loop-never-final",
        "rejected",
        "unscheduled",
        "failed-not-rejected",
        "no-status",
    ],
)
def test_what_holds_a_pod_back_and_whether_it_is_final(
    status: PodStatus | None, max_restarts: int | None, expected: list[Failure]
) -> None:
    assert holdups(status, max_restarts=max_restarts) == expected


def test_init_containers_are_named_before_app_containers() -> None:
    status = waiting("ErrImagePull", NETWORK)
    status.initContainerStatuses = [
        ContainerStatus(
            name="setup",
            image="x",
            imageID="",
            ready=False,
            restartCount=0,
            state=ContainerState(waiting=ContainerStateWaiting(reason="ErrImageNeverPull")),
        )
    ]
    assert [f.container for f in holdups(status)] == ["setup", "app"]


def test_a_failure_line_names_the_pod_and_the_container() -> None:
    assert Failure("ErrImagePull", "no such host", "web").line("shop-1") == (
        "pod/shop-1/web: ErrImagePull: no such host"
    )
    assert Failure("OutOfcpu", "Pod was rejected: cpu").line("big") == (
        "pod/big: OutOfcpu: Pod was rejected: cpu"
    )
    assert Failure("CrashLoopBackOff", "", "web").line("x") == "pod/x/web: CrashLoopBackOff"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("cannot open /data/shop.db", "; last log line: cannot open /data/shop.db"),
        ("  padded\r", "; last log line: padded"),
        ("bell\x07 and \x1b[31mred", "; last log line: bell  and  [31mred"),
        ("x" * 500, "; last log line: " + "x" * 199 + "…"),
        ("", ""),
        (None, ""),
    ],
    ids=["plain", "trimmed", "control-characters", "bounded", "empty", "none"],
)
def test_a_crash_loops_last_log_line_is_shown_clean_and_bounded(
    text: str | None, shown: str
) -> None:
    failure = Failure("CrashLoopBackOff", "last exit code 1 (Error)", "app", restarts=3)
    assert failure.wants_log_line
    result = failure.with_log_line(text)
    assert result.message == "last exit code 1 (Error)" + shown
    assert not result.wants_log_line


def test_only_a_final_crash_loop_wants_a_log_line() -> None:
    assert not Failure("CrashLoopBackOff", "back-off", "app", final=False).wants_log_line
    assert not Failure("ErrImagePull", "not found", "app").wants_log_line


def pod_with(name: str, status: PodStatus) -> Pod:
    return Pod(metadata=ObjectMeta(name=name, namespace="default"), status=status)


def test_among_an_objects_pods_a_final_failure_is_named_first() -> None:
    pods = [
        pod_with("web-a", waiting("ImagePullBackOff", "Back-off")),
        pod_with("web-b", waiting("ErrImageNeverPull", "not present")),
    ]
    assert holding_back(pods) == (
        "web-b",
        Failure("ErrImageNeverPull", "not present", "app"),
    )


def test_among_an_objects_pods_the_first_by_name_is_named_when_none_is_final() -> None:
    pods = [
        pod_with("web-b", waiting("ImagePullBackOff", "Back-off b")),
        pod_with("web-a", waiting("ImagePullBackOff", "Back-off a")),
    ]
    held = holding_back(pods)
    assert held is not None
    assert held[1].line(held[0]) == "pod/web-a/app: ImagePullBackOff: Back-off a"


def test_nothing_holds_back_pods_on_their_way() -> None:
    assert holding_back([pod_with("web-a", waiting("ContainerCreating"))]) is None
    assert holding_back([]) is None


def test_a_pull_whose_registry_name_does_not_resolve_ends_the_wait_at_once() -> None:
    watch = FailureWatch(pull_timeout=300)
    assert watch.observe(waiting("ErrImagePull", NO_SUCH_HOST), now=0) == Failure(
        "ErrImagePull", NO_SUCH_HOST, "app"
    )


def test_a_crash_loop_ends_the_wait_after_max_restarts_with_its_last_log_line() -> None:
    asked: list[str] = []

    def last_line(container: str) -> str:
        asked.append(container)
        return "cannot open /data/shop.db"

    watch = FailureWatch(max_restarts=3, last_line=last_line)
    assert watch.observe(crashed(1), now=0) is None
    assert watch.observe(crashed(2), now=10) is None
    failure = watch.observe(crashed(3), now=30)
    assert failure is not None
    assert failure.line("web") == (
        "pod/web/app: CrashLoopBackOff: last exit code 1 (Error); gave up after 3 restarts; "
        "last log line: cannot open /data/shop.db"
    )
    assert asked == ["app"]


def test_a_crash_loop_without_max_restarts_never_ends_the_wait() -> None:
    watch = FailureWatch(max_restarts=None)
    assert watch.observe(crashed(100), now=0) is None


def test_the_commands_default_max_restarts_is_the_librarys() -> None:
    from asynckubelet.cli import applywait
    from asynckubelet.cli.commands import run

    assert applywait.DEFAULT_MAX_RESTARTS == run.DEFAULT_MAX_RESTARTS == DEFAULT_MAX_RESTARTS
