"""A pod deleted (or a run stopped) while its containers are being created ends with no
container: Docker cannot cancel a create, so whatever a create in flight makes must be found
and removed by the deletion, never left in state ``Created``.

Each test sweeps the moment of deletion across the pod's start-up (sandbox, then two app
containers whose creation is slowed by a large environment), so some deletions land before,
some during and some after each create.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import builders
import pytest
import yaml

from asynckubelet import KubeletConfig, errors
from asynckubelet.docker import ContainerConfig, DockerClient
from asynckubelet.manifests import load_manifests_text
from asynckubelet.node import Kubelet
from asynckubelet.node.foreground import run_pods
from asynckubelet.node.runner import RunOptions
from asynckubelet.runtime import naming
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE, Engine

pytestmark = pytest.mark.anyio

DELAYS = [i * 0.05 for i in range(14)]
"""Seconds between asking for the pod and deleting it: 0 to 0.65, past its start-up."""


def _pod_text(name: str) -> str:
    env = [{"name": f"VAR_{i}", "value": "x" * 200} for i in range(400)]
    loop = "trap 'exit 0' TERM; while true; do sleep 0.2; done"
    containers = [
        builders.container(c, BUSYBOX_IMAGE, command=["sh", "-c", loop], env=env)
        for c in ("a", "b")
    ]
    return yaml.safe_dump(
        builders.pod_doc(name, containers=containers, terminationGracePeriodSeconds=1)
    )


async def _left(docker: DockerClient, node: str) -> list[str]:
    rows = await docker.list_containers(labels={naming.LABEL_NODE: node})
    return [f"{(r.get('Names') or ['?'])[0]} {r.get('State')}" for r in rows]


async def test_a_pod_deleted_during_its_container_creation_leaves_no_container(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    config = KubeletConfig(
        node_name=node_name,
        pause_image=PAUSE_IMAGE,
        state_dir=tmp_path / "state",
        housekeeping_period=3600,
    )
    async with Kubelet(config, docker=docker) as node:
        for i, delay in enumerate(DELAYS):
            name = f"race-{i}"
            manifests = load_manifests_text(_pod_text(name), node_name=node_name)
            await node.apply(manifests)
            await anyio.sleep(delay)
            assert await node.delete("default", name, grace_period=0)
            assert await _left(docker, node_name) == [], f"after deleting at {delay:.2f}s"


async def test_a_run_cancelled_during_container_creation_leaves_no_container(
    docker: DockerClient, node_name: str
) -> None:
    config = RuntimeConfig(node_name=node_name, pause_image=PAUSE_IMAGE)
    async with RuntimeManager(config, docker=docker) as rm:
        for i, delay in enumerate(DELAYS):
            manifests = load_manifests_text(_pod_text(f"cut-{i}"), node_name=node_name)
            with anyio.move_on_after(delay):
                await run_pods(rm, manifests.pods, options=RunOptions(grace_period=0))
            assert await _left(docker, node_name) == [], f"after cancelling at {delay:.2f}s"


class LostAnswer(DockerClient):
    """Docker makes the first app container, but its answer never reaches the agent (a
    connection reset after the daemon acted), as for a create cut off in flight."""

    lost = False

    async def create_container(self, config: ContainerConfig, *, name: str) -> str:
        cid = await super().create_container(config, name=name)
        labels = config.get("Labels") or {}
        if labels.get(naming.LABEL_TYPE) == naming.TYPE_CONTAINER and not self.lost:
            self.lost = True
            raise errors.RuntimeUnavailable(f"create container {name}: connection reset")
        return cid


async def test_a_create_whose_answer_was_lost_leaves_no_container_behind(
    docker: DockerClient, node_name: str, docker_engine: Engine
) -> None:
    (pod,) = load_manifests_text(_pod_text("lost"), node_name=node_name).pods
    config = RuntimeConfig(node_name=node_name, pause_image=PAUSE_IMAGE)
    async with (
        LostAnswer(url=docker_engine.url, retry_attempts=1) as client,
        RuntimeManager(config, docker=client) as rm,
    ):
        result = await rm.sync_pod(pod)
    assert [str(e.error) for e in result.errors] == ["CreateContainerError"]
    rows = await docker.list_containers(
        labels={naming.LABEL_NODE: node_name, naming.LABEL_TYPE: naming.TYPE_CONTAINER}
    )
    assert [r["State"] for r in rows] == ["running"], "only the container whose answer came"
