"""Node instances: one name (``--instance``, ``ASYNCKUBELET_INSTANCE``) that keeps a node
apart from every other node on the host.

Two nodes on one host meet wherever they share a default: the state dir (and so the
daemon's socket), the node name (the ownership label of their containers, so one would
collect the other's pods), the bridge with its firewall chains, the pod and Service
ranges, the TCP port of the HTTP endpoints and the pod network's records. An instance
derives all of them from its name, as defaults that explicit flags (and their variables)
still override:

- state dir ``<default state dir>/instances/NAME``, network records under its
  ``network/``, node name ``<hostname>-NAME``, bridge ``akl-NAME`` (a long name is cut
  and given a hash, so it fits the kernel's 15 characters), IPv6 pod CIDR
  ``fd00:ac1:<hash>::/64`` (``--dual-stack``): these follow from the name alone;
- the pod CIDR (a /24 of 10.138.0.0/16), the Service ClusterIP range (a /24 of
  10.97.0.0/16), the listen port (10400 and up) and cluster mode's kubelet port (10700
  and up) share one slot, the first free one counting from a hash of the name: free
  means that no host route overlaps either range, that no other instance's record holds
  them, and that the ports can be bound now. The default instance's 10.137.0.0/16,
  10.96.0.0/16, 10255 and 10250 are outside these pools.

The slot is kept in ``instance.json`` in the instance's state dir, written under a lock
by the commands that make a node network (``serve``, ``run``), so an instance keeps its
ranges across restarts (its own bridge's route would otherwise make its range look taken)
and two instances started at once never take one slot. Other commands read the record,
or derive the same values without writing one.

A name is a DNS label of at most :data:`NAME_MAX` characters (lowercase letters, digits,
``-``): it becomes a path component, a link name and part of firewall chain names, so
nothing else is let through. The empty name is the default instance, whose defaults are
those of a node without ``--instance``.

Only the standard library is imported here: the fast ``get`` path uses
:func:`state_dir` too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import ipaddress
import json
import os
import re
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

ENV = "ASYNCKUBELET_INSTANCE"
NAME_MAX = 32
_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")
BRIDGE_PREFIX = "akl-"
IFNAMSIZ = 15
POD_POOL = ipaddress.IPv4Network("10.138.0.0/16")
SERVICE_POOL = ipaddress.IPv4Network("10.97.0.0/16")
SLOT_PREFIX = 24
SLOTS = 2 ** (SLOT_PREFIX - POD_POOL.prefixlen)
PORT_BASE = 10400
KUBELET_PORT_BASE = 10700
RECORD = "instance.json"
RECORD_MAX_BYTES = 64 * 1024
CLAIMING_COMMANDS = frozenset({"serve", "run"})
"""The commands that make a node network, and so write the instance's record."""

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class InstanceError(ValueError):
    """A bad instance name, or no free slot for one; the message names the flag."""


def check_name(name: str) -> str:
    """``name`` when it is a valid instance name (empty: the default instance)."""
    if name == "":
        return name
    if len(name) > NAME_MAX:
        raise InstanceError(
            f"--instance {name[:NAME_MAX]!r}...: must be at most {NAME_MAX} characters, "
            f"not {len(name)}"
        )
    if not _NAME.fullmatch(name):
        raise InstanceError(
            f"--instance {name!r}: must be lowercase letters, digits and '-', starting and "
            "ending with a letter or digit (a DNS label)"
        )
    return name


