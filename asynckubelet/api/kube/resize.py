"""The ``resize`` subresource of a pod: which changes the API server lets through.

``ValidatePodResize``'s rules: a resize changes only the CPU and memory requests and
limits of the regular containers and the sidecars (``restartPolicy: Always`` init
containers), in the same order and under the same names; it removes no request or limit
it had; the pod's QoS class stays what it was; pods with pod-level resources and static
(mirror) pods are not resized.

``PUT`` and ``PATCH`` (JSON, merge and strategic merge) of ``pods/NAME/resize`` keep, of
what is sent, only the ``resources`` and ``resizePolicy`` of the containers (the API
server's ``dropNonResizeUpdates``: any other change is dropped, unless containers were
added, removed, renamed or reordered, which validation refuses), validate the pod that
makes with :func:`validate_pod_resize` (``422 Invalid`` in the API server's words) and
store it through the same path as an update; the node carries the resize out.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, cast

from aiohttp import web
from lightkube.models.core_v1 import Container, Pod, ResourceRequirements

from asynckubelet.api.kube.podwrites import invalid_pod, subresource_patch, subresource_put
from asynckubelet.api.kube.writes import refuse
from asynckubelet.errors import FieldError
from asynckubelet.manifests.defaults import default_pod_spec
from asynckubelet.manifests.messages import forbidden, invalid
from asynckubelet.runtime.qos import qos_class

SUBRESOURCE = "resize"
RESIZABLE = ("cpu", "memory")
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
_RENAMED = "containers may not be renamed or reordered on resize"


def validate_pod_resize(new: Pod, old: Pod) -> list[FieldError]:
    """The errors of resizing ``old`` into ``new``, in the API server's words."""
    new_spec, old_spec = new.spec, old.spec
    if new_spec is None or old_spec is None:
        return [forbidden("spec", "only cpu and memory resources are mutable")]
    if new_spec.resources is not None and (
        new_spec.resources.requests or new_spec.resources.limits
    ):
        return [forbidden("", "pods with pod-level resources cannot be resized")]
    if MIRROR_ANNOTATION in ((old.metadata.annotations or {}) if old.metadata else {}):
        return [forbidden("", "static pods cannot be resized")]
    if old_spec.os is not None and old_spec.os.name == "windows":
        return [forbidden("", "windows pods cannot be resized")]
    errs: list[FieldError] = []
    new_class = qos_class(new)
    if qos_class(old) != new_class:
        errs.append(
            invalid("spec", new_class, "Pod QOS Class may not change as a result of resizing")
        )
    pairs = (
        ("containers", new_spec.containers or [], old_spec.containers or []),
        ("initContainers", new_spec.initContainers or [], old_spec.initContainers or []),
    )
    ordering = [e for kind, n, o in pairs for e in _ordering(kind, n, o)]
    if ordering:
        return errs + ordering
    for kind, new_ctrs, old_ctrs in pairs:
        for i, (n, o) in enumerate(zip(new_ctrs, old_ctrs, strict=True)):
            if kind == "containers" or o.restartPolicy == "Always":
                errs.extend(_removed(n.resources, o.resources, f"spec.{kind}[{i}].resources"))
    if _without_cpu_memory(new) != _without_cpu_memory(old):
        errs.append(forbidden("spec", "only cpu and memory resources are mutable"))
    return errs


def _ordering(kind: str, new: Sequence[Container], old: Sequence[Container]) -> list[FieldError]:
    if len(new) != len(old):
        return [forbidden(f"spec.{kind}", "containers may not be added or removed on resize")]
    return [
        forbidden(f"spec.{kind}[{i}].name", _RENAMED)
        for i, (n, o) in enumerate(zip(new, old, strict=True))
        if n.name != o.name
    ]


def _removed(
    new: ResourceRequirements | None, old: ResourceRequirements | None, path: str
) -> list[FieldError]:
    errs: list[FieldError] = []
    for kind, what in (("requests", "resource requests"), ("limits", "resource limits")):
        had = getattr(old, kind, None) or {} if old is not None else {}
        has = getattr(new, kind, None) or {} if new is not None else {}
        errs.extend(
            forbidden(f"{path}.{kind}[{name}]", f"{what} cannot be removed")
            for name in sorted(had)
            if name not in has
        )
    return errs


def _without_cpu_memory(pod: Pod) -> dict[str, object]:
    """The pod's spec with the CPU and memory of every resizable container taken out."""
    spec = pod.spec.to_dict() if pod.spec is not None else {}
    for kind in ("containers", "initContainers"):
        for ctr in spec.get(kind) or ():
            if kind == "initContainers" and ctr.get("restartPolicy") != "Always":
                continue
            resources = ctr.get("resources") or {}
            for part in ("requests", "limits"):
                values = {
                    k: v for k, v in (resources.get(part) or {}).items() if k not in RESIZABLE
                }
                if values:
                    resources[part] = values
                else:
                    resources.pop(part, None)
            if resources:
                ctr["resources"] = resources
            else:
                ctr.pop("resources", None)
    return spec


def resize_update(sent: Mapping[str, Any], stored: Mapping[str, Any]) -> dict[str, Any]:
    """``dropNonResizeUpdates``: the stored pod with the ``resources`` and ``resizePolicy``
    of the containers ``sent`` names, in the same places; ``sent``'s spec as it is when its
    containers are not the stored ones (validation refuses it then)."""
    pod = copy.deepcopy(dict(stored))
    spec = pod.setdefault("spec", {})
    sent_spec = sent.get("spec")
    if not isinstance(sent_spec, Mapping):
        return pod
    for kind in ("containers", "initContainers"):
        new, old = sent_spec.get(kind) or [], spec.get(kind) or []
        if not isinstance(new, list) or not all(isinstance(c, Mapping) for c in new):
            raise refuse(400, "BadRequest", f"spec.{kind}: must be a list of containers")
        if len(new) != len(old) or any(
            n.get("name") != o.get("name") for n, o in zip(new, old, strict=True)
        ):
            pod["spec"] = copy.deepcopy(dict(sent_spec))
            return pod
        for n, o in zip(new, old, strict=True):
            for key in ("resources", "resizePolicy"):
                if n.get(key) is None:
                    o.pop(key, None)
                else:
                    o[key] = copy.deepcopy(n[key])
    default_pod_spec(spec)
    return pod


def _resized(name: str, sent: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    new = resize_update(sent, stored)
    try:
        new_pod = cast(Pod, Pod.from_dict(new))
        old_pod = cast(Pod, Pod.from_dict(stored))
    except (TypeError, ValueError, AttributeError) as e:
        raise refuse(400, "BadRequest", f"the body of the request is not a Pod: {e}") from None
    errors = validate_pod_resize(new_pod, old_pod)
    if errors:
        raise invalid_pod(name, errors)
    return new


async def replace_resize(request: web.Request) -> web.Response:
    """``PUT pods/NAME/resize``."""
    return await subresource_put(request, SUBRESOURCE, _resized)


async def patch_resize(request: web.Request) -> web.Response:
    """``PATCH pods/NAME/resize``."""
    return await subresource_patch(request, SUBRESOURCE, _resized)
