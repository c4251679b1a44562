"""The host's serving sockets, read from the kernel's tables: TCP in LISTEN only, UDP bound
and not connected, every address (wildcard, loopback, a specific one), IPv4 and IPv6."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from asynckubelet.node.listeners import (
    Listener,
    parse_sctp_endpoints,
    parse_socket_table,
    read_listeners,
)

TCP_HEADER = (
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
    "timeout inode"
)
TAIL = " 00000000:00000000 00:00000000 00000000     0        0 1045 1 00000000d011284e 100 0 0"


def line(local: str, remote: str, state: str, n: int = 0) -> str:
    return f"   {n}: {local} {remote} {state}{TAIL}"


@dataclass(frozen=True)
class Case:
    name: str
    protocol: Literal["TCP", "UDP"]
    line: str
    found: tuple[str, int] | None
    """``(address, port)`` of the listener the line is, None when it is none."""

    def __str__(self) -> str:
        return self.name


V6_ANY = "0" * 32
V6_LOOPBACK = "00000000000000000000000001000000"
V6_DOC = "B80D0120000000000000000001000000"
V4_MAPPED_LOOPBACK = "0000000000000000FFFF00000100007F"
CASES = [
    Case(
        "tcp wildcard listening",
        "TCP",
        line("00000000:280F", "00000000:0000", "0A"),
        ("0.0.0.0", 10255),
    ),
    Case(
        "tcp loopback listening",
        "TCP",
        line("0100007F:B8C7", "00000000:0000", "0A"),
        ("127.0.0.1", 47303),
    ),
    Case(
        "tcp specific address listening",
        "TCP",
        line("0A01A8C0:0016", "00000000:0000", "0A"),
        ("192.168.1.10", 22),
    ),
    Case(
        "tcp established is a connection", "TCP", line("0100007F:280F", "0100007F:D39A", "01"), None
    ),
    Case(
        "tcp time-wait is a connection", "TCP", line("0100007F:280F", "0100007F:D39A", "06"), None
    ),
    Case("tcp syn-sent is a connection", "TCP", line("0100007F:D39A", "0100007F:280F", "02"), None),
    Case(
        "tcp6 wildcard listening", "TCP", line(f"{V6_ANY}:0016", f"{V6_ANY}:0000", "0A"), ("::", 22)
    ),
    Case(
        "tcp6 loopback listening",
        "TCP",
        line(f"{V6_LOOPBACK}:908D", f"{V6_ANY}:0000", "0A"),
        ("::1", 37005),
    ),
    Case(
        "tcp6 specific address listening",
        "TCP",
        line(f"{V6_DOC}:1F90", f"{V6_ANY}:0000", "0A"),
        ("2001:db8::1", 8080),
    ),
    Case(
        "tcp6 v4-mapped listening",
        "TCP",
        line(f"{V4_MAPPED_LOOPBACK}:1F90", f"{V6_ANY}:0000", "0A"),
        (str(ipaddress.ip_address("::ffff:127.0.0.1")), 8080),
    ),
    Case(
        "udp bound to the wildcard",
        "UDP",
        line("00000000:0035", "00000000:0000", "07"),
        ("0.0.0.0", 53),
    ),
    Case(
        "udp bound to loopback",
        "UDP",
        line("0100007F:E649", "00000000:0000", "07"),
        ("127.0.0.1", 58953),
    ),
    Case(
        "udp connected is a conversation", "UDP", line("0100007F:D39A", "0100007F:0009", "01"), None
    ),
    Case(
        "udp6 bound to the wildcard",
        "UDP",
        line(f"{V6_ANY}:D335", f"{V6_ANY}:0000", "07"),
        ("::", 54069),
    ),
    Case(
        "udp state 0A is not a tcp listener",
        "UDP",
        line("00000000:0035", "00000000:0000", "0A"),
        None,
    ),
    Case("the header is no socket", "TCP", TCP_HEADER, None),
    Case("a short line is skipped", "TCP", "   0: 00000000:280F", None),
    Case("a bad address is skipped", "TCP", line("0000000:280F", "00000000:0000", "0A"), None),
    Case("a bad port is skipped", "TCP", line("00000000:XYZ", "00000000:0000", "0A"), None),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_socket_table_lines(case: Case) -> None:
    found = list(parse_socket_table([case.line], protocol=case.protocol, byteorder="little"))
    expected = [Listener(case.protocol, *case.found)] if case.found is not None else []
    assert found == expected


def test_a_big_endian_hosts_table_reads_the_same_addresses() -> None:
    lines = [
        line("7F000001:280F", "00000000:0000", "0A"),
        line(f"{'0' * 24}00000001:0016", "0", "0A"),
    ]
    found = list(parse_socket_table(lines, protocol="TCP", byteorder="big"))
    assert found == [Listener("TCP", "127.0.0.1", 10255), Listener("TCP", "::1", 22)]


def test_sctp_endpoints_are_listed_per_local_address() -> None:
    eps = [
        " ENDPT     SOCK   STY SST HBKT LPORT   UID INODE LADDRS",
        "ffff88017e0a0200 ffff880299f7fa00 2   10  29   5000     0 86443 10.0.0.1 127.0.0.1",
        "ffff88017e0a0300 ffff880299f7fb00 2   10  30   36412    0 86444 ",
    ]
    assert list(parse_sctp_endpoints(eps)) == [
        Listener("SCTP", "10.0.0.1", 5000),
        Listener("SCTP", "127.0.0.1", 5000),
        Listener("SCTP", "*", 36412),
    ]


def test_the_tables_the_kernel_lacks_have_no_sockets(tmp_path: Path) -> None:
    (tmp_path / "tcp").write_text(
        TCP_HEADER + "\n" + line("0100007F:280F", "00000000:0000", "0A") + "\n"
    )
    assert read_listeners(tmp_path) == [Listener("TCP", "127.0.0.1", 10255)]


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    made: list[socket.socket] = []
    yield made
    for s in made:
        s.close()


def _socket(made: list[socket.socket], family: int, kind: int, address: str) -> int:
    s = socket.socket(family, kind)
    made.append(s)
    s.bind((address, 0))
    return int(s.getsockname()[1])


def test_this_hosts_listening_and_bound_sockets_are_read_and_its_connections_are_not(
    sockets: list[socket.socket],
) -> None:
    """Sockets this test makes on loopback, read back from this process's own tables."""
    tcp = _socket(sockets, socket.AF_INET, socket.SOCK_STREAM, "127.0.0.1")
    sockets[-1].listen()
    udp = _socket(sockets, socket.AF_INET, socket.SOCK_DGRAM, "127.0.0.1")
    connected = _socket(sockets, socket.AF_INET, socket.SOCK_DGRAM, "127.0.0.1")
    sockets[-1].connect(("127.0.0.1", udp))
    client = socket.create_connection(("127.0.0.1", tcp))
    sockets.append(client)
    outgoing = int(client.getsockname()[1])
    bound_only = _socket(sockets, socket.AF_INET, socket.SOCK_STREAM, "127.0.0.1")
    found = {(entry.protocol, entry.address, entry.port) for entry in read_listeners()}
    assert ("TCP", "127.0.0.1", tcp) in found
    assert ("UDP", "127.0.0.1", udp) in found
    assert ("UDP", "127.0.0.1", connected) not in found
    assert ("TCP", "127.0.0.1", outgoing) not in found
    assert ("TCP", "127.0.0.1", bound_only) not in found
