"""``asynckubelet serve --kubeconfig FILE``: the node joins a cluster.

The same node as a standalone ``serve`` (its static pods and what is applied to it
through its local API, with mirror pods in the API server; its read-only HTTP endpoints;
its socket, ``node.json`` and pid file), plus the pods the cluster binds to it and the
kubelet API on ``--kubelet-port`` (:func:`~asynckubelet.cluster.run_cluster_node`). A
kubeconfig that cannot be used, or a serving certificate or client CA that cannot be
loaded, is one ``error:`` line and exit status 2.
"""

from __future__ import annotations

import dataclasses
import functools
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from asynckubelet import errors
from asynckubelet.cli.options import ClusterOptions, NodeOptions, UsageError
from asynckubelet.cli.output import err, fail, run_async, say

if TYPE_CHECKING:
    from asynckubelet.cluster.agent import ClusterConfig, ClusterNode
    from asynckubelet.docker import DockerAPI
    from asynckubelet.network import NetworkPlugin
    from asynckubelet.node.daemon import DaemonInfo
    from asynckubelet.node.kubelet import KubeletConfig


def cluster_config(node: NodeOptions, cluster: ClusterOptions) -> ClusterConfig:
    """The cluster side of the options, checked (a bad value is a usage error)."""
    from asynckubelet.cluster.agent import ClusterConfig
    from asynckubelet.node.admission import parse_taints

    if cluster.kubeconfig is None:
        raise ValueError("cluster_config needs --kubeconfig")
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
    node: NodeOptions, docker: DockerAPI, *, node_name: str
) -> Callable[[str], NetworkPlugin]:
    """The pod network for the pod CIDR the cluster assigns (else ``--pod-cidr``)."""
    from asynckubelet.cli.options import ipv6_pod_cidr
    from asynckubelet.network.factory import make_network_plugin

    def make(pod_cidr: str) -> NetworkPlugin:
        return make_network_plugin(
            node.network,
            docker=docker,
            state_dir=node.network_state_dir,
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


async def _listen_and_publish(
    tg: anyio.abc.TaskGroup,
    joined: ClusterNode,
    config: KubeletConfig,
    node: NodeOptions,
    state: Path,
    socket_file: Path,
    listen: tuple[str, int, bool],
    docker_url: str,
    published: list[DaemonInfo],
    started: list[int],
) -> None:
    """Serve the local API and the HTTP endpoint of the joined node, then publish the
    node's configuration in the state directory and say so in one line."""
    from asynckubelet.api.localapi import serve_local
    from asynckubelet.api.server import serve_http
    from asynckubelet.cli.commands.serve import _Address, _node_info
    from asynckubelet.cli.provision import announce
    from asynckubelet.node import daemon

    host, port, allow_remote = listen
    kubelet = joined.kubelet
    kubelet.runtime.images.announce = announce
    local = functools.partial(serve_local, kubelet, lambda: published[0], path=str(socket_file))
    http = functools.partial(serve_http, kubelet, host=host, port=port, allow_remote=allow_remote)
    try:
        inode = int(await tg.start(local))
        started.append(inode)
        bound = await tg.start(http)
    except OSError as e:
        raise fail(f"cannot listen: {e}") from None
    info = _node_info(
        config,
        node,
        _Address(f"{host}:{port}", host, port, allow_remote),
        bound,
        socket_file,
        docker_url,
        network=kubelet.runtime.network.name,
    )
    published.append(dataclasses.replace(info, pod_cidr=joined.pod_cidr or ""))
    daemon.write_node_info(state, published[0])
    kubelet_api = f", kubelet API port {joined.kubelet_port}" if joined.kubelet_port else ""
    say(
        f"node {joined.node_name} joined {joined.api.server} "
        f"(pod CIDR {joined.pod_cidr}{kubelet_api}), manifests "
        f"{config.manifest_dir}, http://{host}:{bound}, local API {socket_file}"
    )
    daemon.settle_heap()
    tg.start_soon(
        daemon.give_back_memory_when_quiet,
        joined.kubelet.status,
        name="memory given back after each busy spell",
    )


async def _serve(
    config: KubeletConfig,
    node: NodeOptions,
    cluster: ClusterOptions,
    joining: ClusterConfig,
    state: Path,
    listen: tuple[str, int, bool],
) -> None:
    from asynckubelet.cluster.agent import run_cluster_node
    from asynckubelet.docker import DockerClient
    from asynckubelet.node import daemon
    from asynckubelet.node.access import remove_pid_file, write_pid_file
    from asynckubelet.node.kubelet import API_SOURCE
    from asynckubelet.node.objects import OBJECTS_DIR, ObjectStore

    try:
        socket_file = daemon.claim_socket(state)
    except errors.DaemonError as e:
        raise fail(str(e)) from None
    objects = ObjectStore(directory=state / OBJECTS_DIR, persistent_source=API_SOURCE)
    started: list[int] = []
    published: list[DaemonInfo] = []
    async with DockerClient(url=node.docker_host) as docker:
        network = network_factory(node, docker, node_name=config.node_name)
        write_pid_file(state)
        signals = anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM)
        try:
            # Signals are taken from the start: one during the join, or right after the
            # announcement, still removes what was announced.
            with signals as received:
                async with anyio.create_task_group() as tg:

                    async def stop_on_signal() -> None:
                        async for signum in received:
                            err.print(f"[dim]{signal.Signals(signum).name}: stopping[/dim]")
                            tg.cancel_scope.cancel()
                            return

                    tg.start_soon(stop_on_signal)
                    joined: ClusterNode = await tg.start(
                        functools.partial(
                            run_cluster_node,
                            joining,
                            config,
                            docker=docker,
                            network=network,
                            objects=objects,
                        )
                    )
                    await _listen_and_publish(
                        tg, joined, config, node, state, socket_file, listen, docker.url,
                        published, started,
                    )  # fmt: skip
        finally:
            inode = started[0] if started else None
            daemon.release_socket(state, inode=inode)
            if inode is not None:
                daemon.remove_node_info(state)
            remove_pid_file(state)


__all__ = ["cluster_config", "network_factory", "serve_cluster"]
