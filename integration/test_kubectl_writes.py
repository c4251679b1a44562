"""Real kubectl writing to a real ``serve``: both kubectls (the machine's and PyPI's) run a
kubectl user's everyday writes with nothing but the node's kubeconfig: ``create``,
``apply`` client- and server-side, ``apply -k``, ``label``, ``annotate``, ``patch`` in
each type, ``edit`` with an ``EDITOR`` script, ``scale``, and ``delete`` of a pod (kubectl
returns once it is gone), of a file's objects and of a Deployment in the foreground."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.harness import Engine
from integration.kubectl_helpers import Kubectl, api_daemon, kubectl, unique
from integration.serve_helpers import LONG, Daemon, manifest, wait_running

__all__ = ["kubectl"]
"""The fixture this module takes from its helpers, run against this module's node."""

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: NAME}
spec:
  replicas: 1
  selector: {matchLabels: {app: NAME}}
  template:
    metadata: {labels: {app: NAME}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: c
        image: BUSYBOX
        command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
"""


def configmap(name: str, **data: str) -> str:
    return json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
    )


@pytest.fixture(scope="module")
def node(
    tmp_path_factory: pytest.TempPathFactory, docker_engine: Engine, test_images: dict[str, str]
) -> Iterator[Daemon]:
    yield from api_daemon(tmp_path_factory.mktemp("kubewrites"), docker_engine)


def data_of(kubectl: Kubectl, name: str) -> dict[str, str]:
    found: dict[str, str] = json.loads(kubectl.ok("get", "cm", name, "-o", "json"))["data"]
    return found


def test_create_then_again_is_already_exists(kubectl: Kubectl, tmp_path: Path) -> None:
    name = unique("cr")
    path = manifest(tmp_path, "cm.json", configmap(name, a="1"))
    dry = kubectl.ok("create", "--dry-run=server", "-f", path).strip()
    assert dry == f"configmap/{name} created (server dry run)"
    assert kubectl("get", "cm", name).returncode == 1
    assert kubectl.ok("create", "-f", path).strip() == f"configmap/{name} created"
    done = kubectl("create", "-f", path)
    assert done.returncode == 1
    assert f'configmaps "{name}" already exists' in done.stderr
    assert "(AlreadyExists)" in done.stderr
    assert kubectl.ok("delete", "-f", path).startswith(f'configmap "{name}" deleted')
    assert kubectl("get", "cm", name).returncode == 1


def test_apply_client_side_creates_then_configures(kubectl: Kubectl, tmp_path: Path) -> None:
    name = unique("ap")
    path = manifest(tmp_path, "cm.json", configmap(name, a="1"))
    assert kubectl.ok("apply", "-f", path).strip() == f"configmap/{name} created"
    manifest(tmp_path, "cm.json", configmap(name, a="2", b="3"))
    assert kubectl.ok("apply", "-f", path).strip() == f"configmap/{name} configured"
    assert data_of(kubectl, name) == {"a": "2", "b": "3"}
    assert kubectl.ok("apply", "-f", path).strip() == f"configmap/{name} unchanged"


def test_apply_server_side(kubectl: Kubectl, tmp_path: Path) -> None:
    name = unique("ss")
    path = manifest(tmp_path, "cm.json", configmap(name, a="1"))
    assert kubectl.ok("apply", "--server-side", "-f", path).strip() == (
        f"configmap/{name} serverside-applied"
    )
    manifest(tmp_path, "cm.json", configmap(name, a="2"))
    kubectl.ok("apply", "--server-side", "-f", path)
    assert data_of(kubectl, name) == {"a": "2"}


def test_apply_k_of_a_kustomization(kubectl: Kubectl, tmp_path: Path) -> None:
    name = unique("kz")
    (tmp_path / "cm.json").write_text(configmap(name, a="1"))
    (tmp_path / "kustomization.yaml").write_text(
        f"resources: [cm.json]\ncommonLabels: {{team: {name}}}\n"
    )
    assert kubectl.ok("apply", "-k", str(tmp_path)).strip() == f"configmap/{name} created"
    assert kubectl.ok("get", "cm", "-l", f"team={name}", "-o", "name").split() == [
        f"configmap/{name}"
    ]


def test_patch_in_each_type(kubectl: Kubectl, tmp_path: Path) -> None:
    name = unique("pt")
    kubectl.ok("create", "-f", manifest(tmp_path, "cm.json", configmap(name, a="1", b="2")))
    json_patch = '[{"op": "replace", "path": "/data/a", "value": "x"}]'
    kubectl.ok("patch", "cm", name, "--type=json", "-p", json_patch)
    kubectl.ok("patch", "cm", name, "--type=merge", "-p", '{"data": {"b": null}}')
    kubectl.ok("patch", "cm", name, "--type=strategic", "-p", '{"data": {"c": "3"}}')
    assert data_of(kubectl, name) == {"a": "x", "c": "3"}


def test_edit_with_an_editor_script(kubectl: Kubectl, tmp_path: Path) -> None:
    name = unique("ed")
    kubectl.ok("create", "-f", manifest(tmp_path, "cm.json", configmap(name, a="1")))
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nsed -i \'s/a: "1"/a: "edited"/\' "$1"\n')
    editor.chmod(0o755)
    kubectl.env["EDITOR"] = str(editor)
    assert kubectl.ok("edit", "cm", name).strip() == f"configmap/{name} edited"
    assert data_of(kubectl, name) == {"a": "edited"}


def test_label_annotate_and_delete_a_pod(kubectl: Kubectl, tmp_path: Path) -> None:
    name = unique("lp")
    kubectl.ok("apply", "-f", manifest(tmp_path, "pod.yaml", LONG.replace("NAME", name)))
    wait_running(kubectl.node, name)
    assert kubectl.ok("label", "pod", name, "tier=web").strip() == f"pod/{name} labeled"
    assert kubectl.ok("annotate", "pod", name, "note=hi").strip() == f"pod/{name} annotated"
    meta = json.loads(kubectl.ok("get", "pod", name, "-o", "json"))["metadata"]
    assert meta["labels"]["tier"] == "web"
    assert meta["annotations"]["note"] == "hi"
    assert kubectl.ok("delete", "pod", name).startswith(f'pod "{name}" deleted')
    done = kubectl("get", "pod", name)
    assert done.returncode == 1
    assert "(NotFound)" in done.stderr


def test_scale_apply_then_delete_a_deployment_in_the_foreground(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    name = unique("dp")
    kubectl.ok("apply", "-f", manifest(tmp_path, "d.yaml", DEPLOYMENT.replace("NAME", name)))
    out = kubectl.ok("scale", "deploy", name, "--replicas=2")
    assert out.strip() == f"deployment.apps/{name} scaled"
    spec = json.loads(kubectl.ok("get", "deploy", name, "-o", "json"))["spec"]
    assert spec["replicas"] == 2
    changed = DEPLOYMENT.replace("NAME", name).replace("sleep 0.2", "sleep 0.3")
    out = kubectl.ok("apply", "-f", manifest(tmp_path, "d.yaml", changed))
    assert out.strip() == f"deployment.apps/{name} configured"
    spec = json.loads(kubectl.ok("get", "deploy", name, "-o", "json"))["spec"]
    assert "sleep 0.3" in spec["template"]["spec"]["containers"][0]["command"][2]
    out = kubectl.ok("delete", "deploy", name, "--cascade=foreground")
    assert out.startswith(f'deployment.apps "{name}" deleted')
    assert kubectl("get", "deploy", name).returncode == 1
    assert kubectl.ok("get", "pods", "-l", f"app={name}", "-o", "name").strip() == ""
