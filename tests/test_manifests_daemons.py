"""DaemonSets and CronJobs as the API server takes them: defaults, validation errors with
upstream's field paths and words (schedules, time zones, policies, the Job template), and
the fields an update may not change."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from asynckubelet.manifests import inspect_manifests_text
from asynckubelet.manifests.daemons import validate_cronjob_update, validate_daemonset_update

CONTAINER = {"name": "c", "image": "asynckubelet.local/busybox:1.35"}


def daemonset(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [CONTAINER]},
            },
        },
    }
    body["spec"].update(spec)
    return body


def cronjob(name: str = "tick", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {
            "schedule": "*/5 * * * *",
            "jobTemplate": {
                "spec": {
                    "template": {"spec": {"restartPolicy": "Never", "containers": [CONTAINER]}}
                }
            },
        },
    }
    body["spec"].update(spec)
    return body


def load(doc: dict[str, Any]) -> Any:
    return inspect_manifests_text(yaml.safe_dump(doc), source_name="app.yaml", node_name="n")


def errors(doc: dict[str, Any]) -> list[str]:
    return [str(e) for e in load(doc).errors]


def loaded(doc: dict[str, Any]) -> dict[str, Any]:
    report = load(doc)
    assert report.accepted, report.errors
    (obj,) = report.manifests.objects
    return dict(obj.to_dict())


def test_a_daemonset_gets_the_api_servers_defaults() -> None:
    spec = loaded(daemonset())["spec"]
    assert spec["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
    }
    assert spec["revisionHistoryLimit"] == 10
    assert spec["template"]["spec"]["restartPolicy"] == "Always"


def test_a_daemonset_s_node_selector_and_tolerations_get_no_warning() -> None:
    doc = daemonset()
    doc["spec"]["template"]["spec"]["nodeSelector"] = {"disktype": "ssd"}
    doc["spec"]["template"]["spec"]["tolerations"] = [{"operator": "Exists"}]
    assert load(doc).manifests.warnings == ()


def test_a_cronjob_gets_the_api_servers_defaults() -> None:
    spec = loaded(cronjob())["spec"]
    assert (spec["concurrencyPolicy"], spec["suspend"]) == ("Allow", False)
    assert (spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]) == (3, 1)
    template = spec["jobTemplate"]["spec"]["template"]["spec"]
    assert template["terminationGracePeriodSeconds"] == 30


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            daemonset(updateStrategy={"type": "Sometimes"}),
            'spec.updateStrategy.type: Unsupported value: "Sometimes": supported values: '
            '"OnDelete", "RollingUpdate"',
        ),
        (
            daemonset(
                updateStrategy={
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0},
                }
            ),
            "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 "
            "when `maxSurge` is 0",
        ),
        (
            daemonset(selector={"matchLabels": {"app": "other"}}),
            'spec.template.metadata.labels: Invalid value: map[string]string{"app":"agent"}: '
            "`selector` does not match template `labels`",
        ),
        (
            daemonset(
                template={
                    "metadata": {"labels": {"app": "agent"}},
                    "spec": {"containers": [CONTAINER], "activeDeadlineSeconds": 5},
                }
            ),
            "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in "
            "DaemonSet is not Supported",
        ),
        (
            cronjob(schedule="61 * * * *"),
            'spec.schedule: Invalid value: "61 * * * *": end of range (61) above maximum (59): 61',
        ),
        (
            cronjob(schedule="TZ=UTC * * * * *"),
            'spec.schedule: Invalid value: "TZ=UTC * * * * *": cannot use TZ or CRON_TZ in '
            "schedule, use timeZone field instead",
        ),
        (
            cronjob(timeZone="Mars/Olympus"),
            'spec.timeZone: Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus',
        ),
        (
            cronjob(timeZone="../../etc/passwd"),
            'spec.timeZone: Invalid value: "../../etc/passwd": unknown time zone ../../etc/passwd',
        ),
        (
            cronjob(timeZone="Local"),
            'spec.timeZone: Invalid value: "Local": timeZone must be an explicit time zone as '
            "defined in https://www.iana.org/time-zones",
        ),
        (
            cronjob(concurrencyPolicy="Sometimes"),
            'spec.concurrencyPolicy: Unsupported value: "Sometimes": supported values: '
            '"Allow", "Forbid", "Replace"',
        ),
        (
            cronjob(startingDeadlineSeconds=-1),
            "spec.startingDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            cronjob(successfulJobsHistoryLimit=-1),
            "spec.successfulJobsHistoryLimit: Invalid value: -1: must be greater than or equal "
            "to 0",
        ),
        (
            cronjob(jobTemplate={"spec": {"template": {"spec": {"containers": [CONTAINER]}}}}),
            "spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: "
            '"OnFailure", "Never"',
        ),
        (
            cronjob(timeZone=""),
            'spec.timeZone: Invalid value: "": timeZone must be nil or non-empty string',
        ),
        (
            cronjob(
                jobTemplate={
                    "spec": {
                        "selector": {"matchLabels": {"a": "b"}},
                        "template": {
                            "metadata": {"labels": {"a": "b"}},
                            "spec": {"restartPolicy": "Never", "containers": [CONTAINER]},
                        },
                    }
                }
            ),
            "spec.jobTemplate.spec.selector: Invalid value: "
            '&v1.LabelSelector{MatchLabels:map[string]string{"a":"b"}, MatchExpressions:'
            "[]v1.LabelSelectorRequirement(nil)}: `selector` will be auto-generated",
        ),
        (
            cronjob(name="a" * 53),
            f'metadata.name: Invalid value: "{"a" * 53}": must be no more than 52 characters',
        ),
    ],
)
def test_a_workload_breaking_a_rule_is_refused_with_the_api_servers_words(
    doc: dict[str, Any], expected: str
) -> None:
    found = errors(doc)
    assert expected in found, found


def test_a_cronjob_in_a_time_zone_with_a_macro_is_accepted() -> None:
    assert loaded(cronjob(schedule="@daily", timeZone="Europe/Paris"))["spec"]["timeZone"] == (
        "Europe/Paris"
    )


def test_the_selectors_may_not_change() -> None:
    old = daemonset()
    new = daemonset(selector={"matchLabels": {"app": "b"}})
    assert [e.field for e in validate_daemonset_update(new, old)] == ["spec.selector"]
    old_cj = cronjob()
    new_cj = cronjob()
    new_cj["spec"]["jobTemplate"]["spec"]["selector"] = {"matchLabels": {"a": "b"}}
    assert [e.field for e in validate_cronjob_update(new_cj, old_cj)] == [
        "spec.jobTemplate.spec.selector"
    ]
