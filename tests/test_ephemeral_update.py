"""The API server's rules for an update of a pod's ``ephemeralcontainers`` subresource."""

from __future__ import annotations

import copy
from typing import Any

from asynckubelet.manifests.defaults import default_pod
from asynckubelet.manifests.ephemeral import (
    CHANGED,
    ephemeral_update,
    validate_ephemeral_containers_update,
)


def _stored(*ephemeral: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "image": "busybox"}],
        "initContainers": [{"name": "setup", "image": "busybox"}],
    }
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": spec,
    }
    if ephemeral:
        spec["ephemeralContainers"] = [copy.deepcopy(e) for e in ephemeral]
    default_pod(pod)
    return pod


def _sent(*ephemeral: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"spec": {"ephemeralContainers": list(ephemeral), **spec}}


def _errors(sent: dict[str, Any], stored: dict[str, Any]) -> list[str]:
    new = ephemeral_update(sent, stored)
    return [str(e) for e in validate_ephemeral_containers_update(new, stored)]


DEBUGGER = {"name": "debugger-abcde", "image": "busybox", "stdin": True, "tty": True}


def test_an_added_container_is_accepted_and_defaulted() -> None:
    stored = _stored()
    new = ephemeral_update(_sent(dict(DEBUGGER, targetContainerName="app")), stored)
    assert validate_ephemeral_containers_update(new, stored) == []
    (added,) = new["spec"]["ephemeralContainers"]
    assert added["terminationMessagePolicy"] == "File"
    assert added["imagePullPolicy"] == "Always"


def test_other_fields_of_the_sent_pod_are_dropped() -> None:
    stored = _stored()
    new = ephemeral_update(_sent(DEBUGGER, containers=[{"name": "x", "image": "y"}]), stored)
    assert new["spec"]["containers"] == stored["spec"]["containers"]
    assert "ephemeralContainers" not in stored["spec"]


def test_a_name_taken_by_any_container_is_a_duplicate() -> None:
    for taken in ("app", "setup"):
        errors = _errors(_sent(dict(DEBUGGER, name=taken)), _stored())
        assert errors == [f'spec.ephemeralContainers[0].name: Duplicate value: "{taken}"']


def test_the_target_must_be_a_container_of_the_pod() -> None:
    errors = _errors(_sent(dict(DEBUGGER, targetContainerName="nope")), _stored())
    assert errors == ['spec.ephemeralContainers[0].targetContainerName: Not found: "nope"']


def test_fields_an_ephemeral_container_may_not_have_are_forbidden() -> None:
    sent = dict(
        DEBUGGER,
        ports=[{"containerPort": 80}],
        readinessProbe={"exec": {"command": ["true"]}},
        lifecycle={"preStop": {"exec": {"command": ["true"]}}},
        resources={"limits": {"cpu": "1"}},
    )
    errors = _errors(_sent(sent), _stored())
    forbidden = "Forbidden: cannot be set for an Ephemeral Container"
    for field in ("ports", "resources", "readinessProbe", "lifecycle"):
        assert f"spec.ephemeralContainers[0].{field}: {forbidden}" in errors


def test_an_existing_container_may_not_be_changed() -> None:
    stored = _stored(DEBUGGER)
    errors = _errors(_sent(dict(DEBUGGER, image="alpine")), stored)
    assert errors == [f"spec.ephemeralContainers.debugger-abcde: Forbidden: {CHANGED}"]


def test_an_existing_container_may_not_be_removed() -> None:
    stored = _stored(DEBUGGER)
    errors = _errors(_sent(dict(DEBUGGER, name="other")), stored)
    assert errors == ['spec.ephemeralContainers: Not found: "debugger-abcde"']


def test_the_same_list_again_with_one_more_is_accepted() -> None:
    stored = _stored(DEBUGGER)
    sent = _sent(dict(DEBUGGER), dict(DEBUGGER, name="second"))
    assert _errors(sent, stored) == []


def test_a_list_that_is_not_one_of_containers_is_invalid() -> None:
    errors = _errors({"spec": {"ephemeralContainers": "sh"}}, _stored())
    assert len(errors) == 1
    assert errors[0].startswith("spec.ephemeralContainers: Invalid value")
