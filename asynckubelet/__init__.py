"""asynckubelet: the kubelet's pod lifecycle on asyncio, driving a Docker engine directly.

Every public name is importable from here: the node (:class:`Kubelet`), the runtime
(:class:`RuntimeManager`), the manifest loader, the types their signatures use, and the
exception tree of :mod:`asynckubelet.errors` (its ``__all__``, so no error is left out).
A name is imported on first use, so that importing a part of the package (the errors,
the manifest loader, the command line) loads neither the Docker client nor the netlink
library nor the HTTP server that others need. ``docs/library.md`` is the reference.

Importing the package changes nothing else in the process: no import hook, no change to
the garbage collector or to signal handlers (the command line's entry point makes its
own, :func:`asynckubelet.cli.main`). The package's log messages go to loguru, off until
the program asks for them with ``logger.enable("asynckubelet")``
(:mod:`asynckubelet._logging`).
"""

from __future__ import annotations

import importlib

from asynckubelet import errors as _errors

# ``typing`` costs the shortest commands a tenth of their time; mypy reads this name.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from asynckubelet.docker.api import DockerAPI as DockerAPI
    from asynckubelet.docker.client import DockerClient as DockerClient
    from asynckubelet.docker.types import ExecResult as ExecResult
    from asynckubelet.docker.types import LogLine as LogLine
    from asynckubelet.errors import *  # noqa: F403
    from asynckubelet.manifests.loading import Manifests as Manifests
    from asynckubelet.manifests.loading import load_manifests as load_manifests
    from asynckubelet.manifests.loading import load_manifests_text as load_manifests_text
    from asynckubelet.network import NetworkPlugin as NetworkPlugin
    from asynckubelet.node.admission import NodeInfo as NodeInfo
    from asynckubelet.node.admission import NodeResources as NodeResources
    from asynckubelet.node.admission import Taint as Taint
    from asynckubelet.node.events import PodEvent as PodEvent
    from asynckubelet.node.kubelet import Kubelet as Kubelet
    from asynckubelet.node.kubelet import KubeletConfig as KubeletConfig
    from asynckubelet.node.objects import ObjectStore as ObjectStore
    from asynckubelet.runtime.backoff import Backoff as Backoff
    from asynckubelet.runtime.env import PodContext as PodContext
    from asynckubelet.runtime.events import EventSink as EventSink
    from asynckubelet.runtime.hooks import HookTarget as HookTarget
    from asynckubelet.runtime.manager import RuntimeConfig as RuntimeConfig
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

__version__ = "0.1.0"

_PUBLIC: dict[str, tuple[str, str]] = {
    "Backoff": ("asynckubelet.runtime.backoff", "Backoff"),
    "ContainerState": ("asynckubelet.runtime.types", "ContainerState"),
    "ContainerStatus": ("asynckubelet.runtime.types", "ContainerStatus"),
    "DNSSettings": ("asynckubelet.runtime.poddns", "DNSSettings"),
    "DockerAPI": ("asynckubelet.docker.api", "DockerAPI"),
    "DockerClient": ("asynckubelet.docker.client", "DockerClient"),
    "EventSink": ("asynckubelet.runtime.events", "EventSink"),
    "ExecResult": ("asynckubelet.docker.types", "ExecResult"),
    "HookTarget": ("asynckubelet.runtime.hooks", "HookTarget"),
    "Kubelet": ("asynckubelet.node.kubelet", "Kubelet"),
    "KubeletConfig": ("asynckubelet.node.kubelet", "KubeletConfig"),
    "LogLine": ("asynckubelet.docker.types", "LogLine"),
    "Manifests": ("asynckubelet.manifests.loading", "Manifests"),
    "NetworkPlugin": ("asynckubelet.network", "NetworkPlugin"),
    "NodeInfo": ("asynckubelet.node.admission", "NodeInfo"),
    "NodeResources": ("asynckubelet.node.admission", "NodeResources"),
    "ObjectStore": ("asynckubelet.node.objects", "ObjectStore"),
    "PodContext": ("asynckubelet.runtime.env", "PodContext"),
    "PodEvent": ("asynckubelet.node.events", "PodEvent"),
    "PodRuntimeStatus": ("asynckubelet.runtime.types", "PodRuntimeStatus"),
    "PodSyncResult": ("asynckubelet.runtime.results", "PodSyncResult"),
    "ProbeResult": ("asynckubelet.runtime.probes", "ProbeResult"),
    "RuntimeConfig": ("asynckubelet.runtime.manager", "RuntimeConfig"),
    "RuntimeManager": ("asynckubelet.runtime.manager", "RuntimeManager"),
    "RuntimeMetrics": ("asynckubelet.runtime.metrics", "RuntimeMetrics"),
    "SandboxState": ("asynckubelet.runtime.types", "SandboxState"),
    "SandboxStatus": ("asynckubelet.runtime.types", "SandboxStatus"),
    "SyncAction": ("asynckubelet.runtime.results", "SyncAction"),
    "SyncError": ("asynckubelet.runtime.results", "SyncError"),
    "SyncResult": ("asynckubelet.runtime.results", "SyncResult"),
    "Taint": ("asynckubelet.node.admission", "Taint"),
    "VolumeProvider": ("asynckubelet.runtime.volumes", "VolumeProvider"),
    "load_manifests": ("asynckubelet.manifests.loading", "load_manifests"),
    "load_manifests_text": ("asynckubelet.manifests.loading", "load_manifests_text"),
}
"""Public name -> (module, attribute): imported from there on first use."""

__all__ = sorted([*_errors.__all__, *_PUBLIC, "__version__"])


def __getattr__(name: str) -> Any:
    if name in _errors.__all__:
        return getattr(_errors, name)
    where = _PUBLIC.get(name)
    if where is None:
        raise AttributeError(f"module 'asynckubelet' has no attribute {name!r}")
    value = getattr(importlib.import_module(where[0]), where[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
