"""``asynckubelet get pods|configmaps|secrets``: kubectl's tables, or the v1 objects as
YAML, JSON or names.

With a daemon running, the daemon prints the table (kubectl's server-side printing) and
this command only lays it out, so it imports neither the Kubernetes models nor the
status rules. Without one, pods are read from Docker and the state dir, and ConfigMaps
and Secrets from the objects the daemon kept there. Secret values are never printed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from asynckubelet.cli.client import daemon_client, require_daemon
from asynckubelet.cli.fast import print_items, print_table
from asynckubelet.cli.options import (
    RESOURCES,
    AllNamespacesOpt,
    KindArg,
    LogOptions,
    NamesArg,
    NamespaceOpt,
    NodeRef,
    NoHeadersOpt,
    PodFormatOpt,
    WatchOpt,
)
from asynckubelet.cli.output import command, err, exit_on_signals, fail, not_found, run_async

if TYPE_CHECKING:
    from lightkube.models.core_v1 import Pod

    from asynckubelet.client import NodeClient


@command(not_found_as="NotFound")
def get(
    kind: KindArg,
    names: NamesArg = None,
    *,
    namespace: NamespaceOpt = "default",
    all_namespaces: AllNamespacesOpt = False,
    output: PodFormatOpt = None,
    watch: WatchOpt = False,
    no_headers: NoHeadersOpt = False,
    node: NodeRef,
    log: LogOptions,
) -> None:
    """List pods, configmaps, secrets, services, endpoints, deployments, replicasets,
    statefulsets, jobs or all as `kubectl get` does (asking the node daemon); -w then prints
    every change of the pods."""
    from asynckubelet.cli import fast

    kind, names = _same_type(kind, names) if "/" in kind and names else (kind, names or [])
    if len(names) > 1:
        _get_named(
            kind,
            names,
            namespace=namespace,
            all_namespaces=all_namespaces,
            output=output,
            watch=watch,
            headers=not no_headers,
            node=node,
        )
        return
    name = names[0] if names else None
    if "," in kind:
        _get_several(
            kind,
            name,
            where=None if all_namespaces else namespace,
            output=output,
            watch=watch,
            headers=not no_headers,
            node=node,
        )
        return
    plural = RESOURCES.get(kind.split("/", 1)[0])
    if plural is None:
        raise fail(f'the server doesn\'t have a resource type "{kind}"')
    if "/" in kind and name is None:
        name = kind.split("/", 1)[1]
    if output not in fast.OUTPUTS:
        raise fail(
            f'unable to match a printer suitable for the output format "{output}", '
            f"allowed formats are: {','.join(sorted(filter(None, fast.OUTPUTS)))}"
        )
    if name is not None and all_namespaces:
        raise fail("a resource cannot be retrieved by name across all namespaces")
    if plural == "all" and name is not None:
        raise fail('a resource cannot be retrieved by name across all types ("all")')
    where = None if all_namespaces else namespace
    client: NodeClient | None
    if watch:
        client = require_daemon(node, verb="get --watch")
    elif plural == "pods":
        client = daemon_client(node)
    else:
        client = daemon_client(node, doing="reading the objects it kept")
    if client is None:
        if plural == "all":
            raise fail(f"no node daemon for state dir {node.state}: `get all` needs one")
        _get_without_daemon(
            plural, name, where=where, output=output, node=node, headers=not no_headers
        )
        return
    options = {
        "plural": plural,
        "name": name,
        "namespace": namespace,
        "all_namespaces": all_namespaces,
        "output": output,
        "watch": watch,
        "no_headers": no_headers,
    }
    with exit_on_signals():
        fast.show(client, options)


def _same_type(first: str, rest: list[str]) -> tuple[str, list[str]]:
    """``get pod/a pod/b``: the type they share and their names."""
    kind, _, name = first.partition("/")
    names = [name]
    for ref in rest:
        other, sep, other_name = ref.partition("/")
        if not sep:
            raise fail(
                "there is no need to specify a resource type as a separate argument when "
                "passing arguments in resource/name form"
            )
        if RESOURCES.get(other) != RESOURCES.get(kind):
            raise fail("a resource cannot be retrieved by name across several types")
        names.append(other_name)
    return kind, names


def _get_named(
    kind: str,
    names: list[str],
    *,
    namespace: str,
    all_namespaces: bool,
    output: str | None,
    watch: bool,
    headers: bool,
    node: NodeRef,
) -> None:
    """``get pods a b``: one table (or list) of the objects named, then kubectl's
    ``NotFound`` line for each missing one (exit 1)."""
    plural = _named_plural(kind, all_namespaces=all_namespaces, output=output, watch=watch)
    client = require_daemon(node, verb="get of several names")
    found, missing = _fetch_named(client, plural, names, namespace=namespace, output=output)
    if found and output in (None, "wide"):
        table = {**found[0], "rows": [row for t in found for row in t.get("rows") or []]}
        print_table(table, where=namespace, wide=output == "wide", headers=headers)
    elif found:
        print_items(found, plural, output=output, single=False)
    for message in missing:
        err.print(f"Error from server (NotFound): {message}", markup=False, highlight=False)
    if missing:
        import typer

        raise typer.Exit(1)


def _named_plural(kind: str, *, all_namespaces: bool, output: str | None, watch: bool) -> str:
    """The plural ``get TYPE NAME NAME...`` names, or kubectl's error for the form."""
    from asynckubelet.cli import fast

    plural = RESOURCES.get(kind)
    if plural is None:
        raise fail(f'the server doesn\'t have a resource type "{kind}"')
    if all_namespaces:
        raise fail("a resource cannot be retrieved by name across all namespaces")
    if plural == "all":
        raise fail('a resource cannot be retrieved by name across all types ("all")')
    if watch:
        raise fail("watching several names is not supported: watch one, or the whole type")
    if output not in fast.OUTPUTS:
        raise fail(
            f'unable to match a printer suitable for the output format "{output}", '
            f"allowed formats are: {','.join(sorted(filter(None, fast.OUTPUTS)))}"
        )
    return plural


