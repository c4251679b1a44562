"""Updates of a pod's ``ephemeralcontainers`` subresource, as the API server takes them.

The registry keeps only the ephemeral containers of what a client sends
(``dropNonEphemeralContainerUpdates`` in ``pkg/registry/core/pod/strategy.go``): every other
field of the pod stays as stored, so :func:`ephemeral_update` builds the pod to validate from
the stored one. :func:`validate_ephemeral_containers_update` is
``ValidatePodEphemeralContainersUpdate``: the pod with its new ephemeral containers must be
valid (names unique across every container, ``targetContainerName`` naming a container or an
init container, no ports, probes, resources, lifecycle or restart policy, no ``subPath``), and
ephemeral containers are only added: one already there may be neither changed nor removed.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, cast

from lightkube.models.core_v1 import Pod

from asynckubelet.errors import FieldError
from asynckubelet.manifests.defaults import default_pod, default_pod_spec
from asynckubelet.manifests.messages import forbidden, invalid, not_found
from asynckubelet.manifests.validation import validate_pod

FIELD = "spec.ephemeralContainers"
CHANGED = "existing ephemeral containers may not be changed"


def ephemeral_update(sent: Mapping[str, Any], stored: Mapping[str, Any]) -> dict[str, Any]:
    """The stored pod with the ephemeral containers of ``sent`` (defaulted as the API server
    defaults them), every other field of ``sent`` dropped; ``stored`` is left untouched."""
    pod = copy.deepcopy(dict(stored))
    spec = pod.setdefault("spec", {})
    sent_spec = sent.get("spec")
    wanted = sent_spec.get("ephemeralContainers") if isinstance(sent_spec, Mapping) else None
    if wanted:
        spec["ephemeralContainers"] = copy.deepcopy(wanted)
    else:
        spec.pop("ephemeralContainers", None)
    if isinstance(spec.get("ephemeralContainers"), list) and all(
        isinstance(c, dict) for c in spec["ephemeralContainers"]
    ):
        defaulted = {"ephemeralContainers": spec["ephemeralContainers"]}
        default_pod_spec(defaulted)
    return pod


def _by_name(containers: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for container in containers or ():
        if isinstance(container, Mapping) and isinstance(container.get("name"), str):
            found.setdefault(container["name"], container)
    return found


def validate_ephemeral_containers_update(
    new: Mapping[str, Any], old: Mapping[str, Any]
) -> list[FieldError]:
    """Every problem ``ValidatePodEphemeralContainersUpdate`` reports for ``new`` (from
    :func:`ephemeral_update`) against the stored pod ``old``."""
    new_spec = new.get("spec") or {}
    listed = new_spec.get("ephemeralContainers")
    if listed is not None and (
        not isinstance(listed, list) or not all(isinstance(c, Mapping) for c in listed)
    ):
        return [invalid(FIELD, listed, "must be a list of ephemeral containers")]
    defaulted = copy.deepcopy(dict(new))
    default_pod(defaulted)
    try:
        pod = cast(Pod, Pod.from_dict(defaulted))
    except (TypeError, ValueError, AttributeError) as e:
        return [invalid(FIELD, None, str(e))]
    errs = validate_pod(pod)
    now = _by_name(listed)
    for name, before in _by_name((old.get("spec") or {}).get("ephemeralContainers")).items():
        after = now.get(name)
        if after is None:
            errs.append(not_found(FIELD, name))
        elif dict(after) != dict(before):
            errs.append(forbidden(f"{FIELD}.{name}", CHANGED))
    return errs


__all__ = ["CHANGED", "FIELD", "ephemeral_update", "validate_ephemeral_containers_update"]
