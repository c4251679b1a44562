"""Cluster node mode against a real Kubernetes control plane, driven with the real kubectl.

The control plane is ``integration/cluster``'s (etcd, kube-apiserver with Node and RBAC
authorization and NodeRestriction, scheduler, controller manager with node CIDR
allocation); the agent is ``asynckubelet serve --kubeconfig`` on the real Docker engine
with the bridge backend, its kubelet API on loopback where the API server dials it for
``kubectl logs``, ``exec`` and ``port-forward``. Pods are applied without ``nodeName``
unless a test says why.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from integration.cluster_fixtures import Agent, Cluster, agents, cluster, namespace, wait_for
from integration.harness import Engine

__all__ = ["agents", "cluster", "namespace"]

pytestmark = pytest.mark.timeout(600)


def pod_yaml(name: str, busybox: str, *, command: str, extra: str = "") -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{app: {name}}}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: c
    image: {busybox}
    command: ["sh", "-c", {json.dumps(command)}]
{extra}
"""


SLEEPER = "trap 'exit 0' TERM; while true; do sleep 1; done"
SERVE_HOSTNAME = "mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www"


def phase(cluster: Cluster, ns: str, name: str) -> str:
    done = cluster.kubectl(
        "get", "pod", name, "-n", ns, "-o", "jsonpath={.status.phase}", check=False
    )
    return done.stdout.strip() if done.returncode == 0 else ""


def pod(cluster: Cluster, ns: str, name: str) -> dict[str, Any]:
    result: dict[str, Any] = cluster.json("get", "pod", name, "-n", ns)
    return result


def wait_phase(cluster: Cluster, ns: str, name: str, wanted: str, timeout: float = 120) -> None:
    wait_for(
        lambda: phase(cluster, ns, name) == wanted,
        timeout=timeout,
        what=f"pod {ns}/{name} {wanted}",
    )


