"""The pod's resolv.conf and /etc/hosts, by the kubelet's rules: their content.

The content is decided by pure functions (:func:`pod_dns`, :func:`managed_hosts`), ported
from the kubelet's ``pkg/kubelet/network/dns`` and ``managedHostsFileContent`` so every
``dnsPolicy`` gives exactly what a cluster gives, with the same limits and the same
warning events. One difference on purpose: under ``Default`` the host's loopback
nameservers are dropped, since 127.0.0.53 on the node is nobody inside a pod's namespace.

They are functions of the pod's spec, the node's DNS settings and the text of the node's
files, with no network in them: the runtime computes them as the kubelet's ``kuberuntime``
asks its DNS configurer, and the network backends only receive the result (a
:class:`~asynckubelet.network.PodDNS` in the pod's network request). Reading the node's
files and writing the pod's is :mod:`~asynckubelet.runtime.dnsfiles`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from lightkube.models.core_v1 import Pod

from asynckubelet import errors
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
    """The cluster DNS servers ``ClusterFirst`` pods use (``--cluster-dns``); empty: the
    node's own resolvers (a node with Services gives its DNS server's address)."""
    cluster_domain: str = "cluster.local"
    """The cluster's domain: the pods' search path (``NS.svc.cluster.local``...)."""
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


__all__ = [
    "DNSSettings",
    "Event",
    "PodFiles",
    "ResolverConfig",
    "engine_dns",
    "managed_hosts",
    "parse_resolv_conf",
    "pod_dns",
    "pod_files",
    "pod_hostname_and_domain",
    "sandbox_hostname",
]
