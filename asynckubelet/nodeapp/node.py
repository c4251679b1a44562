"""The one composition root: :class:`Node` assembles a running node from a
:class:`~asynckubelet.nodeapp.config.NodeConfig`.

The kubelet, the workload controllers, Services and the cluster DNS, the local API, the
read-only TCP endpoint and cluster mode are wired here and nowhere else: ``run``,
``serve``, cluster mode, the tests and embedders all enter a ``Node``. Entering starts
every part the configuration turns on, in the order a client relies on (the local API's
socket before the TCP endpoint, the node's published state last); leaving stops them in
reverse and removes what the node published. Leaving without an error is a stop: the
Services' firewall rules go with the pods unless the kubelet leaves the pods running.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import socket
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self

import anyio
import anyio.abc

from asynckubelet import errors
from asynckubelet.nodeapp.config import HTTPEndpoint, NetworkConfig, NodeConfig, ServicesConfig

if TYPE_CHECKING:
    from asynckubelet.api.kube.server import KubeAPI
    from asynckubelet.cluster.agent import ClusterNode
    from asynckubelet.docker import DockerAPI
    from asynckubelet.network import NetworkPlugin
    from asynckubelet.node.config import KubeletConfig
    from asynckubelet.node.daemon import DaemonInfo
    from asynckubelet.node.foreground import PodOutput
    from asynckubelet.node.kubelet import Kubelet
    from asynckubelet.node.neighbours import Neighbours
    from asynckubelet.node.objects import ObjectStore
    from asynckubelet.runtime.images import Announce, PullListener
    from asynckubelet.workloads.allocation import ReservedPort
    from asynckubelet.workloads.services import ServiceController

LISTEN_LABEL = "serve --listen"
"""How a Service refused the TCP endpoint's port names its holder."""


