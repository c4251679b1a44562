"""The ``bridge`` backend: pod networking done by us, over netlink, on a local daemon.

The kubelet's ``kubenet`` in a few hundred lines: one Linux bridge for the node with the
gateway address of the pod CIDR, and per pod a veth pair whose host end (named after the
sandbox id, so the name is our ownership mark) is a bridge port in hairpin mode and whose
other end is moved into the sandbox's network namespace as ``eth0`` with an address from
the file-based IPAM and a default route via the bridge. The firewall, iptables (default)
or nftables (``firewall="nftables"``, :mod:`asynckubelet.network.nftables`), masquerades pod
egress and DNATs hostPorts, from 127.0.0.1 too (``route_localnet`` on the bridge). What
``route_localnet`` would also let in, a pod's packet addressed to the host's 127.0.0.0/8 (a
raw frame to the bridge's MAC needs only NET_RAW, which Docker gives every container), is
dropped by the kubelet's loopback guard (CVE-2020-8558), which the firewall installs before
the sysctl is set.

Dual stack is optional (``pod_cidr_v6``): the bridge also gets the IPv6 gateway, a second
IPAM pool hands out the pod's IPv6 address, ``eth0`` gets it with a default IPv6 route, and
ip6tables masquerades and DNATs where the kernel has IPv6 NAT. Docker turns IPv6 off in
the namespaces it makes, so it is turned back on for the pod's ``lo`` and ``eth0``, with
duplicate address detection off (the addresses come from our IPAM and are unique by
construction, and DAD would keep them unusable for a second or more).

All netlink work goes through pyroute2's ``AsyncIPRoute``. A pod's plumbing and its
unplugging run on the event loop of a thread of their own: the kernel carries out a
netlink request inside ``sendmsg()``, under the RTNL lock that dockerd also takes for every
container's network namespace, so while pods start in a burst one request can wait tens of
milliseconds, which on the node's loop would hold every other task (status, probes, API
answers) as long. A socket inside the pod's namespace is opened by that thread,
which enters the namespace for the moment (``setns`` is per thread), so the node's loop is
never blocked and never changes namespace. pyroute2 is
imported when the backend first talks netlink, and only its rtnetlink modules: its package
``__init__`` (run only if something uses a name of the package itself, see
:mod:`asynckubelet._imports`) loads every netlink family it has, twice the memory.

Several agents may share one bridge, each driving its own Docker engine: addresses must be
unique on the bridge, so IPAM and records are per bridge, but every allocation and record
names the engine that owns the sandbox (``engine_id``, the factory's ``engine_key``), and
the start-up sweep of one agent only releases what its own engine's gone sandboxes left,
never another engine's pods (whose sandbox ids its engine cannot see).

Crash safety: a per-pod record (``pods/<sandbox id>.json``,
:class:`~asynckubelet.network.records.PodRecords`) is written before anything is created
and marked ready after everything is; teardown undoes everything in reverse and deletes
the record last. The record is therefore the journal: whatever a killed agent left behind
is found from the sandbox id alone, and the start-up sweep tears down the pods whose
sandbox no longer runs. Records and allocations are private to the node's user (0600
files in 0700 directories under ``state_dir``, :mod:`asynckubelet.network.records`).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import ipaddress
import os
import shutil
import socket
import subprocess
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.network import (
    DEFAULT_BRIDGE,
    DEFAULT_POD_CIDR,
    DEFAULT_POD_CIDR_V6,
    DEFAULT_STATE_DIR,
    FIREWALLS,
    PodNetwork,
    PodNetworkRequest,
    PortMapping,
    SandboxExtra,
    off_loop,
)
from asynckubelet.network.firewall import DNAT, Firewall
from asynckubelet.network.ipam import Allocation, FileIPAM
from asynckubelet.network.iptables import IPTables
from asynckubelet.network.netlink import (
    _delete_veth,
    _enable_ipv6_in,
    _in_netns_here,
    _index,
    _iproute,
    _netlink_error,
    _netlink_error_type,
    _pin_mac,
    _set_hairpin,
    _write_sysctl,
    bridge_mac,
)
from asynckubelet.network.nftables import NFTables
from asynckubelet.network.records import PodRecords, private_dir

if TYPE_CHECKING:
    from pyroute2.iproute.linux import AsyncIPRoute

LINK_PREFIX = "akl"
"""Host ends of pod veths are ``akl`` + the first 12 characters of the sandbox id."""

_IFNAMSIZ = 15
_IFA_F_NODAD = 0x02
_LOOPBACK_INDEX = 1
"""``lo``'s interface index in every network namespace (Linux 3.19 and later)."""


