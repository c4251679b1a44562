"""Cluster node mode: join a Kubernetes API server as a node and run the pods it binds here.

:func:`run_cluster_node` is the entry point (see :mod:`asynckubelet.cluster.agent`);
:class:`asynckubelet.Node` runs it when its configuration names a cluster, as
``asynckubelet serve --kubeconfig`` does. This package is the only
code that talks to an API server, and :mod:`asynckubelet.cluster.client` the only module
that imports lightkube's client. The names below are imported on first use: a local
``serve`` reads the node's own facts from :mod:`asynckubelet.cluster.host` without loading
the agent, its HTTP client and the kubelet API server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from asynckubelet.cluster.agent import ClusterConfig as ClusterConfig
    from asynckubelet.cluster.agent import ClusterNode as ClusterNode
    from asynckubelet.cluster.agent import NetworkFactory as NetworkFactory
    from asynckubelet.cluster.agent import run_cluster_node as run_cluster_node

__all__ = ["ClusterConfig", "ClusterNode", "NetworkFactory", "run_cluster_node"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'asynckubelet.cluster' has no attribute {name!r}")
    from asynckubelet.cluster import agent

    value = getattr(agent, name)
    globals()[name] = value
    return value
