"""``Kubelet.wait`` conditions: condition types, phases, Terminal and Deleted."""

from __future__ import annotations

import pytest
from lightkube.models.core_v1 import Pod, PodCondition, PodStatus
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet.node.reads import _condition


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
