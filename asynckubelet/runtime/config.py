"""``RuntimeConfig``: how the runtime works on this node, fixed when the runtime is made.

A leaf of the runtime: the manager, its parts and the node read it, and it reads nothing
of theirs.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path

from asynckubelet.runtime.gate import default_parallel_starts
from asynckubelet.runtime.logrotation import (
    DEFAULT_MAX_FILES,
    DEFAULT_MAX_SIZE,
    LogRotation,
    check_max_files,
    parse_max_size,
)
from asynckubelet.runtime.poddns import DNSSettings


@dataclass(frozen=True)
class RuntimeConfig:
    """How the runtime manager works on this node."""

    node_name: str = field(default_factory=socket.gethostname)
    """Ownership label of everything created; objects of other nodes are never touched."""
    pause_image: str | None = None
    """The sandbox image, pulled when missing; None: the project's own
    ``asynckubelet.local/pause``, built here when missing and never pulled."""
    docker_url: str | None = None
    dns: DNSSettings = field(default_factory=DNSSettings)
    """Cluster DNS, cluster domain and the node's resolver file, for pods' resolv.conf."""
    cgroup_root: str | None = None
    """Run each pod's containers under one pod cgroup below this root, grouped by QoS class
    as the kubelet does (e.g. ``/asynckubelet``); None: Docker's own placement. Local
    engines only."""
    owner: str = ""
    """The owner mark of the pods this runtime makes (:data:`~asynckubelet.runtime.naming.
    LABEL_OWNER`), e.g. ``run-<id>``; empty for the node agent. A runtime lists as its
    node's pods only those with its own mark (or none, for the agent)."""
    pod_log_dir: Path | None = None
    """Link each container instance's log file here as
    ``<namespace>_<name>_<uid>/<container>/<restartCount>.log`` (the kubelet's
    /var/log/pods layout); None: no links. Local engines only."""
    max_parallel_starts: int = field(default_factory=default_parallel_starts)
    """At most this many containers (sandboxes included) are being created and started
    on the engine at once; the others wait their turn, a pod's own containers before new
    pods' sandboxes (:mod:`~asynckubelet.runtime.gate`). 0: no limit."""
    container_log_max_size: str = DEFAULT_MAX_SIZE
    """A container's log file is rotated past this size, a Kubernetes quantity (the
    kubelet's ``containerLogMaxSize``); negative: no rotation
    (:mod:`~asynckubelet.runtime.logrotation`)."""
    container_log_max_files: int = DEFAULT_MAX_FILES
    """Log files kept per container, the one written included; at least 2 (the kubelet's
    ``containerLogMaxFiles``)."""
    seccomp_default: bool = True
    """Containers whose pod and container set no seccomp profile get ``RuntimeDefault``, the
    engine's default profile (the kubelet's ``--seccomp-default``); False: ``Unconfined``."""

    def __post_init__(self) -> None:
        log_rotation(self)


def log_rotation(config: RuntimeConfig) -> LogRotation:
    """The log limits; a :class:`ValueError` naming the field that is wrong."""
    return LogRotation(
        max_size=parse_max_size(config.container_log_max_size, name="container_log_max_size"),
        max_files=check_max_files(config.container_log_max_files, name="container_log_max_files"),
    )


__all__ = ["RuntimeConfig", "log_rotation"]
