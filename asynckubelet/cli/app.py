"""The ``asynckubelet`` command tree: the Typer app, its sub-apps and the options before the
command. Each command lives in a module of its own under :mod:`asynckubelet.cli.commands`.

Command names, flags, environment variables, exit codes and output formats are an
interface that users and scripts rely on.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import anyio
import typer
from lightkube.models.core_v1 import Pod, PodStatus
from loguru import logger
from rich.markup import escape

from asynckubelet import errors
from asynckubelet.cli import output
from asynckubelet.cli.commands import doctor, engine, images, validate
from asynckubelet.cli.options import (
    DEFAULT_SERVICE_ACCOUNT_ISSUER,
    ClusterDomainOpt,
    DockerHostOpt,
    DualStackOpt,
    FirewallOpt,
    GlobalLogFormatOpt,
    GlobalLogLevelOpt,
    LogFormatOpt,
    LogLevelOpt,
    LogOptions,
    MasqueradeOpt,
    NamespaceOpt,
    NodeNameOpt,
    PodCIDRv6Opt,
    PodSecurityOpt,
    ServiceAccountIssuerOpt,
    StateDirOpt,
    VerboseOpt,
)
from asynckubelet.cli.output import command, err, out
from asynckubelet.docker import DockerClient, LogLine
from asynckubelet.docker.engine import resolve_docker_url
from asynckubelet.manifests import Level, Manifests
from asynckubelet.network import NetworkPlugin
from asynckubelet.network.factory import is_local_daemon
from asynckubelet.progress import PullDisplay, WaitDisplay
from asynckubelet.runtime import containers as ctr
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

_COLORS = ["cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan"]


@app.callback()
def _global_options(
    log_level: GlobalLogLevelOpt = None, log_format: GlobalLogFormatOpt = None
) -> None:
    """Options for every command; each command takes them too (the command's own win)."""
    output.set_global_logging(log_level=log_level, log_format=log_format)


images_app.command("build-pause")(images.build_pause)
images_app.command("build-busybox")(images.build_busybox)
images_app.command("build-probe")(images.build_probe)
engine_app.command("start")(engine.start)
engine_app.command("stop")(engine.stop)
engine_app.command("status")(engine.status)


def _setup_logging(
    verbose: int = 0,
    log_level: str | None = None,
    log_format: str | None = None,
    *,
    default: str = "WARNING",
) -> None:
    options = LogOptions(verbose=verbose, log_level=log_level, log_format=log_format)
    output.setup_logging(options, default=default)


def _fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"[red]error:[/red] {escape(message)}")
    return typer.Exit(code)


def _service_account_issuer(value: str) -> str:
    from asynckubelet.cli.options import check_issuer

    return check_issuer(value)


_commands: dict[str, Callable[..., None]] = {}


