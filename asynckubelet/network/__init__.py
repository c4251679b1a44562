"""Pod networking: the plugin interface the runtime calls between sandbox and containers.

A plugin gives the pod sandbox its network after the pause container starts and takes it
away when the sandbox goes. It must work from the sandbox id alone (after a crash the
sandbox process may be gone) and report whether the node's network is ready at all.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

import anyio

from asynckubelet import errors
from asynckubelet.docker.types import HostConfig
from asynckubelet.manifests.messages import is_ip_address, shown

DEFAULT_BRIDGE = "akl0"
DEFAULT_POD_CIDR = "10.137.0.0/16"
DEFAULT_POD_CIDR_V6 = "fd00:ac1::/64"
"""The IPv6 pod CIDR when dual stack is turned on without naming one (a ULA prefix)."""
DEFAULT_STATE_DIR = Path("/var/lib/asynckubelet/network")
FIREWALLS = ("iptables", "nftables")
"""What masquerades and DNATs for the bridge backend: ``iptables``/``ip6tables`` or ``nft``."""

IPS_ANNOTATION = "cni.projectcalico.org/ipAddrs"
"""The pod annotation asking for fixed addresses, a JSON list (``'["10.138.0.50"]'``), as
Calico documents it; the ``cni`` backend passes them as ``runtimeConfig.ips``."""


@dataclass(frozen=True)
class PortMapping:
    container_port: int
    host_port: int
    protocol: str = "TCP"
    host_ip: str = ""


@dataclass(frozen=True)
class PodDNS:
    """The pod's computed resolver settings (CNI's ``runtimeConfig.dns``)."""

    servers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class PodNetworkRequest:
    """What a plugin knows about the pod whose sandbox it sets up."""

    sandbox_id: str
    pod_name: str
    namespace: str
    uid: str
    netns_path: str = ""
    """``/proc/<pid>/ns/net`` of the pause container, when the node can enter it."""
    port_mappings: tuple[PortMapping, ...] = ()
    dns: PodDNS | None = None
    """The resolver settings of the pod's resolv.conf, for plugins that want them."""
    ips: tuple[str, ...] = ()
    """Addresses the pod asks for (:data:`IPS_ANNOTATION`); empty: any."""


def requested_ips(annotations: Mapping[str, str] | None) -> tuple[str, ...]:
    """The addresses a pod asks for through :data:`IPS_ANNOTATION`, checked."""
    text = (annotations or {}).get(IPS_ANNOTATION)
    if not text:
        return ()
    where = f"annotation {IPS_ANNOTATION}"
    try:
        value = json.loads(text)
    except ValueError as e:
        raise errors.NetworkError(f"{where}: not a JSON list of addresses: {e}") from e
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise errors.NetworkError(f'{where}: must be a JSON list of addresses, like ["10.1.2.3"]')
    for v in value:
        if not is_ip_address(v):
            raise errors.NetworkError(f"{where}: {shown(repr(v), 64)} is not an IP address")
    return tuple(value)


@dataclass(frozen=True)
class SandboxExtra:
    """What a backend adds to the pause container's Docker config: a Docker-managed
    network publishes hostPorts through ``PortBindings`` and ``ExposedPorts``."""

    host_config: HostConfig = field(default_factory=lambda: HostConfig())
    exposed_ports: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class PodNetwork:
    ips: tuple[str, ...] = field(default=())


@runtime_checkable
class NetworkPlugin(Protocol):
    name: str

    async def start(self) -> None:
        """Make the node network ready and release what dead sandboxes left behind."""
        ...

    def sandbox_network_mode(self, *, host_network: bool) -> str:
        """Docker ``NetworkMode`` of the pause container."""
        ...

    def sandbox_extra(
        self, *, host_network: bool, port_mappings: tuple[PortMapping, ...]
    ) -> SandboxExtra:
        """Additions to the pause container's Docker config (empty for most backends)."""
        ...

    async def setup_pod(self, request: PodNetworkRequest) -> PodNetwork: ...

    async def teardown_pod(self, *, sandbox_id: str) -> None:
        """Idempotent; works when the sandbox no longer exists."""
        ...

    async def get_pod_network_status(self, *, sandbox_id: str) -> PodNetwork | None:
        """The pod's IPs, or None when the plugin reports no network state at all."""
        ...

    async def status(self) -> tuple[bool, str]:
        """Whether the node's network is ready, and why not."""
        ...


