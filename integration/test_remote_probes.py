"""Probes, hooks and host ports of pods on a TLS-only daemon the agent cannot enter
(Docker-in-Docker shape B): a probe helper container runs them inside the daemon, and a host
port answers on the daemon's address and loopback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from asynckubelet.docker import DockerClient
from asynckubelet.images import build as image_build
from asynckubelet.runtime import naming
from integration.dind import remote
from integration.harness import Engine
from integration.remote_helpers import REPO, RemoteNode, owned
from integration.runtime_helpers import finished_syncs

pytestmark = pytest.mark.dind

TINYWEB = "akltest.local/tinyweb:1"
"""A web server image with nothing else in it (``dind/tinyweb.c``): no shell, wget or nc."""
HOST_PORT = 18080


@pytest.fixture(scope="module")
def tinyweb(remote_daemon: remote.RemoteDaemon, tmp_path_factory: pytest.TempPathFactory) -> str:
    """``akltest.local/tinyweb:1`` loaded into the remote daemon."""
    out = tmp_path_factory.mktemp("tinyweb") / "tinyweb"
    compiler = shutil.which("musl-gcc") or shutil.which("gcc")
    assert compiler is not None, "a C compiler is needed (musl-tools, or gcc and libc6-dev)"
    subprocess.run(
        [
            compiler,
            "-static",
            "-Os",
            "-s",
            "-o",
            str(out),
            str(REPO / "integration/dind/tinyweb.c"),
        ],
        check=True,
        capture_output=True,
    )
    archive = image_build.image_archive(
        repo_tag=TINYWEB,
        files=[image_build.File(path="/tinyweb", data=out.read_bytes(), mode=0o755)],
        config=image_build.ImageConfig(entrypoint=["/tinyweb"]),
    )

    async def load() -> None:
        async with DockerClient(url=remote_daemon.url, tls=remote_daemon.tls) as client:
            await client.load_image(archive)

    anyio.run(load)
    return TINYWEB


def _apply(node: RemoteNode, tmp_path: Path, manifest: str, *, wait: bool = True) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(textwrap.dedent(manifest).replace("TINYWEB", TINYWEB))
    args = ["apply", "-f", str(path)] + (["--wait", "--timeout", "90"] if wait else [])
    proc = node.cli(*args)
    assert proc.returncode == 0, proc.stderr + node.log()


def _pod(node: RemoteNode, name: str) -> dict[str, Any]:
    proc = node.cli("get", "pods", name, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def _restarts(node: RemoteNode, name: str) -> int:
    statuses = _pod(node, name).get("status", {}).get("containerStatuses") or []
    return sum(int(s.get("restartCount", 0)) for s in statuses)


def _eventually(check: Callable[[], bool], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return str(r.read().decode())


def _finished_syncs(node: RemoteNode) -> float:
    return finished_syncs(_get(f"http://127.0.0.1:{node.port}/metrics"))


def _await_helper_execs(node: RemoteNode, command_end: str, *, count: int, since: float) -> None:
    """Wait until the node's probe helpers have started ``count`` execs whose command line
    ends with ``command_end`` (the daemon's ``exec_start`` events since ``since``)."""

    async def go() -> None:
        labels = [
            f"{naming.LABEL_NODE}={node.node}",
            f"{naming.LABEL_TYPE}={naming.TYPE_PROBE_HELPER}",
        ]
        seen = 0
        async with DockerClient(url=node.daemon.url, tls=node.daemon.tls) as client:
            with anyio.fail_after(90):
                async for event in client.events(
                    filters={"type": ["container"], "label": labels}, since=since
                ):
                    action = event.get("Action", "")
                    if action.startswith("exec_start: ") and action.endswith(command_end):
                        seen += 1
                        if seen == count:
                            return

    anyio.run(go)


def _helpers(remote_daemon: remote.RemoteDaemon, node: str) -> list[str]:
    async def go() -> list[str]:
        async with DockerClient(url=remote_daemon.url, tls=remote_daemon.tls) as client:
            rows = await client.list_containers(
                labels={naming.LABEL_NODE: node, naming.LABEL_TYPE: naming.TYPE_PROBE_HELPER}
            )
            return [r["Id"] for r in rows]

    return anyio.run(go)


HOSTPORT_POD = f"""
apiVersion: v1
kind: Pod
metadata: {{name: remote-hostport}}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: web
    image: TINYWEB
    args: ["8080", "200"]
    ports: [{{containerPort: 8080, hostPort: {HOST_PORT}}}]
"""


def test_a_host_port_answers_on_the_remote_nodes_address(
    remote_node: RemoteNode, tmp_path: Path, tinyweb: str
) -> None:
    _apply(remote_node, tmp_path, HOSTPORT_POD)
    url = f"http://{remote_node.daemon.ip}:{HOST_PORT}/from-outside"
    _eventually(lambda: _answers(url), timeout=20, what=url)
    assert _get(url) == "ok\n"
    assert "GET /from-outside HTTP/1.1" in remote_node.cli("logs", "remote-hostport").stdout


def test_a_host_port_answers_on_the_remote_nodes_loopback(
    remote_node: RemoteNode, tmp_path: Path, tinyweb: str, docker_engine: Engine
) -> None:
    _apply(remote_node, tmp_path, HOSTPORT_POD)
    fetch = (
        "import urllib.request as r; "
        f"print(r.urlopen('http://127.0.0.1:{HOST_PORT}/from-inside', timeout=5).read().decode(), "
        "end='')"
    )
    inside = ["docker", "exec", remote_node.daemon.container, "python3", "-c", fetch]
    env = {**os.environ, "DOCKER_HOST": docker_engine.url}
    proc = subprocess.run(inside, capture_output=True, text=True, env=env, timeout=30)
    assert (proc.returncode, proc.stdout) == (0, "ok\n"), proc.stderr
    assert "GET /from-inside HTTP/1.1" in remote_node.cli("logs", "remote-hostport").stdout


def _answers(url: str) -> bool:
    try:
        _get(url)
    except OSError:
        return False
    return True


def test_an_http_readiness_probe_makes_a_remote_pod_ready_once_its_server_listens(
    remote_node: RemoteNode, tmp_path: Path, tinyweb: str
) -> None:
    _apply(
        remote_node,
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: remote-ready}
        spec:
          terminationGracePeriodSeconds: 2
          containers:
          - name: web
            image: TINYWEB
            args: ["8080", "200", "3"]
            readinessProbe:
              httpGet: {path: /ready, port: 8080, httpHeaders: [{name: X-Probe, value: "1"}]}
              periodSeconds: 1
        """,
    )
    pod = _pod(remote_node, "remote-ready")
    ip = pod["status"]["podIP"]
    assert pod["status"]["containerStatuses"][0]["ready"] is True
    events = remote_node.cli("describe", "pod", "remote-ready").stdout
    assert (
        f'Readiness probe failed: Get "http://{ip}:8080/ready": dial tcp {ip}:8080: '
        "connect: connection refused"
    ) in events
    assert "GET /ready HTTP/1.1" in remote_node.cli("logs", "remote-ready").stdout


def test_tcp_readiness_and_liveness_probes_pass_on_a_remote_pod(
    remote_node: RemoteNode, tmp_path: Path, tinyweb: str
) -> None:
    since = time.time()
    _apply(
        remote_node,
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: remote-tcp}
        spec:
          terminationGracePeriodSeconds: 2
          containers:
          - name: web
            image: TINYWEB
            args: ["8080", "200", "2"]
            readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
            livenessProbe:
              tcpSocket: {port: 8080}
              initialDelaySeconds: 4
              periodSeconds: 1
              timeoutSeconds: 2
              failureThreshold: 1
        """,
    )
    # The liveness probe is the one with a 2000 ms timeout. A failed result (threshold 1)
    # wakes the worker, which kills the container: its probes stop until a new instance is
    # past its initial delay, with a restart counted. A third run of the probe on the first
    # instance, a period after the second, says the first two passed.
    _await_helper_execs(remote_node, " 8080 2000", count=3, since=since)
    _header, row = remote_node.cli("get", "pods", "remote-tcp").stdout.splitlines()
    assert row.split()[:4] == ["remote-tcp", "1/1", "Running", "0"]


