"""The cluster DNS answers the pod network and the node, and nobody else, on a ``serve`` of
its own (its own bridge, pod CIDR and ``--network-state-dir``), on real sockets:

- a pod resolves a cluster name and gets other names through the node's resolver (here
  one the test runs on loopback: no query leaves the machine);
- the node gets both too, asking from the address the kernel picks (as a ``hostNetwork``
  pod with ``ClusterFirstWithHostNet`` does) or from loopback;
- a network namespace the test makes outside the pod network, routed to the gateway
  through a veth pair, gets REFUSED for everything, over UDP and TCP.

The node's network records are under the network state directory given, private (0600
files, 0700 directories) and nowhere under the default one, and ``reset`` with the same
``--network-state-dir`` removes them.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import socket
import stat
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import dns.message
import dns.rrset
import pytest

from asynckubelet.docker import DockerClient
from asynckubelet.network import DEFAULT_STATE_DIR
from asynckubelet.runtime import naming
from integration.harness import BUSYBOX_IMAGE, Engine, free_port, remove_owned
from integration.network_helpers import free_cidr
from integration.serve_helpers import Daemon, unmount_under

pytestmark = pytest.mark.integration

UPSTREAM_ANSWER = "192.0.2.1"
OUTSIDE_NAME = "example.org"
CLIENT = """
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: BUSYBOX, command: [sleep, "3600"]}
"""
QUERY = """
import sys
import dns.message, dns.query, dns.rcode
server, name, transport, source = sys.argv[1:5]
query = dns.message.make_query(name, "A")
ask = dns.query.tcp if transport == "tcp" else dns.query.udp
reply = ask(query, server, port=53, timeout=5, source=source or None)
print(dns.rcode.to_text(reply.rcode()), *sorted(r.to_text() for s in reply.answer for r in s))
"""


@dataclass
class Upstream:
    """A resolver of the test's own on loopback: every question gets ``UPSTREAM_ANSWER``."""

    sock: socket.socket
    asked: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                packet, peer = self.sock.recvfrom(4096)
            except TimeoutError:
                continue
            query = dns.message.from_wire(packet)
            name = query.question[0].name
            self.asked.append(name.to_text())
            reply = dns.message.make_response(query)
            reply.answer.append(dns.rrset.from_text(name, 60, "IN", "A", UPSTREAM_ANSWER))
            self.sock.sendto(reply.to_wire(), peer)


@contextlib.contextmanager
def upstream() -> Iterator[Upstream]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        resolver = Upstream(sock)
        thread = threading.Thread(target=resolver.serve, name="test upstream resolver")
        thread.start()
        try:
            yield resolver
        finally:
            resolver.stop.set()
            thread.join(timeout=10)


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@contextlib.contextmanager
def outsider(avoid: str) -> Iterator[str]:
    """A network namespace of the test's own, on a /30 outside the pod network (and
    outside ``avoid``), whose default route goes to the host through a veth pair."""
    cidr = free_cidr()
    while cidr == avoid:
        cidr = free_cidr()
    net = ipaddress.ip_network(cidr)
    host_ip, inside_ip = net[1], net[2]
    name = f"akd{uuid.uuid4().hex[:8]}"
    host_end, inside_end = f"{name}h", f"{name}n"
    ip("netns", "add", name)
    try:
        ip("link", "add", host_end, "type", "veth", "peer", "name", inside_end)
        ip("link", "set", inside_end, "netns", name)
        ip("addr", "add", f"{host_ip}/30", "dev", host_end)
        ip("link", "set", host_end, "up")
        ip("-n", name, "addr", "add", f"{inside_ip}/30", "dev", inside_end)
        ip("-n", name, "link", "set", inside_end, "up")
        ip("-n", name, "link", "set", "lo", "up")
        ip("-n", name, "route", "add", "default", "via", str(host_ip))
        yield name
    finally:
        subprocess.run(["ip", "link", "del", host_end], check=False, capture_output=True)
        subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)


