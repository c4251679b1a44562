"""Resource metrics on the real engine: a pod burning CPU and a pod holding memory, seen by
``asynckubelet top`` and by the real kubectl's ``top`` (the machine's and the newest)
against ``serve``; in cluster mode, the kubelet's ``/metrics/resource`` and
``/stats/summary`` read through the API server's node proxy, as metrics-server reads them."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from integration.cluster_fixtures import Agent, Cluster, agents, cluster, namespace, wait_for
from integration.harness import Engine
from integration.kubectl_helpers import Kubectl, api_daemon, kubectl
from integration.serve_helpers import Daemon, manifest, wait_running

__all__ = ["agents", "cluster", "kubectl", "namespace", "node"]
"""The fixtures this module takes from its helpers."""

PODS = """
apiVersion: v1
kind: Pod
metadata: {name: burn, labels: {app: burn}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: spin
    image: BUSYBOX
    command: [sh, -c, "trap 'exit 0' TERM; while :; do :; done"]
---
apiVersion: v1
kind: Pod
metadata: {name: hold, labels: {app: hold}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: fill
    image: BUSYBOX
    command: [sh, -c, FILL]
"""
FILL = (
    "dd if=/dev/zero of=/dev/shm/fill bs=1048576 count=40 && trap 'exit 0' TERM; "
    "while true; do sleep 0.5; done"
)
HELD_MIB = 40


@pytest.fixture(scope="module")
def node(
    tmp_path_factory: pytest.TempPathFactory, docker_engine: Engine, test_images: dict[str, str]
) -> Iterator[Daemon]:
    """One ``serve`` for the module with the pods ``burn`` and ``hold`` running."""
    tmp = tmp_path_factory.mktemp("metrics")
    for daemon in api_daemon(tmp, docker_engine):
        applied = daemon.cli(
            "apply", "-f", manifest(tmp, "pods.yaml", PODS.replace("FILL", json.dumps(FILL)))
        )
        assert applied.returncode == 0, applied.stderr
        wait_running(daemon, "burn")
        wait_running(daemon, "hold")
        yield daemon


def rows(text: str) -> dict[str, list[str]]:
    """A top table's rows by their first cell, the header left out."""
    return {line.split()[0]: line.split() for line in text.splitlines()[1:] if line.strip()}


def millis(cell: str) -> int:
    assert cell.endswith("m"), cell
    return int(cell[:-1])


def mebibytes(cell: str) -> int:
    assert cell.endswith("Mi"), cell
    return int(cell[:-2])


def until(
    read: Callable[[], dict[str, list[str]]], check: Callable[[dict[str, list[str]]], bool]
) -> dict[str, list[str]]:
    """``read()`` once ``check`` holds of it (the filling pod may still be writing)."""
    deadline = time.monotonic() + 60
    last = read()
    while not check(last) and time.monotonic() < deadline:
        time.sleep(1)
        last = read()
    return last


def test_top_pods_shows_the_spinning_pod_using_cpu(node: Daemon) -> None:
    done = node.cli("top", "pods")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split() == ["NAME", "CPU(cores)", "MEMORY(bytes)"]
    assert millis(rows(done.stdout)["burn"][1]) > 0


def test_top_pods_shows_the_memory_a_pod_holds(node: Daemon) -> None:
    def read() -> dict[str, list[str]]:
        return rows(node.cli("top", "pods").stdout)

    found = until(read, lambda r: "hold" in r and mebibytes(r["hold"][2]) >= HELD_MIB)
    assert mebibytes(found["hold"][2]) >= HELD_MIB


def test_top_pods_lists_containers_of_every_namespace(node: Daemon) -> None:
    done = node.cli("top", "pods", "-A", "--containers")
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()]
    assert lines[0] == ["NAMESPACE", "POD", "NAME", "CPU(cores)", "MEMORY(bytes)"]
    assert ["default", "burn", "spin"] in [line[:3] for line in lines[1:]]


def test_top_pods_of_a_pod_that_is_not_there_is_not_found(node: Daemon) -> None:
    done = node.cli("top", "pods", "nothere")
    assert done.returncode == 1
    assert 'pods "nothere" not found' in done.stderr


def _mem_total_mib() -> int:
    with open("/proc/meminfo") as f:
        return int(f.readline().split()[1]) // 1024


def test_top_nodes_shows_the_node_and_its_share(node: Daemon) -> None:
    """The node's figures are the machine's, as the kubelet's root cgroup's are: well above
    its pods' (the engine, the node itself and the tests run outside them), within what
    the machine has."""
    pods = rows(node.cli("top", "pods").stdout)
    done = node.cli("top", "nodes")
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()]
    assert lines[0] == ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"]
    name, cpu, share, memory, _ = lines[1]
    assert name == node.node_name
    assert millis(cpu) > 0
    assert share.endswith("%")
    in_pods = sum(mebibytes(row[-1]) for row in pods.values())
    assert in_pods + 100 < mebibytes(memory) < _mem_total_mib(), (pods, memory)


