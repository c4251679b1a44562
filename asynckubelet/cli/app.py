"""The ``asynckubelet`` command tree: the Typer app, its sub-apps and the options before the
command. Each command lives in a module of its own under :mod:`asynckubelet.cli.commands`.

Command names, flags, environment variables, exit codes and output formats are an
interface that users and scripts rely on.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import anyio
import typer
from lightkube.models.core_v1 import Pod
from rich.markup import escape

from asynckubelet import errors
from asynckubelet.cli import output
from asynckubelet.cli.commands import doctor, engine, images, run, serve, validate
from asynckubelet.cli.options import (
    DockerHostOpt,
    GlobalLogFormatOpt,
    GlobalLogLevelOpt,
    LogFormatOpt,
    LogLevelOpt,
    LogOptions,
    NamespaceOpt,
    NodeNameOpt,
    PodSecurityOpt,
    StateDirOpt,
    VerboseOpt,
)
from asynckubelet.cli.output import command, err, out
from asynckubelet.docker import DockerClient
from asynckubelet.manifests import Level, Manifests
from asynckubelet.progress import WaitDisplay
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


_commands: dict[str, Callable[..., None]] = {}


def _register(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def decorate(function: Callable[..., None]) -> Callable[..., None]:
        _commands[name] = command()(function)
        return function

    return decorate


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


app.command("run")(run.run)
app.command("validate")(validate.validate)
app.command("serve")(serve.serve)
for _name in ("apply", "delete", "get", "describe", "logs", "exec"):
    app.command(_name)(_commands[_name])
app.command("doctor")(doctor.doctor)


def main() -> None:
    app()
