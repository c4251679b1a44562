"""``asynckubelet get pods|configmaps|secrets|events|namespaces...``: kubectl's tables,
or the v1 objects as YAML, JSON or names; ``-l`` selects by label, ``--show-labels`` adds
a LABELS column.

The node API selects and prints the table (kubectl's server-side printing) and this
command only lays it out: with a daemon running, the daemon does, so the command imports
neither the Kubernetes models nor the status rules; without one, the in-process side reads
pods from Docker and the state dir, ConfigMaps, Secrets and Namespaces from the objects
the daemon kept there, and events from the record it kept there. Secret values are never
printed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from asynckubelet.cli.client import node_api, require_daemon
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
from asynckubelet.cli.output import command, err, exit_on_signals, fail

if TYPE_CHECKING:
    from asynckubelet.api.protocol import NodeAPI


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
    doing = FALLBACKS.get(plural, "reading the objects it kept")
    with (
        exit_on_signals(),
        node_api(node, doing=doing, needs="get --watch" if watch else None) as api,
    ):
        fast.show(api, options)


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
    with node_api(node, doing=FALLBACKS.get(plural, "reading the objects it kept")) as api:
        found, missing = _fetch_named(api, plural, names, namespace=namespace, output=output)
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
    api: NodeAPI, plural: str, names: list[str], *, namespace: str, output: str | None
) -> tuple[list[dict[str, Any]], list[str]]:
    """Each named object's table (or object), and the daemon's message for each missing."""
    from asynckubelet import errors

    found: list[dict[str, Any]] = []
    missing: list[str] = []
    for name in dict.fromkeys(names):
        try:
            if output in (None, "wide"):
                found.append(api.table(plural, namespace, name))
            else:
                found.append(api.get(plural, namespace, name))
        except errors.NotFound as e:
            missing.append(str(e))
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
    if watch:
        require_daemon(node, verb="get --watch")
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
    with exit_on_signals(), node_api(node, doing="reading the objects it kept") as api:
        fast.show(api, options)
