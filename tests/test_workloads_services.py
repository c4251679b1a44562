"""Services on one node: allocation as the API server's registry does it, endpoints as
the endpoints controller makes them, and a controller that follows pods' readiness and
hands the firewall one complete set of rules each time."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, cast

import anyio
import builders
import pytest
from aiohttp.test_utils import TestClient, TestServer
from apply_helpers import post_apply
from daemon_helpers import IMAGES
from lightkube.models.core_v1 import Pod, Service
from service_helpers import AddressPlugin, RecordingFirewall, RecordingFlows

from asynckubelet import errors
from asynckubelet.api.localapi import create_local_app
from asynckubelet.network.firewall import ServiceRule
from asynckubelet.node.kubelet import API_SOURCE, Kubelet, KubeletConfig
from asynckubelet.node.objects import OBJECTS_DIR, ObjectStore
from asynckubelet.testing import FakeDocker
from asynckubelet.workloads.services import (
    ProxyTarget,
    ServiceController,
    ServiceRanges,
    allocate,
    endpoints_for,
    service_rules,
)

RANGES = ServiceRanges.parse(cluster_ip_range="10.96.0.0/28", node_port_range="30000-30009")


def svc(name: str, **spec: Any) -> Service:
    body_spec: dict[str, Any] = {"type": "ClusterIP", **spec}
    body_spec.setdefault("ports", [{"name": "http", "port": 80, "protocol": "TCP"}])
    body = {"metadata": {"name": name, "namespace": "default"}, "spec": body_spec}
    return cast(Service, Service.from_dict(body))


def pod(
    name: str,
    ip: str | None,
    *,
    ready: bool = True,
    labels: dict[str, str] | None = None,
    port_name: str = "http",
    port: int = 8080,
    **extra: Any,
) -> Pod:
    return builders.pod(
        name,
        uid=f"uid-{name}",
        labels=labels or {"app": "web"},
        containers=[
            builders.container("c", "x", ports=[{"name": port_name, "containerPort": port}])
        ],
        status={
            "phase": "Running",
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
        **extra,
    )


# -- allocation -------------------------------------------------------------------------------


def test_a_cluster_ip_is_allocated_from_the_nodes_range() -> None:
    done, problems = allocate([svc("web")], stored={}, ranges=RANGES, rng=random.Random(1))  # noqa: S311  (a seeded pick, not a secret)
    assert problems == []
    ip = done[0].spec.clusterIP  # type: ignore[union-attr]
    assert ip is not None
    assert ip.startswith("10.96.0.")
    assert ip not in ("10.96.0.0", "10.96.0.15")
    assert done[0].spec.clusterIPs == [ip]  # type: ignore[union-attr]


def test_a_reapplied_service_keeps_its_cluster_ip_and_node_ports() -> None:
    first, _ = allocate([svc("web", type="NodePort")], stored={}, ranges=RANGES)
    again, problems = allocate(
        [svc("web", type="NodePort")], stored={("default", "web"): first[0]}, ranges=RANGES
    )
    assert problems == []
    assert again[0].to_dict() == first[0].to_dict()


def test_a_changed_cluster_ip_is_refused_as_immutable() -> None:
    first, _ = allocate([svc("web", clusterIP="10.96.0.5")], stored={}, ranges=RANGES)
    _, problems = allocate(
        [svc("web", clusterIP="10.96.0.6")], stored={("default", "web"): first[0]}, ranges=RANGES
    )
    assert [str(e) for _, e in problems] == [
        'spec.clusterIPs[0]: Invalid value: []string{"10.96.0.6"}: may not change once set'
    ]


def test_a_cluster_ip_outside_the_range_or_taken_is_refused_in_the_api_servers_words() -> None:
    first, _ = allocate([svc("a", clusterIP="10.96.0.5")], stored={}, ranges=RANGES)
    stored = {("default", "a"): first[0]}
    _, outside = allocate([svc("b", clusterIP="10.0.0.1")], stored=stored, ranges=RANGES)
    _, taken = allocate([svc("b", clusterIP="10.96.0.5")], stored=stored, ranges=RANGES)
    assert [str(e) for _, e in outside] == [
        'spec.clusterIPs: Invalid value: []string{"10.0.0.1"}: failed to allocate IP '
        "10.0.0.1: the provided IP (10.0.0.1) is not in the valid range. The range of valid "
        "IPs is 10.96.0.0/28"
    ]
    assert [str(e) for _, e in taken] == [
        'spec.clusterIPs: Invalid value: []string{"10.96.0.5"}: failed to allocate IP '
        "10.96.0.5: provided IP is already allocated"
    ]


def test_a_node_port_taken_or_out_of_range_is_refused() -> None:
    ports = [{"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30001}]
    first, _ = allocate([svc("a", type="NodePort", ports=ports)], stored={}, ranges=RANGES)
    stored = {("default", "a"): first[0]}
    _, taken = allocate([svc("b", type="NodePort", ports=ports)], stored=stored, ranges=RANGES)
    outside = [{"name": "http", "port": 80, "protocol": "TCP", "nodePort": 80}]
    _, out = allocate([svc("b", type="NodePort", ports=outside)], stored=stored, ranges=RANGES)
    assert [str(e) for _, e in taken] == [
        "spec.ports[0].nodePort: Invalid value: 30001: provided port is already allocated"
    ]
    assert [str(e) for _, e in out] == [
        "spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. "
        "The range of valid ports is 30000-30009"
    ]


def test_two_new_services_of_one_apply_never_share_an_address_or_port() -> None:
    many = [svc(f"s{i}", type="NodePort") for i in range(10)]
    done, problems = allocate(many, stored={}, ranges=RANGES)
    assert problems == []
    assert len({s.spec.clusterIP for s in done}) == 10  # type: ignore[union-attr]
    assert len({s.spec.ports[0].nodePort for s in done}) == 10  # type: ignore[union-attr,index]


def test_a_full_node_port_range_is_refused() -> None:
    many = [svc(f"s{i}", type="NodePort") for i in range(11)]
    _, problems = allocate(many, stored={}, ranges=RANGES)
    assert [k for k, _ in problems] == [("default", "s10")]


def test_a_headless_service_gets_no_address() -> None:
    done, _ = allocate([svc("db", clusterIP="None")], stored={}, ranges=RANGES)
    assert done[0].spec.clusterIP == "None"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("ip_range", "ports", "message"),
    [
        ("10.96.0.0/33", "30000-32767", "--service-cluster-ip-range"),
        ("fd00::/64", "30000-32767", "must be an IPv4 network"),
        ("10.96.0.0/16", "32767-30000", "--service-node-port-range"),
        ("10.96.0.0/16", "a-b", "must be FIRST-LAST"),
    ],
)
def test_bad_ranges_are_refused_naming_the_flag(ip_range: str, ports: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ServiceRanges.parse(cluster_ip_range=ip_range, node_port_range=ports)


# -- endpoints --------------------------------------------------------------------------------


def test_endpoints_are_the_matching_pods_with_an_ip_ready_or_not() -> None:
    web = svc(
        "web",
        selector={"app": "web"},
        ports=[{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}],
    )
    pods = [
        pod("a", "10.0.0.2"),
        pod("b", "10.0.0.3", ready=False),
        pod("c", None),
        pod("d", "10.0.0.4", labels={"app": "other"}),
    ]
    found = endpoints_for(web, pods)
    assert found is not None
    assert [(e.pod, e.ip, e.ready) for e in found.endpoints] == [
        ("a", "10.0.0.2", True),
        ("b", "10.0.0.3", False),
    ]
    assert [e.pod for e in found.ready] == ["a"]


def test_a_named_target_port_is_resolved_per_pod() -> None:
    web = svc(
        "web",
        selector={"app": "web"},
        ports=[{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}],
    )
    found = endpoints_for(web, [pod("a", "10.0.0.2", port=8080), pod("b", "10.0.0.3", port=9090)])
    assert found is not None
    assert [(e.ip, e.ports[0].port) for e in found.endpoints] == [
        ("10.0.0.2", 8080),
        ("10.0.0.3", 9090),
    ]


def test_a_pod_without_the_named_port_is_no_endpoint() -> None:
    web = svc(
        "web",
        selector={"app": "web"},
        ports=[{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}],
    )
    found = endpoints_for(web, [pod("a", "10.0.0.2", port_name="metrics")])
    assert found is not None
    assert found.endpoints == ()


def test_a_pod_being_deleted_or_finished_leaves_the_endpoints() -> None:
    web = svc("web", selector={"app": "web"})
    going = pod("a", "10.0.0.2")
    assert going.metadata is not None
    going.metadata.deletionTimestamp = "2026-01-01T00:00:00Z"  # type: ignore[assignment]
    done = pod("b", "10.0.0.3")
    assert done.status is not None
    done.status.phase = "Succeeded"
    found = endpoints_for(web, [going, done])
    assert found is not None
    assert found.endpoints == ()


def test_a_service_without_a_selector_has_no_endpoints_of_ours() -> None:
    assert endpoints_for(svc("web"), [pod("a", "10.0.0.2")]) is None


def test_a_pod_naming_the_service_as_subdomain_gives_its_endpoint_a_hostname() -> None:
    db = svc("db", clusterIP="None", selector={"app": "web"})
    found = endpoints_for(db, [pod("a", "10.0.0.2", hostname="db-0", subdomain="db")])
    assert found is not None
    assert found.endpoints[0].hostname == "db-0"


def test_the_v1_endpoints_split_ready_and_not_ready_addresses() -> None:
    web = svc(
        "web",
        selector={"app": "web"},
        ports=[{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}],
    )
    found = endpoints_for(web, [pod("a", "10.0.0.2"), pod("b", "10.0.0.3", ready=False)])
    assert found is not None
    (subset,) = found.v1()["subsets"]
    assert [a["ip"] for a in subset["addresses"]] == ["10.0.0.2"]
    assert [a["ip"] for a in subset["notReadyAddresses"]] == ["10.0.0.3"]
    assert subset["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]


def test_rules_carry_only_ready_endpoints_and_every_port_of_a_service() -> None:
    web = svc(
        "web",
        clusterIP="10.96.0.5",
        type="NodePort",
        selector={"app": "web"},
        ports=[
            {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP", "nodePort": 30001}
        ],
    )
    found = endpoints_for(web, [pod("a", "10.0.0.2"), pod("b", "10.0.0.3", ready=False)])
    assert found is not None
    assert service_rules([web], {("default", "web"): found}) == [
        ServiceRule(
            name="default/web:http",
            protocol="TCP",
            cluster_ip="10.96.0.5",
            port=80,
            node_port=30001,
            endpoints=(("10.0.0.2", 8080),),
        )
    ]


def test_a_headless_service_has_no_rules() -> None:
    db = svc("db", clusterIP="None", selector={"app": "web"})
    found = endpoints_for(db, [pod("a", "10.0.0.2")])
    assert found is not None
    assert service_rules([db], {("default", "db"): found}) == []


# -- the controller on a node -----------------------------------------------------------------

WEB = """\
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: NodePort
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http, nodePort: 30001}]
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
LOCAL = "/apis/local.asynckubelet/v1"
Client = TestClient[Any, Any]


