"""The ports other nodes of the same host publish for their Services.

A nodePort, and a LoadBalancer's port, are DNAT rules on every local address of the
host: two nodes on one host (``--instance``) that publish the same port both rewrite its
packets, and one silently shadows the other. No socket shows such a port, so each node
says which ports it publishes in a record of its own state dir
(:data:`RECORD`, written by its Service controller at each sync), and reads the records
of the host's other nodes: the default instance's state dir and every state dir under
the instances root. A node writes only under its own state dir, and the records work
whatever the firewall (iptables, nftables, a CNI's).

A record counts only while its node runs (its socket answers,
:func:`~asynckubelet.node.locate.socket_answers`): a node that crashed or stopped holds
no port, however old its record. Each port carries the time the node first published it
(``since``), so two nodes that took one port at once agree which keeps it: the earlier,
the smaller node name on a tie.

A record is read bounded, and anything in it that is not a port of a known protocol is
left out: another node's files are not trusted further than that.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from asynckubelet.node.locate import socket_answers, socket_path

__all__ = ["RECORD", "Neighbours", "Published"]

RECORD = "published-ports.json"
MAX_BYTES = 256 * 1024
_PROTOCOLS = frozenset({"TCP", "UDP", "SCTP"})
_NODE_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")
_STATE_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")
PortKey = tuple[str, int]
"""``(protocol, port)``."""


@dataclass(frozen=True, order=True)
class Published:
    """A port a node publishes: since when, and which node."""

    since: float
    node: str


def _read(path: Path) -> tuple[str, dict[PortKey, float]] | None:
    """The node name and ports of a record, or None when absent or not a record."""
    try:
        with path.open("rb") as f:
            text = f.read(MAX_BYTES + 1)
    except OSError:
        return None
    if len(text) > MAX_BYTES:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    node, ports = data.get("node"), data.get("ports")
    if not isinstance(node, str) or not _NODE_NAME.fullmatch(node) or not isinstance(ports, list):
        return None
    found: dict[PortKey, float] = {}
    for entry in ports:
        if not isinstance(entry, dict):
            continue
        protocol, port, since = entry.get("protocol"), entry.get("port"), entry.get("since")
        if (
            protocol in _PROTOCOLS
            and isinstance(port, int)
            and not isinstance(port, bool)
            and 1 <= port <= 65535
            and isinstance(since, int | float)
            and not isinstance(since, bool)
        ):
            found[(str(protocol), port)] = float(since)
    return node, found


class Neighbours:
    """This node's record of its published ports, and the running neighbours' records.

    ``root`` is the instances root (None: no neighbours are looked for); ``alive`` tells
    whether the node of a state dir runs (default: its socket answers)."""

    def __init__(
        self,
        *,
        state_dir: Path,
        node_name: str,
        root: Path | None,
        alive: Callable[[Path], bool] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.state_dir = state_dir
        self.node_name = node_name
        self.root = root
        self.alive = alive if alive is not None else _answers
        self.clock = clock
        own = _read(state_dir / RECORD)
        self._since: dict[PortKey, float] = own[1] if own and own[0] == node_name else {}
        self._written: frozenset[PortKey] | None = None

    def states(self) -> list[Path]:
        """The state dirs of the host's other nodes: the default instance's, then each
        instance's under the root."""
        if self.root is None:
            return []
        found = [self.root.parent]
        with contextlib.suppress(OSError):
            for entry in sorted(os.scandir(self.root), key=lambda e: e.name):
                if _STATE_NAME.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
                    found.append(Path(entry.path))
        own = _resolved(self.state_dir)
        return [s for s in found if _resolved(s) != own]

    def published(self) -> dict[PortKey, Published]:
        """The ports the running neighbours publish, each with its earliest publisher."""
        found: dict[PortKey, Published] = {}
        for state in self.states():
            record = _read(state / RECORD)
            if record is None or not record[1] or not self.alive(state):
                continue
            node, ports = record
            if node == self.node_name:
                continue
            for key, since in ports.items():
                claim = Published(since, node)
                if key not in found or claim < found[key]:
                    found[key] = claim
        return found

    def holds(self, key: PortKey, claim: Published) -> bool:
        """Whether a neighbour's ``claim`` comes before this node's on ``key`` (a port
        this node does not publish yet it never holds)."""
        since = self._since.get(key)
        return since is None or claim < Published(since, self.node_name)

    def record(self, ports: Iterable[PortKey]) -> None:
        """Say that this node publishes ``ports`` now (a port kept keeps its time)."""
        wanted = frozenset(ports)
        if wanted == self._written:
            return
        now = self.clock()
        self._since = {key: self._since.get(key, now) for key in wanted}
        self._write(self._since)
        self._written = wanted

    def clear(self) -> None:
        """No port published any more (the node is leaving for good)."""
        self._since, self._written = {}, None
        with contextlib.suppress(FileNotFoundError):
            (self.state_dir / RECORD).unlink()

    def _write(self, ports: Mapping[PortKey, float]) -> None:
        body = {
            "node": self.node_name,
            "ports": [
                {"protocol": protocol, "port": port, "since": since}
                for (protocol, port), since in sorted(ports.items())
            ],
        }
        self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.state_dir / f".{RECORD}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(body, f)
        os.replace(tmp, self.state_dir / RECORD)


def _answers(state: Path) -> bool:
    try:
        return socket_answers(socket_path(state))
    except OSError:
        return False


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path
