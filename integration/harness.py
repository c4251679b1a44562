"""The real-Docker test harness, as a pytest plugin.

Integration tests run against a real Docker engine on a machine with no registry:

- a daemon that already answers (``DOCKER_HOST`` or the default socket) is used as is;
- otherwise, as root with ``dockerd`` installed, a private daemon is started with its own
  socket, data root, exec root and pid file, and ``--bridge=none`` so it creates no network
  of its own; it is stopped and its directories removed at the end of the session;
- with ``ASYNCKUBELET_REQUIRE_DOCKER=1`` (CI sets it) a missing engine fails the run
  instead of skipping it.

The session runs as a node instance of its own (``ASYNCKUBELET_INSTANCE``, ``it<pid>``,
which every ``serve`` and ``run`` the tests start inherits): its bridge, pod and Service
ranges, listen port, state dir and network records are the session's, so a run uses
none of the host's defaults and two runs on one machine do not meet; they are removed at
the end of the session. An instance already set in the environment is used as it is and
left in place.

Test images are built from local material (Debian's ``busybox-static`` and the project's
pause program) under the test-only ``akltest.local/`` prefix. Every test gets its own node
name; every Docker object made on its behalf carries it as the ownership label and is
removed after the test, whether it passed or not.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from asynckubelet import errors
from asynckubelet.docker import DockerClient
from asynckubelet.docker.engine import Dockerd
from asynckubelet.images import build as image_build
from asynckubelet.node.volumes import default_root
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


def _find_or_start_engine() -> tuple[Engine | None, Dockerd | None, str]:
    host = os.environ.get("DOCKER_HOST")
    private_wanted = os.environ.get(PRIVATE_ENV) == "1"
    if host and not private_wanted:
        if _answers(host):
            return Engine(url=host, private=False), None, ""
        return None, None, f"DOCKER_HOST={host} does not answer"
    default = "unix:///var/run/docker.sock"
    if not private_wanted and Path("/var/run/docker.sock").exists() and _answers(default):
        return Engine(url=default, private=False), None, ""
    if os.geteuid() != 0:
        return None, None, "no Docker engine answers and not root to start one"
    if shutil.which("dockerd") is None:
        return None, None, "no Docker engine answers and dockerd is not installed"
    root = Path(tempfile.mkdtemp(prefix="akl-dockerd-"))
    daemon = Dockerd(root=root, name=f"akltest-{secrets.token_hex(4)}")
    try:
        daemon.start()
    except errors.RuntimeUnavailable as e:
        daemon.stop(remove=True)
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
    # Subprocesses (the CLI, nested pytest runs) use this same engine.
    saved = {k: os.environ.get(k) for k in ("DOCKER_HOST", PRIVATE_ENV)}
    os.environ["DOCKER_HOST"] = engine.url
    os.environ.pop(PRIVATE_ENV, None)
    try:
        yield engine
    finally:
        _sweep_session_nodes(engine)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if daemon is not None:
            daemon.stop(remove=True)


INSTANCE_ENV = "ASYNCKUBELET_INSTANCE"
API_LISTEN_ENV = "ASYNCKUBELET_API_LISTEN"
SESSION_ENV = (INSTANCE_ENV, API_LISTEN_ENV)
"""What the session sets in the environment of the commands it starts."""


def session_instance_name() -> str:
    """``it<pid>``, or with a random suffix when a state dir of that name is left over."""
    from asynckubelet.cli import instance

    name = f"it{os.getpid()}"
    if instance.state_dir(name).exists():
        name = f"{name}-{secrets.token_hex(2)}"
    return instance.check_name(name)


@pytest.fixture(scope="session")
def node_instance() -> Iterator[str]:
    """The session's node instance, in the environment of every command the tests start.
    Its daemons serve the Kubernetes API on any free port: an instance's own port is one,
    and a session runs several daemons at once."""
    preset = os.environ.get(INSTANCE_ENV)
    if preset:
        yield preset
        return
    name = session_instance_name()
    os.environ[INSTANCE_ENV] = name
    any_port = API_LISTEN_ENV not in os.environ
    if any_port:
        os.environ[API_LISTEN_ENV] = "127.0.0.1:0"
    try:
        yield name
    finally:
        os.environ.pop(INSTANCE_ENV, None)
        if any_port:
            os.environ.pop(API_LISTEN_ENV, None)
        remove_instance(name)


def remove_instance(name: str) -> None:
    """The instance's node network (bridge, firewall chains, address records) and its state
    dir, gone."""
    from asynckubelet.cli import instance
    from asynckubelet.network.bridge import BridgeConfig, BridgePlugin

    home = instance.state_dir(name)
    allocation = instance.read_record(home / instance.RECORD)
    if allocation is not None and Path("/sys/class/net", instance.bridge_name(name)).exists():
        config = BridgeConfig(
            bridge=instance.bridge_name(name),
            pod_cidr=allocation.pod_cidr,
            state_dir=instance.network_state_dir(name),
        )
        with contextlib.suppress(errors.NetworkError):
            anyio.run(BridgePlugin(config).remove_node_network)
    unmount_under(home)
    shutil.rmtree(home, ignore_errors=True)


def unmount_under(path: Path) -> None:
    """Unmount whatever is mounted below ``path``, deepest first."""
    with open("/proc/mounts") as f:
        mounts = [line.split()[1] for line in f]
    for mount in sorted((m for m in mounts if m.startswith(f"{path}/")), reverse=True):
        subprocess.run(["umount", mount], check=False, capture_output=True)


@pytest.fixture(scope="session")
def test_images(docker_engine: Engine) -> dict[str, str]:
    """Build (idempotently) the busybox and pause test images; returns role -> reference."""

    async def build() -> None:
        async with DockerClient(url=docker_engine.url) as client:
            await image_build.build_busybox_image(client, tag=BUSYBOX_IMAGE)
            await image_build.build_pause_image(client, tag=PAUSE_IMAGE)

    anyio.run(build)
    return {"busybox": BUSYBOX_IMAGE, "pause": PAUSE_IMAGE}


_SESSION_NODES: set[str] = set()
"""Every node name handed out in this session, for the sweep at its end."""


def _sweep_session_nodes(engine: Engine) -> None:
    """Remove what any test of this session owns and a per-test cleanup missed: a container
    whose create was still in flight in a killed process lands after that cleanup (Docker
    finishes a create whose client is gone)."""

    async def sweep() -> None:
        async with DockerClient(url=engine.url) as client:
            for node in sorted(_SESSION_NODES):
                await remove_owned(client, node, settle=0)

    with contextlib.suppress(errors.DockerError):
        anyio.run(sweep)


@pytest.fixture
def node_name(request: pytest.FixtureRequest) -> Iterator[str]:
    """A node name unique to this test: the ownership label of everything it makes.

    When the test uses the engine, every container and volume labelled with it is removed
    afterwards, whether the test passed or not (sync tests included, which cannot use
    ``docker``); so is the node's state directory (pod volumes, termination logs).
    """
    name = f"akltest-{uuid.uuid4().hex[:10]}"
    _SESSION_NODES.add(name)
    yield name
    if "docker_engine" in request.fixturenames:
        engine: Engine = request.getfixturevalue("docker_engine")

        async def cleanup() -> None:
            async with DockerClient(url=engine.url) as client:
                await remove_owned(client, name)

        anyio.run(cleanup)
    remove_node_state(name)


def remove_node_state(node: str) -> None:
    """Unmount and remove ``/var/lib/asynckubelet/<node>`` (what ``asynckubelet run`` makes)."""
    state = default_root(node).parent
    if not state.exists():
        return
    unmount_under(state)
    shutil.rmtree(state, ignore_errors=True)


def held_connections(client: DockerClient) -> int:
    """How many connections the adapter's HTTP session has taken from its pool."""
    connector = client._connect().session.connector
    assert connector is not None
    return len(connector._acquired)


