"""The ``asynckubelet`` command tree: the Typer app, its sub-apps, the options before the
command, and which module runs each command (:mod:`asynckubelet.cli.commands`).

Command names, flags, environment variables, exit codes and output formats are an
interface that users and scripts rely on.
"""

from __future__ import annotations

import typer

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
)
from asynckubelet.cli.options import GlobalLogFormatOpt, GlobalLogLevelOpt

app = typer.Typer(
    name="asynckubelet",
    help="The kubelet's pod lifecycle on your own Docker engine: run Kubernetes Pod YAML.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
images_app = typer.Typer(help="Build the images a node needs, from local material only.")
app.add_typer(images_app, name="images")
engine_app = typer.Typer(help="Make sure a Docker engine runs: the one there, or our own.")
app.add_typer(engine_app, name="engine")


@app.callback()
def _global_options(
    log_level: GlobalLogLevelOpt = None, log_format: GlobalLogFormatOpt = None
) -> None:
    """Options for every command; each command takes them too (the command's own win)."""
    output.set_global_logging(log_level=log_level, log_format=log_format)


app.command("run")(run.run)
app.command("validate")(validate.validate)
app.command("serve")(serve.serve)
app.command("apply")(apply.apply)
app.command("delete")(delete.delete)
app.command("get")(get.get)
app.command("describe")(describe.describe)
app.command("logs")(logs.logs)
app.command("exec")(exec.exec_)
app.command("doctor")(doctor.doctor)
images_app.command("build-pause")(images.build_pause)
images_app.command("build-busybox")(images.build_busybox)
images_app.command("build-probe")(images.build_probe)
engine_app.command("start")(engine.start)
engine_app.command("stop")(engine.stop)
engine_app.command("status")(engine.status)


def main() -> None:
    app()
