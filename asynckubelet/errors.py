"""The one exception tree of asynckubelet.

Every adapter (Docker, netlink, CNI binaries, the filesystem) turns the outside world's
errors into one of these, chained with ``raise ... from e``, so callers catch by meaning
and never by library::

    AsyncKubeletError
     ├── ManifestError                 a manifest was rejected; carries every FieldError
     ├── DockerError                   anything the Docker engine said or failed to say
     │    ├── RuntimeUnavailable       the daemon cannot be reached (transient: retried)
     │    ├── DockerAPIError           the daemon answered with an error status
     │    │    ├── NotFound            404: no such container, image, network or exec
     │    │    │    └── ImageNotFound  the image is not present locally
     │    │    ├── Conflict            409: name in use, container not running, ...
     │    │    └── ServerBusy          5xx that is worth another try (transient: retried)
     │    └── ImageError               pulling, naming or building an image failed
     │         ├── ImagePullError      ErrImagePull
     │         ├── ImageNeverPull      ErrImageNeverPull
     │         ├── InvalidImageName    InvalidImageName
     │         └── ImageBuildError     an offline image (pause, busybox) cannot be made
     ├── ContainerConfigError          CreateContainerConfigError: the spec cannot be made
     │                                 into a container (missing ConfigMap, bad env, ...)
     ├── VolumeError                   FailedMount: a pod volume cannot be set up
     ├── UnsafePath                    a host path would leave the agent's own tree or
     │                                 go through a symbolic link (also an OSError)
     ├── SandboxError                  FailedCreatePodSandBox
     │    └── NetworkError             the network plugin failed (NetworkNotReady, ...)
     ├── PodError                      a pod-level failure (unknown pod, terminated, ...)
     │    ├── PodNotFound              no such pod on the node (also a NotFound): the API
     │    │                            server's ``pods "web" not found``
     │    ├── ContainerNotValid        a container the pod does not have (also a NotFound)
     │    └── PodConflict              not running, or being stopped (also a Conflict)
     ├── ResyncNeeded                  a watch fell behind and ended: list again, then
     │                                 watch anew (the API server's 410 Gone)
     ├── DaemonError                   the node daemon (``serve``) cannot be reached, or
     │                                 refused what its local API was asked
     └── ClusterError                  the Kubernetes API server of cluster node mode
          ├── KubeconfigError          the kubeconfig is missing, malformed or refused
          ├── KubeletServingError      the kubelet API's certificate, key or client CA
          │                            cannot be used
          ├── ClusterUnavailable       the API server cannot be reached (transient: retried)
          └── ClusterAPIError          the API server answered with an error status

``kubelet_reason`` on the runtime errors holds the name the kubelet uses in container
waiting reasons and events, so status and event code need no mapping table.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple

    class _FieldError(NamedTuple):
        field: str
        reason: str
        detail: str = ""
        source: str = ""
else:
    # A named tuple without ``typing``: this module is loaded by every command, and
    # ``typing`` is a noticeable part of a short command's (``get``) time.
    import collections

    _FieldError = collections.namedtuple(
        "_FieldError", ["field", "reason", "detail", "source"], defaults=["", ""]
    )

__all__ = [
    "AsyncKubeletError",
    "ClusterAPIError",
    "ClusterError",
    "ClusterUnavailable",
    "Conflict",
    "ContainerConfigError",
    "ContainerNotValid",
    "DaemonError",
    "DockerAPIError",
    "DockerError",
    "FieldError",
    "ImageBuildError",
    "ImageError",
    "ImageNeverPull",
    "ImageNotFound",
    "ImagePullError",
    "InvalidImageName",
    "KubeconfigError",
    "KubeletServingError",
    "ManifestError",
    "NetworkError",
    "NotFound",
    "PodConflict",
    "PodError",
    "PodNotFound",
    "ResyncNeeded",
    "RuntimeUnavailable",
    "SandboxError",
    "ServerBusy",
    "UnsafePath",
    "VolumeError",
]


class AsyncKubeletError(Exception):
    """Base of every error asynckubelet raises on purpose."""

    kubelet_reason: str = "Error"


class FieldError(_FieldError):
    """One problem with one field, in the API server's shape: ``field``, ``reason``,
    ``detail`` and ``source`` (the file it came from, if any).

    ``str()`` gives ``<field path>: <Reason>: <detail>``, e.g.
    ``spec.containers[1].ports[0].containerPort: Invalid value: 70000: must be between
    1 and 65535, inclusive``. (A named tuple rather than a dataclass: this module is
    loaded by every command, and ``dataclasses`` brings ten modules with it.)
    """

    __slots__ = ()

    def __str__(self) -> str:
        text = f"{self.field}: {self.reason}"
        if self.detail:
            text += f": {self.detail}"
        return text


class ManifestError(AsyncKubeletError):
    """A manifest was rejected. ``errors`` lists every problem found, not only the first."""

    kubelet_reason = "Invalid"

    def __init__(self, message: str, errors: list[FieldError] | None = None) -> None:
        self.errors: list[FieldError] = list(errors or [])
        if self.errors:
            details = "\n".join(f"  {e.source + ': ' if e.source else ''}{e}" for e in self.errors)
            message = f"{message}\n{details}"
        super().__init__(message)


class DockerError(AsyncKubeletError):
    """Anything the Docker engine said, or failed to say."""


class RuntimeUnavailable(DockerError):
    """The Docker daemon cannot be reached (no socket, connection refused or reset)."""

    kubelet_reason = "RuntimeUnavailable"


class DockerAPIError(DockerError):
    """The daemon answered with an error status."""

    def __init__(self, message: str, *, status: int = 500) -> None:
        super().__init__(message)
        self.status = status


class NotFound(DockerAPIError):
    """404: no such container, image, network or exec instance."""

    def __init__(self, message: str, *, status: int = 404) -> None:
        super().__init__(message, status=status)


class ImageNotFound(NotFound):
    """The image is not present on the engine."""


class Conflict(DockerAPIError):
    """409: the name is in use, the container is not running, and the like."""

    def __init__(self, message: str, *, status: int = 409) -> None:
        super().__init__(message, status=status)


class ServerBusy(DockerAPIError):
    """A 5xx answer that a later attempt may not get (daemon busy, restarting)."""


class ImageError(DockerError):
    """Pulling, naming or building an image failed."""

    def __init__(self, message: str, *, image: str = "") -> None:
        super().__init__(message)
        self.image = image


class ImagePullError(ImageError):
    kubelet_reason = "ErrImagePull"


class ImageNeverPull(ImageError):
    kubelet_reason = "ErrImageNeverPull"


class InvalidImageName(ImageError):
    kubelet_reason = "InvalidImageName"


class ImageBuildError(ImageError):
    """An image could not be made from local material (no compiler, no static busybox)."""


class ContainerConfigError(AsyncKubeletError):
    """The container spec cannot be made into a container."""

    kubelet_reason = "CreateContainerConfigError"


class VolumeError(AsyncKubeletError):
    """A volume of the pod cannot be set up (missing ConfigMap, hostPath type check, ...)."""

    kubelet_reason = "FailedMount"

    def __init__(self, message: str, *, volume: str) -> None:
        super().__init__(message)
        self.volume = volume


class UnsafePath(AsyncKubeletError, OSError):
    """A file operation on the host was refused: its path is outside the root it belongs
    under, or goes through a symbolic link where none may be followed. An ``OSError`` too,
    so code that handles file errors handles this one."""

    kubelet_reason = "UnsafePath"

    def __init__(self, message: str) -> None:
        super().__init__(message)


class SandboxError(AsyncKubeletError):
    """The pod sandbox could not be created or started."""

    kubelet_reason = "FailedCreatePodSandBox"


class NetworkError(SandboxError):
    """The network plugin failed to set up or tear down a pod's network."""

    kubelet_reason = "NetworkNotReady"