def _fetch_named(
    client: NodeClient, plural: str, names: list[str], *, namespace: str, output: str | None
) -> tuple[list[dict[str, Any]], list[str]]:
    """Each named object's table (or object), and the daemon's message for each missing."""
    from asynckubelet import errors

    found: list[dict[str, Any]] = []
    missing: list[str] = []
    for name in dict.fromkeys(names):
        try:
            if output in (None, "wide"):
                found.append(client.table(plural, namespace, name))
            elif plural == "pods":
                found.append(client.pod(namespace, name))
            else:
                found.append(client.object(plural, namespace, name))
        except errors.DaemonError as e:
            if e.reason != "NotFound":
                raise
            missing.append(str(e))
    return found, missing


def _get_several(
    kinds: str,
    name: str | None,
    *,
    where: str | None,
    output: str | None,
    watch: bool,
    headers: bool,
    node: NodeRef,
) -> None:
    """``get svc,ep``: a table per type as ``get all`` shows them (names as ``kind/name``)."""
    from asynckubelet.cli import fast

    plurals: list[str] = []
    for part in kinds.split(","):
        plural = RESOURCES.get(part)
        if plural is None:
            raise fail(f'the server doesn\'t have a resource type "{part}"')
        for each in fast.all_plurals() if plural == "all" else [plural]:
            if each not in plurals:
                plurals.append(each)
    if name is not None:
        raise fail("a resource cannot be retrieved by name across several types")
    if output not in fast.OUTPUTS:
        raise fail(
            f'unable to match a printer suitable for the output format "{output}", '
            f"allowed formats are: {','.join(sorted(filter(None, fast.OUTPUTS)))}"
        )
    client = require_daemon(node, verb="get --watch" if watch else f"get {kinds}")
    if watch:
        raise fail("watching several types is not supported: only pods are watched")
    with exit_on_signals():
        fast.show_all(client, where=where, output=output, headers=headers, plurals=plurals)