def docker(engine: Engine, *args: str) -> str:
    return subprocess.run(
        ["docker", "-H", engine.url, *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def container_id(agent: Agent, pod_name: str, container: str = "c") -> str:
    """The running container ``container`` of the agent's pod ``pod_name``, or ""."""
    return docker(
        agent.engine,
        "ps",
        "-q",
        "--filter",
        f"label=io.asynckubelet.node={agent.name}",
        "--filter",
        f"label=io.kubernetes.pod.name={pod_name}",
        "--filter",
        f"label=io.kubernetes.container.name={container}",
    )


def allocated_ips(agent: Agent) -> list[str]:
    """The addresses the agent's bridge network has handed out and not released."""
    taken = []
    for entry in (agent.network_dir / agent.bridge / "ipam").glob("*"):
        try:
            ipaddress.ip_address(entry.name)
        except ValueError:
            continue
        taken.append(entry.name)
    return taken


def running_sandbox(agent: Agent, pod_name: str) -> str:
    return docker(
        agent.engine,
        "ps",
        "-q",
        "--filter",
        f"label=io.asynckubelet.node={agent.name}",
        "--filter",
        f"label=io.kubernetes.pod.name={pod_name}",
        "--filter",
        "label=io.asynckubelet.type=podsandbox",
    )


@pytest.fixture
def agent(agents: Callable[..., Agent]) -> Agent:
    node = agents()
    node.start()
    node.wait_ready()
    return node


def test_the_node_registers_ready_with_the_kubelets_labels_status_and_lease(
    cluster: Cluster, agent: Agent
) -> None:
    wide = cluster.kubectl("get", "nodes", "-o", "wide").stdout
    row = next(line.split() for line in wide.splitlines() if line.startswith(agent.name))
    assert row[1] == "Ready"
    assert any(word.startswith("docker://") for word in row)
    node = cluster.json("get", "node", agent.name)
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == agent.name
    assert labels["kubernetes.io/os"] == "linux"
    assert "kubernetes.io/arch" in labels
    status = node["status"]
    assert [c["type"] for c in status["conditions"]] == [
        "MemoryPressure",
        "DiskPressure",
        "PIDPressure",
        "Ready",
    ]
    assert status["capacity"]["pods"] == "110"
    assert set(status["allocatable"]) >= {"cpu", "memory", "ephemeral-storage", "pods"}
    assert status["daemonEndpoints"]["kubeletEndpoint"]["Port"] == agent.kubelet_port
    assert status["nodeInfo"]["containerRuntimeVersion"].startswith("docker://")
    assert {a["type"] for a in status["addresses"]} == {"InternalIP", "Hostname"}
    assert node["spec"]["podCIDR"]
    lease = cluster.json("get", "lease", agent.name, "-n", "kube-node-lease")
    assert lease["spec"]["holderIdentity"] == agent.name
    assert lease["spec"]["leaseDurationSeconds"] == 40
    assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
    first = lease["spec"]["renewTime"]
    wait_for(
        lambda: (
            cluster.json("get", "lease", agent.name, "-n", "kube-node-lease")["spec"]["renewTime"]
            != first
        ),
        timeout=30,
        what="the lease to be renewed",
    )


def test_a_pod_applied_without_a_node_is_scheduled_here_and_runs_with_its_ip(
    cluster: Cluster, agent: Agent, namespace: str, test_images: dict[str, str]
) -> None:
    cluster.kubectl(
        "apply", "-n", namespace, "-f", "-",
        input=pod_yaml("web", test_images["busybox"], command=SLEEPER),
    )  # fmt: skip
    wait_phase(cluster, namespace, "web", "Running")
    wide = cluster.kubectl("get", "pods", "-n", namespace, "-o", "wide").stdout
    row = next(line.split() for line in wide.splitlines() if line.startswith("web "))
    ip, node_name = row[5], row[6]
    assert node_name == agent.name
    cidr = cluster.json("get", "node", agent.name)["spec"]["podCIDR"]
    assert ipaddress.ip_address(ip) in ipaddress.ip_network(cidr)
    shown = pod(cluster, namespace, "web")
    conditions = {c["type"]: c["status"] for c in shown["status"]["conditions"]}
    assert conditions["Ready"] == "True"
    assert conditions["ContainersReady"] == "True"
    assert conditions["PodReadyToStartContainers"] == "True"
    assert list(conditions) == [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    events = cluster.json(
        "get", "events", "-n", namespace, "--field-selector", "involvedObject.name=web"
    )["items"]
    reasons = {(e["reason"], e["source"].get("component")) for e in events}
    assert {("Created", "kubelet"), ("Started", "kubelet")} <= reasons


FOOSERVICE = """
apiVersion: v1
kind: Service
metadata: {name: fooservice}
spec:
  selector: {app: none-here}
  ports: [{name: http, port: 8765, targetPort: 8080}]
"""


def test_a_pod_gets_the_service_variables_of_its_namespace_and_the_api_servers(
    cluster: Cluster, agent: Agent, namespace: str, test_images: dict[str, str]
) -> None:
    """From the Services the node watches on the API server, as the kubelet's informer."""
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=FOOSERVICE)
    cluster.kubectl(
        "apply", "-n", namespace, "-f", "-",
        input=pod_yaml("env", test_images["busybox"], command="env; " + SLEEPER),
    )  # fmt: skip
    wait_phase(cluster, namespace, "env", "Running")
    logs = cluster.kubectl("logs", "-n", namespace, "env").stdout
    env = dict(line.split("=", 1) for line in logs.splitlines() if "=" in line)
    foo = cluster.json("get", "service", "fooservice", "-n", namespace)["spec"]["clusterIP"]
    api = cluster.json("get", "service", "kubernetes", "-n", "default")["spec"]["clusterIP"]
    assert env["FOOSERVICE_SERVICE_HOST"] == foo
    assert env["FOOSERVICE_SERVICE_PORT_HTTP"] == "8765"
    assert env["FOOSERVICE_PORT_8765_TCP"] == f"tcp://{foo}:8765"
    assert env["KUBERNETES_SERVICE_HOST"] == api


def test_kubectl_delete_runs_the_prestop_hook_and_ends_within_the_grace_period(
    cluster: Cluster, agents: Callable[..., Agent], namespace: str, test_images: dict[str, str]
) -> None:
    # The hook leaves its mark in a hostPath, which only the privileged level allows.
    agent = agents(extra=("--pod-security", "privileged"))
    agent.start()
    agent.wait_ready()
    marker = agent.root / "hook"
    marker.mkdir()
    extra = f"""
    lifecycle:
      preStop:
        exec:
          command: ["sh", "-c", "echo stopping > /hook/prestop"]
    volumeMounts:
    - {{name: hook, mountPath: /hook}}
  volumes:
  - name: hook
    hostPath: {{path: {marker}}}
"""
    # ``sleep`` as PID 1 ignores SIGTERM: only the grace period's SIGKILL ends it.
    cluster.kubectl(
        "apply", "-n", namespace, "-f", "-",
        input=pod_yaml("stubborn", test_images["busybox"], command="sleep 3600", extra=extra),
    )  # fmt: skip
    wait_phase(cluster, namespace, "stubborn", "Running")
    cluster.kubectl("delete", "pod", "stubborn", "-n", namespace, "--timeout=60s")
    assert (marker / "prestop").read_text().strip() == "stopping"
    assert cluster.kubectl("get", "pod", "stubborn", "-n", namespace, check=False).returncode
    assert container_id(agent, "stubborn") == ""


def test_a_deployment_reaches_three_available_and_survives_a_rollout_restart(
    cluster: Cluster, agent: Agent, namespace: str, test_images: dict[str, str]
) -> None:
    deployment = f"""
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 3
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: c
        image: {test_images["busybox"]}
        command: ["sh", "-c", {json.dumps(SLEEPER)}]
"""
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=deployment)
    cluster.kubectl(
        "rollout", "status", "deployment/web", "-n", namespace, "--timeout=180s", timeout=200
    )
    assert (
        cluster.json("get", "deployment", "web", "-n", namespace)["status"]["availableReplicas"]
        == 3
    )
    before = {p["metadata"]["name"] for p in cluster.json("get", "pods", "-n", namespace)["items"]}
    cluster.kubectl("rollout", "restart", "deployment/web", "-n", namespace)
    cluster.kubectl(
        "rollout", "status", "deployment/web", "-n", namespace, "--timeout=180s", timeout=200
    )

    def replaced() -> bool:
        items = cluster.json("get", "pods", "-n", namespace)["items"]
        names = {p["metadata"]["name"] for p in items}
        return len(names) == 3 and not names & before

    wait_for(replaced, timeout=120, what="the old pods to be gone")
    status = cluster.json("get", "deployment", "web", "-n", namespace)["status"]
    assert (status["availableReplicas"], status["updatedReplicas"]) == (3, 3)


def test_a_job_whose_container_fails_ends_failed_with_the_right_counts(
    cluster: Cluster, agent: Agent, namespace: str, test_images: dict[str, str]
) -> None:
    job = f"""
apiVersion: batch/v1
kind: Job
metadata: {{name: failing}}
spec:
  backoffLimit: 1
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: {test_images["busybox"]}
        command: ["sh", "-c", "exit 3"]
"""
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=job)

    def failed() -> dict[str, Any] | None:
        status: dict[str, Any] = cluster.json("get", "job", "failing", "-n", namespace)["status"]
        conditions = {c["type"]: c for c in status.get("conditions", [])}
        return status if conditions.get("Failed", {}).get("status") == "True" else None

    status = wait_for(failed, timeout=180, what="the job to fail")
    assert status["failed"] == 2
    assert not status.get("succeeded")
    assert not status.get("active")
    failure = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failure["reason"] == "BackoffLimitExceeded"
    pods = cluster.json("get", "pods", "-n", namespace, "-l", "job-name=failing")["items"]
    assert [p["status"]["phase"] for p in pods] == ["Failed", "Failed"]
    terminated = [p["status"]["containerStatuses"][0]["state"]["terminated"] for p in pods]
    assert {(t["exitCode"], t["reason"]) for t in terminated} == {(3, "Error")}
    # The finished pods gave back their sandboxes and addresses; their containers stay.
    wait_for(lambda: not allocated_ips(agent), timeout=60, what="the pods' IPs released")
    for p in pods:
        assert not running_sandbox(agent, p["metadata"]["name"])
        assert docker(agent.engine, "ps", "-aq", "--filter",
                      f"label=io.kubernetes.pod.name={p['metadata']['name']}",
                      "--filter", "label=io.kubernetes.container.name=c")  # fmt: skip


