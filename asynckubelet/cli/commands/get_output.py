"""What ``get`` prints: kubectl's tables laid out, the objects as YAML, JSON, names or
through kubectl's templates, a watch's rows as they come; and a plain ``get`` served
whole through a running daemon (:func:`through_daemon`), before the command-line
framework loads.

A plain ``get`` (:func:`asynckubelet.cli.commands.get_args.plain`) through the daemon is
one request on a unix socket and a table the daemon printed: milliseconds, where loading
Typer, Click and Rich would take several times that. So the command line's entry point
offers it here first, and this module, like :mod:`~asynckubelet.cli.commands.get_args`,
imports the standard library only. The ``get`` command prints through the same
functions, so both print alike.
"""

from __future__ import annotations

import json
import os
import sys

from asynckubelet import errors
from asynckubelet.cli.commands.get_args import (
    CLUSTER_SCOPED,
    INSTANCE,
    KINDS,
    SINGULAR,
    STATE_DIR,
    Refused,
    all_plurals,
    plain,
)
from asynckubelet.kubectl import resources

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from asynckubelet.api.protocol import NodeAPI

    Printer = Callable[[Any], str]


def through_daemon(argv: list[str]) -> int | None:
    """Serve ``argv`` when it is a plain ``get`` and a daemon answers: the exit code;
    None leaves it to the full command line."""
    options = plain(argv)
    if options is None:
        return None
    from asynckubelet.api.client import NodeClient
    from asynckubelet.api.remote import RemoteNode
    from asynckubelet.node.locate import SOCKET_NAME, default_state_dir_path, socket_answers

    state_dir = options["state_dir"] or os.environ.get(str(STATE_DIR.envvar))
    if not state_dir:
        try:
            state_dir = _instance_state_dir(options["instance"])
        except ValueError:
            return None
    path = os.path.join(state_dir or default_state_dir_path(), SOCKET_NAME)
    try:
        if not os.path.exists(path) or not socket_answers(path):
            return None
    except OSError:
        return None
    api = RemoteNode(NodeClient(path))
    try:
        show(api, options)
    except Refused as e:
        message = str(e)
        sys.stderr.write(f"error: {message}" + ("" if message.endswith("\n") else "\n"))
        return 1
    except errors.DaemonError as e:
        if e.reason:
            sys.stderr.write(f"Error from server ({e.reason}): {e}\n")
        else:
            sys.stderr.write(f"error: {e}\n")
        return 1
    except BrokenPipeError:
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def _instance_state_dir(given: str) -> str | None:
    """The state dir of ``--instance`` (or ``ASYNCKUBELET_INSTANCE``); None for the
    default instance. ValueError for a name the command line refuses."""
    name = given or os.environ.get(str(INSTANCE.envvar), "")
    if not name:
        return None
    from asynckubelet.cli import instance

    return str(instance.state_dir(instance.check_name(name)))


def show(api: NodeAPI, options: dict[str, Any]) -> None:
    """``get`` through the daemon: its table laid out, or the objects as asked; with
    ``watch``, then every change (:func:`watch`). A label selector the daemon cannot
    parse is reported as kubectl reports the API server's answer."""
    selector = options.get("selector") or None
    try:
        _show(api, options, selector)
    except errors.DaemonError as e:
        if not selector or e.reason != "BadRequest":
            raise
        raise errors.DaemonError(
            selector_error(options["plural"], selector, str(e)), status=e.status, reason=e.reason
        ) from e


def selector_error(plural: str, selector: str, message: str) -> str:
    """kubectl's words for a list the server refused for its label selector."""
    found = resources.by_plural(plural)
    group = f"{found.group}/v1" if found is not None and found.group else "/v1"
    return (
        f'Unable to find "{group}, Resource={plural}" that match label selector '
        f'"{selector}", field selector "": {message}'
    )


