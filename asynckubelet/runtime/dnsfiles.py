"""The pod's resolv.conf and /etc/hosts put in place, from the node's own files.

:func:`write_pod_files` puts the content :mod:`~asynckubelet.runtime.poddns` decides in
place the way cri-dockerd does: into the files Docker made for the pause container
(``ResolvConfPath``, ``HostsPath``). Every container that joins the sandbox's network
namespace (``NetworkMode: container:<sandbox>``) gets these very files bind-mounted by
Docker, so one write serves the whole pod. The files are rewritten in place, never
replaced, because the bind mounts follow the inode. A sandbox whose network namespace
Docker leaves alone (``NetworkDisabled``) has no such files: the node writes the pod's own
(:func:`read_pod_files`) and mounts them into each container, as the kubelet and the CRI
runtimes do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio.to_thread
from lightkube.models.core_v1 import Pod

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.docker import DockerAPI
from asynckubelet.runtime.poddns import (
    DNSSettings,
    PodFiles,
    ResolverConfig,
    managed_hosts,
    parse_resolv_conf,
    pod_dns,
    pod_files,
)


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as e:
        raise errors.SandboxError(f"cannot read {path}: {e}") from e


def _rewrite(path: str, text: str) -> None:
    with open(path, "r+") as f:
        f.seek(0)
        f.write(text)
        f.truncate()


async def node_resolver(settings: DNSSettings) -> ResolverConfig:
    """The node's resolver file, parsed (empty when none is configured). A file that cannot
    be read counts as empty: what is read here only informs network plugins and the
    engine; :func:`write_pod_files` reads it again, and fails, when it writes the pod's."""
    if not settings.resolv_conf:
        return ResolverConfig()
    text = ""
    try:
        text = await anyio.to_thread.run_sync(_read, settings.resolv_conf)
    except errors.SandboxError as e:
        logger.debug("dns: {}", e)
    return parse_resolv_conf(text)


async def pod_resolver(pod: Pod, *, settings: DNSSettings) -> ResolverConfig:
    """The resolver settings the pod's resolv.conf will hold (no events are emitted here:
    :func:`write_pod_files` emits them when it writes the file)."""
    resolver, _ = pod_dns(pod, settings=settings, host=await node_resolver(settings))
    return resolver


async def read_pod_files(
    pod: Pod, *, settings: DNSSettings, pod_ips: Sequence[str], whole: bool = False
) -> PodFiles:
    """:func:`pod_files` from the node's files. ``whole``: a hosts file even without a pod
    IP (the kubelet's, with its localhost lines and hostAliases), for a pod whose sandbox
    has no hosts file of Docker's to leave."""
    host_resolv = (
        await anyio.to_thread.run_sync(_read, settings.resolv_conf)
        if (settings.resolv_conf)
        else ""
    )
    node_hosts_text = await anyio.to_thread.run_sync(_read, "/etc/hosts")
    files = pod_files(
        pod,
        settings=settings,
        pod_ips=pod_ips,
        host_resolv_text=host_resolv,
        node_hosts_text=node_hosts_text,
    )
    if whole and files.hosts is None:
        hosts = managed_hosts(pod, pod_ips=(), cluster_domain=settings.cluster_domain)
        files = dataclasses.replace(files, hosts=hosts)
    return files


async def write_pod_files(
    *,
    docker: DockerAPI,
    pod: Pod,
    sandbox_id: str,
    pod_ips: Sequence[str],
    settings: DNSSettings,
    event: Callable[[str, str, str], None],
) -> PodFiles | None:
    """Write the pod's resolv.conf and hosts into the sandbox's files; emit the events.

    Returns None when the sandbox's files are not reachable from here (a remote daemon),
    in which case Docker's own files stay, made from :func:`engine_dns`'s keys.
    """
    info = await docker.inspect_container(sandbox_id)
    resolv_path = info.get("ResolvConfPath") or ""
    hosts_path = info.get("HostsPath") or ""
    if not resolv_path or not await anyio.Path(resolv_path).exists():
        logger.debug("dns: sandbox {} files are not local; Docker's stay", sandbox_id[:12])
        return None
    files = await read_pod_files(pod, settings=settings, pod_ips=pod_ips)
    try:
        await anyio.to_thread.run_sync(_rewrite, resolv_path, files.resolv_conf)
        if files.hosts is not None and hosts_path:
            await anyio.to_thread.run_sync(_rewrite, hosts_path, files.hosts)
    except OSError as e:
        raise errors.SandboxError(f"writing the pod's resolv.conf and hosts: {e}") from e
    for ev in files.events:
        event(ev.type, ev.reason, ev.message)
    return files


__all__ = ["node_resolver", "pod_resolver", "read_pod_files", "write_pod_files"]
