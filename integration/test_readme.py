"""The README as a newcomer meets it, on the real engine: the walkthrough's commands run as
written (extracted from its marked blocks, run by a shell from the repository's root,
against the ``serve`` its block starts, on a temporary state dir), each checked against
what the README says it prints; and the newcomer's path through it, step by step: a
Secret, then a pod that mounts it, its IP in ``get -o wide``, its host port answering, a
second pod on that port refused, ``run`` beside the node left alone by it, and ``run`` of
an image that is not there ending at once.

Only what the test needs to share the machine is set in the environment: the state dir,
a node name, a bridge and a pod range of the test's own, a free port for the HTTP
endpoints, and pods stopped when ``serve`` stops. The commands run in a copy of
``examples/`` whose host port (8080 in the README) is a free one, so that another node on
the machine holding 8080 cannot answer in the pod's place. Images are local
(``asynckubelet.local/...``), never pulled.
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import anyio
import pytest

from asynckubelet.docker import DockerClient
from asynckubelet.images import build as image_build
from asynckubelet.network.bridge import BridgeConfig, BridgePlugin
from asynckubelet.node import daemon
from asynckubelet.runtime import naming
from integration.harness import Engine, eventually, free_port, remove_owned

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
README_NODE = "laptop"
"""The node name in the README's outputs."""
README_STATE_DIR = "/var/lib/asynckubelet"
"""The state dir in the README's outputs: root's default, as the quick start is root's."""
README_LISTEN = "127.0.0.1:10255"
README_HOST_PORT = 8080
"""The web pod's host port in the README and in ``examples/``."""


def block(marker: str) -> list[tuple[str, list[str]]]:
    """The ``$ command`` lines of the console block after ``<!-- marker -->``, each with
    the lines the README shows it printing."""
    text = README.read_text()
    start = text.index(f"<!-- {marker} -->")
    body = text[start:].split("```console\n", 1)[1].split("\n```", 1)[0]
    steps: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    return steps


WAITING = re.compile(r"^pod/\S+: not ready: ")
"""``apply --wait``'s progress off a terminal: on one, it is redrawn in place and gone at
the end, so the README does not show it."""
AGE = re.compile(r"^\d+(ms|s|m|h|d)(\d+(s|m|h))?$")


def shape(line: str, *, node_name: str) -> list[str]:
    """A line's words, with what differs from run to run (ages, IPs, the node's name)
    made the README's placeholders."""
    words = []
    for word in line.replace(node_name, README_NODE).split():
        if AGE.match(word):
            word = "AGE"
        elif re.fullmatch(r"\d+\.\d+\.\d+\.\d+", word):
            word = "IP"
        words.append(word)
    return words


