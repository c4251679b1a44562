"""The StatefulSet controller's decisions as tables: ordered creation, scale-down from
the highest ordinal, rolling update one pod at a time."""

from __future__ import annotations

from typing import Any

import pytest
from workload_helpers import NOW, pod

from asynckubelet.workloads.pods import PodView
from asynckubelet.workloads.statefulset import (
    REVISION_HASH,
    ordinal_of,
    reconcile_statefulset,
    update_revision,
)

TEMPLATE = {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c"}]}}


def sts(replicas: int = 3, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "db", "namespace": "default", "uid": "s-1", "generation": 1},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "db"}},
            "template": TEMPLATE,
            "podManagementPolicy": "OrderedReady",
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            **spec,
        },
    }


REV = update_revision(sts())


def member(ordinal: int, *, revision: str = REV, **kw: Any) -> PodView:
    return pod(f"db-{ordinal}", labels={REVISION_HASH: revision}, **kw)


CASES = [
    ("the first pod first", {}, [], [0], []),
    ("the next only once the one before is ready", {}, [member(0, ready=False)], [], []),
    ("the next once the one before is ready", {}, [member(0)], [1], []),
    ("all at once when Parallel", {"podManagementPolicy": "Parallel"}, [], [0, 1, 2], []),
    ("a failed pod is made again", {}, [member(0, phase="Failed", ready=False)], [], ["db-0"]),
    (
        "scale down from the highest ordinal",
        {"replicas": 1},
        [member(0), member(1), member(2)],
        [],
        ["db-2"],
    ),
    (
        "one at a time while scaling down",
        {"replicas": 1},
        [member(0), member(1), member(2, deleting=True)],
        [],
        [],
    ),
    (
        "an update replaces the highest outdated pod",
        {},
        [member(0, revision="old"), member(1, revision="old"), member(2, revision="old")],
        [],
        ["db-2"],
    ),
    (
        "an update waits for the replaced pod to be ready",
        {},
        [member(0, revision="old"), member(1, revision="old"), member(2, ready=False)],
        [],
        [],
    ),
    (
        "OnDelete replaces nothing itself",
        {"updateStrategy": {"type": "OnDelete"}},
        [member(0, revision="old"), member(1, revision="old"), member(2, revision="old")],
        [],
        [],
    ),
    (
        "a partition keeps the lower ordinals",
        {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}},
        [member(0, revision="old"), member(1, revision="old"), member(2)],
        [],
        [],
    ),
]


@pytest.mark.parametrize(
    ("spec", "pods", "create", "delete"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_statefulset_acts_as_upstream(
    spec: dict[str, Any], pods: list[PodView], create: list[int], delete: list[str]
) -> None:
    plan = reconcile_statefulset(sts(**spec), pods, NOW)
    assert (plan.create, plan.delete) == (create, delete)


def test_the_status_counts_ready_and_updated_pods_and_names_revisions() -> None:
    plan = reconcile_statefulset(sts(), [member(0), member(1), member(2, ready=False)], NOW)
    status = plan.status
    assert (status["replicas"], status["readyReplicas"], status["updatedReplicas"]) == (3, 2, 3)
    assert status["updateRevision"] == REV
    assert REV.startswith("db-")


def test_a_pod_name_gives_its_ordinal() -> None:
    assert [ordinal_of("db", n) for n in ("db-0", "db-12", "db-x", "web-1")] == [0, 12, None, None]
