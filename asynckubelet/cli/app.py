"""The ``asynckubelet`` command tree: the Typer app, its sub-apps, the options before the
command, and which module runs each command (:mod:`asynckubelet.cli.commands`).

Command names, flags, environment variables, exit codes and output formats are an
interface that users and scripts rely on.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer
import typer._click as click
import typer.core
from typer._click import exceptions as click_errors

from asynckubelet.cli import output
from asynckubelet.cli.commands import (
    apply,
    delete,
    describe,
    doctor,
    engine,
    exec,
    get,
    images,
    logs,
    run,
    serve,
    validate,
    version,
)
from asynckubelet.cli.options import GlobalLogFormatOpt, GlobalLogLevelOpt


class _Argument(typer.core.TyperArgument):
    """An argument whose help shows its metavar (``POD``), not Python's type (``<str>``)."""

    def display_type_rich(self, ctx: click.Context) -> str | None:
        return None


def _kubectl_like(command: typer.core.TyperCommand | typer.core.TyperGroup) -> None:
    for param in command.params:
        if type(param) is typer.core.TyperArgument:
            param.__class__ = _Argument


class _Command(typer.core.TyperCommand):
    """A command whose help names values by what they are (``--tail LINES``, ``POD``) and
    shows no type for flags, as kubectl's usage lines do."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _kubectl_like(self)

    def get_help_option(self, ctx: click.Context) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option


class _Group(typer.core.TyperGroup):
    """The command tree, whose usage errors (an unknown flag or command, a bad value) are
    one line, as every other failure (:func:`output.usage_error`)."""

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

    def get_help_option(self, ctx: click.Context) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option


app = typer.Typer(
    name="asynckubelet",
    cls=_Group,
    help="The kubelet's pod lifecycle on your own Docker engine: run Kubernetes Pod YAML.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
images_app = typer.Typer(
    cls=_Group, help="Build the images a node needs, from local material only."
)
app.add_typer(images_app, name="images")
engine_app = typer.Typer(
    cls=_Group, help="Make sure a Docker engine runs: the one there, or our own."
)
app.add_typer(engine_app, name="engine")


def _show_version(value: bool) -> None:
    if value:
        from asynckubelet import __version__

        output.out.print(f"asynckubelet {__version__}", markup=False)
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
    output.set_global_logging(log_level=log_level, log_format=log_format)


app.command("run", cls=_Command)(run.run)
app.command("validate", cls=_Command)(validate.validate)
app.command("serve", cls=_Command)(serve.serve)
app.command("apply", cls=_Command)(apply.apply)
app.command("delete", cls=_Command)(delete.delete)
app.command("get", cls=_Command)(get.get)
app.command("describe", cls=_Command)(describe.describe)
app.command("logs", cls=_Command)(logs.logs)
app.command("exec", cls=_Command)(exec.exec_)
app.command("doctor", cls=_Command)(doctor.doctor)
app.command("version", cls=_Command)(version.version)
images_app.command("build-pause", cls=_Command)(images.build_pause)
images_app.command("build-busybox", cls=_Command)(images.build_busybox)
images_app.command("build-probe", cls=_Command)(images.build_probe)
engine_app.command("start", cls=_Command)(engine.start)
engine_app.command("stop", cls=_Command)(engine.stop)
engine_app.command("status", cls=_Command)(engine.status)


def main() -> None:
    app()