@pytest.fixture
async def node(
    tmp_path: Path,
) -> AsyncIterator[tuple[Client, Kubelet, ServiceController, RecordingFirewall]]:
    state = tmp_path / "state"
    config = KubeletConfig(
        node_name="n1", state_dir=state, housekeeping_period=3600, resync_period=0.2
    )
    objects = ObjectStore(directory=state / OBJECTS_DIR, persistent_source=API_SOURCE)
    kubelet = Kubelet(
        config, docker=FakeDocker(images=IMAGES), network=AddressPlugin(), objects=objects
    )
    firewall = RecordingFirewall()
    async with kubelet:
        controller = ServiceController(
            kubelet,
            ranges=RANGES,
            targets=[ProxyTarget(firewall, "br0")],  # type: ignore[arg-type]
            flows=RecordingFlows(),
        )
        app = create_local_app(kubelet, services=controller, uids=())
        # The client closes after the task group, outside its cancelled scope, so its
        # server's sockets are closed, not abandoned mid-shutdown.
        async with TestClient(TestServer(app)) as client, anyio.create_task_group() as tg:
            await tg.start(controller.run)
            yield client, kubelet, controller, firewall
            tg.cancel_scope.cancel()


async def apply(client: Client, *texts: str) -> tuple[int, dict[str, Any]]:
    return await post_apply(client, *texts)