class Node:
    """A running node, as an async context manager::

        async with Node(NodeConfig()) as node:
            await node.kubelet.apply(manifests)
            await node.kubelet.wait("default", "web", "Succeeded")

    ``docker`` is the engine's client (None: one for ``kubelet.docker_url``, closed on
    exit); ``pulls`` is told of image pulls and ``announce`` of the project's own images
    being made (None: both logged); ``output`` is where the pods' output and statuses are
    shown (a foreground run's terminal; None: nowhere).
    """

    def __init__(
        self,
        config: NodeConfig | None = None,
        *,
        docker: DockerAPI | None = None,
        pulls: PullListener | None = None,
        announce: Announce | None = None,
        output: PodOutput | None = None,
    ) -> None:
        self.config = config or NodeConfig()
        self._output = output
        self._docker = docker
        self._pulls = pulls
        self._announce = announce
        self._stack: contextlib.AsyncExitStack | None = None
        self._kubelet: Kubelet | None = None
        self.services: ServiceController | None = None
        """The Service controller (None: :attr:`NodeConfig.services` is off)."""
        self.cluster: ClusterNode | None = None
        """The cluster agent (None: not in cluster mode)."""
        self.http_port: int | None = None
        """The TCP endpoint's bound port (None: no endpoint)."""
        self.socket: Path | None = None
        """The local API's socket (None: no local API)."""
        self.kube_api: KubeAPI | None = None
        """The Kubernetes API's URL, port and kubeconfig (None: not served)."""
        self.info: DaemonInfo | None = None
        """What the node published in its state directory (None: nothing)."""
        self._plugin: NetworkPlugin | None = None
        self._dns_address: str | None = None
        self._inode: int | None = None

    @property
    def kubelet(self) -> Kubelet:
        """The node's kubelet (entered nodes only)."""
        if self._kubelet is None:
            raise RuntimeError("the node is not running: enter it first (async with)")
        return self._kubelet

    @property
    def state_dir(self) -> Path | None:
        return self.config.kubelet.state_dir

    async def __aenter__(self) -> Self:
        stack = contextlib.AsyncExitStack()
        try:
            await self._start(stack)
        except BaseException as error:
            # Not in a shielded scope of its own: the stack holds task groups, whose cancel
            # scopes are exited here, and the kubelet shields its own cleanup. A task group
            # hands the error back in a group: the caller gets the error itself.
            try:
                await stack.__aexit__(type(error), error, error.__traceback__)
            except BaseExceptionGroup as group:
                if not all(leaf is error for leaf in _leaves(group)):
                    raise
            raise error from error.__cause__
        self._stack = stack
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        stack, self._stack = self._stack, None
        assert stack is not None  # noqa: S101  (type narrowing: set by __aenter__)
        services = self.services
        if exc_type is None and services is not None and not self.config.kubelet.leave_running:
            with anyio.CancelScope(shield=True):
                await services.remove_rules()
        try:
            return await stack.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            if exc is None or not all(leaf is exc for leaf in _leaves(group)):
                raise
        return False

    async def _start(self, stack: contextlib.AsyncExitStack) -> None:
        from asynckubelet.docker import DockerClient

        config = self.config
        state = self.state_dir
        _check_ports(config)
        if config.local_api:
            from asynckubelet.node import daemon
            from asynckubelet.node.access import write_pid_file

            assert state is not None  # noqa: S101  (type narrowing: NodeConfig checks it)
            socket_file = daemon.claim_socket(state)
            stack.callback(self._unpublish, state)
            write_pid_file(state)
        docker = self._docker
        if docker is None:
            docker = await stack.enter_async_context(DockerClient(url=config.kubelet.docker_url))
        if config.cluster is not None:
            agent = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(agent.cancel_scope.cancel)
            kubelet = await self._join(agent, docker)
        else:
            kubelet = await self._kubelet_with_parts(stack, docker)
        # The parts around the kubelet stop before it: they read its pods to the end.
        parts = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(parts.cancel_scope.cancel)
        if config.cluster is None:
            await self._start_workloads(parts, kubelet)
        if config.local_api:
            self.socket = socket_file
            await self._listen_locally(parts, kubelet, socket_file)
        if config.http is not None:
            self.http_port = await self._listen(parts, kubelet, config.http)
        if config.kube_api is not None:
            self.kube_api = await self._serve_kube_api(parts, kubelet)
        if config.local_api:
            await self._publish(kubelet, docker)

    async def _kubelet_with_parts(
        self, stack: contextlib.AsyncExitStack, docker: DockerAPI
    ) -> Kubelet:
        """The standalone kubelet, entered, with its network and the cluster DNS's address."""
        from asynckubelet.node.kubelet import Kubelet

        config = self.config
        kubelet_config = config.kubelet
        plugin = (
            config.network.plugin(docker, node_name=kubelet_config.node_name)
            if config.network is not None
            else None
        )
        if config.services is not None and config.services.dns_server and plugin is not None:
            self._dns_address = _dns_address(plugin)
        self._plugin = plugin
        if self._dns_address is not None and not kubelet_config.dns.cluster_dns:
            dns = dataclasses.replace(kubelet_config.dns, cluster_dns=(self._dns_address,))
            kubelet_config = dataclasses.replace(kubelet_config, dns=dns)
        kubelet = Kubelet(
            kubelet_config,
            docker=docker,
            network=plugin,
            objects=self._objects(),
            output=self._output,
        )
        await stack.enter_async_context(kubelet)
        self._kubelet = kubelet
        self._hook_images(kubelet)
        await kubelet.runtime.pause_image()
        return kubelet

    async def _join(self, tg: anyio.abc.TaskGroup, docker: DockerAPI) -> Kubelet:
        """Cluster mode: the node joined, its kubelet running the cluster's pods."""
        from asynckubelet.cluster.agent import run_cluster_node

        config = self.config
        assert config.cluster is not None  # noqa: S101  (type narrowing: cluster mode only)
        network = config.network
        node_name = config.kubelet.node_name
        factory = (
            functools.partial(_cluster_network, network, docker, node_name)
            if network is not None
            else None
        )
        joined: ClusterNode = await tg.start(
            functools.partial(
                run_cluster_node,
                config.cluster,
                config.kubelet,
                docker=docker,
                network=factory,
                objects=self._objects(),
            ),
            name="cluster node",
        )
        self.cluster = joined
        self._kubelet = joined.kubelet
        self._hook_images(joined.kubelet)
        return joined.kubelet

    def _objects(self) -> ObjectStore:
        """The node's store of applied objects: kept in the state directory of a node with
        a local API (the controllers' objects too, when they run), else in memory."""
        from asynckubelet.node.kubelet import API_SOURCE
        from asynckubelet.node.objects import OBJECTS_DIR, ObjectStore
        from asynckubelet.workloads import WORKLOADS_SOURCE

        state = self.state_dir
        if not self.config.local_api or state is None:
            return ObjectStore(persistent_source=API_SOURCE)
        also = (WORKLOADS_SOURCE,) if self.config.controllers else ()
        return ObjectStore(
            directory=state / OBJECTS_DIR, persistent_source=API_SOURCE, also_persistent=also
        )

    def _hook_images(self, kubelet: Kubelet) -> None:
        images = kubelet.runtime.images
        if self._pulls is not None:
            images.listener = self._pulls
        if self._announce is not None:
            images.announce = self._announce

    async def _start_workloads(self, tg: anyio.abc.TaskGroup, kubelet: Kubelet) -> None:
        """The workload controllers, then Services and the cluster DNS, started."""
        from asynckubelet.workloads import Controllers

        if self.config.controllers:
            await tg.start(Controllers(kubelet).run, name="workload controllers")
        if self.config.services is not None:
            self.services = await self._start_services(tg, kubelet)

    async def _start_services(self, tg: anyio.abc.TaskGroup, kubelet: Kubelet) -> ServiceController:
        """The Service controller and, with an address for it, the cluster DNS, started."""
        from asynckubelet.network.bridge import BridgePlugin
        from asynckubelet.network.cni import CNIPlugin
        from asynckubelet.node.listeners import read_listeners
        from asynckubelet.workloads.dns import ClusterDNS, DNSConfig, zone_source
        from asynckubelet.workloads.services import ProxyTarget, ServiceController

        setup = self.config.services
        assert setup is not None  # noqa: S101  (type narrowing: called with Services on)
        plugin, dns_address = self._plugin, self._dns_address
        targets: list[ProxyTarget] = []
        if isinstance(plugin, BridgePlugin):
            await plugin.ensure_node_network()
            targets.append(ProxyTarget(plugin.firewall, plugin.config.bridge))
        elif isinstance(plugin, CNIPlugin):
            target = plugin.service_target()
            if target is not None:
                targets.append(ProxyTarget(*target))
        controller = ServiceController(
            kubelet,
            ranges=setup.ranges,
            targets=targets,
            reserved=_reserved_ports(self.config.http, dns_address),
            host_listeners=read_listeners,
            neighbours=_neighbours(setup, self.state_dir, kubelet.node_name),
        )
        await tg.start(controller.run, name="services")
        if dns_address is None:
            return controller
        domain = kubelet.config.dns.cluster_domain
        dns = DNSConfig(
            cluster_domain=domain,
            upstreams=setup.dns_upstreams,
            pod_networks=_pod_networks(plugin) if plugin is not None else (),
        )
        zone = zone_source(
            domain=domain,
            ttl=dns.ttl,
            version=lambda: controller.version,
            services=controller.services,
            endpoints=controller.all_endpoints,
        )
        server = ClusterDNS(config=dns, zone=zone)
        await tg.start(functools.partial(server.serve, host=dns_address, port=53), name="dns")
        return controller

    async def _listen_locally(
        self, tg: anyio.abc.TaskGroup, kubelet: Kubelet, socket_file: Path
    ) -> None:
        """The local API on the state directory's socket, started (before the TCP endpoint:
        a client that sees HTTP answer finds the socket)."""
        from asynckubelet.api.localapi import serve_local

        local = functools.partial(
            serve_local, kubelet, path=str(socket_file), services=self.services
        )
        try:
            self._inode = int(await tg.start(local, name="local API"))
        except OSError as e:
            raise errors.DaemonError(f"cannot listen on {socket_file}: {e}") from None

    async def _listen(self, tg: anyio.abc.TaskGroup, kubelet: Kubelet, at: HTTPEndpoint) -> int:
        """The read-only TCP endpoint, started; its bound port."""
        from asynckubelet.api.server import serve_http

        http = functools.partial(
            serve_http, kubelet, host=at.host, port=at.port, allow_remote=at.allow_remote
        )
        try:
            return int(await tg.start(http, name="http endpoint"))
        except OSError as e:
            host = f"[{at.host}]" if ":" in at.host else at.host
            raise errors.DaemonError(f"cannot listen on {host}:{at.port}: {e}") from None

    async def _serve_kube_api(self, tg: anyio.abc.TaskGroup, kubelet: Kubelet) -> KubeAPI:
        """The Kubernetes API, started, its kubeconfig written."""
        from asynckubelet.api.kube.server import serve_kube_api

        at, state = self.config.kube_api, self.state_dir
        assert at is not None and state is not None  # noqa: S101  (type narrowing: NodeConfig checks it)
        api = functools.partial(
            serve_kube_api,
            kubelet,
            state_dir=state,
            host=at.host,
            port=at.port,
            next_free=at.next_free,
            context_name=at.context,
            services=self.services,
        )
        try:
            found: KubeAPI = await tg.start(api, name="Kubernetes API")
        except OSError as e:
            host = f"[{at.host}]" if ":" in at.host else at.host
            raise errors.DaemonError(f"cannot listen on {host}:{at.port}: {e}") from None
        return found

    async def _publish(self, kubelet: Kubelet, docker: DockerAPI) -> None:
        """The node's effective configuration, written to ``node.json`` for its clients."""
        from asynckubelet.node import daemon

        state, network = self.state_dir, self.config.network
        assert state is not None and self.socket is not None  # noqa: S101  (type narrowing: local API on)
        at = self.config.http
        self.info = published_info(
            kubelet.config,
            network,
            network_name=kubelet.runtime.network.name,
            listen=f"http://{at.host}:{self.http_port}" if at is not None else "",
            docker_url=docker.url,
            socket=self.socket,
            pod_cidr=self.cluster.pod_cidr or "" if self.cluster is not None else None,
        )
        daemon.write_node_info(state, self.info)

    def _unpublish(self, state: Path) -> None:
        """Remove the node's socket (only the one it made), ``node.json`` and pid file."""
        from asynckubelet.node import daemon
        from asynckubelet.node.access import remove_pid_file

        inode = self._inode
        daemon.release_socket(state, inode=inode)
        if inode is not None:
            daemon.remove_node_info(state)
        remove_pid_file(state)


