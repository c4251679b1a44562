"""Services and cluster DNS end to end: ``serve`` on the bridge network of a test's own,
with each firewall (iptables, nftables), real pods on Docker.

The host reaches a NodePort on 127.0.0.1; a client pod reaches the Service by its
ClusterIP and by each of its DNS names; a pod turning unready leaves the rotation and
comes back; a headless Service's name lists the pods' IPs; pods swapped by hand behind a
Service leave no moment without a ready endpoint while a client polls throughout; a
nodePort already taken is refused and leaves nothing; a selector that matches nothing
says so in ``describe``. The cluster DNS forwards other names only to a loopback port
where nothing listens: no query leaves the machine.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import dns.asyncquery
import dns.message
import pytest

from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE, Engine
from integration.network_helpers import free_cidr
from integration.service_helpers import (
    ServiceNode,
    fetch,
    leftovers,
    remove_service_node,
    service_chains,
    service_daemon,
)

pytestmark = pytest.mark.integration

SERVICE = """
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: NodePort
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http, nodePort: NODEPORT}]
"""
HEADLESS = """
apiVersion: v1
kind: Service
metadata: {name: web-pods}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{name: http, port: 8080}]
"""
CLIENT = """
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: BUSYBOX
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
"""
POLLER = """
apiVersion: v1
kind: Pod
metadata: {name: poller}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: BUSYBOX
    command:
    - sh
    - -c
    - |
      trap 'exit 0' TERM
      while true; do
        got=$(printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 10 web 80 | tail -n 1)
        echo "poll ${got:-FAILED}"
        sleep 0.1
      done
"""


@pytest.fixture(scope="module", params=["iptables", "nftables"])
def node(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    docker_engine: Engine,
    test_images: dict[str, str],
) -> Iterator[ServiceNode]:
    firewall = str(request.param)
    name = f"akltest-{uuid.uuid4().hex[:10]}"
    bridge, cidr = f"aks{name[-8:]}", free_cidr()
    tmp = tmp_path_factory.mktemp(f"svc-{firewall}")
    daemon = service_daemon(
        tmp, name=name, bridge=bridge, cidr=cidr, firewall=firewall, engine=docker_engine
    )
    assert PAUSE_IMAGE
    daemon.start()
    made = ServiceNode(daemon, bridge=bridge, cidr=cidr, firewall=firewall)
    seen: set[str] = set()
    try:
        made.apply(SERVICE, made.web("web-a"), made.web("web-b"), CLIENT, wait=True)
        made.until_ready_endpoints(2)
        seen = service_chains(bridge)
        yield made
    finally:
        remove_service_node(
            daemon, name=name, bridge=bridge, cidr=cidr, firewall=firewall, engine=docker_engine
        )
    assert firewall == "nftables" or seen, "the iptables node made no Service chain"
    assert leftovers(bridge, seen) == []


def test_the_host_reaches_the_node_port_on_loopback_spread_over_both_pods(
    node: ServiceNode,
) -> None:
    node.until_ready_endpoints(2)
    answers = {fetch(node.node_port) for _ in range(40)}
    assert answers == {"web-a", "web-b"}


def test_a_pod_reaches_the_service_by_cluster_ip_and_by_each_dns_name(node: ServiceNode) -> None:
    node.until_ready_endpoints(2)
    spec = node.json("service", "web")["spec"]
    assert isinstance(spec, dict)
    cluster_ip = str(spec["clusterIP"])
    for host in (cluster_ip, "web", "web.default", "web.default.svc.cluster.local"):
        assert node.fetch_in("client", host) in ("web-a", "web-b"), host


def test_client_pods_get_the_node_dns_the_kubelets_search_path_and_ndots(
    node: ServiceNode,
) -> None:
    assert node.exec("client", "cat /etc/resolv.conf").splitlines() == [
        f"nameserver {node.gateway}",
        "search default.svc.cluster.local svc.cluster.local cluster.local",
        "options ndots:5",
    ]


NO_LINKS = """
apiVersion: v1
kind: Pod
metadata: {name: no-links}
spec:
  enableServiceLinks: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: BUSYBOX
    command: [sh, -c, "echo 'URL=$(WEB_PORT)'; sleep 3600"]
