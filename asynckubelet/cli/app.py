"""The ``asynckubelet`` command tree: the Typer app, its groups, the options before the
command, and which module runs each command (:mod:`asynckubelet.cli.commands`).

A command's module is imported, and its options built, only when that command runs or
shows its help: a command line is a short process, and loading every command to run one
would cost more than most commands take. So the tree, with the one-line summary that
``asynckubelet --help`` lists, is written out here (a unit test keeps each summary equal to
the first line of its command's docstring), and the groups' help is Click's plain layout,
which needs neither the commands nor Rich. A command's own ``--help`` keeps Typer's
panels.

Command names, flags, environment variables, exit codes and output formats are an
interface that users and scripts rely on.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import typer
import typer.core
import typer.main
from typer._click import exceptions as click_errors

from asynckubelet.cli.coercion import use_plain_conversion
from asynckubelet.cli.options import BOOL, GlobalLogFormatOpt, GlobalLogLevelOpt, bare_booleans


@dataclass(frozen=True)
class Command:
    """A command: ``function`` of ``asynckubelet.cli.commands.<module>``."""

    module: str
    function: str
    summary: str


@dataclass(frozen=True)
class Group:
    summary: str
    commands: Mapping[str, Command]


TREE: dict[str, Command | Group] = {
    "run": Command(
        "run",
        "run",
        "Run the Pods in FILES on Docker, stream their output, exit with their exit code.",
    ),
    "validate": Command(
        "validate",
        "validate",
        "Check manifests as an API server would, creating nothing (exit 1 when rejected).",
    ),
    "serve": Command(
        "serve",
        "serve",
        "Run the node until a signal: the objects applied to it and the static pods of its "
        "manifest directory, its local API on <state-dir>/api.sock, the HTTP endpoints.",
    ),
    "apply": Command(
        "apply",
        "apply",
        "Hand manifests to the node daemon (`asynckubelet serve`), which admits and keeps "
        "every object: Pods, ConfigMaps, Secrets, Namespaces, Services, Deployments, "
        "ReplicaSets, StatefulSets, Jobs, DaemonSets, CronJobs. -f takes files and folders "
        "(-R: with their sub-folders), - for stdin; -k a kustomization.",
    ),
    "delete": Command(
        "delete",
        "delete",
        "Delete objects: `delete KIND NAME...` (pod, configmap, secret, deployment, job...), "
        "`delete KIND --all` (every one of the namespace) or `delete -f FILE...` (every "
        "object the files or folders hold; -R: their sub-folders too); pods gracefully, "
        "waiting until they are gone (exit 1 naming those still there after --timeout).",
    ),
    "get": Command(
        "get",
        "get",
        "List pods, configmaps, secrets, services, endpoints, deployments, replicasets, "
        "statefulsets, jobs, daemonsets, cronjobs, events, namespaces or all as `kubectl get` "
        "does (asking the node daemon); -l selects by label; -w then prints every change of "
        "the pods.",
    ),
    "describe": Command(
        "describe",
        "describe",
        "Show a pod, service, cronjob, daemonset, deployment, job, replicaset or statefulset as "
        "`kubectl describe` does, its events at the bottom; without a NAME, every one of that "
        "type in the namespace.",
    ),
    "logs": Command(
        "logs",
        "logs",
        "Print a container's output (--all-containers: every container's); with -f keep "
        "following, across restarts.",
    ),
    "exec": Command(
        "exec", "exec_", "Run a command in a pod's container; exits with the command's exit code."
    ),
    "port-forward": Command(
        "port_forward",
        "port_forward",
        "Forward local ports to a pod's: pod/NAME, svc/NAME (its targetPort) or deploy/NAME "
        "(its first Running pod), as `kubectl port-forward`; Ctrl-C ends it.",
    ),
    "debug": Command(
        "debug",
        "debug",
        "Add an ephemeral container to a running pod, as `kubectl debug POD --image IMAGE`: "
        "--target shares a container's processes; with -i (and -t) attach to it.",
    ),
    "doctor": Command(
        "doctor",
        "doctor",
        "Check what a node needs, with a fix for each problem (exit 1 when any).",
    ),
    "reset": Command(
        "reset",
        "reset",
        "Remove the pod network the node made on this host (bridge, firewall rules, address "
        "records) once no pod uses it.",
    ),
    "kubeconfig": Command(
        "kubeconfig",
        "kubeconfig",
        "Print the path of the node's kubeconfig (written by `serve`); --merge adds its "
        "context to ~/.kube/config.",
    ),
    "top": Group(
        "CPU and memory in use, read by the node daemon from the engine's stats, as "
        "`kubectl top` prints them.",
        {
            "pods": Command(
                "top",
                "pods",
                "CPU (cores) and memory (bytes) of the pods (--containers: of each container).",
            ),
            "nodes": Command(
                "top", "nodes", "CPU (cores, % of allocatable) and memory (bytes, %) of the node."
            ),
        },
    ),
    "version": Command(
        "version",
        "version",
        "Print the client's version, and the node daemon's (`serve`) when one answers.",
    ),
    "images": Group(
        "Build the images a node needs from local material only; load your own.",
        {
            "build-pause": Command(
                "images",
                "build_pause",
                "Compile the project's pause program statically and load it as a sandbox image.",
            ),
            "build-busybox": Command(
                "images",
                "build_busybox",
                "Pack the host's static busybox as a small general-purpose image.",
            ),
            "build-probe": Command(
                "images",
                "build_probe",
                "Compile the probe helper statically and load it (the node does so itself when "
                "it first needs it; for engines the node cannot reach the pods of).",
            ),
            "load": Command(
                "images",
                "load",
                "Load your own images from a `docker save` archive into the engine the node "
                "uses, as `docker load` does: `images load FILE.tar`, or `docker save IMAGE | "
                "asynckubelet images load -` (an engine on another machine: --docker-host).",
            ),
        },
    ),
    "engine": Group(
        "Make sure a Docker engine runs: the one there, or our own.",
        {
            "start": Command(
                "engine",
                "start",
                "Use the engine that answers; else start our own dockerd (root, dockerd "
                "installed).",
            ),
            "stop": Command(
                "engine", "stop", "Stop the engine that `engine start` started (never any other)."
            ),
            "status": Command(
                "engine",
                "status",
                "Which engine the commands use, and whether it answers (exit 1 when none does).",
            ),
        },
    ),
}


def load(name: str, entry: Command | Group) -> typer.core.TyperCommand | typer.core.TyperGroup:
    """The Click command of one entry of the tree, its module imported now."""
    if isinstance(entry, Group):
        return LazyGroup(name=name, entries=entry.commands, help=entry.summary)
    module = importlib.import_module(f"asynckubelet.cli.commands.{entry.module}")
    one = typer.Typer(add_completion=False)
    one.command(name, cls=_Command)(getattr(module, entry.function))
    command = typer.main.get_command(one)
    if not isinstance(command, typer.core.TyperCommand):
        raise TypeError(f"{name}: Typer built a {type(command).__name__}, not a command")
    return command


class _Argument(typer.core.TyperArgument):
    """An argument whose help shows its metavar (``POD``), not Python's type (``<str>``),
    and whose usage reads as kubectl's: ``FILE...``, ``(POD | TYPE/NAME)``, ``[NAME]...``."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        name = self.metavar or (self.name or "").upper()
        repeated = self.nargs != 1 and not name.endswith("...")
        if " | " in name:
            name = f"({name})"
        if not self.required:
            name = f"[{name}]"
        return [name + ("..." if repeated else "")]


