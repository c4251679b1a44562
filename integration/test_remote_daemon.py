"""Shape B of Docker-in-Docker CI: the agent outside, the daemon in a DinD container that it
reaches only over ``tcp://`` with TLS (``DOCKER_TLS_VERIFY``, ``DOCKER_CERT_PATH``), as a
CI job talks to a ``docker:dind`` service. The agent cannot enter that daemon's namespaces,
so everything here goes through the Docker API."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from asynckubelet import errors
from asynckubelet.docker import DockerClient
from asynckubelet.docker.engine import EngineTLS
from asynckubelet.images import build as image_build
from asynckubelet.runtime import naming
from integration.dind import remote, tls
from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE, Engine, remove_owned
from integration.runtime_helpers import finished_syncs

pytestmark = pytest.mark.dind

REPO = Path(__file__).resolve().parent.parent

WEB = """
apiVersion: v1
kind: Pod
metadata: {name: remote-web}
spec:
  terminationGracePeriodSeconds: 3
  initContainers:
  - name: setup
    image: BUSYBOX
    command: [sh, -c, "echo setup done"]
  - name: sidecar
    image: BUSYBOX
    restartPolicy: Always
    command: [sh, -c, "trap 'exit 0' TERM; echo sidecar up; while true; do sleep 0.2; done"]
  containers:
  - name: app
    image: BUSYBOX
    command:
    - sh
    - -c
    - "trap 'exit 0' TERM; echo app up; touch /tmp/ready; while true; do sleep 0.2; done"
    readinessProbe:
      exec: {command: [cat, /tmp/ready]}
      periodSeconds: 1
"""


@pytest.fixture(scope="module")
def daemon(docker_engine: Engine) -> Iterator[remote.RemoteDaemon]:
    """A TLS-only DinD daemon with the test images loaded, removed after the module."""
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


def _owned(daemon: remote.RemoteDaemon, node: str) -> list[str]:
    async def go() -> list[str]:
        async with DockerClient(url=daemon.url, tls=daemon.tls) as client:
            rows = await client.list_containers(labels={naming.LABEL_NODE: node})
            return [r["Id"] for r in rows]

    return anyio.run(go)


def _run_cli(
    manifest: Path, *, daemon: remote.RemoteDaemon, node: str, cert_path: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **daemon.environment(), "PYTHONPATH": str(REPO)}
    if cert_path is not None:
        env["DOCKER_CERT_PATH"] = str(cert_path)
    return subprocess.run(
        [
            sys.executable, "-m", "asynckubelet", "run", str(manifest),
            "--docker-host", daemon.url, "--node-name", node,
            "--pause-image", PAUSE_IMAGE, "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )  # fmt: skip


def _foreign_client_certs(daemon: remote.RemoteDaemon, folder: Path) -> Path:
    """A DOCKER_CERT_PATH trusting the daemon, with a client certificate it does not trust."""
    other = tls.make_ca(folder / "other-ca", name="not-the-daemons-ca")
    certs = tls.client_material(other, folder=folder / "foreign-client")
    shutil.copyfile(daemon.ca.cert, certs / "ca.pem")
    return certs


def _untrusting_certs(daemon: remote.RemoteDaemon, folder: Path) -> Path:
    """A DOCKER_CERT_PATH with the daemon's client certificate but another CA."""
    other = tls.make_ca(folder / "other-ca", name="not-the-daemons-ca")
    certs = folder / "untrusting"
    certs.mkdir()
    for file in ("cert.pem", "key.pem"):
        shutil.copyfile(daemon.cert_path / file, certs / file)
    shutil.copyfile(other.cert, certs / "ca.pem")
    return certs


def test_a_pod_with_an_init_and_two_app_containers_runs_to_completion_over_tls(
    tmp_path: Path, daemon: remote.RemoteDaemon, node_name: str
) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(
        textwrap.dedent(
            """
            apiVersion: v1
            kind: Pod
            metadata: {name: remote}
            spec:
              restartPolicy: Never
              initContainers:
                - name: prepare
                  image: BUSYBOX
                  command: ["sh", "-c", "echo prepared"]
              containers:
                - name: first
                  image: BUSYBOX
                  command: ["sh", "-c", "echo first done"]
                - name: second
                  image: BUSYBOX
                  command: ["sh", "-c", "sleep 1; echo second done"]
            """
        ).replace("BUSYBOX", BUSYBOX_IMAGE)
    )
    proc = _run_cli(manifest, daemon=daemon, node=node_name)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "remote/prepare | prepared" in lines
    assert "remote/first | first done" in lines
    assert "remote/second | second done" in lines
    assert lines.index("remote/prepare | prepared") < lines.index("remote/first | first done")
    assert _owned(daemon, node_name) == []


