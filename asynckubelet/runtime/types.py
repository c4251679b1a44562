"""Records of what the runtime sees on Docker.

These are the data that the pure parts (``compute_pod_actions``, ``status.generate``) are
functions of. They are rebuilt from Docker alone (names, labels and inspect output), so an
agent that restarts sees the same records it would have seen had it kept running. The
shapes follow the kubelet's ``kubecontainer.PodStatus`` / ``kubecontainer.Status`` /
``runtimeapi.PodSandboxStatus``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime


class ContainerState(enum.Enum):
    """The kubelet's ``kubecontainer.State``."""

    CREATED = "created"
    RUNNING = "running"
    EXITED = "exited"
    UNKNOWN = "unknown"


class SandboxState(enum.Enum):
    READY = "ready"
    NOTREADY = "notready"


@dataclass(frozen=True)
class ContainerStatus:
    """One container instance on Docker (current or dead), as the kubelet sees it."""

    id: str
    """Docker container id (full)."""
    name: str
    """The container's name in the pod spec."""
    state: ContainerState
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_code: int = 0
    reason: str = ""
    """``OOMKilled``, ``Error``, ``Completed``, ``ContainerCannotRun``... ('' while running)."""
    message: str = ""
    image: str = ""
    """The image as the spec named it."""
    image_id: str = ""
    """``docker-pullable://...`` or ``docker://sha256:...``."""
    hash: str = ""
    """Spec hash of the container at creation (``naming.hash_container``)."""
    restart_count: int = 0
    sandbox_id: str = ""
    stop_signal: str = ""
    """The signal a stop sends: the spec's ``stopSignal``, else the image's ``STOPSIGNAL``
    (the engine's ``Config.StopSignal``); '' when neither names one (SIGTERM)."""
    resources: ContainerResources | None = None
    """The engine's CPU and memory settings of the instance; None when not known."""

    @property
    def container_id(self) -> str:
        """The Kubernetes ``containerID`` form: ``docker://<id>``."""
        return f"docker://{self.id}"


@dataclass(frozen=True)
class ContainerResources:
    """The CPU and memory settings the engine holds for a container (its ``HostConfig``):
    what a resize compares the spec with and what ``status.containerStatuses[].resources``
    reports."""

    cpu_shares: int = 0
    cpu_quota: int = 0
    """0: no CPU limit."""
    cpu_period: int = 0
    memory: int = 0
    """The memory limit in bytes; 0: none."""


@dataclass(frozen=True)
class SandboxStatus:
    """One pause-container sandbox of the pod."""

    id: str
    attempt: int
    state: SandboxState
    created_at: datetime
    ip: str | None = ""
    """The pod IP; ``""`` when the network has none, None when the network plugin reports
    no network state at all (a loopback-only network), as the kubelet's nil ``Network``."""
    additional_ips: tuple[str, ...] = ()
    host_network: bool = False


@dataclass(frozen=True)
class PodRuntimeStatus:
    """Everything Docker holds about one pod.

    ``sandboxes`` and ``containers`` are sorted newest first (by creation time), as the
    kubelet's ``GetPodStatus`` returns them.
    """

    uid: str
    name: str
    namespace: str
    sandboxes: tuple[SandboxStatus, ...] = ()
    containers: tuple[ContainerStatus, ...] = ()
    ips: tuple[str, ...] = field(default=())

    def find_container(self, name: str) -> ContainerStatus | None:
        """The newest instance of the named container, or None."""
        for c in self.containers:
            if c.name == name:
                return c
        return None
