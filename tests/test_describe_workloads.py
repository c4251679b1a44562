"""``describe cronjob``, ``daemonset``, ``deployment``, ``job``, ``replicaset`` and
``statefulset`` lay out kubectl's fields in kubectl's order, aligned as its tab writer
aligns them (a run of tabbed lines shares one width, even across the pod template's last
lines), with the pod template as kubectl shows a template (no container status), the pods
a controller controls counted by phase, and an object's terminal escapes shown harmless."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from asynckubelet.kubectl.describe_workloads import (
    deployment_replicasets,
    describe_cronjob,
    describe_daemonset,
    describe_deployment,
    describe_job,
    describe_replicaset,
    describe_statefulset,
    label_selector,
    pod_template_lines,
    pods_status,
    tabbed,
)
from asynckubelet.node.events import PodEvent

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def _labels(text: str) -> list[str]:
    """The label of every line that starts with one (no indentation)."""
    return [line.split(":")[0] for line in text.splitlines() if line and not line[0].isspace()]


def _cronjob(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "tick", "namespace": "jobs", "uid": "u-cj"},
        "spec": {
            "schedule": "*/5 * * * *",
            "concurrencyPolicy": "Forbid",
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "tick", "image": "busybox"}],
                        }
                    }
                }
            },
            **spec,
        },
    }


def _daemonset(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "agent", "namespace": "default", "uid": "u-ds"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {
                    "nodeSelector": {"kubernetes.io/os": "linux", "disk": "ssd"},
                    "containers": [
                        {
                            "name": "agent",
                            "image": "busybox",
                            "env": [{"name": "VERSION", "value": "1"}],
                        }
                    ],
                },
            },
        },
        "status": status,
    }


@pytest.mark.parametrize(
    ("lines", "shown"),
    [
        (["Name:\tweb", "Namespace:\tdefault"], ["Name:       web", "Namespace:  default"]),
        (
            ["Name:\tweb", "Pod Template:", "  Labels:\tapp=web"],
            ["Name:  web", "Pod Template:", "  Labels:  app=web"],
        ),
        (["Labels:\ta=b", "\tc=d"], ["Labels:  a=b", "         c=d"]),
        (["a\tb\tc", "aaa\tb\tc", "x"], ["a    b  c", "aaa  b  c", "x"]),
        (["a:\tb", "nested\tcells\tx"], ["a:      b", "nested  cells  x"]),
    ],
)
def test_tabbed_pads_each_run_of_tabbed_lines_to_its_widest_cell_plus_two(
    lines: list[str], shown: list[str]
) -> None:
    assert tabbed(lines) == shown


def test_a_cronjob_shows_kubectls_fields_in_kubectls_order() -> None:
    assert _labels(describe_cronjob(_cronjob(), now=NOW)) == [
        "Name",
        "Namespace",
        "Labels",
        "Annotations",
        "Schedule",
        "Concurrency Policy",
        "Suspend",
        "Time Zone",
        "Successful Job History Limit",
        "Failed Job History Limit",
        "Starting Deadline Seconds",
        "Selector",
        "Parallelism",
        "Completions",
        "Pod Template",
        "Last Schedule Time",
        "Active Jobs",
        "Events",
    ]


def test_a_cronjobs_unset_fields_say_unset_aligned_on_the_longest_label() -> None:
    lines = describe_cronjob(_cronjob(), now=NOW).splitlines()
    assert lines[:14] == [
        "Name:                          tick",
        "Namespace:                     jobs",
        "Labels:                        <none>",
        "Annotations:                   <none>",
        "Schedule:                      */5 * * * *",
        "Concurrency Policy:            Forbid",
        "Suspend:                       <unset>",
        "Time Zone:                     <unset>",
        "Successful Job History Limit:  <unset>",
        "Failed Job History Limit:      <unset>",
        "Starting Deadline Seconds:     <unset>",
        "Selector:                      <unset>",
        "Parallelism:                   <unset>",
        "Completions:                   <unset>",
    ]
    assert lines[-3:] == [
        "Last Schedule Time:  <unset>",
        "Active Jobs:         <none>",
        "Events:              <none>",
    ]


def test_a_cronjobs_set_fields_show_their_values_and_the_active_jobs_by_name() -> None:
    body = _cronjob(
        suspend=True,
        timeZone="Europe/Paris",
        successfulJobsHistoryLimit=3,
        failedJobsHistoryLimit=1,
        startingDeadlineSeconds=30,
    )
    job = body["spec"]["jobTemplate"]["spec"]
    job.update(
        selector={"matchLabels": {"app": "tick"}},
        parallelism=2,
        completions=4,
        activeDeadlineSeconds=60,
    )
    body["status"] = {
        "lastScheduleTime": "2026-01-01T11:55:00Z",
        "active": [{"kind": "Job", "name": "tick-1"}, {"kind": "Job", "name": "tick-2"}],
    }
    text = describe_cronjob(body, now=NOW)
    fields = {
        line.split(":  ")[0]: line.split(":  ", 1)[1].strip()
        for line in text.splitlines()
        if ":  " in line and not line[0].isspace()
    }
    assert fields["Suspend"] == "True"
    assert fields["Time Zone"] == "Europe/Paris"
    assert fields["Successful Job History Limit"] == "3"
    assert fields["Failed Job History Limit"] == "1"
    assert fields["Starting Deadline Seconds"] == "30s"
    assert fields["Selector"] == "app=tick"
    assert (fields["Parallelism"], fields["Completions"]) == ("2", "4")
    assert fields["Active Deadline Seconds"] == "60s"
    assert fields["Last Schedule Time"] == "Thu, 01 Jan 2026 11:55:00 +0000"
    assert fields["Active Jobs"] == "tick-1, tick-2"


def test_a_daemonset_shows_kubectls_fields_counters_and_pod_status() -> None:
    body = _daemonset(
        desiredNumberScheduled=1,
        currentNumberScheduled=1,
        updatedNumberScheduled=1,
        numberAvailable=0,
        numberMisscheduled=0,
    )
    lines = describe_daemonset(body, [], now=NOW).splitlines()
    assert lines[:12] == [
        "Name:           agent",
        "Namespace:      default",
        "Selector:       app=agent",
        "Node-Selector:  disk=ssd,kubernetes.io/os=linux",
        "Labels:         <none>",
        "Annotations:    <none>",
        "Desired Number of Nodes Scheduled: 1",
        "Current Number of Nodes Scheduled: 1",
        "Number of Nodes Scheduled with Up-to-date Pods: 1",
        "Number of Nodes Scheduled with Available Pods: 0",
        "Number of Nodes Misscheduled: 0",
        "Pods Status:  0 Running / 0 Waiting / 0 Succeeded / 0 Failed",
    ]
    assert lines[12] == "Pod Template:"
    assert lines[-1] == "Events:            <none>"


def _pod(phase: str, owner_uid: str | None, *, controller: bool = True) -> dict[str, Any]:
    owners = [{"kind": "DaemonSet", "uid": owner_uid, "controller": controller}]
    return {
        "metadata": {"name": "p", "ownerReferences": owners if owner_uid else []},
        "status": {"phase": phase},
    }


def test_pods_status_counts_by_phase_only_the_pods_the_object_controls() -> None:
    pods = [
        _pod("Running", "u-ds"),
        _pod("Running", "u-ds"),
        _pod("Pending", "u-ds"),
        _pod("Succeeded", "u-ds"),
        _pod("Failed", "u-ds"),
        _pod("Unknown", "u-ds"),
        _pod("Running", "other"),
        _pod("Running", None),
        _pod("Running", "u-ds", controller=False),
    ]
    assert pods_status(pods, uid="u-ds") == (2, 1, 1, 1)
    text = describe_daemonset(_daemonset(), pods, now=NOW)
    assert "Pods Status:  2 Running / 1 Waiting / 1 Succeeded / 1 Failed" in text.splitlines()


def test_the_pod_template_shows_containers_without_status_aligned_as_kubectl() -> None:
    template = _daemonset()["spec"]["template"]
    template["metadata"]["labels"]["tier"] = "node"
    template["spec"]["tolerations"] = [
        {"key": "b", "operator": "Exists", "effect": "NoSchedule"},
        {"operator": "Exists"},
        {"key": "a", "value": "x", "effect": "NoExecute", "tolerationSeconds": 5},
    ]
    assert tabbed(pod_template_lines(template)) == [
        "Pod Template:",
        "  Labels:  app=agent",
        "           tier=node",
        "  Containers:",
        "   agent:",
        "    Image:      busybox",
        "    Port:       <none>",
        "    Host Port:  <none>",
        "    Environment:",
        "      VERSION:     1",
        "    Mounts:        <none>",
        "  Volumes:         <none>",
        "  Node-Selectors:  disk=ssd",
        "                   kubernetes.io/os=linux",
        "  Tolerations:     op=Exists",
        "                   a=x:NoExecute for 5s",
        "                   b:NoSchedule op=Exists",
    ]


def test_the_pod_template_shows_its_volumes_and_init_containers() -> None:
    template = {
        "spec": {
            "serviceAccountName": "robot",
            "initContainers": [{"name": "setup", "image": "busybox"}],
            "containers": [
                {
                    "name": "app",
                    "image": "busybox",
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
            "volumes": [{"name": "data", "emptyDir": {}}],
        }
    }
    lines = tabbed(pod_template_lines(template))
    assert lines[:4] == [
        "Pod Template:",
        "  Labels:           <none>",
        "  Service Account:  robot",
        "  Init Containers:",
    ]
    assert "   setup:" in lines
    assert lines.index("  Containers:") < lines.index("   app:")
    assert "      /data from data (rw)" in lines
    start = lines.index("  Volumes:")
    assert lines[start + 1 : start + 5] == [
        "   data:",
        "    Type:       EmptyDir (a temporary directory that shares a pod's lifetime)",
        "    Medium:     ",
        "    SizeLimit:  <unset>",
    ]
    assert not any(line.strip().startswith(("State:", "Ready:", "Image ID:")) for line in lines)


def test_annotations_leave_out_the_last_applied_copy_and_fold_long_values() -> None:
    body = _cronjob()
    body["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
        "note": "hi",
        "long": "x" * 150,
    }
    lines = describe_cronjob(body, now=NOW).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Annotations:"))
    assert lines[start].split() == ["Annotations:", "long:"]
    assert lines[start + 1].strip() == "x" * 138 + "..."
    assert lines[start + 2].strip() == "note: hi"
    assert "last-applied" not in "\n".join(lines)


def test_events_about_the_object_are_listed_at_the_bottom() -> None:
    event = PodEvent(
        namespace="default",
        pod="agent",
        uid="u-ds",
        type="Normal",
        reason="SuccessfulCreate",
        message="Created pod: agent-abcde",
        first_timestamp=NOW,
        last_timestamp=NOW,
        source="daemonset-controller",
        kind="DaemonSet",
    )
    lines = describe_daemonset(_daemonset(), [], [event], now=NOW).splitlines()
    assert lines[-4] == "Events:"
    assert lines[-1].split(None, 4) == [
        "Normal",
        "SuccessfulCreate",
        "0s",
        "daemonset-controller",
        "Created pod: agent-abcde",
    ]


def test_terminal_escapes_in_an_object_are_shown_harmless() -> None:
    """An attack: a label or annotation that would rewrite the terminal's screen."""
    body = _daemonset()
    body["metadata"]["annotations"] = {"evil": "\x1b[2J\x1b]0;owned\x07 \rhidden"}
    body["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox\x1b[1A"
    text = describe_daemonset(body, [], now=NOW)
    assert "\x1b" not in text
    assert "\r" not in text
    assert "evil: ^[[2J^[]0;owned\x07 \\rhidden" in text
    assert "Image:      busybox^[[1A" in text


@pytest.mark.parametrize(
    ("selector", "shown"),
    [
        (None, ""),
        ({"matchLabels": {"tier": "web", "app": "x"}}, "app=x,tier=web"),
        (
            {
                "matchLabels": {"zone": "a"},
                "matchExpressions": [
                    {"key": "env", "operator": "In", "values": ["prod", "dev"]},
                    {"key": "canary", "operator": "DoesNotExist"},
                    {"key": "team", "operator": "Exists"},
                    {"key": "os", "operator": "NotIn", "values": ["win"]},
                ],
            },
            "!canary,env in (dev,prod),os notin (win),team,zone=a",
        ),
    ],
)
def test_a_label_selector_shows_its_requirements_sorted_by_key(
    selector: dict[str, Any] | None, shown: str
) -> None:
    assert label_selector(selector) == shown


def _template() -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "nginx"}]},
    }


