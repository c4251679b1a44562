"""The ``docker`` backend: pods on a Docker-managed network of the node, hostPorts
published by Docker, through the runtime."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import anyio
import pytest

from asynckubelet import errors
from asynckubelet.docker import DockerClient
from asynckubelet.network import PodNetworkRequest
from asynckubelet.network.dockernet import DockerNetworkPlugin, network_name
from asynckubelet.network.factory import make_network_plugin
from asynckubelet.runtime import naming
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE, remove_owned
from integration.network_helpers import (
    churn,
    container_id,
    fetch,
    fetch_in,
    kill_setup_worker_after,
    node_address,
    pod_from,
    remove_container,
    running_with_ip,
    server_pod,
)
from integration.runtime_helpers import Driver

pytestmark = pytest.mark.anyio


@pytest.fixture
async def plugin(docker: DockerClient, node_name: str) -> AsyncIterator[DockerNetworkPlugin]:
    made = make_network_plugin("docker", docker=docker, node_name=node_name)
    assert isinstance(made, DockerNetworkPlugin)
    try:
        yield made
    finally:
        with anyio.CancelScope(shield=True):
            await remove_owned(docker, node_name)
            await made.remove_network()


@pytest.fixture
async def rm(
    docker: DockerClient, node_name: str, plugin: DockerNetworkPlugin
) -> AsyncIterator[RuntimeManager]:
    async with RuntimeManager(
        RuntimeConfig(node_name=node_name, pause_image=PAUSE_IMAGE), docker=docker, network=plugin
    ) as manager:
        yield manager


async def test_the_nodes_network_is_made_on_demand_and_labelled_with_the_node(
    rm: RuntimeManager, docker: DockerClient, node_name: str
) -> None:
    info = await docker.inspect_network(network_name(node_name))
    assert info["Labels"] == {naming.LABEL_NODE: node_name}
    assert info["Driver"] == "bridge"


async def test_two_pods_reach_each_other_by_pod_ip(
    rm: RuntimeManager, docker: DockerClient, node_name: str
) -> None:
    _, ip_a = await running_with_ip(rm, server_pod("a"), node_name)
    _, ip_b = await running_with_ip(rm, server_pod("b"), node_name)
    assert ip_a != ip_b
    assert "hi-from-a" in await fetch_in(
        docker, await container_id(docker, node_name, "b", "shell"), ip_a, 8080
    )


async def test_the_sandbox_is_on_the_nodes_network_and_containers_join_it(
    rm: RuntimeManager, docker: DockerClient, node_name: str
) -> None:
    driver, _ = await running_with_ip(rm, server_pod("joined"), node_name)
    assert driver.runtime is not None
    sandbox = await docker.inspect_container(driver.runtime.sandboxes[0].id)
    assert sandbox["HostConfig"]["NetworkMode"] == network_name(node_name)
    shell = await container_id(docker, node_name, "joined", "shell")
    assert "hi-from-joined" in await fetch_in(docker, shell, "127.0.0.1", 8080)


async def test_a_host_port_is_published_by_docker_and_answers_on_127_0_0_1(
    rm: RuntimeManager, docker: DockerClient, node_name: str
) -> None:
    port = random.randint(20000, 49999)
    driver, _ = await running_with_ip(rm, server_pod("hp", host_port=port), node_name)
    assert driver.runtime is not None
    sandbox = await docker.inspect_container(driver.runtime.sandboxes[0].id)
    assert sandbox["HostConfig"]["PortBindings"] == {
        "8080/tcp": [{"HostIp": "", "HostPort": str(port)}]
    }
    text = await anyio.to_thread.run_sync(fetch, f"http://127.0.0.1:{port}/index.html")
    assert text == "hi-from-hp\n"


async def test_after_pod_deletion_no_docker_network_endpoint_remains(
    rm: RuntimeManager, docker: DockerClient, node_name: str
) -> None:
    driver, _ = await running_with_ip(rm, server_pod("gone"), node_name)
    assert driver.runtime is not None
    before = await docker.inspect_network(network_name(node_name))
    assert len(before["Containers"]) == 1
    await rm.kill_pod(driver.pod)
    await rm.remove_pod(uid=driver.runtime.uid)
    after = await docker.inspect_network(network_name(node_name))
    assert after["Containers"] == {}


async def test_a_same_named_network_of_someone_else_is_refused(
    docker: DockerClient, node_name: str
) -> None:
    name = network_name(node_name)
    await docker.create_network(name, labels={})
    try:
        plugin = DockerNetworkPlugin(docker=docker, node_name=node_name)
        with pytest.raises(errors.NetworkError, match="exists but is not node"):
            await plugin.start()
    finally:
        await docker.remove_network(name)


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
    assert driver.runtime is not None
    sandbox = await docker.inspect_container(driver.runtime.sandboxes[0].id)
    assert sandbox["HostConfig"]["NetworkMode"] == "host"
    shell = await container_id(docker, node_name, "hostnet", "shell")
    assert await _mac_in(docker, shell) == await _host_mac()


async def _mac_in(docker: DockerClient, cid: str) -> str:
    cmd = ["cat", "/sys/class/net/eth0/address"]
    return (await docker.exec_run(cid, cmd, timeout=10)).stdout.decode().strip()


async def _host_mac() -> str:
    return (await anyio.Path("/sys/class/net/eth0/address").read_text()).strip()


async def test_a_host_port_answers_on_the_nodes_address(rm: RuntimeManager, node_name: str) -> None:
    node_ip = node_address()
    port = random.randint(20000, 49999)
    await running_with_ip(rm, server_pod("hpn", host_port=port), node_name)
    text = await anyio.to_thread.run_sync(fetch, f"http://{node_ip}:{port}/index.html")
    assert text == "hi-from-hpn\n"


async def _pause_on(docker: DockerClient, node: str, network: str) -> str:
    cid = await docker.create_container(
        {
            "Image": PAUSE_IMAGE,
            "Labels": {naming.LABEL_NODE: node},
            "HostConfig": {"NetworkMode": network},
        },
        name=f"{node}-pause-{random.randint(0, 10**9)}",
    )
    await docker.start_container(cid)
    return cid


def _request(sandbox: str) -> PodNetworkRequest:
    return PodNetworkRequest(
        sandbox_id=sandbox, pod_name="p", namespace="default", uid="u", netns_path=""
    )


async def test_200_create_delete_cycles_never_share_an_address_and_leak_nothing(
    plugin: DockerNetworkPlugin, docker: DockerClient, node_name: str
) -> None:
    await plugin.start()

    async def request(cycle: int) -> PodNetworkRequest:
        return _request(await _pause_on(docker, node_name, plugin.network))

    await churn(plugin, request=request, remove=partial(remove_container, docker))
    assert (await docker.inspect_network(plugin.network))["Containers"] == {}
    assert await docker.list_containers(labels={naming.LABEL_NODE: node_name}) == []


async def test_an_agent_killed_during_pod_setup_leaks_nothing_after_restart(
    docker: DockerClient, node_name: str, plugin: DockerNetworkPlugin, tmp_path: Path
) -> None:
    manifest = tmp_path / "pod.yaml"
    text = server_pod("killed", host_port=random.randint(20000, 49999))
    manifest.write_text(text.replace("BUSYBOX", BUSYBOX_IMAGE))
    rng = random.Random()
    for trial in range(10):
        spec = {"backend": "docker", "node": node_name, "manifest": str(manifest)}
        await kill_setup_worker_after(spec, delay=rng.uniform(0, 0.3))
        # A request the killed agent had sent may still be carried out by the engine (a
        # sandbox created after the new agent listed): the new agent's housekeeping removes
        # what it sees later, as the node's does when its PLEG sees a container nobody wants.
        deadline = anyio.current_time() + 60
        while True:
            async with RuntimeManager(
                RuntimeConfig(node_name=node_name, pause_image=PAUSE_IMAGE),
                docker=docker,
                network=plugin,
            ) as again:
                for uid in await again.list_pod_uids():
                    status = await again.get_pod_status(uid=uid, name="killed", namespace="default")
                    await again.kill_pod(None, status, grace_period=0)
                    await again.remove_pod(uid=uid)
            left = await docker.list_containers(labels={naming.LABEL_NODE: node_name})
            attached = (await docker.inspect_network(plugin.network))["Containers"]
            if not left and not attached:
                break
            assert anyio.current_time() < deadline, f"trial {trial}: {left} {attached}"
            await anyio.sleep(1)
