"""The runtime, the lowest public tier: one pod's sync against a Docker engine
(:class:`RuntimeManager`: ``sync_pod``, ``kill_pod``, ``get_pod_status``), the kubelet's
decisions as data (:class:`SyncAction`, :class:`PodSyncResult`), backoff, and the types
of a pod's runtime status. The kubelet (:mod:`asynckubelet.node`) and the whole node
(:class:`asynckubelet.Node`) are built on it.

Names are imported on first use (:mod:`asynckubelet._lazy`): the package's submodules
(``from asynckubelet.runtime import naming``) import without the Docker client.
"""

from __future__ import annotations

from asynckubelet import _lazy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from asynckubelet.docker.api import DockerAPI as DockerAPI
    from asynckubelet.docker.client import DockerClient as DockerClient
    from asynckubelet.network import NetworkPlugin as NetworkPlugin
    from asynckubelet.runtime.backoff import Backoff as Backoff
    from asynckubelet.runtime.config import RuntimeConfig as RuntimeConfig
    from asynckubelet.runtime.env import PodContext as PodContext
    from asynckubelet.runtime.events import EventSink as EventSink
    from asynckubelet.runtime.hooks import HookTarget as HookTarget
    from asynckubelet.runtime.images import PullListener as PullListener
    from asynckubelet.runtime.manager import RuntimeManager as RuntimeManager
    from asynckubelet.runtime.metrics import RuntimeMetrics as RuntimeMetrics
    from asynckubelet.runtime.poddns import DNSSettings as DNSSettings
    from asynckubelet.runtime.probes import ProbeResult as ProbeResult
    from asynckubelet.runtime.results import PodSyncResult as PodSyncResult
    from asynckubelet.runtime.results import SyncAction as SyncAction
    from asynckubelet.runtime.results import SyncError as SyncError
    from asynckubelet.runtime.results import SyncResult as SyncResult
    from asynckubelet.runtime.types import ContainerState as ContainerState
    from asynckubelet.runtime.types import ContainerStatus as ContainerStatus
    from asynckubelet.runtime.types import PodRuntimeStatus as PodRuntimeStatus
    from asynckubelet.runtime.types import SandboxState as SandboxState
    from asynckubelet.runtime.types import SandboxStatus as SandboxStatus
    from asynckubelet.runtime.volumes import VolumeProvider as VolumeProvider

_PUBLIC: dict[str, tuple[str, str]] = {
    "Backoff": ("asynckubelet.runtime.backoff", "Backoff"),
    "ContainerState": ("asynckubelet.runtime.types", "ContainerState"),
    "ContainerStatus": ("asynckubelet.runtime.types", "ContainerStatus"),
    "DNSSettings": ("asynckubelet.runtime.poddns", "DNSSettings"),
    "DockerAPI": ("asynckubelet.docker.api", "DockerAPI"),
    "DockerClient": ("asynckubelet.docker.client", "DockerClient"),
    "EventSink": ("asynckubelet.runtime.events", "EventSink"),
    "HookTarget": ("asynckubelet.runtime.hooks", "HookTarget"),
    "NetworkPlugin": ("asynckubelet.network", "NetworkPlugin"),
    "PodContext": ("asynckubelet.runtime.env", "PodContext"),
    "PullListener": ("asynckubelet.runtime.images", "PullListener"),
    "PodRuntimeStatus": ("asynckubelet.runtime.types", "PodRuntimeStatus"),
    "PodSyncResult": ("asynckubelet.runtime.results", "PodSyncResult"),
    "ProbeResult": ("asynckubelet.runtime.probes", "ProbeResult"),
    "RuntimeConfig": ("asynckubelet.runtime.config", "RuntimeConfig"),
    "RuntimeManager": ("asynckubelet.runtime.manager", "RuntimeManager"),
    "RuntimeMetrics": ("asynckubelet.runtime.metrics", "RuntimeMetrics"),
    "SandboxState": ("asynckubelet.runtime.types", "SandboxState"),
    "SandboxStatus": ("asynckubelet.runtime.types", "SandboxStatus"),
    "SyncAction": ("asynckubelet.runtime.results", "SyncAction"),
    "SyncError": ("asynckubelet.runtime.results", "SyncError"),
    "SyncResult": ("asynckubelet.runtime.results", "SyncResult"),
    "VolumeProvider": ("asynckubelet.runtime.volumes", "VolumeProvider"),
}
"""Public name -> (module, attribute): imported from there on first use."""

__all__ = sorted(_PUBLIC)
__getattr__, __dir__ = _lazy.exports(globals(), _PUBLIC)
