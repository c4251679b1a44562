"""``asynckubelet serve``: the long-running node, until SIGINT/SIGTERM.

It runs the pods applied to it and the static pods of its manifest directory, serves the
kubelet's read-only HTTP endpoints, and publishes itself in its state dir: the local API
on ``api.sock`` (0600) and its effective configuration in ``node.json``
(:mod:`asynckubelet.node.daemon`), where every client command finds it. The objects
applied to it are kept in ``objects/`` and taken back at the next start.
"""

from __future__ import annotations

import dataclasses
import functools
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.cli.options import (
    DEFAULT_NICE,
    AllowRemoteOpt,
    ClusterOptions,
    DNSServerOpt,
    DNSUpstreamOpt,
    ListenOpt,
    LogOptions,
    ManifestDirOpt,
    NiceOpt,
    NodeOptions,
    ServiceClusterIPRangeOpt,
    ServiceNodePortRangeOpt,
    StateDirOpt,
    StopPodsOpt,
    UsageError,
)
from asynckubelet.cli.output import command, err, fail, run_async, say

if TYPE_CHECKING:
    from asynckubelet.network import NetworkPlugin
    from asynckubelet.node.daemon import DaemonInfo
    from asynckubelet.node.kubelet import Kubelet, KubeletConfig
    from asynckubelet.workloads.allocation import ReservedPort
    from asynckubelet.workloads.services import ServiceController, ServiceRanges


@command(log_default="INFO")
def serve(
    *,
    manifests: ManifestDirOpt = None,
    listen: ListenOpt = "127.0.0.1:10255",
    allow_remote: AllowRemoteOpt = False,
    state_dir: StateDirOpt = None,
    stop_pods: StopPodsOpt = False,
    service_cluster_ip_range: ServiceClusterIPRangeOpt = "10.96.0.0/16",
    service_node_port_range: ServiceNodePortRangeOpt = "30000-32767",
    dns_server: DNSServerOpt = True,
    dns_upstream: DNSUpstreamOpt = None,
    nice: NiceOpt = DEFAULT_NICE,
    node: NodeOptions,
    cluster: ClusterOptions,
    log: LogOptions,
) -> None:
    """Run the node until a signal: the objects applied to it and the static pods of its
    manifest directory, its local API on <state-dir>/api.sock, the HTTP endpoints.

    Pods are admitted as a kubelet admits them (--capacity, --max-pods, --node-labels,
    host ports): one the node cannot take is listed Failed with the kubelet's reason.
    Image pulls are logged, one line per change of a layer's state. A Docker engine and
    the sandbox image are set up when missing, each announced in one line. The daemon
    runs at a CPU priority above the containers' (--nice).

    Services get a ClusterIP from --service-cluster-ip-range and their endpoints from the
    ready pods they select; on the bridge and cni networks the firewall sends ClusterIP,
    nodePort and LoadBalancer traffic to them (curl localhost:<nodePort> reaches the app),
    and the node answers the cluster's DNS names on the pod network's gateway.

    With --kubeconfig the node also joins that cluster: it registers its Node, runs the
    pods bound to it and serves the kubelet API (kubectl logs, exec, port-forward).
    """
    import socket

    from asynckubelet.api.server import check_listen, parse_listen
    from asynckubelet.cli.provision import ensure_engine
    from asynckubelet.cluster.host import default_node_ip
    from asynckubelet.node import daemon
    from asynckubelet.node.access import StateDir
    from asynckubelet.node.daemon import default_state_dir
    from asynckubelet.node.kubelet import KubeletConfig
    from asynckubelet.workloads.services import ServiceRanges

    node.check()
    cluster.check()
    if not -20 <= nice <= 19:
        raise UsageError(f"--nice {nice}: must be -20 to 19, as nice(1) counts")
    try:
        ranges = ServiceRanges.parse(
            cluster_ip_range=service_cluster_ip_range, node_port_range=service_node_port_range
        )
        upstreams = _upstreams(dns_upstream)
    except ValueError as e:
        raise UsageError(str(e)) from None
    state = state_dir if state_dir is not None else default_state_dir()
    try:
        host, port = parse_listen(listen)
        check_listen(host, allow_remote=allow_remote)
    except ValueError as e:
        raise UsageError(str(e)) from None
    config = KubeletConfig(
        node_name=node.node_name or socket.gethostname(),
        state_dir=state,
        manifest_dir=manifests or StateDir(state).manifests,
        pause_image=node.pause_image,
        docker_url=node.docker_host,
        pod_security=node.level,
        allow_namespace_policy=node.allow_namespace_policy,
        seccomp_default=node.seccomp_default,
        leave_running=not stop_pods,
        dns=node.dns(),
        service_account_issuer=node.service_account_issuer,
        node=node.node_info(),
        host_ips=(default_node_ip(),),
        max_parallel_starts=node.runtime_config().max_parallel_starts,
        container_log_max_size=node.container_log_max_size,
        container_log_max_files=node.container_log_max_files,
    )
    daemon.limit_malloc_arenas()
    daemon.quicken_thread_switches()
    ensure_engine(node.docker_host)
    # After the engine: an engine this process starts would inherit the priority.
    with daemon.cpu_priority(nice) as problems:
        if problems:
            logger.info("{}: running at the priority it was given", "; ".join(problems))
        if cluster.kubeconfig is not None:
            from asynckubelet.cli.cluster_mode import serve_cluster

            config = dataclasses.replace(config, node_name=config.node_name.lower())
            serve_cluster(
                config, node, cluster, state, host=host, port=port, allow_remote=allow_remote
            )
            return
        setup = _ServiceSetup(ranges=ranges, dns_server=dns_server, upstreams=upstreams)
        run_async(_serve, config, node, state, _Address(listen, host, port, allow_remote), setup)


