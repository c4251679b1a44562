"""``asynckubelet logs``: a container's output, read from Docker; ``-f`` follows it across
restarts until the pod will not start it again, or until SIGINT/SIGTERM (exit 128+N)."""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from typing import TYPE_CHECKING

from asynckubelet.cli.client import as_pod, node_api, pod_name, pod_ref
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
)

if TYPE_CHECKING:
    from lightkube.models.core_v1 import Pod

    from asynckubelet.api.protocol import NodeAPI


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
    ref = pod_ref(name)
    with exit_on_signals(), node_api(node) as api:
        request = _Request(
            namespace=namespace,
            name=pod_name(ref, namespace=namespace, api=api),
            container=container,
            follow=follow and not previous,
            previous=previous,
            tail=tail,
            timestamps=timestamps,
            since=since_ts,
            all_containers=all_containers,
            limit_bytes=limit_bytes or None,
        )
        _print_logs(request, api)


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


def _print_logs(request: _Request, api: NodeAPI) -> None:
    """The log streams of the chosen containers: one after the other, or, when following
    several, side by side as lines come."""
    import threading

    from asynckubelet.api.protocol import PodLogOptions

    pod = as_pod(api.get("pods", request.namespace, request.name))
    names = _containers(pod, request)
    since = None
    if request.since is not None:
        since = max(1, math.ceil(time.time() - request.since))
    lock = threading.Lock()
    failures: list[BaseException] = []
    out = sys.stdout.buffer

    def stream(container: str) -> None:
        options = PodLogOptions(
            container=container,
            follow=request.follow,
            previous=request.previous,
            tail_lines=request.tail,
            timestamps=request.timestamps,
            since_seconds=since,
            limit_bytes=request.limit_bytes,
        )
        try:
            for piece in api.log(request.namespace, request.name, options):
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
