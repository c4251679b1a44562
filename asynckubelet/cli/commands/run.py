"""``asynckubelet run``: the pods of some files on Docker, their output on the terminal.

Pod output goes to stdout (the pod's stderr lines to stderr), prefixed ``pod/container``;
status changes and pull progress go to stderr. The exit code is the first non-zero exit
code of the pods' containers, 128+N after signal N, 1 when the run itself failed.
"""

from __future__ import annotations

import copy
import dataclasses
import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio
import typer
from rich.markup import escape

from asynckubelet.cli.client import as_pod, find_daemon
from asynckubelet.cli.options import (
    ColorOpt,
    FilesArg,
    GracePeriodOpt,
    KeepOpt,
    LenientOpt,
    LogOptions,
    NodeOptions,
    NodeRef,
    StateDirOpt,
)
from asynckubelet.cli.output import command, err, fail, first_signal, out, run_async, warn

if TYPE_CHECKING:
    from lightkube.models.core_v1 import Pod, PodStatus

    from asynckubelet.docker import LogLine
    from asynckubelet.manifests import Manifests
    from asynckubelet.node.runner import PodOutcome, RunOptions
    from asynckubelet.node.volumes import VolumeManager
    from asynckubelet.progress import PullDisplay
    from asynckubelet.runtime.manager import RuntimeConfig

COLORS = ("cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan")


@command()
def run(
    files: FilesArg,
    *,
    keep: KeepOpt = False,
    grace_period: GracePeriodOpt = None,
    lenient: LenientOpt = False,
    color: ColorOpt = True,
    state_dir: StateDirOpt = None,
    ctx: typer.Context,
    node: NodeOptions,
    log: LogOptions,
) -> None:
    """Run the Pods in FILES on Docker, stream their output, exit with their exit code.

    Pods with restartPolicy Never or OnFailure end by themselves; Always pods run until
    SIGINT/SIGTERM, which stops every pod gracefully. The pods' containers are removed
    at exit unless --keep is given.
    """
    from asynckubelet.node.runner import options_from_manifests
    from asynckubelet.progress import PullDisplay

    node.check(pod_security_code=1)
    daemon = find_daemon(NodeRef(state_dir=state_dir))
    if daemon is not None:
        node = _daemon_defaults(node, daemon.node(), given=_given(ctx))
    owner = f"run-{secrets.token_hex(4)}"
    config = dataclasses.replace(node.runtime_config(), owner=owner)
    manifests = _owned(
        _load(files, lenient=lenient, node=node), node_name=config.node_name, owner=owner
    )
    if daemon is not None:
        _check_host_ports(manifests.pods, [as_pod(p) for p in daemon.pods()])
    options = options_from_manifests(
        manifests, node_name=config.node_name, keep=keep, grace_period=grace_period
    )
    session = _Session(
        node=node,
        config=config,
        options=options,
        renderer=_Renderer(color=color and out.is_terminal),
        pulls=PullDisplay(console=err, live=err.is_terminal),
    )
    with session.pulls:
        outcomes = run_async(session.run, manifests.pods)
    codes = [_exit_code(outcome) for outcome in outcomes]
    if session.signals:
        raise typer.Exit(128 + session.signals[0])
    raise typer.Exit(next((c for c in codes if c), 0))


def _load(files: list[str], *, lenient: bool, node: NodeOptions) -> Manifests:
    """The manifests' pods, refusing none and gated ones (nothing could remove the gates)."""
    from asynckubelet.manifests import load_manifests
    from asynckubelet.runtime import containers as ctr

    manifests = load_manifests(
        files if len(files) > 1 else files[0],
        lenient=lenient,
        pod_security=node.level,
        allow_namespace_policy=node.allow_namespace_policy,
        node_name=node.node_name or None,
    )
    for warning in manifests.warnings:
        warn(str(warning))
    if not manifests.pods:
        raise fail("no Pod found in the given manifests")
    for pod in manifests.pods:
        gates = [g.name for g in (pod.spec.schedulingGates if pod.spec else None) or []]
        if gates:
            name, ns, _ = ctr.pod_identity(pod)
            raise fail(
                f"pod {ns}/{name} has scheduling gates ({', '.join(gates)}): it would stay "
                "SchedulingGated, and `run` has no API to remove them; remove "
                "spec.schedulingGates to run it, or apply it to `asynckubelet serve`, which "
                "starts it once an edit of its manifest removes them"
            )
    return manifests


def _given(ctx: typer.Context) -> set[str]:
    """The options given on the command line or in the environment, not defaulted."""
    return {
        name
        for name in ctx.params
        if (source := ctx.get_parameter_source(name)) is not None and source.name != "DEFAULT"
    }


