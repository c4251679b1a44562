"""What a :class:`~asynckubelet.nodeapp.node.Node` is made of: one frozen record.

A node is the kubelet plus the parts around it that a configuration turns on: the
workload controllers, Services with the cluster DNS, the local API and the node's
published state in its state directory, the read-only TCP endpoint, and cluster mode.
Each part is a field; the defaults are the command line's (``run``'s node: a kubelet
with the controllers and the host's default pod network, nothing listening), so
``NodeConfig()`` runs pods with an IP in a library as ``run`` does, and the command line
turns its flags into the same record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from asynckubelet.network import DEFAULT_BRIDGE, DEFAULT_POD_CIDR, DEFAULT_STATE_DIR
from asynckubelet.node.config import KubeletConfig

if TYPE_CHECKING:
    from asynckubelet.cluster.agent import ClusterConfig
    from asynckubelet.docker import DockerAPI
    from asynckubelet.network import NetworkPlugin
    from asynckubelet.workloads.allocation import ServiceRanges

DEFAULT_HTTP_PORT = 10255
"""The kubelet's read-only port."""
DEFAULT_KUBE_API_PORT = 6443
"""The API server's secure port."""


@dataclass(frozen=True, kw_only=True)
class NetworkConfig:
    """The pod network backend and its settings (the ``--network`` flags); the defaults
    are the command line's, so ``NetworkConfig()`` is the network ``run`` and ``serve``
    give pods without flags."""

    backend: str = "auto"
    """One of :data:`asynckubelet.network.factory.BACKENDS`: ``auto`` (``bridge`` as root
    with a local engine, else ``docker``), ``bridge`` (a Linux bridge and veth pairs made
    over netlink, needs root), ``cni`` (the CNI plugin binaries and the configuration list),
    ``docker`` (a Docker network of the engine's), ``loopback`` (no pod network: pods get
    no IP and reach nothing but themselves)."""
    state_dir: Path = DEFAULT_STATE_DIR
    """Where the network keeps its address records (IPAM files); two nodes on one host
    share it only when they share the bridge."""
    bridge: str = DEFAULT_BRIDGE
    """The Linux bridge of the ``bridge`` backend (made when missing, kept at exit as
    Docker keeps ``docker0``; ``asynckubelet reset`` removes it)."""
    pod_cidr: str = DEFAULT_POD_CIDR
    """The pods' IPv4 range; the bridge takes its first address (the pods' gateway). In
    cluster mode, used when the Node has no ``spec.podCIDR``."""
    pod_cidr_v6: str | None = None
    """The pods' IPv6 range: dual stack for the ``bridge`` backend; None: IPv4 only."""
    firewall: str = "iptables"
    """The firewall the ``bridge`` backend writes (``iptables`` or ``nftables``)."""
    masquerade: bool = True
    """Masquerade pod traffic that leaves the pod network."""

    def plugin(
        self, docker: DockerAPI, *, node_name: str, pod_cidr: str | None = None
    ) -> NetworkPlugin:
        """The backend on ``docker``'s engine (``pod_cidr`` in place of :attr:`pod_cidr`)."""
        from asynckubelet.network import factory

        return factory.make_network_plugin(
            self.backend,
            docker=docker,
            state_dir=self.state_dir,
            bridge=self.bridge,
            pod_cidr=pod_cidr or self.pod_cidr,
            pod_cidr_v6=self.pod_cidr_v6,
            firewall=self.firewall,
            masquerade=self.masquerade,
            node_name=node_name,
        )


def _service_ranges() -> ServiceRanges:
    """The default ranges (imported here: a node without Services loads no controllers)."""
    from asynckubelet.workloads.allocation import ServiceRanges

    return ServiceRanges()


@dataclass(frozen=True, kw_only=True)
class ServicesConfig:
    """Services on the node: ClusterIPs, nodePorts and endpoints, and the cluster DNS."""

    ranges: ServiceRanges = field(default_factory=_service_ranges)
    """The ClusterIP range and the nodePort range (``--service-cluster-ip-range``,
    ``--service-node-port-range``); Services need a pod network (:attr:`NodeConfig.
    network`) to reach their pods."""
    dns_server: bool = True
    """Answer the cluster's DNS names on the pod network's gateway (port 53), and give
    ``ClusterFirst`` pods that address when the kubelet has no ``cluster_dns``."""
    dns_upstreams: tuple[tuple[str, int], ...] = ()
    """``(address, port)`` the cluster DNS forwards other names to; empty: none."""
    instances_root: Path | None = None
    """Where the host's node instances keep their state dirs (``--instance``; its parent
    is the default instance's): the nodePorts and LoadBalancer ports those nodes publish
    are held, and this node records its own in its state dir for them. None: the host's
    other nodes are not looked at."""


