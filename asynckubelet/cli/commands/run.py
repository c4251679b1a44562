"""``asynckubelet run``: the pods of some files on Docker, their output on the terminal.

Pod output goes to stdout (the pod's stderr lines to stderr), prefixed ``pod/container``;
status changes, waiting reasons with their messages and pull progress go to stderr.

A run always ends. Pods are admitted first, as a kubelet admits them (resources, host
ports, node labels); a pod the node cannot take ends the run before anything starts. A
pod that waits for what waiting will not bring (an image that does not exist or whose
registry name does not resolve, a pull policy of Never, a ConfigMap that is not there
after ``--config-timeout``, a pull that keeps failing past ``--pull-timeout``, a container
crash-looping past ``--max-restarts``) ends it with ``pod/NAME/CONTAINER: REASON:
MESSAGE`` (see :mod:`asynckubelet.node.failures`). The
first SIGINT/SIGTERM stops the pods gracefully, counting down their grace period; a
second kills them at once. A closed stdout (``| head``) stops the pods and ends the run
without a word, as other tools end on SIGPIPE.

Exit codes: the first non-zero exit code of the pods' containers (else 0); 1 when the run
failed (a rejected pod, a permanent error, an engine that cannot be reached); 128+N after
signal N (130 for SIGINT, 143 for SIGTERM); 141 (128+SIGPIPE) when stdout was closed.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import secrets
import signal
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import typer

from asynckubelet.cli.client import as_pod, check_paths, find_daemon
from asynckubelet.cli.options import (
    BuildArgOpt,
    BuildOpt,
    BuildTargetOpt,
    ColorOpt,
    ConfigTimeoutOpt,
    DevWatchOpt,
    FilesArg,
    GracePeriodOpt,
    KeepOpt,
    LenientOpt,
    LogOptions,
    MaxRestartsOpt,
    NodeOptions,
    NodeRef,
    PullTimeoutOpt,
    StateDirOpt,
    check_max_restarts,
)
from asynckubelet.cli.output import (
    command,
    err,
    escape,
    fail,
    is_terminal,
    line,
    made,
    out,
    run_async,
    warn,
)
from asynckubelet.cli.renderer import PodRenderer

if TYPE_CHECKING:
    from lightkube.models.core_v1 import Pod, PodStatus

    from asynckubelet.api.client import NodeClient
    from asynckubelet.cli.building import BuildOptions
    from asynckubelet.cli.devsync import WatchState
    from asynckubelet.cli.progress import PullDisplay
    from asynckubelet.docker import DockerAPI
    from asynckubelet.manifests import Manifests
    from asynckubelet.node.admission import NodeInfo, Rejection
    from asynckubelet.node.config import KubeletConfig
    from asynckubelet.node.failures import Failure, FailureWatch
    from asynckubelet.node.kubelet import Kubelet
    from asynckubelet.node.runoptions import PodOutcome

DEFAULT_PULL_TIMEOUT = 300.0
DEFAULT_CONFIG_TIMEOUT = 5.0
"""Seconds, for ``run``: nothing can apply a missing ConfigMap during a run."""
DEFAULT_MAX_RESTARTS = 3
COUNTDOWN_LINE_EVERY = 5.0
"""Seconds between countdown lines when stderr is not a terminal."""
EXIT_STDOUT_CLOSED = 128 + signal.SIGPIPE
RUN_SOURCE = "run"
"""The source a run's pods are wanted as, on its node."""


