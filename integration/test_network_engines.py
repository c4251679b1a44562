"""Two agents, two Docker engines, one node bridge: neither agent's start-up sweep releases
the other's pods.

The second engine is a private ``dockerd`` the test starts (``--bridge=none``, its own
socket and directories under a short /tmp path) and removes afterwards. Both agents use
the same bridge, pod CIDR and state directory, as two agents on one host configured alike
would; the IPAM is shared so addresses stay unique on the bridge.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from asynckubelet import errors
from asynckubelet.docker import DockerClient
from asynckubelet.docker.engine import Dockerd
from asynckubelet.images import build as image_build
from asynckubelet.network import PodNetworkRequest
from asynckubelet.network.bridge import BridgePlugin
from asynckubelet.network.factory import make_network_plugin
from asynckubelet.runtime import naming
from integration.harness import PAUSE_IMAGE, remove_owned
from integration.network_helpers import bridge_name, free_cidr

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(os.geteuid() != 0, reason="the bridge backend and dockerd need root"),
    pytest.mark.skipif(shutil.which("dockerd") is None, reason="dockerd is not installed"),
]


@pytest.fixture
async def second_docker(node_name: str) -> AsyncIterator[DockerClient]:
    """A private dockerd of the test's own, with the pause image; removed afterwards."""
    daemon = Dockerd(
        root=Path(tempfile.mkdtemp(prefix="akd-", dir="/tmp")),
        name=f"akltest-{node_name[-8:]}",
    )
    try:
        await anyio.to_thread.run_sync(daemon.start)
    except errors.RuntimeUnavailable as e:
        daemon.stop(remove=True)
        pytest.skip(f"cannot start a second dockerd: {e}")
    try:
        async with DockerClient(url=daemon.url) as client:
            await image_build.build_pause_image(client, tag=PAUSE_IMAGE)
            try:
                yield client
            finally:
                with anyio.CancelScope(shield=True):
                    await remove_owned(client, node_name)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(lambda: daemon.stop(remove=True))


def _agent(docker: DockerClient, *, bridge: str, cidr: str, state: Path) -> BridgePlugin:
    made = make_network_plugin(
        "bridge", docker=docker, state_dir=state, bridge=bridge, pod_cidr=cidr
    )
    assert isinstance(made, BridgePlugin)
    return made


async def _sandbox(docker: DockerClient, node: str) -> tuple[str, PodNetworkRequest]:
    cid = await docker.create_container(
        {
            "Image": PAUSE_IMAGE,
            "Labels": {naming.LABEL_NODE: node},
            "HostConfig": {"NetworkMode": "none"},
        },
        name=f"{node}-pause-{random.randint(0, 10**9)}",
    )
    await docker.start_container(cid)
    pid = int((await docker.inspect_container(cid))["State"]["Pid"])
    request = PodNetworkRequest(
        sandbox_id=cid,
        pod_name="p",
        namespace="default",
        uid="u",
        netns_path=f"/proc/{pid}/ns/net",
    )
    return cid, request


@pytest.fixture
async def agents(
    docker: DockerClient, second_docker: DockerClient, node_name: str, tmp_path: Path
) -> AsyncIterator[tuple[BridgePlugin, BridgePlugin]]:
    """Agent one on the development engine, agent two on the private one, one bridge."""
    bridge, cidr, state = bridge_name(node_name), free_cidr(), tmp_path / "net"
    one = _agent(docker, bridge=bridge, cidr=cidr, state=state)
    two = _agent(second_docker, bridge=bridge, cidr=cidr, state=state)
    await one.start()
    await two.start()
    try:
        yield one, two
    finally:
        with anyio.CancelScope(shield=True):
            await remove_owned(docker, node_name)
            await one.remove_node_network()


async def test_one_agents_sweep_keeps_the_address_of_another_engines_pod(
    agents: tuple[BridgePlugin, BridgePlugin],
    docker: DockerClient,
    second_docker: DockerClient,
    node_name: str,
) -> None:
    one, two = agents
    _, request = await _sandbox(second_docker, node_name)
    (address,) = (await two.setup_pod(request)).ips
    await one.start()
    assert await one.sweep() == []
    assert (await one.ipam.allocations()).get(address) == request.sandbox_id
    status = await two.get_pod_network_status(sandbox_id=request.sandbox_id)
    assert status is not None
    assert status.ips == (address,)


async def test_one_agents_sweep_still_releases_its_own_engines_gone_pod(
    agents: tuple[BridgePlugin, BridgePlugin],
    docker: DockerClient,
    second_docker: DockerClient,
    node_name: str,
) -> None:
    one, two = agents
    _, theirs = await _sandbox(second_docker, node_name)
    (their_address,) = (await two.setup_pod(theirs)).ips
    mine, request = await _sandbox(docker, node_name)
    (my_address,) = (await one.setup_pod(request)).ips
    await docker.remove_container(mine, force=True)
    assert await one.sweep() == [mine]
    allocations = await one.ipam.allocations()
    assert my_address not in allocations
    assert allocations[their_address] == theirs.sandbox_id


async def test_addresses_stay_unique_across_the_engines_sharing_a_bridge(
    agents: tuple[BridgePlugin, BridgePlugin],
    docker: DockerClient,
    second_docker: DockerClient,
    node_name: str,
) -> None:
    one, two = agents
    handed: list[str] = []
    for plugin, client in (
        (one, docker),
        (two, second_docker),
        (one, docker),
        (two, second_docker),
    ):
        _, request = await _sandbox(client, node_name)
        handed += (await plugin.setup_pod(request)).ips
    assert len(set(handed)) == 4
