"""``asynckubelet describe pod``: kubectl's layout of one pod, its events at the bottom."""

from __future__ import annotations

from asynckubelet.cli.client import read_node_pods
from asynckubelet.cli.options import (
    POD_KINDS,
    KindArg,
    LogOptions,
    NamespaceOpt,
    NodeRef,
    PodNameArg,
)
from asynckubelet.cli.output import command, fail, run_async


@command(not_found_as="NotFound")
def describe(
    kind: KindArg,
    name: PodNameArg,
    *,
    namespace: NamespaceOpt = "default",
    node: NodeRef,
    log: LogOptions,
) -> None:
    """Show a pod as `kubectl describe pod` does, events at the bottom."""
    from asynckubelet.node.access import StateDir, find_pod
    from asynckubelet.node.events import read_events
    from asynckubelet.printers import describe_pod, now_utc
    from asynckubelet.runtime import containers as ctr

    if kind not in POD_KINDS:
        raise fail(f'the server doesn\'t have a resource type "{kind}"')
    pod = find_pod(run_async(read_node_pods, node), namespace=namespace, name=name)
    events = read_events(StateDir(node.state).events, uid=ctr.pod_identity(pod)[2])
    print(describe_pod(pod, events, node_name=node.name, now=now_utc()))
