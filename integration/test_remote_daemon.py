"""Shape B of Docker-in-Docker CI: the agent outside, the daemon in a DinD container that it
reaches only over ``tcp://`` with TLS (``DOCKER_TLS_VERIFY``, ``DOCKER_CERT_PATH``), as a
CI job talks to a ``docker:dind`` service. The agent cannot enter that daemon's namespaces,
so everything here goes through the Docker API. The daemon is ``remote_daemon``
(``integration/remote_helpers.py``), one for the session."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import yaml

from asynckubelet import errors
from asynckubelet.docker import DockerClient
from asynckubelet.docker.engine import EngineTLS
from integration.dind import remote, tls
from integration.harness import BUSYBOX_IMAGE
from integration.remote_helpers import REPO, RemoteNode, owned, run_cli, untrusting_certs

pytestmark = pytest.mark.dind

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


def _foreign_client_certs(remote_daemon: remote.RemoteDaemon, folder: Path) -> Path:
    """A DOCKER_CERT_PATH trusting the daemon, with a client certificate it does not trust."""
    other = tls.make_ca(folder / "other-ca", name="not-the-daemons-ca")
    certs = tls.client_material(other, folder=folder / "foreign-client")
    shutil.copyfile(remote_daemon.ca.cert, certs / "ca.pem")
    return certs


def test_a_pod_with_an_init_and_two_app_containers_runs_to_completion_over_tls(
    tmp_path: Path, remote_daemon: remote.RemoteDaemon, node_name: str
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
    proc = run_cli(manifest, daemon=remote_daemon, node=node_name)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "remote/prepare | prepared" in lines
    assert "remote/first | first done" in lines
    assert "remote/second | second done" in lines
    assert lines.index("remote/prepare | prepared") < lines.index("remote/first | first done")
    assert owned(remote_daemon, node_name) == []


def test_an_untrusted_engine_certificate_is_reported_with_the_daemons_address(
    tmp_path: Path, remote_daemon: remote.RemoteDaemon, node_name: str
) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
        f"    - {{name: c, image: {BUSYBOX_IMAGE}}}\n"
    )
    proc = run_cli(
        manifest,
        daemon=remote_daemon,
        node=node_name,
        cert_path=untrusting_certs(remote_daemon, tmp_path),
    )
    assert proc.returncode != 0
    assert f"cannot talk to the Docker engine at {remote_daemon.url} over TLS" in proc.stderr
    assert "the engine's certificate is not trusted" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.anyio
async def test_a_client_certificate_the_engine_does_not_trust_is_reported_as_refused(
    tmp_path: Path, remote_daemon: remote.RemoteDaemon
) -> None:
    certs = _foreign_client_certs(remote_daemon, tmp_path)
    async with DockerClient(
        url=remote_daemon.url, tls=EngineTLS(verify=True, cert_path=certs)
    ) as c:
        with pytest.raises(errors.RuntimeUnavailable) as caught:
            await c.version()
    assert f"the Docker engine at {remote_daemon.url} over TLS" in str(caught.value)
    assert "the engine refused this client's certificate" in str(caught.value)


@pytest.mark.anyio
async def test_the_engine_is_not_reachable_without_tls(remote_daemon: remote.RemoteDaemon) -> None:
    async with DockerClient(url=remote_daemon.url, tls=None, retry_attempts=1) as c:
        with pytest.raises(errors.RuntimeUnavailable) as caught:
            await c.version()
    assert f"the Docker engine at {remote_daemon.url} speaks TLS only" in str(caught.value)


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
    assert owned(remote_node.daemon, remote_node.node) == []


def test_doctor_explains_the_remote_shape_and_why_auto_picks_the_docker_backend(
    tmp_path: Path, remote_daemon: remote.RemoteDaemon, node_name: str
) -> None:
    node = RemoteNode(daemon=remote_daemon, state=tmp_path / "state", node=node_name)
    url, certs = remote_daemon.url, remote_daemon.cert_path
    proc = node.cli("doctor")
    lines = proc.stdout.splitlines()
    assert f"ok   Docker engine at {url}: version" in proc.stdout, proc.stdout
    shape = next(line for line in lines if "engine shape:" in line)
    assert f"remote, {url} over TLS, the engine verified against" in shape
    assert f"{certs / 'ca.pem'}, client certificate {certs / 'cert.pem'}" in shape
    assert "cannot enter its containers' namespaces or reach pod IPs" in shape
    assert "probe helper container" in shape
    assert (
        f"ok   network backend (--network auto): docker, because the Docker daemon at {url} "
        "is not local"
    ) in lines
    assert any(
        line.startswith("ok   probe helper image asynckubelet.local/probe:") for line in lines
    )


def test_doctor_names_the_daemon_and_the_certificate_problem(
    tmp_path: Path, remote_daemon: remote.RemoteDaemon, node_name: str
) -> None:
    node = RemoteNode(daemon=remote_daemon, state=tmp_path / "state", node=node_name)
    env = {**node.env, "DOCKER_CERT_PATH": str(untrusting_certs(remote_daemon, tmp_path))}
    proc = subprocess.run(
        [sys.executable, "-m", "asynckubelet", "doctor"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 1
    assert f"cannot talk to the Docker engine at {remote_daemon.url} over TLS" in proc.stdout
    assert "the engine's certificate is not trusted" in proc.stdout


def _gitlab_job() -> dict[str, Any]:
    """The GitLab CI job of the remote daemons' page, ``docs/ci.md``."""
    text = (REPO / "docs" / "ci.md").read_text()
    start = text.index("```yaml\nremote-daemon:")
    block = text[start + len("```yaml\n") : text.index("```", start + 3)]
    return dict(yaml.safe_load(block)["remote-daemon"])


def test_the_docs_gitlab_job_uses_the_tests_variables_and_certificate_layout(
    remote_daemon: remote.RemoteDaemon,
) -> None:
    variables = _gitlab_job()["variables"]
    host = urllib.parse.urlsplit(variables["DOCKER_HOST"])
    assert (host.scheme, host.port) == ("tcp", remote.PORT)
    assert variables["DOCKER_TLS_VERIFY"] == "1"
    assert variables["DOCKER_CERT_PATH"] == variables["DOCKER_TLS_CERTDIR"] + "/client"
    assert set(remote_daemon.environment()) == {
        "DOCKER_HOST",
        "DOCKER_TLS_VERIFY",
        "DOCKER_CERT_PATH",
    }
    assert remote_daemon.cert_path.name == "client"
    assert sorted(p.name for p in remote_daemon.cert_path.iterdir()) == [
        "ca.pem",
        "cert.pem",
        "key.pem",
    ]


def test_the_docs_gitlab_job_script_runs_against_the_tls_only_daemon(
    remote_daemon: remote.RemoteDaemon, tmp_path: Path, node_name: str
) -> None:
    commands = [c for c in _gitlab_job()["script"] if c.startswith("asynckubelet ")]
    assert commands, "the GitLab job of docs/ci.md runs no asynckubelet command"
    env = {
        **os.environ,
        **remote_daemon.environment(),
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
    assert owned(remote_daemon, node_name) == []
