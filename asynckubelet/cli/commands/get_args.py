"""``get``'s words and options, declared once as plain data, and the request a command
line of them makes.

``get`` is what people and scripts run in a loop, and through the daemon its real work
(one request on a unix socket, a table printed by the daemon) takes milliseconds; loading
Typer, Click and Rich takes several times that. So the command line's entry point reads a
plain ``get`` (one type, at most one name, only the options below) with :func:`plain`
before it loads anything else, and
:func:`~asynckubelet.cli.commands.get_output.through_daemon` serves it when a daemon
answers. Everything else (another command, ``--help``, a logging option, several names or
types, a value the command refuses, no daemon answering) goes to the ``get`` command. Its
Typer options are built from the same :class:`Flag` records (in
:mod:`asynckubelet.cli.options`) and it checks its arguments with the same
:func:`same_type` and :func:`single`, so an option is declared once, here, and both paths
make the same request of a command line.

It imports no third-party package, nor ``typing`` or ``dataclasses`` at run time: it is on
the path of a ``get`` through the daemon (so :class:`Flag` is a plain read-only class).
"""

from __future__ import annotations

from asynckubelet.kubectl import resources

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

LISTED = (
    "pods",
    "configmaps",
    "secrets",
    "services",
    "deployments",
    "replicasets",
    "statefulsets",
    "jobs",
    "daemonsets",
    "cronjobs",
    "namespaces",
)
"""What ``get`` lists (kubectl's names, short names and ``.group`` forms of these)."""
ALL = (
    "pods",
    "services",
    "daemonsets",
    "deployments",
    "replicasets",
    "statefulsets",
    "cronjobs",
    "jobs",
)
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
"""kubectl's names (and short names) of the resources the node keeps -> the plural."""
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


