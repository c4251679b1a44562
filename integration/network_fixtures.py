"""Fixtures of the network tests; a module loads them with ``pytest_plugins``.

``plugin`` is a bridge backend; ``backend_plugin`` is each of bridge, cni (Debian's
plugins) and docker in turn, for tests of rules every backend must honour.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from pyroute2 import AsyncIPRoute

from asynckubelet.docker import DockerClient
from asynckubelet.network import NetworkPlugin
from asynckubelet.network.bridge import BridgePlugin
from asynckubelet.network.cni import CNIPlugin
from asynckubelet.network.dockernet import DockerNetworkPlugin
from asynckubelet.network.factory import make_network_plugin
from integration.harness import remove_owned
from integration.network_helpers import bridge_name, cni_conflist, free_cidr


@pytest.fixture
def firewall() -> str:
    """The bridge backend's firewall; a test parametrizes ``firewall`` to run on nftables."""
    return "iptables"


@pytest.fixture
async def plugin(
    docker: DockerClient, node_name: str, tmp_path: Path, firewall: str
) -> AsyncIterator[BridgePlugin]:
    """A started bridge backend of the test's own; removed with its pods afterwards."""
    made = make_network_plugin(
        "bridge",
        docker=docker,
        state_dir=tmp_path / "net",
        bridge=bridge_name(node_name),
        pod_cidr=free_cidr(),
        firewall=firewall,
    )
    assert isinstance(made, BridgePlugin)
    await made.start()
    try:
        yield made
    finally:
        with anyio.CancelScope(shield=True):
            await remove_owned(docker, node_name)
            await made.remove_node_network()


def _needs_root_and_plugins(backend: str) -> None:
    if backend != "docker" and os.geteuid() != 0:
        pytest.skip(f"the {backend} backend needs root")
    if backend == "cni" and not Path("/usr/lib/cni/bridge").exists():
        pytest.skip("no CNI plugins in /usr/lib/cni")


@pytest.fixture(params=["bridge", "cni", "docker"])
async def backend_plugin(
    request: pytest.FixtureRequest, docker: DockerClient, node_name: str, tmp_path: Path
) -> AsyncIterator[NetworkPlugin]:
    """A started backend of each kind in turn, of the test's own; removed afterwards."""
    backend = str(request.param)
    _needs_root_and_plugins(backend)
    made: NetworkPlugin
    if backend == "bridge":
        made = make_network_plugin(
            "bridge",
            docker=docker,
            state_dir=tmp_path / "net",
            bridge=bridge_name(node_name),
            pod_cidr=free_cidr(),
        )
    elif backend == "cni":
        conf_dir = tmp_path / "net.d"
        conf_dir.mkdir()
        doc = cni_conflist(
            name=f"akn-{node_name[-10:]}",
            bridge=f"akn{node_name[-10:]}",
            subnet=free_cidr(),
            data_dir=tmp_path / "ipam",
        )
        (conf_dir / "10-test.conflist").write_text(json.dumps(doc))
        made = make_network_plugin(
            "cni", docker=docker, state_dir=tmp_path / "net", cni_conf_dirs=[conf_dir]
        )
    else:
        made = make_network_plugin("docker", docker=docker, node_name=node_name)
    await made.start()
    try:
        yield made
    finally:
        with anyio.CancelScope(shield=True):
            if isinstance(made, CNIPlugin):
                await _remove_cni(made, bridge=f"akn{node_name[-10:]}")
            await remove_owned(docker, node_name)
            if isinstance(made, BridgePlugin):
                await made.remove_node_network()
            elif isinstance(made, DockerNetworkPlugin):
                await made.remove_network()


async def _remove_cni(plugin: CNIPlugin, *, bridge: str) -> None:
    for sandbox in plugin.cached_sandboxes():
        await plugin.teardown_pod(sandbox_id=sandbox)
    await plugin.unguard_localnet()
    async with AsyncIPRoute() as ipr:
        found = await ipr.link_lookup(ifname=bridge)
        if found:
            await ipr.link("del", index=found[0])