@command()
def run(
    files: FilesArg,
    *,
    keep: KeepOpt = False,
    build: BuildOpt = False,
    build_arg: BuildArgOpt = None,
    target: BuildTargetOpt = None,
    watch: DevWatchOpt = False,
    grace_period: GracePeriodOpt = None,
    lenient: LenientOpt = False,
    color: ColorOpt = True,
    pull_timeout: PullTimeoutOpt = DEFAULT_PULL_TIMEOUT,
    config_timeout: ConfigTimeoutOpt = DEFAULT_CONFIG_TIMEOUT,
    max_restarts: MaxRestartsOpt = DEFAULT_MAX_RESTARTS,
    state_dir: StateDirOpt = None,
    ctx: typer.Context,
    node: NodeOptions,
    log: LogOptions,
) -> None:
    """Run the Pods in FILES on Docker, stream their output, exit with their exit code.

    Pods with restartPolicy Never or OnFailure end by themselves; Always pods run until
    SIGINT/SIGTERM, which stops every pod gracefully (a second signal kills them at once).
    A pod that cannot run (rejected by the node, an image that does not exist, a missing
    ConfigMap, a container crash-looping past --max-restarts) ends the run with its
    reason, exit 1. The pods' containers are removed at
    exit unless --keep is given. A Docker engine and the project's images are set up when
    missing, each announced in one line. --build first builds each image whose build
    context is known (--build-arg and --target as docker build's) and runs the pods on
    the built image IDs. --watch keeps the pods running until SIGINT/SIGTERM and hands
    them to the node again on each change of FILES (with --build: rebuilt, or synced as
    their watch rules say).
    """
    from asynckubelet.cli.building import build_options
    from asynckubelet.cli.progress import PullDisplay
    from asynckubelet.cli.provision import ensure_engine

    node.check(pod_security_code=1)
    check_max_restarts(max_restarts)
    options = build_options(build, build_arg, target)
    daemon = find_daemon(NodeRef(state_dir=state_dir))
    if daemon is not None:
        node = _daemon_defaults(node, daemon.node(), given=_given(ctx))
    loaded = _load(files, lenient=lenient, node=node, workloads=not watch)
    rules = _watch_rules(loaded, files, node=node, build=build) if watch else None
    if build:
        from asynckubelet.cli.building import build_typed

        ensure_engine(node.docker_host)
        build_typed(loaded, files, docker_host=node.docker_host, options=options)
    if loaded.objects:
        _run_workloads(loaded, node, color=color, grace_period=grace_period)
    config = _kubelet_config(node, owner=f"run-{secrets.token_hex(4)}")
    manifests = _owned(loaded, node_name=config.node_name, owner=config.owner)
    node_pods = _node_pods(daemon)
    _admit(manifests.pods, node.node_info(), node_pods)
    ensure_engine(node.docker_host)
    live = is_terminal(err)
    session = _Session(
        node=node,
        config=config,
        keep=keep,
        grace_period=grace_period,
        pulls=PullDisplay(console=made(err) if live else err, live=live),
        pull_timeout=pull_timeout,
        config_timeout=config_timeout,
        running=node_pods,
        max_restarts=max_restarts,
    )
    session.renderer = PodRenderer(color=color and is_terminal(out), final_at_end=True)
    if rules is not None:
        session.watcher = functools.partial(
            _watch,
            files=files,
            state=rules,
            build=build,
            options=options,
            lenient=lenient,
            node=node,
        )
    out.on_closed = session.stdout_closed
    with session.pulls:
        outcomes = run_async(session.run, manifests)
    if session.refused:
        _show_refused(session.refused)
        raise typer.Exit(1)
    codes = [_exit_code(outcome) for outcome in outcomes]
    if session.closed_stdout:
        raise typer.Exit(EXIT_STDOUT_CLOSED)
    if session.signals:
        raise typer.Exit(128 + session.signals[0])
    if session.failures:
        for name, failure in session.failures:
            err.print(f"[red]{escape(failure.line(name))}[/red]")
        raise typer.Exit(1)
    raise typer.Exit(next((c for c in codes if c), 0))


def _watch_rules(
    loaded: Manifests, files: list[str], *, node: NodeOptions, build: bool
) -> WatchState:
    """``--watch``'s rules, read (with ``--build``) before the images are built and pinned;
    a file holding workloads refused."""
    from asynckubelet.cli.devsync import WatchState

    if loaded.objects:
        raise fail(
            "--watch follows the files' Pods; a Deployment or other workload is followed "
            "by `apply --watch` on `asynckubelet serve`"
        )
    rules = WatchState()
    if build:
        rules.read_typed(loaded, files, docker_host=node.docker_host)
    return rules


