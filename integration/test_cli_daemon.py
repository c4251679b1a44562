"""One node, one truth, end to end on Docker: ``serve`` publishes its socket and its
configuration in the state dir, and every client command finds it there with nothing but
``--state-dir`` (no node name, no level of its own); objects applied from any file are
seen by every pod of their namespace; ``run`` and ``serve`` share one engine and one
state dir without touching each other's pods.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from asynckubelet.cli.options import DEFAULT_NICE
from asynckubelet.docker import ContainerConfig, DockerClient
from asynckubelet.runtime import naming
from integration.harness import BUSYBOX_IMAGE, Engine
from integration.serve_helpers import LONG, Daemon, manifest, serve_daemon, wait_running

SECRET = """
apiVersion: v1
kind: Secret
metadata: {name: db}
stringData: {password: hunter2-do-not-print}
"""
MOUNTS_SECRET = """
apiVersion: v1
kind: Pod
metadata: {name: reader}
spec:
  terminationGracePeriodSeconds: 2
  volumes: [{name: creds, secret: {secretName: db}}]
  containers:
  - name: c
    image: BUSYBOX
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
    volumeMounts: [{name: creds, mountPath: /creds}]
"""
NEEDS_CONFIG = """
apiVersion: v1
kind: Pod
metadata: {name: waiter}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: c
    image: BUSYBOX
    command: [sh, -c, "echo mode=$MODE; trap 'exit 0' TERM; while true; do sleep 0.2; done"]
    env: [{name: MODE, valueFrom: {configMapKeyRef: {name: settings, key: mode}}}]
"""
CONFIG = """
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: fast}
"""


@pytest.fixture
def node(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> Iterator[Daemon]:
    yield from serve_daemon(tmp_path, docker_engine, node_name)


def test_the_daemon_publishes_a_0600_socket_and_its_configuration(node: Daemon) -> None:
    socket_file = node.state / "api.sock"
    info_file = node.state / "node.json"
    assert stat.S_ISSOCK(os.lstat(socket_file).st_mode)
    assert stat.S_IMODE(os.lstat(socket_file).st_mode) == 0o600
    assert stat.S_IMODE(info_file.stat().st_mode) == 0o600
    info = json.loads(info_file.read_text())
    assert (info["node_name"], info["pod_security"]) == (node.node_name, "baseline")
    assert info["socket"] == str(socket_file)
    assert info["listen"] == f"http://127.0.0.1:{node.port}"
    assert info["network"] in ("bridge", "docker", "cni", "loopback")
    node.stop()
    assert not socket_file.exists()
    assert not info_file.exists()


def test_reset_refuses_while_the_daemon_runs(node: Daemon) -> None:
    proc = node.cli("reset")
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"error: a node daemon runs for state dir {node.state}: stop it first "
        "(its pods keep using the pod network)"
    )
    assert node.network is not None
    assert Path("/sys/class/net", node.network.bridge).exists()


def priorities(pid: int) -> set[int]:
    """The CPU priorities (nice values) of the process's threads."""
    found = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            found.add(os.getpriority(os.PRIO_PROCESS, int(tid)))
        except ProcessLookupError:
            continue
    return found


def test_the_daemon_runs_above_its_containers_cpu_priority(node: Daemon, tmp_path: Path) -> None:
    assert node.process is not None
    node.cli("apply", "-f", manifest(tmp_path, "a.yaml", LONG.replace("NAME", "solo")))
    wait_running(node, "solo")
    assert priorities(node.process.pid) == {DEFAULT_NICE}
    with open(f"/proc/{node.process.pid}/autogroup") as f:
        group = f.read().split()
    # Empty: the daemon's session shares the root group (its ancestors never left init's
    # session), which has no priority of its own to set.
    if group:
        assert group[-2:] == ["nice", str(DEFAULT_NICE)]
    assert "CPU priority" not in node.log()

    ids = list(node.containers())

    async def pids() -> list[int]:
        async with DockerClient(url=node.engine.url) as client:
            return [int((await client.inspect_container(i))["State"]["Pid"]) for i in ids]

    container_pids = anyio.run(pids)
    assert container_pids
    assert all(priorities(pid) == {0} for pid in container_pids)


