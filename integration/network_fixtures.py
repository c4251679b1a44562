"""Fixtures of the network tests; a module loads them with ``pytest_plugins``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from asynckubelet.docker import DockerClient
from asynckubelet.network.bridge import BridgePlugin
from asynckubelet.network.factory import make_network_plugin
from integration.harness import remove_owned
from integration.network_helpers import bridge_name, free_cidr


@pytest.fixture
async def plugin(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> AsyncIterator[BridgePlugin]:
    """A started bridge backend of the test's own; removed with its pods afterwards."""
    made = make_network_plugin(
        "bridge",
        docker=docker,
        state_dir=tmp_path / "net",
        bridge=bridge_name(node_name),
        pod_cidr=free_cidr(),
    )
    assert isinstance(made, BridgePlugin)
    await made.start()
    try:
        yield made
    finally:
        with anyio.CancelScope(shield=True):
            await remove_owned(docker, node_name)
            await made.remove_node_network()
