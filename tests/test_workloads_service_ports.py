"""The Service controller keeps the node's ports: an apply taking the node's own port, a
host process's or a pod's hostPort is refused naming the holder, a LoadBalancer outside
the node port range only under ``privileged``; a stored Service's port taken since is
withheld from the rules with a Warning event, and published again once free; a pod's
hostPort that a Service publishes is refused, so the check goes both ways."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer
from daemon_helpers import IMAGES
from lightkube.models.core_v1 import Pod
from service_helpers import AddressPlugin, RecordingFirewall, RecordingFlows

from asynckubelet.api.localapi import create_local_app
from asynckubelet.kubectl.describe import describe_service
from asynckubelet.manifests.security import Level
from asynckubelet.network.firewall import ServiceRule
from asynckubelet.node.admission import (
    HOST_PORT_CONFLICT,
    NodeAdmitter,
    NodeInfo,
    NodeResources,
    admit,
)
from asynckubelet.node.events import PodEvent
from asynckubelet.node.kubelet import API_SOURCE, Kubelet, KubeletConfig
from asynckubelet.node.listeners import Listener
from asynckubelet.node.objects import OBJECTS_DIR, ObjectStore
from asynckubelet.testing import FakeDocker
from asynckubelet.workloads.allocation import ReservedPort, ServiceRanges
from asynckubelet.workloads.services import ProxyTarget, ServiceController

RANGES = ServiceRanges.parse(cluster_ip_range="10.96.0.0/28", node_port_range="30000-30009")
LOCAL = "/apis/local.asynckubelet/v1"
Client = TestClient[Any, Any]

LB = """\
apiVersion: v1
kind: Service
metadata: {name: NAME}
spec:
  type: LoadBalancer
  selector: {app: web}
  ports: [{name: http, port: PORT, targetPort: http, nodePort: 30001}]
"""
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: NAME, labels: {app: web}}
spec:
  containers:
  - name: c
    image: busybox:1.35
    ports: [{name: http, containerPort: 8080}]
"""
HOSTPORT_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  containers:
  - name: c
    image: busybox:1.35
    ports: [{containerPort: 8080, hostPort: PORT}]
"""
STRICT_DEFAULT = """\
apiVersion: v1
kind: Namespace
metadata:
  name: default
  labels: {pod-security.kubernetes.io/enforce: baseline}
"""


def lb(port: int, name: str = "web") -> str:
    return LB.replace("NAME", name).replace("PORT", str(port))


def hostport_pod(name: str, port: int) -> str:
    return HOSTPORT_POD.replace("NAME", name).replace("PORT", str(port))


@dataclass
class Node:
    client: Client
    kubelet: Kubelet
    controller: ServiceController
    firewall: RecordingFirewall
    listening: list[Listener] = field(default_factory=list)
    """What the host's socket tables show, as the test sets them."""

    async def apply(self, *texts: str) -> tuple[int, dict[str, Any]]:
        files = [{"source": f"f{i}.yaml", "manifest": t} for i, t in enumerate(texts)]
        response = await self.client.post(f"{LOCAL}/apply", json={"files": files})
        return response.status, await response.json()

    async def until_rule(self, check: Any) -> ServiceRule:
        """The last rules programmed once their first rule meets ``check``."""
        with anyio.fail_after(10):
            while not (
                last := self.firewall.synced[-1] if self.firewall.synced else []
            ) or not check(last[0]):
                await self.firewall._synced.wait()
        return self.firewall.synced[-1][0]

    def events(self, reason: str) -> list[PodEvent]:
        return [e for e in self.kubelet.recorder.list() if e.reason == reason]


def causes(body: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["source"], c["field"], c["message"]) for c in body["details"]["causes"]]


