"""``python -m asynckubelet.cluster``: run the node in cluster node mode.

The flags are those ``asynckubelet serve`` takes in cluster mode (the kubelet's names where
it has them); this runner starts :func:`~asynckubelet.cluster.run_cluster_node` with a
node configured as ``serve`` configures one, and stops on SIGINT or SIGTERM, leaving the
pods running for the next start to adopt unless ``--stop-pods-on-exit``. A kubeconfig
that cannot be used, or a flag with a bad value, is one ``error:`` line and exit status 2.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio
from loguru import logger

from asynckubelet import errors
from asynckubelet.cluster.agent import ClusterConfig, ClusterNode, run_cluster_node
from asynckubelet.docker import DockerClient
from asynckubelet.manifests import LEVELS
from asynckubelet.network import NetworkPlugin
from asynckubelet.network.bridge import DEFAULT_BRIDGE, DEFAULT_STATE_DIR
from asynckubelet.network.factory import BACKENDS, make_network_plugin
from asynckubelet.node.admission import (
    host_resources,
    parse_labels,
    parse_node_resources,
    parse_taints,
)
from asynckubelet.node.kubelet import KubeletConfig
from asynckubelet.runtime.logrotation import (
    DEFAULT_MAX_FILES,
    DEFAULT_MAX_SIZE,
    check_max_files,
    parse_max_size,
)
from asynckubelet.runtime.poddns import DNSSettings

KUBECONFIG_ENV = "ASYNCKUBELET_KUBECONFIG"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m asynckubelet.cluster",
        description="Join a Kubernetes cluster as a node and run the pods bound to it.",
    )
    p.add_argument(
        "--kubeconfig",
        default=os.environ.get(KUBECONFIG_ENV),
        help=f"kubeconfig of the node's credentials (env {KUBECONFIG_ENV})",
    )
    p.add_argument("--context", help="kubeconfig context (default: its current-context)")
    p.add_argument("--node-name", default=None, help="node name (default: hostname)")
    p.add_argument("--node-labels", default="", help="key=value,... set at registration")
    p.add_argument(
        "--register-with-taints", default="", help="key[=value]:Effect,... of a new Node"
    )
    p.add_argument("--node-ip", default=None, help="the Node's InternalIP")
    p.add_argument("--kubelet-port", type=int, default=10250, help="kubelet API port")
    p.add_argument("--address", default=None, help="kubelet API address (default: node IP)")
    p.add_argument("--tls-cert-file", type=Path, default=None, help="kubelet API certificate")
    p.add_argument("--tls-private-key-file", type=Path, default=None, help="its key")
    p.add_argument("--client-ca-file", type=Path, default=None, help="CA of API clients")
    p.add_argument("--authorization-mode", default="Webhook", choices=("Webhook", "AlwaysAllow"))
    p.add_argument("--capacity", default="", help="cpu=4,memory=8Gi,pods=110,...")
    p.add_argument("--pod-cidr", default=None, help="pod range when the cluster assigns none")
    p.add_argument(
        "--pod-cidr-wait", type=float, default=60.0, help="seconds to wait for spec.podCIDR"
    )
    p.add_argument("--network", default="bridge", choices=BACKENDS, help="pod network backend")
    p.add_argument("--bridge", default=DEFAULT_BRIDGE, help="bridge name (bridge backend)")
    p.add_argument(
        "--network-state-dir",
        type=Path,
        default=DEFAULT_STATE_DIR,
        help="IPAM and pod network records (bridge and cni backends)",
    )
    p.add_argument("--state-dir", type=Path, default=None, help="node state directory")
    p.add_argument("--manifests", type=Path, default=None, help="static pod directory")
    p.add_argument("--pause-image", default=None)
    p.add_argument("--docker-host", default=None)
    p.add_argument("--pod-security", default="baseline", choices=LEVELS)
    p.add_argument(
        "--seccomp-default",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="RuntimeDefault seccomp for containers that set no profile (default: on);"
        " --no-seccomp-default: Unconfined",
    )
    p.add_argument("--cluster-dns", action="append", default=[])
    p.add_argument("--cluster-domain", default="cluster.local")
    p.add_argument("--stop-pods-on-exit", action="store_true")
    p.add_argument(
        "--max-parallel-starts",
        type=int,
        default=None,
        metavar="N",
        help="containers the engine creates and starts at once (default: 4 per CPU, at"
        " least 8; 0: no limit)",
    )
    p.add_argument(
        "--container-log-max-size",
        default=DEFAULT_MAX_SIZE,
        metavar="QUANTITY",
        help="a container's log file is rotated past this size (negative: no rotation)",
    )
    p.add_argument(
        "--container-log-max-files",
        type=int,
        default=DEFAULT_MAX_FILES,
        metavar="N",
        help="log files kept per container, the one written included (at least 2)",
    )
    p.add_argument("--log-level", default="INFO")
    return p


def _bad(message: str) -> SystemExit:
    print(f"error: {message}", file=sys.stderr)
    return SystemExit(2)


def configs(args: argparse.Namespace) -> tuple[ClusterConfig, KubeletConfig]:
    if not args.kubeconfig:
        raise _bad(f"--kubeconfig (or {KUBECONFIG_ENV}) is required")
    try:
        labels = parse_labels(args.node_labels)
        taints = parse_taints(args.register_with_taints)
        resources = (
            parse_node_resources(args.capacity, base=host_resources()) if args.capacity else None
        )
        cluster = ClusterConfig(
            kubeconfig=Path(args.kubeconfig),
            context=args.context,
            node_labels=labels,
            register_with_taints=taints,
            node_ip=args.node_ip,
            kubelet_port=args.kubelet_port,
            resources=resources,
            pod_cidr=args.pod_cidr,
            pod_cidr_wait=args.pod_cidr_wait,
            kubelet_address=args.address,
            tls_cert_file=args.tls_cert_file,
            tls_private_key_file=args.tls_private_key_file,
            client_ca_file=args.client_ca_file,
            authorization_mode=args.authorization_mode,
        )
    except ValueError as e:
        raise _bad(str(e)) from None
    try:
        parse_max_size(args.container_log_max_size)
        check_max_files(args.container_log_max_files)
    except ValueError as e:
        raise _bad(str(e)) from None
    if args.max_parallel_starts is not None and args.max_parallel_starts < 0:
        raise _bad(
            f"--max-parallel-starts must be 0 (no limit) or more, not {args.max_parallel_starts}"
        )
    node_name = (args.node_name or socket.gethostname()).lower()
    starts = (
        {}
        if args.max_parallel_starts is None
        else {"max_parallel_starts": args.max_parallel_starts}
    )
    kubelet = KubeletConfig(
        node_name=node_name,
        state_dir=args.state_dir,
        manifest_dir=args.manifests,
        pause_image=args.pause_image,
        docker_url=args.docker_host,
        pod_security=args.pod_security,
        seccomp_default=args.seccomp_default,
        leave_running=not args.stop_pods_on_exit,
        dns=DNSSettings(cluster_dns=tuple(args.cluster_dns), cluster_domain=args.cluster_domain),
        container_log_max_size=args.container_log_max_size,
        container_log_max_files=args.container_log_max_files,
        **starts,
    )
    return cluster, kubelet


async def serve(args: argparse.Namespace) -> None:
    cluster, kubelet = configs(args)
    async with DockerClient(url=args.docker_host) as docker:

        def network(pod_cidr: str) -> NetworkPlugin:
            kwargs = {"pod_cidr": pod_cidr} if pod_cidr else {}
            return make_network_plugin(
                args.network,
                docker=docker,
                node_name=kubelet.node_name,
                bridge=args.bridge,
                state_dir=args.network_state_dir,
                **kwargs,  # type: ignore[arg-type]
            )

        async with anyio.create_task_group() as tg:
            node: ClusterNode = await tg.start(
                lambda task_status: run_cluster_node(
                    cluster, kubelet, docker=docker, network=network, task_status=task_status
                )
            )
            print(
                f"node {node.node_name} joined {node.api.server} (pod CIDR {node.pod_cidr})",
                file=sys.stderr,
                flush=True,
            )
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for signum in signals:
                    logger.info("{}: stopping", signal.Signals(signum).name)
                    break
            tg.cancel_scope.cancel()


def _first_error(error: BaseException) -> BaseException:
    """The first error inside (nested) exception groups."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logger.remove()
    logger.enable("asynckubelet")
    logger.add(sys.stderr, level=args.log_level.upper(), diagnose=False, backtrace=False)
    try:
        anyio.run(serve, args)
    except KeyboardInterrupt:
        return 130
    except BaseException as group:
        error = _first_error(group)
        if isinstance(error, (errors.KubeconfigError, errors.KubeletServingError)):
            print(f"error: {error}", file=sys.stderr)
            return 2
        if isinstance(error, errors.AsyncKubeletError):
            print(f"error: {error}", file=sys.stderr)
            return 1
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