def test_an_untrusted_engine_certificate_is_reported_with_the_daemons_address(
    tmp_path: Path, daemon: remote.RemoteDaemon, node_name: str
) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
        f"    - {{name: c, image: {BUSYBOX_IMAGE}}}\n"
    )
    proc = _run_cli(
        manifest, daemon=daemon, node=node_name, cert_path=_untrusting_certs(daemon, tmp_path)
    )
    assert proc.returncode != 0
    assert f"cannot talk to the Docker engine at {daemon.url} over TLS" in proc.stderr
    assert "the engine's certificate is not trusted" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.anyio
async def test_a_client_certificate_the_engine_does_not_trust_is_reported_as_refused(
    tmp_path: Path, daemon: remote.RemoteDaemon
) -> None:
    certs = _foreign_client_certs(daemon, tmp_path)
    async with DockerClient(url=daemon.url, tls=EngineTLS(verify=True, cert_path=certs)) as c:
        with pytest.raises(errors.RuntimeUnavailable) as caught:
            await c.version()
    assert f"the Docker engine at {daemon.url} over TLS" in str(caught.value)
    assert "the engine refused this client's certificate" in str(caught.value)


@pytest.mark.anyio
async def test_the_engine_is_not_reachable_without_tls(daemon: remote.RemoteDaemon) -> None:
    async with DockerClient(url=daemon.url, tls=None, retry_attempts=1) as c:
        with pytest.raises(errors.RuntimeUnavailable) as caught:
            await c.version()
    assert f"the Docker engine at {daemon.url} speaks TLS only" in str(caught.value)


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
    tmp_path: Path, daemon: remote.RemoteDaemon, node_name: str
) -> Iterator[RemoteNode]:
    node = RemoteNode(daemon=daemon, state=tmp_path / "state", node=node_name)
    node.start()
    try:
        yield node
    finally:
        node.stop()

        async def clean() -> None:
            async with DockerClient(url=daemon.url, tls=daemon.tls) as client:
                await remove_owned(client, node_name)
                for network in await client.list_networks(labels={naming.LABEL_NODE: node_name}):
                    await client.remove_network(network["Name"])

        anyio.run(clean)


def _apply_web(node: RemoteNode, tmp_path: Path) -> None:
    path = tmp_path / "web.yaml"
    path.write_text(textwrap.dedent(WEB).replace("BUSYBOX", BUSYBOX_IMAGE))
    proc = node.cli("apply", "-f", str(path), "--wait", "--timeout", "90")
    assert proc.returncode == 0, proc.stderr + node.log()


def test_a_served_pod_with_a_sidecar_and_an_exec_probe_becomes_ready_over_tls(
    remote_node: RemoteNode, tmp_path: Path
) -> None:
    _apply_web(remote_node, tmp_path)
    _header, row = remote_node.cli("get", "pods").stdout.splitlines()
    assert row.split()[:4] == ["remote-web", "2/2", "Running", "0"]


def test_logs_of_a_remote_pods_container_are_printed(
    remote_node: RemoteNode, tmp_path: Path
) -> None:
    _apply_web(remote_node, tmp_path)
    assert remote_node.cli("logs", "remote-web", "-c", "sidecar").stdout == "sidecar up\n"
    assert remote_node.cli("logs", "remote-web", "-c", "setup").stdout == "setup done\n"


def test_exec_in_a_remote_pods_container_returns_its_output_and_exit_code(
    remote_node: RemoteNode, tmp_path: Path
) -> None:
    _apply_web(remote_node, tmp_path)
    proc = remote_node.cli("exec", "remote-web", "-c", "app", "--", "sh", "-c", "echo hi; exit 4")
    assert (proc.returncode, proc.stdout) == (4, "hi\n")


def test_deleting_a_remote_pod_removes_all_its_containers(
    remote_node: RemoteNode, tmp_path: Path
) -> None:
    _apply_web(remote_node, tmp_path)
    proc = remote_node.cli("delete", "pod", "remote-web", "--grace-period", "1")
    assert (proc.returncode, proc.stdout) == (0, 'pod "remote-web" deleted\n'), proc.stderr
    assert _owned(remote_node.daemon, remote_node.node) == []


TINYWEB = "akltest.local/tinyweb:1"
"""A web server image with nothing else in it (``dind/tinyweb.c``): no shell, wget or nc."""
HOST_PORT = 18080


