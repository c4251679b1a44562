"""Pod-level ``resources`` (``spec.resources``) as the API server defaults and checks them.

A pod may give requests and limits for the whole pod beside its containers'. The API
server takes only CPU, memory and huge pages there, each request no more than its limit,
each pod-level request no less than what the containers ask for together (the pod's
effective request, init containers and sidecars counted as the scheduler counts them), and
no container limit above the pod's. Mirrors ``validatePodResourceRequirements`` and
``validatePodResourceConsistency`` of ``pkg/apis/core/validation/validation.go``, and
``defaultPodRequests`` of ``pkg/apis/core/v1/defaults.go``.

Whether the node can enforce pod-level limits is admission's question, not this module's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lightkube.models.core_v1 import PodSpec, ResourceRequirements

from asynckubelet.errors import FieldError
from asynckubelet.manifests.messages import invalid, not_supported
from asynckubelet.manifests.quantity import Quantity, QuantityError, parse_quantity

__all__ = [
    "POD_LEVEL_RESOURCES",
    "default_pod_requests",
    "effective_container_requests",
    "validate_pod_resources",
]

POD_LEVEL_RESOURCES = ("cpu", "memory")
"""Resource names a pod may set at pod level, beside ``hugepages-<size>``."""
_NEGATIVE = "must be greater than or equal to 0"


def validate_pod_resources(spec: PodSpec, errs: list[FieldError]) -> None:
    """Every problem with ``spec.resources``; nothing when it is not set."""
    res = spec.resources
    if res is None:
        return
    limits = _checked(res.limits, "spec.resources.limits", errs)
    requests = _checked(res.requests, "spec.resources.requests", errs)
    for name, request in requests.items():
        limit = limits.get(name)
        if limit is not None and request > limit:
            errs.append(
                invalid(
                    f"spec.resources.requests[{name}]",
                    str(request),
                    f"must be less than or equal to {name} limit of {limit}",
                )
            )
    aggregate = effective_container_requests(spec)
    for name, request in requests.items():
        total = aggregate.get(name)
        if total is not None and request < total:
            errs.append(
                invalid(
                    f"spec.resources.requests[{name}]",
                    str(request),
                    f"must be greater than or equal to aggregate container requests of {total}",
                )
            )
    for name, limit in limits.items():
        for ctr in spec.containers or []:
            ctr_limit = _value((ctr.resources.limits or {}) if ctr.resources else {}, name)
            if ctr_limit is not None and ctr_limit > limit:
                errs.append(
                    invalid(
                        f"spec.resources.limits[{name}]",
                        str(ctr_limit),
                        "must be less than or equal to pod limits",
                    )
                )


def effective_container_requests(spec: PodSpec) -> dict[str, Quantity]:
    """What the containers ask for together: regular containers and sidecars add up; an
    init container runs alone beside the sidecars started before it, so the larger of the
    two counts (upstream's ``PodRequests`` without pod-level resources)."""
    return _effective(
        [_requests(c.resources) for c in spec.containers or []],
        [(_requests(c.resources), c.restartPolicy == "Always") for c in spec.initContainers or []],
    )


def default_pod_requests(spec: dict[str, Any]) -> None:
    """``defaultPodRequests``, in place on a decoded pod spec whose containers are
    defaulted: with pod-level limits set, each supported resource without a pod-level
    request gets the containers' effective request, else the pod-level limit."""
    res = spec.get("resources")
    if not isinstance(res, dict) or not isinstance(res.get("limits"), dict) or not res["limits"]:
        return
    requests = dict(res.get("requests") or {})
    regular = [_requests(_raw_resources(c)) for c in spec.get("containers") or ()]
    inits = [
        (_requests(_raw_resources(c)), c.get("restartPolicy") == "Always")
        for c in spec.get("initContainers") or ()
        if isinstance(c, dict)
    ]
    for name, total in _effective(regular, inits).items():
        if name not in requests and _supported(name):
            requests[name] = str(total)
    for name, limit in res["limits"].items():
        if name not in requests and _supported(name):
            requests[name] = limit
    if requests:
        res["requests"] = requests


def _effective(
    regular: Iterable[Mapping[str, Quantity]],
    inits: Iterable[tuple[Mapping[str, Quantity], bool]],
) -> dict[str, Quantity]:
    total: dict[str, Quantity] = {}
    for own in regular:
        _add(total, own)
    sidecars: dict[str, Quantity] = {}
    init_peak: dict[str, Quantity] = {}
    for own, restartable in inits:
        if restartable:
            _add(total, own)
            _add(sidecars, own)
            running = dict(sidecars)
        else:
            running = dict(own)
            _add(running, sidecars)
        _max(init_peak, running)
    _max(total, init_peak)
    return total


def _supported(name: str) -> bool:
    return name in POD_LEVEL_RESOURCES or name.startswith("hugepages-")


def _checked(
    values: Mapping[str, str] | None, path: str, errs: list[FieldError]
) -> dict[str, Quantity]:
    found: dict[str, Quantity] = {}
    for name, text in (values or {}).items():
        key = f"{path}[{name}]"
        if not _supported(name):
            errs.append(not_supported(key, name, POD_LEVEL_RESOURCES))
            continue
        try:
            q = parse_quantity(str(text))
        except QuantityError as e:
            errs.append(invalid(key, str(text), str(e)))
            continue
        if q.value < 0:
            errs.append(invalid(key, str(q), _NEGATIVE))
            continue
        found[name] = q
    return found


def _raw_resources(ctr: Any) -> ResourceRequirements | None:
    res = ctr.get("resources") if isinstance(ctr, dict) else None
    if not isinstance(res, dict):
        return None
    requests = res.get("requests")
    return ResourceRequirements(requests=requests if isinstance(requests, dict) else None)


def _requests(res: ResourceRequirements | None) -> dict[str, Quantity]:
    requests = (res.requests or {}) if res is not None else {}
    found: dict[str, Quantity] = {}
    for name in requests:
        value = _value(requests, name)
        if value is not None:
            found[name] = value
    return found


def _value(values: Mapping[str, str], name: str) -> Quantity | None:
    if name not in values:
        return None
    try:
        return parse_quantity(str(values[name]))
    except QuantityError:
        return None


def _add(total: dict[str, Quantity], more: Mapping[str, Quantity]) -> None:
    for name, value in more.items():
        had = total.get(name)
        total[name] = value if had is None else Quantity(had.value + value.value, had.format)


def _max(peak: dict[str, Quantity], more: Mapping[str, Quantity]) -> None:
    for name, value in more.items():
        had = peak.get(name)
        if had is None or value.value > had.value:
            peak[name] = value