def unwrapped(text: str | None) -> str | None:
    """A docstring's paragraphs each on one line, for the help to wrap to the terminal:
    the source's line breaks are where the source wraps, not where a terminal does."""
    if not text:
        return text
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(
        p if p.startswith("\b") else " ".join(line.strip() for line in p.splitlines())
        for p in paragraphs
    )


class _Command(typer.core.TyperCommand):
    """A command whose options are converted by :mod:`asynckubelet.cli.coercion`, whose
    help names values by what they are (``--tail LINES``, ``POD``) and shows no type for
    flags, as kubectl's usage lines do, and whose kubectl booleans (metavar ``BOOL``) may
    be given alone (:func:`~asynckubelet.cli.options.bare_booleans`)."""

    def __init__(self, *args: Any, **attrs: Any) -> None:
        super().__init__(*args, **attrs)
        self.help = unwrapped(self.help)
        use_plain_conversion(self.params)
        for param in self.params:
            if type(param) is typer.core.TyperArgument:
                param.__class__ = _Argument

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        use_plain_conversion([option] if option is not None else [])
        if option is not None:
            option.metavar = ""
        return option

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        flags = {
            name
            for param in self.params
            if isinstance(param, typer.core.TyperOption) and param.metavar == BOOL
            for name in param.opts
        }
        return super().parse_args(ctx, bare_booleans(args, flags) if flags else args)


