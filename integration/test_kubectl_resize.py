"""In-place pod resize driven by the newest kubectl against a real ``serve`` on a real
engine: ``kubectl patch --subresource resize`` changes a running container's CPU and
memory without a restart, restarts only the container whose policy asks for it, leaves
everything as it was when the node cannot fit the new size (``PodResizePending``,
``Infeasible``), takes a ``Deferred`` resize on once a pod leaving makes room, and is
refused in the API server's words when it changes the QoS class."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from asynckubelet.docker import DockerClient
from integration.harness import Engine, free_port
from integration.kubectl_helpers import PYPI_KUBECTL, Kubectl
from integration.serve_helpers import Daemon, manifest, serve_daemon, wait_running

POD = """
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: a
    image: BUSYBOX
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
    resources:
      requests: {cpu: 100m, memory: 64Mi}
      limits: {cpu: 100m, memory: 64Mi}
    resizePolicy:
    - {resourceName: cpu, restartPolicy: NotRequired}
    - {resourceName: memory, restartPolicy: RESTART_A}
  - name: b
    image: BUSYBOX
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
    resources:
      requests: {cpu: 100m, memory: 64Mi}
      limits: {cpu: 100m, memory: 64Mi}
"""


@pytest.fixture(scope="module")
def node(
    tmp_path_factory: pytest.TempPathFactory, docker_engine: Engine, test_images: dict[str, str]
) -> Iterator[Daemon]:
    tmp = tmp_path_factory.mktemp("kuberesize")
    name = f"akltest-{uuid.uuid4().hex[:10]}"
    api = ("--api-listen", f"127.0.0.1:{free_port()}")
    yield from serve_daemon(tmp, docker_engine, name, *api)


@pytest.fixture
def kubectl(node: Daemon, tmp_path: Path) -> Kubectl:
    if not os.access(PYPI_KUBECTL, os.X_OK):
        pytest.skip(f"no kubectl at {PYPI_KUBECTL}")
    return Kubectl(PYPI_KUBECTL, node, home=tmp_path / "home")


def started(node: Daemon, tmp_path: Path, *, restart_a: str = "NotRequired") -> str:
    name = f"rs{uuid.uuid4().hex[:6]}"
    text = POD.replace("NAME", name).replace("RESTART_A", restart_a)
    applied = node.cli("apply", "-f", manifest(tmp_path, f"{name}.yaml", text))
    assert applied.returncode == 0, applied.stderr
    wait_running(node, name)
    return name


def pod_of(kubectl: Kubectl, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(kubectl.ok("get", "pod", name, "-o", "json"))
    return found


def until(kubectl: Kubectl, name: str, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    pod = pod_of(kubectl, name)
    while not done(pod):
        assert time.monotonic() < deadline, json.dumps(pod.get("status"), indent=1)
        time.sleep(0.3)
        pod = pod_of(kubectl, name)
    return pod


def statuses(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in pod["status"].get("containerStatuses") or []}


def limits(pod: dict[str, Any], container: str) -> Any:
    return (statuses(pod).get(container, {}).get("resources") or {}).get("limits")


def conditions(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in pod["status"].get("conditions") or []}


def host_config(engine: Engine, container_id: str) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with DockerClient(url=engine.url) as client:
            info = await client.inspect_container(container_id.removeprefix("docker://"))
            return dict(info["HostConfig"])

    return anyio.run(go)


def resize(
    kubectl: Kubectl, name: str, container: str, cpu: str, memory: str, *, kind: str = "strategic"
) -> Any:
    """``kubectl patch --subresource resize``; a merge patch replaces the whole list, so it
    names every container (``b`` as it was)."""
    both = {"cpu": cpu, "memory": memory}
    containers = [{"name": container, "resources": {"requests": both, "limits": both}}]
    if kind == "merge":
        was = {"cpu": "100m", "memory": "64Mi"}
        containers.append({"name": "b", "resources": {"requests": was, "limits": was}})
    patch = json.dumps({"spec": {"containers": containers}})
    return kubectl("patch", "pod", name, "--subresource", "resize", "--type", kind, "-p", patch)


def test_a_running_container_is_resized_in_cpu_and_memory_without_a_restart(
    kubectl: Kubectl, node: Daemon, docker_engine: Engine, tmp_path: Path
) -> None:
    name = started(node, tmp_path)
    before = statuses(pod_of(kubectl, name))
    done = resize(kubectl, name, "a", "200m", "128Mi", kind="merge")
    assert done.returncode == 0, done.stderr
    wanted = {"cpu": "200m", "memory": "128Mi"}
    pod = until(kubectl, name, lambda p: limits(p, "a") == wanted)
    after = statuses(pod)
    assert after["a"]["containerID"] == before["a"]["containerID"]
    assert after["a"]["restartCount"] == 0
    assert after["a"]["allocatedResources"] == wanted
    assert after["a"]["resources"]["requests"] == wanted
    assert after["b"]["containerID"] == before["b"]["containerID"]
    assert "PodResizeInProgress" not in conditions(pod)
    host = host_config(docker_engine, after["a"]["containerID"])
    assert (host["CpuQuota"], host["CpuPeriod"], host["CpuShares"]) == (20_000, 100_000, 204)
    assert host["Memory"] == 128 * 2**20
    assert pod["spec"]["containers"][0]["resources"]["limits"] == wanted


def test_a_restart_container_policy_restarts_only_that_container(
    kubectl: Kubectl, node: Daemon, docker_engine: Engine, tmp_path: Path
) -> None:
    name = started(node, tmp_path, restart_a="RestartContainer")
    before = statuses(pod_of(kubectl, name))
    done = resize(kubectl, name, "a", "100m", "96Mi")
    assert done.returncode == 0, done.stderr
    pod = until(
        kubectl,
        name,
        lambda p: (
            statuses(p)["a"]["restartCount"] == 1
            and "running" in statuses(p)["a"]["state"]
            and limits(p, "a") == {"cpu": "100m", "memory": "96Mi"}
        ),
    )
    after = statuses(pod)
    assert after["a"]["containerID"] != before["a"]["containerID"]
    assert after["b"]["containerID"] == before["b"]["containerID"]
    assert after["b"]["restartCount"] == 0
    assert host_config(docker_engine, after["a"]["containerID"])["Memory"] == 96 * 2**20
    events = kubectl.ok("get", "events", "--field-selector", f"involvedObject.name={name}")
    assert "Container a resize requires restart" in events


def test_a_resize_beyond_the_node_is_infeasible_and_changes_nothing(
    kubectl: Kubectl, node: Daemon, docker_engine: Engine, tmp_path: Path
) -> None:
    name = started(node, tmp_path)
    before = statuses(pod_of(kubectl, name))
    done = resize(kubectl, name, "a", "1000", "64Mi")
    assert done.returncode == 0, done.stderr
    pod = until(kubectl, name, lambda p: "PodResizePending" in conditions(p))
    pending = conditions(pod)["PodResizePending"]
    assert (pending["status"], pending["reason"]) == ("True", "Infeasible")
    assert pending["message"].startswith(
        "Node didn't have enough capacity: cpu, requested: 1000100, capacity: "
    )
    after = statuses(pod)
    assert after["a"]["containerID"] == before["a"]["containerID"]
    assert after["a"]["restartCount"] == 0
    assert limits(pod, "a") == {"cpu": "100m", "memory": "64Mi"}
    assert after["a"]["allocatedResources"] == {"cpu": "100m", "memory": "64Mi"}
    assert pod["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "1000"
    assert host_config(docker_engine, after["a"]["containerID"])["CpuQuota"] == 10_000


HOG = """
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: hog
    image: BUSYBOX
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
    resources:
      requests: {cpu: CPU}
