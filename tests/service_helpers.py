"""A network plugin, a firewall and a flow cleaner for tests of Services on a node: the
plugin hands out addresses, the other two record what the controller asked of them."""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from asynckubelet.network import PodNetwork, PodNetworkRequest, PortMapping, SandboxExtra
from asynckubelet.network.conntrack import StaleFlows
from asynckubelet.network.firewall import ServiceRule


class AddressPlugin:
    """A network that gives each sandbox the next address of 10.0.0.0/24."""

    name = "addresses"

    def __init__(self) -> None:
        self.ips: dict[str, str] = {}

    async def start(self) -> None:
        return None

    def sandbox_network_mode(self, *, host_network: bool) -> str:
        return "none"

    def sandbox_extra(
        self, *, host_network: bool, port_mappings: tuple[PortMapping, ...]
    ) -> SandboxExtra:
        return SandboxExtra()

    async def setup_pod(self, request: PodNetworkRequest) -> PodNetwork:
        ip = self.ips.setdefault(request.sandbox_id, f"10.0.0.{len(self.ips) + 2}")
        return PodNetwork(ips=(ip,))

    async def teardown_pod(self, *, sandbox_id: str) -> None:
        self.ips.pop(sandbox_id, None)

    async def get_pod_network_status(self, *, sandbox_id: str) -> PodNetwork | None:
        ip = self.ips.get(sandbox_id)
        return PodNetwork(ips=(ip,) if ip else ())

    async def status(self) -> tuple[bool, str]:
        return True, ""


class RecordingFirewall:
    binary = "fake"

    def __init__(self) -> None:
        self.synced: list[list[ServiceRule]] = []
        self._synced = anyio.Event()
        self.delay = 0.0

    async def sync_services(self, *, bridge: str, rules: Sequence[ServiceRule]) -> None:
        await anyio.sleep(self.delay)
        self.synced.append(list(rules))
        self._synced.set()
        self._synced = anyio.Event()

    async def until_endpoints(self, count: int) -> None:
        with anyio.fail_after(10):
            while (
                not self.synced or not self.synced[-1] or len(self.synced[-1][0].endpoints) != count
            ):
                await self._synced.wait()


class RecordingFlows:
    """A flow cleaner that keeps what it was asked to clear."""

    def __init__(self) -> None:
        self.cleared: list[StaleFlows] = []

    async def clear(self, flows: Sequence[StaleFlows]) -> int:
        self.cleared.extend(flows)
        return len(flows)
