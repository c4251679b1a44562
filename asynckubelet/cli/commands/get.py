"""``asynckubelet get pods|configmaps|secrets|events|namespaces...``: kubectl's tables,
or the v1 objects as YAML, JSON or names; ``-l`` selects by label, ``--show-labels`` adds
a LABELS column.

With a daemon running, the daemon selects and prints the table (kubectl's server-side
printing) and this command only lays it out, so it imports neither the Kubernetes models
nor the status rules. Without one, pods are read from Docker and the state dir, and
ConfigMaps, Secrets and Namespaces from the objects the daemon kept there, and events
from the record it kept there. Secret values are never printed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from asynckubelet.cli.client import daemon_client, require_daemon
from asynckubelet.cli.fast import print_items, print_table
from asynckubelet.cli.options import (
    RESOURCES,
    AllNamespacesOpt,
    KindArg,
    LabelSelectorOpt,
    LogOptions,
    NamesArg,
    NamespaceOpt,
    NodeRef,
    NoHeadersOpt,
    PodFormatOpt,
    ShowLabelsOpt,
    WatchOpt,
)
from asynckubelet.cli.output import command, err, exit_on_signals, fail, not_found, run_async

if TYPE_CHECKING:
    from lightkube.models.core_v1 import Pod

    from asynckubelet.client import NodeClient
    from asynckubelet.node.objects import StoredObject


FALLBACKS = {"pods": "reading Docker directly", "events": "reading the events it kept"}
"""What ``get`` reads without a daemon, as it says in one line (other kinds: the objects
the daemon kept)."""


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
    selector: LabelSelectorOpt = None,
    show_labels: ShowLabelsOpt = False,
    node: NodeRef,
    log: LogOptions,
) -> None:
    """List pods, configmaps, secrets, services, endpoints, deployments, replicasets,
    statefulsets, jobs, events, namespaces or all as `kubectl get` does (asking the node
    daemon); -l selects by label; -w then prints every change of the pods."""
    from asynckubelet.cli import fast

    kind, names = _same_type(kind, names) if "/" in kind and names else (kind, names or [])
    if selector and (names or "/" in kind):
        raise fail("name cannot be provided when a selector is specified")
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
            selector=selector,
            show_labels=show_labels,
        )
        return
    plural = RESOURCES.get(kind.split("/", 1)[0])
    if plural is None:
        raise fail(f'the server doesn\'t have a resource type "{kind}"')
    if "/" in kind and name is None:
        name = kind.split("/", 1)[1]
    _check_output(output)
    if name is not None and all_namespaces:
        raise fail("a resource cannot be retrieved by name across all namespaces")
    if plural == "all" and name is not None:
        raise fail('a resource cannot be retrieved by name across all types ("all")')
    where = None if all_namespaces else namespace
    client: NodeClient | None
    if watch:
        client = require_daemon(node, verb="get --watch")
    else:
        client = daemon_client(node, doing=FALLBACKS.get(plural, "reading the objects it kept"))
    if client is None:
        if plural == "all":
            raise fail(f"no node daemon for state dir {node.state}: `get all` needs one")
        _get_without_daemon(
            plural,
            name,
            where=where,
            output=output,
            node=node,
            headers=not no_headers,
            selector=selector,
            show_labels=show_labels,
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
        "selector": selector,
        "show_labels": show_labels,
    }
    with exit_on_signals():
        fast.show(client, options)


def _check_output(output: str | None) -> None:
    """kubectl's error for an output format ``get`` has no printer for."""
    from asynckubelet.cli import fast

    if output not in fast.OUTPUTS:
        raise fail(
            f'unable to match a printer suitable for the output format "{output}", '
            f"allowed formats are: {','.join(sorted(filter(None, fast.OUTPUTS)))}"
        )


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

    plural = RESOURCES.get(kind)
    if plural is None:
        raise fail(f'the server doesn\'t have a resource type "{kind}"')
    if all_namespaces:
        raise fail("a resource cannot be retrieved by name across all namespaces")
    if plural == "all":
        raise fail('a resource cannot be retrieved by name across all types ("all")')
    if watch:
        raise fail("watching several names is not supported: watch one, or the whole type")
    _check_output(output)
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
    selector: str | None = None,
    show_labels: bool = False,
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
    _check_output(output)
    client = require_daemon(node, verb="get --watch" if watch else f"get {kinds}")
    if watch:
        raise fail("watching several types is not supported: only pods are watched")
    options = {
        "plural": "all",
        "name": None,
        "namespace": where,
        "all_namespaces": where is None,
        "output": output,
        "no_headers": not headers,
        "selector": selector,
        "show_labels": show_labels,
        "plurals": plurals,
    }
    with exit_on_signals():
        fast.show(client, options)


