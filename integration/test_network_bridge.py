"""The ``bridge`` backend on real netlink, iptables and Docker, through the runtime.

Every test gets its own bridge (named after the test's node), its own /24 pod CIDR and its
own state directory; the bridge, its iptables chains and state are removed afterwards.
Traffic goes only to the pods the test made and to the node's own addresses.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from functools import partial
from pathlib import Path

import anyio
import pytest
from pyroute2 import AsyncIPRoute

from asynckubelet import errors
from asynckubelet.docker import DockerClient
from asynckubelet.network import PodNetworkRequest, PortMapping
from asynckubelet.network.bridge import BridgeConfig, BridgePlugin, veth_name
from asynckubelet.network.factory import make_network_plugin
from asynckubelet.network.nftables import owner_comment, pod_chain, table_name
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from integration.harness import PAUSE_IMAGE
from integration.network_helpers import (
    bridge_name,
    churn,
    container_id,
    container_pid,
    fetch,
    fetch_in,
    free_cidr,
    kill_setup_worker_after,
    node_address,
    pod_from,
    remove_container,
    running_with_ip,
    server_pod,
    start_pause,
)
from integration.runtime_helpers import Driver

pytest_plugins = ["integration.network_fixtures"]

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(os.geteuid() != 0, reason="the bridge backend needs root"),
]

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
async def rm(docker: DockerClient, node_name: str, plugin: BridgePlugin) -> RuntimeManager:
    return RuntimeManager(
        RuntimeConfig(node_name=node_name, pause_image=PAUSE_IMAGE), docker=docker, network=plugin
    )


async def _links() -> set[str]:
    async with AsyncIPRoute() as ipr:
        return {str(link.get("ifname")) async for link in await ipr.link("dump")}


def _files(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir()] if folder.is_dir() else []


def _iptables_rules() -> str:
    return subprocess.run(["iptables-save"], capture_output=True, text=True).stdout


def _nft_ruleset() -> list[dict[str, dict[str, object]]]:
    text = subprocess.run(
        ["nft", "-j", "list", "ruleset"], capture_output=True, text=True, check=True
    ).stdout
    items: list[dict[str, dict[str, object]]] = json.loads(text)["nftables"]
    return items


def _firewall_rules(firewall: str) -> str:
    """What the firewall holds, as text to look for our addresses and names in."""
    if firewall == "nftables":
        argv = ["nft", "list", "ruleset"]
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return _iptables_rules()


async def test_a_link_is_found_by_name_and_a_missing_one_is_none() -> None:
    """The veth and bridge lookups ask the kernel for one link by name (a missing one is
    ENODEV, answered as None) rather than dumping every link of a full node."""
    from asynckubelet.network.netlink import _index

    async with AsyncIPRoute() as ipr:
        assert await _index(ipr, "lo") == 1
        assert await _index(ipr, "akl-none-such") is None


LOW_MAC = "00:00:5e:00:53:01"
"""Lower than any MAC the kernel makes up (those have the locally administered bit of the
first octet set), so a bridge left to itself would take it from the port that has it."""


async def _bridge_mac(ipr: AsyncIPRoute, bridge: str) -> str:
    found = await ipr.link("get", ifname=bridge)
    return str(found[0].get("IFLA_ADDRESS"))


async def _mac_across_a_low_port(bridge: str, port: str) -> list[str]:
    """The bridge's MAC before, while and after a port with :data:`LOW_MAC` is on it."""
    async with AsyncIPRoute() as ipr:
        seen = [await _bridge_mac(ipr, bridge)]
        master = (await ipr.link("get", ifname=bridge))[0]["index"]
        await ipr.link("add", ifname=port, kind="veth", peer=f"{port}p", address=LOW_MAC)
        try:
            await ipr.link("set", ifname=port, master=master)
            seen.append(await _bridge_mac(ipr, bridge))
        finally:
            await ipr.link("del", ifname=port)
        seen.append(await _bridge_mac(ipr, bridge))
    return seen


async def test_the_bridge_keeps_its_mac_while_ports_come_and_go(
    plugin: BridgePlugin, node_name: str
) -> None:
    """Pods reach the gateway (cluster DNS, Services, the world) by its MAC: a bridge that
    took its ports' lowest MAC would change it when that pod went, and every other pod would
    send to a MAC nobody answers until its neighbour entry expired."""
    seen = await _mac_across_a_low_port(plugin.config.bridge, f"akm{node_name[-8:]}")
    assert LOW_MAC not in seen
    assert len(set(seen)) == 1, seen


