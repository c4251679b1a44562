"""``asynckubelet run``: real pods on real Docker through the command line, end to end."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import anyio
import pytest

from asynckubelet.docker import ContainerInspect, DockerClient
from asynckubelet.runtime import naming
from integration.harness import BUSYBOX_IMAGE, Engine
from integration.run_helpers import (
    REPO,
    node_containers,
    run_command,
    run_env,
    run_pod,
    write_manifest,
)


def test_run_prints_the_pods_output_exits_zero_and_leaves_nothing(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    example = (REPO / "examples" / "hello.yaml").read_text()
    manifest = tmp_path / "hello.yaml"
    manifest.write_text(example.replace("asynckubelet.local/busybox:1.35", BUSYBOX_IMAGE))
    proc = run_pod(manifest, node=node_name)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "hello/prepare | init: preparing a greeting for the world" in lines
    assert "hello/hello | Hello from pod hello in namespace default" in lines
    assert lines.index("hello/prepare | init: preparing a greeting for the world") < lines.index(
        "hello/hello | Hello from pod hello in namespace default"
    )
    assert node_containers(docker_engine, node_name) == []


def test_run_exits_with_the_first_non_zero_exit_code(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    manifest = write_manifest(
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: failing}
        spec:
          restartPolicy: Never
          containers:
            - name: first
              image: BUSYBOX
              command: ["sh", "-c", "echo oops >&2; exit 3"]
            - name: later
              image: BUSYBOX
              command: ["sh", "-c", "sleep 1; exit 5"]
        """,
    )
    proc = run_pod(manifest, node=node_name)
    assert proc.returncode == 3, proc.stderr
    assert "failing/first | oops" in proc.stderr.splitlines()
    assert node_containers(docker_engine, node_name) == []


