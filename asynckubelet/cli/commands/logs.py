"""``asynckubelet logs``: a container's output, read from Docker; ``-f`` follows it across
restarts until the pod will not start it again, or until SIGINT/SIGTERM (exit 128+N)."""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from asynckubelet.cli.client import as_pod, daemon_client, node_runtime
from asynckubelet.cli.options import (
    ContainerOpt,
    FollowOpt,
    LogOptions,
    NamespaceOpt,
    NodeRef,
    PodNameArg,
    PreviousOpt,
    SinceOpt,
    TailOpt,
    TimestampsOpt,
    UsageError,
)
from asynckubelet.cli.output import command, err, exit_on_signals, run_async, stopped_by_signal

if TYPE_CHECKING:
    from asynckubelet.client import NodeClient


@command(not_found_as="BadRequest")
def logs(
    name: PodNameArg,
    *,
    container: ContainerOpt = None,
    follow: FollowOpt = False,
    previous: PreviousOpt = False,
    tail: TailOpt = None,
    timestamps: TimestampsOpt = False,
    since: SinceOpt = None,
    namespace: NamespaceOpt = "default",
    node: NodeRef,
    log: LogOptions,
) -> None:
    """Print a container's output; with -f keep following, across restarts."""
    from asynckubelet.printers import parse_duration

    try:
        since_ts = time.time() - parse_duration(since) if since else None
    except ValueError as e:
        raise UsageError(str(e)) from None
    request = _Request(
        namespace=namespace,
        name=name,
        container=container,
        follow=follow and not previous,
        previous=previous,
        tail=tail,
        timestamps=timestamps,
        since=since_ts,
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


def _print_through(request: _Request, client: NodeClient) -> None:
    """The daemon's log stream of the chosen container (its default one named first, as
    kubectl does, with the notice)."""
    from asynckubelet.node.access import default_container

    pod = as_pod(client.pod(request.namespace, request.name))
    chosen, notice = default_container(pod, request.container)
    if notice:
        err.print(escape(notice))
    since = None
    if request.since is not None:
        since = max(1, math.ceil(time.time() - request.since))
    for line in client.logs(
        request.namespace,
        request.name,
        container=chosen,
        follow=request.follow,
        previous=request.previous,
        tail=request.tail,
        timestamps=request.timestamps,
        since_seconds=since,
    ):
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


async def _print_logs(request: _Request, node: NodeRef) -> None:
    from asynckubelet.node.access import read_pods
    from asynckubelet.node.operations import find_container, next_instance

    async with node_runtime(node) as rm:
        target = await find_container(
            rm,
            await read_pods(rm, state=node.state),
            namespace=request.namespace,
            name=request.name,
            container=request.container,
            previous=request.previous,
            on_notice=lambda notice: err.print(escape(notice)),
        )
        cid, tail, since = target.container_id, request.tail, request.since
        seen = {cid}
        while True:
            async for line in rm.docker.logs(
                cid, follow=request.follow, tail=tail, timestamps=request.timestamps, since=since
            ):
                sys.stdout.write(line.text + "\n")
                sys.stdout.flush()
            if not request.follow:
                return
            following = await next_instance(
                rm, pod=target.pod, container=target.container, seen=seen
            )
            if following is None:
                return
            seen.add(following)
            cid, tail, since = following, None, None