def veth_name(sandbox_id: str) -> str:
    return f"{LINK_PREFIX}{sandbox_id[:12]}"


@dataclass(frozen=True)
class BridgeConfig:
    bridge: str = DEFAULT_BRIDGE
    pod_cidr: str = DEFAULT_POD_CIDR
    state_dir: Path = DEFAULT_STATE_DIR
    masquerade: bool = True
    hairpin: bool = True
    mtu: int | None = None
    iptables: str = "iptables"
    pod_cidr_v6: str | None = None
    """The IPv6 pod CIDR of dual stack; None: IPv4 only."""
    ip6tables: str = "ip6tables"
    firewall: str = "iptables"
    """One of :data:`FIREWALLS`."""
    nft: str = "nft"
    sandbox_exists: Callable[[str], Awaitable[bool]] | None = field(default=None, compare=False)
    """Whether a sandbox still runs, for the start-up sweep; None: no sweep."""
    engine_id: Callable[[], Awaitable[str]] | None = field(default=None, compare=False)
    """The key of the Docker engine whose sandboxes this agent networks (the sweep's scope,
    ``factory.engine_key``);
    None: unknown, and the sweep judges every sandbox on the bridge."""


class BridgePlugin:
    """The node bridge, per-pod veths, file IPAM and a firewall; root on a local daemon."""

    name = "bridge"

    def __init__(self, config: BridgeConfig | None = None) -> None:
        self.config = config or BridgeConfig()
        bridge = self.config.bridge
        if not bridge or len(bridge) > _IFNAMSIZ or "/" in bridge or " " in bridge:
            raise errors.NetworkError(f"bridge name {bridge!r} is not a valid interface name")
        try:
            self.subnet = ipaddress.ip_network(self.config.pod_cidr)
        except ValueError as e:
            raise errors.NetworkError(f"pod CIDR {self.config.pod_cidr!r}: {e}") from e
        if self.subnet.version != 4:
            raise errors.NetworkError(
                f"pod CIDR {self.subnet}: must be IPv4 (an IPv6 CIDR is the IPv6 pod CIDR)"
            )
        self.subnet6: ipaddress.IPv6Network | None = None
        if self.config.pod_cidr_v6 is not None:
            try:
                subnet6 = ipaddress.ip_network(self.config.pod_cidr_v6)
            except ValueError as e:
                raise errors.NetworkError(f"IPv6 pod CIDR {self.config.pod_cidr_v6!r}: {e}") from e
            if not isinstance(subnet6, ipaddress.IPv6Network):
                raise errors.NetworkError(f"IPv6 pod CIDR {subnet6}: not an IPv6 network")
            if subnet6.prefixlen > 120:
                raise errors.NetworkError(
                    f"IPv6 pod CIDR {subnet6}: too small (the prefix must be /120 or shorter)"
                )
            self.subnet6 = subnet6
        self.root = self.config.state_dir / bridge
        state = self.config.state_dir
        self.ipam = FileIPAM(directory=self.root / "ipam", subnet=str(self.subnet), root=state)
        self.ipam6 = (
            FileIPAM(directory=self.root / "ipam6", subnet=str(self.subnet6), root=state)
            if self.subnet6 is not None
            else None
        )
        self.records = PodRecords(root=state, directory=self.root / "pods")
        if self.config.firewall not in FIREWALLS:
            raise errors.NetworkError(
                f"firewall must be one of {', '.join(FIREWALLS)}, not {self.config.firewall!r}"
            )
        self.firewall: Firewall
        self.firewall6: Firewall
        """The IPv4 and IPv6 halves of the host's packet filter."""
        if self.config.firewall == "nftables":
            self.firewall = NFTables(family="ip", binary=self.config.nft)
            self.firewall6 = NFTables(family="ip6", binary=self.config.nft)
        else:
            self.firewall = IPTables(binary=self.config.iptables)
            self.firewall6 = IPTables(binary=self.config.ip6tables)
        self.engine = ""
        """The engine key written on every allocation and record (empty until known)."""
        self._nat6 = False
        self._ready = False
        self._lock = anyio.Lock()
        self._bridge_index: int | None = None
        """The bridge's interface index, looked up by the first pod plugged after the
        node's network was made (see :meth:`_add_veth`)."""

    def sandbox_network_mode(self, *, host_network: bool) -> str:
        return "host" if host_network else "none"

    def sandbox_extra(
        self, *, host_network: bool, port_mappings: tuple[PortMapping, ...]
    ) -> SandboxExtra:
        return SandboxExtra()

    # -- node network ---------------------------------------------------------------------

    async def start(self) -> None:
        """Make the node network ready, its records private, and sweep what dead sandboxes
        left behind."""
        await self.ensure_node_network()
        await anyio.to_thread.run_sync(private_dir, self.config.state_dir, self.root)
        await self.sweep()

    async def ensure_node_network(self) -> None:
        async with self._lock:
            if self._ready:
                return
            if self.config.engine_id is not None and not self.engine:
                self.engine = await self.config.engine_id()
            self._bridge_index = None
            await self._ensure_bridge()
            await self.firewall.setup_network(
                bridge=self.config.bridge,
                subnet=str(self.subnet),
                masquerade=self.config.masquerade,
            )
            if self.subnet6 is not None:
                self._nat6 = await self.firewall6.nat_supported()
                if not self._nat6:
                    logger.warning(
                        "network: the kernel has no IPv6 NAT; pods get IPv6 addresses "
                        "but no IPv6 egress masquerade and no IPv6 hostPorts"
                    )
                await self.firewall6.setup_network(
                    bridge=self.config.bridge,
                    subnet=str(self.subnet6),
                    masquerade=self.config.masquerade,
                    nat=self._nat6,
                )
            await anyio.to_thread.run_sync(self._sysctls)
            self._ready = True

    def _sysctls(self) -> None:
        paths = [
            "/proc/sys/net/ipv4/ip_forward",
            f"/proc/sys/net/ipv4/conf/{self.config.bridge}/route_localnet",
        ]
        if self.subnet6 is not None:
            paths.append("/proc/sys/net/ipv6/conf/all/forwarding")
        for path in paths:
            _write_sysctl(path, "1")

    async def _overlapping_route(self, ipr: AsyncIPRoute, bridge_index: int | None) -> str | None:
        names = {}
        async for link in await ipr.link("dump"):
            names[link["index"]] = link.get("ifname")
        subnets: list[tuple[int, ipaddress.IPv4Network | ipaddress.IPv6Network]] = [
            (socket.AF_INET, self.subnet)
        ]
        if self.subnet6 is not None:
            subnets.append((socket.AF_INET6, self.subnet6))
        for family, subnet in subnets:
            async for route in await ipr.route("dump", family=family, table=254):
                dst = route.get("dst")
                length = route["dst_len"]
                if not dst or length == 0:
                    continue
                if bridge_index is not None and route.get("oif") == bridge_index:
                    continue
                network = ipaddress.ip_network(f"{dst}/{length}", strict=False)
                if network.overlaps(subnet):
                    return f"{network} dev {names.get(route.get('oif'), '?')}"
        return None

    async def _ensure_bridge(self) -> None:  # noqa: C901  (mirrors the CNI bridge plugin's setupBridge)
        bridge = self.config.bridge
        gateway = self.ipam.gateway
        try:
            async with _iproute() as ipr:
                index = await _index(ipr, bridge)
                overlap = await self._overlapping_route(ipr, index)
                if overlap is not None:
                    which = self.subnet6 if ":" in overlap.split()[0] else self.subnet
                    raise errors.NetworkError(
                        f"pod CIDR {which} overlaps the host route {overlap}; "
                        "choose another pod CIDR"
                    )
                if index is None:
                    try:
                        await ipr.link(
                            "add", ifname=bridge, kind="bridge", address=bridge_mac(bridge)
                        )
                    except _netlink_error_type() as e:
                        if e.code != errno.EEXIST:
                            raise
                    index = await _index(ipr, bridge)
                    if index is None:
                        raise errors.NetworkError(f"bridge {bridge} vanished after creation")
                await _pin_mac(ipr, index, bridge)
                have = {
                    a.get("address") async for a in await ipr.addr("dump", index=index, family=2)
                }
                if gateway not in have:
                    try:
                        await ipr.addr(
                            "add", index=index, address=gateway, prefixlen=self.subnet.prefixlen
                        )
                    except _netlink_error_type() as e:
                        if e.code != errno.EEXIST:
                            raise
                if self.ipam6 is not None and self.subnet6 is not None:
                    await anyio.to_thread.run_sync(
                        _write_sysctl, f"/proc/sys/net/ipv6/conf/{bridge}/disable_ipv6", "0"
                    )
                    have6 = {
                        a.get("address")
                        async for a in await ipr.addr("dump", index=index, family=10)
                    }
                    if self.ipam6.gateway not in have6:
                        try:
                            await ipr.addr(
                                "add",
                                index=index,
                                address=self.ipam6.gateway,
                                prefixlen=self.subnet6.prefixlen,
                                flags=_IFA_F_NODAD,
                            )
                        except _netlink_error_type() as e:
                            if e.code != errno.EEXIST:
                                raise
                settings: dict[str, Any] = {"state": "up"}
                if self.config.mtu:
                    settings["mtu"] = self.config.mtu
                await ipr.link("set", index=index, **settings)
        except _netlink_error_type() as e:
            raise _netlink_error(f"setting up bridge {bridge}", e) from e

    async def remove_node_network(self) -> None:
        """Delete the bridge, our firewall chains or tables and the state (tests, uninstall)."""
        with anyio.CancelScope(shield=True):
            await self.firewall.remove_network(bridge=self.config.bridge)
            if self.subnet6 is not None:
                await self.firewall6.remove_network(bridge=self.config.bridge)
            elif self.firewall6.available():
                # The bridge may have run dual stack under another configuration: its IPv6
                # chains go too, where the host has an IPv6 packet filter that answers.
                with contextlib.suppress(errors.NetworkError):
                    await self.firewall6.remove_network(bridge=self.config.bridge)
            try:
                async with _iproute() as ipr:
                    index = await _index(ipr, self.config.bridge)
                    if index is not None:
                        await ipr.link("del", index=index)
            except _netlink_error_type() as e:
                if e.code != errno.ENODEV:
                    raise _netlink_error(f"deleting bridge {self.config.bridge}", e) from e
            await anyio.to_thread.run_sync(self._remove_state)
            self._ready = False
            self._bridge_index = None

    def _remove_state(self) -> None:
        import shutil

        shutil.rmtree(self.root, ignore_errors=True)

    async def status(self) -> tuple[bool, str]:
        if os.geteuid() != 0:
            return False, "the bridge backend needs root to manage links"
        if not self.firewall.available():
            return False, f"{self.firewall.binary} not found"
        if self.subnet6 is not None and not self.firewall6.available():
            return False, f"{self.firewall6.binary} not found (needed by the IPv6 pod CIDR)"
        try:
            await self.ensure_node_network()
        except errors.NetworkError as e:
            return False, str(e)
        return True, ""

    async def sweep(self) -> list[str]:
        """Tear down every pod of this agent's engine whose sandbox no longer runs; returns
        their sandbox ids. Another engine's pods are left alone: their sandboxes are not
        ours to look up."""
        check = self.config.sandbox_exists
        if check is None:
            return []
        if self.config.engine_id is not None and not self.engine:
            self.engine = await self.config.engine_id()
        owners: dict[str, str] = await anyio.to_thread.run_sync(self.records.engines)
        for pool in self._pools():
            for sid, engine in (await pool.owners()).items():
                owners[sid] = owners.get(sid) or engine
        mine = [sid for sid, engine in owners.items() if self._is_mine(engine)]
        gone = [sid for sid in sorted(mine) if not await check(sid)]
        for sid in gone:
            logger.info("network: releasing what gone sandbox {} left", sid[:12])
            await self.teardown_pod(sandbox_id=sid)
        return gone

    async def attached(self) -> list[str]:
        """The sandboxes that still hold an address or a record on this bridge, whichever
        engine runs them (:meth:`sweep` first releases those of this engine that are gone)."""
        found = set(await anyio.to_thread.run_sync(self.records.sandboxes))
        for pool in self._pools():
            found.update(await pool.owners())
        return sorted(found)

    def _is_mine(self, engine: str) -> bool:
        """Whether an allocation or record made for ``engine`` is this agent's to judge
        (one made before engines were recorded, or with no engine known, is anyone's)."""
        return not engine or not self.engine or engine == self.engine

    def _pools(self) -> list[FileIPAM]:
        return [self.ipam] if self.ipam6 is None else [self.ipam, self.ipam6]

    # -- pods -----------------------------------------------------------------------------

    async def setup_pod(self, request: PodNetworkRequest) -> PodNetwork:
        sid = request.sandbox_id
        if not request.netns_path:
            raise errors.NetworkError(
                f"the bridge backend needs the network namespace of sandbox {sid[:12]}"
            )
        await self.ensure_node_network()
        record: dict[str, Any] = {
            "sandbox_id": sid,
            "pod": f"{request.namespace}/{request.pod_name}",
            "uid": request.uid,
            "veth": veth_name(sid),
            "ports": bool(request.port_mappings),
            "engine": self.engine,
            "ready": False,
        }
        await anyio.to_thread.run_sync(self.records.write, sid, record)
        try:
            allocations = [await self.ipam.allocate(sandbox_id=sid, engine=self.engine)]
            if self.ipam6 is not None:
                allocations.append(await self.ipam6.allocate(sandbox_id=sid, engine=self.engine))
            await self._plug(request, allocations)
            await _together(
                [
                    functools.partial(
                        tables.add_hostports,
                        bridge=self.config.bridge,
                        sandbox_id=sid,
                        maps=_dnats(request.port_mappings, allocation.address),
                    )
                    for tables, allocation in zip(
                        (self.firewall, self.firewall6), allocations, strict=False
                    )
                    if tables is self.firewall or self._nat6
                ]
            )
            record.update(ip=allocations[0].address, ready=True)
            if len(allocations) > 1:
                record["ip6"] = allocations[1].address
            await anyio.to_thread.run_sync(self.records.write, sid, record)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.teardown_pod(sandbox_id=sid)
            raise
        ips = tuple(a.address for a in allocations)
        logger.bind(pod=record["pod"]).debug("network: {} on {}", ", ".join(ips), record["veth"])
        return PodNetwork(ips=ips)

    async def _plug(self, request: PodNetworkRequest, allocations: list[Allocation]) -> None:
        await off_loop(functools.partial(self._plug_netlink, request, allocations))

    async def _plug_netlink(
        self, request: PodNetworkRequest, allocations: list[Allocation]
    ) -> None:
        """The veth pair made and the pod's side configured; runs on the netlink thread.

        As few requests as the kernel allows, since each one waits for the RTNL lock that
        dockerd takes for every container it starts: the veth is made already enslaved to
        the bridge and up (``ip link add ... master BRIDGE up``), a veth of the same name
        left by a crash is replaced only when the kernel says it exists, the bridge's index
        is looked up once, and ``lo`` is index 1 in every namespace."""
        try:
            async with _iproute() as ipr:
                await self._add_veth(ipr, request)
                if self.config.hairpin:
                    await _set_hairpin(ipr, veth_name(request.sandbox_id))
            if len(allocations) > 1:
                try:
                    _enable_ipv6_in(request.netns_path, "eth0")
                except OSError as e:
                    raise errors.NetworkError(
                        f"cannot turn IPv6 on in the sandbox namespace {request.netns_path}: {e}"
                    ) from e
            async with _in_netns_here(request.netns_path) as ns:
                await ns.link("set", index=_LOOPBACK_INDEX, state="up")
                eth0 = await _index(ns, "eth0")
                if eth0 is None:
                    raise errors.NetworkError("eth0 did not arrive in the sandbox namespace")
                for a in allocations:
                    extra = {"flags": _IFA_F_NODAD} if ":" in a.address else {}
                    await ns.addr(
                        "add", index=eth0, address=a.address, prefixlen=a.prefixlen, **extra
                    )
                await ns.link("set", index=eth0, state="up")
                for a in allocations:
                    default = "::/0" if ":" in a.address else "0.0.0.0/0"
                    await ns.route("add", dst=default, gateway=a.gateway)
        except _netlink_error_type() as e:
            what = f"plugging sandbox {request.sandbox_id[:12]} into the bridge"
            raise _netlink_error(what, e) from e

    async def _add_veth(self, ipr: AsyncIPRoute, request: PodNetworkRequest) -> None:
        """The pod's veth pair, its host end a port of the bridge and up, ``eth0`` in the
        sandbox's namespace. A host end of the same name (a crash between plugging and
        unplugging this sandbox) is deleted first, with its peer; a cached bridge index
        the kernel refuses (the bridge was made again) is looked up again, once."""
        host = veth_name(request.sandbox_id)
        peer: dict[str, Any] = {"ifname": "eth0", "net_ns_fd": request.netns_path}
        if self.config.mtu:
            peer["mtu"] = self.config.mtu
        fresh = self._bridge_index is None
        for attempt in range(3):
            if self._bridge_index is None:
                self._bridge_index = await _index(ipr, self.config.bridge)
                if self._bridge_index is None:
                    raise errors.NetworkError(f"bridge {self.config.bridge} does not exist")
                fresh = True
            settings: dict[str, Any] = {"master": self._bridge_index, "state": "up"}
            if self.config.mtu:
                settings["mtu"] = self.config.mtu
            try:
                await ipr.link("add", ifname=host, kind="veth", peer=peer, **settings)
                return
            except _netlink_error_type() as e:
                if e.code == errno.EEXIST and attempt < 2:
                    stale = await _index(ipr, host)
                    if stale is not None:
                        await ipr.link("del", index=stale)
                        continue
                if e.code in (errno.EINVAL, errno.ENODEV) and not fresh:
                    self._bridge_index = None
                    continue
                raise
        raise errors.NetworkError(f"veth {host}: a link of that name kept coming back")

    async def teardown_pod(self, *, sandbox_id: str) -> None:
        with anyio.CancelScope(shield=True):
            record = await anyio.to_thread.run_sync(self.records.read, sandbox_id)
            if record is None or record.get("ports", True):
                families = [self.firewall]
                if self.subnet6 is not None and await self.firewall6.nat_supported():
                    families.append(self.firewall6)
                await _together(
                    [
                        functools.partial(
                            tables.remove_hostports,
                            bridge=self.config.bridge,
                            sandbox_id=sandbox_id,
                        )
                        for tables in families
                    ]
                )
            await off_loop(functools.partial(_delete_veth, veth_name(sandbox_id)))
            for pool in self._pools():
                await pool.release(sandbox_id=sandbox_id)
            await anyio.to_thread.run_sync(self.records.drop, sandbox_id)

    async def get_pod_network_status(self, *, sandbox_id: str) -> PodNetwork | None:
        record = await anyio.to_thread.run_sync(self.records.read, sandbox_id)
        if record is None or not record.get("ready") or not record.get("ip"):
            return PodNetwork()
        ips = [str(record["ip"])]
        if record.get("ip6"):
            ips.append(str(record["ip6"]))
        return PodNetwork(ips=tuple(ips))


