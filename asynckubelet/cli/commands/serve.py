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
import shlex
import signal
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.cli.options import (
    DEFAULT_NICE,
    AllowRemoteOpt,
    APIListenOpt,
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
    from asynckubelet.node.config import KubeletConfig
    from asynckubelet.nodeapp.config import (
        HTTPEndpoint,
        KubeAPIEndpoint,
        NetworkConfig,
        ServicesConfig,
    )


@command(log_default="INFO")
def serve(
    *,
    manifests: ManifestDirOpt = None,
    listen: ListenOpt = "127.0.0.1:10255",
    allow_remote: AllowRemoteOpt = False,
    api_listen: APIListenOpt = None,
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

    It serves the Kubernetes API on --api-listen (TLS, its own CA) and writes
    <state-dir>/kubeconfig for it: `export KUBECONFIG=$(asynckubelet kubeconfig)`, then
    kubectl get, apply, edit, delete, logs, exec, port-forward, debug and top work against
    it (docs/kubernetes-api.md).

    With --kubeconfig the node also joins that cluster: it registers its Node, runs the
    pods bound to it and serves the kubelet API (kubectl logs, exec, port-forward).
    """

    from asynckubelet.api.server import check_listen, parse_listen
    from asynckubelet.cli import instance
    from asynckubelet.cli.nodeconfig import kubelet_config, network_config
    from asynckubelet.cli.provision import ensure_engine
    from asynckubelet.cluster.host import default_node_ip
    from asynckubelet.node import daemon
    from asynckubelet.node.access import StateDir
    from asynckubelet.node.daemon import default_state_dir
    from asynckubelet.nodeapp.config import HTTPEndpoint, ServicesConfig
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
    kubelet = kubelet_config(
        node,
        state_dir=state,
        manifest_dir=manifests or StateDir(state).manifests,
        leave_running=not stop_pods,
        host_ips=(default_node_ip(),),
    )
    http = HTTPEndpoint(host=host, port=port, allow_remote=allow_remote)
    try:
        kube_api = _kube_api(api_listen, instance=node.instance)
    except ValueError as e:
        raise UsageError(str(e)) from None
    daemon.limit_malloc_arenas()
    daemon.quicken_thread_switches()
    ensure_engine(node.docker_host)
    # After the engine: an engine this process starts would inherit the priority.
    with daemon.cpu_priority(nice) as problems:
        if problems:
            logger.info("{}: running at the priority it was given", "; ".join(problems))
        if cluster.kubeconfig is not None:
            from asynckubelet.cli.cluster_mode import serve_cluster

            kubelet = dataclasses.replace(kubelet, node_name=kubelet.node_name.lower())
            serve_cluster(kubelet, node, cluster, http)
            return
        services = ServicesConfig(
            ranges=ranges,
            dns_server=dns_server,
            dns_upstreams=upstreams,
            instances_root=instance.instances_root(),
        )
        run_async(_serve, kubelet, network_config(node), services, http, kube_api)


def _kube_api(value: str | None, *, instance: str = "") -> KubeAPIEndpoint | None:
    """``--api-listen``: None for the default (6443 or the next free port; an instance's
    default is its slot's port, given as the value), ``off``; the kubeconfig's names are
    the instance's."""
    from asynckubelet.api.kube.kubeconfigs import context_name
    from asynckubelet.api.server import parse_listen
    from asynckubelet.nodeapp.config import KubeAPIEndpoint

    context = context_name(instance)
    if value is None:
        return KubeAPIEndpoint(next_free=True, context=context)
    if value.strip().lower() == "off":
        return None
    try:
        host, port = parse_listen(value)
    except ValueError:
        raise ValueError(f"--api-listen must be HOST:PORT or off, not {value!r}") from None
    return KubeAPIEndpoint(host=host, port=port, context=context)


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
    kubelet: KubeletConfig,
    network: NetworkConfig,
    services: ServicesConfig,
    http: HTTPEndpoint,
    kube_api: KubeAPIEndpoint | None = None,
) -> None:
    """The node, with Services, its local API and its TCP endpoint, until SIGINT/SIGTERM;
    signals are taken before it is announced, so one that comes right after still removes
    what was announced."""
    from asynckubelet.cli.nodeconfig import serve_until
    from asynckubelet.cli.progress import PullDisplay
    from asynckubelet.cli.provision import announce
    from asynckubelet.nodeapp import Node, NodeConfig

    config = NodeConfig(
        kubelet=kubelet,
        network=network,
        services=services,
        local_api=True,
        http=http,
        kube_api=kube_api,
    )
    pulls = PullDisplay(console=err, live=False, write=_log_pull)
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as received:
        try:
            node = Node(config, pulls=pulls, announce=announce)
            async with node:
                say(
                    f"node {config.kubelet.node_name}: manifests {config.kubelet.manifest_dir}, "
                    f"http://{http.host}:{node.http_port}, local API {node.socket}"
                )
                if node.kube_api is not None:
                    say(f"Kubernetes API {node.kube_api.url}")
                    say(f"export KUBECONFIG={shlex.quote(str(node.kube_api.kubeconfig))}")
                await serve_until(node, functools.partial(_first_signal, received))
        except (errors.DaemonError, errors.NetworkError) as e:
            raise fail(str(e)) from None


async def _first_signal(received: AsyncIterator[signal.Signals]) -> None:
    signum = await anext(aiter(received))
    err.print(f"[dim]{signal.Signals(signum).name}: stopping[/dim]")


def _log_pull(image: str, text: str) -> None:
    logger.bind(image=image).info("pull {}: {}", image, text)