@dataclasses.dataclass(frozen=True)
class _Address:
    listen: str
    host: str
    port: int
    allow_remote: bool


@dataclasses.dataclass(frozen=True)
class _ServiceSetup:
    """What the node does for Services and cluster DNS."""

    ranges: ServiceRanges
    dns_server: bool
    upstreams: tuple[tuple[str, int], ...]
    pod_networks: tuple[str, ...] = ()
    """The pod CIDRs, whose clients the cluster DNS recurses for."""


def _upstreams(given: list[str] | None) -> tuple[tuple[str, int], ...]:
    """``--dns-upstream`` values as ``(address, port)``, else the node's resolvers."""
    import ipaddress

    from asynckubelet.workloads.dns import upstreams_from_resolv_conf

    if not given:
        try:
            with open("/etc/resolv.conf") as f:
                return upstreams_from_resolv_conf(f.read())
        except OSError:
            return ()
    found = []
    for value in given:
        address, port = value, 53
        if value.count(":") == 1:
            address, _, text = value.partition(":")
            if not text.isdigit() or not 1 <= int(text) <= 65535:
                raise ValueError(f"--dns-upstream {value!r}: the port must be 1-65535")
            port = int(text)
        try:
            ipaddress.ip_address(address.strip("[]"))
        except ValueError:
            raise ValueError(f"--dns-upstream {value!r}: must be IP or IP:PORT") from None
        found.append((address.strip("[]"), port))
    return tuple(found)


async def _serve(
    config: KubeletConfig, node: NodeOptions, state: Path, at: _Address, setup: _ServiceSetup
) -> None:
    from asynckubelet.cli.progress import PullDisplay
    from asynckubelet.cli.provision import announce
    from asynckubelet.docker import DockerClient
    from asynckubelet.node import daemon
    from asynckubelet.node.access import remove_pid_file, write_pid_file
    from asynckubelet.node.kubelet import API_SOURCE, Kubelet
    from asynckubelet.node.objects import OBJECTS_DIR, ObjectStore
    from asynckubelet.workloads import WORKLOADS_SOURCE, Controllers

    try:
        socket_file = daemon.claim_socket(state)
    except errors.DaemonError as e:
        raise fail(str(e)) from None
    objects = ObjectStore(
        directory=state / OBJECTS_DIR,
        persistent_source=API_SOURCE,
        also_persistent=(WORKLOADS_SOURCE,),
    )
    async with DockerClient(url=node.docker_host) as docker:
        plugin = node.network_plugin(docker, node_name=config.node_name)
        dns_address = _dns_address(plugin) if setup.dns_server else None
        setup = dataclasses.replace(setup, pod_networks=_pod_networks(plugin))
        if dns_address is not None and not config.dns.cluster_dns:
            config = dataclasses.replace(
                config, dns=dataclasses.replace(config.dns, cluster_dns=(dns_address,))
            )
        async with Kubelet(config, docker=docker, network=plugin, objects=objects) as kubelet:
            kubelet.runtime.images.listener = PullDisplay(console=err, live=False, write=_log_pull)
            kubelet.runtime.images.announce = announce
            await kubelet.runtime.pause_image()
            write_pid_file(state)
            inode: int | None = None
            published: list[DaemonInfo] = []
            signals = anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM)
            try:
                # Signals are taken before the node is announced: one that comes right after
                # still removes what was announced.
                with signals as received:
                    async with anyio.create_task_group() as tg:
                        await tg.start(Controllers(kubelet).run, name="workload controllers")
                        reserved = _reserved_ports(at, dns_address)
                        services = await _start_services(
                            tg, kubelet, plugin, setup, dns_address, reserved
                        )
                        # The socket first: a client that sees HTTP answer finds it.
                        inode = await _listen_locally(
                            tg, kubelet, lambda: published[0], socket_file, services
                        )
                        bound = await _listen(tg, kubelet, at)
                        info = _node_info(
                            config, node, at, bound, socket_file, docker.url, network=plugin.name
                        )
                        published.append(info)
                        daemon.write_node_info(state, info)
                        say(
                            f"node {config.node_name}: manifests {config.manifest_dir}, "
                            f"http://{at.host}:{bound}, local API {socket_file}"
                        )
                        daemon.settle_heap()
                        tg.start_soon(
                            daemon.give_back_memory_when_quiet,
                            kubelet.status,
                            name="memory given back after each busy spell",
                        )
                        signum = await anext(aiter(received))
                        err.print(f"[dim]{signal.Signals(signum).name}: stopping[/dim]")
                        if not config.leave_running:
                            await services.remove_rules()
                        tg.cancel_scope.cancel()
            finally:
                daemon.release_socket(state, inode=inode)
                if inode is not None:
                    daemon.remove_node_info(state)
                remove_pid_file(state)


