"""Real clients reading a real ``serve``: kubectl's ``logs`` in its everyday forms (a
container, ``--previous`` after a restart, ``--tail``, ``--since``, ``--all-containers``,
``-l`` across pods, ``-f``), ``api-resources``, ``get all``, ``get nodes -o wide`` and
``describe node`` with both kubectls, and the official ``kubernetes`` Python package
creating, listing and watching with nothing but the node's kubeconfig."""

from __future__ import annotations

import importlib
import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from integration.harness import BUSYBOX_IMAGE, Engine
from integration.kubectl_helpers import OBJECTS, Kubectl, api_daemon, kubectl
from integration.serve_helpers import Daemon, manifest

__all__ = ["kubectl"]
"""The fixture this module takes from its helpers, run against this module's node."""

client: Any = importlib.import_module("kubernetes.client")
config: Any = importlib.import_module("kubernetes.config")
watch: Any = importlib.import_module("kubernetes.watch")
"""The official client, untyped for this module's checks (its models are all Optional)."""

TALKERS = """
apiVersion: v1
kind: Pod
metadata: {name: talker, labels: {app: talk}}
spec:
  terminationGracePeriodSeconds: 2
  volumes: [{name: d, emptyDir: {}}]
  containers:
  - name: a
    image: BUSYBOX
    volumeMounts: [{name: d, mountPath: /data}]
    command:
    - sh
    - -c
    - |
      n=$(( $(cat /data/n 2>/dev/null || echo 0) + 1 )); echo $n > /data/n
      for i in 1 2 3; do echo run-$n line-$i; done
      [ $n = 1 ] && exit 3
      trap 'exit 0' TERM; while true; do sleep 0.2; done
  - name: b
    image: BUSYBOX
    command: [sh, -c, "echo b-says-hi; trap 'exit 0' TERM; while true; do sleep 0.2; done"]
---
apiVersion: v1
kind: Pod
metadata: {name: listener, labels: {app: talk}}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: a
    image: BUSYBOX
    command: [sh, -c, "echo listener-here; trap 'exit 0' TERM; while true; do sleep 0.2; done"]
"""


@pytest.fixture(scope="module")
def node(
    tmp_path_factory: pytest.TempPathFactory, docker_engine: Engine, test_images: dict[str, str]
) -> Iterator[Daemon]:
    """One ``serve`` with two pods whose output the tests read (one restarted once) and
    a Deployment behind a Service."""
    tmp = tmp_path_factory.mktemp("kubeclients")
    for daemon in api_daemon(tmp, docker_engine):
        for file, text in (("talkers.yaml", TALKERS), ("objects.yaml", OBJECTS)):
            applied = daemon.cli("apply", "-f", manifest(tmp, file, text))
            assert applied.returncode == 0, applied.stderr
        yield daemon


def restarted_and_ready(kubectl: Kubectl) -> None:
    """``talker``'s first container has run twice and both pods are Ready."""
    deadline = time.monotonic() + 120
    while True:
        pod = json.loads(kubectl.ok("get", "pod", "talker", "-o", "json"))
        counts = [c["restartCount"] for c in pod["status"].get("containerStatuses") or []]
        if counts and counts[0] >= 1:
            break
        assert time.monotonic() < deadline, pod["status"]
        time.sleep(0.5)
    ready = kubectl("wait", "--for=condition=Ready", "pod", "-l", "app=talk", "--timeout=90s")
    assert ready.returncode == 0, ready.stderr


def older_than(kubectl: Kubectl, pod: str, container: str, *, seconds: float) -> None:
    """Wait until ``container`` of ``pod`` has run for more than ``seconds`` (its line,
    written as it started, is then older than that)."""
    found = json.loads(kubectl.ok("get", "pod", pod, "-o", "json"))["status"]
    [status] = [c for c in found["containerStatuses"] if c["name"] == container]
    started = datetime.fromisoformat(status["state"]["running"]["startedAt"].replace("Z", "+00:00"))
    left = seconds - (datetime.now(UTC) - started).total_seconds()
    if left > 0:
        time.sleep(left + 0.1)


def run_lines(n: int) -> str:
    return "".join(f"run-{n} line-{i}\n" for i in (1, 2, 3))