@dataclass
class Newcomer:
    """A shell whose ``asynckubelet`` is this tree's, with only the state dir, the node's
    name, bridge and pod range, its HTTP port and stopping pods at exit set for it, in a
    folder holding ``examples/`` with the web pod's host port a free one."""

    tmp: Path
    engine: Engine
    node_name: str
    port: int = field(default_factory=free_port)
    host_port: int = field(default_factory=free_port)
    pod_cidr: str = field(
        default_factory=lambda: f"10.{random.randint(200, 250)}.{random.randint(0, 255)}.0/24"
    )
    serve: subprocess.Popen[str] | None = None
    serve_log: IO[str] | None = None

    @property
    def bridge(self) -> str:
        return f"akr{self.node_name[-10:]}"

    @property
    def root(self) -> Path:
        """The folder the commands run in: ``examples/`` with the host port changed."""
        root = self.tmp / "checkout"
        if not root.exists():
            shutil.copytree(REPO / "examples", root / "examples")
            for manifest in (root / "examples").rglob("*.yaml"):
                text = manifest.read_text()
                manifest.write_text(
                    text.replace(f"hostPort: {README_HOST_PORT}", f"hostPort: {self.host_port}")
                )
        return root

    def typed(self, command: str) -> str:
        """``command`` as the README shows it, reaching this node's host port."""
        return command.replace(f"127.0.0.1:{README_HOST_PORT}/", f"127.0.0.1:{self.host_port}/")

    @property
    def state(self) -> Path:
        return self.tmp / "state"

    @property
    def env(self) -> dict[str, str]:
        bin_dir = self.tmp / "bin"
        if not bin_dir.exists():
            bin_dir.mkdir()
            shim = bin_dir / "asynckubelet"
            shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m asynckubelet "$@"\n')
            shim.chmod(0o755)
        return {
            **{k: v for k, v in os.environ.items() if not k.startswith("ASYNCKUBELET_")},
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "PYTHONPATH": str(REPO),
            "DOCKER_HOST": self.engine.url,
            "ASYNCKUBELET_STATE_DIR": str(self.state),
            "ASYNCKUBELET_NODE_NAME": self.node_name,
            "ASYNCKUBELET_BRIDGE": self.bridge,
            "ASYNCKUBELET_POD_CIDR": self.pod_cidr,
            "ASYNCKUBELET_LISTEN": f"127.0.0.1:{self.port}",
            "ASYNCKUBELET_STOP_PODS_ON_EXIT": "1",
        }

    def sh(self, command: str, *, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """``command`` as a user types it, its stderr in its output as on a terminal."""
        return subprocess.run(
            ["bash", "-c", f"{{ {self.typed(command)}\n}} 2>&1"],
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
        )

    def start(self, command: str) -> None:
        """``serve`` started as ``command``, once it answers and has announced itself."""
        self.serve_log = (self.tmp / "serve.log").open("w")
        self.serve = subprocess.Popen(
            ["bash", "-c", f"exec {command}"],
            cwd=self.root,
            env=self.env,
            stdout=self.serve_log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if daemon.socket_answers(self.state / "api.sock") and self.announced():
                return
            if self.serve.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"{command} did not answer: {self.log()}")

    def log(self) -> str:
        return (self.tmp / "serve.log").read_text()

    def announced(self) -> str | None:
        """``serve``'s first line, ``node NAME: ...``, once it is written."""
        return next((line for line in self.log().splitlines() if line.startswith("node ")), None)

    def stop(self) -> None:
        if self.serve is not None and self.serve.poll() is None:
            self.serve.send_signal(signal.SIGTERM)
            try:
                self.serve.wait(timeout=90)
            except subprocess.TimeoutExpired:
                self.serve.kill()
                self.serve.wait(timeout=30)
        if self.serve_log is not None:
            self.serve_log.close()


@pytest.fixture
def newcomer(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> Iterator[Newcomer]:
    async def local_images() -> None:
        async with DockerClient(url=docker_engine.url) as client:
            await image_build.build_busybox_image(client)
            await image_build.build_pause_image(client)

    anyio.run(local_images)
    person = Newcomer(tmp=tmp_path, engine=docker_engine, node_name=node_name)
    try:
        yield person
    finally:
        person.stop()

        async def clean() -> None:
            async with DockerClient(url=docker_engine.url) as client:
                await remove_owned(client, node_name)

        anyio.run(clean)
        plugin = BridgePlugin(BridgeConfig(bridge=person.bridge, pod_cidr=person.pod_cidr))
        anyio.run(plugin.remove_node_network)
        with open("/proc/mounts") as f:
            mounts = [line.split()[1] for line in f]
        for mount in sorted((m for m in mounts if m.startswith(f"{person.state}/")), reverse=True):
            subprocess.run(["umount", mount], check=False, capture_output=True)


def test_the_walkthrough_runs_as_written_and_prints_what_it_shows(newcomer: Newcomer) -> None:
    ((serve, shown),) = block("walkthrough-serve")
    newcomer.start(serve)
    announced = newcomer.announced()
    assert announced is not None
    as_in_readme = announced.replace(str(newcomer.state), README_STATE_DIR).replace(
        f"127.0.0.1:{newcomer.port}", README_LISTEN
    )
    assert shape(as_in_readme, node_name=newcomer.node_name) == shape(
        shown[0], node_name=newcomer.node_name
    )
    for command, expected in block("walkthrough"):
        done = newcomer.sh(command)
        failure = any(line.startswith(("error:", "Error from server")) for line in expected)
        assert (done.returncode != 0) == failure, f"$ {command}\n{done.stdout}{newcomer.log()}"
        got = [
            shape(line, node_name=newcomer.node_name)
            for line in done.stdout.splitlines()
            if not WAITING.match(line)
        ]
        want = [shape(line, node_name=newcomer.node_name) for line in expected]
        assert got == want, f"$ {command}\n{done.stdout}"


def test_every_file_of_the_walkthrough_is_in_examples() -> None:
    for command, expected in block("walkthrough"):
        if any(line.startswith("error:") for line in expected):
            continue
        for word in shlex.split(command):
            if word.startswith("examples/"):
                assert (REPO / word).exists(), command


def test_a_newcomer_gets_a_web_pod_with_a_secret_an_ip_and_a_host_port(
    newcomer: Newcomer, tmp_path: Path
) -> None:
    at_default_level = newcomer.sh("asynckubelet validate examples/web/web.yaml")
    assert at_default_level.returncode == 1
    uses = f'hostPort (container "httpd" uses hostPort {newcomer.host_port})'
    assert uses in at_default_level.stdout

    ((serve, _),) = block("walkthrough-serve")
    newcomer.start(serve)
    assert newcomer.sh("asynckubelet apply -f examples/web/db-secret.yaml").returncode == 0
    applied = newcomer.sh("asynckubelet apply -f examples/web/web.yaml --wait --timeout 90")
    assert applied.returncode == 0, applied.stdout + newcomer.log()

    header, row = newcomer.sh("asynckubelet get pods -o wide").stdout.splitlines()
    columns = re.split(r"\s{2,}", header)
    cells = dict(zip(columns, row.split(), strict=True))
    assert ipaddress.ip_address(cells["IP"]).version == 4
    assert cells["NODE"] == newcomer.node_name

    page = f"http://127.0.0.1:{newcomer.host_port}/"
    with urllib.request.urlopen(page, timeout=10) as answer:
        assert answer.read().decode() == "hello from web\n"
    secret = newcomer.sh("asynckubelet exec web -- cat /etc/db/password")
    assert (secret.returncode, secret.stdout) == (0, "s3cr3t")

    def web() -> dict[str, object]:
        return dict(json.loads(newcomer.sh("asynckubelet get pod web -o json").stdout))

    before = web()["status"]["containerStatuses"][0]["containerID"]  # type: ignore[index]

    assert newcomer.sh("asynckubelet apply -f examples/web-copy.yaml").returncode == 0

    def refused() -> bool:
        lines = newcomer.sh("asynckubelet get pod web-copy").stdout.splitlines()
        return len(lines) == 2 and lines[1].split()[2] == "NodePorts"

    eventually(refused, timeout=60)
    assert not containers_of(newcomer, "web-copy")

    beside = newcomer.sh("asynckubelet run examples/hello.yaml", timeout=120)
    assert beside.returncode == 0, beside.stdout
    assert "hello/hello | Hello from pod hello in namespace default" in beside.stdout
    after = web()
    assert after["status"]["containerStatuses"][0]["containerID"] == before  # type: ignore[index]
    assert after["status"]["containerStatuses"][0]["restartCount"] == 0  # type: ignore[index]

    missing = tmp_path / "missing.yaml"
    missing.write_text(
        textwrap.dedent(
            """
            apiVersion: v1
            kind: Pod
            metadata: {name: missing}
            spec:
              restartPolicy: Never
              containers:
              - {name: app, image: asynckubelet.local/not-there:1.0}
            """
        )
    )
    ended = newcomer.sh(f"asynckubelet run {missing}", timeout=60)
    assert ended.returncode != 0
    assert "pod/missing:" in ended.stdout
    assert "Traceback" not in ended.stdout


def containers_of(newcomer: Newcomer, pod: str) -> list[str]:
    async def go() -> list[str]:
        async with DockerClient(url=newcomer.engine.url) as client:
            rows = await client.list_containers(
                labels={naming.LABEL_NODE: newcomer.node_name, naming.LABEL_POD_NAME: pod}
            )
        return [row["Id"] for row in rows]

    return anyio.run(go)
