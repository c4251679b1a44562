"""The command line's node options as the parts of a
:class:`~asynckubelet.nodeapp.config.NodeConfig`: ``run`` and ``serve`` (and cluster
mode) build their node from these, and the node does the rest."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from asynckubelet.cli.options import NodeOptions
    from asynckubelet.nodeapp.config import NetworkConfig


def network_config(node: NodeOptions) -> NetworkConfig:
    """The pod network of ``--network``, ``--bridge``, ``--pod-cidr`` and the rest."""
    from asynckubelet.cli.options import ipv6_pod_cidr
    from asynckubelet.nodeapp.config import NetworkConfig

    return NetworkConfig(
        backend=node.network,
        state_dir=node.network_state_dir,
        bridge=node.bridge,
        pod_cidr=node.pod_cidr,
        pod_cidr_v6=ipv6_pod_cidr(dual_stack=node.dual_stack, pod_cidr_v6=node.pod_cidr_v6),
        firewall=node.firewall,
        masquerade=node.masquerade,
    )


__all__ = ["network_config"]