def test_kubectl_top_pods_shows_cpu_and_memory(kubectl: Kubectl) -> None:
    def read() -> dict[str, list[str]]:
        return rows(kubectl.ok("top", "pods"))

    found = until(read, lambda r: "hold" in r and mebibytes(r["hold"][2]) >= HELD_MIB)
    assert millis(found["burn"][1]) > 0
    assert mebibytes(found["hold"][2]) >= HELD_MIB


def test_kubectl_top_pod_containers(kubectl: Kubectl) -> None:
    lines = [line.split() for line in kubectl.ok("top", "pod", "burn", "--containers").splitlines()]
    assert lines[0] == ["POD", "NAME", "CPU(cores)", "MEMORY(bytes)"]
    assert lines[1][:2] == ["burn", "spin"]


def test_kubectl_top_nodes_shows_the_node(kubectl: Kubectl, node: Daemon) -> None:
    found = rows(kubectl.ok("top", "nodes"))
    cpu, share = found[node.node_name][1:3]
    assert millis(cpu) > 0
    assert share.endswith("%")


# -- cluster mode ---------------------------------------------------------------------------


@pytest.fixture
def agent(agents: Callable[..., Agent]) -> Agent:
    made = agents()
    made.start()
    made.wait_ready()
    return made


def test_kubelet_api_serves_resource_metrics_and_the_summary(
    cluster: Cluster, agent: Agent, namespace: str, test_images: dict[str, str]
) -> None:
    spinner = f"""
apiVersion: v1
kind: Pod
metadata: {{name: burn}}
spec:
  nodeName: {agent.name}
  terminationGracePeriodSeconds: 1
  containers:
  - name: spin
    image: {test_images["busybox"]}
    command: [sh, -c, "trap 'exit 0' TERM; while :; do :; done"]
"""
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=spinner)
    wait_for(
        lambda: (
            cluster.kubectl(
                "get", "pod", "burn", "-n", namespace, "-o", "jsonpath={.status.phase}", check=False
            ).stdout.strip()
            == "Running"
        ),
        timeout=120,
        what="pod burn Running",
    )
    base = f"/api/v1/nodes/{agent.name}/proxy"
    text = cluster.kubectl("get", "--raw", f"{base}/metrics/resource").stdout
    families = {f.name: f for f in text_string_to_metric_families(text)}
    cpu = [
        s
        for s in families["container_cpu_usage_seconds"].samples
        if s.labels == {"container": "spin", "namespace": namespace, "pod": "burn"}
    ]
    assert cpu
    assert cpu[0].value > 0
    assert cpu[0].timestamp is not None
    assert families["scrape_error"].samples[0].value == 0
    assert families["node_memory_working_set_bytes"].samples[0].value > 0

    summary = json.loads(cluster.kubectl("get", "--raw", f"{base}/stats/summary").stdout)
    assert summary["node"]["nodeName"] == agent.name
    pod = next(p for p in summary["pods"] if p["podRef"]["name"] == "burn")
    assert pod["podRef"]["namespace"] == namespace
    assert pod["cpu"]["usageNanoCores"] > 0
    assert pod["memory"]["workingSetBytes"] > 0
    assert pod["containers"][0]["name"] == "spin"
