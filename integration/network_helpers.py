"""Helpers of the network integration tests: free pod CIDRs (IPv4, IPv6), bridge names, pods
(a web server with a shell beside it, run until it has an IP), fetches from the host and from
inside a pod, bare pause containers, the node's address, killed setups and create/delete
churn shared by the backends' tests."""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from lightkube.models.core_v1 import Pod

from asynckubelet.docker import DockerClient
from asynckubelet.network import NetworkPlugin, PodNetworkRequest
from asynckubelet.runtime import naming
from asynckubelet.runtime.manager import RuntimeManager
from integration import runtime_helpers
from integration.harness import PAUSE_IMAGE
from integration.runtime_helpers import Driver

REPO = Path(__file__).resolve().parent.parent


def free_cidr() -> str:
    """A random /24 of 10.200.0.0-10.250.255.0 that no host route covers."""
    taken = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True).stdout
    for _ in range(100):
        cidr = f"10.{random.randint(200, 250)}.{random.randint(0, 255)}.0/24"
        if cidr.split("/")[0].rsplit(".", 1)[0] + "." not in taken:
            return cidr
    raise AssertionError("no free /24 found")


def free_cidr_v6() -> str:
    """A random ULA /64 that no host route covers."""
    taken = subprocess.run(["ip", "-6", "route"], capture_output=True, text=True).stdout
    for _ in range(100):
        cidr = f"fd00:ac1:{random.randint(1, 0xFFFF):x}:{random.randint(1, 0xFFFF):x}::/64"
        if cidr.split("::")[0] not in taken:
            return cidr
    raise AssertionError("no free /64 found")


def pod_from(text: str, *, node: str) -> Pod:
    """A pod from YAML at the privileged level (hostPort, hostNetwork)."""
    return runtime_helpers.pod_from(text, node=node, pod_security="privileged")


def server_pod(name: str, port: int = 8080, host_port: int | None = None) -> str:
    """A pod whose ``web`` container serves ``hi-from-NAME`` on ``port`` (on the host's
    ``host_port`` too, when given), with a ``shell`` container beside it."""
    ports = f"ports: [{{containerPort: {port}, hostPort: {host_port}}}]" if host_port else ""
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: BUSYBOX
    command: ["sh", "-c", "echo hi-from-{name} > /tmp/index.html; httpd -f -p {port} -h /tmp"]
    {ports}
  - name: shell
    image: BUSYBOX
    command: ["sleep", "3600"]
"""


async def running_with_ip(rm: RuntimeManager, text: str, node: str) -> tuple[Driver, str]:
    """The pod of ``text`` driven until it runs and has an IP; its driver and that IP."""
    driver = Driver(rm, pod_from(text, node=node))
    status = await driver.until(lambda s: s.phase == "Running" and bool(s.podIP))
    assert status.podIP is not None
    return driver, status.podIP


async def container_id(docker: DockerClient, node: str, pod: str, container: str) -> str:
    """The Docker ID of the pod's container named ``container``."""
    rows = await docker.list_containers(
        labels={naming.LABEL_NODE: node, naming.LABEL_POD_NAME: pod}
    )
    for row in rows:
        if (row.get("Labels") or {}).get(naming.LABEL_CONTAINER_NAME) == container:
            return str(row["Id"])
    raise AssertionError(f"no container {container} in pod {pod}")


async def fetch_in(docker: DockerClient, cid: str, address: str, port: int) -> str:
    """``/index.html`` from ``address:port`` as container ``cid`` gets it (retried for 6 s)."""
    script = (
        f"for i in $(seq 30); do printf 'GET /index.html HTTP/1.0\\r\\n\\r\\n' "
        f"| nc -w 2 {address} {port} && exit 0; sleep 0.2; done; exit 1"
    )
    result = await docker.exec_run(cid, ["sh", "-c", script], timeout=30)
    return result.stdout.decode(errors="replace")


def fetch(url: str) -> str:
    """The body of ``url``, fetched from the host."""
    with urllib.request.urlopen(url, timeout=5) as answer:
        return str(answer.read().decode())


async def start_pause(docker: DockerClient, node: str) -> str:
    """A bare pause container with no network, labelled with ``node``, started."""
    cid = await docker.create_container(
        {
            "Image": PAUSE_IMAGE,
            "Labels": {naming.LABEL_NODE: node},
            "HostConfig": {"NetworkMode": "none"},
        },
        name=f"{node}-pause-{random.randint(0, 10**9)}",
    )
    await docker.start_container(cid)
    return cid