class _Commands(MutableMapping[str, Any]):
    """A group's commands by name; each is loaded the first time it is looked up."""

    def __init__(self, entries: Mapping[str, Command | Group]) -> None:
        self._entries = entries
        self._loaded: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded:
            self._loaded[name] = load(name, self._entries[name])
        return self._loaded[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        raise TypeError("the command tree is fixed")

    def __iter__(self) -> Iterator[str]:
        yield from self._entries
        yield from (name for name in self._loaded if name not in self._entries)

    def __len__(self) -> int:
        return len(set(self._entries) | set(self._loaded))


class LazyGroup(typer.core.TyperGroup):
    """A group whose commands are imported when one is used, and whose help lists them
    from their summaries alone."""

    entries: ClassVar[Mapping[str, Command | Group]] = {}

    def __init__(self, *, entries: Mapping[str, Command | Group] | None = None, **attrs: Any):
        attrs["rich_markup_mode"] = None
        super().__init__(**attrs)
        self.commands = _Commands(self.entries if entries is None else entries)
        use_plain_conversion(self.params)

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        use_plain_conversion([option] if option is not None else [])
        return option

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        entries = self.commands._entries if isinstance(self.commands, _Commands) else {}
        rows = [(name, entry.summary) for name, entry in entries.items()]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class _Root(LazyGroup):
    """The command tree, whose usage errors (an unknown flag or command, a bad value) are
    one line, as every other failure (:func:`asynckubelet.cli.output.usage_error`)."""

    entries = TREE

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            result = super().main(
                args,
                prog_name,
                complete_var,
                standalone_mode=False,
                windows_expand_args=windows_expand_args,
                **extra,
            )
        except click_errors.ClickException as e:
            from asynckubelet.cli import output

            code = output.usage_error(e)
            if not standalone_mode:
                raise
            sys.exit(code)
        except typer.Abort:
            if not standalone_mode:
                raise
            sys.exit(1)
        if not standalone_mode:
            return result
        sys.exit(result if isinstance(result, int) else 0)


app = typer.Typer(
    name="asynckubelet",
    cls=_Root,
    help="The kubelet's pod lifecycle on your own Docker engine: run Kubernetes Pod YAML.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
    # Click wraps help at 80 columns whatever the terminal; a wider one gets up to 120.
    context_settings={"max_content_width": 120},
)


def _show_version(value: bool) -> None:
    if value:
        from asynckubelet._version import __version__

        print(f"asynckubelet {__version__}")
        raise typer.Exit(0)


@app.callback()
def _global_options(
    log_level: GlobalLogLevelOpt = None,
    log_format: GlobalLogFormatOpt = None,
    show_version: Annotated[
        bool,
        typer.Option(
            "--version",
            metavar="",
            is_eager=True,
            callback=_show_version,
            help="Print the version and exit (`asynckubelet version` also asks the daemon).",
        ),
    ] = False,
) -> None:
    """Options for every command; each command takes them too (the command's own win)."""
    from asynckubelet.cli import output

    output.set_global_logging(log_level=log_level, log_format=log_format)


def main() -> None:
    app()
