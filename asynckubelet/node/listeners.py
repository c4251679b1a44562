"""The ports that processes on this host serve, read from the kernel's socket tables.

A Service's nodePort or LoadBalancer port is DNATed on every local address of the node
(nat PREROUTING and OUTPUT), so a port that a process on the host listens on would be
taken from it without a word: ``127.0.0.1:22`` would answer from a pod. The Service
controller refuses such ports (:mod:`asynckubelet.workloads.allocation`), and to know
them reads ``/proc/net/{tcp,tcp6,udp,udp6}`` (and ``sctp/eps`` when the kernel has SCTP
loaded: without it there is no SCTP socket). These are the tables of the reading
process's network namespace, which for the node agent is the host's. Reading them, unlike
binding each port to see whether it is free, takes no port from anyone even for an
instant, and tells a server from a connection.

What counts as serving a port:

* TCP: a socket in state LISTEN. A connection to or from the port is not a server.
* UDP: a socket bound and not connected (state 07), which receives from anyone. A
  connected UDP socket is one conversation, as a TCP connection is.
* SCTP: every endpoint listed.

Every local address counts, the wildcard and loopback included, IPv4 and IPv6 alike: the
rules match whatever local address a packet is sent to, and a wildcard IPv6 socket takes
IPv4 too.
"""

from __future__ import annotations

import ipaddress
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["PROC_NET", "Listener", "parse_sctp_endpoints", "parse_socket_table", "read_listeners"]

PROC_NET = Path("/proc/net")
_TCP_LISTEN = "0A"
_UDP_UNCONNECTED = "07"
_TABLES: tuple[tuple[str, Literal["TCP", "UDP"]], ...] = (
    ("tcp", "TCP"),
    ("tcp6", "TCP"),
    ("udp", "UDP"),
    ("udp6", "UDP"),
)


@dataclass(frozen=True)
class Listener:
    """A socket of the host that serves ``port`` for ``protocol`` on ``address``."""

    protocol: str
    """``TCP``, ``UDP`` or ``SCTP``."""
    address: str
    """``0.0.0.0``, ``::``, ``127.0.0.1``..."""
    port: int


def _address(text: str, byteorder: Literal["little", "big"]) -> str:
    """A table's hex address: each 32-bit word printed as the host's integer."""
    raw = b"".join(int(text[i : i + 8], 16).to_bytes(4, byteorder) for i in range(0, len(text), 8))
    return str(ipaddress.ip_address(raw))


def parse_socket_table(
    text: Iterable[str],
    *,
    protocol: Literal["TCP", "UDP"],
    byteorder: Literal["little", "big"] = sys.byteorder,
) -> Iterator[Listener]:
    """The serving sockets among the lines of a ``/proc/net/{tcp,udp}[6]`` table (its
    header included); a line that is not a socket's is skipped."""
    wanted = _TCP_LISTEN if protocol == "TCP" else _UDP_UNCONNECTED
    for line in text:
        fields = line.split(None, 4)
        if len(fields) < 4 or not fields[0].endswith(":") or fields[3].upper() != wanted:
            continue
        address, sep, port = fields[1].partition(":")
        if not sep or len(address) not in (8, 32):
            continue
        try:
            yield Listener(protocol, _address(address, byteorder), int(port, 16))
        except ValueError:
            continue


def parse_sctp_endpoints(text: Iterable[str]) -> Iterator[Listener]:
    """The endpoints of ``/proc/net/sctp/eps`` (``ENDPT SOCK STY SST HBKT LPORT UID
    INODE LADDRS``), one per local address (``*`` when it lists none)."""
    for line in text:
        fields = line.split()
        if len(fields) < 8 or not fields[5].isdigit():
            continue
        for address in fields[8:] or ["*"]:
            yield Listener("SCTP", address, int(fields[5]))


def read_listeners(root: Path = PROC_NET) -> list[Listener]:
    """Every serving socket of this network namespace; a table the kernel does not have
    (no IPv6, no SCTP) has none."""
    found: list[Listener] = []
    for name, protocol in _TABLES:
        try:
            with (root / name).open(encoding="ascii", errors="replace") as f:
                found.extend(parse_socket_table(f, protocol=protocol))
        except OSError:
            continue
    try:
        with (root / "sctp" / "eps").open(encoding="ascii", errors="replace") as f:
            found.extend(parse_sctp_endpoints(f))
    except OSError:
        pass
    return found