# -- no daemon -------------------------------------------------------------------------------


def _get_without_daemon(
    plural: str,
    name: str | None,
    *,
    where: str | None,
    output: str | None,
    node: NodeRef,
    headers: bool,
    selector: str | None = None,
    show_labels: bool = False,
) -> None:
    wanted = _local_selector(plural, selector)
    if plural == "endpoints":
        raise fail("endpoints follow the pods of a running node daemon; start `asynckubelet serve`")
    reader = {"pods": _pods_without_daemon, "events": _events_without_daemon}.get(plural)
    if reader is not None:
        reader(
            name,
            where=where,
            output=output,
            node=node,
            headers=headers,
            selector=wanted,
            show_labels=show_labels,
        )
        return
    from asynckubelet.cli.fast import KINDS
    from asynckubelet.manifests.workloads import selector_matches
    from asynckubelet.node.objects import OBJECTS_DIR, StoredObject, object_key, read_persisted
    from asynckubelet.workloads import WORKLOADS_SOURCE

    kind = KINDS[plural]
    kept = node.state / OBJECTS_DIR
    found: list[StoredObject] = []
    bodies = [*read_persisted(kept), *read_persisted(kept / WORKLOADS_SOURCE)]
    if kind == "Namespace":
        where = None
        bodies = _with_default_namespace(bodies)
    for body in bodies:
        meta = body.get("metadata") or {}
        key = object_key(str(body.get("kind")), meta.get("namespace"), str(meta.get("name")))
        if key[0] != kind or (where is not None and key[1] != where):
            continue
        if name is not None and key[2] != name:
            continue
        if wanted is not None and not selector_matches(wanted, meta.get("labels") or {}):
            continue
        found.append(StoredObject(kind=key[0], namespace=key[1], name=key[2], body=body, source=""))
    found.sort(key=lambda o: (o.namespace, o.name))
    if name is not None and not found:
        raise not_found("NotFound", f'{plural} "{name}" not found')
    if output in (None, "wide"):
        _print_kept(kind, found, where=where, output=output, headers=headers, labels=show_labels)
        return
    print_items([dict(o.body) for o in found], plural, output=output, single=name is not None)


def _events_without_daemon(
    name: str | None,
    *,
    where: str | None,
    output: str | None,
    node: NodeRef,
    headers: bool,
    selector: dict[str, Any] | None,
    show_labels: bool,
) -> None:
    """The events the node recorded in its state dir (an hour's, as the daemon serves
    them), oldest first, in the daemon's table or as v1 Events."""
    from asynckubelet.kubectl.objects import EVENT_COLUMNS, event_row, event_seen
    from asynckubelet.kubectl.tables import table
    from asynckubelet.kubectl.times import now_utc
    from asynckubelet.manifests.workloads import selector_matches
    from asynckubelet.node.access import StateDir
    from asynckubelet.node.events import read_events

    now = now_utc()
    bodies = [
        e.to_v1()
        for e in read_events(StateDir(node.state).events, now=now)
        if where is None or e.namespace == where
    ]
    bodies = [
        b
        for b in bodies
        if (name is None or b["metadata"]["name"] == name)
        and (selector is None or selector_matches(selector, b["metadata"].get("labels") or {}))
    ]
    bodies.sort(key=event_seen)
    if name is not None and not bodies:
        raise not_found("NotFound", f'events "{name}" not found')
    if output in (None, "wide"):
        rows = [(event_row(b, now=now), b["metadata"]) for b in bodies]
        print_table(
            table(EVENT_COLUMNS, rows),
            where=where,
            wide=output == "wide",
            headers=headers,
            show_labels=show_labels,
        )
        return
    print_items(bodies, "events", output=output, single=name is not None)


