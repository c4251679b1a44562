"""Docker names, labels and the container spec hash.

The shape is cri-dockerd's, so Kubernetes people recognise it, with two deliberate
differences: the name prefix is ``akl`` instead of ``k8s`` and the type label is our own,
so that a kubelet using cri-dockerd on the same engine never adopts or kills our pods.
Everything needed to rebuild pod state after a crash lives here, on the objects.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from asynckubelet.docker.labels import LABEL_NODE as LABEL_NODE

NAME_PREFIX = "akl"
"""First part of every container name we create."""

LABEL_TYPE = "io.asynckubelet.type"
"""``podsandbox`` or ``container``: our replacement for ``io.kubernetes.docker.type``;
``probehelper`` for a pod's probe helper (:mod:`asynckubelet.runtime.probehelper`)."""
TYPE_SANDBOX = "podsandbox"
TYPE_CONTAINER = "container"
TYPE_PROBE_HELPER = "probehelper"
LABEL_OWNER = "io.asynckubelet.owner"
"""Which process of the node owns the pod, when it is not the node agent itself: ``run``
marks its pods ``run-<id>``. An agent manages only pods without this label (or with its
own), so a ``serve`` never takes a ``run``'s pods for unwanted ones, nor the reverse."""

LABEL_POD_NAME = "io.kubernetes.pod.name"
LABEL_POD_NAMESPACE = "io.kubernetes.pod.namespace"
LABEL_POD_UID = "io.kubernetes.pod.uid"
LABEL_CONTAINER_NAME = "io.kubernetes.container.name"
LABEL_SANDBOX_ID = "io.kubernetes.sandbox.id"

ANNOTATION_PREFIX = "annotation."
LABEL_HASH = "annotation.io.kubernetes.container.hash"
LABEL_RESTART_COUNT = "annotation.io.kubernetes.container.restartCount"
LABEL_ATTEMPT = "io.asynckubelet.attempt"
LABEL_GRACE = "annotation.io.kubernetes.pod.terminationGracePeriod"
LABEL_TERMINATION_MESSAGE_PATH = "annotation.io.kubernetes.container.terminationMessagePath"
LABEL_TERMINATION_MESSAGE_POLICY = "annotation.io.kubernetes.container.terminationMessagePolicy"
LABEL_PORTS = "annotation.io.kubernetes.container.ports"
LABEL_CONTAINER_TYPE = "io.asynckubelet.container.type"
"""``init``, ``sidecar`` or ``regular``."""
LABEL_HOST_NETWORK = "io.asynckubelet.hostNetwork"
LABEL_POD_IP = "io.asynckubelet.pod.ip"


@dataclass(frozen=True)
class ParsedName:
    """The parts of a name we created."""

    is_sandbox: bool
    container: str
    pod: str
    namespace: str
    uid: str
    attempt: int


def sandbox_name(*, pod: str, namespace: str, uid: str, attempt: int) -> str:
    """``akl_POD_<pod>_<ns>_<uid>_<attempt>``."""
    return f"{NAME_PREFIX}_POD_{pod}_{namespace}_{uid}_{attempt}"


def container_name(*, container: str, pod: str, namespace: str, uid: str, attempt: int) -> str:
    """``akl_<ctr>_<pod>_<ns>_<uid>_<attempt>``; the attempt is the restart count."""
    return f"{NAME_PREFIX}_{container}_{pod}_{namespace}_{uid}_{attempt}"


def parse_name(name: str) -> ParsedName | None:
    """Parse a name made by this module; None for anything else.

    Kubernetes names cannot contain ``_``, so splitting on it is unambiguous.
    """
    parts = name.lstrip("/").split("_")
    if len(parts) != 6 or parts[0] != NAME_PREFIX:
        return None
    try:
        attempt = int(parts[5])
    except ValueError:
        return None
    return ParsedName(
        is_sandbox=parts[1] == "POD",
        container=parts[1],
        pod=parts[2],
        namespace=parts[3],
        uid=parts[4],
        attempt=attempt,
    )


def pod_labels(*, node: str, pod: str, namespace: str, uid: str, owner: str = "") -> dict[str, str]:
    """Labels every object of a pod carries (the owner's only when there is one)."""
    labels = {
        LABEL_NODE: node,
        LABEL_POD_NAME: pod,
        LABEL_POD_NAMESPACE: namespace,
        LABEL_POD_UID: uid,
    }
    if owner:
        labels[LABEL_OWNER] = owner
    return labels


HASH_EXCLUDED = ("resources", "resizePolicy")
"""Container fields a resize changes without a new container, so outside its hash."""


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in sorted(value.items()) if v is not None}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def hash_container(container: Any) -> str:
    """A stable hash of a container spec (lightkube ``Container`` or plain dict).

    Changes to the spec change the hash; key order and unset (None) fields do not, nor
    do its ``resources`` and ``resizePolicy``, which a resize changes in place (the
    kubelet's ``HashContainer`` leaves them out too). A short hex digest stored as a label.
    """
    data = container.to_dict() if hasattr(container, "to_dict") else container
    if isinstance(data, dict):
        data = {k: v for k, v in data.items() if k not in HASH_EXCLUDED}
    blob = json.dumps(_canonical(data), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
