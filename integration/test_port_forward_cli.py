"""``asynckubelet port-forward`` on a real node: a local port on 127.0.0.1 carried to a
pod's port through the daemon's ``portforward`` subresource, to a pod, to a Service's
named targetPort and to a Deployment's pod, several connections at once, and Ctrl-C
ending it cleanly."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from integration.harness import Engine
from integration.serve_helpers import Daemon, manifest, serve_daemon, wait_running

WEB = """
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: BUSYBOX
    command:
    - sh
    - -c
    - mkdir -p /www && echo served-by-web > /www/index.html && exec httpd -f -p 8080 -h /www
    ports: [{name: http, containerPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: front}
spec:
  selector: {app: web}
  ports: [{name: main, port: 80, targetPort: http}]
"""


@pytest.fixture
def node(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> Iterator[Daemon]:
    yield from serve_daemon(tmp_path, docker_engine, node_name)


def _start(node: Daemon, *args: str) -> tuple[subprocess.Popen[str], list[str]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "asynckubelet", "port-forward", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=node.env,
    )
    assert process.stdout is not None
    lines = [process.stdout.readline().rstrip("\n")]
    return process, lines


def _get(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as answer:
        return str(answer.read().decode())


def _stop(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    return process.returncode, out, err


@pytest.fixture
def web(node: Daemon, tmp_path: Path) -> Daemon:
    applied = node.cli("apply", "-f", manifest(tmp_path, "web.yaml", WEB))
    assert applied.returncode == 0, applied.stderr
    wait_running(node, "web")
    return node


def test_a_pod_port_is_forwarded_with_kubectls_lines(web: Daemon) -> None:
    process, lines = _start(web, "pod/web", ":8080")
    match = re.fullmatch(r"Forwarding from 127\.0\.0\.1:(\d+) -> 8080", lines[0])
    assert match, lines[0] + (process.stderr.read() if process.stderr else "")
    port = int(match.group(1))
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(_get, [port] * 4))
    assert answers == ["served-by-web\n"] * 4
    code, out, err = _stop(process)
    assert code == 0, err
    assert out.count(f"Handling connection for {port}") == 4
    assert "Traceback" not in err


def test_a_service_port_goes_to_its_named_target_port(web: Daemon) -> None:
    process, lines = _start(web, "svc/front", ":80")
    match = re.fullmatch(r"Forwarding from 127\.0\.0\.1:(\d+) -> 8080", lines[0])
    assert match, lines[0] + (process.stderr.read() if process.stderr else "")
    assert _get(int(match.group(1))) == "served-by-web\n"
    code, _, err = _stop(process)
    assert code == 0, err


def test_a_service_without_the_port_is_refused_in_kubectls_words(web: Daemon) -> None:
    done = web.cli("port-forward", "svc/front", "9999:81")
    assert done.returncode == 1
    assert done.stderr.strip() == "error: Service front does not have a service port 81"


def test_a_missing_pod_is_not_found(node: Daemon) -> None:
    done = node.cli("port-forward", "pod/nothere", "8080")
    assert done.returncode == 1
    assert 'pods "nothere" not found' in done.stderr
