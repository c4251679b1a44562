"""asynckubelet: the kubelet's pod lifecycle on asyncio, driving a Docker engine directly.

The node (:class:`Kubelet`) is imported on first use, so that importing a part of the
package (the command line, the manifest loader) does not load the Docker client and the
netlink library it needs.
"""

from typing import TYPE_CHECKING, Any

from asynckubelet import _imports
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
# The logger is disabled as loguru is imported, so that importing the package does not
# import it (the command line's --help needs no logging).
_imports.when_imported("loguru", lambda loguru: loguru.logger.disable("asynckubelet"))
# The Kubernetes models without lightkube's client (cluster mode imports it when it runs).
_imports.defer_package_init("lightkube")


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