def _register(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def decorate(function: Callable[..., None]) -> Callable[..., None]:
        _commands[name] = command()(function)
        return function

    return decorate


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


@_register("run")
def run(
    files: Annotated[list[str], typer.Argument(help="Manifest files or directories; - for stdin.")],
    keep: Annotated[
        bool, typer.Option("--keep", help="Keep the pod's containers at exit.")
    ] = False,
    node_name: NodeNameOpt = None,
    pause_image: Annotated[
        str | None,
        typer.Option(
            "--pause-image",
            envvar="ASYNCKUBELET_PAUSE_IMAGE",
            help="Sandbox image (default: local build, else registry.k8s.io/pause:3.10).",
        ),
    ] = None,
    grace_period: Annotated[
        float | None,
        typer.Option(
            "--grace-period",
            envvar="ASYNCKUBELET_GRACE_PERIOD",
            help="Seconds to wait on stop before SIGKILL.",
        ),
    ] = None,
    pod_security: PodSecurityOpt = "baseline",
    lenient: Annotated[
        bool, typer.Option("--lenient", help="Unknown fields warn instead of failing.")
    ] = False,
    color: Annotated[bool, typer.Option("--color/--no-color", help="Colour the prefixes.")] = True,
    network: Annotated[
        str,
        typer.Option(
            "--network",
            envvar="ASYNCKUBELET_NETWORK",
            help="Pod network: auto (bridge for a local daemon as root, else docker), "
            "bridge, cni (plugins from /opt/cni/bin:/usr/lib/cni, config from /etc/cni/net.d "
            "else the project's cni/), docker (a Docker network of the node), loopback.",
        ),
    ] = "auto",
    pod_cidr: Annotated[
        str,
        typer.Option(
            "--pod-cidr",
            envvar="ASYNCKUBELET_POD_CIDR",
            help="Pod addresses of the bridge network.",
        ),
    ] = "10.137.0.0/16",
    bridge: Annotated[
        str,
        typer.Option(
            "--bridge", envvar="ASYNCKUBELET_BRIDGE", help="Node bridge of the bridge network."
        ),
    ] = "akl0",
    dual_stack: DualStackOpt = False,
    pod_cidr_v6: PodCIDRv6Opt = None,
    firewall: FirewallOpt = "iptables",
    masquerade: MasqueradeOpt = True,
    cluster_dns: Annotated[
        list[str] | None,
        typer.Option(
            "--cluster-dns",
            envvar="ASYNCKUBELET_CLUSTER_DNS",
            help="Cluster DNS server for ClusterFirst pods (repeatable); none: they fall "
            "back to the node's resolver, with a MissingClusterDNS warning.",
        ),
    ] = None,
    cluster_domain: ClusterDomainOpt = "cluster.local",
    service_account_issuer: ServiceAccountIssuerOpt = DEFAULT_SERVICE_ACCOUNT_ISSUER,
    docker_host: DockerHostOpt = None,
    verbose: VerboseOpt = 0,
    log_level: LogLevelOpt = None,
    log_format: LogFormatOpt = None,
) -> None:
    """Run the Pods in FILES on Docker, stream their output, exit with their exit code.

    Pods with restartPolicy Never or OnFailure end by themselves; Always pods run until
    SIGINT/SIGTERM, which stops every pod gracefully. The pods' containers are removed
    at exit unless --keep is given.
    """
    _setup_logging(verbose, log_level, log_format)
    from asynckubelet.manifests import LEVELS, load_manifests
    from asynckubelet.network.dns import DNSSettings
    from asynckubelet.network.factory import BACKENDS, make_network_plugin
    from asynckubelet.node.runner import options_from_manifests, run_pods
    from asynckubelet.node.volumes import VolumeManager, default_root

    node = node_name or None
    issuer = _service_account_issuer(service_account_issuer)
    if pod_security not in LEVELS:
        raise _fail(f"--pod-security must be one of {', '.join(LEVELS)}, not {pod_security!r}")
    if network not in BACKENDS:
        raise _fail(f"--network must be one of {', '.join(BACKENDS)}, not {network!r}")
    _check_firewall(firewall)
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
    for pod in manifests.pods:
        gates = [g.name for g in (pod.spec.schedulingGates if pod.spec else None) or []]
        if gates:
            name, ns, _ = ctr.pod_identity(pod)
            raise _fail(
                f"pod {ns}/{name} has scheduling gates ({', '.join(gates)}): it would stay "
                "SchedulingGated, and `run` has no API to remove them; remove "
                "spec.schedulingGates to run it, or apply it to `asynckubelet serve`, which "
                "starts it once an edit of its manifest removes them"
            )

    config = RuntimeConfig(pause_image=pause_image, docker_url=docker_host)
    if node:
        config = RuntimeConfig(node_name=node, pause_image=pause_image, docker_url=docker_host)
    dns = DNSSettings(cluster_dns=tuple(cluster_dns or ()), cluster_domain=cluster_domain)
    config = dataclasses.replace(config, dns=dns)
    renderer = _Renderer(color=color and out.is_terminal)
    options = options_from_manifests(
        manifests, node_name=config.node_name, keep=keep, grace_period=grace_period
    )
    received: list[int] = []

    async def go() -> list[int]:
        stop = anyio.Event()
        # Volumes are directories on this machine: only a local engine can mount them.
        volumes = (
            VolumeManager(
                root=default_root(config.node_name),
                node_name=config.node_name,
                service_account_issuer=issuer,
            )
            if is_local_daemon(resolve_docker_url(docker_host))
            else None
        )
        async with RuntimeManager(config, volumes=volumes) as rm:
            rm.images.listener = pulls
            if not await rm.docker.ping():
                raise errors.RuntimeUnavailable(
                    f"cannot reach the Docker engine at {rm.docker.url}; is dockerd running?"
                )
            rm.network = make_network_plugin(
                network,
                docker=rm.docker,
                bridge=bridge,
                pod_cidr=pod_cidr,
                pod_cidr_v6=_ipv6_cidr(dual_stack, pod_cidr_v6),
                firewall=firewall,
                masquerade=masquerade,
                node_name=config.node_name,
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

    pulls = PullDisplay(console=err, live=err.is_terminal)
    try:
        with pulls:
            codes = anyio.run(go)
    except errors.AsyncKubeletError as e:
        raise _fail(str(e)) from None
    if received:
        raise typer.Exit(128 + received[0])
    raise typer.Exit(next((c for c in codes if c), 0))


def _state_dir(value: Path | None) -> Path:
    from asynckubelet.node.access import default_state_dir

    return value if value is not None else default_state_dir()


def _node_name(value: str | None) -> str:
    import socket

    return value or socket.gethostname()


def _level(value: str) -> Level:
    from asynckubelet.manifests import LEVELS

    if value not in LEVELS:
        raise _fail(f"--pod-security must be one of {', '.join(LEVELS)}, not {value!r}", code=2)
    return value


def _ipv6_cidr(dual_stack: bool, pod_cidr_v6: str | None) -> str | None:
    """The IPv6 pod CIDR the options ask for; None: IPv4 only."""
    from asynckubelet.network.bridge import DEFAULT_POD_CIDR_V6

    if pod_cidr_v6:
        return pod_cidr_v6
    return DEFAULT_POD_CIDR_V6 if dual_stack else None


def _check_firewall(firewall: str) -> None:
    """Refuse an unknown ``--firewall``, and ``nftables`` without ``nft`` on PATH."""
    import shutil

    if firewall not in ("iptables", "nftables"):
        raise _fail(f"--firewall must be iptables or nftables, not {firewall!r}", code=2)
    if firewall == "nftables" and shutil.which("nft") is None:
        raise _fail(
            "--firewall nftables needs the nft binary (Debian package nftables), not found "
            "on PATH; install it or use --firewall iptables",
            code=2,
        )


def _network_plugin(
    name: str,
    docker: DockerClient,
    *,
    node_name: str,
    pod_cidr_v6: str | None = None,
    firewall: str = "iptables",
    masquerade: bool = True,
) -> NetworkPlugin:
    from asynckubelet.network import LoopbackPlugin

    if name == "loopback":
        return LoopbackPlugin()
    try:
        factory = importlib.import_module("asynckubelet.network.factory")
    except ImportError:
        raise _fail(f"--network {name!r} is not available here; use loopback", code=2) from None
    plugin: NetworkPlugin = factory.make_network_plugin(
        name,
        docker=docker,
        node_name=node_name,
        pod_cidr_v6=pod_cidr_v6,
        firewall=firewall,
        masquerade=masquerade,
    )
    return plugin


@_register("serve")
def serve(
    manifests: Annotated[
        Path | None,
        typer.Option(
            "--manifests",
            envvar="ASYNCKUBELET_MANIFESTS",
            help="Static pod manifest directory, watched (default <state-dir>/manifests).",
        ),
    ] = None,
    listen: Annotated[
        str,
        typer.Option(
            "--listen", envvar="ASYNCKUBELET_LISTEN", help="HOST:PORT of the HTTP endpoints."
        ),
    ] = "127.0.0.1:10255",
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            envvar="ASYNCKUBELET_ALLOW_REMOTE",
            help="Allow --listen on a non-loopback address.",
        ),
    ] = False,
    state_dir: StateDirOpt = None,
    node_name: NodeNameOpt = None,
    network: Annotated[
        str,
        typer.Option(
            "--network",
            envvar="ASYNCKUBELET_NETWORK",
            help="Network backend: loopback, bridge, auto.",
        ),
    ] = "loopback",
    dual_stack: DualStackOpt = False,
    pod_cidr_v6: PodCIDRv6Opt = None,
    firewall: FirewallOpt = "iptables",
    masquerade: MasqueradeOpt = True,
    pod_security: PodSecurityOpt = "baseline",
    pause_image: Annotated[
        str | None,
        typer.Option(
            "--pause-image",
            envvar="ASYNCKUBELET_PAUSE_IMAGE",
            help="Sandbox image (default: local build, else registry.k8s.io/pause:3.10).",
        ),
    ] = None,
    stop_pods: Annotated[
        bool,
        typer.Option(
            "--stop-pods-on-exit",
            envvar="ASYNCKUBELET_STOP_PODS_ON_EXIT",
            help="Stop and remove every pod on SIGINT/SIGTERM (default: leave them running "
            "for the next start to adopt, as the kubelet does).",
        ),
    ] = False,
    cluster_dns: Annotated[
        list[str] | None,
        typer.Option(
            "--cluster-dns",
            envvar="ASYNCKUBELET_CLUSTER_DNS",
            help="Cluster DNS server for ClusterFirst pods (repeatable).",
        ),
    ] = None,
    cluster_domain: ClusterDomainOpt = "cluster.local",
    service_account_issuer: ServiceAccountIssuerOpt = DEFAULT_SERVICE_ACCOUNT_ISSUER,
    docker_host: DockerHostOpt = None,
    verbose: VerboseOpt = 0,
    log_level: LogLevelOpt = None,
    log_format: LogFormatOpt = None,
) -> None:
    """Run the node: static pods from the manifest directory, HTTP endpoints, until a signal.

    Image pulls are logged, one line per change of a layer's state.
    """
    _setup_logging(verbose, log_level, log_format, default="INFO")
    from asynckubelet.network.dns import DNSSettings
    from asynckubelet.node.access import StateDir
    from asynckubelet.node.kubelet import Kubelet, KubeletConfig
    from asynckubelet.server import check_listen, parse_listen, serve_http

    level = _level(pod_security)
    _check_firewall(firewall)
    issuer = _service_account_issuer(service_account_issuer)
    state = _state_dir(state_dir)
    try:
        host, port = parse_listen(listen)
        check_listen(host, allow_remote=allow_remote)
    except ValueError as e:
        raise _fail(str(e), code=2) from None
    config = KubeletConfig(
        node_name=_node_name(node_name),
        state_dir=state,
        manifest_dir=manifests or StateDir(state).manifests,
        pause_image=pause_image,
        docker_url=docker_host,
        pod_security=level,
        leave_running=not stop_pods,
        dns=DNSSettings(cluster_dns=tuple(cluster_dns or ()), cluster_domain=cluster_domain),
        service_account_issuer=issuer,
    )

    async def go() -> None:
        async with DockerClient(url=docker_host) as docker:
            plugin = _network_plugin(
                network,
                docker,
                node_name=config.node_name,
                pod_cidr_v6=_ipv6_cidr(dual_stack, pod_cidr_v6),
                firewall=firewall,
                masquerade=masquerade,
            )
            async with Kubelet(config, docker=docker, network=plugin) as node:
                node.runtime.images.listener = PullDisplay(console=err, live=False, write=_log_pull)
                pid_file = StateDir(state).pid_file
                pid_file.write_text(f"{os.getpid()}\n")
                try:
                    async with anyio.create_task_group() as tg:
                        bound = await tg.start(
                            functools.partial(
                                serve_http, node, host=host, port=port, allow_remote=allow_remote
                            )
                        )
                        err.print(
                            f"node {config.node_name}: manifests {config.manifest_dir}, "
                            f"http://{host}:{bound}"
                        )
                        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as sigs:
                            async for signum in sigs:
                                err.print(f"[dim]{signal.Signals(signum).name}: stopping[/dim]")
                                break
                        tg.cancel_scope.cancel()
                finally:
                    pid_file.unlink(missing_ok=True)

    try:
        anyio.run(go)
    except errors.AsyncKubeletError as e:
        raise _fail(str(e)) from None
    except OSError as e:
        raise _fail(f"cannot listen on {listen}: {e}") from None