def test_a_job_shows_kubectls_fields_its_times_and_its_pods_counts() -> None:
    body = {
        "metadata": {
            "name": "migrate",
            "namespace": "default",
            "ownerReferences": [{"kind": "CronJob", "name": "nightly", "controller": True}],
        },
        "spec": {
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u1"}},
            "parallelism": 1,
            "completions": 3,
            "completionMode": "Indexed",
            "suspend": False,
            "backoffLimit": 6,
            "template": _template(),
        },
        "status": {
            "startTime": "2026-01-01T11:00:00Z",
            "completionTime": "2026-01-01T11:02:30Z",
            "succeeded": 3,
            "ready": 0,
            "completedIndexes": "0-2",
        },
    }
    text = describe_job(body, now=NOW)
    assert _labels(text) == [
        "Name",
        "Namespace",
        "Selector",
        "Labels",
        "Annotations",
        "Controlled By",
        "Parallelism",
        "Completions",
        "Completion Mode",
        "Suspend",
        "Backoff Limit",
        "Start Time",
        "Completed At",
        "Duration",
        "Pods Statuses",
        "Completed Indexes",
        "Pod Template",
        "Events",
    ]
    lines = text.splitlines()
    assert "Controlled By:      CronJob/nightly" in lines
    assert "Suspend:            false" in lines
    assert "Duration:           2m30s" in lines
    assert "Pods Statuses:      0 Active (0 Ready) / 3 Succeeded / 0 Failed" in lines
    assert "Completed Indexes:  0-2" in lines


