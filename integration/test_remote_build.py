"""``--build`` against a TLS-only daemon the agent cannot enter (Docker-in-Docker shape B):
the build context exists only on the client's disk, so it must travel in the build request;
the image is built inside the daemon, never on the engine the tests run on, and the pod runs
the built image ID."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from asynckubelet import errors
from asynckubelet.docker import DockerClient
from asynckubelet.docker.engine import EngineTLS
from integration.dind import remote
from integration.harness import BUSYBOX_IMAGE, Engine
from integration.remote_helpers import RemoteNode, owned, run_cli

pytestmark = pytest.mark.dind

POD = """
apiVersion: v1
kind: Pod
metadata: {{name: built}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: {image}
    command: [sh, -c, "cat /greeting.txt /flavour.txt; sleep {sleep}"]
"""

DOCKERFILE = f"""
FROM {BUSYBOX_IMAGE}
ARG FLAVOUR=plain
COPY greeting.txt /greeting.txt
RUN echo "flavour $FLAVOUR" > /flavour.txt
"""


def _image_id(url: str, tls: EngineTLS | None, ref: str) -> str | None:
    async def go() -> str | None:
        async with DockerClient(url=url, tls=tls) as client:
            try:
                return str((await client.inspect_image(ref))["Id"])
            except errors.ImageNotFound:
                return None

    return anyio.run(go)


@pytest.fixture
def tag(remote_daemon: remote.RemoteDaemon, node_name: str) -> Iterator[str]:
    """The image the test builds, removed from the remote daemon after it."""
    image = f"localhost/{node_name}-built:dev"
    yield image

    async def remove() -> None:
        async with DockerClient(url=remote_daemon.url, tls=remote_daemon.tls) as client:
            await client.remove_image(image, force=True)

    anyio.run(remove)


def _project(folder: Path, image: str, greeting: str, *, sleep: int = 0) -> Path:
    context = folder / image.removeprefix("localhost/").split(":")[0]
    context.mkdir(parents=True)
    (context / "Dockerfile").write_text(textwrap.dedent(DOCKERFILE).lstrip())
    (context / "greeting.txt").write_text(greeting + "\n")
    manifest = folder / "pod.yaml"
    manifest.write_text(textwrap.dedent(POD.format(image=image, sleep=sleep)).lstrip())
    return manifest


def test_run_build_sends_the_context_to_the_remote_engine_and_runs_the_built_image(
    tmp_path: Path,
    remote_daemon: remote.RemoteDaemon,
    docker_engine: Engine,
    node_name: str,
    tag: str,
) -> None:
    manifest = _project(tmp_path, tag, "built on the remote engine")
    proc = run_cli(
        manifest, "--build", "--build-arg", "FLAVOUR=remote", daemon=remote_daemon, node=node_name
    )
    assert proc.returncode == 0, proc.stderr
    assert "built/app | built on the remote engine" in proc.stdout.splitlines()
    assert "built/app | flavour remote" in proc.stdout.splitlines()
    built = _image_id(remote_daemon.url, remote_daemon.tls, tag)
    assert built is not None
    assert f"{tag}: Step 3/4 : COPY greeting.txt /greeting.txt" in proc.stderr
    assert f"{tag}: built {built}" in proc.stderr
    assert _image_id(docker_engine.url, None, tag) is None, "built on the tests' own engine"
    assert owned(remote_daemon, node_name) == []


def test_apply_build_pins_the_served_pod_to_the_image_built_on_the_remote_engine(
    tmp_path: Path, remote_node: RemoteNode, tag: str
) -> None:
    manifest = _project(tmp_path, tag, "served from a remote build", sleep=3600)
    proc = remote_node.cli("apply", "-f", str(manifest), "--build", "--wait", "--timeout", "90")
    assert proc.returncode == 0, proc.stderr + remote_node.log()
    built = _image_id(remote_node.daemon.url, remote_node.daemon.tls, tag)
    assert built is not None
    assert f"{tag}: built {built}" in proc.stderr
    pod = remote_node.cli("get", "pod", "built", "-o", "json")
    assert json.loads(pod.stdout)["spec"]["containers"][0]["image"] == built, pod.stderr
    assert remote_node.cli("logs", "built").stdout.splitlines()[0] == "served from a remote build"