"""


def test_pods_get_the_services_variables_unless_service_links_are_off(node: ServiceNode) -> None:
    """The client (made with the Service, in one apply) has the kubelet's Service variables;
    a pod with ``enableServiceLinks: false`` has none, and its ``$(WEB_PORT)`` stays as is."""
    spec = node.json("service", "web")["spec"]
    assert isinstance(spec, dict)
    cluster_ip = str(spec["clusterIP"])
    env = dict(
        line.split("=", 1) for line in node.exec("client", "env").splitlines() if "=" in line
    )
    assert env["WEB_SERVICE_HOST"] == cluster_ip
    assert env["WEB_SERVICE_PORT"] == env["WEB_SERVICE_PORT_HTTP"] == "80"
    assert env["WEB_PORT"] == env["WEB_PORT_80_TCP"] == f"tcp://{cluster_ip}:80"
    assert env["WEB_PORT_80_TCP_ADDR"] == cluster_ip
    node.apply(NO_LINKS, wait=True)
    try:
        alone = node.exec("no-links", "env")
        logs = node.d.cli("logs", "no-links").stdout
    finally:
        node.d.cli("delete", "pod", "no-links", "--grace-period", "1")
    assert "WEB_" not in alone
    assert "URL=$(WEB_PORT)" in logs


def test_a_pod_turning_unready_leaves_the_rotation_and_comes_back(node: ServiceNode) -> None:
    both = node.until_ready_endpoints(2)
    node.exec("web-a", "rm /tmp/ready")
    try:
        (left,) = node.until_ready_endpoints(1)
        assert left in both
        assert {fetch(node.node_port) for _ in range(20)} == {"web-b"}
    finally:
        node.exec("web-a", "touch /tmp/ready")
    node.until_ready_endpoints(2)


def test_a_headless_services_name_lists_the_ready_pods_ips(node: ServiceNode) -> None:
    node.apply(HEADLESS)
    ips = node.until_ready_endpoints(2, "web-pods")

    async def ask() -> list[str]:
        query = dns.message.make_query("web-pods.default.svc.cluster.local", "A")
        reply = await dns.asyncquery.udp(query, node.gateway, port=53, timeout=5)
        return sorted(r.to_text() for rrset in reply.answer for r in rrset)

    assert anyio.run(ask) == ips
    assert node.json("service", "web-pods")["spec"]["clusterIP"] == "None"  # type: ignore[index]


def test_a_node_port_already_taken_is_refused_and_nothing_is_applied(
    node: ServiceNode, tmp_path: Path
) -> None:
    taken = SERVICE.replace("name: web}", "name: copy}").replace("NODEPORT", str(node.node_port))
    path = tmp_path / "copy.yaml"
    path.write_text(taken + "---\n" + node.web("web-copy").replace("BUSYBOX", BUSYBOX_IMAGE))
    result = node.d.cli("apply", "-f", str(path))
    assert result.returncode == 1
    assert (
        f"spec.ports[0].nodePort: Invalid value: {node.node_port}: provided port is already "
        "allocated" in " ".join(result.stderr.split())
    )
    assert node.d.cli("get", "service", "copy").returncode != 0
    assert node.d.cli("get", "pod", "web-copy").returncode != 0


def test_a_selector_matching_nothing_leaves_no_endpoints_and_describe_says_so(
    node: ServiceNode,
) -> None:
    lonely = SERVICE.replace("name: web}", "name: lonely}").replace("app: web", "app: nobody")
    node.apply(
        lonely.replace("type: NodePort", "type: ClusterIP").replace(", nodePort: NODEPORT", "")
    )
    described = node.d.cli("describe", "service", "lonely")
    assert described.returncode == 0, described.stderr
    assert "Endpoints:                <none>" in described.stdout.splitlines()
    assert node.ready_endpoints("lonely") == []


UDP_SERVICE = """
apiVersion: v1
kind: Service
metadata: {name: echo}
spec:
  selector: {app: echo}
  ports: [{port: 5353, protocol: UDP}]
"""
UDP_POD = """
apiVersion: v1
kind: Pod
metadata: {name: NAME, labels: {app: echo}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: BUSYBOX
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
    ports: [{containerPort: 5353, protocol: UDP}]
"""
UDP_ANSWER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 5353))
while True:
    _, peer = s.recvfrom(64)
    s.sendto(sys.argv[1].encode(), peer)
"""
UDP_ASK = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.3)
while True:
    s.sendto(b"?", (sys.argv[1], 5353))
    try:
        print(s.recvfrom(64)[0].decode(), flush=True)
    except TimeoutError:
        print("-", flush=True)
    time.sleep(0.1)
