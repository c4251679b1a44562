"""The ``resize`` subresource's rules: what the API server lets a resize change."""

from __future__ import annotations

import copy
from typing import Any, cast

import pytest
from lightkube.models.core_v1 import Pod

from asynckubelet.api.kube.resize import validate_pod_resize

Doc = dict[str, Any]
BURSTABLE = {
    "requests": {"cpu": "100m", "memory": "32Mi"},
    "limits": {"cpu": "200m", "memory": "64Mi"},
}


def pod_doc(*resources: Doc) -> Doc:
    containers = [
        {"name": f"c{i}", "image": "busybox", "resources": copy.deepcopy(r)}
        for i, r in enumerate(resources)
    ]
    return {"metadata": {"name": "web"}, "spec": {"containers": containers}}


def errors(old: Doc, new: Doc) -> list[str]:
    new_pod, old_pod = cast(Pod, Pod.from_dict(new)), cast(Pod, Pod.from_dict(old))
    return [str(e) for e in validate_pod_resize(new_pod, old_pod)]


def test_raising_cpu_and_memory_within_the_class_is_allowed() -> None:
    old = pod_doc(BURSTABLE)
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "1", "memory": "128Mi"}
    assert errors(old, new) == []


def test_the_qos_class_may_not_change() -> None:
    old = pod_doc({})
    new = pod_doc({"requests": {"memory": "40Mi"}})
    assert errors(old, new) == [
        'spec: Invalid value: "Burstable": Pod QOS Class may not change as a result of resizing'
    ]


@pytest.mark.parametrize(
    ("part", "name", "message"),
    [
        (
            "limits",
            "memory",
            "spec.containers[0].resources.limits[memory]: Forbidden: "
            "resource limits cannot be removed",
        ),
        (
            "requests",
            "cpu",
            "spec.containers[0].resources.requests[cpu]: Forbidden: "
            "resource requests cannot be removed",
        ),
    ],
)
def test_a_request_or_limit_may_not_be_removed(part: str, name: str, message: str) -> None:
    old = pod_doc(BURSTABLE)
    new = copy.deepcopy(old)
    del new["spec"]["containers"][0]["resources"][part][name]
    assert message in errors(old, new)


def test_containers_may_not_be_reordered() -> None:
    old = pod_doc(BURSTABLE, BURSTABLE)
    new = copy.deepcopy(old)
    new["spec"]["containers"].reverse()
    assert errors(old, new) == [
        "spec.containers[0].name: Forbidden: containers may not be renamed or reordered on resize",
        "spec.containers[1].name: Forbidden: containers may not be renamed or reordered on resize",
    ]


@pytest.mark.parametrize(
    "change",
    [
        lambda c: c.update(image="busybox:1.36"),
        lambda c: c["resources"]["limits"].update({"ephemeral-storage": "1Gi"}),
    ],
    ids=["image", "ephemeral-storage"],
)
def test_anything_but_cpu_and_memory_is_immutable(change: Any) -> None:
    old = pod_doc(BURSTABLE)
    new = copy.deepcopy(old)
    change(new["spec"]["containers"][0])
    assert errors(old, new) == ["spec: Forbidden: only cpu and memory resources are mutable"]


def test_static_pods_are_not_resized() -> None:
    old = pod_doc(BURSTABLE)
    old["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    assert errors(old, copy.deepcopy(old)) == [": Forbidden: static pods cannot be resized"]


def test_a_non_sidecar_init_containers_resources_are_immutable_but_a_sidecars_are_not() -> None:
    old = pod_doc(BURSTABLE)
    old["spec"]["initContainers"] = [
        {"name": "init", "image": "busybox", "resources": copy.deepcopy(BURSTABLE)}
    ]
    new = copy.deepcopy(old)
    new["spec"]["initContainers"][0]["resources"]["limits"]["cpu"] = "1"
    assert errors(old, new) == ["spec: Forbidden: only cpu and memory resources are mutable"]
    old["spec"]["initContainers"][0]["restartPolicy"] = "Always"
    new["spec"]["initContainers"][0]["restartPolicy"] = "Always"
    assert errors(old, new) == []