def _kubelet_config(node: NodeOptions, *, owner: str) -> KubeletConfig:
    """The run's node: the options' runtime under the run's own owner mark, its pods'
    workers ending once their pods are terminal, its network started with the first pod,
    no metrics, events only logged, no housekeeping (nothing else carries its owner mark),
    every grace period waited for in full (a second signal kills)."""
    from asynckubelet.cli.nodeconfig import kubelet_config

    return kubelet_config(
        node,
        owner=owner,
        exit_when_terminal=True,
        start_network_with_pods=True,
        metrics=False,
        record_events=False,
        loop_lag_period=None,
        housekeeping_period=math.inf,
        shutdown_timeout=None,
    )


def _admit(pods: Sequence[Pod], node: NodeInfo, running: Sequence[Pod]) -> None:
    """The node's admission of the pods, all or none, over the ``running`` pods (the node
    daemon's), before any engine is set up: each pod refused is shown and the run ends.
    The run's node admits them again once the engine answers, over the host ports its
    containers hold (:meth:`~asynckubelet.node.kubelet.Kubelet.admit_all`)."""
    from asynckubelet.node.admission import NodeAdmitter, admit_together, host_port_in_use

    admitter = NodeAdmitter(node=node, host_port_in_use=host_port_in_use)
    refused = admit_together(admitter, pods, admitted=running)
    _show_refused(refused)
    if refused:
        raise typer.Exit(1)


def _show_refused(refused: Sequence[tuple[Pod, Rejection]]) -> None:
    from asynckubelet.node.status import REJECTED_MESSAGE_PREFIX

    for pod, rejection in refused:
        name = pod.metadata.name if pod.metadata else ""
        err.print(
            f"[red]pod/{escape(name or '')}: {escape(rejection.reason)}: "
            f"{escape(REJECTED_MESSAGE_PREFIX + rejection.message)}[/red]"
        )


def _node_pods(daemon: NodeClient | None) -> list[Pod]:
    """The active pods of the node daemon, when one runs: a run's pods share the host's
    ports and resources with them."""
    from asynckubelet.node.status import TERMINAL_PHASES

    if daemon is None:
        return []
    pods = [as_pod(p) for p in daemon.pods()]
    return [p for p in pods if p.status is None or p.status.phase not in TERMINAL_PHASES]


def _run_workloads(
    manifests: Manifests, node: NodeOptions, *, color: bool, grace_period: float | None
) -> None:
    """Run files that hold Jobs (or other workloads) on an in-process node with the
    controllers (see :mod:`~asynckubelet.cli.commands.run_workloads`); never returns."""
    from asynckubelet.cli.commands.run_workloads import run_with_controllers
    from asynckubelet.cli.provision import ensure_engine

    ensure_engine(node.docker_host)
    renderer = PodRenderer(color=color and is_terminal(out))
    code = run_async(
        functools.partial(
            run_with_controllers, manifests, node=node, renderer=renderer, grace_period=grace_period
        )
    )
    raise typer.Exit(code)


def _load(
    files: list[str], *, lenient: bool, node: NodeOptions, workloads: bool = False
) -> Manifests:
    """The manifests' pods (and, with ``workloads``, their Jobs and other workloads),
    refusing none and gated pods (nothing could remove the gates)."""
    from asynckubelet.manifests import load_manifests
    from asynckubelet.runtime import containers as ctr

    check_paths(files)
    manifests = load_manifests(
        files if len(files) > 1 else files[0],
        lenient=lenient,
        pod_security=node.level,
        allow_namespace_policy=node.allow_namespace_policy,
        node_name=node.node_name or None,
        node_labels=node.node_labels is not None,
    )
    for warning in manifests.warnings:
        warn(str(warning))
    for service in manifests.services:
        meta = service.metadata
        warn(
            f"service/{meta.name if meta else ''}: not run: `run` runs Pods and Jobs only; "
            "a Service (its ClusterIP, DNS name and pods' variables) needs `asynckubelet serve`"
        )
    if not manifests.pods and not (workloads and manifests.objects):
        raise fail("no Pod or Job found in the given manifests")
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
    """The options given on the command line or in the environment, not defaulted (nor
    derived from ``--instance``)."""
    return {
        name
        for name in ctx.params
        if (source := ctx.get_parameter_source(name)) is not None
        and source.name not in ("DEFAULT", "DEFAULT_MAP")
    }


