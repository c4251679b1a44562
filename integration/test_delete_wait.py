"""``delete`` on a real engine waits, as kubectl's default ``--wait=true`` does, until the
pods of what it deleted are gone, a Deployment's too; ``--wait=false`` returns while
their containers are still stopping (a container that ignores SIGTERM holds its pod for
the whole grace period)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from asynckubelet.docker import DockerClient
from asynckubelet.runtime import naming
from integration.harness import Engine
from integration.serve_helpers import Daemon, manifest, serve_daemon

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: slowstop}
spec:
  replicas: 2
  selector: {matchLabels: {app: slowstop}}
  template:
    metadata: {labels: {app: slowstop}}
    spec:
      terminationGracePeriodSeconds: 6
      containers:
      - name: c
        image: BUSYBOX
        command: [sh, -c, "trap '' TERM; while true; do sleep 0.2; done"]
"""


@pytest.fixture
def node(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> Iterator[Daemon]:
    yield from serve_daemon(tmp_path, docker_engine, node_name)


def containers_of(node: Daemon, prefix: str) -> list[str]:
    """Names of every container (running or not) of this node's pods named ``prefix``..."""

    async def go() -> list[str]:
        async with DockerClient(url=node.engine.url) as client:
            rows = await client.list_containers(labels={naming.LABEL_NODE: node.node_name})
        return [
            str((row.get("Names") or ["?"])[0])
            for row in rows
            if str((row.get("Labels") or {}).get(naming.LABEL_POD_NAME, "")).startswith(prefix)
        ]

    return anyio.run(go)


def applied(node: Daemon, path: str) -> None:
    done = node.cli("apply", "-f", path, "--wait", "--timeout", "120", timeout=180)
    assert done.returncode == 0, done.stderr + node.log()
    assert len(containers_of(node, "slowstop-")) == 4  # two sandboxes, two containers


def test_delete_f_of_a_deployment_returns_once_its_containers_are_gone(
    node: Daemon, tmp_path: Path
) -> None:
    path = manifest(tmp_path, "slowstop.yaml", DEPLOYMENT)
    applied(node, path)
    done = node.cli("delete", "-f", path)
    assert (done.returncode, done.stdout) == (0, 'deployment.apps "slowstop" deleted\n'), (
        done.stderr + node.log()
    )
    assert containers_of(node, "slowstop-") == []
    assert "No resources found" in node.cli("get", "pods").stderr


def test_delete_wait_false_returns_while_the_containers_are_still_there(
    node: Daemon, tmp_path: Path
) -> None:
    path = manifest(tmp_path, "slowstop.yaml", DEPLOYMENT)
    applied(node, path)
    done = node.cli("delete", "deployment", "slowstop", "--wait=false")
    assert (done.returncode, done.stdout) == (0, 'deployment.apps "slowstop" deleted\n'), (
        done.stderr + node.log()
    )
    assert containers_of(node, "slowstop-") != []
    listed = node.cli("get", "pods").stdout
    assert "Terminating" in listed, listed
