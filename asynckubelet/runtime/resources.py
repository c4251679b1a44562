"""Container resources: Docker cgroup settings and ``resourceFieldRef`` values.

CPU and memory map onto Docker as the kubelet maps them onto cgroups: requests.cpu becomes
CPU shares (1024 per core, at least 2, so a container without a request gets 2 and not
Docker's default of 1024), limits.cpu a CFS quota over a 100 ms period, and
limits.memory the memory limit. A ``resourceFieldRef`` with no limit set reads the node's
capacity, as the kubelet's allocatable defaulting does.
"""

from __future__ import annotations

import math
import os
from fractions import Fraction
from functools import cache
from typing import Any

from asynckubelet import errors
from asynckubelet.docker.types import HostConfig
from asynckubelet.manifests.quantity import QuantityError, parse_quantity

CPU_PERIOD_US = 100_000
MIN_SHARES = 2
SHARES_PER_CPU = 1024


def _get(resources: Any, kind: str, name: str) -> Fraction | None:
    values = getattr(resources, kind, None) if resources is not None else None
    if not values or name not in values:
        return None
    try:
        return parse_quantity(values[name]).value
    except QuantityError as e:
        raise errors.ContainerConfigError(f"invalid {kind}.{name}: {e}") from e


def host_config_resources(container: Any) -> HostConfig:
    """Docker ``HostConfig`` entries for the container's CPU and memory."""
    res = container.resources
    host: HostConfig = {}
    cpu_limit = _get(res, "limits", "cpu")
    cpu_request = _get(res, "requests", "cpu")
    if cpu_request is None:
        cpu_request = cpu_limit
    host["CpuShares"] = max(MIN_SHARES, math.floor((cpu_request or 0) * SHARES_PER_CPU))
    if cpu_limit is not None:
        host["CpuPeriod"] = CPU_PERIOD_US
        host["CpuQuota"] = max(1000, math.ceil(cpu_limit * CPU_PERIOD_US))
    memory = _get(res, "limits", "memory")
    if memory is not None:
        host["Memory"] = math.ceil(memory)
    return host


@cache
def node_capacity() -> dict[str, Fraction]:
    """CPU cores and memory bytes of this machine."""
    memory = Fraction(0)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    memory = Fraction(int(line.split()[1]) * 1024)
                    break
    except OSError:
        pass
    return {
        "cpu": Fraction(os.cpu_count() or 1),
        "memory": memory,
        "ephemeral-storage": Fraction(0),
    }


def resource_field_value(container: Any, resource: str, divisor: Any) -> str:
    """The kubelet's ``ExtractContainerResourceValue``: ``ceil(value / divisor)``."""
    kind, _, name = resource.partition(".")
    if kind not in ("limits", "requests") or not name:
        raise errors.ContainerConfigError(f"unsupported container resource: {resource!r}")
    value = _get(container.resources, kind, name)
    if value is None:
        value = node_capacity().get(name, Fraction(0)) if kind == "limits" else Fraction(0)
    div = parse_quantity(str(divisor)).value if divisor not in (None, "") else Fraction(1)
    if div == 0:
        div = Fraction(1)
    return str(math.ceil(value / div))