@contextlib.asynccontextmanager
async def service_node(
    tmp_path: Path, *, level: Level = "privileged", recheck_after: float = 3600
) -> AsyncIterator[Node]:
    state = tmp_path / "state"
    config = KubeletConfig(
        node_name="n1",
        state_dir=state,
        housekeeping_period=3600,
        resync_period=0.2,
        pod_security=level,
        check_host_ports=False,
    )
    objects = ObjectStore(directory=state / OBJECTS_DIR, persistent_source=API_SOURCE)
    kubelet = Kubelet(
        config, docker=FakeDocker(images=IMAGES), network=AddressPlugin(), objects=objects
    )
    firewall = RecordingFirewall()
    listening: list[Listener] = []
    async with kubelet:
        controller = ServiceController(
            kubelet,
            ranges=RANGES,
            targets=[ProxyTarget(firewall, "br0")],  # type: ignore[arg-type]
            flows=RecordingFlows(),
            reserved=[ReservedPort("TCP", 10255, "serve --listen")],
            host_listeners=lambda: list(listening),
        )
        controller.recheck_after = recheck_after
        app = create_local_app(kubelet, services=controller, uids=())
        async with TestClient(TestServer(app)) as client, anyio.create_task_group() as tg:
            await tg.start(controller.run)
            yield Node(client, kubelet, controller, firewall, listening)
            tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_a_load_balancer_on_the_nodes_own_port_is_refused_naming_the_server(
    tmp_path: Path,
) -> None:
    async with service_node(tmp_path) as node:
        code, body = await node.apply(lb(10255), POD.replace("NAME", "a"))
        assert code == 422
        assert causes(body) == [
            (
                'Service "web"',
                "spec.ports[0].port",
                "10255: port is in use on the node (serve --listen)",
            )
        ]
        assert node.kubelet.objects.list("Service") == []
        assert node.kubelet.objects.list("Pod") == []


@pytest.mark.anyio
async def test_a_load_balancer_on_a_port_a_host_process_listens_on_is_refused(
    tmp_path: Path,
) -> None:
    async with service_node(tmp_path) as node:
        node.listening.append(Listener("TCP", "127.0.0.1", 47001))
        code, body = await node.apply(lb(47001))
        assert code == 422
        assert causes(body) == [
            (
                'Service "web"',
                "spec.ports[0].port",
                "47001: port is in use on the node by a host process listening on 127.0.0.1",
            )
        ]


@pytest.mark.anyio
@pytest.mark.parametrize("level", ["baseline", "restricted"])
async def test_below_privileged_a_load_balancer_outside_the_range_is_forbidden(
    tmp_path: Path, level: Level
) -> None:
    async with service_node(tmp_path, level=level) as node:
        code, body = await node.apply(lb(47001))
        assert code == 422
        ((source, path, message),) = causes(body)
        assert (source, path) == ('Service "web"', "spec.ports[0].port")
        assert message.startswith(
            f'port 47001 is outside the node port range 30000-30009: under the "{level}:latest" '
            "Pod Security level"
        )
        assert message.endswith(
            "use a port in 30000-30009 or a NodePort Service, or run the node at --pod-security "
            "privileged"
        )
        assert (await node.apply(lb(30005)))[0] == 200


@pytest.mark.anyio
async def test_a_port_a_host_process_takes_later_is_withheld_with_one_event_and_comes_back(
    tmp_path: Path,
) -> None:
    async with service_node(tmp_path, recheck_after=0.05) as node:
        code, _ = await node.apply(lb(47001), POD.replace("NAME", "a"))
        assert code == 200
        await node.until_rule(lambda r: r.endpoints and r.published_port == 47001)
        node.listening.append(Listener("TCP", "0.0.0.0", 47001))
        rule = await node.until_rule(lambda r: r.published_port == 0)
        assert (rule.node_port, len(rule.endpoints)) == (30001, 1)
        synced, later = len(node.firewall.synced), node.controller._begun + 3
        with anyio.fail_after(10):
            while node.controller._finished < later:
                await node.controller._synced.wait()
        (event,) = node.events("PortInUse")
        assert (event.kind, event.pod, event.type, event.count) == ("Service", "web", "Warning", 1)
        assert event.message == (
            "Service port 47001/TCP is not published: port is in use on the node by a host "
            "process listening on 0.0.0.0"
        )
        assert event.source == "service-controller"
        assert len(node.firewall.synced) == synced
        node.listening.clear()
        await node.until_rule(lambda r: r.published_port == 47001)


@pytest.mark.anyio
async def test_a_namespace_made_stricter_later_withholds_its_load_balancer_port(
    tmp_path: Path,
) -> None:
    async with service_node(tmp_path) as node:
        code, _ = await node.apply(lb(47001), POD.replace("NAME", "a"))
        assert code == 200
        await node.until_rule(lambda r: r.endpoints and r.published_port == 47001)
        assert (await node.apply(STRICT_DEFAULT))[0] == 200
        rule = await node.until_rule(lambda r: r.published_port == 0)
        assert rule.node_port == 30001
        (event,) = node.events("PortForbidden")
        assert event.message.startswith(
            "Service port 47001/TCP is not published: port 47001 is outside the node port range"
        )
        assert event.message.endswith(
            "or make its namespace's pod-security.kubernetes.io/enforce label privileged"
        )