@pytest.mark.parametrize("emptied", [False, True], ids=["with-its-own", "emptied"])
async def test_a_bridge_made_before_gets_a_usable_mac_pinned_at_start(
    docker: DockerClient, node_name: str, tmp_path: Path, emptied: bool
) -> None:
    """A bridge that was there before the agent (made by hand or by an older version, its
    MAC left to the kernel) keeps one MAC once the agent has started on it; one whose last
    port went has all zeros, which no pod could send to, and gets a MAC of its own."""
    bridge = bridge_name(node_name)
    made = make_network_plugin(
        "bridge", docker=docker, state_dir=tmp_path / "net", bridge=bridge, pod_cidr=free_cidr()
    )
    async with AsyncIPRoute() as ipr:
        await ipr.link("add", ifname=bridge, kind="bridge")
        if emptied:
            port = f"akm{node_name[-8:]}"
            await ipr.link("add", ifname=port, kind="veth", peer=f"{port}p")
            await ipr.link(
                "set", ifname=port, master=(await ipr.link("get", ifname=bridge))[0]["index"]
            )
            await ipr.link("del", ifname=port)
            assert await _bridge_mac(ipr, bridge) == "00:00:00:00:00:00"
    try:
        await made.start()
        seen = await _mac_across_a_low_port(bridge, f"akm{node_name[-8:]}")
    finally:
        assert isinstance(made, BridgePlugin)
        await made.remove_node_network()
    assert LOW_MAC not in seen
    assert "00:00:00:00:00:00" not in seen
    assert len(set(seen)) == 1, seen


@each_firewall
async def test_two_pods_reach_each_other_by_pod_ip(
    rm: RuntimeManager, docker: DockerClient, node_name: str
) -> None:
    _, ip_a = await running_with_ip(rm, server_pod("a"), node_name)
    _, ip_b = await running_with_ip(rm, server_pod("b"), node_name)
    assert ip_a != ip_b
    shell_b = await container_id(docker, node_name, "b", "shell")
    assert "hi-from-a" in await fetch_in(docker, shell_b, ip_a, 8080)


async def test_a_container_reaches_its_sibling_on_localhost(
    rm: RuntimeManager, docker: DockerClient, node_name: str
) -> None:
    await running_with_ip(rm, server_pod("solo"), node_name)
    shell = await container_id(docker, node_name, "solo", "shell")
    assert "hi-from-solo" in await fetch_in(docker, shell, "127.0.0.1", 8080)


@each_firewall
async def test_the_node_reaches_the_pod_ip(rm: RuntimeManager, node_name: str) -> None:
    _, ip = await running_with_ip(rm, server_pod("reach"), node_name)
    text = await anyio.to_thread.run_sync(fetch, f"http://{ip}:8080/index.html")
    assert text == "hi-from-reach\n"


@each_firewall
async def test_a_host_port_answers_on_127_0_0_1(rm: RuntimeManager, node_name: str) -> None:
    port = random.randint(20000, 29999)
    await running_with_ip(rm, server_pod("hp", host_port=port), node_name)
    text = await anyio.to_thread.run_sync(fetch, f"http://127.0.0.1:{port}/index.html")
    assert text == "hi-from-hp\n"


@each_firewall
async def test_a_host_port_answers_on_the_nodes_address(rm: RuntimeManager, node_name: str) -> None:
    node_ip = node_address()
    port = random.randint(30000, 39999)
    await running_with_ip(rm, server_pod("hpn", host_port=port), node_name)
    text = await anyio.to_thread.run_sync(fetch, f"http://{node_ip}:{port}/index.html")
    assert text == "hi-from-hpn\n"


@each_firewall
async def test_a_pod_reaches_its_own_host_port_through_the_node_hairpin(
    rm: RuntimeManager, docker: DockerClient, node_name: str
) -> None:
    node_ip = node_address()
    port = random.randint(40000, 49999)
    await running_with_ip(rm, server_pod("hair", host_port=port), node_name)
    shell = await container_id(docker, node_name, "hair", "shell")
    assert "hi-from-hair" in await fetch_in(docker, shell, node_ip, port)


