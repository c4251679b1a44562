"""``asynckubelet describe pod``: kubectl's layout of one pod, its events at the bottom.

The pod and its events come from the node daemon; without one, from Docker and the state
dir.
"""

from __future__ import annotations

from asynckubelet.cli.client import as_pod, daemon_client, read_node_pods
from asynckubelet.cli.options import (
    POD_KINDS,
    LogOptions,
    NamespaceOpt,
    NodeRef,
    PodKindArg,
    PodNameArg,
)
from asynckubelet.cli.output import command, fail, run_async


@command(not_found_as="NotFound")
def describe(
    kind: PodKindArg,
    name: PodNameArg,
    *,
    namespace: NamespaceOpt = "default",
    node: NodeRef,
    log: LogOptions,
) -> None:
    """Show a pod (or a service) as `kubectl describe` does, a pod's events at the bottom."""
    from asynckubelet.node.access import StateDir, find_pod
    from asynckubelet.node.events import PodEvent, read_events
    from asynckubelet.printers import describe_pod, now_utc
    from asynckubelet.runtime import containers as ctr

    if kind in SERVICE_KINDS:
        _describe_service(name, namespace=namespace, node=node)
        return
    if kind not in POD_KINDS:
        raise fail(f'the server doesn\'t have a resource type "{kind}"')
    client = daemon_client(node)
    if client is not None:
        pod = as_pod(client.pod(namespace, name))
        uid = ctr.pod_identity(pod)[2]
        events = [PodEvent.from_v1(e) for e in client.events(namespace, uid=uid)]
        node_name = (pod.spec.nodeName if pod.spec else None) or ""
    else:
        pod = find_pod(run_async(read_node_pods, node), namespace=namespace, name=name)
        events = read_events(StateDir(node.state).events, uid=ctr.pod_identity(pod)[2])
        node_name = node.name
    print(describe_pod(pod, events, node_name=node_name, now=now_utc()))


SERVICE_KINDS = ("service", "services", "svc")


def _describe_service(name: str, *, namespace: str, node: NodeRef) -> None:
    """A Service and its endpoints, from the daemon (which alone keeps endpoints)."""
    from asynckubelet import errors
    from asynckubelet.cli.client import require_daemon
    from asynckubelet.printers import describe_service

    client = require_daemon(node, verb="describe services")
    body = client.object("services", namespace, name)
    endpoints = None
    selector = (body.get("spec") or {}).get("selector")
    if selector:
        try:
            endpoints = client.object("endpoints", namespace, name)
        except errors.NotFound:
            endpoints = None
    print(describe_service(body, endpoints))
