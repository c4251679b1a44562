"""A pod cannot reach the host's loopback, on real netlink, real firewalls and a real engine.

``route_localnet`` on the node's bridge (the bridge backend sets it; the CNI ``portmap``
plugin sets it for a hostPort) lets hostPorts and nodePorts answer on 127.0.0.1, and would
also let a pod's own packet addressed to 127.0.0.1 in: a container with Docker's default
capabilities (NET_RAW among them) writes a raw Ethernet frame to the bridge's MAC with that
destination, which its own routing table would never send. The attack here is that frame,
from ``integration/attack/rawframe.c`` compiled statically and run as a baseline pod, aimed
at a UDP socket the test binds on the host's 127.0.0.1; a second frame to the gateway's
own address, sent after it on the same path, shows when the first has been dealt with.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from asynckubelet.docker import DockerClient
from asynckubelet.images.build import File, ImageConfig, image_archive, is_static_elf
from asynckubelet.manifests import load_manifests_text
from asynckubelet.network import NetworkPlugin
from asynckubelet.network.bridge import BridgePlugin
from asynckubelet.network.cni import CNIPlugin
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from integration.harness import PAUSE_IMAGE
from integration.network_helpers import running_with_ip, server_pod
from integration.runtime_helpers import Driver

pytest_plugins = ["integration.network_fixtures"]

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(os.geteuid() != 0, reason="the bridge and cni backends need root"),
]

SOURCE = Path(__file__).resolve().parent / "attack" / "rawframe.c"
IMAGE = "asynckubelet.local/rawframe:test"


def _compile() -> bytes:
    compilers = [c for c in ("musl-gcc", "gcc") if shutil.which(c)]
    if not compilers:
        pytest.skip("no C compiler (musl-tools or gcc) to build the attack program")
    with tempfile.TemporaryDirectory() as workdir:
        out = Path(workdir) / "rawframe"
        for cc in compilers:
            argv = [cc, "-static", "-Os", "-s", "-o", str(out), str(SOURCE)]
            if subprocess.run(argv, capture_output=True, check=False).returncode == 0:
                data = out.read_bytes()
                if is_static_elf(data):
                    return data
    raise AssertionError(f"cannot compile {SOURCE} statically with {compilers}")


@pytest.fixture(scope="module")
def attack_image(docker_engine: object) -> str:
    archive = image_archive(
        repo_tag=IMAGE,
        files=[File(path="/rawframe", data=_compile(), mode=0o755)],
        config=ImageConfig(entrypoint=["/rawframe"]),
    )

    async def load() -> None:
        async with DockerClient() as client:
            await client.load_image(archive)

    anyio.run(load)
    return IMAGE


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A UDP socket on the host's 127.0.0.1, the kind of loopback-only service (a
    database, a dev server, the node's own endpoint) no pod may reach."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.setblocking(False)
        yield sock


def _attack_pod(*, bridge: str, loopback_port: int, gateway: str, control_port: int) -> str:
    mac = Path(f"/sys/class/net/{bridge}/address").read_text().strip()
    args = ["eth0", mac, "127.0.0.1", str(loopback_port), "stolen"]
    args += [gateway, str(control_port), "control"]
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: rawframe-{random.randint(0, 10**6)}}}
spec:
  restartPolicy: Never
  containers:
  - name: attack
    image: {IMAGE}
    args: {args!r}
"""