async def until(check: Any, controller: ServiceController) -> None:
    with anyio.fail_after(10):
        while not check():
            await controller.changed()


@pytest.mark.anyio
async def test_rules_follow_the_pods_as_they_come_and_go(
    node: tuple[Client, Kubelet, ServiceController, RecordingFirewall],
) -> None:
    client, kubelet, controller, firewall = node
    code, _ = await apply(client, WEB, POD.replace("NAME", "a"), POD.replace("NAME", "b"))
    assert code == 201

    def ready_count() -> int:
        found = controller.endpoints("default", "web")
        return len(found.ready) if found is not None else -1

    await until(lambda: ready_count() == 2, controller)
    await firewall.until_endpoints(2)
    rule = firewall.synced[-1][0]
    assert (rule.node_port, sorted(p for _, p in rule.endpoints)) == (30001, [8080, 8080])
    await kubelet.delete("default", "a")
    await until(lambda: ready_count() == 1, controller)
    await firewall.until_endpoints(1)


@pytest.mark.anyio
async def test_a_udp_endpoint_removed_has_its_flows_cleared_once_the_rules_are_in(
    node: tuple[Client, Kubelet, ServiceController, RecordingFirewall],
) -> None:
    """Tracked UDP flows would keep sending to the removed pod: they are cleared after the
    rules without it are programmed; a TCP Service's never are."""
    client, kubelet, controller, firewall = node
    dns = WEB.replace("name: web", "name: dns").replace("port: 80,", "port: 53, protocol: UDP,")
    udp_pod = POD.replace("containerPort: 8080", "containerPort: 8080, protocol: UDP")
    code, _ = await apply(client, dns, udp_pod.replace("NAME", "a"), udp_pod.replace("NAME", "b"))
    assert code == 201
    await firewall.until_endpoints(2)
    flows = controller.flows
    assert isinstance(flows, RecordingFlows)
    found = controller.endpoints("default", "dns")
    assert found is not None
    gone = next(e.ip for e in found.ready if e.pod == "a")
    before = len(flows.cleared)
    await kubelet.delete("default", "a")
    await firewall.until_endpoints(1)
    with anyio.fail_after(10):
        while not any(gone in f.removed for f in flows.cleared[before:]):
            await controller.changed()
    last = flows.cleared[-1]
    assert (last.protocol, last.cluster_ip, last.port) == (
        "UDP",
        firewall.synced[-1][0].cluster_ip,
        53,
    )
    assert gone not in {ip for ip, _ in last.serving}
    assert len(last.serving) == 1


