"""``RestartAllContainers`` on the real engine: a container exiting with a code its rule
names restarts the whole pod in place. The sandbox (its ID and the pod IP) and the pod's
volumes stay; every container is removed and started again, init containers first, each
one restart further; the ``AllContainersRestarting`` condition is True meanwhile."""

from __future__ import annotations

import textwrap
from pathlib import Path

import anyio
import pytest
from lightkube.models.core_v1 import Pod

from asynckubelet import KubeletConfig
from asynckubelet.docker import DockerClient
from asynckubelet.manifests import load_manifests_text
from asynckubelet.node import Kubelet
from asynckubelet.runtime import naming
from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE

pytestmark = pytest.mark.anyio

POD = """
apiVersion: v1
kind: Pod
metadata: {name: inplace}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  volumes: [{name: state, emptyDir: {}}]
  initContainers:
  - name: init
    image: BUSYBOX
    command: [sh, -c, "echo ran >> /state/inits"]
    volumeMounts: [{name: state, mountPath: /state}]
  containers:
  - name: app
    image: BUSYBOX
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
    volumeMounts: [{name: state, mountPath: /state}]
  - name: trigger
    image: BUSYBOX
    restartPolicy: Never
    restartPolicyRules:
    - action: RestartAllContainers
      exitCodes: {operator: In, values: [42]}
    command:
    - sh
    - -c
    - >-
      if [ ! -f /state/triggered ]; then touch /state/triggered; sleep 1; exit 42; fi;
      trap 'exit 0' TERM; while true; do sleep 0.2; done
    volumeMounts: [{name: state, mountPath: /state}]
"""


async def _sandboxes(docker: DockerClient, node: str) -> list[str]:
    rows = await docker.list_containers(
        labels={naming.LABEL_NODE: node, naming.LABEL_TYPE: naming.TYPE_SANDBOX}
    )
    return [r["Id"] for r in rows]


def _restarts(pod: Pod) -> dict[str, tuple[int, bool]]:
    """Container name -> (restart count, running)."""
    assert pod.status is not None
    return {
        c.name: (c.restartCount, c.state is not None and c.state.running is not None)
        for c in [*(pod.status.initContainerStatuses or []), *(pod.status.containerStatuses or [])]
    }


async def test_a_matching_exit_restarts_every_container_in_place(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = textwrap.dedent(POD).replace("BUSYBOX", BUSYBOX_IMAGE)
    manifests = load_manifests_text(text, node_name=node_name)
    config = KubeletConfig(
        node_name=node_name, pause_image=PAUSE_IMAGE, state_dir=tmp_path / "state"
    )
    conditions: list[str] = []
    async with Kubelet(config) as node:

        async def watch() -> None:
            async with node.watch() as changes:
                async for _, pod in changes:
                    for c in (pod.status.conditions if pod.status else None) or []:
                        if c.type == "AllContainersRestarting":
                            conditions.append(c.status)

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            await node.apply(manifests)
            first = await node.wait("default", "inplace", "Ready", timeout=60)
            assert first is not None
            assert first.status is not None
            ip_before = first.status.podIP
            sandboxes_before = await _sandboxes(docker, node_name)
            assert _restarts(first)["app"] == (0, True)

            def restarted(pod: Pod | None) -> bool:
                if pod is None or pod.status is None:
                    return False
                counts = _restarts(pod)
                return counts.get("app") == (1, True) and counts.get("trigger") == (1, True)

            after = await node.wait("default", "inplace", restarted, timeout=60)
            tg.cancel_scope.cancel()
        assert after is not None
        assert after.status is not None
        assert after.status.podIP == ip_before
        assert await _sandboxes(docker, node_name) == sandboxes_before
        assert _restarts(after)["init"][0] == 1
        inits = await node.exec("default", "inplace", ["cat", "/state/inits"], container="app")
        assert inits.stdout.decode().split() == ["ran", "ran"]
        last = {c.type: c.status for c in after.status.conditions or []}
        assert last["AllContainersRestarting"] == "False"
    assert "True" in conditions
