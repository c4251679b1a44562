"""``asynckubelet serve``: the long-running node, until SIGINT/SIGTERM.

It runs the static pods of its manifest directory, serves the kubelet's read-only HTTP
endpoints and writes its pid into the state dir, where the client commands (``apply
--wait``, ``delete``) look for it.
"""

from __future__ import annotations

import dataclasses
import functools
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from loguru import logger

from asynckubelet.cli.options import (
    AllowRemoteOpt,
    ClusterOptions,
    ListenOpt,
    LogOptions,
    ManifestDirOpt,
    NodeOptions,
    StateDirOpt,
    StopPodsOpt,
    UsageError,
)
from asynckubelet.cli.output import command, err, fail, first_signal, run_async

if TYPE_CHECKING:
    from asynckubelet.node.kubelet import KubeletConfig


@command(log_default="INFO")
def serve(
    *,
    manifests: ManifestDirOpt = None,
    listen: ListenOpt = "127.0.0.1:10255",
    allow_remote: AllowRemoteOpt = False,
    state_dir: StateDirOpt = None,
    stop_pods: StopPodsOpt = False,
    node: NodeOptions,
    cluster: ClusterOptions,
    log: LogOptions,
) -> None:
    """Run the node: static pods from the manifest directory, HTTP endpoints, until a signal.

    Pods are admitted as a kubelet admits them (--capacity, --max-pods, --node-labels,
    host ports): one the node cannot take is listed Failed with the kubelet's reason.
    Image pulls are logged, one line per change of a layer's state. A Docker engine and
    the sandbox image are set up when missing, each announced in one line.

    With --kubeconfig the node also joins that cluster: it registers its Node, runs the
    pods bound to it and serves the kubelet API (kubectl logs, exec, port-forward).
    """
    import socket

    from asynckubelet.cli.provision import ensure_engine
    from asynckubelet.node.access import StateDir, default_state_dir
    from asynckubelet.node.kubelet import KubeletConfig
    from asynckubelet.server import check_listen, parse_listen

    node.check()
    cluster.check()
    state = state_dir if state_dir is not None else default_state_dir()
    try:
        host, port = parse_listen(listen)
        check_listen(host, allow_remote=allow_remote)
    except ValueError as e:
        raise UsageError(str(e)) from None
    config = KubeletConfig(
        node_name=node.node_name or socket.gethostname(),
        state_dir=state,
        manifest_dir=manifests or StateDir(state).manifests,
        pause_image=node.pause_image,
        docker_url=node.docker_host,
        pod_security=node.level,
        allow_namespace_policy=node.allow_namespace_policy,
        leave_running=not stop_pods,
        dns=node.dns(),
        service_account_issuer=node.service_account_issuer,
        node=node.node_info(),
    )
    ensure_engine(node.docker_host)
    if cluster.kubeconfig is not None:
        from asynckubelet.cli.cluster_mode import serve_cluster

        config = dataclasses.replace(config, node_name=config.node_name.lower())
        serve_cluster(config, node, cluster, state, host=host, port=port, allow_remote=allow_remote)
        return
    run_async(_serve, config, node, state, _Address(listen, host, port, allow_remote))


@dataclasses.dataclass(frozen=True)
class _Address:
    listen: str
    host: str
    port: int
    allow_remote: bool


async def _serve(config: KubeletConfig, node: NodeOptions, state: Path, at: _Address) -> None:
    from asynckubelet.cli.provision import announce
    from asynckubelet.docker import DockerClient
    from asynckubelet.node.access import remove_pid_file, write_pid_file
    from asynckubelet.node.kubelet import Kubelet
    from asynckubelet.progress import PullDisplay
    from asynckubelet.server import serve_http

    async with DockerClient(url=node.docker_host) as docker:
        plugin = node.network_plugin(docker, node_name=config.node_name)
        async with Kubelet(config, docker=docker, network=plugin) as kubelet:
            kubelet.runtime.images.listener = PullDisplay(console=err, live=False, write=_log_pull)
            kubelet.runtime.images.announce = announce
            await kubelet.runtime.pause_image()
            write_pid_file(state)
            try:
                async with anyio.create_task_group() as tg:
                    http = functools.partial(
                        serve_http,
                        kubelet,
                        host=at.host,
                        port=at.port,
                        allow_remote=at.allow_remote,
                    )
                    try:
                        bound = await tg.start(http)
                    except OSError as e:
                        raise fail(f"cannot listen on {at.listen}: {e}") from None
                    err.print(
                        f"node {config.node_name}: manifests {config.manifest_dir}, "
                        f"http://{at.host}:{bound}"
                    )
                    signum = await first_signal()
                    err.print(f"[dim]{signal.Signals(signum).name}: stopping[/dim]")
                    tg.cancel_scope.cancel()
            finally:
                remove_pid_file(state)


def _log_pull(image: str, text: str) -> None:
    logger.bind(image=image).info("pull {}: {}", image, text)
