"""``Firewall``: what the bridge backend asks of the host's packet filter.

The bridge backend forwards its bridge's traffic, masquerades pod egress and DNATs
hostPorts; how is the firewall's business. Two implementations keep everything in objects
of their own that nothing else touches: :class:`~asynckubelet.network.iptables.IPTables`
(chains named ``AKL-...``) and :class:`~asynckubelet.network.nftables.NFTables` (one table
per bridge and family). One instance serves one address family.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class DNAT:
    """One hostPort: traffic to ``host_ip:host_port`` (any local address when empty) goes
    to ``pod_ip:container_port``."""

    host_port: int
    pod_ip: str
    container_port: int
    protocol: str = "TCP"
    host_ip: str = ""

    def destination(self) -> str:
        """``--to-destination`` of the rule: an IPv6 address goes in brackets."""
        if ":" in self.pod_ip:
            return f"[{self.pod_ip}]:{self.container_port}"
        return f"{self.pod_ip}:{self.container_port}"


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
        """Forward the bridge's traffic; with ``nat``, masquerade egress of ``subnet``
        (when ``masquerade``) and hairpin traffic, and hook up the hostPort rules.
        Idempotent."""
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


__all__ = ["DNAT", "Firewall"]
