"""How a node runs: :class:`KubeletConfig`, the settings of a
:class:`~asynckubelet.node.kubelet.Kubelet`.

Its defaults are the command line's (``run`` and ``serve`` without flags), so a library
node behaves as the command's; each field names the flag that sets it there.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from asynckubelet.manifests import Level
from asynckubelet.node.admission import NodeInfo
from asynckubelet.node.metrics import LOOP_LAG_PERIOD
from asynckubelet.node.pleg import RELIST_PERIOD
from asynckubelet.node.tokens import DEFAULT_ISSUER
from asynckubelet.runtime.gate import default_parallel_starts
from asynckubelet.runtime.logrotation import DEFAULT_MAX_FILES, DEFAULT_MAX_SIZE
from asynckubelet.runtime.poddns import DNSSettings

if TYPE_CHECKING:
    from asynckubelet.runtime.config import RuntimeConfig

SHUTDOWN_TIMEOUT = 60.0
"""Seconds the node gives its pods to stop gracefully on exit, by default."""


@dataclass(frozen=True)
class KubeletConfig:
    """How a node's kubelet runs: its name and engine, the Pod Security level it admits
    pods at, DNS, its state and static-pod directories, its periods and limits, and what
    becomes of the pods when it exits. The pod network is not here but the node's
    (:class:`~asynckubelet.nodeapp.config.NetworkConfig`)."""

    node_name: str = field(default_factory=socket.gethostname)
    """Ownership label of every object (``--node-name``); a node never touches another
    node's objects, and pod UIDs derive from it."""
    state_dir: Path | None = None
    """Where events and pod statuses are written for other processes (``--state-dir``);
    None: nowhere (a node that keeps nothing on disk)."""
    manifest_dir: Path | None = None
    """Static pods (``--manifests``): every manifest in this directory runs, kept in step
    with the files; None: none."""
    pause_image: str | None = None
    """The sandbox image (``--pause-image``), pulled when missing; None: the project's own
    ``asynckubelet.local/pause``, built here when missing and never pulled."""
    docker_url: str | None = None
    """The engine (``--docker-host``: ``unix://`` or ``tcp://``); None: ``DOCKER_HOST``,
    then the default socket, then the engine ``asynckubelet engine start`` keeps."""
    pod_security: Level = "baseline"
    """The Pod Security level every pod is admitted at (``--pod-security``):
    ``privileged``, ``baseline`` or ``restricted``."""
    allow_namespace_policy: bool = False
    """Let a Namespace's ``pod-security.kubernetes.io/enforce`` label relax ``pod_security``
    for its pods (by default a label may only make it stricter)."""
    dns: DNSSettings = field(default_factory=DNSSettings)
    """Cluster DNS servers and domain for ``ClusterFirst`` pods."""
    leave_running: bool = False
    """On exit, leave the pods running (for a later start to adopt) instead of stopping them."""
    relist_period: float = RELIST_PERIOD
    """Seconds between the PLEG's safety-net relists (the event stream tells the rest)."""
    housekeeping_period: float = 2.0
    """Seconds between housekeeping passes at most; the first one runs this long after
    start, so a library user who means to adopt pods left running applies them before it.
    Later passes run when the PLEG saw a container of a pod nobody wants, and at least
    every ``relist_period``."""
    resync_period: float | None = None
    """Seconds after which a pod worker looks again without being woken; None: only when
    something is due (a back-off that ends, a container still waiting, a deadline)."""
    loop_lag_period: float | None = LOOP_LAG_PERIOD
    """Seconds between measurements of the event loop's lag; None: not measured."""
    service_account_issuer: str = DEFAULT_ISSUER
    """``iss`` of the service-account tokens this node issues for projected volumes."""
    node: NodeInfo | None = None
    """The node as admission sees it (capacity, labels); None: this host's resources, no
    labels (``nodeSelector`` and node affinity are then not checked)."""
    check_host_ports: bool = True
    """Refuse a pod whose hostPort a process on this host already holds."""
    shutdown_timeout: float | None = SHUTDOWN_TIMEOUT
    """Seconds the pods get to stop gracefully when the node exits (their grace periods
    and ``preStop`` hooks run within it); the containers of pods still stopping then are
    killed (SIGKILL) at once and removed. None: no limit, every grace period is waited
    for in full."""
    host_ips: tuple[str, ...] = ()
    """The node's addresses (at most one per family): pods' ``status.hostIP(s)`` and the
    downward API's ``status.hostIP``; empty: not reported."""
    wait_for_sources: frozenset[str] = frozenset()
    """Sources that must call :meth:`Kubelet.source_ready` before housekeeping removes any
    pod: until a remote source has listed its pods, none of the pods running is unwanted."""
    owner: str = ""
    """The owner mark of this node's pods (:attr:`~asynckubelet.runtime.manager.
    RuntimeConfig.owner`): a node with one (``run`` of a Job) sees and removes only its
    own pods, never those of the node agent of the same node name."""
    max_parallel_starts: int = field(default_factory=default_parallel_starts)
    """Containers (sandboxes included) the engine is asked to create and start at once;
    the others wait their turn (:attr:`~asynckubelet.runtime.manager.RuntimeConfig.
    max_parallel_starts`). 0: no limit."""
    container_log_max_size: str = DEFAULT_MAX_SIZE
    """A container's log file is rotated past this size, a Kubernetes quantity (the
    kubelet's ``containerLogMaxSize``); negative: no rotation."""
    container_log_max_files: int = DEFAULT_MAX_FILES
    """Log files kept per container, the one written included; at least 2 (the kubelet's
    ``containerLogMaxFiles``)."""
    seccomp_default: bool = True
    """Give containers without a seccomp profile ``RuntimeDefault``, the engine's default
    profile (the kubelet's ``--seccomp-default``, on here by default: a plain ``docker run``
    is filtered too); False: ``Unconfined``, as a kubelet without the flag."""
    exit_when_terminal: bool = False
    """A pod's worker ends, its pod stopped and removed, once the pod's phase is terminal,
    as a foreground ``run`` wants (the pod's last status stays readable); False: the node
    agent's way, where a terminal pod stays listed, its containers kept for their logs,
    until it is deleted (:class:`~asynckubelet.node.worker_state.WorkerPolicy`)."""

    start_network_with_pods: bool = False
    """Start the pod network while the first pod's sandbox is made (the two take a
    similar time and need nothing of each other; a pod's network set-up waits for the
    start), as a foreground run wants; a network that fails to start ends the node.
    False: the network has started before the node is entered."""
    record_events: bool = True
    """Keep the pods' events (listed as ``kubectl get events`` lists them, each logged at
    INFO); False: the runtime's events are only logged at DEBUG, as a bare runtime logs
    them (a foreground run, whose events nothing lists)."""
    metrics: bool = True
    """Keep the node's Prometheus metrics (``/metrics``); False: none are kept, the
    exposition is empty (a foreground run, which nothing scrapes)."""

    def runtime_config(self) -> RuntimeConfig:
        """The runtime's share of the configuration."""
        from asynckubelet.runtime.config import RuntimeConfig

        return RuntimeConfig(
            node_name=self.node_name,
            pause_image=self.pause_image,
            docker_url=self.docker_url,
            dns=self.dns,
            owner=self.owner,
            max_parallel_starts=self.max_parallel_starts,
            container_log_max_size=self.container_log_max_size,
            container_log_max_files=self.container_log_max_files,
            seccomp_default=self.seccomp_default,
        )


__all__ = ["SHUTDOWN_TIMEOUT", "KubeletConfig"]