class Flag:
    """One option: its names, the parameter it sets (``dest``), the value's name in the
    help (``metavar``; empty for a flag, which takes no value), its default, help text and
    environment variable. Read-only once made."""

    __slots__ = ("default", "dest", "envvar", "help", "metavar", "names")

    names: tuple[str, ...]
    dest: str
    metavar: str
    default: Any
    help: str
    envvar: str | None

    def __init__(
        self,
        *names: str,
        dest: str,
        metavar: str = "",
        default: Any = None,
        help: str,
        envvar: str | None = None,
    ) -> None:
        for key, value in zip(
            self.__slots__, (default, dest, envvar, help, metavar, names), strict=True
        ):
            object.__setattr__(self, key, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Flag is read-only ({name})")

    @property
    def takes_value(self) -> bool:
        return bool(self.metavar)


NAMESPACE = Flag(
    "--namespace",
    "-n",
    dest="namespace",
    metavar="NAMESPACE",
    default="default",
    help="The namespace of the objects.",
)
ALL_NAMESPACES = Flag(
    "--all-namespaces",
    "-A",
    dest="all_namespaces",
    default=False,
    help="Objects of every namespace (a NAMESPACE column first).",
)
OUTPUT = Flag(
    "--output",
    "-o",
    dest="output",
    metavar="FORMAT",
    help="Output format: wide (more columns), yaml, json, name (kind/name), "
    "jsonpath=TEMPLATE, jsonpath-file=FILE, jsonpath-as-json=TEMPLATE, "
    "custom-columns=HEADER:.path,... or custom-columns-file=FILE (kubectl's templates).",
)
ALLOW_MISSING_TEMPLATE_KEYS = Flag(
    "--allow-missing-template-keys",
    dest="allow_missing_template_keys",
    metavar="BOOL",
    default="true",
    help="With a jsonpath output, a field or map key the template names but an object "
    "lacks prints nothing (the default); =false makes it an error.",
)
WATCH = Flag(
    "--watch",
    "-w",
    dest="watch",
    default=False,
    help="After listing, print every change of the pods as it happens (kubectl's "
    "watch; asks the node daemon), until interrupted.",
)
NO_HEADERS = Flag(
    "--no-headers",
    dest="no_headers",
    default=False,
    help="Leave out the table's header line (kubectl's --no-headers), for scripts.",
)
SELECTOR = Flag(
    "--selector",
    "-l",
    dest="selector",
    metavar="SELECTOR",
    help="Only the objects whose labels match: key=value, key==value, key!=value, "
    "'key in (a,b)', 'key notin (a,b)', key, !key; commas AND them.",
)
SHOW_LABELS = Flag(
    "--show-labels",
    dest="show_labels",
    default=False,
    help="A LABELS column last: each object's labels, key=value by key (<none>).",
)
DOCKER_HOST = Flag(
    "--docker-host",
    "-H",
    dest="docker_host",
    metavar="URL",
    envvar="ASYNCKUBELET_DOCKER_HOST",
    help="Docker daemon address (default: DOCKER_HOST or local socket).",
)
NODE_NAME = Flag(
    "--node-name",
    dest="node_name",
    metavar="NAME",
    envvar="ASYNCKUBELET_NODE_NAME",
    help="Node name (ownership label; pod UIDs derive from it); default: hostname.",
)
STATE_DIR = Flag(
    "--state-dir",
    dest="state_dir",
    metavar="DIR",
    envvar="ASYNCKUBELET_STATE_DIR",
    help="Node state (manifests, statuses, events); default /var/lib/asynckubelet as "
    "root, else ~/.local/state/asynckubelet.",
)
INSTANCE = Flag(
    "--instance",
    dest="instance",
    metavar="NAME",
    default="",
    envvar="ASYNCKUBELET_INSTANCE",
    help="Keep this node apart from every other on the host: its state dir, node name, "
    "bridge, pod and Service ranges (free ones), listen port and network records derive "
    "from NAME (a DNS label, at most 32 characters); options given still win. Client "
    "commands reach that instance's daemon.",
)
"""Every command's, not only ``get``'s (see :mod:`asynckubelet.cli.instance`)."""
FLAGS = (
    NAMESPACE,
    ALL_NAMESPACES,
    OUTPUT,
    WATCH,
    NO_HEADERS,
    SELECTOR,
    SHOW_LABELS,
    ALLOW_MISSING_TEMPLATE_KEYS,
    STATE_DIR,
    NODE_NAME,
    DOCKER_HOST,
    INSTANCE,
)
"""``get``'s options, its node's included (the logging options are not read here)."""
_BY_NAME = {name: flag for flag in FLAGS for name in flag.names}


class Refused(Exception):
    """Arguments ``get`` refuses, with kubectl's words for why."""


def parse(argv: list[str]) -> dict[str, Any] | None:
    """``get``'s options in ``argv`` (after the program name) by parameter, its
    positional arguments as ``args``; None when ``argv`` is not ``get`` or holds
    anything but :data:`FLAGS` (a word only the full command line reads)."""
    if not argv or argv[0] != "get":
        return None
    found: dict[str, Any] = {flag.dest: flag.default for flag in FLAGS}
    positional: list[str] = []
    words = iter(argv[1:])
    for word in words:
        flag = _BY_NAME.get(word)
        if flag is not None and flag.metavar == "BOOL":
            return None
        if flag is not None and not flag.takes_value:
            found[flag.dest] = True
        elif flag is not None:
            value = next(words, None)
            if value is None or value.startswith("-"):
                return None
            found[flag.dest] = value
        elif word.startswith("--") and "=" in word:
            key, value = word.split("=", 1)
            flag = _BY_NAME.get(key)
            if flag is None or not flag.takes_value:
                return None
            found[flag.dest] = value
        elif word.startswith("-") and not word.startswith("--") and len(word) > 2:
            flag = _BY_NAME.get(word[:2])
            if flag is None or not flag.takes_value:
                return None
            found[flag.dest] = word[2:]
        elif word.startswith("-"):
            return None
        else:
            positional.append(word)
    found["args"] = positional
    return found


def plain(argv: list[str]) -> dict[str, Any] | None:
    """What :func:`single` makes of ``argv`` when it is a plain ``get`` (one type, at most
    one name, only :data:`FLAGS`) that the command would accept; else None."""
    found = parse(argv)
    if found is None:
        return None
    kind, *names = found.pop("args") or [""]
    try:
        kind, names = same_type(kind, names, selector=found["selector"])
        if not kind or len(names) > 1 or "," in kind:
            return None
        request = single(kind, names[0] if names else None, found)
    except Refused:
        return None
    return request if request["name"] != "" else None


def same_type(kind: str, names: list[str], *, selector: str | None) -> tuple[str, list[str]]:
    """``TYPE NAME...`` as given, or the type ``TYPE/NAME TYPE/NAME...`` share and their
    names; refused with a name beside a label selector."""
    if "/" in kind and names:
        kind, _, name = kind.partition("/")
        found = [name]
        for ref in names:
            other, sep, other_name = ref.partition("/")
            if not sep:
                raise Refused(
                    "there is no need to specify a resource type as a separate argument when "
                    "passing arguments in resource/name form"
                )
            if RESOURCES.get(other) != RESOURCES.get(kind):
                raise Refused("a resource cannot be retrieved by name across several types")
            found.append(other_name)
        names = found
    if selector and (names or "/" in kind):
        raise Refused("name cannot be provided when a selector is specified")
    return kind, names


def single(kind: str, name: str | None, options: dict[str, Any]) -> dict[str, Any]:
    """The request ``get TYPE [NAME]`` (or ``get TYPE/NAME``) with ``options`` makes:
    ``options`` with the resource's ``plural`` and the object's ``name`` (None: every
    one), as :func:`asynckubelet.cli.commands.get_output.show` takes it."""
    plural = plural_of(kind.split("/", 1)[0], shown=kind)
    if "/" in kind and name is None:
        name = kind.split("/", 1)[1]
    check_output(options.get("output"))
    check_template_keys(options)
    if name is not None and options.get("all_namespaces"):
        raise Refused("a resource cannot be retrieved by name across all namespaces")
    if plural == "all" and name is not None:
        raise Refused('a resource cannot be retrieved by name across all types ("all")')
    return {**options, "plural": plural, "name": name}


def plural_of(kind: str, *, shown: str | None = None) -> str:
    """The plural of a type ``get`` lists (kubectl's names), or kubectl's error naming
    ``shown`` (the argument as given)."""
    plural = RESOURCES.get(kind)
    if plural is None:
        raise Refused(f'the server doesn\'t have a resource type "{shown or kind}"')
    return plural


def check_output(output: str | None) -> None:
    """kubectl's error for an output format ``get`` has no printer for, or for a template
    (``jsonpath=...``, ``custom-columns=...``) it would not take."""
    if output in OUTPUTS:
        return
    from asynckubelet.cli.commands import get_printers

    if get_printers.split(output) is None:
        allowed = sorted([*filter(None, OUTPUTS), *get_printers.FORMATS])
        raise Refused(
            f'unable to match a printer suitable for the output format "{output}", '
            f"allowed formats are: {','.join(allowed)}"
        )
    get_printers.printer(output)


def check_template_keys(options: dict[str, Any]) -> None:
    """kubectl's error for an ``--allow-missing-template-keys`` that is not a boolean."""
    from asynckubelet.cli.commands import get_printers

    get_printers.parse_bool(
        options.get("allow_missing_template_keys", "true"), ALLOW_MISSING_TEMPLATE_KEYS.names[0]
    )


def all_plurals() -> list[str]:
    """What ``get all`` lists."""
    return [p for p in ALL if resources.by_plural(p) is not None]


__all__ = [
    "FLAGS",
    "KINDS",
    "OUTPUTS",
    "RESOURCES",
    "Flag",
    "Refused",
    "all_plurals",
    "check_output",
    "check_template_keys",
    "parse",
    "plain",
    "plural_of",
    "same_type",
    "single",
]
