"""A running container's new CPU and memory as the engine's update call takes them.

The same mapping as at create (:func:`host_config_resources`: shares from requests.cpu, a
CFS quota over a 100 ms period from limits.cpu, the memory limit from limits.memory), with
the swap limit set beside the memory limit, as the engine refuses a memory limit above the
swap limit it set at create (twice the first memory limit).
"""

from __future__ import annotations

from typing import Any

from asynckubelet.docker.types import HostConfig
from asynckubelet.runtime.resources import host_config_resources


def update_resources(container: Any) -> HostConfig:
    """The body of the engine's ``POST /containers/{id}/update`` for the container's
    resources."""
    body = host_config_resources(container)
    memory = body.get("Memory")
    if memory is not None:
        body["MemorySwap"] = 2 * memory
    return body
