"""Local controllers: what a control plane does for a whole app, done on the node itself.

They read the node's objects and pods, and make what a cluster's controllers make: pods
for Deployments, ReplicaSets, StatefulSets, Jobs and DaemonSets, and Jobs for CronJobs, handed
to the node like any source's
(``Controllers(node).run``; the decisions are pure functions in the controller modules, the
way upstream's ``pkg/controller`` makes them), Service endpoints and the rules that send a
ClusterIP's traffic to them, and the cluster DNS that names them.
"""

from asynckubelet.workloads.controller import WORKLOADS_SOURCE, Controllers

__all__ = ["WORKLOADS_SOURCE", "Controllers"]
