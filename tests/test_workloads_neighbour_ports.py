"""Ports another node of the same host publishes (``--instance``): an explicit nodePort
or LoadBalancer port is refused naming that node, the automatic allocation avoids them,
a stopped node holds nothing, and a port a neighbour published first is withheld at sync
with a Warning event, while the node records the ports it publishes for its neighbours."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from aiohttp.test_utils import TestClient, TestServer
from daemon_helpers import IMAGES
from service_helpers import AddressPlugin, RecordingFirewall, RecordingFlows

from asynckubelet.api.localapi import create_local_app
from asynckubelet.network.firewall import ServiceRule
from asynckubelet.node.events import PodEvent
from asynckubelet.node.kubelet import API_SOURCE, Kubelet, KubeletConfig
from asynckubelet.node.neighbours import RECORD, Neighbours
from asynckubelet.node.objects import OBJECTS_DIR, ObjectStore
from asynckubelet.testing import FakeDocker
from asynckubelet.workloads.allocation import ServiceRanges
from asynckubelet.workloads.services import ProxyTarget, ServiceController

RANGES = ServiceRanges.parse(cluster_ip_range="10.96.0.0/28", node_port_range="30000-30009")
LOCAL = "/apis/local.asynckubelet/v1"

SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: NAME}
spec:
  type: TYPE
  selector: {app: web}
  ports: [PORTS]
"""
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: a, labels: {app: web}}
spec:
  containers:
  - name: c
    image: busybox:1.35
    ports: [{name: http, containerPort: 8080}]
"""


def service(ports: str, *, kind: str = "NodePort", name: str = "web") -> str:
    return SERVICE.replace("NAME", name).replace("TYPE", kind).replace("PORTS", ports)


@dataclass
class Host:
    """The node under test (instance ``b``) and its neighbours' records."""

    root: Path
    client: TestClient[Any, Any]
    kubelet: Kubelet
    controller: ServiceController
    firewall: RecordingFirewall
    running: set[str] = field(default_factory=set)

    def neighbour_publishes(self, name: str, ports: list[int], *, since: float = 1.0) -> None:
        """Instance ``name`` runs and publishes ``ports`` (TCP) since ``since``."""
        Neighbours(
            state_dir=self.root / name,
            node_name=f"host-{name}",
            root=self.root,
            clock=lambda: since,
        ).record([("TCP", p) for p in ports])
        self.running.add(name)

    async def apply(self, *texts: str) -> tuple[int, dict[str, Any]]:
        files = [{"source": f"f{i}.yaml", "manifest": t} for i, t in enumerate(texts)]
        response = await self.client.post(f"{LOCAL}/apply", json={"files": files})
        return response.status, await response.json()

    def node_ports(self) -> list[int]:
        found = []
        for obj in self.kubelet.objects.list("Service"):
            found += [p["nodePort"] for p in obj.body["spec"]["ports"]]
        return found

    def recorded(self) -> list[int]:
        path = self.root / "b" / RECORD
        if not path.exists():
            return []
        return [p["port"] for p in json.loads(path.read_text())["ports"]]

    async def until_rule(self, check: Any) -> ServiceRule:
        with anyio.fail_after(10):
            while not (
                last := self.firewall.synced[-1] if self.firewall.synced else []
            ) or not check(last[0]):
                await self.firewall._synced.wait()
        return self.firewall.synced[-1][0]

    async def syncs(self, count: int) -> None:
        later = self.controller._begun + count
        with anyio.fail_after(10):
            while self.controller._finished < later:
                await self.controller._synced.wait()

    def events(self, reason: str) -> list[PodEvent]:
        return [e for e in self.kubelet.recorder.list() if e.reason == reason]


def causes(body: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["source"], c["field"], c["message"]) for c in body["details"]["causes"]]


