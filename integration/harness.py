"""The real-Docker test harness, as a pytest plugin.

Integration tests run against a real Docker engine on a machine with no registry:

- a daemon that already answers (``DOCKER_HOST`` or the default socket) is used as is;
- otherwise, as root with ``dockerd`` installed, a private daemon is started with its own
  socket, data root, exec root and pid file, and ``--bridge=none`` so it creates no network
  of its own; it is stopped and its directories removed at the end of the session;
- with ``ASYNCKUBELET_REQUIRE_DOCKER=1`` (CI sets it) a missing engine fails the run
  instead of skipping it.

Test images are built from local material (Debian's ``busybox-static`` and the project's
pause program) under the test-only ``akltest.local/`` prefix. Every test gets its own node
name; every Docker object made on its behalf carries it as the ownership label and is
removed after the test, whether it passed or not.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from asynckubelet.docker import DockerClient
from asynckubelet.images import build as image_build
from asynckubelet.runtime import naming

TEST_IMAGE_PREFIX = "akltest.local"
BUSYBOX_IMAGE = f"{TEST_IMAGE_PREFIX}/busybox:1.35"
PAUSE_IMAGE = f"{TEST_IMAGE_PREFIX}/pause:3.10"
REQUIRE_ENV = "ASYNCKUBELET_REQUIRE_DOCKER"
PRIVATE_ENV = "ASYNCKUBELET_PRIVATE_DOCKERD"
"""``1``: always start a private dockerd, even when another engine answers."""


@dataclass(frozen=True)
class Engine:
    """The Docker engine the session's tests use."""

    url: str
    private: bool


def _answers(url: str | None) -> bool:
    async def ping() -> bool:
        async with DockerClient(url=url, retry_attempts=1) as client:
            return await client.ping()

    try:
        return anyio.run(ping)
    except Exception:
        return False


class PrivateDockerd:
    """A dockerd of our own: its own socket and directories, no default bridge."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="akl-dockerd-"))
        self.socket = self.root / "docker.sock"
        self.url = f"unix://{self.socket}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = self.root / "dockerd.log"

    def start(self, *, timeout: float = 60.0) -> None:
        args = [
            "dockerd",
            "--host",
            self.url,
            "--data-root",
            str(self.root / "data"),
            "--exec-root",
            str(self.root / "exec"),
            "--pidfile",
            str(self.root / "dockerd.pid"),
            "--bridge=none",
            "--containerd-namespace",
            f"akl-{self.root.name[-8:]}",
            "--containerd-plugins-namespace",
            f"akl-p-{self.root.name[-8:]}",
        ]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"dockerd exited at start:\n{self.log.read_text()[-3000:]}")
            if self.socket.exists() and _answers(self.url):
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"dockerd did not answer in {timeout}s:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self.process = None
        self._unmount_below(self.root)
        shutil.rmtree(self.root, ignore_errors=True)

    @staticmethod
    def _unmount_below(root: Path) -> None:
        with contextlib.suppress(OSError):
            mounts = [
                line.split()[4]
                for line in Path("/proc/self/mountinfo").read_text().splitlines()
                if line.split()[4].startswith(str(root))
            ]
            for mount in sorted(mounts, key=len, reverse=True):
                subprocess.run(["umount", "-l", mount], check=False, capture_output=True)


def _find_or_start_engine() -> tuple[Engine | None, PrivateDockerd | None, str]:
    host = os.environ.get("DOCKER_HOST")
    private_wanted = os.environ.get(PRIVATE_ENV) == "1"
    if host and not private_wanted:
        if _answers(host):
            return Engine(url=host, private=False), None, ""
        return None, None, f"DOCKER_HOST={host} does not answer"
    if not private_wanted and Path("/var/run/docker.sock").exists() and _answers(None):
        return Engine(url="unix:///var/run/docker.sock", private=False), None, ""
    if os.geteuid() != 0:
        return None, None, "no Docker engine answers and not root to start one"
    if shutil.which("dockerd") is None:
        return None, None, "no Docker engine answers and dockerd is not installed"
    daemon = PrivateDockerd()
    try:
        daemon.start()
    except RuntimeError as e:
        daemon.stop()
        return None, None, f"starting a private dockerd failed: {e}"
    return Engine(url=daemon.url, private=True), daemon, ""


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[Engine]:
    """The engine for this session; skips (or fails, under CI) when there is none."""
    engine, daemon, why = _find_or_start_engine()
    if engine is None:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but no Docker engine: {why}", pytrace=False)
        pytest.skip(f"no Docker engine: {why}")
    previous = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = engine.url
    try:
        yield engine
    finally:
        if previous is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = previous
        if daemon is not None:
            daemon.stop()


@pytest.fixture(scope="session")
def test_images(docker_engine: Engine) -> dict[str, str]:
    """Build (idempotently) the busybox and pause test images; returns role -> reference."""

    async def build() -> None:
        async with DockerClient(url=docker_engine.url) as client:
            await image_build.build_busybox_image(client, tag=BUSYBOX_IMAGE)
            await image_build.build_pause_image(client, tag=PAUSE_IMAGE)

    anyio.run(build)
    return {"busybox": BUSYBOX_IMAGE, "pause": PAUSE_IMAGE}


@pytest.fixture
def node_name() -> str:
    """A node name unique to this test: the ownership label of everything it makes."""
    return f"akltest-{uuid.uuid4().hex[:10]}"


async def remove_owned(client: DockerClient, node: str) -> list[str]:
    """Force-remove every container labelled as owned by ``node``; returns their ids."""
    rows = await client.list_containers(labels={naming.LABEL_NODE: node})
    # Containers joined to a sandbox go before the sandbox, or the sandbox removal waits.
    rows.sort(key=lambda r: (r.get("Labels") or {}).get(naming.LABEL_TYPE) == naming.TYPE_SANDBOX)
    for row in rows:
        await client.remove_container(row["Id"], force=True)
    return [r["Id"] for r in rows]


@pytest.fixture
async def docker(
    docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> AsyncIterator[DockerClient]:
    """A client of the test engine; afterwards, everything the test's node owns is removed."""
    async with DockerClient(url=docker_engine.url) as client:
        try:
            yield client
        finally:
            with anyio.CancelScope(shield=True):
                await remove_owned(client, node_name)
