"""Every Pod spec and Container field is honoured or warned about, never silently dropped.

The lists in ``manifests.honour`` are checked against the fields of the installed
lightkube-models: a field a new Kubernetes release adds fails here until it is classified.
"""

from __future__ import annotations

from typing import Any

import builders
import pytest
from lightkube.models.core_v1 import Container, Pod, PodSpec

from asynckubelet.manifests import honour

WARNED_SPEC_VALUES: dict[str, Any] = {
    "nodeSelector": {"disktype": "ssd"},
    "affinity": {"nodeAffinity": {}},
    "tolerations": [{"operator": "Exists"}],
    "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    ],
    "priorityClassName": "high",
    "priority": 1000,
    "preemptionPolicy": "Never",
    "readinessGates": [{"conditionType": "example.com/ready"}],
    "serviceAccountName": "builder",
    "serviceAccount": "builder",
    "runtimeClassName": "gvisor",
    "overhead": {"cpu": "100m"},
    "resourceClaims": [{"name": "gpu"}],
    "schedulingGroup": {"podGroupName": "gang"},
    "evictionResponders": [{"name": "example.com/drain", "priority": 1}],
    "hostnameOverride": "other-name",
    "schedulerName": "my-scheduler",
    "nodeName": "another-node",
    "automountServiceAccountToken": True,
}
WARNED_CONTAINER_VALUES: dict[str, Any] = {
    "volumeDevices": [{"name": "disk", "devicePath": "/dev/xvda"}],
}


def spec_fields() -> set[str]:
    return set(PodSpec.__annotations__)


def container_fields() -> set[str]:
    return set(Container.__annotations__)


def test_every_pod_spec_field_of_the_model_is_honoured_refused_or_warned_about() -> None:
    unclassified = (
        spec_fields()
        - honour.HONOURED_SPEC_FIELDS
        - honour.WARNED_SPEC_FIELDS
        - honour.REFUSED_SPEC_FIELDS
    )
    assert unclassified == set()


def test_no_pod_spec_field_is_in_two_classes() -> None:
    honoured, warned = honour.HONOURED_SPEC_FIELDS, honour.WARNED_SPEC_FIELDS
    refused = honour.REFUSED_SPEC_FIELDS
    assert honoured & warned == honoured & refused == warned & refused == set()


def test_the_lists_name_only_fields_the_model_has() -> None:
    listed = honour.HONOURED_SPEC_FIELDS | honour.WARNED_SPEC_FIELDS | honour.REFUSED_SPEC_FIELDS
    containers = honour.HONOURED_CONTAINER_FIELDS | honour.WARNED_CONTAINER_FIELDS
    assert listed - spec_fields() == set()
    assert containers - container_fields() == set()


def test_every_container_field_of_the_model_is_honoured_or_warned_about() -> None:
    unclassified = (
        container_fields() - honour.HONOURED_CONTAINER_FIELDS - honour.WARNED_CONTAINER_FIELDS
    )
    assert unclassified == set()


def test_no_container_field_is_both_honoured_and_warned_about() -> None:
    assert honour.HONOURED_CONTAINER_FIELDS & honour.WARNED_CONTAINER_FIELDS == set()


def test_every_warned_spec_field_has_a_sample_here() -> None:
    assert set(WARNED_SPEC_VALUES) == set(honour.WARNED_SPEC_FIELDS)


def pod(spec: dict[str, Any]) -> Pod:
    return builders.pod("web", **{"containers": [builders.container("app", "busybox:1")], **spec})


@pytest.mark.parametrize("field", sorted(WARNED_SPEC_VALUES))
def test_a_warned_spec_field_that_is_set_gets_one_warning(field: str) -> None:
    warnings = honour.unhonoured_fields(pod({field: WARNED_SPEC_VALUES[field]}), node_name="n")
    paths = [w.field for w in warnings]
    assert len([p for p in paths if p.startswith(f"spec.{field}")]) == 1, paths


@pytest.mark.parametrize("kind", ["containers", "initContainers"])
@pytest.mark.parametrize("field", sorted(WARNED_CONTAINER_VALUES))
def test_a_warned_container_field_that_is_set_gets_one_warning(kind: str, field: str) -> None:
    ctr = {"name": "c", "image": "busybox:1", field: WARNED_CONTAINER_VALUES[field]}
    spec = {"containers": [ctr]} if kind == "containers" else {"initContainers": [ctr]}
    warnings = honour.unhonoured_fields(pod(spec), node_name="n")
    assert [w.field for w in warnings] == [f"spec.{kind}[0].{field}"]


def test_pod_level_requests_alone_are_honoured_at_admission() -> None:
    warnings = honour.unhonoured_fields(
        pod({"resources": {"requests": {"cpu": "1"}}}), node_name="n"
    )
    assert warnings == []


def test_a_plain_pod_gets_no_warning() -> None:
    assert honour.unhonoured_fields(pod({}), node_name="n") == []


def test_a_node_that_knows_its_labels_does_not_warn_about_node_selection() -> None:
    from asynckubelet.manifests import honour
    from asynckubelet.manifests.loading import load_manifests_text

    text = """
apiVersion: v1
kind: Pod
metadata: {name: picky}
spec:
  nodeSelector: {disk: ssd}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms: [{matchExpressions: [{key: disk, operator: In, values: [ssd]}]}]
  containers: [{name: app, image: busybox}]
"""
    pod = load_manifests_text(text, node_name="n1").pods[0]
    assert {w.field for w in honour.unhonoured_fields(pod, node_name="n1")} == {
        "spec.nodeSelector",
        "spec.affinity",
    }
    assert honour.unhonoured_fields(pod, node_name="n1", node_labels=True) == []
