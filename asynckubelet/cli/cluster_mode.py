"""``asynckubelet serve --kubeconfig FILE``: the node joins a cluster.

The same node as a standalone ``serve`` (its static pods and what is applied to it
through its local API, with mirror pods in the API server; its read-only HTTP endpoints;
its socket, ``node.json`` and pid file), plus the pods the cluster binds to it and the
kubelet API on ``--kubelet-port`` (:func:`~asynckubelet.cluster.run_cluster_node`). A
kubeconfig that cannot be used, or a serving certificate or client CA that cannot be
loaded, is one ``error:`` line and exit status 2.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

import anyio

from asynckubelet import errors
from asynckubelet.cli.options import ClusterOptions, NodeOptions, UsageError
from asynckubelet.cli.output import err, fail, run_async, say

if TYPE_CHECKING:
    from asynckubelet.cluster.agent import ClusterConfig
    from asynckubelet.node.kubelet import KubeletConfig
    from asynckubelet.nodeapp.config import HTTPEndpoint, NodeConfig


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


def serve_cluster(
    kubelet: KubeletConfig, node: NodeOptions, cluster: ClusterOptions, http: HTTPEndpoint
) -> None:
    """Run the node in the cluster until SIGINT/SIGTERM."""
    from asynckubelet.cli.nodeconfig import network_config
    from asynckubelet.nodeapp.config import NodeConfig

    config = NodeConfig(
        kubelet=kubelet,
        network=network_config(node),
        controllers=False,
        local_api=True,
        http=http,
        cluster=cluster_config(node, cluster),
    )
    try:
        run_async(_serve, config)
    except BaseException as group:
        error = group
        while isinstance(error, BaseExceptionGroup) and error.exceptions:
            error = error.exceptions[0]
        if isinstance(error, (errors.KubeconfigError, errors.KubeletServingError)):
            raise UsageError(str(error)) from None
        if error is not group:
            raise error from None
        raise


async def _serve(config: NodeConfig) -> None:
    """The joined node until SIGINT/SIGTERM. Signals are taken from the start: one during
    the join, or right after the announcement, still removes what was announced."""
    from asynckubelet.cli.nodeconfig import serve_until
    from asynckubelet.cli.provision import announce
    from asynckubelet.nodeapp import Node

    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as received:
        async with anyio.create_task_group() as tg:
            stop = anyio.Event()

            async def stop_on_signal() -> None:
                async for signum in received:
                    err.print(f"[dim]{signal.Signals(signum).name}: stopping[/dim]")
                    stop.set()
                    if not announced:
                        tg.cancel_scope.cancel()
                    return

            announced = False
            tg.start_soon(stop_on_signal)
            try:
                async with Node(config, announce=announce) as node:
                    joined = node.cluster
                    assert joined is not None and config.http is not None  # noqa: S101  (type narrowing: cluster mode with an endpoint)
                    kubelet_api = (
                        f", kubelet API port {joined.kubelet_port}" if joined.kubelet_port else ""
                    )
                    say(
                        f"node {joined.node_name} joined {joined.api.server} "
                        f"(pod CIDR {joined.pod_cidr}{kubelet_api}), manifests "
                        f"{config.kubelet.manifest_dir}, http://{config.http.host}:"
                        f"{node.http_port}, local API {node.socket}"
                    )
                    announced = True
                    await serve_until(node, stop.wait)
            except errors.DaemonError as e:
                raise fail(str(e)) from None
            tg.cancel_scope.cancel()


__all__ = ["cluster_config", "serve_cluster"]