@contextlib.asynccontextmanager
async def host(tmp_path: Path) -> AsyncIterator[Host]:
    root = tmp_path / "instances"
    state = root / "b"
    config = KubeletConfig(
        node_name="host-b",
        state_dir=state,
        housekeeping_period=3600,
        resync_period=0.2,
        pod_security="privileged",
        check_host_ports=False,
    )
    objects = ObjectStore(directory=state / OBJECTS_DIR, persistent_source=API_SOURCE)
    kubelet = Kubelet(
        config, docker=FakeDocker(images=IMAGES), network=AddressPlugin(), objects=objects
    )
    firewall = RecordingFirewall()
    running: set[str] = set()
    neighbours = Neighbours(
        state_dir=state, node_name="host-b", root=root, alive=lambda s: s.name in running
    )
    async with kubelet:
        controller = ServiceController(
            kubelet,
            ranges=RANGES,
            targets=[ProxyTarget(firewall, "br0")],  # type: ignore[arg-type]
            flows=RecordingFlows(),
            neighbours=neighbours,
        )
        controller.recheck_after = 0.05
        app = create_local_app(kubelet, services=controller, uids=())
        async with TestClient(TestServer(app)) as client, anyio.create_task_group() as tg:
            await tg.start(controller.run)
            yield Host(root, client, kubelet, controller, firewall, running)
            tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_a_node_port_another_node_publishes_is_refused_naming_that_node(
    tmp_path: Path,
) -> None:
    async with host(tmp_path) as node:
        node.neighbour_publishes("a", [30001])
        code, body = await node.apply(service("{port: 80, nodePort: 30001}"))
        assert code == 422
        assert causes(body) == [
            (
                'Service "web"',
                "spec.ports[0].nodePort",
                "30001: provided port is already allocated by a Service of node host-a",
            )
        ]
        assert node.kubelet.objects.list("Service") == []


@pytest.mark.anyio
async def test_a_load_balancer_port_another_node_publishes_is_refused_naming_that_node(
    tmp_path: Path,
) -> None:
    async with host(tmp_path) as node:
        node.neighbour_publishes("a", [8080])
        code, body = await node.apply(service("{port: 8080}", kind="LoadBalancer"))
        assert code == 422
        assert causes(body) == [
            (
                'Service "web"',
                "spec.ports[0].port",
                "8080: provided port is already allocated by a Service of node host-a",
            )
        ]


@pytest.mark.anyio
async def test_the_automatic_node_port_avoids_the_ports_other_nodes_publish(
    tmp_path: Path,
) -> None:
    async with host(tmp_path) as node:
        node.neighbour_publishes("a", list(range(30000, 30005)))
        node.neighbour_publishes("c", list(range(30005, 30009)))
        assert (await node.apply(service("{port: 80}")))[0] == 200
        assert node.node_ports() == [30009]


@pytest.mark.anyio
async def test_a_stopped_nodes_ports_are_free_again(tmp_path: Path) -> None:
    async with host(tmp_path) as node:
        node.neighbour_publishes("a", [30001])
        node.running.clear()
        assert (await node.apply(service("{port: 80, nodePort: 30001}")))[0] == 200
        assert node.node_ports() == [30001]


@pytest.mark.anyio
async def test_the_node_records_the_ports_it_publishes(tmp_path: Path) -> None:
    async with host(tmp_path) as node:
        ports = "{name: a, port: 80, nodePort: 30001}, {name: b, port: 81, nodePort: 30002}"
        assert (await node.apply(service(ports), POD))[0] == 200
        await node.until_rule(lambda r: r.node_port == 30001)
        assert node.recorded() == [30001, 30002]


@pytest.mark.anyio
async def test_a_port_a_node_published_first_is_withheld_with_one_event_and_comes_back(
    tmp_path: Path,
) -> None:
    async with host(tmp_path) as node:
        assert (await node.apply(service("{port: 80, nodePort: 30001}"), POD))[0] == 200
        await node.until_rule(lambda r: r.node_port == 30001)
        node.neighbour_publishes("a", [30001], since=1.0)
        rule = await node.until_rule(lambda r: r.node_port == 0)
        await node.syncs(3)
        (event,) = node.events("PortInUse")
        assert (event.kind, event.pod, event.type) == ("Service", "web", "Warning")
        assert event.message == (
            "nodePort 30001/TCP is not published: provided port is already allocated by a "
            "Service of node host-a"
        )
        assert (rule.port, node.recorded()) == (80, [])
        node.running.clear()
        await node.until_rule(lambda r: r.node_port == 30001)
        assert node.recorded() == [30001]


@pytest.mark.anyio
async def test_a_node_that_published_a_port_later_does_not_take_it(tmp_path: Path) -> None:
    async with host(tmp_path) as node:
        assert (await node.apply(service("{port: 80, nodePort: 30001}"), POD))[0] == 200
        await node.until_rule(lambda r: r.node_port == 30001)
        node.neighbour_publishes("a", [30001], since=4e9)
        await node.syncs(3)
        assert node.events("PortInUse") == []
        assert node.firewall.synced[-1][0].node_port == 30001
        assert node.recorded() == [30001]
