"""``asynckubelet get`` through a running daemon, without loading the command-line framework.

``get`` is what people and scripts run in a loop, and through the daemon its real work
(one request on a unix socket, a table printed by the daemon) takes milliseconds; loading
Typer, Click, Rich and the Pydantic models Typer builds for each option took most of the
process's time, several times the request. So :func:`main` serves the plain forms of
``get`` here, with the standard library only: ``get KIND [NAME]`` with ``-n``/
``--namespace``, ``-A``/``--all-namespaces``, ``-o``/``--output`` (a value kubectl takes
here), ``-l``/``--selector``, ``--show-labels``, ``--state-dir``, ``--node-name`` and
``-H``/``--docker-host`` (which a daemon does not need). Anything else (another
command, ``--help``, a logging option, a value the command would refuse, no daemon
answering) is left to the full command line, which behaves the same for every form this
module serves and says what is wrong with the rest.

The printing helpers are the ``get`` command's own (:mod:`asynckubelet.cli.commands.get`
uses them too), so both paths print alike.
"""

from __future__ import annotations

import json
import os
import sys

from asynckubelet import errors
from asynckubelet.kubectl import resources

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from asynckubelet.api.protocol import NodeAPI

LISTED = (
    "pods",
    "configmaps",
    "secrets",
    "services",
    "deployments",
    "replicasets",
    "statefulsets",
    "jobs",
    "namespaces",
)
"""What ``get`` lists (kubectl's names, short names and ``.group`` forms of these)."""
ALL = ("pods", "services", "deployments", "replicasets", "statefulsets", "jobs")
"""What ``get all`` lists, in kubectl's order (those this node keeps)."""
RESOURCES = {
    name: r.plural
    for r in resources.RESOURCES
    if r.plural in LISTED
    for name in (
        r.plural,
        r.singular,
        *r.short_names,
        *((f"{r.singular}.{r.group}", f"{r.plural}.{r.group}") if r.group else ()),
    )
}
RESOURCES.update(dict.fromkeys(("endpoints", "ep"), "endpoints"))
RESOURCES.update(dict.fromkeys(("events", "event", "ev"), "events"))
RESOURCES["all"] = "all"
KINDS = {r.plural: r.kind for r in resources.RESOURCES}
SINGULAR = {r.plural: r.qualified for r in resources.RESOURCES}
KINDS["endpoints"] = "Endpoints"
SINGULAR["endpoints"] = "endpoints"
KINDS["events"] = "Event"
SINGULAR["events"] = "event"
CLUSTER_SCOPED = frozenset(r.plural for r in resources.RESOURCES if not r.namespaced)
"""What ``get`` lists without a namespace (no NAMESPACE column, ``-n`` ignored)."""
OUTPUTS = (None, "wide", "yaml", "json", "name")
_VALUED = {
    "-n": "namespace",
    "--namespace": "namespace",
    "-o": "output",
    "--output": "output",
    "--state-dir": "state_dir",
    "--node-name": "node_name",
    "-H": "docker_host",
    "--docker-host": "docker_host",
    "-l": "selector",
    "--selector": "selector",
}
_FLAGS = {
    "-A": "all_namespaces",
    "--all-namespaces": "all_namespaces",
    "-w": "watch",
    "--watch": "watch",
    "--no-headers": "no_headers",
    "--show-labels": "show_labels",
}


def parse(argv: list[str]) -> dict[str, Any] | None:
    """The ``get`` options in ``argv`` (after the program name), or None when they are
    not a form this module serves."""
    if not argv or argv[0] != "get":
        return None
    found: dict[str, Any] = {
        "namespace": "default",
        "all_namespaces": False,
        "output": None,
        "watch": False,
        "no_headers": False,
        "selector": None,
        "show_labels": False,
    }
    positional: list[str] = []
    words = iter(argv[1:])
    for word in words:
        if word in _FLAGS:
            found[_FLAGS[word]] = True
        elif word in _VALUED:
            value = next(words, None)
            if value is None or value.startswith("-"):
                return None
            found[_VALUED[word]] = value
        elif word.startswith("--") and "=" in word and word.split("=", 1)[0] in _VALUED:
            key, value = word.split("=", 1)
            found[_VALUED[key]] = value
        elif word.startswith("-o") and len(word) > 2 and not word.startswith("--"):
            found["output"] = word[2:]
        elif word.startswith("-"):
            return None
        else:
            positional.append(word)
    if not 1 <= len(positional) <= 2 or found["output"] not in OUTPUTS:
        return None
    target = _target(positional, all_namespaces=found["all_namespaces"])
    if target is None:
        return None
    found["plural"], found["name"] = target
    if found["selector"] is not None and found["name"] is not None:
        return None
    return found


def _target(positional: list[str], *, all_namespaces: bool) -> tuple[str, str | None] | None:
    """The resource's plural and the object's name (None: all of them) that ``get TYPE
    [NAME]`` or ``get TYPE/NAME`` asks for, or None when this module does not serve it."""
    kind = positional[0]
    name = positional[1] if len(positional) == 2 else None
    if "/" in kind:
        if name is not None:
            return None
        kind, name = kind.split("/", 1)
    if kind not in RESOURCES or name == "" or (name is not None and all_namespaces):
        return None
    if RESOURCES[kind] == "all" and name is not None:
        return None
    return RESOURCES[kind], name


def main(argv: list[str]) -> int | None:
    """Serve ``argv`` when it is a plain ``get`` and a daemon answers: the exit code;
    None leaves it to the full command line."""
    options = parse(argv)
    if options is None:
        return None
    from asynckubelet.api.client import NodeClient
    from asynckubelet.api.remote import RemoteNode
    from asynckubelet.node.locate import SOCKET_NAME, default_state_dir_path, socket_answers

    state_dir = options.get("state_dir") or os.environ.get("ASYNCKUBELET_STATE_DIR")
    path = os.path.join(state_dir or default_state_dir_path(), SOCKET_NAME)
    try:
        if not os.path.exists(path) or not socket_answers(path):
            return None
    except OSError:
        return None
    api = RemoteNode(NodeClient(path))
    try:
        show(api, options)
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
    plural, name, output = options["plural"], options["name"], options["output"]
    where = None if options["all_namespaces"] else options["namespace"]
    headers = not options.get("no_headers")
    labels = bool(options.get("show_labels"))
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
        print_items([one], plural, output=output, single=True)
        return
    items = api.list(plural, where, selector=selector)
    print_items(items, plural, output=output, single=False)


def all_plurals() -> list[str]:
    """What ``get all`` lists."""
    return [p for p in ALL if resources.by_plural(p) is not None]


def show_all(
    api: NodeAPI,
    *,
    where: str | None,
    output: str | None,
    headers: bool = True,
    plurals: list[str] | None = None,
    selector: str | None = None,
    show_labels: bool = False,
) -> None:
    """``get all`` (or ``get TYPE,TYPE...``: ``plurals``): a table per kind that has
    objects, names as ``kind.group/name``."""
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
        print_items([item for _, item in found], "all", output=output, single=False)
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
                if initial:
                    rows = [row for part in initial for row in part.get("rows") or []]
                    _write(render({**initial[0], "rows": rows}, header=not headed, **layout))
                    headed = True
                started = True
            elif not table:
                print_items([body], plural, output=output, single=True, separator=True)
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
) -> None:
    """The objects as YAML, JSON or ``kind/name`` lines; a Secret never with its values.
    With ``separator`` a YAML document starts with ``---`` (one of a stream)."""
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
    if output == "json":
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


__all__ = ["kubectl_yaml", "main", "parse", "print_items", "print_table", "show"]
