"""Two processes on one node and one engine: the pods ``run`` makes carry its owner mark,
and a node agent's housekeeping neither lists nor removes them (nor the reverse)."""

from __future__ import annotations

from pathlib import Path

import pytest
from daemon_helpers import IMAGES

from asynckubelet.manifests import load_manifests_text
from asynckubelet.node.kubelet import Kubelet, KubeletConfig
from asynckubelet.runtime import naming
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  containers: [{name: app, image: busybox:1.35}]
"""


async def test_a_node_agents_housekeeping_leaves_a_runs_pods_alone(tmp_path: Path) -> None:
    docker = FakeDocker(images=IMAGES)
    theirs = load_manifests_text(POD.replace("NAME", "job"), node_name="n1").pods[0]
    async with RuntimeManager(RuntimeConfig(node_name="n1", owner="run-1a2b"), docker=docker) as rm:
        await rm.sync_pod(theirs)
        await rm.sync_pod(theirs)
        made = {c.id for c in docker.containers.values()}
        assert {c.labels.get(naming.LABEL_OWNER) for c in docker.containers.values()} == {
            "run-1a2b"
        }
        async with Kubelet(
            KubeletConfig(node_name="n1", state_dir=tmp_path, housekeeping_period=3600),
            docker=docker,
        ) as node:
            assert await node.housekeeping() == []
            assert await node.runtime.list_pod_uids() == {}
        assert {c.id for c in docker.containers.values()} == made
        assert set(await rm.list_pod_uids()) == {theirs.metadata.uid if theirs.metadata else ""}


async def test_a_run_does_not_list_the_node_agents_pods(tmp_path: Path) -> None:
    docker = FakeDocker(images=IMAGES)
    config = KubeletConfig(
        node_name="n1", state_dir=tmp_path, housekeeping_period=3600, leave_running=True
    )
    async with Kubelet(config, docker=docker) as node:
        await node.apply(load_manifests_text(POD.replace("NAME", "web"), node_name="n1"))
        await node.wait("default", "web", "Running", timeout=10)
        async with RuntimeManager(
            RuntimeConfig(node_name="n1", owner="run-1a2b"), docker=docker
        ) as rm:
            assert await rm.list_pod_uids() == {}
            assert len(await rm.list_pod_uids(any_owner=True)) == 1
