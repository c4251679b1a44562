"""``asynckubelet run`` always ends: a pod that cannot run ends it at once with the
kubelet's reason and message, a pod the node cannot take is rejected before anything
starts, signals stop the pods (a second one kills them), and a closed stdout ends the run
quietly. Real pods on the real engine, through a pipe and a pseudo-terminal."""

from __future__ import annotations

import base64
import os
import pty
import select
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from integration.harness import Engine
from integration.registry import Registry, registry
from integration.run_helpers import node_containers, run_command, run_env, run_pod, write_manifest

__all__ = ["registry"]


def _last_line(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stderr.strip().splitlines()[-1]


def test_an_image_never_pulled_ends_the_run_with_err_image_never_pull(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    manifest = write_manifest(
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: never}
        spec:
          containers:
            - {name: app, image: akltest.local/absent:1, imagePullPolicy: Never}
        """,
    )
    proc = run_pod(manifest, node=node_name)
    assert proc.returncode == 1
    assert _last_line(proc) == (
        'pod/never/app: ErrImageNeverPull: Container image "akltest.local/absent:1" is not '
        "present with pull policy of Never"
    )
    assert proc.stderr.count("ErrImageNeverPull") == 1, "the failure is printed once"
    assert node_containers(docker_engine, node_name) == []


def test_an_invalid_image_name_ends_the_run_with_invalid_image_name(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    manifest = write_manifest(
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: badname}
        spec:
          containers:
            - {name: app, image: "akltest.local/Upper:1"}
        """,
    )
    proc = run_pod(manifest, node=node_name)
    assert proc.returncode == 1
    assert _last_line(proc).startswith("pod/badname/app: InvalidImageName: ")
    assert "invalid reference format" in _last_line(proc)
    assert node_containers(docker_engine, node_name) == []


def test_an_image_the_registry_does_not_have_ends_the_run_with_err_image_pull(
    tmp_path: Path,
    docker_engine: Engine,
    test_images: dict[str, str],
    node_name: str,
    registry: Registry,
) -> None:
    image = f"{registry.host}/akltest-absent-{uuid.uuid4().hex[:8]}:1"
    config = base64.b64encode(registry.dockerconfigjson().encode()).decode()
    manifest = write_manifest(
        tmp_path,
        f"""
        apiVersion: v1
        kind: Secret
        metadata: {{name: pull}}
        type: kubernetes.io/dockerconfigjson
        data: {{.dockerconfigjson: {config}}}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {{name: absent}}
        spec:
          imagePullSecrets: [{{name: pull}}]
          containers:
            - {{name: app, image: "{image}"}}
        """,
    )
    proc = run_pod(manifest, node=node_name)
    assert proc.returncode == 1, proc.stderr
    assert _last_line(proc).startswith("pod/absent/app: ErrImagePull: ")
    assert "not found" in _last_line(proc) or "manifest unknown" in _last_line(proc)
    assert node_containers(docker_engine, node_name) == []


def test_a_missing_config_map_ends_the_run_after_the_config_timeout(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    manifest = write_manifest(
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: noconfig}
        spec:
          containers:
            - name: app
              image: BUSYBOX
              command: ["true"]
              env:
                - name: X
                  valueFrom: {configMapKeyRef: {name: x, key: k}}
        """,
    )
    proc = run_pod(manifest, "--config-timeout", "1", node=node_name)
    assert proc.returncode == 1
    assert _last_line(proc) == (
        'pod/noconfig/app: CreateContainerConfigError: configmap "x" not found'
    )
    assert 'pod/noconfig/app: CreateContainerConfigError: configmap "x" not found' in (
        proc.stderr.splitlines()
    ), "the waiting reason shows while the run waits"
    assert node_containers(docker_engine, node_name) == []


def test_a_host_port_a_host_process_holds_is_rejected_before_anything_starts(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        manifest = write_manifest(
            tmp_path,
            f"""
            apiVersion: v1
            kind: Pod
            metadata: {{name: porty}}
            spec:
              containers:
                - name: app
                  image: BUSYBOX
                  ports: [{{containerPort: 80, hostPort: {port}, hostIP: 127.0.0.1}}]
            """,
        )
        proc = run_pod(manifest, "--pod-security", "privileged", node=node_name)
    assert proc.returncode == 1
    assert _last_line(proc) == (
        "pod/porty: HostPortConflict: Pod was rejected: cannot start the pod due to host port "
        f"conflict: 127.0.0.1:{port}/TCP is already in use on the node by a process that is not "
        "one of its pods"
    )
    assert node_containers(docker_engine, node_name) == []


def test_two_pods_asking_for_one_host_port_are_refused_with_node_ports(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pod = """
        apiVersion: v1
        kind: Pod
        metadata: {{name: {name}}}
        spec:
          containers:
            - name: app
              image: BUSYBOX
              ports: [{{containerPort: 80, hostPort: {port}}}]
        """
    manifest = write_manifest(
        tmp_path, pod.format(name="one", port=port) + "---" + pod.format(name="two", port=port)
    )
    proc = run_pod(manifest, "--pod-security", "privileged", node=node_name)
    assert proc.returncode == 1
    assert _last_line(proc) == (
        "pod/two: NodePorts: Pod was rejected: Predicate NodePorts failed: node(s) didn't have "
        "free ports for the requested pod ports"
    )
    assert node_containers(docker_engine, node_name) == []


def test_a_host_port_another_run_forwards_is_refused_with_node_ports(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pod = """
        apiVersion: v1
        kind: Pod
        metadata: {{name: {name}}}
        spec:
          terminationGracePeriodSeconds: 1
          containers:
            - name: app
              image: BUSYBOX
              command: ["sleep", "3600"]
              ports: [{{containerPort: 80, hostPort: {port}}}]
        """
    first = write_manifest(tmp_path, pod.format(name="first", port=port), name="first.yaml")
    second = write_manifest(tmp_path, pod.format(name="second", port=port), name="second.yaml")
    holder = subprocess.Popen(
        run_command(str(first), "--pod-security", "privileged", node=node_name),
        env=run_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not any(c["State"] == "running" for c in node_containers(docker_engine, node_name)):
            assert holder.poll() is None, holder.communicate()[1]
            assert time.monotonic() < deadline, "the first pod did not start"
            time.sleep(0.2)
        proc = run_pod(second, "--pod-security", "privileged", node=f"{node_name}-b")
        assert proc.returncode == 1, proc.stderr
        assert _last_line(proc) == (
            "pod/second: NodePorts: Pod was rejected: Predicate NodePorts failed: node(s) "
            "didn't have free ports for the requested pod ports"
        )
        assert node_containers(docker_engine, f"{node_name}-b") == []
    finally:
        holder.send_signal(signal.SIGINT)
        holder.communicate(timeout=60)
    assert node_containers(docker_engine, node_name) == []


@pytest.mark.parametrize(
    ("resources", "extra", "expected"),
    [
        (
            "{limits: {example.com/dongle: 1}}",
            (),
            "pod/greedy: OutOfexample.com/dongle: Pod was rejected: Node didn't have enough "
            "resource: example.com/dongle, requested: 1, used: 0, capacity: 0",
        ),
        (
            "{requests: {cpu: '2'}}",
            ("--capacity", "cpu=1"),
            "pod/greedy: OutOfcpu: Pod was rejected: Node didn't have enough resource: cpu, "
            "requested: 2000, used: 0, capacity: 1000",
        ),
    ],
    ids=["unadvertised-extended-resource", "more-cpu-than-capacity"],
)
def test_a_pod_asking_for_more_than_the_node_offers_is_rejected(
    tmp_path: Path,
    docker_engine: Engine,
    test_images: dict[str, str],
    node_name: str,
    resources: str,
    extra: tuple[str, ...],
    expected: str,
) -> None:
    manifest = write_manifest(
        tmp_path,
        f"""
        apiVersion: v1
        kind: Pod
        metadata: {{name: greedy}}
        spec:
          containers:
            - {{name: app, image: BUSYBOX, resources: {resources}}}
        """,
    )
    proc = run_pod(manifest, *extra, node=node_name)
    assert proc.returncode == 1
    assert _last_line(proc) == expected
    assert node_containers(docker_engine, node_name) == []


def test_an_advertised_extended_resource_is_admitted(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    manifest = write_manifest(
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: dongled}
        spec:
          restartPolicy: Never
          containers:
            - name: app
              image: BUSYBOX
              command: ["echo", "has a dongle"]
              resources: {limits: {example.com/dongle: 1}}
        """,
    )
    proc = run_pod(manifest, "--capacity", "example.com/dongle=2", node=node_name)
    assert proc.returncode == 0, proc.stderr
    assert "dongled/app | has a dongle" in proc.stdout.splitlines()


FOREVER = """
apiVersion: v1
kind: Pod
metadata: {name: stubborn}
spec:
  terminationGracePeriodSeconds: 60
  containers:
    - name: loop
      image: BUSYBOX
      command:
        - sh
        - -c
        - trap 'echo ignoring TERM' TERM; echo started; while true; do sleep 0.2; done
"""


def _read_until(fd: int, wanted: str, *, timeout: float) -> str:
    """Read the pseudo-terminal until ``wanted`` shows (or the time runs out)."""
    seen = ""
    deadline = time.monotonic() + timeout
    while wanted not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen += os.read(fd, 4096).decode(errors="replace")
            except OSError:
                break
    return seen


def test_through_a_terminal_the_first_signal_counts_down_and_the_second_kills(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    manifest = write_manifest(tmp_path, FOREVER)
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        run_command(str(manifest), node=node_name),
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=run_env(),
        start_new_session=True,
    )
    os.close(follower)
    try:
        assert "stubborn/loop | started" in _read_until(leader, "started", timeout=60)
        proc.send_signal(signal.SIGINT)
        shown = _read_until(leader, "s left (Ctrl-C again to kill now)", timeout=30)
        assert "stopping pod/stubborn: " in shown
        assert "s left (Ctrl-C again to kill now)" in shown
        assert "\r" in _read_until(leader, "\r", timeout=5), "the countdown is redrawn in place"
        proc.send_signal(signal.SIGINT)
        rest = _read_until(leader, "killing the pods now", timeout=10)
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(leader)
    assert "second signal: killing the pods now" in rest
    assert code == 128 + signal.SIGINT
    assert node_containers(docker_engine, node_name) == []


def test_through_a_pipe_sigterm_counts_down_in_lines(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    manifest = write_manifest(tmp_path, FOREVER.replace("60", "3"))
    proc = subprocess.Popen(
        run_command(str(manifest), node=node_name),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=run_env(),
    )
    try:
        assert proc.stdout is not None
        assert "stubborn/loop | started" in proc.stdout.readline()
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM
    lines = [line for line in stderr.splitlines() if line.startswith("stopping pod/stubborn: ")]
    assert lines
    assert lines[0] == "stopping pod/stubborn: 3s left (Ctrl-C again to kill now)"
    assert "\r" not in stderr
    assert node_containers(docker_engine, node_name) == []


def test_a_closed_stdout_ends_the_run_quietly(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    manifest = write_manifest(
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: chatty}
        spec:
          terminationGracePeriodSeconds: 2
          containers:
            - name: talk
              image: BUSYBOX
              command: ["sh", "-c", "while true; do echo line; sleep 0.05; done"]
        """,
    )
    proc = subprocess.Popen(
        run_command(str(manifest), node=node_name),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=run_env(),
    )
    try:
        assert proc.stdout is not None
        assert proc.stderr is not None
        assert proc.stdout.readline() == b"chatty/talk | line\n"
        proc.stdout.close()
        code = proc.wait(timeout=60)
        stderr = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
        if proc.stderr is not None:
            proc.stderr.close()
    assert code == 128 + signal.SIGPIPE
    assert "Traceback" not in stderr
    assert "BrokenPipe" not in stderr
    assert "error" not in stderr
    assert node_containers(docker_engine, node_name) == []


FAST_PRINTER = """
apiVersion: v1
kind: Pod
metadata: {name: many}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: GRACE
  containers:
    - name: print
      image: BUSYBOX
      command: ["sh", "-c", "i=0; while true; do i=$((i+1)); echo line $i; done"]
"""


def test_a_closed_stdout_ends_a_fast_printers_run_without_reading_its_backlog(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    # The shell ignores SIGTERM: it prints through the whole grace period, leaving millions
    # of lines that nobody will read once it is killed.
    manifest = write_manifest(tmp_path, FAST_PRINTER.replace("GRACE", "10"))
    with (tmp_path / "stderr").open("w+b") as stderr:
        proc = subprocess.Popen(
            run_command(str(manifest), node=node_name),
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=run_env(),
        )
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline() == b"many/print | line 1\n"
            proc.stdout.close()
            code = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        stderr.seek(0)
        shown = stderr.read().decode(errors="replace")
    assert code == 128 + signal.SIGPIPE
    assert "Traceback" not in shown
    assert "error" not in shown
    assert node_containers(docker_engine, node_name) == []


def test_sigint_during_a_fast_printer_ends_the_run_once_its_pod_is_stopped(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    manifest = write_manifest(tmp_path, FAST_PRINTER.replace("GRACE", "2"))
    stderr_path = tmp_path / "stderr"
    with stderr_path.open("wb") as stderr:
        proc = subprocess.Popen(
            run_command(str(manifest), node=node_name),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=run_env(),
        )
        try:
            deadline = time.monotonic() + 60
            while "pod/many: Running" not in stderr_path.read_text(errors="replace"):
                assert time.monotonic() < deadline, "the pod did not start"
                assert proc.poll() is None, "the run ended before its pod ran"
                time.sleep(0.2)
            time.sleep(1)
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert code == 128 + signal.SIGINT
    assert "stopping pod/many: 2s left" in stderr_path.read_text(errors="replace")
    assert node_containers(docker_engine, node_name) == []
