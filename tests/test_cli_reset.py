"""``asynckubelet reset``'s refusal: which pods still hold an address on the bridge."""

from __future__ import annotations

import pytest

from asynckubelet.cli.commands.reset import NAMED_AT_MOST, _in_use
from asynckubelet.runtime import naming
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio


def _sandbox(docker: FakeDocker, name: str, namespace: str = "default") -> str:
    labels = {naming.LABEL_POD_NAME: name, naming.LABEL_POD_NAMESPACE: namespace}
    return docker.add_container(labels=labels, state="running").id


async def test_the_pods_holding_addresses_are_named_by_namespace_and_name() -> None:
    docker = FakeDocker()
    sandboxes = [_sandbox(docker, "web"), _sandbox(docker, "db", "shop")]
    assert await _in_use(docker, "akl0", sandboxes) == (
        "bridge akl0 is in use by pods default/web, shop/db: delete them first"
    )


async def test_a_sandbox_the_engine_does_not_know_is_named_by_its_id() -> None:
    docker = FakeDocker()
    gone = "f" * 64
    assert await _in_use(docker, "akl0", [_sandbox(docker, "web"), gone]) == (
        f"bridge akl0 is in use by pods default/web, sandbox {'f' * 12}: delete them first"
    )


async def test_past_the_first_few_the_rest_are_counted() -> None:
    docker = FakeDocker()
    sandboxes = [_sandbox(docker, f"p{i}") for i in range(NAMED_AT_MOST + 3)]
    named = ", ".join(f"default/p{i}" for i in range(NAMED_AT_MOST))
    assert await _in_use(docker, "akl0", sandboxes) == (
        f"bridge akl0 is in use by pods {named} and 3 more: delete them first"
    )
