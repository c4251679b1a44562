"""A node over a fake engine serving its API to an in-process client, for the tests of
the local API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from apply_helpers import post_apply
from daemon_helpers import IMAGES

from asynckubelet.api.localapi import create_local_app
from asynckubelet.node.kubelet import API_SOURCE, Kubelet, KubeletConfig
from asynckubelet.node.objects import OBJECTS_DIR, ObjectStore
from asynckubelet.testing import FakeDocker

Client = TestClient[Any, Any]

PLAIN = """\
apiVersion: v1
kind: Pod
metadata: {name: NAME, namespace: NS}
spec:
  containers:
  - {name: app, image: busybox:1.35}
"""


def plain(name: str, namespace: str = "default") -> str:
    """A one-container pod ``name`` of ``namespace``."""
    return PLAIN.replace("NAME", name).replace("NS", namespace)


@asynccontextmanager
async def serving(tmp_path: Path) -> AsyncIterator[tuple[Client, Kubelet]]:
    """A node whose state is under ``tmp_path``, and a client of its API."""
    state = tmp_path / "state"
    config = KubeletConfig(
        node_name="n1", state_dir=state, housekeeping_period=3600, resync_period=0.2
    )
    objects = ObjectStore(directory=state / OBJECTS_DIR, persistent_source=API_SOURCE)
    node = Kubelet(config, docker=FakeDocker(images=IMAGES), objects=objects)
    async with node, TestClient(TestServer(create_local_app(node, uids=()))) as client:
        yield client, node


async def apply(client: Client, *texts: str) -> tuple[int, dict[str, Any]]:
    """POST an Apply of ``texts``: the status code and the body."""
    return await post_apply(client, *texts)