def test_containers_share_the_sandbox_network_and_ipc_namespaces(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    manifest = write_manifest(
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: shared}
        spec:
          restartPolicy: Never
          containers:
            - name: server
              image: BUSYBOX
              command: ["sh", "-c", "echo pong | nc -l -p 7777"]
            - name: client
              image: BUSYBOX
              command:
                - sh
                - -c
                - |
                  for i in $(seq 50); do
                    if out=$(nc 127.0.0.1 7777 </dev/null 2>/dev/null) && [ -n "$out" ]; then
                      echo "got $out"; exit 0
                    fi
                    sleep 0.1
                  done
                  exit 1
        """,
    )
    proc = run_pod(manifest, "--keep", node=node_name)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "shared/client | got pong" in proc.stdout.splitlines()

    async def namespaces() -> None:
        async with DockerClient(url=docker_engine.url) as client:
            rows = await client.list_containers(labels={naming.LABEL_NODE: node_name})
            by_type: dict[str, list[ContainerInspect]] = {}
            for row in rows:
                info = await client.inspect_container(row["Id"])
                labels = info["Config"].get("Labels") or {}
                by_type.setdefault(labels[naming.LABEL_TYPE], []).append(info)
            (sandbox,) = by_type[naming.TYPE_SANDBOX]
            assert sandbox["HostConfig"]["IpcMode"] == "shareable"
            assert sandbox["HostConfig"]["NetworkMode"] == "none"
            assert sandbox["Name"].startswith(f"/{naming.NAME_PREFIX}_POD_shared_default_")
            for info in by_type[naming.TYPE_CONTAINER]:
                assert info["HostConfig"]["NetworkMode"] == f"container:{sandbox['Id']}"
                assert info["HostConfig"]["IpcMode"] == f"container:{sandbox['Id']}"
                assert info["Config"]["Labels"][naming.LABEL_SANDBOX_ID] == sandbox["Id"]

    anyio.run(namespaces)


def test_sigint_stops_a_running_pod_gracefully_and_removes_it(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    manifest = write_manifest(
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: forever}
        spec:
          terminationGracePeriodSeconds: 20
          containers:
            - name: loop
              image: BUSYBOX
              command:
                - sh
                - -c
                - trap 'echo got TERM; exit 0' TERM; echo started; while true; do sleep 0.1; done
        """,
    )
    proc = subprocess.Popen(
        run_command(str(manifest), node=node_name),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=run_env(),
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        line = ""
        while time.monotonic() < deadline and "started" not in line:
            line = proc.stdout.readline()
        assert "forever/loop | started" in line
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "forever/loop | got TERM" in stdout.splitlines(), stderr
    assert proc.returncode == 128 + signal.SIGINT
    assert node_containers(docker_engine, node_name) == []


def test_keep_leaves_the_pods_containers_in_place(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    manifest = write_manifest(
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: kept}
        spec:
          restartPolicy: Never
          containers:
            - {name: once, image: BUSYBOX, command: ["true"]}
        """,
    )
    proc = run_pod(manifest, "--keep", node=node_name)
    assert proc.returncode == 0, proc.stderr
    owned = node_containers(docker_engine, node_name)
    types = sorted((r.get("Labels") or {})[naming.LABEL_TYPE] for r in owned)
    assert types == [naming.TYPE_CONTAINER, naming.TYPE_SANDBOX]


def test_a_rejected_manifest_creates_nothing(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    manifest = write_manifest(
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: bad}
        spec:
          containers:
            - name: app
              image: BUSYBOX
              imagee: typo
              ports: [{containerPort: 70000}]
        """,
    )
    proc = run_pod(manifest, node=node_name)
    assert proc.returncode == 1
    assert 'unknown field "spec.containers[0].imagee"' in proc.stderr
    assert "spec.containers[0].ports[0].containerPort: Invalid value: 70000" in proc.stderr
    assert node_containers(docker_engine, node_name) == []


def test_a_dead_docker_daemon_is_a_clear_error(tmp_path: Path, node_name: str) -> None:
    manifest = write_manifest(
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: nodaemon}
        spec:
          containers: [{name: app, image: BUSYBOX}]
        """,
    )
    proc = subprocess.run(
        run_command(str(manifest), "--docker-host", f"unix://{tmp_path}/none.sock", node=node_name),
        capture_output=True,
        text=True,
        timeout=120,
        env=run_env(),
    )
    assert proc.returncode == 1
    assert "cannot reach the Docker engine" in proc.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM])
def test_sigterm_also_stops_the_run(
    tmp_path: Path,
    docker_engine: Engine,
    test_images: dict[str, str],
    node_name: str,
    signum: int,
) -> None:
    manifest = write_manifest(
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: sleeper}
        spec:
          terminationGracePeriodSeconds: 3
          containers:
            - {name: sleep, image: BUSYBOX, command: ["sh", "-c", "echo up; exec sleep 600"]}
        """,
    )
    proc = subprocess.Popen(
        run_command(str(manifest), node=node_name),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=run_env(),
    )
    try:
        assert proc.stdout is not None
        assert "sleeper/sleep | up" in proc.stdout.readline()
        proc.send_signal(signum)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signum
    assert node_containers(docker_engine, node_name) == []


def test_run_refuses_a_pod_with_scheduling_gates_naming_them_and_starts_nothing(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    manifest = write_manifest(
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: gated}
        spec:
          schedulingGates: [{name: example.com/foo}, {name: example.com/bar}]
          containers: [{name: c, image: BUSYBOX, command: [echo, hi]}]
        """,
    )
    proc = run_pod(manifest, node=node_name, timeout=60)
    assert proc.returncode == 1
    assert (
        "pod default/gated has scheduling gates (example.com/foo, example.com/bar): it would "
        "stay SchedulingGated, and `run` has no API to remove them"
    ) in " ".join(proc.stderr.split())
    assert node_containers(docker_engine, node_name) == []


@pytest.mark.parametrize(("extra", "mode"), [((), "2"), (("--no-seccomp-default",), "0")])
def test_run_filters_a_pod_that_set_nothing_with_the_engines_seccomp_profile(
    tmp_path: Path,
    docker_engine: Engine,
    test_images: dict[str, str],
    node_name: str,
    extra: tuple[str, ...],
    mode: str,
) -> None:
    manifest = write_manifest(
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: plain}
        spec:
          restartPolicy: Never
          containers:
            - name: app
              image: BUSYBOX
              command: ["grep", "^Seccomp:", "/proc/self/status"]
        """,
    )
    proc = run_pod(manifest, *extra, node=node_name)
    assert proc.returncode == 0, proc.stderr
    # The terminal renderer expands the tab.
    assert proc.stdout.split() == ["plain/app", "|", "Seccomp:", mode]
