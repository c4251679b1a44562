"""Stale UDP and SCTP flows of Services, cleared as kube-proxy clears them.

Connection tracking pins a flow to the endpoint its first packet was sent to. For TCP that
is right: an endpoint that goes away resets its connections and clients open new ones. A
UDP client usually keeps its socket (a resolver, a metrics agent) and the kernel keeps
sending its datagrams to the endpoint of the first one, gone or not, for as long as they
keep coming; one sent while the Service had no endpoint was refused and stays refused the
same way. So when the endpoints of a UDP or SCTP Service port change, its tracked flows
whose reply does not come from a serving endpoint are deleted (kube-proxy's
``CleanStaleEntries``): to the ClusterIP, every such flow; to a nodePort (or a
LoadBalancer's published port), the flows to an endpoint that was removed. The next
datagram then picks a serving endpoint. Flows are read and deleted over netlink
(pyroute2's conntrack socket).
"""

from __future__ import annotations

import errno
import functools
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from asynckubelet._logging import logger
from asynckubelet.network.firewall import ServiceRule

CLEARED_PROTOCOLS = {"UDP": socket.IPPROTO_UDP, "SCTP": socket.IPPROTO_SCTP}


@dataclass(frozen=True)
class StaleFlows:
    """What to clear for one Service port whose endpoints changed."""

    protocol: str
    """``UDP`` or ``SCTP``."""
    cluster_ip: str
    port: int
    node_ports: tuple[int, ...]
    """Its nodePort and published port (none when 0)."""
    serving: frozenset[tuple[str, int]]
    """``(pod IP, port)`` of the endpoints that serve now."""
    removed: frozenset[str]
    """IPs of the endpoints that served before and no longer do."""


def stale_flows(old: Sequence[ServiceRule] | None, new: Sequence[ServiceRule]) -> list[StaleFlows]:
    """The UDP and SCTP Service ports whose endpoints differ between the rules programmed
    before (``old``; None: none known, as at start, when every such port is cleared) and
    ``new``, including those whose Service is gone."""
    before = {(r.name, r.protocol.upper()): r for r in old or ()}
    after = {(r.name, r.protocol.upper()): r for r in new}
    found: list[StaleFlows] = []
    for key in sorted(before.keys() | after.keys()):
        if key[1] not in CLEARED_PROTOCOLS:
            continue
        was, now = before.get(key), after.get(key)
        if was is not None and now is not None and was == now:
            continue
        rule = now if now is not None else was
        assert rule is not None  # noqa: S101  (type narrowing: the key came from one of them)
        serving = frozenset(now.endpoints) if now is not None else frozenset()
        removed = frozenset(ip for ip, _ in (was.endpoints if was else ())) - {
            ip for ip, _ in serving
        }
        addresses = [r for r in (was, now) if r is not None]
        found.append(
            StaleFlows(
                protocol=key[1],
                cluster_ip=rule.cluster_ip,
                port=rule.port,
                node_ports=tuple(
                    sorted({p for r in addresses for p in (r.node_port, r.published_port) if p})
                ),
                serving=serving,
                removed=removed,
            )
        )
    return found


class FlowCleaner(Protocol):
    async def clear(self, flows: Sequence[StaleFlows]) -> int:
        """Delete the stale flows; returns how many were deleted."""


class NetlinkFlowCleaner:
    """Reads and deletes tracked flows over netlink, on the netlink thread's loop
    (:func:`~asynckubelet.network.off_loop`); a kernel that refuses (no
    ``nf_conntrack_netlink``, no ``CAP_NET_ADMIN``) is said once and then left alone."""

    def __init__(self) -> None:
        self._warned = False

    async def clear(self, flows: Sequence[StaleFlows]) -> int:
        if not flows:
            return 0
        from asynckubelet.network import off_loop

        return await off_loop(functools.partial(self._clear, list(flows)))

    async def _clear(self, flows: list[StaleFlows]) -> int:
        """Delete the stale flows: per Service port, those to its ClusterIP; per protocol,
        one dump of every tracked flow for those to a nodePort from a removed endpoint."""
        from pyroute2.conntrack import AsyncConntrack, NFCTAttrTuple
        from pyroute2.netlink.exceptions import NetlinkError

        deleted = 0
        to_node_ports: dict[int, list[StaleFlows]] = {}
        try:
            async with AsyncConntrack() as ct:
                for flow in flows:
                    proto = CLEARED_PROTOCOLS[flow.protocol]
                    if flow.node_ports and flow.removed:
                        to_node_ports.setdefault(proto, []).append(flow)
                    if flow.cluster_ip:
                        wanted = NFCTAttrTuple(proto=proto, daddr=flow.cluster_ip)
                        for entry in [e async for e in await ct.dump_entries(tuple_orig=wanted)]:
                            if entry.tuple_orig.dport == flow.port and _stale(entry, flow):
                                deleted += await _delete(ct, entry)
                for proto, group in to_node_ports.items():
                    wanted = NFCTAttrTuple(proto=proto)
                    for entry in [e async for e in await ct.dump_entries(tuple_orig=wanted)]:
                        if any(_from_removed(entry, flow) for flow in group):
                            deleted += await _delete(ct, entry)
        except (OSError, NetlinkError) as e:
            if not self._warned:
                self._warned = True
                logger.warning("Service flows: cannot clear stale UDP/SCTP flows: {}", e)
            return deleted
        if deleted:
            logger.debug("Service flows: {} stale UDP/SCTP flows cleared", deleted)
        return deleted


def _from_removed(entry: Any, flow: StaleFlows) -> bool:
    """A flow to one of the Service port's nodePorts answered by a removed endpoint."""
    return entry.tuple_orig.dport in flow.node_ports and entry.tuple_reply.saddr in flow.removed


def _stale(entry: Any, flow: StaleFlows) -> bool:
    """A flow to the ClusterIP whose replies do not come from a serving endpoint (one to a
    removed endpoint, or one refused while there was none)."""
    return (entry.tuple_reply.saddr, entry.tuple_reply.sport) not in flow.serving


async def _delete(ct: Any, entry: Any) -> int:
    from pyroute2.netlink.exceptions import NetlinkError

    try:
        await ct.delete(entry)
    except NetlinkError as e:
        if e.code == errno.ENOENT:  # it ended between the dump and now
            return 0
        raise
    return 1


__all__ = ["CLEARED_PROTOCOLS", "FlowCleaner", "NetlinkFlowCleaner", "StaleFlows", "stale_flows"]