async def test_a_host_network_pod_sees_the_hosts_interfaces(
    rm: RuntimeManager, docker: DockerClient, node_name: str
) -> None:
    text = """
apiVersion: v1
kind: Pod
metadata: {name: hostnet}
spec:
  hostNetwork: true
  containers:
  - name: shell
    image: BUSYBOX
    command: ["sleep", "3600"]
"""
    driver = Driver(rm, pod_from(text, node=node_name))
    await driver.until(lambda s: s.phase == "Running")
    shell = await container_id(docker, node_name, "hostnet", "shell")
    cmd = ["cat", "/sys/class/net/eth0/address"]
    seen = (await docker.exec_run(shell, cmd, timeout=10)).stdout.decode().strip()
    assert seen == (await anyio.Path("/sys/class/net/eth0/address").read_text()).strip()


@each_firewall
async def test_after_pod_deletion_no_link_allocation_or_nat_rule_remains(
    rm: RuntimeManager, plugin: BridgePlugin, node_name: str, firewall: str
) -> None:
    port = random.randint(20000, 49999)
    driver, ip = await running_with_ip(rm, server_pod("gone", host_port=port), node_name)
    assert driver.runtime is not None
    sandbox_id = driver.runtime.sandboxes[0].id
    assert veth_name(sandbox_id) in await _links()
    assert f"{ip}:8080" in _firewall_rules(firewall)
    await rm.kill_pod(driver.pod)
    await rm.remove_pod(uid=driver.runtime.uid)
    assert veth_name(sandbox_id) not in await _links()
    assert await plugin.ipam.allocations() == {}
    assert f"{ip}:8080" not in _firewall_rules(firewall)
    assert sandbox_id[:16] not in _firewall_rules(firewall)
    assert list((plugin.root / "pods").glob("*.json")) == []


@pytest.mark.parametrize(
    "firewall",
    [
        pytest.param(
            "nftables", marks=pytest.mark.skipif(shutil.which("nft") is None, reason="no nft")
        )
    ],
)
async def test_removing_the_network_leaves_no_nftables_table_or_rule_of_ours(
    rm: RuntimeManager, plugin: BridgePlugin, node_name: str
) -> None:
    port = random.randint(20000, 49999)
    driver, _ = await running_with_ip(rm, server_pod("nftgone", host_port=port), node_name)
    assert driver.runtime is not None
    sandbox_id = driver.runtime.sandboxes[0].id
    table = table_name(plugin.config.bridge)
    assert any(item.get("table", {}).get("name") == table for item in _nft_ruleset())
    await rm.kill_pod(driver.pod)
    await rm.remove_pod(uid=driver.runtime.uid)
    await plugin.remove_node_network()
    left = [
        item
        for item in _nft_ruleset()
        for body in item.values()
        if body.get("table") == table
        or body.get("name") in (table, pod_chain(sandbox_id))
        or body.get("comment") == owner_comment(plugin.config.bridge)
    ]
    assert left == []


async def test_teardown_is_idempotent_and_needs_only_the_sandbox_id(
    plugin: BridgePlugin, docker: DockerClient, node_name: str
) -> None:
    sandbox = await start_pause(docker, node_name)
    await plugin.setup_pod(_request(sandbox, await container_pid(docker, sandbox)))
    await docker.remove_container(sandbox, force=True)
    await plugin.teardown_pod(sandbox_id=sandbox)
    await plugin.teardown_pod(sandbox_id=sandbox)
    assert await plugin.ipam.allocations() == {}
    assert await plugin.get_pod_network_status(sandbox_id=sandbox) is not None


async def _a_host_network() -> str:
    """A network the host routes to on the interface of its default route: the machine's
    own, not a bridge another test or test session makes and removes meanwhile."""
    routes = json.loads((await anyio.run_process(["ip", "-4", "-j", "route"])).stdout)
    default = next(r["dev"] for r in routes if r["dst"] == "default")
    return str(next(r["dst"] for r in routes if "/" in r["dst"] and r.get("dev") == default))