@pytest.mark.parametrize(
    ("args", "port", "message"),
    [
        (["8080", "500"], 8080, "Liveness probe failed: HTTP probe failed with statuscode: 500"),
        (
            ["8080", "200"],
            9090,
            'Liveness probe failed: Get "http://{ip}:9090/healthz": dial tcp {ip}:9090: '
            "connect: connection refused",
        ),
    ],
    ids=["status-500", "refused"],
)
def test_a_failing_http_liveness_probe_restarts_a_remote_container_with_the_kubelets_words(
    remote_node: RemoteNode, tmp_path: Path, tinyweb: str, args: list[str], port: int, message: str
) -> None:
    _apply(
        remote_node,
        tmp_path,
        f"""
        apiVersion: v1
        kind: Pod
        metadata: {{name: remote-live}}
        spec:
          terminationGracePeriodSeconds: 2
          containers:
          - name: web
            image: TINYWEB
            args: {json.dumps(args)}
            livenessProbe:
              httpGet: {{path: /healthz, port: {port}}}
              periodSeconds: 1
              failureThreshold: 2
        """,
        wait=False,
    )
    _eventually(lambda: _restarts(remote_node, "remote-live") >= 1, timeout=90, what="a restart")
    ip = _pod(remote_node, "remote-live")["status"]["podIP"]
    events = remote_node.cli("describe", "pod", "remote-live").stdout
    assert message.format(ip=ip) in events
    assert "Container web failed liveness probe, will be restarted" in events