def _log_pull(image: str, text: str) -> None:
    logger.bind(image=image).info("pull {}: {}", image, text)


def _load_files(files: list[str], *, node: str, level: Level) -> Manifests:
    from asynckubelet.manifests import load_manifests

    try:
        loaded = load_manifests(files, pod_security=level, node_name=node)
    except errors.ManifestError as e:
        details = "\n".join(f"  {fe.source}: {fe}" for fe in e.errors)
        raise _fail(f"{e}\n{details}" if details else str(e)) from None
    except OSError as e:
        raise _fail(str(e)) from None
    for warning in loaded.warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(str(warning))}")
    return loaded


def _spec_key(pod: Pod) -> str:
    import json

    return json.dumps(pod.spec.to_dict() if pod.spec else {}, sort_keys=True)


@_register("apply")
def apply(
    files: Annotated[
        list[str], typer.Option("--filename", "-f", help="Manifest file (repeatable); - for stdin.")
    ],
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait until every pod is Ready or Succeeded.")
    ] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds --wait waits.")] = 300.0,
    state_dir: StateDirOpt = None,
    node_name: NodeNameOpt = None,
    pod_security: PodSecurityOpt = "baseline",
    docker_host: DockerHostOpt = None,
    verbose: VerboseOpt = 0,
    log_level: LogLevelOpt = None,
    log_format: LogFormatOpt = None,
) -> None:
    """Validate manifests, then hand them to the node (its manifest directory).

    A running `asynckubelet serve` on the same state dir starts or updates the pods at
    once; an edit restarts only the containers whose spec changed.
    """
    _setup_logging(verbose, log_level, log_format)
    from asynckubelet.node.access import StateDir, manifest_pods

    level = _level(pod_security)
    state = _state_dir(state_dir)
    node = _node_name(node_name)
    target = StateDir(state).manifests
    before = manifest_pods(target, node_name=node, pod_security=level)
    texts: list[tuple[str, str]] = []
    applied: list[Pod] = []
    for index, name in enumerate(files):
        loaded = _load_files([name], node=node, level=level)
        text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
        base = f"stdin-{index}.yaml" if name == "-" else Path(name).name
        if Path(base).suffix not in (".yaml", ".yml", ".json"):
            base += ".yaml"
        texts.append((base, text))
        applied.extend(loaded.pods)
    try:
        target.mkdir(parents=True, exist_ok=True)
        for base, text in texts:
            tmp = target / f".{base}.{os.getpid()}.tmp"
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(target / base)
    except OSError as e:
        raise _fail(f"cannot write into {target}: {e}") from None
    for pod in applied:
        assert pod.metadata is not None
        uid = pod.metadata.uid or ""
        verb = "created"
        if uid in before:
            verb = "unchanged" if _spec_key(before[uid]) == _spec_key(pod) else "configured"
        out.print(f"pod/{escape(pod.metadata.name or '')} {verb}")
    if not wait or not applied:
        return
    from asynckubelet.node.access import daemon_pid

    if daemon_pid(state) is None:
        raise _fail(f"no `asynckubelet serve` runs with state dir {state}; cannot --wait")
    try:
        anyio.run(functools.partial(_wait_applied, applied, state, node, docker_host, timeout))
    except errors.AsyncKubeletError as e:
        raise _fail(str(e)) from None