"""


def in_pod_netns(node: ServiceNode, pod: str, script: str, *args: str) -> subprocess.Popen[str]:
    """``script`` run by this Python in the network namespace of ``pod``'s sandbox."""
    engine = node.d.engine.url
    sandbox = subprocess.run(
        ["docker", "-H", engine, "ps", "-q",
         "--filter", f"label=io.kubernetes.pod.name={pod}",
         "--filter", f"label=io.asynckubelet.node={node.d.node_name}",
         "--filter", "label=io.asynckubelet.type=podsandbox"],
        capture_output=True, text=True, check=True,
    ).stdout.split()[0]  # fmt: skip
    pid = subprocess.run(
        ["docker", "-H", engine, "inspect", "-f", "{{.State.Pid}}", sandbox],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    argv = ["nsenter", f"--net=/proc/{pid}/ns/net", sys.executable, "-c", script, *args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)


def test_a_udp_client_keeping_its_socket_moves_to_the_endpoint_left_when_its_own_goes(
    node: ServiceNode,
) -> None:
    """The kernel tracks a UDP client's datagrams as one flow pinned to its first endpoint;
    deleting that pod clears the flow (as kube-proxy does), so the same socket reaches the
    other pod instead of sending into the void for as long as it keeps sending."""
    node.apply(
        UDP_SERVICE, UDP_POD.replace("NAME", "echo-a"), UDP_POD.replace("NAME", "echo-b"), wait=True
    )
    node.until_ready_endpoints(2, name="echo")
    spec = node.json("service", "echo")["spec"]
    assert isinstance(spec, dict)
    servers = [in_pod_netns(node, p, UDP_ANSWER, p) for p in ("echo-a", "echo-b")]
    asker = in_pod_netns(node, "client", UDP_ASK, str(spec["clusterIP"]))
    try:
        assert asker.stdout is not None
        first = ""
        for _ in range(100):
            first = asker.stdout.readline().strip()
            if first.startswith("echo-"):
                break
        assert first in ("echo-a", "echo-b")
        other = "echo-b" if first == "echo-a" else "echo-a"
        result = node.d.cli("delete", "pod", first, "--grace-period", "1")
        assert result.returncode == 0, result.stderr
        after: list[str] = []
        while other not in after and len(after) < 150:
            after.append(asker.stdout.readline().strip())
    finally:
        for proc in (asker, *servers):
            proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        node.d.cli("delete", "service", "echo")
        node.d.cli("delete", "pod", "echo-a", "echo-b", "--grace-period", "1")
    assert other in after, after[-20:]
    assert after[after.index(other) :].count(first) == 0


def test_pods_swapped_by_hand_leave_no_moment_without_a_ready_endpoint(node: ServiceNode) -> None:
    node.until_ready_endpoints(2)
    node.apply(POLLER, wait=True)
    try:
        node.apply(node.web("web-c"), wait=True)
        for old in ("web-a", "web-b"):
            result = node.d.cli("delete", "pod", old)
            assert result.returncode == 0, result.stderr
        assert node.until_ready_endpoints(1)
        polls = _polls_until(node, lambda polls: polls.count("poll web-c") >= 3)
        events = node.d.cli("describe", "pod", "web-c").stdout
    finally:
        node.d.cli("delete", "pod", "poller", "--grace-period", "1")
        node.apply(node.web("web-a"), node.web("web-b"), wait=True)
        node.d.cli("delete", "pod", "web-c")
    assert [p for p in polls if p == "poll FAILED"] == [], " ".join(p[5:] for p in polls) + events
    # The polls span the swap: answered by the old pods before it, by the new one after.
    assert {"poll web-a", "poll web-b"} & set(polls)
    assert polls.count("poll web-c") >= 3


def _polls_until(node: ServiceNode, done: Callable[[list[str]], bool]) -> list[str]:
    """The poller's lines, read again until ``done`` holds of them (at most a minute): a
    count of answers, not of seconds, so that a loaded machine only makes it slower."""
    deadline = time.monotonic() + 60
    while True:
        logs = node.d.cli("logs", "poller").stdout.splitlines()
        polls = [line for line in logs if line.startswith("poll ")]
        if done(polls) or time.monotonic() > deadline:
            return polls
        time.sleep(0.5)
