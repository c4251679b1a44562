"""asynckubelet: the kubelet's pod lifecycle on asyncio, driving a Docker engine directly.

The public API comes in tiers. This package is the node: :class:`Node` and its
:class:`NodeConfig`, the manifest loader, the types a caller gets back, and the exception
tree of :mod:`asynckubelet.errors` (its ``__all__``, so no error is left out). Below it,
:mod:`asynckubelet.node` is the kubelet alone and :mod:`asynckubelet.runtime` one pod's
sync against the engine; :mod:`asynckubelet.testing` holds fakes of the project's own
protocols for a program's tests. The guide, ``docs/library.md`` in the repository, ships
with the package: ``importlib.resources.files("asynckubelet") / "library.md"``.

A name is imported on first use, so that importing a part of the package (the errors,
the manifest loader, the command line) loads neither the Docker client nor the netlink
library nor the HTTP server that others need. Importing the package changes nothing else
in the process: no import hook, no change to the garbage collector or to signal handlers
(the command line's entry point makes its own, :func:`asynckubelet.cli.main`). The
package's log messages go to loguru, off until the program asks for them with
``logger.enable("asynckubelet")`` (:mod:`asynckubelet._logging`).
"""

from __future__ import annotations

from asynckubelet import _lazy
from asynckubelet import errors as _errors
from asynckubelet._version import __version__ as __version__
from asynckubelet.errors import *  # noqa: F403

TYPE_CHECKING = False
if TYPE_CHECKING:
    from asynckubelet.cluster.agent import ClusterConfig as ClusterConfig
    from asynckubelet.docker.types import ExecResult as ExecResult
    from asynckubelet.docker.types import LogLine as LogLine
    from asynckubelet.manifests.loading import load_manifests as load_manifests
    from asynckubelet.manifests.loading import load_manifests_text as load_manifests_text
    from asynckubelet.manifests.results import Manifests as Manifests
    from asynckubelet.node.events import PodEvent as PodEvent
    from asynckubelet.node.kubelet import KubeletConfig as KubeletConfig
    from asynckubelet.nodeapp.config import HTTPEndpoint as HTTPEndpoint
    from asynckubelet.nodeapp.config import KubeAPIEndpoint as KubeAPIEndpoint
    from asynckubelet.nodeapp.config import NetworkConfig as NetworkConfig
    from asynckubelet.nodeapp.config import NodeConfig as NodeConfig
    from asynckubelet.nodeapp.config import ServicesConfig as ServicesConfig
    from asynckubelet.nodeapp.node import Node as Node
    from asynckubelet.workloads.allocation import ServiceRanges as ServiceRanges


_PUBLIC: dict[str, tuple[str, str]] = {
    "ClusterConfig": ("asynckubelet.cluster.agent", "ClusterConfig"),
    "HTTPEndpoint": ("asynckubelet.nodeapp.config", "HTTPEndpoint"),
    "KubeAPIEndpoint": ("asynckubelet.nodeapp.config", "KubeAPIEndpoint"),
    "KubeletConfig": ("asynckubelet.node.kubelet", "KubeletConfig"),
    "NetworkConfig": ("asynckubelet.nodeapp.config", "NetworkConfig"),
    "Node": ("asynckubelet.nodeapp.node", "Node"),
    "NodeConfig": ("asynckubelet.nodeapp.config", "NodeConfig"),
    "ServiceRanges": ("asynckubelet.workloads.allocation", "ServiceRanges"),
    "ServicesConfig": ("asynckubelet.nodeapp.config", "ServicesConfig"),
    "ExecResult": ("asynckubelet.docker.types", "ExecResult"),
    "LogLine": ("asynckubelet.docker.types", "LogLine"),
    "Manifests": ("asynckubelet.manifests.results", "Manifests"),
    "PodEvent": ("asynckubelet.node.events", "PodEvent"),
    "load_manifests": ("asynckubelet.manifests.loading", "load_manifests"),
    "load_manifests_text": ("asynckubelet.manifests.loading", "load_manifests_text"),
}
"""Public name -> (module, attribute): imported from there on first use."""

__all__ = sorted([*_errors.__all__, *_PUBLIC, "__version__"])
__getattr__, __dir__ = _lazy.exports(globals(), _PUBLIC)
