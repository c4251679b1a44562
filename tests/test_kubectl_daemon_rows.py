"""``get daemonsets`` and ``get cronjobs`` rows in kubectl's columns (``printDaemonSet``,
``printCronJob``): counts from the status, the node selector, the schedule, time zone,
suspension, active Jobs and the last schedule's age."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from asynckubelet.kubectl.objects import (
    CRONJOB_COLUMNS,
    DAEMONSET_COLUMNS,
    workload_row,
)
from asynckubelet.node.objects import StoredObject

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
TEMPLATE = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def stored(kind: str, spec: dict[str, Any], status: dict[str, Any]) -> StoredObject:
    body = {
        "metadata": {
            "name": "x",
            "namespace": "default",
            "creationTimestamp": "2026-11-30T11:00:00Z",
        },
        "spec": spec,
        "status": status,
    }
    return StoredObject(kind=kind, namespace="default", name="x", body=body, source="api")


def test_a_daemonset_row_shows_its_counts_and_node_selector() -> None:
    template = {"spec": {**TEMPLATE["spec"], "nodeSelector": {"disktype": "ssd"}}}
    spec = {"template": template, "selector": {"matchLabels": {"app": "x"}}}
    status = {
        "desiredNumberScheduled": 1,
        "currentNumberScheduled": 1,
        "numberReady": 0,
        "updatedNumberScheduled": 1,
    }
    row = workload_row(stored("DaemonSet", spec, status), now=NOW)
    assert len(row) == len(DAEMONSET_COLUMNS)
    assert row == ["x", "1", "1", "0", "1", "0", "disktype=ssd", "60m", "c", "busybox", "app=x"]


def test_a_daemonset_without_a_node_selector_shows_none() -> None:
    row = workload_row(stored("DaemonSet", {"template": TEMPLATE}, {}), now=NOW)
    assert row[6] == "<none>"


def test_a_cronjob_row_shows_schedule_zone_suspension_actives_and_last_schedule() -> None:
    spec = {
        "schedule": "*/5 * * * *",
        "timeZone": "Europe/Paris",
        "suspend": True,
        "jobTemplate": {"spec": {"template": TEMPLATE}},
    }
    status = {"active": [{"name": "x-1"}], "lastScheduleTime": "2026-11-30T11:55:00Z"}
    row = workload_row(stored("CronJob", spec, status), now=NOW)
    assert len(row) == len(CRONJOB_COLUMNS)
    assert row == [
        "x",
        "*/5 * * * *",
        "Europe/Paris",
        "True",
        "1",
        "5m",
        "60m",
        "c",
        "busybox",
        "<none>",
    ]


def test_a_cronjob_never_scheduled_shows_none() -> None:
    row = workload_row(stored("CronJob", {"schedule": "@daily"}, {}), now=NOW)
    assert row[2:6] == ["<none>", "False", "0", "<none>"]