# -- no daemon -------------------------------------------------------------------------------


def _get_without_daemon(
    plural: str,
    name: str | None,
    *,
    where: str | None,
    output: str | None,
    node: NodeRef,
    headers: bool,
) -> None:
    if plural == "pods":
        _pods_without_daemon(name, where=where, output=output, node=node, headers=headers)
        return
    if plural == "endpoints":
        raise fail("endpoints follow the pods of a running node daemon; start `asynckubelet serve`")
    from asynckubelet.cli.fast import KINDS
    from asynckubelet.node.objects import OBJECTS_DIR, StoredObject, object_key, read_persisted
    from asynckubelet.printers import (
        CONFIGMAP_COLUMNS,
        SECRET_COLUMNS,
        SERVICE_COLUMNS,
        WORKLOAD_COLUMNS,
        now_utc,
        object_row,
        service_row,
        workload_row,
    )
    from asynckubelet.tables import table
    from asynckubelet.workloads import WORKLOADS_SOURCE

    kind = KINDS[plural]
    kept = node.state / OBJECTS_DIR
    found = []
    bodies = [*read_persisted(kept), *read_persisted(kept / WORKLOADS_SOURCE)]
    for body in bodies:
        meta = body.get("metadata") or {}
        key = object_key(str(body.get("kind")), meta.get("namespace"), str(meta.get("name")))
        if key[0] != kind or (where is not None and key[1] != where):
            continue
        if name is not None and key[2] != name:
            continue
        found.append(StoredObject(kind=key[0], namespace=key[1], name=key[2], body=body, source=""))
    if name is not None and not found:
        raise not_found("NotFound", f'{plural} "{name}" not found')
    if output in (None, "wide"):
        now = now_utc()
        if kind in WORKLOAD_COLUMNS:
            columns = WORKLOAD_COLUMNS[kind]
            rows = [(workload_row(o, now=now), {"namespace": o.namespace}) for o in found]
        elif kind == "Service":
            columns = SERVICE_COLUMNS
            rows = [(service_row(o.body, now=now), {"namespace": o.namespace}) for o in found]
        else:
            columns = SECRET_COLUMNS if kind == "Secret" else CONFIGMAP_COLUMNS
            rows = [(object_row(o, now=now), {"namespace": o.namespace}) for o in found]
        print_table(table(columns, rows), where=where, wide=output == "wide", headers=headers)
        return
    print_items([dict(o.body) for o in found], plural, output=output, single=name is not None)


def _pods_without_daemon(
    name: str | None, *, where: str | None, output: str | None, node: NodeRef, headers: bool
) -> None:
    from asynckubelet.cli.client import read_node_pods
    from asynckubelet.printers import bound_node, now_utc, pod_table
    from asynckubelet.runtime import containers as ctr

    pods = sorted(
        run_async(read_node_pods, node),
        key=lambda p: (ctr.pod_identity(p)[1], ctr.pod_identity(p)[0]),
    )
    if where is not None:
        pods = [p for p in pods if ctr.pod_identity(p)[1] == where]
    if name is not None:
        pods = [p for p in pods if ctr.pod_identity(p)[0] == name]
        if not pods:
            raise not_found("NotFound", f'pods "{name}" not found')
    for pod in pods:
        if pod.spec is not None and not pod.spec.nodeName:
            pod.spec.nodeName = bound_node(pod, node_name=node.name)
        pod.apiVersion, pod.kind = "v1", "Pod"
    if output in ("yaml", "json", "name"):
        print_items([_pod_dict(p) for p in pods], "pods", output=output, single=name is not None)
        return
    if not pods:
        shown = "" if where is None else f" in {where} namespace"
        err.print(f"No resources found{shown}.", markup=False)
        return
    table = pod_table(
        pods,
        node_name=node.name,
        now=now_utc(),
        wide=output == "wide",
        all_namespaces=where is None,
        headers=headers,
    )
    print(table)


def _pod_dict(pod: Pod) -> dict[str, Any]:
    from asynckubelet.printers import pod_document

    return pod_document(pod)