@pytest.mark.anyio
async def test_a_taken_node_port_refuses_the_whole_apply_and_leaves_nothing(
    node: tuple[Client, Kubelet, ServiceController, RecordingFirewall],
) -> None:
    client, kubelet, _, _ = node
    assert (await apply(client, WEB))[0] == 201
    other = WEB.replace("name: web", "name: other")
    code, body = await apply(client, other, POD.replace("NAME", "x"))
    assert code == 422
    assert [(c["source"], c["field"], c["message"]) for c in body["details"]["causes"]] == [
        ('Service "other"', "spec.ports[0].nodePort", "30001: provided port is already allocated")
    ]
    assert [o.name for o in kubelet.objects.list("Service")] == ["web"]
    assert kubelet.objects.list("Pod") == []


@pytest.mark.anyio
async def test_services_and_endpoints_are_served_as_kubectl_reads_them(
    node: tuple[Client, Kubelet, ServiceController, RecordingFirewall],
) -> None:
    client, _, controller, _ = node
    lonely = WEB.replace("name: web", "name: lonely").replace("app: web", "app: none")
    lonely = lonely.replace("nodePort: 30001", "nodePort: 30002")
    await apply(client, WEB, lonely, POD.replace("NAME", "a"))

    def has_ready() -> bool:
        found = controller.endpoints("default", "web")
        return found is not None and len(found.ready) == 1

    await until(has_ready, controller)
    services = await (await client.get("/api/v1/namespaces/default/services")).json()
    assert [s["metadata"]["name"] for s in services["items"]] == ["lonely", "web"]
    ep = await (await client.get("/api/v1/namespaces/default/endpoints/web")).json()
    assert ep["subsets"][0]["addresses"][0]["targetRef"]["name"] == "a"
    empty = await (await client.get("/api/v1/namespaces/default/endpoints/lonely")).json()
    assert "subsets" not in empty
    table = await (
        await client.get(
            "/api/v1/namespaces/default/services/web",
            headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
        )
    ).json()
    cells = table["rows"][0]["cells"]
    assert cells[1] == "NodePort"
    assert cells[4] == "80:30001/TCP"