class LoopbackPlugin:
    """A network of loopback only: the pod's containers reach each other on 127.0.0.1.

    It reports no network state, so the runtime never waits for a pod IP.
    """

    name = "loopback"

    async def start(self) -> None:
        return None

    def sandbox_network_mode(self, *, host_network: bool) -> str:
        return "host" if host_network else "none"

    def sandbox_extra(
        self, *, host_network: bool, port_mappings: tuple[PortMapping, ...]
    ) -> SandboxExtra:
        return SandboxExtra()

    async def setup_pod(self, request: PodNetworkRequest) -> PodNetwork:
        return PodNetwork()

    async def teardown_pod(self, *, sandbox_id: str) -> None:
        return None

    async def get_pod_network_status(self, *, sandbox_id: str) -> PodNetwork | None:
        return None

    async def status(self) -> tuple[bool, str]:
        return True, ""


class StartingPlugin:
    """A plugin whose :meth:`start` runs while the first sandboxes are made.

    A pause container's creation and start and the node network's start (the bridge, the
    firewall's rules, the sweep) take a similar time and need nothing of each other. Every
    call that needs the node's network (a pod's set-up, its teardown, its status) waits for
    the start to end first, so the sweep is over before any pod of this run holds an
    address. A start that failed fails each pod's set-up with its message; whoever runs
    :meth:`start` sees the failure itself.
    """

    def __init__(self, plugin: NetworkPlugin) -> None:
        self.plugin = plugin
        self.name = plugin.name
        self._done = anyio.Event()
        self._error: BaseException | None = None
        self._begun = False

    async def start(self) -> None:
        self._begun = True
        try:
            await self.plugin.start()
        except BaseException as e:
            self._error = e
            raise
        finally:
            self._done.set()

    async def started(self) -> None:
        """Returns once the start has ended well; raises if it did not."""
        await self._done.wait()
        if self._error is not None:
            raise errors.NetworkError(f"the node's network did not start: {self._error}")

    def sandbox_network_mode(self, *, host_network: bool) -> str:
        return self.plugin.sandbox_network_mode(host_network=host_network)

    def sandbox_extra(
        self, *, host_network: bool, port_mappings: tuple[PortMapping, ...]
    ) -> SandboxExtra:
        return self.plugin.sandbox_extra(host_network=host_network, port_mappings=port_mappings)

    async def setup_pod(self, request: PodNetworkRequest) -> PodNetwork:
        await self.started()
        return await self.plugin.setup_pod(request)

    async def _ended(self) -> None:
        """Waits for a start under way; one never begun (cancelled first) is not waited
        for."""
        if self._begun:
            await self._done.wait()

    async def teardown_pod(self, *, sandbox_id: str) -> None:
        await self._ended()
        await self.plugin.teardown_pod(sandbox_id=sandbox_id)

    async def get_pod_network_status(self, *, sandbox_id: str) -> PodNetwork | None:
        await self._ended()
        return await self.plugin.get_pod_network_status(sandbox_id=sandbox_id)

    async def status(self) -> tuple[bool, str]:
        await self._ended()
        if self._error is not None:
            return False, f"the node's network did not start: {self._error}"
        return await self.plugin.status()


_T = TypeVar("_T")


class _NetlinkThread:
    """One daemon thread running an event loop of its own, made on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="asynckubelet netlink", daemon=True
                )
                thread.start()
                self._loop = loop
            return self._loop


_NETLINK = _NetlinkThread()


async def off_loop(work: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """``work()`` run to its end on the netlink thread's event loop, for netlink work: the
    kernel carries out a netlink request inside ``sendmsg()``, waiting for the RTNL lock
    that dockerd also takes for every container's network namespace, and pyroute2 decodes
    the answers in Python, so on the node's loop a pod's plumbing or a dump of tracked
    flows would hold every other task (status, probes, API answers) for tens of
    milliseconds while pods start in a burst. One thread serves all of it (the kernel
    serializes the requests under that lock anyway), so its memory stays in one place.
    Cancelling the caller waits for the work to end, so nothing is left half made."""
    future = asyncio.run_coroutine_threadsafe(work(), _NETLINK.loop())
    with anyio.CancelScope(shield=True):
        result = await asyncio.wrap_future(future)
    return result


__all__ = [
    "DEFAULT_BRIDGE",
    "DEFAULT_POD_CIDR",
    "DEFAULT_POD_CIDR_V6",
    "DEFAULT_STATE_DIR",
    "FIREWALLS",
    "IPS_ANNOTATION",
    "LoopbackPlugin",
    "NetworkPlugin",
    "PodDNS",
    "PodNetwork",
    "PodNetworkRequest",
    "PortMapping",
    "SandboxExtra",
    "off_loop",
    "requested_ips",
]
