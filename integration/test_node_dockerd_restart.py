"""A node survives a restart of its Docker engine.

A private dockerd (its own short socket, data root and exec root, ``--bridge=none``,
live-restore off, removed afterwards) runs a pod for a ``Kubelet``; the daemon is stopped
and started again. Without live-restore the pod's containers die with the daemon, so the
node must notice on its own: the PLEG's event stream reconnects with backoff, its relist
wakes the pod worker, the pod is restarted and Running again, and later Docker events
reach the worker through the new stream (relist and resync are set far beyond the test,
so nothing else could wake it).
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from lightkube.models.core_v1 import Pod

from asynckubelet.docker import DockerClient
from asynckubelet.docker.engine import Dockerd
from asynckubelet.images import build as image_build
from asynckubelet.manifests import load_manifests_text
from asynckubelet.node.kubelet import Kubelet, KubeletConfig
from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE, remove_node_state

pytestmark = pytest.mark.anyio

POD = textwrap.dedent(
    f"""
    apiVersion: v1
    kind: Pod
    metadata: {{name: survivor}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
        - name: app
          image: {BUSYBOX_IMAGE}
          command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
    """
)
FAR = 3600.0


@pytest.fixture
async def dockerd() -> AsyncIterator[Dockerd]:
    """A private engine with the test images, stopped and removed afterwards."""
    if os.geteuid() != 0 or shutil.which("dockerd") is None:
        pytest.skip("needs root and dockerd to start a private engine")
    root = Path(tempfile.mkdtemp(prefix="akr-", dir="/tmp"))
    daemon = Dockerd(root=root, socket_path=root / "d.sock", name=f"akltest-{secrets.token_hex(4)}")
    try:
        await anyio.to_thread.run_sync(daemon.start)
        async with DockerClient(url=daemon.url) as client:
            await image_build.build_busybox_image(client, tag=BUSYBOX_IMAGE)
            await image_build.build_pause_image(client, tag=PAUSE_IMAGE)
        yield daemon
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(lambda: daemon.stop(remove=True))


def _app(pod: Pod | None) -> tuple[str, int, bool]:
    """(container id, restart count, running) of the pod's app container."""
    assert pod is not None
    assert pod.status is not None
    (status,) = pod.status.containerStatuses or []
    running = status.state is not None and status.state.running is not None
    return status.containerID or "", status.restartCount, running


async def test_after_a_dockerd_restart_the_pod_runs_again_and_events_wake_its_worker(
    dockerd: Dockerd, node_name: str
) -> None:
    config = KubeletConfig(
        node_name=node_name,
        pause_image=PAUSE_IMAGE,
        docker_url=dockerd.url,
        relist_period=FAR,
        resync_period=FAR,
        housekeeping_period=FAR,
    )
    (pod,) = load_manifests_text(POD, source_name="survivor", node_name=node_name).pods
    try:
        async with Kubelet(config) as node:
            await node.apply(pod)
            ready = await node.wait("default", "survivor", "Ready", timeout=60)
            before, _, _ = _app(ready)

            await anyio.to_thread.run_sync(lambda: dockerd.stop(remove=False))
            await anyio.to_thread.run_sync(dockerd.start)

            def restarted(p: Pod | None) -> bool:
                if p is None or p.status is None or not p.status.containerStatuses:
                    return False
                cid, restarts, running = _app(p)
                return running and cid != before and restarts >= 1

            again = await node.wait("default", "survivor", restarted, timeout=120)
            assert node.pleg.reconnects >= 1
            after, restarts, _ = _app(again)

            async with DockerClient(url=dockerd.url) as client:
                await client.kill_container(after.removeprefix("docker://"))

            def saw_the_kill(p: Pod | None) -> bool:
                if p is None or p.status is None or not p.status.containerStatuses:
                    return False
                _, count, running = _app(p)
                return not running or count > restarts

            await node.wait("default", "survivor", saw_the_kill, timeout=60)
            assert node.pleg.connected
    finally:
        remove_node_state(node_name)
