"""A node with its workload controllers and its local API, on the fake engine, for the
controllers' tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from aiohttp.test_utils import TestClient, TestServer
from daemon_helpers import IMAGES

from asynckubelet.api.localapi import create_local_app
from asynckubelet.node.kubelet import API_SOURCE, Kubelet, KubeletConfig
from asynckubelet.node.objects import OBJECTS_DIR, ObjectStore
from asynckubelet.testing import FakeDocker
from asynckubelet.workloads import WORKLOADS_SOURCE, Controllers

Client = TestClient[Any, Any]


@contextlib.asynccontextmanager
async def controllers_node(tmp_path: Path) -> AsyncIterator[tuple[Client, Kubelet, FakeDocker]]:
    """A node keeping its objects under ``tmp_path``, its controllers running, and a client
    of its local API; the fake engine holds the test images and ``busybox:2``."""
    state = tmp_path / "state"
    config = KubeletConfig(
        node_name="n1", state_dir=state, housekeeping_period=3600, resync_period=0.1
    )
    objects = ObjectStore(
        directory=state / OBJECTS_DIR,
        persistent_source=API_SOURCE,
        also_persistent=(WORKLOADS_SOURCE,),
    )
    docker = FakeDocker(images=(*IMAGES, "busybox:2"))
    node = Kubelet(config, docker=docker, objects=objects)
    async with (
        node,
        TestClient(TestServer(create_local_app(node, uids=()))) as client,
        anyio.create_task_group() as tg,
    ):
        await tg.start(Controllers(node).run)
        yield client, node, docker
        tg.cancel_scope.cancel()