@dataclass(frozen=True, kw_only=True)
class HTTPEndpoint:
    """The read-only TCP endpoint (``/healthz``, ``/pods``, ``/metrics``...)."""

    host: str = "127.0.0.1"
    """The address to listen on (a loopback address unless ``allow_remote``)."""
    port: int = DEFAULT_HTTP_PORT
    """0: any free port (:attr:`Node.http_port` tells which)."""
    allow_remote: bool = False
    """Serve on an address other hosts reach (refused otherwise)."""


@dataclass(frozen=True, kw_only=True)
class KubeAPIEndpoint:
    """The Kubernetes API over TLS, with the node's kubeconfig in its state directory
    (:mod:`asynckubelet.api.kube`)."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_KUBE_API_PORT
    """0: any free port (:attr:`Node.kube_api` tells which)."""
    next_free: bool = False
    """Take the next free port when ``port`` is taken."""
    context: str = "asynckubelet"
    """The name of the kubeconfig's cluster, user and context (``asynckubelet-NAME`` for
    an ``--instance NAME``, so kubeconfigs merged into one keep each node's)."""


@dataclass(frozen=True, kw_only=True)
class NodeConfig:
    """A node: the kubelet and the parts a configuration turns on.

    Every part is optional but the kubelet; :class:`~asynckubelet.nodeapp.node.Node`
    assembles exactly what is given here, and a ``ValueError`` names the field of a
    combination that cannot run.
    """

    kubelet: KubeletConfig = field(default_factory=KubeletConfig)
    """The kubelet: node name, engine, pod security, DNS, state and manifest directories,
    what happens to the pods on exit (``leave_running``, ``shutdown_timeout``), whether a pod's
    worker ends once its pod is terminal (``exit_when_terminal``, a foreground run's way)."""
    network: NetworkConfig | None = field(default_factory=NetworkConfig)
    """The pod network: by default the host's default backend, as ``run`` and ``serve``
    choose it (``auto``: a bridge as root with a local engine, else a Docker network),
    so pods get an IP other pods and the host reach. None, or ``NetworkConfig(backend=
    "loopback")``: no pod network, pods get no IP (their own loopback only), and nothing
    is made on the host."""
    controllers: bool = True
    """Run the workload controllers (Deployment, ReplicaSet, StatefulSet, Job, DaemonSet,
    CronJob)."""
    services: ServicesConfig | None = None
    """Run Services and the cluster DNS; None: Services are stored but not served."""
    local_api: bool = False
    """Serve the local API on ``<state_dir>/api.sock`` and publish the node in its state
    directory (``node.json``, the pid file), where the command line's clients find it;
    needs ``kubelet.state_dir``. The objects applied to the node are then kept in
    ``<state_dir>/objects`` and taken back at the next start."""
    http: HTTPEndpoint | None = None
    """The read-only TCP endpoint; None: none."""
    kube_api: KubeAPIEndpoint | None = None
    """The Kubernetes API and ``<state_dir>/kubeconfig``; None: none. Needs ``local_api``;
    not in cluster mode, whose API server is the cluster's."""
    cluster: ClusterConfig | None = None
    """Join the cluster of this kubeconfig (cluster mode): register the Node, run the pods
    bound to it, serve the kubelet API. The cluster's controllers run its workloads, so
    ``controllers`` and ``services`` must be off."""

    def __post_init__(self) -> None:
        if self.local_api and self.kubelet.state_dir is None:
            raise ValueError("NodeConfig.local_api needs kubelet.state_dir")
        if self.kube_api is not None and (not self.local_api or self.cluster is not None):
            raise ValueError(
                "NodeConfig.kube_api needs local_api and is not served in cluster mode"
            )
        if self.cluster is not None and (self.controllers or self.services is not None):
            raise ValueError(
                "NodeConfig.cluster: a cluster node runs no local controllers or Services "
                "(set controllers=False and services=None)"
            )


__all__ = ["HTTPEndpoint", "KubeAPIEndpoint", "NetworkConfig", "NodeConfig", "ServicesConfig"]