def _show(api: NodeAPI, options: dict[str, Any], selector: str | None) -> None:
    from asynckubelet.cli.commands.get_printers import for_options

    plural, name, output = options["plural"], options["name"], options["output"]
    where = None if options["all_namespaces"] else options["namespace"]
    headers = not options.get("no_headers")
    labels = bool(options.get("show_labels"))
    printer = for_options(options)
    if options.get("watch"):
        watch(
            api,
            plural,
            name,
            where=where,
            output=output,
            headers=headers,
            selector=selector,
            show_labels=labels,
            printer=printer,
        )
        return
    if plural == "all":
        show_all(
            api,
            where=where,
            output=output,
            headers=headers,
            plurals=options.get("plurals"),
            selector=selector,
            show_labels=labels,
            printer=printer,
        )
        return
    if plural in CLUSTER_SCOPED:
        where = None
    if output in (None, "wide"):
        document = api.table(plural, where, name, selector=selector)
        print_table(
            document,
            where=where,
            wide=output == "wide",
            headers=headers,
            show_labels=labels,
            namespaced=plural not in CLUSTER_SCOPED,
        )
        return
    if name is not None:
        namespace = options["namespace"]
        one = api.get(plural, namespace, name)
        print_items([one], plural, output=output, single=True, printer=printer)
        return
    items = api.list(plural, where, selector=selector)
    print_items(items, plural, output=output, single=False, printer=printer)


def show_all(
    api: NodeAPI,
    *,
    where: str | None,
    output: str | None,
    headers: bool = True,
    plurals: list[str] | None = None,
    selector: str | None = None,
    show_labels: bool = False,
    printer: Printer | None = None,
) -> None:
    """``get all`` (or ``get TYPE,TYPE...``: ``plurals``): a table per kind that has
    objects, names as ``kind.group/name``; with a template ``printer``, one List."""
    from asynckubelet.kubectl.tables import render

    shown_plurals = plurals if plurals is not None else all_plurals()
    if output not in (None, "wide"):
        found: list[tuple[str, dict[str, Any]]] = []
        for plural in shown_plurals:
            items = api.list(plural, where, selector=selector)
            for item in items:
                item.setdefault("apiVersion", _api_version(plural))
                item.setdefault("kind", KINDS[plural])
                found.append((plural, item))
        if output == "name":
            for plural, item in found:
                meta = item.get("metadata") or {}
                sys.stdout.write(f"{SINGULAR[plural]}/{meta.get('name', '')}\n")
            return
        items = [item for _, item in found]
        print_items(items, "all", output=output, single=False, printer=printer)
        return
    blocks = []
    for plural in shown_plurals:
        document = api.table(plural, where, selector=selector)
        if not document.get("rows"):
            continue
        for row in document["rows"]:
            row["cells"][0] = f"{SINGULAR[plural]}/{row['cells'][0]}"
        blocks.append(
            render(
                document,
                wide=output == "wide",
                all_namespaces=where is None and plural not in CLUSTER_SCOPED,
                headers=headers,
                show_labels=show_labels,
            )
        )
    if not blocks:
        shown = "" if where is None else f" in {where} namespace"
        sys.stderr.write(f"No resources found{shown}.\n")
        return
    sys.stdout.write("\n\n".join(blocks) + "\n")


def _api_version(plural: str) -> str:
    found = resources.by_plural(plural)
    return f"{found.group}/v1" if found is not None and found.group else "v1"


def watch(
    api: NodeAPI,
    plural: str,
    name: str | None,
    *,
    where: str | None,
    output: str | None,
    headers: bool = True,
    selector: str | None = None,
    show_labels: bool = False,
    printer: Printer | None = None,
) -> None:
    """``get -w``: the pods there now, then each change as the daemon reports it, until
    interrupted. As kubectl prints a watch: the first rows as one table, the header
    printed once; each later row alone, its columns as wide as the header's or its own
    cells; ``-o name`` one line per event, ``-o json``/``yaml`` one object each. A watch
    the daemon ends as expired (410) starts anew, its pods' rows printed again."""
    from asynckubelet.cli.process import release_collector
    from asynckubelet.kubectl.tables import render

    release_collector()
    if plural != "pods":
        raise errors.DaemonError(f"watching {plural} is not supported: only pods are watched")
    table = output in (None, "wide")
    layout = {
        "wide": output == "wide",
        "all_namespaces": where is None,
        "headers": headers,
        "show_labels": show_labels,
    }
    headed = False
    while True:
        initial: list[dict[str, Any]] = []
        started = False
        chosen = {"selector": selector} if selector else {}
        for event in api.watch(where, name=name, table=table, **chosen):
            kind, body = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                if body.get("code") == 410:
                    break
                reason = str(body.get("reason") or "")
                raise errors.DaemonError(str(body.get("message") or "watch failed"), reason=reason)
            if kind == "BOOKMARK":
                if started:
                    continue
                if initial:
                    rows = [row for part in initial for row in part.get("rows") or []]
                    _write(render({**initial[0], "rows": rows}, header=not headed, **layout))
                    headed = True
                started = True
            elif not table:
                print_items(
                    [body], plural, output=output, single=True, separator=True, printer=printer
                )
                sys.stdout.flush()
            elif not started:
                initial.append(body)
            else:
                _write(render(body, header=not headed, **layout))
                headed = True
        else:
            raise errors.DaemonError("the node daemon ended the watch")