def test_the_daemons_first_line_names_its_paths_as_they_are(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    """A state dir whose name reads as rich markup is printed as it is, not styled away."""
    for node in serve_daemon(tmp_path, docker_engine, node_name, state="st[bold]ate"):
        state = tmp_path / "st[bold]ate"
        assert (
            f"node {node_name}: manifests {state / 'manifests'}, http://127.0.0.1:{node.port}, "
            f"local API {state / 'api.sock'}"
        ) in node.log().splitlines()


def test_a_daemon_killed_leaves_a_stale_socket_that_the_next_one_replaces(
    node: Daemon, tmp_path: Path
) -> None:
    assert (
        node.cli("apply", "-f", manifest(tmp_path, "a.yaml", LONG.replace("NAME", "a"))).returncode
        == 0
    )
    wait_running(node, "a")
    node.stop(signal.SIGKILL)
    proc = node.cli("get", "pods")
    assert proc.stderr.startswith(f"no node daemon for state dir {node.state}: reading Docker")
    node.start()
    row = wait_running(node, "a")
    assert row[3] == "0"


def test_a_secret_from_one_file_is_mounted_by_a_pod_from_another(
    node: Daemon, tmp_path: Path
) -> None:
    secret = node.cli("apply", "-f", manifest(tmp_path, "secret.yaml", SECRET))
    assert (secret.returncode, secret.stdout) == (0, "secret/db created\n"), secret.stderr
    pod = node.cli("apply", "-f", manifest(tmp_path, "pod.yaml", MOUNTS_SECRET), "--wait")
    assert (pod.returncode, pod.stdout.splitlines()[0]) == (0, "pod/reader created"), pod.stderr
    read = node.cli("exec", "reader", "--", "cat", "/creds/password")
    assert (read.returncode, read.stdout) == (0, "hunter2-do-not-print")


def test_a_pod_waiting_for_a_missing_configmap_starts_when_it_is_applied(
    node: Daemon, tmp_path: Path
) -> None:
    assert node.cli("apply", "-f", manifest(tmp_path, "pod.yaml", NEEDS_CONFIG)).returncode == 0
    deadline = time.monotonic() + 60
    row: list[str] = []
    while row[2:3] != ["CreateContainerConfigError"] and time.monotonic() < deadline:
        lines = node.cli("get", "pods", "waiter").stdout.splitlines()
        row = lines[1].split() if len(lines) > 1 else []
        time.sleep(0.3)
    assert row[2:3] == ["CreateContainerConfigError"]
    assert node.cli("apply", "-f", manifest(tmp_path, "cm.yaml", CONFIG)).returncode == 0
    wait_running(node, "waiter")
    deadline = time.monotonic() + 30
    logs = ""
    while "mode=fast" not in logs and time.monotonic() < deadline:
        logs = node.cli("logs", "waiter").stdout
        time.sleep(0.2)
    assert logs == "mode=fast\n"


def test_applying_the_same_file_twice_is_unchanged(node: Daemon, tmp_path: Path) -> None:
    path = manifest(tmp_path, "all.yaml", CONFIG + "---\n" + LONG.replace("NAME", "twice"))
    first = node.cli("apply", "-f", path)
    second = node.cli("apply", "-f", path)
    assert first.stdout.splitlines() == ["configmap/settings created", "pod/twice created"]
    assert second.stdout.splitlines() == ["configmap/settings unchanged", "pod/twice unchanged"]


def test_a_rejected_file_prints_its_field_errors_once_and_creates_nothing(
    node: Daemon, tmp_path: Path
) -> None:
    bad = LONG.replace("NAME", "Bad_Name").replace("name: c", "name: C")
    path = manifest(tmp_path, "bad.yaml", CONFIG + "---\n" + bad)
    proc = node.cli("apply", "-f", path)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr.count("metadata.name: Invalid value") == 1
    assert proc.stderr.count("spec.containers[0].name: Invalid value") == 1
    assert node.cli("get", "configmaps").stdout == ""
    assert not list((node.state / "objects").glob("*.json"))
    assert node.containers() == {}


def test_get_configmaps_and_secrets_never_print_a_secret_value(
    node: Daemon, tmp_path: Path
) -> None:
    node.cli("apply", "-f", manifest(tmp_path, "objects.yaml", SECRET + "---\n" + CONFIG))
    for args in (
        ("get", "secrets"),
        ("get", "secrets", "-o", "yaml"),
        ("get", "secret", "db", "-o", "json"),
        ("get", "configmaps", "-A"),
    ):
        proc = node.cli(*args)
        assert proc.returncode == 0, proc.stderr
        assert "hunter2" not in proc.stdout + proc.stderr
        assert "aHVudGVyMi" not in proc.stdout + proc.stderr
    assert node.cli("get", "secrets").stdout.split()[:7] == [
        "NAME",
        "TYPE",
        "DATA",
        "AGE",
        "db",
        "Opaque",
        "1",
    ]
    assert "hunter2" not in node.log()


def test_delete_f_removes_every_object_the_file_holds(node: Daemon, tmp_path: Path) -> None:
    path = manifest(tmp_path, "all.yaml", SECRET + "---\n" + CONFIG + "---\n" + MOUNTS_SECRET)
    assert node.cli("apply", "-f", path, "--wait").returncode == 0
    proc = node.cli("delete", "-f", path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        'secret "db" deleted',
        'configmap "settings" deleted',
        'pod "reader" deleted',
    ]
    assert node.containers() == {}
    assert node.cli("get", "secrets").stdout == ""
    assert not list((node.state / "objects").glob("*.json"))


def test_apply_without_a_daemon_refuses_and_says_how_to_start_one(
    tmp_path: Path, docker_engine: Engine, node_name: str
) -> None:
    idle = Daemon(state=tmp_path / "state", node_name=node_name, port=0, engine=docker_engine)
    proc = idle.cli("apply", "-f", manifest(tmp_path, "cm.yaml", CONFIG))
    assert proc.returncode == 1
    assert "no node daemon for state dir" in proc.stderr
    assert "asynckubelet serve" in proc.stderr


@pytest.fixture
def named_node(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> Iterator[Daemon]:
    yield from serve_daemon(tmp_path, docker_engine, node_name, "--node-name", node_name)


def test_get_and_describe_of_a_node_named_otherwise_show_each_pod_once(
    named_node: Daemon, tmp_path: Path
) -> None:
    node = named_node
    node.cli("apply", "-f", manifest(tmp_path, "a.yaml", LONG.replace("NAME", "solo")))
    wait_running(node, "solo")
    rows = node.cli("get", "pods", "-A", "-o", "wide").stdout.splitlines()
    assert len(rows) == 2
    assert rows[1].split()[1] == "solo"
    assert rows[1].split()[-3:] == [node.node_name, "<none>", "<none>"]
    described = node.cli("describe", "pod", "solo").stdout
    assert f"Node:             {node.node_name}" in described
    assert len(json.loads(node.cli("get", "pods", "-A", "-o", "json").stdout)["items"]) == 1


def housekeeping_passed(node: Daemon) -> None:
    """Return once a housekeeping pass of the daemon has run since the call: it removed a
    container made to look like a pod of the node that no source wants."""
    uid = f"canary-{uuid.uuid4().hex[:8]}"
    labels = {
        naming.LABEL_NODE: node.node_name,
        naming.LABEL_TYPE: naming.TYPE_CONTAINER,
        naming.LABEL_POD_NAME: "canary",
        naming.LABEL_POD_NAMESPACE: "default",
        naming.LABEL_POD_UID: uid,
        naming.LABEL_CONTAINER_NAME: "c",
    }

    async def go() -> None:
        async with DockerClient(url=node.engine.url) as client:
            name = naming.container_name(
                container="c", pod="canary", namespace="default", uid=uid, attempt=0
            )
            command = ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
            config: ContainerConfig = {"Image": BUSYBOX_IMAGE, "Cmd": command, "Labels": labels}
            await client.start_container(await client.create_container(config, name=name))
            with anyio.fail_after(60):
                while await client.list_containers(labels={naming.LABEL_POD_UID: uid}):  # noqa: ASYNC110
                    await anyio.sleep(0.2)

    anyio.run(go)


def test_run_and_serve_at_once_leave_each_others_pods_alone(node: Daemon, tmp_path: Path) -> None:
    served_path = manifest(tmp_path, "s.yaml", LONG.replace("NAME", "web"))
    assert node.cli("apply", "-f", served_path, "--wait").returncode == 0
    served = node.containers()
    assert [v for v in served.values()] == [("web/c", "")]
    run = subprocess.Popen(
        [sys.executable, "-m", "asynckubelet", "run", served_path, "--no-color"],
        env=node.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        theirs: dict[str, tuple[str, str]] = {}
        while not theirs and time.monotonic() < deadline:
            theirs = {k: v for k, v in node.containers().items() if k not in served}
            time.sleep(0.3)
        [(pod, owner)] = theirs.values()
        assert pod == "web/c"
        assert owner.startswith("run-")
        housekeeping_passed(node)
        assert node.containers() == {**served, **theirs}
        rows = node.cli("get", "pods").stdout.splitlines()
        assert [r.split()[:3] for r in rows[1:]] == [["web", "1/1", "Running"]]
    finally:
        run.send_signal(signal.SIGTERM)
        run.communicate(timeout=60)
    assert node.containers() == served
    assert wait_running(node, "web")[3] == "0"