def cni_conflist(*, name: str, bridge: str, subnet: str, data_dir: Path) -> dict[str, Any]:
    """The project's default CNI configuration list with a test's own name, bridge, subnet
    and host-local data directory."""
    shipped = REPO / "asynckubelet" / "cni"
    doc: dict[str, Any] = json.loads((shipped / "10-asynckubelet.conflist").read_text())
    doc["name"] = name
    doc["plugins"][0]["bridge"] = bridge
    doc["plugins"][0]["ipam"]["ranges"] = [[{"subnet": subnet}]]
    doc["plugins"][0]["ipam"]["dataDir"] = str(data_dir)
    return doc


def bridge_name(node: str) -> str:
    return f"akb{node[-10:]}"


@dataclass(frozen=True)
class NodeNetwork:
    """A bridge and pod range of a test's own, for a ``serve`` it starts: the daemon then
    neither takes the defaults (a developer's own node's bridge, range and cluster DNS
    address) nor leaves them behind. Its IPAM records go where every local node's go,
    under the bridge's name."""

    bridge: str
    pod_cidr: str

    @classmethod
    def of(cls, node: str) -> NodeNetwork:
        return cls(bridge_name(node), free_cidr())

    @property
    def env(self) -> dict[str, str]:
        return {"ASYNCKUBELET_BRIDGE": self.bridge, "ASYNCKUBELET_POD_CIDR": self.pod_cidr}

    def remove(self) -> None:
        """The bridge, its firewall chains and its records, gone (the daemon stopped)."""
        from asynckubelet.network.bridge import BridgeConfig, BridgePlugin

        config = BridgeConfig(bridge=self.bridge, pod_cidr=self.pod_cidr)
        anyio.run(BridgePlugin(config).remove_node_network)


def node_address() -> str:
    """The node's own IPv4 address: the source this machine picks for an outside route.

    Nothing is sent; the kernel only answers which of its interface addresses it would use.
    """
    out = subprocess.run(
        ["ip", "-4", "-o", "route", "get", "192.0.2.200"], capture_output=True, text=True
    ).stdout
    words = out.split()
    if "src" not in words:
        pytest.skip("the node has no IPv4 source address")
    return words[words.index("src") + 1]


async def kill_setup_worker_after(spec: dict[str, Any], *, delay: float) -> None:
    """Start ``network_setup_worker.py`` on ``spec`` and kill it ``delay`` seconds after it
    is ready: an agent dying at that instant of a pod's network setup."""
    worker = await anyio.open_process(
        [sys.executable, str(REPO / "integration" / "network_setup_worker.py"), json.dumps(spec)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert worker.stdout is not None
    await worker.stdout.receive()
    await anyio.sleep(delay)
    with contextlib.suppress(ProcessLookupError):
        worker.kill()
    await worker.wait()


@dataclass(frozen=True)
class Churned:
    sandboxes: list[str]
    addresses: list[str]
    """Every address handed out, in order (a sandbox's IPv4 first)."""


async def churn(
    plugin: NetworkPlugin,
    *,
    request: Callable[[int], Awaitable[PodNetworkRequest]],
    remove: Callable[[str], Awaitable[None]],
    cycles: int = 200,
    alive: int = 3,
) -> Churned:
    """``cycles`` pod networks through the plugin, ``alive`` of them up at a time (set up the
    newest, tear down and ``remove`` the oldest); fails when an address held by a live pod
    is handed out again. All are torn down and removed at the end."""
    held: dict[str, str] = {}
    live: list[str] = []
    made = Churned(sandboxes=[], addresses=[])
    for cycle in range(cycles):
        asked = await request(cycle)
        ips = (await plugin.setup_pod(asked)).ips
        for ip in ips:
            assert ip not in held, f"cycle {cycle}: {ip} handed out twice"
            held[ip] = asked.sandbox_id
        made.sandboxes.append(asked.sandbox_id)
        made.addresses.extend(ips)
        live.append(asked.sandbox_id)
        if len(live) > alive:
            old = live.pop(0)
            await plugin.teardown_pod(sandbox_id=old)
            await remove(old)
            held = {ip: s for ip, s in held.items() if s != old}
    for sandbox in live:
        await plugin.teardown_pod(sandbox_id=sandbox)
        await remove(sandbox)
    return made


async def remove_container(docker: DockerClient, cid: str) -> None:
    await docker.remove_container(cid, force=True)


async def container_pid(docker: DockerClient, cid: str) -> int:
    """The host PID of a running container's first process."""
    return int((await docker.inspect_container(cid))["State"]["Pid"])