@pytest.fixture(scope="module")
def tinyweb(daemon: remote.RemoteDaemon, tmp_path_factory: pytest.TempPathFactory) -> str:
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
        async with DockerClient(url=daemon.url, tls=daemon.tls) as client:
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


def _helpers(daemon: remote.RemoteDaemon, node: str) -> list[str]:
    async def go() -> list[str]:
        async with DockerClient(url=daemon.url, tls=daemon.tls) as client:
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
    assert _owned(remote_node.daemon, remote_node.node) == []


def test_doctor_explains_the_remote_shape_and_why_auto_picks_the_docker_backend(
    tmp_path: Path, daemon: remote.RemoteDaemon, node_name: str
) -> None:
    node = RemoteNode(daemon=daemon, state=tmp_path / "state", node=node_name)
    proc = node.cli("doctor")
    lines = proc.stdout.splitlines()
    assert f"ok   Docker engine at {daemon.url}: version" in proc.stdout, proc.stdout
    shape = next(line for line in lines if "engine shape:" in line)
    assert f"remote, {daemon.url} over TLS, the engine verified against" in shape
    assert f"{daemon.cert_path / 'ca.pem'}, client certificate {daemon.cert_path / 'cert.pem'}" in (
        shape
    )
    assert "cannot enter its containers' namespaces or reach pod IPs" in shape
    assert "probe helper container" in shape
    assert (
        f"ok   network backend (--network auto): docker, because the Docker daemon at {daemon.url} "
        "is not local"
    ) in lines
    assert any(
        line.startswith("ok   probe helper image asynckubelet.local/probe:") for line in lines
    )


def test_doctor_names_the_daemon_and_the_certificate_problem(
    tmp_path: Path, daemon: remote.RemoteDaemon, node_name: str
) -> None:
    node = RemoteNode(daemon=daemon, state=tmp_path / "state", node=node_name)
    env = {**node.env, "DOCKER_CERT_PATH": str(_untrusting_certs(daemon, tmp_path))}
    proc = subprocess.run(
        [sys.executable, "-m", "asynckubelet", "doctor"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 1
    assert f"cannot talk to the Docker engine at {daemon.url} over TLS" in proc.stdout
    assert "the engine's certificate is not trusted" in proc.stdout


def _gitlab_job() -> dict[str, Any]:
    """The GitLab CI job of the remote daemons' page, ``docs/ci.md``."""
    text = (REPO / "docs" / "ci.md").read_text()
    start = text.index("```yaml\nremote-daemon:")
    block = text[start + len("```yaml\n") : text.index("```", start + 3)]
    return dict(yaml.safe_load(block)["remote-daemon"])


def test_the_docs_gitlab_job_uses_the_tests_variables_and_certificate_layout(
    daemon: remote.RemoteDaemon,
) -> None:
    variables = _gitlab_job()["variables"]
    host = urllib.parse.urlsplit(variables["DOCKER_HOST"])
    assert (host.scheme, host.port) == ("tcp", remote.PORT)
    assert variables["DOCKER_TLS_VERIFY"] == "1"
    assert variables["DOCKER_CERT_PATH"] == variables["DOCKER_TLS_CERTDIR"] + "/client"
    assert set(daemon.environment()) == {"DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"}
    assert daemon.cert_path.name == "client"
    assert sorted(p.name for p in daemon.cert_path.iterdir()) == ["ca.pem", "cert.pem", "key.pem"]


def test_the_docs_gitlab_job_script_runs_against_the_tls_only_daemon(
    daemon: remote.RemoteDaemon, tmp_path: Path, node_name: str
) -> None:
    commands = [c for c in _gitlab_job()["script"] if c.startswith("asynckubelet ")]
    assert commands, "the GitLab job of docs/ci.md runs no asynckubelet command"
    env = {
        **os.environ,
        **daemon.environment(),
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
        "ASYNCKUBELET_STATE_DIR": str(tmp_path / "state"),
        "ASYNCKUBELET_NODE_NAME": node_name,
    }
    outputs = []
    for command in commands:
        proc = subprocess.run(  # noqa: S602  (the CI job lines of docs/ci.md, run as its shell runs them)
            command, shell=True, cwd=REPO, env=env, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, f"{command}:\n{proc.stdout}{proc.stderr}"
        outputs.append(proc.stdout)
    assert "hello/hello | Hello from pod hello in namespace default" in outputs[-1]
    assert _owned(daemon, node_name) == []
