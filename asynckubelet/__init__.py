"""asynckubelet: the kubelet's pod lifecycle on asyncio, driving a Docker engine directly.

The node (:class:`Kubelet`) is imported on first use, so that importing a part of the
package (the command line, the manifest loader) does not load the Docker client and the
netlink library it needs.
"""

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from asynckubelet.node.kubelet import Kubelet, KubeletConfig

__version__ = "0.1.0"

# A library logs only when its user asks: ``logger.enable("asynckubelet")`` (the CLI does).
logger.disable("asynckubelet")


def __getattr__(name: str) -> Any:
    if name in ("Kubelet", "KubeletConfig"):
        from asynckubelet.node import kubelet

        return getattr(kubelet, name)
    raise AttributeError(f"module 'asynckubelet' has no attribute {name!r}")


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
