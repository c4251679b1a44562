"""The command line's node options as the parts of a
:class:`~asynckubelet.nodeapp.config.NodeConfig`: ``run`` and ``serve`` (and cluster
mode) build their node from these, and the node does the rest; the daemon's life once
its node runs (:func:`serve_until`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from asynckubelet.cli.options import NodeOptions
    from asynckubelet.node.kubelet import KubeletConfig
    from asynckubelet.nodeapp import Node
    from asynckubelet.nodeapp.config import NetworkConfig


def network_config(node: NodeOptions) -> NetworkConfig:
    """The pod network of ``--network``, ``--bridge``, ``--pod-cidr`` and the rest (an
    ``--instance``'s own where not given, see :mod:`asynckubelet.cli.instance`)."""
    from asynckubelet.nodeapp.config import NetworkConfig

    return NetworkConfig(
        backend=node.network,
        state_dir=node.network_state_dir,
        bridge=node.bridge,
        pod_cidr=node.pod_cidr,
        pod_cidr_v6=node.ipv6_pod_cidr(),
        firewall=node.firewall,
        masquerade=node.masquerade,
    )


def kubelet_config(node: NodeOptions, **mode: Any) -> KubeletConfig:
    """The kubelet of the node options (engine, pause image, Pod Security, DNS, the node's
    resources and labels, log rotation, parallel starts), with what the command's way of
    running sets in ``mode`` (``serve``'s state dir, ``run``'s owner mark...)."""
    from asynckubelet.node.kubelet import KubeletConfig

    runtime = node.runtime_config()
    return KubeletConfig(
        node_name=runtime.node_name,
        pause_image=runtime.pause_image,
        docker_url=runtime.docker_url,
        dns=runtime.dns,
        seccomp_default=runtime.seccomp_default,
        max_parallel_starts=runtime.max_parallel_starts,
        container_log_max_size=runtime.container_log_max_size,
        container_log_max_files=runtime.container_log_max_files,
        pod_security=node.level,
        allow_namespace_policy=node.allow_namespace_policy,
        service_account_issuer=node.service_account_issuer,
        node=node.node_info(),
        **mode,
    )


async def serve_until(node: Node, stop: Callable[[], Awaitable[object]]) -> None:
    """The daemon's node until ``stop`` returns, its memory given back to the system after
    each busy spell."""
    from asynckubelet.node import daemon

    daemon.settle_heap()
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            daemon.give_back_memory_when_quiet,
            node.kubelet.status,
            name="memory given back after each busy spell",
        )
        await stop()
        tg.cancel_scope.cancel()


__all__ = ["kubelet_config", "network_config", "serve_until"]