def _daemon_defaults(node: NodeOptions, info: dict[str, Any], *, given: set[str]) -> NodeOptions:
    """The node daemon's configuration in place of every node option not ``given``:
    ``run`` then runs its pods on the same node, network (with the same address records)
    and DNS, at the same level and seccomp default."""
    theirs = {
        "node_name": info.get("node_name") or None,
        "pod_security": info.get("pod_security") or None,
        "allow_namespace_policy": bool(info.get("allow_namespace_policy")),
        "seccomp_default": _flag(info.get("seccomp_default")),
        "network": info.get("network") or None,
        "bridge": info.get("bridge") or None,
        "pod_cidr": info.get("pod_cidr") or None,
        "pod_cidr_v6": info.get("pod_cidr_v6") or None,
        "network_state_dir": Path(state) if (state := info.get("network_state_dir")) else None,
        "cluster_dns": list(info.get("cluster_dns") or []) or None,
        "cluster_domain": info.get("cluster_domain") or None,
    }
    changes: dict[str, Any] = {}
    for name, value in theirs.items():
        if value is not None and name not in given:
            changes[name] = value
    return dataclasses.replace(node, **changes)


def _flag(value: Any) -> bool | None:
    """A boolean the daemon published; None when it published none (an older daemon)."""
    return value if isinstance(value, bool) else None


