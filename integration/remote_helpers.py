"""What the tests of Docker-in-Docker shape B share: a TLS-only DinD daemon that the agent
reaches only over ``tcp://`` (``DOCKER_TLS_VERIFY``, ``DOCKER_CERT_PATH``), as a CI job talks
to a ``docker:dind`` service, and ``asynckubelet`` commands and ``serve`` pointed at it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from asynckubelet.docker import DockerClient
from asynckubelet.images import build as image_build
from asynckubelet.runtime import naming
from integration.dind import remote, tls
from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE, Engine, remove_owned

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def remote_daemon(docker_engine: Engine) -> Iterator[remote.RemoteDaemon]:
    """A TLS-only DinD daemon with the test images loaded, removed after the session."""
    name = f"akltest-dind-{uuid.uuid4().hex[:8]}"
    with remote.tls_daemon(
        engine=docker_engine.url, name=name, labels={naming.LABEL_NODE: name}
    ) as daemon:

        async def load() -> None:
            async with DockerClient(url=daemon.url, tls=daemon.tls) as client:
                await image_build.build_busybox_image(client, tag=BUSYBOX_IMAGE)
                await image_build.build_pause_image(client, tag=PAUSE_IMAGE)

        anyio.run(load)
        yield daemon


def owned(daemon: remote.RemoteDaemon, node: str) -> list[str]:
    async def go() -> list[str]:
        async with DockerClient(url=daemon.url, tls=daemon.tls) as client:
            rows = await client.list_containers(labels={naming.LABEL_NODE: node})
            return [r["Id"] for r in rows]

    return anyio.run(go)


def run_cli(
    manifest: Path,
    *extra: str,
    daemon: remote.RemoteDaemon,
    node: str,
    cert_path: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``asynckubelet run MANIFEST EXTRA...`` against the daemon, as a CI job runs it."""
    env = {**os.environ, **daemon.environment(), "PYTHONPATH": str(REPO)}
    if cert_path is not None:
        env["DOCKER_CERT_PATH"] = str(cert_path)
    return subprocess.run(
        [
            sys.executable, "-m", "asynckubelet", "run", str(manifest),
            "--docker-host", daemon.url, "--node-name", node,
            "--pause-image", PAUSE_IMAGE, "--no-color", *extra,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )  # fmt: skip


def untrusting_certs(daemon: remote.RemoteDaemon, folder: Path) -> Path:
    """A DOCKER_CERT_PATH with the daemon's client certificate but another CA."""
    other = tls.make_ca(folder / "other-ca", name="not-the-daemons-ca")
    certs = folder / "untrusting"
    certs.mkdir()
    for file in ("cert.pem", "key.pem"):
        shutil.copyfile(daemon.cert_path / file, certs / file)
    shutil.copyfile(other.cert, certs / "ca.pem")
    return certs


class RemoteNode:
    """``asynckubelet serve`` outside the daemon, and the other commands, as a user runs them."""

    def __init__(self, *, daemon: remote.RemoteDaemon, state: Path, node: str) -> None:
        self.daemon = daemon
        self.state = state
        self.node = node
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.process: subprocess.Popen[str] | None = None

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            **self.daemon.environment(),
            "PYTHONPATH": str(REPO),
            "ASYNCKUBELET_STATE_DIR": str(self.state),
            "ASYNCKUBELET_NODE_NAME": self.node,
            "ASYNCKUBELET_PAUSE_IMAGE": PAUSE_IMAGE,
            "ASYNCKUBELET_POD_SECURITY": "privileged",
            "ASYNCKUBELET_NETWORK": "auto",
        }

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "asynckubelet", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
        )

    def log(self) -> str:
        return (self.state.parent / "serve.log").read_text()

    def start(self) -> None:
        self.state.mkdir(parents=True, exist_ok=True)
        with (self.state.parent / "serve.log").open("a") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "asynckubelet",
                    "serve",
                    "--listen",
                    f"127.0.0.1:{self.port}",
                ],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.port}/healthz", timeout=5
                ) as r:
                    if r.read() == b"ok":
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError("serve did not answer /healthz: " + self.log())

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=60)
        self.process = None


@pytest.fixture
def remote_node(
    tmp_path: Path, remote_daemon: remote.RemoteDaemon, node_name: str
) -> Iterator[RemoteNode]:
    node = RemoteNode(daemon=remote_daemon, state=tmp_path / "state", node=node_name)
    node.start()
    try:
        yield node
    finally:
        node.stop()

        async def clean() -> None:
            async with DockerClient(url=remote_daemon.url, tls=remote_daemon.tls) as client:
                await remove_owned(client, node_name)
                for network in await client.list_networks(labels={naming.LABEL_NODE: node_name}):
                    await client.remove_network(network["Name"])

        anyio.run(clean)


__all__ = [
    "REPO",
    "RemoteNode",
    "owned",
    "remote_daemon",
    "remote_node",
    "run_cli",
    "untrusting_certs",
]
