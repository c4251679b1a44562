"""Whole apps on one node: local controllers that turn Deployments, ReplicaSets,
StatefulSets and Jobs into pods and hand them to the node like any pod source.

``Controllers(node).run`` reconciles the workloads of a running :class:`~asynckubelet.
node.kubelet.Kubelet`'s object store (what ``asynckubelet serve`` applies) with the pods'
statuses; the decisions are pure functions in the controller modules, the way upstream's
``pkg/controller`` makes them.
"""

from asynckubelet.workloads.controller import WORKLOADS_SOURCE, Controllers

__all__ = ["WORKLOADS_SOURCE", "Controllers"]