def test_a_post_start_http_hook_reaches_the_remote_pods_server(
    remote_node: RemoteNode, tmp_path: Path, tinyweb: str
) -> None:
    _apply(
        remote_node,
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: remote-poststart}
        spec:
          terminationGracePeriodSeconds: 2
          containers:
          - name: web
            image: TINYWEB
            args: ["8080", "200"]
            lifecycle:
              postStart: {httpGet: {path: /poststart, port: 8080}}
        """,
    )
    assert "GET /poststart HTTP/1.1" in remote_node.cli("logs", "remote-poststart").stdout
    assert _restarts(remote_node, "remote-poststart") == 0


PRE_STOP_POD = """
apiVersion: v1
kind: Pod
metadata: {name: remote-prestop}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: web
    image: TINYWEB
    args: ["8080", "200"]
    env: [{name: ROUND, value: "ROUND_VALUE"}]
    lifecycle:
      preStop: {httpGet: {path: /prestop, port: 8080}}
"""


def test_a_pre_stop_http_hook_is_called_before_the_remote_container_stops(
    remote_node: RemoteNode, tmp_path: Path, tinyweb: str
) -> None:
    _apply(remote_node, tmp_path, PRE_STOP_POD.replace("ROUND_VALUE", "one"))
    _apply(remote_node, tmp_path, PRE_STOP_POD.replace("ROUND_VALUE", "two"), wait=False)
    _eventually(lambda: _restarts(remote_node, "remote-prestop") >= 1, timeout=60, what="a restart")
    previous = remote_node.cli("logs", "remote-prestop", "--previous").stdout.splitlines()
    assert "GET /prestop HTTP/1.1" in previous
    assert previous.index("GET /prestop HTTP/1.1") < previous.index("TERM")


def test_deleting_a_remote_pod_removes_its_probe_helper(
    remote_node: RemoteNode, tmp_path: Path, tinyweb: str
) -> None:
    _apply(
        remote_node,
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: remote-helper}
        spec:
          terminationGracePeriodSeconds: 2
          containers:
          - name: web
            image: TINYWEB
            args: ["8080", "200"]
            readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
        """,
    )
    assert len(_helpers(remote_node.daemon, remote_node.node)) == 1
    proc = remote_node.cli("delete", "pod", "remote-helper", "--grace-period", "1")
    assert proc.returncode == 0, proc.stderr
    assert owned(remote_node.daemon, remote_node.node) == []
