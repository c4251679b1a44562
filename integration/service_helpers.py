"""A ``serve`` node with Services on a bridge, pod range and firewall of its own, what the
tests ask of it (apply, endpoints, fetches from the host and from pods), and the packet
filter state it must leave behind: none."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

import anyio

from asynckubelet.docker import DockerClient
from asynckubelet.network import iptables, nftables
from asynckubelet.network.bridge import DEFAULT_STATE_DIR, BridgeConfig, BridgePlugin
from integration.harness import BUSYBOX_IMAGE, Engine, free_port, remove_owned
from integration.serve_helpers import Daemon, unmount_under

WEB = """
apiVersion: v1
kind: Pod
metadata: {name: NAME, labels: {app: web}}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: web
    image: BUSYBOX
    command:
    - sh
    - -c
    - mkdir -p /www && echo NAME > /www/index.html && touch /tmp/ready
      && exec httpd -f -p 8080 -h /www
    ports: [{name: http, containerPort: 8080}]
    readinessProbe:
      exec: {command: [test, -f, /tmp/ready]}
      periodSeconds: 1
      timeoutSeconds: 5
    lifecycle:
      preStop: {exec: {command: [sleep, "1"]}}
"""


def free_node_port() -> int:
    """A port of the default nodePort range that nothing on this host listens on."""
    for port in range(30000 + uuid.uuid4().int % 2000, 32767):
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))  # noqa: S104  (a probe: is the port free on every address)
            except OSError:
                continue
            return port
    raise AssertionError("no free port in 30000-32767")


class ServiceNode:
    """A daemon on a bridge of its own, and what the tests ask of it."""

    def __init__(self, daemon: Daemon, *, bridge: str, cidr: str, firewall: str) -> None:
        self.d = daemon
        self.bridge, self.cidr, self.firewall = bridge, cidr, firewall
        self.node_port = free_node_port()
        self.gateway = cidr.replace(".0/24", ".1")

    def apply(self, *texts: str, wait: bool = False) -> None:
        """The texts as one file, applied at once (waited for with ``wait``)."""
        text = "\n---\n".join(texts)
        path = self.d.state.parent / f"m{uuid.uuid4().hex[:8]}.yaml"
        path.write_text(
            text.replace("BUSYBOX", BUSYBOX_IMAGE).replace("NODEPORT", str(self.node_port))
        )
        args = ["apply", "-f", str(path)] + (["--wait", "--timeout", "90"] if wait else [])
        result = self.d.cli(*args)
        assert result.returncode == 0, result.stderr + self.d.log()[-3000:]

    def web(self, name: str) -> str:
        return WEB.replace("NAME", name)

    def json(self, *args: str) -> dict[str, object]:
        result = self.d.cli("get", *args, "-o", "json")
        assert result.returncode == 0, result.stderr
        found = json.loads(result.stdout)
        assert isinstance(found, dict)
        return found

    def ready_endpoints(self, name: str = "web") -> list[str]:
        body = self.json("endpoints", name)
        subsets = body.get("subsets") or []
        assert isinstance(subsets, list)
        return sorted(a["ip"] for s in subsets for a in s.get("addresses") or [])

    def until_ready_endpoints(self, count: int, name: str = "web") -> list[str]:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = self.ready_endpoints(name)
            if len(found) == count:
                return found
            time.sleep(0.2)
        raise AssertionError(f"{name} never had {count} ready endpoints: {found}")

    def exec(self, pod: str, script: str) -> str:
        result = self.d.cli("exec", pod, "--", "sh", "-c", script)
        assert result.returncode == 0, result.stderr
        return result.stdout

    def fetch_in(self, pod: str, host: str, port: int = 80) -> str:
        request = f"printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 10 {host} {port} | tail -n 1"
        return self.exec(pod, request).strip()


def service_chains(bridge: str) -> set[str]:
    """The nat chains the node's Service rules jump to now."""
    listed = subprocess.run(
        ["iptables", "-w", "5", "-t", "nat", "-S", iptables.services_chain(bridge)],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return {word for word in listed.split() if word.startswith(iptables.SERVICE_CHAIN_PREFIX)}


def leftovers(bridge: str, chains: set[str]) -> list[str]:
    """What of the node's packet filter state is still there: its Service chains (the
    ``chains`` seen while it ran, by name) and its nftables table."""
    ours = {iptables.services_chain(bridge), iptables.reject_chain(bridge), *chains}
    saved = subprocess.run(
        ["iptables-save"], capture_output=True, text=True, check=True
    ).stdout.split()
    found = sorted(ours & {word.lstrip(":") for word in saved})
    tables = subprocess.run(
        ["nft", "list", "tables"], capture_output=True, text=True, check=True
    ).stdout.split()
    if nftables.table_name(bridge) in tables:
        found.append(f"nft table {nftables.table_name(bridge)}")
    return found


def fetch(port: int, host: str = "127.0.0.1") -> str:
    with urllib.request.urlopen(f"http://{host}:{port}/", timeout=5) as response:
        return str(response.read().decode().strip())


def service_daemon(
    tmp: Path, *, name: str, bridge: str, cidr: str, firewall: str, engine: Engine
) -> Daemon:
    """A ``serve`` node of its own bridge, pod CIDR and firewall, whose cluster DNS forwards
    to a loopback port where nothing answers (no query leaves the machine)."""
    return Daemon(
        state=tmp / "state",
        node_name=name,
        port=free_port(),
        engine=engine,
        serve_args=(
            "--bridge",
            bridge,
            "--pod-cidr",
            cidr,
            "--firewall",
            firewall,
            "--dns-upstream",
            f"127.0.0.1:{free_port()}",
            "--stop-pods-on-exit",
        ),
    )


def remove_service_node(
    daemon: Daemon, *, name: str, bridge: str, cidr: str, firewall: str, engine: Engine
) -> None:
    """Stop the node, then remove what it may have left: its containers, its bridge with its
    firewall rules, and the mounts under its state dir."""
    daemon.stop()

    async def clean() -> None:
        async with DockerClient(url=engine.url) as client:
            await remove_owned(client, name)
        plugin = BridgePlugin(
            BridgeConfig(
                bridge=bridge, pod_cidr=cidr, firewall=firewall, state_dir=DEFAULT_STATE_DIR
            )
        )
        await plugin.remove_node_network()

    anyio.run(clean)
    unmount_under(daemon.state)