def test_a_replicaset_shows_its_replicas_pods_and_conditions() -> None:
    body = {
        "metadata": {"name": "web-5d9", "namespace": "default", "uid": "u-rs"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": _template(),
        },
        "status": {
            "replicas": 1,
            "conditions": [{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate"}],
        },
    }
    pods = [_pod("Running", "u-rs"), _pod("Pending", "u-rs")]
    lines = describe_replicaset(body, pods, now=NOW).splitlines()
    assert lines[:7] == [
        "Name:         web-5d9",
        "Namespace:    default",
        "Selector:     app=web",
        "Labels:       <none>",
        "Annotations:  <none>",
        "Replicas:     1 current / 2 desired",
        "Pods Status:  1 Running / 1 Waiting / 0 Succeeded / 0 Failed",
    ]
    start = lines.index("Conditions:")
    assert lines[start : start + 4] == [
        "Conditions:",
        "  Type             Status  Reason",
        "  ----             ------  ------",
        "  ReplicaFailure   True    FailedCreate",
    ]


def test_a_statefulset_shows_its_policies_and_volume_claim_templates() -> None:
    body = {
        "metadata": {
            "name": "db",
            "namespace": "default",
            "uid": "u-sts",
            "creationTimestamp": "2026-01-01T10:00:00Z",
        },
        "spec": {
            "replicas": 2,
            "serviceName": "db",
            "podManagementPolicy": "OrderedReady",
            "selector": {"matchLabels": {"app": "db"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            "template": _template(),
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}},
                    },
                }
            ],
        },
        "status": {"replicas": 1},
    }
    lines = describe_statefulset(body, [_pod("Running", "u-sts")], now=NOW).splitlines()
    assert lines[:11] == [
        "Name:                   db",
        "Namespace:              default",
        "CreationTimestamp:      Thu, 01 Jan 2026 10:00:00 +0000",
        "Selector:               app=db",
        "Labels:                 <none>",
        "Annotations:            <none>",
        "Service Name:           db",
        "Pod Management Policy:  OrderedReady",
        "Replicas:               2 desired | 1 total",
        "Update Strategy:        RollingUpdate",
        "  Partition:            0",
    ]
    start = lines.index("Volume Claims:")
    assert lines[start + 1 : start + 7] == [
        "  Name:          data",
        "  StorageClass:  ",
        "  Labels:        <none>",
        "  Annotations:   <none>",
        "  Capacity:      1Gi",
        "  Access Modes:  [ReadWriteOnce]",
    ]


