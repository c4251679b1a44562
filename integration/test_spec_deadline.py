"""activeDeadlineSeconds on real Docker: the running pod is stopped and failed."""

from __future__ import annotations

from pathlib import Path

import pytest

from asynckubelet.docker import DockerClient
from integration.spec_helpers import run_manifest

pytestmark = pytest.mark.anyio


async def test_a_pod_running_past_its_deadline_is_killed_and_failed_with_deadline_exceeded(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = """
apiVersion: v1
kind: Pod
metadata: {name: deadline}
spec:
  activeDeadlineSeconds: 2
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: BUSYBOX
    command: [sleep, "3600"]
"""
    run = await run_manifest(docker, text, node=node_name, root=tmp_path)
    status = run.outcome.status
    assert status is not None
    assert (status.phase, status.reason) == ("Failed", "DeadlineExceeded")
    assert (
        "Normal",
        "DeadlineExceeded",
        "Pod was active on the node longer than the specified deadline",
    ) in run.events
    assert "Killing" in run.reasons()
