"""``asynckubelet get pods``: kubectl's table, or the full v1 Pods as YAML or JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape

from asynckubelet.cli.client import read_node_pods
from asynckubelet.cli.options import (
    POD_KINDS,
    AllNamespacesOpt,
    KindArg,
    LogOptions,
    NamespaceOpt,
    NodeRef,
    OptionalPodNameArg,
    PodFormatOpt,
    UsageError,
)
from asynckubelet.cli.output import command, err, fail, not_found, run_async

if TYPE_CHECKING:
    from lightkube.models.core_v1 import Pod


@command()
def get(
    kind: KindArg,
    name: OptionalPodNameArg = None,
    *,
    namespace: NamespaceOpt = "default",
    all_namespaces: AllNamespacesOpt = False,
    output: PodFormatOpt = None,
    node: NodeRef,
    log: LogOptions,
) -> None:
    """List pods as `kubectl get pods` does (from Docker and the state dir)."""
    from asynckubelet.printers import bound_node, now_utc, pod_table
    from asynckubelet.runtime import containers as ctr

    if kind not in POD_KINDS:
        raise fail(f'the server doesn\'t have a resource type "{kind}"')
    if output not in (None, "wide", "yaml", "json"):
        raise UsageError(f"--output must be wide, yaml or json, not {output!r}")
    pods = run_async(read_node_pods, node)
    if not all_namespaces:
        pods = [p for p in pods if ctr.pod_identity(p)[1] == namespace]
    if name is not None:
        pods = [p for p in pods if ctr.pod_identity(p)[0] == name]
        if not pods:
            raise not_found("NotFound", f'pods "{name}" not found')
    for pod in pods:
        if pod.spec is not None and not pod.spec.nodeName:
            pod.spec.nodeName = bound_node(pod, node_name=node.name)
        pod.apiVersion, pod.kind = "v1", "Pod"
    if output in ("yaml", "json"):
        _print_document(pods[0].to_dict() if name is not None else _list(pods), output)
        return
    if not pods:
        where = "" if all_namespaces else f" in {namespace} namespace"
        err.print(f"No resources found{escape(where)}.")
        return
    wide = output == "wide"
    table = pod_table(
        pods, node_name=node.name, now=now_utc(), wide=wide, all_namespaces=all_namespaces
    )
    print(table)


def _list(pods: list[Pod]) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [p.to_dict() for p in pods],
        "metadata": {"resourceVersion": ""},
    }


def _print_document(document: dict[str, object], output: str) -> None:
    if output == "json":
        import json

        print(json.dumps(document, indent=4))
    else:
        import yaml

        print(yaml.safe_dump(document, sort_keys=False), end="")