async def _together(calls: list[Callable[[], Coroutine[Any, Any, None]]]) -> None:
    """Run the calls (one per address family) at once; a single one needs no task group."""
    if len(calls) == 1:
        await calls[0]()
        return
    async with anyio.create_task_group() as tg:
        for call in calls:
            tg.start_soon(call)


def ipv6_support(*, ip6tables: str = "ip6tables") -> tuple[bool, str]:
    """Whether this node can give pods IPv6 (``--dual-stack``), and what decides it."""
    try:
        with open("/proc/sys/net/ipv6/conf/all/disable_ipv6") as f:
            disabled = f.read().strip() == "1"
    except OSError:
        return False, "the kernel has no IPv6"
    if disabled:
        return False, "IPv6 is turned off (net.ipv6.conf.all.disable_ipv6 = 1)"
    if shutil.which(ip6tables) is None:
        return False, f"{ip6tables} not found"
    proc = subprocess.run(  # noqa: S603  (argv list, no shell: ip6tables found by shutil.which)
        [ip6tables, "-w", "5", "-t", "nat", "-S", "POSTROUTING"],
        capture_output=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        return True, "IPv6 on; no IPv6 NAT here, so no IPv6 egress masquerade or hostPorts"
    return True, "IPv6 on, with IPv6 NAT (egress masquerade and hostPorts)"


def _dnats(ports: tuple[PortMapping, ...], pod_ip: str) -> list[DNAT]:
    """The DNAT rules of one address family: a hostIP of the other family is skipped."""
    v6 = ":" in pod_ip
    return [
        DNAT(
            host_port=p.host_port,
            pod_ip=pod_ip,
            container_port=p.container_port,
            protocol=p.protocol,
            host_ip=p.host_ip,
        )
        for p in ports
        if not p.host_ip or p.host_ip in ("0.0.0.0", "::") or (":" in p.host_ip) == v6  # noqa: S104  (compares a hostIP with the wildcard; binds nothing)
    ]


__all__ = [
    "DEFAULT_BRIDGE",
    "DEFAULT_POD_CIDR",
    "DEFAULT_POD_CIDR_V6",
    "DEFAULT_STATE_DIR",
    "FIREWALLS",
    "LINK_PREFIX",
    "BridgeConfig",
    "BridgePlugin",
    "ipv6_support",
    "veth_name",
]
