"""Cluster node mode: the node joins a Kubernetes API server and runs what it is given.

The control plane is Kubernetes itself (API server, scheduler, controllers, unmodified);
this is the node agent, what the kubelet (or virtual-kubelet) is to a cluster.
:func:`run_cluster_node` wires the parts:

1. the kubeconfig is loaded and the server asked for its version
   (:mod:`asynckubelet.cluster.client`): a file that is missing, malformed or whose
   credentials are refused is a :class:`~asynckubelet.errors.KubeconfigError`;
2. the Node is registered or adopted (:mod:`~asynckubelet.cluster.registration`), its
   Lease renewed every 10 s (:mod:`~asynckubelet.cluster.lease`) and its status
   reported on change and at least every 5 minutes;
3. the pod network is made for the Node's ``spec.podCIDR`` once the controller manager
   assigns one (or the local pod CIDR, when none comes within ``pod_cidr_wait``);
4. the node (:class:`~asynckubelet.node.kubelet.Kubelet`, the same pod workers and
   ``sync_pod`` as standalone, static pods from its manifest directory too) runs the
   pods bound to it (:mod:`~asynckubelet.cluster.source` over the
   :mod:`~asynckubelet.cluster.reflector`), their ConfigMaps and Secrets from the API
   (:mod:`~asynckubelet.cluster.objects`), projected tokens from ``TokenRequest``
   (:mod:`~asynckubelet.cluster.tokens`), and sends statuses and events back
   (:mod:`~asynckubelet.cluster.reporter`, :mod:`~asynckubelet.cluster.events`).

Nothing here stops pods on the way out unless the node's configuration says so
(``leave_running``): a node agent that restarts adopts its pods with no restart, keeps its
Node, and reconciles what changed meanwhile. The kubelet API
(:mod:`~asynckubelet.cluster.kubeletapi`: logs, exec, port forwarding for the API server)
is served over HTTPS on the node IP and ``kubelet_port``, the port the Node advertises
(``daemonEndpoints.kubeletEndpoint.port``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from lightkube.models.core_v1 import Pod

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet._version import __version__
from asynckubelet.cluster import host, nodestatus
from asynckubelet.cluster.client import KubeClient, check_access
from asynckubelet.cluster.events import EventReporter, Involved
from asynckubelet.cluster.kubeletapi import KubeletServing, serve_kubelet_api
from asynckubelet.cluster.kubeletauth import (
    AUTHORIZATION_MODES,
    Attributes,
    AuthorizationMode,
    User,
)
from asynckubelet.cluster.lease import LEASE_DURATION, LeaseKeeper
from asynckubelet.cluster.mirror import MirrorPods
from asynckubelet.cluster.nodestatus import NodeFacts, Readiness, Thresholds
from asynckubelet.cluster.objects import ObjectCache
from asynckubelet.cluster.reflector import PodReflector, ServiceReflector
from asynckubelet.cluster.registration import NodeRegistrar
from asynckubelet.cluster.reporter import PodStatusReporter
from asynckubelet.cluster.source import SOURCE_READY, ApiPodSource
from asynckubelet.cluster.tokens import ClusterTokens
from asynckubelet.docker import DockerAPI, DockerClient
from asynckubelet.docker.engine import is_local_daemon, resolve_docker_url
from asynckubelet.manifests import Level
from asynckubelet.network import NetworkPlugin
from asynckubelet.node.admission import (
    NodeInfo,
    NodeResources,
    Taint,
    host_port_in_use,
    host_resources,
)
from asynckubelet.node.kubelet import Kubelet, KubeletConfig
from asynckubelet.node.objects import ObjectStore
from asynckubelet.node.volumes import VolumeManager, default_root

DEFAULT_KUBELET_PORT = 10250
POD_CIDR_WAIT = 60.0
NO_POD_CIDR = (
    "runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
    "message:network plugin is not ready: no pod CIDR assigned yet"
)

NetworkFactory = Callable[[str], NetworkPlugin]
"""Makes the pod network for a pod CIDR (the Node's ``spec.podCIDR``)."""


@dataclass(frozen=True)
class ClusterConfig:
    """How the node joins a cluster (the kubelet's flags of the same names)."""

    kubeconfig: Path
    """``--kubeconfig``: the cluster's address and this node's credentials (a client
    certificate or a token)."""
    context: str | None = None
    """The kubeconfig's context to use; None: its ``current-context``."""
    node_labels: Mapping[str, str] = field(default_factory=dict)
    """``--node-labels``: labels set at registration (and on an adopted Node)."""
    register_with_taints: tuple[Taint, ...] = ()
    """``--register-with-taints``: taints of a newly registered Node."""
    node_ip: str | None = None
    """``--node-ip``: the Node's ``InternalIP``; None: the default route's address."""
    kubelet_port: int = DEFAULT_KUBELET_PORT
    """Advertised as ``daemonEndpoints.kubeletEndpoint.port``."""
    resources: NodeResources | None = None
    """Capacity and allocatable; None: read from the host (CPUs, memory, disk, 110 pods)."""
    pod_cidr: str | None = None
    """``--pod-cidr``: the pod network's range when the cluster assigns none."""
    pod_cidr_wait: float = POD_CIDR_WAIT
    """Seconds to wait for ``spec.podCIDR`` before falling back to ``pod_cidr``."""
    pod_security: Level | None = None
    """The Pod Security level cluster pods must meet; None: the node's own level."""
    update_frequency: float = nodestatus.UPDATE_FREQUENCY
    """Seconds between computations of the Node's status (``nodeStatusUpdateFrequency``);
    a changed status is sent at once."""
    report_frequency: float = nodestatus.REPORT_FREQUENCY
    """Seconds: an unchanged status is still sent this often (``nodeStatusReportFrequency``)."""
    lease_duration: int = LEASE_DURATION
    """Seconds of the node's Lease (``nodeLeaseDurationSeconds``), renewed every quarter of
    it: the control plane takes the node for lost when it is not."""
    kubelet_version: str | None = None
    """``nodeInfo.kubeletVersion``; None: the API server's version with this project's."""
    thresholds: Thresholds = field(default_factory=Thresholds)
    """What the host must have left before the Node reports ``MemoryPressure``,
    ``DiskPressure`` or ``PIDPressure`` (the kubelet's ``evictionHard`` defaults)."""
    serve_kubelet_api: bool = True
    """Serve the kubelet API on ``kubelet_port`` (HTTPS, clients verified)."""
    kubelet_address: str | None = None
    """``--address``: where the kubelet API listens; None: the node IP."""
    tls_cert_file: Path | None = None
    """``--tls-cert-file``: the kubelet API's serving certificate (with
    ``tls_private_key_file``)."""
    tls_private_key_file: Path | None = None
    """``--tls-cert-file``/``--tls-private-key-file``: the kubelet API's serving pair;
    None: a self-signed pair made under ``<state-dir>/pki``."""
    client_ca_file: Path | None = None
    """``--client-ca-file``: the CA client certificates are verified against; None: the
    kubeconfig's certificate authority."""
    authorization_mode: AuthorizationMode = "Webhook"
    """``--authorization-mode``: Webhook (a ``SubjectAccessReview`` per client and request,
    the kubelet's default) or AlwaysAllow (any client authenticated)."""

    def __post_init__(self) -> None:
        if (self.tls_cert_file is None) != (self.tls_private_key_file is None):
            raise ValueError("--tls-cert-file and --tls-private-key-file go together")
        if self.authorization_mode not in AUTHORIZATION_MODES:
            raise ValueError(
                f"--authorization-mode must be one of {', '.join(AUTHORIZATION_MODES)}, "
                f"not {self.authorization_mode!r}"
            )
        if not 0 < self.kubelet_port <= 65535:
            raise ValueError(f"--kubelet-port must be a port number, not {self.kubelet_port}")
        bad = nodestatus.unknown_node_labels(self.node_labels)
        if bad:
            raise ValueError(
                "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: "
                + ", ".join(bad)
            )


@dataclass
class ClusterNode:
    """The running agent, as :func:`run_cluster_node` hands it to its caller."""

    api: KubeClient
    kubelet: Kubelet
    registrar: NodeRegistrar
    lease: LeaseKeeper
    reflector: PodReflector
    source: ApiPodSource
    reporter: PodStatusReporter
    events: EventReporter
    pod_cidr: str | None
    server_version: str
    kubelet_port: int | None = None
    """Where the kubelet API listens (None: not served)."""

    @property
    def node_name(self) -> str:
        return self.kubelet.node_name


async def _wait_for_pod_cidr(registrar: NodeRegistrar, *, wait: float) -> str | None:
    """``spec.podCIDR`` once the controller manager sets it, else None after ``wait``."""
    with anyio.move_on_after(wait):
        while True:
            cidr = nodestatus.pod_cidr(registrar.node)
            if cidr:
                return cidr
            await anyio.sleep(0.5)
            try:
                registrar.node = await registrar.api.get_node(registrar.name) or registrar.node
            except errors.ClusterError as e:
                logger.debug("reading node {} failed: {}", registrar.name, e)
    return None


def _node_info(registrar: NodeRegistrar, resources: NodeResources) -> Callable[[], NodeInfo]:
    def info() -> NodeInfo:
        node = registrar.node
        labels = (node.metadata.labels if node and node.metadata else None) or {}
        taints = (node.spec.taints if node and node.spec else None) or []
        return NodeInfo(
            name=registrar.name,
            allocatable=resources,
            labels=dict(labels),
            taints=tuple(Taint(key=t.key, value=t.value or "", effect=t.effect) for t in taints),
        )

    return info


def _volumes(config: KubeletConfig, tokens: ClusterTokens) -> VolumeManager | None:
    if not is_local_daemon(resolve_docker_url(config.docker_url)):
        return None
    state = config.state_dir
    root = state / "volumes" if state is not None else default_root(config.node_name)
    return VolumeManager(
        root=root,
        node_name=config.node_name,
        service_account_issuer=config.service_account_issuer,
        token_source=tokens,
    )


def _kubelet_api(
    config: ClusterConfig, kubelet: Kubelet, api: KubeClient, *, name: str, node_ip: str
) -> Callable[..., Coroutine[Any, Any, None]]:
    state = kubelet.config.state_dir
    serving = KubeletServing(
        address=config.kubelet_address or node_ip,
        port=config.kubelet_port,
        tls_cert_file=config.tls_cert_file,
        tls_private_key_file=config.tls_private_key_file,
        client_ca_file=config.client_ca_file,
        authorization_mode=config.authorization_mode,
        cert_dir=(state if state is not None else default_root(name).parent) / "pki",
    )

    async def review(user: User, attrs: Attributes) -> tuple[bool, str]:
        return await api.review_access(
            user=user.name,
            groups=user.groups,
            verb=attrs.verb,
            resource=attrs.resource,
            subresource=attrs.subresource,
            name=attrs.name,
        )

    async def review_token(token: str) -> User | None:
        found = await api.review_token(token)
        if found is None:
            return None
        user, groups = found
        return User(name=user, groups=groups)

    async def run(*, task_status: anyio.abc.TaskStatus[int]) -> None:
        await serve_kubelet_api(
            kubelet,
            serving,
            node_name=name,
            cluster_ca=api.ca_pem,
            review=review,
            review_token=review_token,
            task_status=task_status,
        )

    return run


async def run_cluster_node(
    config: ClusterConfig,
    kubelet_config: KubeletConfig,
    *,
    docker: DockerAPI | None = None,
    network: NetworkPlugin | NetworkFactory | None = None,
    objects: ObjectStore | None = None,
    task_status: anyio.abc.TaskStatus[ClusterNode] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Join the cluster and run its pods until cancelled.

    ``network`` is the pod network, or a factory called with the pod CIDR (the Node's
    ``spec.podCIDR``, else ``config.pod_cidr``); None: the node's default. ``objects`` is
    the node's store of what was applied to it locally (None: one in memory). Reports started
    with the :class:`ClusterNode` once the first list of pods has been acted on. Raises
    :class:`~asynckubelet.errors.KubeconfigError` for a kubeconfig that cannot be used.
    """
    api = KubeClient.from_kubeconfig(config.kubeconfig, context=config.context)
    try:
        server_version = await check_access(api, path=config.kubeconfig)
        if docker is None:
            async with DockerClient(url=kubelet_config.docker_url) as owned:
                await _run(
                    config,
                    kubelet_config,
                    api,
                    server_version,
                    owned,
                    network,
                    objects,
                    task_status,
                )
        else:
            await _run(
                config, kubelet_config, api, server_version, docker, network, objects, task_status
            )
    finally:
        with anyio.CancelScope(shield=True):
            await api.aclose()


async def _pod_network(
    config: ClusterConfig,
    registrar: NodeRegistrar,
    network: NetworkPlugin | NetworkFactory | None,
    name: str,
) -> tuple[NetworkPlugin | None, str | None]:
    """The pod network and its CIDR: a factory waits for the node's ``spec.podCIDR`` (else
    the local pod CIDR); a plugin is used as given."""
    if not callable(network):
        return network, None
    pod_cidr = await _wait_for_pod_cidr(registrar, wait=config.pod_cidr_wait)
    if pod_cidr is None:
        pod_cidr = config.pod_cidr
        logger.warning(
            "node {} has no spec.podCIDR after {} s; using the local pod CIDR {}",
            name,
            config.pod_cidr_wait,
            pod_cidr,
        )
    else:
        logger.info("node {}: pod CIDR {}", name, pod_cidr)
    return (network(pod_cidr) if pod_cidr else network("")), pod_cidr


def pod_host_ips(addresses: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """Pods' ``status.hostIP(s)`` on a cluster node: the Node's own ``InternalIP``
    addresses, else its ``ExternalIP`` ones (the kubelet takes them from its Node object)."""
    for wanted in ("InternalIP", "ExternalIP"):
        found = tuple(address for kind, address in addresses if kind == wanted)
        if found:
            return found
    return ()


async def _node_facts(
    config: ClusterConfig,
    name: str,
    server_version: str,
    docker: DockerAPI,
    resources: NodeResources,
    addresses: tuple[tuple[str, str], ...],
) -> NodeFacts:
    """What the node reports of itself: addresses, capacity and versions."""
    engine = await docker.version()
    return NodeFacts(
        name=name,
        addresses=addresses,
        capacity=resources.as_quantities(),
        allocatable=resources.as_quantities(),
        info=host.node_info(
            runtime_version=f"docker://{engine.get('Version', 'unknown')}",
            kubelet_version=config.kubelet_version
            or f"{server_version or 'v0.0.0'}+asynckubelet-{__version__}",
        ),
        kubelet_port=config.kubelet_port,
    )


async def _register(
    config: ClusterConfig,
    api: KubeClient,
    docker: DockerAPI,
    info: Mapping[str, Any],
    *,
    name: str,
    facts: NodeFacts,
    readiness: Callable[[], Awaitable[Readiness]],
    events: EventReporter,
    state: Path | None,
) -> NodeRegistrar:
    """Create or adopt the Node; a refusal of the kubeconfig's identity is a kubeconfig
    error naming the file."""
    docker_root = info.get("DockerRootDir")
    registrar = NodeRegistrar(
        api=api,
        facts=facts,
        labels=dict(config.node_labels),
        taints=config.register_with_taints,
        arch=host.go_arch(),
        readiness=readiness,
        nodefs=state or default_root(name).parent,
        imagefs=Path(docker_root) if docker_root and is_local_daemon(docker.url) else None,
        thresholds=config.thresholds,
        update_frequency=config.update_frequency,
        report_frequency=config.report_frequency,
        events=events,
    )
    try:
        await registrar.register()
    except errors.ClusterAPIError as e:
        if e.code in (401, 403):
            raise errors.KubeconfigError(
                f"kubeconfig {config.kubeconfig}: the API server refuses to let it register "
                f"node {name}: {e}",
                path=str(config.kubeconfig),
            ) from None
        raise
    return registrar


@dataclass
class _Joined:
    """What the node holds once it has joined: the parts the pod side reports through."""

    registrar: NodeRegistrar
    lease: LeaseKeeper
    events: EventReporter
    pod_cidr: str | None
    node_ip: str


@dataclass
class _PodSide:
    """The pod side of a joined node: pods from the API server, their status and mirrors."""

    reporter: PodStatusReporter
    source: ApiPodSource
    reflector: PodReflector
    mirrors: MirrorPods
    services: ServiceReflector


def _pod_side(
    config: ClusterConfig,
    kconfig: KubeletConfig,
    api: KubeClient,
    kubelet: Kubelet,
    resources: NodeResources,
    joined: _Joined,
) -> _PodSide:
    name = kconfig.node_name
    reporter = PodStatusReporter(api)
    source = ApiPodSource(
        api=api,
        kubelet=kubelet,
        objects=ObjectCache(api),
        reporter=reporter,
        node_info=_node_info(joined.registrar, resources),
        host_port_in_use=host_port_in_use,
        pod_security=config.pod_security or kconfig.pod_security,
    )
    source.objects.on_change = source.on_object_change

    def resolve(uid: str) -> Involved | None:
        state = reporter.states.get(uid)
        if state is None:
            return None
        return Involved("Pod", state.namespace, state.name, state.uid)

    joined.events.resolve = resolve
    reflector = PodReflector(api, node_name=name, on_change=source.on_change)
    mirrors = MirrorPods(
        api,
        kubelet=kubelet,
        reporter=reporter,
        cluster_pods=lambda: reflector.pods,
        is_cluster_pod=lambda uid: uid in source.tracked,
        node_uid=joined.registrar.uid,
    )

    def on_change(pods: Mapping[str, Pod], changed: set[str]) -> None:
        source.on_change(pods, changed)
        mirrors.poke()

    reflector.on_change = on_change
    services = ServiceReflector(api)
    kubelet.services = services.bodies
    return _PodSide(
        reporter=reporter, source=source, reflector=reflector, mirrors=mirrors, services=services
    )


async def _start_pod_side(pods: anyio.abc.TaskGroup, side: _PodSide) -> None:
    """Objects, Services and the status reporter first, then the pod source, which waits
    for the watch's first list; mirror pods once the source has synced. The Services'
    first list is not waited for, as the kubelet does not wait for its informer's: until
    it is in, a container about to be made waits with ``CreateContainerConfigError``."""
    await pods.start(side.source.objects.run, name="cluster objects")
    pods.start_soon(side.services.run, name="service watch")
    await pods.start(side.reporter.run, name="pod status reporter")
    first_list = anyio.Event()
    await pods.start(
        lambda task_status: side.source.run(first_list=first_list, task_status=task_status),
        name="cluster pod source",
    )
    await pods.start(side.reflector.run, name="pod watch")
    first_list.set()
    await side.source.synced.wait()
    await pods.start(side.mirrors.run, name="mirror pods")


async def _serve_pods(
    config: ClusterConfig,
    kconfig: KubeletConfig,
    api: KubeClient,
    server_version: str,
    docker: DockerAPI,
    plugin: NetworkPlugin | None,
    objects: ObjectStore | None,
    tokens: ClusterTokens,
    resources: NodeResources,
    joined: _Joined,
    task_status: anyio.abc.TaskStatus[ClusterNode],
) -> None:
    """Run the cluster's pods on a kubelet of this node until cancelled."""
    name = kconfig.node_name
    async with Kubelet(
        kconfig,
        docker=docker,
        network=plugin,
        volumes=_volumes(kconfig, tokens),
        objects=objects,
    ) as kubelet:
        # The node admits every pod again as it starts it; in a cluster, resources it
        # does not advertise are the scheduler's to count (removeMissingExtendedResources).
        kubelet.admitter.ignore_unadvertised_extended = True
        side = _pod_side(config, kconfig, api, kubelet, resources, joined)
        reporter, source, reflector, mirrors = (
            side.reporter,
            side.source,
            side.reflector,
            side.mirrors,
        )
        unsubscribe = [
            reporter.attach(kubelet.status),
            joined.events.attach(kubelet.recorder),
            mirrors.attach(),
        ]
        try:
            async with anyio.create_task_group() as pods:
                await _start_pod_side(pods, side)
                kubelet_port = None
                if config.serve_kubelet_api:
                    kubelet_port = await pods.start(
                        _kubelet_api(config, kubelet, api, name=name, node_ip=joined.node_ip),
                        name="kubelet API",
                    )
                logger.info(
                    "node {} joined {} (Kubernetes {}): {} pods bound to it",
                    name,
                    api.server,
                    server_version,
                    len(reflector.pods),
                )
                task_status.started(
                    ClusterNode(
                        api=api,
                        kubelet=kubelet,
                        registrar=joined.registrar,
                        lease=joined.lease,
                        reflector=reflector,
                        source=source,
                        reporter=reporter,
                        events=joined.events,
                        pod_cidr=joined.pod_cidr,
                        server_version=server_version,
                        kubelet_port=kubelet_port,
                    )
                )
                await anyio.sleep_forever()
        finally:
            for stop in unsubscribe:
                stop()


async def _run(
    config: ClusterConfig,
    kubelet_config: KubeletConfig,
    api: KubeClient,
    server_version: str,
    docker: DockerAPI,
    network: NetworkPlugin | NetworkFactory | None,
    objects: ObjectStore | None,
    task_status: anyio.abc.TaskStatus[ClusterNode],
) -> None:
    name = kubelet_config.node_name
    if not await docker.ping():
        raise errors.RuntimeUnavailable(f"cannot reach the Docker engine at {docker.url}")
    info = await docker.info()
    resources = config.resources or host_resources()
    addresses = host.node_addresses(node_name=name, node_ip=config.node_ip)
    facts = await _node_facts(config, name, server_version, docker, resources, addresses)
    network_problem = [NO_POD_CIDR if callable(network) else ""]

    async def readiness() -> Readiness:
        try:
            runtime = "" if await docker.ping() else "container runtime is down"
        except errors.DockerError as e:
            runtime = f"container runtime is down: {e}"
        return Readiness(runtime=runtime, network=network_problem[0])

    events = EventReporter(api, node_name=name, resolve=lambda uid: None)
    registrar = await _register(
        config, api, docker, info, name=name, facts=facts, readiness=readiness, events=events,
        state=kubelet_config.state_dir,
    )  # fmt: skip
    lease = LeaseKeeper(api, node_name=name, node_uid=registrar.uid, duration=config.lease_duration)
    async with anyio.create_task_group() as tg:
        await tg.start(events.run, name="cluster events")
        events.node_event(type="Normal", reason="Starting", message="Starting kubelet.")
        await tg.start(lease.run, name="node lease")
        await tg.start(registrar.run, name="node status")
        plugin, pod_cidr = await _pod_network(config, registrar, network, name)
        network_problem[0] = ""
        registrar.poke()

        tokens = ClusterTokens(api)
        node_ip = addresses[0][1]
        kconfig = dataclasses.replace(
            kubelet_config,
            host_ips=pod_host_ips(addresses),
            wait_for_sources=kubelet_config.wait_for_sources | {SOURCE_READY},
            node=kubelet_config.node or NodeInfo(name=name, allocatable=resources),
        )
        joined = _Joined(
            registrar=registrar,
            lease=lease,
            events=events,
            pod_cidr=pod_cidr,
            node_ip=node_ip,
        )
        await _serve_pods(
            config, kconfig, api, server_version, docker, plugin, objects, tokens, resources,
            joined, task_status,
        )  # fmt: skip
        tg.cancel_scope.cancel()


__all__ = ["ClusterConfig", "ClusterNode", "NetworkFactory", "run_cluster_node"]