def _with_default_namespace(bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects kept, with the ``default`` Namespace (always there) and every
    Namespace labelled with its name, as the API server serves them."""
    stored = {
        str((b.get("metadata") or {}).get("name")) for b in bodies if b.get("kind") == "Namespace"
    }
    if "default" not in stored:
        bodies = [
            *bodies,
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}},
        ]
    for body in bodies:
        if body.get("kind") == "Namespace":
            meta = body.setdefault("metadata", {})
            meta["labels"] = {
                **(meta.get("labels") or {}),
                "kubernetes.io/metadata.name": str(meta.get("name")),
            }
    return bodies


def _print_kept(
    kind: str,
    found: list[StoredObject],
    *,
    where: str | None,
    output: str | None,
    headers: bool,
    labels: bool,
) -> None:
    """The kept objects' table, as the daemon prints it."""
    from asynckubelet.kubectl.objects import (
        CONFIGMAP_COLUMNS,
        NAMESPACE_COLUMNS,
        SECRET_COLUMNS,
        SERVICE_COLUMNS,
        WORKLOAD_COLUMNS,
        namespace_row,
        object_row,
        service_row,
        workload_row,
    )
    from asynckubelet.kubectl.tables import table
    from asynckubelet.kubectl.times import now_utc

    now = now_utc()
    metas = [{"namespace": o.namespace, "labels": o.labels} for o in found]
    if kind in WORKLOAD_COLUMNS:
        columns = WORKLOAD_COLUMNS[kind]
        cells = [workload_row(o, now=now) for o in found]
    elif kind == "Service":
        columns = SERVICE_COLUMNS
        cells = [service_row(o.body, now=now) for o in found]
    elif kind == "Namespace":
        columns = NAMESPACE_COLUMNS
        cells = [namespace_row(o.body, terminating=False, now=now) for o in found]
    else:
        columns = SECRET_COLUMNS if kind == "Secret" else CONFIGMAP_COLUMNS
        cells = [object_row(o, now=now) for o in found]
    print_table(
        table(columns, list(zip(cells, metas, strict=True))),
        where=where,
        wide=output == "wide",
        headers=headers,
        show_labels=labels,
        namespaced=kind != "Namespace",
    )


def _local_selector(plural: str, selector: str | None) -> dict[str, Any] | None:
    """``selector`` parsed as the daemon would, or kubectl's error for it (exit 1)."""
    if not selector:
        return None
    from asynckubelet.cli.fast import selector_error
    from asynckubelet.manifests.workloads import parse_label_selector

    try:
        return parse_label_selector(selector)
    except ValueError as e:
        raise not_found("BadRequest", selector_error(plural, selector, str(e))) from None


def _pods_without_daemon(
    name: str | None,
    *,
    where: str | None,
    output: str | None,
    node: NodeRef,
    headers: bool,
    selector: dict[str, Any] | None = None,
    show_labels: bool = False,
) -> None:
    from asynckubelet.cli.client import read_node_pods
    from asynckubelet.kubectl.pods import bound_node, pod_table
    from asynckubelet.kubectl.times import now_utc
    from asynckubelet.manifests.workloads import selector_matches
    from asynckubelet.runtime import containers as ctr

    pods = sorted(
        run_async(read_node_pods, node),
        key=lambda p: (ctr.pod_identity(p)[1], ctr.pod_identity(p)[0]),
    )
    if where is not None:
        pods = [p for p in pods if ctr.pod_identity(p)[1] == where]
    if selector is not None:
        pods = [
            p
            for p in pods
            if selector_matches(selector, (p.metadata.labels if p.metadata else None) or {})
        ]
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
        show_labels=show_labels,
    )
    print(table)


def _pod_dict(pod: Pod) -> dict[str, Any]:
    from asynckubelet.kubectl.pods import pod_document

    return pod_document(pod)