def test_logs_of_a_container_its_previous_instance_a_tail_and_a_window(kubectl: Kubectl) -> None:
    restarted_and_ready(kubectl)
    assert kubectl.ok("logs", "talker", "-c", "a") == run_lines(2)
    assert kubectl.ok("logs", "talker", "-c", "a", "--previous") == run_lines(1)
    assert kubectl.ok("logs", "talker", "-c", "a", "--tail=1") == "run-2 line-3\n"
    assert kubectl.ok("logs", "talker", "-c", "b", "--since=1h") == "b-says-hi\n"
    older_than(kubectl, "talker", "b", seconds=2)
    assert kubectl.ok("logs", "talker", "-c", "b", "--since=1s") == ""
    defaulted = kubectl("logs", "talker")
    assert defaulted.stdout == run_lines(2)
    assert 'Defaulted container "a" out of: a, b' in defaulted.stderr
    never = kubectl("logs", "listener", "--previous")
    assert never.returncode == 1
    assert 'previous terminated container "a" in pod "listener" not found' in never.stderr
    # kubectl reads the containers' logs one after another in the order of a Go map (1.33
    # and older): each container's block whole, in either order.
    both = kubectl.ok("logs", "talker", "--all-containers")
    assert both in (run_lines(2) + "b-says-hi\n", "b-says-hi\n" + run_lines(2))


def test_logs_by_label_read_every_pod_and_prefix_names_each(kubectl: Kubectl) -> None:
    restarted_and_ready(kubectl)
    lines = kubectl.ok("logs", "-l", "app=talk", "-c", "a").splitlines(keepends=True)
    assert sorted(lines) == sorted([*run_lines(2).splitlines(keepends=True), "listener-here\n"])
    prefixed = kubectl.ok("logs", "-l", "app=talk", "--all-containers", "--prefix").splitlines()
    assert sorted(prefixed) == sorted(
        [
            *(f"[pod/talker/a] {line}" for line in run_lines(2).splitlines()),
            "[pod/talker/b] b-says-hi",
            "[pod/listener/a] listener-here",
        ]
    )


def test_logs_follow_streams_what_the_container_writes(kubectl: Kubectl) -> None:
    restarted_and_ready(kubectl)
    with subprocess.Popen(
        [kubectl.binary, "logs", "-f", "listener"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=kubectl.env,
    ) as follower:
        try:
            assert follower.stdout is not None
            assert follower.stdout.readline() == "listener-here\n"
            kubectl.ok("exec", "listener", "--", "sh", "-c", "echo written-later > /proc/1/fd/1")
            assert follower.stdout.readline() == "written-later\n"
            assert follower.poll() is None
        finally:
            follower.terminate()


def test_api_resources_lists_the_kinds_served(kubectl: Kubectl) -> None:
    rows: dict[str, list[str]] = {}
    for line in kubectl.ok("api-resources", "--no-headers").splitlines():
        # The first row of a name is the core group's (metrics.k8s.io has pods and nodes too).
        rows.setdefault(line.split()[0], line.split()[1:])
    assert rows["pods"] == ["po", "v1", "true", "Pod"]
    assert rows["deployments"] == ["deploy", "apps/v1", "true", "Deployment"]
    assert rows["nodes"] == ["no", "v1", "false", "Node"]
    assert rows["jobs"] == ["batch/v1", "true", "Job"]
    cluster_wide = kubectl.ok("api-resources", "--namespaced=false", "-o", "name").split()
    assert {"nodes", "namespaces"} <= set(cluster_wide)
    assert "pods" not in cluster_wide


def test_get_all_shows_the_pods_services_and_workloads(kubectl: Kubectl) -> None:
    kubectl("wait", "--for=condition=Available", "deploy/api", "--timeout=90s")
    names = kubectl.ok("get", "all", "-o", "name").split()
    assert {"pod/talker", "pod/listener", "service/api", "deployment.apps/api"} <= set(names)
    assert any(n.startswith("replicaset.apps/api-") for n in names)
    assert any(n.startswith("pod/api-") for n in names)
    table = kubectl.ok("get", "all")
    assert "NAME                  READY   UP-TO-DATE   AVAILABLE   AGE" in table
    assert "deployment.apps/api   1/1     1            1" in table


def test_get_nodes_wide_and_describe_node_show_this_node(kubectl: Kubectl) -> None:
    node = kubectl.node.node_name
    header, row, *more = kubectl.ok("get", "nodes", "-o", "wide").splitlines()
    assert not more
    assert header.split()[:6] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP"]
    cells = row.split()
    assert (cells[0], cells[1], cells[2]) == (node, "Ready", "<none>")
    assert cells[4].startswith("v1.")
    described = kubectl.ok("describe", "node", node)
    assert described.splitlines()[0].split() == ["Name:", node]
    assert "Conditions:" in described
    ready = next(line for line in described.splitlines() if line.strip().startswith("Ready "))
    assert ready.split()[1] == "True"
    assert "Non-terminated Pods:" in described
    assert "talker" in described
    assert "listener" in described


# -- the official Python client --------------------------------------------------------------


@pytest.fixture
def core(node: Daemon) -> Iterator[Any]:
    configuration = client.Configuration()
    config.load_kube_config(
        config_file=str(node.state / "kubeconfig"), client_configuration=configuration
    )
    with client.ApiClient(configuration) as api:
        yield client.CoreV1Api(api)


def test_the_python_client_creates_lists_and_watches_until_running(
    core: Any, tmp_path: Path
) -> None:
    name = f"py{uuid.uuid4().hex[:6]}"
    made = core.create_namespaced_config_map(
        "default",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}},
    )
    assert (made.metadata.name, made.data) == (name, {"k": "v"})
    found = core.list_namespaced_config_map("default", field_selector=f"metadata.name={name}")
    assert [(c.metadata.name, c.data) for c in found.items] == [(name, {"k": "v"})]

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"made-by": name}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"]}],
        },
    }
    created = core.create_namespaced_pod("default", pod)
    assert created.status.phase == "Pending"
    assert name in [p.metadata.name for p in core.list_namespaced_pod("default").items]

    phases = []
    stream = watch.Watch()
    for event in stream.stream(
        core.list_namespaced_pod, "default", label_selector=f"made-by={name}", timeout_seconds=90
    ):
        phases.append(event["object"].status.phase)
        if event["object"].status.phase == "Running":
            stream.stop()
    assert phases[-1] == "Running"
    assert core.read_namespaced_pod(name, "default").status.phase == "Running"

    core.delete_namespaced_pod(name, "default")
    core.delete_namespaced_config_map(name, "default")
    with pytest.raises(client.ApiException) as missing:
        core.read_namespaced_config_map(name, "default")
    assert missing.value.status == 404
    assert json.loads(missing.value.body)["message"] == f'configmaps "{name}" not found'