def _check_ports(config: NodeConfig) -> None:
    """Refuse at once, before a network or a pod is made, a TCP port the node is to listen
    on that another socket holds: a first start that fails there leaves nothing behind.
    (The listeners bind later, when the kubelet can answer; a port taken in between
    fails there, as before.)"""
    wanted = []
    if config.http is not None and config.http.port:
        wanted.append((config.http.host, config.http.port))
    api = config.kube_api
    if api is not None and api.port and not api.next_free:
        wanted.append((api.host, api.port))
    for host, port in wanted:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as e:
                shown = f"[{host}]" if ":" in host else host
                raise errors.DaemonError(f"cannot listen on {shown}:{port}: {e}") from None


def published_info(
    kubelet: KubeletConfig,
    network: NetworkConfig | None,
    *,
    network_name: str,
    listen: str,
    docker_url: str,
    socket: Path,
    pod_cidr: str | None = None,
) -> DaemonInfo:
    """What a node publishes in ``node.json``: its effective configuration (``pod_cidr``:
    the one the cluster assigned, else the network's)."""
    from asynckubelet._version import __version__
    from asynckubelet.node.daemon import DaemonInfo

    if pod_cidr is None:
        pod_cidr = network.pod_cidr if network is not None else ""
    return DaemonInfo(
        node_name=kubelet.node_name,
        pod_security=kubelet.pod_security,
        allow_namespace_policy=kubelet.allow_namespace_policy,
        seccomp_default=kubelet.seccomp_default,
        network=network_name,
        network_state_dir=str(network.state_dir) if network is not None else "",
        pod_cidr=pod_cidr,
        pod_cidr_v6=(network.pod_cidr_v6 or "") if network is not None else "",
        bridge=network.bridge if network is not None else "",
        cluster_dns=kubelet.dns.cluster_dns,
        cluster_domain=kubelet.dns.cluster_domain,
        listen=listen,
        docker_host=docker_url,
        socket=str(socket),
        version=__version__,
    )