async def _wait_applied(
    pods: list[Pod], state: Path, node: str, docker_host: str | None, timeout: float
) -> None:
    from asynckubelet.node.access import daemon_pid, find_pod, read_pods
    from asynckubelet.node.status import (
        SCHEDULING_GATED,
        SCHEDULING_GATED_MESSAGE,
        kubectl_status,
    )
    from asynckubelet.runtime import naming

    pending = {ctr.pod_identity(p)[1::-1]: p for p in pods}
    last: dict[tuple[str, str], str] = {}
    display = WaitDisplay(console=err, live=err.is_terminal)
    async with RuntimeManager(RuntimeConfig(node_name=node, docker_url=docker_host)) as rm:
        with display, anyio.move_on_after(timeout) as scope:
            while pending:
                if daemon_pid(state) is None:
                    raise errors.RuntimeUnavailable("the node stopped while waiting")
                current = await read_pods(rm, state=state)
                for key, wanted in list(pending.items()):
                    ns, name = key
                    try:
                        pod = find_pod(current, namespace=ns, name=name)
                    except errors.NotFound:
                        last[key] = "not seen by the node yet"
                        continue
                    status = pod.status
                    if status is None or _spec_key(pod) != _spec_key(wanted):
                        last[key] = "not seen by the node yet"
                        continue
                    last[key] = _pod_state(pod)
                    if status.phase == "Failed":
                        raise errors.PodError(f"pod/{name} failed: {last[key]}")
                    if kubectl_status(pod, status) == SCHEDULING_GATED:
                        raise errors.PodError(
                            f"pod/{name} is SchedulingGated ({SCHEDULING_GATED_MESSAGE}); it "
                            "starts once spec.schedulingGates is removed from its manifest"
                        )
                    if status.phase == "Succeeded":
                        del pending[key]
                        continue
                    ready_condition = next(
                        (c for c in status.conditions or [] if c.type == "Ready"), None
                    )
                    if ready_condition is None or ready_condition.status != "True":
                        if ready_condition is not None and ready_condition.message:
                            last[key] += f"; {ready_condition.message}"
                        continue
                    runtime = await rm.get_status_of(wanted)
                    hashes = (
                        {c.name: naming.hash_container(c) for c in wanted.spec.containers}
                        if wanted.spec
                        else {}
                    )
                    current_hashes = {n: (runtime.find_container(n) or None) for n in hashes}
                    if all(
                        cs is not None and cs.hash == hashes[n] for n, cs in current_hashes.items()
                    ):
                        out.print(f"pod/{escape(name)} {escape(kubectl_status(pod, status))}")
                        del pending[key]
                if pending:
                    display.update({f"pod/{k[1]}": last.get(k, "") for k in pending})
                    await anyio.sleep(0.3)
        if scope.cancelled_caught:
            reasons = "; ".join(f"pod/{k[1]}: {v}" for k, v in last.items() if k in pending)
            raise errors.PodError(f"timed out after {timeout:g}s waiting for {reasons}")