def test_kubectl_create_makes_each_kind_it_sends_in_protobuf(kubectl: Kubectl) -> None:
    name = f"pb{uuid.uuid4().hex[:6]}"
    run = ["--image", BUSYBOX_IMAGE, "--", "sh", "-c"]
    made = [
        kubectl.ok("create", "namespace", name),
        kubectl.ok("create", "configmap", name, "--from-literal=mode=fast"),
        kubectl.ok("create", "secret", "generic", name, "--from-literal=password=s3cr3t"),
        kubectl.ok("create", "serviceaccount", name),
        kubectl.ok("create", "service", "clusterip", name, "--tcp=80:8080"),
        kubectl.ok("create", "deployment", name, "--replicas=2", "--port=8080", *run, "sleep 600"),
        kubectl.ok("create", "job", name, *run, "echo done by $HOSTNAME"),
    ]
    assert made == [
        f"namespace/{name} created\n",
        f"configmap/{name} created\n",
        f"secret/{name} created\n",
        f"serviceaccount/{name} created\n",
        f"service/{name} created\n",
        f"deployment.apps/{name} created\n",
        f"job.batch/{name} created\n",
    ]
    assert kubectl.ok("get", "cm", name, "-o", "jsonpath={.data.mode}") == "fast"
    assert kubectl.ok("get", "secret", name, "-o", "jsonpath={.type}") == "Opaque"
    port = json.loads(kubectl.ok("get", "svc", name, "-o", "json"))["spec"]["ports"][0]
    assert (port["port"], port["targetPort"], port["protocol"]) == (80, 8080, "TCP")
    deployment = json.loads(kubectl.ok("get", "deploy", name, "-o", "json"))["spec"]
    assert deployment["replicas"] == 2
    assert deployment["template"]["spec"]["containers"][0]["ports"] == [
        {"containerPort": 8080, "protocol": "TCP"}
    ]
    available = kubectl("rollout", "status", f"deploy/{name}", "--timeout=90s", timeout=120)
    assert available.returncode == 0, available.stderr
    done = kubectl("wait", "--for=condition=Complete", f"job/{name}", "--timeout=90s")
    assert done.returncode == 0, done.stderr
    assert kubectl.ok("logs", f"job/{name}").startswith(f"done by {name}-")
    for kind in ("job", "deployment", "service", "serviceaccount", "secret", "configmap"):
        kubectl.ok("delete", kind, name)
    kubectl.ok("delete", "namespace", name)
