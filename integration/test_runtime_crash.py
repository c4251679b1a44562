"""Crash safety: a process killed at any instant inside sync_pod or kill_pod leaves state
that the next sync converges from, with no duplicate sandbox or container."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import anyio
import pytest
from lightkube.models.core_v1 import PodStatus

from asynckubelet.docker import DockerClient
from asynckubelet.runtime.kill import MINIMUM_GRACE_PERIOD
from asynckubelet.runtime.types import ContainerState, SandboxState
from integration.harness import BUSYBOX_IMAGE, Engine
from integration.runtime_helpers import Driver, manager, pod_from

REPO = Path(__file__).resolve().parent.parent
TRIALS = 20
MANIFEST = """
apiVersion: v1
kind: Pod
metadata: {name: crashy}
spec:
  terminationGracePeriodSeconds: 1
  initContainers:
    - {name: init, image: BUSYBOX, command: ["true"]}
    - name: sidecar
      image: BUSYBOX
      restartPolicy: Always
      command: ["sleep", "600"]
  containers:
    - {name: a, image: BUSYBOX, command: ["sleep", "600"]}
    - {name: b, image: BUSYBOX, command: ["sleep", "600"]}
"""


def _converged(status: PodStatus) -> bool:
    apps = status.containerStatuses or []
    sidecars = [c for c in status.initContainerStatuses or [] if c.name == "sidecar"]
    return (
        len(apps) == 2
        and all(c.ready for c in apps)
        and len(sidecars) == 1
        and sidecars[0].state is not None
        and sidecars[0].state.running is not None
    )


def _kill_worker_at_random(manifest: Path, node: str, rng: random.Random) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "integration.crash_worker", node, str(manifest)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 1.5))
    finally:
        proc.kill()
        proc.communicate(timeout=30)


def test_a_pod_converges_after_its_syncing_process_is_killed_at_random_points(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    manifest = tmp_path / "crashy.yaml"
    manifest.write_text(MANIFEST.replace("BUSYBOX", BUSYBOX_IMAGE))
    pod = pod_from(MANIFEST, node=node_name)
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    names = ["sidecar", "a", "b"]

    async def converge_and_check() -> None:
        async with DockerClient() as client, manager(client, node_name) as rm:
            driver = Driver(rm, pod)
            await driver.until(_converged, timeout=60)
            # A stop the killed process sent still lands up to the minimum grace later.
            await anyio.sleep(MINIMUM_GRACE_PERIOD + 0.5)
            driver.status = None
            await driver.until(_converged, timeout=60)
            runtime = await rm.get_status_of(pod)
            ready = [s for s in runtime.sandboxes if s.state is SandboxState.READY]
            assert len(ready) == 1, runtime.sandboxes
            running = Counter(
                c.name for c in runtime.containers if c.state is ContainerState.RUNNING
            )
            assert running == Counter(names), runtime.containers
            for c in runtime.containers:
                if c.state is ContainerState.RUNNING:
                    assert c.sandbox_id == ready[0].id
            attempts = Counter((c.name, c.restart_count) for c in runtime.containers)
            assert max(attempts.values()) == 1
            assert len({s.attempt for s in runtime.sandboxes}) == len(runtime.sandboxes)
            for name in names:
                instances = [c for c in runtime.containers if c.name == name]
                newest = max(instances, key=lambda c: c.created_at)
                assert newest.restart_count == max(c.restart_count for c in instances)
            await rm.garbage_collect(runtime)
            after = await rm.get_status_of(pod)
            dead = Counter(
                c.name for c in after.containers if c.state is not ContainerState.RUNNING
            )
            assert all(n <= 1 for n in dead.values()), dead

    for _ in range(TRIALS):
        _kill_worker_at_random(manifest, node_name, rng)
        anyio.run(converge_and_check)


@pytest.mark.anyio
async def test_a_cancelled_sync_leaves_no_half_made_container_or_sandbox(
    docker: DockerClient, node_name: str
) -> None:
    pod = pod_from(MANIFEST, node=node_name)
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    async with manager(docker, node_name) as rm:
        for _ in range(TRIALS):
            await rm.kill_pod(pod, grace_period=0)
            with anyio.move_on_after(rng.uniform(0.0, 0.8)):
                while True:
                    await rm.sync_pod(pod)
                    await anyio.sleep(0.01)
            rows = await docker.list_containers(labels={"io.asynckubelet.node": node_name})
            states = Counter(str(r.get("State")) for r in rows)
            assert states["created"] == 0, rows
        driver = Driver(rm, pod)
        await driver.until(_converged, timeout=60)