def test_a_configmap_update_reaches_the_mounted_file(
    cluster: Cluster, agent: Agent, namespace: str, test_images: dict[str, str]
) -> None:
    cluster.kubectl("create", "configmap", "greeting", "-n", namespace, "--from-literal=text=hello")
    extra = """
    volumeMounts:
    - {name: greeting, mountPath: /etc/greeting}
  volumes:
  - name: greeting
    configMap: {name: greeting}
"""
    cluster.kubectl(
        "apply", "-n", namespace, "-f", "-",
        input=pod_yaml("reader", test_images["busybox"], command=SLEEPER, extra=extra),
    )  # fmt: skip
    wait_phase(cluster, namespace, "reader", "Running")
    cid = container_id(agent, "reader")
    assert docker(agent.engine, "exec", cid, "cat", "/etc/greeting/text") == "hello"
    cluster.kubectl(
        "patch", "configmap", "greeting", "-n", namespace, "-p", '{"data":{"text":"bonjour"}}'
    )
    wait_for(
        lambda: docker(agent.engine, "exec", cid, "cat", "/etc/greeting/text") == "bonjour",
        timeout=60,
        what="the new ConfigMap text in the container",
    )


def test_a_projected_token_comes_from_the_token_request_api_and_is_bound_to_the_pod(
    cluster: Cluster, agent: Agent, namespace: str, test_images: dict[str, str]
) -> None:
    extra = """
    volumeMounts:
    - {name: token, mountPath: /var/run/secrets/tokens}
  volumes:
  - name: token
    projected:
      sources:
      - serviceAccountToken: {path: token, expirationSeconds: 3600}
      - configMap:
          name: kube-root-ca.crt
          items: [{key: ca.crt, path: ca.crt}]
"""
    cluster.kubectl(
        "apply", "-n", namespace, "-f", "-",
        input=pod_yaml("bound", test_images["busybox"], command=SLEEPER, extra=extra),
    )  # fmt: skip
    wait_phase(cluster, namespace, "bound", "Running")
    cid = container_id(agent, "bound")
    token = docker(agent.engine, "exec", cid, "cat", "/var/run/secrets/tokens/token")
    ca = docker(agent.engine, "exec", cid, "cat", "/var/run/secrets/tokens/ca.crt")
    assert ca.startswith("-----BEGIN CERTIFICATE-----")
    review = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token},
    }
    answer = json.loads(
        cluster.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(review)).stdout
    )
    assert answer["status"]["authenticated"] is True
    assert answer["status"]["user"]["username"] == f"system:serviceaccount:{namespace}:default"
    uid = pod(cluster, namespace, "bound")["metadata"]["uid"]
    assert answer["status"]["user"]["extra"]["authentication.kubernetes.io/pod-uid"] == [uid]


