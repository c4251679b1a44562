from collections.abc import Iterator
from pathlib import Path

from integration.harness import (
    built_images_removed,
    docker,
    docker_engine,
    node_instance,
    node_name,
    test_images,
)
from integration.remote_helpers import remote_daemon, remote_node
from integration.timing import pytest_report_teststatus

__all__ = [
    "built_images_removed",
    "docker",
    "docker_engine",
    "node_instance",
    "node_name",
    "pytest_report_teststatus",
    "remote_daemon",
    "remote_node",
    "test_images",
]


import pytest

from asynckubelet.network.bridge import DEFAULT_BRIDGE, DEFAULT_POD_CIDR
from integration.network_helpers import NodeNetwork


@pytest.fixture(scope="session", autouse=True)
def default_node_network_left_as_found() -> Iterator[None]:
    """The tests that ``run`` a pod with the default network make the default node network
    (its bridge, firewall chains and address records), which ``run`` keeps for the next pod
    as Docker keeps ``docker0``; a session that found none removes the one its tests made."""
    bridge = Path("/sys/class/net") / DEFAULT_BRIDGE
    existed = bridge.exists()
    yield
    if not existed and bridge.exists():
        NodeNetwork(DEFAULT_BRIDGE, DEFAULT_POD_CIDR).remove()


@pytest.fixture(scope="session", autouse=True)
def session_instance(node_instance: str) -> str:
    """Every test runs in the session's node instance (see :func:`harness.node_instance`)."""
    return node_instance


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.integration)