async def _listen(tg: anyio.abc.TaskGroup, kubelet: Kubelet, at: _Address) -> int:
    """The read-only HTTP endpoints, started; their bound port."""
    from asynckubelet.api.server import serve_http

    http = functools.partial(
        serve_http, kubelet, host=at.host, port=at.port, allow_remote=at.allow_remote
    )
    try:
        return int(await tg.start(http))
    except OSError as e:
        raise fail(f"cannot listen on {at.listen}: {e}") from None


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


def _reserved_ports(at: _Address, dns_address: str | None) -> list[ReservedPort]:
    """The node's own ports, which no Service may publish: the TCP endpoint's and the
    cluster DNS's."""
    from asynckubelet.workloads.allocation import ReservedPort

    reserved = [ReservedPort("TCP", at.port, "serve --listen")] if at.port else []
    if dns_address is not None:
        server = f"the cluster DNS on {dns_address}"
        reserved += [ReservedPort("UDP", 53, server), ReservedPort("TCP", 53, server)]
    return reserved


def _pod_networks(plugin: NetworkPlugin) -> tuple[str, ...]:
    """The pod CIDRs of the network (both families), as far as this node knows them."""
    from asynckubelet.network.bridge import BridgePlugin
    from asynckubelet.network.cni import CNIPlugin

    if isinstance(plugin, BridgePlugin):
        return tuple(str(n) for n in (plugin.subnet, plugin.subnet6) if n is not None)
    if isinstance(plugin, CNIPlugin):
        return plugin.pod_subnets()
    return ()


async def _start_services(
    tg: anyio.abc.TaskGroup,
    kubelet: Kubelet,
    plugin: NetworkPlugin,
    setup: _ServiceSetup,
    dns_address: str | None,
    reserved: Sequence[ReservedPort],
) -> ServiceController:
    """The Service controller and, with an address for it, the cluster DNS, started."""
    from asynckubelet.network.bridge import BridgePlugin
    from asynckubelet.network.cni import CNIPlugin
    from asynckubelet.node.listeners import read_listeners
    from asynckubelet.workloads.dns import ClusterDNS, DNSConfig, zone_source
    from asynckubelet.workloads.services import ProxyTarget, ServiceController

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
        reserved=reserved,
        host_listeners=read_listeners,
    )
    await tg.start(controller.run, name="services")
    if dns_address is None:
        return controller
    domain = kubelet.config.dns.cluster_domain
    config = DNSConfig(
        cluster_domain=domain, upstreams=setup.upstreams, pod_networks=setup.pod_networks
    )
    zone = zone_source(
        domain=domain,
        ttl=config.ttl,
        version=lambda: controller.version,
        services=controller.services,
        endpoints=controller.all_endpoints,
    )
    server = ClusterDNS(config=config, zone=zone)
    try:
        await tg.start(functools.partial(server.serve, host=dns_address, port=53), name="dns")
    except errors.NetworkError as e:
        raise fail(str(e)) from None
    return controller


async def _listen_locally(
    tg: anyio.abc.TaskGroup,
    kubelet: Kubelet,
    info: Callable[[], DaemonInfo],
    socket_file: Path,
    services: ServiceController,
) -> int:
    """The local API on the state dir's socket, started; the socket's inode."""
    from asynckubelet.api.localapi import serve_local

    local = functools.partial(serve_local, kubelet, info, path=str(socket_file), services=services)
    try:
        return int(await tg.start(local))
    except OSError as e:
        raise fail(f"cannot listen on {socket_file}: {e}") from None


def _node_info(
    config: KubeletConfig,
    node: NodeOptions,
    at: _Address,
    port: int,
    socket_file: Path,
    docker_url: str,
    *,
    network: str,
) -> DaemonInfo:
    """What the daemon publishes: its effective configuration."""
    from asynckubelet import __version__
    from asynckubelet.cli.options import ipv6_pod_cidr
    from asynckubelet.node.daemon import DaemonInfo

    return DaemonInfo(
        node_name=config.node_name,
        pod_security=config.pod_security,
        allow_namespace_policy=config.allow_namespace_policy,
        seccomp_default=config.seccomp_default,
        network=network,
        network_state_dir=str(node.network_state_dir),
        pod_cidr=node.pod_cidr,
        pod_cidr_v6=ipv6_pod_cidr(dual_stack=node.dual_stack, pod_cidr_v6=node.pod_cidr_v6) or "",
        bridge=node.bridge,
        cluster_dns=config.dns.cluster_dns,
        cluster_domain=config.dns.cluster_domain,
        listen=f"http://{at.host}:{port}",
        docker_host=docker_url,
        socket=str(socket_file),
        version=__version__,
    )


def _log_pull(image: str, text: str) -> None:
    logger.bind(image=image).info("pull {}: {}", image, text)
