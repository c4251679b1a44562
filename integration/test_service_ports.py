"""Services never take a port the host or the node serves, end to end: ``serve`` on a
bridge of its own with each firewall (iptables, nftables), real pods on Docker, Services
applied through the CLI.

A LoadBalancer on a port a process of the host listens on (a socket of this test), or on
the daemon's own ``--listen`` port, is refused naming the holder, and the packet filter
gets no rule for that port: the host process and ``/healthz`` keep answering. Under
``--pod-security privileged`` a LoadBalancer outside the node port range is published and
reaches the pods; under ``baseline`` (the node's, or a namespace's) it is refused. A
stored LoadBalancer whose port a host process binds later is withdrawn from the rules
with a ``PortInUse`` event, and published again once the process lets go.
"""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from asynckubelet.network import iptables, nftables
from integration.harness import Engine, free_port
from integration.network_helpers import free_cidr
from integration.serve_helpers import Daemon
from integration.service_helpers import (
    ServiceNode,
    fetch,
    leftovers,
    remove_service_node,
    service_chains,
)

pytestmark = pytest.mark.integration

LB = """
apiVersion: v1
kind: Service
metadata: {name: NAME, namespace: NS}
spec:
  type: LoadBalancer
  selector: {app: web}
  ports: [{name: http, port: PORT, targetPort: http}]
"""
STRICT = """
apiVersion: v1
kind: Namespace
metadata:
  name: NS
  labels: {pod-security.kubernetes.io/enforce: baseline}
"""


def lb(name: str, port: int, namespace: str = "default") -> str:
    return LB.replace("NAME", name).replace("NS", namespace).replace("PORT", str(port))


def port_daemon(
    tmp: Path, *, name: str, bridge: str, cidr: str, firewall: str, engine: Engine, level: str
) -> Daemon:
    """A ``serve`` node of its own bridge, pod CIDR, firewall and Pod Security level, whose
    cluster DNS forwards to a loopback port where nothing answers."""
    return Daemon(
        state=tmp / "state",
        node_name=name,
        port=free_port(),
        engine=engine,
        serve_args=(
            "--bridge", bridge,
            "--pod-cidr", cidr,
            "--firewall", firewall,
            "--dns-upstream", f"127.0.0.1:{free_port()}",
            "--pod-security", level,
            "--stop-pods-on-exit",
        ),
    )  # fmt: skip


def rules_for_port(node: ServiceNode, port: int) -> list[str]:
    """The node's Service rules that take traffic to ``port`` on its own addresses (those
    to a ClusterIP on the same port number are not), as the firewall lists them."""
    if node.firewall == "iptables":
        argv = ["iptables", "-w", "5", "-t", "nat", "-S", iptables.services_chain(node.bridge)]
        local, word = "--dst-type LOCAL", f"--dport {port} "
    else:
        argv = ["nft", "list", "table", "ip", nftables.table_name(node.bridge)]
        local, word = "fib daddr type local", f"dport {port} "
    listed = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return [line for line in listed.splitlines() if local in line and word in line + " "]


def refusal(node: ServiceNode, tmp_path: Path, text: str) -> str:
    """The apply of ``text``, which must fail: its error output, on one line."""
    path = tmp_path / f"m{uuid.uuid4().hex[:8]}.yaml"
    path.write_text(text)
    result = node.d.cli("apply", "-f", str(path))
    assert result.returncode == 1, result.stdout + result.stderr
    return " ".join(result.stderr.split())


def until(check: Callable[[], bool], what: str, node: ServiceNode) -> None:
    """Wait for ``check`` (at most two minutes: the node looks at the host's sockets
    every few seconds)."""
    deadline = time.monotonic() + 120
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never {what}: " + node.d.log()[-3000:])
        time.sleep(0.5)


def reaches(listener: socket.socket, port: int) -> bool:
    """Whether a connection to 127.0.0.1:``port`` comes to ``listener`` (which listens on
    that port) rather than to a pod."""
    with socket.create_connection(("127.0.0.1", port), timeout=10):
        listener.settimeout(10)
        try:
            accepted, _ = listener.accept()
        except TimeoutError:
            return False
        accepted.close()
        return True


