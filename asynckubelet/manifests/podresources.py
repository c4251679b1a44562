"""Pod-level ``resources`` (``spec.resources``) as ``ValidatePodSpec`` checks them.

A pod may give requests and limits for the whole pod beside its containers'. The API
server takes only CPU, memory and huge pages there, each request no more than its limit,
each pod-level request no less than what the containers ask for together (the pod's
effective request, init containers and sidecars counted as the scheduler counts them), and
no container limit above the pod's. Mirrors ``validatePodResourceRequirements`` and
``validatePodResourceConsistency`` of ``pkg/apis/core/validation/validation.go``.

Whether the node can enforce pod-level limits is admission's question, not this module's.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from lightkube.models.core_v1 import Container, PodSpec, ResourceRequirements

from asynckubelet.errors import FieldError
from asynckubelet.manifests.messages import invalid, not_supported
from asynckubelet.manifests.quantity import Quantity, QuantityError, parse_quantity

__all__ = ["POD_LEVEL_RESOURCES", "effective_container_requests", "validate_pod_resources"]

POD_LEVEL_RESOURCES = ("cpu", "memory")
"""Resource names a pod may set at pod level, beside ``hugepages-<size>``."""
_NEGATIVE = "must be greater than or equal to 0"


def validate_pod_resources(spec: PodSpec, errs: list[FieldError]) -> None:
    """Every problem with ``spec.resources``; nothing when it is not set."""
    res = spec.resources
    if res is None:
        return
    own: list[FieldError] = []
    limits = _checked(res.limits, "spec.resources.limits", own)
    requests = _checked(res.requests, "spec.resources.requests", own)
    for name, request in requests.items():
        limit = limits.get(name)
        if limit is not None and request > limit:
            own.append(
                invalid(
                    f"spec.resources.requests[{name}]",
                    str(request),
                    f"must be less than or equal to {name} limit of {limit}",
                )
            )
    errs.extend(own)
    if own:
        return
    aggregate = effective_container_requests(spec)
    for name, request in requests.items():
        total = aggregate.get(name, Fraction(0))
        if request.value < total:
            errs.append(
                invalid(
                    f"spec.resources.requests[{name}]",
                    str(request),
                    "must be greater than or equal to aggregate container requests of "
                    f"{_shown(total, request)}",
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


def effective_container_requests(spec: PodSpec) -> dict[str, Fraction]:
    """What the containers ask for together: regular containers and sidecars add up; an
    init container runs alone beside the sidecars started before it, so the larger of the
    two counts (upstream's ``PodRequests`` without pod-level resources)."""
    total: dict[str, Fraction] = {}
    for ctr in spec.containers or []:
        _add(total, _requests(ctr))
    sidecars: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for ctr in spec.initContainers or []:
        own = _requests(ctr)
        if ctr.restartPolicy == "Always":
            _add(total, own)
            _add(sidecars, own)
            running = dict(sidecars)
        else:
            running = dict(own)
            _add(running, sidecars)
        for name, value in running.items():
            init_peak[name] = max(init_peak.get(name, Fraction(0)), value)
    for name, value in init_peak.items():
        total[name] = max(total.get(name, Fraction(0)), value)
    return total


def _checked(
    values: Mapping[str, str] | None, path: str, errs: list[FieldError]
) -> dict[str, Quantity]:
    found: dict[str, Quantity] = {}
    for name, text in (values or {}).items():
        key = f"{path}[{name}]"
        if name not in POD_LEVEL_RESOURCES and not name.startswith("hugepages-"):
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


def _requests(ctr: Container) -> dict[str, Fraction]:
    res: ResourceRequirements | None = ctr.resources
    found: dict[str, Fraction] = {}
    requests = (res.requests or {}) if res is not None else {}
    for name in requests:
        value = _value(requests, name)
        if value is not None:
            found[name] = value.value
    return found


def _value(values: Mapping[str, str], name: str) -> Quantity | None:
    if name not in values:
        return None
    try:
        return parse_quantity(str(values[name]))
    except QuantityError:
        return None


def _add(total: dict[str, Fraction], more: Mapping[str, Fraction]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, Fraction(0)) + value


def _shown(total: Fraction, like: Quantity) -> str:
    return str(Quantity(total, like.format))
