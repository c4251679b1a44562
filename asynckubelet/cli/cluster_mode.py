"""``asynckubelet serve --kubeconfig FILE``: the node joins a cluster.

The same node as a standalone ``serve`` (its static pods, with mirror pods in the API; its
read-only HTTP endpoints; its pid file), plus the pods the cluster binds to it and the
kubelet API on ``--kubelet-port`` (:func:`~asynckubelet.cluster.run_cluster_node`). A
kubeconfig that cannot be used, or a serving certificate or client CA that cannot be
loaded, is one ``error:`` line and exit status 2.
"""

from __future__ import annotations

import functools
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from asynckubelet import errors
from asynckubelet.cli.options import ClusterOptions, NodeOptions, UsageError
from asynckubelet.cli.output import err, fail, first_signal, run_async

if TYPE_CHECKING:
    from asynckubelet.cluster.agent import ClusterConfig
    from asynckubelet.docker import DockerAPI
    from asynckubelet.network import NetworkPlugin
    from asynckubelet.node.kubelet import KubeletConfig


def cluster_config(node: NodeOptions, cluster: ClusterOptions) -> ClusterConfig:
    """The cluster side of the options, checked (a bad value is a usage error)."""
    from asynckubelet.cluster.agent import ClusterConfig
    from asynckubelet.node.admission import parse_taints

    assert cluster.kubeconfig is not None
    info = node.node_info()
    try:
        return ClusterConfig(
            kubeconfig=cluster.kubeconfig,
            context=cluster.context,
            node_labels=dict(info.labels or {}),
            register_with_taints=parse_taints(cluster.register_with_taints or ""),
            node_ip=cluster.node_ip,
            kubelet_port=cluster.kubelet_port,
            resources=info.allocatable,
            pod_cidr=node.pod_cidr,
            pod_cidr_wait=cluster.pod_cidr_wait,
            tls_cert_file=cluster.tls_cert_file,
            tls_private_key_file=cluster.tls_private_key_file,
            client_ca_file=cluster.client_ca_file,
            authorization_mode=cluster.authorization_mode,  # type: ignore[arg-type]
        )
    except ValueError as e:
        raise UsageError(str(e)) from None


def network_factory(
    node: NodeOptions, cluster: ClusterOptions, docker: DockerAPI, *, node_name: str
) -> Callable[[str], NetworkPlugin]:
    """The pod network for the pod CIDR the cluster assigns (else ``--pod-cidr``)."""
    from asynckubelet.cli.options import ipv6_pod_cidr
    from asynckubelet.network.factory import make_network_plugin

    def make(pod_cidr: str) -> NetworkPlugin:
        return make_network_plugin(
            node.network,
            docker=docker,
            state_dir=cluster.network_state_dir,
            bridge=node.bridge,
            pod_cidr=pod_cidr or node.pod_cidr,
            pod_cidr_v6=ipv6_pod_cidr(dual_stack=node.dual_stack, pod_cidr_v6=node.pod_cidr_v6),
            firewall=node.firewall,
            masquerade=node.masquerade,
            node_name=node_name,
        )

    return make


def serve_cluster(
    config: KubeletConfig,
    node: NodeOptions,
    cluster: ClusterOptions,
    state: Path,
    *,
    host: str,
    port: int,
    allow_remote: bool,
) -> None:
    """Run the node in the cluster until SIGINT/SIGTERM."""
    joining = cluster_config(node, cluster)
    try:
        run_async(_serve, config, node, cluster, joining, state, (host, port, allow_remote))
    except BaseException as group:
        error = group
        while isinstance(error, BaseExceptionGroup) and error.exceptions:
            error = error.exceptions[0]
        if isinstance(error, (errors.KubeconfigError, errors.KubeletServingError)):
            raise UsageError(str(error)) from None
        if error is not group:
            raise error from None
        raise


async def _serve(
    config: KubeletConfig,
    node: NodeOptions,
    cluster: ClusterOptions,
    joining: ClusterConfig,
    state: Path,
    listen: tuple[str, int, bool],
) -> None:
    from asynckubelet.cli.provision import announce
    from asynckubelet.cluster.agent import ClusterNode, run_cluster_node
    from asynckubelet.docker import DockerClient
    from asynckubelet.node.access import remove_pid_file, write_pid_file
    from asynckubelet.server import serve_http

    host, port, allow_remote = listen
    async with DockerClient(url=node.docker_host) as docker:
        network = network_factory(node, cluster, docker, node_name=config.node_name)
        write_pid_file(state)
        try:
            async with anyio.create_task_group() as tg:
                joined: ClusterNode = await tg.start(
                    functools.partial(
                        run_cluster_node, joining, config, docker=docker, network=network
                    )
                )
                joined.kubelet.runtime.images.announce = announce
                http = functools.partial(
                    serve_http, joined.kubelet, host=host, port=port, allow_remote=allow_remote
                )
                try:
                    bound = await tg.start(http)
                except OSError as e:
                    raise fail(f"cannot listen on {host}:{port}: {e}") from None
                kubelet_api = (
                    f", kubelet API port {joined.kubelet_port}" if joined.kubelet_port else ""
                )
                err.print(
                    f"node {joined.node_name} joined {joined.api.server} "
                    f"(pod CIDR {joined.pod_cidr}{kubelet_api}), manifests "
                    f"{config.manifest_dir}, http://{host}:{bound}",
                    soft_wrap=True,
                )
                signum = await first_signal()
                err.print(f"[dim]{signal.Signals(signum).name}: stopping[/dim]")
                tg.cancel_scope.cancel()
        finally:
            remove_pid_file(state)


__all__ = ["cluster_config", "network_factory", "serve_cluster"]