@pytest.fixture
def host_listener() -> Iterator[socket.socket]:
    """A process of the host (this test) listening on a free loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s


@pytest.fixture(scope="module", params=["iptables", "nftables"])
def node(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    docker_engine: Engine,
    test_images: dict[str, str],
) -> Iterator[ServiceNode]:
    """A privileged node, its two web pods ready behind a NodePort Service."""
    firewall = str(request.param)
    name = f"akltest-{uuid.uuid4().hex[:10]}"
    bridge, cidr = f"akp{name[-8:]}", free_cidr()
    tmp = tmp_path_factory.mktemp(f"ports-{firewall}")
    daemon = port_daemon(
        tmp,
        name=name,
        bridge=bridge,
        cidr=cidr,
        firewall=firewall,
        engine=docker_engine,
        level="privileged",
    )
    daemon.start()
    made = ServiceNode(daemon, bridge=bridge, cidr=cidr, firewall=firewall)
    seen: set[str] = set()
    try:
        made.apply(made.web("web-a"), made.web("web-b"), wait=True)
        seen = service_chains(bridge)
        yield made
    finally:
        seen |= service_chains(bridge)
        remove_service_node(
            daemon, name=name, bridge=bridge, cidr=cidr, firewall=firewall, engine=docker_engine
        )
    assert leftovers(bridge, seen) == []


def test_a_load_balancer_on_a_port_a_host_process_listens_on_is_refused_and_programs_nothing(
    node: ServiceNode, host_listener: socket.socket, tmp_path: Path
) -> None:
    port = int(host_listener.getsockname()[1])
    said = refusal(node, tmp_path, lb("on-host", port))
    assert (
        f"spec.ports[0].port: Invalid value: {port}: port is in use on the node by a host "
        "process listening on 127.0.0.1" in said
    ), said
    assert node.d.cli("get", "service", "on-host").returncode != 0
    assert rules_for_port(node, port) == []
    assert reaches(host_listener, port)


def test_a_load_balancer_on_the_daemons_listen_port_is_refused_and_healthz_stays_its_own(
    node: ServiceNode, tmp_path: Path
) -> None:
    port = node.d.port
    said = refusal(node, tmp_path, lb("on-daemon", port))
    assert (
        f"spec.ports[0].port: Invalid value: {port}: port is in use on the node (serve --listen)"
        in said
    ), said
    assert node.d.cli("get", "service", "on-daemon").returncode != 0
    assert rules_for_port(node, port) == []
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
        assert response.read() == b"ok"


def test_outside_the_range_a_load_balancer_is_published_under_privileged_not_baseline(
    node: ServiceNode, tmp_path: Path
) -> None:
    """The node is privileged: the Service reaches the pods on its port. A namespace that
    makes the level baseline gets the same Service refused, and no rule."""
    port = free_port()
    node.apply(lb("wide", port))
    try:
        until(lambda: rules_for_port(node, port) != [], f"a rule for port {port}", node)
        assert {fetch(port) for _ in range(20)} <= {"web-a", "web-b"}
    finally:
        node.d.cli("delete", "service", "wide")
    until(lambda: rules_for_port(node, port) == [], f"port {port}'s rule removed", node)
    namespace = f"strict-{uuid.uuid4().hex[:6]}"
    strict = STRICT.replace("NS", namespace) + "---" + lb("wide", port, namespace)
    said = refusal(node, tmp_path, strict)
    assert (
        f"spec.ports[0].port: Forbidden: port {port} is outside the node port range "
        '30000-32767: under the "baseline:latest" Pod Security level' in said
    ), said
    assert "or make its namespace's pod-security.kubernetes.io/enforce label privileged" in said
    assert node.d.cli("get", "service", "wide", "-n", namespace).returncode != 0
    assert rules_for_port(node, port) == []


def test_a_port_a_host_process_binds_later_is_withdrawn_with_an_event_and_comes_back(
    node: ServiceNode,
) -> None:
    """The rules take 127.0.0.1:PORT to the pods until the process binds it; then the
    process gets its connections, the Service a PortInUse event; once it lets go the
    Service is published again."""
    port = free_port()
    node.apply(lb("later", port))
    try:
        until(lambda: rules_for_port(node, port) != [], f"a rule for port {port}", node)
        assert fetch(port) in ("web-a", "web-b")
        with socket.socket() as late:
            late.bind(("127.0.0.1", port))
            late.listen()
            until(lambda: rules_for_port(node, port) == [], f"port {port} withdrawn", node)
            assert reaches(late, port)
            described = node.d.cli("describe", "service", "later").stdout
            assert "PortInUse" in described, described
            assert (
                f"Service port {port}/TCP is not published: port is in use on the node by a "
                "host process listening on 127.0.0.1" in " ".join(described.split())
            ), described
        until(lambda: rules_for_port(node, port) != [], f"port {port} published again", node)
        assert fetch(port) in ("web-a", "web-b")
    finally:
        node.d.cli("delete", "service", "later")


def test_a_baseline_node_refuses_a_load_balancer_outside_the_range_and_takes_one_inside(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str]
) -> None:
    name = f"akltest-{uuid.uuid4().hex[:10]}"
    bridge, cidr = f"akp{name[-8:]}", free_cidr()
    daemon = port_daemon(
        tmp_path,
        name=name,
        bridge=bridge,
        cidr=cidr,
        firewall="iptables",
        engine=docker_engine,
        level="baseline",
    )
    daemon.start()
    made = ServiceNode(daemon, bridge=bridge, cidr=cidr, firewall="iptables")
    try:
        port = free_port()
        said = refusal(made, tmp_path, lb("wide", port))
        assert (
            f"spec.ports[0].port: Forbidden: port {port} is outside the node port range "
            '30000-32767: under the "baseline:latest" Pod Security level, which forbids a pod '
            "any hostPort, a LoadBalancer is published on the node only on a port of "
            "--service-node-port-range; use a port in 30000-32767 or a NodePort Service, or "
            "run the node at --pod-security privileged" in said
        ), said
        made.apply(made.web("web-a"), lb("inside", made.node_port), wait=True)
        until(lambda: rules_for_port(made, made.node_port) != [], "the inside port's rule", made)
        assert rules_for_port(made, port) == []
        assert fetch(made.node_port) == "web-a"
    finally:
        chains = service_chains(bridge)
        remove_service_node(
            daemon, name=name, bridge=bridge, cidr=cidr, firewall="iptables", engine=docker_engine
        )
    assert leftovers(bridge, chains) == []