def _owned(manifests: Manifests, *, node_name: str, owner: str) -> Manifests:
    """The pods with UIDs of this run's own: a pod of the same name under ``serve`` (or
    another ``run``) on the same node is another pod, and its containers are not ours."""
    from asynckubelet.manifests import pod_uid
    from asynckubelet.runtime import containers as ctr

    pods = []
    for pod in manifests.pods:
        mine = copy.deepcopy(pod)
        name, ns, _ = ctr.pod_identity(mine)
        assert mine.metadata is not None  # noqa: S101  (type narrowing: a loaded pod has metadata)
        mine.metadata.uid = pod_uid(node_name=f"{node_name}/{owner}", namespace=ns, name=name)
        pods.append(mine)
    return dataclasses.replace(manifests, pods=tuple(pods))


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
    """One run: the pods on a node of the run's own until they end, fail for good, or a
    signal (or a closed stdout) stops them."""

    node: NodeOptions
    config: KubeletConfig
    pulls: PullDisplay
    keep: bool = False
    """Leave the pods' containers on Docker at the end."""
    grace_period: float | None = None
    pull_timeout: float = DEFAULT_PULL_TIMEOUT
    config_timeout: float = DEFAULT_CONFIG_TIMEOUT
    running: Sequence[Pod] = ()
    """The node daemon's active pods, which the run's pods share the host with."""
    docker: DockerAPI | None = None
    """The engine's client (None: one for ``config.docker_url``)."""
    max_restarts: int | None = DEFAULT_MAX_RESTARTS
    renderer: PodRenderer = dataclasses.field(default_factory=lambda: PodRenderer(color=False))
    signals: list[int] = dataclasses.field(default_factory=list)
    failures: list[tuple[str, Failure]] = dataclasses.field(default_factory=list)
    refused: list[tuple[Pod, Rejection]] = dataclasses.field(default_factory=list)
    """The pods the node refused once its engine answered: none of them ran."""
    closed_stdout: bool = False
    stop: anyio.Event | None = None
    output_closed: anyio.Event | None = None
    kubelet: Kubelet | None = None
    killing: bool = False
    """A second signal came: the pods are killed at once."""
    watches: dict[str, FailureWatch] = dataclasses.field(default_factory=dict)
    watcher: Callable[..., Awaitable[None]] | None = None
    """``--watch``: follows the files until cancelled (see :func:`_watch`)."""

    async def run(self, manifests: Manifests) -> list[PodOutcome]:
        from asynckubelet import errors
        from asynckubelet.cli.nodeconfig import network_config
        from asynckubelet.cli.provision import announce
        from asynckubelet.node.foreground import PodOutput
        from asynckubelet.nodeapp import Node, NodeConfig
        from asynckubelet.runtime import containers as ctr

        self.stop = stop = anyio.Event()
        self.output_closed = output_closed = anyio.Event()
        if self.closed_stdout:
            stop.set()
            output_closed.set()
        pods = manifests.pods
        uids = [ctr.pod_identity(p)[2] for p in pods]
        output = PodOutput(logs=self.renderer.log, statuses=self._status, closed=output_closed)
        config = NodeConfig(
            kubelet=self.config, network=network_config(self.node), controllers=False
        )
        node = Node(config, docker=self.docker, pulls=self.pulls, announce=announce, output=output)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._stop_on_signals, pods, tg, name="signals")
            try:
                async with node:
                    self.kubelet = kubelet = node.kubelet
                    if self.killing:
                        kubelet.kill_now()
                    if not stop.is_set():
                        self.refused = await kubelet.admit_all(
                            # The files' Services are not run: their pods get no variables.
                            dataclasses.replace(manifests, services=()),
                            running=self.running,
                            source=RUN_SOURCE,
                            keep=self.keep,
                            grace_period=self.grace_period,
                        )
                    async with anyio.create_task_group() as waiting:
                        waiting.start_soon(_cancel_on, stop, waiting.cancel_scope)
                        if self.watcher is not None and not self.refused:
                            await self.watcher(self, kubelet)
                        await kubelet.wait_ended(uids)
                        waiting.cancel_scope.cancel()
            except errors.RuntimeUnavailable as e:
                raise errors.RuntimeUnavailable(
                    f"{e} (`asynckubelet engine start` starts one)"
                ) from None
            tg.cancel_scope.cancel()
        return [o for uid in uids if self.kubelet and (o := self.kubelet.outcome(uid))]

    def _status(self, pod: Pod, status: PodStatus) -> None:
        """Show the status; end the run when the pod waits for what will not come."""
        from asynckubelet.node.failures import FailureWatch

        self.renderer.status(pod, status)
        assert pod.metadata is not None  # noqa: S101  (type narrowing: a running pod has metadata)
        name = pod.metadata.name or ""
        watch = self.watches.setdefault(
            name,
            FailureWatch(
                pull_timeout=self.pull_timeout,
                config_timeout=self.config_timeout,
                max_restarts=self.max_restarts,
                last_line=functools.partial(self.renderer.last_line, name),
            ),
        )
        failure = watch.observe(status, now=anyio.current_time())
        if failure is None or self.stop is None or self.stop.is_set():
            return
        if self.watcher is not None:
            if (name, failure) not in self.failures:
                err.print(f"[red]{escape(failure.line(name))}[/red]")
                self.failures.append((name, failure))
            return
        self.failures.append((name, failure))
        self.stop.set()

    def stdout_closed(self) -> None:
        """Nobody reads the pods' output any more: show no more of it, stop following it,
        stop the pods and end without a word."""
        if self.closed_stdout:
            return
        self.closed_stdout = True
        self.renderer.closed = True
        if self.output_closed is not None:
            self.output_closed.set()
        if self.stop is not None:
            self.stop.set()

    def _grace(self, pods: Sequence[Pod]) -> float:
        from asynckubelet.runtime.kill import MINIMUM_GRACE_PERIOD, grace_period_of

        longest = max((grace_period_of(p, self.grace_period) for p in pods), default=0)
        return max(longest, float(MINIMUM_GRACE_PERIOD))

    async def _stop_on_signals(self, pods: Sequence[Pod], tg: anyio.abc.TaskGroup) -> None:
        """The first SIGINT/SIGTERM stops the pods gracefully, with a countdown of the grace
        period; the second kills them at once (their workers SIGKILL their containers)."""
        assert self.stop is not None  # noqa: S101  (type narrowing: set before the signals are watched)
        countdown: _Countdown | None = None
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as received:
            async for signum in received:
                self.signals.append(int(signum))
                if len(self.signals) > 1 or self.stop.is_set():
                    break
                self.stop.set()
                names = ", ".join(f"pod/{p.metadata.name}" for p in pods if p.metadata)
                countdown = _Countdown(names=names, grace=self._grace(pods), live=err.is_terminal)
                tg.start_soon(countdown.run, name="countdown")
            if countdown is not None:
                countdown.done()
            err.print("[red]second signal: killing the pods now[/red]")
            self.stop.set()
            self.killing = True
            if self.kubelet is not None:
                self.kubelet.kill_now()
            # Signals stay taken until the run ends: a third is not Python's KeyboardInterrupt.
            await anyio.sleep_forever()