class PodError(AsyncKubeletError):
    """A pod-level failure."""


class PodNotFound(PodError, NotFound):
    """No pod of that namespace and name: the API server's ``NotFound``, worded as its
    ``pods "web" not found``."""

    def __init__(self, message: str) -> None:
        NotFound.__init__(self, message)


class ContainerNotValid(PodError, NotFound):
    """A container name the pod does not have; the message names those it has."""

    def __init__(self, message: str) -> None:
        NotFound.__init__(self, message)


class PodConflict(PodError, Conflict):
    """The pod or its container is not in a state for what was asked (not running, being
    stopped): the API server's ``Conflict``."""

    def __init__(self, message: str) -> None:
        Conflict.__init__(self, message)


class ResyncNeeded(AsyncKubeletError):
    """A watch fell behind: changes came faster than its reader took them, more than its
    buffer holds. It delivered every change up to the first it could not hold, then
    ended with this; what it knew may be stale, so read the current state again (a new
    watch with ``initial=True`` starts with every pod) and watch from there."""

    kubelet_reason = "Expired"


class ClusterError(AsyncKubeletError):
    """Anything the Kubernetes API server of cluster node mode said, or failed to say."""


class KubeconfigError(ClusterError):
    """The kubeconfig cannot be used: missing, malformed, or its credentials refused.

    The message names the file and the problem, on one line."""

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class KubeletServingError(ClusterError):
    """The kubelet API cannot be served: its certificate, key or client CA cannot be used
    (the message names the file and the problem, on one line)."""


class ClusterUnavailable(ClusterError):
    """The API server cannot be reached (connection refused or reset, a timeout)."""


class ClusterAPIError(ClusterError):
    """The API server answered with an error status: ``code`` is the HTTP status,
    ``reason`` the ``Status`` reason (``NotFound``, ``Conflict``, ``Expired``...)."""

    def __init__(self, message: str, *, code: int, reason: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason

    @property
    def not_found(self) -> bool:
        return self.code == 404

    @property
    def conflict(self) -> bool:
        return self.code == 409

    @property
    def gone(self) -> bool:
        """410: the resource version asked for is too old (a watch must re-list)."""
        return self.code == 410


class DaemonError(AsyncKubeletError):
    """The node daemon cannot be reached, or its local API refused a request."""

    kubelet_reason = "DaemonError"

    def __init__(self, message: str, *, status: int = 500, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
