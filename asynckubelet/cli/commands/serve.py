"""``asynckubelet serve``: the long-running node, until SIGINT/SIGTERM.

It runs the pods applied to it and the static pods of its manifest directory, serves the
kubelet's read-only HTTP endpoints, and publishes itself in its state dir: the local API
on ``api.sock`` (0600) and its effective configuration in ``node.json``
(:mod:`asynckubelet.node.daemon`), where every client command finds it. The objects
applied to it are kept in ``objects/`` and taken back at the next start.
"""

from __future__ import annotations

import dataclasses
import functools
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.abc
from loguru import logger

from asynckubelet import errors
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
from asynckubelet.cli.output import command, err, fail, run_async

if TYPE_CHECKING:
    from asynckubelet.node.daemon import DaemonInfo
    from asynckubelet.node.kubelet import Kubelet, KubeletConfig


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
    """Run the node until a signal: the objects applied to it and the static pods of its
    manifest directory, its local API on <state-dir>/api.sock, the HTTP endpoints.

    Pods are admitted as a kubelet admits them (--capacity, --max-pods, --node-labels,
    host ports): one the node cannot take is listed Failed with the kubelet's reason.
    Image pulls are logged, one line per change of a layer's state. A Docker engine and
    the sandbox image are set up when missing, each announced in one line.

    With --kubeconfig the node also joins that cluster: it registers its Node, runs the
    pods bound to it and serves the kubelet API (kubectl logs, exec, port-forward).
    """
    import socket

    from asynckubelet.cli.provision import ensure_engine
    from asynckubelet.cluster.host import default_node_ip
    from asynckubelet.node.access import StateDir
    from asynckubelet.node.daemon import default_state_dir
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
        host_ips=(default_node_ip(),),
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
    from asynckubelet.node import daemon
    from asynckubelet.node.access import remove_pid_file, write_pid_file
    from asynckubelet.node.kubelet import API_SOURCE, Kubelet
    from asynckubelet.node.objects import OBJECTS_DIR, ObjectStore
    from asynckubelet.progress import PullDisplay
    from asynckubelet.workloads import WORKLOADS_SOURCE, Controllers

    try:
        socket_file = daemon.claim_socket(state)
    except errors.DaemonError as e:
        raise fail(str(e)) from None
    objects = ObjectStore(
        directory=state / OBJECTS_DIR,
        persistent_source=API_SOURCE,
        also_persistent=(WORKLOADS_SOURCE,),
    )
    async with DockerClient(url=node.docker_host) as docker:
        plugin = node.network_plugin(docker, node_name=config.node_name)
        async with Kubelet(config, docker=docker, network=plugin, objects=objects) as kubelet:
            kubelet.runtime.images.listener = PullDisplay(console=err, live=False, write=_log_pull)
            kubelet.runtime.images.announce = announce
            await kubelet.runtime.pause_image()
            write_pid_file(state)
            inode: int | None = None
            published: list[DaemonInfo] = []
            signals = anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM)
            try:
                # Signals are taken before the node is announced: one that comes right after
                # still removes what was announced.
                with signals as received:
                    async with anyio.create_task_group() as tg:
                        await tg.start(Controllers(kubelet).run, name="workload controllers")
                        # The socket first: a client that sees HTTP answer finds it.
                        inode = await _listen_locally(
                            tg, kubelet, lambda: published[0], socket_file
                        )
                        bound = await _listen(tg, kubelet, at)
                        info = _node_info(
                            config, node, at, bound, socket_file, docker.url, network=plugin.name
                        )
                        published.append(info)
                        daemon.write_node_info(state, info)
                        err.print(
                            f"node {config.node_name}: manifests {config.manifest_dir}, "
                            f"http://{at.host}:{bound}, local API {socket_file}"
                        )
                        signum = await anext(aiter(received))
                        err.print(f"[dim]{signal.Signals(signum).name}: stopping[/dim]")
                        tg.cancel_scope.cancel()
            finally:
                daemon.release_socket(state, inode=inode)
                if inode is not None:
                    daemon.remove_node_info(state)
                remove_pid_file(state)


async def _listen(tg: anyio.abc.TaskGroup, kubelet: Kubelet, at: _Address) -> int:
    """The read-only HTTP endpoints, started; their bound port."""
    from asynckubelet.server import serve_http

    http = functools.partial(
        serve_http, kubelet, host=at.host, port=at.port, allow_remote=at.allow_remote
    )
    try:
        return int(await tg.start(http))
    except OSError as e:
        raise fail(f"cannot listen on {at.listen}: {e}") from None


async def _listen_locally(
    tg: anyio.abc.TaskGroup, kubelet: Kubelet, info: Callable[[], DaemonInfo], socket_file: Path
) -> int:
    """The local API on the state dir's socket, started; the socket's inode."""
    from asynckubelet.localapi import serve_local

    local = functools.partial(serve_local, kubelet, info, path=str(socket_file))
    try:
        return int(await tg.start(local))
    except OSError as e:
        raise fail(f"cannot listen on {socket_file}: {e}") from None


def _node_info(
    config: KubeletConfig,
    node: NodeOptions,
    at: _Address,
    port: int,
    socket_file: Path,
    docker_url: str,
    *,
    network: str,
) -> DaemonInfo:
    """What the daemon publishes: its effective configuration."""
    from asynckubelet import __version__
    from asynckubelet.cli.options import ipv6_pod_cidr
    from asynckubelet.node.daemon import DaemonInfo

    return DaemonInfo(
        node_name=config.node_name,
        pod_security=config.pod_security,
        allow_namespace_policy=config.allow_namespace_policy,
        network=network,
        pod_cidr=node.pod_cidr,
        pod_cidr_v6=ipv6_pod_cidr(dual_stack=node.dual_stack, pod_cidr_v6=node.pod_cidr_v6) or "",
        bridge=node.bridge,
        cluster_dns=config.dns.cluster_dns,
        cluster_domain=config.dns.cluster_domain,
        listen=f"http://{at.host}:{port}",
        docker_host=docker_url,
        socket=str(socket_file),
        version=__version__,
    )


def _log_pull(image: str, text: str) -> None:
    logger.bind(image=image).info("pull {}: {}", image, text)