async def _watch(
    session: _Session,
    kubelet: Kubelet,
    *,
    files: list[str],
    state: WatchState,
    build: bool,
    options: BuildOptions | None,
    lenient: bool,
    node: NodeOptions,
) -> None:
    """``--watch``: the files followed; a change loaded (built) again and admitted as the
    run's first pods were (see :mod:`asynckubelet.cli.runwatch`)."""
    from asynckubelet.cli.building import build_typed
    from asynckubelet.cli.runwatch import follow

    def reload() -> Manifests:
        again = _load(files, lenient=lenient, node=node)
        if build:
            state.read_typed(again, files, docker_host=node.docker_host)
            build_typed(again, files, docker_host=node.docker_host, options=options)
        return _owned(again, node_name=session.config.node_name, owner=session.config.owner)

    async def admit(manifests: Manifests) -> list[tuple[Pod, Rejection]]:
        return await kubelet.admit_all(
            dataclasses.replace(manifests, services=()),
            running=session.running,
            source=RUN_SOURCE,
            keep=session.keep,
            grace_period=session.grace_period,
        )

    async def restart(namespace: str, pod: str, containers: list[str], grace: int) -> list[str]:
        return await kubelet.restart_in_place(namespace, pod, containers, grace_period=grace)

    state.node_name, state.owner, state.restart = (
        session.config.node_name,
        session.config.owner,
        restart,
    )
    await follow(files=files, state=state, reload=reload, admit=admit)


async def _cancel_on(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


class _Countdown:
    """``stopping pod/web: 28s left (Ctrl-C again to kill now)``: redrawn in place on a
    terminal, a line every few seconds elsewhere."""

    def __init__(self, *, names: str, grace: float, live: bool) -> None:
        self.names = names
        self.grace = grace
        self.live = live
        self._shown = False

    def _text(self, left: float) -> str:
        return f"stopping {self.names}: {left:.0f}s left (Ctrl-C again to kill now)"

    async def run(self) -> None:
        started = anyio.current_time()
        every = 1.0 if self.live else COUNTDOWN_LINE_EVERY
        try:
            while True:
                left = max(self.grace - (anyio.current_time() - started), 0.0)
                self._show(self._text(left))
                if left <= 0:
                    return
                await anyio.sleep(min(every, left))
        finally:
            self.done()

    def _show(self, text: str) -> None:
        if self.live:
            err.file.write(f"\r\x1b[2K{text}")
            err.file.flush()
            self._shown = True
        else:
            line(err, text, style="dim")

    def done(self) -> None:
        if self.live and self._shown:
            err.file.write("\n")
            err.file.flush()
            self._shown = False
