"""A pod's QoS class (the kubelet's ``GetPodQOS``), for status and for its cgroup parent.

Guaranteed: every container has CPU and memory limits, and requests equal them.
BestEffort: no container requests or limits CPU or memory. Burstable: anything else.
A pod that sets CPU or memory at pod level (``spec.resources``) is classed by those alone,
as ``PodLevelResources`` has it: the containers' own are not looked at.
"""

from __future__ import annotations

from fractions import Fraction

from lightkube.models.core_v1 import Pod, ResourceRequirements

from asynckubelet.manifests.quantity import QuantityError, parse_quantity

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"
_TRACKED = ("cpu", "memory")


def _amount(value: object) -> Fraction:
    try:
        return parse_quantity(str(value)).value
    except QuantityError:
        return Fraction(0)


def qos_class(pod: Pod) -> str:
    """The pod's QoS class.

    Requests missing for a resource with a limit count as equal to the limit, as the API
    server's defaulting makes them.
    """
    if pod.status is not None and pod.status.qosClass:
        return pod.status.qosClass
    spec = pod.spec
    assert spec is not None  # noqa: S101  (type narrowing: an admitted pod has a spec)
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    pod_level = spec.resources
    sources: list[ResourceRequirements | None]
    if pod_level is not None and any(
        name in _TRACKED for name in (*(pod_level.requests or {}), *(pod_level.limits or {}))
    ):
        sources = [pod_level]
    else:
        sources = [c.resources for c in [*spec.containers, *(spec.initContainers or [])]]
    for res in sources:
        c_limits = dict(res.limits or {}) if res is not None else {}
        c_requests = dict(res.requests or {}) if res is not None else {}
        for name, value in c_limits.items():
            c_requests.setdefault(name, value)
        for name, value in c_requests.items():
            q = _amount(value)
            if name in _TRACKED and q > 0:
                requests[name] = requests.get(name, Fraction(0)) + q
        found = set()
        for name, value in c_limits.items():
            q = _amount(value)
            if name in _TRACKED and q > 0:
                found.add(name)
                limits[name] = limits.get(name, Fraction(0)) + q
        if not set(_TRACKED) <= found:
            guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if (
        guaranteed
        and all(limits.get(n) == q for n, q in requests.items())
        and len(requests) == len(limits)
    ):
        return GUARANTEED
    return BURSTABLE
