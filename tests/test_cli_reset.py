"""``asynckubelet reset``: which pods still use the node's network, and the ``docker``
backend's network removed only when it is the node's own and empty."""

from __future__ import annotations

import pytest
import typer

from asynckubelet.cli.commands.reset import (
    DELETE_HINT,
    NAMED_AT_MOST,
    _in_use,
    _remove_docker_network,
)
from asynckubelet.docker.labels import LABEL_NODE
from asynckubelet.network.dockernet import DockerNetworkPlugin
from asynckubelet.runtime import naming
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio


def _sandbox(docker: FakeDocker, name: str, namespace: str = "default") -> str:
    labels = {naming.LABEL_POD_NAME: name, naming.LABEL_POD_NAMESPACE: namespace}
    return docker.add_container(labels=labels, state="running").id


async def test_the_pods_holding_addresses_are_named_by_namespace_and_name() -> None:
    docker = FakeDocker()
    sandboxes = [_sandbox(docker, "web"), _sandbox(docker, "db", "shop")]
    assert await _in_use(docker, "bridge akl0", sandboxes) == (
        "bridge akl0 is in use by pods default/web, shop/db: delete them first" + DELETE_HINT
    )


async def test_a_sandbox_the_engine_does_not_know_is_named_by_its_id() -> None:
    docker = FakeDocker()
    gone = "f" * 64
    assert await _in_use(docker, "bridge akl0", [_sandbox(docker, "web"), gone]) == (
        f"bridge akl0 is in use by pods default/web, sandbox {'f' * 12}: delete them first"
        + DELETE_HINT
    )


async def test_past_the_first_few_the_rest_are_counted() -> None:
    docker = FakeDocker()
    sandboxes = [_sandbox(docker, f"p{i}") for i in range(NAMED_AT_MOST + 3)]
    named = ", ".join(f"default/p{i}" for i in range(NAMED_AT_MOST))
    assert await _in_use(docker, "bridge akl0", sandboxes) == (
        f"bridge akl0 is in use by pods {named} and 3 more: delete them first" + DELETE_HINT
    )


# -- the docker backend's network ------------------------------------------------------------


def _plugin(docker: FakeDocker) -> DockerNetworkPlugin:
    return DockerNetworkPlugin(docker=docker, node_name="n1")


async def test_the_nodes_empty_docker_network_is_removed() -> None:
    docker = FakeDocker()
    await docker.create_network("akl-n1", labels={LABEL_NODE: "n1"})
    assert await _remove_docker_network(docker, _plugin(docker)) == "removed Docker network akl-n1"
    assert docker.networks == {}


async def test_a_docker_network_with_a_sandbox_on_it_stays_and_its_pod_is_named() -> None:
    docker = FakeDocker()
    await docker.create_network("akl-n1", labels={LABEL_NODE: "n1"})
    docker.networks["akl-n1"]["Containers"] = {_sandbox(docker, "web"): {}}
    with pytest.raises(typer.TyperException) as raised:
        await _remove_docker_network(docker, _plugin(docker))
    assert str(raised.value) == (
        "Docker network akl-n1 is in use by pods default/web: delete them first" + DELETE_HINT
    )
    assert "akl-n1" in docker.networks


async def test_a_docker_network_of_that_name_another_node_made_is_left_alone() -> None:
    docker = FakeDocker()
    await docker.create_network("akl-n1", labels={LABEL_NODE: "other"})
    with pytest.raises(typer.TyperException) as raised:
        await _remove_docker_network(docker, _plugin(docker))
    assert str(raised.value) == (
        "Docker network akl-n1 is not node n1's (label io.asynckubelet.node='other'): left as it is"
    )
    assert "akl-n1" in docker.networks


async def test_no_docker_network_is_nothing_to_remove() -> None:
    docker = FakeDocker()
    assert await _remove_docker_network(docker, _plugin(docker)) == (
        "no Docker network akl-n1 on the engine: nothing to remove"
    )
