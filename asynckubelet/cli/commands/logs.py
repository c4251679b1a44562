"""``asynckubelet logs``: a container's output, read from Docker; ``-f`` follows it across
restarts until the pod will not start it again, or until SIGINT/SIGTERM (exit 128+N)."""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING

import anyio
import typer

from asynckubelet.cli.client import as_pod, daemon_client, node_pods, node_runtime, pod_name
from asynckubelet.cli.options import (
    AllContainersOpt,
    ContainerOpt,
    FollowOpt,
    LimitBytesOpt,
    LogOptions,
    NamespaceOpt,
    NodeRef,
    PodRefArg,
    PreviousOpt,
    SinceOpt,
    TailOpt,
    TimestampsOpt,
    UsageError,
)
from asynckubelet.cli.output import (
    command,
    err,
    escape,
    exit_on_signals,
    fail,
    run_async,
    stopped_by_signal,
)

if TYPE_CHECKING:
    from lightkube.models.core_v1 import Pod

    from asynckubelet.client import NodeClient
    from asynckubelet.runtime.manager import RuntimeManager


@command(not_found_as="BadRequest")
def logs(
    name: PodRefArg,
    *,
    container: ContainerOpt = None,
    follow: FollowOpt = False,
    previous: PreviousOpt = False,
    tail: TailOpt = None,
    timestamps: TimestampsOpt = False,
    since: SinceOpt = None,
    limit_bytes: LimitBytesOpt = 0,
    all_containers: AllContainersOpt = False,
    namespace: NamespaceOpt = "default",
    node: NodeRef,
    log: LogOptions,
) -> None:
    """Print a container's output (--all-containers: every container's); with -f keep
    following, across restarts."""
    from asynckubelet.kubectl.times import parse_duration

    if all_containers and container:
        raise fail(f"--all-containers=true should not be specified with container name {container}")
    if limit_bytes < 0:
        raise UsageError("--limit-bytes must be greater than 0")
    try:
        since_ts = time.time() - parse_duration(since) if since else None
    except ValueError as e:
        raise UsageError(str(e)) from None
    request = _Request(
        namespace=namespace,
        name=pod_name(name, namespace=namespace, node=node),
        container=container,
        follow=follow and not previous,
        previous=previous,
        tail=tail,
        timestamps=timestamps,
        since=since_ts,
        all_containers=all_containers,
        limit_bytes=limit_bytes or None,
    )
    client = daemon_client(node)
    if client is not None:
        with exit_on_signals():
            _print_through(request, client)
        return
    signum = run_async(stopped_by_signal, _print_logs, request, node)
    if signum is not None:
        raise typer.Exit(128 + signum)


@dataclasses.dataclass(frozen=True)
class _Request:
    namespace: str
    name: str
    container: str | None
    follow: bool
    previous: bool
    tail: int | None
    timestamps: bool
    since: float | None
    all_containers: bool = False
    limit_bytes: int | None = None
    """Bytes of each container's output at most, as the kubelet's ``limitBytes``."""


def _containers(pod: Pod, request: _Request) -> list[str]:
    """The containers whose output is shown: every one with ``--all-containers`` (init
    containers first, as kubectl), else the one asked for or the pod's default one (its
    notice said on stderr)."""
    from asynckubelet.node.access import default_container

    if request.all_containers:
        spec = pod.spec
        inits = [c.name for c in (spec.initContainers if spec else None) or []]
        return [*inits, *(c.name for c in (spec.containers if spec else None) or [])]
    chosen, notice = default_container(pod, request.container)
    if notice:
        err.print(escape(notice))
    return [chosen]


def _print_through(request: _Request, client: NodeClient) -> None:
    """The daemon's log streams of the chosen containers: one after the other, or, when
    following several, side by side as lines come."""
    import threading

    pod = as_pod(client.pod(request.namespace, request.name))
    names = _containers(pod, request)
    since = None
    if request.since is not None:
        since = max(1, math.ceil(time.time() - request.since))
    lock = threading.Lock()
    failures: list[BaseException] = []
    out = sys.stdout.buffer

    def stream(container: str) -> None:
        try:
            for piece in client.logs(
                request.namespace,
                request.name,
                container=container,
                follow=request.follow,
                previous=request.previous,
                tail=request.tail,
                timestamps=request.timestamps,
                since_seconds=since,
                limit_bytes=request.limit_bytes,
            ):
                with lock:
                    out.write(piece)
                    out.flush()
        except Exception as e:
            failures.append(e)

    if not request.follow or len(names) == 1:
        for container in names:
            stream(container)
            if failures:
                raise failures[0]
        return
    threads = [threading.Thread(target=stream, args=(c,), daemon=True) for c in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


async def _print_logs(request: _Request, node: NodeRef) -> None:
    from asynckubelet.node.access import find_pod

    async with node_runtime(node) as rm:
        pods = await node_pods(rm, node)
        names = _containers(find_pod(pods, namespace=request.namespace, name=request.name), request)
        if not request.follow:
            for container in names:
                await _print_container(request, rm, pods, container)
            return
        async with anyio.create_task_group() as tg:
            for container in names:
                tg.start_soon(_print_container, request, rm, pods, container)


async def _print_container(
    request: _Request, rm: RuntimeManager, pods: list[Pod], container: str
) -> None:
    from asynckubelet.node.operations import find_container, next_instance

    target = await find_container(
        rm,
        pods,
        namespace=request.namespace,
        name=request.name,
        container=container,
        previous=request.previous,
    )
    cid, tail, since = target.container_id, request.tail, request.since
    seen = {cid}
    left = request.limit_bytes
    out = sys.stdout.buffer
    while True:
        lines = rm.docker.logs(
            cid, follow=request.follow, tail=tail, timestamps=request.timestamps, since=since
        )
        try:
            async for line in lines:
                data = (line.text + ("\n" if line.newline else "")).encode()
                if left is not None:
                    data = data[:left]
                    left -= len(data)
                out.write(data)
                out.flush()
                if left is not None and left <= 0:
                    return
        finally:
            if isinstance(lines, AsyncGenerator):
                await lines.aclose()
        if not request.follow:
            return
        following = await next_instance(rm, pod=target.pod, container=target.container, seen=seen)
        if following is None:
            return
        seen.add(following)
        cid, tail, since = following, None, None
