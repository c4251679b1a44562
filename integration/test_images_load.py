"""``images load`` on a real engine: an image the engine saved, its tag then removed, is
loaded back by the command from a file and from stdin, and a pod with
``imagePullPolicy: Never`` runs it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from asynckubelet.docker import DockerClient
from integration.harness import BUSYBOX_IMAGE, Engine
from integration.run_helpers import run_env, run_pod, write_manifest

POD = """
apiVersion: v1
kind: Pod
metadata: {name: mine}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: IMAGE
    imagePullPolicy: Never
    command: [sh, -c, "echo hello from my own image"]
"""


@pytest.fixture
def own_image(docker_engine: Engine, test_images: dict[str, str], node_name: str) -> Iterator[str]:
    """A tag of the test busybox of this test's own, removed afterwards."""
    ref = f"akltest.local/own-{node_name}:1"
    repo, tag = ref.rsplit(":", 1)

    async def tag_it() -> None:
        async with DockerClient(url=docker_engine.url) as client:
            await client.tag_image(BUSYBOX_IMAGE, repo=repo, tag=tag)

    anyio.run(tag_it)
    try:
        yield ref
    finally:
        untag(docker_engine, ref)


def untag(engine: Engine, ref: str) -> None:
    async def go() -> None:
        async with DockerClient(url=engine.url) as client:
            await client.remove_image(ref)

    anyio.run(go)


def present(engine: Engine, ref: str) -> bool:
    async def go() -> bool:
        async with DockerClient(url=engine.url) as client:
            return await client.image_exists(ref)

    return anyio.run(go)


def load(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "asynckubelet", "images", "load", *args],
        input=stdin,
        capture_output=True,
        timeout=120,
        env=run_env(),
    )


def test_an_image_saved_and_untagged_is_loaded_back_from_a_file_and_stdin_and_runs(
    docker_engine: Engine, own_image: str, node_name: str, tmp_path: Path
) -> None:
    archive = tmp_path / "own.tar"
    with archive.open("wb") as f:
        subprocess.run(
            ["docker", "save", own_image], stdout=f, check=True, timeout=120, env=run_env()
        )
    untag(docker_engine, own_image)
    assert not present(docker_engine, own_image)

    done = load(str(archive))
    assert (done.returncode, done.stdout.decode()) == (0, f"Loaded image: {own_image}\n"), (
        done.stderr.decode()
    )
    assert present(docker_engine, own_image)

    untag(docker_engine, own_image)
    done = load("-", stdin=archive.read_bytes())
    assert (done.returncode, done.stdout.decode()) == (0, f"Loaded image: {own_image}\n"), (
        done.stderr.decode()
    )
    assert present(docker_engine, own_image)

    manifest = write_manifest(tmp_path, POD.replace("IMAGE", own_image))
    ran = run_pod(manifest, node=node_name)
    assert ran.returncode == 0, ran.stderr
    assert "mine/app | hello from my own image" in ran.stdout


def test_a_file_the_engine_refuses_is_named_and_loads_nothing(
    docker_engine: Engine, tmp_path: Path
) -> None:
    truncated = tmp_path / "cut.tar"
    truncated.write_bytes(b"\0" * 257 + b"ustar\0" + b"\0" * 250)
    done = load(str(truncated))
    assert done.returncode == 1
    assert done.stdout == b""
    assert done.stderr.decode().startswith(f'error: the engine refused "{truncated}": ')
