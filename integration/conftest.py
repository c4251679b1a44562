from integration.harness import (
    docker,
    docker_engine,
    node_name,
    test_images,
)

__all__ = ["docker", "docker_engine", "node_name", "test_images"]


import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.integration)