def test_a_pod_over_the_nodes_cpu_is_rejected_with_the_kubelets_reason(
    cluster: Cluster, agent: Agent, namespace: str, test_images: dict[str, str]
) -> None:
    # Bound directly, past the scheduler (which would not place it), as a kubelet is.
    extra = f"""
    resources:
      requests: {{cpu: "100000"}}
  nodeName: {agent.name}
"""
    cluster.kubectl(
        "apply", "-n", namespace, "-f", "-",
        input=pod_yaml("greedy", test_images["busybox"], command=SLEEPER, extra=extra),
    )  # fmt: skip
    wait_phase(cluster, namespace, "greedy", "Failed")
    status = pod(cluster, namespace, "greedy")["status"]
    assert status["reason"] == "OutOfcpu"
    assert status["message"].startswith(
        "Pod was rejected: Node didn't have enough resource: cpu, requested: 100000000"
    )
    assert container_id(agent, "greedy") == ""


def test_a_pod_the_node_finds_invalid_fails_with_the_field_error_and_nothing_is_made(
    cluster: Cluster, agent: Agent, namespace: str, test_images: dict[str, str]
) -> None:
    # The API server of the cluster has no Pod Security admission; the node enforces
    # baseline, under which a host-network pod is forbidden.
    cluster.kubectl(
        "apply", "-n", namespace, "-f", "-",
        input=pod_yaml("hostnet", test_images["busybox"], command=SLEEPER,
                       extra="  hostNetwork: true\n"),
    )  # fmt: skip
    wait_phase(cluster, namespace, "hostnet", "Failed")
    status = pod(cluster, namespace, "hostnet")["status"]
    assert status["reason"] == "FailedValidation"
    assert "hostNetwork" in status["message"]
    assert (
        docker(agent.engine, "ps", "-aq", "--filter", "label=io.kubernetes.pod.name=hostnet") == ""
    )


