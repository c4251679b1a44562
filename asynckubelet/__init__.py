"""asynckubelet: the kubelet's pod lifecycle on asyncio, driving a Docker engine directly."""

from loguru import logger

from asynckubelet.errors import (
    AsyncKubeletError,
    Conflict,
    ContainerConfigError,
    DockerAPIError,
    DockerError,
    FieldError,
    ImageError,
    ImageNeverPull,
    ImageNotFound,
    ImagePullError,
    InvalidImageName,
    ManifestError,
    NetworkError,
    NotFound,
    PodError,
    RuntimeUnavailable,
    SandboxError,
    ServerBusy,
)
from asynckubelet.node.kubelet import Kubelet, KubeletConfig

__version__ = "0.1.0"

# A library logs only when its user asks: ``logger.enable("asynckubelet")`` (the CLI does).
logger.disable("asynckubelet")

__all__ = [
    "AsyncKubeletError",
    "Conflict",
    "ContainerConfigError",
    "DockerAPIError",
    "DockerError",
    "FieldError",
    "ImageError",
    "ImageNeverPull",
    "ImageNotFound",
    "ImagePullError",
    "InvalidImageName",
    "Kubelet",
    "KubeletConfig",
    "ManifestError",
    "NetworkError",
    "NotFound",
    "PodError",
    "RuntimeUnavailable",
    "SandboxError",
    "ServerBusy",
    "__version__",
]
