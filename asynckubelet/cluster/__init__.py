"""Cluster node mode: join a Kubernetes API server as a node and run the pods it binds here.

:func:`run_cluster_node` is the entry point (see :mod:`asynckubelet.cluster.agent`);
``python -m asynckubelet.cluster`` runs it from the command line. This package is the only
code that talks to an API server, and :mod:`asynckubelet.cluster.client` the only module
that imports lightkube's client.
"""

from asynckubelet.cluster.agent import ClusterConfig, ClusterNode, NetworkFactory, run_cluster_node

__all__ = ["ClusterConfig", "ClusterNode", "NetworkFactory", "run_cluster_node"]