@pytest.mark.anyio
async def test_a_pod_asking_for_a_host_port_a_service_publishes_is_rejected_naming_it(
    tmp_path: Path,
) -> None:
    async with service_node(tmp_path) as node:
        assert (await node.apply(lb(47001)))[0] == 200
        assert (await node.apply(hostport_pod("hp", 30001), hostport_pod("hq", 47001)))[0] == 200
        for name, port in (("hp", 30001), ("hq", 47001)):
            pod = await node.kubelet.wait("default", name, "Failed", timeout=10)
            assert pod is not None
            assert pod.status is not None
            assert (pod.status.reason, pod.status.message) == (
                HOST_PORT_CONFLICT,
                f"Pod was rejected: cannot start the pod due to host port conflict: "
                f"0.0.0.0:{port}/TCP is already in use on the node by Service default/web",
            )
        assert len(node.events(HOST_PORT_CONFLICT)) == 2


@pytest.mark.anyio
async def test_a_service_on_a_port_a_pods_host_port_holds_is_refused_naming_the_pod(
    tmp_path: Path,
) -> None:
    async with service_node(tmp_path) as node:
        assert (await node.apply(hostport_pod("hp", 47001)))[0] == 200
        await node.kubelet.wait("default", "hp", "Running", timeout=10)
        code, body = await node.apply(lb(47001))
        assert code == 422
        assert causes(body) == [
            (
                'Service "web"',
                "spec.ports[0].port",
                "47001: port is in use on the node by hostPort of pod default/hp",
            )
        ]
        code, body = await node.apply(lb(30002, name="other"), hostport_pod("hq", 30001))
        assert code == 422
        assert causes(body) == [
            (
                'Service "other"',
                "spec.ports[0].nodePort",
                "30001: port is in use on the node by hostPort of pod default/hq",
            )
        ]


def test_admission_refuses_a_host_port_a_service_publishes_of_the_same_protocol() -> None:
    node = NodeInfo(name="n1", allocatable=NodeResources(cpu_millis=1000, memory=1 << 30))
    pod = cast(Pod, Pod.from_dict(yaml.safe_load(hostport_pod("hp", 30001))))
    published = {("TCP", 30001): "Service default/web"}
    rejection = admit(pod, node=node, published=published)
    assert rejection is not None
    assert (rejection.reason, rejection.message) == (
        HOST_PORT_CONFLICT,
        "cannot start the pod due to host port conflict: 0.0.0.0:30001/TCP is already in use "
        "on the node by Service default/web",
    )
    assert admit(pod, node=node, published={("UDP", 30001): "Service default/dns"}) is None


def test_a_running_pod_adopted_at_restart_keeps_its_host_port() -> None:
    """It was there first: the Service is the one left unpublished (by the controller)."""
    admitter = NodeAdmitter(
        NodeInfo(name="n1", allocatable=NodeResources(cpu_millis=1000, memory=1 << 30)),
        published_ports=lambda: {("TCP", 30001): "Service default/web"},
    )
    pod = cast(Pod, Pod.from_dict(yaml.safe_load(hostport_pod("hp", 30001))))
    assert admitter.admit(pod, admitted=[], running=True) is None
    assert admitter.admit(pod, admitted=[]) is not None


def test_describe_service_ends_with_the_services_events() -> None:
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    event = PodEvent(
        namespace="default",
        pod="web",
        uid="u1",
        type="Warning",
        reason="PortInUse",
        message="Service port 47001/TCP is not published: port is in use on the node (x)",
        first_timestamp=now - timedelta(minutes=3),
        last_timestamp=now - timedelta(minutes=1),
        count=2,
        source="service-controller",
        kind="Service",
    )
    body = {"metadata": {"name": "web"}, "spec": {"type": "LoadBalancer", "ports": []}}
    lines = describe_service(body, None, [event], now=now).splitlines()
    assert lines[-4:] == [
        "Events:",
        "  Type      Reason      Age                From                 Message",
        "  ----      ------      ----               ----                 -------",
        "  Warning   PortInUse   60s (x2 over 3m)   service-controller   Service port 47001/TCP "
        "is not published: port is in use on the node (x)",
    ]
    assert describe_service(body, None).splitlines()[-1] == "Events:                   <none>"
