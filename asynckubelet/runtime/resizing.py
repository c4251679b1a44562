"""A running container's new CPU and memory as the engine's update call takes them, and
what carrying a resize out takes (``computePodResizeAction`` for one container).

The same mapping as at create (:func:`host_config_resources`: shares from requests.cpu, a
CFS quota over a 100 ms period from limits.cpu, the memory limit from limits.memory), with
the swap limit set beside the memory limit, as the engine refuses a memory limit above the
swap limit it set at create (twice the first memory limit).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from asynckubelet.docker.api import DockerAPI
from asynckubelet.docker.types import HostConfig
from asynckubelet.runtime.resources import host_config_resources
from asynckubelet.runtime.types import ContainerResources, ContainerStatus

RESTART_MESSAGE = "Container {name} resize requires restart"
"""The ``Killing`` message of a container restarted for a ``RestartContainer`` resize."""


def update_resources(container: Any) -> HostConfig:
    """The body of the engine's ``POST /containers/{id}/update`` for the container's
    resources."""
    body = host_config_resources(container)
    memory = body.get("Memory")
    if memory is not None:
        body["MemorySwap"] = 2 * memory
    return body


class ResizeError(Exception):
    """A resize the node will not carry out now; the message is the one the pod's
    ``PodResizeInProgress`` condition reports with reason ``Error``."""


@dataclass(frozen=True)
class ResizeAction:
    """What carrying a container's resized resources out takes."""

    resized: frozenset[str] = frozenset()
    """The resources (``cpu``, ``memory``) whose engine settings differ from the spec."""
    restart: bool = False
    """A resized resource's policy is ``RestartContainer``: the container is restarted with
    its new resources, and not updated in place."""
    update: HostConfig = field(default_factory=lambda: HostConfig())
    """The body of the engine's update call (empty when nothing is updated in place)."""


def resize_action(
    container: Any, actual: HostConfig, *, memory_usage: int | None = None
) -> ResizeAction:
    """``computePodResizeAction`` for one running container: its spec's resources against
    the engine's ``HostConfig`` (``actual``). A lowered memory limit below the container's
    ``memory_usage`` (bytes) is refused, as the kubelet refuses it."""
    wanted = update_resources(container)
    resized: set[str] = set()
    if wanted.get("CpuShares") != actual.get("CpuShares") or (wanted.get("CpuQuota") or 0) != (
        actual.get("CpuQuota") or 0
    ):
        resized.add("cpu")
    if (wanted.get("Memory") or 0) != (actual.get("Memory") or 0):
        resized.add("memory")
    if not resized:
        return ResizeAction()
    policies = {p.resourceName: p.restartPolicy for p in container.resizePolicy or ()}
    if any(policies.get(name, "NotRequired") == "RestartContainer" for name in resized):
        return ResizeAction(resized=frozenset(resized), restart=True)
    memory = wanted.get("Memory")
    usage = memory_usage if memory_usage is not None else 0
    if "memory" in resized and memory is not None and memory < usage:
        raise ResizeError(
            f'attempting to set container "{container.name}" memory limit ({memory}) '
            f"below current usage ({usage})"
        )
    return ResizeAction(resized=frozenset(resized), update=wanted)


def engine_host_config(resources: ContainerResources) -> HostConfig:
    """The engine's settings as the ``HostConfig`` entries :func:`update_resources` sets."""
    host: HostConfig = {"CpuShares": resources.cpu_shares}
    if resources.cpu_quota:
        host["CpuQuota"] = resources.cpu_quota
        host["CpuPeriod"] = resources.cpu_period
    if resources.memory:
        host["Memory"] = resources.memory
    return host


@dataclass(frozen=True)
class ContainerToUpdate:
    """A running container whose CPU and memory are updated in place (the kubelet's
    ``containerToUpdateInfo``)."""

    container_id: str
    name: str
    action: ResizeAction
    lowers_memory: bool = False
    """The memory limit goes down: the container's usage is checked against it first."""


def container_resize(container: Any, status: ContainerStatus) -> ResizeAction:
    """What resizing a running instance to its container's resources takes; nothing when
    the engine's settings of it are not known."""
    if status.resources is None:
        return ResizeAction()
    return resize_action(container, engine_host_config(status.resources))


def to_update(status: ContainerStatus, action: ResizeAction) -> ContainerToUpdate:
    """The in-place update of a running instance."""
    memory = action.update.get("Memory") or 0
    current = status.resources.memory if status.resources is not None else 0
    lowers = "memory" in action.resized and (not current or memory < current)
    return ContainerToUpdate(status.id, status.name, action, lowers)


async def memory_usage(docker: DockerAPI, container_id: str) -> int | None:
    """The container's memory usage in bytes, as the engine's stats report it."""
    stats = await docker.container_stats(container_id, one_shot=True)
    usage = (stats.get("memory_stats") or {}).get("usage")
    return int(usage) if isinstance(usage, int) else None


async def carry_out(docker: DockerAPI, container_id: str, action: ResizeAction) -> bool:
    """Update the container in place when ``action`` says so; ``False`` when it is to be
    restarted instead (the caller's sync kills and starts it)."""
    if action.restart:
        return False
    if action.update:
        await docker.update_container(container_id, action.update)
    return True
