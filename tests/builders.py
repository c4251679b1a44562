"""Pods and containers for tests, built one way in tests/ and integration/ alike.

Each builder writes only the fields it is given, so a test's pod is the one it reads: a
manifest (``pod_doc``, ``pod_yaml``) as a user writes it, for the loader to default and
validate; a typed ``pod`` as the node holds it once loaded. ``BUSYBOX`` and other
placeholders in YAML stay for the test's loader to replace.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

import yaml
from lightkube.models.core_v1 import Pod

Doc = dict[str, Any]

APP_YAML = "  containers:\n  - name: app\n    image: BUSYBOX\n"
"""``pod_yaml``'s body for one container ``app`` of the test image; a test appends that
container's other fields, indented four spaces."""


def container(name: str = "app", image: str = "busybox", **fields: Any) -> Doc:
    """A container as a manifest holds it; ``fields`` are named as in YAML (camelCase)."""
    return {"name": name, "image": image, **fields}


def pod_doc(
    name: str = "web",
    *,
    namespace: str | None = None,
    uid: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    meta: Mapping[str, Any] | None = None,
    containers: Sequence[Doc] | None = None,
    status: Mapping[str, Any] | None = None,
    **spec: Any,
) -> Doc:
    """A v1 Pod manifest as a dict: metadata ``name`` (and what else is given, ``meta``
    for any other field), ``containers`` (one ``app``, busybox, unless given) and ``spec``'s
    other fields as in YAML."""
    metadata: Doc = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if uid is not None:
        metadata["uid"] = uid
    if labels is not None:
        metadata["labels"] = dict(labels)
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    metadata.update(meta or {})
    doc: Doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [container()] if containers is None else list(containers), **spec},
    }
    if status is not None:
        doc["status"] = dict(status)
    return doc


def pod(name: str = "web", *, namespace: str | None = "default", **fields: Any) -> Pod:
    """A typed Pod as the node holds it: ``pod_doc``'s, in namespace ``default`` unless
    told."""
    return cast(Pod, Pod.from_dict(pod_doc(name, namespace=namespace, **fields)))


def pod_yaml(
    name: str,
    body: str = "",
    *,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    **spec: Any,
) -> str:
    """A Pod manifest's text: ``spec``'s fields first, then ``body``, YAML lines indented
    two spaces under ``spec:`` as a test writes them (containers, volumes...)."""
    metadata: Doc = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels is not None:
        metadata["labels"] = dict(labels)
    head = yaml.safe_dump(
        {"apiVersion": "v1", "kind": "Pod", "metadata": metadata}, sort_keys=False
    )
    fields = "".join(f"  {key}: {json.dumps(value)}\n" for key, value in spec.items())
    return f"{head}spec:\n{fields}{body}\n"