def test_a_static_pod_gets_a_mirror_pod_that_shows_its_status(
    cluster: Cluster, agents: Callable[..., Agent], test_images: dict[str, str]
) -> None:
    node = agents()
    node.manifests.mkdir(parents=True)
    (node.manifests / "static.yaml").write_text(
        pod_yaml("static-web", test_images["busybox"], command=SLEEPER)
    )
    node.start()
    node.wait_ready()
    mirror = f"static-web-{node.name}"
    wait_phase(cluster, "default", mirror, "Running")
    shown = pod(cluster, "default", mirror)
    assert "kubernetes.io/config.mirror" in shown["metadata"]["annotations"]
    assert shown["spec"]["nodeName"] == node.name
    assert shown["metadata"]["ownerReferences"][0]["kind"] == "Node"
    (node.manifests / "static.yaml").unlink()
    wait_for(
        lambda: cluster.kubectl("get", "pod", mirror, check=False).returncode != 0,
        timeout=60,
        what="the mirror pod to go with its static pod",
    )


def test_the_agent_killed_and_started_again_adopts_its_pods_with_zero_restarts(
    cluster: Cluster, agent: Agent, namespace: str, test_images: dict[str, str]
) -> None:
    cluster.kubectl(
        "apply", "-n", namespace, "-f", "-",
        input=pod_yaml("steady", test_images["busybox"], command=SLEEPER),
    )  # fmt: skip
    wait_phase(cluster, namespace, "steady", "Running")
    before = pod(cluster, namespace, "steady")
    cid = container_id(agent, "steady")
    node_uid = cluster.json("get", "node", agent.name)["metadata"]["uid"]
    agent.kill()
    agent.start()
    agent.wait_ready()
    after = pod(cluster, namespace, "steady")
    assert after["status"]["containerStatuses"][0]["restartCount"] == 0
    assert after["status"]["podIP"] == before["status"]["podIP"]
    assert container_id(agent, "steady") == cid
    assert cluster.json("get", "node", agent.name)["metadata"]["uid"] == node_uid