"""


def cpu_millis(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


@pytest.fixture
def own_node(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str]
) -> Iterator[Daemon]:
    """A node of its own: nothing else on it asks for CPU."""
    name = f"akltest-{uuid.uuid4().hex[:10]}"
    api = ("--api-listen", f"127.0.0.1:{free_port()}")
    yield from serve_daemon(tmp_path, docker_engine, name, *api)


def test_a_deferred_resize_is_carried_out_once_a_pod_leaving_makes_room(
    own_node: Daemon, docker_engine: Engine, tmp_path: Path
) -> None:
    if not os.access(PYPI_KUBECTL, os.X_OK):
        pytest.skip(f"no kubectl at {PYPI_KUBECTL}")
    kubectl = Kubectl(PYPI_KUBECTL, own_node, home=tmp_path / "home")
    (found,) = json.loads(kubectl.ok("get", "nodes", "-o", "json"))["items"]
    allocatable = cpu_millis(found["status"]["allocatable"]["cpu"])
    name = started(own_node, tmp_path)
    hog = HOG.replace("NAME", "hog").replace("CPU", f"{allocatable - 300}m")
    applied = own_node.cli("apply", "-f", manifest(tmp_path, "hog.yaml", hog))
    assert applied.returncode == 0, applied.stderr
    wait_running(own_node, "hog")
    before = statuses(pod_of(kubectl, name))
    done = resize(kubectl, name, "a", "300m", "64Mi")
    assert done.returncode == 0, done.stderr
    pod = until(kubectl, name, lambda p: "PodResizePending" in conditions(p))
    pending = conditions(pod)["PodResizePending"]
    assert (pending["status"], pending["reason"]) == ("True", "Deferred")
    assert pending["message"] == (
        f"Node didn't have enough resource: cpu, requested: 400, used: {allocatable - 300}, "
        f"capacity: {allocatable}"
    )
    assert limits(pod, "a") == {"cpu": "100m", "memory": "64Mi"}
    kubectl.ok("delete", "pod", "hog", "--wait=false")
    wanted = {"cpu": "300m", "memory": "64Mi"}
    pod = until(
        kubectl,
        name,
        lambda p: limits(p, "a") == wanted and "PodResizePending" not in conditions(p),
    )
    after = statuses(pod)
    assert after["a"]["containerID"] == before["a"]["containerID"]
    assert after["a"]["restartCount"] == 0
    assert after["a"]["allocatedResources"] == wanted
    assert host_config(docker_engine, after["a"]["containerID"])["CpuQuota"] == 30_000


def test_a_restarted_node_keeps_the_allocated_resources_of_a_pending_resize(
    own_node: Daemon, docker_engine: Engine, tmp_path: Path
) -> None:
    if not os.access(PYPI_KUBECTL, os.X_OK):
        pytest.skip(f"no kubectl at {PYPI_KUBECTL}")
    kubectl = Kubectl(PYPI_KUBECTL, own_node, home=tmp_path / "home")
    name = started(own_node, tmp_path)
    done = resize(kubectl, name, "a", "1000", "64Mi")
    assert done.returncode == 0, done.stderr
    before = until(kubectl, name, lambda p: "PodResizePending" in conditions(p))
    time.sleep(1.1)
    restarted = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    own_node.stop()
    own_node.start()

    def reported(pod: dict[str, Any]) -> bool:
        found = conditions(pod)
        again = found.get("PodResizePending", {}).get("lastProbeTime") or ""
        return again >= restarted or "PodResizeInProgress" in found

    pod = until(kubectl, name, reported)
    assert "PodResizeInProgress" not in conditions(pod), conditions(pod)
    assert conditions(pod)["PodResizePending"]["reason"] == "Infeasible"
    after = statuses(pod)["a"]
    assert after["containerID"] == statuses(before)["a"]["containerID"]
    assert after["allocatedResources"] == {"cpu": "100m", "memory": "64Mi"}
    assert limits(pod, "a") == {"cpu": "100m", "memory": "64Mi"}
    assert host_config(docker_engine, after["containerID"])["CpuQuota"] == 10_000


def test_a_change_of_the_qos_class_is_refused_in_the_api_server_words(
    kubectl: Kubectl, node: Daemon, tmp_path: Path
) -> None:
    name = started(node, tmp_path)
    patch = {"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "50m"}}}]}}
    done = kubectl("patch", "pod", name, "--subresource", "resize", "-p", json.dumps(patch))
    assert done.returncode != 0
    assert (
        f'The Pod "{name}" is invalid: spec: Invalid value: "Burstable": Pod QOS Class may not '
        "change as a result of resizing"
    ) in done.stderr
    assert pod_of(kubectl, name)["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "100m"


FILLED = """
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: c
    image: BUSYBOX
    command:
    - sh
    - -c
    - >-
      x=$(head -c 40000000 /dev/zero | tr '\\0' a) && touch /tmp/filled &&
      trap 'exit 0' TERM; while true; do sleep 0.2; done
    resources:
      requests: {cpu: 100m, memory: 96Mi}
      limits: {cpu: 100m, memory: 96Mi}
