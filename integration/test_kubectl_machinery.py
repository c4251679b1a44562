"""Real kubectl against a real ``serve``, both kubectls (the machine's and PyPI's): the API
machinery a kubectl user meets, as the API server answers it: a ``replace`` from a stale
read refused with ``409 Conflict``, server-side apply's field ownership (fields a manager
stops applying removed, conflicts with another manager, ``--force-conflicts``, the
``managedFields`` shown) and a foreground delete keeping its owner until its pods are
gone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.harness import Engine
from integration.kubectl_helpers import Kubectl, api_daemon, kubectl, unique
from integration.serve_helpers import Daemon, manifest

__all__ = ["kubectl"]
"""The fixture this module takes from its helpers, run against this module's node."""


@pytest.fixture(scope="module")
def node(
    tmp_path_factory: pytest.TempPathFactory, docker_engine: Engine, test_images: dict[str, str]
) -> Iterator[Daemon]:
    yield from api_daemon(tmp_path_factory.mktemp("kubemachinery"), docker_engine)


def configmap(name: str, **data: str) -> str:
    return json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
    )


DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: NAME}
spec:
  replicas: REPLICAS
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


def deployment(tmp_path: Path, name: str, replicas: int) -> str:
    text = DEPLOYMENT.replace("NAME", name).replace("REPLICAS", str(replicas))
    return manifest(tmp_path, "deploy.yaml", text)


def service(name: str) -> str:
    spec = {"selector": {"app": name}, "ports": [{"port": 80, "protocol": "TCP"}]}
    return json.dumps(
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec}
    )


@pytest.mark.parametrize("kind", ["configmap", "deployment", "service"])
def test_replace_from_a_stale_read_is_a_conflict(
    kubectl: Kubectl, tmp_path: Path, kind: str
) -> None:
    name = unique("rv")
    made = {
        "configmap": lambda: manifest(tmp_path, "o.json", configmap(name, a="1")),
        "deployment": lambda: deployment(tmp_path, name, 0),
        "service": lambda: manifest(tmp_path, "o.json", service(name)),
    }[kind]()
    kubectl.ok("create", "-f", made)
    read = json.loads(kubectl.ok("get", kind, name, "-o", "json"))
    kubectl.ok("label", kind, name, "changed=yes")
    read["metadata"].setdefault("annotations", {})["stale"] = "yes"
    stale = manifest(tmp_path, "stale.json", json.dumps(read))

    done = kubectl("replace", "-f", stale)

    plural = {"deployment": "deployments.apps"}.get(kind, f"{kind}s")
    assert done.returncode == 1
    assert (
        f'Error from server (Conflict): error when replacing "{stale}": Operation cannot be '
        f'fulfilled on {plural} "{name}": the object has been modified; please apply your '
        "changes to the latest version and try again"
    ) in done.stderr
    now = json.loads(kubectl.ok("get", kind, name, "-o", "json"))
    assert "stale" not in (now["metadata"].get("annotations") or {})
    kubectl.ok("delete", kind, name)


