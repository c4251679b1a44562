"""``asynckubelet serve`` as a subprocess on a temporary state dir, its own node name, a
free loopback port and a node network of its own, and the client commands run as a user
runs them, each a process of its own; what is left of a node is removed after it."""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio

from asynckubelet.docker import DockerClient
from asynckubelet.node import daemon
from asynckubelet.runtime import naming
from integration.harness import (
    BUSYBOX_IMAGE,
    PAUSE_IMAGE,
    SESSION_ENV,
    Engine,
    free_port,
    remove_owned,
)
from integration.network_helpers import NodeNetwork

REPO = Path(__file__).resolve().parent.parent

LONG = """
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: c
    image: BUSYBOX
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
"""


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=10)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(10)
        sock.connect(self.path)
        self.sock = sock


@dataclass
class Node:
    state: Path
    node_name: str
    port: int
    engine: Engine
    network: NodeNetwork | None = None
    process: subprocess.Popen[str] | None = None

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "ASYNCKUBELET_STATE_DIR": str(self.state),
            "ASYNCKUBELET_NODE_NAME": self.node_name,
            "ASYNCKUBELET_PAUSE_IMAGE": PAUSE_IMAGE,
            **(self.network.env if self.network is not None else {}),
        }

    def cli(
        self, *args: str, timeout: float = 120, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "asynckubelet", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
            input=input,
        )

    def start(self) -> None:
        log = (self.state.parent / "serve.log").open("a")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "asynckubelet", "serve", "--listen", f"127.0.0.1:{self.port}"],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if self.get("/healthz") == "ok":
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError("serve did not answer /healthz: " + self.log())

    def log(self) -> str:
        return (self.state.parent / "serve.log").read_text()

    def get(self, path: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as r:
            return str(r.read().decode())

    def api(self, path: str) -> tuple[int, str]:
        """Status and body of a GET on the local API (the state dir's unix socket)."""
        connection = UnixHTTPConnection(str(self.state / "api.sock"))
        try:
            connection.request("GET", path)
            answer = connection.getresponse()
            return answer.status, answer.read().decode()
        finally:
            connection.close()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Signal serve and wait for its end; one that does not end in time is killed, so
        the cleanup after it never races a live agent."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        self.process = None

    def containers(self) -> dict[str, str]:
        """name -> id of this node's running app containers."""

        async def go() -> dict[str, str]:
            async with DockerClient(url=self.engine.url) as client:
                rows = await client.list_containers(
                    labels={
                        naming.LABEL_NODE: self.node_name,
                        naming.LABEL_TYPE: naming.TYPE_CONTAINER,
                    }
                )
            return {
                (r.get("Labels") or {})[naming.LABEL_CONTAINER_NAME]: r["Id"]
                for r in rows
                if r.get("State") == "running"
            }

        return anyio.run(go)

    def owned(self) -> int:
        async def go() -> int:
            async with DockerClient(url=self.engine.url) as client:
                return len(await client.list_containers(labels={naming.LABEL_NODE: self.node_name}))

        return anyio.run(go)


@contextlib.contextmanager
def running_node(tmp_path: Path, engine: Engine, node_name: str) -> Iterator[Node]:
    """``serve`` on its own state dir, port, bridge and pod range; stopped afterwards, and
    its containers and node network removed."""
    n = Node(
        state=tmp_path / "state",
        node_name=node_name,
        port=free_port(),
        engine=engine,
        network=NodeNetwork.of(node_name),
    )
    n.start()
    try:
        yield n
    finally:
        n.stop()
        _remove_node(engine, node_name, n.network)


@dataclass
class Daemon:
    """``asynckubelet serve`` on a temporary state dir, and the client commands, run with
    only that state dir, the offline pause image and the session's node instance in their
    environment."""

    state: Path
    node_name: str
    port: int
    engine: Engine
    serve_args: tuple[str, ...] = ()
    network: NodeNetwork | None = None
    process: subprocess.Popen[str] | None = None

    @property
    def env(self) -> dict[str, str]:
        return {
            **{
                k: v
                for k, v in os.environ.items()
                if not k.startswith("ASYNCKUBELET_") or k in SESSION_ENV
            },
            "PYTHONPATH": str(REPO),
            "ASYNCKUBELET_STATE_DIR": str(self.state),
            "ASYNCKUBELET_PAUSE_IMAGE": PAUSE_IMAGE,
        }

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "asynckubelet", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
        )

    def start(self) -> None:
        log = (self.state.parent / "serve.log").open("a")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "asynckubelet",
                "serve",
                "--state-dir",
                str(self.state),
                "--listen",
                f"127.0.0.1:{self.port}",
                *self.serve_args,
            ],
            env={
                **self.env,
                "ASYNCKUBELET_NODE_NAME": self.node_name,
                **(self.network.env if self.network is not None else {}),
            },
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if (
                daemon.socket_answers(self.state / "api.sock")
                and (self.state / "node.json").exists()
            ):
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError("serve did not answer on its socket: " + self.log())

    def log(self) -> str:
        return (self.state.parent / "serve.log").read_text()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        self.process = None

    def containers(self) -> dict[str, tuple[str, str]]:
        """id -> (pod/container, owner mark) of this node's running app containers."""

        async def go() -> dict[str, tuple[str, str]]:
            async with DockerClient(url=self.engine.url) as client:
                rows = await client.list_containers(
                    labels={
                        naming.LABEL_NODE: self.node_name,
                        naming.LABEL_TYPE: naming.TYPE_CONTAINER,
                    }
                )
            found = {}
            for row in rows:
                labels = row.get("Labels") or {}
                if row.get("State") != "running":
                    continue
                key = f"{labels[naming.LABEL_POD_NAME]}/{labels[naming.LABEL_CONTAINER_NAME]}"
                found[row["Id"]] = (key, labels.get(naming.LABEL_OWNER, ""))
            return found

        return anyio.run(go)