"""


def test_a_memory_limit_below_the_usage_is_not_applied_and_is_reported_as_an_error(
    kubectl: Kubectl, node: Daemon, docker_engine: Engine, tmp_path: Path
) -> None:
    name = f"rs{uuid.uuid4().hex[:6]}"
    applied = node.cli(
        "apply", "-f", manifest(tmp_path, f"{name}.yaml", FILLED.replace("NAME", name))
    )
    assert applied.returncode == 0, applied.stderr
    wait_running(node, name)
    deadline = time.monotonic() + 60
    while kubectl("exec", name, "--", "test", "-e", "/tmp/filled").returncode != 0:
        assert time.monotonic() < deadline, "the container did not fill its memory"
        time.sleep(0.3)
    before = statuses(pod_of(kubectl, name))["c"]
    small = {"cpu": "100m", "memory": "16Mi"}
    patch = {
        "spec": {"containers": [{"name": "c", "resources": {"requests": small, "limits": small}}]}
    }
    done = kubectl("patch", "pod", name, "--subresource", "resize", "-p", json.dumps(patch))
    assert done.returncode == 0, done.stderr

    def failed(pod: dict[str, Any]) -> bool:
        return conditions(pod).get("PodResizeInProgress", {}).get("reason") == "Error"

    pod = until(kubectl, name, failed)
    message = conditions(pod)["PodResizeInProgress"]["message"]
    # The node's own check (the engine's stats) or the engine's refusal, whichever sees
    # the usage first; both name the limit and the usage.
    assert str(16 * 2**20) in message
    assert "current usage" in message
    after = statuses(pod)["c"]
    assert after["containerID"] == before["containerID"]
    assert after["restartCount"] == 0
    assert after["allocatedResources"] == small
    assert after["resources"]["limits"]["memory"] == "96Mi"
    assert host_config(docker_engine, after["containerID"])["Memory"] == 96 * 2**20
