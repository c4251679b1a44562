"""``resizePolicy`` of a pod's containers: the API server's defaults and its validation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from asynckubelet.manifests import inspect_manifests_text
from asynckubelet.manifests.defaults import default_pod

Doc = dict[str, Any]
CPU_RESTART = {"resourceName": "cpu", "restartPolicy": "RestartContainer"}
NEVER_MSG = (
    "Invalid value: []core.ContainerResizePolicy{core.ContainerResizePolicy{"
    'ResourceName:"cpu", RestartPolicy:"RestartContainer"}}: '
    "must be 'NotRequired' when `restartPolicy` is 'Never'"
)


def pod(container: Doc, **spec: Any) -> Doc:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.25", **container}], **spec},
    }


def errors_of(doc: Doc) -> list[str]:
    report = inspect_manifests_text(json.dumps(doc), node_name="node-a", pod_security="privileged")
    return [str(e) for e in report.errors]


def test_a_container_with_cpu_and_memory_gets_not_required_for_both() -> None:
    doc = pod({"resources": {"limits": {"cpu": "1", "memory": "64Mi"}}})
    default_pod(doc)
    assert doc["spec"]["containers"][0]["resizePolicy"] == [
        {"resourceName": "cpu", "restartPolicy": "NotRequired"},
        {"resourceName": "memory", "restartPolicy": "NotRequired"},
    ]


def test_a_named_policy_is_kept_and_only_the_other_resource_defaulted() -> None:
    doc = pod({"resources": {"requests": {"cpu": "1", "memory": "64Mi"}}, "resizePolicy": []})
    doc["spec"]["containers"][0]["resizePolicy"].append(
        {"resourceName": "memory", "restartPolicy": "RestartContainer"}
    )
    default_pod(doc)
    assert doc["spec"]["containers"][0]["resizePolicy"] == [
        {"resourceName": "memory", "restartPolicy": "RestartContainer"},
        {"resourceName": "cpu", "restartPolicy": "NotRequired"},
    ]


def test_no_resources_no_policy_and_init_containers_are_not_defaulted() -> None:
    doc = pod({})
    doc["spec"]["initContainers"] = [
        {"name": "init", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    ]
    default_pod(doc)
    assert "resizePolicy" not in doc["spec"]["containers"][0]
    assert "resizePolicy" not in doc["spec"]["initContainers"][0]


def test_valid_policies_pass() -> None:
    policies = [CPU_RESTART, {"resourceName": "memory", "restartPolicy": "NotRequired"}]
    assert errors_of(pod({"resizePolicy": policies})) == []


@pytest.mark.parametrize(
    ("policies", "message"),
    [
        (
            [{"resourceName": "cpu", "restartPolicy": "NotRequired"}] * 2,
            'spec.containers[0].resizePolicy[1]: Duplicate value: "cpu"',
        ),
        (
            [{"resourceName": "ephemeral-storage", "restartPolicy": "NotRequired"}],
            'spec.containers[0].resizePolicy: Unsupported value: "ephemeral-storage": '
            'supported values: "cpu", "memory"',
        ),
        (
            [{"resourceName": "cpu", "restartPolicy": "Sometimes"}],
            'spec.containers[0].resizePolicy: Unsupported value: "Sometimes": '
            'supported values: "NotRequired", "RestartContainer"',
        ),
    ],
)
def test_bad_policies_are_refused_with_the_api_servers_message(
    policies: list[Doc], message: str
) -> None:
    assert message in errors_of(pod({"resizePolicy": policies}))


def test_restart_container_is_refused_in_a_pod_that_never_restarts() -> None:
    errors = errors_of(pod({"resizePolicy": [CPU_RESTART]}, restartPolicy="Never"))
    assert f"spec.containers[0].resizePolicy: {NEVER_MSG}" in errors


def test_an_init_container_may_not_set_one_but_a_sidecar_may() -> None:
    init = {"name": "init", "image": "busybox", "resizePolicy": [CPU_RESTART]}
    errors = errors_of(pod({}, initContainers=[init]))
    assert any(
        e.startswith("spec.initContainers[0].resizePolicy: Invalid value:")
        and e.endswith("must not be set for init containers")
        for e in errors
    ), errors
    sidecar = {**init, "restartPolicy": "Always"}
    assert errors_of(pod({}, initContainers=[sidecar])) == []


def warnings_of(doc: Doc) -> list[str]:
    report = inspect_manifests_text(json.dumps(doc), node_name="node-a", pod_security="privileged")
    return [str(w) for w in report.warnings]


def test_neither_the_defaulted_policy_nor_a_written_one_draws_a_warning() -> None:
    resources = {"limits": {"cpu": "1", "memory": "64Mi"}}
    assert not [w for w in warnings_of(pod({"resources": resources})) if "resizePolicy" in w]
    memory_restart = [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]
    written = warnings_of(pod({"resources": resources, "resizePolicy": memory_restart}))
    assert not [w for w in written if "resizePolicy" in w]
