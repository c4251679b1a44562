"""``asynckubelet describe pod``: kubectl's layout of one pod, its events at the bottom.

The pod and its events come from the node API (the daemon, or without one Docker and the
state dir).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from asynckubelet.cli.client import as_pod, node_api
from asynckubelet.cli.options import (
    POD_KINDS,
    DescribeKindArg,
    LogOptions,
    NamespaceOpt,
    NodeRef,
    OptionalNameArg,
)
from asynckubelet.cli.output import command, err, fail

if TYPE_CHECKING:
    from asynckubelet.api.protocol import NodeAPI


@command(not_found_as="NotFound")
def describe(
    kind: DescribeKindArg,
    name: OptionalNameArg = None,
    *,
    namespace: NamespaceOpt = "default",
    node: NodeRef,
    log: LogOptions,
) -> None:
    """Show a pod, service, cronjob, daemonset, deployment, job, replicaset or statefulset as
    `kubectl describe` does, its events at the bottom; without a NAME, every one of that type in the
    namespace."""
    if "/" in kind:
        if name is not None:
            raise fail("arguments in resource/name form must have a single resource and name")
        kind, _, name = kind.partition("/")
    if kind in SERVICE_KINDS:
        with node_api(node, needs="describe services") as api:
            names = [name] if name is not None else _service_names(namespace, api=api)
            texts = [_service_text(n, namespace=namespace, api=api) for n in names]
    elif kind in POD_KINDS:
        texts = _pod_texts(name, namespace=namespace, node=node)
    elif _workload(kind) is not None:
        with node_api(node) as api:
            texts = _workload_texts(str(_workload(kind)), name, namespace=namespace, api=api)
    else:
        raise fail(f'the server doesn\'t have a resource type "{kind}"')
    if not texts:
        err.print(f"No resources found in {namespace} namespace.", highlight=False)
        return
    from asynckubelet.kubectl.describe import harmless

    print(harmless("\n\n\n".join(texts)))


def _pod_texts(name: str | None, *, namespace: str, node: NodeRef) -> list[str]:
    """The description of pod ``name``, or of every pod of the namespace."""
    from asynckubelet.kubectl.describe import describe_pod
    from asynckubelet.kubectl.times import now_utc
    from asynckubelet.node.events import PodEvent
    from asynckubelet.runtime import containers as ctr

    texts = []
    with node_api(node) as api:
        found = (
            [api.get("pods", namespace, name)] if name is not None else api.list("pods", namespace)
        )
        for pod in map(as_pod, found):
            uid = ctr.pod_identity(pod)[2]
            events = [PodEvent.from_v1(e) for e in api.events(namespace, uid=uid)]
            node_name = (pod.spec.nodeName if pod.spec else None) or ""
            texts.append(describe_pod(pod, events, node_name=node_name, now=now_utc()))
    return texts


SERVICE_KINDS = ("service", "services", "svc")


def _service_names(namespace: str, *, api: NodeAPI) -> list[str]:
    return sorted(str(s["metadata"]["name"]) for s in api.list("services", namespace))


def _service_text(name: str, *, namespace: str, api: NodeAPI) -> str:
    """A Service and its endpoints, from the daemon (which alone keeps endpoints)."""
    from asynckubelet import errors
    from asynckubelet.kubectl.describe import describe_service
    from asynckubelet.node.events import PodEvent

    body = api.get("services", namespace, name)
    uid = (body.get("metadata") or {}).get("uid")
    events = [PodEvent.from_v1(e) for e in api.events(namespace, uid=uid)] if uid else []
    endpoints = None
    selector = (body.get("spec") or {}).get("selector")
    if selector:
        try:
            endpoints = api.get("endpoints", namespace, name)
        except errors.NotFound:
            endpoints = None
    return describe_service(body, endpoints, events)


WORKLOAD_KINDS = ("cronjobs", "daemonsets", "deployments", "jobs", "replicasets", "statefulsets")
"""The workload kinds ``describe`` shows, by their plural (any kubectl name of them works)."""


def _workload(kind: str) -> str | None:
    """The plural of the workload kind that ``kind`` names (``cj``, ``daemonset.apps``...)."""
    from asynckubelet.kubectl.resources import lookup

    found = lookup(kind)
    return found.plural if found is not None and found.plural in WORKLOAD_KINDS else None


def _workload_texts(plural: str, name: str | None, *, namespace: str, api: NodeAPI) -> list[str]:
    """The description of the workload ``name`` of kind ``plural``, or of every one of the
    namespace, from the node API as kubectl reads them: the object, its events, and for a
    kind that counts its pods the pods its selector selects."""
    from asynckubelet.kubectl import describe_workloads as pages
    from asynckubelet.kubectl.objects import format_label_selector
    from asynckubelet.node.events import PodEvent

    bodies = (
        [api.get(plural, namespace, name)]
        if name is not None
        else sorted(api.list(plural, namespace), key=lambda b: str(b["metadata"]["name"]))
    )
    texts = []
    for body in bodies:
        uid = (body.get("metadata") or {}).get("uid")
        events = [PodEvent.from_v1(e) for e in api.events(namespace, uid=uid)] if uid else []
        if plural == "cronjobs":
            texts.append(pages.describe_cronjob(body, events))
        elif plural == "jobs":
            texts.append(pages.describe_job(body, events))
        elif plural == "deployments":
            selector = pages.label_selector((body.get("spec") or {}).get("selector"))
            sets = api.list("replicasets", namespace, selector=selector or None)
            texts.append(pages.describe_deployment(body, sets, events))
        else:
            selector = format_label_selector((body.get("spec") or {}).get("selector"))
            pods = api.list("pods", namespace, selector=selector) if selector != "<none>" else []
            describe = {
                "daemonsets": pages.describe_daemonset,
                "replicasets": pages.describe_replicaset,
                "statefulsets": pages.describe_statefulset,
            }[plural]
            texts.append(describe(body, pods, events))
    return texts
