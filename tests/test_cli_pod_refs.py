"""``logs`` and ``exec`` of ``TYPE/NAME``: which of a workload's pods kubectl's order picks."""

from __future__ import annotations

from typing import Any

from asynckubelet.cli.client import select_pods

SELECTOR = {"matchLabels": {"app": "web"}}


def pod(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    node: str | None = "n1",
    phase: str = "Running",
    ready_since: str | None = "2026-12-01T10:00:00Z",
    restarts: int = 0,
    created: str = "2026-12-01T09:00:00Z",
    deleting: bool = False,
) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": ready_since}]
    return {
        "metadata": {
            "name": name,
            "labels": {"app": "web"} if labels is None else labels,
            "creationTimestamp": created,
            **({"deletionTimestamp": "2026-12-01T11:00:00Z"} if deleting else {}),
        },
        "spec": {"nodeName": node} if node else {},
        "status": {
            "phase": phase,
            "conditions": conditions if ready_since else [],
            "containerStatuses": [{"name": "a", "restartCount": restarts}],
        },
    }


def names(pods: list[dict[str, Any]]) -> list[str]:
    return [p["metadata"]["name"] for p in select_pods(pods, SELECTOR)]


def test_only_the_pods_the_selector_matches_and_not_those_being_deleted() -> None:
    pods = [pod("a"), pod("other", labels={"app": "db"}), pod("gone", deleting=True)]
    assert names(pods) == ["a"]
    assert select_pods(pods, None) == []
    assert select_pods(pods, {}) == []


def test_the_most_active_first_as_kubectl_orders_them() -> None:
    pods = [
        pod("unassigned", node=None),
        pod("pending", phase="Pending", ready_since=None),
        pod("unready", ready_since=None),
        pod("ready-later", ready_since="2026-12-01T10:30:00Z"),
        pod("restarted", restarts=3),
        pod("newer", created="2026-12-01T09:30:00Z"),
        pod("oldest", created="2026-12-01T08:00:00Z"),
    ]
    assert names(pods) == [
        "oldest",
        "newer",
        "restarted",
        "ready-later",
        "unready",
        "pending",
        "unassigned",
    ]


def test_match_expressions_select_too() -> None:
    selector = {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]}
    pods = [pod("f", labels={"tier": "front"}), pod("b", labels={"tier": "back"})]
    assert [p["metadata"]["name"] for p in select_pods(pods, selector)] == ["f"]
