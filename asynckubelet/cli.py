"""The ``asynckubelet`` command line: parses, calls the library, renders.

Command names, flags and output formats are an interface that users and scripts rely on.
Pod output goes to stdout (stderr lines to stderr), prefixed ``pod/container``; progress
and diagnostics go to stderr, so ``asynckubelet run pod.yaml > out.txt`` captures only
what the pod printed.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Annotated

import anyio
import typer
from lightkube.models.core_v1 import Pod, PodStatus
from loguru import logger
from rich.console import Console
from rich.markup import escape

from asynckubelet import errors
from asynckubelet.docker import DockerClient, LogLine
from asynckubelet.docker.engine import own_engine, resolve_docker_url
from asynckubelet.images import build as image_build
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager

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

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

_COLORS = ["cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan"]


def _setup_logging(verbose: int) -> None:
    logger.remove()
    logger.enable("asynckubelet")
    level = "DEBUG" if verbose > 1 else "INFO" if verbose else "WARNING"
    logger.add(sys.stderr, level=level)


def _fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"[red]error:[/red] {escape(message)}")
    return typer.Exit(code)


DockerHostOpt = Annotated[
    str | None,
    typer.Option(
        "--docker-host", "-H", help="Docker daemon address (default: DOCKER_HOST or local socket)."
    ),
]
VerboseOpt = Annotated[
    int, typer.Option("--verbose", "-v", count=True, help="More logging (-vv: debug).")
]


@images_app.command("build-pause")
def build_pause(
    tag: Annotated[str, typer.Option("--tag", "-t", help="Image reference to create.")] = (
        image_build.DEFAULT_PAUSE_TAG
    ),
    docker_host: DockerHostOpt = None,
    verbose: VerboseOpt = 0,
) -> None:
    """Compile the project's pause program statically and load it as a sandbox image."""
    _setup_logging(verbose)

    async def go() -> str:
        async with DockerClient(url=docker_host) as docker:
            return await image_build.build_pause_image(docker, tag=tag)

    try:
        image_id = anyio.run(go)
    except errors.AsyncKubeletError as e:
        raise _fail(str(e)) from None
    out.print(f"{tag} {image_id}")


@images_app.command("build-busybox")
def build_busybox(
    tag: Annotated[str, typer.Option("--tag", "-t", help="Image reference to create.")] = (
        image_build.DEFAULT_BUSYBOX_TAG
    ),
    busybox: Annotated[
        Path, typer.Option("--busybox", help="A static busybox binary (Debian: busybox-static).")
    ] = Path("/bin/busybox"),
    docker_host: DockerHostOpt = None,
    verbose: VerboseOpt = 0,
) -> None:
    """Pack the host's static busybox as a small general-purpose image."""
    _setup_logging(verbose)

    async def go() -> str:
        async with DockerClient(url=docker_host) as docker:
            return await image_build.build_busybox_image(docker, tag=tag, busybox=busybox)

    try:
        image_id = anyio.run(go)
    except errors.AsyncKubeletError as e:
        raise _fail(str(e)) from None
    out.print(f"{tag} {image_id}")


async def _engine_answers(url: str | None) -> bool:
    async with DockerClient(url=url, retry_attempts=1) as docker:
        return await docker.ping()


@engine_app.command("start")
def engine_start(verbose: VerboseOpt = 0) -> None:
    """Use the engine that answers; else start our own dockerd (root, dockerd installed)."""
    _setup_logging(verbose)
    url = resolve_docker_url(None)
    if url is not None and anyio.run(_engine_answers, url):
        out.print(f"Docker engine answering at {url}")
        return
    daemon = own_engine()
    try:
        daemon.start()
    except errors.RuntimeUnavailable as e:
        raise _fail(str(e)) from None
    out.print(f"started Docker engine at {daemon.url} (data {daemon.root}, log {daemon.log})")


@engine_app.command("stop")
def engine_stop(
    purge: Annotated[
        bool, typer.Option("--purge", help="Also delete its images and data.")
    ] = False,
    verbose: VerboseOpt = 0,
) -> None:
    """Stop the engine that `engine start` started (never any other)."""
    _setup_logging(verbose)
    daemon = own_engine()
    if daemon.pid() is None and not purge:
        out.print("no engine of ours is running")
        return
    daemon.stop(remove=purge)
    out.print("stopped" + (" and removed its data" if purge else ""))


@engine_app.command("status")
def engine_status() -> None:
    """Which engine the commands use, and whether it answers (exit 1 when none does)."""
    url = resolve_docker_url(None)
    if url is not None and anyio.run(_engine_answers, url):
        out.print(f"Docker engine answering at {url}")
        return
    raise _fail("no Docker engine answers; run `asynckubelet engine start`")


