"""Deployments, ReplicaSets, StatefulSets and Jobs: the API server's defaults, its
validation errors (field paths and words, upstream's cases as a table) and its update
rules."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from asynckubelet.manifests import inspect_manifests_text
from asynckubelet.manifests.jobs import prepare_job, validate_job_update
from asynckubelet.manifests.selectors import selector_matches
from asynckubelet.manifests.workloads import (
    scaled_value,
    validate_deployment_update,
    validate_statefulset_update,
)


def container(**extra: Any) -> dict[str, Any]:
    return {"name": "c", "image": "asynckubelet.local/busybox:1.35", **extra}


def deployment(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [container()]},
            },
        },
    }
    body["spec"].update(spec)
    return body


def job(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "migrate"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container()]}}},
    }
    body["spec"].update(spec)
    return body


def statefulset(**spec: Any) -> dict[str, Any]:
    body = deployment(**spec)
    body["kind"] = "StatefulSet"
    body["metadata"]["name"] = "db"
    return body


def load(*docs: dict[str, Any], level: str = "baseline") -> Any:
    text = yaml.safe_dump_all(docs)
    return inspect_manifests_text(text, source_name="app.yaml", node_name="n", pod_security=level)  # type: ignore[arg-type]


def errors(*docs: dict[str, Any]) -> list[str]:
    return [str(e) for e in load(*docs).errors]


def loaded(doc: dict[str, Any]) -> dict[str, Any]:
    report = load(doc)
    assert report.accepted, report.errors
    (obj,) = report.manifests.objects
    return dict(obj.to_dict())


# -- defaults ----------------------------------------------------------------------------------


def test_a_deployment_gets_the_api_servers_defaults() -> None:
    spec = loaded(deployment())["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
    }
    assert (spec["revisionHistoryLimit"], spec["progressDeadlineSeconds"]) == (10, 600)


def test_a_deployment_template_gets_the_pod_defaults() -> None:
    template = loaded(deployment())["spec"]["template"]["spec"]
    assert template["restartPolicy"] == "Always"
    assert template["terminationGracePeriodSeconds"] == 30
    assert template["containers"][0]["imagePullPolicy"] == "IfNotPresent"


def test_a_recreate_deployment_gets_no_rolling_update_defaults() -> None:
    spec = loaded(deployment(strategy={"type": "Recreate"}))["spec"]
    assert spec["strategy"] == {"type": "Recreate"}


def test_a_job_gets_the_api_servers_defaults() -> None:
    body = loaded(job())
    spec = body["spec"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (1, 1, 6)
    assert spec["completionMode"] == "NonIndexed"
    assert (spec["suspend"], spec["manualSelector"]) == (False, False)
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed"
    assert body["metadata"]["namespace"] == "default"


def test_a_job_with_parallelism_only_keeps_completions_unset() -> None:
    spec = loaded(job(parallelism=3))["spec"]
    assert spec.get("completions") is None
    assert spec["parallelism"] == 3


def test_a_job_takes_its_labels_from_its_template_when_it_has_none() -> None:
    doc = job()
    doc["spec"]["template"]["metadata"] = {"labels": {"app": "migrate"}}
    assert loaded(doc)["metadata"]["labels"] == {"app": "migrate"}


def test_a_statefulset_gets_the_api_servers_defaults() -> None:
    spec = loaded(statefulset())["spec"]
    assert spec["podManagementPolicy"] == "OrderedReady"
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert spec["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain",
        "whenScaled": "Retain",
    }


# -- validation (upstream's cases) -------------------------------------------------------------

SELECTOR_MISMATCH = (
    'spec.template.metadata.labels: Invalid value: map[string]string{"app":"other"}: '
    "`selector` does not match template `labels`"
)

DEPLOYMENT_CASES = [
    (
        "negative replicas",
        {"replicas": -1},
        ["spec.replicas: Invalid value: -1: must be greater than or equal to 0"],
    ),
    (
        "no selector",
        {"selector": None},
        [
            "spec.selector: Required value",
            'spec.template.metadata.labels: Invalid value: map[string]string{"app":"web"}: '
            "`selector` does not match template `labels`",
        ],
    ),
    (
        "empty selector",
        {"selector": {}},
        [
            "spec.selector: Invalid value: &v1.LabelSelector{MatchLabels:map[string]string(nil), "
            "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for "
            "deployment"
        ],
    ),
    (
        "a bad operator",
        {"selector": {"matchExpressions": [{"key": "app", "operator": "Is", "values": ["web"]}]}},
        [
            'spec.selector.matchExpressions[0].operator: Invalid value: "Is": not a valid '
            "selector operator",
            "spec.selector: Invalid value: &v1.LabelSelector{MatchLabels:map[string]string(nil), "
            'MatchExpressions:[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:"app", '
            'Operator:"Is", Values:[]string{"web"}}}}: invalid label selector',
        ],
    ),
    (
        "In without values",
        {"selector": {"matchExpressions": [{"key": "app", "operator": "In"}]}},
        [
            "spec.selector.matchExpressions[0].values: Required value: must be specified when "
            "`operator` is 'In' or 'NotIn'",
            "spec.selector: Invalid value: &v1.LabelSelector{MatchLabels:map[string]string(nil), "
            'MatchExpressions:[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:"app", '
            'Operator:"In", Values:[]string(nil)}}}: invalid label selector',
        ],
    ),
    (
        "a selector that selects no template label",
        {"selector": {"matchLabels": {"app": "other"}}, "template": None},
        None,
    ),
    (
        "maxSurge and maxUnavailable both 0",
        {"strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}}},
        [
            'spec.strategy.rollingUpdate.maxUnavailable: Invalid value: "0%": may not be 0 '
            "when `maxSurge` is 0"
        ],
    ),
    (
        "a percentage without %",
        {"strategy": {"rollingUpdate": {"maxSurge": "25"}}},
        [
            'spec.strategy.rollingUpdate.maxSurge: Invalid value: "25": a valid percent string '
            "must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex "
            "used for validation is '[0-9]+%')"
        ],
    ),
    (
        "maxUnavailable over 100%",
        {"strategy": {"rollingUpdate": {"maxUnavailable": "150%"}}},
        [
            'spec.strategy.rollingUpdate.maxUnavailable: Invalid value: "150%": '
            "must not be greater than 100%"
        ],
    ),
    (
        "rollingUpdate with Recreate",
        {"strategy": {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}},
        [
            "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` "
            "is 'Recreate'"
        ],
    ),
    (
        "an unknown strategy",
        {"strategy": {"type": "BlueGreen"}},
        [
            'spec.strategy.type: Unsupported value: "BlueGreen": supported values: '
            '"Recreate", "RollingUpdate"'
        ],
    ),
    (
        "a progress deadline within minReadySeconds",
        {"minReadySeconds": 30, "progressDeadlineSeconds": 30},
        ["spec.progressDeadlineSeconds: Invalid value: 30: must be greater than minReadySeconds"],
    ),
]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [(s, e) for _, s, e in DEPLOYMENT_CASES if e is not None],
    ids=[c for c, _, e in DEPLOYMENT_CASES if e is not None],
)
def test_a_deployment_is_refused_as_the_api_server_refuses_it(
    spec: dict[str, Any], expected: list[str]
) -> None:
    doc = deployment()
    doc["spec"].update(spec)
    doc["spec"] = {k: v for k, v in doc["spec"].items() if v is not None}
    assert errors(doc) == expected


def test_a_selector_that_does_not_select_the_template_is_refused() -> None:
    doc = deployment()
    doc["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    assert errors(doc) == [SELECTOR_MISMATCH]


def test_a_deployment_template_is_validated_as_a_pod_with_its_paths() -> None:
    doc = deployment()
    doc["spec"]["template"]["spec"]["containers"][0]["image"] = ""
    doc["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 70000}]
    assert errors(doc) == [
        "spec.template.spec.containers[0].image: Required value",
        "spec.template.spec.containers[0].ports[0].containerPort: Invalid value: 70000: must "
        "be between 1 and 65535, inclusive",
    ]


def test_a_deployment_template_must_restart_always() -> None:
    doc = deployment()
    doc["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    doc["spec"]["template"]["spec"]["activeDeadlineSeconds"] = 5
    assert errors(doc) == [
        'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"',
        "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in "
        "ReplicaSet is not Supported",
    ]


def test_a_deployment_template_is_held_to_the_pod_security_level() -> None:
    doc = deployment()
    doc["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    found = load(doc).errors
    assert [(e.field, e.reason) for e in found] == [("spec.template.spec", "Forbidden")]
    assert 'violates PodSecurity "baseline:latest": privileged' in found[0].detail


def test_an_unknown_field_of_a_template_is_named_by_its_full_path() -> None:
    doc = deployment()
    doc["spec"]["template"]["spec"]["containers"][0]["imagee"] = "x"
    assert errors(doc) == [
        "spec.template.spec.containers[0].imagee: strict decoding error: unknown field "
        '"spec.template.spec.containers[0].imagee"'
    ]


def test_a_deployment_under_the_core_api_version_is_refused() -> None:
    doc = deployment()
    doc["apiVersion"] = "v1"
    assert errors(doc) == ['apiVersion: Unsupported value: "v1": supported values: "apps/v1"']


JOB_CASES = [
    (
        "no restart policy",
        {"template": {"spec": {"containers": [container()]}}},
        ['spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"'],
    ),
    (
        "restart policy Always",
        {"template": {"spec": {"restartPolicy": "Always", "containers": [container()]}}},
        ['spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"'],
    ),
    (
        "negative counts",
        {"parallelism": -1, "completions": -2, "backoffLimit": -3, "activeDeadlineSeconds": -4},
        [
            "spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
            "spec.completions: Invalid value: -2: must be greater than or equal to 0",
            "spec.activeDeadlineSeconds: Invalid value: -4: must be greater than or equal to 0",
            "spec.backoffLimit: Invalid value: -3: must be greater than or equal to 0",
        ],
    ),
    (
        "a negative ttl",
        {"ttlSecondsAfterFinished": -1},
        ["spec.ttlSecondsAfterFinished: Invalid value: -1: must be greater than or equal to 0"],
    ),
    (
        "a selector of its own without manualSelector",
        {"selector": {"matchLabels": {"app": "x"}}},
        [
            "spec.selector: Invalid value: &v1.LabelSelector{MatchLabels:map[string]string"
            '{"app":"x"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: `selector` not '
            "auto-generated"
        ],
    ),
    (
        "a manual selector that selects nothing of the template",
        {"manualSelector": True, "selector": {"matchLabels": {"app": "x"}}},
        [
            "spec.template.metadata.labels: Invalid value: map[string]string(nil): `selector` "
            "does not match template `labels`"
        ],
    ),
    (
        "a manual selector left out",
        {"manualSelector": True},
        ["spec.selector: Required value"],
    ),
    (
        "an unknown completion mode",
        {"completionMode": "Sometimes"},
        [
            'spec.completionMode: Unsupported value: "Sometimes": supported values: "NonIndexed", '
            '"Indexed"'
        ],
    ),
    (
        "indexed completion",
        {"completionMode": "Indexed"},
        ["spec.completionMode: Forbidden: Indexed completion is not supported on this node"],
    ),
    (
        "a pod failure policy",
        {"podFailurePolicy": {"rules": []}},
        ["spec.podFailurePolicy: Forbidden: a pod failure policy is not supported on this node"],
    ),
]


@pytest.mark.parametrize(
    ("spec", "expected"), [(s, e) for _, s, e in JOB_CASES], ids=[c for c, _, _ in JOB_CASES]
)
def test_a_job_is_refused_as_the_api_server_refuses_it(
    spec: dict[str, Any], expected: list[str]
) -> None:
    assert errors(job(**spec)) == expected


def test_a_job_template_label_against_the_generated_one_is_refused() -> None:
    doc = job()
    doc["spec"]["template"]["metadata"] = {"labels": {"job-name": "other"}}
    assert errors(doc) == [
        "spec.template.metadata.labels[job-name]: Invalid value: \"other\": must be 'migrate'"
    ]


STATEFULSET_CASES = [
    (
        "a name that is no DNS label",
        {},
        "db.main",
        ['metadata.name: Invalid value: "db.main": must not contain dots'],
    ),
    (
        "an unknown pod management policy",
        {"podManagementPolicy": "Eager"},
        "db",
        [
            'spec.podManagementPolicy: Invalid value: "Eager": '
            "must be 'OrderedReady' or 'Parallel'"
        ],
    ),
    (
        "volume claim templates",
        {"volumeClaimTemplates": [{"metadata": {"name": "data"}}]},
        "db",
        [
            "spec.volumeClaimTemplates: Forbidden: persistent volume claims are not supported on "
            "this node (it has no storage provisioner)"
        ],
    ),
]


@pytest.mark.parametrize(
    ("spec", "name", "expected"),
    [(s, n, e) for _, s, n, e in STATEFULSET_CASES],
    ids=[c for c, *_ in STATEFULSET_CASES],
)
def test_a_statefulset_is_refused_as_the_api_server_refuses_it(
    spec: dict[str, Any], name: str, expected: list[str]
) -> None:
    doc = statefulset(**spec)
    doc["metadata"]["name"] = name
    assert errors(doc) == expected


# -- updates -----------------------------------------------------------------------------------


def test_a_deployment_selector_cannot_change() -> None:
    old, new = deployment(), deployment(selector={"matchLabels": {"app": "web2"}})
    assert [str(e) for e in validate_deployment_update(new, old)] == [
        "spec.selector: Invalid value: &v1.LabelSelector{MatchLabels:map[string]string"
        '{"app":"web2"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable'
    ]


def test_a_deployment_template_and_replicas_may_change() -> None:
    old, new = deployment(), deployment(replicas=5)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "other:1"
    assert validate_deployment_update(new, old) == []


def test_a_job_template_cannot_change() -> None:
    old, new = job(), job()
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "other:1"
    uid = "3b1a8a8c-1d1e-4c8e-9a45-5e2f3f6f7a11"
    for doc in (old, new):
        prepare_job(doc, uid=uid)
    assert [str(e) for e in validate_job_update(new, old)] == [
        "spec.template: Invalid value: core.PodTemplateSpec{...}: field is immutable"
    ]


def test_a_job_may_change_its_parallelism_and_deadline() -> None:
    old, new = job(), job(parallelism=4, activeDeadlineSeconds=60)
    assert validate_job_update(new, old) == []


def test_a_job_cannot_change_its_completions() -> None:
    old, new = job(completions=1), job(completions=3)
    assert [str(e) for e in validate_job_update(new, old)] == [
        "spec.completions: Invalid value: 3: field is immutable"
    ]


def test_a_statefulset_may_change_only_some_fields() -> None:
    old = statefulset(serviceName="db")
    assert validate_statefulset_update(statefulset(serviceName="db", replicas=3), old) == []
    assert [str(e) for e in validate_statefulset_update(statefulset(serviceName="x"), old)] == [
        "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', "
        "'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and "
        "'minReadySeconds' are forbidden"
    ]


# -- the Job strategy and helpers --------------------------------------------------------------


def test_a_job_selector_is_generated_from_its_uid() -> None:
    doc = job()
    prepare_job(doc, uid="u-1")
    assert doc["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}
    assert doc["spec"]["template"]["metadata"]["labels"] == {
        "job-name": "migrate",
        "batch.kubernetes.io/job-name": "migrate",
        "controller-uid": "u-1",
        "batch.kubernetes.io/controller-uid": "u-1",
    }


def test_a_manual_selector_is_left_alone() -> None:
    doc = job(manualSelector=True, selector={"matchLabels": {"app": "x"}})
    before = copy.deepcopy(doc)
    prepare_job(doc, uid="u-1")
    assert doc == before


@pytest.mark.parametrize(
    ("value", "total", "up", "expected"),
    [
        (1, 10, True, 1),
        ("25%", 2, True, 1),
        ("25%", 2, False, 0),
        ("25%", 10, True, 3),
        ("25%", 10, False, 2),
        ("100%", 3, False, 3),
        ("x", 3, True, 0),
    ],
)
def test_an_int_or_percent_scales_as_upstream(
    value: Any, total: int, up: bool, expected: int
) -> None:
    assert scaled_value(value, total, round_up=up) == expected


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({"matchLabels": {"app": "web"}}, {"app": "web", "x": "y"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "db"}, False),
        (
            {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
            {"tier": "b"},
            True,
        ),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}, {}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {}, True),
        ({}, {"anything": "x"}, True),
        (None, {"anything": "x"}, False),
    ],
)
def test_a_label_selector_matches_as_upstream(
    selector: dict[str, Any] | None, labels: dict[str, str], expected: bool
) -> None:
    assert selector_matches(selector, labels) is expected
