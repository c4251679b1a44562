"""Choosing the network backend by name, as ``--network`` does; a backend's module is
imported when it is chosen.

``auto`` follows where the daemon is: a local daemon (a unix socket) and a process that
may manage links (root) get the ``bridge`` backend, whose pods the node reaches directly;
anything else (a remote or rootless daemon, Docker Desktop) gets ``docker``, a network
Docker manages itself, since this process cannot enter the containers' namespaces there.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from asynckubelet import errors
from asynckubelet.docker import DockerAPI
from asynckubelet.docker.engine import is_local_daemon
from asynckubelet.network import (
    DEFAULT_BRIDGE,
    DEFAULT_POD_CIDR,
    DEFAULT_STATE_DIR,
    FIREWALLS,
    LoopbackPlugin,
    NetworkPlugin,
)

BACKENDS = ("auto", "bridge", "cni", "docker", "loopback")


def choose_backend(*, docker_url: str | None, euid: int | None = None) -> tuple[str, str]:
    """The backend ``auto`` stands for here, and why."""
    euid = os.geteuid() if euid is None else euid
    if not is_local_daemon(docker_url):
        return "docker", f"the Docker daemon at {docker_url} is not local"
    if euid != 0:
        return "docker", "not root: cannot manage links"
    return "bridge", "local Docker daemon and root"


def make_network_plugin(
    name: str,
    *,
    docker: DockerAPI | None = None,
    state_dir: Path = DEFAULT_STATE_DIR,
    bridge: str = DEFAULT_BRIDGE,
    pod_cidr: str = DEFAULT_POD_CIDR,
    pod_cidr_v6: str | None = None,
    masquerade: bool = True,
    firewall: str = "iptables",
    cni_conf_dirs: Sequence[Path] | None = None,
    cni_plugin_dirs: Sequence[Path] | None = None,
    node_name: str | None = None,
) -> NetworkPlugin:
    """The backend called ``name`` (one of :data:`BACKENDS`).

    ``pod_cidr_v6`` turns on dual stack for the ``bridge`` backend (``cni``: dual stack is
    the configuration list's, two ``host-local`` ranges). ``firewall`` (one of
    :data:`~asynckubelet.network.bridge.FIREWALLS`) and ``masquerade`` are the ``bridge``
    backend's; ``nftables`` is refused when ``nft`` is not on PATH."""
    if firewall not in FIREWALLS:
        raise errors.NetworkError(
            f"firewall must be one of {', '.join(FIREWALLS)}, not {firewall!r}"
        )
    if name == "auto":
        name, _ = choose_backend(docker_url=docker.url if docker is not None else None)
    if pod_cidr_v6 is not None and name != "bridge":
        where = (
            "give the CNI configuration list's host-local an IPv6 range"
            if name == "cni"
            else "use --network bridge"
        )
        raise errors.NetworkError(
            f"an IPv6 pod CIDR (dual stack) is for the bridge backend, not {name}: {where}"
        )
    if name == "loopback":
        return LoopbackPlugin()
    if name == "bridge":
        from asynckubelet.network.bridge import BridgeConfig, BridgePlugin

        if firewall == "nftables" and shutil.which("nft") is None:
            raise errors.NetworkError(
                "firewall nftables needs the nft binary (Debian package nftables), "
                "not found on PATH; install it or use the iptables firewall"
            )
        return BridgePlugin(
            BridgeConfig(
                bridge=bridge,
                pod_cidr=pod_cidr,
                pod_cidr_v6=pod_cidr_v6,
                state_dir=state_dir,
                masquerade=masquerade,
                firewall=firewall,
                sandbox_exists=_sandbox_runs(docker) if docker is not None else None,
                engine_id=_engine_id(docker) if docker is not None else None,
            )
        )
    if name == "docker":
        from asynckubelet.network.dockernet import DockerNetworkPlugin

        if docker is None:
            raise errors.NetworkError("the docker network backend needs a Docker client")
        return DockerNetworkPlugin(docker=docker, node_name=node_name or socket.gethostname())
    if name == "cni":
        from asynckubelet.network.cni import CNIConfig, CNIPlugin

        defaults = CNIConfig()
        return CNIPlugin(
            CNIConfig(
                conf_dirs=tuple(cni_conf_dirs or defaults.conf_dirs),
                plugin_dirs=tuple(cni_plugin_dirs or defaults.plugin_dirs),
                cache_dir=state_dir / "cni",
                sandbox_exists=_sandbox_runs(docker) if docker is not None else None,
                engine_id=_engine_id(docker) if docker is not None else None,
            )
        )
    raise errors.NetworkError(f"network backend must be one of {', '.join(BACKENDS)}, not {name!r}")


def engine_key(info: Mapping[str, Any]) -> str:
    """What tells one Docker engine from another on a host: its ``/info`` ID with its data
    root. The ID alone is not enough: Docker 20.10 derives it from ``/etc/docker/key.json``,
    which every daemon started with the default configuration directory shares, while no
    two daemons can share a data root."""
    return f"{info.get('ID') or ''}@{info.get('DockerRootDir') or ''}"


def _engine_id(docker: DockerAPI) -> Callable[[], Awaitable[str]]:
    async def engine() -> str:
        return engine_key(await docker.info())

    return engine


def _sandbox_runs(docker: DockerAPI) -> Callable[[str], Awaitable[bool]]:
    async def runs(sandbox_id: str) -> bool:
        try:
            info = await docker.inspect_container(sandbox_id)
        except errors.NotFound:
            return False
        return bool(info.get("State", {}).get("Running"))

    return runs


__all__ = ["BACKENDS", "choose_backend", "engine_key", "is_local_daemon", "make_network_plugin"]