def _pod_state(pod: Pod) -> str:
    from asynckubelet.node.status import kubectl_status

    status = pod.status
    if status is None:
        return "Unknown"
    parts = [kubectl_status(pod, status)]
    for c in [*(status.initContainerStatuses or []), *(status.containerStatuses or [])]:
        state = c.state
        if state is not None and state.waiting is not None and state.waiting.message:
            parts.append(f"{c.name}: {state.waiting.reason}: {state.waiting.message}")
        elif state is not None and state.terminated is not None and state.terminated.exitCode:
            term = state.terminated
            parts.append(f"{c.name}: exited {term.exitCode} ({term.reason or 'Error'})")
    return "; ".join(parts)


async def _node_pods(state: Path, node: str, docker_host: str | None) -> list[Pod]:
    from asynckubelet.node.access import read_pods

    async with RuntimeManager(RuntimeConfig(node_name=node, docker_url=docker_host)) as rm:
        if not await rm.docker.ping():
            raise errors.RuntimeUnavailable(
                f"cannot reach the Docker engine at {rm.docker.url}; is dockerd running?"
            )
        return await read_pods(rm, state=state)


def _remove_from_manifests(
    state: Path, node: str, targets: set[tuple[str, str]], level: Level
) -> set[tuple[str, str]]:
    """Delete the manifest files that hold any of ``targets``; returns the pods found."""
    from asynckubelet.manifests import load_manifests
    from asynckubelet.node.access import StateDir
    from asynckubelet.node.sources import is_manifest

    directory = StateDir(state).manifests
    found: set[tuple[str, str]] = set()
    if not directory.is_dir():
        return found
    for path in sorted(directory.iterdir()):
        if not is_manifest(path):
            continue
        try:
            pods = load_manifests(path, pod_security=level, node_name=node).pods
        except (errors.ManifestError, OSError):
            continue
        keys = {ctr.pod_identity(p)[1::-1] for p in pods}
        if keys & targets:
            path.unlink(missing_ok=True)
            found |= keys & targets
    return found


async def _delete_pods(
    targets: set[tuple[str, str]],
    *,
    state: Path,
    node: str,
    docker_host: str | None,
    grace_period: float | None,
    timeout: float,
) -> None:
    """Make sure the pods stop: the daemon does it when one runs; else (or to force a
    shorter grace period) this process stops and removes them itself."""
    from asynckubelet.node.access import daemon_pid

    alive = daemon_pid(state) is not None
    async with RuntimeManager(RuntimeConfig(node_name=node, docker_url=docker_host)) as rm:
        uids = {
            uid: key
            for uid, (ns, name) in (await rm.list_pod_uids()).items()
            if (key := (ns, name)) in targets
        }
        if not alive or grace_period is not None:
            async with anyio.create_task_group() as tg:
                for uid, (ns, name) in uids.items():

                    async def stop(uid: str = uid, ns: str = ns, name: str = name) -> None:
                        runtime = await rm.get_pod_status(uid=uid, name=name, namespace=ns)
                        await rm.kill_pod(None, runtime, grace_period=grace_period)
                        if not alive:
                            await rm.remove_pod(uid=uid)

                    tg.start_soon(stop)
        with anyio.move_on_after(timeout):
            while set(uids) & set(await rm.list_pod_uids()):  # noqa: ASYNC110
                await anyio.sleep(0.3)


