"""asynckubelet: the kubelet's pod lifecycle on asyncio, driving a Docker engine directly."""

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

__version__ = "0.1.0"

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
    "ManifestError",
    "NetworkError",
    "NotFound",
    "PodError",
    "RuntimeUnavailable",
    "SandboxError",
    "ServerBusy",
    "__version__",
]