class _Renderer:
    """Prefixes pod output and reports status changes."""

    def __init__(self, *, color: bool) -> None:
        self.color = color
        self.colors: dict[str, str] = {}
        self.last: dict[str, str] = {}

    def _prefix(self, pod: Pod, container: str) -> str:
        name = f"{pod.metadata.name if pod.metadata else ''}/{container}"
        color = self.colors.setdefault(name, _COLORS[len(self.colors) % len(_COLORS)])
        return f"[{color}]{escape(name)}[/{color}] | " if self.color else f"{name} | "

    def log(self, pod: Pod, container: str, line: LogLine) -> None:
        console = out if line.stream == "stdout" else err
        text = self._prefix(pod, container) + (escape(line.text) if self.color else line.text)
        console.print(text, markup=self.color, highlight=False)

    def status(self, pod: Pod, status: PodStatus) -> None:
        from asynckubelet.node.status import kubectl_status

        assert pod.metadata is not None
        shown = kubectl_status(pod, status)
        key = f"{pod.metadata.namespace}/{pod.metadata.name}"
        if self.last.get(key) != shown:
            self.last[key] = shown
            err.print(f"[dim]pod/{escape(pod.metadata.name or '')}: {escape(shown)}[/dim]")


@app.command("run")
def run(
    files: Annotated[list[str], typer.Argument(help="Manifest files or directories; - for stdin.")],
    keep: Annotated[
        bool, typer.Option("--keep", help="Keep the pod's containers at exit.")
    ] = False,
    node_name: Annotated[
        str | None,
        typer.Option("--node-name", help="Node name (ownership label); default: hostname."),
    ] = None,
    pause_image: Annotated[
        str | None,
        typer.Option(
            "--pause-image",
            help="Sandbox image (default: local build, else registry.k8s.io/pause:3.10).",
        ),
    ] = None,
    grace_period: Annotated[
        float | None, typer.Option("--grace-period", help="Seconds to wait on stop before SIGKILL.")
    ] = None,
    pod_security: Annotated[
        str,
        typer.Option(
            "--pod-security",
            help="Pod Security level to enforce: privileged, baseline, restricted.",
        ),
    ] = "baseline",
    lenient: Annotated[
        bool, typer.Option("--lenient", help="Unknown fields warn instead of failing.")
    ] = False,
    color: Annotated[bool, typer.Option("--color/--no-color", help="Colour the prefixes.")] = True,
    network: Annotated[
        str,
        typer.Option(
            "--network",
            help="Pod network: auto (bridge for a local daemon as root, else loopback), "
            "bridge, loopback.",
        ),
    ] = "auto",
    pod_cidr: Annotated[
        str, typer.Option("--pod-cidr", help="Pod addresses of the bridge network.")
    ] = "10.137.0.0/16",
    bridge: Annotated[
        str, typer.Option("--bridge", help="Node bridge of the bridge network.")
    ] = "akl0",
    docker_host: DockerHostOpt = None,
    verbose: VerboseOpt = 0,
) -> None:
    """Run the Pods in FILES on Docker, stream their output, exit with their exit code.

    Pods with restartPolicy Never or OnFailure end by themselves; Always pods run until
    SIGINT/SIGTERM, which stops every pod gracefully. The pods' containers are removed
    at exit unless --keep is given.
    """
    _setup_logging(verbose)
    from asynckubelet.manifests import LEVELS, load_manifests
    from asynckubelet.network.factory import BACKENDS, make_network_plugin
    from asynckubelet.node.runner import options_from_manifests, run_pods
    from asynckubelet.node.volumes import VolumeManager, default_root

    node = node_name or os.environ.get("ASYNCKUBELET_NODE_NAME") or None
    if pod_security not in LEVELS:
        raise _fail(f"--pod-security must be one of {', '.join(LEVELS)}, not {pod_security!r}")
    if network not in BACKENDS:
        raise _fail(f"--network must be one of {', '.join(BACKENDS)}, not {network!r}")
    try:
        manifests = load_manifests(
            files if len(files) > 1 else files[0],
            lenient=lenient,
            pod_security=pod_security,
            node_name=node,
        )
    except errors.ManifestError as e:
        raise _fail(str(e)) from None
    except OSError as e:
        raise _fail(str(e)) from None
    for warning in manifests.warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(str(warning))}")
    if not manifests.pods:
        raise _fail("no Pod found in the given manifests")

    config = RuntimeConfig(pause_image=pause_image, docker_url=docker_host)
    if node:
        config = RuntimeConfig(node_name=node, pause_image=pause_image, docker_url=docker_host)
    renderer = _Renderer(color=color and out.is_terminal)
    options = options_from_manifests(
        manifests, node_name=config.node_name, keep=keep, grace_period=grace_period
    )
    received: list[int] = []

    async def go() -> list[int]:
        stop = anyio.Event()
        volumes = VolumeManager(root=default_root(config.node_name), node_name=config.node_name)
        async with RuntimeManager(config, volumes=volumes) as rm:
            if not await rm.docker.ping():
                raise errors.RuntimeUnavailable(
                    f"cannot reach the Docker engine at {rm.docker.url}; is dockerd running?"
                )
            rm.network = make_network_plugin(
                network, docker=rm.docker, bridge=bridge, pod_cidr=pod_cidr
            )
            await rm.network.start()
            async with anyio.create_task_group() as tg:

                async def signals() -> None:
                    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                        async for signum in signals:
                            received.append(signum)
                            if stop.is_set():
                                err.print("[red]second signal: killing now[/red]")
                                options.grace_period = 0
                                tg.cancel_scope.cancel()
                                return
                            err.print("[dim]stopping pods gracefully (again to force)...[/dim]")
                            stop.set()

                tg.start_soon(signals, name="signals")
                outcomes = await run_pods(
                    rm,
                    manifests.pods,
                    stop=stop,
                    on_log=renderer.log,
                    on_status=renderer.status,
                    options=options,
                )
                tg.cancel_scope.cancel()
        codes = []
        for o in outcomes:
            if o.error:
                name = o.pod.metadata.name if o.pod.metadata else ""
                err.print(f"[red]pod/{escape(name or '')}: {escape(o.error)}[/red]")
            codes.append(o.exit_code if o.exit_code else (1 if o.phase == "Failed" else 0))
        return codes

    try:
        codes = anyio.run(go)
    except errors.AsyncKubeletError as e:
        raise _fail(str(e)) from None
    if received:
        raise typer.Exit(128 + received[0])
    raise typer.Exit(next((c for c in codes if c), 0))