def test_a_node_stopped_past_the_grace_turns_not_ready_then_ready_and_reconciles(
    cluster: Cluster, agent: Agent, namespace: str, test_images: dict[str, str]
) -> None:
    for name in ("kept", "doomed"):
        cluster.kubectl(
            "apply", "-n", namespace, "-f", "-",
            input=pod_yaml(name, test_images["busybox"], command=SLEEPER),
        )  # fmt: skip
    wait_phase(cluster, namespace, "kept", "Running")
    wait_phase(cluster, namespace, "doomed", "Running")
    kept = container_id(agent, "kept")
    agent.kill()

    def ready_status() -> str:
        node = cluster.json("get", "node", agent.name)
        return str(next(c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready"))

    wait_for(lambda: ready_status() == "Unknown", timeout=120, what="the node to be NotReady")
    assert "NotReady" in cluster.kubectl("get", "node", agent.name).stdout
    cluster.kubectl("delete", "pod", "doomed", "-n", namespace, "--wait=false")
    # The scheduler places nothing on a node that is not ready: bound directly.
    cluster.kubectl(
        "apply", "-n", namespace, "-f", "-",
        input=pod_yaml("newcomer", test_images["busybox"], command=SLEEPER,
                       extra=f"  nodeName: {agent.name}\n"),
    )  # fmt: skip
    agent.start()
    agent.wait_ready()
    wait_phase(cluster, namespace, "newcomer", "Running")
    wait_for(
        lambda: (
            cluster.kubectl("get", "pod", "doomed", "-n", namespace, check=False).returncode != 0
        ),
        timeout=60,
        what="the pod deleted meanwhile to be gone",
    )
    assert container_id(agent, "doomed") == ""
    assert container_id(agent, "kept") == kept
    wait_for(
        lambda: {c["type"]: c["status"] for c in pod(cluster, namespace, "kept")["status"][
            "conditions"]}["Ready"] == "True",
        timeout=60,
        what="the kept pod to be Ready again",
    )  # fmt: skip


def test_running_pods_outlive_an_api_server_outage_and_the_watch_resumes(
    cluster: Cluster, agent: Agent, namespace: str, test_images: dict[str, str]
) -> None:
    cluster.kubectl(
        "apply", "-n", namespace, "-f", "-",
        input=pod_yaml("before", test_images["busybox"], command=SLEEPER),
    )  # fmt: skip
    wait_phase(cluster, namespace, "before", "Running")
    cid = container_id(agent, "before")
    cluster.restart_apiserver(down_for=5)
    assert container_id(agent, "before") == cid
    cluster.kubectl(
        "apply", "-n", namespace, "-f", "-",
        input=pod_yaml("after", test_images["busybox"], command=SLEEPER),
    )  # fmt: skip
    wait_phase(cluster, namespace, "after", "Running")
    assert agent.process is not None
    assert agent.process.poll() is None
    assert container_id(agent, "before") == cid
    sandboxes = docker(
        agent.engine,
        "ps",
        "-q",
        "--filter",
        f"label=io.asynckubelet.node={agent.name}",
        "--filter",
        "label=io.kubernetes.pod.name=after",
    ).split()
    assert len(sandboxes) == 2


def test_two_agents_share_a_deployment_and_their_pods_reach_each_other(
    cluster: Cluster, agents: Callable[..., Agent], namespace: str, test_images: dict[str, str]
) -> None:
    first, second = agents(), agents()
    for node in (first, second):
        node.start()
    for node in (first, second):
        node.wait_ready()
    deployment = f"""
apiVersion: apps/v1
kind: Deployment
metadata: {{name: spread}}
spec:
  replicas: 4
  selector: {{matchLabels: {{app: spread}}}}
  template:
    metadata: {{labels: {{app: spread}}}}
    spec:
      terminationGracePeriodSeconds: 2
      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: kubernetes.io/hostname
        whenUnsatisfiable: DoNotSchedule
        labelSelector: {{matchLabels: {{app: spread}}}}
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions:
              - {{key: kubernetes.io/hostname, operator: In, values: [{first.name}, {second.name}]}}
      containers:
      - name: c
        image: {test_images["busybox"]}
        command: ["sh", "-c", {json.dumps(SERVE_HOSTNAME)}]
"""
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=deployment)
    cluster.kubectl(
        "rollout", "status", "deployment/spread", "-n", namespace, "--timeout=180s", timeout=200
    )
    pods = cluster.json("get", "pods", "-n", namespace, "-l", "app=spread")["items"]
    by_node: dict[str, list[dict[str, Any]]] = {}
    for item in pods:
        by_node.setdefault(item["spec"]["nodeName"], []).append(item)
    assert sorted(len(v) for v in by_node.values()) == [2, 2]
    assert set(by_node) == {first.name, second.name}
    cidrs = {
        n.name: ipaddress.ip_network(cluster.json("get", "node", n.name)["spec"]["podCIDR"])
        for n in (first, second)
    }
    assert cidrs[first.name] != cidrs[second.name]
    for item in pods:
        assert ipaddress.ip_address(item["status"]["podIP"]) in cidrs[item["spec"]["nodeName"]]
    source = by_node[first.name][0]
    target = by_node[second.name][0]
    cid = container_id(first, source["metadata"]["name"])
    # busybox-static's wget crashes (static glibc): the request goes through nc.
    request = f"printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 {target['status']['podIP']} 8080"
    answer = docker(first.engine, "exec", cid, "sh", "-c", request)
    assert answer.splitlines()[0].startswith("HTTP/1.")
    assert answer.splitlines()[-1] == target["metadata"]["name"]


def test_a_kubeconfig_the_server_refuses_is_one_line_and_exit_status_2(
    cluster: Cluster, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "refused.kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "x",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": cluster.env["AKL_CLUSTER_SERVER"],
                            "certificate-authority": str(cluster.dir / "pki" / "ca.crt"),
                        },
                    }
                ],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "users": [{"name": "u", "user": {"token": "not-a-token-the-server-knows"}}],
            }
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "asynckubelet", "serve", "--kubeconfig", str(kubeconfig),
         "--node-name", "akltest-refused", "--state-dir", str(tmp_path / "state"),
         "--listen", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [
        f"error: kubeconfig {kubeconfig}: the API server at "
        f"{cluster.env['AKL_CLUSTER_SERVER']} refused its credentials (401 Unauthorized)"
    ]