async def test_a_pod_cidr_overlapping_a_host_route_is_refused(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    host_net = await _a_host_network()
    made = BridgePlugin(
        BridgeConfig(bridge=bridge_name(node_name), pod_cidr=host_net, state_dir=tmp_path)
    )
    try:
        with pytest.raises(errors.NetworkError, match=f"pod CIDR {host_net} overlaps the host"):
            await made.ensure_node_network()
        assert bridge_name(node_name) not in await _links()
    finally:
        await made.remove_node_network()


async def test_the_sweep_releases_what_a_removed_sandbox_left(
    docker: DockerClient, node_name: str, tmp_path: Path, plugin: BridgePlugin
) -> None:
    sandbox = await start_pause(docker, node_name)
    await plugin.setup_pod(_request(sandbox, await container_pid(docker, sandbox)))
    await docker.remove_container(sandbox, force=True)
    again = make_network_plugin(
        "bridge",
        docker=docker,
        state_dir=plugin.config.state_dir,
        bridge=plugin.config.bridge,
        pod_cidr=plugin.config.pod_cidr,
    )
    await again.start()
    assert await plugin.ipam.allocations() == {}
    assert sandbox[:16] not in _iptables_rules()


def _request(sandbox: str, pid: int, ports: tuple[PortMapping, ...] = ()) -> PodNetworkRequest:
    return PodNetworkRequest(
        sandbox_id=sandbox,
        pod_name="p",
        namespace="default",
        uid="u",
        netns_path=f"/proc/{pid}/ns/net",
        port_mappings=ports,
    )


async def test_200_create_delete_cycles_never_share_an_address_and_leak_nothing(
    plugin: BridgePlugin, docker: DockerClient, node_name: str
) -> None:
    async def request(cycle: int) -> PodNetworkRequest:
        sandbox = await start_pause(docker, node_name)
        pid = await container_pid(docker, sandbox)
        return _request(sandbox, pid, (PortMapping(80, 50000 + cycle),))

    done = await churn(plugin, request=request, remove=partial(remove_container, docker))
    assert len(set(done.addresses)) == 200
    links = await _links()
    rules = _iptables_rules()
    assert [s for s in done.sandboxes if veth_name(s) in links or s[:16] in rules] == []
    assert await plugin.ipam.allocations() == {}
    assert list((plugin.root / "pods").glob("*.json")) == []


async def test_an_agent_killed_during_setup_leaks_nothing_after_restart(
    plugin: BridgePlugin, docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    rng = random.Random()
    for trial in range(12):
        sandbox = await start_pause(docker, node_name)
        pid = await container_pid(docker, sandbox)
        spec = {
            "bridge": plugin.config.bridge,
            "cidr": plugin.config.pod_cidr,
            "state": str(plugin.config.state_dir),
            "sandbox": sandbox,
            "netns": f"/proc/{pid}/ns/net",
        }
        await kill_setup_worker_after(spec, delay=rng.uniform(0, 0.06))
        status = await plugin.get_pod_network_status(sandbox_id=sandbox)
        assert status is not None
        if trial % 2:
            await plugin.teardown_pod(sandbox_id=sandbox)
            await docker.remove_container(sandbox, force=True)
        else:
            await docker.remove_container(sandbox, force=True)
            await plugin.sweep()
        assert await plugin.ipam.allocations() == {}, f"trial {trial}"
        assert sandbox[:16] not in _iptables_rules(), f"trial {trial}"
        assert veth_name(sandbox) not in await _links(), f"trial {trial}"
        assert _files(plugin.root / "pods") == [], f"trial {trial}"
        assert [f for f in _files(plugin.root / "ipam") if f.endswith(".tmp")] == []


async def _link(ipr: AsyncIPRoute, name: str) -> dict[str, object]:
    found = await ipr.link("get", ifname=name)
    link = found[0]
    return {
        "index": link["index"],
        "master": link.get("IFLA_MASTER"),
        "up": bool(link["flags"] & 1),
        "peer": link.get("IFLA_LINK"),
    }


async def _inside(pid: int, *argv: str) -> str:
    """``argv`` run by ``nsenter`` in the network namespace of process ``pid``."""
    done = await anyio.run_process(["nsenter", "-t", str(pid), "-n", *argv])
    return done.stdout.decode()


async def test_a_pod_port_is_made_on_the_bridge_up_in_hairpin_mode(
    plugin: BridgePlugin, docker: DockerClient, node_name: str
) -> None:
    """The host end is made already a port of the bridge and up; hairpin is on; inside,
    ``lo`` and ``eth0`` are up, ``eth0`` has the pod's address and the default route."""
    sandbox = await start_pause(docker, node_name)
    pid = await container_pid(docker, sandbox)
    try:
        network = await plugin.setup_pod(_request(sandbox, pid))
        host = veth_name(sandbox)
        async with AsyncIPRoute() as ipr:
            port = await _link(ipr, host)
            bridge = await _link(ipr, plugin.config.bridge)
        assert port["master"] == bridge["index"]
        assert port["up"]
        hairpin = anyio.Path(f"/sys/class/net/{host}/brport/hairpin_mode")
        assert (await hairpin.read_text()).strip() == "1"
        links = await _inside(pid, "ip", "-o", "link", "show", "up")
        assert ": lo:" in links
        assert ": eth0@" in links
        addresses = await _inside(pid, "ip", "-o", "-4", "addr", "show", "dev", "eth0")
        assert f"inet {network.ips[0]}/" in addresses
        routes = await _inside(pid, "ip", "-4", "route", "show", "default")
        assert f"via {plugin.ipam.gateway} dev eth0" in routes
    finally:
        await plugin.teardown_pod(sandbox_id=sandbox)
        await docker.remove_container(sandbox, force=True)


async def test_a_veth_a_crash_left_under_the_pods_name_is_replaced(
    plugin: BridgePlugin, docker: DockerClient, node_name: str
) -> None:
    """A host end of the pod's name already there (an agent killed between plugging and
    unplugging the sandbox) is deleted with its peer, and the pod gets a fresh pair."""
    sandbox = await start_pause(docker, node_name)
    pid = await container_pid(docker, sandbox)
    host = veth_name(sandbox)
    left = f"aklleft{random.randint(0, 10**6)}"
    async with AsyncIPRoute() as ipr:
        await ipr.link("add", ifname=host, kind="veth", peer=left)
        stale = (await _link(ipr, host))["index"]
    try:
        network = await plugin.setup_pod(_request(sandbox, pid))
        async with AsyncIPRoute() as ipr:
            port = await _link(ipr, host)
        assert port["index"] != stale
        assert left not in await _links()
        addresses = await _inside(pid, "ip", "-o", "-4", "addr", "show", "dev", "eth0")
        assert f"inet {network.ips[0]}/" in addresses
    finally:
        await plugin.teardown_pod(sandbox_id=sandbox)
        await docker.remove_container(sandbox, force=True)
        if left in await _links():
            async with AsyncIPRoute() as ipr:
                await ipr.link("del", ifname=left)


async def test_a_bridge_made_again_is_found_and_a_missing_one_is_named(
    plugin: BridgePlugin, docker: DockerClient, node_name: str
) -> None:
    """The bridge's index is kept from pod to pod; when the bridge goes, the next pod's
    setup fails naming it and leaves no link or address; once a bridge of that name is
    there again, the next pod is plugged into it."""
    bridge = plugin.config.bridge
    sandboxes = [await start_pause(docker, node_name) for _ in range(3)]
    try:
        await plugin.setup_pod(_request(sandboxes[0], await container_pid(docker, sandboxes[0])))
        async with AsyncIPRoute() as ipr:
            await ipr.link("del", ifname=bridge)
        with pytest.raises(errors.NetworkError, match=f"bridge {bridge} does not exist"):
            await plugin.setup_pod(
                _request(sandboxes[1], await container_pid(docker, sandboxes[1]))
            )
        assert veth_name(sandboxes[1]) not in await _links()
        assert sandboxes[1] not in (await plugin.ipam.allocations()).values()
        async with AsyncIPRoute() as ipr:
            await ipr.link("add", ifname=bridge, kind="bridge")
            again = (await _link(ipr, bridge))["index"]
        await plugin.setup_pod(_request(sandboxes[2], await container_pid(docker, sandboxes[2])))
        async with AsyncIPRoute() as ipr:
            assert (await _link(ipr, veth_name(sandboxes[2])))["master"] == again
    finally:
        for sandbox in sandboxes:
            await plugin.teardown_pod(sandbox_id=sandbox)
            await docker.remove_container(sandbox, force=True)