def _digest(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")


def bridge_name(name: str) -> str:
    """``akl-NAME``; a name too long for a link name is cut and given a hash."""
    whole = BRIDGE_PREFIX + name
    if len(whole) <= IFNAMSIZ:
        return whole
    tail = f"{_digest(name):x}"[:5]
    return f"{BRIDGE_PREFIX}{name[: IFNAMSIZ - len(BRIDGE_PREFIX) - len(tail) - 1]}-{tail}"


def pod_cidr_v6(name: str) -> str:
    """The instance's IPv6 pod CIDR of dual stack, never the default's ``fd00:ac1::/64``."""
    return f"fd00:ac1:{_digest(name) % 0xFFFF + 1:x}::/64"


def node_name(name: str, *, hostname: str | None = None) -> str:
    return f"{hostname or socket.gethostname()}-{name}"


def instances_root(base: str | os.PathLike[str] | None = None) -> Path:
    """Where instances live: ``instances/`` of the default state dir (of this user)."""
    if base is None:
        from asynckubelet.node.locate import default_state_dir_path

        base = default_state_dir_path()
    return Path(base) / "instances"


def state_dir(name: str, *, root: Path | None = None) -> Path:
    return (root if root is not None else instances_root()) / name


def network_state_dir(name: str, *, root: Path | None = None) -> Path:
    return state_dir(name, root=root) / "network"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Allocation:
    """An instance's slot: its pod CIDR, Service range, listen port and kubelet port."""

    slot: int
    pod_cidr: str
    service_cluster_ip_range: str
    port: int
    kubelet_port: int

    @property
    def listen(self) -> str:
        return f"127.0.0.1:{self.port}"

    @classmethod
    def of_slot(cls, slot: int) -> Allocation:
        pods = list(POD_POOL.subnets(new_prefix=SLOT_PREFIX))
        services = list(SERVICE_POOL.subnets(new_prefix=SLOT_PREFIX))
        return cls(
            slot=slot,
            pod_cidr=str(pods[slot]),
            service_cluster_ip_range=str(services[slot]),
            port=PORT_BASE + slot,
            kubelet_port=KUBELET_PORT_BASE + slot,
        )

    @classmethod
    def from_record(cls, data: object) -> Allocation | None:
        """The allocation a record holds, or None when it is not one of ours."""
        if not isinstance(data, dict):
            return None
        slot = data.get("slot")
        if not isinstance(slot, int) or isinstance(slot, bool) or not 0 <= slot < SLOTS:
            return None
        made = cls.of_slot(slot)
        if dataclasses.asdict(made) != {k: data.get(k) for k in dataclasses.asdict(made)}:
            return None
        return made

    def networks(self) -> tuple[ipaddress.IPv4Network, ipaddress.IPv4Network]:
        return (
            ipaddress.IPv4Network(self.pod_cidr),
            ipaddress.IPv4Network(self.service_cluster_ip_range),
        )


class RouteTable(Protocol):
    """The destinations of the host's main routing table (default routes left out)."""

    def routes(self) -> list[IPNetwork]: ...


@dataclasses.dataclass(frozen=True)
class HostRoutes:
    """The host's routes, from ``/proc/net/route`` and ``/proc/net/ipv6_route`` (the main
    table, as the bridge's own overlap check reads it)."""

    v4: Path = Path("/proc/net/route")
    v6: Path = Path("/proc/net/ipv6_route")
    max_bytes: int = 8 * 1024 * 1024

    def routes(self) -> list[IPNetwork]:
        found: list[IPNetwork] = []
        for line in self._lines(self.v4)[1:]:
            fields = line.split()
            if len(fields) < 8:
                continue
            with contextlib.suppress(ValueError):
                dst = ipaddress.IPv4Address(int(fields[1], 16).to_bytes(4, "little"))
                mask = bin(int(fields[7], 16)).count("1")
                if mask:
                    found.append(ipaddress.IPv4Network(f"{dst}/{mask}", strict=False))
        for line in self._lines(self.v6):
            fields = line.split()
            if len(fields) < 2:
                continue
            with contextlib.suppress(ValueError):
                length = int(fields[1], 16)
                if length:
                    dst6 = ipaddress.IPv6Address(bytes.fromhex(fields[0]))
                    found.append(ipaddress.IPv6Network(f"{dst6}/{length}", strict=False))
        return found

    def _lines(self, path: Path) -> list[str]:
        try:
            with path.open("rb") as f:
                return f.read(self.max_bytes).decode("ascii", "replace").splitlines()
        except OSError:
            return []


def port_bindable(port: int) -> bool:
    """Whether ``port`` can be bound on 127.0.0.1 now."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def allocate(
    name: str,
    *,
    routes: Sequence[IPNetwork],
    taken: Iterable[Allocation],
    port_free: Callable[[int], bool] | None = None,
) -> Allocation:
    """The first free slot counting from the name's hash: neither range overlaps a host
    route or another instance's, and the ports are no other instance's and free now."""
    free = port_free if port_free is not None else port_bindable
    held = list(taken)
    held_networks = [net for a in held for net in a.networks()]
    held_ports = {port for a in held for port in (a.port, a.kubelet_port)}
    start = _digest(name) % SLOTS
    for step in range(SLOTS):
        candidate = Allocation.of_slot((start + step) % SLOTS)
        networks = candidate.networks()
        if any(net.overlaps(other) for net in networks for other in held_networks):
            continue
        if any(
            isinstance(route, ipaddress.IPv4Network) and net.overlaps(route)
            for net in networks
            for route in routes
        ):
            continue
        ports = (candidate.port, candidate.kubelet_port)
        if any(port in held_ports or not free(port) for port in ports):
            continue
        return candidate
    raise InstanceError(
        f"--instance {name}: no free pod range in {POD_POOL} and Service range in "
        f"{SERVICE_POOL} (every /{SLOT_PREFIX} overlaps a host route or another instance); "
        "give --pod-cidr, --service-cluster-ip-range and --listen"
    )


def read_record(path: Path) -> Allocation | None:
    """The allocation of a record file, read bounded; None when absent or not valid."""
    try:
        with path.open("rb") as f:
            text = f.read(RECORD_MAX_BYTES + 1)
    except OSError:
        return None
    if len(text) > RECORD_MAX_BYTES:
        return None
    try:
        return Allocation.from_record(json.loads(text))
    except ValueError:
        return None


def names(root: Path) -> list[str]:
    """The instances with a state dir under ``root`` (valid names only), sorted."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    found = []
    for entry in entries:
        with contextlib.suppress(InstanceError):
            if entry.is_dir(follow_symlinks=False) and check_name(entry.name):
                found.append(entry.name)
    return sorted(found)


def records(root: Path) -> dict[str, Allocation]:
    """Every instance's recorded allocation under ``root``."""
    found = {}
    for name in names(root):
        allocation = read_record(root / name / RECORD)
        if allocation is not None:
            found[name] = allocation
    return found


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    import fcntl

    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(root / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write_record(root: Path, name: str, allocation: Allocation) -> None:
    home = root / name
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = home / f".{RECORD}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"name": name, **dataclasses.asdict(allocation)}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, home / RECORD)


def resolve(
    name: str,
    *,
    root: Path,
    routes: RouteTable,
    claim: bool,
    port_free: Callable[[int], bool] | None = None,
) -> Allocation:
    """The instance's allocation: its record's, else a free slot, recorded when ``claim``
    (under a lock, so two instances starting at once take two slots)."""
    own = read_record(root / name / RECORD)
    if own is not None:
        return own
    if not claim:
        others = [a for n, a in records(root).items() if n != name]
        return allocate(name, routes=routes.routes(), taken=others, port_free=port_free)
    try:
        with _locked(root):
            own = read_record(root / name / RECORD)
            if own is not None:
                return own
            others = [a for n, a in records(root).items() if n != name]
            made = allocate(name, routes=routes.routes(), taken=others, port_free=port_free)
            _write_record(root, name, made)
            return made
    except OSError as e:
        raise InstanceError(f"--instance {name}: cannot record it under {root}: {e}") from e


@dataclasses.dataclass
class Instance:
    """A named instance, its allocation resolved when first needed."""

    name: str
    root: Path
    claim: bool = False
    routes: RouteTable | None = None
    """None: the host's (:class:`HostRoutes`)."""
    _allocation: Allocation | None = None

    @property
    def allocation(self) -> Allocation:
        if self._allocation is None:
            routes = self.routes if self.routes is not None else HostRoutes()
            self._allocation = resolve(self.name, root=self.root, routes=routes, claim=self.claim)
        return self._allocation

    def defaults(self) -> dict[str, Any]:
        """The options an instance derives, by parameter name; the values that need the
        slot are functions, called only by a command that has the option."""
        name, root = self.name, self.root
        return {
            "state_dir": state_dir(name, root=root),
            "network_state_dir": network_state_dir(name, root=root),
            "node_name": node_name(name),
            "bridge": bridge_name(name),
            "pod_cidr": lambda: self.allocation.pod_cidr,
            "service_cluster_ip_range": lambda: self.allocation.service_cluster_ip_range,
            "listen": lambda: self.allocation.listen,
            "kubelet_port": lambda: self.allocation.kubelet_port,
        }


@dataclasses.dataclass(frozen=True)
class Found:
    """An instance found on the host, for ``doctor``."""

    name: str
    state_dir: Path
    running: bool
    allocation: Allocation | None

    def line(self) -> str:
        head = (
            f"instance {self.name or '(default)'}: "
            f"{'running' if self.running else 'not running'}, state dir {self.state_dir}"
        )
        if not self.name:
            return head
        if self.allocation is None:
            return f"{head}, bridge {bridge_name(self.name)}, no ranges recorded yet"
        a = self.allocation
        return (
            f"{head}, bridge {bridge_name(self.name)}, pod CIDR {a.pod_cidr}, "
            f"Services {a.service_cluster_ip_range}, listen {a.listen}"
        )


def found(root: Path, *, default_state: Path) -> list[Found]:
    """The default instance, then every named one with a state dir under ``root``."""
    from asynckubelet.node.locate import socket_answers, socket_path

    def running(state: Path) -> bool:
        try:
            return socket_answers(socket_path(state))
        except OSError:
            return False

    listed = [Found("", default_state, running(default_state), None)]
    for name in names(root):
        home = root / name
        listed.append(Found(name, home, running(home), read_record(home / RECORD)))
    return listed


__all__ = [
    "CLAIMING_COMMANDS",
    "ENV",
    "NAME_MAX",
    "Allocation",
    "Found",
    "HostRoutes",
    "Instance",
    "InstanceError",
    "RouteTable",
    "allocate",
    "bridge_name",
    "check_name",
    "found",
    "instances_root",
    "names",
    "network_state_dir",
    "node_name",
    "pod_cidr_v6",
    "port_bindable",
    "read_record",
    "records",
    "resolve",
    "state_dir",
]