def manifest(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).replace("BUSYBOX", BUSYBOX_IMAGE))
    return str(path)


def serve_daemon(
    tmp_path: Path, engine: Engine, node_name: str, *args: str, state: str = "state"
) -> Iterator[Daemon]:
    d = Daemon(
        state=tmp_path / state,
        node_name=node_name,
        port=free_port(),
        engine=engine,
        serve_args=args,
        network=NodeNetwork.of(node_name),
    )
    d.start()
    try:
        yield d
    finally:
        d.stop()
        _remove_node(engine, node_name, d.network, mounts_under=d.state)


def _remove_node(
    engine: Engine,
    node_name: str,
    network: NodeNetwork | None,
    *,
    mounts_under: Path | None = None,
) -> None:
    """After a stopped ``serve``: its containers, what it mounted and its node network."""

    async def clean() -> None:
        async with DockerClient(url=engine.url) as client:
            await remove_owned(client, node_name)

    anyio.run(clean)
    if mounts_under is not None:
        unmount_under(mounts_under)
    assert network is not None
    network.remove()


def unmount_under(root: Path) -> None:
    """Unmount what the node mounted under ``root`` (Secret volumes are tmpfs mounts the
    daemon leaves with the pods it leaves running)."""
    with open("/proc/mounts") as f:
        mounts = [line.split()[1] for line in f]
    for mount in sorted((m for m in mounts if m.startswith(f"{root}/")), reverse=True):
        subprocess.run(["umount", mount], check=False, capture_output=True)


def wait_running(node: Daemon, name: str) -> list[str]:
    """The pod's `get` row once it is Running."""
    deadline = time.monotonic() + 60
    row: list[str] = []
    while time.monotonic() < deadline:
        lines = node.cli("get", "pods", name).stdout.splitlines()
        row = lines[1].split() if len(lines) > 1 else []
        if row[2:3] == ["Running"]:
            return row
        time.sleep(0.3)
    raise AssertionError(f"pod {name} not Running: {row} {node.log()}")


def apply_watch(node: Daemon, manifest: Path) -> subprocess.Popen[str]:
    """``apply --build --watch --wait -f manifest`` against ``node``, from the manifest's
    folder, its output and errors read as one text stream."""
    return subprocess.Popen(
        [sys.executable, "-m", "asynckubelet", "apply", "--build", "--watch", "--wait",
         "-f", str(manifest)],
        env=node.env,
        cwd=manifest.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip


def next_line(process: subprocess.Popen[str], wanted: str, seen: list[str]) -> str:
    """The next output line holding ``wanted`` (the lines read kept in ``seen``)."""
    assert process.stdout is not None
    for line in process.stdout:
        seen.append(line)
        if wanted in line:
            return line
    raise AssertionError(f"{wanted!r} never came: {''.join(seen)}")
