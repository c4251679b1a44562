"""The quick start on a machine where nothing is set up yet: no engine answers and the
project's images are missing. ``asynckubelet run examples/hello.yaml`` starts the
project's own dockerd, builds the sandbox image and busybox, each announced in one line,
and runs the pod; the next run finds all of it and says nothing about it.

The "machine" is made of environment variables: a default socket where nothing listens,
and the own engine's root and socket in a fresh directory, so the dockerd started here is
new and has no image at all."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from asynckubelet.docker.engine import Dockerd
from asynckubelet.images.build import DEFAULT_BUSYBOX_TAG, DEFAULT_PAUSE_TAG

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def bare_machine() -> Iterator[tuple[dict[str, str], Path]]:
    if os.geteuid() != 0 or shutil.which("dockerd") is None:
        pytest.skip("starting a Docker engine needs root and dockerd")
    root = Path(tempfile.mkdtemp(prefix="akl-first-"))
    socket = root / "docker.sock"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DOCKER_HOST", "ASYNCKUBELET_DOCKER_HOST", "ASYNCKUBELET_PAUSE_IMAGE")
    }
    env.update(
        PYTHONPATH=str(REPO),
        ASYNCKUBELET_DEFAULT_DOCKER_SOCKET=str(root / "nothing-listens.sock"),
        ASYNCKUBELET_ENGINE_ROOT=str(root / "engine"),
        ASYNCKUBELET_ENGINE_SOCKET=str(socket),
    )
    try:
        yield env, socket
    finally:
        Dockerd(root=root / "engine", socket_path=socket, name="asynckubelet").stop(remove=True)
        shutil.rmtree(root, ignore_errors=True)


def _run(env: dict[str, str], node: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "asynckubelet", "run", "examples/hello.yaml", "--node-name", node],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_quick_start_sets_up_engine_and_images_by_itself_and_says_so(
    bare_machine: tuple[dict[str, str], Path], node_name: str
) -> None:
    env, socket = bare_machine
    first = _run(env, node_name)
    assert first.returncode == 0, first.stderr
    assert "hello/hello | Hello from pod hello in namespace default" in first.stdout.splitlines()
    said = first.stderr.splitlines()
    started = [line for line in said if line.startswith("no Docker engine answers; starting")]
    assert started == [
        f"no Docker engine answers; starting one at unix://{socket} (data "
        f"{Path(env['ASYNCKUBELET_ENGINE_ROOT'])}, log "
        f"{Path(env['ASYNCKUBELET_ENGINE_ROOT']) / 'dockerd.log'}; `asynckubelet engine stop` "
        "stops it)"
    ]
    assert (
        f"{DEFAULT_PAUSE_TAG}: not on the engine; building it from the project's pause.c, "
        "compiled statically"
    ) in said
    assert (
        f"{DEFAULT_BUSYBOX_TAG}: not on the engine; building it from the host's static busybox "
        "(Debian's busybox-static)"
    ) in said

    again = _run(env, node_name)
    assert again.returncode == 0, again.stderr
    assert "hello/hello | Hello from pod hello in namespace default" in again.stdout.splitlines()
    assert "starting one at" not in again.stderr
    assert "building it" not in again.stderr