TALKER = "i=0; while true; do echo line $i; i=$((i+1)); sleep 0.5; done"
CRASHER = "echo attempt; sleep 1; exit 1"


def kubectls(cluster: Cluster) -> list[Path]:
    """The kubectl of the control plane's release, and a current one when installed
    (it tries WebSocket first and falls back to SPDY)."""
    found = [cluster.bin / "kubectl"]
    current = Path("/usr/bin/kubectl")
    if current.exists():
        found.append(current)
    return found


def kubectl_with(
    kubectl: Path, cluster: Cluster, *args: str, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(kubectl), "--kubeconfig", str(cluster.admin), *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_kubectl_logs_tail_previous_and_follow_go_through_the_api_server(
    cluster: Cluster, agent: Agent, namespace: str, test_images: dict[str, str]
) -> None:
    manifest = f"""
apiVersion: v1
kind: Pod
metadata: {{name: chatty}}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: talker
    image: {test_images["busybox"]}
    command: ["sh", "-c", {json.dumps(TALKER)}]
  - name: crasher
    image: {test_images["busybox"]}
    command: ["sh", "-c", {json.dumps(CRASHER)}]
"""
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=manifest)
    wait_phase(cluster, namespace, "chatty", "Running")

    def lines(*args: str) -> list[str]:
        done = cluster.kubectl("logs", "chatty", "-n", namespace, *args, check=False)
        return done.stdout.splitlines() if done.returncode == 0 else []

    wait_for(lambda: len(lines("-c", "talker")) >= 3, timeout=60, what="three lines logged")
    logged = lines("-c", "talker")
    assert logged[:3] == ["line 0", "line 1", "line 2"]
    tail = lines("-c", "talker", "--tail=1")
    assert len(tail) == 1
    assert tail[0].startswith("line ")

    def restarted() -> bool:
        statuses = pod(cluster, namespace, "chatty")["status"].get("containerStatuses", [])
        return any(c["name"] == "crasher" and c["restartCount"] >= 1 for c in statuses)

    wait_for(restarted, timeout=120, what="the crasher restarted")
    assert lines("-c", "crasher", "--previous") == ["attempt"]

    with subprocess.Popen(
        [str(cluster.bin / "kubectl"), "--kubeconfig", str(cluster.admin), "logs", "-f",
         "chatty", "-c", "talker", "-n", namespace, "--tail=1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as follow:  # fmt: skip
        try:
            assert follow.stdout is not None
            first = follow.stdout.readline().strip()
            following = [follow.stdout.readline().strip() for _ in range(3)]
        finally:
            follow.kill()
            follow.wait(timeout=30)
    number = int(first.split()[1])
    assert following == [f"line {number + i}" for i in (1, 2, 3)]


def test_kubectl_exec_passes_output_exit_code_and_stdin(
    cluster: Cluster, agent: Agent, namespace: str, test_images: dict[str, str]
) -> None:
    cluster.kubectl(
        "apply", "-n", namespace, "-f", "-",
        input=pod_yaml("shell", test_images["busybox"], command=SLEEPER),
    )  # fmt: skip
    wait_phase(cluster, namespace, "shell", "Running")
    for kubectl in kubectls(cluster):
        done = kubectl_with(
            kubectl, cluster, "exec", "shell", "-n", namespace, "--",
            "sh", "-c", "echo hi; echo oops >&2; exit 3",
        )  # fmt: skip
        assert done.returncode == 3, (kubectl, done.stderr)
        assert done.stdout == "hi\n"
        assert "oops" in done.stderr
        done = kubectl_with(
            kubectl, cluster, "exec", "-i", "shell", "-n", namespace, "--",
            "sh", "-c", "cat; echo done",
            input="abc\ndef\n",
        )  # fmt: skip
        assert done.returncode == 0, (kubectl, done.stderr)
        assert done.stdout == "abc\ndef\ndone\n"
    missing = cluster.kubectl(
        "exec", "shell", "-n", namespace, "-c", "nope", "--", "true", check=False
    )
    assert missing.returncode != 0
    assert "container nope is not valid for pod shell" in missing.stderr


def test_kubectl_port_forward_reaches_a_port_of_the_pod(
    cluster: Cluster, agent: Agent, namespace: str, test_images: dict[str, str]
) -> None:
    cluster.kubectl(
        "apply", "-n", namespace, "-f", "-",
        input=pod_yaml("web", test_images["busybox"], command=SERVE_HOSTNAME),
    )  # fmt: skip
    wait_phase(cluster, namespace, "web", "Running")
    with subprocess.Popen(
        [str(cluster.bin / "kubectl"), "--kubeconfig", str(cluster.admin), "port-forward",
         "-n", namespace, "--address", "127.0.0.1", "pod/web", ":8080"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as forward:  # fmt: skip
        try:
            assert forward.stdout is not None
            line = forward.stdout.readline()
            assert line.startswith("Forwarding from 127.0.0.1:"), line
            port = int(line.split("127.0.0.1:")[1].split()[0])
            for _ in range(2):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as answer:
                    assert answer.read().decode().strip() == "web"
        finally:
            forward.terminate()
            forward.wait(timeout=30)


def test_the_local_api_of_serve_lists_cluster_pods_beside_its_own(
    cluster: Cluster, agent: Agent, namespace: str, test_images: dict[str, str]
) -> None:
    cluster.kubectl(
        "apply", "-n", namespace, "-f", "-",
        input=pod_yaml("remote", test_images["busybox"], command=SLEEPER),
    )  # fmt: skip
    wait_phase(cluster, namespace, "remote", "Running")
    local = agent.root / "local.yaml"
    local.write_text(pod_yaml("local", test_images["busybox"], command=SLEEPER))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "asynckubelet", *args,
             "--state-dir", str(agent.state_dir), "--node-name", agent.name],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
        )  # fmt: skip

    applied = cli("apply", "-f", str(local), "--wait", "--timeout", "120")
    assert applied.returncode == 0, applied.stderr
    listed = cli("get", "pods", "-A")
    assert listed.returncode == 0, listed.stderr
    names = {line.split()[1] for line in listed.stdout.splitlines()[1:]}
    assert {"remote", "local"} <= names
    # The locally applied pod is the node's own: the API server shows its mirror pod.
    wait_for(
        lambda: phase(cluster, "default", f"local-{agent.name}") == "Running",
        timeout=60,
        what="the local pod's mirror pod",
    )
