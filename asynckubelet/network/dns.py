"""The pod's resolv.conf and /etc/hosts, by the kubelet's rules.

The content is decided by pure functions (:func:`pod_dns`, :func:`managed_hosts`), ported
from the kubelet's ``pkg/kubelet/network/dns`` and ``managedHostsFileContent`` so every
``dnsPolicy`` gives exactly what a cluster gives, with the same limits and the same
warning events. One difference on purpose: under ``Default`` the host's loopback
nameservers are dropped, since 127.0.0.53 on the node is nobody inside a pod's namespace.

:func:`write_pod_files` puts the result in place the way cri-dockerd does: into the files
Docker made for the pause container (``ResolvConfPath``, ``HostsPath``). Every container
that joins the sandbox's network namespace (``NetworkMode: container:<sandbox>``) gets
these very files bind-mounted by Docker, so one write serves the whole pod. The files are
rewritten in place, never replaced, because the bind mounts follow the inode. A sandbox
whose network namespace Docker leaves alone (``NetworkDisabled``) has no such files: the
node writes the pod's own (:func:`read_pod_files`) and mounts them into each container,
as the kubelet and the CRI runtimes do.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio.to_thread
from lightkube.models.core_v1 import Pod

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.docker import DockerAPI
from asynckubelet.docker.types import HostConfig
from asynckubelet.manifests.messages import go_quote, is_ip_address, shown

MAX_NAMESERVERS = 3
MAX_SEARCH_PATHS = 32
MAX_SEARCH_LIST_CHARS = 2048
MAX_SEARCH_PATH_LENGTH = 253
DEFAULT_OPTIONS = ("ndots:5",)
MANAGED_HOSTS_HEADER = "# Kubernetes-managed hosts file.\n"


@dataclass(frozen=True)
class DNSSettings:
    """The node's DNS configuration (the kubelet's ``clusterDNS``, ``clusterDomain``,
    ``resolvConf``)."""

    cluster_dns: tuple[str, ...] = ()
    cluster_domain: str = "cluster.local"
    resolv_conf: str = "/etc/resolv.conf"
    """The node's resolver file; empty: none (pods then resolve through 127.0.0.1)."""


_ZONE = re.compile(r"[A-Za-z0-9_.-]{1,15}")


def _refuse(what: str, value: str) -> errors.SandboxError:
    return errors.SandboxError(
        f"{what} {go_quote(shown(value, 64))} would not be one entry of the pod's "
        "resolv.conf or hosts file; refusing to write it"
    )


def _word(value: str, what: str) -> str:
    """One word of printable characters: the unit of every line these files hold. Values
    reach here validated, but a newline here would be a line of the attacker's choosing."""
    if not value or not value.isprintable() or any(ch.isspace() for ch in value):
        raise _refuse(what, value)
    return value


def _address(value: str, what: str) -> str:
    if not is_ip_address(value):
        raise _refuse(what, value)
    return value


def _is_nameserver(value: str) -> bool:
    """An address, with the interface zone a node's own resolver file may give an IPv6
    link-local server (``fe80::1%eth0``)."""
    address, percent, zone = value.partition("%")
    return is_ip_address(address) and (not percent or _ZONE.fullmatch(zone) is not None)


def _nameserver(value: str) -> str:
    if not _is_nameserver(value):
        raise _refuse("nameserver", value)
    return value


@dataclass(frozen=True)
class ResolverConfig:
    nameservers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[str, ...] = ()

    def render(self) -> str:
        """resolv.conf text, as cri-dockerd writes it; raises :class:`SandboxError` for an
        entry that is not one word (a nameserver: an address)."""
        lines = [f"nameserver {_nameserver(s)}" for s in self.nameservers]
        if self.searches:
            lines.append("search " + " ".join(_word(s, "search domain") for s in self.searches))
        if self.options:
            lines.append("options " + " ".join(_word(o, "resolver option") for o in self.options))
        return "\n".join(lines) + "\n" if lines else ""


@dataclass(frozen=True)
class Event:
    type: str
    reason: str
    message: str


@dataclass(frozen=True)
class PodFiles:
    resolv_conf: str
    hosts: str | None
    """None: leave Docker's hosts file (no pod IP known yet)."""
    events: tuple[Event, ...] = field(default=())


def parse_resolv_conf(text: str) -> ResolverConfig:
    """The kubelet's ``parseResolvConf``: nameservers accumulate, the last search and the
    last options line win, search domains lose a trailing dot; a nameserver that is not an
    address is skipped, as the C library skips it."""
    servers: list[str] = []
    searches: list[str] = []
    options: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("#"):
            continue
        words = line.split()
        if not words:
            continue
        if words[0] == "nameserver" and len(words) >= 2 and _is_nameserver(words[1]):
            servers.append(words[1])
        elif words[0] == "search":
            searches = [w.removesuffix(".") for w in words[1:]]
        elif words[0] == "options":
            options = words[1:]
    return ResolverConfig(tuple(servers), tuple(searches), tuple(options))


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return False