def test_server_side_apply_removes_a_field_no_longer_applied(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    name = unique("ssa")
    path = manifest(tmp_path, "cm.json", configmap(name, a="1", b="2"))
    kubectl.ok("apply", "--server-side", "-f", path)
    manifest(tmp_path, "cm.json", configmap(name, a="1"))

    out = kubectl.ok("apply", "--server-side", "-f", path)

    assert out.strip() == f"configmap/{name} serverside-applied"
    found = json.loads(kubectl.ok("get", "cm", name, "-o", "json"))
    assert found["data"] == {"a": "1"}
    assert "managedFields" not in found["metadata"]
    shown = json.loads(kubectl.ok("get", "cm", name, "-o", "json", "--show-managed-fields"))
    (entry,) = shown["metadata"]["managedFields"]
    assert entry["manager"] == "kubectl"
    assert entry["operation"] == "Apply"
    assert entry["fieldsType"] == "FieldsV1"
    assert entry["fieldsV1"] == {"f:data": {"f:a": {}}}
    assert kubectl("diff", "--server-side", "-f", path).returncode == 0
    manifest(tmp_path, "cm.json", configmap(name, a="3"))
    changed = kubectl("diff", "--server-side", "-f", path)
    assert changed.returncode == 1
    assert '+  a: "3"' in changed.stdout


def test_apply_after_scale_conflicts_until_forced(kubectl: Kubectl, tmp_path: Path) -> None:
    name = unique("cf")
    kubectl.ok("apply", "--server-side", "-f", deployment(tmp_path, name, 0))
    kubectl.ok("scale", f"deploy/{name}", "--replicas=1")
    again = deployment(tmp_path, name, 0)

    refused = kubectl("apply", "--server-side", "-f", again)

    assert refused.returncode == 1
    assert (
        'Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" using '
        "apps/v1: .spec.replicas"
    ) in refused.stderr
    assert "--force-conflicts" in refused.stderr
    replicas = kubectl.ok("get", "deploy", name, "-o", "jsonpath={.spec.replicas}")
    assert replicas == "1"

    kubectl.ok("apply", "--server-side", "--force-conflicts", "-f", again)

    shown = kubectl.ok("get", "deploy", name, "-o", "yaml", "--show-managed-fields")
    body = json.loads(kubectl.ok("get", "deploy", name, "-o", "json", "--show-managed-fields"))
    assert body["spec"]["replicas"] == 0
    owners = {e["manager"]: e for e in body["metadata"]["managedFields"]}
    assert "f:replicas" in owners["kubectl"]["fieldsV1"]["f:spec"]
    assert all("subresource" not in e for e in body["metadata"]["managedFields"])
    assert "manager: kubectl" in shown
    assert "operation: Apply" in shown
    kubectl.ok("delete", "deploy", name)


STUBBORN = DEPLOYMENT.replace(
    "terminationGracePeriodSeconds: 2", "terminationGracePeriodSeconds: 4"
)
"""A Deployment whose pod ignores SIGTERM: it stops only when killed, after 4 s."""


def test_a_foreground_delete_keeps_the_owner_until_its_pods_are_gone(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    name = unique("fg")
    text = STUBBORN.replace("NAME", name).replace("REPLICAS", "1")
    text = text.replace("trap 'exit 0' TERM", "trap '' TERM")
    kubectl.ok("apply", "-f", manifest(tmp_path, "deploy.yaml", text))
    kubectl.ok("rollout", "status", f"deploy/{name}", "--timeout=120s")
    before = kubectl.ok("get", "deploy", name, "-o", "jsonpath={.metadata.resourceVersion}")

    kubectl.ok("delete", "deploy", name, "--cascade=foreground", "--wait=false")

    kept = json.loads(kubectl.ok("get", "deploy", name, "-o", "json"))
    assert kept["metadata"]["deletionTimestamp"]
    assert kept["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert "deletionTimestamp:" in kubectl.ok("get", "deploy", name, "-o", "yaml")
    out = kubectl.ok("delete", "deploy", name, "--cascade=foreground")
    assert out.startswith(f'deployment.apps "{name}" deleted')
    assert kubectl("get", "deploy", name).returncode == 1
    assert kubectl.ok("get", "pods", "-l", f"app={name}", "-o", "name").strip() == ""
    path = (
        "/apis/apps/v1/namespaces/default/deployments?watch=1&timeoutSeconds=1"
        f"&fieldSelector=metadata.name%3D{name}&resourceVersion={before}"
    )
    events = [json.loads(line) for line in kubectl.ok("get", "--raw", path).splitlines()]
    kinds = [
        (e["type"], "deletionTimestamp" in e["object"]["metadata"])
        for e in events
        if e["type"] != "BOOKMARK"
    ]
    assert kinds[-1] == ("DELETED", True)
    marked = kinds.index(("MODIFIED", True))
    assert all(deleting for _, deleting in kinds[marked:])


def test_an_orphan_delete_removes_the_owner_reference(kubectl: Kubectl, tmp_path: Path) -> None:
    name = unique("or")
    kubectl.ok("apply", "-f", deployment(tmp_path, name, 0))
    selector = f"app={name}"
    rs = kubectl.ok("get", "rs", "-l", selector, "-o", "jsonpath={.items[0].metadata.name}")
    assert rs

    kubectl.ok("delete", "deploy", name, "--cascade=orphan")

    left = json.loads(kubectl.ok("get", "rs", rs, "-o", "json"))
    assert "ownerReferences" not in left["metadata"]
    assert kubectl("get", "deploy", name).returncode == 1
    kubectl.ok("delete", "rs", rs)


def test_server_side_apply_takes_over_from_client_side_apply(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    name = unique("up")
    path = manifest(tmp_path, "cm.json", configmap(name, a="1"))
    kubectl.ok("apply", "-f", path)
    before = json.loads(kubectl.ok("get", "cm", name, "-o", "json", "--show-managed-fields"))
    assert [e["manager"] for e in before["metadata"]["managedFields"]] == [
        "kubectl-client-side-apply"
    ]
    manifest(tmp_path, "cm.json", configmap(name, a="2", b="2"))

    kubectl.ok("apply", "--server-side", "-f", path)

    after = json.loads(kubectl.ok("get", "cm", name, "-o", "json", "--show-managed-fields"))
    assert after["data"] == {"a": "2", "b": "2"}
    managers = [e["manager"] for e in after["metadata"]["managedFields"]]
    assert "kubectl-client-side-apply" not in managers
    assert "kubectl" in managers