def _daemon_defaults(node: NodeOptions, info: dict[str, Any], *, given: set[str]) -> NodeOptions:
    """The node daemon's configuration in place of every node option not ``given``:
    ``run`` then runs its pods on the same node, network and DNS, at the same level."""
    theirs = {
        "node_name": info.get("node_name") or None,
        "pod_security": info.get("pod_security") or None,
        "allow_namespace_policy": bool(info.get("allow_namespace_policy")),
        "network": info.get("network") or None,
        "bridge": info.get("bridge") or None,
        "pod_cidr": info.get("pod_cidr") or None,
        "pod_cidr_v6": info.get("pod_cidr_v6") or None,
        "cluster_dns": list(info.get("cluster_dns") or []) or None,
        "cluster_domain": info.get("cluster_domain") or None,
    }
    changes: dict[str, Any] = {}
    for name, value in theirs.items():
        if value is not None and name not in given:
            changes[name] = value
    return dataclasses.replace(node, **changes)


def _owned(manifests: Manifests, *, node_name: str, owner: str) -> Manifests:
    """The pods with UIDs of this run's own: a pod of the same name under ``serve`` (or
    another ``run``) on the same node is another pod, and its containers are not ours."""
    from asynckubelet.manifests import pod_uid
    from asynckubelet.runtime import containers as ctr

    pods = []
    for pod in manifests.pods:
        mine = copy.deepcopy(pod)
        name, ns, _ = ctr.pod_identity(mine)
        assert mine.metadata is not None
        mine.metadata.uid = pod_uid(node_name=f"{node_name}/{owner}", namespace=ns, name=name)
        pods.append(mine)
    return dataclasses.replace(manifests, pods=tuple(pods))


def _check_host_ports(pods: Sequence[Pod], theirs: list[Pod]) -> None:
    """Refuse a pod whose host port a pod of the node daemon holds (as the kubelet's
    NodePorts admission would), before anything starts."""
    from asynckubelet.node.admission import host_port_conflict
    from asynckubelet.runtime import containers as ctr

    admitted = list(theirs)
    for pod in pods:
        rejection = host_port_conflict(pod, admitted=admitted)
        if rejection is not None:
            name, ns, _ = ctr.pod_identity(pod)
            raise fail(
                f"pod {ns}/{name}: Pod was rejected: {rejection.message} (held by the node "
                "daemon's pods)"
            )
        admitted.append(pod)


def _exit_code(outcome: PodOutcome) -> int:
    """The pod's exit code for the run's (its first failed container's); its error shown."""
    if outcome.error:
        name = outcome.pod.metadata.name if outcome.pod.metadata else ""
        err.print(f"[red]pod/{escape(name or '')}: {escape(outcome.error)}[/red]")
    if outcome.exit_code:
        return outcome.exit_code
    return 1 if outcome.phase == "Failed" else 0


@dataclasses.dataclass
class _Session:
    """One run: the pods on one runtime until they end or a signal stops them."""

    node: NodeOptions
    config: RuntimeConfig
    options: RunOptions
    renderer: _Renderer
    pulls: PullDisplay
    signals: list[int] = dataclasses.field(default_factory=list)

    async def run(self, pods: Sequence[Pod]) -> list[PodOutcome]:
        from asynckubelet import errors
        from asynckubelet.node.runner import run_pods
        from asynckubelet.runtime.manager import RuntimeManager

        stop = anyio.Event()
        outcomes: list[PodOutcome] = []
        async with RuntimeManager(self.config, volumes=self._volumes()) as rm:
            rm.images.listener = self.pulls
            if not await rm.docker.ping():
                raise errors.RuntimeUnavailable(
                    f"cannot reach the Docker engine at {rm.docker.url}; is dockerd running?"
                )
            rm.network = self.node.network_plugin(rm.docker, node_name=self.config.node_name)
            await rm.network.start()
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._stop_on_signals, stop, tg.cancel_scope, name="signals")
                outcomes = await run_pods(
                    rm,
                    pods,
                    stop=stop,
                    on_log=self.renderer.log,
                    on_status=self.renderer.status,
                    options=self.options,
                )
                tg.cancel_scope.cancel()
        return outcomes

    def _volumes(self) -> VolumeManager | None:
        """Volumes are directories on this machine: only a local engine can mount them."""
        from asynckubelet.docker.engine import resolve_docker_url
        from asynckubelet.network.factory import is_local_daemon
        from asynckubelet.node.volumes import VolumeManager, default_root

        if not is_local_daemon(resolve_docker_url(self.node.docker_host)):
            return None
        return VolumeManager(
            root=default_root(self.config.node_name),
            node_name=self.config.node_name,
            service_account_issuer=self.node.service_account_issuer,
        )

    async def _stop_on_signals(self, stop: anyio.Event, scope: anyio.CancelScope) -> None:
        """The first SIGINT/SIGTERM stops the pods gracefully, the second kills them."""
        while True:
            self.signals.append(await first_signal())
            if stop.is_set():
                err.print("[red]second signal: killing now[/red]")
                self.options.grace_period = 0
                scope.cancel()
                return
            err.print("[dim]stopping pods gracefully (again to force)...[/dim]")
            stop.set()


class _Renderer:
    """Prefixes pod output and reports status changes."""

    def __init__(self, *, color: bool) -> None:
        self.color = color
        self.colors: dict[str, str] = {}
        self.last: dict[str, str] = {}

    def _prefix(self, pod: Pod, container: str) -> str:
        name = f"{pod.metadata.name if pod.metadata else ''}/{container}"
        color = self.colors.setdefault(name, COLORS[len(self.colors) % len(COLORS)])
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
