"""The loader beside an API server's store: Namespaces stored earlier set the Pod Security
level of the pods loaded later (under the same rules as a Namespace document), every valid
Namespace document is kept, and ``delete -f`` reads what a file names without validating."""

from __future__ import annotations

from typing import cast

import pytest
from lightkube.models.core_v1 import Namespace

from asynckubelet import errors
from asynckubelet.manifests import (
    ObjectRef,
    inspect_manifests_text,
    load_manifests_text,
    object_refs,
)

HOST_NETWORK = """\
apiVersion: v1
kind: Pod
metadata: {name: hostnet, namespace: ops}
spec:
  hostNetwork: true
  containers: [{name: c, image: busybox}]
"""
PLAIN = """\
apiVersion: v1
kind: Pod
metadata: {name: plain, namespace: ops}
spec:
  containers: [{name: c, image: busybox}]
"""


def namespace(level: str | None) -> Namespace:
    labels = {"pod-security.kubernetes.io/enforce": level} if level else None
    return cast(Namespace, Namespace.from_dict({"metadata": {"name": "ops", "labels": labels}}))


@pytest.mark.parametrize(
    ("level", "allow", "accepted"),
    [
        ("privileged", True, True),
        ("privileged", False, False),
        (None, True, False),
    ],
)
def test_a_stored_namespace_relaxes_the_level_only_when_the_operator_allows_it(
    level: str | None, allow: bool, accepted: bool
) -> None:
    report = inspect_manifests_text(
        HOST_NETWORK,
        node_name="n1",
        allow_namespace_policy=allow,
        namespaces=[namespace(level)],
    )
    assert report.accepted is accepted


def test_a_stored_namespace_makes_the_level_stricter_always() -> None:
    report = inspect_manifests_text(
        PLAIN, node_name="n1", pod_security="privileged", namespaces=[namespace("restricted")]
    )
    assert [e.reason for e in report.errors] == ["Forbidden"]


def test_a_namespace_document_replaces_the_stored_one() -> None:
    text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: ops}\n---\n" + HOST_NETWORK
    report = inspect_manifests_text(
        text, node_name="n1", allow_namespace_policy=True, namespaces=[namespace("privileged")]
    )
    assert not report.accepted


def test_every_valid_namespace_document_is_kept() -> None:
    loaded = load_manifests_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: ops}\n")
    assert [n.metadata.name for n in loaded.namespaces if n.metadata] == ["ops"]


def test_delete_reads_the_objects_a_file_names_without_validating_them() -> None:
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: Bad_Name}\n---\n"
        "kind: List\nitems:\n- {kind: Secret, metadata: {name: db, namespace: team}}\n"
        "- {kind: Namespace, metadata: {name: team}}\n"
    )
    assert object_refs([("f.yaml", text)]) == [
        ObjectRef(kind="Pod", namespace="default", name="Bad_Name"),
        ObjectRef(kind="Secret", namespace="team", name="db"),
        ObjectRef(kind="Namespace", namespace="", name="team"),
    ]


@pytest.mark.parametrize("text", ["kind: Pod\nmetadata: [\n", "kind: Pod\nmetadata: {}\n", "- 1\n"])
def test_delete_refuses_a_document_that_names_no_object(text: str) -> None:
    with pytest.raises(errors.ManifestError) as caught:
        object_refs([("f.yaml", text)])
    assert caught.value.errors[0].source.startswith("f.yaml")
