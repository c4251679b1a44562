"""When a foreground wait is over: permanent waiting reasons end it at once, a missing
ConfigMap after its timeout, a pull that keeps failing after the pull timeout, a
rejection at once; a network error before its timeout does not."""

from __future__ import annotations

import pytest
from lightkube.models.core_v1 import (
    ContainerState,
    ContainerStateWaiting,
    ContainerStatus,
    PodStatus,
)

from asynckubelet.node.failures import Failure, FailureWatch

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
