"""The DaemonSet controller's decisions for the one node: whether the node should run
the daemon pod (node selector, node affinity, taints and tolerations), rolling update and
OnDelete, and the status it reports."""

from __future__ import annotations

from typing import Any

import pytest
from workload_helpers import NOW, pod

from asynckubelet.node.admission import Taint
from asynckubelet.workloads.daemonset import (
    REVISION_HASH,
    NodeView,
    daemon_affinity,
    daemon_tolerations,
    node_labels,
    reconcile_daemonset,
    revision_hash,
    should_run,
)
from asynckubelet.workloads.pods import PodView
from asynckubelet.workloads.readiness import readiness

NODE = NodeView(name="here", labels=node_labels("here", {"disktype": "ssd"}))


def daemonset(spec: dict[str, Any] | None = None, **template_spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "agent", "namespace": "default", "uid": "d-1", "generation": 2},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "c"}], **template_spec},
            },
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            **(spec or {}),
        },
    }


CURRENT = revision_hash(daemonset())


def daemon(name: str = "agent-abcde", revision: str = CURRENT, **kw: Any) -> PodView:
    return pod(name, labels={REVISION_HASH: revision}, **kw)


AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "disktype", "operator": "In", "values": ["hdd"]}]}
            ]
        }
    }
}


@pytest.mark.parametrize(
    ("template_spec", "taints", "runs"),
    [
        ({}, (), True),
        ({"nodeSelector": {"disktype": "ssd"}}, (), True),
        ({"nodeSelector": {"kubernetes.io/hostname": "here"}}, (), True),
        ({"nodeSelector": {"disktype": "hdd"}}, (), False),
        ({"affinity": AFFINITY}, (), False),
        ({}, (Taint("dedicated", "NoSchedule", "db"),), False),
        ({}, (Taint("dedicated", "PreferNoSchedule", "db"),), True),
        (
            {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db"}]},
            (Taint("dedicated", "NoSchedule", "db"),),
            True,
        ),
        ({"tolerations": [{"operator": "Exists"}]}, (Taint("x", "NoExecute"),), True),
        ({}, (Taint("node.kubernetes.io/unschedulable", "NoSchedule"),), True),
    ],
)
def test_the_node_runs_the_daemon_pod_when_it_matches_and_tolerates(
    template_spec: dict[str, Any], taints: tuple[Taint, ...], runs: bool
) -> None:
    node = NodeView(name=NODE.name, labels=NODE.labels, taints=taints)
    assert should_run(daemonset(**template_spec)["spec"]["template"], node) is runs


def test_the_daemon_pod_gets_the_controller_s_tolerations_once() -> None:
    given = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}]
    added = daemon_tolerations({"tolerations": given, "hostNetwork": True})
    keys = [t["key"] for t in added]
    assert keys.count("node.kubernetes.io/not-ready") == 1
    assert "node.kubernetes.io/network-unavailable" in keys
    assert len(added) == 7


def test_no_pod_is_made_then_one() -> None:
    plan = reconcile_daemonset(daemonset(), [], NODE, NOW)
    assert plan.create
    assert not plan.delete
    assert plan.status["desiredNumberScheduled"] == 1
    assert plan.status["numberUnavailable"] == 1


def test_a_current_ready_pod_is_left_alone_and_counted() -> None:
    plan = reconcile_daemonset(daemonset(), [daemon()], NODE, NOW)
    assert not plan.create
    assert not plan.delete
    assert plan.status == {
        "currentNumberScheduled": 1,
        "numberMisscheduled": 0,
        "desiredNumberScheduled": 1,
        "numberReady": 1,
        "observedGeneration": 2,
        "updatedNumberScheduled": 1,
        "numberAvailable": 1,
    }


def test_rolling_update_deletes_the_old_pod_and_makes_the_new_once_it_is_gone() -> None:
    plan = reconcile_daemonset(daemonset(), [daemon(revision="old")], NODE, NOW)
    assert (plan.create, plan.delete) == (False, ["agent-abcde"])
    assert plan.status["updatedNumberScheduled"] == 0
    stopping = daemon(revision="old", deleting=True)
    assert not reconcile_daemonset(daemonset(), [stopping], NODE, NOW).create
    assert reconcile_daemonset(daemonset(), [], NODE, NOW).create


def test_rolling_update_with_a_surge_makes_the_new_pod_first() -> None:
    surge = {
        "updateStrategy": {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
        }
    }
    plan = reconcile_daemonset(daemonset(surge), [daemon(revision="old")], NODE, NOW)
    assert (plan.create, plan.delete) == (True, [])
    both = [daemon("agent-old01", revision="old"), daemon("agent-new01")]
    plan = reconcile_daemonset(daemonset(surge), both, NODE, NOW)
    assert (plan.create, plan.delete) == (False, ["agent-old01"])


def test_on_delete_keeps_the_old_pod_until_someone_deletes_it() -> None:
    on_delete = {"updateStrategy": {"type": "OnDelete"}}
    plan = reconcile_daemonset(daemonset(on_delete), [daemon(revision="old")], NODE, NOW)
    assert (plan.create, plan.delete) == (False, [])
    assert reconcile_daemonset(daemonset(on_delete), [], NODE, NOW).create


def test_a_failed_pod_is_replaced() -> None:
    failed = daemon(phase="Failed", ready=False, finished=1)
    plan = reconcile_daemonset(daemonset(), [failed], NODE, NOW)
    assert (plan.create, plan.delete) == (True, ["agent-abcde"])


def test_a_pod_on_a_node_that_no_longer_matches_is_deleted() -> None:
    ds = daemonset(nodeSelector={"disktype": "hdd"})
    plan = reconcile_daemonset(ds, [daemon(revision=revision_hash(ds))], NODE, NOW)
    assert (plan.create, plan.delete) == (False, ["agent-abcde"])
    assert plan.status["desiredNumberScheduled"] == 0
    assert plan.status["numberMisscheduled"] == 1


def test_the_daemon_pod_s_required_node_affinity_names_this_node_only() -> None:
    given = {**AFFINITY, "podAffinity": {"x": 1}}
    found = daemon_affinity(given, "here")
    required = found["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["here"]}]}
    ]
    assert found["podAffinity"] == {"x": 1}
    assert AFFINITY["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ][0]["matchExpressions"]


@pytest.mark.parametrize(
    ("status", "generation", "state", "message"),
    [
        ({}, 2, "waiting", "Waiting for daemon set spec update to be observed..."),
        (
            {"observedGeneration": 2, "desiredNumberScheduled": 1},
            2,
            "waiting",
            'Waiting for daemon set "agent" rollout to finish: 0 out of 1 new pods have been '
            "updated...",
        ),
        (
            {"observedGeneration": 2, "desiredNumberScheduled": 1, "updatedNumberScheduled": 1},
            2,
            "waiting",
            'Waiting for daemon set "agent" rollout to finish: 0 of 1 updated pods are '
            "available...",
        ),
        (
            {
                "observedGeneration": 2,
                "desiredNumberScheduled": 1,
                "updatedNumberScheduled": 1,
                "numberAvailable": 1,
            },
            2,
            "ready",
            'daemon set "agent" successfully rolled out',
        ),
        ({"observedGeneration": 2}, 2, "ready", 'daemon set "agent" successfully rolled out'),
    ],
)
def test_rollout_status_of_a_daemonset_in_kubectl_s_words(
    status: dict[str, Any], generation: int, state: str, message: str
) -> None:
    body = daemonset()
    body["metadata"]["generation"] = generation
    body["status"] = status
    found = readiness("DaemonSet", body)
    assert (found.state, found.message) == (state, message)