def ask(
    server: str,
    name: str,
    *,
    inside: list[str] | None = None,
    transport: str = "udp",
    source: str = "",
) -> str:
    """``RCODE answer...`` of one query, asked from this process's network namespace or
    from the one ``inside`` (an ``nsenter``/``ip netns exec`` prefix) enters."""
    result = subprocess.run(
        [*(inside or []), sys.executable, "-c", QUERY, server, name, transport, source],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@dataclass
class DNSNode:
    daemon: Daemon
    bridge: str
    cidr: str
    records: Path
    upstream: Upstream
    engine: Engine

    @property
    def gateway(self) -> str:
        return str(next(ipaddress.ip_network(self.cidr).hosts()))

    def apply(self, text: str) -> None:
        path = self.daemon.state.parent / f"m{uuid.uuid4().hex[:8]}.yaml"
        path.write_text(text.replace("BUSYBOX", BUSYBOX_IMAGE))
        result = self.daemon.cli("apply", "-f", str(path), "--wait", "--timeout", "90")
        assert result.returncode == 0, result.stderr + self.daemon.log()[-3000:]

    def sandbox(self, pod: str) -> tuple[str, int, str]:
        """The pod's sandbox: its id, its process and the pod's IP."""

        async def find() -> tuple[str, int, str]:
            async with DockerClient(url=self.engine.url) as client:
                rows = await client.list_containers(
                    labels={
                        naming.LABEL_NODE: self.daemon.node_name,
                        naming.LABEL_POD_NAME: pod,
                        naming.LABEL_TYPE: naming.TYPE_SANDBOX,
                    }
                )
                info = await client.inspect_container(rows[0]["Id"])
            return str(info["Id"]), int(info["State"]["Pid"]), ""

        sid, pid, _ = anyio.run(find)
        result = self.daemon.cli("get", "pod", pod, "-o", "json")
        assert result.returncode == 0, result.stderr
        return sid, pid, str(json.loads(result.stdout)["status"]["podIP"])


@pytest.fixture(scope="module")
def node(
    tmp_path_factory: pytest.TempPathFactory, docker_engine: Engine, test_images: dict[str, str]
) -> Iterator[DNSNode]:
    if os.geteuid() != 0:
        pytest.skip("the bridge network and network namespaces need root")
    name = f"akltest-{uuid.uuid4().hex[:10]}"
    bridge, cidr = f"akd{name[-8:]}", free_cidr()
    tmp = tmp_path_factory.mktemp("dns-boundary")
    records = tmp / "records"
    with upstream() as resolver:
        daemon = Daemon(
            state=tmp / "state",
            node_name=name,
            port=free_port(),
            engine=docker_engine,
            serve_args=(
                "--bridge",
                bridge,
                "--pod-cidr",
                cidr,
                "--network-state-dir",
                str(records),
                "--dns-upstream",
                f"127.0.0.1:{resolver.port}",
                "--stop-pods-on-exit",
            ),
        )
        daemon.start()
        made = DNSNode(daemon, bridge, cidr, records, resolver, docker_engine)
        try:
            made.apply(CLIENT)
            yield made
        finally:
            daemon.stop()

            async def clean() -> None:
                async with DockerClient(url=docker_engine.url) as client:
                    await remove_owned(client, name)

            anyio.run(clean)
            unmount_under(daemon.state)
            reset = daemon.cli(
                "reset", "--bridge", bridge, "--pod-cidr", cidr, "--network-state-dir", str(records)
            )
            assert reset.returncode == 0, reset.stderr
            assert not (records / bridge).exists()
            assert not Path("/sys/class/net", bridge).exists()


def test_a_pod_resolves_cluster_names_and_other_names_through_the_nodes_resolver(
    node: DNSNode,
) -> None:
    _, pid, pod_ip = node.sandbox("client")
    inside = ["nsenter", f"--net=/proc/{pid}/ns/net"]
    cluster_name = f"{pod_ip.replace('.', '-')}.default.pod.cluster.local"
    assert ask(node.gateway, cluster_name, inside=inside) == f"NOERROR {pod_ip}"
    assert ask(node.gateway, cluster_name, inside=inside, transport="tcp") == f"NOERROR {pod_ip}"
    assert ask(node.gateway, OUTSIDE_NAME, inside=inside) == f"NOERROR {UPSTREAM_ANSWER}"
    assert f"{OUTSIDE_NAME}." in node.upstream.asked


@pytest.mark.parametrize("source", ["", "127.0.0.1"])
def test_the_node_resolves_cluster_names_and_other_names_like_a_host_network_pod(
    node: DNSNode, source: str
) -> None:
    cluster_name = "10-1-2-3.default.pod.cluster.local"
    assert ask(node.gateway, cluster_name, source=source) == "NOERROR 10.1.2.3"
    assert ask(node.gateway, OUTSIDE_NAME, source=source) == f"NOERROR {UPSTREAM_ANSWER}"


@pytest.mark.parametrize("transport", ["udp", "tcp"])
def test_a_network_outside_the_pod_network_is_refused_every_name(
    node: DNSNode, transport: str
) -> None:
    asked_before = list(node.upstream.asked)
    with outsider(node.cidr) as namespace:
        inside = ["ip", "netns", "exec", namespace]
        for name in ("10-1-2-3.default.pod.cluster.local", "unrefused.example.org"):
            assert ask(node.gateway, name, inside=inside, transport=transport) == "REFUSED"
    assert node.upstream.asked == asked_before


def test_the_records_are_private_and_under_the_network_state_dir_given(node: DNSNode) -> None:
    sid, _, pod_ip = node.sandbox("client")
    root = node.records / node.bridge

    def mode(path: Path) -> int:
        return stat.S_IMODE(os.lstat(path).st_mode)

    assert {p: mode(root / p) for p in ("", "ipam", "pods")} == dict.fromkeys(
        ("", "ipam", "pods"), 0o700
    )
    assert mode(root / "ipam" / pod_ip) == 0o600
    assert mode(root / "pods" / f"{sid}.json") == 0o600
    assert (root / "ipam" / pod_ip).read_text().splitlines()[0] == sid
    assert not (DEFAULT_STATE_DIR / node.bridge).exists()