def _write(text: str) -> None:
    if text:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def print_table(
    document: dict[str, Any],
    *,
    where: str | None,
    wide: bool,
    headers: bool = True,
    show_labels: bool = False,
    namespaced: bool = True,
) -> None:
    """A ``Table`` laid out (``NAMESPACE`` first when ``where`` is None and the objects
    are ``namespaced``), or kubectl's ``No resources found`` on stderr."""
    from asynckubelet.kubectl.tables import render

    if not document.get("rows"):
        shown = "" if where is None else f" in {where} namespace"
        sys.stderr.write(f"No resources found{shown}.\n")
        return
    text = render(
        document,
        wide=wide,
        all_namespaces=where is None and namespaced,
        headers=headers,
        show_labels=show_labels,
    )
    sys.stdout.write(text + "\n")


def print_items(
    items: list[dict[str, Any]],
    plural: str,
    *,
    output: str | None,
    single: bool,
    separator: bool = False,
    printer: Printer | None = None,
) -> None:
    """The objects as YAML, JSON, ``kind/name`` lines or through a template ``printer``
    (the object when ``single``, else their List); a Secret never with its values. With
    ``separator`` a YAML document starts with ``---`` (one of a stream)."""
    for item in items:
        if plural in KINDS:
            item.setdefault("apiVersion", _api_version(plural))
            item.setdefault("kind", KINDS[plural])
        if plural == "secrets" or item.get("kind") == "Secret":
            item.pop("data", None)
            item.pop("stringData", None)
    if output == "name":
        for item in items:
            sys.stdout.write(f"{SINGULAR[plural]}/{(item.get('metadata') or {}).get('name', '')}\n")
        return
    document: dict[str, Any] = items[0] if single else as_list(items)
    if printer is not None:
        sys.stdout.write(printer(document))
    elif output == "json":
        sys.stdout.write(json.dumps(document, indent=4) + "\n")
    else:
        sys.stdout.write(("---\n" if separator else "") + kubectl_yaml(document))


_YAML_DUMPER: Any = None


def kubectl_yaml(document: Any) -> str:
    """``document`` as kubectl's ``-o yaml`` prints it (go-yaml, through sigs.k8s.io/yaml):
    keys sorted, a string that would read as another type (``"8080"``, ``"true"``, ``""``)
    in double quotes, one that needs quoting for its characters in single quotes, a string
    of several lines as a literal block (``|``), non-ASCII text as it is."""
    global _YAML_DUMPER
    import yaml

    if _YAML_DUMPER is None:

        class Dumper(yaml.SafeDumper):
            def choose_scalar_style(self) -> str:
                style: str = super().choose_scalar_style()
                event = self.event
                if (
                    style == "'"
                    and isinstance(event, yaml.ScalarEvent)
                    and event.tag == "tag:yaml.org,2002:str"
                    and not event.implicit[0]
                ):
                    return '"'
                return style

        def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
            if "\n" in value:
                return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
            return dumper.represent_str(value)

        Dumper.add_representer(str, text)
        _YAML_DUMPER = Dumper
    return str(yaml.dump(document, Dumper=_YAML_DUMPER, allow_unicode=True, sort_keys=True))


def as_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}


__all__ = [
    "as_list",
    "kubectl_yaml",
    "print_items",
    "print_table",
    "show",
    "show_all",
    "through_daemon",
    "watch",
]
