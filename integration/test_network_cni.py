"""The ``cni`` backend running Debian's reference plugins (bridge, host-local, portmap,
loopback) from /usr/lib/cni, through the runtime.

Every test writes its own configuration list (its own network name, bridge, /24 and
host-local data directory) and removes the bridge afterwards; the plugins' own DEL removes
everything per pod, which is what the tests check.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import random
import subprocess
from collections.abc import AsyncIterator, Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from pyroute2 import AsyncIPRoute

from asynckubelet import errors
from asynckubelet.docker import DockerClient
from asynckubelet.network import IPS_ANNOTATION, PodNetworkRequest, PortMapping
from asynckubelet.network.cni import CNIConfig, CNIPlugin, parse_config
from asynckubelet.network.factory import make_network_plugin
from asynckubelet.runtime import naming
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from integration.harness import PAUSE_IMAGE, remove_owned
from integration.network_helpers import (
    churn,
    cni_conflist,
    container_id,
    fetch,
    fetch_in,
    free_cidr,
    free_cidr_v6,
    kill_setup_worker_after,
    node_address,
    pod_from,
    remove_container,
    running_with_ip,
    server_pod,
    start_pause,
)
from integration.runtime_helpers import Driver, Recorder

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(os.geteuid() != 0, reason="CNI plugins need root"),
    pytest.mark.skipif(not Path("/usr/lib/cni/bridge").exists(), reason="no CNI plugins"),
]


class Net:
    def __init__(self, tmp_path: Path, node: str) -> None:
        self.name = f"akn-{node[-10:]}"
        self.bridge = f"akn{node[-10:]}"
        self.subnet = free_cidr()
        self.conf_dir = tmp_path / "net.d"
        self.data_dir = tmp_path / "ipam"
        self.state = tmp_path / "state"
        self.conf_dir.mkdir()
        doc = cni_conflist(
            name=self.name, bridge=self.bridge, subnet=self.subnet, data_dir=self.data_dir
        )
        (self.conf_dir / "10-test.conflist").write_text(json.dumps(doc))

    def plugin(self, docker: DockerClient | None = None) -> CNIPlugin:
        made = make_network_plugin(
            "cni", docker=docker, state_dir=self.state, cni_conf_dirs=[self.conf_dir]
        )
        assert isinstance(made, CNIPlugin)
        return made

    def allocations(self) -> list[str]:
        folder = self.data_dir / self.name
        if not folder.is_dir():
            return []
        return [p.name for p in folder.iterdir() if p.name[0].isdigit() or ":" in p.name]

    def cache_entries(self) -> list[str]:
        folder = self.state / "cni" / "results"
        return [p.name for p in folder.iterdir()] if folder.is_dir() else []


@pytest.fixture
async def net(docker: DockerClient, node_name: str, tmp_path: Path) -> AsyncIterator[Net]:
    made = Net(tmp_path, node_name)
    try:
        yield made
    finally:
        with anyio.CancelScope(shield=True):
            plugin = CNIPlugin(CNIConfig(conf_dirs=(made.conf_dir,), cache_dir=made.state / "cni"))
            for sandbox in plugin.cached_sandboxes():
                await plugin.teardown_pod(sandbox_id=sandbox)
            await remove_owned(docker, node_name)
            await plugin.unguard_localnet()
            async with AsyncIPRoute() as ipr:
                found = await ipr.link_lookup(ifname=made.bridge)
                if found:
                    await ipr.link("del", index=found[0])


@pytest.fixture
async def rm(docker: DockerClient, node_name: str, net: Net) -> RuntimeManager:
    plugin = net.plugin(docker)
    await plugin.start()
    return RuntimeManager(
        RuntimeConfig(node_name=node_name, pause_image=PAUSE_IMAGE), docker=docker, network=plugin
    )


def _iptables() -> str:
    return subprocess.run(["iptables-save"], capture_output=True, text=True).stdout


async def test_two_pods_reach_each_other_and_the_node_reaches_them(
    rm: RuntimeManager, docker: DockerClient, node_name: str, net: Net
) -> None:
    _, ip_a = await running_with_ip(rm, server_pod("a"), node_name)
    _, ip_b = await running_with_ip(rm, server_pod("b"), node_name)
    prefix = net.subnet.rsplit(".", 1)[0] + "."
    assert ip_a.startswith(prefix)
    assert ip_b.startswith(prefix)
    assert ip_a != ip_b
    assert "hi-from-a" in await fetch_in(
        docker, await container_id(docker, node_name, "b", "shell"), ip_a, 8080
    )
    assert await anyio.to_thread.run_sync(fetch, f"http://{ip_b}:8080/index.html") == (
        "hi-from-b\n"
    )


async def test_a_container_reaches_its_sibling_on_localhost(
    rm: RuntimeManager, docker: DockerClient, node_name: str
) -> None:
    await running_with_ip(rm, server_pod("solo"), node_name)
    shell = await container_id(docker, node_name, "solo", "shell")
    assert "hi-from-solo" in await fetch_in(docker, shell, "127.0.0.1", 8080)


async def test_a_host_port_answers_on_127_0_0_1_through_portmap(
    rm: RuntimeManager, node_name: str
) -> None:
    port = random.randint(20000, 49999)
    await running_with_ip(rm, server_pod("hp", host_port=port), node_name)
    text = await anyio.to_thread.run_sync(fetch, f"http://127.0.0.1:{port}/index.html")
    assert text == "hi-from-hp\n"


async def test_after_pod_deletion_no_link_allocation_rule_or_cache_entry_remains(
    rm: RuntimeManager, node_name: str, net: Net
) -> None:
    port = random.randint(20000, 49999)
    driver, ip = await running_with_ip(rm, server_pod("gone", host_port=port), node_name)
    assert driver.runtime is not None
    sandbox = driver.runtime.sandboxes[0].id
    assert net.allocations() == [ip]
    assert len(net.cache_entries()) == 1
    assert sandbox in _iptables()
    await rm.kill_pod(driver.pod)
    await rm.remove_pod(uid=driver.runtime.uid)
    assert net.allocations() == []
    assert net.cache_entries() == []
    assert sandbox not in _iptables()
    assert not await _bridge_ports(net.bridge)


async def _bridge_ports(bridge: str) -> list[str]:
    async with AsyncIPRoute() as ipr:
        found = await ipr.link_lookup(ifname=bridge)
        if not found:
            return []
        return [
            str(link.get("ifname"))
            async for link in await ipr.link("dump")
            if link.get("master") == found[0]
        ]


async def test_del_after_a_restart_and_a_config_change_uses_the_cached_config(
    docker: DockerClient, node_name: str, net: Net
) -> None:
    sandbox = await start_pause(docker, node_name)
    first = net.plugin(docker)
    network = await first.setup_pod(await _request(docker, sandbox, (PortMapping(80, 51234),)))
    assert network.ips
    assert net.allocations() == list(network.ips)
    (net.conf_dir / "10-test.conflist").write_text('{"cniVersion": "1.0.0", "name": "other"}')
    restarted = CNIPlugin(CNIConfig(conf_dirs=(net.conf_dir,), cache_dir=net.state / "cni"))
    assert await restarted.get_pod_network_status(sandbox_id=sandbox) == network
    await restarted.teardown_pod(sandbox_id=sandbox)
    await restarted.teardown_pod(sandbox_id=sandbox)
    assert net.allocations() == []
    assert net.cache_entries() == []
    assert sandbox not in _iptables()


async def test_check_passes_on_a_healthy_attachment(
    docker: DockerClient, node_name: str, net: Net
) -> None:
    sandbox = await start_pause(docker, node_name)
    plugin = net.plugin(docker)
    await plugin.setup_pod(await _request(docker, sandbox))
    await plugin.check_pod(sandbox_id=sandbox)
    await plugin.teardown_pod(sandbox_id=sandbox)


async def test_a_plugins_error_json_becomes_a_network_error_and_nothing_is_left(
    docker: DockerClient, node_name: str, net: Net
) -> None:
    doc = cni_conflist(
        name=net.name, bridge=net.bridge, subnet="10.0.0.0/33", data_dir=net.data_dir
    )
    (net.conf_dir / "10-test.conflist").write_text(json.dumps(doc))
    sandbox = await start_pause(docker, node_name)
    plugin = net.plugin(docker)
    with pytest.raises(errors.NetworkError, match=r"CNI plugin bridge ADD failed \(code \d+\): "):
        await plugin.setup_pod(await _request(docker, sandbox))
    assert net.cache_entries() == []


def test_a_configuration_without_plugins_is_refused_naming_the_field() -> None:
    with pytest.raises(errors.NetworkError, match="plugins: at least one required"):
        parse_config(b'{"cniVersion": "1.0.0", "name": "x", "plugins": []}', source="x.conflist")


async def test_an_agent_killed_during_add_leaks_nothing_after_restart(
    docker: DockerClient, node_name: str, net: Net
) -> None:
    rng = random.Random()
    for trial in range(10):
        sandbox = await start_pause(docker, node_name)
        pid = int((await docker.inspect_container(sandbox))["State"]["Pid"])
        spec = {
            "backend": "cni",
            "conf_dir": str(net.conf_dir),
            "state": str(net.state),
            "sandbox": sandbox,
            "netns": f"/proc/{pid}/ns/net",
        }
        await kill_setup_worker_after(spec, delay=rng.uniform(0, 0.15))
        await docker.remove_container(sandbox, force=True)
        await net.plugin(docker).start()
        assert net.allocations() == [], f"trial {trial}"
        assert net.cache_entries() == [], f"trial {trial}"
        assert sandbox not in _iptables(), f"trial {trial}"


async def _request(
    docker: DockerClient, sandbox: str, ports: tuple[PortMapping, ...] = ()
) -> PodNetworkRequest:
    pid = int((await docker.inspect_container(sandbox))["State"]["Pid"])
    return PodNetworkRequest(
        sandbox_id=sandbox,
        pod_name="p",
        namespace="default",
        uid="u",
        netns_path=f"/proc/{pid}/ns/net",
        port_mappings=ports,
    )


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


async def test_a_failing_network_setup_removes_the_sandbox_and_reports_the_plugins_error(
    docker: DockerClient, node_name: str, net: Net
) -> None:
    doc = cni_conflist(
        name=net.name, bridge=net.bridge, subnet="10.0.0.0/33", data_dir=net.data_dir
    )
    (net.conf_dir / "10-test.conflist").write_text(json.dumps(doc))
    events = Recorder()
    rm = RuntimeManager(
        RuntimeConfig(node_name=node_name, pause_image=PAUSE_IMAGE),
        docker=docker,
        network=net.plugin(docker),
        events=events,
    )
    driver = Driver(rm, pod_from(server_pod("broken"), node=node_name))
    result = await driver.sync()
    failed = [r for r in result.results if r.error]
    assert failed
    assert "CNI plugin bridge ADD failed (code" in failed[0].message
    warnings = [e for e in events.events if e[1] == "FailedCreatePodSandBox"]
    assert warnings
    assert "CNI plugin bridge ADD failed" in warnings[0][2]
    assert await docker.list_containers(labels={naming.LABEL_NODE: node_name}) == []
    assert net.cache_entries() == []


def _edit_conflist(net: Net, change: Callable[[dict[str, Any]], None]) -> None:
    path = net.conf_dir / "10-test.conflist"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


async def _manager(docker: DockerClient, node: str, net: Net) -> RuntimeManager:
    plugin = net.plugin(docker)
    await plugin.start()
    return RuntimeManager(
        RuntimeConfig(node_name=node, pause_image=PAUSE_IMAGE), docker=docker, network=plugin
    )


async def test_a_pod_asking_for_an_address_gets_it_from_debians_host_local(
    docker: DockerClient, node_name: str, net: Net
) -> None:
    _edit_conflist(net, lambda d: d["plugins"][0].update(capabilities={"ips": True}))
    rm = await _manager(docker, node_name, net)
    wanted = net.subnet.rsplit(".", 1)[0] + ".77"
    text = server_pod("fixed").replace(
        "metadata: {name: fixed}",
        f"metadata: {{name: fixed, annotations: {{{IPS_ANNOTATION}: '[\"{wanted}\"]'}}}}",
    )
    _, ip = await running_with_ip(rm, text, node_name)
    assert ip == wanted
    assert net.allocations() == [wanted]


async def test_the_pods_resolver_settings_reach_a_plugin_declaring_dns(
    docker: DockerClient, node_name: str, net: Net
) -> None:
    _edit_conflist(net, lambda d: d["plugins"][0].update(capabilities={"dns": True}))
    rm = await _manager(docker, node_name, net)
    text = server_pod("dnsed").replace(
        "  terminationGracePeriodSeconds: 1\n",
        "  terminationGracePeriodSeconds: 1\n"
        "  dnsPolicy: None\n"
        "  dnsConfig:\n"
        "    nameservers: [192.0.2.53]\n"
        "    searches: [a.example]\n"
        "    options: [{name: ndots, value: '2'}]\n",
    )
    await running_with_ip(rm, text, node_name)
    (entry,) = [json.loads(p.read_text()) for p in (net.state / "cni" / "results").iterdir()]
    assert entry["capabilityArgs"]["dns"] == {
        "servers": ["192.0.2.53"],
        "searches": ["a.example"],
        "options": ["ndots:2"],
    }
    sent = json.loads(base64.b64decode(entry["config"]))
    assert sent["plugins"][0]["capabilities"] == {"dns": True}


def _dual_stack(doc: dict[str, Any], subnet6: str) -> None:
    ipam = doc["plugins"][0]["ipam"]
    ipam["ranges"].append([{"subnet": subnet6}])
    ipam["routes"].append({"dst": "::/0"})


async def test_a_conflist_with_two_host_local_ranges_gives_dual_stack_pods_that_reach_each_other(
    docker: DockerClient, node_name: str, net: Net
) -> None:
    subnet6 = free_cidr_v6()
    _edit_conflist(net, lambda d: _dual_stack(d, subnet6))
    rm = await _manager(docker, node_name, net)
    driver = Driver(rm, pod_from(server_pod("ds-a"), node=node_name))
    status = await driver.until(lambda s: s.phase == "Running" and len(s.podIPs or []) == 2)
    ips = [ip.ip for ip in status.podIPs or []]
    assert ipaddress.ip_address(ips[0]).version == 4
    assert ipaddress.ip_address(ips[1]) in ipaddress.ip_network(subnet6)
    await running_with_ip(rm, server_pod("ds-b"), node_name)
    shell_b = await container_id(docker, node_name, "ds-b", "shell")
    assert "hi-from-ds-a" in await fetch_in(docker, shell_b, ips[1], 8080)
    assert driver.runtime is not None
    await rm.kill_pod(driver.pod)
    await rm.remove_pod(uid=driver.runtime.uid)
    assert ips[1] not in net.allocations()


async def test_debians_plugins_stop_at_1_0_so_the_sweep_falls_back_to_del_without_gc(
    docker: DockerClient, node_name: str, net: Net
) -> None:
    sandbox = await start_pause(docker, node_name)
    plugin = net.plugin(docker)
    await plugin.setup_pod(await _request(docker, sandbox))
    await docker.remove_container(sandbox, force=True)
    restarted = net.plugin(docker)
    assert "1.1.0" not in await restarted.plugin_versions("bridge")
    assert "1.0.0" in await restarted.plugin_versions("bridge")
    assert await restarted.sweep() == [sandbox]
    assert await restarted.gc() == []
    assert await restarted.status() == (True, "")
    assert net.allocations() == []
    assert net.cache_entries() == []


async def test_a_dual_stack_attachment_whose_sandbox_is_gone_leaves_no_ipv6_nat_rule(
    docker: DockerClient, node_name: str, net: Net
) -> None:
    subnet6 = free_cidr_v6()
    _edit_conflist(net, lambda d: _dual_stack(d, subnet6))
    sandbox = await start_pause(docker, node_name)
    network = await net.plugin(docker).setup_pod(await _request(docker, sandbox))
    assert len(network.ips) == 2
    assert sandbox in _ip6tables()
    await docker.remove_container(sandbox, force=True)
    await net.plugin(docker).start()
    assert sandbox not in _ip6tables()
    assert sandbox not in _iptables()
    assert net.allocations() == []


def _ip6tables() -> str:
    return subprocess.run(["ip6tables-save"], capture_output=True, text=True).stdout


async def test_a_host_port_answers_on_the_nodes_address_through_portmap(
    rm: RuntimeManager, node_name: str
) -> None:
    node_ip = node_address()
    port = random.randint(20000, 49999)
    await running_with_ip(rm, server_pod("hpn", host_port=port), node_name)
    text = await anyio.to_thread.run_sync(fetch, f"http://{node_ip}:{port}/index.html")
    assert text == "hi-from-hpn\n"


async def test_200_create_delete_cycles_never_share_an_address_and_leak_nothing(
    docker: DockerClient, node_name: str, net: Net
) -> None:
    plugin = net.plugin(docker)
    await plugin.start()

    async def request(cycle: int) -> PodNetworkRequest:
        sandbox = await start_pause(docker, node_name)
        return await _request(docker, sandbox, (PortMapping(8080, 50000 + cycle),))

    done = await churn(plugin, request=request, remove=partial(remove_container, docker))
    rules = _iptables()
    assert [s for s in done.sandboxes if s in rules] == []
    assert net.allocations() == []
    assert net.cache_entries() == []
    assert await _bridge_ports(net.bridge) == []