@pytest.mark.anyio
async def test_reapplying_a_service_is_unchanged(
    node: tuple[Client, Kubelet, ServiceController, RecordingFirewall],
) -> None:
    client, _, _, _ = node
    await apply(client, WEB)
    _, body = await apply(client, WEB)
    assert [i["verdict"] for i in body["items"]] == ["unchanged"]


@pytest.mark.anyio
async def test_a_deleted_pod_leaves_the_rules_before_its_containers_are_stopped(
    node: tuple[Client, Kubelet, ServiceController, RecordingFirewall],
) -> None:
    client, kubelet, _, firewall = node
    code, _ = await apply(client, WEB, POD.replace("NAME", "a"), POD.replace("NAME", "b"))
    assert code == 201
    await firewall.until_endpoints(2)
    at_stop: list[int] = []

    async def stopping(pod: Pod) -> None:
        at_stop.append(len(firewall.synced[-1][0].endpoints))

    kubelet.stop_hooks.append(stopping)
    firewall.delay = 0.5
    await kubelet.delete("default", "a")
    assert at_stop == [1]


@pytest.mark.anyio
async def test_endpoints_are_shown_only_once_the_rules_that_follow_them_are_in(
    node: tuple[Client, Kubelet, ServiceController, RecordingFirewall],
) -> None:
    """Whoever sees an endpoint leave (the API, the DNS, a waiter) finds its traffic gone:
    each change of the endpoints is shown after the packet filter took the rules."""
    client, kubelet, controller, firewall = node
    firewall.delay = 0.3
    seen: list[tuple[int, int]] = []

    def shown() -> None:
        found = controller.endpoints("default", "web")
        rules = firewall.synced[-1] if firewall.synced else []
        if found is not None and rules:
            seen.append((len(found.ready), len(rules[0].endpoints)))

    controller.subscribe(shown)
    code, _ = await apply(client, WEB, POD.replace("NAME", "a"), POD.replace("NAME", "b"))
    assert code == 201
    await firewall.until_endpoints(2)
    await kubelet.delete("default", "a")
    await firewall.until_endpoints(1)
    assert (2, 2) in seen
    assert (1, 1) in seen
    assert [(shown, programmed) for shown, programmed in seen if shown != programmed] == []


class RefusingOnceFirewall(RecordingFirewall):
    def __init__(self) -> None:
        super().__init__()
        self.refused = 0

    async def sync_services(self, *, bridge: str, rules: Sequence[ServiceRule]) -> None:
        if self.refused == 0 and rules and rules[0].endpoints:
            self.refused += 1
            raise errors.NetworkError("nft: Could not process rule: Device or resource busy")
        await super().sync_services(bridge=bridge, rules=rules)


@pytest.mark.anyio
async def test_rules_the_packet_filter_refused_are_programmed_again_without_a_new_change(
    node: tuple[Client, Kubelet, ServiceController, RecordingFirewall],
) -> None:
    client, _, controller, _ = node
    firewall = RefusingOnceFirewall()
    controller.targets = (ProxyTarget(firewall, "br0"),)  # type: ignore[arg-type]
    code, _ = await apply(client, WEB, POD.replace("NAME", "a"))
    assert code == 201
    await firewall.until_endpoints(1)
    assert firewall.refused == 1


@pytest.mark.anyio
async def test_without_a_service_the_pods_changes_do_not_make_the_controller_read_the_pods(
    node: tuple[Client, Kubelet, ServiceController, RecordingFirewall],
) -> None:
    client, kubelet, controller, firewall = node
    reads = 0
    views = kubelet.views

    def counted() -> list[Pod]:
        nonlocal reads
        reads += 1
        return views()

    kubelet.views = counted  # type: ignore[method-assign]
    synced = controller._finished
    code, _ = await apply(client, POD.replace("NAME", "a"))
    assert code == 201
    await kubelet.wait("default", "a", "Running")
    with anyio.fail_after(10):
        while controller._finished < synced + 2:
            await controller._synced.wait()
    assert reads == 0
    assert firewall.synced == [[]]
    code, _ = await apply(client, WEB)
    assert code == 201
    await firewall.until_endpoints(1)
    assert reads > 0
