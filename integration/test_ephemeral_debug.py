"""Ephemeral containers on a real engine, driven by real kubectl: ``kubectl debug`` into a
running pod (the debugger sees the target container's processes: it shares its PID
namespace), the statuses ``kubectl get`` shows, and a change of an existing ephemeral
container refused with the API server's wording; with the machine's kubectl and the newest
one from PyPI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.harness import BUSYBOX_IMAGE, Engine
from integration.kubectl_helpers import PYPI_KUBECTL, SYSTEM_KUBECTL, Kubectl, api_daemon
from integration.serve_helpers import Daemon, manifest, wait_running

SUFFIX = uuid.uuid4().hex[:6]
TARGET = f"target-{SUFFIX}"
MARK = "36" + str(int(SUFFIX, 16) % 1000).zfill(3)
POD = f"""
apiVersion: v1
kind: Pod
metadata: {{name: {TARGET}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: BUSYBOX
    command: [sleep, "{MARK}"]
"""


@pytest.fixture(scope="module")
def node(
    tmp_path_factory: pytest.TempPathFactory, docker_engine: Engine, test_images: dict[str, str]
) -> Iterator[Daemon]:
    """One ``serve`` with a pod whose only process is ``sleep MARK``."""
    tmp = tmp_path_factory.mktemp("ephemeral")
    for daemon in api_daemon(tmp, docker_engine):
        applied = daemon.cli("apply", "-f", manifest(tmp, "pod.yaml", POD))
        assert applied.returncode == 0, applied.stderr
        wait_running(daemon, TARGET)
        yield daemon


@pytest.fixture(params=["system", "pypi"])
def kubectl(request: pytest.FixtureRequest, node: Daemon, tmp_path: Path) -> Kubectl:
    found = SYSTEM_KUBECTL if request.param == "system" else PYPI_KUBECTL
    if not os.access(found, os.X_OK):
        pytest.skip(f"no {request.param} kubectl at {found}")
    return Kubectl(found, node, home=tmp_path / "home")


def _with_input_open(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``argv`` run with ``go`` on its stdin, which stays open, as a user's terminal does,
    until the command has run (the debug command waits for that line: it runs once the
    client has attached)."""
    with subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as process:
        assert process.stdin is not None
        assert process.stdout is not None
        assert process.stderr is not None
        try:
            process.stdin.write("go\n")
            process.stdin.flush()
            stdout = process.stdout.read()
            stderr = process.stderr.read()
            process.stdin.close()
            code = process.wait(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
    return subprocess.CompletedProcess(argv, code, stdout, stderr)


def _named(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    named = re.search(r"Defaulting debug container name to (debugger-[a-z0-9]+)\.", said)
    assert named is not None, said
    return named.group(1)


def _debug(kubectl: Kubectl, *args: str, command: str = "read go; ps") -> tuple[str, str]:
    """``kubectl debug -i`` into the target pod running ``sh -c command``; kubectl's output
    and the debug container's name."""
    argv = [
        kubectl.binary,
        "debug",
        TARGET,
        "-i",
        f"--image={BUSYBOX_IMAGE}",
        "--image-pull-policy=Never",
        "--profile=legacy",
        *args,
        "--",
        "sh",
        "-c",
        command,
    ]
    done = _with_input_open(argv, kubectl.env)
    return done.stdout, _named(done)


def test_kubectl_debug_with_a_target_sees_the_targets_processes(kubectl: Kubectl) -> None:
    output, name = _debug(kubectl, "--target=app")
    assert f"sleep {MARK}" in output, output
    pod = json.loads(kubectl.ok("get", "pod", TARGET, "-o", "json"))
    listed = {c["name"]: c for c in pod["spec"]["ephemeralContainers"]}
    assert listed[name]["targetContainerName"] == "app"
    statuses = {s["name"]: s for s in pod["status"]["ephemeralContainerStatuses"]}
    status = statuses[name]
    assert (status["ready"], status["restartCount"]) == (False, 0)
    assert status["image"] == BUSYBOX_IMAGE
    assert status["containerID"].startswith("docker://")
    assert set(status["state"]) <= {"running", "terminated"}
    assert [c["name"] for c in pod["status"]["containerStatuses"]] == ["app"]
    assert pod["status"]["phase"] == "Running"
    events = kubectl.ok("get", "events", "--field-selector", f"involvedObject.name={TARGET}")
    assert f"Started container {name}" in events


def test_without_a_target_the_debugger_has_its_own_processes(kubectl: Kubectl) -> None:
    output, _ = _debug(kubectl)
    assert f"sleep {MARK}" not in output
    assert "ps" in output


def test_changing_an_existing_ephemeral_container_is_refused(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    _debug(kubectl, command="true")
    pod = json.loads(kubectl.ok("get", "pod", TARGET, "-o", "json"))
    first = pod["spec"]["ephemeralContainers"][0]
    first["image"] = "busybox:changed"
    body = tmp_path / "changed.json"
    body.write_text(json.dumps(pod))
    path = f"/api/v1/namespaces/default/pods/{TARGET}/ephemeralcontainers"
    done = kubectl("replace", "--raw", path, "-f", str(body))
    assert done.returncode != 0
    assert (
        f"spec.ephemeralContainers.{first['name']}: Forbidden: existing ephemeral containers "
        "may not be changed"
    ) in done.stderr


def test_asynckubelet_debug_attaches_to_a_debugger_in_the_targets_namespaces(
    node: Daemon,
) -> None:
    argv = [
        sys.executable,
        "-m",
        "asynckubelet",
        "debug",
        TARGET,
        "-i",
        "--image",
        BUSYBOX_IMAGE,
        "--image-pull-policy",
        "Never",
        "--target",
        "app",
        "--",
        "sh",
        "-c",
        "read go; ps",
    ]
    done = _with_input_open(argv, node.env)
    name = _named(done)
    assert f"sleep {MARK}" in done.stdout
    assert 'Targeting container "app".' in done.stdout
    pod = json.loads(node.cli("get", "pod", TARGET, "-o", "json").stdout)
    statuses = {s["name"]: s for s in pod["status"]["ephemeralContainerStatuses"]}
    assert statuses[name]["restartCount"] == 0


def test_asynckubelet_debug_without_i_only_adds_the_container(node: Daemon) -> None:
    done = node.cli(
        "debug", TARGET, "--image", BUSYBOX_IMAGE, "-c", f"added-{SUFFIX}", "--", "sleep", "1"
    )
    assert done.returncode == 0, done.stderr
    assert "Defaulting" not in done.stdout
    pod = json.loads(node.cli("get", "pod", TARGET, "-o", "json").stdout)
    assert f"added-{SUFFIX}" in [c["name"] for c in pod["spec"]["ephemeralContainers"]]
    again = node.cli("debug", TARGET, "--image", BUSYBOX_IMAGE, "-c", f"added-{SUFFIX}")
    assert again.returncode != 0
    said = again.stderr + again.stdout
    duplicate = (
        rf'The Pod "{TARGET}" is invalid: '
        rf'spec\.ephemeralContainers\[\d+\]\.name: Duplicate value: "added-{SUFFIX}"'
    )
    assert re.search(duplicate, said), said
