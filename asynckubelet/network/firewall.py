"""``Firewall``: what the bridge backend asks of the host's packet filter.

The bridge backend forwards its bridge's traffic, masquerades pod egress and DNATs
hostPorts; how is the firewall's business. Two implementations keep everything in objects
of their own that nothing else touches: :class:`~asynckubelet.network.iptables.IPTables`
(chains named ``AKL-...``) and :class:`~asynckubelet.network.nftables.NFTables` (one table
per bridge and family). One instance serves one address family.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from asynckubelet import errors
from asynckubelet.manifests.messages import go_quote, is_ip_address, shown

_PROTOCOLS = frozenset({"TCP", "UDP", "SCTP"})
_SANDBOX_ID = re.compile(r"[0-9a-f]{1,64}")


def _shown(value: object) -> str:
    if isinstance(value, str):
        return go_quote(shown(value, 64))
    if isinstance(value, int):
        return str(value)
    return f"<{type(value).__name__}>"


def checked_sandbox_id(sandbox_id: str) -> str:
    """A Docker id (hex) and nothing else, since it names a chain in rule text."""
    if not isinstance(sandbox_id, str) or _SANDBOX_ID.fullmatch(sandbox_id) is None:
        raise errors.NetworkError(f"sandbox id must be hexadecimal, not {_shown(sandbox_id)}")
    return sandbox_id


@dataclass(frozen=True)
class DNAT:
    """One hostPort: traffic to ``host_ip:host_port`` (any local address when empty) goes
    to ``pod_ip:container_port``. Its fields reach ``iptables-restore`` input and ``nft -f``
    batches as text, so each is checked here, whatever validated the manifest before: ports
    are port numbers, the protocol one of three words, addresses IP addresses (a newline in
    a hostIP would otherwise start a rule of its own)."""

    host_port: int
    pod_ip: str
    container_port: int
    protocol: str = "TCP"
    host_ip: str = ""

    def __post_init__(self) -> None:
        for name in ("host_port", "container_port"):
            port = getattr(self, name)
            if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
                raise errors.NetworkError(f"hostPort rule: {name} is not a port: {_shown(port)}")
        if not isinstance(self.protocol, str) or self.protocol.upper() not in _PROTOCOLS:
            raise errors.NetworkError(
                f"hostPort rule: protocol must be TCP, UDP or SCTP, not {_shown(self.protocol)}"
            )
        if not isinstance(self.pod_ip, str) or not is_ip_address(self.pod_ip):
            raise errors.NetworkError(f"hostPort rule: pod IP {_shown(self.pod_ip)} is not an IP")
        if self.host_ip and (not isinstance(self.host_ip, str) or not is_ip_address(self.host_ip)):
            raise errors.NetworkError(f"hostPort rule: hostIP {_shown(self.host_ip)} is not an IP")

    def destination(self) -> str:
        """``--to-destination`` of the rule: an IPv6 address goes in brackets."""
        if ":" in self.pod_ip:
            return f"[{self.pod_ip}]:{self.container_port}"
        return f"{self.pod_ip}:{self.container_port}"


_RULE_NAME = re.compile(
    r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[a-z]([-a-z0-9]*[a-z0-9])?:[-a-z0-9]{0,15}"
)


def _port(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise errors.NetworkError(f"service rule: {what} is not a port: {_shown(value)}")
    return value


def _ipv4(value: object, what: str) -> str:
    if not isinstance(value, str) or not is_ip_address(value) or ":" in value:
        raise errors.NetworkError(f"service rule: {what} {_shown(value)} is not an IPv4 address")
    return value


@dataclass(frozen=True)
class ServiceRule:
    """One port of one Service, as the packet filter carries it: traffic to
    ``cluster_ip:port`` (none when empty), to ``node_port`` on any of the node's addresses
    (none when 0) and, for a LoadBalancer, to ``published_port`` on the node's addresses,
    goes to one of ``endpoints`` (``(pod IP, port)``, all ready), picked at random per
    connection. ``name`` (``namespace/service:port``) names its chain and comment. Every
    field reaches rule text, so each is checked here, as :class:`DNAT` checks its own."""

    name: str
    protocol: str
    cluster_ip: str = ""
    port: int = 0
    node_port: int = 0
    published_port: int = 0
    endpoints: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or _RULE_NAME.fullmatch(self.name) is None:
            raise errors.NetworkError(f"service rule: bad name {_shown(self.name)}")
        if not isinstance(self.protocol, str) or self.protocol.upper() not in _PROTOCOLS:
            raise errors.NetworkError(
                f"service rule: protocol must be TCP, UDP or SCTP, not {_shown(self.protocol)}"
            )
        if self.cluster_ip:
            _ipv4(self.cluster_ip, "cluster IP")
            _port(self.port, "port")
        for what in ("node_port", "published_port"):
            if getattr(self, what):
                _port(getattr(self, what), what)
        for endpoint in self.endpoints:
            if not isinstance(endpoint, tuple) or len(endpoint) != 2:
                raise errors.NetworkError("service rule: an endpoint is (IP, port)")
            _ipv4(endpoint[0], "endpoint")
            _port(endpoint[1], "endpoint port")

    @property
    def proto(self) -> str:
        return self.protocol.lower()


def probabilities(count: int) -> list[str]:
    """kube-proxy's random pick among ``count`` endpoints: rule ``i`` matches with
    probability ``1/(count-i)`` of what the rules before it left, so each is chosen with
    ``1/count``; the last rule takes the rest (None: no match needed)."""
    return [f"{1.0 / (count - i):0.10f}" for i in range(count - 1)]


class Firewall(Protocol):
    """One address family of the host's packet filter, as the bridge backend uses it."""

    binary: str
    """The command run (``iptables``, ``ip6tables``, ``nft``), named in messages."""

    def available(self) -> bool:
        """Whether the command is on this host."""
        ...

    async def nat_supported(self) -> bool:
        """Whether the kernel has this family's NAT (IPv6 NAT is optional)."""
        ...

    async def setup_network(
        self, *, bridge: str, subnet: str, masquerade: bool, nat: bool = True
    ) -> None:
        """Forward the bridge's traffic and, for IPv4, drop what the bridge sends to
        127.0.0.0/8 from elsewhere (the kubelet's loopback guard, CVE-2020-8558), unless it
        belongs to a connection the node made or DNATed; with ``nat``, masquerade egress
        of ``subnet`` (when ``masquerade``) and hairpin traffic, and hook up the hostPort
        rules. Idempotent; :meth:`remove_network` takes all of it away."""
        ...

    async def remove_network(self, *, bridge: str) -> None:
        """Remove everything made for ``bridge``, pods' hostPorts included."""
        ...

    async def add_hostports(self, *, bridge: str, sandbox_id: str, maps: Sequence[DNAT]) -> None:
        """The pod's hostPort rules, replacing any it had."""
        ...

    async def remove_hostports(self, *, bridge: str, sandbox_id: str) -> None:
        """Remove the pod's hostPort rules; absent is fine."""
        ...

    async def sync_services(self, *, bridge: str, rules: Sequence[ServiceRule]) -> None:
        """Make the Service rules of ``bridge``'s node exactly ``rules``, in one atomic
        change (a connection never sees half an update): rules of Services gone are
        removed, and the hooks that send traffic through them are made when missing."""
        ...


__all__ = ["DNAT", "Firewall", "ServiceRule", "checked_sandbox_id", "probabilities"]
