"""The Docker adapter: typed calls, error mapping and transient retries.

Nothing outside this package imports aiodocker.
"""

from asynckubelet.docker.api import DockerAPI
from asynckubelet.docker.client import DockerClient, default_docker_url
from asynckubelet.docker.types import (
    ContainerConfig,
    ContainerInspect,
    ContainerSummary,
    Event,
    ExecResult,
    HostConfig,
    ImageInspect,
    LogLine,
    PullProgress,
)

__all__ = [
    "ContainerConfig",
    "ContainerInspect",
    "ContainerSummary",
    "DockerAPI",
    "DockerClient",
    "Event",
    "ExecResult",
    "HostConfig",
    "ImageInspect",
    "LogLine",
    "PullProgress",
    "default_docker_url",
]
