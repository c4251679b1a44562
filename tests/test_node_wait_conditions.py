"""``Kubelet.wait`` conditions: condition types, phases, Terminal and Deleted; and the
early end of a wait on what waiting will not fix."""

from __future__ import annotations

from typing import Any

import anyio
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

from asynckubelet import errors
from asynckubelet.docker import LogLine
from asynckubelet.node.reads import PodReads, _condition


def pod(phase: str, ready: bool = False) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="p", namespace="default", uid="u"),
        status=PodStatus(
            phase=phase,
            conditions=[PodCondition(type="Ready", status="True" if ready else "False")],
        ),
    )


@pytest.mark.parametrize(
    ("condition", "subject", "met"),
    [
        ("Ready", pod("Running", ready=True), True),
        ("Ready", pod("Running"), False),
        ("Running", pod("Running"), True),
        ("Succeeded", pod("Running"), False),
        ("Terminal", pod("Failed"), True),
        ("Terminal", pod("Succeeded"), True),
        ("Terminal", pod("Running"), False),
        ("Deleted", None, True),
        ("Deleted", pod("Running"), False),
        ("Ready", None, False),
    ],
)
def test_conditions_are_met_as_named(condition: str, subject: Pod | None, met: bool) -> None:
    assert _condition(condition)(subject) is met


def test_an_unknown_condition_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown condition 'Healthy'"):
        _condition("Healthy")(pod("Running"))


def test_a_callable_condition_is_used_as_is() -> None:
    assert _condition(lambda p: p is not None)(pod("Pending")) is True


# -- early ends --------------------------------------------------------------------------------


class _Changes:
    async def changed(self) -> None:
        await anyio.sleep(0.01)


class _Node(PodReads):
    """A node's read side over a scripted sequence of statuses."""

    def __init__(self, statuses: list[PodStatus], log: list[LogLine] | None = None) -> None:
        self.statuses = statuses
        self.shown = 0
        self.log = log
        self.status = _Changes()  # type: ignore[assignment]

    def get(self, namespace: str, name: str) -> Pod | None:
        status = self.statuses[min(self.shown, len(self.statuses) - 1)]
        self.shown += 1
        return Pod(metadata=ObjectMeta(name=name, namespace=namespace, uid="u"), status=status)

    async def read_logs(self, namespace: str, name: str, **kwargs: Any) -> list[LogLine]:
        if self.log is None:
            raise errors.NotFound("no dead instance")
        assert kwargs == {"container": "app", "previous": True, "tail": 1}
        return self.log


def _waiting(reason: str, message: str, *, restarts: int = 0) -> PodStatus:
    return PodStatus(
        phase="Pending",
        containerStatuses=[
            ContainerStatus(
                name="app",
                image="x",
                imageID="",
                ready=False,
                restartCount=restarts,
                state=ContainerState(waiting=ContainerStateWaiting(reason=reason, message=message)),
                lastState=ContainerState(
                    terminated=ContainerStateTerminated(exitCode=1, reason="Error")
                ),
            )
        ],
    )


@pytest.mark.anyio
async def test_a_wait_for_ready_ends_at_once_on_an_image_never_pulled() -> None:
    node = _Node([_waiting("ErrImageNeverPull", 'Container image "x" is not present')])
    with pytest.raises(errors.PodError) as raised:
        await node.wait("default", "web", "Ready", timeout=30)
    assert str(raised.value) == 'pod/web/app: ErrImageNeverPull: Container image "x" is not present'


@pytest.mark.anyio
async def test_a_wait_ends_on_a_crash_loop_past_max_restarts_with_its_last_log_line() -> None:
    crash = "back-off 10s restarting failed container=app pod=web_default(u)"
    node = _Node(
        [_waiting("CrashLoopBackOff", crash, restarts=n) for n in (0, 1, 2)],
        log=[LogLine(stream="stderr", text="cannot open /data/shop.db")],
    )
    with pytest.raises(errors.PodError) as raised:
        await node.wait("default", "web", "Running", timeout=30, max_restarts=2)
    assert str(raised.value) == (
        "pod/web/app: CrashLoopBackOff: last exit code 1 (Error); gave up after 2 restarts; "
        "last log line: cannot open /data/shop.db"
    )


@pytest.mark.anyio
async def test_a_crash_loops_failure_without_a_readable_log_says_the_rest() -> None:
    node = _Node([_waiting("CrashLoopBackOff", "back-off", restarts=3)])
    with pytest.raises(errors.PodError, match=r"gave up after 3 restarts$"):
        await node.wait("default", "web", timeout=30)


@pytest.mark.anyio
async def test_a_wait_for_a_callable_or_deleted_is_not_ended_by_a_failure() -> None:
    never = _waiting("ErrImageNeverPull", "not present")
    node = _Node([never, never, never])
    found = await node.wait("default", "web", lambda p: node.shown >= 3, timeout=30)
    assert found is not None
    with pytest.raises(TimeoutError):
        await node.wait("default", "web", "Deleted", timeout=0.1)