async def _attack(
    rm: RuntimeManager, *, node: str, bridge: str, gateway: str, target: socket.socket
) -> bytes | None:
    """Run the attack as a baseline pod; what the host's loopback socket received, or None.

    The control frame goes to the gateway's own address, which a pod may always reach: it
    is sent after the frames to 127.0.0.1, so once it has arrived those have been either
    delivered or dropped."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as control:
        control.bind((gateway, 0))
        text = _attack_pod(
            bridge=bridge,
            loopback_port=target.getsockname()[1],
            gateway=gateway,
            control_port=control.getsockname()[1],
        )
        # Admitted at the node's default level: nothing here asks for more than baseline.
        pod = load_manifests_text(text, node_name=node, pod_security="baseline").pods[0]
        driver = Driver(rm, pod)
        status = await driver.until(lambda s: s.phase in ("Succeeded", "Failed"))
        assert status.phase == "Succeeded", status
        control.settimeout(30)
        got = await anyio.to_thread.run_sync(control.recv, 100)
        assert got == b"control"
    try:
        return target.recv(100)
    except BlockingIOError:
        return None


each_firewall = pytest.mark.parametrize(
    "firewall",
    [
        "iptables",
        pytest.param(
            "nftables",
            marks=pytest.mark.skipif(shutil.which("nft") is None, reason="no nft here"),
        ),
    ],
)


@pytest.fixture
def bridge_rm(docker: DockerClient, node_name: str, plugin: BridgePlugin) -> RuntimeManager:
    return RuntimeManager(
        RuntimeConfig(node_name=node_name, pause_image=PAUSE_IMAGE), docker=docker, network=plugin
    )


@each_firewall
async def test_a_pods_raw_frame_to_the_hosts_loopback_is_dropped(
    attack_image: str,
    bridge_rm: RuntimeManager,
    plugin: BridgePlugin,
    node_name: str,
    listener: socket.socket,
) -> None:
    bridge = plugin.config.bridge
    route_localnet = anyio.Path(f"/proc/sys/net/ipv4/conf/{bridge}/route_localnet")
    assert (await route_localnet.read_text()).strip() == "1"
    got = await _attack(
        bridge_rm,
        node=node_name,
        bridge=bridge,
        gateway=plugin.ipam.gateway,
        target=listener,
    )
    assert got is None


@pytest.mark.parametrize("backend_plugin", ["cni"], indirect=True)
async def test_the_cni_backends_bridge_drops_a_pods_frame_to_the_hosts_loopback(
    attack_image: str,
    backend_plugin: NetworkPlugin,
    docker: DockerClient,
    node_name: str,
    listener: socket.socket,
) -> None:
    assert isinstance(backend_plugin, CNIPlugin)
    target = backend_plugin.service_target()
    assert target is not None
    bridge = target[1]
    gateway = backend_plugin.gateway()
    assert gateway is not None
    rm = RuntimeManager(
        RuntimeConfig(node_name=node_name, pause_image=PAUSE_IMAGE),
        docker=docker,
        network=backend_plugin,
    )
    # A hostPort makes the portmap plugin turn route_localnet on for the bridge.
    port = random.randint(20000, 29999)
    await running_with_ip(rm, server_pod("hp", host_port=port), node_name)
    route_localnet = anyio.Path(f"/proc/sys/net/ipv4/conf/{bridge}/route_localnet")
    assert (await route_localnet.read_text()).strip() == "1"
    got = await _attack(rm, node=node_name, bridge=bridge, gateway=gateway, target=listener)
    assert got is None


async def _output(*argv: str) -> str:
    return (await anyio.run_process(list(argv))).stdout.decode()


@each_firewall
async def test_removing_the_node_network_takes_the_guard_away(
    docker: DockerClient, plugin: BridgePlugin, firewall: str
) -> None:
    bridge = plugin.config.bridge
    if firewall == "iptables":
        assert f"AKL-LNET-{bridge}" in await _output("iptables-save", "-t", "filter")
    else:
        assert "block incoming localnet" in await _output("nft", "list", "ruleset")
    await plugin.remove_node_network()
    assert f"AKL-LNET-{bridge}" not in await _output("iptables-save", "-t", "filter")
    if firewall == "nftables":
        assert bridge not in await _output("nft", "list", "ruleset")


@pytest.mark.parametrize("backend_plugin", ["cni"], indirect=True)
async def test_reset_takes_the_cni_bridges_guard_away_once_no_pod_is_attached(
    backend_plugin: NetworkPlugin, docker: DockerClient, node_name: str
) -> None:
    from asynckubelet.cli.commands.reset import _remove_cni_guard

    assert isinstance(backend_plugin, CNIPlugin)
    target = backend_plugin.service_target()
    assert target is not None
    chain = f"AKL-LNET-{target[1]}"
    assert f"-A INPUT -j {chain}" in await _output("iptables-save", "-t", "filter")
    message = await _remove_cni_guard(docker, backend_plugin)
    assert message == (
        f"removed the loopback guard of bridge {target[1]} (its CNI plugins keep the rest)"
    )
    assert chain not in await _output("iptables-save", "-t", "filter")