def _unique(items: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _merge_options(existing: Sequence[str], extra: Sequence[tuple[str, str | None]]) -> list[str]:
    merged: dict[str, str] = {}
    for op in existing:
        key, _, text = op.partition(":")
        merged[key] = text
    for name, value in extra:
        merged[name] = value or ""
    return [f"{k}:{v}" if v else k for k, v in merged.items()]


def _pod_ref(pod: Pod) -> str:
    meta = pod.metadata
    assert meta is not None  # noqa: S101  (type narrowing: an admitted pod has metadata)
    return f"{meta.name}_{meta.namespace or 'default'}({meta.uid or ''})"


def _fit_search(searches: list[str], events: list[Event]) -> list[str]:
    exceeded = False
    if len(searches) > MAX_SEARCH_PATHS:
        searches = searches[:MAX_SEARCH_PATHS]
        exceeded = True
    kept = [s for s in searches if len(s) <= MAX_SEARCH_PATH_LENGTH]
    exceeded = exceeded or len(kept) != len(searches)
    searches = kept
    total = len(" ".join(searches))
    if total > MAX_SEARCH_LIST_CHARS:
        cut = 0
        removed = 0
        for s in reversed(searches):
            cut += len(s) + 1
            removed += 1
            if total - cut <= MAX_SEARCH_LIST_CHARS:
                break
        searches = searches[: len(searches) - removed]
        exceeded = True
    if exceeded:
        events.append(
            Event(
                "Warning",
                "DNSConfigForming",
                "Search Line limits were exceeded, some search paths have been omitted, "
                f"the applied search line is: {' '.join(searches)}",
            )
        )
    return searches


def _fit_nameservers(servers: list[str], events: list[Event]) -> list[str]:
    if len(servers) > MAX_NAMESERVERS:
        servers = servers[:MAX_NAMESERVERS]
        events.append(
            Event(
                "Warning",
                "DNSConfigForming",
                "Nameserver limits were exceeded, some nameservers have been omitted, "
                f"the applied nameserver line is: {' '.join(servers)}",
            )
        )
    return servers


def pod_dns(
    pod: Pod, *, settings: DNSSettings, host: ResolverConfig
) -> tuple[ResolverConfig, list[Event]]:
    """The pod's resolver configuration and the events the kubelet records on the way.

    ``host`` is the node's parsed resolver file (empty when ``settings.resolv_conf`` is
    empty).
    """
    spec = pod.spec
    assert spec is not None and pod.metadata is not None  # noqa: S101  (type narrowing: an admitted pod has spec and metadata)
    events: list[Event] = []
    policy = spec.dnsPolicy or "ClusterFirst"
    if policy == "None":
        kind = "none"
    elif policy == "ClusterFirstWithHostNet":
        kind = "cluster"
    elif policy == "ClusterFirst":
        kind = "host" if spec.hostNetwork else "cluster"
    else:
        kind = "host"
    servers = [s for s in host.nameservers if not _is_loopback(s)]
    searches = list(host.searches)
    options = list(host.options)
    if kind == "none":
        servers, searches, options = [], [], []
    elif kind == "cluster" and settings.cluster_dns:
        servers = list(settings.cluster_dns)
        if settings.cluster_domain:
            domain = settings.cluster_domain
            ns = pod.metadata.namespace or "default"
            cluster = [f"{ns}.svc.{domain}", f"svc.{domain}", domain]
            searches = list(_unique(cluster + searches))
        options = list(DEFAULT_OPTIONS)
    elif kind == "cluster":
        message = (
            'kubelet does not have ClusterDNS IP configured and cannot create Pod using "'
            'ClusterFirst" policy. Falling back to "Default" policy.'
        )
        events.append(Event("Warning", "MissingClusterDNS", f'pod: "{_pod_ref(pod)}". {message}'))
        kind = "host"
    if kind == "host" and not settings.resolv_conf:
        servers = ["127.0.0.1"]
        searches = ["."]
    config = spec.dnsConfig
    if config is not None:
        servers = list(_unique(servers + list(config.nameservers or [])))
        searches = list(_unique(searches + list(config.searches or [])))
        options = _merge_options(options, [(o.name or "", o.value) for o in config.options or []])
    servers = _fit_nameservers(servers, events)
    searches = _fit_search(searches, events)
    return ResolverConfig(tuple(servers), tuple(searches), tuple(options)), events


def pod_hostname_and_domain(pod: Pod, *, cluster_domain: str) -> tuple[str, str]:
    """The kubelet's ``GeneratePodHostNameAndDomain``: hostname (63 characters at most)
    and, when ``subdomain`` is set, ``<subdomain>.<namespace>.svc.<cluster domain>``."""
    spec = pod.spec
    meta = pod.metadata
    assert spec is not None and meta is not None  # noqa: S101  (type narrowing: an admitted pod has spec and metadata)
    hostname = (spec.hostname or meta.name or "")[:63].rstrip("-.")
    domain = ""
    if spec.subdomain:
        domain = f"{spec.subdomain}.{meta.namespace or 'default'}.svc.{cluster_domain}"
    return hostname, domain


HOSTNAME_MAX = 64


def sandbox_hostname(pod: Pod, *, cluster_domain: str) -> str | None:
    """The FQDN as the sandbox's hostname under ``setHostnameAsFQDN`` (None: not asked).

    Longer than 64 characters is refused with the kubelet's message.
    """
    if pod.spec is None or not pod.spec.setHostnameAsFQDN:
        return None
    hostname, domain = pod_hostname_and_domain(pod, cluster_domain=cluster_domain)
    fqdn = f"{hostname}.{domain}" if domain else hostname
    if len(fqdn) > HOSTNAME_MAX:
        raise errors.SandboxError(
            f"failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is "
            f"too long ({HOSTNAME_MAX} characters is the max, {len(fqdn)} characters requested)"
        )
    return fqdn


def _alias_lines(pod: Pod) -> str:
    aliases = (pod.spec.hostAliases if pod.spec else None) or []
    if not aliases:
        return ""
    lines = ["", "# Entries added by HostAliases."]
    lines += [
        "\t".join(
            [
                _address(a.ip or "", "hostAliases IP"),
                *(_word(h, "hostAliases hostname") for h in a.hostnames or []),
            ]
        )
        for a in aliases
    ]
    return "\n".join(lines) + "\n"


def managed_hosts(pod: Pod, *, pod_ips: Sequence[str], cluster_domain: str) -> str:
    """The kubelet's ``managedHostsFileContent``."""
    hostname, domain = pod_hostname_and_domain(pod, cluster_domain=cluster_domain)
    text = MANAGED_HOSTS_HEADER + (
        "127.0.0.1\tlocalhost\n"
        "::1\tlocalhost ip6-localhost ip6-loopback\n"
        "fe00::0\tip6-localnet\n"
        "fe00::0\tip6-mcastprefix\n"
        "fe00::1\tip6-allnodes\n"
        "fe00::2\tip6-allrouters\n"
    )
    _word(hostname, "hostname")
    if domain:
        _word(domain, "domain")
    for ip in pod_ips:
        _address(ip, "pod IP")
        text += f"{ip}\t{hostname}.{domain}\t{hostname}\n" if domain else f"{ip}\t{hostname}\n"
    return text + _alias_lines(pod)


def engine_dns(pod: Pod, *, resolver: ResolverConfig) -> HostConfig:
    """The sandbox's ``HostConfig`` DNS keys for an engine whose files this process cannot
    write (a remote daemon): Docker then renders the pod's resolver settings and hostAliases
    itself, as closely as it allows (on a user-defined network its resolv.conf names its
    embedded server, which forwards to these nameservers)."""
    keys = HostConfig()
    resolver.render()
    if resolver.nameservers:
        keys["Dns"] = list(resolver.nameservers)
    if resolver.searches:
        keys["DnsSearch"] = list(resolver.searches)
    if resolver.options:
        keys["DnsOptions"] = list(resolver.options)
    aliases = (pod.spec.hostAliases if pod.spec else None) or []
    extra = [
        f"{_word(name, 'hostAliases hostname')}:{_address(a.ip or '', 'hostAliases IP')}"
        for a in aliases
        for name in a.hostnames or []
    ]
    if extra:
        keys["ExtraHosts"] = extra
    return keys


def node_hosts(pod: Pod, *, node_hosts_text: str) -> str:
    """A host-network pod's hosts file: the node's, plus its hostAliases."""
    return node_hosts_text + _alias_lines(pod)


def pod_files(
    pod: Pod,
    *,
    settings: DNSSettings,
    pod_ips: Sequence[str],
    host_resolv_text: str,
    node_hosts_text: str,
) -> PodFiles:
    """Both files of a pod, from its spec and the node's files (pure)."""
    host = parse_resolv_conf(host_resolv_text) if settings.resolv_conf else ResolverConfig()
    resolver, events = pod_dns(pod, settings=settings, host=host)
    hosts: str | None
    if pod.spec is not None and pod.spec.hostNetwork:
        hosts = node_hosts(pod, node_hosts_text=node_hosts_text)
    elif pod_ips:
        hosts = managed_hosts(pod, pod_ips=pod_ips, cluster_domain=settings.cluster_domain)
    else:
        hosts = None
    return PodFiles(resolv_conf=resolver.render(), hosts=hosts, events=tuple(events))


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


__all__ = [
    "DNSSettings",
    "Event",
    "PodFiles",
    "ResolverConfig",
    "engine_dns",
    "managed_hosts",
    "node_resolver",
    "parse_resolv_conf",
    "pod_dns",
    "pod_files",
    "pod_hostname_and_domain",
    "pod_resolver",
    "read_pod_files",
    "sandbox_hostname",
    "write_pod_files",
]