def eventually(check: Callable[[], bool], *, timeout: float, every: float = 0.3) -> None:
    """Once ``check()`` holds, looked at every ``every`` seconds; fails naming ``check``
    (its docstring, or itself) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"never came true: {check.__doc__ or check}"
        time.sleep(every)


def free_port() -> int:
    """A TCP port nothing listens on at 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def remove_owned(client: DockerClient, node: str, *, settle: float = 0.5) -> list[str]:
    """Force-remove every container labelled as owned by ``node``; returns their ids.

    When a pass found something, the agent that made it may have had a create in flight
    (Docker finishes a create whose client died), so after ``settle`` seconds the node is
    listed again, until a pass finds nothing (a few passes at most).
    """
    removed: list[str] = []
    for _ in range(5):
        rows = await client.list_containers(labels={naming.LABEL_NODE: node})
        # Containers joined to a sandbox go before the sandbox, or the sandbox removal waits.
        rows.sort(
            key=lambda r: (r.get("Labels") or {}).get(naming.LABEL_TYPE) == naming.TYPE_SANDBOX
        )
        for row in rows:
            await client.remove_container(row["Id"], force=True)
        removed.extend(r["Id"] for r in rows)
        if not rows or settle <= 0:
            break
        await anyio.sleep(settle)
    for volume in await client.list_volumes(labels={naming.LABEL_NODE: node}):
        await client.remove_volume(volume["Name"])
    return removed


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


BUILT_TAG = re.compile(r"^(localhost/)?akltest-[0-9a-f]{8,}-")
"""The repository of an image a test builds: its node's name (``akltest-…``) first."""


def _tags(engine: Engine) -> set[str]:
    listed = subprocess.run(
        ["docker", "-H", engine.url, "images", "--format", "{{.Repository}}:{{.Tag}}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return {t for t in listed.stdout.split() if BUILT_TAG.match(t)}


@pytest.fixture(scope="module")
def built_images_removed(docker_engine: Engine) -> Iterator[None]:
    """The images a module's tests build (tagged with their nodes' names) removed when the
    module ends: an engine the tests share with others keeps none of them."""
    before = _tags(docker_engine)
    yield
    made = sorted(_tags(docker_engine) - before)
    if made:
        subprocess.run(
            ["docker", "-H", docker_engine.url, "rmi", "--force", *made],
            capture_output=True,
            timeout=120,
            check=False,
        )