def _replicaset(name: str, created: str, image: str, *, owner: str = "u-deploy") -> dict[str, Any]:
    template = _template()
    template["metadata"]["labels"]["pod-template-hash"] = name.rpartition("-")[2]
    template["spec"]["containers"][0]["image"] = image
    return {
        "metadata": {
            "name": name,
            "creationTimestamp": created,
            "ownerReferences": [{"kind": "Deployment", "uid": owner, "controller": True}],
        },
        "spec": {"replicas": 1, "template": template},
        "status": {"replicas": 1},
    }


def _deployment() -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web",
            "namespace": "default",
            "uid": "u-deploy",
            "creationTimestamp": "2026-01-01T10:00:00Z",
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
            },
            "template": _template(),
        },
        "status": {"replicas": 1, "updatedReplicas": 1, "availableReplicas": 1},
    }


def test_a_deployments_new_replicaset_is_the_oldest_with_its_template_hash_aside() -> None:
    older = _replicaset("web-aaa", "2026-01-01T10:00:00Z", "nginx")
    same = _replicaset("web-bbb", "2026-01-01T11:00:00Z", "nginx")
    other = _replicaset("web-ccc", "2026-01-01T09:00:00Z", "nginx:old")
    stranger = _replicaset("web-ddd", "2026-01-01T08:00:00Z", "nginx", owner="u-other")
    old, new = deployment_replicasets(_deployment(), [same, stranger, other, older])
    assert new is older
    assert old == [other, same]
    assert deployment_replicasets(_deployment(), [other]) == ([other], None)


def test_a_deployment_shows_kubectls_fields_and_its_replicasets() -> None:
    sets = [
        _replicaset("web-aaa", "2026-01-01T10:00:00Z", "nginx"),
        _replicaset("web-ccc", "2026-01-01T09:00:00Z", "nginx:old"),
    ]
    lines = describe_deployment(_deployment(), sets, now=NOW).splitlines()
    assert lines[:10] == [
        "Name:                   web",
        "Namespace:              default",
        "CreationTimestamp:      Thu, 01 Jan 2026 10:00:00 +0000",
        "Labels:                 <none>",
        "Annotations:            <none>",
        "Selector:               app=web",
        "Replicas:               1 desired | 1 updated | 1 total | 1 available | 0 unavailable",
        "StrategyType:           RollingUpdate",
        "MinReadySeconds:        0",
        "RollingUpdateStrategy:  25% max unavailable, 25% max surge",
    ]
    assert lines[-3:] == [
        "OldReplicaSets:    web-ccc (1/1 replicas created)",
        "NewReplicaSet:     web-aaa (1/1 replicas created)",
        "Events:            <none>",
    ]