@_register("delete")
def delete(
    kind: Annotated[str | None, typer.Argument(help="`pod`, followed by the pod's name.")] = None,
    name: Annotated[str | None, typer.Argument(help="The pod's name.")] = None,
    files: Annotated[
        list[str] | None, typer.Option("--filename", "-f", help="Delete the pods in these files.")
    ] = None,
    namespace: NamespaceOpt = "default",
    grace_period: Annotated[
        float | None, typer.Option("--grace-period", help="Seconds before SIGKILL.")
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for the end.")] = 120,
    state_dir: StateDirOpt = None,
    node_name: NodeNameOpt = None,
    pod_security: PodSecurityOpt = "privileged",
    docker_host: DockerHostOpt = None,
    verbose: VerboseOpt = 0,
    log_level: LogLevelOpt = None,
    log_format: LogFormatOpt = None,
) -> None:
    """Delete pods gracefully: `delete pod NAME` or `delete -f FILE...`; waits until gone."""
    _setup_logging(verbose, log_level, log_format)
    level = _level(pod_security)
    state = _state_dir(state_dir)
    node = _node_name(node_name)
    targets: set[tuple[str, str]] = set()
    if files:
        for pod in _load_files(files, node=node, level=level).pods:
            targets.add(ctr.pod_identity(pod)[1::-1])
    elif kind in ("pod", "pods", "po") and name:
        targets.add((namespace, name))
    elif kind is not None and "/" in kind and kind.split("/", 1)[0] in ("pod", "pods", "po"):
        targets.add((namespace, kind.split("/", 1)[1]))
    else:
        raise _fail("give `delete pod NAME` or `delete -f FILE`", code=2)
    in_files = _remove_from_manifests(state, node, targets, level)
    try:
        pods = anyio.run(_node_pods, state, node, docker_host)
    except errors.AsyncKubeletError as e:
        raise _fail(str(e)) from None
    present = {ctr.pod_identity(p)[1::-1] for p in pods} | in_files
    missing = sorted(targets - present)
    try:
        anyio.run(
            functools.partial(
                _delete_pods,
                targets & present,
                state=state,
                node=node,
                docker_host=docker_host,
                grace_period=grace_period,
                timeout=timeout,
            )
        )
    except errors.AsyncKubeletError as e:
        raise _fail(str(e)) from None
    for _ns, pod_name in sorted(targets & present):
        out.print(f'pod "{escape(pod_name)}" deleted')
    for _ns, pod_name in missing:
        err.print(f'Error from server (NotFound): pods "{escape(pod_name)}" not found')
    if missing:
        raise typer.Exit(1)


@_register("get")
def get(
    kind: Annotated[str, typer.Argument(help="`pods`.")],
    name: Annotated[str | None, typer.Argument(help="One pod's name.")] = None,
    namespace: NamespaceOpt = "default",
    all_namespaces: Annotated[
        bool, typer.Option("--all-namespaces", "-A", help="Pods of every namespace.")
    ] = False,
    output: Annotated[
        str | None, typer.Option("--output", "-o", help="wide, yaml or json.")
    ] = None,
    state_dir: StateDirOpt = None,
    node_name: NodeNameOpt = None,
    docker_host: DockerHostOpt = None,
    verbose: VerboseOpt = 0,
    log_level: LogLevelOpt = None,
    log_format: LogFormatOpt = None,
) -> None:
    """List pods as `kubectl get pods` does (from Docker and the state dir)."""
    import json

    import yaml

    from asynckubelet.printers import bound_node, now_utc, pod_table

    _setup_logging(verbose, log_level, log_format)
    if kind not in ("pods", "pod", "po"):
        raise _fail(f'the server doesn\'t have a resource type "{kind}"', code=1)
    if output not in (None, "wide", "yaml", "json"):
        raise _fail(f"--output must be wide, yaml or json, not {output!r}", code=2)
    state = _state_dir(state_dir)
    node = _node_name(node_name)
    try:
        pods = anyio.run(_node_pods, state, node, docker_host)
    except errors.AsyncKubeletError as e:
        raise _fail(str(e)) from None
    if not all_namespaces:
        pods = [p for p in pods if ctr.pod_identity(p)[1] == namespace]
    if name is not None:
        pods = [p for p in pods if ctr.pod_identity(p)[0] == name]
        if not pods:
            err.print(f'Error from server (NotFound): pods "{escape(name)}" not found')
            raise typer.Exit(1)
    for pod in pods:
        if pod.spec is not None and not pod.spec.nodeName:
            pod.spec.nodeName = bound_node(pod, node_name=node)
        pod.apiVersion, pod.kind = "v1", "Pod"
    if output in ("yaml", "json"):
        if name is not None:
            document: dict[str, object] = pods[0].to_dict()
        else:
            document = {
                "apiVersion": "v1",
                "kind": "List",
                "items": [p.to_dict() for p in pods],
                "metadata": {"resourceVersion": ""},
            }
        if output == "json":
            print(json.dumps(document, indent=4))
        else:
            print(yaml.safe_dump(document, sort_keys=False), end="")
        return
    if not pods:
        where = "" if all_namespaces else f" in {namespace} namespace"
        err.print(f"No resources found{where}.")
        return
    print(
        pod_table(
            pods,
            node_name=node,
            now=now_utc(),
            wide=output == "wide",
            all_namespaces=all_namespaces,
        )
    )


@_register("describe")
def describe(
    kind: Annotated[str, typer.Argument(help="`pod`.")],
    name: Annotated[str, typer.Argument(help="The pod's name.")],
    namespace: NamespaceOpt = "default",
    state_dir: StateDirOpt = None,
    node_name: NodeNameOpt = None,
    docker_host: DockerHostOpt = None,
    verbose: VerboseOpt = 0,
    log_level: LogLevelOpt = None,
    log_format: LogFormatOpt = None,
) -> None:
    """Show a pod as `kubectl describe pod` does, events at the bottom."""
    from asynckubelet.node.access import StateDir, find_pod
    from asynckubelet.node.events import read_events
    from asynckubelet.printers import describe_pod, now_utc

    _setup_logging(verbose, log_level, log_format)
    if kind not in ("pod", "pods", "po"):
        raise _fail(f'the server doesn\'t have a resource type "{kind}"', code=1)
    state = _state_dir(state_dir)
    node = _node_name(node_name)
    try:
        pods = anyio.run(_node_pods, state, node, docker_host)
        pod = find_pod(pods, namespace=namespace, name=name)
    except errors.NotFound as e:
        err.print(f"Error from server (NotFound): {escape(str(e))}")
        raise typer.Exit(1) from None
    except errors.AsyncKubeletError as e:
        raise _fail(str(e)) from None
    uid = ctr.pod_identity(pod)[2]
    events = read_events(StateDir(state).events, uid=uid)
    print(describe_pod(pod, events, node_name=node, now=now_utc()))


async def _find_container(
    state: Path,
    node: str,
    docker_host: str | None,
    *,
    namespace: str,
    name: str,
    container: str | None,
    previous: bool = False,
) -> tuple[RuntimeManager, Pod, str, str]:
    """The pod, the chosen container and the Docker id of its (previous) instance."""
    from asynckubelet.node.access import container_instance, default_container, find_pod, read_pods

    rm = RuntimeManager(RuntimeConfig(node_name=node, docker_url=docker_host))
    await rm.__aenter__()
    try:
        pod = find_pod(await read_pods(rm, state=state), namespace=namespace, name=name)
        chosen, notice = default_container(pod, container)
        if notice:
            err.print(escape(notice))
        instance = await container_instance(rm, pod, container=chosen, previous=previous)
    except BaseException:
        await rm.__aexit__(None, None, None)
        raise
    return rm, pod, chosen, instance.id


@_register("logs")
def logs(
    name: Annotated[str, typer.Argument(help="The pod's name.")],
    container: Annotated[str | None, typer.Option("--container", "-c")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep streaming.")] = False,
    previous: Annotated[
        bool, typer.Option("--previous", "-p", help="The previous (dead) instance's output.")
    ] = False,
    tail: Annotated[int | None, typer.Option("--tail", help="Only the last N lines.")] = None,
    timestamps: Annotated[bool, typer.Option("--timestamps", help="Prefix each line.")] = False,
    since: Annotated[
        str | None, typer.Option("--since", help="Only newer lines, e.g. 5s, 2m, 3h.")
    ] = None,
    namespace: NamespaceOpt = "default",
    state_dir: StateDirOpt = None,
    node_name: NodeNameOpt = None,
    docker_host: DockerHostOpt = None,
    verbose: VerboseOpt = 0,
    log_level: LogLevelOpt = None,
    log_format: LogFormatOpt = None,
) -> None:
    """Print a container's output; with -f keep following, across restarts."""
    import time

    from asynckubelet.printers import parse_duration

    _setup_logging(verbose, log_level, log_format)
    try:
        since_ts = time.time() - parse_duration(since) if since else None
    except ValueError as e:
        raise _fail(str(e), code=2) from None
    state = _state_dir(state_dir)
    node = _node_name(node_name)

    async def go(tail: int | None, since_ts: float | None) -> None:
        rm, pod, chosen, cid = await _find_container(
            state,
            node,
            docker_host,
            namespace=namespace,
            name=name,
            container=container,
            previous=previous,
        )
        try:
            seen = {cid}
            while True:
                async for line in rm.docker.logs(
                    cid,
                    follow=follow and not previous,
                    tail=tail,
                    timestamps=timestamps,
                    since=since_ts,
                ):
                    sys.stdout.write(line.text + "\n")
                    sys.stdout.flush()
                if not follow or previous:
                    return
                nxt = await _next_instance(rm, pod, chosen, seen)
                if nxt is None:
                    return
                seen.add(nxt)
                cid, tail, since_ts = nxt, None, None
        finally:
            with anyio.move_on_after(10, shield=True):
                await rm.__aexit__(None, None, None)

    signalled: list[int] = []

    async def until_signalled(tail: int | None, since_ts: float | None) -> None:
        # SIGINT/SIGTERM cancel the follower through its task group's scope, which anyio
        # keeps delivering until the follower has stopped, whatever await it is in.
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async for signum in signals:
                        signalled.append(signum)
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(watch)
            await go(tail, since_ts)
            tg.cancel_scope.cancel()

    try:
        anyio.run(until_signalled, tail, since_ts)
        if signalled:
            raise typer.Exit(128 + signalled[0])
    except errors.NotFound as e:
        err.print(f"Error from server (BadRequest): {escape(str(e))}")
        raise typer.Exit(1) from None
    except errors.AsyncKubeletError as e:
        raise _fail(str(e)) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


async def _next_instance(
    rm: RuntimeManager, pod: Pod, container: str, seen: set[str]
) -> str | None:
    """Wait for the container's next instance; None when the pod will not restart it."""
    policy = (pod.spec.restartPolicy if pod.spec else None) or "Always"
    while True:
        runtime = await rm.get_status_of(pod)
        if not runtime.containers:
            return None
        current = runtime.find_container(container)
        if current is not None and current.id not in seen and current.state.value != "created":
            return current.id
        if current is not None and current.state.value == "exited":
            if policy == "Never" or (policy == "OnFailure" and current.exit_code == 0):
                return None
        await anyio.sleep(0.5)


@_register("exec")
def exec_(
    name: Annotated[str, typer.Argument(help="The pod's name.")],
    command: Annotated[list[str], typer.Argument(help="The command and its arguments, after --.")],
    container: Annotated[str | None, typer.Option("--container", "-c")] = None,
    stdin: Annotated[
        bool, typer.Option("--stdin", "-i", help="Pass stdin to the command.")
    ] = False,
    tty: Annotated[bool, typer.Option("--tty", "-t", help="Allocate a terminal.")] = False,
    namespace: NamespaceOpt = "default",
    state_dir: StateDirOpt = None,
    node_name: NodeNameOpt = None,
    docker_host: DockerHostOpt = None,
    verbose: VerboseOpt = 0,
    log_level: LogLevelOpt = None,
    log_format: LogFormatOpt = None,
) -> None:
    """Run a command in a pod's container; exits with the command's exit code."""
    _setup_logging(verbose, log_level, log_format)
    state = _state_dir(state_dir)
    node = _node_name(node_name)

    async def go() -> int:
        rm, _pod, _chosen, cid = await _find_container(
            state, node, docker_host, namespace=namespace, name=name, container=container
        )
        try:
            info = await rm.docker.inspect_container(cid)
            if not (info.get("State") or {}).get("Running"):
                raise errors.PodError("cannot exec into a container that is not running")
            if stdin or tty:
                return await _exec_interactive(rm.docker, cid, command, stdin=stdin, tty=tty)
            result = await rm.docker.exec_run(cid, command)
            sys.stdout.buffer.write(result.stdout)
            sys.stdout.flush()
            sys.stderr.buffer.write(result.stderr)
            sys.stderr.flush()
            return result.exit_code
        finally:
            with anyio.CancelScope(shield=True):
                await rm.__aexit__(None, None, None)

    try:
        code = anyio.run(go)
    except errors.NotFound as e:
        err.print(f"Error from server (BadRequest): {escape(str(e))}")
        raise typer.Exit(1) from None
    except errors.AsyncKubeletError as e:
        raise _fail(str(e)) from None
    raise typer.Exit(code)


async def _exec_interactive(
    docker: DockerClient, container_id: str, command: list[str], *, stdin: bool, tty: bool
) -> int:
    """Attach the terminal to the command: input, output, window size, raw mode."""
    import shutil
    import stat
    import termios
    import tty as tty_mod

    from asynckubelet.docker.execs import exec_session

    raw = tty and sys.stdin.isatty()
    saved = termios.tcgetattr(sys.stdin.fileno()) if raw else None
    async with exec_session(docker, container_id, command, stdin=stdin, tty=tty) as session:
        if tty:
            size = shutil.get_terminal_size()
            await session.resize(rows=size.lines, columns=size.columns)
        if raw:
            tty_mod.setraw(sys.stdin.fileno(), termios.TCSANOW)
        try:
            async with anyio.create_task_group() as tg:

                async def pump_in() -> None:
                    fd = sys.stdin.fileno()
                    # A regular file cannot be polled; it is read at once, never blocking.
                    pollable = not stat.S_ISREG(os.fstat(fd).st_mode)
                    while True:
                        if pollable:
                            await anyio.wait_readable(fd)
                        data = os.read(fd, 65536)
                        if not data:
                            session.close_input()
                            return
                        await session.write(data)

                async def resizes() -> None:
                    with anyio.open_signal_receiver(signal.SIGWINCH) as sigs:
                        async for _ in sigs:
                            size = shutil.get_terminal_size()
                            await session.resize(rows=size.lines, columns=size.columns)

                async def pump_out() -> None:
                    while (chunk := await session.read()) is not None:
                        target = sys.stderr.buffer if chunk[0] == 2 else sys.stdout.buffer
                        target.write(chunk[1])
                        target.flush()
                    tg.cancel_scope.cancel()

                async def until_exited() -> None:
                    # Docker may keep an attached stream open after the command ended.
                    while await session.running():  # noqa: ASYNC110
                        await anyio.sleep(0.2)
                    await anyio.sleep(0.2)
                    tg.cancel_scope.cancel()

                if stdin:
                    tg.start_soon(pump_in)
                if tty:
                    tg.start_soon(resizes)
                tg.start_soon(until_exited)
                await pump_out()
        finally:
            if saved is not None:
                termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved)
        return await session.exit_code()


for _name in ("run", "validate", "serve", "apply", "delete", "get", "describe", "logs", "exec"):
    app.command(_name)(validate.validate if _name == "validate" else _commands[_name])
app.command("doctor")(doctor.doctor)


def main() -> None:
    app()
