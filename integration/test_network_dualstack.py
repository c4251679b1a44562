"""IPv4/IPv6 dual stack of the ``bridge`` backend on real netlink, iptables and ip6tables.

Every test gets its own bridge, its own IPv4 /24 and a random IPv6 ULA /64 of its own, and
its own state directory; everything is removed afterwards. Traffic goes only to the pods
the test made and to the node's own addresses.
"""

from __future__ import annotations

import ipaddress
import os
import random
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from pyroute2 import AsyncIPRoute

from asynckubelet import errors
from asynckubelet.docker import DockerClient
from asynckubelet.network.bridge import BridgeConfig, BridgePlugin, ipv6_support, veth_name
from asynckubelet.network.factory import make_network_plugin
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE, Engine, remove_owned
from integration.network_helpers import (
    bridge_name,
    container_id,
    container_pid,
    fetch,
    fetch_in,
    free_cidr,
    free_cidr_v6,
    kill_setup_worker_after,
    pod_from,
    server_pod,
    start_pause,
)
from integration.runtime_helpers import Driver

REPO = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not Path("/proc/net/if_inet6").exists(), reason="no IPv6 in the kernel"),
]


@pytest.fixture
async def plugin(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> AsyncIterator[BridgePlugin]:
    """A started dual-stack bridge backend of the test's own; removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("the bridge backend needs root")
    made = make_network_plugin(
        "bridge",
        docker=docker,
        state_dir=tmp_path / "net",
        bridge=bridge_name(node_name),
        pod_cidr=free_cidr(),
        pod_cidr_v6=free_cidr_v6(),
    )
    assert isinstance(made, BridgePlugin)
    await made.start()
    try:
        yield made
    finally:
        with anyio.CancelScope(shield=True):
            await remove_owned(docker, node_name)
            await made.remove_node_network()


@pytest.fixture
async def rm(docker: DockerClient, node_name: str, plugin: BridgePlugin) -> RuntimeManager:
    return RuntimeManager(
        RuntimeConfig(node_name=node_name, pause_image=PAUSE_IMAGE), docker=docker, network=plugin
    )


async def _running(rm: RuntimeManager, text: str, node: str) -> tuple[Driver, list[str]]:
    driver = Driver(rm, pod_from(text, node=node))
    status = await driver.until(lambda s: s.phase == "Running" and len(s.podIPs or []) == 2)
    return driver, [ip.ip for ip in status.podIPs or []]


def _ip6tables_rules() -> str:
    return subprocess.run(["ip6tables-save"], capture_output=True, text=True).stdout


async def _v6_state(sandbox_id: str, address: str) -> list[str]:
    """What of the pod's IPv6 network is still on the node."""
    left = []
    async with AsyncIPRoute() as ipr:
        async for a in await ipr.addr("dump", family=10):
            if a.get("address") == address:
                left.append(f"address {address}")
        async for r in await ipr.route("dump", family=10):
            if r.get("dst") == address:
                left.append(f"route {address}")
        if await ipr.link_lookup(ifname=veth_name(sandbox_id)):
            left.append(f"link {veth_name(sandbox_id)}")
    return left


async def test_two_dual_stack_pods_reach_each_other_over_ipv6(
    rm: RuntimeManager, docker: DockerClient, node_name: str
) -> None:
    _, ips_a = await _running(rm, server_pod("a6"), node_name)
    await _running(rm, server_pod("b6"), node_name)
    shell_b = await container_id(docker, node_name, "b6", "shell")
    assert "hi-from-a6" in await fetch_in(docker, shell_b, ips_a[1], 8080)


async def test_a_dual_stack_pod_shows_its_ipv4_then_its_ipv6_pod_ip(
    rm: RuntimeManager, plugin: BridgePlugin, node_name: str
) -> None:
    _, ips = await _running(rm, server_pod("both"), node_name)
    assert plugin.subnet6 is not None
    assert ipaddress.ip_address(ips[0]) in plugin.subnet
    assert ipaddress.ip_address(ips[1]) in plugin.subnet6


async def test_the_pod_has_its_ipv6_address_and_a_default_ipv6_route(
    rm: RuntimeManager, plugin: BridgePlugin, docker: DockerClient, node_name: str
) -> None:
    _, ips = await _running(rm, server_pod("route6"), node_name)
    shell = await container_id(docker, node_name, "route6", "shell")
    addresses = (await docker.exec_run(shell, ["ip", "-6", "addr"], timeout=10)).stdout.decode()
    routes = (await docker.exec_run(shell, ["ip", "-6", "route"], timeout=10)).stdout.decode()
    assert plugin.ipam6 is not None
    assert f"inet6 {ips[1]}/64" in addresses
    assert "tentative" not in addresses
    defaults = [line for line in routes.splitlines() if line.startswith("default ")]
    assert [line.split()[2] for line in defaults] == [plugin.ipam6.gateway]


async def test_after_pod_deletion_no_ipv6_address_route_allocation_or_rule_remains(
    rm: RuntimeManager, plugin: BridgePlugin, node_name: str
) -> None:
    port = random.randint(20000, 49999)
    driver, ips = await _running(rm, server_pod("gone6", host_port=port), node_name)
    assert driver.runtime is not None
    sandbox_id = driver.runtime.sandboxes[0].id
    assert f"[{ips[1]}]:8080" in _ip6tables_rules()
    await rm.kill_pod(driver.pod)
    await rm.remove_pod(uid=driver.runtime.uid)
    assert await _v6_state(sandbox_id, ips[1]) == []
    assert plugin.ipam6 is not None
    assert await plugin.ipam6.allocations() == {}
    assert ips[1] not in _ip6tables_rules()
    assert sandbox_id[:16] not in _ip6tables_rules()


async def test_a_host_port_answers_on_the_nodes_ipv6_address(
    rm: RuntimeManager, node_name: str
) -> None:
    node_ip = _node_address6()
    port = random.randint(30000, 39999)
    await _running(rm, server_pod("hp6", host_port=port), node_name)
    url = f"http://[{node_ip}]:{port}/index.html"
    assert await anyio.to_thread.run_sync(fetch, url) == "hi-from-hp6\n"


def _node_address6() -> str:
    out = subprocess.run(
        ["ip", "-6", "-o", "route", "get", "2001:db8::1"], capture_output=True, text=True
    ).stdout
    words = out.split()
    if "src" not in words:
        pytest.skip("the node has no IPv6 source address")
    return words[words.index("src") + 1]


async def test_an_ipv6_pod_cidr_overlapping_a_host_route_is_refused(
    node_name: str, tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("the bridge backend needs root")
    route = (await anyio.run_process(["ip", "-6", "route"])).stdout.decode()
    host_nets = [
        line.split()[0]
        for line in route.splitlines()
        if "/" in line.split()[0] and not line.startswith("fe80")
    ]
    if not host_nets:
        pytest.skip("the node has no IPv6 route of its own")
    made = BridgePlugin(
        BridgeConfig(
            bridge=bridge_name(node_name),
            pod_cidr=free_cidr(),
            pod_cidr_v6=host_nets[0],
            state_dir=tmp_path,
        )
    )
    try:
        with pytest.raises(errors.NetworkError, match=f"pod CIDR {host_nets[0]} overlaps the host"):
            await made.ensure_node_network()
    finally:
        await made.remove_node_network()


def test_doctor_says_whether_dual_stack_is_possible_here(
    docker_engine: Engine, tmp_path: Path
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "asynckubelet", "doctor", "--state-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DOCKER_HOST": docker_engine.url},
    )
    possible, how = ipv6_support()
    verdict = "possible" if possible else "not possible"
    assert f"IPv6 dual stack (--dual-stack): {verdict}, {how}" in proc.stdout


async def test_a_dual_stack_agent_killed_during_setup_leaks_nothing_after_restart(
    plugin: BridgePlugin, docker: DockerClient, node_name: str
) -> None:
    assert plugin.ipam6 is not None
    rng = random.Random()
    for trial in range(10):
        sandbox = await start_pause(docker, node_name)
        spec = {
            "bridge": plugin.config.bridge,
            "cidr": plugin.config.pod_cidr,
            "cidr6": plugin.config.pod_cidr_v6,
            "state": str(plugin.config.state_dir),
            "sandbox": sandbox,
            "netns": f"/proc/{await container_pid(docker, sandbox)}/ns/net",
        }
        await kill_setup_worker_after(spec, delay=rng.uniform(0, 0.1))
        await docker.remove_container(sandbox, force=True)
        await plugin.sweep()
        assert await plugin.ipam.allocations() == {}, f"trial {trial}"
        assert await plugin.ipam6.allocations() == {}, f"trial {trial}"
        assert sandbox[:16] not in _ip6tables_rules(), f"trial {trial}"
        assert list((plugin.root / "pods").glob("*")) == [], f"trial {trial}"


SHOW_IPS = """
apiVersion: v1
kind: Pod
metadata: {name: ips}
spec:
  restartPolicy: Never
  containers:
    - name: show
      image: BUSYBOX
      command: ["sh", "-c", "echo podIPs=$IPS"]
      env:
        - name: IPS
          valueFrom: {fieldRef: {fieldPath: status.podIPs}}
"""


def test_run_with_pod_cidr_v6_gives_the_pod_both_addresses_ipv4_first(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    if os.geteuid() != 0:
        pytest.skip("the bridge backend needs root")
    bridge, cidr, cidr6 = bridge_name(node_name), free_cidr(), free_cidr_v6()
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(SHOW_IPS.replace("BUSYBOX", BUSYBOX_IMAGE))
    try:
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "asynckubelet", "run", str(manifest), "--no-color"),
                *("--node-name", node_name, "--pause-image", PAUSE_IMAGE),
                *("--network", "bridge", "--bridge", bridge, "--pod-cidr", cidr),
                *("--pod-cidr-v6", cidr6),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert proc.returncode == 0, proc.stderr
        (line,) = proc.stdout.splitlines()
        v4, v6 = line.removeprefix("ips/show | podIPs=").split(",")
        assert ipaddress.ip_address(v4) in ipaddress.ip_network(cidr)
        assert ipaddress.ip_address(v6) in ipaddress.ip_network(cidr6)
    finally:
        config = BridgeConfig(bridge=bridge, pod_cidr=cidr, pod_cidr_v6=cidr6)
        anyio.run(BridgePlugin(config).remove_node_network)


async def test_removing_the_node_network_with_its_ipv4_range_alone_removes_its_ipv6_chains(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    """A node that ran dual stack, removed by a configuration that names only its IPv4
    range (an uninstall, a test's teardown), leaves no ip6tables chain behind."""
    if os.geteuid() != 0:
        pytest.skip("the bridge backend needs root")
    bridge, cidr = bridge_name(node_name), free_cidr()
    made = make_network_plugin(
        "bridge",
        docker=docker,
        state_dir=tmp_path / "net",
        bridge=bridge,
        pod_cidr=cidr,
        pod_cidr_v6=free_cidr_v6(),
    )
    assert isinstance(made, BridgePlugin)
    await made.start()
    try:
        assert bridge in await _saved("ip6tables-save")
        config = BridgeConfig(bridge=bridge, pod_cidr=cidr, state_dir=tmp_path / "net")
        await BridgePlugin(config).remove_node_network()
        assert bridge not in await _saved("ip6tables-save")
        assert bridge not in await _saved("iptables-save")
    finally:
        await made.remove_node_network()


async def _saved(binary: str) -> str:
    return (await anyio.run_process([binary])).stdout.decode()
