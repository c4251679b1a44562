"""``asynckubelet get pods|configmaps|secrets|events|namespaces...``: kubectl's tables,
or the v1 objects as YAML, JSON, names or through kubectl's templates (``-o jsonpath=``,
``-o custom-columns=``: :mod:`~asynckubelet.cli.commands.get_printers`); ``-l`` selects
by label, ``--show-labels`` adds a LABELS column.

The node API selects and prints the table (kubectl's server-side printing) and this
command only lays it out: with a daemon running, the daemon does, so the command imports
neither the Kubernetes models nor the status rules; without one, the in-process side reads
pods from Docker and the state dir, ConfigMaps, Secrets and Namespaces from the objects
the daemon kept there, and events from the record it kept there. Secret values are never
printed.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from asynckubelet.cli.client import node_api, require_daemon
from asynckubelet.cli.commands import get_args, get_printers
from asynckubelet.cli.commands.get_output import print_items, print_table, show
from asynckubelet.cli.options import (
    AllNamespacesOpt,
    AllowMissingTemplateKeysOpt,
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
    from collections.abc import Iterator

    from asynckubelet.api.protocol import NodeAPI


FALLBACKS = {"pods": "reading Docker directly", "events": "reading the events it kept"}
"""What ``get`` reads without a daemon, as it says in one line (other kinds: the objects
the daemon kept)."""


@command(not_found_as="NotFound")
def get(
    kind: KindArg,
    names: NamesArg = None,
    *,
    namespace: NamespaceOpt = get_args.NAMESPACE.default,
    all_namespaces: AllNamespacesOpt = get_args.ALL_NAMESPACES.default,
    output: PodFormatOpt = get_args.OUTPUT.default,
    watch: WatchOpt = get_args.WATCH.default,
    no_headers: NoHeadersOpt = get_args.NO_HEADERS.default,
    selector: LabelSelectorOpt = get_args.SELECTOR.default,
    show_labels: ShowLabelsOpt = get_args.SHOW_LABELS.default,
    allow_missing_template_keys: AllowMissingTemplateKeysOpt = (
        get_args.ALLOW_MISSING_TEMPLATE_KEYS.default
    ),
    node: NodeRef,
    log: LogOptions,
) -> None:
    """List pods, configmaps, secrets, services, endpoints, deployments, replicasets,
    statefulsets, jobs, daemonsets, cronjobs, events, namespaces or all as `kubectl get`
    does (asking the node daemon); -l selects by label; -w then prints every change of the
    pods."""
    options = {
        "namespace": namespace,
        "all_namespaces": all_namespaces,
        "output": output,
        "watch": watch,
        "no_headers": no_headers,
        "selector": selector,
        "show_labels": show_labels,
        "allow_missing_template_keys": allow_missing_template_keys,
    }
    try:
        get_args.check_template_keys(options)
        kind, names = get_args.same_type(kind, names or [], selector=selector)
        if len(names) > 1:
            _get_named(kind, names, options, node=node)
            return
        name = names[0] if names else None
        if "," in kind:
            _get_several(kind, name, options, node=node)
            return
        request = get_args.single(kind, name, options)
    except get_args.Refused as e:
        raise fail(str(e)) from None
    plural = request["plural"]
    doing = FALLBACKS.get(plural, "reading the objects it kept")
    with (
        exit_on_signals(),
        node_api(node, doing=doing, needs="get --watch" if watch else None) as api,
        _refused(),
    ):
        show(api, request)


@contextlib.contextmanager
def _refused() -> Iterator[None]:
    """A template that fails on the objects ends the command with kubectl's message."""
    try:
        yield
    except get_args.Refused as e:
        raise fail(str(e).removesuffix("\n")) from None


def _get_named(kind: str, names: list[str], options: dict[str, Any], *, node: NodeRef) -> None:
    """``get pods a b``: one table (or list) of the objects named, then kubectl's
    ``NotFound`` line for each missing one (exit 1)."""
    plural = _named_plural(kind, options)
    namespace, output = options["namespace"], options["output"]
    with node_api(node, doing=FALLBACKS.get(plural, "reading the objects it kept")) as api:
        found, missing = _fetch_named(api, plural, names, namespace=namespace, output=output)
    if found and output in (None, "wide"):
        table = {**found[0], "rows": [row for t in found for row in t.get("rows") or []]}
        headers = not options["no_headers"]
        print_table(table, where=namespace, wide=output == "wide", headers=headers)
    elif found:
        with _refused():
            printer = get_printers.for_options(options)
            print_items(found, plural, output=output, single=False, printer=printer)
    for message in missing:
        err.print(f"Error from server (NotFound): {message}", markup=False, highlight=False)
    if missing:
        import typer

        raise typer.Exit(1)


def _named_plural(kind: str, options: dict[str, Any]) -> str:
    """The plural ``get TYPE NAME NAME...`` names, or kubectl's error for the form."""
    plural = get_args.plural_of(kind)
    if options["all_namespaces"]:
        raise get_args.Refused("a resource cannot be retrieved by name across all namespaces")
    if plural == "all":
        raise get_args.Refused('a resource cannot be retrieved by name across all types ("all")')
    if options["watch"]:
        raise get_args.Refused(
            "watching several names is not supported: watch one, or the whole type"
        )
    get_args.check_output(options["output"])
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


def _get_several(kinds: str, name: str | None, options: dict[str, Any], *, node: NodeRef) -> None:
    """``get svc,ep``: a table per type as ``get all`` shows them (names as ``kind/name``)."""
    plurals: list[str] = []
    for part in kinds.split(","):
        plural = get_args.plural_of(part)
        for each in get_args.all_plurals() if plural == "all" else [plural]:
            if each not in plurals:
                plurals.append(each)
    if name is not None:
        raise get_args.Refused("a resource cannot be retrieved by name across several types")
    get_args.check_output(options["output"])
    if options["watch"]:
        require_daemon(node, verb="get --watch")
        raise get_args.Refused("watching several types is not supported: only pods are watched")
    where = None if options["all_namespaces"] else options["namespace"]
    request = {
        **options,
        "plural": "all",
        "name": None,
        "namespace": where,
        "all_namespaces": where is None,
        "watch": False,
        "plurals": plurals,
    }
    with exit_on_signals(), node_api(node, doing="reading the objects it kept") as api, _refused():
        show(api, request)