def _leaves(error: BaseException) -> list[BaseException]:
    if not isinstance(error, BaseExceptionGroup):
        return [error]
    return [leaf for inner in error.exceptions for leaf in _leaves(inner)]


def _neighbours(setup: ServicesConfig, state: Path | None, node_name: str) -> Neighbours | None:
    """The record of the ports the node publishes, and its neighbours' (none without a
    state dir or an instances root)."""
    from asynckubelet.node.neighbours import Neighbours as Record

    if state is None or setup.instances_root is None:
        return None
    return Record(state_dir=state, node_name=node_name, root=setup.instances_root)


def _cluster_network(
    network: NetworkConfig, docker: DockerAPI, node_name: str, pod_cidr: str
) -> NetworkPlugin:
    """The pod network for the pod CIDR the cluster assigns (else the configured one)."""
    return network.plugin(docker, node_name=node_name, pod_cidr=pod_cidr or None)


def _dns_address(plugin: NetworkPlugin) -> str | None:
    """Where the cluster DNS listens: the pod network's gateway (None: a network whose
    pods this node cannot serve from its own address)."""
    from asynckubelet.network.bridge import BridgePlugin
    from asynckubelet.network.cni import CNIPlugin

    if isinstance(plugin, BridgePlugin):
        return plugin.ipam.gateway
    if isinstance(plugin, CNIPlugin):
        return plugin.gateway()
    return None


def _pod_networks(plugin: NetworkPlugin) -> tuple[str, ...]:
    """The pod CIDRs of the network (both families), as far as this node knows them: the
    cluster DNS recurses for their clients."""
    from asynckubelet.network.bridge import BridgePlugin
    from asynckubelet.network.cni import CNIPlugin

    if isinstance(plugin, BridgePlugin):
        return tuple(str(n) for n in (plugin.subnet, plugin.subnet6) if n is not None)
    if isinstance(plugin, CNIPlugin):
        return plugin.pod_subnets()
    return ()


def _reserved_ports(at: HTTPEndpoint | None, dns_address: str | None) -> Sequence[ReservedPort]:
    """The node's own ports, which no Service may publish: the TCP endpoint's and the
    cluster DNS's."""
    from asynckubelet.workloads.allocation import ReservedPort

    reserved = [ReservedPort("TCP", at.port, LISTEN_LABEL)] if at is not None and at.port else []
    if dns_address is not None:
        server = f"the cluster DNS on {dns_address}"
        reserved += [ReservedPort("UDP", 53, server), ReservedPort("TCP", 53, server)]
    return reserved


__all__ = ["Node", "published_info"]