@app.command("validate")
def validate(
    files: Annotated[list[str], typer.Argument(help="Manifest files or directories; - for stdin.")],
    output: Annotated[
        str, typer.Option("--output", "-o", help="Output format: text or json.")
    ] = "text",
    lenient: Annotated[
        bool, typer.Option("--lenient", help="Unknown fields warn instead of failing.")
    ] = False,
    pod_security: Annotated[
        str,
        typer.Option(
            "--pod-security",
            help="Pod Security level to enforce: privileged, baseline, restricted.",
        ),
    ] = "baseline",
    node_name: Annotated[
        str | None,
        typer.Option("--node-name", help="Node name the pod UIDs derive from; default: hostname."),
    ] = None,
) -> None:
    """Check manifests as an API server would, creating nothing (exit 1 when rejected)."""
    import json

    from asynckubelet.manifests import LEVELS, inspect_manifests

    if output not in ("text", "json"):
        raise _fail(f"--output must be text or json, not {output!r}", code=2)
    if pod_security not in LEVELS:
        raise _fail(
            f"--pod-security must be one of {', '.join(LEVELS)}, not {pod_security!r}", code=2
        )
    report = inspect_manifests(
        files,
        lenient=lenient,
        pod_security=pod_security,
        node_name=node_name or os.environ.get("ASYNCKUBELET_NODE_NAME") or None,
    )

    def entry(e: errors.FieldError) -> dict[str, str]:
        return {
            "source": e.source,
            "field": e.field,
            "reason": e.reason,
            "detail": e.detail,
            "message": str(e),
        }

    def ref(meta: object) -> dict[str, str | None]:
        return {k: getattr(meta, k, None) for k in ("namespace", "name", "uid")}

    m = report.manifests
    if output == "json":
        document = {
            "accepted": report.accepted,
            "errors": [entry(e) for e in report.errors],
            "warnings": [entry(w) for w in report.warnings],
            "pods": [ref(p.metadata) for p in m.pods],
            "configmaps": [ref(c.metadata) for c in m.configmaps],
            "secrets": [ref(s.metadata) for s in m.secrets],
        }
        print(json.dumps(document, indent=2))
    else:
        for w in report.warnings:
            out.print(f"[yellow]warning:[/yellow] {escape(w.source)}: {escape(str(w))}")
        for e in report.errors:
            out.print(f"[red]error:[/red] {escape(e.source)}: {escape(str(e))}")

        def count(n: int, noun: str) -> str:
            return f"{n} {noun}{'' if n == 1 else 's'}"

        if report.accepted:
            out.print(
                f"accepted: {count(len(m.pods), 'pod')}, {count(len(m.configmaps), 'configmap')}, "
                f"{count(len(m.secrets), 'secret')}, {count(len(report.warnings), 'warning')}"
            )
        else:
            out.print(f"rejected: {count(len(report.errors), 'error')}")
    raise typer.Exit(0 if report.accepted else 1)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
