"""The Deployment and ReplicaSet controllers' decisions as tables: desired state and the
ReplicaSets' pods in, scaling and status out (upstream's rolling.go, recreate.go and
replica_set.go cases)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from workload_helpers import NOW, ago, pod

from asynckubelet.workloads.deployment import (
    POD_TEMPLATE_HASH,
    REVISION,
    REVISION_HISTORY,
    RSView,
    max_surge,
    max_unavailable,
    pod_template_hash,
    reconcile_deployment,
    safe_encode,
)
from asynckubelet.workloads.replicaset import (
    KEEP_FAILED,
    pods_to_delete,
    reconcile_replicaset,
)

TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "web", "image": "busybox:1"}]},
}


def deployment(
    replicas: int = 3,
    *,
    surge: Any = 1,
    unavailable: Any = 0,
    strategy: str = "RollingUpdate",
    image: str = "busybox:1",
    generation: int = 1,
    history: int = 10,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    template = copy.deepcopy(TEMPLATE)
    template["spec"]["containers"][0]["image"] = image
    spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": "web"}},
        "template": template,
        "strategy": {"type": strategy},
        "revisionHistoryLimit": history,
        "progressDeadlineSeconds": 600,
    }
    if strategy == "RollingUpdate":
        spec["strategy"]["rollingUpdate"] = {"maxSurge": surge, "maxUnavailable": unavailable}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "uid": "d-1", "generation": generation},
        "spec": spec,
        "status": status or {},
    }


def rs(
    image: str,
    replicas: int,
    available: int,
    *,
    actual: int | None = None,
    revision: int = 1,
    created: float = 100.0,
    running: int | None = None,
) -> RSView:
    template = copy.deepcopy(TEMPLATE)
    template["spec"]["containers"][0]["image"] = image
    hash_ = pod_template_hash(template)
    template["metadata"]["labels"][POD_TEMPLATE_HASH] = hash_
    body = {
        "metadata": {
            "name": f"web-{hash_}",
            "uid": f"rs-{hash_}",
            "annotations": {REVISION: str(revision)},
            "creationTimestamp": ago(created),
        },
        "spec": {"replicas": replicas, "template": template},
    }
    count = replicas if actual is None else actual
    status = {"replicas": count, "readyReplicas": available, "availableReplicas": available}
    return RSView(body=body, status=status, old_pods_running=count if running is None else running)


def name_of(image: str) -> str:
    return rs(image, 0, 0).name


# -- the hash and the names --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", ""), ("0", "4"), ("9", "f"), ("3179838802", "75cfd7dd46")],
)
def test_safe_encoding_maps_each_digit_onto_the_safe_alphabet(text: str, expected: str) -> None:
    assert safe_encode(text) == expected


def test_the_pod_template_hash_is_stable_and_follows_the_template() -> None:
    other = copy.deepcopy(TEMPLATE)
    other["spec"]["containers"][0]["image"] = "busybox:2"
    assert pod_template_hash(TEMPLATE) == pod_template_hash(copy.deepcopy(TEMPLATE))
    assert pod_template_hash(TEMPLATE) != pod_template_hash(other)
    assert pod_template_hash(TEMPLATE, 1) != pod_template_hash(TEMPLATE)
    assert set(pod_template_hash(TEMPLATE)) <= set("bcdfghjklmnpqrstvwxz2456789")


@pytest.mark.parametrize(
    ("replicas", "surge", "unavailable", "expected"),
    [
        (3, "25%", "25%", (1, 0)),
        (4, "25%", "25%", (1, 1)),
        (10, "25%", "25%", (3, 2)),
        (3, 0, 0, (0, 1)),
        (3, 1, 0, (1, 0)),
        (1, "50%", "50%", (1, 0)),
        (2, 0, 5, (0, 2)),
    ],
)
def test_surge_rounds_up_and_unavailable_down_as_resolve_fenceposts(
    replicas: int, surge: Any, unavailable: Any, expected: tuple[int, int]
) -> None:
    d = deployment(replicas, surge=surge, unavailable=unavailable)
    assert (max_surge(d), max_unavailable(d)) == expected


# -- a new Deployment --------------------------------------------------------------------------


def test_a_new_deployment_makes_its_replicaset_at_full_size() -> None:
    plan = reconcile_deployment(deployment(2), [], NOW)
    assert plan.create is not None
    body = plan.create
    hash_ = pod_template_hash(TEMPLATE)
    assert body["metadata"]["name"] == f"web-{hash_}"
    assert body["spec"]["replicas"] == 2
    assert body["spec"]["selector"]["matchLabels"] == {"app": "web", POD_TEMPLATE_HASH: hash_}
    assert body["spec"]["template"]["metadata"]["labels"][POD_TEMPLATE_HASH] == hash_
    assert body["metadata"]["annotations"][REVISION] == "1"
    assert body["metadata"]["ownerReferences"][0]["uid"] == "d-1"
    assert plan.events == [
        ("Normal", "ScalingReplicaSet", f"Scaled up replica set web-{hash_} from 0 to 2")
    ]
    progressing = [c for c in plan.status["conditions"] if c["type"] == "Progressing"]
    assert progressing[0]["reason"] == "NewReplicaSetCreated"
    assert plan.annotations == {REVISION: "1"}


def test_a_changed_template_makes_a_new_replicaset_within_the_surge() -> None:
    old = rs("busybox:1", 3, 3)
    plan = reconcile_deployment(deployment(3, image="busybox:2", surge=1), [old], NOW)
    assert plan.create is not None
    assert plan.create["spec"]["replicas"] == 1
    assert plan.create["metadata"]["annotations"][REVISION] == "2"
    assert plan.scale == {}


# -- rolling update (rolling.go) ---------------------------------------------------------------

ROLLING = [
    # (surge, unavailable, (old replicas, old available), (new replicas, new available), scale)
    ("new grows within the surge", 1, 0, (3, 3), (0, 0), {"new": 1}),
    ("no old pod goes before a new one is available", 1, 0, (3, 3), (1, 0), {}),
    ("an old pod goes once a new one is available", 1, 0, (3, 3), (1, 1), {"old": 2}),
    ("new grows again after an old one went", 1, 0, (2, 2), (1, 1), {"new": 2}),
    ("the last old pod goes", 1, 0, (1, 1), (3, 3), {"old": 0}),
    ("without surge old pods go first, within unavailable", 0, 1, (3, 3), (0, 0), {"old": 2}),
    ("without surge the new one grows into the room", 0, 1, (2, 2), (0, 0), {"new": 1}),
    ("unhealthy old pods go first", 1, 1, (3, 1), (1, 0), {"old": 2}),
    ("an unavailable old pod goes even at the floor", 1, 1, (3, 2), (1, 0), {"old": 2}),
    ("unhealthy first, then as availability allows", 1, 1, (3, 2), (1, 1), {"old": 1}),
]


@pytest.mark.parametrize(
    ("surge", "unavailable", "old", "new", "expected"),
    [c[1:] for c in ROLLING],
    ids=[c[0] for c in ROLLING],
)
def test_a_rolling_update_scales_as_upstream(
    surge: int,
    unavailable: int,
    old: tuple[int, int],
    new: tuple[int, int],
    expected: dict[str, int],
) -> None:
    olds = rs("busybox:1", *old, created=200)
    news = rs("busybox:2", *new, revision=2, created=10)
    d = deployment(3, image="busybox:2", surge=surge, unavailable=unavailable)
    plan = reconcile_deployment(d, [olds, news], NOW)
    named = {{olds.name: "old", news.name: "new"}[k]: v for k, v in plan.scale.items()}
    assert named == expected
    assert plan.create is None


def test_availability_never_drops_below_the_floor_through_a_whole_rollout() -> None:
    """Play a rollout to its end, every new pod becoming available one pass after it
    is made: with maxUnavailable 0, available pods never fall below the replicas."""
    old, new = [3, 3], [0, 0]
    for _ in range(20):
        views = [rs("busybox:1", old[0], old[1], created=200)]
        views.append(rs("busybox:2", new[0], new[1], revision=2, created=10))
        plan = reconcile_deployment(deployment(3, image="busybox:2"), views, NOW)
        for name, value in plan.scale.items():
            target = old if name == views[0].name else new
            target[0] = value
            target[1] = min(target[1], value)
        assert old[1] + new[1] >= 3
        new[1] = new[0]
        if new == [3, 3] and old[0] == 0:
            break
    assert (old[0], new) == (0, [3, 3])


def test_scaling_by_reapply_resizes_the_current_replicaset() -> None:
    current = rs("busybox:1", 3, 3)
    down = reconcile_deployment(deployment(1), [current], NOW)
    up = reconcile_deployment(deployment(5), [current], NOW)
    assert down.scale == {current.name: 1}
    assert up.scale == {current.name: 5}
    assert down.events == [
        ("Normal", "ScalingReplicaSet", f"Scaled down replica set {current.name} from 3 to 1")
    ]


# -- Recreate ----------------------------------------------------------------------------------


def test_recreate_removes_every_old_pod_before_growing_the_new_replicaset() -> None:
    old = rs("busybox:1", 2, 2)
    new = rs("busybox:2", 0, 0, revision=2)
    first = reconcile_deployment(
        deployment(2, strategy="Recreate", image="busybox:2"), [old, new], NOW
    )
    assert first.scale == {old.name: 0}
    stopping = rs("busybox:1", 0, 0, actual=0, running=1)
    second = reconcile_deployment(
        deployment(2, strategy="Recreate", image="busybox:2"), [stopping, new], NOW
    )
    assert second.scale == {}
    gone = rs("busybox:1", 0, 0, running=0)
    third = reconcile_deployment(
        deployment(2, strategy="Recreate", image="busybox:2"), [gone, new], NOW
    )
    assert third.scale == {new.name: 2}


# -- status, revisions, history ----------------------------------------------------------------


def test_a_rolled_out_deployment_reports_complete_and_available() -> None:
    current = rs("busybox:1", 3, 3)
    plan = reconcile_deployment(deployment(3), [current], NOW)
    status = plan.status
    assert {k: status[k] for k in ("replicas", "updatedReplicas", "availableReplicas")} == {
        "replicas": 3,
        "updatedReplicas": 3,
        "availableReplicas": 3,
    }
    reasons = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert reasons == {
        "Available": ("True", "MinimumReplicasAvailable"),
        "Progressing": ("True", "NewReplicaSetAvailable"),
    }


def test_a_deployment_below_its_floor_is_not_available() -> None:
    plan = reconcile_deployment(deployment(3, unavailable=1), [rs("busybox:1", 3, 1)], NOW)
    available = next(c for c in plan.status["conditions"] if c["type"] == "Available")
    assert (available["status"], available["reason"]) == ("False", "MinimumReplicasUnavailable")
    assert available["message"] == "Deployment does not have minimum availability."


def test_a_rollout_without_progress_past_its_deadline_times_out() -> None:
    stalled = {
        "conditions": [
            {
                "type": "Progressing",
                "status": "True",
                "reason": "ReplicaSetUpdated",
                "lastUpdateTime": ago(700),
                "lastTransitionTime": ago(700),
                "message": "",
            }
        ],
        "replicas": 4,
        "updatedReplicas": 1,
        "availableReplicas": 3,
        "readyReplicas": 3,
    }
    d = deployment(3, image="busybox:2", status=stalled)
    plan = reconcile_deployment(d, [rs("busybox:1", 3, 3), rs("busybox:2", 1, 0, revision=2)], NOW)
    progressing = next(c for c in plan.status["conditions"] if c["type"] == "Progressing")
    assert progressing["reason"] == "ProgressDeadlineExceeded"
    assert (
        progressing["message"] == f'ReplicaSet "{name_of("busybox:2")}" has timed out progressing.'
    )


def test_going_back_to_an_old_template_takes_its_replicaset_with_a_new_revision() -> None:
    first = rs("busybox:1", 0, 0, revision=1, running=0)
    second = rs("busybox:2", 3, 3, revision=2)
    plan = reconcile_deployment(deployment(3, image="busybox:1"), [first, second], NOW)
    assert plan.create is None
    assert plan.annotate == {first.name: {REVISION: "3", REVISION_HISTORY: "1"}}
    assert plan.scale == {first.name: 1}


def test_a_rollback_template_from_a_typed_client_takes_the_old_replicaset() -> None:
    first = rs("busybox:1", 0, 0, revision=1, running=0)
    second = rs("busybox:2", 3, 3, revision=2)
    d = deployment(3, image="busybox:1")
    d["spec"]["template"]["metadata"]["creationTimestamp"] = None
    d["spec"]["template"]["spec"]["containers"][0]["resources"] = {}
    plan = reconcile_deployment(d, [first, second], NOW)
    assert plan.create is None
    assert plan.annotate[first.name][REVISION] == "3"


def test_a_deployments_annotations_go_to_its_new_replicaset_but_its_own_do_not() -> None:
    d = deployment(3)
    d["metadata"]["annotations"] = {
        "kubernetes.io/change-cause": "image 1",
        REVISION: "1",
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
    }
    created = reconcile_deployment(d, [], NOW).create
    assert created is not None
    assert created["metadata"]["annotations"]["kubernetes.io/change-cause"] == "image 1"
    assert (
        "kubectl.kubernetes.io/last-applied-configuration" not in created["metadata"]["annotations"]
    )
    d["metadata"]["annotations"]["kubernetes.io/change-cause"] = "image 1, again"
    current = rs("busybox:1", 3, 3, revision=1)
    plan = reconcile_deployment(d, [current], NOW)
    assert plan.annotate == {current.name: {"kubernetes.io/change-cause": "image 1, again"}}


def test_old_replicasets_beyond_the_history_limit_are_deleted_oldest_first() -> None:
    olds = [rs(f"busybox:{i}", 0, 0, revision=i, running=0, created=1000 - i) for i in range(1, 4)]
    current = rs("busybox:9", 3, 3, revision=9)
    plan = reconcile_deployment(deployment(3, image="busybox:9", history=1), [*olds, current], NOW)
    assert plan.delete == [olds[0].name, olds[1].name]


# -- ReplicaSet (replica_set.go) ---------------------------------------------------------------


def test_a_replicaset_makes_the_missing_pods() -> None:
    plan = reconcile_replicaset(
        replicas=3, pods=[pod("a")], selector_labels={}, min_ready_seconds=0, generation=1, now=NOW
    )
    assert (plan.create, plan.delete) == (2, ())


def test_finished_and_deleted_pods_are_not_counted_as_replicas() -> None:
    pods = [pod("a"), pod("b", phase="Succeeded", ready=False), pod("c", deleting=True)]
    plan = reconcile_replicaset(
        replicas=2, pods=pods, selector_labels={}, min_ready_seconds=0, generation=1, now=NOW
    )
    assert plan.create == 1
    assert plan.status["replicas"] == 1
    assert plan.status["terminatingReplicas"] == 1


@pytest.mark.parametrize(
    ("pods", "first"),
    [
        ([pod("running"), pod("pending", phase="Pending", ready=False)], "pending"),
        ([pod("ready"), pod("unready", ready=False)], "unready"),
        ([pod("long", ready_for=600), pod("short", ready_for=5)], "short"),
        ([pod("calm"), pod("crashy", restarts=4)], "crashy"),
        ([pod("old", created=500, ready_for=60), pod("young", created=100, ready_for=60)], "young"),
    ],
    ids=[
        "pending first",
        "not ready first",
        "ready for less first",
        "more restarts first",
        "newer first",
    ],
)
def test_the_surplus_pods_go_least_far_along_first(pods: list[Any], first: str) -> None:
    assert pods_to_delete(pods, 1, NOW)[0].name == first


def test_a_pod_is_available_only_after_min_ready_seconds() -> None:
    pods = [pod("a", ready_for=3), pod("b", ready_for=30)]
    plan = reconcile_replicaset(
        replicas=2, pods=pods, selector_labels={}, min_ready_seconds=10, generation=1, now=NOW
    )
    assert (plan.status["readyReplicas"], plan.status["availableReplicas"]) == (2, 1)
    assert plan.requeue_after == pytest.approx(7.0)


def test_a_pod_the_node_refused_is_replaced_after_a_back_off() -> None:
    refused = pod("r", phase="Failed", ready=False, finished=3, container_id=None)
    plan = reconcile_replicaset(
        replicas=1, pods=[refused], selector_labels={}, min_ready_seconds=0, generation=1, now=NOW
    )
    assert plan.create == 0
    assert plan.requeue_after == pytest.approx(7.0)
    later = reconcile_replicaset(
        replicas=1,
        pods=[pod("r", phase="Failed", ready=False, finished=30, container_id=None)],
        selector_labels={},
        min_ready_seconds=0,
        generation=1,
        now=NOW,
    )
    assert later.create == 1


def test_only_the_newest_refused_pods_are_kept() -> None:
    refused = [
        pod(f"r{i}", phase="Failed", ready=False, finished=1000 + i, container_id=None)
        for i in range(KEEP_FAILED + 2)
    ]
    plan = reconcile_replicaset(
        replicas=0, pods=refused, selector_labels={}, min_ready_seconds=0, generation=1, now=NOW
    )
    assert sorted(plan.delete) == [f"r{KEEP_FAILED}", f"r{KEEP_FAILED + 1}"]
